"""What the reasoner may look at for a judgment, drawn from the state: what an expert would read first.

Lists are bounded (``LIMIT`` items, passages ``PASSAGE`` characters) and say when they were cut,
so a prompt stays the same size on a job with ten thousand files.
"""

from __future__ import annotations

from typing import Any

from dftune.agents.measure import load_analysis
from dftune.agents.optimizer.estimates import TraceFacts
from dftune.agents.reasoner import Budget, Facts
from dftune.core.domain.experiments import Experiment
from dftune.core.domain.run import TuningState
from dftune.tools.runner.spec import WorkloadSpec

#: items per list a prompt shows (top files, processes, KB records, citations, experiments)
LIMIT = 8
#: characters of a citation's supporting passage
PASSAGE = 300


def bounded(items: list[Any], what: str, limit: int = LIMIT) -> list[Any]:
    """The first ``limit`` items, and a last line saying how many were left out."""
    if len(items) <= limit:
        return items
    return [*items[:limit], f"... {len(items) - limit} more {what} not shown"]


def views_of(state: TuningState) -> dict[str, Any]:
    """The baseline trace's views that matter: top files, the processes' spread, time windows, sizes."""
    m = state.incumbent or state.baseline
    try:
        a = load_analysis(m.analysis_path) if m is not None else None
    except (OSError, ValueError):
        a = None
    if a is None:
        return {}
    files = sorted(a.profile.files if a.profile else [], key=lambda f: -(f.read_bytes + f.write_bytes))
    out: dict[str, Any] = {
        "job_time_s": a.job_time_s,
        "io_time_s": a.io_time_s,
        "read_time_pct": a.read_time_pct,
        "write_time_pct": a.write_time_pct,
        "metadata_time_pct": a.metadata_time_pct,
        "small_io_pct": a.small_io_pct,
        "seq_pct": a.seq_pct,
        "rand_pct": a.rand_pct,
        "size_histogram": a.xfer_size_hist,
        "files_accessed": a.files_accessed,
        "top_files": bounded(
            [
                {
                    "path": f.path,
                    "read_calls": f.read_calls,
                    "read_bytes": f.read_bytes,
                    "write_calls": f.write_calls,
                    "write_bytes": f.write_bytes,
                    "random": f.random,
                    "metadata_calls": f.metadata_calls,
                }
                for f in files
            ],
            "files",
        ),
        "processes": {
            "count": a.processes,
            "time_max_mean": a.imbalance.time_max_mean,
            "bytes_max_mean": a.imbalance.bytes_max_mean,
            "slowest": a.imbalance.slowest_process,
        },
    }
    if "time" in a.views:
        out["time_windows"] = (
            bounded(list(a.views["time"])[:50], "windows")
            if isinstance(a.views["time"], list)
            else str(a.views["time"])[:600]
        )
    return out


def _experiment(e: Experiment) -> dict[str, Any]:
    c = e.comparison
    return {
        "iteration": e.iteration,
        "proposal": e.proposal_id,
        "verdict": e.verdict,
        "kept": e.kept,
        "change_pct": c.change_pct if c else None,
        "ci95_pct": list(c.ci95) if c else None,
        "p_value": c.p_value if c else None,
        "reference_median": e.reference.median,
        "candidate_median": e.candidate.median if e.candidate else None,
        "reason": e.verdict_reason[:200],
    }


def facts_of(
    state: TuningState,
    trace: TraceFacts | None = None,
    *,
    spec: WorkloadSpec | None = None,
    wall_clock_left_s: float | None = None,
) -> Facts:
    """The state's facts; with the incumbent's trace numbers, the bound every estimate obeys."""
    a_frac = state.baseline.unoverlapped_io_fraction if state.baseline else None
    history = bounded([_experiment(e) for e in state.experiments][::-1], "experiments")
    screened = [p for p in state.proposals if p.status in ("proposed", "manual") and p.citation is not None]
    citations = bounded(
        [
            {
                "proposal": p.id,
                "title": p.citation.citation.title,
                "claim": p.citation.claim[:200],
                "passage": (p.citation.passage or p.citation.evidence)[:PASSAGE],
            }
            for p in screened
            if p.citation is not None
        ],
        "citations",
    )
    kb = bounded([r.model_dump(exclude={"change"}) for r in state.kb_prior.records], "KB records")
    return Facts(
        workload=state.workload,
        diagnosis=state.diagnosis,
        io_fraction=state.diagnosis.io_fraction if state.diagnosis else None,
        unoverlapped_fraction=a_frac,
        kb_prior=state.kb_prior.measured_pct,
        history=history,
        budget=Budget(limit=state.token_budget, spent=state.tokens_spent),
        bound_pct=trace.bound_pct if trace else None,
        bound_reason=trace.bound_text if trace else "",
        description=spec.description if spec else "",
        metric=(spec.metric.pattern or spec.metric.kind) if spec else "",
        lower_is_better=spec.metric.lower_is_better if spec else True,
        views=views_of(state),
        citations=citations,
        experiments_left=max(0, state.max_experiments - len(state.experiments)),
        wall_clock_left_s=wall_clock_left_s,
        replicates=state.replicates or (spec.replicates if spec else None),
        kb_records=kb,
    )
