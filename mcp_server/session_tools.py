"""The session tools: session-scoped analysis, structure validation and reorganization."""

from __future__ import annotations

from typing import Any, Literal

from pydantic import Field

from dftune.mcp_server.registry import (
    Iteration,
    MaxRows,
    RunId,
    SkipBad,
    Toolbox,
    ToolFailure,
    View,
    _In,
    run_traces,
    summary_only,
    trim_views,
)

box = Toolbox()


class SessionAnalyzeIn(_In):
    run_id: str = RunId
    iteration: str = Iteration
    kind: Literal["raw", "compact"] = Field("raw", description="traces/raw (as traced) or traces/compact.")
    views: list[View] = Field(default_factory=summary_only, description="As for analyze.")
    skip_bad: bool = SkipBad
    max_rows: int = MaxRows


@box.tool(
    "session_analyze_traces",
    SessionAnalyzeIn,
    """Analyze the traces a run recorded, by run id: its
       baseline or an opt<n> iteration (runs/<id>/<baseline|opt<n>>/traces/raw).""",
)
def session_analyze_traces_tool(p: SessionAnalyzeIn) -> dict[str, Any]:
    """Session-scoped analysis: the client names a run, not a folder it would have to guess."""
    from dftune.tools.trace import analyze

    path, label = run_traces(p.run_id, p.iteration, p.kind)
    if not path.is_dir():
        raise ToolFailure(f"{path}: no trace folder for {p.run_id}/{label}")
    result = analyze([path], skip_bad=p.skip_bad, views=p.views)
    return {
        "run_id": p.run_id,
        "iteration": label,
        "trace_dir": str(path),
        "analysis": trim_views(result.to_json_dict(), p.max_rows),
    }


class RunIn(_In):
    run_id: str = RunId


@box.tool(
    "session_validate_structure",
    RunIn,
    """Check a run's folder against the session layout (run.json,
       baseline/, opt<n>/ with source, patches, scripts, traces/raw, traces/compact; artifacts in their
       iteration); reports each problem and whether
       session_reorganize_structure can fix it. Changes nothing.""",
)
def session_validate_structure_tool(p: RunIn) -> dict[str, Any]:
    """The dftracer-io-optimization skill calls it before each iteration: no artifact in a hand-built path."""
    from dftune.tools.session.workspace import validate_structure

    return validate_structure(p.run_id).model_dump(mode="json")


class ReorganizeIn(_In):
    run_id: str = RunId
    dry_run: bool = Field(True, description="Only plan the moves (default); false performs them.")


@box.tool(
    "session_reorganize_structure",
    ReorganizeIn,
    """Plan (dry_run, the default) or perform the moves that
       fix session_validate_structure's fixable problems;
       never overwrites (a taken target is a 'conflict').""",
    read_only=False,
)
def session_reorganize_structure_tool(p: ReorganizeIn) -> dict[str, Any]:
    """Puts misplaced artifacts and traces back so later steps find them."""
    from dftune.tools.session.workspace import reorganize_structure, validate_structure

    moves = reorganize_structure(p.run_id, dry_run=p.dry_run)
    out: dict[str, Any] = {
        "run_id": p.run_id,
        "dry_run": p.dry_run,
        "moves": [m.model_dump(mode="json") for m in moves],
    }
    if not p.dry_run:
        out["clean_after"] = validate_structure(p.run_id).clean
    return out
