"""A misspelt spec key gets the nearest key the table accepts; a spec without [metric] says that
each run's wall time is what it measures."""

from __future__ import annotations

from pathlib import Path

import pytest

from dftune.tools.runner.spec import SpecError, load_spec

BASE = 'name = "w"\ncommand = ["true"]\n'


def _spec(tmp_path: Path, text: str) -> Path:
    p = tmp_path / "workload.toml"
    p.write_text(text)
    return p


@pytest.mark.parametrize(
    ("extra", "needle"),
    [
        ("replicats = 3\n", "unknown key 'replicats' (did you mean 'replicates'?)"),
        ("[metrc]\nkind = 'wall_time'\n", "unknown key 'metrc' (did you mean 'metric'?)"),
        ("[metric]\nknd = 'wall_time'\n", "unknown key 'metric.knd' (did you mean 'kind'?)"),
        ("[tracing]\nmod = 'off'\n", "unknown key 'tracing.mod' (did you mean 'mode'?)"),
        (
            "[[knobs]]\nname = 'A'\nkind = 'env'\nvalues = [1, 2]\ndefualt = 1\n",
            "unknown key 'knobs.0.defualt' (did you mean 'default'?)",
        ),
    ],
)
def test_a_typo_gets_the_nearest_key(tmp_path: Path, extra: str, needle: str) -> None:
    with pytest.raises(SpecError) as err:
        load_spec(_spec(tmp_path, BASE + extra))
    assert needle in str(err.value)
    assert str(err.value).startswith(str(tmp_path / "workload.toml"))


def test_a_key_like_no_other_gets_no_guess(tmp_path: Path) -> None:
    with pytest.raises(SpecError) as err:
        load_spec(_spec(tmp_path, BASE + "zzzzqqq = 1\n"))
    assert str(err.value).endswith("unknown key 'zzzzqqq'")


def test_a_spec_without_metric_says_it_measures_wall_time(tmp_path: Path) -> None:
    spec = load_spec(_spec(tmp_path, BASE))
    assert spec.metric_is_default
    assert spec.metric_label() == "wall time in seconds, lower is better (the spec has no [metric] table)"
    named = load_spec(_spec(tmp_path, BASE + "[metric]\nkind = 'wall_time'\n"))
    assert not named.metric_is_default
    assert named.metric_label() == "wall time in seconds, lower is better"
    printed = load_spec(
        _spec(
            tmp_path,
            BASE + "[metric]\nkind = 'stdout_regex'\npattern = 'MB/s (\\\\S+)'\nlower_is_better = false\n",
        )
    )
    assert printed.metric_label() == "the number as the program prints it, higher is better"
    named_regex = load_spec(
        _spec(tmp_path, BASE + "[metric]\nkind = 'stdout_regex'\npattern = 'epoch_time_s ([0-9.]+)'\n")
    )
    assert named_regex.metric_label() == "epoch_time_s as the program prints it, lower is better"
