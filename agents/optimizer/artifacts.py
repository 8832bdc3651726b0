"""Per-iteration artifacts (dftracer-io-optimization skill): shared context, the layer's results, papers."""

from __future__ import annotations

from dftune.agents.context import Context
from dftune.core.domain.proposals import Proposal
from dftune.core.domain.run import TuningState


def write_layer_artifacts(ctx: Context, state: TuningState, p: Proposal, n: int) -> None:
    """The per-iteration artifacts (dftracer-io-optimization skill): context, the layer's results file."""
    ws = ctx.workspace
    ws.write_json_artifact(
        state.run_id,
        n,
        "optimization_context.json",
        {
            "metric": state.diagnosis.metric.model_dump() if state.diagnosis else None,
            "bottlenecks": [
                {"name": b.name, "category": b.category, "score": b.score, "evidence": b.evidence}
                for b in (state.diagnosis.bottlenecks if state.diagnosis else [])
            ],
            "papers": [c.model_dump() for c in state.citations],
            "pitfalls": [x.model_dump() for x in state.pitfalls],
            "coverage": state.coverage.model_dump() if state.coverage else None,
            "software": state.software,
            "fs_type": state.fs_type,
        },
    )
    name = {"L1": "opt_l1_results.json", "L2": "opt_l2_results.json", "L3": "opt_l3_results.json"}[p.layer]
    ws.write_json_artifact(
        state.run_id,
        n,
        name,
        {
            "proposal": p.model_dump(),
            "status": "applied",
            "settings": {**state.incumbent.settings, **p.change.settings}
            if state.incumbent
            else p.change.settings,
            "env": p.change.env,
            "command": p.change.argv,
            "rollback": p.change.rollback_argv,
        },
    )
    ws.write_json_artifact(
        state.run_id, n, "optimization_papers.json", {"citations": [c.model_dump() for c in state.citations]}
    )
    try:  # once per iteration, every detected layer, local first, remote only when online (the skill)
        from dftune.tools.literature import SearchContext, session_search_optimization_context

        session_search_optimization_context(
            state.run_id,
            state.system,
            state.workload,
            iteration=n,
            context=SearchContext(software=state.software, fs_type=state.fs_type),
            workspace=ws,
        )
    except Exception as exc:  # the context search informs; it never stops an experiment
        ctx.progress("literature", f"opt{n}: context search failed: {exc}")
