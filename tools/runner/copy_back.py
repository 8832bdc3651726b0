"""Copying a staged replicate's outputs back into the data folder with the rules the program's own
writes would have had there.

- **Never outside the folder.** Every folder on the way to an output is checked without following
  links: a link the original folder holds where the staged program made a real file or folder
  (``out.txt -> ../victim`` replaced by the program's own ``out.txt``) is replaced by it, inside
  the folder, never written through; a file where the program made a folder is replaced by the
  folder. Files are opened with ``O_NOFOLLOW``.
- **Nothing lost.** One output that cannot be copied does not stop the others; the ones that
  failed are returned with why, and the caller keeps the staged copy for them.
- **Never through a link in the copy.** The program may have left links in its copy (its data folder
  itself replaced by one): every output is reached from the copy's root one folder at a time with
  ``O_NOFOLLOW``, so a link on the way is refused, never read through.
- **Special files** (FIFOs, sockets, devices) are not outputs: skipped, and said; never opened (a
  FIFO would block the copy, a device's open can act).
- **Sparse stays sparse**: only the data segments are copied (``SEEK_DATA``/``SEEK_HOLE``); the
  holes stay holes (the same copier stages data in).
"""

from __future__ import annotations

import errno
import os
import shutil
import stat
from dataclasses import dataclass, field
from pathlib import Path

#: bytes copied per read of a data segment
CHUNK = 1 << 20


@dataclass
class CopyBack:
    """What copying the outputs back did."""

    copied: list[str] = field(default_factory=list)
    #: (relative path, why) of outputs that could not be copied back
    failed: list[tuple[str, str]] = field(default_factory=list)
    #: (relative path, what it is) of special files left in the copy
    skipped: list[tuple[str, str]] = field(default_factory=list)
    #: links of the original folder an output replaced (as the program replaced them in the copy)
    replaced_links: list[str] = field(default_factory=list)


#: a folder on the way to an output, opened without following a link
_DIR_FLAGS = os.O_RDONLY | getattr(os, "O_DIRECTORY", 0) | getattr(os, "O_NOFOLLOW", 0)
#: a file copied: never through a link, never waiting (a FIFO swapped in opens at once)
_FILE_FLAGS = os.O_RDONLY | getattr(os, "O_NONBLOCK", 0) | getattr(os, "O_NOFOLLOW", 0)


class SpecialFile(OSError):
    """Not a regular file (a FIFO, a socket, a device, a link): not copied, never opened."""

    def __init__(self, path: str, kind: str) -> None:
        super().__init__(errno.EINVAL, f"{kind}, not a regular file", path)
        self.kind = kind


def special_kind(mode: int) -> str | None:
    """What a file that is not a regular file is, in words (None for a regular file)."""
    if stat.S_ISREG(mode):
        return None
    if stat.S_ISFIFO(mode):
        return "a named pipe"
    if stat.S_ISSOCK(mode):
        return "a socket"
    if stat.S_ISCHR(mode) or stat.S_ISBLK(mode):
        return "a device"
    if stat.S_ISLNK(mode):
        return "a link"
    if stat.S_ISDIR(mode):
        return "a folder"
    return "not a regular file"


def _open_checked(name: str, st: os.stat_result, path: str, dir_fd: int | None = None) -> int:
    """Open the regular file ``name`` that ``st`` (its lstat) described, refusing it when it is
    special or was swapped since (a file is opened only once it is known to be regular)."""
    kind = special_kind(st.st_mode)
    if kind is not None:
        raise SpecialFile(path, kind)
    fd = os.open(name, _FILE_FLAGS, dir_fd=dir_fd)
    now = os.fstat(fd)
    if not stat.S_ISREG(now.st_mode) or (now.st_dev, now.st_ino) != (st.st_dev, st.st_ino):
        os.close(fd)
        raise SpecialFile(path, "a file replaced while it was copied")
    return fd


def open_inside(root: Path, rel: str) -> int:
    """A read descriptor of the regular file ``rel`` under ``root``, reached one folder at a time
    from ``root`` itself without following any link (a link on the way: ``ELOOP``); a special file
    raises :class:`SpecialFile` without being opened."""
    parts = Path(rel).parts
    fd = os.open(root, _DIR_FLAGS)
    try:
        for part in parts[:-1]:
            inner = os.open(part, _DIR_FLAGS, dir_fd=fd)
            os.close(fd)
            fd = inner
        st = os.stat(parts[-1], dir_fd=fd, follow_symlinks=False)
        return _open_checked(parts[-1], st, str(root / rel), dir_fd=fd)
    finally:
        os.close(fd)


def _why_unopened(root: Path, rel: str, exc: OSError) -> str:
    """Why ``rel`` could not be opened under ``root``: a link on the way is named as such (the
    system says ``ELOOP`` or ``ENOTDIR`` for it)."""
    if exc.errno in (errno.ELOOP, errno.ENOTDIR):
        parts = Path(rel).parts
        on_the_way = [root, *(root.joinpath(*parts[: i + 1]) for i in range(len(parts) - 1))]
        if any(p.is_symlink() for p in on_the_way):
            return "a folder on its way in the staged copy is a link (not followed)"
    return exc.strerror or str(exc)


def sparse_copy(src: str | os.PathLike[str], dst: str | os.PathLike[str]) -> None:
    """Copy a regular file's data segments to ``dst`` (created or truncated, never through a
    link), so its holes stay holes; then its mode and times, as ``shutil.copy2`` would. ``src``
    is never a link followed nor a special file opened (:class:`SpecialFile`)."""
    fin = _open_checked(os.fspath(src), os.lstat(src), os.fspath(src))
    try:
        copy_open(fin, dst)
    finally:
        os.close(fin)


def copy_open(fin: int, dst: str | os.PathLike[str]) -> None:
    """Copy the open regular file ``fin`` to ``dst`` (holes kept), with its mode and times."""
    st = os.fstat(fin)
    flags = os.O_WRONLY | os.O_CREAT | os.O_TRUNC | getattr(os, "O_NOFOLLOW", 0)
    out = os.open(dst, flags, 0o600)
    try:
        for start, end in _segments(fin, st.st_size):
            pos = start
            while pos < end:
                chunk = os.pread(fin, min(CHUNK, end - pos), pos)
                if not chunk:
                    break
                os.pwrite(out, chunk, pos)
                pos += len(chunk)
        os.ftruncate(out, st.st_size)
        os.fchmod(out, stat.S_IMODE(st.st_mode))
        os.utime(out, ns=(st.st_atime_ns, st.st_mtime_ns))
    finally:
        os.close(out)


def _segments(fd: int, size: int) -> list[tuple[int, int]]:
    """The file's data segments (start, end); the whole file where holes cannot be asked for."""
    if not hasattr(os, "SEEK_DATA"):
        return [(0, size)]
    out: list[tuple[int, int]] = []
    pos = 0
    try:
        while pos < size:
            try:
                start = os.lseek(fd, pos, os.SEEK_DATA)
            except OSError:  # ENXIO: only a hole is left
                break
            end = os.lseek(fd, start, os.SEEK_HOLE)
            out.append((start, end))
            pos = end
    except OSError:
        return [(0, size)]
    return out


def _make_room(path: Path, *, folder: bool, result: CopyBack, rel: str) -> None:
    """Make ``path`` (inside the data folder) ready to be a folder or a file, as the program made
    it in the copy: a link there is removed (never followed); a file where a folder must go, or a
    folder where a file must go, is removed."""
    try:
        st = os.lstat(path)
    except FileNotFoundError:
        return
    if stat.S_ISLNK(st.st_mode):
        path.unlink()
        result.replaced_links.append(rel)
    elif stat.S_ISDIR(st.st_mode) and not folder:
        shutil.rmtree(path)
    elif not stat.S_ISDIR(st.st_mode) and folder:
        path.unlink()


def copy_back(copy: Path, origin: Path, outputs: list[str]) -> CopyBack:
    """Copy each output (relative to both folders) from the staged ``copy`` to ``origin``."""
    result = CopyBack()
    for rel in outputs:
        parts = Path(rel).parts
        if not parts or Path(rel).is_absolute() or ".." in parts:
            result.failed.append((rel, "not a path inside the data folder"))
            continue
        try:
            fin = open_inside(copy, rel)
        except SpecialFile as exc:
            result.skipped.append((rel, exc.kind))
            continue
        except OSError as exc:
            result.failed.append((rel, _why_unopened(copy, rel, exc)))
            continue
        try:
            here = origin
            for i, part in enumerate(parts[:-1]):
                here = here / part
                _make_room(here, folder=True, result=result, rel=str(Path(*parts[: i + 1])))
                if not here.exists():
                    here.mkdir()
            target = here / parts[-1]
            _make_room(target, folder=False, result=result, rel=rel)
            copy_open(fin, target)
            result.copied.append(rel)
        except OSError as exc:
            result.failed.append((rel, exc.strerror or str(exc)))
        finally:
            os.close(fin)
    return result
