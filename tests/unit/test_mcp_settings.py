"""The MCP run tools say no run setting again: run_start's settings have RunSettings' defaults and
descriptions, and a run an assistant starts without settings is driven with RunSettings' defaults."""

from __future__ import annotations

from pathlib import Path
from typing import Any

import pytest

from dftune import mcp_server as m
from dftune.cli import tuning
from dftune.core.domain.run import DEFAULT_SETTINGS, RunResult, RunSettings
from dftune.mcp_server import run_tools
from tests.cli_inproc import dftune

TOY = Path(__file__).resolve().parents[1] / "graph" / "toy" / "workload.toml"


def test_run_start_takes_each_settings_default_and_description_from_run_settings() -> None:
    schema = m.tools()["run_start"].params.model_json_schema()["properties"]
    shared = set(schema) & set(RunSettings.model_fields)
    assert shared >= {"mode", "max_experiments", "replicates", "model", "force"}
    for name in shared:
        field = RunSettings.model_fields[name]
        assert schema[name].get("default") == field.default, f"{name}: {schema[name].get('default')!r}"
        assert schema[name]["description"] == field.description, name


@pytest.mark.parametrize("given", [{}, {"max_experiments": 1, "mode": "interactive", "force": True}])
def test_a_run_started_over_mcp_is_driven_with_the_models_defaults(
    monkeypatch: pytest.MonkeyPatch, given: dict[str, Any]
) -> None:
    """The driver's command line, run through `dftune run`, gives the settings RunSettings gives."""
    argv: list[list[str]] = []
    monkeypatch.setattr(run_tools, "spawn_driver", lambda run_id, args: argv.append(args))
    monkeypatch.setattr(run_tools, "_waited", lambda run_id, wait_s: {"run_id": run_id})
    m.call("run_start", {"spec": str(TOY), "wait_s": 0, **given})
    settings: list[RunSettings] = []

    def single_run(spec: Path, s: RunSettings, *_: Any) -> RunResult:
        settings.append(s)
        return RunResult(run_id="r", status="completed", run_dir="r")

    monkeypatch.setattr(tuning, "_single_run", single_run)
    res = dftune(*argv[0], "--json")
    assert res.returncode == 0, res.stderr
    assert settings == [DEFAULT_SETTINGS.model_copy(update=given)]
