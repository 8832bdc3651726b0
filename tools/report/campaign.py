"""A campaign's combined report (Markdown and HTML): coverage first, then one row per workload.

The first lines say what the night covered: which workloads were tuned, which failed their
baseline, which are still pending, and how many baseline units each one has, so a partial
night is never read as the whole picture. Each workload then gets its run's morning view and a
link to its own report. Every string from the runs is escaped.
"""

from __future__ import annotations

import time
from pathlib import Path
from typing import Any, Literal

from pydantic import BaseModel, ConfigDict, Field

from dftune.core.domain.run import MetricInfo
from dftune.core.errors import DftuneError
from dftune.core.fsio import atomic_write_bytes
from dftune.core.model import StrictModel
from dftune.core.safetext import md_code, md_text
from dftune.tools.report.htmlkit import e, table
from dftune.tools.report.loader import REPORT_JSON, ReportError, read_run_report
from dftune.tools.report.sections import (
    gain_text,
    headline,
    kept_changes,
    overall,
    question_of,
    with_unit,
)
from dftune.tools.report.table import markdown_table
from dftune.tools.runner.deadline import clock
from dftune.tools.session.campaigns import CampaignMeta
from dftune.tools.session.workspace import Workspace

#: Seconds a member's HTML report (plots from its traces) is given; skipped when the deadline is
#: closer. A campaign keeps this much before its combined report, so a run the deadline cut keeps
#: its page; ``dftune report CAMPAIGN --html`` writes any that are missing.
MEMBER_HTML_S = 20.0


class MemberRow(StrictModel):
    """One workload of a campaign (its :class:`Member` record, its report's paths) and, when its run
    wrote a report, what the report says (those fields are left out of the JSON without one)."""

    workload: str
    run_id: str
    spec_path: str
    status: str
    reason: str
    #: the run's baseline units (ok, failed, pending of the total)
    coverage: dict[str, Any] | None
    #: what waits for a person: the run's pending items, or its changes kept on trial
    pending: list[dict[str, Any]]
    report: str | None
    html: str | None
    metric: MetricInfo | None = None
    baseline_median: float | None = None
    best_median: float | None = None
    change_pct: float | None = None
    change_ci: tuple[float, float] | None = None
    experiments: int = 0
    wins: int = 0
    glance: list[tuple[str, str]] = Field(default_factory=list)

    def document(self) -> dict[str, Any]:
        return self.model_dump(mode="json", exclude_unset=True)


class CampaignResult(BaseModel):
    """A campaign's result (schema ``dftune.campaign/1``): what ``dftune run A B --json`` prints."""

    model_config = ConfigDict(extra="forbid", populate_by_name=True)
    schema_: Literal["dftune.campaign/1"] = Field(default="dftune.campaign/1", alias="schema")
    campaign_id: str
    status: str
    status_reason: str
    deadline: float | None
    deadline_text: str | None
    ended: str | None
    finished_before_deadline: bool | None
    timing: str
    partial: bool
    #: the sentence saying which workloads and baseline units the campaign covers
    coverage: str
    members: list[MemberRow]
    report: str | None
    html: str | None
    campaign_dir: str
    #: the campaign's bundle: a bundle per workload that kept a change, and an index (docs/bundle.md)
    bundle: str | None = None

    def document(self) -> dict[str, Any]:
        return {
            **self.model_dump(mode="json", by_alias=True),
            "members": [m.document() for m in self.members],
        }


def member_rows(meta: CampaignMeta, ws: Workspace) -> list[MemberRow]:
    """One summary per workload, from its run's report.json (what a run without one can say, otherwise;
    a report.json this dftune cannot read is said in its glance, never rendered)."""
    rows = []
    for m in meta.members:
        run_dir = ws.run_dir(m.run_id)
        row = MemberRow(
            **m.model_dump(),  # the campaign's record of the member: its run, status, coverage, pending
            report=str(run_dir / "report.md") if (run_dir / "report.md").is_file() else None,
            html=str(run_dir / "report.html") if (run_dir / "report.html").is_file() else None,
        )
        path = run_dir / REPORT_JSON
        try:
            r = read_run_report(path) if path.is_file() else None
        except ReportError as exc:
            row = row.model_copy(update={"glance": [("Report", str(exc))]})
            r = None
        if r is not None:
            total = overall(r)
            trial = [
                {"proposal_id": e.proposal_id, "question": question_of(e), "change_pct": e.change_pct}
                for e in r.pending
            ]
            row = row.model_copy(
                update={
                    "metric": r.metric,
                    "baseline_median": r.baseline.median if r.baseline else None,
                    "best_median": r.incumbent.median if r.incumbent else None,
                    "change_pct": total.pct if total else None,
                    "change_ci": total.ci if total else None,
                    "experiments": sum(x.candidate is not None for x in r.experiments),
                    "wins": len(kept_changes(r)),
                    "pending": trial or m.pending,
                    "glance": headline(r),
                }
            )
        rows.append(row)
    return rows


def units_text(cov: dict[str, Any] | None) -> str:
    if not cov:
        return "-"
    out = f"{cov.get('units_ok', 0)}/{cov.get('units_total', 0)} ok"
    if cov.get("units_failed"):
        out += f", {cov['units_failed']} failed"
    if cov.get("units_pending"):
        out += f", {cov['units_pending']} pending"
    return out


def coverage_sentence(rows: list[MemberRow]) -> tuple[bool, str]:
    """(partial?, the sentence): which workloads and baseline units this report covers."""
    ended = ("completed", "awaiting_approval")
    tuned = [
        f"{r.workload} ({r.experiments} experiment(s), {r.wins} kept)"
        for r in rows
        if r.status in ended and r.experiments
    ]
    baseline_only = [r.workload for r in rows if r.status in ended and not r.experiments]
    gated = [r.workload for r in rows if r.status == "not_worth_tuning"]
    failed = [f"{r.workload} ({r.reason or 'failed'})" for r in rows if r.status == "failed"]
    waiting = [f"{r.workload} (dftune approve {r.run_id})" for r in rows if r.status == "awaiting_approval"]
    pending = [
        f"{r.workload} ({r.reason or r.status})"
        for r in rows
        if r.status in ("interrupted", "pending", "running")
    ]
    units = [r.coverage or {} for r in rows]
    ok = sum(c.get("units_ok", 0) for c in units)
    total = sum(c.get("units_total", 0) for c in units)
    parts = [f"{len(tuned)} of {len(rows)} workload(s) tuned" + (f": {', '.join(tuned)}" if tuned else "")]
    if baseline_only:
        parts.append(
            f"baseline and diagnosis only (no experiment fitted or was left): {', '.join(baseline_only)}"
        )
    if gated:
        parts.append(f"not worth tuning: {', '.join(gated)}")
    if waiting:
        parts.append(f"a change that needs a person waits (the rest ran): {', '.join(waiting)}")
    trial = [
        f"{r.workload} ({len(r.pending)}: dftune approve {r.run_id} [--reject])"
        for r in rows
        if r.pending and r.status != "awaiting_approval"
    ]
    if trial:
        parts.append(f"wins the traces could not settle wait for a person's confirmation: {', '.join(trial)}")
    if failed:
        parts.append(f"not covered (failed): {'; '.join(failed)}")
    if pending:
        parts.append(f"pending: {'; '.join(pending)}")
    parts.append(f"baseline units measured: {ok} of {total}")
    partial = bool(failed or pending) or ok < total
    return partial, ("Partial coverage: " if partial else "Coverage: ") + "; ".join(parts) + "."


def timing_text(meta: CampaignMeta) -> str:
    out = f"started {meta.created.astimezone().strftime('%Y-%m-%d %H:%M:%S')}"
    if meta.ended:
        out += f", ended {clock(meta.ended.timestamp())}"
    if meta.deadline:
        out += f"; deadline {clock(meta.deadline)}" + (
            f" (--time-budget {meta.budget})" if meta.budget else ""
        )
        if meta.ended:
            spare = meta.deadline - meta.ended.timestamp()
            out += f", finished {spare:.0f} s before it" if spare >= 0 else f", {-spare:.0f} s after it"
    return out


def change_text(r: MemberRow) -> str:
    return gain_text(r.change_pct, r.change_ci) if r.change_pct is not None else "-"


def medians_text(r: MemberRow) -> str:
    unit = r.metric.unit if r.metric else ""
    if r.baseline_median is None:
        return "-"
    return f"{with_unit(r.baseline_median, unit)} -> {with_unit(r.best_median, unit)}"


def no_page(meta: CampaignMeta) -> str:
    """What a member without its HTML page reads (the deadline left no time for its plots, or a
    report without ``--html`` was asked for): the command that writes it."""
    return f"no HTML page yet: dftune report {meta.id} --html"


def render_campaign_markdown(meta: CampaignMeta, rows: list[MemberRow]) -> str:
    partial, cov = coverage_sentence(rows)
    lines = [
        f"# dftune campaign: {md_text(meta.name)} ({md_code(meta.id)})",
        "",
        f"**Status:** {md_text(meta.status)}"
        + (f": {md_text(meta.status_reason)}" if meta.status_reason else ""),
        "",
        md_text(timing_text(meta)),
        "",
        f"**{md_text(cov)}**" if partial else md_text(cov),
        "",
    ]
    lines += markdown_table(
        [
            "workload",
            "run",
            "status",
            "baseline units",
            "metric",
            "baseline -> best kept",
            "change (95% CI)",
            "experiments (kept)",
        ],
        [
            [
                r.workload,
                r.run_id,
                r.status,
                units_text(r.coverage),
                r.metric.name if r.metric else "-",
                medians_text(r),
                change_text(r),
                f"{r.experiments} ({r.wins})",
            ]
            for r in rows
        ],
    )
    for r in rows:
        lines += ["", f"## {md_text(r.workload)} (run {md_code(r.run_id)}): {md_text(r.status)}", ""]
        if r.reason:
            lines += [md_text(r.reason), ""]
        for label, text in r.glance:
            lines.append(f"- **{label}:** {md_text(text)}")
        if r.report:
            lines += [
                "",
                f"Report: {md_code(r.report)}"
                + (f", {md_code(r.html)}" if r.html else f" ({md_text(no_page(meta))})"),
            ]
    return "\n".join(lines).rstrip() + "\n"


def render_campaign_html(meta: CampaignMeta, rows: list[MemberRow]) -> str:
    from dftune.tools.report.glance import GLANCE_CSS
    from dftune.tools.report.html import css

    partial, cov = coverage_sentence(rows)
    out = [
        "<!DOCTYPE html>",
        '<html lang="en"><head><meta charset="utf-8">',
        '<meta name="viewport" content="width=device-width, initial-scale=1">',
        '<meta http-equiv="Content-Security-Policy" '
        "content=\"default-src 'none'; style-src 'unsafe-inline'\">",
        f"<title>dftune campaign: {e(meta.name)}</title><style>{css()}{GLANCE_CSS}</style></head><body>",
        f'<header><h1>dftune campaign: {e(meta.name)}</h1><div class="meta">campaign {e(meta.id)} · status '
        f"<b>{e(meta.status)}</b> · {e(timing_text(meta))}</div></header><main>",
        f'<div class="banner"><b>{e(cov)}</b></div>' if partial else f'<p class="note">{e(cov)}</p>',
    ]
    out.append(
        table(
            [
                "workload",
                "run",
                "status",
                "baseline units",
                "metric",
                "baseline → best kept",
                "change (95% CI)",
                "experiments (kept)",
            ],
            [
                [
                    e(r.workload),
                    f"<code>{e(r.run_id)}</code>",
                    e(r.status),
                    e(units_text(r.coverage)),
                    e(r.metric.name if r.metric else None),
                    e(medians_text(r)),
                    e(change_text(r)),
                    e(f"{r.experiments} ({r.wins})"),
                ]
                for r in rows
            ],
        )
    )
    for r in rows:
        run = f"run <code>{e(r.run_id)}</code>: {e(r.status)}"
        out.append(f'<h2>{e(r.workload)} <span class="note">{run}</span></h2>')
        if r.reason:
            out.append(f"<p>{e(r.reason)}</p>")
        if r.glance:
            out.append(
                '<dl class="glance">'
                + "".join(f"<dt>{e(k)}</dt><dd>{e(v)}</dd>" for k, v in r.glance)
                + "</dl>"
            )
        if r.report:
            missing = "" if r.html else f" ({e(no_page(meta))})"
            out.append(f'<p class="note">Report: <code>{e(r.html or r.report)}</code>{missing}</p>')
    out.append("</main></body></html>")
    return "\n".join(out) + "\n"


def write_member_html(run_id: str, ws: Workspace, until: float | None) -> bool:
    """A member's report.html, unless it is already newer than its report.json or ``until`` (a
    deadline) leaves less than MEMBER_HTML_S for the plots. True when the page is there."""
    run_dir = ws.run_dir(run_id)
    source, page = run_dir / "report.json", run_dir / "report.html"
    if not source.is_file():
        return False
    if page.is_file() and page.stat().st_mtime >= source.stat().st_mtime:
        return True
    if until is not None and until - time.time() < MEMBER_HTML_S:
        return False
    from dftune.tools.report.writer import write_reports

    try:
        write_reports(run_id, html=True, workspace=ws)
    except DftuneError:
        return False
    return True


def write_campaign_reports(
    meta: CampaignMeta, ws: Workspace, folder: Path, *, html: bool = True, until: float | None = None
) -> dict[str, str]:
    """report.md (and report.html) of the campaign; with ``html``, each member's missing page too,
    while ``until`` (the deadline of a campaign still being driven) leaves time for it."""
    if html:
        for m in meta.members:
            write_member_html(m.run_id, ws, until)
    rows = member_rows(meta, ws)
    md = folder / "report.md"
    atomic_write_bytes(md, render_campaign_markdown(meta, rows).encode("utf-8"))
    out = {"markdown": str(md)}
    if html:
        page = folder / "report.html"
        atomic_write_bytes(page, render_campaign_html(meta, rows).encode("utf-8"))
        out["html"] = str(page)
    return out
