"""The knowledge-base tools: opt_kb_lookup, opt_kb_record (guards enforced), opt_kb_render."""

from __future__ import annotations

from pathlib import Path
from typing import Any

from pydantic import Field

from dftune.core.domain.kb import KbRecordIn
from dftune.mcp_server.registry import (
    Toolbox,
    _In,
)

box = Toolbox()


class KbLookupIn(_In):
    system: str | None = Field(None, description="This machine: its L3 (system) findings.")
    workload: str | None = Field(None, description="This application: its L1 (workload) findings.")
    software: str | None = Field(
        None,
        description="Comma list, e.g. 'hdf5,mpi-io,lustre': L2 findings for that software (all if unset).",
    )
    strategy: str | None = Field(None, description="Only this strategy id.")
    limit: int | None = Field(None, ge=1, le=100_000, description="At most this many findings per scope.")


@box.tool(
    "opt_kb_lookup",
    KbLookupIn,
    """Measured results of earlier runs that apply here, partitioned by scope:
       system (L3, this machine only), software (L2, travels), workload (L1, this application only); each with
       verdict, before/after, guard decisions and citation. Call it before proposing anything.""",
)
def opt_kb_lookup_tool(p: KbLookupIn) -> dict[str, Any]:
    """Start from what was already measured instead of re-running known wins and failures."""
    from dftune.tools.kb import opt_kb_lookup

    found = opt_kb_lookup(
        system=p.system, workload=p.workload, software=p.software, strategy=p.strategy, limit=p.limit
    )
    return found.model_dump(mode="json")


class KbRecordArgs(KbRecordIn):
    """A KB record plus the traces that let the no-doing-less guard run."""

    baseline_traces: list[str] | None = Field(
        None,
        description="Baseline trace files/folders: with experiment_traces, the no-doing-less guard runs.",
    )
    experiment_traces: list[str] | None = Field(None, description="Experiment trace files/folders.")


@box.tool(
    "opt_kb_record",
    KbRecordArgs,
    """Record one measured (or refused) change in the knowledge base. The
       guards run inside and cannot be bypassed: citation (none -> unsupported), access pattern and doing less
       (-> rejected), non-degradation (a system-scoped result needs the paired app metric; app > 2% worse ->
       regression). Record no-ops and regressions too. Returns
       the stored record with every guard decision.""",
    read_only=False,
)
def opt_kb_record_tool(p: KbRecordArgs) -> dict[str, Any]:
    """Every result is kept, guarded, so later runs inherit evidence rather than anecdotes."""
    from dftune.tools.kb import opt_kb_record
    from dftune.tools.trace import analyze

    data = p.model_dump(exclude={"baseline_traces", "experiment_traces"})
    base = analyze(p.baseline_traces, profile=True) if p.baseline_traces else None
    exp = analyze(p.experiment_traces, profile=True) if p.experiment_traces else None
    return opt_kb_record(data, baseline_analysis=base, experiment_analysis=exp).model_dump(mode="json")


class KbRenderIn(_In):
    path: str | None = Field(
        None,
        description="Where to write the markdown, inside $DFTUNE_HOME (relative: under $DFTUNE_HOME/kb; "
        "default $DFTUNE_HOME/kb/opt_kb.md). A path that resolves outside DFTUNE_HOME is refused.",
    )


@box.tool(
    "opt_kb_render",
    KbRenderIn,
    """Publish the knowledge base as a markdown skill file (one section per
       scope, every record labeled with its verdict); returns the path and the markdown.""",
    read_only=False,
)
def opt_kb_render_tool(p: KbRenderIn) -> dict[str, Any]:
    """The KB as a file other agents and people can load."""
    from dftune.core.fsio import confined
    from dftune.core.home import dftune_home
    from dftune.tools.kb import opt_kb_records, opt_kb_render

    target = None
    if p.path is not None:  # a client's path: confined to DFTUNE_HOME after resolving every link
        given = Path(p.path).expanduser()
        target = confined(given if given.is_absolute() else dftune_home() / "kb" / given, dftune_home())
    written = opt_kb_render(target)
    return {"path": str(written), "records": len(opt_kb_records()), "markdown": written.read_text("utf-8")}
