"""Files written all-or-nothing (readers see the old bytes or the new ones, never half), and
small files read without trusting what sits at their name.

One implementation for every writer (run metadata, artifacts, reports, the KB skill file,
the change journal's edits to a source copy, compacted traces, the literature cache): a
temporary file created next to the target with ``O_EXCL | O_NOFOLLOW`` (a planted link
cannot redirect it), fsync'd, renamed over the target (``rename`` replaces a link rather
than following it), then the directory fsync'd so the rename itself survives a crash.

The reader (:func:`read_regular`) is for the small files dftune keeps (run.json, a lock's pid,
JSON artifacts): a name swapped for a named pipe, a link to ``/dev/zero`` or a huge file is one
line naming it, never a read that blocks or fills memory.
"""

from __future__ import annotations

import errno
import os
import stat
import uuid
from collections.abc import Iterator
from contextlib import contextmanager, suppress
from pathlib import Path
from typing import BinaryIO

from dftune.core.errors import DftuneError


class UnreadableFile(DftuneError):
    """A file dftune keeps is not a regular file, is larger than such a file can be, or cannot be read."""


class NotRegularTarget(DftuneError):
    """An output path names something other than a regular file (a device, a pipe, a folder): replacing
    it would turn a device node into a file, writing into it could block or fill a disk."""


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


def read_regular(path: str | Path, limit: int, what: str = "file") -> bytes:
    """The bytes of ``path`` when it is a regular file of at most ``limit`` bytes (a link to one is
    followed); else :class:`UnreadableFile` naming it. A missing file stays ``FileNotFoundError``
    (callers tell absent from broken). Never blocks: a pipe or device is refused before it is
    opened, and the open is non-blocking in case the name was swapped since."""
    try:
        st = os.stat(path)
        raw = b""
        if stat.S_ISREG(st.st_mode):
            fd = os.open(path, os.O_RDONLY | os.O_NONBLOCK | os.O_CLOEXEC)
            with os.fdopen(fd, "rb") as fh:
                st = os.fstat(fd)
                if stat.S_ISREG(st.st_mode):
                    raw = fh.read(limit + 1)
    except FileNotFoundError:
        raise
    except OSError as exc:
        raise UnreadableFile(f"{path}: {what} cannot be read: {exc.strerror or exc}") from None
    if not stat.S_ISREG(st.st_mode):
        raise UnreadableFile(f"{path}: {what} is not a regular file ({_kind(st.st_mode)}); move it aside")
    if len(raw) > limit:
        raise UnreadableFile(
            f"{path}: {what} is larger than {_size(limit)}, more than it can be; move it aside"
        )
    return raw


def append_line(path: str | Path, text: str, what: str = "file") -> None:
    """Append ``text`` to ``path`` (created when missing): never through a link, never to a pipe or
    a device (opened without blocking, checked to be a regular file), else :class:`UnreadableFile`."""
    flags = os.O_WRONLY | os.O_APPEND | os.O_CREAT | os.O_NOFOLLOW | os.O_NONBLOCK | os.O_CLOEXEC
    try:
        fd = os.open(path, flags, 0o644)
    except OSError as exc:
        why = "a link" if exc.errno == errno.ELOOP else exc.strerror or str(exc)
        raise UnreadableFile(f"{path}: {what} cannot be written ({why}); move it aside") from None
    with os.fdopen(fd, "a", encoding="utf-8") as fh:
        if not stat.S_ISREG(os.fstat(fd).st_mode):
            raise UnreadableFile(f"{path}: {what} is not a regular file; move it aside")
        fh.write(text)


def _kind(mode: int) -> str:
    return "a folder" if stat.S_ISDIR(mode) else "a device, a pipe or a socket"


def _size(n: int) -> str:
    return f"{n >> 20} MiB" if n >= 1 << 20 else f"{n >> 10} KiB" if n >= 1 << 10 else f"{n} bytes"


def check_replaceable(path: str | Path, what: str = "output") -> None:
    """Refuse (:class:`NotRegularTarget`) an existing ``path`` that is not a regular file (a link is
    judged by what it names): an atomic write renames over the name, so it may only stand for a file."""
    try:
        st = os.stat(path)
    except FileNotFoundError:
        return
    except OSError as exc:
        raise NotRegularTarget(f"{path}: {what} cannot be checked: {exc.strerror or exc}") from None
    if not stat.S_ISREG(st.st_mode):
        raise NotRegularTarget(
            f"{path}: {what} exists and is not a regular file ({_kind(st.st_mode)}); refused, nothing written"
        )


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
    path: Path,
    mode: int = 0o644,
    *,
    strict: bool = False,
    exclusive: bool = False,
    only_over_file: bool = False,
) -> Iterator[BinaryIO]:
    """Write through the yielded binary file; on a clean exit it replaces ``path`` atomically.

    ``exclusive``: never replace an existing ``path`` (``FileExistsError`` instead: a hard link
    is atomic and fails when the name exists). ``only_over_file``: a path someone gave (an
    ``--output``) may only replace a regular file (:func:`check_replaceable`, just before the
    rename). On an exception the temporary file is removed and ``path`` is untouched."""
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
        if only_over_file:
            check_replaceable(path)
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
    path: Path,
    data: bytes,
    mode: int = 0o644,
    *,
    strict: bool = False,
    exclusive: bool = False,
    only_over_file: bool = False,
) -> None:
    """Replace ``path`` with ``data`` atomically and durably (see :func:`atomic_file`)."""
    with atomic_file(path, mode, strict=strict, exclusive=exclusive, only_over_file=only_over_file) as fh:
        fh.write(data)
