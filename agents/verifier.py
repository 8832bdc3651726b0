"""The verifier agent: measure the applied change exactly like the reference, then compare.

The candidate arm runs with the same replicates and the same tracing as the baseline, in
its own ``opt<n>`` folder, with the incumbent's kept settings plus the one new change. The
runner's statistics decide win / no_change / regression; the guards and the KB come next.
"""

from __future__ import annotations

from typing import Any

from langgraph.runtime import Runtime

from dftune.agents.context import Context
from dftune.agents.measure import extend, measure
from dftune.agents.optimizer.trust import TamperedProposal, trusted_arm, trusted_proposal
from dftune.agents.state import TuningState, log
from dftune.tools.kb.verdict import WIN_THRESHOLD_PCT, decide
from dftune.tools.runner.bench import BenchError
from dftune.tools.runner.stats import MIN_REPLICATES, compare, pct_change


def verifier(state: TuningState, runtime: Runtime[Context]) -> dict[str, Any]:
    """Node: run the candidate arm and compare it with the incumbent."""
    ctx = runtime.context
    exp = state.experiments[-1]
    if exp.verdict == "failed":
        return {}
    spec = ctx.workload_spec
    try:  # what runs is what the catalog and the archived spec derive, never the checkpoint alone
        p = trusted_proposal(state.proposal(exp.proposal_id), state, ctx)
        ref = trusted_arm(exp.reference, state, ctx, before=exp.iteration)
    except TamperedProposal as exc:
        return {"experiments": [exp.model_copy(update={"verdict": "failed", "verdict_reason": str(exc)})],
                "events": [log("verifier", f"opt{exp.iteration}: {exc}")]}  # fmt: skip
    overrides = {**{k: str(v) for k, v in ref.settings.items()}, **p.change.settings}
    env = {**ref.env, **p.change.env}
    it_source = ctx.workspace.iteration_dir(state.run_id, exp.iteration) / "source"
    source_dir = str(it_source) if p.change.kind == "patch" else ref.source_dir
    n = state.replicates or spec.replicates  # the baseline's count, whatever an extension added
    it_dir = ctx.workspace.iteration_dir(state.run_id, exp.iteration)
    ctx.progress("verifier", f"opt{exp.iteration}: {n} replicate(s) with {p.id}")
    try:
        cand, _, result = measure(spec, workdir=it_dir, overrides=overrides, env=env, replicates=n,
                                  traced=ref.traced, source_dir=source_dir)  # fmt: skip
    except BenchError as exc:
        failed = exp.model_copy(
            update={"verdict": "failed", "verdict_reason": f"experiment could not run: {exc}"}
        )
        return {"experiments": [failed],
                "proposals": [p.model_copy(update={"status": "failed", "reason": str(exc)})],
                "events": [log("verifier", f"opt{exp.iteration}: experiment failed: {exc}")]}  # fmt: skip
    lib = spec.metric.lower_is_better
    if len(cand.values) < MIN_REPLICATES or len(ref.values) < MIN_REPLICATES:
        why = (f"only {len(cand.values)} successful replicate(s) of {n}"
               f"{'; ' + result.stopped_reason if result.stopped_reason else ''}")  # fmt: skip
        failed = exp.model_copy(update={"candidate": cand, "verdict": "failed", "verdict_reason": why})
        return {"experiments": [failed], "proposals": [p.model_copy(update={"status": "failed", "reason": why})],
                "events": [log("verifier", f"opt{exp.iteration}: {why}")]}  # fmt: skip
    cmp = compare(ref.values, cand.values, lower_is_better=lib)
    if cmp.verdict == "no_change" and abs(cmp.change_pct) >= WIN_THRESHOLD_PCT:
        # a large effect the noise hid: a careful engineer collects more data before deciding (once)
        ctx.progress(
            "verifier", f"opt{exp.iteration}: inconclusive ({cmp.change_pct:+.1f}%), {n} more replicate(s)"
        )
        try:
            cand, _, result = extend(spec, cand, overrides=overrides, replicates=n)
        except BenchError:
            pass
        else:
            cmp = compare(ref.values, cand.values, lower_is_better=lib)
    app_pct = pct_change(ref.median, cand.median, lower_is_better=lib)
    sys_pct = pct_change(ref.io_bandwidth, cand.io_bandwidth, lower_is_better=False)
    measured = p.model_copy(update={
        "status": "measured", "app_impact_pct": app_pct if app_pct is not None else p.app_impact_pct,
        "app_impact_source": "measured" if app_pct is not None else p.app_impact_source,
        "system_impact_pct": sys_pct if sys_pct is not None else 0.0,
        "system_impact_source": "measured" if sys_pct is not None else "estimate",
        "impact_reason": f"measured in opt{exp.iteration}: {cmp.reason}",
    })  # fmt: skip
    done = exp.model_copy(update={"candidate": cand, "comparison": cmp})
    numbers = decide([], metric=spec.metric.kind, before=ref.median, after=cand.median, lower_is_better=lib,
                     comparison=cmp)  # the guards judge next; this is what the numbers alone say  # fmt: skip
    ctx.progress(
        "verifier", f"opt{exp.iteration}: the numbers say {numbers.verdict} ({cmp.change_pct:+.1f}%)"
    )
    return {"experiments": [done], "proposals": [measured],
            "events": [log("verifier", f"opt{exp.iteration}: {cmp.reason}", ratio_ci95=list(cmp.ci95),
                           p_value=cmp.p_value)]}  # fmt: skip
