"""The run tools' refusals in-process: everything `dftune run` / `dftune approve` would refuse is
refused before a driver is started, in one line naming the tool and the problem."""

from __future__ import annotations

from pathlib import Path

import pytest

from dftune import mcp_server as m
from dftune.tools.session.workspace import Workspace

TOY = Path(__file__).resolve().parents[1] / "graph" / "toy" / "workload.toml"


def _refused(name: str, args: dict[str, object], match: str) -> str:
    with pytest.raises(m.ToolFailure) as info:
        m.call(name, args)
    text = str(info.value)
    assert text.startswith(f"{name}: ") and "\n" not in text and match in text, text
    return text


def test_run_start_refuses_what_the_command_line_refuses(tmp_path: Path) -> None:
    _refused("run_start", {"spec": str(tmp_path / "missing.toml")}, "missing.toml")
    bad = tmp_path / "bad.toml"
    bad.write_text('name = "x"\ncommand = ["true"]\nreplicatez = 3\n')
    _refused("run_start", {"spec": str(bad)}, "bad.toml")
    _refused("run_start", {"spec": str(TOY), "time_budget": "tomorrow-ish"}, "tomorrow-ish")
    _refused("run_start", {"spec": str(TOY), "run_id": "../escape"}, "run id")
    _refused("run_start", {"spec": str(TOY), "max_experiments": -1}, "max_experiments")
    Workspace().create_run("taken", "toy")
    _refused("run_start", {"spec": str(TOY), "run_id": "taken"}, "already exists")
    assert not (Path(Workspace().root) / "missing").exists()
    assert [r.id for r in Workspace().list_runs()] == ["taken"]  # nothing was started


def test_run_answer_takes_only_an_exact_decision_and_only_for_a_waiting_run() -> None:
    for bad in ("yes", "true", "Approve", ""):
        text = _refused("run_answer", {"run_id": "any", "decision": bad}, "nothing was applied")
        assert '{"decision": "approve"}' in text
    _refused("run_answer", {"run_id": "nope", "decision": "approve"}, "no run 'nope'")
    Workspace().create_run("idle", "toy")
    _refused("run_answer", {"run_id": "idle", "decision": "reject", "reason": "no"}, "idle")


def test_run_show_list_and_report_of_runs_that_do_not_exist_or_have_not_finished() -> None:
    assert m.call("run_list", {})["runs_total"] == 0
    _refused("run_show", {"run_id": "nope"}, "no run 'nope'")
    Workspace().create_run("fresh", "toy")
    _refused("run_report", {"run_id": "fresh"}, "has not finished")
    listed = m.call("run_list", {})
    assert [r["id"] for r in listed["runs"]] == ["fresh"] and listed["campaigns"] == []


def test_local_papers_search_is_offline_and_says_when_nothing_is_ingested(tmp_path: Path) -> None:
    got = m.call("session_search_local_papers", {"query": "small reads on lustre"})
    assert got["papers"] == [] and "dftune papers ingest" in got["note"]
    _refused(
        "session_search_local_papers", {"query": "x", "papers_dir": str(tmp_path / "none")}, "not a directory"
    )


def test_analyze_keeps_the_process_heatmap_within_max_rows(shared_traces: Path) -> None:
    got = m.call(
        "analyze",
        {"paths": [str(shared_traces / "dlio-unet3d-8ranks-legacy")], "views": ["time"], "max_rows": 3},
    )
    heat = got["views"]["time"]["heatmap"]
    assert heat["ranks_total"] == 8 and heat["ranks_shown"] == 3
    assert len(heat["ranks"]) == len(heat["io_time_s"]) == len(heat["read_bytes"]) == 3
