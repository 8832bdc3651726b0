"""The run report as Markdown, from the final graph state (as a plain JSON document).

Sections follow the seed: measured findings apart from estimates (each labeled
with its source), the proposal table (every row cited), the 12-category checklist, every
experiment with its replicates, median, confidence interval and verdict, the guard
decisions with their reasons, partial coverage when it applies, and full citations.
"""

from __future__ import annotations

from typing import Any

from dftune.tools.report.sections import (
    checklist_label,
    citations,
    coverage_note,
    findings,
    guard_rows,
    proposal_rows,
    reasoning_markdown,
    summary_markdown,
)
from dftune.tools.report.table import markdown_table, proposal_markdown


def _num(x: Any, digits: int = 4) -> str:
    return "-" if x is None else f"{x:.{digits}g}"


def _ci(ci: list[float] | None) -> str:
    return "-" if not ci else f"[{ci[0]:.4g}, {ci[1]:.4g}]"


def render_run_markdown(s: dict[str, Any]) -> str:
    """``s`` is the run's final state as JSON (``report.json``)."""
    lines = [f"# dftune report: {s['workload'] or s['spec_path']} (run {s['run_id']})", ""]
    lines += [
        f"**Status:** {s['status']}" + (f": {s['status_reason']}" if s.get("status_reason") else ""),
        "",
    ]
    lines += summary_markdown(s)
    base = s.get("baseline") or {}
    inc = s.get("incumbent") or {}
    if base:
        lines += ["## Outcome", ""]
        lines += markdown_table(["", "median", "95% CI of the median", "replicates ok", "settings"], [
            ["baseline", _num(base.get("median")), _ci(base.get("ci95")), f"{base.get('ok')}/{base.get('replicates')}",
             base.get("settings")],
            ["best kept", _num(inc.get("median")), _ci(inc.get("ci95")), f"{inc.get('ok')}/{inc.get('replicates')}",
             {**(inc.get("settings") or {}), **(inc.get("env") or {})}],
        ])  # fmt: skip
        lines.append("")
    partial, note = coverage_note(s)
    lines += [f"**{note}**" if partial else note, ""]
    lines += [
        "## Findings",
        "",
        "Measured findings come from this run's traces and experiments; estimates (a trace "
        "model, the model) and the knowledge base's earlier measurements are labeled with their "
        "source and are never counted as measured in this run.",
        "",
    ]
    lines += [
        *markdown_table(
            ["kind", "finding", "score", "detail", "source"],
            [[f["kind"], f["finding"], f["score"], f["detail"], f["source"]] for f in findings(s)],
        ),
        "",
    ]
    for pit in s.get("pitfalls", []):
        lines.append(f"- tracer blind spot: {pit['message']}")
    lines += ["", "## Proposal table", ""]
    lines += proposal_markdown(proposal_rows(s))
    refused = [p for p in s.get("proposals", []) if p["status"] in ("rejected", "unsupported", "declined")]
    if refused:
        lines += ["", "Refused before anything was applied:", ""]
        lines += [f"- `{p['id']}` ({p['strategy']}): **{p['status']}**: {p['reason']}" for p in refused]
    manual = [p for p in s.get("proposals", []) if p["status"] == "manual" and p.get("citation")]
    if manual:
        lines += ["", "Recommendations dftune does not apply itself:", ""]
        lines += [f"- `{p['strategy']}`: {p['reason']}" for p in manual]
    lines += ["", "## Checklist (12 categories)", ""]
    lines += markdown_table(
        ["#", "category", "verdict", "reason"],
        [
            [c["number"], c["category"], checklist_label(c["verdict"]), c["reason"]]
            for c in s.get("checklist", [])
        ],
    )
    lines += ["", "## Experiments", ""]
    for e in s.get("experiments", []):
        cand = e.get("candidate") or {}
        cmp = e.get("comparison") or {}
        lines += [f"### opt{e['iteration']}: {e['proposal_id']} -> {e.get('verdict')}"
                  f"{' (kept)' if e.get('kept') else ''}{' (reverted)' if e.get('reverted') else ''}", ""]  # fmt: skip
        lines += markdown_table(["arm", "replicates", "median", "95% CI"], [
            ["reference", ", ".join(f"{v:.4g}" for v in e["reference"].get("values", [])),
             _num(e["reference"].get("median")), _ci(e["reference"].get("ci95"))],
            ["candidate", ", ".join(f"{v:.4g}" for v in cand.get("values", [])), _num(cand.get("median")),
             _ci(cand.get("ci95"))],
        ])  # fmt: skip
        lines += ["", f"Comparison: {cmp.get('reason', e.get('verdict_reason', '-'))}", ""]
        if e.get("verdict_reason"):
            lines += [f"KB verdict: {e['verdict_reason']}", ""]
        for g in s.get("guard_decisions", []):
            if g.get("iteration") == e["iteration"]:
                d = g["decision"]
                lines.append(
                    f"- guard **{d['guard']}**: {'passed' if d['passed'] else 'FAILED'}: {d['reason']}"
                )
        lines.append("")
    if s.get("kb_records"):
        lines += [f"Knowledge-base records: {', '.join(str(i) for i in s['kb_records'])}"
                  + (f" (published to {s['kb_skill_path']})" if s.get("kb_skill_path") else ""), ""]  # fmt: skip
    screen = [g for g in guard_rows(s) if g["when"].startswith("screen")]
    if screen:
        lines += ["## Guard decisions before anything was applied", ""]
        lines += markdown_table(["proposal", "guard", "result", "reason"],
                        [[g["proposal"], g["guard"], "passed" if g["passed"] else "FAILED", g["reason"]]
                         for g in screen])  # fmt: skip
        lines.append("")
    lines += reasoning_markdown(s)
    cites = citations(s)
    if cites:
        lines += ["## Citations", ""]
        for c in cites:
            lines.append(
                f"- [{c['id']}] {c['reference']} {c['url']} — supports: {c['claim']} (checked: {c['evidence']})"
            )
            if c.get("passage"):
                page = f", page {c['page']}" if c.get("page") else ""
                lines.append(f"  > {' '.join(str(c['passage']).split())}{page}")
            elif c.get("catalog_backed"):
                lines.append("  (catalog-backed claim: no passage of the source is stored locally)")
    return "\n".join(lines).rstrip() + "\n"
