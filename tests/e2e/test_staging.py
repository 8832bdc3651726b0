"""Staging a read-heavy data set onto /dev/shm per replicate, measured honestly (real runs, real dftracer).

The workload lists its data folder and reads every sample; it writes a summary into the folder.
A staged replicate copies the folder to /dev/shm, runs there, copies the summary back, removes the
copy, and its metric holds the copy's seconds. The guards see the staged files as the data
folder's; a disguised staging that copies half of the samples is caught on the real traces.
"""

from __future__ import annotations

import os
import re
import shutil
from pathlib import Path

import pytest

from dftune.core.domain.measurements import StagePlan
from dftune.tools.catalog import default_catalog
from dftune.tools.guards import Arm, access_pattern_guard, no_doing_less_guard
from dftune.tools.runner.bench import bench
from dftune.tools.runner.spec import load_spec
from dftune.tools.runner.staging import STAGE_PREFIX, staged_path, staged_replicate
from dftune.tools.trace import analyze

pytestmark = pytest.mark.e2e

SAMPLES, SIZE = 40, 256 << 10
PROGRAM = """\
import os, sys, time
data, mode = sys.argv[1], sys.argv[2]
train = os.path.join(data, "train")
if mode == "setup":
    os.makedirs(train, exist_ok=True)
    for i in range(__SAMPLES__):
        with open(os.path.join(train, "s%03d.bin" % i), "wb") as fh:
            fh.write(os.urandom(__SIZE__))
    sys.exit(0)
t0, total, files = time.perf_counter(), 0, 0
for name in sorted(os.listdir(train)):
    with open(os.path.join(train, name), "rb") as fh:
        while chunk := fh.read(65536):
            total += len(chunk)
    files += 1
elapsed = time.perf_counter() - t0
os.makedirs(os.path.join(data, "out"), exist_ok=True)
with open(os.path.join(data, "out", "summary.txt"), "a") as fh:
    fh.write("%d %d\\n" % (files, total))
print("files", files)
print("rate_mb_s %.6f" % (total / 1e6 / elapsed))
""".replace("__SAMPLES__", str(SAMPLES)).replace("__SIZE__", str(SIZE))


def shm_or_skip(data: Path) -> None:
    shm = Path("/dev/shm")
    if not (shm.is_dir() and os.access(shm, os.W_OK)) or os.stat(shm).st_dev == os.stat(data).st_dev:
        pytest.skip("no writable /dev/shm on another filesystem than the test's folder")


def make_spec(tmp_path: Path, metric: str = "") -> Path:
    (tmp_path / "reader.py").write_text(PROGRAM)
    toml = tmp_path / "reader.toml"
    toml.write_text(
        'name = "reader"\ncommand = ["{python}", "reader.py", "{data_dir}", "run"]\n'
        'setup = ["{python}", "reader.py", "{data_dir}", "setup"]\n'
        f'data_dir = "{tmp_path}/dataset"\nsetup_reuse = true\nreplicates = 2\ntimeout_s = 60\n'
        '[[work]]\nname = "files"\npattern = "^files (\\\\d+)"\n' + metric
    )
    return toml


def leftovers() -> list[str]:
    return [n for n in os.listdir("/dev/shm") if n.startswith(f"{STAGE_PREFIX}{os.getpid()}-")]


def test_a_staged_run_pays_for_its_copies_and_reads_the_same_data(tmp_path: Path) -> None:
    spec = load_spec(make_spec(tmp_path))
    plain = bench(spec, trace=True, workdir=tmp_path / "plain")  # also prepares the data set
    data = tmp_path / "dataset"
    shm_or_skip(data)
    plan = StagePlan(tier="shm")
    staged = bench(spec, trace=True, workdir=tmp_path / "staged", stage=plan)
    assert plain.ok == staged.ok == 2, (plain.replicates, staged.replicates)
    for rep in staged.replicates:
        assert rep.stage_s is not None and rep.stage_s > 0
        assert rep.metric == pytest.approx(rep.wall_s, abs=1e-5)  # the wall time includes the copies
        assert rep.stage_share == pytest.approx(rep.stage_s / rep.wall_s, rel=1e-3)
    assert all(r.stage_s is None for r in plain.replicates)
    # start-up is timed from the program's start, to its first read of the copy (not of the original)
    assert all(r.startup_s is not None for r in [*plain.replicates, *staged.replicates])
    assert any("% of the replicate" in n and "counted in the metric" in n for n in staged.notes)
    # the summary each run wrote came back to the original folder: 2 plain + 2 staged runs
    lines = (data / "out" / "summary.txt").read_text().splitlines()
    assert lines == [f"{SAMPLES} {SAMPLES * SIZE}"] * 4
    assert leftovers() == []
    # the staged runs read the copy, and the guards see its files as the data folder's
    copy = str(staged_path(plan, str((tmp_path / "staged").resolve()), data))
    trace = staged.replicates[0].trace_dir
    assert trace is not None
    analysis = analyze([trace], profile=True, exclude_helpers=True)
    assert analysis.profile is not None
    assert any(f.path.startswith(copy + "/train/") for f in analysis.profile.files)
    base = Arm(analysis=analyze([plain.replicates[0].trace_dir], profile=True), data_dir=str(data))
    exp = Arm(analysis=analysis, data_dir=str(data), staged_dir=copy, label="experiment")
    strategy = default_catalog().strategies["l3.stage_shm"]
    assert no_doing_less_guard(base, exp, strategy=strategy).passed
    pattern = access_pattern_guard(strategy, base, exp)
    assert pattern.passed, pattern.reason


def test_a_reported_rate_is_scaled_by_the_staging_share(tmp_path: Path) -> None:
    metric = '[metric]\nkind = "regex"\npattern = "^rate_mb_s ([0-9.]+)"\nlower_is_better = false\n'
    spec = load_spec(make_spec(tmp_path, metric))
    bench(spec, trace=False, replicates=1, workdir=tmp_path / "prep")
    shm_or_skip(tmp_path / "dataset")
    staged = bench(spec, trace=False, replicates=1, workdir=tmp_path / "staged", stage=StagePlan(tier="shm"))
    rep = staged.replicates[0]
    assert rep.status == "ok" and rep.stage_s and rep.metric is not None
    printed = float(re.findall(r"rate_mb_s ([0-9.]+)", (tmp_path / "staged/logs/r0.out").read_text())[-1])
    run = rep.wall_s - rep.stage_s
    assert rep.metric == pytest.approx(printed * run / (run + rep.stage_s), rel=1e-4)
    assert rep.metric < printed


def test_a_disguised_staging_that_copies_half_the_samples_is_caught(tmp_path: Path) -> None:
    spec = load_spec(make_spec(tmp_path))
    plain = bench(spec, trace=True, replicates=1, workdir=tmp_path / "plain")
    data = tmp_path / "dataset"
    shm_or_skip(data)
    seen: list[str] = []

    def every_other(src: str, dst: str) -> object:
        seen.append(src)
        return shutil.copy2(src, dst) if len(seen) % 2 else dst

    with staged_replicate(data, StagePlan(tier="shm"), "half", copier=every_other) as st:
        on_half = spec.model_copy(update={"data_dir": str(st.path), "setup": None})
        cheat = bench(on_half, trace=True, replicates=1, workdir=tmp_path / "cheat")
        copy = str(st.path)
    assert cheat.ok == 1
    base = Arm(analysis=analyze([plain.replicates[0].trace_dir], profile=True), data_dir=str(data))
    exp = Arm(
        analysis=analyze([cheat.replicates[0].trace_dir], profile=True),
        data_dir=str(data),
        staged_dir=copy,
        label="experiment",
    )
    strategy = default_catalog().strategies["l3.stage_shm"]
    less = no_doing_less_guard(base, exp, strategy=strategy)
    pattern = access_pattern_guard(strategy, base, exp)
    assert not less.passed and not pattern.passed, (less.reason, pattern.reason)


def test_dftune_bench_stage_shm_reports_the_staging_of_each_replicate(tmp_path: Path) -> None:
    import json

    from tests.cli_inproc import dftune

    toml = make_spec(tmp_path)
    load_spec(toml)
    bench(load_spec(toml), trace=False, replicates=1, workdir=tmp_path / "prep")  # the data set
    shm_or_skip(tmp_path / "dataset")
    done = dftune("bench", str(toml), "--stage", "shm", "--no-trace", "--replicates", "1", "--json")
    assert done.returncode == 0, done.stderr
    doc = json.loads(done.stdout)
    (rep,) = doc["replicates"]
    assert rep["status"] == "ok" and rep["stage_s"] > 0 and 0 < rep["stage_share"] < 1
    assert any(n.startswith("staged ") for n in doc["notes"])


def test_a_trace_limited_to_the_data_folder_also_traces_the_staged_copy(tmp_path: Path) -> None:
    """DFTRACER_DATA_DIR names the data folder: the staged copy is added to it (':'-separated)."""
    toml = make_spec(tmp_path)
    toml.write_text(toml.read_text() + f'[tracing]\ndata_dir = "{tmp_path}/dataset"\n')
    spec = load_spec(toml)
    bench(spec, trace=False, replicates=1, workdir=tmp_path / "prep")
    shm_or_skip(tmp_path / "dataset")
    plan = StagePlan(tier="shm")
    staged = bench(spec, trace=True, replicates=1, workdir=tmp_path / "staged", stage=plan)
    assert staged.ok == 1, staged.replicates
    trace = staged.replicates[0].trace_dir
    assert trace is not None
    copy = str(staged_path(plan, str((tmp_path / "staged").resolve()), tmp_path / "dataset"))
    profile = analyze([trace], profile=True).profile
    assert profile is not None
    assert sum(1 for f in profile.files if f.path.startswith(copy + "/train/") and f.read_bytes) == SAMPLES
