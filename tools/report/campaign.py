"""A campaign's combined report (Markdown and HTML): coverage first, then one row per workload.

The first lines say what the night covered: which workloads were tuned, which failed their
baseline, which are still pending, and how many baseline units each one has, so a partial
night is never read as the whole picture. Each workload then gets its run's morning view and a
link to its own report. Every string from the runs is escaped.
"""

from __future__ import annotations

import time
from pathlib import Path
from typing import Any

from dftune.core import strictjson
from dftune.core.errors import DftuneError
from dftune.core.fsio import atomic_write_bytes
from dftune.core.safetext import md_code, md_text
from dftune.tools.report.htmlkit import e, table
from dftune.tools.report.sections import gain_text, headline, metric_of, overall, pending_changes, with_unit
from dftune.tools.report.table import markdown_table
from dftune.tools.runner.deadline import clock
from dftune.tools.session.campaigns import CampaignMeta
from dftune.tools.session.workspace import Workspace

#: Seconds a member's HTML report (plots from its traces) is given; skipped when the deadline is
#: closer. A campaign keeps this much before its combined report, so a run the deadline cut keeps
#: its page; ``dftune report CAMPAIGN --html`` writes any that are missing.
MEMBER_HTML_S = 20.0


def _report_doc(run_dir: Path) -> dict[str, Any] | None:
    try:
        doc = strictjson.loads((run_dir / "report.json").read_bytes())
    except (OSError, ValueError):
        return None
    return doc if isinstance(doc, dict) else None


def member_rows(meta: CampaignMeta, ws: Workspace) -> list[dict[str, Any]]:
    """One summary per workload, from its run's report.json (what a run without one can say, otherwise)."""
    rows = []
    for m in meta.members:
        run_dir = ws.run_dir(m.run_id)
        doc = _report_doc(run_dir)
        row: dict[str, Any] = {
            "workload": m.workload,
            "run_id": m.run_id,
            "spec_path": m.spec_path,
            "status": m.status,
            "reason": m.reason,
            "coverage": m.coverage,
            "pending": m.pending,
            "report": str(run_dir / "report.md") if (run_dir / "report.md").is_file() else None,
            "html": str(run_dir / "report.html") if (run_dir / "report.html").is_file() else None,
        }
        if doc is not None:
            metric = metric_of(doc)
            total = overall(doc)
            exps = doc.get("experiments", [])
            row.update(
                metric=metric,
                baseline_median=(doc.get("baseline") or {}).get("median"),
                best_median=(doc.get("incumbent") or {}).get("median"),
                change_pct=total["pct"] if total else None,
                change_ci=total["ci"] if total else None,
                experiments=sum(x.get("candidate") is not None for x in exps),
                wins=sum(bool(x.get("kept")) and x.get("verdict") != "pending" for x in exps),
                pending=[
                    {"proposal_id": p["proposal"], "question": p["question"], "change_pct": p["pct"]}
                    for p in pending_changes(doc)
                ]
                or m.pending,
                glance=headline(doc),
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


def coverage_sentence(rows: list[dict[str, Any]]) -> tuple[bool, str]:
    """(partial?, the sentence): which workloads and baseline units this report covers."""
    ended = ("completed", "awaiting_approval")
    tuned = [
        f"{r['workload']} ({r['experiments']} experiment(s), {r.get('wins', 0)} kept)"
        for r in rows
        if r["status"] in ended and r.get("experiments")
    ]
    baseline_only = [r["workload"] for r in rows if r["status"] in ended and not r.get("experiments")]
    gated = [r["workload"] for r in rows if r["status"] == "not_worth_tuning"]
    failed = [f"{r['workload']} ({r['reason'] or 'failed'})" for r in rows if r["status"] == "failed"]
    waiting = [
        f"{r['workload']} (dftune approve {r['run_id']})" for r in rows if r["status"] == "awaiting_approval"
    ]
    pending = [
        f"{r['workload']} ({r['reason'] or r['status']})"
        for r in rows
        if r["status"] in ("interrupted", "pending", "running")
    ]
    units = [r.get("coverage") or {} for r in rows]
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
        f"{r['workload']} ({len(r['pending'])}: dftune approve {r['run_id']} [--reject])"
        for r in rows
        if r.get("pending") and r["status"] != "awaiting_approval"
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


def change_text(r: dict[str, Any]) -> str:
    return gain_text(r.get("change_pct"), r.get("change_ci")) if r.get("change_pct") is not None else "-"


def medians_text(r: dict[str, Any]) -> str:
    unit = (r.get("metric") or {}).get("unit", "")
    if r.get("baseline_median") is None:
        return "-"
    return f"{with_unit(r['baseline_median'], unit)} -> {with_unit(r.get('best_median'), unit)}"


def no_page(meta: CampaignMeta) -> str:
    """What a member without its HTML page reads (the deadline left no time for its plots, or a
    report without ``--html`` was asked for): the command that writes it."""
    return f"no HTML page yet: dftune report {meta.id} --html"


def render_campaign_markdown(meta: CampaignMeta, rows: list[dict[str, Any]]) -> str:
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
                r["workload"],
                r["run_id"],
                r["status"],
                units_text(r.get("coverage")),
                (r.get("metric") or {}).get("name", "-"),
                medians_text(r),
                change_text(r),
                f"{r.get('experiments', 0)} ({r.get('wins', 0)})",
            ]
            for r in rows
        ],
    )
    for r in rows:
        lines += ["", f"## {md_text(r['workload'])} (run {md_code(r['run_id'])}): {md_text(r['status'])}", ""]
        if r.get("reason"):
            lines += [md_text(r["reason"]), ""]
        for label, text in r.get("glance") or []:
            lines.append(f"- **{label}:** {md_text(text)}")
        if r.get("report"):
            lines += [
                "",
                f"Report: {md_code(r['report'])}"
                + (f", {md_code(r['html'])}" if r.get("html") else f" ({md_text(no_page(meta))})"),
            ]
    return "\n".join(lines).rstrip() + "\n"


def render_campaign_html(meta: CampaignMeta, rows: list[dict[str, Any]]) -> str:
    from dftune.tools.report.glance import GLANCE_CSS
    from dftune.tools.report.html import CSS

    partial, cov = coverage_sentence(rows)
    out = [
        "<!DOCTYPE html>",
        '<html lang="en"><head><meta charset="utf-8">',
        '<meta name="viewport" content="width=device-width, initial-scale=1">',
        '<meta http-equiv="Content-Security-Policy" '
        "content=\"default-src 'none'; style-src 'unsafe-inline'\">",
        f"<title>dftune campaign: {e(meta.name)}</title><style>{CSS}{GLANCE_CSS}</style></head><body>",
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
                    e(r["workload"]),
                    f"<code>{e(r['run_id'])}</code>",
                    e(r["status"]),
                    e(units_text(r.get("coverage"))),
                    e((r.get("metric") or {}).get("name")),
                    e(medians_text(r)),
                    e(change_text(r)),
                    e(f"{r.get('experiments', 0)} ({r.get('wins', 0)})"),
                ]
                for r in rows
            ],
        )
    )
    for r in rows:
        out.append(
            f'<h2>{e(r["workload"])} <span class="note">run <code>{e(r["run_id"])}</code>: '
            f"{e(r['status'])}</span></h2>"
        )
        if r.get("reason"):
            out.append(f"<p>{e(r['reason'])}</p>")
        if r.get("glance"):
            out.append(
                '<dl class="glance">'
                + "".join(f"<dt>{e(k)}</dt><dd>{e(v)}</dd>" for k, v in r["glance"])
                + "</dl>"
            )
        if r.get("report"):
            missing = "" if r.get("html") else f" ({e(no_page(meta))})"
            out.append(f'<p class="note">Report: <code>{e(r["html"] or r["report"])}</code>{missing}</p>')
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
