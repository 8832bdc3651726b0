"""Map a Darshan job (one or more logs) onto dftune's :class:`Analysis` (``dftune.analysis/1``).

The families count the POSIX and STDIO records, the interfaces the trace reader counts on a
dftracer trace; MPI-IO, HDF5 and PnetCDF sit above them (their calls end in POSIX) and are
reported as layers, never added twice.  Every number is a vectorized reduction over the
record columns of :mod:`job`; where DXT traced every read and write, the position, size and
per-rank numbers come from DXT instead and are exact (docs/darshan.md).
"""

from __future__ import annotations

from collections.abc import Sequence

import numpy as np

from dftune.core.facts import darshan_facts
from dftune.tools.trace.darshan import dxt as X
from dftune.tools.trace.darshan import info as I
from dftune.tools.trace.darshan import views as V
from dftune.tools.trace.darshan.job import (
    BIN_LABELS,
    SMALL_BINS,
    Job,
    Records,
    exact_1mib,
    log_end,
    log_start,
)
from dftune.tools.trace.merge import _shape
from dftune.tools.trace.model import Analysis, FamilyStats, Imbalance, InterfaceStats, LayerStats

MIB = float(1 << 20)
META_COLUMNS = ("opens", "seeks", "stats", "dups", "mmaps", "renames", "fdopens")
SYNC_COLUMNS = ("fsyncs", "fdsyncs", "flushes")


def _pct(part: float, whole: float) -> float:
    return round(100.0 * part / whole, 4) if whole else 0.0


def _share(values: np.ndarray, part: np.ndarray, whole: np.ndarray) -> float:
    """sum(values * part / whole) over records: a per-record proportional split (0 where whole = 0)."""
    with np.errstate(divide="ignore", invalid="ignore"):
        ratio = np.where(whole > 0, part / np.where(whole > 0, whole, 1), 0.0)
    return float((values * ratio).sum())


def job_time(job: Job) -> float:
    """One log: libdarshan-util's run time; several: earliest start to latest end."""
    if len(job.logs) == 1:
        return float(job.logs[0].job.get("run_time") or 0.0)
    return max(log_end(lg) for lg in job.logs) - min(log_start(lg) for lg in job.logs)


def build_analysis(job: Job, views: Sequence[str] = (), windows: int = 20) -> Analysis:
    rec = job.records
    posix = rec.iface == "POSIX"
    ops = X.dxt_ops(job, "DXT_POSIX")
    jt = job_time(job)
    info = I.build_info(job, ops, jt)
    exact = ops is not None and info.dxt.complete
    fams = {"read": _family(rec, posix, write=False), "write": _family(rec, posix, write=True)}
    if exact:
        assert ops is not None
        for fam, write in (("read", False), ("write", True)):
            _apply_exact(fams[fam], X.family_exact(ops, write))
    meta = sum(rec[c].sum() for c in META_COLUMNS)
    fams["metadata"] = FamilyStats(count=int(meta), bytes=None, time_s=float(rec["meta_time"].sum()))
    fams["sync"] = FamilyStats(count=int(sum(rec[c].sum() for c in SYNC_COLUMNS)), bytes=None, time_s=0.0)
    rd, wr = fams["read"], fams["write"]
    rwm = rd.time_s + wr.time_s + fams["metadata"].time_s
    io_time = sum(f.time_s for f in fams.values())
    classified = rd.sequential + rd.random + wr.sequential + wr.random
    hist = X.size_hist(ops) if exact and ops is not None else info.counter_size_hist
    rw_bytes = (rd.bytes or 0) + (wr.bytes or 0)
    rw_ops = rd.count + wr.count - rd.aggregated_ops - wr.aggregated_ops
    ranks = _rank_totals(rec, ops if exact else None)
    analysis = Analysis(
        files=len(job.logs),
        trace_files=[lg.path for lg in job.logs],
        events=int(sum(f.count for f in fams.values())),
        skipped_lines=0,
        metadata_lines=0,
        counter_events=0,
        aggregated_events=0,
        formats=_formats(job),
        processes=job.nprocs,
        hosts=info.dxt.hosts,
        job_time_s=jt,
        read=rd,
        write=wr,
        metadata=fams["metadata"],
        sync=fams["sync"],
        io_time_s=io_time,
        read_time_pct=_pct(rd.time_s, rwm),
        write_time_pct=_pct(wr.time_s, rwm),
        metadata_time_pct=_pct(fams["metadata"].time_s, rwm),
        small_io_pct=_pct(rd.small + wr.small, rd.sized + wr.sized),
        small_read_pct=_pct(rd.small, rd.sized),
        small_write_pct=_pct(wr.small, wr.sized),
        seq_pct=_pct(rd.sequential + wr.sequential, classified),
        consecutive_pct=_pct(rd.consecutive + wr.consecutive, classified),
        rand_pct=_pct(rd.random + wr.random, classified),
        classified_accesses=classified,
        xfer_size_hist=hist,
        # Darshan's timers do not overlap within a record: summed, they are each rank's time in I/O calls
        unoverlapped_io_time_s=io_time,
        io_wall_time_s=io_time,
        process_time_s=job.nprocs * jt,
        misaligned_pct=_pct(rd.misaligned + wr.misaligned, rd.positioned + wr.positioned),
        interfaces=_interfaces(rec, posix),
        io_fraction_of_job=round(io_time / (job.nprocs * jt), 6) if jt else 0.0,
        unoverlapped_io_fraction=1.0 if io_time else 0.0,
        bw_job_mib_s=(rw_bytes / MIB / jt) if jt and rw_bytes else None,
        files_accessed=len(np.unique(rec.ids)),
        imbalance=_imbalance(ranks),
        shape=_shape(rw_ops, rw_bytes, fams, io_time * 1e6),
        layers=_layers(job, jt),
        time_metric="s",
        warnings=I.warnings(job, info, ops),
        darshan=info,
    )
    for view in views:
        if view != "summary":
            analysis.views[view] = V.build_view(view, job, analysis, ops, windows)
    return analysis


def _family(rec: Records, posix: np.ndarray, *, write: bool) -> FamilyStats:
    p = "w" if write else "r"
    n = rec["writes"] if write else rec["reads"]
    nbytes = rec["bytes_written"] if write else rec["bytes_read"]
    t = rec["write_time"] if write else rec["read_time"]
    other = rec["reads"] if write else rec["writes"]
    bins = np.stack([rec[f"{p}b{i}"] for i in range(len(BIN_LABELS))])
    one_mib = exact_1mib(rec)[1 if write else 0]
    small_rec = bins[:SMALL_BINS].sum(axis=0) - one_mib
    sized = int(bins.sum())
    seq = rec["seq_writes"] if write else rec["seq_reads"]
    consec = rec["consec_writes"] if write else rec["consec_reads"]
    # the first access of each rank to a file is neither sequential nor random (dftune: unclassified);
    # Darshan counts a first access at offset 0 as non-sequential, so it leaves the random count here
    first = np.where(posix & (n > 0), rec.nranks, 0)
    rand = np.clip(n - seq - first, 0, None) * posix
    mis = np.rint(rec["file_not_aligned"] * _ratio(n, n + other)).astype(np.int64)
    posix_bytes = int(nbytes[posix].sum())
    total = int(nbytes.sum())
    time_s = float(t.sum())
    return FamilyStats(
        count=int(n.sum()),
        bytes=total,
        time_s=time_s,
        sized=sized,
        mean_xfer_bytes=(posix_bytes / sized) if sized else None,
        bw_io_time_mib_s=(total / MIB / time_s) if time_s and total else None,
        aggregated_ops=int(n[~posix].sum()),
        small=int(small_rec.sum()),
        small_time_s=_share(t, small_rec, n),
        consecutive=int(consec.sum()),
        sequential=int(seq.sum()),
        random=int(rand.sum()),
        positioned=int(n[posix].sum()),
        misaligned=int(mis.sum()),
        random_time_s=_share(t, rand, n),
        misaligned_time_s=_share(t, mis, n),
    )


def _ratio(part: np.ndarray, whole: np.ndarray) -> np.ndarray:
    with np.errstate(divide="ignore", invalid="ignore"):
        return np.where(whole > 0, part / np.where(whole > 0, whole, 1), 0.0)


def _apply_exact(st: FamilyStats, x: dict[str, float]) -> None:
    st.consecutive, st.sequential, st.random = int(x["consecutive"]), int(x["sequential"]), int(x["random"])
    st.random_time_s, st.small, st.small_time_s = x["random_time_s"], int(x["small"]), x["small_time_s"]
    st.sized = int(x["ops"])
    st.mean_xfer_bytes = x["bytes"] / x["ops"] if x["ops"] else None


def _formats(job: Job) -> dict[str, int]:
    out: dict[str, int] = {}
    for lg in job.logs:
        key = f"darshan {lg.job.get('log_ver') or '?'}"
        out[key] = out.get(key, 0) + 1
    return out


def _interfaces(rec: Records, posix: np.ndarray) -> dict[str, InterfaceStats]:
    ops = rec["reads"] + rec["writes"] + sum(rec[c] for c in META_COLUMNS + SYNC_COLUMNS)
    nbytes = rec["bytes_read"] + rec["bytes_written"]
    t = rec["read_time"] + rec["write_time"] + rec["meta_time"]
    tb, tt = float(nbytes.sum()), float(t.sum())
    out = {}
    for name, m in (("POSIX", posix), ("STDIO", ~posix)):
        if m.any():
            out[name] = InterfaceStats(
                count=int(ops[m].sum()),
                bytes=int(nbytes[m].sum()),
                time_s=float(t[m].sum()),
                bytes_pct=_pct(float(nbytes[m].sum()), tb),
                time_pct=_pct(float(t[m].sum()), tt),
            )
    return out


def _layers(job: Job, jt: float) -> list[LayerStats]:
    out = []
    for mod, layer in darshan_facts().layer.items():
        counts, times = layer.ops, layer.time
        t = job.modules.get(mod)
        if t is None or not len(t):
            continue
        n = int(sum(np.clip(t.c(c), 0, None).sum() for c in counts if c in t.names))
        secs = float(sum(np.clip(t.f(f), 0, None).sum() for f in times if f in t.fnames))
        out.append(
            LayerStats(
                cat=mod,
                count=n,
                time_s=secs,
                mean_ms=secs / n * 1000 if n else 0.0,
                share_of_job_pct=_pct(secs, jt * job.nprocs),
            )
        )
    return sorted(out, key=lambda x: -x.time_s)


def _rank_totals(rec: Records, ops: X.DxtOps | None) -> dict[int, tuple[int, int, float]]:
    """rank -> (operations, bytes, time): DXT when it is complete, else the ranks' own records."""
    if ops is not None:
        return X.per_rank(ops)
    own = rec.rank >= 0
    if not own.any():
        return {}
    ranks, inv = np.unique(rec.rank[own], return_inverse=True)
    n = rec["reads"][own] + rec["writes"][own]
    b = rec["bytes_read"][own] + rec["bytes_written"][own]
    t = rec["read_time"][own] + rec["write_time"][own] + rec["meta_time"][own]
    sums = [np.bincount(inv, weights=v, minlength=len(ranks)) for v in (n, b, t)]
    return {int(r): (int(sums[0][i]), int(sums[1][i]), float(sums[2][i])) for i, r in enumerate(ranks)}


def _imbalance(ranks: dict[int, tuple[int, int, float]]) -> Imbalance:
    rows = [(r, v) for r, v in ranks.items() if v[0] > 0]
    if len(rows) < 2:
        return Imbalance()

    def spread(i: int) -> tuple[float, float]:
        vals = np.array([float(v[i]) for _, v in rows])
        hi, lo, mean = vals.max(), vals.min(), vals.mean()
        return ((hi - mean) / hi, (hi - lo) / hi) if hi else (0.0, 0.0)

    o, b, t = spread(0), spread(1), spread(2)
    slow = max(rows, key=lambda rv: rv[1][2])[0]
    return Imbalance(
        ops_max_mean=round(o[0], 6),
        ops_max_min=round(o[1], 6),
        bytes_max_mean=round(b[0], 6),
        bytes_max_min=round(b[1], 6),
        time_max_mean=round(t[0], 6),
        time_max_min=round(t[1], 6),
        slowest_process=f"rank {slow}",
    )
