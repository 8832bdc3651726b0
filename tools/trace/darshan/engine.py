"""``dftune analyze`` on Darshan logs: read each log, combine them into one job, map the job onto
an :class:`Analysis`.

Logs are read one after the other: libdarshan-util reports problems on the process's stderr,
which the reader redirects while it reads, and the per-record work is Python-bound anyway.
"""

from __future__ import annotations

from collections.abc import Callable, Sequence
from pathlib import Path

from dftune.tools.trace.darshan.job import build_job
from dftune.tools.trace.darshan.mapping import build_analysis
from dftune.tools.trace.darshan.reader import read_log
from dftune.tools.trace.errors import TraceError
from dftune.tools.trace.model import Analysis, SkippedLine

Progress = Callable[[int, int, str], None]


def analyze_logs(
    files: Sequence[Path],
    *,
    skip_bad: bool = False,
    views: Sequence[str] = (),
    time_windows: int = 20,
    progress: Progress | None = None,
) -> Analysis:
    """One analysis of all ``files`` (Darshan logs of one job, or one log per process).

    A log libdarshan-util cannot read stops the analysis with one line naming it; with
    ``skip_bad`` the others are analyzed and the bad ones are listed in ``skipped``.
    """
    logs = []
    skipped: list[SkippedLine] = []
    for i, f in enumerate(files, start=1):
        try:
            logs.append(read_log(f))
        except TraceError as exc:
            if not skip_bad:
                raise
            skipped.append(SkippedLine(file=exc.path, line=None, reason=exc.reason))
        if progress:
            progress(i, len(files), str(f))
    if not logs:
        raise TraceError(str(files[0]) if files else ".", "no readable Darshan log")
    analysis = build_analysis(build_job(logs), views=views, windows=time_windows)
    if skipped:
        analysis.skipped = skipped
        analysis.truncated_files = [s.file for s in skipped]
        analysis.warnings.append(
            f"{len(skipped)} unreadable log(s) skipped, e.g. {skipped[0].file}: {skipped[0].reason}"
        )
    return analysis
