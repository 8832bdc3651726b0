"""The HTML report's first screen (what is slow, what fixed it, by how much, what next, coverage)
and its hotspots (top files and processes by I/O time and bytes, baseline and best kept)."""

from __future__ import annotations

from dftune.core.domain.run import RunReport
from dftune.tools.report.htmlkit import e, table
from dftune.tools.report.sections import HOTSPOT_COLUMNS, coverage_note, headline, hotspot_tables

GLANCE_CSS = """
.glance { border: 1px solid var(--line); border-left: 5px
solid #2c5282; background: var(--bg); padding: 6px 16px;
          margin: 16px 0; }
.glance dt { font-weight: 600; float: left; width: 110px; clear: left; }
.glance dd { margin: 4px 0 4px 120px; }
"""


def glance_html(r: RunReport) -> str:
    """The answers a performance engineer wants first, one line each."""
    rows = headline(r)
    partial, _ = coverage_note(r)
    items = "".join(
        f"<dt>{e(k)}</dt><dd>{'<b>' if k == 'Coverage' and partial else ''}{e(v)}"
        f"{'</b>' if k == 'Coverage' and partial else ''}</dd>"
        for k, v in rows
    )
    return f'<section id="glance"><h2>At a glance</h2><dl class="glance">{items}</dl></section>'


def hotspots_html(r: RunReport) -> str:
    """Top-N tables per traced arm; the rank x time heatmap is among the plots."""
    out = [
        '<section id="hotspots"><h2>Hotspots</h2><p>Where the I/O time and the bytes went, from the first '
        "traced replicate of each arm (the rank × time heatmap is with the plots).</p>"
    ]
    tables = hotspot_tables(r)
    for arm, title, prefix, rows in tables:
        under = f", paths under <code>{e(prefix)}</code>" if prefix else ""
        out.append(f"<h3>{e(title)} ({e(arm)}{under})</h3>")
        out.append(table(HOTSPOT_COLUMNS, [[e(c) for c in row] for row in rows], num=(1, 2, 3, 4)))
    if not tables:
        out.append('<p class="note">No traced arm: no hotspots.</p>')
    out.append("</section>")
    return "".join(out)
