"""On Darshan logs dftune's diagnosis names what an HPC I/O expert would ("done when").

Each expectation is checked against the log's own counters read independently through
PyDarshan's report API, so a rule that fires for the wrong reason fails here.
"""

from __future__ import annotations

import itertools
from pathlib import Path
from typing import Any

import numpy as np
import pytest

from dftune.tools.diagnose.engine import diagnose
from dftune.tools.trace import analyze
from tests.darshan_logs import collection, pydarshan_report, shipped


def ids(path: Path) -> dict[str, Any]:
    return {b.id: b for b in diagnose([path]).bottlenecks}


def report(path: Path) -> Any:
    return pydarshan_report(path)


def test_imbalanced_single_ost_writes() -> None:
    """One file shared by 496 ranks on a single OST; MPI-IO funnels its writes through one rank."""
    log = collection("imbalanced_io/imbalanced-io.darshan")
    found = ids(log)
    assert {"DL01", "DD18"} <= set(found)
    r = report(log)
    lustre = r.records["LUSTRE"].to_df()["components"]
    top = found["DD18"].rows[0]["path"]  # the straggler file is one of the single-OST shared files
    assert top in {row["path"] for row in found["DL01"].rows}
    fid = next(k for k, v in r.name_records.items() if v == top)
    assert int(lustre[lustre["id"] == fid]["LUSTRE_COMP_STRIPE_COUNT"].iloc[0]) == 1
    posix = r.records["POSIX"].to_df()["counters"]
    rec = posix[posix["id"] == fid].iloc[0]
    assert rec["rank"] == -1 and rec["POSIX_SLOWEST_RANK_BYTES"] > 10 * max(
        rec["POSIX_FASTEST_RANK_BYTES"], 1
    )
    d = diagnose([log])
    assert any("module POSIX is partial" in w for w in d.warnings)


def test_bad_ost_is_named_and_the_good_ost_log_is_clean() -> None:
    bad, good = ids(shipped("sample-badost.darshan")), ids(shipped("sample-goodost.darshan"))
    assert {"DA02", "DA03"} <= set(bad) and "DA03" not in good and "DA02" not in good
    # independent check: the OST dftune names holds the files with the most write time per byte
    r = report(shipped("sample-badost.darshan"))
    comps = r.records["LUSTRE"].to_df()["components"]
    ost_of = {int(i): int(o[0]) for i, o in zip(comps["id"], comps["LUSTRE_OST_IDS"], strict=True)}
    c, f = (r.records["POSIX"].to_df()[k] for k in ("counters", "fcounters"))
    secs: dict[int, float] = {}
    gib: dict[int, float] = {}
    for fid, t, b in zip(c["id"], f["POSIX_F_WRITE_TIME"], c["POSIX_BYTES_WRITTEN"], strict=True):
        o = ost_of[int(fid)]
        secs[o] = secs.get(o, 0.0) + t
        gib[o] = gib.get(o, 0.0) + b / 2**30
    worst = max(secs, key=lambda o: secs[o] / gib[o])
    rate = [secs[o] / gib[o] for o in secs]
    assert f"OST {worst}" in bad["DA03"].evidence
    assert secs[worst] / gib[worst] / float(np.median(rate)) > 2


def test_mpiio_posix_skew_heuristic() -> None:
    """darshan-logs skew_io: the application log shows skew, the IOR benchmark 'might be a false positive'."""
    assert "DA01" in ids(collection("skew_io/skew-app.darshan"))
    assert "DA01" not in ids(collection("skew_io/skew-autobench-ior.darshan"))


def test_one_log_per_process_dlio() -> None:
    found = ids(collection("dlio_logs"))
    assert "T01" in found  # a training-data reader: reads hold the I/O time
    a = analyze([collection("dlio_logs")])
    assert a.processes == 24 and a.read_time_pct > 50


@pytest.mark.parametrize("name", ["HDF5", "PNETCDF"])
def test_hdf5_and_pnetcdf_ior_runs(name: str) -> None:
    log = next(collection("ior_pnetcdf_hdf5").glob(f"*{name}*.darshan"))
    a = analyze([log])
    layers = {x.cat for x in a.layers}
    assert (
        {"H5F", "H5D"} if name == "HDF5" else {"PNETCDF_FILE", "PNETCDF_VAR"}
    ) <= layers and "MPI-IO" in layers
    found = ids(log)
    assert "F02" in found and "T02" in found  # one shared file, write-dominated (IOR's default run)


def test_partial_logs_are_warnings_not_complete_numbers() -> None:
    stdio = diagnose([collection("partial_data_stdio/partial_data_stdio.darshan")])
    assert any(w.startswith("module STDIO is partial") and "lower bounds" in w for w in stdio.warnings)
    a = analyze([collection("partial_data_dxt/partial_data_dxt.darshan")])
    assert a.darshan is not None and set(a.darshan.partial_modules) == {"DXT_MPIIO", "DXT_POSIX"}
    assert not a.darshan.dxt.complete and a.darshan.sources["sequentiality"].startswith("counters")


def test_dxt_heatmap_shows_the_diagonal() -> None:
    """32 ranks each write one byte on staggered delays: rank
    r's byte lands in a later window than rank r-1's."""
    log = collection(
        "runtime_and_dxt_heatmaps_diagonal_write_only/runtime_and_dxt_heatmaps_diagonal_write_only.darshan"
    )
    hm = analyze([log], views=["time"], time_windows=64).views["time"]["heatmap"]
    assert hm["ranks"] == list(range(32))
    when = [int(np.argmax(row)) for row in hm["write_bytes"]]
    assert all(b >= a for a, b in itertools.pairwise(when)) and when[-1] > when[0]
    assert sum(map(sum, hm["write_bytes"])) == 32


def test_dftracer_diagnosis_is_untouched_by_darshan_rules() -> None:
    """Every Darshan-only metric is neutral on a trace: no Darshan rule can fire on dftracer input."""
    from dftune.tools.diagnose.rules import evaluate, load_rulesets
    from dftune.tools.trace.darshan.signals import SIGNAL_DEFAULTS
    from tests.unit.test_rules import BASE

    assert all(BASE[k] == v for k, v in SIGNAL_DEFAULTS.items())
    darshan_sets = [rs for rs in load_rulesets() if "darshan" in Path(rs.path).name]
    assert len(darshan_sets) == 3 and not evaluate(darshan_sets, BASE, {"file": []})


def test_heatmap_keeps_the_busiest_ranks_of_a_huge_job() -> None:
    from dftune.tools.trace.darshan import dxt

    n = dxt.HEATMAP_MAX_RANKS + 500
    rank = np.arange(n)
    nbytes = np.arange(n, dtype=np.int64) + 1  # the last ranks are the busiest
    hm = dxt.heatmap(rank, np.zeros(n, dtype=np.int64), nbytes, np.ones(n, bool), 4, 1.0, "DXT_POSIX")
    assert hm["ranks_total"] == n and hm["ranks"] == list(range(500, n))
    assert sum(row[0] for row in hm["write_bytes"]) == int(nbytes[500:].sum())
