"""What a change may save, from the trace's own numbers: one documented model per checklist category.

Each model prices the I/O time its kind of fix removes, then converts it to a share of the
application's time; every estimate is capped by the bound (the I/O wall time compute does not
hide, over the lifetimes of the processes doing the application's I/O). The models and their
parameters are data (``resources/reasoning/estimates.toml``); the reason of every estimate says
which numbers of the trace it used, so a person can redo the arithmetic.

- coalescing: time in small calls minus the same bytes at the bandwidth the trace shows for
  large calls (or, without large calls, the per-call cost saved by merging to the target size),
  on the share of calls that continue the previous one of their stream: a buffer merges
  neighbours, and a shuffled stream of small reads has almost none (its out-of-order share is
  category 8's, collective I/O and data sieving);
- caching: the bytes read more than once, as a share of the read time;
- prefetching and parallel readers: the unoverlapped read wall time x (1 - 1/k), k capped by cores;
- asynchronous writes: the write wall time compute could hide (at most the compute time);
- metadata: the repeated open/stat/close of the same files, as a share of the metadata time;
- collective I/O, data sieving, library layout: coalescing on shared / out-of-order accesses,
  or caching, whichever the fix acts on; filesystem layout only on striped file systems;
  OS/kernel and staging: a stated share of the time they act on.
"""

from __future__ import annotations

import functools
import os
from dataclasses import dataclass
from typing import Literal

from pydantic import BaseModel, ConfigDict, Field

from dftune.core import resource
from dftune.tools.guards.arms import Arm
from dftune.tools.trace import semantics as S
from dftune.tools.trace.render import human_bytes

ModelKind = Literal[
    "coalescing",
    "caching",
    "overlap_reads",
    "hide_writes",
    "metadata",
    "parallel_reads",
    "coalescing_shared",
    "coalescing_noncontiguous",
    "library",
    "fs_layout",
    "kernel",
    "staging",
]
_BIN_LO = {label: lo for label, lo in S.SIZE_BINS}


class EstimateModels(BaseModel):
    model_config = ConfigDict(extra="forbid", frozen=True)
    source: str
    efficiency: float = Field(gt=0, le=1)
    large_call_bytes: int = Field(gt=0)
    default_target_bytes: int = Field(gt=0)
    default_parallelism: float = Field(ge=1)
    kernel_share: float = Field(ge=0, le=1)
    staging_speedup: float = Field(gt=1)
    parallel_fs: tuple[str, ...]
    model: dict[int, ModelKind]


@functools.cache
def estimate_models() -> EstimateModels:
    return resource.load("reasoning/estimates.toml", EstimateModels)


class Estimate(BaseModel):
    """A bounded, labeled estimate of one change (never presented as a measurement)."""

    model_config = ConfigDict(extra="forbid", frozen=True)
    app_pct: float
    #: % change of the trace-derived I/O bandwidth; None when the change does not act on it
    system_pct: float | None
    reason: str
    system_reason: str


@dataclass(frozen=True)
class Lever:
    """What a proposal turns: how many readers/depth it multiplies, which call size it aims at."""

    factor: float | None = None
    #: the count before and after (a knob's readers or requests in flight): the core cap applies to
    #: the count that results, so 2 -> 4 readers on 2 cores is worth what 2 -> 2 is, not 1 -> 2
    counts: tuple[float, float] | None = None
    target_bytes: float | None = None
    #: the I/O the fix acts on (its catalog entry's ``io``): a read buffer saves nothing on writes
    directions: tuple[str, ...] = ("read", "write")


class TraceFacts:
    """The numbers the models read, from one arm (the incumbent: what a change would start from)."""

    def __init__(self, arm: Arm, fs_type: str = "unknown", cores: int | None = None) -> None:
        a = arm.analysis
        self.arm, self.fs_type, self.cores = arm, fs_type, cores or os.cpu_count() or 1
        self.life_s = a.process_time_s or a.job_time_s
        self.io_time_s = a.io_time_s
        self.io_wall_s = a.io_wall_time_s
        self.unover_s = a.unoverlapped_io_time_s
        self.compute_s = a.compute_wall_time_s
        rwm = a.read.time_s + a.write.time_s + a.metadata.time_s
        self.read_share = a.read.time_s / rwm if rwm else 0.0
        self.write_share = a.write.time_s / rwm if rwm else 0.0
        self.read_time_s, self.write_time_s, self.meta_time_s = (
            a.read.time_s,
            a.write.time_s,
            a.metadata.time_s,
        )
        self.read_bytes = float(a.read.bytes or 0)

    @property
    def bound_pct(self) -> float:
        return 100.0 * self.unover_s / self.life_s if self.life_s else 100.0

    @property
    def bound_text(self) -> str:
        return (
            f"unoverlapped I/O {self.unover_s:.3g} s of {self.life_s:.3g} s of process time "
            f"(bound {self.bound_pct:.1f}%)"
        )

    @property
    def critical_share(self) -> float:
        """Of a second of call time, how much is on the critical path (not overlapped, not concurrent)."""
        return min(1.0, self.unover_s / self.io_time_s) if self.io_time_s else 0.0

    def contiguous_share(self, direction: str) -> float:
        """Of the positioned calls on the data files this direction touches, the share that starts
        where the previous call of its stream ended: what a buffer or a larger request can merge
        without reading other bytes or another order (1.0 when no call's position is known)."""
        fs = [f for f in self.arm.files.values() if f.sizes.get(direction)]
        classified = sum(f.sequential + f.random for f in fs)
        return sum(f.consecutive for f in fs) / classified if classified else 1.0

    def calls_per_file(self, direction: str) -> float:
        """The mean number of calls in ``direction`` on a data file that has any: a request can
        merge calls of one file only, so no merge is larger than this."""
        counts = [sum(f.sizes.get(direction, {}).values()) for f in self.arm.files.values()]
        touched = [n for n in counts if n > 0]
        return sum(touched) / len(touched) if touched else 0.0

    def bins(self, direction: str, *, shared_only: bool = False) -> dict[str, tuple[int, float]]:
        """Per size bin: (bytes, call seconds) over the data files (optionally only the shared ones)."""
        out: dict[str, tuple[int, float]] = {}
        for f in self.arm.files.values():
            if shared_only and f.processes < 2:
                continue
            for label, nbytes in f.size_bytes.get(direction, {}).items():
                b, t = out.get(label, (0, 0.0))
                out[label] = (b + nbytes, t + f.size_time_s.get(direction, {}).get(label, 0.0))
        return out


def estimate(category: int, facts: TraceFacts, lever: Lever | None = None) -> Estimate:
    """The trace model of ``category`` for one proposal, capped by the bound."""
    m = estimate_models()
    kind = m.model.get(category)
    lever = lever or Lever()
    if kind is None:
        return Estimate(
            app_pct=0.0,
            system_pct=None,
            reason=f"no trace model for checklist category {category}",
            system_reason="n/a: no model",
        )
    saved, why, system = _MODELS[kind](facts, lever, m)
    pct = 100.0 * saved / facts.life_s if facts.life_s else 0.0
    capped = min(pct, facts.bound_pct)
    note = f" (capped at the bound: {facts.bound_text})" if capped < pct else f"; {facts.bound_text}"
    sys_pct, sys_why = system if system is not None else _bandwidth(facts, saved)
    return Estimate(
        app_pct=round(max(0.0, capped), 2),
        system_pct=sys_pct,
        reason=f"trace model ({kind}): {why}{note}",
        system_reason=sys_why,
    )


def _bandwidth(facts: TraceFacts, saved_critical_s: float) -> tuple[float | None, str]:
    """Bytes per second of I/O time after the saving (system-metric proxy, dftracer-io-optimization skill)."""
    if facts.io_wall_s <= 0:
        return None, "n/a: no I/O wall time in the trace"
    wall_saved = min(saved_critical_s, facts.io_wall_s * 0.95)
    if wall_saved <= 0:
        return 0.0, "no I/O wall time removed: bytes per second of I/O unchanged"
    pct = 100.0 * wall_saved / (facts.io_wall_s - wall_saved)
    return (
        round(pct, 2),
        f"the same bytes in {facts.io_wall_s - wall_saved:.3g} "
        f"s instead of {facts.io_wall_s:.3g} s of I/O wall time",
    )


# --------------------------------------------------------------------------- the models
# each returns (seconds of the application's critical path saved, why, optional system estimate)

Result = tuple[float, str, tuple[float | None, str] | None]


def _coalesce(
    facts: TraceFacts,
    lever: Lever,
    m: EstimateModels,
    *,
    shared_only: bool = False,
    scale: float = 1.0,
    label: str = "",
    contiguous: bool = False,
) -> Result:
    target = lever.target_bytes or m.default_target_bytes
    saved_calls = 0.0
    parts = []
    for direction in lever.directions:
        bins = facts.bins(direction, shared_only=shared_only)
        small = [(b, t) for lab, (b, t) in bins.items() if _BIN_LO[lab] < min(target, m.large_call_bytes)]
        t_small, b_small = sum(t for _, t in small), sum(b for b, _ in small)
        if t_small <= 0:
            continue
        large = [
            (b, t)
            for lab, (b, t) in bins.items()
            if _BIN_LO[lab] >= min(target, m.large_call_bytes) and t > 0
        ]
        if large:
            bw = sum(b for b, _ in large) / sum(t for _, t in large)
            gain = max(0.0, t_small - b_small / bw)
            parts.append(
                f"{direction}: {t_small:.3g} s in small calls ({b_small:,} B) vs {b_small / bw:.3g} s at the "
                f"{bw / 2**20:,.0f} MiB/s the trace's large calls reach"
            )
        else:
            calls = sum(facts.arm.size_calls(direction).get(lab, 0) for lab in bins if _BIN_LO[lab] < target)
            mean = b_small / calls if calls else target
            per_file = facts.calls_per_file(direction)
            merge = max(1.0, target / max(mean, 1.0))
            bound = ""
            if per_file and per_file < merge:  # a request never spans two files
                merge, bound = max(1.0, per_file), ", a file's calls: no request spans two files"
            gain = t_small * (1.0 - 1.0 / merge)
            parts.append(
                f"{direction}: {t_small:.3g} s in small calls of {human_bytes(mean)}; merged "
                f"{merge:,.1f} to one ({human_bytes(merge * mean)}{bound}): "
                f"the per-call cost falls by 1 - 1/{merge:,.1f}"
            )
        if contiguous:  # a buffer merges only calls that continue one another
            share = facts.contiguous_share(direction)
            gain *= share
            parts[-1] += f" x {share:.2f} of the calls continuing the previous one"
        saved_calls += gain * scale
    saved = saved_calls * facts.critical_share * m.efficiency
    why = ("; ".join(parts) or "no small calls on the data files") + (
        f"; x {facts.critical_share:.2f} of the call time on "
        f"the critical path x {m.efficiency:g} efficiency{label}"
    )
    return saved, why, None


def _coalescing(facts: TraceFacts, lever: Lever, m: EstimateModels) -> Result:
    return _coalesce(facts, lever, m, contiguous=True)


def _coalescing_shared(facts: TraceFacts, lever: Lever, m: EstimateModels) -> Result:
    return _coalesce(facts, lever, m, shared_only=True, label=" (files shared by several processes)")


def _coalescing_noncontiguous(facts: TraceFacts, lever: Lever, m: EstimateModels) -> Result:
    share = facts.arm.totals.random_share or 0.0
    return _coalesce(facts, lever, m, scale=share, label=f" x {share:.2f} out-of-order share")


def _caching(facts: TraceFacts, lever: Lever, m: EstimateModels) -> Result:
    t = facts.arm.totals
    if not t.read_bytes or not t.reread_bytes:
        return 0.0, "nothing is read more than once", None
    share = t.reread_bytes / t.read_bytes
    saved = facts.read_time_s * share * facts.critical_share * m.efficiency
    why = (
        f"{human_bytes(t.reread_bytes)} of {human_bytes(t.read_bytes)} "
        f"read are re-reads: {share:.0%} of {facts.read_time_s:.3g} s "
        f"of read time x {facts.critical_share:.2f} critical x {m.efficiency:g}"
    )
    return saved, why, None


def _library(facts: TraceFacts, lever: Lever, m: EstimateModels) -> Result:
    return max(_caching(facts, lever, m), _coalescing(facts, lever, m), key=lambda r: r[0])


def _parallel(facts: TraceFacts, lever: Lever, m: EstimateModels, what: str) -> Result:
    cores = float(facts.cores)
    if lever.counts is not None:
        before, after = lever.counts
        k = after / before
        k_eff = max(1.0, min(after, cores) / min(before, cores))
        step = f"{what} {before:g} -> {after:g}"
    else:
        k = lever.factor or m.default_parallelism
        k_eff = max(1.0, min(k, cores))
        step = f"{what} x{k:g}"
    unover_read = facts.unover_s * facts.read_share
    saved = unover_read * (1.0 - 1.0 / k_eff) * m.efficiency
    why = (
        f"{unover_read:.3g} s of unoverlapped read wall time x (1 - 1/{k_eff:.3g}) ({step}, "
        f"capped by {facts.cores} cores) x {m.efficiency:g}"
    )
    return saved, why, None


def _overlap_reads(facts: TraceFacts, lever: Lever, m: EstimateModels) -> Result:
    return _parallel(facts, lever, m, "requests in flight")


def _parallel_reads(facts: TraceFacts, lever: Lever, m: EstimateModels) -> Result:
    return _parallel(facts, lever, m, "readers")


def _hide_writes(facts: TraceFacts, lever: Lever, m: EstimateModels) -> Result:
    unover_write = facts.unover_s * facts.write_share
    saved = min(unover_write, facts.compute_s) * m.efficiency
    why = (
        f"min({unover_write:.3g} s of unoverlapped write wall time, {facts.compute_s:.3g} s of compute "
        f"to hide it behind) x {m.efficiency:g}"
    )
    unchanged = (
        "n/a: the writes are hidden behind compute, not made faster (bytes per second of I/O unchanged)"
    )
    return saved, why, (None, unchanged)


def _metadata(facts: TraceFacts, lever: Lever, m: EstimateModels) -> Result:
    calls = [f.metadata_calls for f in facts.arm.files.values()]
    total = sum(calls)
    repeated = sum(max(0, c - 2) for c in calls)  # an open and a close per file are the minimum
    if not total or not repeated:
        return 0.0, "no file sees repeated metadata calls", None
    share = repeated / total
    saved = facts.meta_time_s * share * facts.critical_share * m.efficiency
    why = (
        f"{repeated:,} of {total:,} metadata calls repeat on files already opened: {share:.0%} of "
        f"{facts.meta_time_s:.3g} s x {facts.critical_share:.2f} critical x {m.efficiency:g}"
    )
    return saved, why, None


def _fs_layout(facts: TraceFacts, lever: Lever, m: EstimateModels) -> Result:
    if facts.fs_type not in m.parallel_fs:
        return (
            0.0,
            f"n/a on {facts.fs_type}: striping and file-system layout act only on {', '.join(m.parallel_fs)}",
            None,
        )
    return _coalesce(facts, lever, m, label=" (larger stripes serve large calls in parallel)")


def _kernel(facts: TraceFacts, lever: Lever, m: EstimateModels) -> Result:
    small_read = sum(t for lab, (_, t) in facts.bins("read").items() if _BIN_LO[lab] < m.large_call_bytes)
    acted = small_read + facts.write_time_s
    saved = acted * m.kernel_share * facts.critical_share
    why = (
        f"{m.kernel_share:.0%} of the {small_read:.3g} s "
        f"of small reads and {facts.write_time_s:.3g} s of "
        f"writes the kernel serves x {facts.critical_share:.2f} critical"
    )
    return saved, why, None


def _staging(facts: TraceFacts, lever: Lever, m: EstimateModels) -> Result:
    saved = facts.read_time_s * (1.0 - 1.0 / m.staging_speedup) * facts.critical_share
    why = (
        f"{facts.read_time_s:.3g} s of reads on a tier {m.staging_speedup:g}x faster x "
        f"{facts.critical_share:.2f} critical (the copy itself is not counted)"
    )
    return saved, why, None


_MODELS = {
    "coalescing": _coalescing,
    "caching": _caching,
    "overlap_reads": _overlap_reads,
    "hide_writes": _hide_writes,
    "metadata": _metadata,
    "parallel_reads": _parallel_reads,
    "coalescing_shared": _coalescing_shared,
    "coalescing_noncontiguous": _coalescing_noncontiguous,
    "library": _library,
    "fs_layout": _fs_layout,
    "kernel": _kernel,
    "staging": _staging,
}
