"""Node: the model's own proposals (new knob values, catalog L2 settings, drafted patches), before the screen.

Asked only when a chat model is configured and the action is enabled (``LLMSettings.actions``);
the rules propose nothing beyond the plan, so a rules run and every fallback leave the plan as
it is. Whatever the model proposes goes through the same screen, estimate, choice, apply,
verifier, guards and statistics as the plan's proposals; nothing here applies anything.
"""

from __future__ import annotations

from pathlib import Path
from typing import Any

from langgraph.runtime import Runtime

from dftune.agents.context import Context
from dftune.agents.optimizer.actions import draft_proposal, knob_value_proposal, l2_proposal
from dftune.agents.optimizer.facts import facts_of
from dftune.agents.optimizer.plan import derivation_context, requirement_gap
from dftune.agents.reasoner.protocol import KnobProposal, L2Setting, PatchDraft
from dftune.agents.reasoner.questions import draft_question, knob_value_question, l2_question
from dftune.core.domain.proposals import Proposal
from dftune.core.domain.run import Decision, TuningState, Update, log, update
from dftune.core.facts.paths import classify
from dftune.tools.catalog import Strategy

#: what the draft prompt shows of the source tree: files, and characters of their text
SOURCE_FILES = 40
SOURCE_CHARS = 8_000


def enabled(ctx: Context, action: str) -> bool:
    """Is a model configured and allowed this action? (The rules never take the model's actions.)"""
    settings = getattr(ctx.reasoner, "settings", None)
    return ctx.reasoner.name != "rules" and settings is not None and action in settings.actions


def _text(path: Path, limit: int | None = None) -> str | None:
    """A file's text when it is text (UTF-8, no NUL byte), else None (a binary, a data file)."""
    try:
        with open(path, "rb") as fh:
            raw = fh.read(limit if limit is not None else -1)
        return None if b"\0" in raw else raw.decode("utf-8")
    except (OSError, UnicodeDecodeError):
        return None


def source_root(state: TuningState, ctx: Context) -> Path:
    spec = ctx.workload_spec
    inc = state.incumbent.source_dir if state.incumbent else None
    return Path(inc) if inc else spec.resolve(spec.source_dir)


def source_listing(root: Path) -> str:
    """The source tree as the model sees it: relative paths, then the text of the small source files
    (text: UTF-8 without NUL bytes; tools' caches such as __pycache__ are not the program's)."""
    files = sorted(
        p
        for p in root.rglob("*")
        if p.is_file() and not p.is_symlink() and classify(f"/{p.relative_to(root)}").class_ != "tool_cache"
    )
    lines = [f"{p.relative_to(root)} ({p.stat().st_size} bytes)" for p in files[:SOURCE_FILES]]
    if len(files) > SOURCE_FILES:
        lines.append(f"... {len(files) - SOURCE_FILES} more files not shown")
    left = SOURCE_CHARS
    for p in files[:SOURCE_FILES]:
        text = _text(p) if p.stat().st_size <= left else None
        if text is None:
            continue
        left -= len(text)
        lines += ["", f"--- {p.relative_to(root)}", text]
    if left <= 0 or any(p.stat().st_size > SOURCE_CHARS and _text(p, 4096) is not None for p in files):
        lines.append("... the text of larger files is not shown")
    return "\n".join(lines)


def _parameters(s: Strategy) -> list[dict[str, Any]]:
    return [{k: v for k, v in p.model_dump().items() if v is not None} for p in s.parameters]


def _l2_offer(ctx: Context, state: TuningState) -> list[Strategy]:
    out = []
    for s in ctx.catalog.strategies.values():
        a = s.apply
        if s.layer != "L2" or s.forbidden or a is None or a.kind != "env" or not s.parameters:
            continue
        if requirement_gap(s, state.software) is None and any(
            p.values or p.min is not None for p in s.parameters
        ):
            out.append(s)
    return out


def _ask(ctx: Context, state: TuningState) -> tuple[list[Proposal], list[Decision]]:
    spec, catalog, who = ctx.workload_spec, ctx.catalog, ctx.reasoner.name
    facts = facts_of(state, spec=spec)
    taken = {p.id for p in state.proposals}
    found: list[Proposal] = []
    decisions: list[Decision] = []

    def fresh(p: Proposal) -> Proposal:
        if p.id in taken or any(p.id == q.id for q in found):
            raise ValueError(f"{p.id} is already a proposal of this run")
        return p

    knobs = [
        k
        for k in spec.knobs
        if k.ranged and k.strategy in catalog.strategies and not catalog.strategies[k.strategy].forbidden
    ]
    if knobs and enabled(ctx, "knob_value"):
        offer: list[dict[str, Any]] = [
            {
                "knob": k.name,
                "type": k.value_type().__name__,
                "min": k.min,
                "max": k.max,
                "values": k.values,
                "default": k.default,
                "strategy": k.strategy,
            }
            for k in knobs
        ]

        def knob(item: KnobProposal) -> Proposal:
            return fresh(knob_value_proposal(spec, catalog, item.knob, item.value, who))

        j = ctx.reasoner.decide(knob_value_question(offer, knob, facts), facts)
        found += j.answer
        decisions.append(j.decision)
    l2 = _l2_offer(ctx, state)
    if l2 and enabled(ctx, "l2_settings"):
        context = derivation_context(spec, ctx.workspace.baseline_dir(state.run_id))
        offer = [
            {
                "strategy": s.id,
                "name": s.name,
                "description": s.description,
                "sets": s.apply.env if s.apply else {},
                "parameters": _parameters(s),
            }
            for s in l2
        ]
        by_id = {s.id: s for s in l2}

        def setting(item: L2Setting) -> Proposal:
            if item.strategy not in by_id:
                raise ValueError(f"{item.strategy!r} is not one of the offered strategies {sorted(by_id)}")
            return fresh(l2_proposal(by_id[item.strategy], item.params, context, who))

        j = ctx.reasoner.decide(l2_question(offer, setting, facts), facts)
        found += j.answer
        decisions.append(j.decision)
    recs = [p for p in state.proposals if p.status == "manual" and _source_change(ctx, p.strategy)]
    if recs and enabled(ctx, "draft_patch"):
        root = source_root(state, ctx)
        run_dir = ctx.workspace.run_dir(state.run_id)
        offer = [
            {"id": p.id, "strategy": p.strategy, "name": p.strategy_name, "what": p.change.instructions[:600]}
            for p in recs
        ]
        by_rec = {p.id: p for p in recs}

        def patch(item: PatchDraft) -> Proposal:
            rec = by_rec.get(item.recommendation)
            if rec is None:
                raise ValueError(
                    f"{item.recommendation!r} is not one of the offered recommendations {sorted(by_rec)}"
                )
            return fresh(draft_proposal(catalog.strategies[rec.strategy], item.diff, root, run_dir, who))

        j = ctx.reasoner.decide(draft_question(offer, source_listing(root), patch, facts), facts)
        found += j.answer
        decisions.append(j.decision)
    return found, decisions


def _source_change(ctx: Context, strategy: str) -> bool:
    s = ctx.catalog.strategies.get(strategy)
    return s is not None and s.apply is not None and s.apply.kind == "source_patch" and not s.forbidden


def expand(state: TuningState, runtime: Runtime[Context]) -> Update:
    """Node: the model's proposals join the plan's (the screen comes next)."""
    ctx = runtime.context
    if not any(enabled(ctx, a) for a in ("knob_value", "l2_settings", "draft_patch")):
        return update()
    found, decisions = _ask(ctx, state)
    cited = {p.strategy: p.citation for p in state.proposals if p.citation is not None}
    start = len(state.proposals)
    out = [
        p.model_copy(update={"order": start + i, "citation": cited.get(p.strategy)})
        for i, p in enumerate(found)
    ]
    for p in out:
        ctx.progress("optimizer", f"the model proposes {p.id}: {p.description}")
    for d in decisions:
        if d.fallback:
            ctx.progress("optimizer", f"{d.question}: the rules decide ({d.fallback})")
    return update(
        proposals=out,
        decisions=decisions,
        events=[
            log(
                "optimizer",
                f"the model proposed {len(out)} change(s)",
                ids=[p.id for p in out],
                reasoner=[d.by for d in decisions],
                fallback=[d.fallback for d in decisions if d.fallback],
            )
        ],
    )
