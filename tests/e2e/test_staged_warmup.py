"""A staged arm's program never runs on the original data folder: with a warm page cache (the
spec's choice, or a user who may not drop it) the warm-up run is staged like every replicate."""

from __future__ import annotations

from pathlib import Path

import pytest

from dftune.core.domain.measurements import StagePlan
from dftune.tools.runner.bench import bench
from dftune.tools.runner.spec import load_spec

pytestmark = pytest.mark.e2e

PROGRAM = """
import os, sys, time
data = sys.argv[1]
with open(os.path.join(data, "runs.log"), "a") as log:  # where this run found its data
    log.write(os.path.realpath(data) + "\\n")
t = time.perf_counter()
n = len(open(os.path.join(data, "input.bin"), "rb").read())
print(f"elapsed_s {time.perf_counter() - t + 0.001:.6f}")
"""


def test_the_warm_up_of_a_staged_arm_is_staged(tmp_path: Path) -> None:
    (tmp_path / "prog.py").write_text(PROGRAM)
    data = tmp_path / "data"
    data.mkdir()
    (data / "input.bin").write_bytes(b"x" * 65536)
    (tmp_path / "spec.toml").write_text(
        'name = "warm"\ncommand = ["{python}", "prog.py", "{data_dir}"]\n'
        f'data_dir = "{data}"\nreplicates = 2\npage_cache = "warm"\n'
        '[metric]\nkind = "stdout_regex"\npattern = \'elapsed_s ([0-9.]+)\'\n[tracing]\nmode = "off"\n'
    )
    result = bench(load_spec(tmp_path / "spec.toml"), workdir=tmp_path / "w", stage=StagePlan(tier="shm"))
    assert result.ok == 2, [r.reason for r in result.replicates]
    runs = (data / "runs.log").read_text().splitlines()
    assert len(runs) == 3  # the warm-up and two replicates, each in its staged copy, copied back
    assert all(line != str(data.resolve()) for line in runs), runs
    assert all("dftune-stage-" in line for line in runs), runs
