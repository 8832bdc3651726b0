"""A fresh ``opt<n>`` and the chosen change applied there, once, through the change journal.

Only a change the journal records as ``applied`` is done: after a kill mid-patch the journal's
recovery restores the previous bytes and records ``aborted``, and the re-run node applies the
change again onto a fresh copy, so what the verifier measures is really the patched source. The
proposal and the arm it builds on are checked against the catalog and the archived spec first
(:mod:`trust`): an edited checkpoint is refused, never applied.
"""

from __future__ import annotations

import shutil
from collections.abc import Callable
from pathlib import Path
from typing import Any

from langgraph.runtime import Runtime

from dftune.agents.context import Context
from dftune.agents.optimizer.artifacts import write_layer_artifacts
from dftune.agents.optimizer.plan import slug
from dftune.agents.optimizer.trust import TamperedProposal, trusted_arm, trusted_proposal
from dftune.core.domain.experiments import Experiment
from dftune.core.domain.proposals import Proposal
from dftune.core.domain.run import TuningState, Update, log, update
from dftune.core.errors import is_storage_error
from dftune.core.failpoint import failpoint
from dftune.tools.runner.changes import ChangeError, CommandChange, EnvChange, FilePatch, Journal
from dftune.tools.runner.changes.layering import layer_env
from dftune.tools.runner.spec import SOURCE_COPY_IGNORE
from dftune.tools.session.workspace import ITERATION_SUBDIRS


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
    ignore = shutil.ignore_patterns(*SOURCE_COPY_IGNORE)
    shutil.copytree(origin, dest, symlinks=True, ignore=ignore)
    return dest


def keep_layout(ctx: Context, run_id: str) -> None:
    """``session_validate_structure``; when it is not clean, ``session_reorganize_structure``."""
    if not ctx.workspace.validate_structure(run_id).clean:
        ctx.workspace.reorganize_structure(run_id, dry_run=False)


def apply_once(
    journal: Journal, change_id: str, make: Callable[[], EnvChange | FilePatch | CommandChange]
) -> None:
    """Apply the change ``make()`` builds unless the journal records it ``applied``; an attempt that
    ended ``aborted`` or ``failed`` (nothing in effect) is applied again. A change that does not end
    ``applied`` raises."""
    if journal.state(change_id) == "applied":
        return
    rec = journal.apply(make(), approved=True)
    if rec.state != "applied":
        raise ChangeError(rec.error or f"change {change_id} ended in state {rec.state}")


def _refused(state: TuningState, n: int, exc: TamperedProposal) -> dict[str, Any]:
    assert state.current is not None and state.incumbent is not None
    bad = state.proposal(state.current)
    exp = Experiment(
        iteration=n,
        proposal_id=bad.id,
        strategy=bad.strategy,
        reference=state.incumbent,
        verdict="failed",
        verdict_reason=str(exc),
    )
    return {
        "experiments": [exp],
        "proposals": [bad.model_copy(update={"status": "rejected", "reason": str(exc), "iteration": n})],
        "events": [log("optimizer", f"opt{n}: {exc}")],
    }


def _journaled(
    p: Proposal, cid: str, state: TuningState, ctx: Context, it_dir: Path
) -> EnvChange | FilePatch | CommandChange:
    """The journal's record of ``p``'s change, built when it is (re)applied."""
    common = {"id": cid, "strategy": p.strategy, "description": p.description[:200]}
    if p.change.kind == "env":
        assert state.incumbent is not None
        variables = layer_env(state.incumbent.env, p.change.env).env
        return EnvChange(**common, env_file=it_dir / "opt_l2_env.sh", variables=variables)
    if p.change.kind == "patch":
        # a fresh copy for every attempt: an aborted one was restored, this one starts clean
        diff = Path(p.change.patch_file).read_text(encoding="utf-8")
        return FilePatch(**common, root=copy_source(state, ctx, it_dir), strip=p.change.strip, diff=diff)
    return CommandChange(
        **common,
        privilege=p.privilege,
        argv=p.change.argv,
        read_current=p.change.read_argv,
        rollback=p.change.rollback_argv,
    )


def apply_change(state: TuningState, runtime: Runtime[Context]) -> Update:
    """Node: a fresh opt<n> and the change applied there (once, with its rollback journaled)."""
    ctx = runtime.context
    assert state.current is not None and state.incumbent is not None
    n = next_iteration(state)
    try:
        p = trusted_proposal(state.proposal(state.current), state, ctx)
        trusted_arm(state.incumbent, state, ctx, before=n)
    except TamperedProposal as exc:
        ctx.progress("optimizer", str(exc))
        return update(_refused(state, n, exc))
    keep_layout(ctx, state.run_id)  # validate and fix before each iteration (dftracer-io-optimization skill)
    it_dir = ctx.workspace.iteration_dir(state.run_id, n)
    for sub in ITERATION_SUBDIRS:
        (it_dir / sub).mkdir(parents=True, exist_ok=True)
    journal = journal_for(ctx, state.run_id)
    change_ids: list[str] = []
    try:
        if p.change.kind in ("env", "patch", "command"):
            cid = f"opt{n}-{slug(p.id if p.change.kind == 'patch' else p.strategy)}"
            change_ids.append(cid)
            apply_once(journal, cid, lambda: _journaled(p, cid, state, ctx, it_dir))
    except Exception as exc:  # any failure to apply is recorded, never retried blindly
        if is_storage_error(exc):
            raise  # a full or read-only disk is no verdict on the change: the run stops, resumable
        exp = Experiment(
            iteration=n,
            proposal_id=p.id,
            strategy=p.strategy,
            reference=state.incumbent,
            verdict="failed",
            verdict_reason=f"could not apply: {exc}",
            change_ids=change_ids,
        )
        return update(
            experiments=[exp],
            proposals=[
                p.model_copy(update={"status": "failed", "reason": f"could not apply: {exc}", "iteration": n})
            ],
            events=[log("optimizer", f"opt{n}: applying {p.id} failed: {exc}")],
        )
    failpoint("apply.done")
    write_layer_artifacts(ctx, state, p, n)
    keep_layout(ctx, state.run_id)  # and again after applying, before the experiment collects traces
    ctx.progress("optimizer", f"opt{n}: applied {p.id}")
    exp = Experiment(
        iteration=n, proposal_id=p.id, strategy=p.strategy, reference=state.incumbent, change_ids=change_ids
    )
    return update(
        experiments=[exp],
        proposals=[p.model_copy(update={"iteration": n})],
        events=[log("optimizer", f"opt{n}: applied {p.id}", change=p.change.model_dump())],
    )
