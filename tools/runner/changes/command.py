"""L3: a system command (argv, never a shell string), the value it changes read first, and its rollback.

The rollback template may use the captured value as ``{current}``. Commands run through the
one process runner (``core.process.run_command``): own process group, hard timeout.
"""

from __future__ import annotations

import json
from typing import Any

from dftune.core.process import run_command
from dftune.tools.runner.changes.effect import Effect, EffectFailed, Prepared
from dftune.tools.runner.changes.models import ChangeError, CommandChange, CommandUndo


def _read_value(change: CommandChange) -> str:
    res = run_command(change.read_current, timeout_s=change.timeout_s, cwd=change.cwd)
    if not res.ok:
        raise ChangeError(f"{change.id}: read_current failed ({res.reason()})")
    return res.stdout.strip()


def render_rollback(template: list[str], current: str) -> list[str]:
    """The rollback argv with ``{current}`` replaced by the captured value."""
    return [arg.replace("{current}", current) for arg in template]


def _prepare_command(change: CommandChange) -> Prepared:
    previous = _read_value(change)  # read-only; nothing touched yet
    return Prepared(CommandUndo(previous=previous, rollback_argv=render_rollback(change.rollback, previous)))


def _execute_command(change: CommandChange, prep: Prepared) -> dict[str, Any]:
    res = run_command(change.argv, timeout_s=change.timeout_s, cwd=change.cwd)
    if not res.ok:
        raise EffectFailed(f"{change.id}: {res.reason()}", {"command": res.summary()})
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
        raise EffectFailed(f"{change.id}: rollback failed ({res.reason()})", detail)
    value = _read_value(change)
    detail["value_after"] = value
    if value != undo.previous:
        raise EffectFailed(
            f"{change.id}: rollback ran but read_current prints "
            f"{value!r}, not the previous {undo.previous!r}",
            detail,
        )
    return detail


def _resources_command(change: CommandChange, undo: CommandUndo) -> set[str]:
    return {"cmd:" + json.dumps(change.read_current)}


COMMAND_EFFECT = Effect(
    prepare=_prepare_command,
    execute=_execute_command,
    probe=_probe_command,
    restore=_restore_command,
    resources=_resources_command,
)
