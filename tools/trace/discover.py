"""Turn the PATH... arguments of ``dftune analyze`` into a list of trace files."""

from __future__ import annotations

from collections.abc import Iterable
from pathlib import Path

from dftune.tools.trace.errors import TraceError
from dftune.tools.trace.semantics import TRACE_SUFFIXES


def _is_trace_name(path: Path) -> bool:
    return any(path.name.endswith(sfx) for sfx in TRACE_SUFFIXES)


def discover(paths: Iterable[str | Path]) -> list[Path]:
    """Files given explicitly are taken as they are; directories are searched recursively
    for ``*.pfw`` and ``*.pfw.gz``.  Order is stable (sorted) so results are reproducible."""
    found: list[Path] = []
    seen: set[Path] = set()
    for raw in paths:
        p = Path(raw)
        if not p.exists():
            raise TraceError(str(p), "no such file or directory")
        if p.is_dir():
            inside = sorted(f for f in p.rglob("*") if f.is_file() and _is_trace_name(f))
            if not inside:
                raise TraceError(str(p), "no trace files (*.pfw, *.pfw.gz) in this directory or below")
            candidates = inside
        elif p.is_file():
            candidates = [p]
        else:
            raise TraceError(str(p), "not a regular file or directory")
        for f in candidates:
            key = f.resolve()
            if key not in seen:
                seen.add(key)
                found.append(f)
    if not found:
        raise TraceError(", ".join(str(p) for p in paths) or ".", "no trace files given")
    return found
