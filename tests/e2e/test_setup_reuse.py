"""A read-only data set outside the workdir is prepared once and reused while its setup is unchanged."""

from __future__ import annotations

from pathlib import Path

import pytest

from dftune.tools.runner.bench import bench
from dftune.tools.runner.spec import load_spec

pytestmark = pytest.mark.e2e

PROGRAM = """\
import os, sys
data, mode = sys.argv[1], sys.argv[2]
if mode == "setup":
    os.makedirs(data, exist_ok=True)
    with open(os.path.join(data, "setups.log"), "a") as log:
        log.write(sys.argv[3] + "\\n")
    for i in range(8):
        with open(os.path.join(data, f"s{i}"), "wb") as fh:
            fh.write(b"x" * 4096)
else:
    print("read", sum(len(open(os.path.join(data, f"s{i}"), "rb").read()) for i in range(8)))
"""


def _spec(tmp_path: Path, version: str, reuse: bool = True) -> Path:
    (tmp_path / "prog.py").write_text(PROGRAM)
    toml = tmp_path / f"w{version}.toml"
    toml.write_text(
        f'name = "reuse"\ncommand = ["{{python}}", "prog.py", "{{data_dir}}", "run"]\n'
        f'setup = ["{{python}}", "prog.py", "{{data_dir}}", "setup", "{version}"]\n'
        f'data_dir = "{tmp_path}/shared_data"\nsetup_reuse = {str(reuse).lower()}\nreplicates = 1\n'
    )
    return toml


def _setups(tmp_path: Path) -> list[str]:
    return (tmp_path / "shared_data" / "setups.log").read_text().split()


def test_setup_runs_once_for_experiments_sharing_a_data_set(tmp_path: Path) -> None:
    spec = load_spec(_spec(tmp_path, "v1"))
    a = bench(spec, trace=False, workdir=tmp_path / "arm_a")
    b = bench(spec, trace=False, workdir=tmp_path / "arm_b")
    assert a.ok == b.ok == 1
    assert _setups(tmp_path) == ["v1"]
    assert any("reused" in n for n in b.notes), b.notes
    changed = load_spec(_spec(tmp_path, "v2"))  # another setup command: the data set is made again
    bench(changed, trace=False, workdir=tmp_path / "arm_c")
    assert _setups(tmp_path) == ["v1", "v2"]


def test_the_default_is_once_and_false_asks_for_every_experiment(tmp_path: Path) -> None:
    (tmp_path / "prog.py").write_text(PROGRAM)
    plain = tmp_path / "plain.toml"
    plain.write_text(_spec(tmp_path, "v1").read_text().replace("setup_reuse = true\n", ""))
    spec = load_spec(plain)
    assert spec.setup_reuse  # no key: a shared data set is prepared once
    bench(spec, trace=False, workdir=tmp_path / "arm_a")
    bench(spec, trace=False, workdir=tmp_path / "arm_b")
    assert _setups(tmp_path) == ["v1"]


def test_setup_reuse_false_prepares_the_data_for_every_experiment(tmp_path: Path) -> None:
    spec = load_spec(_spec(tmp_path, "v1", reuse=False))
    bench(spec, trace=False, workdir=tmp_path / "arm_a")
    bench(spec, trace=False, workdir=tmp_path / "arm_b")
    assert _setups(tmp_path) == ["v1", "v1"]
