"""A damaged checkpoint file (cut short, overwritten, not SQLite at all) is one line naming it and exit
2, never "internal error: DatabaseError: database disk image is malformed" (the hostile round's
`head -c 100` over runs/X/checkpoints.sqlite)."""

from __future__ import annotations

from pathlib import Path

import pytest

from dftune.graphs.checkpointer import CHECKPOINT_FILE, CheckpointDamaged, open_checkpointer
from dftune.tools.session.workspace import Workspace
from tests.cli_inproc import dftune


def _saved(path: Path) -> bytes:
    saver = open_checkpointer(path)
    saver.setup()
    saver.conn.close()
    return path.read_bytes()


def _damaged(run_id: str, how: str) -> Path:
    ws = Workspace()
    ws.create_run(run_id, "toy")
    path = ws.run_dir(run_id) / CHECKPOINT_FILE
    data = _saved(path)
    for extra in path.parent.glob(CHECKPOINT_FILE + "-*"):  # no WAL left to repair it from
        extra.unlink()
    if how == "cut":
        path.write_bytes(data[:100])
    elif how == "garbage":
        path.write_bytes(b"\x5a" * 5000)
    else:  # the first page intact, the tables' pages overwritten: found when the states are read
        path.write_bytes(data[:4096] + b"\xff" * (len(data) - 4096))
    return path


@pytest.mark.parametrize("how", ["cut", "garbage", "pages"])
def test_a_damaged_checkpoint_file_is_one_error_naming_it(how: str) -> None:
    path = _damaged("x", how)
    with pytest.raises(CheckpointDamaged, match="not a checkpoint database, or damaged") as info:
        saver = open_checkpointer(path)
        try:
            saver.get_tuple({"configurable": {"thread_id": "x"}})
        finally:
            saver.conn.close()
    assert str(path) in str(info.value)


@pytest.mark.parametrize("command", ["history", "resume", "approve"])
def test_the_commands_that_read_saved_states_refuse_a_damaged_file_in_one_line(command: str) -> None:
    path = _damaged("x", "cut")
    res = dftune(command, "x")
    assert res.returncode == 2, res.stderr
    assert "internal error" not in res.stderr and len(res.stderr.strip().splitlines()) == 1
    assert str(path) in res.stderr and "not a checkpoint database, or damaged" in res.stderr
