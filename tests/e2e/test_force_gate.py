"""A run stopped at the worth-tuning gate names ``--force``; with ``--force`` the same run goes on.

A compute-bound program (0.3 s of arithmetic, one tiny write) under the real dftracer: the gate
says its I/O cannot pay off, and the run's reason tells the person how to tune it anyway.
"""

from __future__ import annotations

import json
import subprocess
import sys
from pathlib import Path

import pytest

pytestmark = pytest.mark.e2e

PROGRAM = (
    "import time\nstart = time.perf_counter()\nx = 0\n"
    "while time.perf_counter() - start < 0.3:\n    x += 1\n"
    "open('out.txt', 'w').write('done')\nprint(f'run_time_s {time.perf_counter() - start:.6f}')\n"
)
SPEC = (
    'name = "compute-bound"\ncommand = ["{python}", "compute.py"]\nreplicates = 1\n'
    "[metric]\nkind = \"stdout_regex\"\npattern = 'run_time_s ([0-9.]+)'\n"
    '[[knobs]]\nname = "OMP_NUM_THREADS"\nkind = "env"\nvalues = [1, 2]\ndefault = 1\n'
    'strategy = "l2.omp_threads"\n'
)


def _run(spec: Path, *extra: str) -> dict[str, object]:
    res = subprocess.run(
        [sys.executable, "-m", "dftune.cli", "run", str(spec), "--json", "--max-experiments", "0", *extra],
        capture_output=True,
        text=True,
        timeout=600,
        check=False,
    )
    assert res.returncode == 0, res.stderr[-2000:]
    doc: dict[str, object] = json.loads(res.stdout)
    return doc


def test_the_gate_names_force_and_force_goes_on(tmp_path: Path) -> None:
    pytest.importorskip("dftracer")
    (tmp_path / "compute.py").write_text(PROGRAM)
    spec = tmp_path / "workload.toml"
    spec.write_text(SPEC)
    stopped = _run(spec)
    assert stopped["status"] == "not_worth_tuning"
    assert f"dftune run --force {spec}" in str(stopped["status_reason"])
    forced = _run(spec, "--force")
    assert forced["status"] == "completed", forced.get("status_reason")
