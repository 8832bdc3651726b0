"""The run report as Markdown, from the run's report (the final graph state, :class:`RunReport`).

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

from dftune.core.domain.measurements import Measurement
from dftune.core.domain.proposals import REFUSED
from dftune.core.domain.run import RunReport
from dftune.core.safetext import md_code, md_link, md_text
from dftune.tools.report.approvals import approvals_markdown
from dftune.tools.report.fixes import snippet_markdown
from dftune.tools.report.hints import hints_markdown
from dftune.tools.report.htmlkit import ci, num
from dftune.tools.report.sections import (
    HOTSPOT_COLUMNS,
    FindingRow,
    arm_configuration,
    checklist_label,
    citations,
    coverage_note,
    findings,
    fix_rows,
    headline,
    hotspot_tables,
    overruled,
    pending_lines,
    proposal_rows,
    reasoning_markdown,
    summary_markdown,
)
from dftune.tools.report.staging import staging_notes
from dftune.tools.report.table import markdown_table, proposal_markdown


def _arm(name: str, m: Measurement | None) -> list[str]:
    """A measured arm's row: its name, replicate values, median and CI (dashes when it never ran)."""
    if m is None:
        return [name, "", "-", "-"]
    return [name, ", ".join(f"{v:.4g}" for v in m.values), num(m.median), ci(m.ci95)]


def _severity_score(f: FindingRow) -> Any:
    """A diagnosed finding's score with its Drishti level: ``HIGH (5)``."""
    return f"{f.severity} ({f.score})" if f.severity else f.score


def glance_markdown(r: RunReport) -> list[str]:
    """The first screen as a list: one labeled line per question."""
    return [f"- **{label}:** {md_text(text)}" for label, text in headline(r)]


def hotspot_markdown(r: RunReport) -> list[str]:
    """Top files and processes of the baseline (and best kept) trace by I/O time and bytes."""
    out: list[str] = []
    for arm, title, prefix, rows in hotspot_tables(r):
        under = f", paths under {md_code(prefix)}" if prefix else ""
        head = f"Top {title[0].lower()}{title[1:]} ({arm} trace{under}):"
        out += [head, "", *markdown_table(HOTSPOT_COLUMNS, rows), ""]
    return out


def render_run_markdown(r: RunReport) -> str:
    """The run's report.md."""
    lines = [f"# dftune report: {md_text(r.workload or r.spec_path)} (run {md_code(r.run_id)})", ""]
    lines += [
        f"**Status:** {md_text(r.status)}" + (f": {md_text(r.status_reason)}" if r.status_reason else ""),
        "",
    ]
    waiting = pending_lines(r)
    if waiting:  # the first thing a person reads in the morning: the run's questions for them
        lines += ["## Pending confirmation", "", *(f"- {md_text(w)}" for w in waiting), ""]
    lines += ["## At a glance", "", *glance_markdown(r), ""]
    lines += summary_markdown(r)
    base, inc = r.baseline, r.incumbent
    if base is not None:
        lines += ["## Outcome", ""]
        lines += markdown_table(
            ["", "median", "95% CI of the median", "replicates ok", "settings"],
            [
                [name, num(m.median if m else None), ci(m.ci95 if m else None), _ok(m), conf]
                for name, m, conf in (
                    ("baseline", base, arm_configuration(r, base)),
                    ("best kept", inc, arm_configuration(r, inc, best=True)),
                )
            ],
        )
        lines.append("")
    partial, note = coverage_note(r)
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
            [[f.kind, f.finding, _severity_score(f), f.detail, f.source] for f in findings(r)],
        ),
        "",
    ]
    for pit in r.pitfalls:
        lines.append(f"- tracer blind spot: {md_text(pit.message)}")
    hot = hotspot_markdown(r)
    if hot:
        lines += ["", "## Hotspots", "", *hot]
    lines += ["", "## Proposal table", ""]
    lines += proposal_markdown(proposal_rows(r))
    refused = [p for p in r.proposals if p.status in REFUSED]
    if refused:
        lines += ["", "Refused before anything was applied:", ""]
        lines += [
            f"- {md_code(p.id)} ({md_text(p.strategy)}): **{md_text(p.status)}**: {md_text(p.reason)}"
            for p in refused
        ]
    fixes = fix_rows(r)
    if fixes:
        lines += ["", "### How to apply each fix", ""]
        for snip, applied in fixes:
            lines += snippet_markdown(snip, applied)
    manual = [p for p in r.proposals if p.status == "manual" and p.citation]
    if manual:
        lines += ["", "Recommendations dftune does not apply itself:", ""]
        lines += [f"- {md_code(p.strategy)}: {md_text(p.reason)}" for p in manual]
    lines += ["", "## Checklist (12 categories)", ""]
    lines += markdown_table(
        ["#", "category", "verdict", "reason"],
        [[c.number, c.category, checklist_label(c.verdict), c.reason] for c in r.checklist],
    )
    lines += ["", "## Experiments", ""]
    for e in r.experiments:
        lines += [
            f"### opt{e.iteration}: {md_code(e.proposal_id)} -> {md_text(e.verdict)}"
            f"{' (kept)' if e.kept else ''}{' (reverted)' if e.reverted else ''}",
            "",
        ]
        lines += markdown_table(
            ["arm", "replicates", "median", "95% CI"],
            [_arm("reference", e.reference), _arm("candidate", e.candidate)],
        )
        said = overruled(e)  # the two verdicts are told apart, not side by side
        label = (
            f"Comparison (the statistics alone said {md_text(said)}; the verdict is the guards' below)"
            if said
            else "Comparison"
        )
        why = e.comparison.reason if e.comparison else e.verdict_reason or "-"
        lines += ["", f"{label}: {md_text(why)}", ""]
        for arm, staged in staging_notes(e):
            lines += [f"Staging ({arm}): {md_text(staged)}", ""]
        if e.verdict_reason:
            lines += [f"KB verdict: {md_text(e.verdict_reason)}", ""]
        for g in r.guard_decisions:
            if g.iteration == e.iteration:
                d = g.decision
                result = "passed" if d.passed else "FAILED"
                lines.append(f"- guard **{md_text(d.guard)}**: {result}: {md_text(d.reason)}")
        lines.append("")
    lines += hints_markdown(r)
    if r.kb_records:
        lines += [
            f"Knowledge-base records: {', '.join(str(i) for i in r.kb_records)}"
            + (f" (published to {md_code(r.kb_skill_path)})" if r.kb_skill_path else ""),
            "",
        ]
    screen = [g for g in r.guard_decisions if g.iteration is None]
    if screen:
        lines += ["## Guard decisions before anything was applied", ""]
        lines += markdown_table(
            ["proposal", "guard", "result", "reason"],
            [
                [
                    g.proposal_id,
                    g.decision.guard,
                    "passed" if g.decision.passed else "FAILED",
                    g.decision.reason,
                ]
                for g in screen
            ],
        )
        lines.append("")
    lines += approvals_markdown(r)
    lines += reasoning_markdown(r)
    cites = citations(r)
    if cites:
        lines += ["## Citations", ""]
        for c in cites:
            lines.append(
                f"- \\[{md_text(c.id)}\\] {md_text(c.reference())} {md_link(c.url)} — supports: "
                f"{md_text(c.claim)} (checked: {md_text(c.evidence)})"
            )
            if c.passage:
                page = f", page {md_text(c.page)}" if c.page else ""
                lines.append(f"  > {md_text(c.passage)}{page}")
            elif c.catalog_backed:
                lines.append("  (catalog-backed claim: no passage of the source is stored locally)")
    return "\n".join(lines).rstrip() + "\n"


def _ok(m: Measurement | None) -> str:
    return f"{m.ok}/{m.replicates}" if m else "-"
