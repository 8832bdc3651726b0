"""`dftune spec init`: a program's settings split into tunables and the workload's definition."""

from __future__ import annotations

import json
import shutil
import textwrap
from importlib import resources
from pathlib import Path

import pytest

from dftune.core.process import ProcessResult
from dftune.tools.runner.bench import extract_metric, metric_path
from dftune.tools.runner.draft import DraftError, draft_spec, help_settings, load_rules, render_toml
from dftune.tools.runner.metric_names import metric_label
from dftune.tools.runner.spec import load_spec

EXAMPLE = Path(str(resources.files("dftune.resources") / "workloads" / "dataloader_small_files"))

DLIO_YAML = """\
model: unet3d
framework: pytorch
workflow:
  generate_data: False
  train: True
  checkpoint: True
dataset:
  data_folder: data/unet3d/
  format: npz
  num_files_train: 168
  num_samples_per_file: 1
  record_length: 146600628
reader:
  data_loader: pytorch
  batch_size: 7
  read_threads: 4
  file_shuffle: seed
train:
  epochs: 5
  computation_time: 0.636
checkpoint:
  checkpoint_folder: checkpoints/unet3d
  checkpoint_after_epoch: 5
"""

# Written for this test in IOR's --help layout (flags, then options with defaults after '=').
IOR_HELP = """\
Synopsis ior

Flags
  -c                            collective -- collective I/O
  -e                            fsync -- perform a fsync() operation at the end of each read/write phase
  -F                            filePerProc -- file-per-process
Optional arguments
  -a=POSIX                      API for I/O [POSIX|MPIIO|HDF5]
  -b=1048576                    blockSize -- contiguous bytes to write per task  (e.g.: 8, 4k, 2m, 1g)
  -s=1                          segmentCount -- number of segments
  -t=262144                     transferSize -- size of transfer in bytes (e.g.: 8, 4k, 2m, 1g)
  -o=testFile                   testFile -- full name for test
  --mpiio.hintsFileName=STRING  Full name for hints file
  --romio-cb-write=automatic    ROMIO collective buffering for writes (default: automatic)
  --cb-buffer-size=16777216     collective buffer size in bytes
"""


def _by_name(draft):  # type: ignore[no-untyped-def]
    return {s.name: s for s in draft.settings}


def test_dataloader_program(tmp_path: Path) -> None:
    shutil.copy(EXAMPLE / "train.py", tmp_path / "train.py")
    draft = draft_spec(["python", "train.py", "--data", "{data_dir}"], tmp_path)
    assert draft.kind == "pytorch"
    tun = {s.name: s for s in draft.tunables}
    assert set(tun) == {"num_workers", "prefetch_factor", "persistent_workers", "pin_memory"}
    assert tun["num_workers"].strategy == "l1.dataloader_workers"
    assert tun["num_workers"].values[0] == 0  # the program's default first
    assert tun["prefetch_factor"].strategy == "l1.dataloader_prefetch"
    assert tun["persistent_workers"].strategy == "l1.persistent_workers"
    assert tun["pin_memory"].strategy == "l1.pin_memory"
    assert tun["pin_memory"].values == [0, 1]  # taken as 0/1 by the program
    workload = {s.name for s in draft.workload}
    assert {"files", "sample_size", "epochs", "batch_size"} <= workload
    assert not workload & set(tun)
    assert draft.setup == ["{python}", "train.py", "--data", "{data_dir}", "--setup-only"]
    assert draft.metric is not None and draft.metric[1] is True
    text = render_toml(draft)
    assert "#   epochs = 2: the number of epochs" in text
    (tmp_path / "spec.toml").write_text(text)
    spec = load_spec(tmp_path / "spec.toml")  # the draft is a valid spec as it stands
    assert {k.name for k in spec.knobs} == {
        "NUM_WORKERS",
        "PREFETCH_FACTOR",
        "PERSISTENT_WORKERS",
        "PIN_MEMORY",
    }
    assert spec.metric.kind == "stdout_regex"
    assert "EPOCHS" not in text and "FILES" not in text


def test_dataloader_literal_arguments_are_listed_not_knobbed(tmp_path: Path) -> None:
    (tmp_path / "loop.py").write_text(
        textwrap.dedent("""
        from torch.utils.data import DataLoader
        loader = DataLoader(ds, batch_size=8, num_workers=2, pin_memory=True)
    """)
    )
    draft = draft_spec(["python", "loop.py"], tmp_path)
    tun = {s.name: s for s in draft.tunables}
    assert tun["num_workers"].default == 2 and tun["pin_memory"].default is True
    text = render_toml(draft)
    assert "listed for the reader only" in text  # no option to pass it: a source change, not a knob
    assert "[[knobs]]" not in text


def test_dlio_workload_yaml(tmp_path: Path) -> None:
    (tmp_path / "cfg" / "workload").mkdir(parents=True)
    (tmp_path / "cfg" / "workload" / "unet3d_mini.yaml").write_text(DLIO_YAML)
    argv = [
        "dlio_benchmark",
        "workload=unet3d_mini",
        "--config-dir",
        "cfg",
        "++workload.reader.read_threads=2",
    ]
    draft = draft_spec(argv, tmp_path)
    assert draft.kind == "dlio"
    s = _by_name(draft)
    assert s["reader.read_threads"].role == "tunable" and s["reader.read_threads"].default == "2"
    assert (
        s["reader.prefetch_size"].strategy == "l1.dataloader_prefetch"
    )  # DLIO's default, absent from the YAML
    for name in (
        "dataset.num_files_train",
        "dataset.record_length",
        "train.epochs",
        "dataset.num_samples_per_file",
        "train.computation_time",
        "reader.batch_size",
    ):
        assert s[name].role == "workload", name
    # the options before Hydra's overrides; only the training phase per replicate, data made once in setup
    assert draft.command[:4] == ["dlio_benchmark", "--config-dir", "cfg", "workload=unet3d_mini"]
    assert "++workload.workflow.generate_data=False" in draft.command
    assert "++workload.workflow.generate_data=True" in (draft.setup or [])
    assert "++workload.output.folder={trace_dir}" in draft.command
    assert "++workload.reader.read_threads={READ_THREADS}" in draft.command
    assert "++workload.reader.read_threads=2" not in draft.command
    (tmp_path / "spec.toml").write_text(render_toml(draft))
    spec = load_spec(tmp_path / "spec.toml")
    assert spec.tracing.output == ["{trace_dir}"]
    assert {k.name for k in spec.knobs} == {"READ_THREADS", "PREFETCH_SIZE"}


def test_dlio_draft_measures_dlios_own_throughput(tmp_path: Path) -> None:
    """The draft reads DLIO's summary.json in each replicate's output folder, not the wall time."""
    (tmp_path / "cfg" / "workload").mkdir(parents=True)
    (tmp_path / "cfg" / "workload" / "unet3d_mini.yaml").write_text(DLIO_YAML)
    draft = draft_spec(["dlio_benchmark", "workload=unet3d_mini", "--config-dir", "cfg"], tmp_path)
    (tmp_path / "spec.toml").write_text(render_toml(draft))
    spec = load_spec(tmp_path / "spec.toml")
    assert spec.metric.kind == "dlio" and spec.metric.names("field") == ["train_throughput"]
    assert not spec.metric.lower_is_better  # samples per second: higher is better
    # the summary sits where the command sends DLIO's output: this replicate's own folder
    rep = tmp_path / "traces" / "r3"
    target = metric_path(spec, spec.settings(), tmp_path / "w", trace_dir=rep)
    assert target == rep / "summary.json"
    assert "++workload.output.folder={trace_dir}" in draft.command
    rep.mkdir(parents=True)
    target.write_text(json.dumps({"metric": {"train_throughput_mean_samples_per_second": 812.5}}))
    ok = ProcessResult(status="ok", exit_code=0, wall_s=9.0)
    assert extract_metric(spec, ok, tmp_path / "r3.out", target) == (812.5, "")
    assert metric_label(spec.metric) == ("train_throughput", "samples/s")


def test_dlio_missing_config_is_one_line(tmp_path: Path) -> None:
    with pytest.raises(DraftError, match=r"nothere\.yaml not found"):
        draft_spec(["dlio_benchmark", "workload=nothere", "--config-dir", str(tmp_path)], tmp_path)


def test_ior_like_help() -> None:
    settings = {s.name: s for s in help_settings(IOR_HELP, "ior", load_rules())}
    for name in ("blockSize", "transferSize", "segmentCount", "testFile", "fsync"):
        assert settings[name].role == "workload", name
    assert settings["collective"].role == "tunable"
    assert settings["collective"].strategy == "l1.mpiio_collective_calls"
    assert settings["collective"].values == []  # a flag: present or not, no value to pass
    assert settings["romio-cb-write"].values[0] == "automatic"
    assert "disable" in settings["romio-cb-write"].values  # both directions, not only enable
    assert settings["cb-buffer-size"].default == 16777216
    assert settings["mpiio.hintsFileName"].role == "tunable"
    assert settings["transferSize"].default == 262144


def test_ior_draft_from_captured_help(tmp_path: Path) -> None:
    draft = draft_spec(["ior", "-t", "4096", "-b", "4096"], tmp_path, help_text=IOR_HELP)
    assert draft.kind == "ior"
    assert "--romio-cb-write" in draft.command and "{ROMIO_CB_WRITE}" in draft.command
    assert draft.command[1:5] == ["-t", "4096", "-b", "4096"]  # the transfer size is left as given
    (tmp_path / "spec.toml").write_text(render_toml(draft))
    load_spec(tmp_path / "spec.toml")


def test_help_of_a_real_program(tmp_path: Path) -> None:
    (tmp_path / "tool.py").write_text("print('not argparse')\n")
    prog = tmp_path / "prog"
    prog.write_text(
        "#!/bin/sh\necho '  --num-workers N   reader threads (default: 1)'\necho '  --epochs N   passes'\n"
    )
    prog.chmod(0o755)
    draft = draft_spec([str(prog)], tmp_path)
    s = _by_name(draft)
    assert s["num-workers"].role == "tunable" and s["num-workers"].default == 1
    assert s["epochs"].role == "workload"


def test_no_command() -> None:
    with pytest.raises(DraftError, match="needs a command"):
        draft_spec([], Path("."))


def test_mpiio_program_hints_from_its_help(tmp_path: Path) -> None:
    """Hint options added in a loop are invisible to the source scan: the program's --help lists them."""
    pytest.importorskip("mpi4py", reason="install dftune[examples] (mpi4py + mpich) for the MPI-IO example")
    src = Path(str(resources.files("dftune.resources") / "workloads" / "mpiio_shared" / "shared_io.py"))
    shutil.copy(src, tmp_path / "shared_io.py")
    draft = draft_spec(["python", "shared_io.py", "--data", "{data_dir}"], tmp_path)
    tun = {s.name: s for s in draft.tunables}
    assert tun["cb-write"].strategy == "l2.romio_cb" and "disable" in tun["cb-write"].values
    assert tun["ds-write"].strategy == "l2.romio_ds"
    assert tun["collective"].strategy == "l1.mpiio_collective_calls" and tun["collective"].values == [0, 1]
    assert {s.name for s in draft.workload} >= {"records", "record_bytes"}
    assert draft.metric is not None and draft.metric[0].startswith("io_time_s")
    (tmp_path / "spec.toml").write_text(render_toml(draft))
    load_spec(tmp_path / "spec.toml")


def test_missing_program_is_one_line(tmp_path: Path) -> None:
    with pytest.raises(DraftError, match="no_such_program_here: no such program"):
        draft_spec(["no_such_program_here", "--x"], tmp_path)
