"""Possibly-I/O time: what the worth-tuning gate cannot see in a POSIX trace, measured where it can be.

Why: a POSIX trace shows read and write calls, not the time an MPI-IO program spends inside
collectives and barriers (ROMIO's two-phase exchange, ranks waiting for their aggregators), nor
the time a training loop waits for a data loader whose workers are busy with CPU work between
reads.  An MPI-IO program whose cost was collective synchronisation was judged "not worth
tuning (I/O 1.9% of process time)" while a ROMIO hint made it 25% faster.  So the gate also
counts, as possibly I/O: the MPI ranks' time outside traced I/O and compute (an upper bound of
their time in MPI), the waits the program reports itself (its own wait events in the trace, a
stdout metric that is its I/O time), each named with its evidence.  The sources are data in
``resources/diagnosis/gate.toml`` ``[possibly_io]``.
"""

from __future__ import annotations

import fnmatch
import re
from typing import Any

from dftune.core.domain.diagnosis import PossiblyIo
from dftune.tools.trace.model import Analysis


def _frac(part: float, whole: float) -> float:
    return part / whole if whole else 0.0


def mpi_time(analysis: Analysis, *, uses_mpi: bool, mpiio: str | None) -> PossiblyIo | None:
    """The MPI ranks' time outside traced I/O and compute, when their data files are MPI-IO files.

    Data files are MPI-IO files when the run's stack shows MPI-IO (``mpiio``: why, e.g. the
    program's source calls it, or the trace opens an MPI-IO implementation's files), or a data
    file is written by every rank (N-1 I/O, what MPI-IO is for; a file two of 48 ranks write is
    not)."""
    if not uses_mpi:
        return None
    rows = (analysis.views.get("proc") or {}).get("rows", [])
    helpers = {(h.host, h.pid) for h in analysis.helper_processes}
    ranks = [r for r in rows if (str(r.get("host") or ""), r.get("pid")) not in helpers]
    if not ranks:
        return None
    files = (analysis.views.get("file") or {}).get("rows", [])
    nranks = max(2, len([g for g in analysis.rank_groups if g.data_io is not False]) or len(ranks))
    shared = [
        f
        for f in files
        if f.get("path_class", "data") == "data"
        and int(f.get("processes") or 0) >= nranks
        and int(f.get("write_count") or 0) > 0
    ]
    if not (mpiio or shared):
        return None
    life = sum(float(r.get("lifetime_s") or 0.0) for r in ranks)
    seen = sum(float(r.get("io_wall_s") or 0.0) + float(r.get("compute_wall_s") or 0.0) for r in ranks)
    unseen = max(0.0, life - seen)
    shown = [mpiio] if mpiio else []
    if shared:  # every piece of evidence the run gave, not the first alone
        shown.append(f"{len(shared)} data file(s) written by all {nranks} ranks")
    why = "; ".join(shown)
    return PossiblyIo(
        source="mpi-collectives",
        time_s=round(unseen, 6),
        fraction=round(_frac(unseen, life), 6),
        evidence=(
            f"MPI job whose data files are MPI-IO files ({why}): up to {_frac(unseen, life):.0%} of the "
            f"{len(ranks)} ranks' process time ({unseen:.3g} s) is outside traced I/O and compute, where "
            "collectives, barriers and two-phase exchange run unseen by POSIX tracing"
        ),
    )


def app_waits(analysis: Analysis, names: list[str]) -> PossiblyIo | None:
    """The program's own wait-for-data events, as a share of its main processes' time."""
    hits = [e for e in analysis.app_events if any(fnmatch.fnmatchcase(e.name, n) for n in names)]
    wait = sum(e.time_s for e in hits)
    if not hits or wait <= 0:
        return None
    mains = sum(g.lifetime_s for g in analysis.rank_groups) or analysis.app_process_time_s
    kinds = ", ".join(sorted({e.name for e in hits})[:3])
    return PossiblyIo(
        source="app-waits",
        time_s=round(wait, 6),
        fraction=round(_frac(wait, mains), 6),
        evidence=(
            f"the program's own wait events ({kinds}: {sum(e.count for e in hits):,} waits, {wait:.3g} s) "
            f"take {_frac(wait, mains):.0%} of its main processes' time"
        ),
    )


def metric_wait(
    metric: Any, value: float | None, wall_s: float | None, patterns: list[str]
) -> PossiblyIo | None:
    """A stdout metric the program prints as its own I/O or wait time (seconds), over the run's wall time."""
    if (
        metric is None
        or getattr(metric, "kind", "") != "stdout_regex"
        or not getattr(metric, "lower_is_better", True)
    ):
        return None
    pattern = str(getattr(metric, "pattern", "") or "")
    if value is None or not wall_s or value <= 0 or not any(re.search(p, pattern, re.I) for p in patterns):
        return None
    share = min(1.0, value / wall_s)
    return PossiblyIo(
        source="stdout-metric",
        time_s=round(value, 6),
        fraction=round(share, 6),
        evidence=(
            f"the program reports {value:.3g} s of I/O or waiting (metric {pattern!r}), {share:.0%} of the "
            f"run's {wall_s:.3g} s wall time"
        ),
    )
