"""What the Markdown and HTML reports share: the rows of each section, built from ``report.json``.

Both renderers call these so the two formats never disagree about what was measured and what
was only estimated from the literature (dftracer-io-optimization skill: "never conflate the two").
"""

from __future__ import annotations

import html
import os
from typing import Any

from dftune.core.domain.run import MetricInfo
from dftune.core.domain.stats import pct_change
from dftune.core.safetext import md_prose
from dftune.tools.report.fixes import severity, snippets
from dftune.tools.runner.metric_names import metric_label
from dftune.tools.runner.spec import WorkloadSpec
from dftune.tools.runner.stats import compare as compare_arms

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

#: proposal statuses that never reached an experiment because something refused them
REFUSED = ("rejected", "unsupported", "declined")


def checklist_label(verdict: str) -> str:
    return CHECKLIST_LABELS.get(verdict, verdict)


def findings(doc: dict[str, Any]) -> list[dict[str, Any]]:
    """Measured findings (trace rules, experiments) first, then estimates (and the KB's earlier
    measurements), each with its source."""
    out: list[dict[str, Any]] = []
    base = doc.get("baseline") or {}
    reps = f"{base.get('ok')}/{base.get('replicates')} replicates" if base else "no baseline"
    for b in (doc.get("diagnosis") or {}).get("bottlenecks", []):
        out.append(
            {
                "kind": MEASURED,
                "finding": b.get("category") or b.get("name"),
                "score": b.get("score"),
                "severity": severity(b.get("score")),
                "detail": b.get("evidence", ""),
                "source": f"baseline trace ({reps}), rule {b.get('name')} ({b.get('rule_source', 'dftune')})",
            }
        )
    proposals = {p["id"]: p for p in doc.get("proposals", [])}
    for e in doc.get("experiments", []):
        cmp = e.get("comparison") or {}
        change = cmp.get("change_pct")
        p = proposals.get(e["proposal_id"], {})
        cite = (p.get("citation") or {}).get("id")
        cand = e.get("candidate") or {}
        out.append(
            {
                "kind": MEASURED,
                "finding": f"{e['strategy']} ({e['proposal_id']}): {e.get('verdict') or 'pending'}",
                "score": None,
                "detail": _experiment_detail(e, cmp, change, metric_of(doc).get("name", "metric")),
                "source": f"experiment opt{e['iteration']} ({len(e['reference'].get('values', []))} vs "
                f"{len(cand.get('values', []))} replicates)" + (f", cited: {cite}" if cite else ""),
            }
        )
    for p in doc.get("proposals", []):
        cite = p.get("citation")
        if (
            cite
            and p.get("app_impact_source") in ("trace model", "model", "kb")
            and p["status"] in ("proposed", "manual", "declined")
        ):
            by = p.get("impact_estimated_by") or "rules"
            model = by != "rules"  # a model's guess is its own, not the literature's
            out.append(
                {
                    "kind": MODEL_ESTIMATED
                    if model
                    else KB_MEASURED
                    if p["app_impact_source"] == "kb"
                    else ESTIMATED,
                    "finding": f"{p['strategy']} ({p['id']})",
                    "score": None,
                    "detail": f"expected app impact {p['app_impact_pct']:.1f}%"
                    + (f": {p['impact_reason']}" if p.get("impact_reason") else ""),
                    "source": (
                        f"the model {by}'s estimate (not measured; capped by the I/O bound); cited: "
                        f"{cite['reference']}"
                        if model
                        else f"{_ESTIMATE_SOURCE[p['app_impact_source']]}; "
                        f"the fix is cited: {cite['reference']} "
                        f"{cite['url']}"
                    ),
                }
            )
    return out


def overruled(e: dict[str, Any]) -> str | None:
    """What the statistical comparison alone said, when a guard gave the experiment another verdict
    (with its reason); None when the verdict is the statistics' own."""
    said = (e.get("comparison") or {}).get("verdict")
    verdict = e.get("verdict")
    return said if said and verdict and said != verdict and e.get("verdict_reason") else None


def _experiment_detail(e: dict[str, Any], cmp: dict[str, Any], change: float | None, metric: str) -> str:
    """The change, then the verdict's own reason; when a guard overruled the statistics, both, said so."""
    head = f"{gain_text(change)} on {metric}; " if change is not None else ""
    why = e.get("verdict_reason") or str(cmp.get("reason", ""))
    if said := overruled(e):
        why += f" (the statistical comparison alone said {said}: {cmp.get('reason', '')})"
    return head + why


def coverage_note(doc: dict[str, Any]) -> tuple[bool, str]:
    """(partial?, sentence) from the run's coverage; partial results are stated, never implied."""
    cov = doc.get("coverage")
    if not cov:
        return False, "Coverage: no baseline was measured."
    missing = [*cov.get("units_failed", []), *cov.get("units_pending", [])]
    included = cov.get("units_included", [])
    if missing:
        return True, (
            f"Partial coverage: this report covers {len(included)} of {cov.get('units_total')} units "
            f"({', '.join(included) or 'none'}); not covered: {', '.join(missing)}."
        )
    return False, f"Coverage: all {cov.get('units_total')} units included ({', '.join(included)})."


def fix_rows(doc: dict[str, Any]) -> list[tuple[dict[str, Any], str]]:
    """A fix snippet per strategy of the proposal table (the measured ones first, then table order),
    each with the change(s) dftune measured for it, so a reader can apply it elsewhere."""
    measured: dict[str, list[str]] = {}
    for p in doc.get("proposals", []):
        if p.get("status") in ("measured", "kept", "applied") or any(
            x.get("proposal_id") == p["id"] for x in doc.get("experiments", [])
        ):
            measured.setdefault(p["strategy"], []).append(str(p["id"]))
    out = []
    order = [*measured, *(r["strategy"] for r in proposal_rows(doc))]  # what was measured first
    for snip in snippets(order):
        out.append((snip, ", ".join(dict.fromkeys(measured.get(snip["strategy"], [])))))
    return out


def proposal_rows(doc: dict[str, Any]) -> list[dict[str, Any]]:
    """Proposal table (dftracer-io-optimization skill), by weighted score descending, as in report.json."""
    return sorted(doc.get("proposal_table", []), key=lambda r: (-r["weighted_score"], r["#"]))


def guard_rows(doc: dict[str, Any]) -> list[dict[str, Any]]:
    """Every guard decision, with when it was taken (before anything ran, or after experiment opt<n>)."""
    rows = []
    for g in doc.get("guard_decisions", []):
        d = g["decision"]
        when = "screen (before applying)" if g.get("iteration") is None else f"after opt{g['iteration']}"
        rows.append(
            {
                "proposal": g["proposal_id"],
                "when": when,
                "guard": d["guard"],
                "passed": bool(d["passed"]),
                "reason": d["reason"],
            }
        )
    return rows


def citations(doc: dict[str, Any]) -> list[dict[str, Any]]:
    """Each citation once (proposals may share one)."""
    seen: dict[str, dict[str, Any]] = {}
    for c in doc.get("citations", []):
        seen.setdefault(c["id"], c)
    for p in doc.get("proposals", []):
        c = p.get("citation")
        if c:
            seen.setdefault(c["id"], c)
    return list(seen.values())


# --------------------------------------------------------------------------- the morning view


def metric_info(spec: WorkloadSpec) -> MetricInfo:
    """The metric a run optimizes, named as the program (or
    benchmark) calls it, with its unit and direction."""
    name, unit = metric_label(spec.metric)
    return MetricInfo(
        name=name, unit=unit, lower_is_better=spec.metric.lower_is_better, kind=spec.metric.kind
    )


def metric_of(doc: dict[str, Any]) -> dict[str, Any]:
    """``doc["metric"]`` (reports written before it existed: a generic metric, lower is better)."""
    return doc.get("metric") or {"name": "metric", "unit": "", "lower_is_better": True}


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


def overall(doc: dict[str, Any]) -> dict[str, Any] | None:
    """Baseline -> best kept arm, compared from their replicates: change, the CI of the change."""
    base, inc = doc.get("baseline") or {}, doc.get("incumbent") or {}
    lib = bool(metric_of(doc).get("lower_is_better", True))
    bv, iv = base.get("values") or [], inc.get("values") or []
    if not bv or not iv or base.get("workdir") == inc.get("workdir"):
        return None
    out: dict[str, Any] = {
        "before": base.get("median"),
        "after": inc.get("median"),
        "pct": pct_change(base.get("median"), inc.get("median"), lower_is_better=lib),
        "ci": None,
    }
    try:
        cmp = compare_arms(bv, iv, lower_is_better=lib)
    except ValueError:
        return out
    out["ci"] = gain_ci(cmp.ci95, lib)
    out["p_value"] = cmp.p_value
    return out


def kept_changes(doc: dict[str, Any]) -> list[dict[str, Any]]:
    """The kept experiments, largest measured gain first, each with its own CI."""
    lib = bool(metric_of(doc).get("lower_is_better", True))
    out = []
    for e in doc.get("experiments", []):
        if not e.get("kept") or e.get("verdict") == "pending":
            continue
        cmp = e.get("comparison") or {}
        out.append(
            {
                "iteration": e["iteration"],
                "proposal": e["proposal_id"],
                "strategy": e["strategy"],
                "pct": cmp.get("change_pct"),
                "ci": gain_ci(cmp.get("ci95"), lib),
            }
        )
    return sorted(out, key=lambda k: -(k["pct"] or 0.0))


def pending_changes(doc: dict[str, Any]) -> list[dict[str, Any]]:
    """Changes kept on trial that wait for a person (oldest first): measured effect and the question."""
    out = []
    for e in doc.get("experiments", []):
        if e.get("verdict") != "pending" or not e.get("kept"):
            continue
        cmp = e.get("comparison") or {}
        out.append(
            {
                "iteration": e["iteration"],
                "proposal": e["proposal_id"],
                "strategy": e["strategy"],
                "pct": cmp.get("change_pct"),
                "question": e.get("question") or e.get("verdict_reason", ""),
            }
        )
    return out


def pending_lines(doc: dict[str, Any]) -> list[str]:
    """One sentence per change pending confirmation, with how to answer (the morning's first question)."""
    run = doc.get("run_id", "RUN_ID")
    name = metric_of(doc).get("name", "metric")
    pct = lambda x: "?" if x is None else f"{x:+.1f}%"  # noqa: E731
    return [
        f"{p['proposal']} ({p['strategy']}, opt{p['iteration']}): {pct(p['pct'])} on {name}, kept on trial "
        f"until you answer. {p['question'].rstrip('. ')}. Answer: dftune approve {run} (legitimate) or "
        f"dftune approve {run} --reject --reason TEXT"
        for p in pending_changes(doc)
    ]


def settings_changed(doc: dict[str, Any]) -> dict[str, Any]:
    """What the best kept arm runs with that the baseline does not (knobs and environment)."""
    base, inc = doc.get("baseline") or {}, doc.get("incumbent") or {}
    before = {**(base.get("settings") or {}), **(base.get("env") or {})}
    after = {**(inc.get("settings") or {}), **(inc.get("env") or {})}
    out = {k: v for k, v in after.items() if str(before.get(k)) != str(v)}
    if inc.get("source_dir") and inc.get("source_dir") != base.get("source_dir"):
        out["source"] = "patched copy"
    return out


def next_steps(doc: dict[str, Any], limit: int = 3) -> list[dict[str, Any]]:
    """What is left to try: open or recommended proposals by weighted score, each with its bound."""
    open_ = [
        p for p in doc.get("proposals", []) if p.get("status") in ("proposed", "manual") and p.get("citation")
    ]
    open_.sort(
        key=lambda p: (-(0.5 * p.get("app_impact_pct", 0.0) + 0.5 * p.get("system_impact_pct", 0.0)), p["id"])
    )
    return open_[:limit]


def io_bound_pct(doc: dict[str, Any]) -> float | None:
    """At most this much more can any I/O fix save: the best kept arm's unoverlapped I/O share."""
    for key in ("incumbent", "baseline"):
        f = (doc.get(key) or {}).get("unoverlapped_io_fraction")
        if f is not None:
            return 100.0 * float(f)
    return None


def headline(doc: dict[str, Any]) -> list[tuple[str, str]]:
    """The report's first screen: what is slow, what fixed it, by how much, what next, what is covered."""
    from dftune.tools.report.plots import load_analysis

    metric = metric_of(doc)
    unit, name = metric.get("unit", ""), metric.get("name", "metric")
    rows: list[tuple[str, str]] = [("Pending", line) for line in pending_lines(doc)]
    a = load_analysis((doc.get("baseline") or {}).get("analysis_path"))
    if a is not None:
        rows.append(
            (
                "I/O",
                f"{100 * a.io_fraction_of_job:.0f}% of the processes' run time is spent in I/O calls, "
                f"{100 * a.unoverlapped_io_fraction:.0f}% of the job time not hidden behind compute "
                f"(baseline trace: {a.job_time_s:.3g} s, {a.processes} process(es))",
            )
        )
    else:
        rows.append(("I/O", "not traced: the share of I/O in the run time is unknown"))
    bns = (doc.get("diagnosis") or {}).get("bottlenecks") or []
    if bns:
        b = bns[0]
        rows.append(
            (
                "Bottleneck",
                f"{b.get('category')} (score {b.get('score')}/5, rule {b.get('id')}): "
                f"{b.get('evidence') or b.get('message') or ''}".rstrip(": "),
            )
        )
    elif doc.get("diagnosis"):
        rows.append(("Bottleneck", "no diagnosis rule fired on the baseline trace"))
    base = doc.get("baseline") or {}
    kept = kept_changes(doc)
    total = overall(doc)
    if kept and total is not None:
        best = kept[0]
        rows.append(
            (
                "Best change",
                f"{best['proposal']} ({best['strategy']}, opt{best['iteration']}): "
                f"{gain_text(best['pct'], best['ci'])} on {name}",
            )
        )
        settings = ", ".join(f"{k}={v}" for k, v in settings_changed(doc).items()) or "the kept changes"
        rows.append(
            (
                "Overall",
                f"{name} {with_unit(total['before'], unit)} -> {with_unit(total['after'], unit)}: "
                f"{gain_text(total['pct'], total['ci'])} with {settings} kept",
            )
        )
    elif base.get("median") is not None and pending_changes(doc):
        inc = (doc.get("incumbent") or {}).get("median")
        rows.append(
            (
                "Best change",
                f"none confirmed yet: {len(pending_changes(doc))} change(s) kept on trial (see "
                f"Pending); {name} {with_unit(base['median'], unit)} -> {with_unit(inc, unit)} "
                "with them",
            )
        )
    elif base.get("median") is not None:
        rows.append(
            (
                "Best change",
                f"none kept: {name} stays at the baseline median {with_unit(base['median'], unit)}"
                f" ({sum(x.get('candidate') is not None for x in doc.get('experiments', []))} "
                "experiment(s) measured)",
            )
        )
    bound = io_bound_pct(doc)
    bound_text = (
        f"; bounded by the I/O not hidden behind compute: {bound:.0f}% of the job time"
        if bound is not None
        else ""
    )
    nxt = next_steps(doc, 1)
    if nxt:
        p = nxt[0]
        how = "try it next" if p["status"] == "proposed" else "a change to make by hand"
        rows.append(
            (
                "Next",
                f"{p['strategy']} ({p['id']}, {how}): expected {p.get('app_impact_pct', 0.0):.0f}% on "
                f"{name} ({p.get('app_impact_source', 'estimate')}){bound_text}",
            )
        )
    elif base:
        rows.append(("Next", f"nothing left that fits this workload{bound_text}"))
    rows.append(("Coverage", coverage_note(doc)[1].removeprefix("Coverage: ")))
    return rows


def hotspots(analysis: Any, limit: int = 5) -> dict[str, Any]:
    """Top files and processes by I/O time and by bytes, from an analysis with file and proc views.

    File names are shown relative to the folder they share (``file_prefix``), so the part that
    differs is what a reader sees."""
    out: dict[str, Any] = {"file_prefix": ""}
    for view in ("file", "proc"):
        rows = list(((analysis.views or {}).get(view) or {}).get("rows", [])) if analysis is not None else []
        by_time = sorted(rows, key=lambda r: -(r.get("io_time_s") or 0.0))[:limit]
        by_bytes = sorted(rows, key=lambda r: -((r.get("read_bytes") or 0) + (r.get("write_bytes") or 0)))[
            :limit
        ]
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

MODEL_ESTIMATED = "model estimate"


def summary_markdown(doc: dict[str, Any]) -> list[str]:
    """The summary as quoted prose, saying who wrote it and what the fact check removed."""
    if not doc.get("summary"):
        return []
    d = next((x for x in reversed(doc.get("decisions") or []) if x.get("question") == "summarize"), None)
    if d is None or d.get("decided_by") != "model":
        who = "the rules" + (f" ({d['fallback']})" if d and d.get("fallback") else "")
    else:
        dropped = sum(str(n).startswith("summary sentence dropped") for n in d.get("notes") or [])
        who = f"the model {d['reasoner']}, checked against the run's outcome" + (
            f" ({dropped} sentence(s) dropped, see Who decided)" if dropped else ""
        )
    return [f"> {md_prose(doc['summary'])}", ">", f"> — summary by {md_prose(who)}", ""]


def decision_rows(doc: dict[str, Any]) -> tuple[list[str], list[list[str]]]:
    """The reasoner's headline and one row per judgment: question, who decided, tokens, latency, why."""
    ds = doc.get("decisions") or []
    reasoner = doc.get("model") or "rules"
    tokens = sum(int(d.get("tokens") or 0) for d in ds)
    estimated = any(d.get("tokens_estimated") for d in ds)
    if reasoner == "rules":
        head = [
            f"Reasoner: rules (deterministic, offline). All {len(ds)} judgment(s) were made by the rules; "
            "no model was asked."
        ]
    else:
        by_model = sum(d.get("decided_by") == "model" for d in ds)
        head = [
            f"Reasoner: {reasoner}. {by_model} of {len(ds)} judgment(s) were made by the model, "
            f"{len(ds) - by_model} by the rules after a fallback. Tokens: {tokens:,} of the budget of "
            f"{int(doc.get('token_budget') or 0):,}"
            + (" (partly estimated from the text: the server sent no usage)" if estimated else "")
            + "."
        ]
    rows = []
    for d in ds:
        who = d["reasoner"] if d.get("decided_by") == "model" else "rules"
        cost = f"{d.get('tokens', 0):,}" + (" (estimated)" if d.get("tokens_estimated") else "")
        why = "; ".join(
            [*([f"fallback: {d['fallback']}"] if d.get("fallback") else []), *(d.get("notes") or [])]
        )
        rows.append(
            [
                str(d.get("question")),
                who,
                str(d.get("answer") or "-"),
                cost,
                str(d.get("calls", 0)),
                f"{float(d.get('latency_s') or 0):.2f} s",
                why or "-",
            ]
        )
    return head, rows


DECISION_COLUMNS = ("judgment", "decided by", "answer", "tokens", "requests", "latency", "fallback and notes")


def reasoning_markdown(doc: dict[str, Any]) -> list[str]:
    """The report's "Who decided" section in Markdown."""
    from dftune.tools.report.table import markdown_table

    head, rows = decision_rows(doc)
    out = ["## Who decided", "", *(md_prose(h) for h in head), ""]
    if rows:
        out += [*markdown_table(list(DECISION_COLUMNS), [[md_prose(c) for c in r] for r in rows]), ""]
    return out


def reasoning_html(doc: dict[str, Any]) -> str:
    """The report's "Who decided" section in HTML (every value escaped)."""
    head, rows = decision_rows(doc)
    out = ['<section id="decisions"><h2>Who decided</h2>', *(f"<p>{html.escape(h)}</p>" for h in head)]
    if rows:
        out.append(
            "<table><thead><tr>"
            + "".join(f"<th>{html.escape(c)}</th>" for c in DECISION_COLUMNS)
            + "</tr></thead><tbody>"
        )
        out += ["<tr>" + "".join(f"<td>{html.escape(c)}</td>" for c in r) + "</tr>" for r in rows]
        out.append("</tbody></table>")
    out.append("</section>")
    return "".join(out)
