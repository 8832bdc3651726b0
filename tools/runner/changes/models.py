"""What the change journal records: the three kinds of change, their undo records, and its lines.

- :class:`EnvChange` (L2): environment variables, kept in the iteration's ``opt_l2_env.sh``;
- :class:`FilePatch` (L1): a unified diff applied to a copy of the source tree;
- :class:`CommandChange` (L3): a system command with the value it changes captured first.
"""

from __future__ import annotations

import re
from pathlib import Path
from typing import Annotated, Any, Literal

from pydantic import Field, field_validator

from dftune.core.errors import DftuneError
from dftune.core.model import StrictModel

JOURNAL_FORMAT = "dftune.changes/1"
#: Variables owned by the tracing harness; an L2 change must not touch them.
RESERVED_ENV = ("LD_PRELOAD",)
RESERVED_ENV_PREFIXES = ("DFTRACER_",)
DEFAULT_FILE_MODE = 0o644

State = Literal["intent", "applied", "failed", "aborted", "reverting", "reverted", "revert_failed", "manual"]
#: States in which a change is in effect (and can be reverted).
IN_EFFECT: frozenset[str] = frozenset({"applied", "revert_failed"})
#: States left behind by a crash; :meth:`Journal.recover` resolves them.
PENDING: frozenset[str] = frozenset({"intent", "reverting"})
#: Last states after which nothing of the change is in effect: applying it again is a new attempt.
RETRYABLE: frozenset[str] = frozenset({"aborted", "failed"})

ID_RE = r"^[A-Za-z0-9][A-Za-z0-9._:-]{0,127}$"
ENV_NAME_RE = re.compile(r"^[A-Za-z_][A-Za-z0-9_]*$")


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


class _ChangeBase(StrictModel):
    id: Annotated[str, Field(pattern=ID_RE)]
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
            if not ENV_NAME_RE.match(name):
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


class EnvUndo(StrictModel):
    kind: Literal["env"] = "env"
    path: str
    before_b64: str | None  # None: the file did not exist
    before_mode: int | None
    after_sha256: str


class FileUndo(StrictModel):
    path: str  # relative to the patch root, POSIX separators
    before_b64: str | None  # None: absent before (the patch creates it)
    before_mode: int | None
    after_sha256: str | None  # None: absent after (the patch deletes it)
    after_mode: int | None


class PatchUndo(StrictModel):
    kind: Literal["patch"] = "patch"
    root: str
    files: list[FileUndo]
    created_dirs: list[str]  # relative, parents first


class CommandUndo(StrictModel):
    kind: Literal["command"] = "command"
    previous: str
    rollback_argv: list[str]


Undo = Annotated[EnvUndo | PatchUndo | CommandUndo, Field(discriminator="kind")]


class JournalRecord(StrictModel):
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
