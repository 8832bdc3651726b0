"""What the Markdown and HTML reports share: the rows of each section, built from the run's report.

Both renderers call these so the two formats never disagree about what was measured and what
was only estimated from the literature (dftracer-io-optimization skill: "never conflate the two").
"""

from __future__ import annotations

import html
import os
from dataclasses import dataclass
from typing import Any

from dftune.core.citation import CitedClaim
from dftune.core.domain.experiments import Experiment, GuardRecord
from dftune.core.domain.levers import Levers
from dftune.core.domain.measurements import Measurement
from dftune.core.domain.proposals import Proposal
from dftune.core.domain.run import MetricInfo, ProposalRow, RunReport
from dftune.core.domain.stats import pct_change
from dftune.core.facts.paths import NO_RUN, RunPaths, classify
from dftune.core.safetext import md_prose
from dftune.tools.report.fixes import Severity, severity, snippets
from dftune.tools.report.plots import load_analysis, traced_arms
from dftune.tools.runner.metric_names import metric_label
from dftune.tools.runner.spec import WorkloadSpec
from dftune.tools.runner.stats import compare as compare_arms
from dftune.tools.trace.render import human_bytes

MEASURED = "measured"
ESTIMATED = "estimate"
#: a number the knowledge base measured on an earlier run of this workload (not this run)
KB_MEASURED = "measured (KB)"

CHECKLIST_LABELS = {
    "applied_measured": "Applied & measured",
    "applicable_not_measured": "Applicable, not measured",
    "not_applicable": "Not applicable",
}

#: what an estimate's number is, by its source (the skill: never conflate measured and estimated)
_ESTIMATE_SOURCE = {
    "trace model": "trace model (agents/optimizer/estimates.py, from the incumbent's trace)",
    "kb": "measured on an earlier run of this workload (knowledge base)",
    "model": "the language model's estimate",
}

#: a model's estimate (its own guess, not the literature's)
MODEL_ESTIMATED = "model estimate"


def checklist_label(verdict: str) -> str:
    return CHECKLIST_LABELS.get(verdict, verdict)


@dataclass(frozen=True)
class FindingRow:
    """One row of the findings: what was found, by what kind of evidence, from which source."""

    kind: str
    finding: str
    detail: str
    source: str
    score: int | None = None
    severity: Severity | None = None


def findings(r: RunReport) -> list[FindingRow]:
    """Measured findings (trace rules, experiments) first, then estimates (and the KB's earlier
    measurements), each with its source."""
    base = r.baseline
    reps = f"{base.ok}/{base.replicates} replicates" if base else "no baseline"
    out = [
        FindingRow(
            kind=MEASURED,
            finding=b.category or b.name,
            score=b.score,
            severity=severity(b.score),
            detail=b.evidence,
            source=f"baseline trace ({reps}), rule {b.name} ({b.rule_source})",
        )
        for b in (r.diagnosis.bottlenecks if r.diagnosis else [])
    ]
    cited = {p.id: p.citation.id for p in r.proposals if p.citation}
    for e in r.experiments:
        cite = cited.get(e.proposal_id)
        out.append(
            FindingRow(
                kind=MEASURED,
                finding=f"{e.strategy} ({e.proposal_id}): {e.verdict or 'pending'}",
                detail=_experiment_detail(e, r.metric.name),
                source=f"experiment opt{e.iteration} ({len(e.reference.values)} vs "
                f"{len(e.candidate.values) if e.candidate else 0} replicates)"
                + (f", cited: {cite}" if cite else ""),
            )
        )
    for p in r.proposals:
        c = p.citation
        if c is None or p.app_impact_source not in _ESTIMATE_SOURCE or p.status not in _OPEN:
            continue
        model = p.impact_estimated_by != "rules"  # a model's guess is its own, not the literature's
        out.append(
            FindingRow(
                kind=MODEL_ESTIMATED if model else KB_MEASURED if p.app_impact_source == "kb" else ESTIMATED,
                finding=f"{p.strategy} ({p.id})",
                detail=f"expected app impact {p.app_impact_pct:.1f}%"
                + (f": {p.impact_reason}" if p.impact_reason else ""),
                source=(
                    f"the model {p.impact_estimated_by}'s estimate (not measured; capped by the I/O bound); "
                    f"cited: {c.reference()}"
                    if model
                    else f"{_ESTIMATE_SOURCE[p.app_impact_source]}; the fix is cited: "
                    + " ".join(filter(None, (c.reference(), c.url)))
                ),
            )
        )
    return out


#: proposal statuses whose estimate the findings list (not measured, not refused)
_OPEN = ("proposed", "manual", "declined")


def overruled(e: Experiment) -> str | None:
    """What the statistical comparison alone said, when a guard gave the experiment another verdict
    (with its reason); None when the verdict is the statistics' own."""
    said = e.comparison.verdict if e.comparison else None
    return said if said and e.verdict and said != e.verdict and e.verdict_reason else None


def _experiment_detail(e: Experiment, metric: str) -> str:
    """The change, then the verdict's own reason; when a guard overruled the statistics, both, said so."""
    cmp = e.comparison
    head = f"{gain_text(cmp.change_pct)} on {metric}; " if cmp else ""
    why = e.verdict_reason or (cmp.reason if cmp else "")
    if said := overruled(e):
        why += f" (the statistical comparison alone said {said}: {cmp.reason if cmp else ''})"
    return head + why


def coverage_note(r: RunReport) -> tuple[bool, str]:
    """(partial?, sentence) from the run's coverage; partial results are stated, never implied."""
    cov = r.coverage
    if cov is None:
        return False, "Coverage: no baseline was measured."
    included = cov.units_included
    if cov.partial:
        return True, (
            f"Partial coverage: this report covers {len(included)} of {cov.units_total} units "
            f"({', '.join(included) or 'none'}); not covered: "
            f"{', '.join([*cov.units_failed, *cov.units_pending])}."
        )
    return False, f"Coverage: all {cov.units_total} units included ({', '.join(included)})."


def fix_rows(r: RunReport) -> list[tuple[dict[str, Any], str]]:
    """A fix snippet per strategy of the proposal table (the measured ones first, then table order),
    each with the change(s) dftune measured for it, so a reader can apply it elsewhere."""
    tried = {x.proposal_id for x in r.experiments}
    measured: dict[str, list[str]] = {}
    for p in r.proposals:
        if p.status == "measured" or p.id in tried:
            measured.setdefault(p.strategy, []).append(p.id)
    order = [*measured, *(row.strategy for row in proposal_rows(r))]  # what was measured first
    return [(snip, ", ".join(dict.fromkeys(measured.get(snip["strategy"], [])))) for snip in snippets(order)]


def proposal_rows(r: RunReport) -> list[ProposalRow]:
    """Proposal table (dftracer-io-optimization skill) in the one order every view shows it, the
    table's own numbering (agents/optimizer/table.py: measured rows first, then by weighted score)."""
    return sorted(r.proposal_table, key=lambda row: row.number)


def guard_when(g: GuardRecord) -> str:
    """When a guard decision was taken: before anything ran, or after experiment opt<n>."""
    return "screen (before applying)" if g.iteration is None else f"after opt{g.iteration}"


def citations(r: RunReport) -> list[CitedClaim]:
    """Each citation once (proposals may share one)."""
    seen: dict[str, CitedClaim] = {}
    for c in [*r.citations, *(p.citation for p in r.proposals if p.citation)]:
        seen.setdefault(c.id, c)
    return list(seen.values())


# --------------------------------------------------------------------------- the morning view


def metric_info(spec: WorkloadSpec) -> MetricInfo:
    """The metric a run optimizes, named as the program (or
    benchmark) calls it, with its unit and direction."""
    name, unit = metric_label(spec.metric)
    return MetricInfo(
        name=name, unit=unit, lower_is_better=spec.metric.lower_is_better, kind=spec.metric.kind
    )


def with_unit(value: float | None, unit: str) -> str:
    if value is None:
        return "-"
    return f"{value:.4g} {unit}".rstrip()


def gain_ci(
    ratio_ci: list[float] | tuple[float, float] | None, lower_is_better: bool
) -> tuple[float, float] | None:
    """The 95% CI of a ratio (after / before) as a CI of the gain in percent (positive = better)."""
    if not ratio_ci:
        return None
    lo, hi = float(ratio_ci[0]), float(ratio_ci[1])
    if lower_is_better:
        return (100.0 * (1.0 - hi), 100.0 * (1.0 - lo))
    return (100.0 * (lo - 1.0), 100.0 * (hi - 1.0))


def gain_text(pct: float | None, ci: tuple[float, float] | None = None) -> str:
    """``+40.4% better (95% CI +35.1% to +44.9%)``: a signed change always says which way is better."""
    if pct is None:
        return "-"
    word = "better" if pct > 0 else "worse" if pct < 0 else "unchanged"
    out = f"{pct:+.1f}% {word}"
    if ci is not None:
        out += f" (95% CI {ci[0]:+.1f}% to {ci[1]:+.1f}%)"
    return out


@dataclass(frozen=True)
class Overall:
    """Baseline -> best kept arm: the medians, the change (positive = better) and its 95% CI."""

    before: float | None
    after: float | None
    pct: float | None
    ci: tuple[float, float] | None = None


def overall(r: RunReport) -> Overall | None:
    """Baseline -> best kept arm, compared from their replicates: change, the CI of the change."""
    base, inc, lib = r.baseline, r.incumbent, r.metric.lower_is_better
    if base is None or inc is None or not base.values or not inc.values or base.workdir == inc.workdir:
        return None
    pct = pct_change(base.median, inc.median, lower_is_better=lib)
    try:
        ci = gain_ci(compare_arms(base.values, inc.values, lower_is_better=lib).ci95, lib)
    except ValueError:
        ci = None
    return Overall(before=base.median, after=inc.median, pct=pct, ci=ci)


def kept_changes(r: RunReport) -> list[Experiment]:
    """The kept experiments (not those on trial), largest measured gain first."""
    kept = [e for e in r.experiments if e.kept and e.verdict != "pending"]
    return sorted(kept, key=lambda e: -(e.change_pct or 0.0))


def kept_ci(r: RunReport, e: Experiment) -> tuple[float, float] | None:
    """The 95% CI of a kept experiment's gain in percent."""
    return gain_ci(e.comparison.ci95, r.metric.lower_is_better) if e.comparison else None


def question_of(e: Experiment) -> str:
    """What a person must answer about a change kept on trial."""
    return e.question or e.verdict_reason


def pending_lines(r: RunReport) -> list[str]:
    """One sentence per change pending confirmation, with how to answer (the morning's first question)."""
    pct = lambda x: "?" if x is None else f"{x:+.1f}%"  # noqa: E731
    run = r.run_id
    return [
        f"{e.proposal_id} ({e.strategy}, opt{e.iteration}): {pct(e.change_pct)} on {r.metric.name}, kept "
        f"on trial until you answer. {question_of(e).rstrip('. ')}. Answer: dftune approve {run} "
        f"(legitimate) or dftune approve {run} --reject --reason TEXT"
        for e in r.pending
    ]


def settings_changed(r: RunReport) -> dict[str, Any]:
    """What the best kept arm runs with that the baseline does not (knobs and environment)."""
    base, inc = r.baseline, r.incumbent
    before = {**base.settings, **base.env} if base else {}
    after = {**inc.settings, **inc.env} if inc else {}
    out = {k: v for k, v in after.items() if str(before.get(k)) != str(v)}
    if inc and inc.source_dir and inc.source_dir != (base.source_dir if base else None):
        out["source"] = "patched copy"
    return out


def kept_system_changes(r: RunReport, m: Measurement | None) -> list[str]:
    """The kept changes an arm's settings do not show: commands run on the system (L3) and a
    staging the arm ``m`` does not show itself, by proposal id, in the order they were kept."""
    kinds = {p.id: p.change.kind for p in r.proposals if p.change is not None}
    shown = ("command",) if m is not None and m.stage is not None else ("command", "stage")
    kept = [e for e in r.experiments if e.kept and e.verdict != "pending"]
    return [e.proposal_id for e in kept if kinds.get(e.proposal_id) in shown]


def arm_configuration(r: RunReport, m: Measurement | None, *, best: bool = False) -> str:
    """Everything an arm runs with, as every report shows it: knobs and environment, a patched
    source, a staged data set and, for the best kept arm, the system changes kept."""
    if m is None:
        return "-"
    items = [f"{k}={v}" for k, v in {**m.settings, **m.env}.items()]
    if m.source_dir:
        items.append("source: patched copy")
    if m.stage is not None:
        items.append(f"data staged in {m.stage.tier}")
    if best:
        items += kept_system_changes(r, m)
    return ", ".join(items) or "-"


def kept_configuration(r: RunReport) -> str:
    """What the best kept arm runs with that the baseline does not, every kept change included."""
    changed = [f"{k}={v}" for k, v in settings_changed(r).items()]
    inc = r.incumbent
    if inc is not None and inc.stage is not None:
        changed.append(f"data staged in {inc.stage.tier}")
    changed += kept_system_changes(r, inc)
    return ", ".join(changed) or "the kept changes"


def next_steps(r: RunReport, limit: int = 3) -> list[Proposal]:
    """What is left to try: open or recommended proposals by weighted score, each with its bound."""
    open_ = [p for p in r.proposals if p.status in ("proposed", "manual") and p.citation]
    return sorted(open_, key=lambda p: (-p.weighted_score, p.id))[:limit]


def io_bound_pct(r: RunReport) -> float | None:
    """At most this much more can any I/O fix save: the best kept arm's unoverlapped I/O share."""
    for m in (r.incumbent, r.baseline):
        if m is not None and m.unoverlapped_io_fraction is not None:
            return 100.0 * m.unoverlapped_io_fraction
    return None


def unseen_io(r: RunReport) -> str:
    """Why a run whose traced I/O is below the gate's floor was tuned: the time the trace cannot
    show as I/O that reached it (inside an I/O library, MPI collectives, the program's waits)."""
    g = r.diagnosis.gate if r.diagnosis else None
    if g is None or not g.worth_tuning or g.io_fraction >= g.min_io_fraction:
        return ""
    p = next((p for p in g.possibly_io if p.fraction >= g.min_io_fraction), None)
    if p is None:
        return ""
    return (
        f"the trace shows {g.io_fraction:.1%} of the process time in I/O calls, below the gate's "
        f"{g.min_io_fraction:.0%}; tuned because of time it cannot show ({p.source}): {p.evidence}"
    )


def headline(r: RunReport) -> list[tuple[str, str]]:
    """The report's first screen: what is slow, what fixed it, by how much, what next, what is covered."""
    unit, name = r.metric.unit, r.metric.name
    rows: list[tuple[str, str]] = [("Pending", line) for line in pending_lines(r)]
    if r.replay_of is not None:  # before the numbers: they continue another run's measurements
        rows.insert(0, ("Replay of", r.replay_of.line()))
    base = r.baseline
    a = load_analysis(base.analysis_path if base else None)
    if a is not None:
        g = r.diagnosis.gate if r.diagnosis else None
        judged = (  # the share the gate judged: start-up and system reads set apart
            f" ({100 * g.io_fraction:.1f}% with start-up and system file reads set apart, "
            "as the gate judged it)"
            if g is not None and abs(g.io_fraction - a.io_fraction_of_job) >= 0.01
            else ""
        )
        rows.append(
            (
                "I/O",
                f"{100 * a.io_fraction_of_job:.0f}% of the processes' run time is spent in I/O calls"
                f"{judged}, "
                f"{100 * a.unoverlapped_io_fraction:.0f}% of the job time not hidden behind compute "
                f"(baseline trace: {a.job_time_s:.3g} s, {a.processes} process(es))",
            )
        )
    else:
        rows.append(("I/O", "not traced: the share of I/O in the run time is unknown"))
    unseen = unseen_io(r)
    if unseen:
        rows.append(("Unseen I/O", unseen))
    if r.diagnosis and r.diagnosis.bottlenecks:
        b = r.diagnosis.bottlenecks[0]
        rows.append(
            (
                "Bottleneck",
                f"{b.category} (score {b.score}/5, rule {b.id}): {b.evidence}".rstrip(": "),
            )
        )
    elif r.diagnosis:
        rows.append(("Bottleneck", "no diagnosis rule fired on the baseline trace"))
    kept = kept_changes(r)
    total = overall(r)
    if kept and total is not None:
        best = kept[0]
        ref = best.reference.median if best.reference is not None else None
        cand = best.candidate.median if best.candidate is not None else None
        beside = (
            f", measured beside the configuration kept before it ({with_unit(ref, unit)} -> "
            f"{with_unit(cand, unit)}, opt{best.iteration})"
            if ref is not None and cand is not None
            else ""
        )
        rows.append(
            (
                "Best change",
                f"{best.proposal_id} ({best.strategy}): "
                f"{gain_text(best.change_pct, kept_ci(r, best))} on {name}{beside}",
            )
        )
        rows.append(
            (
                "Overall",
                f"{name} {with_unit(total.before, unit)} at the baseline -> {with_unit(total.after, unit)} "
                f"with every kept change ({kept_configuration(r)}): {gain_text(total.pct, total.ci)}",
            )
        )
    elif base is not None and base.median is not None and r.pending:
        inc = r.incumbent.median if r.incumbent else None
        rows.append(
            (
                "Best change",
                f"none confirmed yet: {len(r.pending)} change(s) kept on trial (see "
                f"Pending); {name} {with_unit(base.median, unit)} -> {with_unit(inc, unit)} "
                "with them",
            )
        )
    elif base is not None and base.median is not None:
        rows.append(
            (
                "Best change",
                f"none kept: {name} stays at the baseline median {with_unit(base.median, unit)}"
                f" ({sum(x.candidate is not None for x in r.experiments)} experiment(s) measured)",
            )
        )
    bound = io_bound_pct(r)
    bound_text = (
        f"; bounded by the I/O not hidden behind compute: {bound:.0f}% of the job time"
        if bound is not None
        else ""
    )
    nxt = next_steps(r, 1)
    if nxt:
        p = nxt[0]
        how = "try it next" if p.status == "proposed" else "a change to make by hand"
        rows.append(
            (
                "Next",
                f"{p.strategy} ({p.id}, {how}): expected {p.app_impact_pct:.0f}% on "
                f"{name} ({p.app_impact_source}){bound_text}",
            )
        )
    elif base is not None:
        rows.append(("Next", f"nothing left that fits this workload{bound_text}"))
    rows.append(("Coverage", coverage_note(r)[1].removeprefix("Coverage: ")))
    if r.levers is not None:
        rows.append(("Levers", levers_line(r.levers)))
    return rows


def levers_line(levers: Levers) -> str:
    """The program's own levers the run found, each with where it came from (or what to add)."""
    if not levers.found:
        return levers.note
    found = "; ".join(f"{lv.knob} ({lv.flag}, from {lv.origin})" for lv in levers.found)
    more = f"; no option passes {', '.join(levers.listed)}" if levers.listed else ""
    return f"found in the program: {found}{more}"


#: The hotspot tables of each traced arm, in the reports' order, and their columns.
HOTSPOT_TABLES = (
    ("file_by_time", "Files by I/O time"),
    ("file_by_bytes", "Files by bytes moved"),
    ("proc_by_time", "Processes by I/O time"),
    ("proc_by_bytes", "Processes by bytes moved"),
)
HOTSPOT_COLUMNS = ("name", "I/O time (s)", "read", "written", "calls")


def hotspot_tables(r: RunReport) -> list[tuple[str, str, str, list[list[str]]]]:
    """(arm, title, the folder the file names are relative to, rows as text) of every non-empty
    hotspot table of the baseline's and the best kept arm's traces."""
    out = []
    measured = {"baseline": r.baseline, "best kept": r.incumbent}
    for arm, a in traced_arms(r):
        m = measured.get(arm)
        hot = hotspots(a, paths=RunPaths.of(m.data_dir, m.staged_dir, env=m.env) if m else NO_RUN)
        for key, title in HOTSPOT_TABLES:
            rows = [
                [
                    h["name"],
                    f"{h['io_time_s']:.4g}",
                    human_bytes(h["read_bytes"]),
                    human_bytes(h["write_bytes"]),
                    f"{h['ops']:,}",
                ]
                for h in hot[key]
            ]
            if rows:
                out.append((arm, title, hot["file_prefix"] if key.startswith("file") else "", rows))
    return out


def hotspots(analysis: Any, limit: int = 5, paths: RunPaths = NO_RUN) -> dict[str, Any]:
    """Top files and processes by I/O time and by bytes, from an analysis with file and proc views.

    The program's data files come first (core/facts/paths.py: a ``.pyc`` the interpreter read at
    start-up is not what a person tunes); file names are shown relative to the folder they share
    (``file_prefix``), so the part that differs is what a reader sees."""
    out: dict[str, Any] = {"file_prefix": ""}
    for view in ("file", "proc"):
        rows = list(((analysis.views or {}).get(view) or {}).get("rows", [])) if analysis is not None else []

        def other(r: dict[str, Any], view: str = view) -> bool:
            return view == "file" and classify(str(r.get("path")), paths).class_ != "data"

        by_time = sorted(rows, key=lambda r: (other(r), -(r.get("io_time_s") or 0.0)))[:limit]
        by_bytes = sorted(
            rows, key=lambda r: (other(r), -((r.get("read_bytes") or 0) + (r.get("write_bytes") or 0)))
        )[:limit]
        out[f"{view}_by_time"] = [_hot(view, r) for r in by_time]
        # the by-bytes list only when it names other rows than the by-time one (each table shows both)
        same = {id(r) for r in by_time} == {id(r) for r in by_bytes}
        out[f"{view}_by_bytes"] = (
            []
            if same
            else [_hot(view, r) for r in by_bytes if (r.get("read_bytes") or 0) + (r.get("write_bytes") or 0)]
        )
    names = [r["name"] for k in ("file_by_time", "file_by_bytes") for r in out[k]]
    if len(set(names)) > 1 and all(n.startswith("/") for n in names):
        prefix = os.path.commonpath(names)
        if len(prefix) > 1:
            out["file_prefix"] = prefix
            for k in ("file_by_time", "file_by_bytes"):
                for r in out[k]:
                    r["name"] = os.path.relpath(r["name"], prefix)
    return out


def process_name(r: dict[str, Any]) -> str:
    if r.get("rank") is not None:
        return f"rank {r['rank']}"
    return f"pid {r.get('pid')}" + (f"@{r['host']}" if r.get("host") else "")


def _hot(view: str, r: dict[str, Any]) -> dict[str, Any]:
    return {
        "name": str(r.get("path")) if view == "file" else process_name(r),
        "io_time_s": r.get("io_time_s") or 0.0,
        "read_bytes": r.get("read_bytes") or 0,
        "write_bytes": r.get("write_bytes") or 0,
        "ops": (r.get("read_count") or 0) + (r.get("write_count") or 0) + (r.get("metadata_count") or 0),
    }


# --------------------------------------------------------------------------- who decided


def summary_markdown(r: RunReport) -> list[str]:
    """The summary as quoted prose, saying who wrote it and what the fact check removed."""
    if not r.summary:
        return []
    d = next((x for x in reversed(r.decisions) if x.question == "summarize"), None)
    if d is None or d.decided_by != "model":
        who = "the rules" + (f" ({d.fallback})" if d and d.fallback else "")
    else:
        dropped = sum(n.startswith("summary sentence dropped") for n in d.notes)
        who = f"the model {d.reasoner}, checked against the run's outcome" + (
            f" ({dropped} sentence(s) dropped, see Who decided)" if dropped else ""
        )
    return [f"> {md_prose(r.summary)}", ">", f"> — summary by {md_prose(who)}", ""]


def decision_rows(r: RunReport) -> tuple[list[str], list[list[str]]]:
    """The reasoner's headline and one row per judgment: question, who decided, tokens, latency, why."""
    ds = r.decisions
    if r.model == "rules":
        head = [
            f"Reasoner: rules (deterministic, offline). All {len(ds)} judgment(s) were made by the rules; "
            "no model was asked."
        ]
    else:
        by_model = sum(d.decided_by == "model" for d in ds)
        head = [
            f"Reasoner: {r.model}. {by_model} of {len(ds)} judgment(s) were made by the model, "
            f"{len(ds) - by_model} by the rules after a fallback. "
            f"Tokens: {r.tokens_spent:,} of the budget of {r.token_budget:,}"
            + (
                " (partly estimated from the text: the server sent no usage)"
                if any(d.tokens_estimated for d in ds)
                else ""
            )
            + "."
        ]
    rows = [
        [
            d.question,
            d.reasoner if d.decided_by == "model" else "rules",
            d.answer or "-",
            f"{d.tokens:,}" + (" (estimated)" if d.tokens_estimated else ""),
            str(d.calls),
            f"{d.latency_s:.2f} s",
            "; ".join([*([f"fallback: {d.fallback}"] if d.fallback else []), *d.notes]) or "-",
        ]
        for d in ds
    ]
    return head, rows


DECISION_COLUMNS = ("judgment", "decided by", "answer", "tokens", "requests", "latency", "fallback and notes")


def reasoning_markdown(r: RunReport) -> list[str]:
    """The report's "Who decided" section in Markdown."""
    from dftune.tools.report.table import markdown_table

    head, rows = decision_rows(r)
    out = ["## Who decided", "", *(md_prose(h) for h in head), ""]
    if rows:
        out += [*markdown_table(list(DECISION_COLUMNS), [[md_prose(c) for c in row] for row in rows]), ""]
    return out


def reasoning_html(r: RunReport) -> str:
    """The report's "Who decided" section in HTML (every value escaped)."""
    head, rows = decision_rows(r)
    out = ['<section id="decisions"><h2>Who decided</h2>', *(f"<p>{html.escape(h)}</p>" for h in head)]
    if rows:
        out.append(
            "<table><thead><tr>"
            + "".join(f"<th>{html.escape(c)}</th>" for c in DECISION_COLUMNS)
            + "</tr></thead><tbody>"
        )
        out += ["<tr>" + "".join(f"<td>{html.escape(c)}</td>" for c in row) + "</tr>" for row in rows]
        out.append("</tbody></table>")
    out.append("</section>")
    return "".join(out)
