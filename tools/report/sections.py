"""What the Markdown and HTML reports share: the rows of each section, built from ``report.json``.

Both renderers call these so the two formats never disagree about what was measured and what
was only estimated from the literature (the seed: "never conflate the two").
"""

from __future__ import annotations

from typing import Any

MEASURED = "measured"
ESTIMATED = "literature estimate"

CHECKLIST_LABELS = {
    "applied_measured": "Applied & measured",
    "applicable_not_measured": "Applicable, not measured",
    "not_applicable": "Not applicable",
}

#: what an estimate's number is, by its source (the seed: never conflate measured and estimated)
_ESTIMATE_SOURCE = {
    "trace model": "trace model (tools/estimates.py, from the baseline trace)",
    "kb": "measured on an earlier run of this workload (knowledge base)",
    "model": "the language model's estimate",
}

#: proposal statuses that never reached an experiment because something refused them
REFUSED = ("rejected", "unsupported", "declined")


def checklist_label(verdict: str) -> str:
    return CHECKLIST_LABELS.get(verdict, verdict)


def findings(doc: dict[str, Any]) -> list[dict[str, Any]]:
    """Measured findings (trace rules, experiments) first, then literature estimates, each with its source."""
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
            out.append({
                "kind": ESTIMATED, "finding": f"{p['strategy']} ({p['id']})", "score": None,
                "detail": f"expected app impact {p['app_impact_pct']:.1f}%"
                          + (f": {p['impact_reason']}" if p.get("impact_reason") else ""),
                "source": f"{_ESTIMATE_SOURCE[p['app_impact_source']]}; the fix is cited: {cite['reference']} {cite['url']}",
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
