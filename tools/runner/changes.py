"""Every change dftune applies to a workload: journaled before it happens, reversible after.

Three kinds of change, one per level of the seed's L1/L2/L3 ladder:

- :class:`EnvChange` (L2) sets environment variables. They go into the iteration's
  ``opt_l2_env.sh`` (``export NAME='value'`` lines, sourced before every run) and, through
  :meth:`Journal.env_overlay`, into the workload's subprocess environment.
- :class:`FilePatch` (L1) applies a unified diff to a *copy* of the source tree
  (``opt<n>/source``). The applier is strict: every hunk must match its context exactly at
  the line its header names; a path that could leave the tree (``..``, absolute paths,
  symlinks anywhere on the way) is refused before anything is touched.
- :class:`CommandChange` (L3) runs a system command (argv, never a shell string). The
  value it changes is read first with ``read_current``; the ``rollback`` template can use
  that value as ``{current}``. It runs only when ``approved=True`` is passed, and
  ``admin-only`` commands never run: they are recorded as manual recommendations.

The :class:`Journal` is an append-only JSON-lines file, fsync'd after every record. A
change is written as ``intent`` (with everything needed to undo it: previous bytes or
"absent", previous mode, the captured value and the rendered rollback) *before* anything
is touched, then ``applied`` or ``failed``. Reverting writes ``reverting`` then
``reverted`` (or ``revert_failed``). After a crash, :meth:`Journal.recover` looks at the
world for every change left in ``intent`` or ``reverting`` and records what is true:
``applied`` if the effect is there (it is never applied a second time), ``aborted`` if it is
not; a half-written patch is first put back to its previous bytes. A change id can enter
the journal once only, so nothing is ever applied twice.

States: ``intent`` → ``applied`` | ``failed`` | ``aborted``; ``applied`` → ``reverting`` →
``reverted`` | ``revert_failed`` (still in effect, revert can be retried); ``manual`` for
admin-only recommendations. A failed apply restores the previous state before it is
recorded as ``failed``; if even that fails the change is left ``revert_failed``.
"""

from __future__ import annotations

import base64
import fcntl
import hashlib
import json
import os
import re
import shlex
import stat
from collections.abc import Iterator
from contextlib import contextmanager, suppress
from dataclasses import dataclass, field
from datetime import UTC, datetime
from pathlib import Path, PurePosixPath
from typing import Annotated, Any, Literal

from pydantic import BaseModel, ConfigDict, Field, field_validator

from dftune.core.errors import DftuneError
from dftune.core.fsio import atomic_write_bytes, fsync_dir
from dftune.core.process import CommandResult, run_command

JOURNAL_FORMAT = "dftune.changes/1"
ENV_FILE_NAME = "opt_l2_env.sh"
ENV_FILE_HEADER = (
    "# dftune L2 settings for this iteration: source this file before every run.\n"
    "# Written by dftune (tools/runner/changes.py); every change is journaled and reversible.\n"
)
#: Variables owned by the tracing harness; an L2 change must not touch them.
RESERVED_ENV = ("LD_PRELOAD",)
RESERVED_ENV_PREFIXES = ("DFTRACER_",)
DEFAULT_FILE_MODE = 0o644

State = Literal["intent", "applied", "failed", "aborted", "reverting", "reverted", "revert_failed", "manual"]
#: States in which a change is in effect (and can be reverted).
IN_EFFECT: frozenset[str] = frozenset({"applied", "revert_failed"})
#: States left behind by a crash; :meth:`Journal.recover` resolves them.
PENDING: frozenset[str] = frozenset({"intent", "reverting"})

_ID_RE = r"^[A-Za-z0-9][A-Za-z0-9._:-]{0,127}$"
_ENV_NAME_RE = re.compile(r"^[A-Za-z_][A-Za-z0-9_]*$")


# --------------------------------------------------------------------------- errors


class ChangeError(DftuneError):
    """A change was refused or cannot be carried out; nothing was touched unless stated."""


class PatchError(ChangeError):
    """A unified diff is malformed or does not match the tree (nothing was written)."""


class UnsafePathError(PatchError):
    """A patch target resolves outside the tree (``..``, absolute path, symlink)."""


class ApprovalRequired(ChangeError):
    """An L3 command was submitted without ``approved=True``."""


class ConflictError(ChangeError):
    """Reverting would overwrite something that changed since the change was applied."""


class JournalError(ChangeError):
    """The journal is corrupt, needs :meth:`Journal.recover`, or refuses a duplicate id."""


class DuplicateChange(JournalError):
    """The change id is already in the journal: a change is never applied twice."""


# --------------------------------------------------------------------------- change models


class _Strict(BaseModel):
    model_config = ConfigDict(extra="forbid")


class _ChangeBase(_Strict):
    id: Annotated[str, Field(pattern=_ID_RE)]
    description: str = ""
    strategy: str | None = None  # strategy id from resources/strategies, when there is one


class EnvChange(_ChangeBase):
    """L2: environment variables for the workload, kept in the iteration's opt_l2_env.sh."""

    kind: Literal["env"] = "env"
    env_file: Path
    variables: dict[str, str] = Field(min_length=1)

    @property
    def level(self) -> str:
        return "L2"

    @field_validator("variables")
    @classmethod
    def _check_variables(cls, value: dict[str, str]) -> dict[str, str]:
        for name, val in value.items():
            if not _ENV_NAME_RE.match(name):
                raise ValueError(f"{name!r} is not a valid environment variable name")
            if name in RESERVED_ENV or name.startswith(RESERVED_ENV_PREFIXES):
                raise ValueError(f"{name} is owned by the tracing harness and cannot be an L2 setting")
            if any(ch in val for ch in "\x00\n\r"):
                raise ValueError(f"the value of {name} contains a NUL or line break")
        return value

    def env_overlay(self) -> dict[str, str]:
        """The variables this change sets, to merge into a subprocess environment."""
        return dict(self.variables)


class FilePatch(_ChangeBase):
    """L1: a unified diff applied to a copy of the source tree rooted at ``root``."""

    kind: Literal["patch"] = "patch"
    root: Path
    diff: str = Field(min_length=1)
    strip: int = Field(default=1, ge=0, le=32)  # leading path components to drop, like patch -p

    @property
    def level(self) -> str:
        return "L1"


Privilege = Literal["no-sudo", "sudo", "admin-only"]


def _check_argv(value: list[str]) -> list[str]:
    if not value or not value[0]:
        raise ValueError("an argv list needs a program name")
    if any(ch.isspace() for ch in value[0]):
        raise ValueError(
            f"program name {value[0]!r} contains whitespace: give an argv list, not a shell string"
        )
    if any("\x00" in arg for arg in value):
        raise ValueError("argv contains a NUL byte")
    return value


class CommandChange(_ChangeBase):
    """L3: a system command with the value it changes captured first and a rollback.

    ``read_current`` prints the current value (stripped of surrounding whitespace);
    ``rollback`` is an argv template in which ``{current}`` stands for that value.
    Escalation (``sudo -n ...``) belongs in the argv itself; ``privilege`` classifies it.
    """

    kind: Literal["command"] = "command"
    privilege: Privilege
    argv: list[str]
    read_current: list[str]
    rollback: list[str]
    expect_after: str | None = None  # the value read_current should print once applied
    timeout_s: float = Field(default=60.0, gt=0, le=3600)
    cwd: Path | None = None

    @property
    def level(self) -> str:
        return "L3"

    @field_validator("argv", "read_current", "rollback")
    @classmethod
    def _argv(cls, value: list[str]) -> list[str]:
        return _check_argv(value)


Change = Annotated[EnvChange | FilePatch | CommandChange, Field(discriminator="kind")]


# --------------------------------------------------------------------------- undo records


class EnvUndo(_Strict):
    kind: Literal["env"] = "env"
    path: str
    before_b64: str | None  # None: the file did not exist
    before_mode: int | None
    after_sha256: str


class FileUndo(_Strict):
    path: str  # relative to the patch root, POSIX separators
    before_b64: str | None  # None: absent before (the patch creates it)
    before_mode: int | None
    after_sha256: str | None  # None: absent after (the patch deletes it)
    after_mode: int | None


class PatchUndo(_Strict):
    kind: Literal["patch"] = "patch"
    root: str
    files: list[FileUndo]
    created_dirs: list[str]  # relative, parents first


class CommandUndo(_Strict):
    kind: Literal["command"] = "command"
    previous: str
    rollback_argv: list[str]


Undo = Annotated[EnvUndo | PatchUndo | CommandUndo, Field(discriminator="kind")]


class JournalRecord(_Strict):
    """One line of the journal."""

    format: Literal["dftune.changes/1"] = "dftune.changes/1"
    seq: int
    ts: str
    id: str
    state: State
    change: Change | None = None  # on the intent (and manual) record
    undo: Undo | None = None  # on the intent record
    detail: dict[str, Any] = Field(default_factory=dict)
    error: str | None = None


# --------------------------------------------------------------------------- small helpers


def _b64(data: bytes) -> str:
    return base64.b64encode(data).decode("ascii")


def _unb64(text: str) -> bytes:
    return base64.b64decode(text.encode("ascii"), validate=True)


def _sha(data: bytes) -> str:
    return hashlib.sha256(data).hexdigest()


def _read_regular(path: Path) -> tuple[bytes | None, int | None]:
    """Bytes and permission bits of a regular file, (None, None) when absent."""
    try:
        st = os.lstat(path)
    except FileNotFoundError:
        return None, None
    if not stat.S_ISREG(st.st_mode):
        raise ChangeError(f"{path} is not a regular file")
    fd = os.open(path, os.O_RDONLY | os.O_NOFOLLOW)
    with os.fdopen(fd, "rb") as fh:
        return fh.read(), stat.S_IMODE(st.st_mode)


def _atomic_write(path: Path, data: bytes, mode: int) -> None:
    """Replace ``path`` durably; a failed directory fsync is an error here (users' source copies)."""
    atomic_write_bytes(path, data, mode, strict=True)


def _unlink(path: Path) -> None:
    with suppress(FileNotFoundError):
        os.unlink(path)
    fsync_dir(path.parent, strict=True)


def _mode_or_default(mode: int | None) -> int:
    return DEFAULT_FILE_MODE if mode is None else mode


def _now() -> str:
    return datetime.now(UTC).isoformat(timespec="milliseconds")


# --------------------------------------------------------------------------- L2 env file


def quote_sh(value: str) -> str:
    """Single-quote ``value`` for POSIX sh (a ``'`` becomes ``'\\''``)."""
    return "'" + value.replace("'", "'\\''") + "'"


def render_env_file(before: bytes | None, variables: dict[str, str]) -> bytes:
    """The env file after setting ``variables`` on top of ``before`` (None: no file yet).

    Lines that assign one of the variables (``NAME=`` or ``export NAME=``) are replaced in
    place (later duplicates dropped); other variables are appended; everything else is
    kept. Setting the same variables again gives the same bytes (idempotent)."""
    if before is None:
        text = ENV_FILE_HEADER
    else:
        try:
            text = before.decode("utf-8")
        except UnicodeDecodeError as exc:
            raise ChangeError(f"the existing env file is not UTF-8 text: {exc}") from exc
    lines = text.splitlines(keepends=True)
    if lines and not lines[-1].endswith("\n"):
        lines[-1] += "\n"
    for name, value in variables.items():
        new_line = f"export {name}={quote_sh(value)}\n"
        pattern = re.compile(rf"^\s*(?:export\s+)?{re.escape(name)}=")
        hits = [i for i, line in enumerate(lines) if pattern.match(line)]
        if hits:
            lines[hits[0]] = new_line
            for i in reversed(hits[1:]):
                del lines[i]
        else:
            lines.append(new_line)
    return "".join(lines).encode("utf-8")


def read_env_file(path: str | Path) -> dict[str, str]:
    """The variables an env file of ``export NAME='value'`` lines sets (absent file: {}).

    Only assignments are accepted (comments and blank lines aside); anything else is an
    error naming the line, so what the runner passes is exactly what ``.`` would set."""
    p = Path(path)
    if not p.exists():
        return {}
    out: dict[str, str] = {}
    for lineno, line in enumerate(p.read_text(encoding="utf-8").splitlines(), 1):
        try:
            tokens = shlex.split(line, comments=True, posix=True)
        except ValueError as exc:
            raise ChangeError(f"{p}:{lineno}: cannot parse {line!r}: {exc}") from exc
        if not tokens:
            continue
        if tokens[0] == "export":
            tokens = tokens[1:]
        for token in tokens:
            name, eq, value = token.partition("=")
            if not eq or not _ENV_NAME_RE.match(name):
                raise ChangeError(f"{p}:{lineno}: not an assignment: {line!r}")
            out[name] = value
    return out


@dataclass
class _Prepared:
    undo: EnvUndo | PatchUndo | CommandUndo
    contents: dict[str, bytes | None] = field(default_factory=dict)  # new bytes per target


def _env_path(change: EnvChange) -> Path:
    path = Path(os.path.abspath(change.env_file))
    if not path.parent.is_dir():
        raise ChangeError(f"{path.parent} (the folder of the env file) does not exist")
    if path.is_symlink():
        raise ChangeError(f"{path} is a symlink; dftune only writes regular files")
    return path


def _prepare_env(change: EnvChange) -> _Prepared:
    path = _env_path(change)
    before, mode = _read_regular(path)
    after = render_env_file(before, change.variables)
    undo = EnvUndo(
        path=str(path),
        before_b64=None if before is None else _b64(before),
        before_mode=mode,
        after_sha256=_sha(after),
    )
    return _Prepared(undo, {str(path): after})


def _execute_env(change: EnvChange, prep: _Prepared) -> dict[str, Any]:
    assert isinstance(prep.undo, EnvUndo)
    path = Path(prep.undo.path)
    after = prep.contents[str(path)]
    assert after is not None
    _atomic_write(path, after, _mode_or_default(prep.undo.before_mode))
    return {"env_file": str(path), "variables": change.variables}


def _probe_env(undo: EnvUndo) -> tuple[str, dict[str, Any]]:
    now, _ = _read_regular(Path(undo.path))
    if now is not None and _sha(now) == undo.after_sha256:
        return "after", {}
    before = None if undo.before_b64 is None else _unb64(undo.before_b64)
    if now == before:
        return "before", {}
    return "conflict", {"conflicts": [undo.path]}


def _restore_env(undo: EnvUndo) -> dict[str, Any]:
    path = Path(undo.path)
    if path.is_symlink():
        raise ChangeError(f"{path} became a symlink; not restoring through it")
    if undo.before_b64 is None:
        _unlink(path)
        return {"env_file": str(path), "restored": "removed (absent before)"}
    _atomic_write(path, _unb64(undo.before_b64), _mode_or_default(undo.before_mode))
    return {"env_file": str(path), "restored": "previous content"}


# --------------------------------------------------------------------------- L1 unified diff


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


def _split_lines(data: bytes) -> list[bytes]:
    """Split after every b'\\n' (a lone '\\r' is not a line end); keep the line ends."""
    lines = data.split(b"\n")
    out = [line + b"\n" for line in lines[:-1]]
    if lines[-1]:
        out.append(lines[-1])
    return out


def _check_raw_path(raw: str, where: str) -> None:
    if "\x00" in raw:
        raise UnsafePathError(f"{where}: path contains a NUL byte")
    if raw.startswith("/"):
        raise UnsafePathError(f"{where}: absolute path {raw!r} refused (patches apply inside the tree only)")
    if ".." in PurePosixPath(raw).parts:
        raise UnsafePathError(f"{where}: path {raw!r} has a '..' component (refused)")


def _strip_path(raw: str, strip: int, where: str) -> str:
    _check_raw_path(raw, where)
    if raw.startswith('"'):
        raise PatchError(f"{where}: quoted path {raw} is not supported")
    parts = [p for p in PurePosixPath(raw).parts if p != "."]
    if len(parts) <= strip:
        raise PatchError(f"{where}: cannot strip {strip} component(s) from {raw!r}")
    rel = "/".join(parts[strip:])
    _check_raw_path(rel, where)
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
    lines = _split_lines(text.encode("utf-8"))
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
                    new_mode = int(ext.split()[-1], 8) & 0o777
                elif ext.startswith(b"deleted file mode "):
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


def apply_hunks(before: bytes, fd: FileDiff) -> bytes:
    """``before`` with the hunks of ``fd`` applied; every hunk must match exactly where it says."""
    old = _split_lines(before)
    out: list[bytes] = []
    pos = 0
    for number, hunk in enumerate(fd.hunks, 1):
        block = hunk.old_block()
        start = hunk.old_start - 1 if hunk.old_count > 0 else hunk.old_start
        where = f"{fd.path} hunk #{number} ({hunk.header})"
        if start < pos:
            raise PatchError(f"{where}: overlaps or precedes the previous hunk")
        if start + len(block) > len(old):
            wants = f"lines {start + 1}-{start + len(block)}" if block else f"to insert after line {start}"
            raise PatchError(f"{where}: needs {wants} but the file has {len(old)} lines")
        found = old[start : start + len(block)]
        if found != block:
            k = next(k for k in range(len(block)) if found[k] != block[k])
            hint = ""
            for j in range(pos, len(old) - len(block) + 1):
                if j != start and old[j : j + len(block)] == block:
                    hint = f" (the same lines are at line {j + 1}: regenerate the diff)"
                    break
            raise PatchError(
                f"{where}: context does not match at line {start + k + 1}: expected {_show(block[k])}, "
                f"found {_show(found[k])}{hint}"
            )
        out.extend(old[pos:start])
        out.extend(hunk.new_block())
        pos = start + len(block)
    out.extend(old[pos:])
    return b"".join(out)


def _safe_target(root: Path, rel: str) -> Path:
    """``root/rel`` after checking that no component is a symlink or leaves the tree."""
    where = f"{rel}"
    _check_raw_path(rel, where)
    parts = PurePosixPath(rel).parts
    cur = root
    for k, part in enumerate(parts):
        cur = cur / part
        try:
            st = os.lstat(cur)
        except FileNotFoundError:
            break
        if stat.S_ISLNK(st.st_mode):
            what = "the target" if k == len(parts) - 1 else f"component {'/'.join(parts[: k + 1])!r}"
            raise UnsafePathError(f"{rel}: {what} is a symlink (refused, even if it points inside the tree)")
        if k < len(parts) - 1 and not stat.S_ISDIR(st.st_mode):
            raise PatchError(f"{rel}: {'/'.join(parts[: k + 1])!r} is not a directory")
    target = root / Path(*parts)
    real = os.path.realpath(target)
    if os.path.commonpath([real, str(root)]) != str(root):
        raise UnsafePathError(f"{rel}: resolves to {real}, outside {root}")
    return target


def _patch_root(change: FilePatch) -> Path:
    try:
        root = change.root.resolve(strict=True)
    except OSError as exc:
        raise ChangeError(f"patch root {change.root} does not exist") from exc
    if not root.is_dir():
        raise ChangeError(f"patch root {root} is not a directory")
    return root


def preview_patch(change: FilePatch) -> dict[str, bytes | None]:
    """What the patch would write, per relative path (None: deleted); touches nothing.

    Raises :class:`PatchError` / :class:`UnsafePathError` with the file and hunk named."""
    return _plan_patch(change)[1]


def _plan_patch(change: FilePatch) -> tuple[Path, dict[str, bytes | None], list[FileDiff]]:
    root = _patch_root(change)
    diffs = parse_unified_diff(change.diff, change.strip)
    plan: dict[str, bytes | None] = {}
    for fd in diffs:
        target = _safe_target(root, fd.path)
        try:
            before, _mode = _read_regular(target)
        except ChangeError as exc:
            raise PatchError(f"{fd.path}: {exc}") from exc
        if fd.create:
            if before is not None or os.path.lexists(target):
                raise PatchError(f"{fd.path}: the patch creates it but it already exists")
            plan[fd.path] = apply_hunks(b"", fd)
        else:
            if before is None:
                raise PatchError(f"{fd.path}: the patch modifies or deletes it but it does not exist")
            after = apply_hunks(before, fd)
            if fd.delete:
                if after:
                    raise PatchError(
                        f"{fd.path}: the deletion does not remove the whole file ({len(after)} bytes would remain)"
                    )
                plan[fd.path] = None
            else:
                plan[fd.path] = after
    return root, plan, diffs


def _prepare_patch(change: FilePatch) -> _Prepared:
    root, plan, diffs = _plan_patch(change)
    modes = {fd.path: fd.new_mode for fd in diffs}
    files: list[FileUndo] = []
    created: list[str] = []
    for rel, after in plan.items():
        before, mode = _read_regular(root / rel)
        after_mode = None if after is None else _mode_or_default(mode if mode is not None else modes[rel])
        files.append(
            FileUndo(
                path=rel,
                before_b64=None if before is None else _b64(before),
                before_mode=mode,
                after_sha256=None if after is None else _sha(after),
                after_mode=after_mode,
            )
        )
        parts = PurePosixPath(rel).parts[:-1]
        for k in range(1, len(parts) + 1):
            d = "/".join(parts[:k])
            if d not in created and not os.path.lexists(root / d):
                created.append(d)
    return _Prepared(PatchUndo(root=str(root), files=files, created_dirs=created), dict(plan))


def _execute_patch(change: FilePatch, prep: _Prepared) -> dict[str, Any]:
    undo = prep.undo
    assert isinstance(undo, PatchUndo)
    root = Path(undo.root)
    for d in undo.created_dirs:
        path = _safe_target(root, d)
        if not path.is_dir():
            os.mkdir(path, 0o755)
            fsync_dir(path.parent, strict=True)
    for fu in undo.files:
        target = _safe_target(root, fu.path)  # checked again right before writing
        after = prep.contents[fu.path]
        if after is None:
            _unlink(target)
        else:
            assert fu.after_mode is not None
            _atomic_write(target, after, fu.after_mode)
    return {
        "root": undo.root,
        "modified": [f.path for f in undo.files if f.before_b64 is not None and f.after_sha256 is not None],
        "created": [f.path for f in undo.files if f.before_b64 is None],
        "deleted": [f.path for f in undo.files if f.after_sha256 is None],
    }


def _file_status(root: Path, fu: FileUndo) -> str:
    path = root / fu.path
    if path.is_symlink():
        return "other"
    try:
        now, _ = _read_regular(path)
    except ChangeError:
        return "other"
    if (now is None and fu.after_sha256 is None) or (now is not None and _sha(now) == fu.after_sha256):
        return "after"
    before = None if fu.before_b64 is None else _unb64(fu.before_b64)
    return "before" if now == before else "other"


def _probe_patch(undo: PatchUndo) -> tuple[str, dict[str, Any]]:
    root = Path(undo.root)
    status = {fu.path: _file_status(root, fu) for fu in undo.files}
    values = set(status.values())
    if values == {"after"}:
        return "after", {}
    if values == {"before"}:
        return "before", {}
    if "other" in values:
        return "conflict", {"conflicts": sorted(p for p, s in status.items() if s == "other")}
    return "partial", {"written": sorted(p for p, s in status.items() if s == "after")}


def _restore_patch(undo: PatchUndo) -> dict[str, Any]:
    root = Path(undo.root)
    for fu in reversed(undo.files):
        target = _safe_target(root, fu.path)
        if fu.before_b64 is None:
            _unlink(target)
        else:
            parent = target.parent
            if not parent.is_dir():  # a folder removed since; re-create it (inside root, checked above)
                parent.mkdir(parents=True, mode=0o755)
            _atomic_write(target, _unb64(fu.before_b64), _mode_or_default(fu.before_mode))
    kept: list[str] = []
    for d in reversed(undo.created_dirs):
        path = root / d
        if path.is_symlink() or not path.is_dir():
            continue
        try:
            os.rmdir(path)
            fsync_dir(path.parent, strict=True)
        except OSError:
            kept.append(d)  # not empty: something else put files there; leave it
    detail: dict[str, Any] = {"root": undo.root, "restored": [f.path for f in undo.files]}
    if kept:
        detail["kept_dirs"] = kept
    return detail


# --------------------------------------------------------------------------- L3 commands


def _read_value(change: CommandChange) -> str:
    res = run_command(change.read_current, timeout_s=change.timeout_s, cwd=change.cwd)
    if not res.ok:
        raise ChangeError(f"{change.id}: read_current failed ({res.reason()})")
    return res.stdout.strip()


def render_rollback(template: list[str], current: str) -> list[str]:
    """The rollback argv with ``{current}`` replaced by the captured value."""
    return [arg.replace("{current}", current) for arg in template]


def _prepare_command(change: CommandChange) -> _Prepared:
    previous = _read_value(change)  # read-only; nothing touched yet
    return _Prepared(CommandUndo(previous=previous, rollback_argv=render_rollback(change.rollback, previous)))


class _CommandFailed(ChangeError):
    def __init__(self, message: str, detail: dict[str, Any]) -> None:
        super().__init__(message)
        self.detail = detail


def _execute_command(change: CommandChange, prep: _Prepared) -> dict[str, Any]:
    res = run_command(change.argv, timeout_s=change.timeout_s, cwd=change.cwd)
    if not res.ok:
        raise _CommandFailed(f"{change.id}: {res.reason()}", {"command": res.summary()})
    detail: dict[str, Any] = {"command": res.summary()}
    try:
        value = _read_value(change)
        detail["value_after"] = value
        if change.expect_after is not None and value != change.expect_after:
            detail["note"] = f"read_current prints {value!r}, expected {change.expect_after!r}"
    except ChangeError as exc:
        detail["note"] = str(exc)
    return detail


def _probe_command(change: CommandChange, undo: CommandUndo) -> tuple[str, dict[str, Any]]:
    try:
        value = _read_value(change)
    except ChangeError as exc:
        # cannot tell: count it as in effect, so its rollback stays on record
        return "after", {"note": f"{exc}; assumed in effect"}
    if value == undo.previous:
        return "before", {"value": value}
    return "after", {"value": value}


def _restore_command(change: CommandChange, undo: CommandUndo) -> dict[str, Any]:
    res = run_command(undo.rollback_argv, timeout_s=change.timeout_s, cwd=change.cwd)
    detail: dict[str, Any] = {"rollback": res.summary()}
    if not res.ok:
        raise _CommandFailed(f"{change.id}: rollback failed ({res.reason()})", detail)
    value = _read_value(change)
    detail["value_after"] = value
    if value != undo.previous:
        raise _CommandFailed(
            f"{change.id}: rollback ran but read_current prints {value!r}, not the previous {undo.previous!r}",
            detail,
        )
    return detail


# --------------------------------------------------------------------------- dispatch


def _prepare(change: EnvChange | FilePatch | CommandChange) -> _Prepared:
    if isinstance(change, EnvChange):
        return _prepare_env(change)
    if isinstance(change, FilePatch):
        return _prepare_patch(change)
    return _prepare_command(change)


def _execute(change: EnvChange | FilePatch | CommandChange, prep: _Prepared) -> dict[str, Any]:
    if isinstance(change, EnvChange):
        return _execute_env(change, prep)
    if isinstance(change, FilePatch):
        return _execute_patch(change, prep)
    return _execute_command(change, prep)


def _probe(change: EnvChange | FilePatch | CommandChange, undo: Any) -> tuple[str, dict[str, Any]]:
    """Where the world is: 'before', 'after', 'partial' (some files written) or 'conflict'."""
    try:
        if isinstance(change, EnvChange):
            return _probe_env(undo)
        if isinstance(change, FilePatch):
            return _probe_patch(undo)
        return _probe_command(change, undo)
    except (OSError, ChangeError) as exc:
        return "conflict", {"error": str(exc)}


def _restore(change: EnvChange | FilePatch | CommandChange, undo: Any) -> dict[str, Any]:
    if isinstance(change, EnvChange):
        return _restore_env(undo)
    if isinstance(change, FilePatch):
        return _restore_patch(undo)
    return _restore_command(change, undo)


def _resources(change: EnvChange | FilePatch | CommandChange, undo: Any) -> set[str]:
    """What a change touches; reverting is refused while a later change touches the same."""
    if isinstance(undo, EnvUndo):
        return {f"file:{undo.path}"}
    if isinstance(undo, PatchUndo):
        return {f"file:{Path(undo.root) / f.path}" for f in undo.files}
    assert isinstance(change, CommandChange)
    return {"cmd:" + json.dumps(change.read_current)}


def _error_detail(exc: BaseException) -> dict[str, Any]:
    return dict(exc.detail) if isinstance(exc, _CommandFailed) else {}


# --------------------------------------------------------------------------- journal


@dataclass
class _Entry:
    id: str
    change: EnvChange | FilePatch | CommandChange
    undo: Any
    seq: int  # of the intent (or manual) record: the order of application
    state: str
    records: list[JournalRecord]


@dataclass
class _Loaded:
    records: list[JournalRecord]
    entries: dict[str, _Entry]
    torn_at: int | None  # byte offset of an incomplete last line (a crash mid-write)
    needs_newline: bool  # the last record is complete but its newline is missing


class Journal:
    """Append-only JSON-lines journal of changes; see the module docstring.

    Every operation takes an exclusive ``flock`` on the journal file and re-reads it, so
    several processes may share one journal. Nothing happens at construction beyond
    creating an empty file; call :meth:`recover` after a crash (apply and revert refuse
    to run while changes are pending)."""

    def __init__(self, path: str | Path) -> None:
        self.path = Path(path)
        self._lock_fd: int | None = None
        self._depth = 0
        self.path.parent.mkdir(parents=True, exist_ok=True)
        if not self.path.exists():
            fd = os.open(self.path, os.O_WRONLY | os.O_CREAT | os.O_APPEND, 0o644)
            os.close(fd)
            fsync_dir(self.path.parent)
        self._load()  # fail early on a corrupt journal

    # ----------------------------------------------------------------- reading

    @contextmanager
    def _locked(self) -> Iterator[None]:
        if self._depth == 0:
            fd = os.open(self.path, os.O_RDWR | os.O_APPEND | os.O_CREAT, 0o644)
            fcntl.flock(fd, fcntl.LOCK_EX)
            self._lock_fd = fd
        self._depth += 1
        try:
            yield
        finally:
            self._depth -= 1
            if self._depth == 0 and self._lock_fd is not None:
                fcntl.flock(self._lock_fd, fcntl.LOCK_UN)
                os.close(self._lock_fd)
                self._lock_fd = None

    def _load(self) -> _Loaded:
        data = self.path.read_bytes()
        records: list[JournalRecord] = []
        entries: dict[str, _Entry] = {}
        torn_at: int | None = None
        offset = 0
        raw_lines = data.split(b"\n")
        for lineno, raw in enumerate(raw_lines, 1):
            last = lineno == len(raw_lines)
            start = offset
            offset += len(raw) + 1
            if not raw.strip():
                continue
            try:
                rec = JournalRecord.model_validate(json.loads(raw))
            except ValueError as exc:
                if last:  # no newline after it: the write was cut short by a crash
                    torn_at = start
                    break
                raise JournalError(f"{self.path}:{lineno}: corrupt journal record ({exc})") from exc
            records.append(rec)
            entry = entries.get(rec.id)
            if entry is None:
                if rec.change is None or (rec.state == "intent" and rec.undo is None):
                    raise JournalError(f"{self.path}:{lineno}: first record of {rec.id} lacks the change")
                entry = _Entry(rec.id, rec.change, rec.undo, rec.seq, rec.state, [])
                entries[rec.id] = entry
            entry.state = rec.state
            entry.records.append(rec)
        needs_newline = torn_at is None and bool(data) and not data.endswith(b"\n")
        return _Loaded(records, entries, torn_at, needs_newline)

    def _checked(self) -> _Loaded:
        loaded = self._load()
        pending = [e.id for e in loaded.entries.values() if e.state in PENDING]
        if loaded.torn_at is not None or pending:
            what = f"changes {', '.join(pending)} were interrupted" if pending else "its last line is torn"
            raise JournalError(f"{self.path}: {what}; call recover() first")
        return loaded

    def records(self) -> list[JournalRecord]:
        """Every record, in order."""
        with self._locked():
            return self._load().records

    def state(self, change_id: str) -> str | None:
        """The last state of a change, None if it is not in the journal."""
        with self._locked():
            entry = self._load().entries.get(change_id)
        return None if entry is None else entry.state

    def change(self, change_id: str) -> EnvChange | FilePatch | CommandChange:
        with self._locked():
            entry = self._load().entries.get(change_id)
        if entry is None:
            raise ChangeError(f"no change {change_id} in {self.path}")
        return entry.change

    def history(self, change_id: str) -> list[JournalRecord]:
        with self._locked():
            entry = self._load().entries.get(change_id)
        return [] if entry is None else list(entry.records)

    def pending(self) -> list[str]:
        """Ids of changes a crash left in ``intent`` or ``reverting``."""
        with self._locked():
            return [e.id for e in self._load().entries.values() if e.state in PENDING]

    def applied_changes(self) -> list[EnvChange | FilePatch | CommandChange]:
        """Changes currently in effect, in the order they were applied."""
        with self._locked():
            entries = self._load().entries.values()
        return [e.change for e in sorted(entries, key=lambda e: e.seq) if e.state in IN_EFFECT]

    def env_overlay(self) -> dict[str, str]:
        """The variables of every L2 change in effect (later changes win)."""
        out: dict[str, str] = {}
        for change in self.applied_changes():
            if isinstance(change, EnvChange):
                out.update(change.variables)
        return out

    # ----------------------------------------------------------------- writing

    def _append(
        self,
        loaded: _Loaded,
        change_id: str,
        state: State,
        *,
        change: EnvChange | FilePatch | CommandChange | None = None,
        undo: Any = None,
        detail: dict[str, Any] | None = None,
        error: str | None = None,
    ) -> JournalRecord:
        rec = JournalRecord(
            seq=len(loaded.records) + 1,
            ts=_now(),
            id=change_id,
            state=state,
            change=change,
            undo=undo,
            detail=detail or {},
            error=error,
        )
        line = json.dumps(rec.model_dump(mode="json"), ensure_ascii=True) + "\n"
        assert self._lock_fd is not None, "journal writes happen under the lock"
        if loaded.needs_newline:
            line = "\n" + line
            loaded.needs_newline = False
        os.write(self._lock_fd, line.encode("ascii"))
        os.fsync(self._lock_fd)
        loaded.records.append(rec)
        entry = loaded.entries.get(change_id)
        if entry is None:
            assert change is not None
            entry = _Entry(change_id, change, undo, rec.seq, state, [])
            loaded.entries[change_id] = entry
        entry.state = state
        entry.records.append(rec)
        return rec

    def apply(
        self, change: EnvChange | FilePatch | CommandChange, *, approved: bool = False
    ) -> JournalRecord:
        """Journal ``change`` as intent, carry it out, journal the outcome; return the last record.

        Refusals (bad patch, unsafe path, missing approval, duplicate id, pending
        recovery) raise before anything is touched or recorded. A failure while carrying
        it out is recorded (``failed``, with the error; the previous state restored first)
        and returned."""
        with self._locked():
            loaded = self._checked()
            if change.id in loaded.entries:
                raise DuplicateChange(
                    f"change {change.id} is already in the journal (state {loaded.entries[change.id].state}); "
                    "a change is never applied twice"
                )
            if isinstance(change, CommandChange):
                if change.privilege == "admin-only":
                    return self._append(
                        loaded,
                        change.id,
                        "manual",
                        change=change,
                        detail={
                            "note": "admin-only: never executed by dftune; recommended to the administrator",
                            "argv": change.argv,
                            "rollback": change.rollback,
                        },
                    )
                if not approved:
                    raise ApprovalRequired(
                        f"change {change.id} ({change.privilege} L3 command {shlex.join(change.argv)}) "
                        "needs approval; pass approved=True once it is approved"
                    )
            prep = _prepare(change)
            self._append(loaded, change.id, "intent", change=change, undo=prep.undo)
            try:
                detail = _execute(change, prep)
            except Exception as exc:
                return self._failed_apply(loaded, change, prep.undo, exc)
            return self._append(loaded, change.id, "applied", detail=detail)

    def _failed_apply(
        self, loaded: _Loaded, change: EnvChange | FilePatch | CommandChange, undo: Any, exc: Exception
    ) -> JournalRecord:
        detail = _error_detail(exc)
        where, info = _probe(change, undo)
        detail["world"] = where
        if where == "before":
            return self._append(loaded, change.id, "failed", detail=detail, error=str(exc))
        try:
            detail["restore"] = _restore(change, undo)
        except Exception as exc2:
            detail["restore_error"] = str(exc2)
            detail.update(_error_detail(exc2))
            return self._append(
                loaded,
                change.id,
                "revert_failed",
                detail=detail,
                error=f"{exc}; restoring the previous state failed too: {exc2}",
            )
        detail.update(info)
        return self._append(
            loaded, change.id, "failed", detail=detail, error=f"{exc} (previous state restored)"
        )

    def revert(self, change_id: str, *, force: bool = False) -> JournalRecord:
        """Undo a change in effect; return the ``reverted`` or ``revert_failed`` record.

        Refused while a later change in effect touches the same file or setting (revert
        that first), and, unless ``force``, when the target changed since it was applied."""
        with self._locked():
            loaded = self._checked()
            entry = loaded.entries.get(change_id)
            if entry is None:
                raise ChangeError(f"no change {change_id} in {self.path}")
            if entry.state not in IN_EFFECT:
                raise ChangeError(f"change {change_id} is {entry.state}, not in effect; nothing to revert")
            mine = _resources(entry.change, entry.undo)
            later = [
                e.id
                for e in loaded.entries.values()
                if e.seq > entry.seq and e.state in IN_EFFECT and mine & _resources(e.change, e.undo)
            ]
            if later:
                raise ConflictError(
                    f"change {change_id} cannot be reverted before {', '.join(later)}, "
                    "applied later to the same target"
                )
            if not force and not isinstance(entry.change, CommandChange):
                where, info = _probe(entry.change, entry.undo)
                if where != "after":
                    raise ConflictError(
                        f"change {change_id}: the target changed since it was applied ({where}: {info}); "
                        "revert(force=True) restores the recorded previous state anyway"
                    )
            return self._revert_locked(loaded, entry)

    def _revert_locked(self, loaded: _Loaded, entry: _Entry) -> JournalRecord:
        self._append(loaded, entry.id, "reverting")
        try:
            detail = _restore(entry.change, entry.undo)
        except Exception as exc:
            return self._append(loaded, entry.id, "revert_failed", detail=_error_detail(exc), error=str(exc))
        return self._append(loaded, entry.id, "reverted", detail=detail)

    def revert_all(self, *, force: bool = False) -> list[JournalRecord]:
        """Revert every change in effect, last applied first; stop at the first failure."""
        out: list[JournalRecord] = []
        with self._locked():
            for change in reversed(self.applied_changes()):
                rec = self.revert(change.id, force=force)
                out.append(rec)
                if rec.state != "reverted":
                    break
        return out

    def recover(self) -> list[JournalRecord]:
        """Resolve changes a crash left in ``intent`` or ``reverting``; return the new records.

        intent: effect present → ``applied`` (not applied again); absent → ``aborted``;
        half-written patch → previous bytes restored, ``aborted``. reverting: previous
        state present → ``reverted``; effect untouched → ``applied``; half-reverted patch →
        revert completed. A torn last line (crash mid-write) is cut off first."""
        out: list[JournalRecord] = []
        with self._locked():
            loaded = self._load()
            if loaded.torn_at is not None:
                assert self._lock_fd is not None
                os.ftruncate(self._lock_fd, loaded.torn_at)
                os.fsync(self._lock_fd)
                loaded.torn_at = None
            for entry in sorted(loaded.entries.values(), key=lambda e: e.seq):
                if entry.state in PENDING:
                    out.append(self._recover_one(loaded, entry))
        return out

    def _recover_one(self, loaded: _Loaded, entry: _Entry) -> JournalRecord:
        where, info = _probe(entry.change, entry.undo)
        detail: dict[str, Any] = {"recovered": True, "world": where, **info}
        if entry.state == "intent":
            if where == "after":
                detail["note"] = "the effect is present: recorded as applied, not applied again"
                return self._append(loaded, entry.id, "applied", detail=detail)
            if where == "before":
                return self._append(loaded, entry.id, "aborted", detail=detail)
            if where == "partial":
                try:
                    detail["restore"] = _restore(entry.change, entry.undo)
                except Exception as exc:
                    return self._append(loaded, entry.id, "revert_failed", detail=detail, error=str(exc))
                detail["note"] = "half-applied: the previous bytes were restored"
                return self._append(loaded, entry.id, "aborted", detail=detail)
            detail["note"] = (
                "the target matches neither the previous nor the intended state; kept as in effect "
                "so its rollback stays on record (revert(force=True) restores the previous state)"
            )
            return self._append(loaded, entry.id, "applied", detail=detail)
        # reverting
        if where == "before":
            return self._append(loaded, entry.id, "reverted", detail=detail)
        if where == "after":
            detail["note"] = "the revert was interrupted before it changed anything; still in effect"
            return self._append(loaded, entry.id, "applied", detail=detail)
        if where == "partial":
            try:
                detail["restore"] = _restore(entry.change, entry.undo)
            except Exception as exc:
                return self._append(loaded, entry.id, "revert_failed", detail=detail, error=str(exc))
            detail["note"] = "half-reverted: the revert was completed"
            return self._append(loaded, entry.id, "reverted", detail=detail)
        return self._append(
            loaded,
            entry.id,
            "revert_failed",
            detail=detail,
            error="interrupted revert: the target matches neither the previous nor the applied state",
        )


__all__ = [
    "ENV_FILE_NAME",
    "IN_EFFECT",
    "JOURNAL_FORMAT",
    "PENDING",
    "ApprovalRequired",
    "Change",
    "ChangeError",
    "CommandChange",
    "CommandResult",
    "ConflictError",
    "DuplicateChange",
    "EnvChange",
    "FileDiff",
    "FilePatch",
    "Hunk",
    "Journal",
    "JournalError",
    "JournalRecord",
    "PatchError",
    "Privilege",
    "State",
    "UnsafePathError",
    "apply_hunks",
    "parse_unified_diff",
    "preview_patch",
    "quote_sh",
    "read_env_file",
    "render_env_file",
    "render_rollback",
]
