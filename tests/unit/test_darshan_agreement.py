"""Darshan logs: dftune's numbers agree with an independent reading through PyDarshan's own API.

The reference side uses only PyDarshan's report API (``DarshanReport`` records as pandas frames,
the DXT segment frames) and libdarshan-util's accumulator (``accumulate_records``: the
derived metrics darshan-job-summary prints).  dftune reads the same logs through its own
columnar reader and vectorized mapping; every comparison is exact unless it says otherwise.
"""

from __future__ import annotations

from pathlib import Path
from typing import Any

import numpy as np
import pandas as pd
import pytest

from dftune.tools.trace import analyze
from tests.darshan_logs import all_single_logs, collection, pydarshan_report, shipped

LOGS = all_single_logs()
IDS = [p.parent.name + "/" + p.name[:40] for p in LOGS]


def report(path: Path) -> Any:
    return pydarshan_report(path)


def frames(r: Any, mod: str) -> tuple[pd.DataFrame, pd.DataFrame] | None:
    if mod not in r.records or not len(r.records[mod]):
        return None
    df = r.records[mod].to_df()
    return df["counters"], df["fcounters"]


def total(frame: pd.DataFrame | None, *cols: str) -> float:
    """Sum of columns, Darshan's negative 'not recorded' values counted as 0 (as dftune does)."""
    if frame is None:
        return 0
    return float(sum(frame[c].clip(lower=0).sum() for c in cols))


@pytest.mark.parametrize("log", LOGS, ids=IDS)
def test_family_counts_bytes_and_times_agree_with_pydarshan(log: Path) -> None:
    r = report(log)
    a = analyze([log])
    p = frames(r, "POSIX")
    s = frames(r, "STDIO")
    pc, pf = p if p else (None, None)
    sc, sf = s if s else (None, None)
    assert a.read.count == total(pc, "POSIX_READS") + total(sc, "STDIO_READS")
    assert a.write.count == total(pc, "POSIX_WRITES") + total(sc, "STDIO_WRITES")
    assert a.read.bytes == total(pc, "POSIX_BYTES_READ") + total(sc, "STDIO_BYTES_READ")
    assert a.write.bytes == total(pc, "POSIX_BYTES_WRITTEN") + total(sc, "STDIO_BYTES_WRITTEN")
    assert a.read.time_s == pytest.approx(
        total(pf, "POSIX_F_READ_TIME") + total(sf, "STDIO_F_READ_TIME"), rel=1e-9, abs=1e-9
    )
    assert a.write.time_s == pytest.approx(
        total(pf, "POSIX_F_WRITE_TIME") + total(sf, "STDIO_F_WRITE_TIME"), rel=1e-9, abs=1e-9
    )
    assert a.metadata.time_s == pytest.approx(
        total(pf, "POSIX_F_META_TIME") + total(sf, "STDIO_F_META_TIME"), rel=1e-9, abs=1e-9
    )
    meta = total(
        pc, "POSIX_OPENS", "POSIX_SEEKS", "POSIX_STATS", "POSIX_DUPS", "POSIX_MMAPS", "POSIX_RENAME_SOURCES"
    )
    meta += total(sc, "STDIO_OPENS", "STDIO_FDOPENS", "STDIO_SEEKS")
    assert a.metadata.count == meta
    assert a.sync.count == total(pc, "POSIX_FSYNCS", "POSIX_FDSYNCS") + total(sc, "STDIO_FLUSHES")
    job = r.metadata["job"]
    assert a.processes == job["nprocs"]
    assert a.job_time_s == pytest.approx(job["run_time"])
    ids = set()
    for frame in (pc, sc):
        if frame is not None:
            ids |= {int(i) for i in frame["id"]}
    assert a.files_accessed == len(ids)
    assert a.darshan is not None and set(a.darshan.modules) == set(r.modules)
    assert a.darshan.partial_modules == sorted(m for m, v in r.modules.items() if v["partial_flag"])


@pytest.mark.parametrize("log", LOGS, ids=IDS)
def test_posix_estimate_and_file_categories_agree_with_the_accumulator(log: Path) -> None:
    """darshan-util's accumulator (PyDarshan ``accumulate_records``) is the job summary's source."""
    from darshan.backend.cffi_backend import accumulate_records

    r = report(log)
    if frames(r, "POSIX") is None:
        pytest.skip("no POSIX records")
    dm = accumulate_records(r.records["POSIX"].to_df(), "POSIX", r.metadata["job"]["nprocs"]).derived_metrics
    d = analyze([log]).darshan
    assert d is not None
    assert d.perf.total_bytes == dm.total_bytes
    assert (d.perf.agg_perf_by_slowest_mib_s or 0.0) == pytest.approx(dm.agg_perf_by_slowest, rel=1e-6)
    assert d.perf.shared_time_by_slowest_s == pytest.approx(
        dm.shared_io_total_time_by_slowest, rel=1e-9, abs=1e-9
    )
    cats = [dm.category_counters[i].count for i in range(7)]
    f = d.files
    assert [f.total, f.read_only, f.write_only, f.read_write, f.unique, f.shared, f.partially_shared] == cats


@pytest.mark.parametrize("log", LOGS, ids=IDS)
def test_size_histogram_is_darshans_bins(log: Path) -> None:
    r = report(log)
    a = analyze([log])
    assert a.darshan is not None
    p = frames(r, "POSIX")
    bins = (
        "0_100",
        "100_1K",
        "1K_10K",
        "10K_100K",
        "100K_1M",
        "1M_4M",
        "4M_10M",
        "10M_100M",
        "100M_1G",
        "1G_PLUS",
    )
    for fam, side in (("read", "READ"), ("write", "WRITE")):
        want = [total(p[0] if p else None, f"POSIX_SIZE_{side}_{b}") for b in bins]
        got = list(a.darshan.counter_size_hist[fam].values())
        assert sum(got) == sum(want)
        moved = want[4] - got[4]  # exactly-1-MiB operations moved out of the small 100K-1M bin
        assert moved >= 0 and got[5] == want[5] + moved
        assert got[:4] == want[:4] and got[6:] == want[6:]


def dxt_segments(r: Any) -> list[tuple[int, int, str, pd.DataFrame]]:
    out = []
    for rec in r.records["DXT_POSIX"].to_df():
        for kind in ("read_segments", "write_segments"):
            seg = rec[kind]
            if len(seg):
                out.append((int(rec["id"]), int(rec["rank"]), kind, seg))
    return out


def reference_classes(r: Any) -> dict[str, int]:
    """dftune's definitions, applied per (rank, file) record in start-time order, one op at a time."""
    counts = {"consecutive": 0, "sequential": 0, "random": 0, "first": 0}
    for rec in r.records["DXT_POSIX"].to_df():
        ops = [
            (row.start_time, row.offset, row.length)
            for kind in ("write_segments", "read_segments")
            for row in rec[kind].itertuples()
        ]
        ops.sort(key=lambda o: o[0])
        prev_end = None
        for _, offset, length in ops:
            if prev_end is None:
                counts["first"] += 1
            elif offset == prev_end:
                counts["consecutive"] += 1
                counts["sequential"] += 1
            elif offset > prev_end:
                counts["sequential"] += 1
            else:
                counts["random"] += 1
            prev_end = offset + length
    return counts


DXT_COMPLETE = [
    shipped("dxt.darshan"),
    collection(
        "runtime_and_dxt_heatmaps_diagonal_write_only/runtime_and_dxt_heatmaps_diagonal_write_only.darshan"
    ),
]


@pytest.mark.parametrize("log", DXT_COMPLETE, ids=[p.name for p in DXT_COMPLETE])
def test_dxt_makes_sequentiality_and_sizes_exact(log: Path) -> None:
    r = report(log)
    a = analyze([log])
    assert a.darshan is not None and a.darshan.dxt.complete
    assert a.darshan.sources["sequentiality"].startswith("dxt")
    ref = reference_classes(r)
    assert a.read.consecutive + a.write.consecutive == ref["consecutive"]
    assert a.read.sequential + a.write.sequential == ref["sequential"]
    assert a.read.random + a.write.random == ref["random"]
    lengths = {"read": [], "write": []}  # type: dict[str, list[int]]
    for _, _, kind, seg in dxt_segments(r):
        lengths["read" if kind == "read_segments" else "write"].extend(int(x) for x in seg["length"])
    edges = [4 << 10, 16 << 10, 64 << 10, 256 << 10, 1 << 20, 4 << 20, 16 << 20, 64 << 20]
    for fam in ("read", "write"):
        want = np.bincount(np.searchsorted(edges, lengths[fam], side="right"), minlength=9).tolist()
        assert list(a.xfer_size_hist[fam].values()) == want
        assert (a.read if fam == "read" else a.write).small == sum(1 for n in lengths[fam] if n < 1 << 20)


def test_dxt_time_view_and_heatmap_hold_every_traced_byte() -> None:
    log = shipped("dxt.darshan")
    r = report(log)
    a = analyze([log], views=["time"], time_windows=10)
    view = a.views["time"]
    segs = dxt_segments(r)
    want = {
        k: sum(int(s["length"].sum()) for _, _, kind, s in segs if kind == k)
        for k in ("read_segments", "write_segments")
    }
    assert sum(row["read_bytes"] for row in view["rows"]) == want["read_segments"]
    assert sum(row["write_bytes"] for row in view["rows"]) == want["write_segments"]
    hm = view["heatmap"]
    assert sum(map(sum, hm["read_bytes"])) == want["read_segments"] and len(hm["read_bytes"][0]) == 10


def test_runtime_heatmap_module_gives_the_time_view_without_dxt() -> None:
    log = collection("e3sm_io_heatmaps_and_dxt/e3sm_io_heatmap_only.darshan")
    r = report(log)
    a = analyze([log], views=["time"])
    view = a.views["time"]
    assert view["source"] == "HEATMAP:POSIX"
    hm = r.heatmaps["POSIX"]
    want_w = int(sum(np.asarray(b).sum() for b in (hm.to_df(ops=["write"]).to_numpy(),)))
    assert sum(row["write_bytes"] for row in view["rows"]) == want_w
    assert a.darshan is not None and a.darshan.sources["time_view"].startswith("heatmap")


def test_one_log_per_process_is_one_job() -> None:
    """DLIO writes one log per process: the folder is analyzed as one job of 24 processes."""
    folder = collection("dlio_logs")
    logs = sorted(folder.glob("*.darshan"))
    a = analyze([folder])
    assert a.files == len(logs) == 24 and a.processes == 24
    reads = bytes_read = 0.0
    starts, ends = [], []
    for f in logs:
        r = report(f)
        p = frames(r, "POSIX")
        s = frames(r, "STDIO")
        reads += total(p[0] if p else None, "POSIX_READS") + total(s[0] if s else None, "STDIO_READS")
        bytes_read += total(p[0] if p else None, "POSIX_BYTES_READ") + total(
            s[0] if s else None, "STDIO_BYTES_READ"
        )
        j = r.metadata["job"]
        starts.append(j["start_time_sec"] + j["start_time_nsec"] / 1e9)
        ends.append(j["end_time_sec"] + j["end_time_nsec"] / 1e9)
    assert a.read.count == reads and a.read.bytes == bytes_read
    assert a.job_time_s == pytest.approx(max(ends) - min(starts))
    assert a.darshan is not None and a.darshan.jobids == [3116902]
    # the dataset files every worker reads are one file each, accessed by many processes
    rows = analyze([folder], views=["file"]).views["file"]["rows"]
    assert max(r["processes"] for r in rows) > 1
