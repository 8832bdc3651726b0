"""The flat metric names diagnosis rules are written against, derived from an Analysis.

Rules (resources/rules/*.toml) refer to these names only, so the rule data never depends
on the shape of the analysis model.  Fractions are 0..1; times are seconds.
"""

from __future__ import annotations

import fnmatch
from typing import Any

from dftune.core.facts import program_facts
from dftune.tools.trace.darshan.signals import FILE_DEFAULTS, darshan_metrics
from dftune.tools.trace.model import Analysis

MIB = float(1 << 20)


def _frac(part: float, whole: float) -> float:
    return part / whole if whole else 0.0


def _is_fetch_wait(name: str) -> bool:
    """An application event that measures the program waiting for its data (programs.toml)."""
    return any(fnmatch.fnmatchcase(name, pat) for pat in program_facts().waits.events)


def _is_compute(name: str, cat: str) -> bool:
    return "compute" in name.lower() or cat.lower() == "compute"


def summary_metrics(a: Analysis) -> dict[str, Any]:
    """Every metric a summary-view rule may use (see resources/rules/README.md)."""
    rwm = a.read.time_s + a.write.time_s + a.metadata.time_s
    classified = a.read.sequential + a.read.random + a.write.sequential + a.write.random
    random_ops = a.read.random + a.write.random
    positioned = a.read.positioned + a.write.positioned
    misaligned = a.read.misaligned + a.write.misaligned
    stdio = a.interfaces.get("STDIO")
    fetch_wait = sum(e.time_s for e in a.app_events if _is_fetch_wait(e.name))
    compute = sum(e.time_s for e in a.app_events if _is_compute(e.name, e.cat))
    worst_epoch = max(a.epoch_spreads, key=lambda e: e.straggler_spread, default=None)
    return {
        "files": a.files,
        "events": a.events,
        # the application's processes (helpers left out): imbalance and straggler rules need > 1
        # ... compared as rank groups: a rank (or lone main process) with its worker processes
        "processes": len([g for g in a.rank_groups if g.data_io is not False])
        or a.app_processes
        or a.processes,
        "job_time_s": a.job_time_s,
        "io_time_s": rwm,
        "io_wall_time_s": a.io_wall_time_s,
        "io_fraction": a.io_fraction_of_job,
        "read_count": a.read.count,
        "write_count": a.write.count,
        "metadata_count": a.metadata.count,
        "read_bytes": a.read.bytes or 0,
        "write_bytes": a.write.bytes or 0,
        "read_time_s": a.read.time_s,
        "write_time_s": a.write.time_s,
        "metadata_time_s": a.metadata.time_s,
        "read_time_frac": _frac(a.read.time_s, rwm),
        "write_time_frac": _frac(a.write.time_s, rwm),
        "metadata_time_frac": _frac(a.metadata.time_s, rwm),
        "read_mean_xfer": a.read.mean_xfer_bytes if a.read.mean_xfer_bytes is not None else float("inf"),
        "write_mean_xfer": a.write.mean_xfer_bytes if a.write.mean_xfer_bytes is not None else float("inf"),
        "read_mean_xfer_kib": (a.read.mean_xfer_bytes or 0) / 1024,
        "read_mean_xfer_bytes": a.read.mean_xfer_bytes or 0,
        "write_mean_xfer_bytes": a.write.mean_xfer_bytes or 0,
        "write_mean_xfer_kib": (a.write.mean_xfer_bytes or 0) / 1024,
        "small_read_count": a.read.small,
        "small_write_count": a.write.small,
        "small_read_frac": _frac(a.read.small, a.read.sized),
        "small_write_frac": _frac(a.write.small, a.write.sized),
        "small_read_time_frac": _frac(a.read.small_time_s, rwm),
        "small_write_time_frac": _frac(a.write.small_time_s, rwm),
        "random_count": random_ops,
        "random_read_count": a.read.random,
        "random_write_count": a.write.random,
        "random_read_frac": _frac(a.read.random, a.read.sequential + a.read.random),
        "random_write_frac": _frac(a.write.random, a.write.sequential + a.write.random),
        "rand_frac": _frac(random_ops, classified),
        "classified": classified,
        "random_time_frac": _frac(a.read.random_time_s + a.write.random_time_s, rwm),
        "misaligned_count": misaligned,
        "misaligned_frac": _frac(misaligned, positioned),
        "misaligned_time_frac": _frac(a.read.misaligned_time_s + a.write.misaligned_time_s, rwm),
        "ops_imbalance": a.imbalance.ops_max_mean,
        "bytes_imbalance": a.imbalance.bytes_max_mean,
        "time_imbalance": a.imbalance.time_max_mean,
        "bytes_imbalance_max_min": a.imbalance.bytes_max_min,
        "slowest_process": a.imbalance.slowest_process or "-",
        "unoverlapped_frac": a.unoverlapped_io_fraction,
        # unoverlapped I/O as a share of all process time: what hiding it could save
        "unoverlapped_process_frac": _frac(a.unoverlapped_io_time_s, a.process_time_s),
        "unoverlapped_io_time_s": a.unoverlapped_io_time_s,
        "stdio_bytes_frac": (stdio.bytes_pct / 100) if stdio else 0.0,
        "stdio_time_frac": (stdio.time_pct / 100) if stdio else 0.0,
        "has_app_events": bool(a.app_events),
        "has_epochs": bool(a.epochs),
        "epoch_straggler_spread": worst_epoch.straggler_spread if worst_epoch else 0.0,
        "epoch_straggler": worst_epoch.epoch if worst_epoch else "-",
        "epoch_slowest_process": worst_epoch.slowest_process if worst_epoch else "-",
        "fetch_wait_s": fetch_wait,
        "compute_s": compute,
        "fetch_frac": _frac(fetch_wait, fetch_wait + compute),
        "compute_processes": a.compute_processes,
        "compute_utilization": _frac(a.compute_wall_time_s, a.compute_process_time_s),
        "compute_underuse": 1.0 - _frac(a.compute_wall_time_s, a.compute_process_time_s)
        if a.compute_processes
        else 0.0,
        "mean_xfer_bytes": a.shape.mean_xfer_bytes or 0.0,
        "shape": a.shape.kind,
        # Darshan-only signals (neutral on a dftracer trace): resources/rules/darshan*.toml
        **darshan_metrics(a.darshan.signals if a.darshan is not None else None),
    }


def file_metrics(row: dict[str, Any], total_io_time_s: float) -> dict[str, Any]:
    """Metrics of one row of the file view (one accessed file)."""
    io = float(row.get("io_time_s") or 0.0)
    meta = float(row.get("metadata_time_s") or 0.0)
    reads = int(row.get("read_count") or 0)
    writes = int(row.get("write_count") or 0)
    return {
        **FILE_DEFAULTS,  # the Darshan-only columns, neutral on a dftracer file row
        **row,
        "io_time_s": io,
        "io_time_share": _frac(io, total_io_time_s),
        "metadata_time_frac": _frac(meta, io),
        "ops": reads + writes + int(row.get("metadata_count") or 0),
        "processes": int(row.get("processes") or 0),
        "read_mean_xfer": _frac(float(row.get("read_bytes") or 0), reads) if reads else float("inf"),
        "write_mean_xfer": _frac(float(row.get("write_bytes") or 0), writes) if writes else float("inf"),
    }


def proc_metrics(row: dict[str, Any], total_io_time_s: float) -> dict[str, Any]:
    """Metrics of one row of the proc view (one process)."""
    io = float(row.get("io_time_s") or 0.0)
    meta = float(row.get("metadata_time_s") or 0.0)
    rank = row.get("rank")
    return {
        **row,
        "process": f"{row.get('host')}:{row.get('pid')}" + (f" (rank {rank})" if rank is not None else ""),
        "io_time_s": io,
        "io_time_share": _frac(io, total_io_time_s),
        "metadata_time_s": meta,
        "metadata_time_share": _frac(meta, total_io_time_s),
        "ops": sum(int(row.get(f"{f}_count") or 0) for f in ("read", "write", "metadata", "sync")),
    }


def layer_metrics(layer: dict[str, Any]) -> dict[str, Any]:
    """Metrics of one application category (layer view): its share of all process time."""
    return {
        **layer,
        "cat_lower": str(layer.get("cat", "")).lower(),
        "share_of_process_time": float(layer.get("share_of_job_pct") or 0.0) / 100.0,
    }


def time_metrics(row: dict[str, Any], total_io_time_s: float) -> dict[str, Any]:
    """Metrics of one time window (time view)."""
    io = float(row.get("io_time_s") or 0.0)
    return {
        **row,
        "window": f"{row.get('start_s', 0):.3f}-{row.get('end_s', 0):.3f} s",
        "io_time_s": io,
        "io_time_share": _frac(io, total_io_time_s),
        "metadata_time_frac": _frac(float(row.get("metadata_time_s") or 0.0), io),
        "metadata_time_share": _frac(float(row.get("metadata_time_s") or 0.0), total_io_time_s),
        "read_time_frac": _frac(float(row.get("read_time_s") or 0.0), io),
        "write_time_frac": _frac(float(row.get("write_time_s") or 0.0), io),
    }
