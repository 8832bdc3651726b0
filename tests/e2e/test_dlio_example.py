"""DLIO (PyPI dlio-benchmark 2.0.0) under dftune's default spec: traced by its own tracer, never crashed.

DLIO lives in an environment of its own: it pins pydftracer==1.0.2 (dftracer 2.x is dftune's),
imports tensorflow even for the PyTorch loader, and requires nvidia-dali-cuda110, whose PyPI
package only downloads a wheel from NVIDIA's index.  Measured here: building that environment
(torch 2.13.0 CPU, tensorflow-cpu, DLIO without DALI) takes about 3.5 minutes and 2.6 GB, so the
test builds it once in a cache folder ($DFTUNE_DLIO_VENV, default ~/.cache/dftune/dlio-venv) and
runs only with the e2e tier (markers e2e and dlio).
"""

from __future__ import annotations

import fcntl
import json
import os
import subprocess
import sys
from pathlib import Path

import pytest

from dftune.tools.diagnose.engine import diagnose
from dftune.tools.runner.bench import bench
from dftune.tools.runner.spec import load_spec

# one xdist worker builds and uses the cached DLIO environment
pytestmark = [pytest.mark.e2e, pytest.mark.dlio, pytest.mark.xdist_group("dlio")]

VENV = Path(os.environ.get("DFTUNE_DLIO_VENV", Path.home() / ".cache" / "dftune" / "dlio-venv"))
DLIO = VENV / "bin" / "dlio_benchmark"
#: dlio-benchmark's requirements without nvidia-dali-cuda110 (GPU-only, not on PyPI proper), with the
#: CPU builds of tensorflow and torch that are on this machine's package index
DEPS = [
    "Pillow>=9.3.0",
    "PyYAML>=6.0.0",
    "h5py>=3.11.0",
    "mpi4py>=3.1.4",
    "mpich",
    "numpy>=1.23.5",
    "omegaconf>=2.2.0",
    "pandas>=1.5.1",
    "psutil>=5.9.8",
    "pydftracer==1.0.2",
    "hydra-core>=1.3.2",
    "tensorflow-cpu>=2.11.0",
    "torch==2.13.0",
    "torchvision",
    "torchaudio",
]
HOW = (
    f"python -m venv {VENV} && {VENV}/bin/pip install --no-deps dlio-benchmark==2.0.0 && "
    f"{VENV}/bin/pip install {' '.join(repr(d) for d in DEPS)}"
)

MINI = """\
model: unet3d_mini
framework: pytorch
workflow:
  generate_data: False
  train: True
dataset:
  data_folder: data/unet3d/
  format: npz
  num_files_train: 16
  num_samples_per_file: 1
  record_length: 262144
reader:
  data_loader: pytorch
  batch_size: 2
  read_threads: 2
train:
  epochs: 2
  computation_time: 0.01
"""


def _pip(*args: str) -> None:
    done = subprocess.run(
        [str(VENV / "bin" / "python"), "-m", "pip", "install", "--quiet", *args],
        capture_output=True,
        text=True,
        timeout=1800,
        check=False,
    )
    if done.returncode != 0:
        pytest.skip(
            f"building DLIO's environment failed ({done.stderr.strip()[-200:]}); build it by hand: {HOW}"
        )


@pytest.fixture(scope="module")
def dlio() -> Path:
    """The cached environment, built under a lock (another test process may be building it) and
    marked complete only at the end, so an interrupted build is finished, never trusted."""
    VENV.parent.mkdir(parents=True, exist_ok=True)
    built = VENV / ".dftune-built"
    with open(VENV.parent / f"{VENV.name}.lock", "w") as lock:
        fcntl.flock(lock, fcntl.LOCK_EX)
        if not built.exists():
            subprocess.run([sys.executable, "-m", "venv", str(VENV)], check=True, timeout=300)
            _pip("--no-deps", "dlio-benchmark==2.0.0")
            _pip(*DEPS)
            built.write_text("dlio-benchmark==2.0.0\n")
    return DLIO


def test_dlio_traces_cleanly_under_the_default_spec(dlio: Path, tmp_path: Path) -> None:
    (tmp_path / "cfg" / "workload").mkdir(parents=True)
    (tmp_path / "cfg" / "workload" / "unet3d_mini.yaml").write_text(MINI)
    out = tmp_path / "dlio.toml"
    cmd = [
        sys.executable,
        "-m",
        "dftune.cli",
        "spec",
        "init",
        "--out",
        str(out),
        "--",
        str(dlio),
        "workload=unet3d_mini",
        "--config-dir",
        "cfg",
    ]
    done = subprocess.run(cmd, cwd=tmp_path, capture_output=True, text=True, timeout=120, check=False)
    assert done.returncode == 0, done.stderr
    spec = load_spec(out)
    assert spec.tracing.mode == "preload"  # what a user leaves as is: dftune must switch by itself
    assert {k.name for k in spec.knobs} == {"READ_THREADS", "PREFETCH_SIZE"}
    result = bench(spec, replicates=1, trace=True, workdir=tmp_path / "run")
    rep = result.replicates[0]
    assert result.ok == 1 and rep.exit_code == 0, rep.reason  # no SIGSEGV at exit
    assert any("dlio_benchmark is a dftracer-annotated application" in n for n in result.notes)
    # the metric is DLIO's own summary.json, written into workload.output.folder = the replicate's folder
    metric = json.loads((Path(rep.trace_dir) / "summary.json").read_text())["metric"]
    assert rep.metric == metric["train_throughput_mean_samples_per_second"]
    epochs = metric["train_throughput_samples_per_second"]  # one value per epoch; the mean is over them
    assert len(epochs) == 2 and rep.metric == pytest.approx(sum(epochs) / len(epochs))
    traces = [p for p in Path(rep.trace_dir).iterdir() if ".pfw" in p.name]
    assert traces and all(p.stat().st_size > 0 for p in traces)
    text = "".join(p.read_text(errors="replace") for p in traces if not p.name.endswith(".gz"))
    assert '"cat":"reader"' in text and '"cat":"data_loader"' in text  # DLIO's own events
    diagnosis = diagnose([rep.trace_dir])
    # DataLoader workers record under DLIO's rank (process_id): no straggler or imbalance among them
    assert not [b for b in diagnosis.bottlenecks if b.category in ("stragglers", "imbalance")]
    assert diagnosis.app_processes == 1 and not diagnosis.helper_processes


def test_dlio_workload_yaml_drafts_without_running(tmp_path: Path) -> None:
    """spec init needs only the config: it works before DLIO's environment exists."""
    (tmp_path / "cfg" / "workload").mkdir(parents=True)
    (tmp_path / "cfg" / "workload" / "unet3d_mini.yaml").write_text(MINI)
    cmd = [
        sys.executable,
        "-m",
        "dftune.cli",
        "spec",
        "init",
        "--",
        "dlio_benchmark",
        "workload=unet3d_mini",
        "--config-dir",
        "cfg",
    ]
    done = subprocess.run(cmd, cwd=tmp_path, capture_output=True, text=True, timeout=120, check=False)
    assert done.returncode == 0, done.stderr
    assert "#   dataset.num_files_train = 16" in done.stdout
    assert 'name = "READ_THREADS"' in done.stdout


def test_dlio_bare_spec_traces_are_collected_from_hydras_output(dlio: Path, tmp_path: Path) -> None:
    """A bare spec names no output folder: DLIO writes under Hydra's outputs/ in the run's folder."""
    (tmp_path / "cfg" / "workload").mkdir(parents=True)
    (tmp_path / "cfg" / "workload" / "unet3d_mini.yaml").write_text(MINI)
    toml = tmp_path / "bare.toml"
    toml.write_text(
        f'name = "dlio-bare"\ncommand = ["{dlio}", "--config-dir", "cfg", "workload=unet3d_mini", '
        '"++workload.dataset.data_folder={data_dir}", "++workload.workflow.generate_data=True"]\n'
        'timeout_s = 600\n[metric]\nkind = "dlio"\nfield = "train_au"\n'
    )
    result = bench(load_spec(toml), replicates=1, trace=True, workdir=tmp_path / "run")
    rep = result.replicates[0]
    assert result.ok == 1 and rep.exit_code == 0, rep.reason
    traces = [p for p in Path(rep.trace_dir).iterdir() if ".pfw" in p.name]
    assert traces and all(p.stat().st_size > 0 for p in traces), traces
    # DLIO's output folder is Hydra's run folder, ./hydra_log/<model>/<date>-<time> (DLIO's config.yaml)
    (summary,) = tmp_path.glob("hydra_log/unet3d_mini/*/summary.json")
    assert not list((tmp_path / "hydra_log").rglob("*.pfw*"))  # moved into the replicate's folder
    # the metric is read from that summary.json, with no wrapper and no output folder in the spec
    assert rep.metric == json.loads(summary.read_text())["metric"]["train_au_mean_percentage"]
    assert (Path(rep.trace_dir) / "summary.json").read_text() == summary.read_text()  # the replicate's copy
    assert rep.startup_share is not None and 0 < rep.startup_share < 1
