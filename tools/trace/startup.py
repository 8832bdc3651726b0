"""How much of a run was start-up: the time before its first data I/O, from its trace.

Programs that import a framework (PyTorch, TensorFlow, DLIO) spend seconds before they touch
their data; a tuning change to the data path cannot move that part, yet every replicate pays it.
The share tells the user (and the experiment budget) how much of each measured run is fixed
cost.  The first data I/O is the first read or write that moves bytes of a file of the class data
(core/facts/paths.py: not code, configuration, the runtime's or the system's files); under the
spec's data folder when the trace names files there.  dftracer stamps events in microseconds
since the epoch, so the run's own start time gives the offset directly.
"""

from __future__ import annotations

import gzip
import json
import re
from dataclasses import dataclass
from pathlib import Path
from typing import Any

from dftune.core.facts.paths import RunPaths, classify
from dftune.tools.trace import semantics as S
from dftune.tools.trace.selftrace import is_trace_file

_READ_WRITE = {*S.READ_CALLS, *S.WRITE_CALLS}
_CANDIDATE = re.compile(
    r'"(?:FH|read|pread|pread64|readv|preadv|preadv2|fread|write|pwrite|pwrite64|writev|'
    r'pwritev|pwritev2|fwrite)"'
)
#: A trace whose times lie further than this from the run's start is not stamped in epoch time.
EPOCH_TOLERANCE_S = 86_400.0


@dataclass(frozen=True)
class StartUp:
    """Seconds from the run's start to its first data I/O, and that as a share of the run."""

    seconds: float
    share: float
    first_file: str


def _events(path: Path) -> list[dict[str, Any]]:
    opener: Any = gzip.open if path.name.endswith(".gz") else open
    out: list[dict[str, Any]] = []
    try:
        with opener(path, "rt", encoding="utf-8", errors="replace") as fh:
            for line in fh:
                if not _CANDIDATE.search(line):
                    continue
                try:
                    ev = json.loads(line.strip().rstrip(","))
                except ValueError:
                    continue
                if isinstance(ev, dict):
                    out.append(ev)
    except (OSError, EOFError):
        pass
    return out


def first_data_io(trace_dir: Path, data_dir: str | None = None) -> tuple[float, str] | None:
    """Epoch seconds of the first read/write that moved bytes of a data file, and the file."""
    files: dict[str, str] = {}
    ios: list[dict[str, Any]] = []
    for path in sorted(trace_dir.rglob("*")):
        if not is_trace_file(path):
            continue
        for ev in _events(path):
            args = ev.get("args") or {}
            if ev.get("name") == "FH":
                files[str(args.get("value"))] = str(args.get("name", ""))
            elif ev.get("name") in _READ_WRITE and str(ev.get("cat", "")).upper() in ("POSIX", "STDIO"):
                ios.append(ev)
    run = RunPaths.of(data_dir)
    best: tuple[float, str] | None = None
    fallback: tuple[float, str] | None = None
    for ev in ios:
        args = ev.get("args") or {}
        try:
            if int(float(args.get("ret", 0))) <= 0:
                continue
            ts = float(ev["ts"]) / 1e6
        except (KeyError, TypeError, ValueError):
            continue
        name = str(args.get("fname") or files.get(str(args.get("fhash")), ""))
        if not name:
            continue
        cls = classify(name, run)
        if cls.rule == "data-folder" and (best is None or ts < best[0]):
            best = (ts, name)
        if cls.is_data and (fallback is None or ts < fallback[0]):
            fallback = (ts, name)
    return best or fallback


def startup(
    trace_dir: Path, run_started: float, wall_s: float, data_dir: str | None = None
) -> StartUp | None:
    """The run's start-up, or None when the trace has no data I/O or is not stamped in epoch time."""
    first = first_data_io(trace_dir, data_dir)
    if first is None or wall_s <= 0:
        return None
    seconds = first[0] - run_started
    if not -1.0 <= seconds <= wall_s + EPOCH_TOLERANCE_S or seconds > wall_s + 1.0:
        return None
    seconds = max(0.0, seconds)
    return StartUp(seconds=round(seconds, 3), share=round(min(1.0, seconds / wall_s), 4), first_file=first[1])
