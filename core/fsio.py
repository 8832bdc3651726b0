"""Files written all-or-nothing: readers see the old bytes or the new ones, never half.

One implementation for every writer (run metadata, artifacts, reports, the KB skill file,
the change journal's edits to a source copy, compacted traces, the literature cache): a
temporary file created next to the target with ``O_EXCL | O_NOFOLLOW`` (a planted link
cannot redirect it), fsync'd, renamed over the target (``rename`` replaces a link rather
than following it), then the directory fsync'd so the rename itself survives a crash.
"""

from __future__ import annotations

import os
import stat
import uuid
from collections.abc import Iterator
from contextlib import contextmanager, suppress
from pathlib import Path
from typing import BinaryIO

from dftune.core.errors import DftuneError


class PathOutside(DftuneError):
    """A path given from outside (an MCP client, a run's contents) resolves out of where it may write."""


def confined(path: Path, root: Path, what: str = "DFTUNE_HOME") -> Path:
    """``path`` with every symlink and ``..`` resolved, when that lies inside ``root`` (itself
    resolved); else :class:`PathOutside`. Check before creating anything on the way."""
    real_root = os.path.realpath(root)
    real = os.path.realpath(path)
    if os.path.commonpath([real, real_root]) != real_root:
        raise PathOutside(
            f"{path} resolves to {real}, outside {what} ({real_root}): refused, nothing written"
        )
    return Path(real)


def fsync_dir(path: Path, *, strict: bool = False) -> None:
    """Make a rename or unlink in ``path`` durable; ``strict``: a failure raises (else ignored)."""
    try:
        fd = os.open(path, os.O_RDONLY | os.O_DIRECTORY)
    except OSError:
        if strict:
            raise
        return
    try:
        os.fsync(fd)
    except OSError:
        if strict:
            raise
    finally:
        os.close(fd)


@contextmanager
def atomic_file(
    path: Path, mode: int = 0o644, *, strict: bool = False, exclusive: bool = False
) -> Iterator[BinaryIO]:
    """Write through the yielded binary file; on a clean exit it replaces ``path`` atomically.

    ``exclusive``: never replace an existing ``path`` (``FileExistsError`` instead: a hard link
    is atomic and fails when the name exists). On an exception the temporary file is removed
    and ``path`` is untouched."""
    tmp = path.parent / f".{path.name}.{uuid.uuid4().hex[:12]}.tmp"
    try:
        fd = os.open(tmp, os.O_WRONLY | os.O_CREAT | os.O_EXCL | os.O_NOFOLLOW, 0o600)
    except OSError as exc:  # name the file the caller writes, not our temporary name
        raise type(exc)(exc.errno, exc.strerror, str(path)) from exc
    try:
        with os.fdopen(fd, "wb") as fh:
            yield fh
            fh.flush()
            os.fchmod(fh.fileno(), stat.S_IMODE(mode))
            os.fsync(fh.fileno())
        if exclusive:
            os.link(tmp, path, follow_symlinks=False)
            os.unlink(tmp)
        else:
            os.replace(tmp, path)
    except BaseException as exc:
        with suppress(OSError):
            os.unlink(tmp)
        if isinstance(exc, OSError) and exc.filename is None:  # a flush on a full disk names no file
            raise OSError(exc.errno, exc.strerror, str(path)) from exc
        raise
    fsync_dir(path.parent, strict=strict)


def atomic_write_bytes(
    path: Path, data: bytes, mode: int = 0o644, *, strict: bool = False, exclusive: bool = False
) -> None:
    """Replace ``path`` with ``data`` atomically and durably (see :func:`atomic_file`)."""
    with atomic_file(path, mode, strict=strict, exclusive=exclusive) as fh:
        fh.write(data)
