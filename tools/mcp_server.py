"""``dftune mcp``: dftune's deterministic tools served to MCP clients (Claude Code, Codex) over stdio.

The seed's pipeline calls its tools by these names (``analyze``, ``diagnose``, ``comparator``,
``opt_kb_record``, ...); serving them here lets any MCP client drive dftune without a wrapper.

Each tool is a pydantic input model (the JSON schema clients see, every field described) and
a thin function that calls the existing dftune function and returns a JSON object. The
low-level SDK server is used rather than the decorator API so that every failure, argument
validation included, reaches the client as ONE line (``is_error`` result, the MCP way for
tool errors, so a model can read and correct it); an unknown tool name is a protocol error.

stdout is the transport: nothing here prints, logs go to stderr, and the SDK's stdio transport
moves file descriptor 1 onto stderr while it serves, so a stray write from a library or a
worker process cannot corrupt the protocol.
"""

from __future__ import annotations

import json
import logging
import re
import sys
from collections.abc import Callable
from dataclasses import dataclass
from datetime import UTC, datetime
from pathlib import Path
from typing import Any, Literal

from pydantic import BaseModel, ConfigDict, Field, ValidationError, model_validator

from dftune.agents.optimizer import PROPOSAL_COLUMNS
from dftune.tools.diagnose.vocabulary import CATEGORIES
from dftune.tools.kb.store import KbRecordIn

log = logging.getLogger("dftune.mcp")

SERVER_NAME = "dftune"
View = Literal["summary", "file", "proc", "time", "layer"]
Bottleneck = Literal[CATEGORIES]  # type: ignore[valid-type]
#: View rows returned per view unless the caller asks for more (file views of ML datasets are huge).
DEFAULT_MAX_ROWS = 50


class ToolFailure(Exception):
    """An anticipated failure; :func:`call` prefixes the tool's name to make the line the client sees."""


class _In(BaseModel):
    model_config = ConfigDict(extra="forbid")


Paths = Field(
    min_length=1,
    description="dftracer traces (.pfw, .pfw.gz), Darshan logs (.darshan, recognised by "
    "content) or directories searched recursively; one kind per call.",
)
SkipBad = Field(False, description="Analyze around bad lines/files and report them instead of failing.")
RunId = Field(min_length=1, description="Run id, a folder under $DFTUNE_HOME/runs (see `dftune runs`).")
Iteration = Field(
    "baseline",
    description="Which traces of the run: 'baseline', 'latest' (highest opt<n>), 'opt<n>' or just n.",
)
MaxRows = Field(
    DEFAULT_MAX_ROWS, ge=1, le=100_000, description="Rows kept per view (the rest are counted, not listed)."
)


# --------------------------------------------------------------------------- registry


@dataclass(frozen=True)
class ToolSpec:
    name: str
    description: str
    params: type[BaseModel]
    run: Callable[[Any], dict[str, Any]]
    read_only: bool = True


TOOLS: dict[str, ToolSpec] = {}


def _tool(
    name: str, params: type[BaseModel], description: str, *, read_only: bool = True
) -> Callable[..., Any]:
    """Register a tool: one place lists name, schema and description, so list_tools cannot drift."""

    def register(fn: Callable[[Any], dict[str, Any]]) -> Callable[[Any], dict[str, Any]]:
        TOOLS[name] = ToolSpec(name, " ".join(description.split()), params, fn, read_only)
        return fn

    return register


def call(name: str, arguments: dict[str, Any] | None = None) -> dict[str, Any]:
    """Validate the arguments and run one tool in-process (what the server does per request)."""
    spec = TOOLS.get(name)
    if spec is None:
        raise ToolFailure(f"unknown tool {name!r}")
    try:
        args = spec.params.model_validate(arguments or {})
    except ValidationError as exc:
        raise ToolFailure(f"{name}: invalid arguments: {_validation_line(exc)}") from None
    try:
        return spec.run(args)
    except ValidationError as exc:  # a record validated inside the wrapped function
        raise ToolFailure(f"{name}: {_validation_line(exc)}") from None
    except ToolFailure as exc:
        raise ToolFailure(f"{name}: {_one_line(exc)}") from None
    except _user_errors() as exc:
        raise ToolFailure(f"{name}: {_one_line(exc)}") from None
    except OSError as exc:
        where = getattr(exc, "filename", None) or "input"
        raise ToolFailure(f"{name}: {where}: {exc.strerror or exc}") from None


def _user_errors() -> tuple[type[BaseException], ...]:
    """The errors a caller can fix (bad traces, ids, records); anything else is an internal error."""
    from dftune.tools.catalog import CatalogError
    from dftune.tools.diagnose.rules import RuleError
    from dftune.tools.kb import KbError
    from dftune.tools.session.workspace import WorkspaceError
    from dftune.tools.trace import TraceError
    from dftune.vectorstore import EmbeddingError, StoreError

    return (
        TraceError,
        WorkspaceError,
        KbError,
        CatalogError,
        RuleError,
        StoreError,
        EmbeddingError,
        ValueError,
    )


def _one_line(exc: BaseException) -> str:
    return " ".join(str(exc).split()) or type(exc).__name__


def _validation_line(exc: ValidationError) -> str:
    parts = []
    for err in exc.errors():
        loc = ".".join(str(x) for x in err["loc"])
        msg = str(err["msg"]).removeprefix("Value error, ")
        parts.append(f"{loc}: {msg}" if loc else msg)
    return " ".join("; ".join(parts).split())


# --------------------------------------------------------------------------- shared helpers


def _trim_views(doc: dict[str, Any], max_rows: int) -> dict[str, Any]:
    """Cut long view tables so a client's context is not flooded; say how many rows there were."""
    for view in doc.get("views", {}).values():
        rows = view.get("rows") if isinstance(view, dict) else None
        if isinstance(rows, list) and len(rows) > max_rows:
            view["rows_total"] = len(rows)
            view["rows"] = rows[:max_rows]
    return doc


def _iteration_number(run_id: str, iteration: str) -> int | None:
    """'baseline' -> None; 'latest' -> highest opt<n> (baseline when none); 'opt<n>'/'n' -> n (must exist)."""
    from dftune.tools.session.workspace import IterationNotFound, Workspace

    its = Workspace().iterations(run_id)  # RunNotFound for an unknown id
    text = iteration.strip().lower()
    if text == "baseline":
        return None
    if text == "latest":
        return its[-1] if its else None
    m = re.fullmatch(r"(?:opt)?([1-9][0-9]*)", text)
    if not m:
        raise ToolFailure(f"iteration {iteration!r}: expected 'baseline', 'latest', 'opt<n>' or n")
    n = int(m.group(1))
    if n not in its:
        have = ", ".join(f"opt{i}" for i in its) or "none"
        raise IterationNotFound(f"run {run_id!r} has no opt{n} (iterations: {have})")
    return n


def _run_traces(run_id: str, iteration: str, kind: Literal["raw", "compact"] = "raw") -> tuple[Path, str]:
    """The trace folder of a run's baseline or opt<n>, and its label."""
    from dftune.tools.session.workspace import Workspace

    n = _iteration_number(run_id, iteration)
    path = Workspace().traces_dir(run_id, n, kind)
    return path, "baseline" if n is None else f"opt{n}"


# --------------------------------------------------------------------------- trace tools


def _summary_only() -> list[View]:
    return ["summary"]


class AnalyzeIn(_In):
    paths: list[str] = Paths
    views: list[View] = Field(
        default_factory=_summary_only,
        description="Perspectives to add: summary (always), file, proc, time, layer.",
    )
    skip_bad: bool = SkipBad
    time_windows: int = Field(20, ge=1, le=10_000, description="Windows of the time view.")
    max_rows: int = MaxRows


@_tool(
    "analyze",
    AnalyzeIn,
    """Read dftracer traces exactly (2.x and legacy 1.x) or Darshan logs (PyDarshan) and summarize their I/O:
       counts, bytes and time per family (read/write/metadata/sync), time shares, small-I/O and access-pattern
       shares, transfer-size histogram, overlap with compute, layers; the dftune.analysis/1 document (Darshan input
       adds a `darshan` section: header, partial modules, MPI-IO, Lustre, and which numbers are DXT-exact).""",
)
def analyze_tool(p: AnalyzeIn) -> dict[str, Any]:
    """The seed's first tool: the numbers every later step reasons from."""
    from dftune.tools.trace import analyze

    result = analyze(p.paths, skip_bad=p.skip_bad, views=p.views, time_windows=p.time_windows)
    return _trim_views(result.to_json_dict(), p.max_rows)


class DiagnoseIn(_In):
    paths: list[str] = Paths
    data_dirs: list[str] = Field(
        default_factory=list, description="Dataset folders whose filesystem type gates L3 strategies."
    )
    skip_bad: bool = SkipBad


@_tool(
    "diagnose",
    DiagnoseIn,
    """Name the I/O bottlenecks of traces or Darshan logs (WisIO, Drishti, dftune, DLIO and Darshan-only rules as
       data), score them 1..5, pick the metric to optimize, decide whether tuning can pay off (I/O share and
       op-count vs bandwidth shape), and list candidate strategies per bottleneck; dftune.diagnosis/1.""",
)
def diagnose_tool(p: DiagnoseIn) -> dict[str, Any]:
    """Turns numbers into bottlenecks the optimizer can act on."""
    from dftune.tools.diagnose.engine import diagnose

    return diagnose(p.paths, data_dirs=p.data_dirs, skip_bad=p.skip_bad).to_json_dict()


class TraceSource(_In):
    """Either trace paths or a run's traces."""

    paths: list[str] | None = Field(None, description="Trace files or directories (instead of run_id).")
    run_id: str | None = Field(None, description="A run id (instead of paths): compare its traces.")
    iteration: str = Iteration

    @model_validator(mode="after")
    def _one_source(self) -> TraceSource:
        if (self.paths is None) == (self.run_id is None):
            raise ValueError("give exactly one of paths or run_id")
        if self.paths is not None and not self.paths:
            raise ValueError("paths is empty")
        return self


class ComparatorIn(_In):
    a: TraceSource = Field(description="The reference (e.g. the baseline).")
    b: TraceSource = Field(description="The candidate, compared against a.")
    skip_bad: bool = SkipBad


def _resolve(src: TraceSource) -> tuple[list[str], str]:
    if src.paths is not None:
        return src.paths, ", ".join(src.paths)
    assert src.run_id is not None
    path, label = _run_traces(src.run_id, src.iteration)
    return [str(path)], f"{src.run_id}/{label}"


@_tool(
    "comparator",
    ComparatorIn,
    """Compare two trace sets (paths) or two runs' traces (run id + baseline or
       opt<n>) side by side: one row per metric (counts, bytes and time per family, shares, job time) with
       b - a and the relative change (shares: the difference in points), and a note when b moved fewer bytes.""",
)
def comparator_tool(p: ComparatorIn) -> dict[str, Any]:
    """Says whether an experiment moved the I/O, and flags a speed-up that moved fewer bytes."""
    from dftune.tools.report.compare import compare_traces
    from dftune.tools.trace import analyze

    (pa, la), (pb, lb) = _resolve(p.a), _resolve(p.b)
    a = analyze(pa, skip_bad=p.skip_bad)
    b = analyze(pb, skip_bad=p.skip_bad)
    return compare_traces(a, b, (la, lb))


class EventCountIn(_In):
    paths: list[str] = Paths
    skip_bad: bool = Field(
        True, description="Count around bad lines and report them (false: fail on the first)."
    )


@_tool(
    "event_count",
    EventCountIn,
    """Count the events of each trace file and in total: complete events,
       metadata lines, counter and aggregated records, and skipped (bad) lines with their reasons.""",
)
def event_count_tool(p: EventCountIn) -> dict[str, Any]:
    """A cheap sanity check before analysis: is every file there, and did any line fail to parse."""
    from dftune.tools.trace import analyze
    from dftune.tools.trace.discover import discover

    rows = []
    keys = ("events", "metadata_lines", "counter_events", "aggregated_events", "skipped_lines")
    for f in discover(p.paths):
        a = analyze([f], skip_bad=p.skip_bad)
        rows.append({"file": str(f), **{k: getattr(a, k) for k in keys}, "empty": bool(a.empty_files),
                     "truncated": bool(a.truncated_files),
                     "skipped": [s.model_dump() for s in a.skipped]})  # fmt: skip
    total = {k: sum(r[k] for r in rows) for k in keys}
    return {"schema": "dftune.event_count/1", "files": len(rows), "total": total, "per_file": rows}


class ReaderIn(_In):
    paths: list[str] = Paths
    skip_bad: bool = SkipBad


def _iso(us: int) -> str | None:
    """Epoch microseconds as UTC ISO text, when they look like wall-clock time (2000-2100)."""
    if 946_684_800_000_000 <= us < 4_102_444_800_000_000:
        return datetime.fromtimestamp(us / 1e6, tz=UTC).isoformat()
    return None


@_tool(
    "reader",
    ReaderIn,
    """Trace metadata: files read (and empty or truncated ones), line formats, hosts,
       process count, dftracer versions, the tracer configuration recorded in the trace, and the time range.""",
)
def reader_tool(p: ReaderIn) -> dict[str, Any]:
    """What the traces are before what they say: which tracer, which config, which hosts, when."""
    from dftune.tools.trace import analyze

    a = analyze(p.paths, skip_bad=p.skip_bad, views=["time"], time_windows=1)
    time_view = a.views.get("time") or {}
    start = time_view.get("origin_us")
    time_range: dict[str, Any] = {"duration_s": a.job_time_s, "time_metric": a.time_metric}
    if start is not None:
        end = int(start) + round(a.job_time_s * 1e6)
        time_range |= {
            "start_us": int(start),
            "end_us": end,
            "start_utc": _iso(int(start)),
            "end_utc": _iso(end),
        }
    return {
        "schema": "dftune.trace_metadata/1",
        "files": a.files,
        "trace_files": a.trace_files,
        "empty_files": a.empty_files,
        "truncated_files": a.truncated_files,
        "formats": a.formats,
        "hosts": a.hosts,
        "processes": a.processes,
        "events": a.events,
        "skipped_lines": a.skipped_lines,
        "dftracer_versions": a.dftracer_versions,
        "tracer_config": a.tracer_config,
        "time_range": time_range,
        "warnings": a.warnings,
    }


# --------------------------------------------------------------------------- session tools


class SessionAnalyzeIn(_In):
    run_id: str = RunId
    iteration: str = Iteration
    kind: Literal["raw", "compact"] = Field("raw", description="traces/raw (as traced) or traces/compact.")
    views: list[View] = Field(default_factory=_summary_only, description="As for analyze.")
    skip_bad: bool = SkipBad
    max_rows: int = MaxRows


@_tool(
    "session_analyze_traces",
    SessionAnalyzeIn,
    """Analyze the traces a run recorded, by run id: its
       baseline or an opt<n> iteration (runs/<id>/<baseline|opt<n>>/traces/raw).""",
)
def session_analyze_traces_tool(p: SessionAnalyzeIn) -> dict[str, Any]:
    """Session-scoped analysis: the client names a run, not a folder it would have to guess."""
    from dftune.tools.trace import analyze

    path, label = _run_traces(p.run_id, p.iteration, p.kind)
    if not path.is_dir():
        raise ToolFailure(f"{path}: no trace folder for {p.run_id}/{label}")
    result = analyze([path], skip_bad=p.skip_bad, views=p.views)
    return {"run_id": p.run_id, "iteration": label, "trace_dir": str(path),
            "analysis": _trim_views(result.to_json_dict(), p.max_rows)}  # fmt: skip


class RunIn(_In):
    run_id: str = RunId


@_tool(
    "session_validate_structure",
    RunIn,
    """Check a run's folder against the session layout (run.json,
       baseline/, opt<n>/ with source, patches, scripts, traces/raw, traces/compact; artifacts in their
       iteration); reports each problem and whether session_reorganize_structure can fix it. Changes nothing.""",
)
def session_validate_structure_tool(p: RunIn) -> dict[str, Any]:
    """The seed calls it before each iteration so artifacts never land in hand-built paths."""
    from dftune.tools.session.workspace import validate_structure

    return validate_structure(p.run_id).model_dump(mode="json")


class ReorganizeIn(_In):
    run_id: str = RunId
    dry_run: bool = Field(True, description="Only plan the moves (default); false performs them.")


@_tool("session_reorganize_structure", ReorganizeIn, """Plan (dry_run, the default) or perform the moves that
       fix session_validate_structure's fixable problems; never overwrites (a taken target is a 'conflict').""",
       read_only=False)  # fmt: skip
def session_reorganize_structure_tool(p: ReorganizeIn) -> dict[str, Any]:
    """Puts misplaced artifacts and traces back so later steps find them."""
    from dftune.tools.session.workspace import reorganize_structure, validate_structure

    moves = reorganize_structure(p.run_id, dry_run=p.dry_run)
    out: dict[str, Any] = {"run_id": p.run_id, "dry_run": p.dry_run,
                           "moves": [m.model_dump(mode="json") for m in moves]}  # fmt: skip
    if not p.dry_run:
        out["clean_after"] = validate_structure(p.run_id).clean
    return out


# --------------------------------------------------------------------------- knowledge base


class KbLookupIn(_In):
    system: str | None = Field(None, description="This machine: its L3 (system) findings.")
    workload: str | None = Field(None, description="This application: its L1 (workload) findings.")
    software: str | None = Field(
        None,
        description="Comma list, e.g. 'hdf5,mpi-io,lustre': L2 findings for that software (all if unset).",
    )
    strategy: str | None = Field(None, description="Only this strategy id.")
    limit: int | None = Field(None, ge=1, description="At most this many findings per scope.")


@_tool(
    "opt_kb_lookup",
    KbLookupIn,
    """Measured results of earlier runs that apply here, partitioned by scope:
       system (L3, this machine only), software (L2, travels), workload (L1, this application only); each with
       verdict, before/after, guard decisions and citation. Call it before proposing anything.""",
)
def opt_kb_lookup_tool(p: KbLookupIn) -> dict[str, Any]:
    """Start from what was already measured instead of re-running known wins and failures."""
    from dftune.tools.kb import opt_kb_lookup

    found = opt_kb_lookup(system=p.system, workload=p.workload, software=p.software, strategy=p.strategy,
                          limit=p.limit)  # fmt: skip
    return found.model_dump(mode="json")


_KB_FIELD_DOCS = {
    "run_id": "The dftune run that measured it (recording the same input twice in a run returns the first record).",
    "iteration": "The opt<n> iteration the change was applied in.",
    "system": "Hostname or cluster (L3 findings stay on it).",
    "workload": "Application name (L1 findings stay with it).",
    "software": "Software stack, comma list or list, e.g. 'hdf5,mpi-io'; required for L2 strategies.",
    "strategy": "Strategy id from the catalog, e.g. 'l2.romio_cb_buffer'.",
    "change": "What was applied: knob settings, environment, patch id (a JSON object).",
    "metric": "The measured metric, e.g. 'wall_time_s'.",
    "metric_scope": "'app' (from the application's own trace) or 'system' (needs the paired app metric).",
    "lower_is_better": "Direction of the metric.",
    "before": "Median of the baseline arm.",
    "after": "Median of the experiment arm.",
    "before_ci": "95% confidence interval of the baseline median [low, high].",
    "after_ci": "95% confidence interval of the experiment median [low, high].",
    "comparison": "The runner's statistical comparison (or a summary: verdict, ci95, p_value, reason).",
    "app_metric": "Paired application metric (required with metric_scope='system').",
    "app_before": "Paired application metric before.",
    "app_after": "Paired application metric after (> 2% worse forces a regression).",
    "app_lower_is_better": "Direction of the paired application metric.",
    "caveats": "What limits the finding (scale, data, noise).",
    "fs_type": "Filesystem of the data (lustre, gpfs, nfs, ...).",
    "found_citation": "A citation found by the literature search, complete and with its supporting passage.",
}


def _describe_kb_fields(schema: dict[str, Any]) -> None:
    for name, prop in schema.get("properties", {}).items():
        if name in _KB_FIELD_DOCS and "description" not in prop:
            prop["description"] = _KB_FIELD_DOCS[name]


class KbRecordArgs(KbRecordIn):
    """A KB record plus the traces that let the no-doing-less guard run."""

    model_config = ConfigDict(extra="forbid", json_schema_extra=_describe_kb_fields)

    baseline_traces: list[str] | None = Field(
        None,
        description="Baseline trace files/folders: with experiment_traces, the no-doing-less guard runs.",
    )
    experiment_traces: list[str] | None = Field(None, description="Experiment trace files/folders.")


@_tool("opt_kb_record", KbRecordArgs, """Record one measured (or refused) change in the knowledge base. The
       guards run inside and cannot be bypassed: citation (none -> unsupported), access pattern and doing less
       (-> rejected), non-degradation (a system-scoped result needs the paired app metric; app > 2% worse ->
       regression). Record no-ops and regressions too. Returns the stored record with every guard decision.""",
       read_only=False)  # fmt: skip
def opt_kb_record_tool(p: KbRecordArgs) -> dict[str, Any]:
    """Every result is kept, guarded, so later runs inherit evidence rather than anecdotes."""
    from dftune.tools.kb import opt_kb_record
    from dftune.tools.trace import analyze

    data = p.model_dump(exclude={"baseline_traces", "experiment_traces"})
    base = analyze(p.baseline_traces) if p.baseline_traces else None
    exp = analyze(p.experiment_traces) if p.experiment_traces else None
    return opt_kb_record(data, baseline_analysis=base, experiment_analysis=exp).model_dump(mode="json")


class KbRenderIn(_In):
    path: str | None = Field(
        None, description="Where to write the markdown (default $DFTUNE_HOME/kb/opt_kb.md)."
    )


@_tool(
    "opt_kb_render",
    KbRenderIn,
    """Publish the knowledge base as a markdown skill file (one section per
       scope, every record labeled with its verdict); returns the path and the markdown.""",
    read_only=False,
)
def opt_kb_render_tool(p: KbRenderIn) -> dict[str, Any]:
    """The KB as a file other agents and people can load."""
    from dftune.tools.kb import opt_kb_records, opt_kb_render

    written = opt_kb_render(p.path)
    return {"path": str(written), "records": len(opt_kb_records()), "markdown": written.read_text("utf-8")}


# --------------------------------------------------------------------------- proposal table


class CitationIn(_In):
    authors: list[str] = Field(min_length=1, description="Authors, as printed.")
    title: str = Field(min_length=1, description="Title of the paper or page.")
    venue: str = Field(min_length=1, description="Journal, conference or 'arXiv preprint arXiv:NNNN'.")
    year: int = Field(ge=1900, le=2100, description="Publication year.")
    url: str = Field(pattern=r"^https?://\S+$", description="arXiv, DOI or publisher URL.")
    claim: str = Field("", description="The passage that supports the proposal.")


class ProposalRowIn(_In):
    strategy: str = Field(min_length=1, description="Strategy id, e.g. 'l1.dataloader_workers'.")
    description: str = Field(min_length=1, description="Description of the optimization.")
    app_impact_pct: float = Field(
        description="% of application wall time saved (measured or bounded estimate)."
    )
    app_impact_source: Literal["measured", "estimate"] = Field(
        "estimate", description="Where App Impact comes from."
    )
    system_impact_pct: float = Field(0.0, description="% change of throughput/bandwidth; 0 if not measured.")
    system_impact_source: Literal["measured", "estimate"] = Field(
        "estimate", description="Where System Impact comes from."
    )
    layer: Literal["L1", "L2", "L3"] | None = Field(
        None, description="Default: the catalog's, else the id prefix."
    )
    citation_id: str | None = Field(
        None, description="A citation id of dftune's catalog (instead of citation)."
    )
    citation: CitationIn | None = Field(None, description="A full citation (instead of citation_id).")


class ProposalTableIn(_In):
    rows: list[ProposalRowIn] = Field(min_length=1, description="The proposals; every one must be cited.")


TABLE_COLUMNS = PROPOSAL_COLUMNS  # the seed's columns; "Citation" is added per row


def _proposal(i: int, row: ProposalRowIn) -> Any:
    """A graph Proposal from a row; uncited or unresolvable rows stop the table."""
    from dftune.agents.literature import reference_text
    from dftune.graphs.guards import citation_url
    from dftune.graphs.state import Change, CitationRef, Proposal
    from dftune.tools.catalog import default_catalog

    cat = default_catalog()
    where = f"row {i} ({row.strategy})"
    if row.citation is not None and row.citation_id is not None:
        raise ToolFailure(f"{where}: give citation or citation_id, not both")
    if row.citation is not None:
        c = row.citation
        ref = CitationRef(id=c.url, reference=reference_text(c.authors, c.title, c.venue, c.year),
                          authors=c.authors, title=c.title, venue=c.venue, year=c.year, url=c.url,
                          claim=c.claim, evidence=c.claim, source="caller")  # fmt: skip
    elif row.citation_id is not None:
        known = cat.citations.get(row.citation_id)
        url = citation_url(known) if known is not None else None
        if known is None or url is None:
            raise ToolFailure(f"{where}: citation_id {row.citation_id!r} is not a catalog "
                              "citation with a URL")  # fmt: skip
        claims = known.claims_for(row.strategy)
        ref = CitationRef(id=known.id, reference=reference_text(known.authors, known.title, known.venue, known.year),
                          authors=list(known.authors), title=known.title, venue=known.venue, year=known.year,
                          url=url, claim=claims[0].claim if claims else known.summary or "",
                          evidence=claims[0].evidence or "catalog" if claims else "catalog", source="catalog")  # fmt: skip
    else:
        raise ToolFailure(f"{where} has no citation: every proposal needs a verifiable "
                          "citation (authors, title, venue, year, URL); search for one (rag_search, "
                          "search_arxiv) or leave the proposal out as UNSUPPORTED")  # fmt: skip
    s = cat.strategies.get(row.strategy)
    prefix = row.strategy.split(".", 1)[0].upper()
    layer = row.layer or (s.layer if s is not None else prefix if prefix in ("L1", "L2", "L3") else None)
    if layer is None:
        raise ToolFailure(f"{where}: unknown strategy; give its layer (L1, L2 or L3)")
    return Proposal(id=f"p{i}", strategy=row.strategy, strategy_name=s.name if s else row.strategy, layer=layer,
                    checklist=s.checklist if s else 0, description=row.description,
                    change=Change(kind="manual", instructions=row.description), app_impact_pct=row.app_impact_pct,
                    app_impact_source=row.app_impact_source, system_impact_pct=row.system_impact_pct,
                    system_impact_source=row.system_impact_source, citation=ref)  # fmt: skip


def _cell(text: object) -> str:
    return " ".join(str(text).split()).replace("|", "\\|")


@_tool(
    "opt_proposal_table",
    ProposalTableIn,
    """Render proposals as the seed's table: #, Strategy, Description of
       Optimization, App Impact, System Impact, Weighted Score (50/50 of app and system impact), sorted by score
       descending, each row with its citation. A row without a verifiable citation is rejected with an error.""",
)
def opt_proposal_table_tool(p: ProposalTableIn) -> dict[str, Any]:
    """Uncited proposals never reach a person: the table refuses them instead of dropping them quietly."""
    from dftune.agents.optimizer import proposal_table

    rows = proposal_table([_proposal(i, r) for i, r in enumerate(p.rows, 1)])
    lines = ["| " + " | ".join((*TABLE_COLUMNS, "Citation")) + " |", "|" + "---|" * (len(TABLE_COLUMNS) + 1)]
    for r in rows:
        cells = (r["#"], r["strategy"], r["description"], f"{r['app_impact_pct']:.1f}% ({r['app_impact_source']})",
                 f"{r['system_impact_pct']:.1f}% ({r['system_impact_source']})", f"{r['weighted_score']:.2f}",
                 f"{r['citation']} {r['url']}")  # fmt: skip
        lines.append("| " + " | ".join(_cell(c) for c in cells) + " |")
    return {"columns": list(TABLE_COLUMNS), "rows": rows, "markdown": "\n".join(lines)}


# --------------------------------------------------------------------------- literature


class RagSearchIn(_In):
    query: str = Field(min_length=1, description="What to look for, e.g. 'many small reads on lustre'.")
    bottleneck: Bottleneck | None = Field(None, description="Bottleneck category: adds its vocabulary.")
    system_config: str | None = Field(None, description="System words to add, e.g. 'lustre mpich'.")
    k: int = Field(5, ge=1, le=50, description="How many papers.")


@_tool(
    "rag_search",
    RagSearchIn,
    """Search the local corpus (dftune's citation catalog and ingested PDFs):
       offline, free. Each paper comes with its citation fields, what is missing, and the matching passage.""",
)
def rag_search_tool(p: RagSearchIn) -> dict[str, Any]:
    """Local first: citations that need no network and were checked against their source."""
    from dftune.tools.literature import rag_search

    return rag_search(p.query, p.bottleneck, p.system_config, k=p.k).to_json()


class ArxivIn(_In):
    query: str = Field(min_length=1, description="Search words.")
    max_results: int = Field(5, ge=1, le=50, description="How many papers.")
    category: str | None = Field("cs.DC", description="arXiv category, or null for all.")


@_tool(
    "search_arxiv",
    ArxivIn,
    """Search arXiv (relevance order, optionally one category). Offline
       (DFTUNE_OFFLINE=1 or no network) it returns at once with skipped=true.""",
)
def search_arxiv_tool(p: ArxivIn) -> dict[str, Any]:
    """Remote step of the seed's citation search when the local corpus has nothing."""
    from dftune.tools.literature import search_arxiv

    return search_arxiv(p.query, p.max_results, p.category).to_json()


class CombinedIn(_In):
    query: str = Field(min_length=1, description="Search words.")
    max_results_each: int = Field(5, ge=1, le=25, description="Results per source.")


@_tool(
    "search_papers_combined",
    CombinedIn,
    """Search arXiv, Semantic Scholar, OpenAlex and Crossref, merged and
       de-duplicated (the most complete record wins). Offline it returns at once with skipped=true.""",
)
def search_papers_combined_tool(p: CombinedIn) -> dict[str, Any]:
    """Widest remote search, for bottlenecks arXiv alone does not cover."""
    from dftune.tools.literature import search_papers_combined

    return search_papers_combined(p.query, p.max_results_each).to_json()


class ArxivPaperIn(_In):
    paper_id: str = Field(
        min_length=1, description="arXiv id ('2007.06775', 'arXiv:2007.06775v3' or its URL)."
    )


@_tool(
    "get_arxiv_paper",
    ArxivPaperIn,
    """Fetch one arXiv paper's metadata and abstract by id. Offline it
       returns at once with skipped=true.""",
)
def get_arxiv_paper_tool(p: ArxivPaperIn) -> dict[str, Any]:
    """Completes a citation found by id (authors, venue, year, URL)."""
    from dftune.tools.literature import get_arxiv_paper

    return get_arxiv_paper(p.paper_id).to_json()


class ContextSearchIn(_In):
    run_id: str = RunId
    system: str = Field(min_length=1, description="This machine (for KB system findings).")
    workload: str = Field(min_length=1, description="This application (for KB workload findings).")
    iteration: int | None = Field(None, ge=1, description="opt<n> to write into (default: the latest).")
    stack: dict[str, Any] | None = Field(
        None,
        description="Detected layers: fs_type, mpi, romio, hdf5, ml_framework, other (default: from the run).",
    )
    online: bool | None = Field(
        None, description="Force remote search on/off (default: DFTUNE_OFFLINE, reachability)."
    )
    max_results_each: int = Field(3, ge=1, le=25, description="Remote results per source and query.")
    k_local: int = Field(5, ge=1, le=50, description="Local corpus results per query.")


@_tool("session_search_optimization_context", ContextSearchIn, """Search every software/system layer the run
       detected (POSIX, MPI, ROMIO, HDF5, filesystem, ML framework), local first (KB + corpus) then remote;
       writes context_opportunities.json and optimization_papers.json into the run's opt<n>.""",
       read_only=False)  # fmt: skip
def session_search_optimization_context_tool(p: ContextSearchIn) -> dict[str, Any]:
    """Stack-wide search once per iteration, so proposals are not limited to the top bottleneck."""
    from dftune.tools.literature import session_search_optimization_context

    return session_search_optimization_context(p.run_id, p.system, p.workload, iteration=p.iteration,
                                               stack=p.stack, online=p.online, max_results_each=p.max_results_each,
                                               k_local=p.k_local)  # fmt: skip


# --------------------------------------------------------------------------- server


def build_server() -> Any:
    """The low-level SDK server with every tool of :data:`TOOLS`."""
    import anyio.to_thread
    import mcp.types as types
    from mcp.server import Server
    from mcp.shared.exceptions import MCPError

    async def list_tools(_ctx: Any, _params: Any) -> types.ListToolsResult:
        return types.ListToolsResult(tools=[
            types.Tool(name=s.name, description=s.description, input_schema=s.params.model_json_schema(),
                       annotations=types.ToolAnnotations(read_only_hint=s.read_only))
            for s in TOOLS.values()
        ])  # fmt: skip

    async def call_tool(_ctx: Any, params: types.CallToolRequestParams) -> types.CallToolResult:
        if params.name not in TOOLS:
            raise MCPError(code=types.INVALID_PARAMS, message=f"unknown tool {params.name!r}")
        try:
            doc = await anyio.to_thread.run_sync(call, params.name, dict(params.arguments or {}))
        except ToolFailure as exc:
            log.info("%s failed: %s", params.name, exc)
            return _error_result(str(exc))
        except Exception as exc:  # a bug, not the caller's input: one line to the client, traceback to stderr
            log.exception("%s raised", params.name)
            return _error_result(f"{params.name}: internal error: {type(exc).__name__}: {_one_line(exc)}")
        text = json.dumps(doc, allow_nan=False, default=str)
        return types.CallToolResult(content=[types.TextContent(type="text", text=text)],
                                    structured_content=json.loads(text))  # fmt: skip

    def _error_result(message: str) -> types.CallToolResult:
        return types.CallToolResult(content=[types.TextContent(type="text", text=message)], is_error=True)

    from importlib.metadata import PackageNotFoundError, version

    try:
        ver = version("dftune")
    except PackageNotFoundError:  # pragma: no cover - running from a bare checkout
        ver = "0"
    return Server(SERVER_NAME, version=ver, on_list_tools=list_tools, on_call_tool=call_tool,
                  instructions="dftune: analyze and diagnose dftracer traces, search cited optimizations, "
                               "record guarded results in the knowledge base.")  # fmt: skip


def serve() -> None:
    """Serve over stdio until the client closes stdin."""
    import anyio
    from mcp.server.stdio import stdio_server

    logging.basicConfig(
        level=logging.WARNING, stream=sys.stderr, format="dftune-mcp: %(levelname)s %(message)s"
    )
    server = build_server()

    async def main() -> None:
        async with stdio_server() as (read, write):
            await server.run(read, write, server.create_initialization_options())

    anyio.run(main)
