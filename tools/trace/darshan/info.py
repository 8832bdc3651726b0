"""The Darshan-only part of an analysis: header, modules, shared files, MPI-IO, Lustre, estimates.

Built from the record columns in one vectorized pass per topic; :func:`warnings` says what a
reader must not take as complete (partial modules, negative counters, counters-based numbers).
"""

from __future__ import annotations

import numpy as np

from dftune.tools.trace.darshan.dxt import DxtOps
from dftune.tools.trace.darshan.job import BIN_LABELS, SMALL_BINS, Job, exact_1mib, log_end, log_start
from dftune.tools.trace.darshan.model import (
    DarshanInfo,
    DxtInfo,
    FileCategories,
    LogInfo,
    LustreInfo,
    ModuleInfo,
    Mount,
    MpiioInfo,
    PerfEstimate,
)
from dftune.tools.trace.darshan.signals import compute_signals

MIB = float(1 << 20)
FAMILY_MODULES = ("POSIX", "STDIO")
LAYER_MODULES = ("MPI-IO", "H5F", "H5D", "PNETCDF_FILE", "PNETCDF_VAR")
#: each Darshan bin -> the dftune bins (semantics.SIZE_BINS) it overlaps
SIZE_BIN_MAP = {
    "0-100": ["<4K"],
    "100-1K": ["<4K"],
    "1K-10K": ["<4K", "4-16K"],
    "10K-100K": ["4-16K", "16-64K", "64-256K"],
    "100K-1M": ["64-256K", "256K-1M", "1-4M (exactly 1 MiB)"],
    "1-4M": ["1-4M", "4-16M (exactly 4 MiB)"],
    "4-10M": ["4-16M"],
    "10-100M": ["4-16M", "16-64M", ">=64M"],
    "100M-1G": [">=64M"],
    ">=1G": [">=64M"],
}


def _role(mod: str) -> str:
    if mod in FAMILY_MODULES:
        return "families"
    if mod in LAYER_MODULES:
        return "layer"
    if mod in ("DXT_POSIX", "DXT_MPIIO"):
        return "trace"
    if mod in ("LUSTRE", "HEATMAP"):
        return "layout" if mod == "LUSTRE" else "time"
    return "unmapped"


def build_info(job: Job, ops: DxtOps | None, job_time_s: float) -> DarshanInfo:
    rec = job.records
    logs = [
        LogInfo(
            path=lg.path,
            jobid=int(lg.job["jobid"]),
            nprocs=int(lg.job["nprocs"]),
            start_time=log_start(lg),
            end_time=log_end(lg),
            run_time_s=float(lg.job.get("run_time") or 0.0),
            log_format=str(lg.job.get("log_ver") or "?"),
            darshan_version=str((lg.job.get("metadata") or {}).get("lib_ver") or "?"),
            executable=lg.exe,
            modules=sorted(lg.modules),
            partial_modules=sorted(m for m, v in lg.modules.items() if v["partial_flag"]),
        )
        for lg in job.logs
    ]
    modules: dict[str, ModuleInfo] = {}
    for lg in job.logs:
        for mod, v in lg.modules.items():
            m = modules.setdefault(mod, ModuleInfo(role=_role(mod)))
            m.partial = m.partial or bool(v["partial_flag"])
            m.records += _records_of(lg, mod)
    mounts = {(p, t) for lg in job.logs for p, t in lg.mounts}
    hints = {
        str((lg.job.get("metadata") or {}).get("h"))
        for lg in job.logs
        if (lg.job.get("metadata") or {}).get("h")
    }
    dxt = _dxt(job, ops, modules)
    return DarshanInfo(
        logs=logs,
        executable=job.logs[0].exe if job.logs else "",
        jobids=sorted({x.jobid for x in logs}),
        nprocs=job.nprocs,
        mounts=[Mount(path=p, fs_type=t) for p, t in sorted(mounts)],
        modules=modules,
        partial_modules=sorted(m for m, v in modules.items() if v.partial),
        log_write_hints="; ".join(sorted(hints)) or None,
        files=_categories(job),
        mpiio=_mpiio(job),
        lustre=_lustre(job),
        perf=_perf(job, job_time_s),
        dxt=dxt,
        counter_size_hist=_counter_hist(job),
        size_bin_map=SIZE_BIN_MAP,
        file_not_aligned=int(rec["file_not_aligned"].sum()),
        mem_not_aligned=int(rec["mem_not_aligned"].sum()),
        file_alignments=sorted({int(a) for a in np.unique(rec["file_alignment"]) if a > 0}),
        exact_1mib_ops=int(sum(x.sum() for x in exact_1mib(rec))),
        negative_counters=dict(rec.negative),
        not_recorded=dict(rec.not_recorded),
        signals=compute_signals(job, shared_ids(job), lustre_layout(job)),
        sources=_sources(job, ops, dxt.complete),
    )


def _records_of(lg: object, mod: str) -> int:
    tables = getattr(lg, "tables", {})
    if mod in tables:
        return len(tables[mod])
    dxt = getattr(lg, "dxt", {})
    if mod in dxt:
        return len(dxt[mod].rec_ids)
    if mod == "LUSTRE" and getattr(lg, "lustre", None) is not None:
        return len(lg.lustre.ids)  # type: ignore[attr-defined]
    if mod == "HEATMAP" and getattr(lg, "heatmap", None) is not None:
        return len(lg.heatmap.ranks)  # type: ignore[attr-defined]
    return 0


def file_ranks(job: Job, posix_only: bool = False) -> tuple[np.ndarray, np.ndarray, np.ndarray]:
    """File ids, how many ranks accessed each (a reduced record counts its log's nprocs) and
    whether Darshan reduced it (a rank -1 record: every rank of its log opened it)."""
    rec = job.records
    m = (rec.iface == "POSIX") if posix_only else np.ones(len(rec), dtype=bool)
    ids, inv = np.unique(rec.ids[m], return_inverse=True)
    reduced_ranks = np.bincount(inv, weights=np.where(rec.rank[m] < 0, rec.nranks[m], 0), minlength=len(ids))
    reduced = np.bincount(inv, weights=rec.rank[m] < 0, minlength=len(ids)) > 0
    own = rec.rank[m] >= 0
    pairs = (
        np.unique(np.stack([inv[own], rec.rank[m][own]], axis=1), axis=0)
        if own.any()
        else np.zeros((0, 2), int)
    )
    distinct = (
        np.bincount(pairs[:, 0].astype(np.int64), minlength=len(ids)) if len(pairs) else np.zeros(len(ids))
    )
    return ids, (reduced_ranks + distinct).astype(np.int64), reduced


def shared_ids(job: Job) -> np.ndarray:
    """File ids accessed by more than one rank: a shared (reduced) record, or records of 2+ ranks."""
    ids, ranks, reduced = file_ranks(job)
    return ids[(ranks > 1) | reduced]


def _categories(job: Job) -> FileCategories:
    """Darshan's file categories of the POSIX module (darshan-util's accumulator, darshan-job-summary):
    shared = a reduced record (every rank opened it), partially shared = records of 2+ ranks."""
    rec = job.records
    m = rec.iface == "POSIX"
    if not m.any():
        return FileCategories()
    ids, ranks, reduced = file_ranks(job, posix_only=True)
    inv = np.searchsorted(ids, rec.ids[m])
    r = np.bincount(inv, weights=rec["bytes_read"][m], minlength=len(ids)) > 0
    w = np.bincount(inv, weights=rec["bytes_written"][m], minlength=len(ids)) > 0
    return FileCategories(
        total=len(ids),
        read_only=int((r & ~w).sum()),
        write_only=int((w & ~r).sum()),
        read_write=int((r & w).sum()),
        shared=int(reduced.sum()),
        partially_shared=int(((ranks > 1) & ~reduced).sum()),
        unique=int(((ranks == 1) & ~reduced).sum()),
    )


def _mpiio(job: Job) -> MpiioInfo | None:
    t = job.modules.get("MPI-IO")
    if t is None or not len(t):
        return None

    def c(name: str) -> int:
        return int(np.clip(t.c(name), 0, None).sum()) if name in t.names else 0

    rec = job.records
    of_mpiio = np.isin(rec.ids, t.ids) & (rec.iface == "POSIX")
    posix_t = float((rec["read_time"] + rec["write_time"] + rec["meta_time"])[of_mpiio].sum())
    secs = float(
        sum(
            np.clip(t.f(f), 0, None).sum()
            for f in ("MPIIO_F_READ_TIME", "MPIIO_F_WRITE_TIME", "MPIIO_F_META_TIME")
        )
    )
    return MpiioInfo(
        files=len(np.unique(t.ids)),
        indep_reads=c("MPIIO_INDEP_READS"),
        indep_writes=c("MPIIO_INDEP_WRITES"),
        coll_reads=c("MPIIO_COLL_READS"),
        coll_writes=c("MPIIO_COLL_WRITES"),
        split_reads=c("MPIIO_SPLIT_READS"),
        split_writes=c("MPIIO_SPLIT_WRITES"),
        nb_reads=c("MPIIO_NB_READS"),
        nb_writes=c("MPIIO_NB_WRITES"),
        hints_set=c("MPIIO_HINTS"),
        bytes_read=c("MPIIO_BYTES_READ"),
        bytes_written=c("MPIIO_BYTES_WRITTEN"),
        time_s=secs,
        posix_time_s=posix_t,
    )


def lustre_layout(job: Job) -> dict[int, tuple[int, int, int]]:
    """file id -> (stripe count, stripe size, OSTs) of its first Lustre record."""
    out: dict[int, tuple[int, int, int]] = {}
    for lg in job.logs:
        lu = lg.lustre
        if lu is None:
            continue
        for i, fid in enumerate(lu.ids.tolist()):
            out.setdefault(int(fid), (int(lu.stripe_count[i]), int(lu.stripe_size[i]), len(lu.osts[i])))
    return out


def _lustre(job: Job) -> LustreInfo | None:
    layout = lustre_layout(job)
    if not layout:
        return None
    counts: dict[str, int] = {}
    sizes: dict[str, int] = {}
    for sc, ss, _ in layout.values():
        counts[str(sc)] = counts.get(str(sc), 0) + 1
        sizes[str(ss)] = sizes.get(str(ss), 0) + 1
    osts = {
        int(o) for lg in job.logs if lg.lustre is not None for arr in lg.lustre.osts for o in arr.tolist()
    }
    shared = {int(i) for i in shared_ids(job).tolist()}
    return LustreInfo(
        files=len(layout),
        stripe_counts=counts,
        stripe_sizes=sizes,
        osts_used=len(osts),
        shared_stripe1=sum(1 for fid, (sc, _, _) in layout.items() if sc == 1 and fid in shared),
    )


def _perf(job: Job, job_time_s: float) -> PerfEstimate:
    """darshan-util's accumulator for POSIX: slowest rank's unique-file time plus shared files' slowest."""
    rec = job.records
    m = rec.iface == "POSIX"
    if not m.any():
        return PerfEstimate()
    t = (rec["read_time"] + rec["write_time"] + rec["meta_time"])[m]
    rank = rec.rank[m]
    total = int((rec["bytes_read"] + rec["bytes_written"])[m].sum())
    shared = float(rec["slowest_rank_time"][m][rank < 0].clip(0).sum())
    own = rank >= 0
    slowest, slow_rank = 0.0, None
    if own.any():
        ranks, inv = np.unique(rank[own], return_inverse=True)
        per = np.bincount(inv, weights=t[own], minlength=len(ranks))
        slowest, slow_rank = float(per.max()), int(ranks[per.argmax()])
    agg = slowest + shared
    return PerfEstimate(
        total_bytes=total,
        slowest_rank_unique_time_s=slowest,
        slowest_rank=slow_rank,
        shared_time_by_slowest_s=shared,
        agg_time_by_slowest_s=agg,
        agg_perf_by_slowest_mib_s=(total / MIB / agg) if agg else None,
        slowest_io_fraction=round(min(agg / job_time_s, 1.0), 6) if job_time_s else None,
    )


def _dxt(job: Job, ops: DxtOps | None, modules: dict[str, ModuleInfo]) -> DxtInfo:
    mods = sorted(m for m in modules if m.startswith("DXT_"))
    if ops is None:
        return DxtInfo(modules=mods)
    rec = job.records
    posix = rec.iface == "POSIX"
    reads, writes = int(rec["reads"][posix].sum()), int(rec["writes"][posix].sum())
    r, w = int((~ops.is_write).sum()), int(ops.is_write.sum())
    rc = r / reads if reads else (1.0 if not r else None)
    wc = w / writes if writes else (1.0 if not w else None)
    complete = rc == 1.0 and wc == 1.0 and not modules["DXT_POSIX"].partial and (reads + writes) > 0
    return DxtInfo(
        modules=mods,
        read_ops=r,
        write_ops=w,
        read_coverage=rc,
        write_coverage=wc,
        complete=complete,
        hosts=ops.hosts,
    )


def _counter_hist(job: Job) -> dict[str, dict[str, int]]:
    rec = job.records
    r1, w1 = exact_1mib(rec)
    out = {}
    for fam, p, one in (("read", "r", r1), ("write", "w", w1)):
        counts = [int(rec[f"{p}b{i}"].sum()) for i in range(len(BIN_LABELS))]
        moved = int(one.sum())  # exactly 1 MiB: not small; they go with the 1-4M bin
        counts[SMALL_BINS - 1] -= moved
        counts[SMALL_BINS] += moved
        out[fam] = dict(zip(BIN_LABELS, counts, strict=True))
    return out


def _sources(job: Job, ops: DxtOps | None, complete: bool) -> dict[str, str]:
    has_heatmap = any(lg.heatmap is not None for lg in job.logs)
    exact = "dxt (every read and write traced)"
    return {
        "counts_bytes_time": "counters (exact)",
        "sequentiality": exact
        if complete
        else "counters (POSIX_CONSEC_*/POSIX_SEQ_*, first access per rank and file left unclassified)",
        "transfer_sizes": exact + ", dftune bins" if complete else "counters (Darshan's POSIX_SIZE_* bins)",
        "small_io_time": exact
        if complete
        else "estimate (each record's time split by its share of small operations)",
        "misalignment": "counters (exact: Darshan checks every access against POSIX_FILE_ALIGNMENT)",
        "imbalance": exact
        if complete
        else "counters (per-rank records only; shared files have their own "
        "slowest/fastest-rank counters in the file view)",
        "io_wall_time": "counters (the sum of Darshan's non-overlapping per-file timers)",
        "time_view": "dxt" if ops is not None else ("heatmap (bytes only)" if has_heatmap else "none"),
    }


def warnings(job: Job, info: DarshanInfo, ops: DxtOps | None) -> list[str]:
    """What the numbers do not cover; every partial module is named."""
    out = []
    for mod in info.partial_modules:
        kept = info.modules[mod].records
        if mod.startswith("DXT"):
            out.append(
                f"module {mod} is partial: the DXT trace buffer filled, so the trace holds only the first "
                "operations; DXT-derived numbers (time view, heatmap) cover those operations only"
            )
        else:
            out.append(
                f"module {mod} is partial: Darshan ran out of memory or record slots for it (by default "
                f"1,024 files per process; DARSHAN_MODMEM raises it); only {kept:,} record(s) were kept, so "
                "its counts, bytes and times are lower bounds, not complete numbers"
            )
    for name, n in sorted(info.negative_counters.items()):
        out.append(
            f"{n:,} record(s) have a negative {name} (a broken counter or timer in the log): counted as 0"
        )
    if info.not_recorded:
        out.append(
            f"not recorded by this log's Darshan (-1), counted as 0: {', '.join(sorted(info.not_recorded))}"
        )
    if not len(job.records):
        out.append("the log(s) hold no POSIX or STDIO record: no file I/O was recorded")
    unmapped = sorted({m for lg in job.logs for m in lg.unmapped})
    if unmapped:
        out.append(f"module(s) {', '.join(unmapped)} are listed but not mapped into the analysis")
    if ops is None:
        out.append(
            "no DXT trace: sequentiality, transfer sizes and per-rank imbalance are counters-based "
            "(see darshan.sources)"
        )
    elif not info.dxt.complete:
        cov = ", ".join(
            f"{k} {v:.0%}"
            for k, v in (("reads", info.dxt.read_coverage), ("writes", info.dxt.write_coverage))
            if v is not None
        )
        out.append(
            f"DXT traced only part of the POSIX operations ({cov}): sequentiality and sizes stay "
            "counters-based; the time view and heatmap show the traced operations only"
        )
    if len(info.jobids) > 1:
        out.append(f"{len(job.logs)} logs of {len(info.jobids)} different jobs were analyzed as one")
    return out
