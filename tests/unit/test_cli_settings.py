"""`dftune run` says no run setting again: every RunSettings field has an option whose help, shown
default and (a chat-model setting) environment variable are the model's, and an option left out
leaves the model's default (or the campaign file's) to decide."""

from __future__ import annotations

import json
from pathlib import Path
from typing import Any

import pytest
import typer.main
from typer.core import TyperOption

from dftune.agents.reasoner.transport import SETTINGS_ENV
from dftune.cli import app, tuning
from dftune.core.domain.run import DEFAULT_SETTINGS, LLMSettings, RunResult, RunSettings
from tests.cli_inproc import dftune

TOY = Path(__file__).resolve().parents[1] / "graph" / "toy" / "workload.toml"


def _field(name: str) -> Any:
    return RunSettings.model_fields.get(name) or LLMSettings.model_fields[name]


def _setting_options() -> dict[str, TyperOption]:
    run = typer.main.get_command(app).commands["run"]  # type: ignore[attr-defined]
    names = set(RunSettings.model_fields) | set(LLMSettings.model_fields)
    return {p.name: p for p in run.params if isinstance(p, TyperOption) and p.name in names}


def test_every_run_setting_has_an_option_that_adds_no_default_of_its_own() -> None:
    options = _setting_options()
    assert set(RunSettings.model_fields) - {"llm"} <= set(options), "a run setting without an option"
    for name, opt in options.items():
        if opt.is_flag:  # a flag can only turn on what the model leaves off
            assert opt.default is False and _field(name).default is False, name
        else:  # not given: the campaign file's value, then the model's default
            assert opt.default is None, f"--{name} has a default of its own: {opt.default!r}"


def test_help_shows_the_models_description_default_and_environment_variable() -> None:
    res = dftune("run", "--help", env={"COLUMNS": "400", "TERMINAL_WIDTH": "400"})
    assert res.returncode == 0, res.stderr
    lines = res.stdout.splitlines()
    for name, opt in _setting_options().items():
        flag = opt.opts[0]
        block = " ".join(ln.strip(" │") for ln in _option_block(lines, flag))
        field = _field(name)
        assert field.description and field.description in block, f"{flag}: {block}"
        default = field.get_default(call_default_factory=True)
        if default is not None and not opt.is_flag:
            shown = f"{default:g}" if isinstance(default, float) else str(default)
            assert f"[default: ({shown})]" in block, f"{flag}: {block}"
        if name in LLMSettings.model_fields:
            assert f"[env var: {SETTINGS_ENV[name]}]" in block, f"{flag}: {block}"


def _option_block(lines: list[str], flag: str) -> list[str]:
    """The help lines of one option: its own line and the continuation lines under it."""
    start = next(i for i, ln in enumerate(lines) if ln.strip(" │").startswith(flag + " "))
    end = start + 1
    while end < len(lines) and not lines[end].strip(" │").startswith(("-", "╰")):
        end += 1
    return lines[start:end]


def test_the_environment_variables_are_the_llm_settings_fields() -> None:
    assert set(SETTINGS_ENV) == set(LLMSettings.model_fields)
    assert SETTINGS_ENV["timeout_s"] == "DFTUNE_LLM_TIMEOUT_S"  # a name users set: it must not drift


@pytest.fixture
def started(monkeypatch: pytest.MonkeyPatch) -> list[RunSettings]:
    """The settings `dftune run TOY` starts its run with (the run itself is not driven)."""
    seen: list[RunSettings] = []

    def single_run(spec: Path, settings: RunSettings, *_: Any) -> RunResult:
        seen.append(settings)
        return RunResult(run_id="r", status="completed", run_dir="r")

    monkeypatch.setattr(tuning, "_single_run", single_run)
    return seen


def test_a_run_without_options_runs_with_the_models_defaults(started: list[RunSettings]) -> None:
    res = dftune("run", str(TOY), "--json")
    assert res.returncode == 0, res.stderr
    assert json.loads(res.stdout)["status"] == "completed"
    assert started == [DEFAULT_SETTINGS]


def test_options_and_environment_variables_reach_the_settings(
    started: list[RunSettings], monkeypatch: pytest.MonkeyPatch
) -> None:
    monkeypatch.setenv(SETTINGS_ENV["retries"], "4")
    res = dftune("run", str(TOY), "--json", "--max-experiments", "2", "--llm-timeout", "5", "--force")
    assert res.returncode == 0, res.stderr
    (s,) = started
    assert (s.max_experiments, s.force, s.llm.timeout_s, s.llm.retries) == (2, True, 5.0, 4)
    assert (
        s.model_copy(update={"max_experiments": 6, "force": False, "llm": LLMSettings()}) == DEFAULT_SETTINGS
    )


def test_a_value_the_model_refuses_is_one_line(started: list[RunSettings]) -> None:
    res = dftune("run", str(TOY), "--max-experiments", "-1")
    assert res.returncode == 2 and not started
    assert (
        res.stderr.strip()
        == "dftune: error: --max-experiments -1: Input should be greater than or equal to 0"
    )
