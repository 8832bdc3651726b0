"""A fresh ``opt<n>`` and the chosen change applied there, once, through the change journal."""

from __future__ import annotations

import shutil
from pathlib import Path
from typing import Any

from langgraph.runtime import Runtime

from dftune.agents.context import Context
from dftune.agents.optimizer.artifacts import write_layer_artifacts
from dftune.agents.optimizer.plan import slug
from dftune.agents.state import Experiment, TuningState, log
from dftune.tools.runner.changes import CommandChange, EnvChange, FilePatch, Journal
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
    ignore = shutil.ignore_patterns("__pycache__", ".git", "opt[0-9]*", "*.pfw", "*.pfw.gz")
    shutil.copytree(origin, dest, symlinks=True, ignore=ignore)
    return dest


def keep_layout(ctx: Context, run_id: str) -> None:
    """``session_validate_structure``; when it is not clean, ``session_reorganize_structure``."""
    if not ctx.workspace.validate_structure(run_id).clean:
        ctx.workspace.reorganize_structure(run_id, dry_run=False)


def apply_change(state: TuningState, runtime: Runtime[Context]) -> dict[str, Any]:
    """Node: a fresh opt<n> and the change applied there (once, with its rollback journaled)."""
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
            cid = f"opt{n}-{slug(p.strategy)}"
            change_ids.append(cid)
            if journal.state(cid) is None:
                env_file = it_dir / "opt_l2_env.sh"
                all_env = {**state.incumbent.env, **p.change.env}
                journal.apply(EnvChange(id=cid, strategy=p.strategy, env_file=env_file, variables=all_env,
                                        description=p.description[:200]), approved=True)  # fmt: skip
        elif p.change.kind == "patch":
            cid = f"opt{n}-{slug(p.id)}"
            change_ids.append(cid)
            if journal.state(cid) is None:
                source = copy_source(state, ctx, it_dir)
                rec = journal.apply(FilePatch(id=cid, strategy=p.strategy, root=source, strip=p.change.strip,
                                              diff=Path(p.change.patch_file).read_text(encoding="utf-8"),
                                              description=p.description[:200]), approved=True)  # fmt: skip
                if rec.state != "applied":
                    raise RuntimeError(rec.error or f"the patch ended in state {rec.state}")
        elif p.change.kind == "command":
            cid = f"opt{n}-{slug(p.strategy)}"
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
    write_layer_artifacts(ctx, state, p, n)
    keep_layout(ctx, state.run_id)  # and again after applying, before the experiment collects traces
    ctx.progress("optimizer", f"opt{n}: applied {p.id}")
    exp = Experiment(iteration=n, proposal_id=p.id, strategy=p.strategy, reference=state.incumbent,
                     change_ids=change_ids)  # fmt: skip
    return {"experiments": [exp], "proposals": [p.model_copy(update={"iteration": n})],
            "events": [log("optimizer", f"opt{n}: applied {p.id}", change=p.change.model_dump())]}  # fmt: skip
