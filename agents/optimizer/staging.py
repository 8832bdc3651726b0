"""When staging the data set onto a faster tier applies: read-mostly data, another tier, room for it.

Staging copies the whole data folder in every replicate and copies outputs back, so it can pay
only when the run mostly reads that folder: the traced baseline must show that most of the bytes
the application moves to and from its data files are reads of files under ``data_dir``. The tier
must be another filesystem than the data's, and the data set must fit (for ``/dev/shm``, within
the node-memory bound), all measured now (:func:`dftune.tools.runner.staging.check_plan`).
"""

from __future__ import annotations

import os
from pathlib import Path

from dftune.core.domain.measurements import StagePlan
from dftune.tools.guards.arms import Arm
from dftune.tools.runner.staging import check_plan
from dftune.tools.trace.model import Analysis

#: Share of the data bytes that must be reads under data_dir for a data set to be read-mostly.
READ_MOSTLY = 0.5


def read_share(analysis: Analysis, data_dir: str) -> float | None:
    """Share of the data files' bytes (read and written, any folder) that are reads of files under
    ``data_dir``; None without an access profile or any data I/O."""
    if analysis.profile is None:
        return None
    everything = Arm(analysis=analysis, data_dir=None)  # every non-runtime file
    root = os.path.normpath(data_dir) + os.sep
    total = sum(f.read_bytes + f.write_bytes for f in everything.files.values())
    under = sum(f.read_bytes for f in everything.files.values() if os.path.normpath(f.path).startswith(root))
    return under / total if total else None


def stage_gap(plan: StagePlan, data_dir: str, analysis: Analysis | None) -> str | None:
    """Why staging under ``plan`` does not apply to this run, or None when it does."""
    if analysis is None:
        return "no traced baseline shows how the data folder is used (staging needs a read-mostly data set)"
    share = read_share(analysis, data_dir)
    if share is None:
        return f"the baseline's trace shows no data I/O to weigh against {data_dir}"
    if share < READ_MOSTLY:
        return (
            f"not a read-mostly data set: reads under {data_dir} are {100 * share:.0f}% of the data bytes "
            f"(staging needs more than {100 * READ_MOSTLY:.0f}%)"
        )
    problem = check_plan(Path(data_dir), plan)
    return problem or None
