"""The trace tools: analyze, diagnose, comparator, event_count, reader."""

from __future__ import annotations

from datetime import UTC, datetime
from typing import Any

from pydantic import Field, model_validator

from dftune.mcp_server.registry import (
    Iteration,
    MaxRows,
    Paths,
    SkipBad,
    Toolbox,
    View,
    _In,
    run_traces,
    summary_only,
    trim_views,
)

box = Toolbox()


class AnalyzeIn(_In):
    paths: list[str] = Paths
    views: list[View] = Field(
        default_factory=summary_only,
        description="Perspectives to add: summary (always), file, proc, time, layer.",
    )
    skip_bad: bool = SkipBad
    time_windows: int = Field(20, ge=1, le=10_000, description="Windows of the time view (at most).")
    max_rows: int = MaxRows
    split_runs: bool = Field(
        False,
        description="Traces of several runs (other hosts, far apart, other commands): one analysis per run.",
    )
    include_system_paths: bool = Field(
        False,
        description="Keep /proc, /sys and /dev files (left out of the file view and diagnosis by default).",
    )


@box.tool(
    "analyze",
    AnalyzeIn,
    """Read dftracer traces exactly (2.x and legacy 1.x) or Darshan logs (PyDarshan) and summarize their I/O:
       counts, bytes and time per family (read/write/metadata/sync), time shares, small-I/O and access-pattern
       shares, transfer-size histogram, overlap with compute,
       layers; the dftune.analysis/1 document (Darshan input
       adds a `darshan` section: header, partial modules,
       MPI-IO, Lustre, and which numbers are DXT-exact).""",
)
def analyze_tool(p: AnalyzeIn) -> dict[str, Any]:
    """The pipeline's first tool: the numbers every later step reasons from."""
    from dftune.tools.trace import analyze, analyze_runs

    if p.split_runs:
        runs = analyze_runs(
            p.paths,
            skip_bad=p.skip_bad,
            views=p.views,
            time_windows=p.time_windows,
            include_system_paths=p.include_system_paths,
        )
        return {
            "schema": "dftune.analysis.runs/1",
            "runs": [trim_views(a.to_json_dict(), p.max_rows) for a in runs],
        }
    result = analyze(
        p.paths,
        skip_bad=p.skip_bad,
        views=p.views,
        time_windows=p.time_windows,
        include_system_paths=p.include_system_paths,
    )
    return trim_views(result.to_json_dict(), p.max_rows)


class DiagnoseIn(_In):
    paths: list[str] = Paths
    data_dirs: list[str] = Field(
        default_factory=list, description="Dataset folders whose filesystem type gates L3 strategies."
    )
    skip_bad: bool = SkipBad
    split_runs: bool = Field(False, description="Traces of several runs: one diagnosis per run.")
    include_system_paths: bool = Field(
        False,
        description="Keep /proc, /sys and /dev files (left out of the file view and diagnosis by default).",
    )


@box.tool(
    "diagnose",
    DiagnoseIn,
    """Name the I/O bottlenecks of traces or Darshan logs
    (WisIO, Drishti, dftune, DLIO and Darshan-only rules as
       data), score them 1..5, pick the metric to optimize, decide whether tuning can pay off (I/O share and
       op-count vs bandwidth shape), and list candidate strategies per bottleneck; dftune.diagnosis/1.""",
)
def diagnose_tool(p: DiagnoseIn) -> dict[str, Any]:
    """Turns numbers into bottlenecks the optimizer can act on."""
    from dftune.tools.diagnose.engine import diagnose, diagnose_runs

    if p.split_runs:
        runs = diagnose_runs(
            p.paths, data_dirs=p.data_dirs, skip_bad=p.skip_bad, include_system_paths=p.include_system_paths
        )
        return {"schema": "dftune.diagnosis.runs/1", "runs": [d.to_json_dict() for d in runs]}
    return diagnose(
        p.paths, data_dirs=p.data_dirs, skip_bad=p.skip_bad, include_system_paths=p.include_system_paths
    ).to_json_dict()


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
    path, label = run_traces(src.run_id, src.iteration)
    return [str(path)], f"{src.run_id}/{label}"


@box.tool(
    "comparator",
    ComparatorIn,
    """Compare two trace sets (paths) or two runs' traces (run id + baseline or
       opt<n>) side by side: one row per metric (counts, bytes and time per family, shares, job time) with
       b - a and the relative change (shares: the difference
       in points), and a note when b moved fewer bytes.""",
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


@box.tool(
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
        rows.append(
            {
                "file": str(f),
                **{k: getattr(a, k) for k in keys},
                "empty": bool(a.empty_files),
                "truncated": bool(a.truncated_files),
                "skipped": [s.model_dump() for s in a.skipped],
            }
        )
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


@box.tool(
    "reader",
    ReaderIn,
    """Trace metadata: files read (and empty or truncated ones), line formats, hosts,
       process count, dftracer versions, the tracer configuration
       recorded in the trace, and the time range.""",
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
