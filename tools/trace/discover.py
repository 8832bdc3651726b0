"""Turn the PATH... arguments of ``dftune analyze`` into a list of trace files."""

from __future__ import annotations

import errno
import os
import stat
from collections.abc import Iterable
from pathlib import Path

from dftune.core.facts.paths import trace_suffixes
from dftune.tools.trace.errors import TraceError


def is_trace_name(path: Path) -> bool:
    return any(path.name.endswith(sfx) for sfx in trace_suffixes())


def _unreadable_link(path: Path) -> str | None:
    """Why a symbolic link cannot be followed (a loop, or nothing at its end), or None."""
    if not path.is_symlink():
        return None
    try:
        path.stat()
    except OSError as exc:
        if exc.errno == errno.ELOOP:
            return "symbolic link loop: it can never be read"
        return f"symbolic link to nothing ({os.readlink(path)}): it cannot be read"
    return None


def _special(path: Path) -> str | None:
    """What a path is when it exists but is no regular file (reading a FIFO blocks forever,
    /dev/zero never ends), or None for a regular file or directory."""
    try:
        mode = path.stat().st_mode
    except OSError:
        return None
    if stat.S_ISREG(mode) or stat.S_ISDIR(mode):
        return None
    kind = (
        "a FIFO"
        if stat.S_ISFIFO(mode)
        else "a character device"
        if stat.S_ISCHR(mode)
        else "a block device"
        if stat.S_ISBLK(mode)
        else "a socket"
        if stat.S_ISSOCK(mode)
        else "a special file"
    )
    via = f" (a link to {os.readlink(path)})" if path.is_symlink() else ""
    return f"{kind}{via}, not a regular file: not read"


def discover(
    paths: Iterable[str | Path],
    unreadable: list[tuple[str, str]] | None = None,
    *,
    strict: bool | None = None,
) -> list[Path]:
    """Files given explicitly are taken as they are; directories are searched recursively
    for ``*.pfw`` and ``*.pfw.gz``.  Order is stable (sorted) so results are reproducible.

    A trace-named link that cannot be followed (a loop, a dangling link) is an error naming it;
    with ``unreadable`` and not ``strict`` (``--skip-bad``) it is appended there as (path, reason)
    instead.  A trace-named FIFO, device or socket inside a directory is never read: it goes to
    ``unreadable`` (or, without that list, is an error); named directly it is an error."""
    strict = unreadable is None if strict is None else strict
    found: list[Path] = []
    seen: set[Path] = set()
    for raw in paths:
        p = Path(raw)
        if (why := _unreadable_link(p)) is not None:
            raise TraceError(str(p), why)
        if not p.exists():
            raise TraceError(str(p), "no such file or directory")
        if (kind := _special(p)) is not None:
            raise TraceError(str(p), kind)
        if p.is_dir():
            for f in sorted(p.rglob("*")):
                if not is_trace_name(f):
                    continue
                if (why := _unreadable_link(f)) is not None:
                    if strict or unreadable is None:
                        raise TraceError(str(f), why)
                    unreadable.append((str(f), why))
                elif (why := _special(f)) is not None:
                    if unreadable is None:
                        raise TraceError(str(f), why)
                    unreadable.append((str(f), why))
            inside = sorted(f for f in p.rglob("*") if f.is_file() and is_trace_name(f))
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
