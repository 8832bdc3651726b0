"""The Darshan-only metrics the diagnosis rules read (resources/rules/darshan*.toml).

:func:`compute_signals` reduces a job to flat numbers once (stored in the analysis's
``darshan.signals``); :func:`darshan_metrics` hands them to the rules with neutral values for
a dftracer analysis, so every rule file evaluates on every input.  The thresholds live in the
rule files, never here.
"""

from __future__ import annotations

from typing import Any

import numpy as np

from dftune.tools.trace.darshan.job import DARSHAN_BINS, SMALL_BINS, Job, exact_1mib

#: neutral values: on a dftracer trace (or a log without the module) no Darshan rule can fire
SIGNAL_DEFAULTS: dict[str, Any] = {
    "darshan_input": False,
    "mpiio_reads": 0,
    "mpiio_writes": 0,
    "mpiio_coll_reads": 0,
    "mpiio_coll_writes": 0,
    "mpiio_indep_read_frac": 0.0,
    "mpiio_indep_write_frac": 0.0,
    "mpiio_time_s": 0.0,
    "mpiio_posix_time_s": 0.0,
    "mpiio_slowest_s": 0.0,
    "posix_slowest_s": 0.0,
    "mpiio_posix_time_ratio": 0.0,
    "mpiio_skew_frac": 0.0,
    "mpiio_read_time_frac": 0.0,
    "mpiio_write_time_frac": 0.0,
    "mpiio_small_reads": 0,
    "mpiio_small_writes": 0,
    "mpiio_small_read_frac": 0.0,
    "mpiio_small_write_frac": 0.0,
    "mpiio_small_read_time_frac": 0.0,
    "mpiio_small_write_time_frac": 0.0,
    "mem_misaligned_count": 0,
    "mem_misaligned_frac": 0.0,
    "mem_misaligned_time_frac": 0.0,
    "shared_reads": 0,
    "shared_small_reads": 0,
    "shared_small_read_frac": 0.0,
    "shared_writes": 0,
    "shared_small_writes": 0,
    "shared_small_write_frac": 0.0,
    "shared_small_time_frac": 0.0,
    "slow_ost": "-",
    "slow_ost_ratio": 0.0,
    "slow_ost_time_frac": 0.0,
    "osts_compared": 0,
    "rank_time_straggler_frac": 0.0,
    "slowest_rank_time_s": 0.0,
    "median_rank_time_s": 0.0,
    "shared_meta_time_s": 0.0,
    "shared_meta_ranks": 0,
    "shared_meta_per_rank_s": 0.0,
    "shared_meta_time_frac": 0.0,
    "shared_meta_opens": 0,
}
#: file-view columns of a Darshan analysis, neutral for a dftracer file row
FILE_DEFAULTS: dict[str, Any] = {
    "shared": False,
    "stripe_count": None,
    "stripe_size": None,
    "osts": None,
    "rank_bytes_skew": 0.0,
    "rank_time_skew": 0.0,
    "rank_write_spread": 0.0,
    "rank_read_spread": 0.0,
    "mpiio_collective_ops": 0,
    "mpiio_independent_ops": 0,
}


def darshan_metrics(signals: dict[str, Any] | None) -> dict[str, Any]:
    return {**SIGNAL_DEFAULTS, **(signals or {})}


def _frac(part: float, whole: float) -> float:
    return float(part) / float(whole) if whole else 0.0


def compute_signals(job: Job, shared: np.ndarray, layout: dict[int, tuple[int, int, int]]) -> dict[str, Any]:
    """Every :data:`SIGNAL_DEFAULTS` key for this job (``shared``: ids of shared files)."""
    rec = job.records
    posix = rec.iface == "POSIX"
    io_t = rec["read_time"] + rec["write_time"] + rec["meta_time"]
    total_t = float(io_t.sum())
    out: dict[str, Any] = {"darshan_input": True}
    out.update(_mpiio(job, total_t))
    n = int((rec["reads"] + rec["writes"])[posix].sum())
    out["mem_misaligned_count"] = int(rec["mem_not_aligned"].sum())
    out["mem_misaligned_frac"] = _frac(out["mem_misaligned_count"], n)
    rw_t = rec["read_time"] + rec["write_time"]
    with np.errstate(divide="ignore", invalid="ignore"):
        mis = np.where(
            rec["reads"] + rec["writes"] > 0,
            rec["mem_not_aligned"] / np.maximum(rec["reads"] + rec["writes"], 1),
            0,
        )
    out["mem_misaligned_time_frac"] = _frac(float((rw_t * np.clip(mis, 0, 1)).sum()), total_t)
    # small requests to shared files (Drishti P15/P16): the records of files several ranks access
    sh = posix & np.isin(rec.ids, shared)
    r1, w1 = exact_1mib(rec)
    small_r = sum(rec[f"rb{i}"] for i in range(SMALL_BINS)) - r1
    small_w = sum(rec[f"wb{i}"] for i in range(SMALL_BINS)) - w1
    out["shared_reads"], out["shared_small_reads"] = int(rec["reads"][sh].sum()), int(small_r[sh].sum())
    out["shared_writes"], out["shared_small_writes"] = int(rec["writes"][sh].sum()), int(small_w[sh].sum())
    out["shared_small_read_frac"] = _frac(out["shared_small_reads"], out["shared_reads"])
    out["shared_small_write_frac"] = _frac(out["shared_small_writes"], out["shared_writes"])
    with np.errstate(divide="ignore", invalid="ignore"):
        part = np.where(
            rec["reads"] + rec["writes"] > 0,
            (small_r + small_w) / np.maximum(rec["reads"] + rec["writes"], 1),
            0,
        )
    out["shared_small_time_frac"] = _frac(
        float(((rec["read_time"] + rec["write_time"]) * part)[sh].sum()), total_t
    )
    out.update(_slow_ost(job, layout, io_t, total_t))
    out.update(_rank_stragglers(job))
    out.update(_shared_metadata(job, total_t))
    return out


def _mpiio(job: Job, total_t: float) -> dict[str, Any]:
    t = job.modules.get("MPI-IO")
    if t is None or not len(t):
        return {}

    def c(name: str) -> int:
        return int(np.clip(t.c(name), 0, None).sum())

    def f(name: str) -> float:
        return float(np.clip(t.f(name), 0, None).sum())

    coll_r, coll_w = c("MPIIO_COLL_READS"), c("MPIIO_COLL_WRITES")
    ind_r, ind_w = c("MPIIO_INDEP_READS"), c("MPIIO_INDEP_WRITES")
    m_time = f("MPIIO_F_READ_TIME") + f("MPIIO_F_WRITE_TIME") + f("MPIIO_F_META_TIME")
    rec = job.records
    under = (rec.iface == "POSIX") & np.isin(rec.ids, t.ids)
    p_time = float((rec["read_time"] + rec["write_time"] + rec["meta_time"])[under].sum())
    # the slowest rank in each layer: a reduced record's SLOWEST_RANK_TIME, else the record's own time
    m_own = sum(
        np.clip(t.f(x), 0, None) for x in ("MPIIO_F_READ_TIME", "MPIIO_F_WRITE_TIME", "MPIIO_F_META_TIME")
    )
    m_slow = float(np.where(t.ranks < 0, np.clip(t.f("MPIIO_F_SLOWEST_RANK_TIME"), 0, None), m_own).max())
    p_own = (rec["read_time"] + rec["write_time"] + rec["meta_time"])[under]
    p_slow = (
        float(np.where(rec.rank[under] < 0, rec["slowest_rank_time"][under].clip(0), p_own).max())
        if under.any()
        else 0.0
    )
    return {
        "mpiio_reads": coll_r + ind_r,
        "mpiio_writes": coll_w + ind_w,
        "mpiio_coll_reads": coll_r,
        "mpiio_coll_writes": coll_w,
        "mpiio_indep_read_frac": _frac(ind_r, coll_r + ind_r),
        "mpiio_indep_write_frac": _frac(ind_w, coll_w + ind_w),
        "mpiio_time_s": m_time,
        "mpiio_posix_time_s": p_time,
        "mpiio_slowest_s": m_slow,
        "posix_slowest_s": p_slow,
        "mpiio_posix_time_ratio": _frac(m_slow, p_slow),
        "mpiio_skew_frac": max(0.0, 1.0 - _frac(p_slow, m_slow)) if m_slow else 0.0,
        "mpiio_read_time_frac": _frac(f("MPIIO_F_READ_TIME"), total_t + m_time),
        "mpiio_write_time_frac": _frac(f("MPIIO_F_WRITE_TIME"), total_t + m_time),
        **_mpiio_small(t, c, f, total_t + m_time),
    }


ONE_MIB = 1 << 20


def _mpiio_small(t: Any, c: Any, f: Any, total_t: float) -> dict[str, Any]:
    """Small requests as the application issues them to MPI-IO, before ROMIO's collective
    buffering merges them: POSIX may see only 1 MiB aggregator writes while the program made a
    million tiny calls, each paying MPI-IO's per-call cost (Drishti's small-request thresholds
    applied one layer up).  Calls of exactly 1 MiB sit in the 100K_1M bin; the MPIIO_ACCESS*
    counters (shared by reads and writes) take them out of the direction with more calls."""
    small: dict[str, int] = {}
    calls: dict[str, int] = {}
    for kind, word in (("read", "READ"), ("write", "WRITE")):
        # MPI-IO's size bins (the application's own calls) are POSIX's: the small ones
        names = [f"MPIIO_SIZE_{word}_AGG_{b}" for b in DARSHAN_BINS[:SMALL_BINS]]
        if not all(n in t.names for n in names):
            return {}
        small[kind] = sum(c(n) for n in names)
        calls[kind] = sum(
            c(f"MPIIO_{m}_{word}S")
            for m in ("INDEP", "COLL", "SPLIT", "NB")
            if f"MPIIO_{m}_{word}S" in t.names
        )
    exact = 0
    for i in range(1, 5):
        if f"MPIIO_ACCESS{i}_ACCESS" in t.names:
            exact += int(
                np.clip(t.c(f"MPIIO_ACCESS{i}_COUNT"), 0, None)[
                    t.c(f"MPIIO_ACCESS{i}_ACCESS") == ONE_MIB
                ].sum()
            )
    more = "write" if calls["write"] >= calls["read"] else "read"
    small[more] = max(0, small[more] - exact)
    out: dict[str, Any] = {}
    for kind, time_name in (("read", "MPIIO_F_READ_TIME"), ("write", "MPIIO_F_WRITE_TIME")):
        share = _frac(small[kind], calls[kind])
        out[f"mpiio_small_{kind}s"] = small[kind]
        out[f"mpiio_small_{kind}_frac"] = share
        out[f"mpiio_small_{kind}_time_frac"] = _frac(f(time_name) * share, total_t)
    return out


def _slow_ost(
    job: Job, layout: dict[int, tuple[int, int, int]], io_t: np.ndarray, total_t: float
) -> dict[str, Any]:
    """Seconds per GiB of the files on each OST (stripe-count-1 files only), worst vs median.

    One OST much slower than the others slows every rank whose file lives there (PyDarshan's
    sample-badost log); only single-OST files can be charged to one OST.
    """
    one: dict[int, int] = {}
    for lg in job.logs:
        lu = lg.lustre
        if lu is None:
            continue
        for i, fid in enumerate(lu.ids.tolist()):
            if lu.stripe_count[i] == 1 and len(lu.osts[i]) == 1:
                one.setdefault(int(fid), int(lu.osts[i][0]))
    if len(set(one.values())) < 3:
        return {}
    rec = job.records
    ost = np.array([one.get(int(i), -1) for i in rec.ids.tolist()], dtype=np.int64)
    nbytes = (rec["bytes_read"] + rec["bytes_written"]).astype(np.float64)
    m = (ost >= 0) & (nbytes > 0)
    if not m.any():
        return {}
    osts, inv = np.unique(ost[m], return_inverse=True)
    secs = np.bincount(inv, weights=(rec["read_time"] + rec["write_time"])[m], minlength=len(osts))
    gib = np.bincount(inv, weights=nbytes[m], minlength=len(osts)) / float(1 << 30)
    rate = np.where(gib > 0, secs / np.where(gib > 0, gib, 1), 0.0)
    worst = int(rate.argmax())
    med = float(np.median(rate))
    return {
        "slow_ost": f"OST {int(osts[worst])}",
        "slow_ost_ratio": float(rate[worst] / med) if med else 0.0,
        "slow_ost_time_frac": _frac(float(io_t[m][inv == worst].sum()), total_t),
        "osts_compared": len(osts),
    }


def _rank_stragglers(job: Job) -> dict[str, Any]:
    """How far the slowest rank's own I/O time is above the median rank's: (max - median) / max."""
    rec = job.records
    own = rec.rank >= 0
    if not own.any():
        return {}
    ranks, inv = np.unique(rec.rank[own], return_inverse=True)
    t = np.bincount(
        inv, weights=(rec["read_time"] + rec["write_time"] + rec["meta_time"])[own], minlength=len(ranks)
    )
    if len(t) < 2 or t.max() <= 0:
        return {}
    med = float(np.median(t))
    return {
        "rank_time_straggler_frac": float((t.max() - med) / t.max()),
        "slowest_rank_time_s": float(t.max()),
        "median_rank_time_s": med,
    }


def _shared_metadata(job: Job, total_t: float) -> dict[str, Any]:
    """The POSIX record of a shared file with the most metadata time (Drishti's per-record
    POSIX_F_META_TIME test, which on a reduced record compares the sum over every rank with a
    per-rank limit): its summed seconds, the ranks it stands for, their average, its share of
    I/O time and the opens behind it, so the finding states what the sum is made of."""
    rec = job.records
    shared = (rec.iface == "POSIX") & (rec.rank < 0)
    if not shared.any():
        return {}
    meta = rec["meta_time"][shared]
    worst = int(meta.argmax())
    seconds, ranks = float(meta[worst]), int(rec.nranks[shared][worst])
    return {
        "shared_meta_time_s": seconds,
        "shared_meta_ranks": ranks,
        "shared_meta_per_rank_s": _frac(seconds, ranks),
        "shared_meta_time_frac": _frac(seconds, total_t),
        "shared_meta_opens": int(rec["opens"][shared][worst]),
    }
