"""``dftune history`` names the experiment of every step (opt2 WORKERS=4) and marks a replay's fork."""

from __future__ import annotations

from typing import Any

from rich.console import Console

from dftune.graphs.runs import _branches, _experiment_label
from dftune.tools.report.console import RunRenderer


def _row(cid: str, parent: str | None, step: int, experiment: str = "") -> dict[str, Any]:
    return {
        "checkpoint_id": cid,
        "parent_id": parent,
        "step": step,
        "source": "loop",
        "node": "verify",
        "time": "2026-12-01T23:10:21",
        "next": ["record"],
        "status": "running",
        "experiments": 0,
        "decisions": [],
        "tokens_spent": 0,
        "experiment": experiment,
    }


def test_the_experiment_of_a_step() -> None:
    exp = {"iteration": 2, "proposal_id": "WORKERS=4"}
    assert _experiment_label({"experiments": [exp]}) == "opt2 WORKERS=4"
    assert _experiment_label({"experiments": [exp], "current": "PREFETCH=2"}) == "next: PREFETCH=2"
    assert _experiment_label({"experiments": [exp], "current": "WORKERS=4"}) == "opt2 WORKERS=4"
    assert _experiment_label({}) == ""


def test_a_fork_and_its_steps_are_marked() -> None:
    rows = [
        _row("a", None, 0),
        _row("b", "a", 1),
        _row("c", "b", 2),
        _row("d", "c", 3),
        _row("e", "b", 2),
        _row("f", "e", 3),
        _row("g", "f", 4),
    ]
    out = [r["branch"] for r in _branches(rows)]
    assert out == [
        "main",
        "main",
        "main",
        "main",
        "fork 1 (from step 1)",
        "fork 1 (from step 1)",
        "fork 1 (from step 1)",
    ]


def test_the_history_table_shows_experiment_and_branch_columns() -> None:
    rows = _branches(
        [_row("a", None, 0), _row("b", "a", 1, "opt1 WORKERS=2"), _row("c", "a", 1, "opt2 WORKERS=4")]
    )
    c = Console(width=200, record=True, color_system=None)
    RunRenderer(c).render_history(rows)
    text = c.export_text()
    assert "experiment" in text and "opt2 WORKERS=4" in text
    assert "fork 1 (from step 0)" in text
    one = Console(width=200, record=True, color_system=None)
    RunRenderer(one).render_history(_branches([_row("a", None, 0), _row("b", "a", 1)]))
    assert "branch" not in one.export_text()  # one branch: nothing to mark
