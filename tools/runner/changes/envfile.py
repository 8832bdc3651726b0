"""L2: the iteration's ``opt_l2_env.sh`` (``export NAME='value'`` lines, sourced before every run)
and the env change's effect on it."""

from __future__ import annotations

import os
import re
import shlex
from pathlib import Path
from typing import Any

from dftune.tools.runner.changes.effect import (
    Effect,
    Prepared,
    b64,
    mode_or_default,
    read_regular,
    sha,
    unb64,
    unlink,
    write_file,
)
from dftune.tools.runner.changes.models import ENV_NAME_RE, ChangeError, EnvChange, EnvUndo

ENV_FILE_NAME = "opt_l2_env.sh"
ENV_FILE_HEADER = (
    "# dftune L2 settings for this iteration: source this file before every run.\n"
    "# Written by dftune (tools/runner/changes); every change is journaled and reversible.\n"
)


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
            if not eq or not ENV_NAME_RE.match(name):
                raise ChangeError(f"{p}:{lineno}: not an assignment: {line!r}")
            out[name] = value
    return out


def _env_path(change: EnvChange) -> Path:
    path = Path(os.path.abspath(change.env_file))
    if not path.parent.is_dir():
        raise ChangeError(f"{path.parent} (the folder of the env file) does not exist")
    if path.is_symlink():
        raise ChangeError(f"{path} is a symlink; dftune only writes regular files")
    return path


def _prepare_env(change: EnvChange) -> Prepared:
    path = _env_path(change)
    before, mode = read_regular(path)
    after = render_env_file(before, change.variables)
    undo = EnvUndo(
        path=str(path),
        before_b64=None if before is None else b64(before),
        before_mode=mode,
        after_sha256=sha(after),
    )
    return Prepared(undo, {str(path): after})


def _execute_env(change: EnvChange, prep: Prepared) -> dict[str, Any]:
    assert isinstance(prep.undo, EnvUndo)
    path = Path(prep.undo.path)
    after = prep.contents[str(path)]
    assert after is not None
    write_file(path, after, mode_or_default(prep.undo.before_mode))
    return {"env_file": str(path), "variables": change.variables}


def _probe_env(undo: EnvUndo) -> tuple[str, dict[str, Any]]:
    now, _ = read_regular(Path(undo.path))
    if now is not None and sha(now) == undo.after_sha256:
        return "after", {}
    before = None if undo.before_b64 is None else unb64(undo.before_b64)
    if now == before:
        return "before", {}
    return "conflict", {"conflicts": [undo.path]}


def _restore_env(undo: EnvUndo) -> dict[str, Any]:
    path = Path(undo.path)
    if path.is_symlink():
        raise ChangeError(f"{path} became a symlink; not restoring through it")
    if undo.before_b64 is None:
        unlink(path)
        return {"env_file": str(path), "restored": "removed (absent before)"}
    write_file(path, unb64(undo.before_b64), mode_or_default(undo.before_mode))
    return {"env_file": str(path), "restored": "previous content"}


def _resources_env(change: EnvChange, undo: EnvUndo) -> set[str]:
    return {f"file:{undo.path}"}


ENV_EFFECT = Effect(
    prepare=_prepare_env,
    execute=_execute_env,
    probe=lambda change, undo: _probe_env(undo),
    restore=lambda change, undo: _restore_env(undo),
    resources=_resources_env,
)
