"""What every kind of change does, as one table per kind, and the byte-level file helpers they share.

An :class:`Effect` is the five things the journal needs of a change kind: read the world and
plan the change without touching anything (``prepare``), carry it out (``execute``), tell
where the world is (``probe``: ``before``, ``after``, ``partial`` or ``conflict``), put the
previous state back (``restore``), and name what it touches (``resources``, so a revert is
refused while a later change touches the same thing).
"""

from __future__ import annotations

import base64
import hashlib
import os
import stat
from collections.abc import Callable
from contextlib import suppress
from dataclasses import dataclass, field
from datetime import UTC, datetime
from pathlib import Path
from typing import Any

from dftune.core.fsio import atomic_write_bytes, fsync_dir
from dftune.tools.runner.changes.models import DEFAULT_FILE_MODE, ChangeError, CommandUndo, EnvUndo, PatchUndo


@dataclass
class Prepared:
    """A planned change: its undo record and the new bytes per target (nothing written yet)."""

    undo: EnvUndo | PatchUndo | CommandUndo
    contents: dict[str, bytes | None] = field(default_factory=dict)


@dataclass(frozen=True)
class Effect:
    prepare: Callable[[Any], Prepared]
    execute: Callable[[Any, Prepared], dict[str, Any]]
    probe: Callable[[Any, Any], tuple[str, dict[str, Any]]]
    restore: Callable[[Any, Any], dict[str, Any]]
    resources: Callable[[Any, Any], set[str]]


class EffectFailed(ChangeError):
    """Carrying out or undoing a change failed; ``detail`` says what the command printed."""

    def __init__(self, message: str, detail: dict[str, Any]) -> None:
        super().__init__(message)
        self.detail = detail


def error_detail(exc: BaseException) -> dict[str, Any]:
    return dict(exc.detail) if isinstance(exc, EffectFailed) else {}


# --------------------------------------------------------------------------- file helpers


def b64(data: bytes) -> str:
    return base64.b64encode(data).decode("ascii")


def unb64(text: str) -> bytes:
    return base64.b64decode(text.encode("ascii"), validate=True)


def sha(data: bytes) -> str:
    return hashlib.sha256(data).hexdigest()


def read_regular(path: Path) -> tuple[bytes | None, int | None]:
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


def write_file(path: Path, data: bytes, mode: int) -> None:
    """Replace ``path`` durably; a failed directory fsync is an error here (users' source copies)."""
    atomic_write_bytes(path, data, mode, strict=True)


def unlink(path: Path) -> None:
    with suppress(FileNotFoundError):
        os.unlink(path)
    fsync_dir(path.parent, strict=True)


def mode_or_default(mode: int | None) -> int:
    return DEFAULT_FILE_MODE if mode is None else mode


def now() -> str:
    return datetime.now(UTC).isoformat(timespec="milliseconds")
