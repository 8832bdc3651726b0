"""The bundled PyTorch DataLoader example, from its bare spec and from a spec `dftune spec init` drafts."""

from __future__ import annotations

import shutil
import subprocess
import sys
from pathlib import Path

import pytest

from dftune.tools.runner.bench import bench
from dftune.tools.runner.spec import load_spec

pytestmark = pytest.mark.e2e
pytest.importorskip("torch", reason="install the CPU build: pip install 'dftune[torch]' (torch==2.13.0)")
pytest.importorskip("dftracer", reason="install dftune[tracer] (the dftracer wheel) for real tracing")

EXAMPLE = Path(__file__).resolve().parents[2] / "resources" / "workloads" / "dataloader_small_files"


def test_bare_spec_traces_and_reports_start_up(tmp_path: Path) -> None:
    spec = load_spec(EXAMPLE / "bare.toml")
    result = bench(spec, replicates=1, trace=True, workdir=tmp_path)
    assert result.ok == 1, [r.reason for r in result.replicates]
    rep = result.replicates[0]
    assert rep.work == {"samples": 512.0}
    # importing torch comes before the first sample is read: a real, measured share of the run
    assert rep.startup_s is not None and 0 < rep.startup_s < rep.wall_s
    assert rep.startup_share is not None and 0 < rep.startup_share < 1
    assert any(n.startswith("start-up (before the first data I/O)") for n in result.notes)


def test_drafted_spec_runs_with_the_loader_knobs(tmp_path: Path) -> None:
    shutil.copy(EXAMPLE / "train.py", tmp_path / "train.py")
    out = tmp_path / "drafted.toml"
    cmd = [
        sys.executable,
        "-m",
        "dftune.cli",
        "spec",
        "init",
        "--out",
        str(out),
        "--",
        "python",
        "train.py",
        "--data",
        "{data_dir}",
        "--files",
        "64",
    ]
    done = subprocess.run(cmd, cwd=tmp_path, capture_output=True, text=True, timeout=120, check=False)
    assert done.returncode == 0, done.stderr
    spec = load_spec(out)
    assert {k.name for k in spec.knobs} == {
        "NUM_WORKERS",
        "PREFETCH_FACTOR",
        "PERSISTENT_WORKERS",
        "PIN_MEMORY",
    }
    assert spec.setup and spec.setup[-1] == "--setup-only"  # the data set is written once, then reused
    assert "--files" in spec.command and "64" in spec.command  # the dataset's size is left as given
    sets = {"NUM_WORKERS": "2", "PERSISTENT_WORKERS": "1", "PREFETCH_FACTOR": "4"}
    result = bench(spec, overrides=sets, replicates=1, trace=False, workdir=tmp_path / "run")
    assert result.ok == 1, [r.reason for r in result.replicates]
    assert result.replicates[0].metric is not None  # read from train_time_s, not wall time
