"""The run report as Markdown, from the final graph state (as a plain JSON document).

It opens with the morning view (what is slow, what fixed it, by how much, what next, and the
coverage), then follows the dftracer-io-optimization skill: measured findings apart from estimates (each
labeled with its source), hotspots, the proposal table (every row cited), the 12-category
checklist, every experiment with its replicates, median, confidence interval and verdict, the
guard decisions with their reasons, and full citations.

Everything that comes from the run (knob values, file names, reasons, paper metadata and
passages, the model-written summary) is untrusted text: it goes through
:func:`~dftune.core.safetext.md_text` (no HTML, no link, no code span; a model's prose also
no emphasis or heading: ``md_prose``) or into a code span, and only http(s) URLs become links,
as report.html escapes it. The model-written summary is quoted, checked against the outcome
(:func:`~dftune.tools.report.sections.summary_markdown`), and followed by who decided what.
"""

from __future__ import annotations

from typing import Any

from dftune.core.safetext import md_code, md_link, md_text
from dftune.tools.report.approvals import approvals_markdown
from dftune.tools.report.fixes import snippet_markdown
from dftune.tools.report.hints import hints_markdown
from dftune.tools.report.sections import (
    checklist_label,
    citations,
    coverage_note,
    findings,
    fix_rows,
    guard_rows,
    headline,
    hotspots,
    overruled,
    pending_lines,
    proposal_rows,
    reasoning_markdown,
    summary_markdown,
)
from dftune.tools.report.staging import staging_notes
from dftune.tools.report.table import markdown_table, proposal_markdown


def _num(x: Any, digits: int = 4) -> str:
    return "-" if x is None else f"{x:.{digits}g}"


def _ci(ci: list[float] | None) -> str:
    return "-" if not ci else f"[{ci[0]:.4g}, {ci[1]:.4g}]"


def _settings(m: dict[str, Any]) -> str:
    items = {**(m.get("settings") or {}), **(m.get("env") or {})}
    return ", ".join(f"{k}={v}" for k, v in items.items()) or "-"


def _bytes(n: float) -> str:
    for unit, size in (("GiB", 1 << 30), ("MiB", 1 << 20), ("KiB", 1 << 10)):
        if n >= size:
            return f"{n / size:.1f} {unit}"
    return f"{n:,.0f} B"


def _severity_score(f: dict[str, Any]) -> Any:
    """A diagnosed finding's score with its Drishti level: ``HIGH (5)``."""
    return f"{f['severity']} ({f['score']})" if f.get("severity") else f["score"]


def glance_markdown(doc: dict[str, Any]) -> list[str]:
    """The first screen as a list: one labeled line per question."""
    return [f"- **{label}:** {md_text(text)}" for label, text in headline(doc)]


def hotspot_markdown(doc: dict[str, Any]) -> list[str]:
    """Top files and processes of the baseline (and best kept) trace by I/O time and bytes."""
    from dftune.tools.report.plots import load_analysis

    out: list[str] = []
    base, inc = doc.get("baseline") or {}, doc.get("incumbent") or {}
    arms = [("baseline", load_analysis(base.get("analysis_path")))]
    if inc.get("workdir") != base.get("workdir"):
        arms.append(("best kept", load_analysis(inc.get("analysis_path"))))
    for arm, a in arms:
        if a is None:
            continue
        hot = hotspots(a)
        for key, title in (
            ("file_by_time", "files by I/O time"),
            ("proc_by_time", "processes by I/O time"),
            ("file_by_bytes", "files by bytes moved"),
            ("proc_by_bytes", "processes by bytes moved"),
        ):
            rows = hot.get(key) or []
            if not rows:
                continue
            under = (
                f", paths under {md_code(hot['file_prefix'])}"
                if key.startswith("file") and hot["file_prefix"]
                else ""
            )
            out += [f"Top {title} ({arm} trace{under}):", ""]
            out += markdown_table(
                ["name", "I/O time (s)", "read", "written", "calls"],
                [
                    [
                        r["name"],
                        f"{r['io_time_s']:.4g}",
                        _bytes(r["read_bytes"]),
                        _bytes(r["write_bytes"]),
                        f"{r['ops']:,}",
                    ]
                    for r in rows
                ],
            )
            out.append("")
    return out


def render_run_markdown(s: dict[str, Any]) -> str:
    """``s`` is the run's final state as JSON (``report.json``)."""
    lines = [f"# dftune report: {md_text(s['workload'] or s['spec_path'])} (run {md_code(s['run_id'])})", ""]
    lines += [
        f"**Status:** {md_text(s['status'])}"
        + (f": {md_text(s['status_reason'])}" if s.get("status_reason") else ""),
        "",
    ]
    waiting = pending_lines(s)
    if waiting:  # the first thing a person reads in the morning: the run's questions for them
        lines += ["## Pending confirmation", "", *(f"- {md_text(w)}" for w in waiting), ""]
    lines += ["## At a glance", "", *glance_markdown(s), ""]
    lines += summary_markdown(s)
    base = s.get("baseline") or {}
    inc = s.get("incumbent") or {}
    if base:
        lines += ["## Outcome", ""]
        lines += markdown_table(
            ["", "median", "95% CI of the median", "replicates ok", "settings"],
            [
                [
                    "baseline",
                    _num(base.get("median")),
                    _ci(base.get("ci95")),
                    f"{base.get('ok')}/{base.get('replicates')}",
                    _settings(base),
                ],
                [
                    "best kept",
                    _num(inc.get("median")),
                    _ci(inc.get("ci95")),
                    f"{inc.get('ok')}/{inc.get('replicates')}",
                    _settings(inc),
                ],
            ],
        )
        lines.append("")
    partial, note = coverage_note(s)
    lines += [f"**{md_text(note)}**" if partial else md_text(note), ""]
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
            [[f["kind"], f["finding"], _severity_score(f), f["detail"], f["source"]] for f in findings(s)],
        ),
        "",
    ]
    for pit in s.get("pitfalls", []):
        lines.append(f"- tracer blind spot: {md_text(pit['message'])}")
    hot = hotspot_markdown(s)
    if hot:
        lines += ["", "## Hotspots", "", *hot]
    lines += ["", "## Proposal table", ""]
    lines += proposal_markdown(proposal_rows(s))
    refused = [p for p in s.get("proposals", []) if p["status"] in ("rejected", "unsupported", "declined")]
    if refused:
        lines += ["", "Refused before anything was applied:", ""]
        lines += [
            f"- {md_code(p['id'])} ({md_text(p['strategy'])}): "
            f"**{md_text(p['status'])}**: {md_text(p['reason'])}"
            for p in refused
        ]
    fixes = fix_rows(s)
    if fixes:
        lines += ["", "### How to apply each fix", ""]
        for snip, applied in fixes:
            lines += snippet_markdown(snip, applied)
    manual = [p for p in s.get("proposals", []) if p["status"] == "manual" and p.get("citation")]
    if manual:
        lines += ["", "Recommendations dftune does not apply itself:", ""]
        lines += [f"- {md_code(p['strategy'])}: {md_text(p['reason'])}" for p in manual]
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
        lines += [
            f"### opt{e['iteration']}: {md_code(e['proposal_id'])} -> {md_text(e.get('verdict'))}"
            f"{' (kept)' if e.get('kept') else ''}{' (reverted)' if e.get('reverted') else ''}",
            "",
        ]
        lines += markdown_table(
            ["arm", "replicates", "median", "95% CI"],
            [
                [
                    "reference",
                    ", ".join(f"{v:.4g}" for v in e["reference"].get("values", [])),
                    _num(e["reference"].get("median")),
                    _ci(e["reference"].get("ci95")),
                ],
                [
                    "candidate",
                    ", ".join(f"{v:.4g}" for v in cand.get("values", [])),
                    _num(cand.get("median")),
                    _ci(cand.get("ci95")),
                ],
            ],
        )
        said = overruled(e)  # the two verdicts are told apart, not side by side
        label = (
            f"Comparison (the statistics alone said {md_text(said)}; the verdict is the guards' below)"
            if said
            else "Comparison"
        )
        lines += ["", f"{label}: {md_text(cmp.get('reason', e.get('verdict_reason', '-')))}", ""]
        for arm, staged in staging_notes(e):
            lines += [f"Staging ({arm}): {md_text(staged)}", ""]
        if e.get("verdict_reason"):
            lines += [f"KB verdict: {md_text(e['verdict_reason'])}", ""]
        for g in s.get("guard_decisions", []):
            if g.get("iteration") == e["iteration"]:
                d = g["decision"]
                lines.append(
                    f"- guard **{md_text(d['guard'])}**: "
                    f"{'passed' if d['passed'] else 'FAILED'}: {md_text(d['reason'])}"
                )
        lines.append("")
    lines += hints_markdown(s)
    if s.get("kb_records"):
        lines += [
            f"Knowledge-base records: {', '.join(str(int(i)) for i in s['kb_records'])}"
            + (f" (published to {md_code(s['kb_skill_path'])})" if s.get("kb_skill_path") else ""),
            "",
        ]
    screen = [g for g in guard_rows(s) if g["when"].startswith("screen")]
    if screen:
        lines += ["## Guard decisions before anything was applied", ""]
        lines += markdown_table(
            ["proposal", "guard", "result", "reason"],
            [[g["proposal"], g["guard"], "passed" if g["passed"] else "FAILED", g["reason"]] for g in screen],
        )
        lines.append("")
    lines += approvals_markdown(s)
    lines += reasoning_markdown(s)
    cites = citations(s)
    if cites:
        lines += ["## Citations", ""]
        for c in cites:
            lines.append(
                f"- \\[{md_text(c['id'])}\\] {md_text(c['reference'])} {md_link(c.get('url'))} — supports: "
                f"{md_text(c['claim'])} (checked: {md_text(c['evidence'])})"
            )
            if c.get("passage"):
                page = f", page {md_text(c['page'])}" if c.get("page") else ""
                lines.append(f"  > {md_text(c['passage'])}{page}")
            elif c.get("catalog_backed"):
                lines.append("  (catalog-backed claim: no passage of the source is stored locally)")
    return "\n".join(lines).rstrip() + "\n"
