"""Workload specs: strict validation with the file and key named; rendering of placeholders."""

from __future__ import annotations

import sys
from pathlib import Path

import pytest

from dftune.tools.runner.spec import SpecError, load_spec

GOOD = """
name = "demo"
command = ["{python}", "app.py", "--data", "{data_dir}", "--workers", "{READERS}"]
data_dir = "{workdir}/data"
replicates = 3
[[knobs]]
name = "READERS"
kind = "arg"
values = [1, 2, 4]
default = 1
strategy = "l1.dataloader_workers"
[[knobs]]
name = "OMP_NUM_THREADS"
kind = "env"
values = [1, 2]
default = 1
"""


def write(tmp_path: Path, text: str) -> Path:
    p = tmp_path / "workload.toml"
    p.write_text(text)
    return p


def test_good_spec_renders_placeholders_and_env(tmp_path: Path) -> None:
    spec = load_spec(write(tmp_path, GOOD))
    settings = spec.settings({"READERS": "4"})
    assert settings == {"READERS": 4, "OMP_NUM_THREADS": 1}
    argv = spec.render(spec.command, settings, workdir=tmp_path / "w")
    assert argv == [sys.executable, "app.py", "--data", str(tmp_path / "w" / "data"), "--workers", "4"]
    assert spec.knob_env(settings) == {"OMP_NUM_THREADS": "1"}
    assert spec.resolve(".") == tmp_path.resolve()


@pytest.mark.parametrize(
    ("text", "needle"),
    [
        ("bogus = 1\n" + GOOD, "unknown key 'bogus'"),
        (GOOD + "\nbogus = 1\n", "unknown key 'knobs.1.bogus'"),
        (GOOD.replace('kind = "arg"', 'kind = "flag"'), "knobs.0.kind"),
        (GOOD.replace("default = 1\nstrategy", "default = 3\nstrategy"), "default 3 is not one of values"),
        (GOOD.replace("{READERS}", "{READERZ}"), "placeholder {READERZ}"),
        (GOOD.replace('"l1.dataloader_workers"', '"l9.nope"'), "not in the strategy catalog"),
        (GOOD.replace("replicates = 3", "replicates = 0"), "replicates"),
        ('name = "x"\n', "command"),
        ("name = [", "not valid TOML"),
        (GOOD + '\n[metric]\nkind = "stdout_regex"\n', "needs a pattern"),
        (GOOD + '\n[metric]\nkind = "stdout_regex"\npattern = "(["\n', "not a valid regular expression"),
        (GOOD + '\n[launcher]\nkind = "pbs"\n', "launcher.kind"),
        (GOOD + '\n[tracing]\nmode = "preload"\nextra = 1\n', "unknown key 'tracing.extra'"),
    ],
)
def test_bad_specs_name_the_file_and_key(tmp_path: Path, text: str, needle: str) -> None:
    path = write(tmp_path, text)
    with pytest.raises(SpecError) as info:
        load_spec(path)
    msg = str(info.value)
    assert str(path) in msg and needle in msg, msg
    assert "\n" not in msg


def test_set_rejects_values_outside_the_knob(tmp_path: Path) -> None:
    spec = load_spec(write(tmp_path, GOOD))
    with pytest.raises(SpecError, match="READERS='3' is not one of"):
        spec.settings({"READERS": "3"})
    with pytest.raises(SpecError, match="no knob named 'NOPE'"):
        spec.settings({"NOPE": "1"})


def test_missing_file(tmp_path: Path) -> None:
    with pytest.raises(SpecError, match="no such file"):
        load_spec(tmp_path / "missing.toml")


def test_bundled_example_spec_is_valid() -> None:
    root = Path(__file__).resolve().parents[2] / "resources" / "workloads"
    tomls = sorted(root.glob("*/workload.toml"))
    specs = [load_spec(toml) for toml in tomls]
    assert all(spec.replicates == 5 for spec in specs)
    # most examples declare their knobs; a bare spec (command and metric) is an example too
    assert sum(bool(spec.knobs) for spec in specs) >= len(specs) - 1, [t.parent.name for t in tomls]


PATCHED = (
    GOOD
    + """
[[patches]]
name = "buffered"
file = "fix.diff"
strategy = "l1.write_buffering"
"""
)


@pytest.mark.parametrize(
    ("text", "needle"),
    [
        (PATCHED, "patches.buffered.file: fix.diff is not a file"),
        (
            PATCHED.replace("fix.diff", "ok.diff").replace("l1.write_buffering", "l1.nope"),
            "patches.buffered.strategy: 'l1.nope' is not in the strategy catalog",
        ),
        (
            PATCHED.replace("fix.diff", "ok.diff") + PATCHED.replace("fix.diff", "ok.diff").split(GOOD)[1],
            "names must be unique",
        ),
    ],
)
def test_patches_name_their_file_and_strategy(tmp_path: Path, text: str, needle: str) -> None:
    (tmp_path / "ok.diff").write_text("--- a/x\n+++ b/x\n")
    with pytest.raises(SpecError) as err:
        load_spec(write(tmp_path, text))
    assert str(tmp_path / "workload.toml") in str(err.value) and needle in str(err.value)


def test_relocated_runs_the_same_command_from_the_copy(tmp_path: Path) -> None:
    (tmp_path / "fix.diff").write_text("--- a/x\n+++ b/x\n")
    spec = load_spec(write(tmp_path, PATCHED))
    copy = tmp_path / "opt1" / "source"
    moved = spec.relocated(copy)
    assert moved.resolve(moved.cwd) == copy and moved.resolve(moved.source_dir) == copy
    assert moved.command == spec.command and moved.spec_path == spec.spec_path
