"""Drafted specs that run: each lever on its own option, values the callee accepts, the data
folder found, TOML that parses whatever a value holds (programs written for these tests in the
shapes users bring: a thread-pool reader, a DataLoader loop, an h5py analysis, a process pool)."""

from __future__ import annotations

import textwrap
import tomllib
from pathlib import Path

import pytest

from dftune.core.facts.stacks import python_imports
from dftune.tools.runner.draft import data_folder, draft_spec, render_toml
from dftune.tools.runner.levers import foreseen
from dftune.tools.runner.spec import WorkloadSpec, load_spec

POOL_READER = """
import argparse, os
from concurrent.futures import ThreadPoolExecutor
p = argparse.ArgumentParser()
p.add_argument("--data", required=True)
p.add_argument("--threads", type=int, default=1, help="reader threads")
p.add_argument("--chunk", type=int, default=4096, help="read size")
p.add_argument("--file-kib", type=int, default=16)
p.add_argument("--batch", type=int, default=32)
a = p.parse_args()
def read(path):
    with open(path, "rb", buffering=0) as f:
        return len(f.read())
with ThreadPoolExecutor(max_workers=a.threads) as pool:
    total = sum(pool.map(read, os.listdir(a.data)))
print(f"read_time_s {1.0}")
"""

LOADER = """
import argparse
from torch.utils.data import DataLoader
ap = argparse.ArgumentParser()
ap.add_argument("--data-dir", default="data")
ap.add_argument("--workers", type=int, default=0)
ap.add_argument("--epochs", type=int, default=1)
a = ap.parse_args()
train = DataLoader(ds, batch_size=8, num_workers=a.workers, prefetch_factor=(2 if a.workers else None))
val = DataLoader(ds, batch_size=8, num_workers=a.workers)
"""


def _draft(tmp_path: Path, source: str, *args: str, **kw):  # type: ignore[no-untyped-def]
    (tmp_path / "prog.py").write_text(textwrap.dedent(source))
    return draft_spec(["python", "prog.py", *args], tmp_path, **kw)


def _spec(tmp_path: Path, text: str):  # type: ignore[no-untyped-def]
    (tmp_path / "spec.toml").write_text(text)
    return load_spec(tmp_path / "spec.toml")


def test_a_pool_never_gets_zero_workers_and_the_knob_is_the_programs_flag(tmp_path: Path) -> None:
    draft = _draft(tmp_path, POOL_READER, "--data", "{data_dir}")
    tun = {s.knob_name: s for s in draft.tunables if s.flag}
    assert tun["THREADS"].values == [1, 2, 4, 8]  # never 0: ThreadPoolExecutor raises
    assert tun["THREADS"].strategy == "l1.concurrent_io_pool"
    assert tun["THREADS"].flag == "--threads"
    assert "prog.py:14 (ThreadPoolExecutor max_workers=)" in tun["THREADS"].source
    workload = {s.name for s in draft.workload}
    assert {"chunk", "file_kib", "batch"} <= workload  # request size, data size, batch: definition
    spec = _spec(tmp_path, render_toml(draft))
    assert [k.name for k in spec.knobs] == ["THREADS"]
    assert spec.command.count("{THREADS}") == 1


def test_a_condition_on_an_option_does_not_pass_its_value(tmp_path: Path) -> None:
    """``prefetch_factor=(2 if a.workers else None)``: --workers decides whether 2 is passed,
    it is not the prefetch factor; one option feeding two loaders is one knob."""
    draft = _draft(tmp_path, LOADER, "--data-dir", "{data_dir}")
    by = {s.name: s for s in draft.settings}
    assert by["num_workers"].flag == "--workers" and by["num_workers"].values == [0, 1, 2, 4]
    assert by["prefetch_factor"].flag == ""  # no option passes it
    text = render_toml(draft)
    spec = _spec(tmp_path, text)
    assert [k.name for k in spec.knobs] == ["WORKERS"]
    assert spec.command[-2:] == ["--workers", "{WORKERS}"]
    assert "prefetch_factor (prog.py:9 (DataLoader prefetch_factor=))" in text


def test_positional_and_assigned_arguments_reach_their_option(tmp_path: Path) -> None:
    source = """
    import argparse, multiprocessing, h5py
    from concurrent.futures import ProcessPoolExecutor
    p = argparse.ArgumentParser()
    p.add_argument("--procs", type=int, default=2)
    p.add_argument("--cache-bytes", type=int, default=1048576)
    p.add_argument("--slots", type=int, default=521)
    args = p.parse_args()
    n = int(args.procs)
    pool = ProcessPoolExecutor(n)
    f = h5py.File("x.h5", "r", rdcc_nbytes=args.cache_bytes, rdcc_nslots=args.slots)
    """
    draft = _draft(tmp_path, source)
    tun = {s.knob_name: s for s in draft.tunables if s.flag}
    assert tun["PROCS"].values == [2, 1, 4, 8] and tun["PROCS"].name == "max_workers"
    assert tun["CACHE_BYTES"].strategy == "l2.hdf5_chunk_cache"
    assert tun["CACHE_BYTES"].values == [1048576, 16777216, 67108864]
    assert tun["SLOTS"].strategy == "l2.hdf5_chunk_cache" and 10007 in tun["SLOTS"].values
    spec = _spec(tmp_path, render_toml(draft))
    assert {k.name for k in spec.knobs} == {"PROCS", "CACHE_BYTES", "SLOTS"}


def test_the_data_folder_in_any_form(tmp_path: Path) -> None:
    (tmp_path / "set").mkdir()
    argv, folder = data_folder(["python", "r.py", "--data", "set"], tmp_path)
    assert argv[-1] == "{data_dir}" and folder == str((tmp_path / "set").resolve())
    argv, folder = data_folder(["python", "r.py", f"--input-dir={tmp_path / 'set'}"], tmp_path)
    assert argv[-1] == "--input-dir={data_dir}" and folder
    argv, folder = data_folder(["python", "r.py", "--data", "${DATA_DIR}/train"], tmp_path)
    assert argv[-1] == "{data_dir}/train" and folder is None
    argv, folder = data_folder(["python", "r.py", "--out", "set"], tmp_path)  # not a data option
    assert argv[-1] == "set" and folder is None
    _, folder = data_folder(["python", "r.py", "--data", "{data_dir}"], tmp_path, tmp_path / "set")
    assert folder == str((tmp_path / "set").resolve())


def test_a_placeholder_nothing_fills_is_said_and_a_real_folder_is_used(tmp_path: Path) -> None:
    draft = _draft(tmp_path, POOL_READER, "--data", "{data_dir}")
    assert draft.data_dir is None and any("nothing fills it" in n for n in draft.notes)
    (tmp_path / "set").mkdir()
    draft = _draft(tmp_path, POOL_READER, "--data", "set")
    spec = _spec(tmp_path, render_toml(draft))
    assert spec.data_dir == str((tmp_path / "set").resolve())
    assert "--data" in spec.command and "{data_dir}" in spec.command


def test_a_generator_never_writes_into_the_users_data(tmp_path: Path) -> None:
    source = POOL_READER.replace(
        'p.add_argument("--batch"',
        'p.add_argument("--generate", action="store_true")\np.add_argument("--batch"',
    )
    assert _draft(tmp_path, source, "--data", "{data_dir}").setup is not None
    (tmp_path / "set").mkdir()
    draft = _draft(tmp_path, source, "--data", "set")
    assert draft.setup is None and any("not run" in n for n in draft.notes)


def test_hostile_values_still_make_valid_toml(tmp_path: Path) -> None:
    source = """
    import argparse
    from concurrent.futures import ThreadPoolExecutor
    p = argparse.ArgumentParser()
    p.add_argument("--threads", type=int, default=1, choices=[1, 3])
    p.add_argument("--label", default='a "quoted"\\nline \\\\ and \\'s')
    a = p.parse_args()
    ThreadPoolExecutor(a.threads)
    print(f"run_time_s {0}")
    """
    draft = _draft(tmp_path, source, "--note", "x\"y'\nz")
    text = render_toml(draft)
    doc = tomllib.loads(text)
    assert doc["command"][3] == "x\"y'\nz"
    spec = _spec(tmp_path, text)
    assert [k.values for k in spec.knobs] == [["1", "3"]] or [k.values for k in spec.knobs] == [[1, 3]]


def test_the_draft_says_what_a_run_finds_for_itself(tmp_path: Path) -> None:
    """A spec without knobs: the run patches the h5py call's cache arguments in a copy and tries
    zarr's documented concurrency; the draft names both, so the reader knows before the night."""
    (tmp_path / "data").mkdir()
    (tmp_path / "a.py").write_text(
        "import argparse, time, numpy as np, zarr  # zarr behind a comma\n"
        "import h5py\n"
        "p = argparse.ArgumentParser()\np.add_argument('--data')\na = p.parse_args()\n"
        "f = h5py.File(a.data + '/t.h5', 'r')\n"
        "print(f'read_time_s {time.perf_counter()}')\n"
    )
    draft = draft_spec(["python", "a.py", "--data", "data"], tmp_path)
    draft.foreseen = foreseen(draft, tmp_path)
    said = "\n".join(draft.foreseen)
    assert "DFTUNE_RDCC_NBYTES (a.py:line 6 (File rdcc_nbytes=" in said
    assert "l2.zarr_async_concurrency (ZARR_ASYNC__CONCURRENCY)" in said
    assert "l2.hdf5_chunk_cache (by hand)" in said
    text = render_toml(draft)
    assert "# What a run of this spec finds for itself" in text
    assert load_spec_text(tmp_path, text).knobs == []


def test_imports_behind_commas_and_aliases_are_imports() -> None:
    text = python_imports(
        "import argparse, numpy as np, zarr\nfrom torch.utils import data\n x = 'import y'\n"
    )
    assert "import zarr" in text and "from torch" in text and "import numpy" in text
    assert "import y" not in text


def load_spec_text(tmp_path: Path, text: str) -> WorkloadSpec:
    spec = tmp_path / "drafted.toml"
    spec.write_text(text)
    return load_spec(spec)


HYDRA_APP = """
import hydra
from torch.utils.data import DataLoader

@hydra.main(config_path="conf", config_name="config", version_base=None)
def main(cfg):
    loader = DataLoader(range(8), batch_size=cfg.loader.batch_size,
                        num_workers=cfg.loader.num_workers, pin_memory=cfg.loader.pin_memory)
    print(f"train_time_s {len(loader)}")

main()
"""

HYDRA_CONFIG = """
defaults:
  - _self_
data:
  root: data
  samples: 512
loader:
  batch_size: 8
  num_workers: 0
  pin_memory: false
train:
  epochs: 2
"""


def test_a_hydra_applications_config_keys_are_levers_passed_as_overrides(tmp_path: Path) -> None:
    (tmp_path / "conf").mkdir()
    (tmp_path / "conf" / "config.yaml").write_text(HYDRA_CONFIG)
    (tmp_path / "train.py").write_text(HYDRA_APP)
    (tmp_path / "set").mkdir()
    draft = draft_spec(["python", "train.py", "data.root=set", "loader.num_workers=2"], tmp_path)
    assert draft.command == [
        "{python}",
        "train.py",
        "data.root={data_dir}",
        "++loader.num_workers={NUM_WORKERS}",
        "++loader.pin_memory={PIN_MEMORY}",
    ]
    assert draft.data_dir == str((tmp_path / "set").resolve())
    knobs = {s.knob_name: s for s in draft.tunables if s.values}
    assert knobs["NUM_WORKERS"].default == 2 and knobs["NUM_WORKERS"].source == "conf/config.yaml"
    assert {s.name for s in draft.workload} >= {"train.epochs", "data.samples", "loader.batch_size"}
    # the call's arguments read those keys: the keys are the levers, nothing is listed twice
    assert not [s for s in draft.tunables if not s.flag]
    assert "Hydra application" in " ".join(draft.notes)
    assert load_spec_text(tmp_path, render_toml(draft)).knobs[0].name == "NUM_WORKERS"


def test_a_script_that_only_mentions_hydra_has_no_config_levers(tmp_path: Path) -> None:
    (tmp_path / "t.py").write_text("# see hydra docs\nimport argparse\nprint('x_time_s 1')\n")
    draft = draft_spec(["python", "t.py"], tmp_path)
    assert not draft.tunables and "Hydra" not in " ".join(draft.notes)


TYPER_HELP = """
 Usage: treader.py [OPTIONS]

╭─ Options ─────────────────────────╮
│ *  --data           <str>   folder of the data set [required]                │
│    --threads        <int>   reader threads [default: 1]                      │
│    --chunk          <int>   read size in bytes [default: 4096]               │
│    --help           <bool>  Show this message and exit.                      │
╰──────────────────────────╯
"""

CLICK_HELP = """Usage: reader.py [OPTIONS]

Options:
  --data PATH        folder of the data set  [required]
  --threads INTEGER  reader threads  [default: 2]
  --chunk INTEGER    read size in bytes
  --help             Show this message and exit.
"""

CLI_READER = """
import os
from concurrent.futures import ThreadPoolExecutor
import {lib}

def main(data, threads, chunk):
    with ThreadPoolExecutor(max_workers=threads) as pool:
        pass
    print(f"read_time_s {{0}}")
"""


@pytest.mark.parametrize(
    ("lib", "help_text", "default"), [("typer", TYPER_HELP, 1), ("click", CLICK_HELP, 2)]
)
def test_click_and_typer_options_come_from_their_help(
    tmp_path: Path, lib: str, help_text: str, default: int
) -> None:
    """No argparse call to read: the --help a CLI library prints (typer's boxed table, click's
    columns) gives the options, their types and defaults; the pool's argument is that option."""
    (tmp_path / "data").mkdir()
    (tmp_path / "r.py").write_text(CLI_READER.format(lib=lib))
    draft = draft_spec(["python", "r.py", "--data", "data"], tmp_path, help_text=help_text)
    assert draft.command == ["{python}", "r.py", "--data", "{data_dir}", "--threads", "{THREADS}"]
    (knob,) = [s for s in draft.tunables if s.values]
    assert knob.default == default and knob.values[0] == default
    assert {s.name for s in draft.workload} >= {"chunk"}
    assert not [s for s in draft.tunables if not s.flag]  # max_workers=threads is --threads
