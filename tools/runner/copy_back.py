"""Copying a staged replicate's outputs back into the data folder with the rules the program's own
writes would have had there.

- **Never outside the folder.** Every folder on the way to an output is checked without following
  links: a link the original folder holds where the staged program made a real file or folder
  (``out.txt -> ../victim`` replaced by the program's own ``out.txt``) is replaced by it, inside
  the folder, never written through; a file where the program made a folder is replaced by the
  folder. Files are opened with ``O_NOFOLLOW``.
- **Nothing lost.** One output that cannot be copied does not stop the others; the ones that
  failed are returned with why, and the caller keeps the staged copy for them.
- **Special files** (FIFOs, sockets, devices) are not outputs: skipped, and said.
- **Sparse stays sparse**: only the data segments are copied (``SEEK_DATA``/``SEEK_HOLE``); the
  holes stay holes (the same copier stages data in).
"""

from __future__ import annotations

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


def sparse_copy(src: str | os.PathLike[str], dst: str | os.PathLike[str]) -> None:
    """Copy a regular file's data segments to ``dst`` (created or truncated, never through a
    link), so its holes stay holes; then its mode and times, as ``shutil.copy2`` would."""
    flags = os.O_WRONLY | os.O_CREAT | os.O_TRUNC | getattr(os, "O_NOFOLLOW", 0)
    with open(src, "rb", buffering=0) as fin:
        size = os.fstat(fin.fileno()).st_size
        out = os.open(dst, flags, 0o600)
        try:
            for start, end in _segments(fin.fileno(), size):
                fin.seek(start)
                pos = start
                while pos < end:
                    chunk = fin.read(min(CHUNK, end - pos))
                    if not chunk:
                        break
                    os.pwrite(out, chunk, pos)
                    pos += len(chunk)
            os.ftruncate(out, size)
        finally:
            os.close(out)
    shutil.copystat(src, dst, follow_symlinks=False)


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


def _special(mode: int) -> str | None:
    if stat.S_ISREG(mode):
        return None
    if stat.S_ISFIFO(mode):
        return "a named pipe"
    if stat.S_ISSOCK(mode):
        return "a socket"
    if stat.S_ISCHR(mode) or stat.S_ISBLK(mode):
        return "a device"
    return "not a regular file"


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
        if Path(rel).is_absolute() or ".." in parts:
            result.failed.append((rel, "not a path inside the data folder"))
            continue
        try:
            mode = os.lstat(copy / rel).st_mode
            kind = _special(mode)
            if kind is not None:
                result.skipped.append((rel, kind))
                continue
            here = origin
            for i, part in enumerate(parts[:-1]):
                here = here / part
                _make_room(here, folder=True, result=result, rel=str(Path(*parts[: i + 1])))
                if not here.exists():
                    here.mkdir()
            target = here / parts[-1]
            _make_room(target, folder=False, result=result, rel=rel)
            sparse_copy(copy / rel, target)
            result.copied.append(rel)
        except OSError as exc:
            result.failed.append((rel, exc.strerror or str(exc)))
    return result
