"""One L2 environment on top of another: the kept settings plus a new change, with ROMIO hint files merged.

An arm runs with the incumbent's kept environment and one new change. For plain variables the
newer value wins. A ROMIO hint file does not layer that way: ``ROMIO_HINTS`` names one file, and
ROMIO reads only that file at MPI_File_open (ROMIO Users Guide, "system hints"), so a second hint
file in place of the first silently drops every kept hint. Here the two files are merged into a
third, key by key (the newer proposal wins a conflict), written beside the new one under a name
derived from its content, so layering the same kept changes again names the same file.

Every value the newer change replaced is returned, so the run can say which one replaced which.
"""

from __future__ import annotations

import hashlib
from dataclasses import dataclass, field
from pathlib import Path

from dftune.core.facts.stacks import env_hint_prefixes
from dftune.tools.runner.changes.models import ChangeError

HINTS_VAR = "ROMIO_HINTS"
COMBINED_PREFIX = "combined-"


@dataclass(frozen=True)
class Replaced:
    """A value the newer change replaced: ``name`` is a hint key (hint file or MPI_Info variable)
    or an environment variable."""

    name: str
    old: str
    new: str

    def __str__(self) -> str:
        return f"{self.name}={self.new} replaced {self.name}={self.old}"


@dataclass
class Layered:
    """The environment an arm runs with and what the newer change replaced in it."""

    env: dict[str, str]
    replaced: list[Replaced] = field(default_factory=list)
    #: the ROMIO hints the arm's hint file asks for (empty when it names none)
    hints: dict[str, str] = field(default_factory=dict)


def hint_file_text(hints: dict[str, str]) -> str:
    """ROMIO's hint file format: one ``key value`` pair per line (ROMIO Users Guide, system hints)."""
    return "".join(f"{k} {v}\n" for k, v in hints.items())


def read_hint_file(path: str | Path) -> dict[str, str]:
    """The ``key value`` pairs of a ROMIO hint file (blank lines and ``#`` comments aside).

    ROMIO itself skips a line it cannot parse; here that is an error naming the file and line,
    since a merged file built from it would otherwise lose the hint without a word."""
    p = Path(path)
    try:
        text = p.read_text(encoding="utf-8")
    except (OSError, UnicodeDecodeError) as exc:
        raise ChangeError(f"{p}: cannot read the ROMIO hint file: {exc}") from exc
    out: dict[str, str] = {}
    for lineno, line in enumerate(text.splitlines(), 1):
        body = line.strip()
        if not body or body.startswith("#"):
            continue
        key, _, value = body.partition(" ")
        if not value.strip():
            raise ChangeError(f"{p}:{lineno}: not a 'key value' hint line: {line!r}")
        out[key] = value.strip()
    return out


def combined_hint_path(folder: Path, hints: dict[str, str]) -> Path:
    """Where the merged hint file of ``hints`` lives: named by its content, so it is found again."""
    digest = hashlib.sha256(hint_file_text(hints).encode("utf-8")).hexdigest()[:16]
    return folder / f"{COMBINED_PREFIX}{digest}.txt"


def _shown(name: str) -> str:
    """A variable programs turn into an MPI_Info hint (IOR's), shown by its hint key."""
    prefix = next((p for p in env_hint_prefixes() if name.startswith(p)), "")
    return name.removeprefix(prefix)


def layer_env(base: dict[str, str], new: dict[str, str], *, write: bool = True) -> Layered:
    """``new`` on top of ``base``: later values win, and two ROMIO hint files become one merged file.

    ``write=False`` only names the merged file (checking an arm against what kept changes derive)."""
    env = {**base, **new}
    replaced: dict[str, Replaced] = {}
    for name, value in new.items():
        old = base.get(name)
        if name != HINTS_VAR and old is not None and old != value:
            replaced.setdefault(_shown(name), Replaced(_shown(name), old, value))
    hints: dict[str, str] = {}
    old_file, new_file = base.get(HINTS_VAR), new.get(HINTS_VAR)
    if old_file and new_file and old_file != new_file:
        kept, added = read_hint_file(old_file), read_hint_file(new_file)
        for key, value in added.items():
            if key in kept and kept[key] != value:
                replaced.setdefault(key, Replaced(key, kept[key], value))
        hints = {**kept, **added}
        if hints != added:  # the new file alone would drop a kept hint
            path = combined_hint_path(Path(new_file).parent, hints)
            if write:
                text = hint_file_text(hints)
                if not path.is_file() or path.read_text(encoding="utf-8") != text:
                    path.write_text(text, encoding="utf-8")
            env[HINTS_VAR] = str(path)
    elif env.get(HINTS_VAR) and Path(env[HINTS_VAR]).is_file():
        hints = read_hint_file(env[HINTS_VAR])
    return Layered(env=env, replaced=list(replaced.values()), hints=hints)


def replaced_text(replaced: list[Replaced]) -> str:
    """One clause for a log line: which value replaced which (empty when none did)."""
    return "; ".join(str(r) for r in replaced)
