"""Terminal rendering of what only a Darshan analysis has (header, modules, shared files, MPI-IO,
Lustre, where each number comes from).  The trace renderer calls it; nothing here decides."""

from __future__ import annotations

from datetime import UTC, datetime
from typing import Any

from rich.table import Table

from dftune.tools.trace.darshan.model import DarshanInfo


def _when(ts: float) -> str:
    return datetime.fromtimestamp(ts, UTC).strftime("%Y-%m-%d %H:%M:%S UTC") if ts > 0 else "-"


def header(a: Any, d: DarshanInfo) -> Table:
    """The panel body: job, executable, modules (partial ones marked), files, mounts."""
    head = Table.grid(padding=(0, 2))
    head.add_column(style="bold")
    head.add_column(overflow="fold")
    head.add_row("Darshan logs", f"{len(d.logs):,} ({', '.join(f'{k}: {v}' for k, v in a.formats.items())})")
    head.add_row("job", ", ".join(str(j) for j in d.jobids[:5]) + (" ..." if len(d.jobids) > 5 else ""))
    head.add_row("executable", (d.executable or "-")[:200])
    start = min((lg.start_time for lg in d.logs), default=0.0)
    head.add_row("run", f"{_when(start)}, {a.job_time_s:,.3f} s, {d.nprocs:,} process(es)")
    mods = ", ".join(
        f"{m} ({v.records:,})" + (" PARTIAL" if v.partial else "") for m, v in sorted(d.modules.items())
    )
    head.add_row("modules (records)", mods or "-")
    f = d.files
    head.add_row(
        "POSIX files",
        f"{f.total:,}: {f.read_only:,} read-only, {f.write_only:,} write-only, "
        f"{f.read_write:,} read-write; {f.shared:,} shared, {f.partially_shared:,} partially shared, "
        f"{f.unique:,} unique",
    )
    if d.mpiio:
        m = d.mpiio
        head.add_row(
            "MPI-IO",
            f"{m.files:,} file(s); reads {m.coll_reads:,} collective / {m.indep_reads:,} independent, "
            f"writes {m.coll_writes:,} collective / {m.indep_writes:,} independent, non-blocking "
            f"{m.nb_reads + m.nb_writes:,}, hints set {m.hints_set:,} time(s)",
        )
    if d.lustre:
        lu = d.lustre
        counts = ", ".join(
            f"{n:,} x {c}" for c, n in sorted(lu.stripe_counts.items(), key=lambda kv: int(kv[0]))
        )
        head.add_row(
            "Lustre",
            f"{lu.files:,} file(s), stripe counts {counts}; {lu.osts_used:,} OSTs used; "
            f"{lu.shared_stripe1:,} shared file(s) on one OST",
        )
    p = d.perf
    if p.agg_perf_by_slowest_mib_s is not None:
        head.add_row(
            "POSIX estimate",
            f"{p.agg_perf_by_slowest_mib_s:,.1f} MiB/s by the slowest rank "
            f"({p.total_bytes / (1 << 20):,.1f} MiB in {p.agg_time_by_slowest_s:,.3f} s)",
        )
    dx = d.dxt
    if dx.modules:
        cov = ", ".join(
            f"{k} {v:.0%}"
            for k, v in (("reads", dx.read_coverage), ("writes", dx.write_coverage))
            if v is not None
        )
        head.add_row(
            "DXT", f"{', '.join(dx.modules)}; traced {cov or '-'}" + (" (exact)" if dx.complete else "")
        )
    fs = sorted({m.fs_type for m in d.mounts})
    head.add_row("file systems", ", ".join(fs) or "-")
    head.add_row("sources", "; ".join(f"{k}: {v.split(' (')[0]}" for k, v in d.sources.items()))
    return head
