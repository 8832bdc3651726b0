"""The optimizer agent: the whole option space, the proposal table, one change at a time.

``plan`` turns the workload's knobs and the diagnosis's candidate strategies into
proposals (the guards screen them next, so a forbidden strategy never reaches the table).
``choose`` gives every checklist category a verdict, writes the proposal table and asks the
reasoner for the next proposal. ``apply`` creates the next ``opt<n>`` iteration and applies
the change there through the change journal, so it is applied once and can be rolled back.
"""

from __future__ import annotations

import re
import shutil
from pathlib import Path
from typing import Any

from langgraph.runtime import Runtime

from dftune.agents.context import Context
from dftune.agents.policy import approval_rule
from dftune.agents.reasoner import Facts
from dftune.agents.state import Change, ChecklistVerdict, Experiment, Proposal, TuningState, log
from dftune.core.vocabulary import CHECKLIST
from dftune.tools.catalog import Catalog, Strategy
from dftune.tools.catalog.models import placeholders
from dftune.tools.diagnose.engine import Diagnosis
from dftune.tools.runner.changes import CommandChange, EnvChange, FilePatch, Journal
from dftune.tools.runner.spec import WorkloadSpec

#: Kinds of change dftune applies and measures by itself.
ACTIONABLE = ("knob", "env", "command", "patch")


# --------------------------------------------------------------------------- plan


def _slug(text: str) -> str:
    return re.sub(r"[^A-Za-z0-9_.=-]+", "-", text).strip("-")[:80]


def knob_proposals(spec: WorkloadSpec, catalog: Catalog) -> list[Proposal]:
    """Every non-default value of every knob the workload exposes, and every patch it offers: one proposal each."""
    out = []
    for knob in spec.knobs:
        s = catalog.strategies.get(knob.strategy) if knob.strategy else None
        for value in knob.values:
            if value == knob.default:
                continue
            out.append(Proposal(
                id=_slug(f"{knob.name}={value}"), strategy=knob.strategy or "l1.unknown",
                strategy_name=s.name if s else knob.name, layer=s.layer if s else "L1",
                checklist=s.checklist if s else 1,
                description=f"{s.name if s else knob.name}: {knob.name}={value} instead of {knob.default}",
                change=Change(kind="knob", settings={knob.name: str(value)}),
                privilege=s.privilege if s else "no-sudo",
            ))  # fmt: skip
    for patch in spec.patches:
        s = catalog.strategies.get(patch.strategy)
        out.append(Proposal(
            id=_slug(f"patch:{patch.name}"), strategy=patch.strategy, strategy_name=s.name if s else patch.name,
            layer="L1", checklist=s.checklist if s else 1,
            description=f"{s.name if s else 'source change'}: patch {patch.name}"
                        + (f" ({patch.description})" if patch.description else ""),
            change=Change(kind="patch", patch_file=str(spec.resolve(patch.file)), strip=patch.strip),
            privilege="no-sudo",
        ))  # fmt: skip
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
    base = dict(id=_slug(s.id), strategy=s.id, strategy_name=s.name, layer=s.layer, checklist=s.checklist,
                description=s.description, privilege=s.privilege)  # fmt: skip
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
            return Proposal(**base, change=Change(kind="command", argv=[x for x in argv if x is not None],
                                                  rollback_argv=[x for x in rollback if x is not None],
                                                  read_argv=[x for x in read if x is not None]))  # fmt: skip
        why = "its command needs context this run does not have (e.g. the block device)"
    elif a.kind == "source_patch":
        why = ("a source change: expose it as a knob in the workload spec (or apply the patch in a copy) "
               "and dftune will measure it")  # fmt: skip
    else:
        why = f"a {a.kind} change dftune does not apply by itself"
    text = a.instructions or a.patch or " ".join(a.command or a.launcher) or s.description
    return Proposal(**base, change=Change(kind="manual", instructions=text), status="manual", reason=why)


#: What a strategy's ``requires`` words presume, and how dftune knows whether this run has it.
_REQUIREMENTS = {
    "pytorch": "pytorch", "tensorflow": "tensorflow", "hdf5": "hdf5", "mpi-io": "mpi-io", "netcdf": "netcdf",
    "gpu": "gpu", "lfs": "lfs",
}  # fmt: skip


def requirement_gap(s: Strategy, software: list[str]) -> str | None:
    """Why a strategy cannot apply here (it presumes software this run does not use), or None."""
    have = set(software)
    if shutil.which("lfs"):
        have.add("lfs")
    for need in s.requires:
        text = need.lower()
        for word, token in _REQUIREMENTS.items():
            if (
                word in text
                and token not in have
                and not ("pytorch-or-tensorflow" in text and have & {"pytorch", "tensorflow"})
            ):
                return (
                    f"presumes {need}, which this workload does not use (detected: {', '.join(sorted(have))})"
                )
    return None


def plan_proposals(spec: WorkloadSpec, diagnosis: Diagnosis | None, catalog: Catalog,
                   context: dict[str, str], software: list[str] | None = None) -> list[Proposal]:  # fmt: skip
    """Knob proposals first (the user's levers), then every candidate of the diagnosis not already covered."""
    proposals = knob_proposals(spec, catalog)
    covered = {p.strategy for p in proposals}
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


def facts_of(state: TuningState) -> Facts:
    a_frac = state.baseline.unoverlapped_io_fraction if state.baseline else None
    history = [{"proposal": e.proposal_id, "verdict": e.verdict,
                "change_pct": e.comparison.change_pct if e.comparison else None} for e in state.experiments]  # fmt: skip
    return Facts(workload=state.workload, diagnosis=state.diagnosis,
                 io_fraction=state.diagnosis.io_fraction if state.diagnosis else None,
                 unoverlapped_fraction=a_frac, kb_prior=state.kb_prior.measured_pct, history=history)  # fmt: skip


def plan(state: TuningState, runtime: Runtime[Context]) -> dict[str, Any]:
    """Node: the option space as proposals, each with a labeled impact estimate."""
    ctx = runtime.context
    spec = ctx.workload_spec
    workdir = ctx.workspace.baseline_dir(state.run_id)
    context = {k: str(v) for k, v in spec.placeholder_values(spec.settings(), workdir=workdir).items()}
    proposals = plan_proposals(spec, state.diagnosis, ctx.catalog, context, state.software)
    estimates = {e.proposal_id: e for e in ctx.reasoner.estimate_impacts(proposals, facts_of(state))}
    out = []
    for p in proposals:
        e = estimates.get(p.id)
        if e is not None:
            p = p.model_copy(update={"app_impact_pct": e.app_impact_pct, "impact_reason": e.reason})
        out.append(p)
    ctx.progress("optimizer", f"{len(out)} candidate change(s): {sum(p.status == 'proposed' for p in out)} "
                              "dftune can apply itself")  # fmt: skip
    return {"proposals": out, "events": [log("optimizer", f"planned {len(out)} candidate(s)",
                                             ids=[p.id for p in out])]}  # fmt: skip


# --------------------------------------------------------------------------- choose


def _change_of(e: Experiment) -> float:
    return e.comparison.change_pct if e.comparison else 0.0


def checklist_verdicts(state: TuningState) -> list[ChecklistVerdict]:
    """The seed: a verdict for EACH of the 12 categories, every loop, with a concrete reason."""
    diag_list = {c.number: c for c in state.diagnosis.checklist} if state.diagnosis else {}
    by_cat: dict[int, list[Proposal]] = {}
    for p in state.proposals:
        by_cat.setdefault(p.checklist, []).append(p)
    measured = {e.proposal_id: e for e in state.experiments}
    out = []
    for number, name in CHECKLIST.items():
        props = by_cat.get(number, [])
        done = [p for p in props if p.id in measured and measured[p.id].verdict]
        if done:
            parts = [f"{p.id}: {measured[p.id].verdict} ({_change_of(measured[p.id]):+.1f}%, "
                     f"{p.citation.id if p.citation else 'uncited'})" for p in done]  # fmt: skip
            out.append(ChecklistVerdict(number=number, category=name, verdict="applied_measured",
                                        reason="; ".join(parts), strategies=[p.strategy for p in done]))  # fmt: skip
            continue
        open_ = [p for p in props if p.status == "proposed"]
        if open_:
            out.append(ChecklistVerdict(number=number, category=name, verdict="applicable_not_measured",
                                        reason=f"{len(open_)} cited proposal(s) not measured yet: "
                                               + ", ".join(p.id for p in open_),
                                        strategies=[p.strategy for p in open_]))  # fmt: skip
            continue
        if props:
            reasons = "; ".join(f"{p.id}: {p.status} ({p.reason})" for p in props)
            verdict = (
                "applicable_not_measured" if any(p.status == "manual" for p in props) else "not_applicable"
            )
            out.append(ChecklistVerdict(number=number, category=name, verdict=verdict, reason=reasons,
                                        strategies=[p.strategy for p in props]))  # fmt: skip
            continue
        d = diag_list.get(number)
        reason = d.reason if d else "no diagnosed bottleneck maps to it"
        out.append(ChecklistVerdict(number=number, category=name,
                                    verdict=d.verdict if d else "not_applicable", reason=reason))  # fmt: skip
    return out


def proposal_table(proposals: list[Proposal]) -> list[dict[str, Any]]:
    """The seed's table: #, Strategy, Description, App Impact, System Impact, Weighted Score (sorted)."""
    rows = [p for p in proposals if p.status in ("proposed", "measured", "declined", "failed", "manual")
            and p.citation is not None]  # fmt: skip
    rows.sort(key=lambda p: (-p.weighted_score, p.id))
    return [{
        "#": i, "id": p.id, "strategy": p.strategy, "description": p.description,
        "app_impact_pct": p.app_impact_pct, "app_impact_source": p.app_impact_source,
        "system_impact_pct": p.system_impact_pct, "system_impact_source": p.system_impact_source,
        "weighted_score": p.weighted_score, "status": p.status, "layer": p.layer,
        "citation": p.citation.reference() if p.citation else None, "url": p.citation.url if p.citation else None,
    } for i, p in enumerate(rows, 1)]  # fmt: skip


def choose(state: TuningState, runtime: Runtime[Context]) -> dict[str, Any]:
    """Node: checklist verdicts, then the next proposal (or none: the run is finished)."""
    ctx = runtime.context
    checklist = checklist_verdicts(state)
    update: dict[str, Any] = {"checklist": checklist, "current": None}
    ran = len(state.experiments)
    open_ = [p for p in state.proposals if p.status == "proposed" and p.change.kind in ACTIONABLE]
    if not open_:
        return {**update, "events": [log("optimizer", "no open proposal left")]}
    if ran >= state.max_experiments:
        return {**update, "status_reason": f"experiment budget of {state.max_experiments} used; "
                                           f"{len(open_)} proposal(s) left untried",
                "events": [log("optimizer", f"budget of {state.max_experiments} experiment(s) used")]}  # fmt: skip
    # Overnight, try everything the policy may approve alone before anything that must ask a person.
    alone = [p for p in open_ if approval_rule(p, state.mode) == "approve"]
    choice = ctx.reasoner.choose_next(alone or open_, facts_of(state))
    ctx.progress("optimizer", f"next: {choice.proposal_id} ({choice.reason})")
    return {**update, "current": choice.proposal_id,
            "events": [log("optimizer", f"chose {choice.proposal_id}", reason=choice.reason,
                           reasoner=getattr(ctx.reasoner, "name", "?"))]}  # fmt: skip


# --------------------------------------------------------------------------- apply


def next_iteration(state: TuningState) -> int:
    """Deterministic from the state, so a node re-run after a crash reuses the same opt<n>."""
    return max([state.iteration_floor, *(e.iteration for e in state.experiments)]) + 1


def journal_for(ctx: Context, run_id: str) -> Journal:
    journal = Journal(ctx.workspace.run_dir(run_id) / "journal.jsonl")
    journal.recover()
    return journal


def copy_source(state: TuningState, ctx: Context, it_dir: Path) -> Path:
    """``opt<n>/source``: a fresh copy of the incumbent's source tree (the user's original is never touched).

    Symbolic links are copied as links, so a patch that would write through one is refused."""
    assert state.incumbent is not None
    spec = ctx.workload_spec
    origin = Path(state.incumbent.source_dir) if state.incumbent.source_dir else spec.resolve(spec.source_dir)
    dest = it_dir / "source"
    if dest.exists():
        shutil.rmtree(dest)  # a re-run after a crash starts from a clean copy
    ignore = shutil.ignore_patterns("__pycache__", ".git", "opt[0-9]*", "*.pfw", "*.pfw.gz")
    shutil.copytree(origin, dest, symlinks=True, ignore=ignore)
    return dest


def keep_layout(ctx: Context, run_id: str) -> None:
    """``session_validate_structure``; when it is not clean, ``session_reorganize_structure``."""
    if not ctx.workspace.validate_structure(run_id).clean:
        ctx.workspace.reorganize_structure(run_id, dry_run=False)


def apply_change(state: TuningState, runtime: Runtime[Context]) -> dict[str, Any]:
    """Node: a fresh opt<n> and the change applied there (once, with its rollback journaled)."""
    from dftune.tools.session.workspace import ITERATION_SUBDIRS

    ctx = runtime.context
    assert state.current is not None and state.incumbent is not None
    p = state.proposal(state.current)
    n = next_iteration(state)
    keep_layout(ctx, state.run_id)  # the seed: validate before a new iteration, fix what is fixable
    it_dir = ctx.workspace.iteration_dir(state.run_id, n)
    for sub in ITERATION_SUBDIRS:
        (it_dir / sub).mkdir(parents=True, exist_ok=True)
    journal = journal_for(ctx, state.run_id)
    change_ids: list[str] = []
    try:
        if p.change.kind == "env":
            cid = f"opt{n}-{_slug(p.strategy)}"
            change_ids.append(cid)
            if journal.state(cid) is None:
                env_file = it_dir / "opt_l2_env.sh"
                all_env = {**state.incumbent.env, **p.change.env}
                journal.apply(EnvChange(id=cid, strategy=p.strategy, env_file=env_file, variables=all_env,
                                        description=p.description[:200]), approved=True)  # fmt: skip
        elif p.change.kind == "patch":
            cid = f"opt{n}-{_slug(p.id)}"
            change_ids.append(cid)
            if journal.state(cid) is None:
                source = copy_source(state, ctx, it_dir)
                rec = journal.apply(FilePatch(id=cid, strategy=p.strategy, root=source, strip=p.change.strip,
                                              diff=Path(p.change.patch_file).read_text(encoding="utf-8"),
                                              description=p.description[:200]), approved=True)  # fmt: skip
                if rec.state != "applied":
                    raise RuntimeError(rec.error or f"the patch ended in state {rec.state}")
        elif p.change.kind == "command":
            cid = f"opt{n}-{_slug(p.strategy)}"
            change_ids.append(cid)
            if journal.state(cid) is None:
                rec = journal.apply(CommandChange(
                    id=cid, strategy=p.strategy, privilege=p.privilege, argv=p.change.argv,
                    read_current=p.change.read_argv, rollback=p.change.rollback_argv,
                    description=p.description[:200],
                ), approved=True)  # fmt: skip
                if rec.state != "applied":
                    raise RuntimeError(rec.error or f"the command ended in state {rec.state}")
    except Exception as exc:  # any failure to apply is recorded, never retried blindly
        exp = Experiment(iteration=n, proposal_id=p.id, strategy=p.strategy, reference=state.incumbent,
                         verdict="failed", verdict_reason=f"could not apply: {exc}", change_ids=change_ids)  # fmt: skip
        return {"experiments": [exp],
                "proposals": [p.model_copy(update={"status": "failed", "reason": f"could not apply: {exc}",
                                                   "iteration": n})],
                "events": [log("optimizer", f"opt{n}: applying {p.id} failed: {exc}")]}  # fmt: skip
    _write_layer_artifacts(ctx, state, p, n)
    keep_layout(ctx, state.run_id)  # and again after applying, before the experiment collects traces
    ctx.progress("optimizer", f"opt{n}: applied {p.id}")
    exp = Experiment(iteration=n, proposal_id=p.id, strategy=p.strategy, reference=state.incumbent,
                     change_ids=change_ids)  # fmt: skip
    return {"experiments": [exp], "proposals": [p.model_copy(update={"iteration": n})],
            "events": [log("optimizer", f"opt{n}: applied {p.id}", change=p.change.model_dump())]}  # fmt: skip


def _write_layer_artifacts(ctx: Context, state: TuningState, p: Proposal, n: int) -> None:
    """The seed's per-iteration artifacts: context, the layer's results file."""
    ws = ctx.workspace
    ws.write_json_artifact(state.run_id, n, "optimization_context.json", {
        "metric": state.diagnosis.metric.model_dump() if state.diagnosis else None,
        "bottlenecks": [{"name": b.name, "category": b.category, "score": b.score, "evidence": b.evidence}
                        for b in (state.diagnosis.bottlenecks if state.diagnosis else [])],
        "papers": [c.model_dump() for c in state.citations],
        "pitfalls": [x.model_dump() for x in state.pitfalls],
        "coverage": state.coverage.model_dump() if state.coverage else None,
        "stack": stack_of(state),
    })  # fmt: skip
    name = {"L1": "opt_l1_results.json", "L2": "opt_l2_results.json", "L3": "opt_l3_results.json"}[p.layer]
    ws.write_json_artifact(state.run_id, n, name, {
        "proposal": p.model_dump(), "status": "applied",
        "settings": {**state.incumbent.settings, **p.change.settings} if state.incumbent else p.change.settings,
        "env": p.change.env, "command": p.change.argv, "rollback": p.change.rollback_argv,
    })  # fmt: skip
    ws.write_json_artifact(state.run_id, n, "optimization_papers.json",
                           {"citations": [c.model_dump() for c in state.citations]})  # fmt: skip
    try:  # the seed: once per iteration, every detected layer, local first (remote only when online)
        from dftune.tools.literature import session_search_optimization_context

        session_search_optimization_context(state.run_id, state.system, state.workload, iteration=n,
                                            stack=stack_of(state), workspace=ws)  # fmt: skip
    except Exception as exc:  # the context search informs; it never stops an experiment
        ctx.progress("literature", f"opt{n}: context search failed: {exc}")


def stack_of(state: TuningState) -> dict[str, Any]:
    """The layers this run detected, as the literature's context search reads them."""
    sw = set(state.software)
    ml = next((f for f in ("pytorch", "tensorflow") if f in sw), None)
    return {"fs_type": state.fs_type, "mpi": "mpi" if "mpi-io" in sw else None, "romio": "mpi-io" in sw,
            "hdf5": "hdf5" in sw, "ml_framework": ml}  # fmt: skip
