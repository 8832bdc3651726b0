"""Driving runs: history, replay forks, the serializer's allow-list, the CLI's JSON contract."""

from __future__ import annotations

import json
from pathlib import Path

import pytest
from typer.testing import CliRunner

from dftune.cli import app
from dftune.core.domain.run import Pitfall
from dftune.graphs.checkpointer import serializer
from dftune.graphs.runs import RunError, history, replay_run, resume_run, start_run
from dftune.tools.session.workspace import Workspace
from tests.graph.conftest import TOY, measured_by, toy_measurer


def test_history_lists_checkpoints_and_replay_forks_without_touching_the_original(tmp_path: Path) -> None:
    script = toy_measurer()
    first = start_run(TOY, max_experiments=1, run_id="toy-run", measurer=script)
    assert first.status == "completed" and len(first.verdicts) == 1
    rows = history("toy-run")
    assert rows[0]["source"] == "input" and rows[-1]["next"] == []
    nodes = [r["node"] for r in rows]
    for node in ("installer", "diagnoser", "screen", "record", "choose", "verifier", "judge", "finalize"):
        assert node in nodes
    # fork from the first decision point, with a larger budget
    before_choose = next(r for r in rows if r["next"] == ["choose"] and r["experiments"] == 0)
    ws = Workspace()

    def files(run: str) -> dict[Path, bytes]:
        root = ws.run_dir(run)
        return {
            p.relative_to(root): p.read_bytes()
            for p in root.rglob("*")
            if p.is_file() and "sqlite" not in p.name
        }

    original = files("toy-run")
    forked = replay_run("toy-run", before_choose["checkpoint_id"], {"max_experiments": "2"}, measurer=script)
    assert forked.status == "completed" and forked.run_id == "toy-run-r1"
    assert [v.iteration for v in forked.verdicts] == [2, 3]  # numbered above the original's
    # the original run is as it was: its files, its history
    assert files("toy-run") == original
    assert history("toy-run") == rows
    # the fork names its parent in run.json, dftune runs and its report; its steps up to the
    # fork point are the original's
    info = {r.id: r for r in ws.list_runs()}
    assert info["toy-run-r1"].parent == f"toy-run at step {before_choose['step']}"
    assert info["toy-run"].parent is None
    report = (ws.run_dir("toy-run-r1") / "report.md").read_text()
    assert f"**Replay of:** run toy-run at step {before_choose['step']}" in report
    assert "max_experiments=2" in report
    fork_rows = history("toy-run-r1")
    assert {r["branch"] for r in fork_rows} == {"run toy-run", "replay"}
    inherited = [r["checkpoint_id"] for r in fork_rows if r["branch"] == "run toy-run"]
    assert inherited == [r["checkpoint_id"] for r in rows][: len(inherited)]
    assert inherited[-1] == before_choose["checkpoint_id"]
    # a second replay gets the next id; a taken id is refused before anything runs
    again = replay_run("toy-run", before_choose["checkpoint_id"], {}, measurer=script)
    assert again.run_id == "toy-run-r2"
    with pytest.raises(Exception, match="already exists"):
        replay_run("toy-run", before_choose["checkpoint_id"], {}, new_run_id="toy-run-r1", measurer=script)


def test_replay_refuses_unknown_fields_and_checkpoints() -> None:
    start_run(TOY, max_experiments=0, run_id="toy-zero", measurer=toy_measurer())
    cid = history("toy-zero")[1]["checkpoint_id"]
    with pytest.raises(RunError, match="only allow_install, force, max_experiments"):
        replay_run("toy-zero", cid, {"status": "completed"})
    with pytest.raises(RunError, match="max_experiments=many: Input should be a valid integer"):
        replay_run("toy-zero", cid, {"max_experiments": "many"})
    with pytest.raises(RunError, match="max_experiments=-2: Input should be greater than or equal to 0"):
        replay_run("toy-zero", cid, {"max_experiments": "-2"})
    with pytest.raises(RunError, match="no checkpoint"):
        replay_run("toy-zero", "1f0-not-a-checkpoint", {})
    last = history("toy-zero")[-1]["checkpoint_id"]  # the run's end: nothing follows to replay
    with pytest.raises(RunError, match="is where run toy-zero ended: nothing follows it"):
        replay_run("toy-zero", last, {})
    from dftune.tools.session.workspace import Workspace

    assert not Workspace().run_dir("toy-zero-r1").exists()  # refused before a fork was made


def test_resume_of_a_finished_run_changes_nothing() -> None:
    script = toy_measurer()
    done = start_run(TOY, max_experiments=1, run_id="toy-done", measurer=script)
    again = resume_run("toy-done", measurer=script)
    assert again.verdicts == done.verdicts and again.status == "completed"


def test_the_serializer_loads_state_models_and_nothing_else() -> None:
    from pydantic import BaseModel

    class Intruder(BaseModel):
        cmd: str = "touch /tmp/pwned"

    serde = serializer()
    kind, blob = serde.dumps_typed(Pitfall(id="x", message="m"))
    assert serde.loads_typed((kind, blob)) == Pitfall(id="x", message="m")
    kind, blob = serde.dumps_typed(Intruder())
    assert not isinstance(serde.loads_typed((kind, blob)), Intruder)


def test_cli_run_prints_one_json_document_and_approve_resumes_it(monkeypatch: pytest.MonkeyPatch) -> None:
    measured_by(monkeypatch, toy_measurer())
    runner = CliRunner()
    res = runner.invoke(
        app,
        ["run", str(TOY), "--mode", "interactive", "--run-id", "toy-cli", "--json", "--max-experiments", "1"],
    )
    assert res.exit_code == 0, res.output
    doc = json.loads(res.stdout)
    assert doc["schema"] == "dftune.run/1" and doc["status"] == "awaiting_approval"
    assert doc["pending"][0]["proposal_id"] and doc["verdicts"] == []
    res = runner.invoke(app, ["resume", "toy-cli"])
    assert res.exit_code == 2 and "waits for approval" in res.stderr
    res = runner.invoke(app, ["approve", "toy-cli", "--json"])
    doc = json.loads(res.stdout)
    assert doc["status"] == "completed" and len(doc["verdicts"]) == 1
    res = runner.invoke(app, ["history", "toy-cli", "--json"])
    assert json.loads(res.stdout)["checkpoints"]
    res = runner.invoke(app, ["approve", "toy-cli"])
    assert res.exit_code == 2 and "not waiting for an approval" in res.stderr


@pytest.mark.parametrize(
    ("args", "message"),
    [
        (["run", "missing.toml"], "missing.toml"),
        (["run", str(TOY), "--mode", "overnight"], "--mode 'overnight'"),
        (["run", str(TOY), "--model", "nonsense"], "PROVIDER:MODEL"),
        (["resume", "no-such-run"], "no run 'no-such-run'"),
        (["history", "../escape"], "run id"),
        (["replay", "no-such-run", "--checkpoint", "x"], "no run"),
    ],
)
def test_cli_bad_input_is_one_line(args: list[str], message: str) -> None:
    res = CliRunner().invoke(app, args)
    assert res.exit_code == 2, res.output
    assert message in res.stderr and len(res.stderr.strip().splitlines()) == 1


def test_a_run_keeps_its_archived_spec_when_the_original_is_edited(tmp_path: Path) -> None:
    """editing the workload after the start must not change what the run measures."""
    import shutil

    from dftune.graphs.runs import approve_run

    work = tmp_path / "wl"
    shutil.copytree(TOY.parent, work)
    spec = work / "workload.toml"
    script = toy_measurer()
    first = start_run(spec, mode="interactive", max_experiments=1, run_id="toy-archived", measurer=script)
    assert first.status == "awaiting_approval"
    spec.write_text(spec.read_text().replace('"toy.py"', '"missing.py"'))  # would fail every replicate
    started = len(script.starts)
    notes: list[str] = []
    done = approve_run("toy-archived", progress=lambda node, msg: notes.append(msg), measurer=script)
    assert done.status == "completed"
    assert [v.verdict for v in done.verdicts] != ["failed"]
    assert any("keeps using its archived copy" in n for n in notes)
    # what ran after the edit is the archived command
    after = [inv.argv for inv in script.starts[started:]]
    assert after and all(any(a.endswith("toy.py") for a in argv) for argv in after), after


def test_a_run_saved_with_another_state_shape_is_refused_with_a_clear_line(
    monkeypatch: pytest.MonkeyPatch,
) -> None:
    from dftune.graphs import runs

    start_run(TOY, max_experiments=0, run_id="toy-old", measurer=toy_measurer())
    monkeypatch.setattr(runs, "STATE_VERSION", runs.STATE_VERSION + 1)
    with pytest.raises(RunError, match=r"saved by an older dftune .* report\.md stays readable"):
        resume_run("toy-old")
    cid = history("toy-old")[1]["checkpoint_id"]
    with pytest.raises(RunError, match="cannot be resumed, approved or replayed"):
        replay_run("toy-old", cid, {})
