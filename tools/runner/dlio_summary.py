"""Where DLIO (dlio-benchmark 2.0.0) leaves the summary.json a replicate's metric is read from.

DLIO's rank 0 writes ``summary.json`` (and ``per_epoch_stats.json``, ``<rank>_output.json``) into
its output folder when training ends (``StatsCounter.save_data``). The folder is
``workload.output.folder`` when the command sets it (the file is then ``<folder>/summary.json``,
no subfolder), else Hydra's run folder for the job, ``./hydra_log/<model>/<date>-<time>`` under the
folder DLIO was started in (its ``configs/config.yaml``), else ``./output``. Both were checked on a
real run (tests/e2e/test_dlio_example.py). A bare spec names none of them, so the runner looks for
the newest summary.json written since the replicate started in those places.
"""

from __future__ import annotations

import shutil
from collections.abc import Iterable
from pathlib import Path

SUMMARY = "summary.json"
#: DLIO's output folders relative to where it started: Hydra's run folder (DLIO's default config),
#: Hydra's own default (a config that drops DLIO's hydra.run.dir) and DLIO's fallback.
OUTPUT_GLOBS = (f"hydra_log/*/*/{SUMMARY}", f"outputs/*/*/{SUMMARY}", f"output/{SUMMARY}", SUMMARY)


def find_summary(roots: Iterable[Path], since: float) -> Path | None:
    """The newest DLIO summary.json under ``roots`` (see :data:`OUTPUT_GLOBS`) written since ``since``."""
    found: list[tuple[float, Path]] = []
    for root in roots:
        for pattern in OUTPUT_GLOBS:
            for path in root.glob(pattern):
                try:
                    mtime = path.stat().st_mtime
                except OSError:
                    continue
                if mtime >= since and path.is_file():
                    found.append((mtime, path))
    return max(found)[1] if found else None


def keep_summary(found: Path, folder: Path) -> Path:
    """A copy of the summary DLIO wrote elsewhere in the replicate's own folder (its record; the
    program's output folder is left as it was). Returns the copy, or ``found`` when it is already there."""
    target = folder / SUMMARY
    if found.resolve() == target.resolve():
        return found
    folder.mkdir(parents=True, exist_ok=True)
    shutil.copyfile(found, target)
    return target


def looked_in(roots: Iterable[Path]) -> str:
    """Where :func:`find_summary` looked, for a one-line error."""
    return ", ".join(str(r / g) for r in roots for g in OUTPUT_GLOBS[:3])
