"""``replay --checkpoint`` takes a checkpoint id or the step number ``dftune history`` shows."""

from __future__ import annotations

from dftune.graphs.runs import RunError, history
from dftune.tools.session.workspace import Workspace


def resolve_checkpoint(run_id: str, ref: str, workspace: Workspace | None = None) -> str:
    """The checkpoint id ``ref`` names: an id as is, or a step number (refused when two branches share it)."""
    text = ref.strip()
    if not text.lstrip("-").isdigit():
        return text
    step = int(text)
    rows = [h for h in history(run_id, workspace=workspace) if h.get("step") == step]
    if not rows:
        raise RunError(f"run {run_id} has no checkpoint at step {step} (see dftune history {run_id})")
    if len(rows) > 1:
        ids = ", ".join(r["checkpoint_id"] for r in rows)
        raise RunError(
            f"step {step} of run {run_id} names {len(rows)} checkpoints (one per branch): give the id, "
            f"one of {ids}"
        )
    return str(rows[0]["checkpoint_id"])
