"""dftune bench runs the bundled example for real, traced and untraced, with honest statistics."""

from __future__ import annotations

import json
import subprocess
import sys
from pathlib import Path

import conftest as c  # tests/ is on sys.path (rootdir conftest, prepend import mode)
import pytest

from dftune.tools.runner.bench import bench
from dftune.tools.runner.spec import load_spec
from dftune.tools.trace import analyze

pytestmark = pytest.mark.e2e
WORKLOADS = Path(__file__).resolve().parents[2] / "resources" / "workloads"
EXAMPLE = WORKLOADS / "small_reads" / "workload.toml"
EXAMPLES = sorted(WORKLOADS.glob("*/workload.toml"))


@pytest.mark.parametrize("toml", EXAMPLES, ids=[p.parent.name for p in EXAMPLES])
def test_every_example_benches_traced_and_untraced(tmp_path: Path, toml: Path) -> None:
    spec = load_spec(toml)
    if spec.launcher.kind == "mpirun" and (why := c.mpi_unavailable()):
        pytest.skip(why)
    traced = bench(spec, replicates=2, trace=True, workdir=tmp_path / "traced")
    plain = bench(spec, replicates=2, trace=False, workdir=tmp_path / "plain")
    for result in (traced, plain):
        assert result.ok == 2, [r.reason for r in result.replicates]
        assert result.median is not None and result.median > 0
    a = analyze([traced.replicates[0].trace_dir])
    assert a.events > 0 and (a.read.count + a.write.count) > 0


def test_example_bench_traced_and_untraced(tmp_path: Path) -> None:
    spec = load_spec(EXAMPLE)
    traced = bench(spec, replicates=3, trace=True, workdir=tmp_path / "traced")
    plain = bench(spec, replicates=3, trace=False, workdir=tmp_path / "plain")
    for result in (traced, plain):
        assert result.ok == 3 and all(r.status == "ok" for r in result.replicates)
        assert result.median is not None and result.ci95 is not None
        assert result.ci95[0] <= result.median <= result.ci95[1]
        assert len(result.values()) == result.ok
        assert result.cache_policy in ("drop_caches", "warm_up") and result.notes
    assert traced.traced and not plain.traced and plain.trace_dir is None
    assert all(r.traced for r in traced.replicates) and not any(r.traced for r in plain.replicates)
    # every traced replicate left a real dftracer trace with the reads the program did
    for rep in traced.replicates:
        a = analyze([rep.trace_dir])
        assert a.read.count > 10_000 and "dftracer-2.x" in a.formats


def test_bench_cli_json_contract(tmp_path: Path) -> None:
    out = subprocess.run(
        [
            sys.executable,
            "-m",
            "dftune.cli",
            "bench",
            str(EXAMPLE),
            "--replicates",
            "2",
            "--no-trace",
            "--set",
            "WORKERS=2",
            "--json",
        ],
        capture_output=True,
        text=True,
        timeout=300,
        check=False,
    )
    assert out.returncode == 0, out.stderr
    doc = json.loads(out.stdout)
    assert doc["schema"] == "dftune.bench/1" and doc["workload"] == "small-files-reader"
    assert doc["settings"]["WORKERS"] == 2
    for key in ("replicates", "median", "p95", "ci95", "trace_dir"):
        assert key in doc
    for rep in doc["replicates"]:
        assert {"status", "wall_s", "exit_code", "metric"} <= set(rep)


def test_failures_in_a_row_stop_the_experiment(tmp_path: Path) -> None:
    toml = tmp_path / "broken.toml"
    toml.write_text(
        'name = "broken"\ncommand = ["{python}", "-c", "import sys; sys.exit(7)"]\nreplicates = 10\n'
        '[tracing]\nmode = "off"\n'
    )
    result = bench(load_spec(toml), workdir=tmp_path / "w")
    assert len(result.replicates) == 3 and result.ok == 0
    assert result.stopped_reason and "3 failed replicates in a row" in result.stopped_reason
    assert result.median is None and all(r.exit_code == 7 for r in result.replicates)


def test_hung_workload_times_out(tmp_path: Path) -> None:
    toml = tmp_path / "hung.toml"
    toml.write_text(
        'name = "hung"\ncommand = ["{python}", "-c", "import time; time.sleep(60)"]\nreplicates = 1\n'
        'timeout_s = 1\n[tracing]\nmode = "off"\n'
    )
    result = bench(load_spec(toml), workdir=tmp_path / "w")
    assert result.replicates[0].status == "timeout" and result.ok == 0


def test_a_rerun_into_the_same_workdir_never_counts_an_earlier_attempts_trace(tmp_path: Path) -> None:
    pytest.importorskip("dftracer")
    from dftune.tools.runner.bench import bench
    from dftune.tools.runner.spec import load_spec
    from tests.graph.conftest import TOY

    stale = tmp_path / "traces" / "raw" / "r0" / "trace-0000-preload.pfw.gz"
    stale.parent.mkdir(parents=True)
    stale.write_bytes(b"left over from a run killed half-way")
    result = bench(load_spec(TOY), replicates=1, trace=True, workdir=tmp_path)
    assert result.ok == 1 and not stale.exists()
    assert any(stale.parent.glob("*.pfw*"))  # the new replicate's own trace is there
