"""The real stack sampler on real programs: py-spy follows a program started through a shell
wrapper and tells time inside an I/O library (NumPy's .npy reader) from the program's own
compute, as the worth-tuning gate reads it."""

from __future__ import annotations

import textwrap
from pathlib import Path

import pytest

from dftune.core.facts import stack_facts
from dftune.tools.diagnose.library_time import library_time, read_samples
from dftune.tools.runner import sampling
from dftune.tools.runner.bench import bench
from dftune.tools.runner.spec import load_spec

pytestmark = pytest.mark.e2e

PROGRAM = """
import os, sys, time
import numpy as np
data, mode = sys.argv[1], sys.argv[2]
if not os.path.exists(os.path.join(data, "a0.npy")):
    os.makedirs(data, exist_ok=True)
    for i in range(8):
        np.save(os.path.join(data, f"a{i}.npy"), np.arange(200_000, dtype="f8"))
t0 = time.perf_counter()
acc = 0.0
while time.perf_counter() - t0 < 1.5:
    if mode == "load":
        for i in range(8):
            acc += float(np.load(os.path.join(data, f"a{i}.npy"), mmap_mode=None)[0])
    else:
        acc += sum(i * i for i in range(20_000))
print(f"elapsed_s {time.perf_counter() - t0}")
"""


def _spec(tmp_path: Path, mode: str) -> Path:
    (tmp_path / "prog.py").write_text(textwrap.dedent(PROGRAM))
    (tmp_path / "run.sh").write_text(f'#!/bin/sh\nexec "$1" prog.py "$2" {mode}\n')
    spec = tmp_path / f"{mode}.toml"
    spec.write_text(
        f'name = "npy-{mode}"\ncommand = ["sh", "run.sh", "{{python}}", "{{data_dir}}"]\n'
        'data_dir = "data"\nreplicates = 1\n[metric]\nkind = "stdout_regex"\n'
        "pattern = 'elapsed_s ([0-9.]+)'\n[tracing]\nmode = \"off\"\n"
    )
    return spec


@pytest.mark.skipif(sampling.unavailable("local") is not None, reason="py-spy is not installed")
@pytest.mark.parametrize(("mode", "low", "high"), [("load", 0.5, 1.0), ("compute", 0.0, 0.05)])
def test_py_spy_tells_library_time_from_the_programs_own(
    tmp_path: Path, mode: str, low: float, high: float
) -> None:
    spec = load_spec(_spec(tmp_path, mode))
    out = tmp_path / "stacks"
    result = bench(spec, replicates=1, trace=False, workdir=tmp_path / "w", sample=out)
    said = (tmp_path / "w" / "logs" / "r0.err").read_text(errors="replace")
    if not (out / "r0.txt").is_file() and "ermission" in said:  # a container that forbids reading
        pytest.skip(f"py-spy may not read a child's memory here: {said.strip()[-200:]}")
    assert result.ok == 1, result.replicates
    text = (out / "r0.txt").read_text()
    frames = {s.id: s.frames for s in stack_facts().stack if s.frames}
    samples = read_samples(text)
    got = library_time(samples, frames)
    assert got is not None and got.samples >= sampling.sampler_settings().min_samples
    # the program, followed through its shell wrapper (an exec'd process may show no command line)
    assert any("prog.py" in f for s in samples if s.main_thread for f in s.frames)
    assert low <= got.share <= high, (got, text[:2000])
