"""The run report as one self-contained HTML file: inline CSS, plots as data-URI SVG, no network.

Everything taken from the run (paper text, trace and file names, knob values, reasons) is data
and is escaped; links are emitted only for http(s) URLs. The plots are ``<img>`` elements, so an
SVG can neither run script nor clash with another figure's element ids.
"""

from __future__ import annotations

import base64
import functools
import html
from importlib import resources

from dftune.core.citation import CitedClaim
from dftune.core.domain.experiments import GuardRecord
from dftune.core.domain.proposals import REFUSED
from dftune.core.domain.run import RunReport
from dftune.core.domain.stats import TEST_NAMES
from dftune.tools.report.fixes import SEVERITY_CSS, SEVERITY_LEGEND, severity_html, snippet_html
from dftune.tools.report.glance import GLANCE_CSS, glance_html, hotspots_html
from dftune.tools.report.hints import hints_html
from dftune.tools.report.htmlkit import ci, e, ident, link, num, table, tag
from dftune.tools.report.plots import Plot, plots_unavailable, traced_arms
from dftune.tools.report.sections import (
    ESTIMATED,
    KB_MEASURED,
    MODEL_ESTIMATED,
    arm_configuration,
    checklist_label,
    citations,
    coverage_note,
    findings,
    fix_rows,
    guard_when,
    overruled,
    proposal_rows,
    reasoning_html,
)
from dftune.tools.report.staging import staging_notes
from dftune.tools.report.table import EXTRA_COLUMNS, PROPOSAL_COLUMNS
from dftune.tools.trace.render import human_bytes

SECTIONS = (
    ("glance", "At a glance"),
    ("outcome", "Outcome"),
    ("plots", "Plots"),
    ("findings", "What was wrong"),
    ("hotspots", "Hotspots"),
    ("proposals", "Proposal table"),
    ("checklist", "Checklist"),
    ("experiments", "Experiments"),
    ("guards", "Guard decisions"),
    ("pitfalls", "Tracer pitfalls"),
    ("citations", "Citations"),
)


@functools.cache
def css() -> str:
    """The reports' style sheet (resources/report/report.css), inlined in every page: no network."""
    return (resources.files("dftune.resources") / "report" / "report.css").read_text(encoding="utf-8")


def _impact(pct: float, source: str) -> str:
    return tag("n/a") if source == "n/a" else f"{pct:.2f}% {tag(source)}"


def render_run_html(r: RunReport, plots: list[Plot]) -> str:
    """The run's report.html; ``plots`` come from :func:`dftune.tools.report.plots.build_plots`."""
    title = f"dftune report: {r.workload or r.spec_path}"
    parts = [
        "<!DOCTYPE html>",
        '<html lang="en"><head><meta charset="utf-8">',
        '<meta name="viewport" content="width=device-width, initial-scale=1">',
        # nothing may load from anywhere: the report is one file, readable offline
        '<meta http-equiv="Content-Security-Policy" content="default-src \'none\'; img-src data:; '
        "style-src 'unsafe-inline'\">",
        f"<title>{e(title)}</title><style>{css()}{GLANCE_CSS}{SEVERITY_CSS}</style></head><body>",
        f'<header><h1>{e(title)}</h1><div class="meta">run {e(r.run_id)} · status '
        f"<b>{e(r.status)}</b>"
        f"{' (' + e(r.status_reason) + ')' if r.status_reason else ''}"
        f" · system {e(r.system)} · data filesystem {e(r.fs_type)}"
        f" · mode {e(r.mode)}"
        f" · reasoner {e(r.model)}</div></header>",
        "<nav>" + "".join(f'<a href="#{k}">{e(t)}</a>' for k, t in SECTIONS) + "</nav><main>",
        glance_html(r),
        _outcome(r),
        plots_section(plots),  # people would rather look than read: the pictures right after the outcome
        _findings(r),
        hotspots_html(r),
        _proposals(r),
        _checklist(r),
        _experiments(r),
        hints_html(r),
        _guards(r),
        _pitfalls(r),
        reasoning_html(r),
        _citations(r),
        "</main></body></html>",
    ]
    return "\n".join(parts) + "\n"


def _outcome(r: RunReport) -> str:
    out = ['<section id="outcome"><h2>Outcome</h2>']
    if r.summary:
        out.append(f"<p>{e(r.summary)}</p>")
    o = r.outcome
    cards = [
        ("baseline median", num(o.baseline_median if o else None)),
        ("best kept median", num(o.best_median if o else None)),
        ("overall change", f"{o.overall_pct if o else 0.0:+.1f}%"),
        ("experiments", str(o.experiments if o else len(r.experiments))),
        ("wins kept", str(len(o.wins) if o else 0)),
    ]
    out.append(
        '<div class="cards">'
        + "".join(
            f'<div class="card"><div class="v">{e(v)}</div><div class="k">{e(k)}</div></div>'
            for k, v in cards
        )
        + "</div>"
    )
    if r.baseline is not None:
        rows = [
            [
                e(name),
                num(m.median),
                e(ci(m.ci95)),
                e(f"{m.ok}/{m.replicates}"),
                e(arm_configuration(r, m, best=name == "best kept")),
            ]
            for name, m in (("baseline", r.baseline), ("best kept", r.incumbent))
            if m is not None
        ]
        out.append(
            table(["", "median", "95% CI of the median", "replicates ok", "settings"], rows, num=(1, 2, 3))
        )
        out.append(
            '<p class="note">Positive change = better on the metric. Medians and confidence intervals come '
            "from the runner's replicates of each arm.</p>"
        )
    partial, note = coverage_note(r)
    out.append(f'<div class="banner"><b>{e(note)}</b></div>' if partial else f'<p class="note">{e(note)}</p>')
    out.append("</section>")
    return "".join(out)


def _findings(r: RunReport) -> str:
    rows = findings(r)
    out = [
        '<section id="findings"><h2>What was wrong: findings</h2>',
        "<p>Measured findings come from this run's traces and experiments; estimates are expected "
        "effects of the cited fixes (a trace model, an earlier run's measurement in the knowledge base, or "
        "the model) and are never counted as measured here. Each row names its source.</p>",
    ]
    for kind, title in (
        ("measured", "Measured (this run)"),
        (ESTIMATED, "Estimated, or measured before (not measured in this run)"),
    ):
        subset = [
            f
            for f in rows
            if f.kind == kind or (kind == ESTIMATED and f.kind in (MODEL_ESTIMATED, KB_MEASURED))
        ]
        out.append(f"<h3>{e(title)}</h3>")
        if not subset:
            out.append('<p class="note">none</p>')
            continue
        out.append(
            table(
                ["kind", "finding", "score", "detail", "source"],
                [
                    [
                        tag(f.kind, "measured" if kind == "measured" else "estimate"),
                        e(f.finding),
                        (severity_html(f.severity) + " " if f.severity else "") + e(f.score),
                        e(f.detail),
                        e(f.source),
                    ]
                    for f in subset
                ],
                num=(2,),
            )
        )
        if kind == "measured" and any(f.severity for f in subset):
            out.append(f'<p class="note">{e(SEVERITY_LEGEND)}</p>')
    out.append(_baseline_glance(r))
    out.append("</section>")
    return "".join(out)


def _baseline_glance(r: RunReport) -> str:
    """The baseline trace's headline numbers (the evidence behind the measured findings)."""
    a = dict(traced_arms(r)).get("baseline")
    if a is None:
        return ""
    rows = [
        ("trace files / events / processes", f"{a.files} / {a.events:,} / {a.processes}"),
        ("job time", f"{a.job_time_s:.4g} s"),
        ("time in I/O calls (summed)", f"{a.io_time_s:.4g} s"),
        (
            "unoverlapped I/O time",
            f"{a.unoverlapped_io_time_s:.4g} s ({100 * a.unoverlapped_io_fraction:.1f}% of job)",
        ),
        (
            "read: calls / bytes / time",
            f"{a.read.count:,} / {human_bytes(a.read.bytes or 0)} / {a.read.time_s:.4g} s",
        ),
        (
            "write: calls / bytes / time",
            f"{a.write.count:,} / {human_bytes(a.write.bytes or 0)} / {a.write.time_s:.4g} s",
        ),
        ("metadata: calls / time", f"{a.metadata.count:,} / {a.metadata.time_s:.4g} s"),
        ("sync: calls / time", f"{a.sync.count:,} / {a.sync.time_s:.4g} s"),
        (
            "read / write / metadata share of I/O time",
            f"{a.read_time_pct:.1f}% / {a.write_time_pct:.1f}% / {a.metadata_time_pct:.1f}%",
        ),
        ("small I/O (< 1 MiB)", f"{a.small_io_pct:.1f}%"),
        (
            "sequential / consecutive / random",
            f"{a.seq_pct:.1f}% / {a.consecutive_pct:.1f}% / {a.rand_pct:.1f}%",
        ),
        ("files accessed", f"{a.files_accessed:,}"),
    ]
    return "<h3>Baseline trace at a glance</h3>" + table(["metric", "value"], [[e(k), e(v)] for k, v in rows])


def plots_section(plots: list[Plot]) -> str:
    """The plots as embedded SVG figures (or why each was not drawn), shared by the run and input reports.

    No plot at all means matplotlib is missing: one line says which extra draws them."""
    out = ['<section id="plots"><h2>Plots</h2>']
    if not plots:
        out.append(f'<p class="note">{e(plots_unavailable() or "No plot for this report.")}</p>')
    for p in plots:
        out.append(f'<figure id="plot-{e(p.key)}"><h3>{e(p.title)}</h3>')
        if p.svg:
            data = base64.b64encode(p.svg.encode("utf-8")).decode("ascii")
            out.append(f'<img alt="{e(p.title)}" src="data:image/svg+xml;base64,{data}">')
        else:
            out.append(f'<p class="note">Not drawn: {e(p.note)}</p>')
        caption = p.caption + (f" Note: {p.note}." if p.svg and p.note else "")
        out.append(f"<figcaption>{e(caption)}</figcaption></figure>")
    out.append("</section>")
    return "".join(out)


def _proposals(r: RunReport) -> str:
    out = [
        '<section id="proposals"><h2>Proposal table</h2>',
        "<p>Columns of the dftracer-io-optimization skill's proposal table, sorted by the weighted score "
        "(50% app impact, 50% system impact). Every row "
        "carries a checked citation; every impact says where it came from "
        "(measured here, the KB, a trace model, the model) or n/a.</p>",
    ]
    rows = [
        [
            e(row.number),
            f"{ident(row.strategy)} ({e(row.layer)})",
            e(row.description),
            _impact(row.app_impact_pct, row.app_impact_source),
            _impact(row.system_impact_pct, row.system_impact_source),
            f"{row.weighted_score:.2f}",
            tag(row.status),
            (link(row.url, row.citation) if row.citation else tag("UNSUPPORTED", "unsupported")),
        ]
        for row in proposal_rows(r)
    ]
    out.append(
        table([*PROPOSAL_COLUMNS, *EXTRA_COLUMNS], rows, num=(0, 3, 4, 5))
        if rows
        else '<p class="note">No cited proposal.</p>'
    )
    refused = [p for p in r.proposals if p.status in REFUSED]
    if refused:
        out.append("<h3>Refused before anything was applied</h3>")
        out.append(
            table(
                ["proposal", "strategy", "status", "reason"],
                [[ident(p.id), ident(p.strategy), tag(p.status), e(p.reason)] for p in refused],
            )
        )
    fixes = fix_rows(r)
    if fixes:
        out.append(
            '<h3 id="fixes">How to apply each fix</h3><p>The change as code or configuration, from the '
            "strategy catalog (values are the catalog's recommended ones; where dftune measured the fix, the "
            "setting it measured is named).</p>"
        )
        out.extend(snippet_html(snip, applied) for snip, applied in fixes)
    manual = [(p, p.citation) for p in r.proposals if p.status == "manual" and p.citation]
    if manual:
        out.append("<h3>Recommendations dftune does not apply itself</h3>")
        out.append(
            table(
                ["strategy", "description", "why not applied", "citation"],
                [
                    [ident(p.strategy), e(p.description), e(p.reason), link(c.url, c.reference())]
                    for p, c in manual
                ],
            )
        )
    out.append("</section>")
    return "".join(out)


def _checklist(r: RunReport) -> str:
    rows = [
        [e(c.number), e(c.category), tag(checklist_label(c.verdict), c.verdict), e(c.reason)]
        for c in sorted(r.checklist, key=lambda c: c.number)
    ]
    body = (
        table(["#", "category", "verdict", "reason"], rows, num=(0,))
        if rows
        else '<p class="note">The checklist was not evaluated (no baseline).</p>'
    )
    return (
        f'<section id="checklist"><h2>Checklist ({len(rows)} categories)</h2>'
        "<p>Every category gets a verdict and a reason, including the ones that turned out not to matter.</p>"
        f"{body}</section>"
    )


def _experiments(r: RunReport) -> str:
    out = ['<section id="experiments"><h2>Experiments</h2>']
    if not r.experiments:
        out.append('<p class="note">No experiment ran.</p>')
    for x in r.experiments:
        cmp = x.comparison
        state = " (kept)" if x.kept else (" (reverted)" if x.reverted else "")
        out.append(
            f"<h3>opt{e(x.iteration)}: <code>{e(x.proposal_id)}</code> ({e(x.strategy)}) "
            f"{tag(x.verdict or 'pending')}{html.escape(state)}</h3>"
        )
        arms = [
            [
                e(name),
                e(", ".join(f"{v:.4g}" for v in m.values)),
                num(m.median),
                e(ci(m.ci95)),
                e(f"{m.ok}/{m.replicates}"),
            ]
            for name, m in (("reference", x.reference), ("candidate", x.candidate))
            if m is not None
        ]
        out.append(table(["arm", "replicates", "median", "95% CI of the median", "ok"], arms, num=(2, 3, 4)))
        if cmp is not None:
            stats = [
                f"change {cmp.change_pct:+.2f}%",
                f"95% CI of the ratio {ci(cmp.ci95)}",
                f"{TEST_NAMES[cmp.test]} p = {cmp.p_value:.4g}",
            ]
            out.append(f"<p><b>{e('; '.join(stats))}</b></p>")
        said = overruled(x)
        label = (
            f"Comparison (the statistics alone said {said}; the verdict is below)" if said else "Comparison"
        )
        out.append(f"<p>{e(label)}: {e(cmp.reason if cmp and cmp.reason else x.verdict_reason)}</p>")
        for arm, staged in staging_notes(x):
            out.append(f"<p>Staging ({e(arm)}): {e(staged)}</p>")
        if x.verdict_reason:
            out.append(f"<p>Verdict: {e(x.verdict_reason)}</p>")
        mine = [g.decision for g in r.guard_decisions if g.iteration == x.iteration]
        if mine:
            out.append(
                "<ul>"
                + "".join(
                    f"<li>guard <b>{e(d.guard)}</b> {tag('passed' if d.passed else 'failed')}"
                    f": {e(d.reason)}</li>"
                    for d in mine
                )
                + "</ul>"
            )
    if r.kb_records:
        out.append(
            f"<p>Knowledge-base records: {e(', '.join(str(i) for i in r.kb_records))}"
            + (f" (published to <code>{e(r.kb_skill_path)}</code>)" if r.kb_skill_path else "")
            + "</p>"
        )
    out.append("</section>")
    return "".join(out)


def _guards(r: RunReport) -> str:
    def rows(gs: list[GuardRecord]) -> list[list[str]]:
        return [
            [
                e(g.proposal_id),
                e(guard_when(g)),
                e(g.decision.guard),
                tag("passed" if g.decision.passed else "failed"),
                e(g.decision.reason),
            ]
            for g in gs
        ]

    head = ["proposal", "when", "guard", "result", "reason"]
    # what decided the outcome first: every judgment of an experiment and every refusal
    key = [g for g in r.guard_decisions if g.iteration is not None or not g.decision.passed]
    screened = [g for g in r.guard_decisions if g.iteration is None]
    out = [
        '<section id="guards"><h2>Guard decisions</h2>',
        "<p>Hard-coded guards (citation, access pattern, no doing less, non-degradation) stand in front of "
        "every change and every knowledge-base record. Below: every judgment of an experiment and every "
        "refusal; the full screening log follows.</p>",
    ]
    out.append(
        table(head, rows(key))
        if key
        else '<p class="note">No guard refused anything and no experiment was judged.</p>'
    )
    if screened:
        failed = sum(not g.decision.passed for g in screened)
        out.append(
            f"<details><summary>All {len(screened)} screening decisions taken before anything was applied "
            f"({failed} refused)</summary>{table(head, rows(screened))}</details>"
        )
    approvals = [
        [
            e(a.proposal_id),
            tag("approved" if a.approved else "refused", "passed" if a.approved else "failed"),
            e(a.by),
            e(a.reason),
        ]
        for a in r.approvals
    ]
    if approvals:
        out.append("<h3>Approvals</h3>" + table(["proposal", "answer", "by", "reason"], approvals))
    out.append("</section>")
    return "".join(out)


def _pitfalls(r: RunReport) -> str:
    body = (
        (
            "<ul>"
            + "".join(
                f"<li><b>{e(p.message)}</b>"
                + (f'<br><span class="note">{e(p.detail)}</span>' if p.detail else "")
                + "</li>"
                for p in r.pitfalls
            )
            + "</ul>"
        )
        if r.pitfalls
        else '<p class="note">The installer found no blind spot of the tracer here.</p>'
    )
    return (
        '<section id="pitfalls"><h2>Tracer pitfalls</h2><p>What dftracer does not see on this machine: '
        f"absence of these calls in a trace is not evidence.</p>{body}</section>"
    )


def _backing(c: CitedClaim) -> str:
    """The issue's rule, shown: the source's own passage, or a claim backed only by the curated catalog."""
    if c.passage:
        page = f", page {e(c.page)}" if c.page else ""
        return f'<blockquote class="note">“{e(c.passage)}”{page}</blockquote>'
    if c.catalog_backed:
        return ' <span class="tag">catalog-backed claim</span>'
    return ""


def _citations(r: RunReport) -> str:
    items = [
        f'<li id="cite-{e(c.id)}"><b>[{e(c.id)}]</b> {e(c.reference())} {link(c.url)}'
        f'<br><span class="note">Supports: {e(c.claim)} (checked: {e(c.evidence)}; '
        f"source: {e(c.source)})</span>{_backing(c)}</li>"
        for c in citations(r)
    ]
    body = f'<ol class="cites">{"".join(items)}</ol>' if items else '<p class="note">No citation.</p>'
    return f'<section id="citations"><h2>Citations</h2>{body}</section>'
