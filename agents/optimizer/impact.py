"""Every open proposal's expected gain: the trace models on the incumbent's trace, then the KB.

Computed at planning time and again before every choice, from the trace of the configuration
a change would start from (the incumbent), so estimates follow what was kept: after buffering
removed the small writes, coalescing them again is worth nothing and the estimate says so.
Each number carries its source (``trace model``, ``kb``, ``measured``); a model estimate, if the
reasoner is a chat model, comes after this and is labeled ``model``.
"""

from __future__ import annotations

from collections.abc import Sequence
from typing import Any

from langgraph.runtime import Runtime

from dftune.agents.context import Context
from dftune.agents.measure import load_analysis
from dftune.agents.optimizer.facts import facts_of
from dftune.agents.optimizer.prior import apply_prior
from dftune.agents.state import Measurement, Proposal, TuningState, log
from dftune.tools import estimates
from dftune.tools.estimates import Lever, TraceFacts
from dftune.tools.guards import Arm
from dftune.tools.runner.spec import Knob, WorkloadSpec
from dftune.tools.trace.model import Analysis

#: categories whose lever is a count (readers, requests in flight), and those aiming at a call size
_COUNT_LEVERS = (3, 6)
_SIZE_LEVERS = (1, 7, 8, 9)


def _number(value: object) -> float | None:
    try:
        return float(str(value))
    except ValueError:
        return None


def lever_of(p: Proposal, spec: WorkloadSpec, incumbent: Measurement | None) -> Lever:
    """What a knob proposal turns, from its value and the value the incumbent runs with."""
    if len(p.change.settings) != 1:
        return Lever()
    ((name, raw),) = p.change.settings.items()
    knob: Knob | None = next((k for k in spec.knobs if k.name == name), None)
    if knob is None:
        return Lever()
    new = _number(raw)
    old = _number((incumbent.settings if incumbent else {}).get(name, knob.default))
    if new is None or old is None:
        return Lever()
    if p.checklist in _COUNT_LEVERS:
        return Lever(factor=(new + 1) / (old + 1) if old == 0 else new / old)
    if p.checklist in _SIZE_LEVERS and new >= 512:
        return Lever(target_bytes=new)
    return Lever()


def trace_facts(m: Measurement | None, fs_type: str, analysis: Analysis | None = None) -> TraceFacts | None:
    """The trace numbers of a measured configuration (None when it ran without a trace)."""
    if m is None:
        return None
    analysis = analysis or load_analysis(m.analysis_path)
    if analysis is None:
        return None
    return TraceFacts(Arm(analysis=analysis, data_dir=m.data_dir, work=dict(m.work), label="incumbent"),
                      fs_type=fs_type)  # fmt: skip


def estimate_proposals(
    proposals: Sequence[Proposal], state: TuningState, ctx: Context, facts: TraceFacts | None
) -> list[Proposal]:
    """Open proposals with fresh estimates (measured and KB numbers are kept as they are)."""
    defaults = {k: str(v) for k, v in ctx.workload_spec.settings().items()}
    out = []
    for p in proposals:
        if p.status == "known":  # judged again: the incumbent may have changed since
            p = p.model_copy(update={"status": "proposed", "reason": "", "app_impact_source": "trace model"})
        if p.status not in ("proposed", "manual") or p.app_impact_source in ("measured", "kb"):
            out.append(p)
            continue
        if facts is None:
            p = p.model_copy(update={"app_impact_pct": 0.0, "app_impact_source": "n/a", "system_impact_pct": 0.0,
                                     "system_impact_source": "n/a",
                                     "impact_reason": "n/a: no trace of the incumbent to estimate from (tracing off)",
                                     "system_reason": "n/a: no trace"})  # fmt: skip
        else:
            e = estimates.estimate(p.checklist, facts, lever_of(p, ctx.workload_spec, state.incumbent))
            p = p.model_copy(update={
                "app_impact_pct": e.app_pct, "app_impact_source": "trace model", "impact_reason": e.reason,
                "system_impact_pct": e.system_pct if e.system_pct is not None else 0.0,
                "system_impact_source": "trace model" if e.system_pct is not None else "n/a",
                "system_reason": e.system_reason,
            })  # fmt: skip
        out.append(
            apply_prior(p, state.kb_prior, state.incumbent, retry_known=state.retry_known, defaults=defaults)
        )
    return out


def model_refined(proposals: list[Proposal], state: TuningState, ctx: Context) -> list[Proposal]:
    """A chat model's own estimates where only a trace model (or nothing) gave one (labeled ``model``)."""
    fresh = [p for p in proposals if p.status == "proposed" and p.app_impact_source in ("trace model", "n/a")]
    if not fresh:
        return proposals
    answers = {e.proposal_id: e for e in ctx.reasoner.estimate_impacts(fresh, facts_of(state))}
    out = []
    for p in proposals:
        e = answers.get(p.id)
        if e is not None and p in fresh and e.reason != p.impact_reason:  # the rules echo the trace model
            p = p.model_copy(update={"app_impact_pct": e.app_impact_pct, "app_impact_source": "model",
                                     "impact_reason": f"{e.reason} (the trace model said {p.app_impact_pct:.1f}%)"})  # fmt: skip
        out.append(p)
    return out


#: statuses the screen lets through: still to measure, or a cited recommendation
SCREENED = ("proposed", "manual")


def estimate(state: TuningState, runtime: Runtime[Context]) -> dict[str, Any]:
    """Node: every screened proposal's expected gain, from the incumbent's trace and the KB."""
    ctx = runtime.context
    screened = [p for p in state.proposals if p.status in SCREENED]
    if not screened:
        return {"events": [log("optimizer", "no screened proposal to estimate")]}
    facts = trace_facts(state.incumbent, state.fs_type)
    updated = estimate_proposals(screened, state, ctx, facts)
    if getattr(ctx.reasoner, "name", "rules") != "rules":
        updated = model_refined(updated, state, ctx)
    known = [p.id for p in updated if p.status == "known"]
    if known:
        ctx.progress("optimizer", f"{len(known)} change(s) the knowledge base already measured here without a "
                                  "gain: not tried again (--retry-known)")  # fmt: skip
    sources = sorted({p.app_impact_source for p in updated})
    return {"proposals": updated, "events": [log("optimizer", f"estimated {len(updated)} screened proposal(s)",
                                                 sources=sources, known=known)]}  # fmt: skip
