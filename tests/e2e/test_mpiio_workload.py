"""The MPI-IO example (resources/workloads/mpiio_shared) runs under mpirun, traced, and tunes for real.

Two MPI ranks overwrite one shared file in interleaved 1 KiB records with independent MPI-IO
while a hint turns ROMIO's write sieving off.  These tests run it through ``dftune bench``
exactly as the tuner does: the trace must show both ranks and the file's exact bytes, the
hint a knob sets must be the one ROMIO reports in effect (``MPI_File_get_info``), and the
tuned hint must beat the baseline by the statistics' own rules.
"""

from __future__ import annotations

import json
import re
from pathlib import Path

import conftest as c  # tests/ is on sys.path (rootdir conftest, prepend import mode)
import pytest

from dftune.tools.runner.bench import BenchResult, bench
from dftune.tools.runner.spec import WorkloadSpec, load_spec
from dftune.tools.runner.stats import compare
from dftune.tools.trace import analyze

pytestmark = pytest.mark.e2e
TOML = Path(__file__).resolve().parents[2] / "resources" / "workloads" / "mpiio_shared" / "workload.toml"
RANKS, RECORDS, RECORD = 2, 8192, 1024
FILE_BYTES = RANKS * RECORDS * RECORD  # 16 MiB


@pytest.fixture(scope="module")
def spec() -> WorkloadSpec:
    why = c.mpi_unavailable()
    if why:
        pytest.skip(why)
    return load_spec(TOML)


def _hints(result: BenchResult) -> dict[str, object]:
    """What the program wrote from MPI_File_get_info (data_dir = {workdir}/data)."""
    doc: dict[str, object] = json.loads((Path(result.workdir) / "data" / "hints-in-effect.json").read_text())
    return doc


def _stdout(result: BenchResult, label: str = "r0") -> str:
    return (Path(result.workdir) / "logs" / f"{label}.out").read_text()


def _restart_file(trace_dir: str | None) -> tuple[dict[str, object], dict[str, object]]:
    """(whole-trace analysis as JSON, the file view's row for restart.dat)."""
    assert trace_dir
    a = analyze([trace_dir], views=["file", "proc"])
    rows = [r for r in a.views["file"]["rows"] if str(r["path"]).endswith("/data/restart.dat")]
    assert len(rows) == 1, [r["path"] for r in a.views["file"]["rows"]][:20]
    return a.to_json_dict(), rows[0]


def test_spec_validates() -> None:
    spec = load_spec(TOML)  # no MPI needed: the spec and its strategies are plain data
    assert spec.launcher.kind == "mpirun" and spec.launcher.ranks == RANKS
    knobs = {k.name: k for k in spec.knobs}
    assert knobs["DS_WRITE"].default == "disable" and knobs["DS_WRITE"].strategy == "l2.romio_ds"
    assert knobs["COLLECTIVE"].strategy == "l1.mpiio_collective_calls"
    assert knobs["CB_NODES"].strategy == "l2.romio_cb_nodes"
    assert knobs["RECORDS"].strategy == "l1.write_less"  # doing less: the guards reject it
    argv = spec.render(spec.command, spec.settings(), workdir=Path("/w"))
    assert argv[argv.index("--ranks") + 1] == str(RANKS)


def test_traced_bench_shows_both_ranks_and_the_exact_bytes(spec: WorkloadSpec, tmp_path: Path) -> None:
    result = bench(spec, replicates=1, trace=True, workdir=tmp_path / "traced")
    assert result.ok == 1, [r.reason for r in result.replicates]
    out = _stdout(result)
    assert f"bytes_written {FILE_BYTES}" in out and "mismatched_bytes 0" in out
    assert result.median is not None and result.median > 0

    doc, restart = _restart_file(result.replicates[0].trace_dir)
    # one trace file per rank; mpirun and its proxies are not traced
    assert doc["processes"] == RANKS and doc["files"] == RANKS, doc["trace_files"]
    procs = doc["views"]["proc"]["rows"]
    assert len(procs) == RANKS and all("shared_io.py" in str(p["cmd"]) for p in procs)
    # ROMIO without write sieving: one 1 KiB pwrite per record, both ranks on the one file
    assert restart["processes"] == RANKS
    assert restart["write_count"] == RANKS * RECORDS and restart["write_bytes"] == FILE_BYTES
    assert all(p["write_count"] >= RECORDS for p in procs)
    assert doc["xfer_size_hist"]["write"]["<4K"] >= RANKS * RECORDS
    # the read-back (ROMIO read sieving: a few large reads that cover the other rank's records too)
    assert restart["read_bytes"] >= FILE_BYTES and restart["read_count"] < RECORDS


def test_collective_knob_keeps_the_bytes_and_sets_the_aggregators(spec: WorkloadSpec, tmp_path: Path) -> None:
    # cb_nodes alone cannot exceed one aggregator per host (cb_config_list "*:1"): ROMIO says so
    capped = bench(
        spec,
        overrides={"COLLECTIVE": "1", "CB_NODES": "2"},
        replicates=1,
        trace=False,
        workdir=tmp_path / "capped",
    )
    assert capped.ok == 1, [r.reason for r in capped.replicates]
    in_effect = _hints(capped)["in_effect"]
    assert isinstance(in_effect, dict)
    assert (in_effect["cb_nodes"], in_effect["cb_config_list"]) == ("1", "*:1")

    result = bench(
        spec,
        overrides={"COLLECTIVE": "1", "CB_NODES": "2", "CB_CONFIG_LIST": "*:2"},
        replicates=1,
        trace=True,
        workdir=tmp_path / "coll",
    )
    assert result.ok == 1, [r.reason for r in result.replicates]
    hints = _hints(result)
    assert hints["collective"] == 1
    assert hints["requested"] == {"cb_config_list": "*:2", "cb_nodes": "2", "romio_ds_write": "disable"}
    in_effect = hints["in_effect"]
    assert isinstance(in_effect, dict) and in_effect["cb_nodes"] == "2"
    assert str(in_effect["romio_aggregator_list"]).split() == ["0", "1"]
    _, restart = _restart_file(result.replicates[0].trace_dir)
    # the same 16 MiB reach the file, in far fewer, larger writes (two-phase I/O)
    assert restart["write_bytes"] == FILE_BYTES
    assert restart["write_count"] < RECORDS // 8


def test_tuned_hint_takes_effect_and_wins(spec: WorkloadSpec, tmp_path: Path) -> None:
    base = bench(spec, replicates=5, trace=False, workdir=tmp_path / "base")
    tuned = bench(
        spec, overrides={"DS_WRITE": "automatic"}, replicates=5, trace=False, workdir=tmp_path / "tuned"
    )
    for result in (base, tuned):
        assert result.ok == 5, [r.reason for r in result.replicates]
        assert "mismatched_bytes 0" in _stdout(result, "r4")
        assert re.search(rf"\bbytes_written {FILE_BYTES} ", _stdout(result, "r4"))
    # the hint the knob passes is the one ROMIO reports in effect
    base_hints, tuned_hints = _hints(base)["in_effect"], _hints(tuned)["in_effect"]
    assert isinstance(base_hints, dict) and isinstance(tuned_hints, dict)
    assert base_hints["romio_ds_write"] == "disable" and tuned_hints["romio_ds_write"] == "automatic"
    verdict = compare(base.values(), tuned.values(), lower_is_better=spec.metric.lower_is_better)
    assert verdict.verdict == "win", verdict.reason
