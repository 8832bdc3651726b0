"""The MCP run tools against the fourth hostile round: a spec that is not a regular file, a spec
outside the folders the person allowed, three concurrent starts of one run id, and an MCP
approval of a privileged change."""

from __future__ import annotations

import os
import threading
import time
from pathlib import Path
from typing import Any

import pytest

from dftune import mcp_server as m
from dftune.graphs.approval import _answer_for
from dftune.mcp_server import run_tools
from tests.unit.test_cli_glance import SUDO
from tests.unit.test_mcp_run_tools import _refused

TOY = Path(__file__).resolve().parents[1] / "graph" / "toy" / "workload.toml"


@pytest.fixture
def allowed(tmp_path: Path) -> Path:
    run_tools.allow_specs_from([tmp_path, TOY.parent])
    yield tmp_path
    run_tools.allow_specs_from([])


def test_a_spec_that_is_no_regular_file_is_refused_at_once(allowed: Path) -> None:
    os.mkfifo(allowed / "fifo.toml")
    started = time.monotonic()
    _refused("run_start", {"spec": str(allowed / "fifo.toml")}, "not a regular file")
    (allowed / "zero.toml").symlink_to("/dev/zero")  # a link is where it leads: outside the folder
    _refused("run_start", {"spec": str(allowed / "zero.toml")}, "outside the folders")
    assert time.monotonic() - started < 5


def test_a_spec_outside_the_allowed_folders_is_refused(allowed: Path, tmp_path_factory: Any) -> None:
    elsewhere = tmp_path_factory.mktemp("scratch") / "evil.toml"
    elsewhere.write_text('name = "evil"\ncommand = ["sh", "-c", "touch /tmp/pwned"]\n')
    _refused("run_start", {"spec": str(elsewhere)}, "dftune mcp --allow DIR")


def test_one_run_id_is_started_by_one_call(allowed: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    started: list[str] = []

    def fake_start(run_id: str, p: Any, path: Path) -> None:
        time.sleep(0.2)  # a driver takes a while to make the run's folder
        started.append(run_id)
        from dftune.tools.session.workspace import Workspace

        Workspace().create_run(run_id, "toy")

    monkeypatch.setattr(run_tools, "_start_driver", fake_start)
    monkeypatch.setattr(run_tools, "_waited", lambda run_id, wait_s: {"run_id": run_id})
    results: list[str] = []

    def start() -> None:
        try:
            m.call("run_start", {"spec": str(TOY), "run_id": "dup"})
            results.append("started")
        except m.ToolFailure as exc:
            results.append(str(exc))

    threads = [threading.Thread(target=start) for _ in range(3)]
    for t in threads:
        t.start()
    for t in threads:
        t.join()
    assert started == ["dup"]
    assert results.count("started") == 1
    assert sum("already exists" in r for r in results) == 2


def test_a_privileged_change_is_approved_in_a_terminal_only() -> None:
    answer, why = _answer_for(SUDO, {"decision": "approve", "channel": "mcp"})
    assert answer is None and "approved in a terminal only" in why
    answer, _ = _answer_for(SUDO, {"decision": "approve", "channel": "terminal"})
    assert answer is not None and answer.channel == "terminal"
    answer, _ = _answer_for(SUDO, {"decision": "reject", "reason": "no", "channel": "mcp"})
    assert answer is not None  # refusing one through MCP is fine


def test_run_answer_refuses_to_approve_a_privileged_change(monkeypatch: pytest.MonkeyPatch) -> None:
    from tests.unit.test_cli_glance import RUN, SUDO_PENDING

    waiting = RUN.model_copy(update={"status": "awaiting_approval", "pending": [SUDO_PENDING]})
    monkeypatch.setattr(run_tools, "_idle", lambda run_id: None)
    monkeypatch.setattr("dftune.graphs.runs.run_result", lambda run_id, ws=None: waiting)
    spawned: list[list[str]] = []
    monkeypatch.setattr(run_tools, "spawn_driver", lambda run_id, args: spawned.append(args))
    _refused("run_answer", {"run_id": RUN.run_id, "decision": "approve"}, "approved in a terminal only")
    assert spawned == []


def test_two_servers_on_one_home_start_a_run_id_once(allowed: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    """Another server's fresh claim holds the id; a claim whose server is gone is stale."""
    import json

    spawned: list[list[str]] = []
    monkeypatch.setattr(run_tools, "spawn_driver", lambda run_id, args: spawned.append(args))
    monkeypatch.setattr(run_tools, "_waited", lambda run_id, wait_s: {"run_id": run_id})
    claim = run_tools._driver_files("twin")[0].with_suffix(".claim")
    claim.write_text(json.dumps({"pid": os.getppid(), "at": time.time()}))  # a live other server
    _refused("run_start", {"spec": str(TOY), "run_id": "twin"}, "already exists")
    assert spawned == []
    gone = 2**22 + 12345  # no such process
    claim.write_text(json.dumps({"pid": gone, "at": time.time()}))
    assert m.call("run_start", {"spec": str(TOY), "run_id": "twin"})["started"]
    assert len(spawned) == 1 and json.loads(claim.read_text())["pid"] == os.getpid()


def test_an_error_never_echoes_a_huge_argument(allowed: Path) -> None:
    from dftune.mcp_server.registry import ToolFailure

    with pytest.raises(ToolFailure) as caught:
        m.call("run_start", {"spec": str(allowed / ("x" * 5_000_000))})
    assert len(str(caught.value)) < 1_500
