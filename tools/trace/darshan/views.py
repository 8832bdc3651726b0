"""The file, proc, time and layer views of a Darshan analysis, in the rows the trace views use.

File rows add what only Darshan has: the shared-file skew counters (slowest/fastest rank bytes
and time, Drishti's straggler inputs), the per-rank size spread of files several ranks write
on their own, Lustre striping and the MPI-IO collective/independent split per file.
"""

from __future__ import annotations

from typing import Any

import numpy as np

from dftune.tools.trace.darshan import dxt as X
from dftune.tools.trace.darshan.info import lustre_layout
from dftune.tools.trace.darshan.job import SMALL_BINS, Job, exact_1mib
from dftune.tools.trace.model import Analysis

#: file-view rows kept (largest I/O time first); ``total`` says how many files there were
FILE_VIEW_LIMIT = 1000
#: ranks kept in the heatmap of a counters-only (HEATMAP module) time view
MIB = float(1 << 20)


def build_view(name: str, job: Job, analysis: Analysis, ops: X.DxtOps | None, windows: int) -> dict[str, Any]:
    if name == "file":
        return file_view(job, analysis, ops)
    if name == "proc":
        return proc_view(job)
    if name == "time":
        return time_view(job, analysis, ops, windows)
    return {"rows": [layer.model_dump() for layer in analysis.layers]}


def _group(ids: np.ndarray) -> tuple[np.ndarray, np.ndarray]:
    return np.unique(ids, return_inverse=True)


def _sum(inv: np.ndarray, n: int, values: np.ndarray) -> np.ndarray:
    return np.bincount(inv, weights=values.astype(np.float64), minlength=n)


def file_view(job: Job, analysis: Analysis, ops: X.DxtOps | None) -> dict[str, Any]:
    rec = job.records
    if not len(rec):
        return {"total": 0, "rows": []}
    ids, inv = _group(rec.ids)
    n = len(ids)
    meta: np.ndarray = np.sum(
        [rec[c] for c in ("opens", "seeks", "stats", "dups", "mmaps", "renames", "fdopens")], axis=0
    )
    sync = rec["fsyncs"] + rec["fdsyncs"] + rec["flushes"]
    s = {
        k: _sum(inv, n, v)
        for k, v in {
            "read_count": rec["reads"],
            "read_bytes": rec["bytes_read"],
            "read_time_s": rec["read_time"],
            "write_count": rec["writes"],
            "write_bytes": rec["bytes_written"],
            "write_time_s": rec["write_time"],
            "metadata_count": meta,
            "metadata_time_s": rec["meta_time"],
            "sync_count": sync,
            "seq": rec["seq_reads"] + rec["seq_writes"],
            "misaligned": rec["file_not_aligned"],
            "reduced_ranks": np.where(rec.rank < 0, rec.nranks, 0),
            "rank_records": rec.rank >= 0,
            "posix": rec.iface == "POSIX",
            "stdio": rec.iface == "STDIO",
        }.items()
    }
    r1, w1 = exact_1mib(rec)
    small_r = sum(rec[f"rb{i}"] for i in range(SMALL_BINS)) - r1
    small_w = sum(rec[f"wb{i}"] for i in range(SMALL_BINS)) - w1
    small = (_sum(inv, n, small_r), _sum(inv, n, small_w))
    first = np.where((rec.iface == "POSIX") & (rec["reads"] + rec["writes"] > 0), rec.nranks, 0)
    rand = _sum(
        inv,
        n,
        np.clip(rec["reads"] + rec["writes"] - rec["seq_reads"] - rec["seq_writes"] - first, 0, None)
        * (rec.iface == "POSIX"),
    )
    exact = ops is not None and analysis.darshan is not None and analysis.darshan.dxt.complete
    classes = X.per_file_classes(ops) if exact and ops is not None else {}
    skew = _shared_skew(rec, inv, n)
    spread_w, spread_r = _rank_spread(rec, ids), _rank_spread(rec, ids, read=True)
    io_all = s["read_time_s"] + s["write_time_s"] + s["metadata_time_s"]
    # rows only for the files shown (largest I/O time first): no Python loop over every file
    top = np.lexsort((ids, -io_all))[:FILE_VIEW_LIMIT]
    layout = lustre_layout(job)
    mpiio = _mpiio_per_file(job)
    rows = []
    for i in top.tolist():
        fid = int(ids[i])
        io = io_all[i]
        seq, rnd = classes.get(fid, (int(s["seq"][i]), int(rand[i])))
        stripe = layout.get(fid)
        coll, indep = mpiio.get(fid, (0, 0))
        ranks = int(s["reduced_ranks"][i]) + int(s["rank_records"][i])
        rows.append(
            {
                "path": job.names.get(fid, f"record:{fid}"),
                "processes": ranks,
                **{
                    k: int(s[k][i])
                    for k in (
                        "read_count",
                        "read_bytes",
                        "write_count",
                        "write_bytes",
                        "metadata_count",
                        "sync_count",
                    )
                },
                "read_time_s": round(float(s["read_time_s"][i]), 6),
                "write_time_s": round(float(s["write_time_s"][i]), 6),
                "metadata_time_s": round(float(s["metadata_time_s"][i]), 6),
                "sync_time_s": 0.0,
                "io_time_s": round(float(io), 6),
                "seq_pct": round(100.0 * seq / (seq + rnd), 2) if seq + rnd else None,
                "rand_pct": round(100.0 * rnd / (seq + rnd), 2) if seq + rnd else None,
                "interface": "+".join(x for x, k in (("POSIX", "posix"), ("STDIO", "stdio")) if s[k][i]),
                "shared": ranks > 1,
                "small_reads": int(small[0][i]),
                "small_writes": int(small[1][i]),
                "misaligned": int(s["misaligned"][i]),
                "stripe_count": stripe[0] if stripe else None,
                "stripe_size": stripe[1] if stripe else None,
                "osts": stripe[2] if stripe else None,
                "mpiio_collective_ops": coll,
                "mpiio_independent_ops": indep,
                "rank_bytes_skew": round(float(skew[0][i]), 6),
                "rank_time_skew": round(float(skew[1][i]), 6),
                "rank_write_spread": round(float(spread_w[i]), 6),
                "rank_read_spread": round(float(spread_r[i]), 6),
            }
        )
    return {"total": n, "rows": rows}


def _shared_skew(rec: Any, inv: np.ndarray, n: int) -> tuple[np.ndarray, np.ndarray]:
    """Drishti's straggler measures of shared (reduced) records, per file (0 for unreduced files).

    bytes: |slowest - fastest rank bytes| / the file's bytes; time: |slowest - fastest rank time| /
    the file's read + write + metadata time (drishti/handlers/handle_darshan.py).
    """
    shared = rec.rank < 0
    total_b = rec["bytes_read"] + rec["bytes_written"]
    total_t = rec["read_time"] + rec["write_time"] + rec["meta_time"]
    with np.errstate(divide="ignore", invalid="ignore"):
        b = np.where(
            shared & (total_b > 0),
            np.abs(rec["slowest_rank_bytes"] - rec["fastest_rank_bytes"]) / np.where(total_b > 0, total_b, 1),
            0.0,
        )
        t = np.where(
            shared & (total_t > 0),
            np.abs(rec["slowest_rank_time"] - rec["fastest_rank_time"]) / np.where(total_t > 0, total_t, 1),
            0.0,
        )
    bb, tt = np.zeros(n), np.zeros(n)
    np.maximum.at(bb, inv, b)
    np.maximum.at(tt, inv, t)
    return bb, tt


def _rank_spread(rec: Any, ids: np.ndarray, *, read: bool = False) -> np.ndarray:
    """Per file (aligned with ``ids``): (max - min) / max of the bytes each rank moved, over files with
    records of 2+ ranks (Drishti P21/P22), else 0."""
    out = np.zeros(len(ids))
    own = rec.rank >= 0
    if not own.any():
        return out
    col = (rec["bytes_read"] if read else rec["bytes_written"])[own].astype(np.float64)
    inv = np.searchsorted(ids, rec.ids[own])
    hi = np.full(len(ids), -np.inf)
    lo = np.full(len(ids), np.inf)
    np.maximum.at(hi, inv, col)
    np.minimum.at(lo, inv, col)
    cnt = np.bincount(inv, minlength=len(ids))
    ok = (cnt > 1) & (hi > 0)
    out[ok] = (hi[ok] - lo[ok]) / hi[ok]
    return out


def _mpiio_per_file(job: Job) -> dict[int, tuple[int, int]]:
    t = job.modules.get("MPI-IO")
    if t is None or not len(t):
        return {}
    coll = sum(np.clip(t.c(c), 0, None) for c in ("MPIIO_COLL_READS", "MPIIO_COLL_WRITES"))
    indep = sum(np.clip(t.c(c), 0, None) for c in ("MPIIO_INDEP_READS", "MPIIO_INDEP_WRITES"))
    ids, inv = np.unique(t.ids, return_inverse=True)
    c, i = (
        np.bincount(inv, weights=coll, minlength=len(ids)),
        np.bincount(inv, weights=indep, minlength=len(ids)),
    )
    return {int(f): (int(c[k]), int(i[k])) for k, f in enumerate(ids.tolist())}


def proc_view(job: Job) -> dict[str, Any]:
    """One row per rank from its own records; shared (reduced) records belong to no single rank."""
    rec = job.records
    own = rec.rank >= 0
    if not own.any():
        return {
            "total": 0,
            "rows": [],
            "note": "every record is shared (reduced over all ranks): no per-rank rows",
        }
    ranks, inv = np.unique(rec.rank[own], return_inverse=True)
    n = len(ranks)

    def s(col: np.ndarray) -> np.ndarray:
        return _sum(inv, n, col[own])

    meta: np.ndarray = np.sum(
        [rec[c] for c in ("opens", "seeks", "stats", "dups", "mmaps", "renames", "fdopens")], axis=0
    )
    sync = rec["fsyncs"] + rec["fdsyncs"] + rec["flushes"]
    cols = {
        "read_count": s(rec["reads"]),
        "read_bytes": s(rec["bytes_read"]),
        "read_time_s": s(rec["read_time"]),
        "write_count": s(rec["writes"]),
        "write_bytes": s(rec["bytes_written"]),
        "write_time_s": s(rec["write_time"]),
        "metadata_count": s(meta),
        "metadata_time_s": s(rec["meta_time"]),
        "sync_count": s(sync),
    }
    first = np.full(n, np.inf)
    last = np.zeros(n)
    opened = rec["open_start"][own]
    np.minimum.at(first, inv, np.where(opened > 0, opened, np.inf))
    np.maximum.at(last, inv, rec["close_end"][own])
    hosts = _rank_hosts(job)
    rows: list[dict[str, Any]] = []
    for i, r in enumerate(ranks.tolist()):
        io = cols["read_time_s"][i] + cols["write_time_s"][i] + cols["metadata_time_s"][i]
        ops = (
            cols["read_count"][i] + cols["write_count"][i] + cols["metadata_count"][i] + cols["sync_count"][i]
        )
        rows.append(
            {
                "host": hosts.get(int(r), "?"),
                "pid": int(r),
                "rank": int(r),
                "cmd": None,
                "events": int(ops),
                "lifetime_s": round(float(last[i] - first[i]), 6) if np.isfinite(first[i]) else None,
                **{k: (round(float(v[i]), 6) if k.endswith("_s") else int(v[i])) for k, v in cols.items()},
                "sync_time_s": 0.0,
                "io_time_s": round(float(io), 6),
                "io_wall_s": round(float(io), 6),
                "unoverlapped_io_s": round(float(io), 6),
                "compute_wall_s": 0.0,
            }
        )
    rows.sort(key=lambda row: (-row["io_time_s"], row["rank"]))
    return {"total": len(rows), "rows": rows}


def _rank_hosts(job: Job) -> dict[int, str]:
    out: dict[int, str] = {}
    for i, lg in enumerate(job.logs):
        for t in lg.dxt.values():
            for r, h in zip(t.rec_ranks.tolist(), t.rec_hosts, strict=True):
                if r >= 0 and h:
                    out.setdefault(int(r + job.offsets[i]), h)
    return out


def time_view(job: Job, analysis: Analysis, ops: X.DxtOps | None, windows: int) -> dict[str, Any]:
    """DXT_POSIX operations, else DXT_MPIIO, else the runtime HEATMAP module (bytes only), else nothing."""
    jt = analysis.job_time_s
    for source in (ops, X.dxt_ops(job, "DXT_MPIIO") if ops is None else None):
        if source is not None and len(source):
            return X.time_view(source, jt, windows, job.nprocs)
    hm = _heatmap_view(job, jt, windows)
    if hm is not None:
        return hm
    return {
        "origin_us": 0,
        "window_s": jt / windows if jt else 0.0,
        "windows": windows,
        "rows": [],
        "source": "none",
        "note": "the log has neither DXT nor HEATMAP data: Darshan's counters have no timeline",
    }


def _heatmap_view(job: Job, jt: float, windows: int) -> dict[str, Any] | None:
    """Re-bin the HEATMAP module's fixed-width bins (POSIX, else STDIO/MPIIO) onto the job's windows."""
    parts = []
    for i, lg in enumerate(job.logs):
        hm = lg.heatmap
        if hm is None:
            continue
        mods = set(hm.module)
        pick = "POSIX" if "POSIX" in mods else sorted(mods)[0]
        for k, m in enumerate(hm.module):
            if m != pick:
                continue
            nb = len(hm.read_bins[k])
            starts = np.arange(nb) * hm.bin_width_s[k] + job.clock[i]
            who = int(hm.ranks[k] + job.offsets[i]) if hm.ranks[k] >= 0 else -1
            parts.append((np.full(nb, who), starts, hm.read_bins[k], hm.write_bins[k], pick))
    if not parts:
        return None
    rank = np.concatenate([p[0] for p in parts])
    start = np.concatenate([p[1] for p in parts])
    rd, wr = np.concatenate([p[2] for p in parts]), np.concatenate([p[3] for p in parts])
    width = max(jt, float(start.max()) if len(start) else 0.0, 1e-9) / windows
    b = np.minimum((start // width).astype(np.int64), windows - 1).clip(0)
    rows = []
    for w in range(windows):
        m = b == w
        rb, wb = int(rd[m].sum()), int(wr[m].sum())
        rows.append(
            {
                "start_s": round(w * width, 6),
                "end_s": round((w + 1) * width, 6),
                "read_count": None,
                "read_bytes": rb,
                "write_count": None,
                "write_bytes": wb,
                "metadata_count": None,
                "read_time_s": None,
                "write_time_s": None,
                "metadata_time_s": None,
                "io_time_s": None,
                "bandwidth_mib_s": round((rb + wb) / MIB / width, 3),
            }
        )
    src = f"HEATMAP:{parts[0][4]}"
    both = np.concatenate([rd, wr])
    is_write = np.r_[np.zeros(len(rd), bool), np.ones(len(wr), bool)]
    return {
        "origin_us": 0,
        "window_s": width,
        "windows": windows,
        "rows": rows,
        "source": src,
        "note": "Darshan's runtime heatmap: bytes per time bin only (no operation counts or times)",
        "heatmap": X.heatmap(np.r_[rank, rank], np.r_[b, b], both, is_write, windows, width, src),
    }
