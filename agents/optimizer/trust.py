"""What dftune applies comes from the catalog and the run's archived spec, never from a checkpoint alone.

A checkpoint is a file on disk: whoever can write it could change a pending proposal's command,
environment, patch file or privilege, or the incumbent's kept settings. So at approval, apply
and verify time the proposal is derived again from its id (the spec's knobs and patches, the
catalog's strategies, rendered exactly as ``plan`` renders them) and must match what the
checkpoint carries, field for field; the arm it is measured against must be what the kept
experiments derive. A mismatch is refused with the fields named, and nothing is applied.
"""

from __future__ import annotations

import os
from pathlib import Path
from typing import Any

from dftune.agents.context import Context
from dftune.agents.optimizer.actions import draft_path, draft_proposal, knob_value_proposal, l2_proposal
from dftune.agents.optimizer.hints import hint_proposals, ranks_of
from dftune.agents.optimizer.plan import catalog_proposal, derivation_context, knob_proposals
from dftune.core.domain.measurements import Measurement, StagePlan
from dftune.core.domain.proposals import Proposal
from dftune.core.domain.run import TuningState
from dftune.core.errors import DftuneError
from dftune.tools.runner.changes import ChangeError
from dftune.tools.runner.changes.layering import layer_env
from dftune.tools.runner.spec import WorkloadSpec

#: The fields of a proposal that decide what runs and who must approve it.
CHECKED_FIELDS = ("strategy", "layer", "privilege", "change")


class TamperedProposal(DftuneError):
    """The checkpoint's proposal (or measured arm) is not what the catalog and the spec derive."""


def _derive_model(
    p: Proposal, spec: WorkloadSpec, ctx: Context, context: dict[str, str], run_dir: Path | None
) -> Proposal | None:
    """A model's proposal, built again from its change by the builders that checked it first."""
    who = p.proposed_by.removeprefix("model:")
    c = p.change
    s = ctx.catalog.strategies.get(p.strategy)
    try:
        if c.kind == "knob" and len(c.settings) == 1:
            ((name, value),) = c.settings.items()
            return knob_value_proposal(spec, ctx.catalog, name, float(value), who)
        if c.kind == "env" and s is not None:
            return l2_proposal(s, c.params, context, who)
        if c.kind == "patch" and s is not None and run_dir is not None:
            path = Path(c.patch_file)
            text = path.read_text(encoding="utf-8")
            if path.resolve() != draft_path(run_dir, s.id, text).resolve():
                return None  # not a draft of this run, or its text changed since the model drafted it
            return draft_proposal(s, text, run_dir, run_dir, who, check=False)
    except (ValueError, OSError):
        return None
    return None


def derive(
    p: Proposal,
    spec: WorkloadSpec,
    ctx: Context,
    context: dict[str, str],
    run_dir: Path | None = None,
    software: list[str] | None = None,
) -> Proposal | None:
    """The proposal with ``p``'s id as this run's spec and catalog make it, or None when none does.
    A proposal measured again after a kept change (``retry_of``) derives as the one it repeats."""
    key = p.retry_of or p.id
    if p.proposed_by.startswith("model:"):
        return _derive_model(p, spec, ctx, context, run_dir)
    for cand in knob_proposals(spec, ctx.catalog):
        if cand.id == key:
            return cand
    if run_dir is not None and software:  # the stack's ROMIO hints (agents/optimizer/hints.py)
        for cand in hint_proposals(ctx.catalog, software, ranks_of(spec), run_dir, write=False):
            if cand.id == key:
                return cand
    s = ctx.catalog.strategies.get(p.strategy)
    if s is not None and not s.forbidden and s.apply is not None:
        cand = catalog_proposal(s, context)
        if cand.id == key:
            return cand
    return None


def trusted_proposal(p: Proposal, state: TuningState, ctx: Context) -> Proposal:
    """``p`` when it is exactly what the catalog and the
    archived spec derive, else :class:`TamperedProposal`."""
    spec = ctx.workload_spec
    context = derivation_context(spec, ctx.workspace.baseline_dir(state.run_id))
    d = derive(p, spec, ctx, context, ctx.workspace.run_dir(state.run_id), state.software)
    if d is None:
        raise TamperedProposal(
            f"refused {p.id}: no knob, patch or catalog strategy of this run derives it (the checkpoint was "
            "edited?); nothing was applied"
        )
    differ = [f for f in CHECKED_FIELDS if getattr(d, f) != getattr(p, f)]
    if differ:
        shown = "; ".join(
            f"{f}: checkpoint {_short(getattr(p, f))} vs derived {_short(getattr(d, f))}" for f in differ
        )
        raise TamperedProposal(
            f"refused {p.id}: its {', '.join(differ)} in the checkpoint differ from what the catalog and the "
            f"archived spec derive ({shown}); nothing was applied"
        )
    return p


def _short(value: Any) -> str:
    text = value.model_dump_json(exclude_defaults=True) if hasattr(value, "model_dump_json") else repr(value)
    return text if len(text) <= 160 else text[:159] + "…"


def expected_arm(
    state: TuningState, ctx: Context, before: int
) -> tuple[dict[str, str], dict[str, str], str | None]:
    """Settings, environment and source tree of the incumbent before iteration ``before``: the spec's
    defaults plus every kept experiment's derived change, in order."""
    spec = ctx.workload_spec
    context = derivation_context(spec, ctx.workspace.baseline_dir(state.run_id))
    overrides: dict[str, str] = {}
    env: dict[str, str] = {}
    source: str | None = None
    for exp in state.experiments:
        if not exp.kept or exp.iteration >= before:
            continue
        p = trusted_proposal(state.proposal(exp.proposal_id), state, ctx)
        d = derive(p, spec, ctx, context, ctx.workspace.run_dir(state.run_id), state.software)
        assert d is not None  # trusted_proposal derived it
        overrides.update(d.change.settings)
        try:  # kept ROMIO hint files merge into one, as the verifier layers them
            env = layer_env(env, d.change.env).env
        except ChangeError as exc:
            raise TamperedProposal(f"refused to rebuild the incumbent: {exc}; nothing was applied") from exc
        if d.change.kind == "patch":
            source = str(ctx.workspace.iteration_dir(state.run_id, exp.iteration) / "source")
    return {k: _text(v) for k, v in spec.settings(overrides).items()}, env, source


def expected_stage(state: TuningState, ctx: Context, before: int) -> StagePlan | None:
    """The staging the incumbent runs with before iteration ``before``: the last kept staging change."""
    spec = ctx.workload_spec
    context = derivation_context(spec, ctx.workspace.baseline_dir(state.run_id))
    stage: StagePlan | None = None
    for exp in state.experiments:
        if exp.kept and exp.iteration < before:
            p = trusted_proposal(state.proposal(exp.proposal_id), state, ctx)
            d = derive(p, spec, ctx, context, ctx.workspace.run_dir(state.run_id), state.software)
            if d is not None and d.change.kind == "stage":
                stage = d.change.stage
    return stage


def trusted_arm(m: Measurement, state: TuningState, ctx: Context, before: int) -> Measurement:
    """``m`` (the arm an experiment is measured against) when it is what the kept experiments derive."""
    settings, env, source = expected_arm(state, ctx, before)
    stage = expected_stage(state, ctx, before)
    got = {k: _text(v) for k, v in m.settings.items()}
    here, there = (None if d is None else os.path.realpath(d) for d in (m.source_dir, source))
    differ = [
        name
        for name, same in (
            ("settings", got == settings),
            ("env", m.env == env),
            ("source_dir", here == there),
            ("stage", m.stage == stage),
        )
        if not same
    ]
    if differ:
        raise TamperedProposal(
            "refused to measure against the incumbent: its "
            f"{', '.join(differ)} in the checkpoint differ from "
            f"what the kept experiments derive (settings {settings}, "
            f"env {env}, source {source}); nothing was applied"
        )
    return m


def _text(value: Any) -> str:
    if isinstance(value, bool):
        return "1" if value else "0"
    return str(value)
