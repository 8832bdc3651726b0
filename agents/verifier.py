"""The verifier agent: measure the applied change against the incumbent, in the same sitting.

The candidate arm runs in its own ``opt<n>`` folder with the incumbent's kept settings plus the
one new change; the incumbent runs again beside it (``opt<n>/incumbent``), one replicate of each
in turn (A B, B A, ...), with the same tracing, until the data decide or the baseline's replicate
count is reached (``tools/runner/paired.py``). The statistics decide win / no_change /
regression on these two arms, pair by pair when every pair measured on both sides; the guards
and the KB come next.
"""

from __future__ import annotations

from contextlib import nullcontext
from pathlib import Path
from typing import Any

from langgraph.runtime import Runtime

from dftune.agents.budget import OutOfTime
from dftune.agents.context import Context
from dftune.agents.measure import joined_baseline, measure_paired
from dftune.agents.optimizer.hints import arm_hints, override_check
from dftune.agents.optimizer.trust import TamperedProposal, trusted_arm, trusted_proposal
from dftune.core.domain.run import TuningState, Update, log, update
from dftune.core.domain.stats import pct_change
from dftune.tools.kb.verdict import WIN_THRESHOLD_PCT, decide
from dftune.tools.runner import progress_text
from dftune.tools.runner.bench import BenchError, Replicate
from dftune.tools.runner.changes import ChangeError
from dftune.tools.runner.changes.layering import layer_env, replaced_text
from dftune.tools.runner.paired import REJECTED_FIRST, paired_values
from dftune.tools.runner.stats import MIN_REPLICATES, compare


def verifier(state: TuningState, runtime: Runtime[Context]) -> Update:
    """Node: run the candidate arm and compare it with the incumbent."""
    ctx = runtime.context
    exp = state.experiments[-1]
    if exp.verdict == "failed":
        return update()
    spec = ctx.workload_spec
    out: dict[str, Any] = {}

    def failed(why: str, proposal: str = "", **arms: Any) -> Update:
        """The experiment failed (``why``), and its proposal with status ``proposal`` when given."""
        parts: dict[str, Any] = {
            "experiments": [exp.model_copy(update={**arms, "verdict": "failed", "verdict_reason": why})],
            "events": [log("verifier", f"opt{exp.iteration}: {why}")],
        }
        if proposal:
            parts["proposals"] = [p.model_copy(update={"status": proposal, "reason": why})]
        return update(out, **parts)

    try:  # what runs is what the catalog and the archived spec derive, never the checkpoint alone
        p = trusted_proposal(state.proposal(exp.proposal_id), state, ctx)
        ref = trusted_arm(exp.reference, state, ctx, before=exp.iteration)
        layered = layer_env(ref.env, p.change.env)  # the kept hints and the new ones in one hint file
    except (TamperedProposal, ChangeError) as exc:
        return failed(str(exc))
    overrides = {**{k: str(v) for k, v in ref.settings.items()}, **p.change.settings}
    env = layered.env
    replaced = replaced_text(layered.replaced)
    if replaced:
        ctx.progress("verifier", f"opt{exp.iteration}: the new proposal's value wins: {replaced}")
    it_source = ctx.workspace.iteration_dir(state.run_id, exp.iteration) / "source"
    source_dir = str(it_source) if p.change.kind == "patch" else ref.source_dir
    # a staging change stages every candidate replicate; a kept one goes on staging later arms
    stage = p.change.stage if p.change.kind == "stage" else ref.stage
    # the baseline's count (whatever an extension added), or more when the model asked for them (bounded)
    n = state.next_replicates or state.replicates or spec.replicates
    it_dir = ctx.workspace.iteration_dir(state.run_id, exp.iteration)
    joined = joined_baseline(ctx, state.baseline, n)
    if joined is not None:  # baseline units that finished since the diagnosis join the baseline now
        out.update(baseline=joined[0], coverage=joined[1])
    ctx.progress("verifier", progress_text.sitting_start(exp.iteration, p.id, n))

    def each_pair(done: int, planned: int, ref_rep: Replicate, cand_rep: Replicate) -> None:
        ctx.progress(
            "verifier", progress_text.pair_line(spec, exp.iteration, done, planned, ref_rep, cand_rep)
        )

    run_dir = ctx.workspace.run_dir(state.run_id)
    try:
        with (
            ctx.budget.job(run_dir, f"opt{exp.iteration} ({p.id})", spec) if ctx.budget else nullcontext(spec)
        ) as arm_spec:  # a slot, and refused when it cannot finish in time
            ref, cand, sitting = measure_paired(
                arm_spec,
                reference=ref,
                ref_workdir=it_dir / "incumbent",
                workdir=it_dir,
                overrides=overrides,
                env=env,
                replicates=n,
                source_dir=source_dir,
                extend_at_pct=WIN_THRESHOLD_PCT,
                progress=each_pair,
                stage=stage,
                measurer=ctx.measurer,
            )
    except OutOfTime as exc:  # not tried: the proposal stays open, the change is reverted by record
        ctx.progress("verifier", f"opt{exp.iteration}: {exc}")
        out["status_reason"] = str(exc)
        return failed(str(exc))
    except BenchError as exc:
        return failed(f"experiment could not run: {exc}", "failed")
    if sitting.stopped_early:
        ctx.progress(
            "verifier", f"opt{exp.iteration}: stopped after {sitting.pairs} pair(s): {sitting.stopped_early}"
        )
    lib = spec.metric.lower_is_better
    if len(cand.values) < MIN_REPLICATES or len(ref.values) < MIN_REPLICATES:
        stopped = cand.stopped_reason or ref.stopped_reason
        why = (
            f"only {len(cand.values)} successful replicate(s) of the candidate and {len(ref.values)} of the "
            f"incumbent in {sitting.pairs} pair(s){'; ' + stopped if stopped else ''}"
        )
        # the incumbent ran and the candidate never did: the program refuses the change itself
        said = (cand.stopped_reason or why).removeprefix(REJECTED_FIRST + ": ")
        refusal = said if ref.values and not cand.values else ""
        return failed(why, "failed", reference=ref, candidate=cand, program_failed=refusal[:2000])
    asked = arm_hints(env)
    refused, in_effect = override_check(p, Path(cand.workdir), asked if asked else None)
    if refused:  # the program's own hints won: what ran is not the change
        refused_exp = exp.model_copy(
            update={"reference": ref, "candidate": cand, "verdict": "failed", "verdict_reason": refused}
        )
        ctx.progress("verifier", f"opt{exp.iteration}: {refused}")
        return update(
            out,
            experiments=[refused_exp],
            proposals=[p.model_copy(update={"status": "rejected", "reason": refused})],
            events=[
                log(
                    "verifier",
                    f"opt{exp.iteration}: {refused}",
                    hints_asked=asked,
                    **({"hints_replaced": replaced} if replaced else {}),
                )
            ],
        )
    if in_effect:
        ctx.progress("verifier", f"opt{exp.iteration}: {in_effect}")
    pairs = paired_values(sitting)  # side by side in counterbalanced order: compared pair by pair
    cmp = (
        compare(pairs[0], pairs[1], lower_is_better=lib, paired=True)
        if pairs
        else compare(ref.values, cand.values, lower_is_better=lib)
    )
    app_pct = pct_change(ref.median, cand.median, lower_is_better=lib)
    sys_pct = pct_change(ref.io_bandwidth, cand.io_bandwidth, lower_is_better=False)
    measured = p.model_copy(
        update={
            "status": "measured",
            "app_impact_pct": round(app_pct, 3) if app_pct is not None else p.app_impact_pct,
            "app_impact_source": "measured" if app_pct is not None else p.app_impact_source,
            "system_impact_pct": round(sys_pct, 3) if sys_pct is not None else 0.0,
            "system_impact_source": "measured" if sys_pct is not None else "n/a",
            "impact_reason": f"measured in opt{exp.iteration}: {cmp.reason}",
            "system_reason": "trace-derived I/O bandwidth of the two arms"
            if sys_pct is not None
            else "n/a: an arm has no trace, so no I/O bandwidth was measured",
        }
    )
    done = exp.model_copy(update={"reference": ref, "candidate": cand, "comparison": cmp})
    numbers = decide(
        [], metric=spec.metric.kind, before=ref.median, after=cand.median, lower_is_better=lib, comparison=cmp
    )  # the guards judge next; this is what the numbers alone say
    ctx.progress(
        "verifier", f"opt{exp.iteration}: the numbers say {numbers.verdict} ({cmp.change_pct:+.1f}%)"
    )
    return update(
        out,
        experiments=[done],
        proposals=[measured],
        events=[
            log(
                "verifier",
                f"opt{exp.iteration}: {cmp.reason}",
                ratio_ci95=list(cmp.ci95),
                **({"hints_in_effect": in_effect} if in_effect else {}),
                **({"hints_asked": asked} if asked else {}),
                **({"hints_replaced": replaced} if replaced else {}),
                p_value=cmp.p_value,
                pairs=sitting.pairs,
                stopped_early=sitting.stopped_early,
            )
        ],
    )
