"""Every open proposal's expected gain: the trace models on the incumbent's trace, then the KB.

Computed at planning time and again before every choice, from the trace of the configuration
a change would start from (the incumbent), so estimates follow what was kept: after buffering
removed the small writes, coalescing them again is worth nothing and the estimate says so.
Each number carries its source (``trace model``, ``kb``, ``measured``); a chat model's estimate,
asked after the screen and after each kept change (:func:`renewed`), is labeled ``model``.
"""

from __future__ import annotations

from collections.abc import Sequence

from dftune.agents.context import Context
from dftune.agents.measure import load_analysis
from dftune.agents.optimizer import estimates
from dftune.agents.optimizer.collective import collective_gap, needs_collective_calls
from dftune.agents.optimizer.estimates import Lever, TraceFacts
from dftune.agents.optimizer.facts import facts_of
from dftune.agents.optimizer.hints import incumbent_hints
from dftune.agents.optimizer.prior import apply_prior
from dftune.core.domain.measurements import Measurement
from dftune.core.domain.proposals import Proposal
from dftune.core.domain.run import Decision, TuningState
from dftune.tools.catalog import Strategy
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


def lever_of(
    p: Proposal, spec: WorkloadSpec, incumbent: Measurement | None, strategy: Strategy | None = None
) -> Lever:
    """What a proposal turns: a knob's value against the incumbent's, else its catalog entry's
    parameters (a buffer or chunk size, a depth), on the I/O its entry says it acts on."""
    lever = _knob_lever(p, spec, incumbent)
    if strategy is None:
        return lever
    directions = tuple(strategy.io) or lever.directions
    if lever.factor is None and lever.target_bytes is None and not p.change.settings:
        for param in strategy.parameters:
            value = _number(param.recommended if param.recommended is not None else param.default)
            if value is None:
                continue
            if (
                p.checklist in _SIZE_LEVERS
                and value >= 512
                and ("size" in param.name or "bytes" in param.name)
            ):
                return Lever(target_bytes=value, directions=directions)
            if p.checklist in _COUNT_LEVERS and value > 1:
                return Lever(factor=value, directions=directions)
    return Lever(
        factor=lever.factor, counts=lever.counts, target_bytes=lever.target_bytes, directions=directions
    )


def _knob_lever(p: Proposal, spec: WorkloadSpec, incumbent: Measurement | None) -> Lever:
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
    if p.checklist in _COUNT_LEVERS:  # a count of 0 (no prefetch, no workers) serves with one: the caller
        before, after = (old + 1, new + 1) if old == 0 else (old, new)
        if before <= 0 or after <= 0:
            return Lever()
        return Lever(counts=(before, after))  # the factor is their ratio
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
    return TraceFacts(
        Arm(analysis=analysis, data_dir=m.data_dir, work=dict(m.work), label="incumbent"), fs_type=fs_type
    )


def estimate_proposals(
    proposals: Sequence[Proposal],
    state: TuningState,
    ctx: Context,
    facts: TraceFacts | None,
    *,
    keep_model: bool = False,
) -> list[Proposal]:
    """Open proposals with fresh estimates (measured and KB numbers are kept as they are, and a
    model's with ``keep_model``)."""
    defaults = {k: str(v) for k, v in ctx.workload_spec.settings().items()}
    collective_only = {
        p.id
        for p in proposals
        if needs_collective_calls(getattr(ctx.catalog.strategies.get(p.strategy), "requires", []))
    }
    gap = (
        collective_gap(facts.arm, incumbent_hints(ctx.workspace.run_dir(state.run_id), state.incumbent))
        if facts is not None and collective_only
        else None
    )
    out = []
    for p in proposals:
        if p.status == "known":  # judged again: the incumbent may have changed since
            p = p.model_copy(
                update={
                    "status": "proposed",
                    "reason": "",
                    "app_impact_source": "trace model",
                    "impact_estimated_by": "rules",
                }
            )
        kept = ("measured", "kb", "model") if keep_model else ("measured", "kb")
        if p.status not in ("proposed", "manual") or p.app_impact_source in kept:
            out.append(p)
            continue
        if facts is None:
            p = p.model_copy(
                update={
                    "app_impact_pct": 0.0,
                    "app_impact_source": "n/a",
                    "system_impact_pct": 0.0,
                    "system_impact_source": "n/a",
                    "impact_reason": "n/a: no trace of the incumbent to estimate from (tracing off)",
                    "system_reason": "n/a: no trace",
                }
            )
        else:
            lever = lever_of(p, ctx.workload_spec, state.incumbent, ctx.catalog.strategies.get(p.strategy))
            e = estimates.estimate(p.checklist, facts, lever)
            if gap is not None and p.id in collective_only:
                e = e.model_copy(
                    update={
                        "app_pct": 0.0,
                        "system_pct": 0.0,
                        "reason": f"trace model: nothing to aggregate: {gap}",
                        "system_reason": "no I/O wall time removed: the same independent calls",
                    }
                )
            p = p.model_copy(
                update={
                    "app_impact_pct": e.app_pct,
                    "app_impact_source": "trace model",
                    "impact_reason": e.reason,
                    "impact_estimated_by": "rules",
                    "system_impact_pct": e.system_pct if e.system_pct is not None else 0.0,
                    "system_impact_source": "trace model" if e.system_pct is not None else "n/a",
                    "system_reason": e.system_reason,
                }
            )
        out.append(
            apply_prior(p, state.kb_prior, state.incumbent, retry_known=state.retry_known, defaults=defaults)
        )
    return out


def judged(
    proposals: list[Proposal], state: TuningState, ctx: Context, facts: TraceFacts | None
) -> tuple[list[Proposal], Decision | None]:
    """The reasoner's estimates where only a trace model (or nothing) gave one. The rules echo
    the trace model; a chat model's own number is labeled ``model`` with its name."""
    fresh = [p for p in proposals if p.status == "proposed" and p.app_impact_source in ("trace model", "n/a")]
    if not fresh:
        return proposals, None
    answer = ctx.reasoner.estimate_impacts(fresh, facts_of(state, facts, spec=ctx.workload_spec))
    d = answer.decision
    if d.decided_by != "model":
        return proposals, d
    by_id = {e.proposal_id: e for e in answer.answer}
    ids = {p.id for p in fresh}
    out = []
    for p in proposals:
        e = by_id.get(p.id)
        if e is not None and p.id in ids:
            was = (
                f" (the trace model said {p.app_impact_pct:.1f}%)"
                if p.app_impact_source == "trace model"
                else ""
            )
            p = p.model_copy(
                update={
                    "app_impact_pct": e.app_impact_pct,
                    "app_impact_source": "model",
                    "impact_estimated_by": d.reasoner,
                    "impact_reason": f"{e.reason}{was}",
                }
            )
        out.append(p)
    return out, d


def renewed(
    proposals: list[Proposal], state: TuningState, ctx: Context, *, ask: bool
) -> tuple[list[Proposal], list[Decision]]:
    """Fresh estimates from the incumbent's trace and the KB; with ``ask``, the reasoner's too (a
    model's number is kept until ``ask`` comes again: after a kept change)."""
    facts = trace_facts(state.incumbent, state.fs_type)
    out = estimate_proposals(proposals, state, ctx, facts, keep_model=not ask)
    if not ask:
        return out, []
    out, d = judged(out, state, ctx, facts)
    return out, [d] if d is not None else []
