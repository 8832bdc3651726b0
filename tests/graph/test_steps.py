"""``replay --checkpoint`` also takes the step number
``dftune history`` shows (and refuses an ambiguous one)."""

from __future__ import annotations

import pytest

from dftune.graphs.runs import RunError, history, replay_run, start_run
from dftune.graphs.steps import resolve_checkpoint
from tests.graph.conftest import TOY, toy_measurer


def test_a_step_number_names_its_checkpoint_until_a_fork_shares_it() -> None:
    script = toy_measurer()
    start_run(TOY, max_experiments=0, run_id="toy-steps", measurer=script)
    rows = history("toy-steps")
    step = next(r for r in rows if r["node"] == "diagnoser")
    assert resolve_checkpoint("toy-steps", str(step["step"])) == step["checkpoint_id"]
    assert resolve_checkpoint("toy-steps", step["checkpoint_id"]) == step["checkpoint_id"]
    with pytest.raises(RunError, match="no checkpoint at step 999"):
        resolve_checkpoint("toy-steps", "999")
    # a replay from that step is a run of its own: the original's steps still name one
    # checkpoint each, and the replay's steps up to the fork are the same checkpoints
    fork = resolve_checkpoint("toy-steps", str(step["step"]))
    replayed = replay_run("toy-steps", fork, {"max_experiments": "0"}, measurer=script)
    later = max(r["step"] for r in rows)
    assert resolve_checkpoint("toy-steps", str(later)) == rows[-1]["checkpoint_id"]
    assert resolve_checkpoint(replayed.run_id, str(step["step"])) == fork
