"""What the Markdown and HTML reports share: the rows of each section, built from ``report.json``.

Both renderers call these so the two formats never disagree about what was measured and what
was only estimated from the literature (the seed: "never conflate the two").
"""

from __future__ import annotations

import html
import re
from typing import Any

MEASURED = "measured"
ESTIMATED = "estimate"
#: a number the knowledge base measured on an earlier run of this workload (not this run)
KB_MEASURED = "measured (KB)"

CHECKLIST_LABELS = {
    "applied_measured": "Applied & measured",
    "applicable_not_measured": "Applicable, not measured",
    "not_applicable": "Not applicable",
}

#: what an estimate's number is, by its source (the seed: never conflate measured and estimated)
_ESTIMATE_SOURCE = {
    "trace model": "trace model (tools/estimates.py, from the incumbent's trace)",
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
        out.append({
            "kind": MEASURED, "finding": b.get("category") or b.get("name"), "score": b.get("score"),
            "detail": b.get("evidence", ""),
            "source": f"baseline trace ({reps}), rule {b.get('name')} ({b.get('rule_source', 'dftune')})",
        })  # fmt: skip
    proposals = {p["id"]: p for p in doc.get("proposals", [])}
    for e in doc.get("experiments", []):
        cmp = e.get("comparison") or {}
        change = cmp.get("change_pct")
        p = proposals.get(e["proposal_id"], {})
        cite = (p.get("citation") or {}).get("id")
        cand = e.get("candidate") or {}
        out.append({
            "kind": MEASURED, "finding": f"{e['strategy']} ({e['proposal_id']}): {e.get('verdict') or 'pending'}",
            "score": None,
            "detail": (f"{change:+.1f}% on the metric; " if change is not None else "") + str(cmp.get("reason", "")),
            "source": f"experiment opt{e['iteration']} ({len(e['reference'].get('values', []))} vs "
                      f"{len(cand.get('values', []))} replicates)" + (f", cited: {cite}" if cite else ""),
        })  # fmt: skip
    for p in doc.get("proposals", []):
        cite = p.get("citation")
        if (
            cite
            and p.get("app_impact_source") in ("trace model", "model", "kb")
            and p["status"] in ("proposed", "manual", "declined")
        ):
            by = p.get("impact_estimated_by") or "rules"
            model = by != "rules"  # a model's guess is its own, not the literature's
            out.append({
                "kind": MODEL_ESTIMATED if model else KB_MEASURED if p["app_impact_source"] == "kb" else ESTIMATED,
                "finding": f"{p['strategy']} ({p['id']})",
                "score": None,
                "detail": f"expected app impact {p['app_impact_pct']:.1f}%"
                          + (f": {p['impact_reason']}" if p.get("impact_reason") else ""),
                "source": (f"the model {by}'s estimate (not measured; capped by the I/O bound); cited: "
                           f"{cite['reference']}" if model
                           else f"{_ESTIMATE_SOURCE[p['app_impact_source']]}; the fix is cited: {cite['reference']} "
                                f"{cite['url']}"),
            })  # fmt: skip
    return out


def coverage_note(doc: dict[str, Any]) -> tuple[bool, str]:
    """(partial?, sentence) from the run's coverage; partial results are stated, never implied."""
    cov = doc.get("coverage")
    if not cov:
        return False, "Coverage: no baseline was measured."
    missing = [*cov.get("units_failed", []), *cov.get("units_pending", [])]
    included = cov.get("units_included", [])
    if missing:
        return True, (f"Partial coverage: this report covers {len(included)} of {cov.get('units_total')} units "
                      f"({', '.join(included) or 'none'}); not covered: {', '.join(missing)}.")  # fmt: skip
    return False, f"Coverage: all {cov.get('units_total')} units included ({', '.join(included)})."


def proposal_rows(doc: dict[str, Any]) -> list[dict[str, Any]]:
    """The seed's proposal table, sorted by weighted score (descending), as ``report.json`` holds it."""
    return sorted(doc.get("proposal_table", []), key=lambda r: (-r["weighted_score"], r["#"]))


def guard_rows(doc: dict[str, Any]) -> list[dict[str, Any]]:
    """Every guard decision, with when it was taken (before anything ran, or after experiment opt<n>)."""
    rows = []
    for g in doc.get("guard_decisions", []):
        d = g["decision"]
        when = "screen (before applying)" if g.get("iteration") is None else f"after opt{g['iteration']}"
        rows.append({"proposal": g["proposal_id"], "when": when, "guard": d["guard"],
                     "passed": bool(d["passed"]), "reason": d["reason"]})  # fmt: skip
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


# --------------------------------------------------------------------------- who decided

MODEL_ESTIMATED = "model estimate"
_MD_SPECIAL = re.compile(r"([\\`*\[\]<>|~])")


def md_prose(text: Any) -> str:
    """Text from the run (a model's words above all) as inert Markdown: one line, no markup left.

    Escapes what could make emphasis, code, links, images, HTML or a table, an underscore that is
    not inside a word, and a heading or list marker at the start."""
    out = _MD_SPECIAL.sub(r"\\\1", " ".join(str(text).split()))
    out = re.sub(r"(?<![A-Za-z0-9])_|_(?![A-Za-z0-9])", r"\\_", out)
    out = re.sub(r"^(\d+)([.)])", r"\1\\\2", out)
    return re.sub(r"^([#+=-])", r"\\\1", out)


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
        head = [f"Reasoner: rules (deterministic, offline). All {len(ds)} judgment(s) were made by the rules; "
                "no model was asked."]  # fmt: skip
    else:
        by_model = sum(d.get("decided_by") == "model" for d in ds)
        head = [f"Reasoner: {reasoner}. {by_model} of {len(ds)} judgment(s) were made by the model, "
                f"{len(ds) - by_model} by the rules after a fallback. Tokens: {tokens:,} of the budget of "
                f"{int(doc.get('token_budget') or 0):,}" + (" (partly estimated from the text: the server sent "
                                                            "no usage)" if estimated else "") + "."]  # fmt: skip
    rows = []
    for d in ds:
        who = d["reasoner"] if d.get("decided_by") == "model" else "rules"
        cost = f"{d.get('tokens', 0):,}" + (" (estimated)" if d.get("tokens_estimated") else "")
        why = "; ".join(
            [*([f"fallback: {d['fallback']}"] if d.get("fallback") else []), *(d.get("notes") or [])]
        )
        rows.append([str(d.get("question")), who, str(d.get("answer") or "-"), cost, str(d.get("calls", 0)),
                     f"{float(d.get('latency_s') or 0):.2f} s", why or "-"])  # fmt: skip
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
        out.append("<table><thead><tr>" + "".join(f"<th>{html.escape(c)}</th>" for c in DECISION_COLUMNS)
                   + "</tr></thead><tbody>")  # fmt: skip
        out += ["<tr>" + "".join(f"<td>{html.escape(c)}</td>" for c in r) + "</tr>" for r in rows]
        out.append("</tbody></table>")
    out.append("</section>")
    return "".join(out)
