"""An assistant can ask for a run the worth-tuning gate would stop, as `dftune run --force` does."""

from __future__ import annotations

from pathlib import Path
from typing import Any

import pytest

from dftune import mcp_server as m
from dftune.mcp_server import run_tools

TOY = Path(__file__).resolve().parents[1] / "graph" / "toy" / "workload.toml"


@pytest.mark.parametrize("force", [False, True])
def test_run_start_passes_force_to_the_driver(monkeypatch: pytest.MonkeyPatch, force: bool) -> None:
    started: list[list[str]] = []

    def spawn(run_id: str, args: list[str]) -> None:
        started.append(args)

    monkeypatch.setattr(run_tools, "spawn_driver", spawn)
    monkeypatch.setattr(run_tools, "_waited", lambda run_id, wait_s: {"run_id": run_id})
    out: Any = m.call("run_start", {"spec": str(TOY), "force": force, "wait_s": 0})
    assert out["started"] and len(started) == 1
    assert ("--force" in started[0]) is force
