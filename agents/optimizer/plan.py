"""The option space: every knob value, every offered patch and every diagnosed candidate, as proposals.

The guards screen them next (``graphs.guard_nodes.screen``), so a forbidden strategy never
reaches the table; each screened proposal then gets a labeled estimate (``estimate``).
"""

from __future__ import annotations

import re
from pathlib import Path

from langgraph.runtime import Runtime

from dftune.agents.context import Context
from dftune.agents.measure import load_analysis
from dftune.agents.optimizer.hints import hint_proposals, hints_before, ranks_of
from dftune.agents.optimizer.staging import stage_gap
from dftune.core.domain.diagnosis import Diagnosis
from dftune.core.domain.measurements import SHM_ROOT, Measurement, StagePlan
from dftune.core.domain.proposals import Change, Proposal
from dftune.core.domain.run import TuningState, Update, log, update
from dftune.core.facts import stack_facts
from dftune.core.facts.stacks import presumption_gap
from dftune.tools.catalog import Catalog, Strategy
from dftune.tools.catalog.models import placeholders
from dftune.tools.runner.spec import WorkloadSpec

#: The derivation context's key for the spec's ``[staging] local_dir``.
LOCAL_DIR_KEY = "staging_local_dir"


def slug(text: str) -> str:
    return re.sub(r"[^A-Za-z0-9_.=-]+", "-", text).strip("-")[:80]


def knob_id(name: str, value: object) -> str:
    """A knob proposal's id: the setting as written, commas kept (``STRIPES=4,8``, not ``STRIPES=4-8``)."""
    return re.sub(r"[^A-Za-z0-9_.=,-]+", "-", f"{name}={value}").strip("-")[:80]


def knob_proposals(spec: WorkloadSpec, catalog: Catalog) -> list[Proposal]:
    """Every non-default value of every knob the workload
    exposes, and every patch it offers: one proposal each."""
    out = []
    for knob in spec.knobs:
        s = catalog.strategies.get(knob.strategy) if knob.strategy else None
        for value in knob.values:
            if value == knob.default:
                continue
            out.append(
                Proposal(
                    id=knob_id(knob.name, value),
                    strategy=knob.strategy or "l1.unknown",
                    strategy_name=s.name if s else knob.name,
                    layer=s.layer if s else "L1",
                    checklist=s.checklist if s else 1,
                    description=f"{s.name if s else knob.name}: "
                    f"{knob.name}={value} instead of {knob.default}",
                    change=Change(kind="knob", settings={knob.name: str(value)}),
                    privilege=s.privilege if s else "no-sudo",
                )
            )
    for patch in spec.patches:
        s = catalog.strategies.get(patch.strategy)
        out.append(
            Proposal(
                id=slug(f"patch:{patch.name}"),
                strategy=patch.strategy,
                strategy_name=s.name if s else patch.name,
                layer="L1",
                checklist=s.checklist if s else 1,
                description=f"{s.name if s else 'source change'}: patch {patch.name}"
                + (f" ({patch.description})" if patch.description else ""),
                change=Change(kind="patch", patch_file=str(spec.resolve(patch.file)), strip=patch.strip),
                privilege="no-sudo",
            )
        )
    return out


def _param_values(s: Strategy) -> dict[str, str]:
    out = {}
    for p in s.parameters:
        value = p.recommended if p.recommended is not None else p.default
        if value is not None and not (isinstance(value, str) and not re.fullmatch(r"[\w.:/-]+", value)):
            out[p.name] = str(value)
    return out


def _render(template: str, values: dict[str, str]) -> str | None:
    if placeholders(template) - set(values):
        return None
    return template.format_map(values)


def catalog_proposal(s: Strategy, context: dict[str, str]) -> Proposal:
    """A diagnosis candidate as a proposal: applied by dftune when it can render the change itself."""
    values = {**context, **_param_values(s)}
    base = dict(
        id=slug(s.id),
        strategy=s.id,
        strategy_name=s.name,
        layer=s.layer,
        checklist=s.checklist,
        description=s.description,
        privilege=s.privilege,
    )
    a = s.apply
    assert a is not None
    if a.kind == "env":
        env = {k: _render(v, values) for k, v in a.env.items()}
        if all(v is not None for v in env.values()):
            return Proposal(
                **base, change=Change(kind="env", env={k: v for k, v in env.items() if v is not None})
            )
        missing = sorted({p for v in a.env.values() for p in placeholders(v)} - set(values))
        why = f"needs a value for {', '.join(missing)} that this run cannot choose on its own"
    elif a.kind == "command" and s.rollback is not None and len(s.rollback.capture) == 1:
        argv = [_render(x, values) for x in a.command]
        ((key, capture),) = s.rollback.capture.items()
        rollback = [_render(x, {**values, key: "{current}"}) for x in s.rollback.command]
        read = [_render(x, values) for x in capture]
        if all(x is not None for x in [*argv, *rollback, *read]):
            return Proposal(
                **base,
                change=Change(
                    kind="command",
                    argv=[x for x in argv if x is not None],
                    rollback_argv=[x for x in rollback if x is not None],
                    read_argv=[x for x in read if x is not None],
                ),
            )
        why = "its command needs context this run does not have (e.g. the block device)"
    elif a.kind == "stage" and a.tier is not None:
        root = str(SHM_ROOT) if a.tier == "shm" else context.get(LOCAL_DIR_KEY, "")
        if root:
            return Proposal(**base, change=Change(kind="stage", stage=StagePlan(tier=a.tier, root=root)))
        why = "needs a faster folder to stage onto: set [staging] local_dir in the workload spec"
    elif a.kind == "source_patch":
        why = (
            "a source change: expose it as a knob in the workload spec (or apply the patch in a copy) "
            "and dftune will measure it"
        )
    else:
        why = f"a {a.kind} change dftune does not apply by itself"
    text = a.instructions or a.patch or " ".join(a.command or a.launcher) or s.description
    return Proposal(**base, change=Change(kind="manual", instructions=text), status="manual", reason=why)


def requirement_gap(s: Strategy, software: list[str]) -> str | None:
    """Why a strategy cannot apply here (it presumes software this run does not use), or None."""
    return presumption_gap(s.requires, software)


def plan_proposals(
    spec: WorkloadSpec,
    diagnosis: Diagnosis | None,
    catalog: Catalog,
    context: dict[str, str],
    software: list[str] | None = None,
    stack: list[Proposal] | None = None,
) -> list[Proposal]:
    """Knob proposals first (the user's levers), then the settings the stack reads that no knob covers
    (``stack``: ROMIO hints, see hints.py), then every candidate of the diagnosis not already covered."""
    proposals = knob_proposals(spec, catalog)
    covered = {p.strategy for p in proposals}
    proposals += [p for p in stack or [] if p.strategy not in covered]
    covered |= {p.strategy for p in proposals}
    for b in diagnosis.bottlenecks if diagnosis else []:
        for cand in b.candidates:
            sid = cand.id
            if sid in covered or sid not in catalog.strategies:
                continue
            covered.add(sid)
            s = catalog.strategies[sid]
            if s.forbidden or s.apply is None:
                continue
            p = catalog_proposal(s, context)
            gap = requirement_gap(s, software or [])
            if gap:
                p = p.model_copy(update={"status": "not_applicable", "reason": gap})
            proposals.append(p)
    return proposals


def library_proposals(catalog: Catalog, software: list[str], context: dict[str, str]) -> list[Proposal]:
    """The settings each I/O library of the stack documents (stacks.toml ``settings``): offered
    whatever bottleneck ranked first and whatever the I/O's shape, as ROMIO hints are for MPI-IO;
    one a run cannot apply itself stays in the morning's list as a change to make by hand."""
    out: list[Proposal] = []
    for lib in stack_facts().stack:
        if lib.id not in software:
            continue
        for sid in lib.settings:
            s = catalog.strategies.get(sid)
            if s is None or s.forbidden or s.apply is None or requirement_gap(s, software):
                continue
            out.append(catalog_proposal(s, context))
    return out


def staging_proposals(catalog: Catalog, context: dict[str, str], fs_type: str) -> list[Proposal]:
    """Every staging strategy valid on this filesystem: offered from the data set's use (see
    :func:`staging_fit`), whatever bottleneck the diagnosis ranked first."""
    return [
        catalog_proposal(s, context)
        for s in catalog.strategies.values()
        if not s.forbidden and s.apply is not None and s.apply.kind == "stage" and s.valid_on(fs_type)
    ]


def staging_fit(
    proposals: list[Proposal], data_dir: str, baseline: Measurement | None, launcher: str = "local"
) -> list[Proposal]:
    """Staging proposals that do not apply here (not read-mostly, same tier, no room) marked so."""
    out = []
    for p in proposals:
        if p.change.kind == "stage" and p.change.stage is not None and p.status == "proposed":
            analysis = load_analysis(baseline.analysis_path) if baseline is not None else None
            gap = (
                f"the program runs through {launcher} on other nodes: a copy made where dftune runs "
                "would not be on them"
                if launcher not in ("local", "mpirun")
                else stage_gap(p.change.stage, data_dir, analysis)
            )
            if gap:
                p = p.model_copy(update={"status": "not_applicable", "reason": gap})
        out.append(p)
    return out


def derivation_context(spec: WorkloadSpec, workdir: Path) -> dict[str, str]:
    """The values a catalog change is rendered with (``agents.optimizer.trust`` renders it again, so
    the folder is resolved: another spelling of the same DFTUNE_HOME derives the same change)."""
    filled = spec.placeholder_values(spec.settings(), workdir=workdir.resolve())
    values = {k: str(v) for k, v in filled.items()}
    if spec.staging.local_dir:
        values[LOCAL_DIR_KEY] = str(spec.resolve(spec.staging.local_dir))
    return values


def plan(state: TuningState, runtime: Runtime[Context]) -> Update:
    """Node: the option space as proposals, in the plan's order."""
    ctx = runtime.context
    spec = ctx.workload_spec
    context = derivation_context(spec, ctx.workspace.baseline_dir(state.run_id))
    run_dir = ctx.workspace.run_dir(state.run_id)
    stack = hint_proposals(ctx.catalog, state.software, ranks_of(spec), run_dir)
    before = []
    if stack:  # the hints in effect before any change, as ROMIO reports them
        said = hints_before(spec, run_dir, ctx.measurer)
        ctx.progress("optimizer", said)
        before.append(log("optimizer", said))
    stack += library_proposals(ctx.catalog, state.software, context)
    proposals = plan_proposals(spec, state.diagnosis, ctx.catalog, context, state.software, stack)
    covered = {p.strategy for p in proposals}
    staged = staging_proposals(ctx.catalog, context, state.fs_type)
    proposals += [p for p in staged if p.strategy not in covered]
    proposals = staging_fit(proposals, context.get("data_dir", ""), state.baseline, spec.launcher.kind)
    # the plan's order breaks ties between equal estimates (estimates come after the screen)
    out = [p.model_copy(update={"order": i}) for i, p in enumerate(proposals)]
    ctx.progress(
        "optimizer",
        f"{len(out)} candidate change(s): {sum(p.status == 'proposed' for p in out)} dftune can apply itself",
    )
    return update(
        proposals=out,
        events=[*before, log("optimizer", f"planned {len(out)} candidate(s)", ids=[p.id for p in out])],
    )
