"""Settings a program reads from the configuration file its command names (``--config
conf/run.yaml``): drafted as config knobs, passed as a copy of the file with the knob's value,
the original never touched (programs and files written here in the shapes users bring: YAML read
by PyYAML, TOML by tomllib, JSON by json)."""

from __future__ import annotations

import json
import textwrap
import time
import tomllib
from pathlib import Path

import pytest
import yaml

from dftune.core.facts.paths import classify
from dftune.tools.runner.config_files import MAX_KEYS, ConfigFileError, read_tree
from dftune.tools.runner.draft import draft_spec, render_toml
from dftune.tools.runner.spec import SpecError, load_spec

READER = """
import argparse, yaml
from concurrent.futures import ThreadPoolExecutor
p = argparse.ArgumentParser()
p.add_argument("--config", required=True)
p.add_argument("--data", required=True)
a = p.parse_args()
cfg = yaml.safe_load(open(a.config))
with ThreadPoolExecutor(max_workers=cfg["loader"]["threads"]) as pool:
    pass
print(f"elapsed_s {1.0}")
"""

CONFIG = """\
# reader settings
loader:
  threads: 1   # the pool
  shuffle: false
io:
  block_size: 4096
dataset:
  num_files: 2000
"""


def _program(tmp_path: Path, config: str = CONFIG, name: str = "run.yaml") -> None:
    (tmp_path / "conf").mkdir(exist_ok=True)
    (tmp_path / "conf" / name).write_text(config)
    (tmp_path / "reader.py").write_text(textwrap.dedent(READER))
    (tmp_path / "data").mkdir(exist_ok=True)


def test_keys_of_the_named_config_are_drafted_as_config_knobs(tmp_path: Path) -> None:
    _program(tmp_path)
    draft = draft_spec(["python", "reader.py", "--config", "conf/run.yaml", "--data", "data"], tmp_path)
    assert draft.command == ["{python}", "reader.py", "--config", "conf/run.yaml", "--data", "{data_dir}"]
    (threads,) = [s for s in draft.tunables if s.values]
    assert (threads.knob_name, threads.config, threads.name) == ("THREADS", "conf/run.yaml", "loader.threads")
    assert threads.strategy == "l1.concurrent_io_pool" and threads.values[0] == 1
    # the request size, the file count and the order define the workload
    assert {"io.block_size", "dataset.num_files", "loader.shuffle"} <= {s.name for s in draft.workload}
    # the pool's argument reads the key: the key is the lever, the call is not listed beside it
    assert not [s for s in draft.tunables if s.call.startswith("max_workers")]
    doc = tomllib.loads(render_toml(draft))
    assert doc["knobs"] == [
        {
            "name": "THREADS",
            "kind": "config",
            "file": "conf/run.yaml",
            "key": "loader.threads",
            "values": [1, 2, 4, 8],
            "default": 1,
            "strategy": "l1.concurrent_io_pool",
        }
    ]
    (tmp_path / "spec.toml").write_text(render_toml(draft))
    assert load_spec(tmp_path / "spec.toml").knobs[0].kind == "config"


@pytest.mark.parametrize(
    ("name", "text", "argv"),
    [
        (
            "run.toml",
            "# tuned by hand\n[loader]\nthreads = 1 # pool\n[io]\nblock_size = 4096\n",
            ["-c=conf/run.toml"],
        ),
        (
            "run.json",
            json.dumps({"loader": {"threads": 1}, "io": {"block_size": 4096}}),
            ["--cfg", "conf/run.json"],
        ),
        ("run.yaml", CONFIG, ["--config=conf/run.yaml"]),
    ],
)
def test_each_call_passes_a_copy_with_the_value_and_the_original_stays(
    tmp_path: Path, name: str, text: str, argv: list[str]
) -> None:
    _program(tmp_path, text, name)
    passed = ", ".join(json.dumps(a) for a in argv)
    spec_text = textwrap.dedent(
        f"""
        name = "cfg"
        command = ["{{python}}", "reader.py", {passed}]
        [[knobs]]
        name = "THREADS"
        kind = "config"
        file = "conf/{name}"
        key = "loader.threads"
        values = [1, 4]
        default = 1
        """
    )
    (tmp_path / "spec.toml").write_text(spec_text)
    spec = load_spec(tmp_path / "spec.toml")
    work = tmp_path / "work"
    argv_out = spec.render(spec.command, spec.settings({"THREADS": "4"}), workdir=work)
    copy = work / "dftune-config" / name
    assert str(copy) in argv_out[-1]
    assert argv_out[-1] in (str(copy), f"{argv[0].split('=')[0]}={copy}")
    assert read_tree(copy)["loader"]["threads"] == 4
    assert read_tree(copy)["io"]["block_size"] == 4096
    assert (tmp_path / "conf" / name).read_text() == text  # the user's file is never written
    if name.endswith(".toml"):
        assert "# tuned by hand" in copy.read_text()  # tomlkit keeps the layout
    # the program's other files never move: only the argument that names the file changes
    assert argv_out[:2] == [spec.placeholder_values({}, workdir=work)["python"], "reader.py"]


def _spec_error(tmp_path: Path, knob: str, command: str = '"--config", "conf/run.yaml"') -> str:
    _program(tmp_path)
    (tmp_path / "spec.toml").write_text(
        f'name = "x"\ncommand = ["{{python}}", "reader.py", {command}]\n[[knobs]]\n{knob}\n'
        "values = [1, 2]\ndefault = 1\n"
    )
    with pytest.raises(SpecError) as err:
        load_spec(tmp_path / "spec.toml")
    return str(err.value)


def test_a_config_knob_that_cannot_work_is_refused_when_the_spec_loads(tmp_path: Path) -> None:
    no_key = 'name = "T"\nkind = "config"\nfile = "conf/run.yaml"'
    assert "names its file and key" in _spec_error(tmp_path, no_key)
    assert "does not name 'other.yaml'" in _spec_error(
        tmp_path, 'name = "T"\nkind = "config"\nfile = "other.yaml"\nkey = "a"'
    )
    assert "YAML, TOML or JSON" in _spec_error(
        tmp_path, 'name = "T"\nkind = "config"\nfile = "conf/run.ini"\nkey = "a"', '"conf/run.ini"'
    )
    assert "belong to config knobs" in _spec_error(tmp_path, 'name = "T"\nkind = "env"\nkey = "a"')
    # a key below a value: io.block_size is a number, not a section
    why = _spec_error(tmp_path, no_key + '\nkey = "io.block_size.x"')
    assert "knobs.T.file" in why and "block_size is a value in the file" in why


def test_a_config_that_is_not_one_is_said_in_one_line(tmp_path: Path) -> None:
    (tmp_path / "a.yaml").write_text("- just\n- a list\n")
    with pytest.raises(ConfigFileError, match="a mapping of settings"):
        read_tree(tmp_path / "a.yaml")
    (tmp_path / "b.toml").write_text("x = = 1\n")
    with pytest.raises(ConfigFileError, match=r"b.toml: not valid TOML"):
        read_tree(tmp_path / "b.toml")
    (tmp_path / "c.json").write_bytes(b"{" * 300_000)
    with pytest.raises(ConfigFileError, match=r"c\.json: not valid JSON"):
        read_tree(tmp_path / "c.json")
    (tmp_path / "d.yaml").write_bytes(b"a: " + b"x" * (2 << 20))
    with pytest.raises(ConfigFileError, match="larger than 1 MiB"):
        read_tree(tmp_path / "d.yaml")


def test_an_alias_bomb_is_refused_not_expanded(tmp_path: Path) -> None:
    levels = ["a0: {x: 1, y: 2, z: 3, w: 4, v: 5, u: 6, t: 7, s: 8, r: 9}"]
    levels[0] = "a0: &a0 {x: 1, y: 2, z: 3, w: 4, v: 5, u: 6, t: 7, s: 8, r: 9}"
    for i in range(1, 12):
        refs = ", ".join(f"k{j}: *a{i - 1}" for j in range(9))
        levels.append(f"a{i}: &a{i} {{{refs}}}")
    (tmp_path / "bomb.yaml").write_text("\n".join(levels) + "\n")
    started = time.monotonic()
    with pytest.raises(ConfigFileError, match=f"more than {MAX_KEYS:,} settings"):
        read_tree(tmp_path / "bomb.yaml")
    assert time.monotonic() - started < 10
    # and spec init drafts nothing from it, saying why, instead of running out of memory
    (tmp_path / "r.py").write_text("print('elapsed_s 1')\n")
    draft = draft_spec(["python", "r.py", "--config", "bomb.yaml"], tmp_path)
    assert any("more than" in n and "not drafted" in n for n in draft.notes)


def test_the_copy_an_arm_reads_is_its_configuration_not_data(tmp_path: Path) -> None:
    c = classify(str(tmp_path / "runs" / "r1" / "opt1" / "work" / "dftune-config" / "run.yaml"))
    assert c.class_ == "config" and c.rule == "arm-config-copy"


def test_a_yaml_copy_keeps_every_other_setting(tmp_path: Path) -> None:
    _program(tmp_path)
    (tmp_path / "spec.toml").write_text(
        'name = "x"\ncommand = ["{python}", "reader.py", "--config", "conf/run.yaml"]\n'
        '[[knobs]]\nname = "T"\nkind = "config"\nfile = "conf/run.yaml"\nkey = "loader.threads"\n'
        "values = [1, 8]\ndefault = 1\n"
    )
    spec = load_spec(tmp_path / "spec.toml")
    spec.render(spec.command, spec.settings({"T": "8"}), workdir=tmp_path / "w")
    written = yaml.safe_load((tmp_path / "w" / "dftune-config" / "run.yaml").read_text())
    assert written == {
        "loader": {"threads": 8, "shuffle": False},
        "io": {"block_size": 4096},
        "dataset": {"num_files": 2000},
    }
