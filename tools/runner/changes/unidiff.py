"""A strict unified-diff parser and applier (plain ``diff -u`` and ``git diff``), pure: no file I/O.

Every hunk must match its context exactly at the line its header names; renames, copies,
mode changes and binary patches are refused; a path that could leave the tree (``..``,
absolute) is refused before anything else looks at it.
"""

from __future__ import annotations

import re
from dataclasses import dataclass, field
from pathlib import PurePosixPath

from dftune.tools.runner.changes.models import PatchError, UnsafePathError


@dataclass
class Hunk:
    header: str
    old_start: int
    old_count: int
    new_start: int
    new_count: int
    lines: list[tuple[str, bytes]]  # (' ' | '-' | '+', content including its line end)

    def old_block(self) -> list[bytes]:
        return [c for op, c in self.lines if op != "+"]

    def new_block(self) -> list[bytes]:
        return [c for op, c in self.lines if op != "-"]


@dataclass
class FileDiff:
    path: str  # relative to the root (after strip)
    create: bool = False
    delete: bool = False
    new_mode: int | None = None
    hunks: list[Hunk] = field(default_factory=list)


_HUNK_RE = re.compile(rb"^@@ -(\d+)(?:,(\d+))? \+(\d+)(?:,(\d+))? @@")
_GIT_REFUSED = (
    (b"rename from ", "renames"),
    (b"rename to ", "renames"),
    (b"copy from ", "copies"),
    (b"copy to ", "copies"),
    (b"old mode ", "mode changes"),
    (b"new mode ", "mode changes"),
    (b"GIT binary patch", "binary patches"),
    (b"Binary files ", "binary patches"),
)
_GIT_IGNORED = (b"index ", b"similarity index ", b"dissimilarity index ")


#: The file modes git writes for a regular file; a patch creates or deletes nothing else.
_REGULAR_MODES = (0o100644, 0o100755)
_MODE_KINDS = {0o120000: "symbolic links", 0o160000: "submodules (gitlinks)", 0o040000: "directories"}


def _regular_mode(line: bytes, lineno: int) -> int:
    """The mode of a git 'new/deleted file mode' line when it is a regular file's; otherwise
    the patch is refused: a symbolic link (mode 120000) would be written as a regular file
    holding the link target, and a link can point anywhere outside the tree."""
    word = line.split()[-1] if line.split() else b""
    try:
        mode = int(word, 8)
    except ValueError:
        raise PatchError(f"patch line {lineno}: unreadable file mode {word!r}") from None
    if mode not in _REGULAR_MODES:
        what = _MODE_KINDS.get(mode & 0o170000, f"file mode {mode:o}")
        raise PatchError(
            f"patch line {lineno}: {what} are not supported (only regular files: 100644, 100755)"
        )
    return mode


def split_lines(data: bytes) -> list[bytes]:
    """Split after every b'\\n' (a lone '\\r' is not a line end); keep the line ends."""
    lines = data.split(b"\n")
    out = [line + b"\n" for line in lines[:-1]]
    if lines[-1]:
        out.append(lines[-1])
    return out


def check_raw_path(raw: str, where: str) -> None:
    if "\x00" in raw:
        raise UnsafePathError(f"{where}: path contains a NUL byte")
    if raw.startswith("/"):
        raise UnsafePathError(f"{where}: absolute path {raw!r} refused (patches apply inside the tree only)")
    if ".." in PurePosixPath(raw).parts:
        raise UnsafePathError(f"{where}: path {raw!r} has a '..' component (refused)")


def _strip_path(raw: str, strip: int, where: str) -> str:
    check_raw_path(raw, where)
    if raw.startswith('"'):
        raise PatchError(f"{where}: quoted path {raw} is not supported")
    parts = [p for p in PurePosixPath(raw).parts if p != "."]
    if len(parts) <= strip:
        raise PatchError(f"{where}: cannot strip {strip} component(s) from {raw!r}")
    rel = "/".join(parts[strip:])
    check_raw_path(rel, where)
    return rel


def _header_path(line: bytes) -> str:
    text = line[4:].decode("utf-8").rstrip("\r\n")
    return text.split("\t", 1)[0]


def parse_unified_diff(text: str, strip: int = 1) -> list[FileDiff]:
    """Parse a unified diff (plain ``diff -u`` or ``git diff``) strictly.

    Refuses renames, copies, mode changes and binary patches; hunk line counts must agree
    with their headers. Paths are checked for ``..`` and absolute forms (symlinks are
    checked against the tree in :func:`preview_patch`)."""
    if not text.endswith("\n"):
        text += "\n"
    lines = split_lines(text.encode("utf-8"))
    files: list[FileDiff] = []
    seen: set[str] = set()
    i = 0
    n = len(lines)

    def add(fd: FileDiff) -> None:
        if fd.path in seen:
            raise PatchError(f"{fd.path} appears twice in the patch; give one section per file")
        seen.add(fd.path)
        files.append(fd)

    while i < n:
        line = lines[i]
        if line.rstrip(b"\r\n") == b"--":
            break  # "-- " e-mail signature after git format-patch output
        if line.startswith(b"diff --git "):
            lineno = i + 1
            git_paths = line[len(b"diff --git ") :].decode("utf-8").rstrip("\r\n")
            i += 1
            create = delete = False
            new_mode: int | None = None
            while i < n and not lines[i].startswith((b"--- ", b"diff ", b"@@")):
                ext = lines[i]
                for prefix, what in _GIT_REFUSED:
                    if ext.startswith(prefix):
                        raise PatchError(f"patch line {i + 1}: {what} are not supported")
                if ext.startswith(b"new file mode "):
                    create = True
                    new_mode = _regular_mode(ext, i + 1) & 0o777
                elif ext.startswith(b"deleted file mode "):
                    _regular_mode(ext, i + 1)
                    delete = True
                elif not ext.startswith(_GIT_IGNORED):
                    raise PatchError(f"patch line {i + 1}: unexpected git header line {ext!r}")
                i += 1
            if i < n and lines[i].startswith(b"--- "):
                fd, i = _parse_file_section(lines, i, strip)
                if create and not fd.create:
                    raise PatchError(f"patch line {lineno}: 'new file mode' but --- is not /dev/null")
                if delete and not fd.delete:
                    raise PatchError(f"patch line {lineno}: 'deleted file mode' but +++ is not /dev/null")
                fd.new_mode = new_mode
                add(fd)
            else:
                # a git section without ---/+++: an empty file created or deleted
                if not (create or delete):
                    raise PatchError(f"patch line {lineno}: git section without a change")
                half = (len(git_paths) - 1) // 2
                a, b = git_paths[:half], git_paths[half + 1 :]
                if len(git_paths) % 2 == 0 or a[2:] != b[2:]:
                    raise PatchError(f"patch line {lineno}: cannot read the path from {git_paths!r}")
                path = _strip_path(b, strip, f"patch line {lineno}")
                add(FileDiff(path=path, create=create, delete=delete, new_mode=new_mode))
            continue
        if line.startswith(b"--- "):
            fd, i = _parse_file_section(lines, i, strip)
            add(fd)
            continue
        if line.startswith(b"@@"):
            raise PatchError(f"patch line {i + 1}: hunk without a ---/+++ file header")
        if line.startswith((b"+++ ", b"GIT binary patch", b"Binary files ")):
            raise PatchError(f"patch line {i + 1}: unexpected {line.rstrip()!r}")
        i += 1  # preamble: commit message, "Index:", "diff -u a b", ...
    if not files:
        raise PatchError("the patch contains no file sections")
    return files


def _parse_file_section(lines: list[bytes], i: int, strip: int) -> tuple[FileDiff, int]:
    n = len(lines)
    where = f"patch line {i + 1}"
    old_raw = _header_path(lines[i])
    if i + 1 >= n or not lines[i + 1].startswith(b"+++ "):
        raise PatchError(f"{where}: '---' header not followed by '+++'")
    new_raw = _header_path(lines[i + 1])
    i += 2
    create, delete = old_raw == "/dev/null", new_raw == "/dev/null"
    if create and delete:
        raise PatchError(f"{where}: both sides are /dev/null")
    old = None if create else _strip_path(old_raw, strip, where)
    new = None if delete else _strip_path(new_raw, strip, where)
    if old is not None and new is not None and old != new:
        raise PatchError(f"{where}: renames are not supported ({old} -> {new})")
    path = new if new is not None else old
    assert path is not None
    fd = FileDiff(path=path, create=create, delete=delete)
    while i < n and lines[i].startswith(b"@@"):
        hunk, i = _parse_hunk(lines, i, path, len(fd.hunks) + 1)
        fd.hunks.append(hunk)
    if not fd.hunks:
        raise PatchError(f"{where}: {path} has no hunks")
    if i < n:
        nxt = lines[i]
        if nxt.startswith((b"+", b" ", b"-")) and not nxt.startswith((b"--- ", b"+++ ")) and nxt != b"-- \n":
            raise PatchError(
                f"{path} hunk #{len(fd.hunks)} ({fd.hunks[-1].header}): more lines than its header counts"
            )
    return fd, i


def _parse_hunk(lines: list[bytes], i: int, path: str, number: int) -> tuple[Hunk, int]:
    n = len(lines)
    m = _HUNK_RE.match(lines[i])
    header = lines[i].decode("utf-8").rstrip("\r\n")
    if not m:
        raise PatchError(f"{path} hunk #{number}: malformed header {header!r}")
    old_start, new_start = int(m.group(1)), int(m.group(3))
    old_count = 1 if m.group(2) is None else int(m.group(2))
    new_count = 1 if m.group(4) is None else int(m.group(4))
    header = m.group(0).decode("utf-8")
    hunk = Hunk(header, old_start, old_count, new_start, new_count, [])
    if old_count > 0 and old_start == 0:
        raise PatchError(f"{path} hunk #{number} ({header}): old start 0 with a non-empty old side")
    i += 1
    old_left, new_left = old_count, new_count
    while old_left > 0 or new_left > 0:
        if i >= n:
            raise PatchError(f"{path} hunk #{number} ({header}): the patch ends inside the hunk")
        line = lines[i]
        if line in (b"\n", b"\r\n"):
            op, content = " ", line  # a context line whose leading space was lost
        elif line.startswith(b"\\"):
            _no_newline(hunk, path, number)
            i += 1
            continue
        else:
            op, content = chr(line[0]), line[1:]
        if op == " " and old_left > 0 and new_left > 0:
            old_left -= 1
            new_left -= 1
        elif op == "-" and old_left > 0:
            old_left -= 1
        elif op == "+" and new_left > 0:
            new_left -= 1
        else:
            raise PatchError(
                f"{path} hunk #{number} ({header}): line {i + 1} of the patch ({line.rstrip()!r}) "
                "does not fit the line counts of the header"
            )
        hunk.lines.append((op, content))
        i += 1
    if i < n and lines[i].startswith(b"\\"):
        _no_newline(hunk, path, number)
        i += 1
    return hunk, i


def _no_newline(hunk: Hunk, path: str, number: int) -> None:
    """'\\ No newline at end of file' applies to the line before it."""
    if not hunk.lines or not hunk.lines[-1][1].endswith(b"\n"):
        raise PatchError(f"{path} hunk #{number} ({hunk.header}): misplaced '\\ No newline' marker")
    op, content = hunk.lines[-1]
    hunk.lines[-1] = (op, content[:-1])


def _show(line: bytes) -> str:
    text = repr(line.decode("utf-8", errors="replace"))
    return text if len(text) <= 120 else text[:117] + "..."


#: a hunk applies away from the line its header names only with this many lines to match
MIN_OFFSET_LINES = 2


def _nearest(old: list[bytes], block: list[bytes], start: int, pos: int) -> int | None:
    """Where ``block`` stands exactly, nearest to ``start`` and not before ``pos`` (None: nowhere)."""
    if len(block) < MIN_OFFSET_LINES:
        return None
    places = [j for j in range(pos, len(old) - len(block) + 1) if old[j : j + len(block)] == block]
    return min(places, key=lambda j: (abs(j - start), j)) if places else None


def _mismatch(where: str, old: list[bytes], block: list[bytes], start: int) -> PatchError:
    if start + len(block) > len(old):
        wants = f"lines {start + 1}-{start + len(block)}" if block else f"to insert after line {start}"
        return PatchError(f"{where}: needs {wants} but the file has {len(old)} lines")
    found = old[start : start + len(block)]
    k = next(k for k in range(len(block)) if found[k] != block[k])
    return PatchError(
        f"{where}: context does not match at line {start + k + 1}: expected {_show(block[k])}, "
        f"found {_show(found[k])}"
    )


def apply_hunks(before: bytes, fd: FileDiff) -> bytes:
    """``before`` with the hunks of ``fd`` applied; every hunk must match exactly.

    As ``git apply`` does, a hunk whose lines (at least :data:`MIN_OFFSET_LINES` of context and
    removed lines) stand exactly elsewhere after the previous hunk applies at the nearest such
    place: a diff drafted against the original still applies on top of an earlier kept patch
    that moved its lines. Nothing is ever applied where the lines differ (no fuzz)."""
    old = split_lines(before)
    out: list[bytes] = []
    pos = 0
    for number, hunk in enumerate(fd.hunks, 1):
        block = hunk.old_block()
        start = hunk.old_start - 1 if hunk.old_count > 0 else hunk.old_start
        where = f"{fd.path} hunk #{number} ({hunk.header})"
        if start < pos:
            raise PatchError(f"{where}: overlaps or precedes the previous hunk")
        if start + len(block) > len(old) or old[start : start + len(block)] != block:
            moved = _nearest(old, block, start, pos)
            if moved is None:
                raise _mismatch(where, old, block, start)
            start = moved
        out.extend(old[pos:start])
        out.extend(hunk.new_block())
        pos = start + len(block)
    out.extend(old[pos:])
    return b"".join(out)
