"""Diagnose traces: analysis -> rules -> scored bottlenecks, metric, gate, FS, checklist.

Everything judged here comes from data in resources/ (rules, metric table, gate, catalogs);
this module wires the pieces and builds the ``dftune.diagnosis/1`` document.
"""

from __future__ import annotations

from collections.abc import Iterable
from pathlib import Path
from typing import Any

from dftune.core import resource
from dftune.core.domain.diagnosis import (
    Bottleneck,
    CandidateStrategy,
    ChecklistEntry,
    Diagnosis,
    Finding,
    FsSummary,
    Gate,
    MetricChoice,
    PossiblyIo,
)
from dftune.core.errors import DftuneError
from dftune.core.facts import program_facts
from dftune.core.facts.paths import RunPaths
from dftune.core.facts.stacks import Stack, detect
from dftune.core.vocabulary import CATEGORIES, CHECKLIST
from dftune.tools.catalog import Strategy, default_catalog, strategies_for
from dftune.tools.diagnose.metrics import (
    file_metrics,
    layer_metrics,
    proc_metrics,
    summary_metrics,
    time_metrics,
)
from dftune.tools.diagnose.rules import RuleSet, evaluate, load_rulesets
from dftune.tools.diagnose.scope import (
    data_rows,
    data_shape,
    data_summary,
    describe,
    excluded_classes,
    judged_io_time,
    set_apart,
    unattributed,
)
from dftune.tools.diagnose.stack import trace_evidence
from dftune.tools.diagnose.unseen import app_waits, mpi_time
from dftune.tools.trace import Analysis, analyze, analyze_runs

SCHEMA = "dftune.diagnosis/1"


class DataDirError(DftuneError, ValueError):
    """A ``--data-dir`` that is not an existing folder."""


def _data(name: str) -> dict[str, Any]:
    return resource.toml(f"diagnosis/{name}")


def choose_metric(scores: dict[str, int], table: dict[str, Any] | None = None) -> MetricChoice:
    """Metric-selection table (dftracer-io-optimization skill): dominant categories (score >= 4) pick it."""
    t = table or _data("metric_choice.toml")
    dominant = sorted((c for c, s in scores.items() if s >= t["dominant_score"]), key=lambda c: -scores[c])
    by_category = {c: choice for choice in t["choice"] for c in choice["categories"]}
    picked = {by_category[c]["metric"]: by_category[c] for c in dominant if c in by_category}
    if len(picked) > 1:
        return MetricChoice(metric=t["multiple"], rationale=t["multiple_rationale"], dominant=dominant)
    if len(picked) == 1:
        metric, choice = next(iter(picked.items()))
        return MetricChoice(
            metric=metric,
            rationale=f"{', '.join(dominant)} score >= {t['dominant_score']}: {choice['rationale']}",
            dominant=dominant,
        )
    return MetricChoice(metric=t["default"], rationale=t["fallback_rationale"], dominant=[])


def gate(
    analysis: Analysis,
    table: dict[str, Any] | None = None,
    possibly: list[PossiblyIo] | None = None,
    shape: str | None = None,
) -> Gate:
    """Is I/O (traced, or possibly I/O the trace cannot show) a meaningful share of the job?"""
    t = table or _data("gate.toml")
    floor = t["min_io_fraction"]
    frac = analysis.io_fraction_of_job
    # the start-up reads of the runtime's own files and system files are not the program's I/O
    apart_s = sum(analysis.path_classes[c].io_time_s for c in excluded_classes(analysis))
    life = analysis.app_process_time_s
    if apart_s and life:
        frac = max(0.0, frac * life - apart_s) / life
    shape = shape or analysis.shape.kind
    layers = list(t["layers"].get(shape, ["L1", "L2", "L3"]))
    possibly = sorted(possibly or [], key=lambda p: -p.fraction)
    unseen = next((p for p in possibly if p.fraction >= floor), None)
    # Darshan: the job waits for its slowest rank, whose I/O share the per-process mean can hide
    slowest = analysis.darshan.perf.slowest_io_fraction if analysis.darshan is not None else None
    worth = frac >= floor or (slowest is not None and slowest >= floor) or unseen is not None
    helpers = len(analysis.helper_processes)
    whose = "process time"  # a Darshan log has no process accounting
    if analysis.app_processes:
        n = analysis.app_processes
        whose = f"the application's process time ({n} process{'es' if n > 1 else ''}" + (
            f"; {helpers} helper process{'es' if helpers > 1 else ''} left out)" if helpers else ")"
        )
    if apart_s and life:
        whose += f", start-up and system file I/O ({apart_s:.3g} s) set apart"
    if frac < floor and slowest is not None and slowest >= floor:
        reason = (
            f"I/O is {frac:.1%} of process time on average but {slowest:.1%} of the job time for the slowest "
            f"rank (Darshan agg_time_by_slowest), which the job waits for; {t['reasons'].get(shape, '')}"
        )
    elif frac >= floor:
        reason = f"I/O is {frac:.1%} of {whose} (>= {floor:.0%}); {t['reasons'].get(shape, '')}"
    elif unseen is not None:
        reason = (
            f"traced I/O is only {frac:.2%} of {whose}, but time the trace cannot show as I/O may be I/O "
            f"({unseen.source}): {unseen.evidence} (>= {floor:.0%}); {t['reasons'].get(shape, '')}"
        )
    else:
        checked = "; ".join(f"{p.source}: {p.evidence}" for p in possibly) or (
            "no MPI-IO, no wait events of the program, no I/O-time metric"
        )
        reason = (
            f"I/O is only {frac:.2%} of {whose} (< {floor:.0%}): "
            "even removing it all would save at most that, "
            f"and no time the trace cannot see reaches {floor:.0%} ({checked}); {t['reasons'].get(shape, '')}"
        )
    return Gate(
        worth_tuning=worth,
        io_fraction=round(frac, 6),
        min_io_fraction=floor,
        shape=shape,
        allowed_layers=layers,
        reason=reason,
        possibly_io=possibly,
    )


def possibly_io(analysis: Analysis, stack: Stack, table: dict[str, Any] | None = None) -> list[PossiblyIo]:
    """What the trace cannot show as I/O but may be (resources/diagnosis/gate.toml ``[possibly_io]``)."""
    t = (table or _data("gate.toml")).get("possibly_io", {})
    out: list[PossiblyIo] = []
    if t.get("mpi", True):
        named = any(
            "mpi" in f"{e.cat} {e.name}".lower() and "file" in e.name.lower() for e in analysis.app_events
        )
        mpiio = stack.because("mpi-io") or ("the program's events name MPI-IO files" if named else None)
        got = mpi_time(analysis, uses_mpi=stack.has("mpi"), mpiio=mpiio)
        if got is not None:
            out.append(got)
    waits = app_waits(analysis, list(program_facts().waits.events))
    if waits is not None:
        out.append(waits)
    return out


def metric_wait_patterns(table: dict[str, Any] | None = None) -> list[str]:
    return list((table or _data("gate.toml")).get("possibly_io", {}).get("metric_wait_patterns", []))


def misfit(s: Strategy, analysis: Analysis, stack: Stack) -> str | None:
    """Why a strategy does not fit this job (it acts on I/O the job does not do, or presumes software
    the stack does not show: MPI, an I/O library or interface), or None."""
    does = {"read": analysis.read.count > 0, "write": analysis.write.count > 0}
    if s.io and not any(does[f] for f in s.io):
        return f"acts on {' or '.join(s.io)}s, and the trace has none"
    return stack.gap(s.requires)


def _candidates(
    category: str,
    fs_type: str,
    layers: list[str],
    analysis: Analysis | None = None,
    stack: Stack | None = None,
) -> list[CandidateStrategy]:
    """Strategies for one bottleneck that may run on this
    filesystem and layer and fit this job (when known)."""
    cat = default_catalog()
    out = [
        CandidateStrategy(
            id=s.id,
            layer=s.layer,
            checklist=s.checklist,
            description=s.description,
            cited=cat.is_supported(s.id),
        )
        for s in strategies_for(category, fs_type, cat)
        if s.layer in layers and (analysis is None or stack is None or misfit(s, analysis, stack) is None)
    ]
    out.sort(key=lambda c: (not c.cited, c.layer, c.id))
    return out


def _checklist(bottlenecks: list[Bottleneck]) -> list[ChecklistEntry]:
    """Before any experiment every category is applicable-not-measured, with why.

    The dftracer-io-optimization skill forbids "not applicable" before the literature search for that category
    has run; the optimizer upgrades these verdicts as it searches and measures.
    """
    by_number: dict[int, list[tuple[str, str]]] = {n: [] for n in CHECKLIST}
    for b in bottlenecks:
        for c in b.candidates:
            by_number.setdefault(c.checklist, []).append((c.id, b.category))
    entries = []
    for number, name in CHECKLIST.items():
        hits = by_number.get(number, [])
        ids = sorted({i for i, _ in hits})
        if hits:
            cats = sorted({c for _, c in hits})
            reason = (
                f"targets diagnosed bottleneck(s) {', '.join(cats)}; "
                f"candidates: {', '.join(ids)}; not measured yet"
            )
        else:
            reason = (
                "no diagnosed bottleneck maps to it; it stays open until the literature search has run for it"
            )
        entries.append(
            ChecklistEntry(
                number=number, category=name, verdict="applicable_not_measured", reason=reason, strategies=ids
            )
        )
    return entries


def row_metrics(
    analysis: Analysis, summary: dict[str, Any], everything: dict[str, Any]
) -> dict[str, list[dict[str, Any]]]:
    """The rows of each view with their metrics, for the row rules.

    File rows are the program's data files (system paths and set-apart start-up reads are not
    judged, tools/diagnose/scope.py); process and time rows cannot be split by path, so they are
    shares of all I/O (``everything``). A row's ``io_time_share`` is over the larger of that I/O
    time and the sum of the view's rows: a file row also counts fsync time that the job's
    read+write+metadata total leaves out, so over that total alone a few files could "hold" more
    than 100% of it. Over the larger sum, the shares of any set of rows add up to at most 100%.
    """

    def over(raw: list[dict[str, Any]], total: float) -> float:
        return max(float(total), sum(float(r.get("io_time_s") or 0.0) for r in raw))

    rows: dict[str, list[dict[str, Any]]] = {}
    if "file" in analysis.views:
        raw = data_rows(analysis.views["file"].get("rows", []), analysis)
        file_total = over(raw, judged_io_time(analysis) or summary["io_time_s"])
        ranks = summary["processes"]  # a file shared within one rank group is not shared between ranks
        rows["file"] = [
            {**m, "processes": min(m["processes"], ranks)} for m in (file_metrics(r, file_total) for r in raw)
        ]
    for view, build in (("proc", proc_metrics), ("time", time_metrics)):
        if view in analysis.views:
            raw = analysis.views[view].get("rows", [])
            rows[view] = [build(r, over(raw, everything["io_time_s"])) for r in raw]
    rows["layer"] = [layer_metrics(layer.model_dump()) for layer in analysis.layers]
    return rows


def diagnose_analysis(
    analysis: Analysis,
    *,
    data_dirs: Iterable[str | Path] = (),
    rulesets: list[RuleSet] | None = None,
    stack: Stack | None = None,
    reported_waits: list[PossiblyIo] | None = None,
) -> Diagnosis:
    """Diagnose an existing analysis (with the file view, when available).

    ``stack``: the run's software (its program, command and trace; the trace's alone when not
    given), which decides the gate's MPI time and which strategies fit; ``reported_waits``: waits
    the program reports outside the trace (a stdout metric that is its I/O time)."""
    stack = stack or detect(trace_evidence(analysis))
    # the program's data I/O: system paths and (for a program with data I/O of its own) the
    # runtime's start-up reads are set apart (tools/diagnose/scope.py)
    everything = summary_metrics(analysis)
    summary = data_summary(everything, analysis)
    rows = row_metrics(analysis, summary, everything)
    findings: list[Finding] = evaluate(rulesets or load_rulesets(), summary, rows)
    shape = data_shape(summary, analysis)
    g = gate(
        analysis,
        possibly=possibly_io(analysis, stack) + list(reported_waits or []),
        shape=shape.kind,
    )
    fs_list = _filesystems(data_dirs)
    fs_type = fs_list[0].fs_type if fs_list else "unknown"
    bottlenecks = []
    for f in findings:
        b = Bottleneck(**f.model_dump())
        b.candidates = _candidates(f.category, fs_type, g.allowed_layers, analysis, stack)
        bottlenecks.append(b)
    apart = set_apart(analysis)
    scores = {c: 0 for c in CATEGORIES}
    for b in bottlenecks:
        scores[b.category] = max(scores[b.category], b.score)
    warnings = [fs.warning for fs in fs_list if fs.warning]
    if not fs_list:
        warnings.append(
            "no --data-dir given: the filesystem of the dataset is unknown, so FS-specific (L3) "
            "strategies are not offered"
        )
    return Diagnosis(
        schema_=SCHEMA,
        trace_files=analysis.files,
        events=analysis.events,
        bottlenecks=bottlenecks,
        category_scores=scores,
        metric=choose_metric(scores),
        fs_type=fs_type,
        data_dirs=fs_list,
        io_fraction=g.io_fraction,
        shape=shape.kind,
        shape_reason=shape.reason,
        worth_tuning=g.worth_tuning,
        gate=g,
        checklist=_checklist(bottlenecks),
        app_processes=analysis.app_processes,
        helper_processes=list(analysis.helper_processes),
        run=analysis.run,
        warnings=warnings + list(analysis.warnings),
        set_apart=apart,
        notes=describe(apart) + [n for n in [unattributed(everything, analysis)] if n],
    )


def diagnose(
    paths: Iterable[str | Path],
    *,
    data_dirs: Iterable[str | Path] = (),
    skip_bad: bool = False,
    **kwargs: Any,
) -> Diagnosis:
    """Analyze traces (with the views the rules read) and diagnose the application in them.

    Helper processes (shell wrappers, shims, launchers) are left out, so a workload started
    through a wrapper diagnoses as when started directly; several runs raise
    :class:`~dftune.tools.trace.MultipleRunsError` (see :func:`diagnose_runs`).
    """
    data_dirs = check_data_dirs(data_dirs)
    rulesets = load_rulesets()
    kwargs.setdefault("run_paths", RunPaths.of(*map(str, data_dirs)))  # the data folders are data
    analysis = analyze(list(paths), skip_bad=skip_bad, views=_views(rulesets), exclude_helpers=True, **kwargs)
    return diagnose_analysis(analysis, data_dirs=data_dirs, rulesets=rulesets)


def diagnose_runs(
    paths: Iterable[str | Path],
    *,
    data_dirs: Iterable[str | Path] = (),
    skip_bad: bool = False,
    **kwargs: Any,
) -> list[Diagnosis]:
    """One diagnosis per run the traces hold (one pass over the files)."""
    data_dirs = check_data_dirs(data_dirs)
    rulesets = load_rulesets()
    kwargs.setdefault("run_paths", RunPaths.of(*map(str, data_dirs)))
    analyses = analyze_runs(
        list(paths), skip_bad=skip_bad, views=_views(rulesets), exclude_helpers=True, **kwargs
    )
    return [diagnose_analysis(a, data_dirs=data_dirs, rulesets=rulesets) for a in analyses]


def _views(rulesets: list[RuleSet]) -> list[str]:
    """The views the rules read; all come from the one pass over the traces."""
    views = ["file", "proc"]
    if any(rule.view == "time" for rs in rulesets for rule in rs.rules):
        views.append("time")
    return views


def check_data_dirs(data_dirs: Iterable[str | Path]) -> list[str | Path]:
    """The folders asked about, each an existing directory: a typo is not a filesystem
    (``dftune doctor`` refuses it the same way). A run's own data folder is not checked here:
    it may legitimately be missing before the workload's setup."""
    dirs = list(data_dirs)
    for d in dirs:
        if not Path(d).is_dir():
            what = "not a directory" if Path(d).exists() else "no such file or directory"
            raise DataDirError(f"--data-dir {d}: {what}")
    return dirs


def _filesystems(data_dirs: Iterable[str | Path]) -> list[FsSummary]:
    dirs = list(data_dirs)
    if not dirs:
        return []
    from dftune.tools.diagnose import fs

    out = []
    for d in dirs:
        info = fs.detect(d)
        out.append(
            FsSummary(path=str(d), fs_type=info.fs_type, mount_point=info.mount_point, warning=info.warning)
        )
    return out
