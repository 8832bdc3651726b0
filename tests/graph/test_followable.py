"""A run a person can follow: approve answers with a receipt first (not the waiting line again),
resume and replay open with where they start, history names experiments and marks the fork."""

from __future__ import annotations

from pathlib import Path

from dftune.graphs.runs import approve_run, history, replay_run, resume_run, start_run
from tests.graph.conftest import TOY, toy_measurer


def test_approve_opens_with_a_receipt_and_the_approval_is_recorded() -> None:
    waits: list[tuple[str, str]] = []
    script = toy_measurer()
    first = start_run(
        TOY,
        mode="interactive",
        max_experiments=1,
        run_id="toy-receipt",
        progress=lambda node, msg: waits.append((node, msg)),
        measurer=script,
    )
    assert first.status == "awaiting_approval"
    assert [m for n, m in waits if n == "approval"] == [
        "waiting for a person: dftune approve toy-receipt [--reject]"
    ]
    notes: list[tuple[str, str]] = []
    done = approve_run(
        "toy-receipt",
        reason="looks safe",
        progress=lambda node, msg: notes.append((node, msg)),
        measurer=script,
    )
    node, msg = notes[0]
    assert node == "approve" and msg.startswith(f"approved {first.pending[0].proposal_id}")
    assert "because 'looks safe'" in msg and "continuing run toy-receipt at step" in msg
    assert not any(m.startswith("waiting for a person") for _, m in notes)
    assert done.status == "completed" and done.report is not None
    report = Path(done.report).read_text()
    assert "## Approvals" in report and "looks safe" in report


def test_resume_and_replay_say_where_they_start_and_history_marks_the_fork() -> None:
    script = toy_measurer()
    start_run(TOY, max_experiments=1, run_id="toy-where", measurer=script)
    notes: list[str] = []
    resume_run("toy-where", progress=lambda node, msg: notes.append(msg), measurer=script)
    assert notes[0].startswith("nothing to resume: run toy-where at step")
    rows = history("toy-where")
    assert any(r["experiment"].startswith("opt1 ") for r in rows)
    assert {r["branch"] for r in rows} == {"main"}
    before = next(r for r in rows if r["next"] == ["choose"] and r["experiments"] == 0)
    notes.clear()
    replay_run(
        "toy-where",
        before["checkpoint_id"],
        {"max_experiments": "2"},
        progress=lambda node, msg: notes.append(msg),
        measurer=script,
    )
    assert notes[0].startswith(f"run toy-where-r1 forks run toy-where at step {before['step']}")
    assert "max_experiments=2" in notes[0] and "opt2 on" in notes[0]
    assert history("toy-where") == rows  # the original is untouched
    fork = history("toy-where-r1")
    assert {r["branch"] for r in fork} == {"run toy-where", "replay"}
