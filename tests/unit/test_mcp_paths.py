"""Hostile MCP paths: what a client names is confined to DFTUNE_HOME (or a run folder), links resolved."""

from __future__ import annotations

import os
from pathlib import Path

import pytest

from dftune import mcp_server as m
from dftune.core.home import dftune_home
from dftune.tools.session.workspace import Workspace


def refused(name: str, args: dict[str, object], needle: str) -> str:
    with pytest.raises(m.ToolFailure) as err:
        m.call(name, args)
    text = str(err.value)
    assert text.startswith(f"{name}: ") and "\n" not in text and needle in text, text
    return text


@pytest.mark.parametrize("how", ["absolute", "dotdot", "link-in-home", "linked-folder"])
def test_opt_kb_render_never_writes_outside_dftune_home(tmp_path: Path, how: str) -> None:
    outside = tmp_path / "outside"
    outside.mkdir()
    home = dftune_home()
    if how == "absolute":
        path = str(outside / "deep" / "evil.sh")
    elif how == "dotdot":
        path = os.path.relpath(outside / "evil.sh", home / "kb")  # relative to $DFTUNE_HOME/kb
    elif how == "link-in-home":
        (home / "kb").mkdir(exist_ok=True)
        (home / "kb" / "evil.md").symlink_to(outside / "evil.sh")
        path = str(home / "kb" / "evil.md")
    else:
        (home / "shared").symlink_to(outside, target_is_directory=True)
        path = str(home / "shared" / "sub" / "evil.sh")
    refused("opt_kb_render", {"path": path}, "outside DFTUNE_HOME")
    assert list(outside.rglob("*")) == []  # no file, no folder created out there


def test_opt_kb_render_inside_dftune_home_is_fine() -> None:
    out = m.call("opt_kb_render", {"path": "team/opt_kb.md"})
    assert Path(out["path"]) == (dftune_home() / "kb" / "team" / "opt_kb.md").resolve()
    assert m.call("opt_kb_render", {})["path"].endswith("opt_kb.md")


def test_run_ids_and_run_folders_cannot_lead_outside(tmp_path: Path) -> None:
    outside = tmp_path / "outside"
    outside.mkdir()
    ws = Workspace()
    for bad in ("../x", "/etc", "a/b", ".."):
        refused("session_reorganize_structure", {"run_id": bad, "dry_run": False}, "run id")
    (ws.root / "linked").symlink_to(outside, target_is_directory=True)
    refused("session_validate_structure", {"run_id": "linked"}, "symbolic link")
    # a run whose opt1 is a link out of it: the context search writes nothing there
    ws.create_run("r1", "w")
    (ws.run_dir("r1") / "opt1").symlink_to(outside, target_is_directory=True)
    refused(
        "session_search_optimization_context",
        {"run_id": "r1", "system": "s", "workload": "w", "iteration": 1, "online": False},
        "opt1",
    )
    # a misplaced trace in a run whose baseline/traces is a link out of it: never moved through it
    ws.create_run("r2", "w")
    run = ws.run_dir("r2")
    import shutil

    shutil.rmtree(run / "baseline" / "traces")
    (run / "baseline" / "traces").symlink_to(outside, target_is_directory=True)
    (run / "stray-0.pfw").write_text("{}\n")
    out = m.call("session_reorganize_structure", {"run_id": "r2", "dry_run": False})
    assert not any(mv["status"] == "done" and mv["action"] == "move" for mv in out["moves"]), out
    assert list(outside.rglob("*.pfw")) == []


def test_reading_traces_from_anywhere_is_allowed(shared_traces: Path) -> None:
    doc = m.call("analyze", {"paths": [str(shared_traces / "dlio-unet3d-8ranks-legacy")]})
    assert doc["events"] > 0
