"""One settings model for a run: declared, defaulted and validated once (RunSettings), with the
precedence command line > campaign file > default applied in one place."""

from __future__ import annotations

from pathlib import Path

import pytest

from dftune.core.domain.run import DEFAULT_SETTINGS, REPLAYABLE_FIELDS, LLMSettings, RunSettings, TuningState
from dftune.graphs.campaign import CampaignError, CampaignFile, load_campaign_file
from dftune.graphs.runs import RunError, run_settings_of


def test_the_state_takes_its_defaults_from_the_settings_model() -> None:
    state = TuningState(run_id="r", spec_path="s.toml")
    assert state.settings == DEFAULT_SETTINGS
    fields = set(TuningState.model_fields)
    assert set(RunSettings.model_fields) <= fields, "every run setting is a state input"
    # declared_only acts when the run starts (its levers are drafted then): a replay cannot change it
    assert set(REPLAYABLE_FIELDS) == set(RunSettings.model_fields) - {"llm", "declared_only"}


def test_precedence_is_command_line_then_file_then_default(tmp_path: Path) -> None:
    f = tmp_path / "night.toml"
    f.write_text('workloads = ["a.toml"]\nmax_experiments = 3\nmodel = "rules"\nreplicates = 4\n')
    file, _ = load_campaign_file(f)
    s = run_settings_of(file, {"max_experiments": 9})
    assert (s.max_experiments, s.replicates, s.token_budget) == (9, 4, DEFAULT_SETTINGS.token_budget)
    assert run_settings_of(file, {}).max_experiments == 3
    # a value the command line gives explicitly wins even when it equals the default
    assert run_settings_of(file, {"max_experiments": DEFAULT_SETTINGS.max_experiments}).max_experiments == 6


def test_a_typo_or_a_bad_value_is_one_line_not_a_silent_default() -> None:
    with pytest.raises(RunError, match="not a run setting: max_experimnets"):
        run_settings_of(None, {"max_experimnets": 2})
    with pytest.raises(RunError, match="--max-experiments -1"):
        run_settings_of(None, {"max_experiments": -1})
    with pytest.raises(RunError, match="--mode 'nightly'"):
        run_settings_of(None, {"mode": "nightly"})


def test_a_campaign_file_accepts_every_run_setting_and_refuses_unknown_keys(tmp_path: Path) -> None:
    f = tmp_path / "night.toml"
    f.write_text('workloads = ["a.toml"]\nretry_known = true\ntoken_budget = 1000\n')
    file, specs = load_campaign_file(f)
    assert file.retry_known and file.token_budget == 1000 and specs == [tmp_path / "a.toml"]
    f.write_text('workloads = ["a.toml"]\nmax_experiment = 2\n')
    with pytest.raises(CampaignError, match="unknown key 'max_experiment'"):
        load_campaign_file(f)
    assert issubclass(CampaignFile, RunSettings)


def test_settings_survive_the_campaign_record_round_trip() -> None:
    s = run_settings_of(None, {"max_experiments": 2, "llm": LLMSettings(timeout_s=5.0), "retry_known": True})
    stored = s.model_dump(mode="json")  # what a campaign's meta keeps for its members
    assert RunSettings.layered(stored) == s
    # older campaign records kept "llm": null: the member then runs with the defaults
    assert RunSettings.layered({**stored, "llm": None}).llm == LLMSettings()
