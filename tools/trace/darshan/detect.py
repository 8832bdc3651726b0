"""Which inputs are Darshan logs: recognised by content (the header's magic number), not by name.

A Darshan 3.x log starts with an 8-byte version string ("3.41") and the 64-bit magic number
6567223 (darshan-log-format.h, DARSHAN_MAGIC_NR), in either byte order.  This look at 16 bytes
only decides which reader to use; reading the log is libdarshan-util's.
"""

from __future__ import annotations

import struct
from collections.abc import Iterable
from pathlib import Path

from dftune.core.facts.paths import trace_suffixes
from dftune.tools.trace.errors import TraceError

DARSHAN_MAGIC_NR = 6567223
DARSHAN_SUFFIX = ".darshan"


def is_darshan_log(path: str | Path) -> bool:
    """True when the file starts like a Darshan log (whatever its name)."""
    try:
        with open(path, "rb") as fh:
            head = fh.read(16)
    except OSError:
        return False
    if len(head) < 16 or not head[:2].startswith(b"3."):
        return False
    return DARSHAN_MAGIC_NR in (struct.unpack("<q", head[8:16])[0], struct.unpack(">q", head[8:16])[0])


def _candidates(folder: Path) -> list[Path]:
    return sorted(f for f in folder.rglob("*") if f.is_file())


def split_inputs(paths: Iterable[str | Path]) -> tuple[list[Path], bool]:
    """Darshan logs among ``paths`` and whether there are any (files named, or found in folders).

    Returns ``([], False)`` when no input is a Darshan log, so the trace reader takes over.  A mix
    of Darshan logs and dftracer traces is refused with one line naming one file of each kind.
    """
    logs: list[Path] = []
    traces: list[Path] = []
    seen: set[Path] = set()
    for raw in paths:
        p = Path(raw)
        if p.is_dir():
            files = [
                f
                for f in _candidates(p)
                if f.name.endswith(DARSHAN_SUFFIX)
                or is_darshan_log(f)
                or any(f.name.endswith(s) for s in trace_suffixes())
            ]
        elif p.is_file():
            files = [p]
        elif p.exists() or p.is_symlink():
            continue  # a FIFO, a device, a broken link: the trace reader names what it is
        else:
            raise TraceError(str(p), "no such file or directory")
        for f in files:
            key = f.resolve()
            if key in seen:
                continue
            seen.add(key)
            (logs if f.name.endswith(DARSHAN_SUFFIX) or is_darshan_log(f) else traces).append(f)
    if logs and traces:
        raise TraceError(
            str(traces[0]),
            f"a dftracer trace (or unknown file) next to Darshan log {logs[0]}: "
            "analyze Darshan logs and dftracer traces separately",
        )
    return logs, bool(logs)


def is_trace_name(path: Path) -> bool:
    return any(path.name.endswith(s) for s in trace_suffixes())
