"""The HTML report's first screen (what is slow, what fixed it, by how much, what next, coverage)
and its hotspots (top files and processes by I/O time and bytes, baseline and best kept)."""

from __future__ import annotations

from dftune.core.domain.run import RunReport
from dftune.tools.report.htmlkit import e, table
from dftune.tools.report.plots import traced_arms
from dftune.tools.report.sections import coverage_note, headline, hotspots

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


def _bytes(n: float) -> str:
    for unit, size in (("GiB", 1 << 30), ("MiB", 1 << 20), ("KiB", 1 << 10)):
        if n >= size:
            return f"{n / size:.1f} {unit}"
    return f"{n:,.0f} B"


def hotspots_html(r: RunReport) -> str:
    """Top-N tables per traced arm; the rank x time heatmap is among the plots."""
    out = [
        '<section id="hotspots"><h2>Hotspots</h2><p>Where the I/O time and the bytes went, from the first '
        "traced replicate of each arm (the rank × time heatmap is with the plots).</p>"
    ]
    shown = False
    for arm, a in traced_arms(r):
        hot = hotspots(a)
        for key, title in (
            ("file_by_time", "Files by I/O time"),
            ("file_by_bytes", "Files by bytes moved"),
            ("proc_by_time", "Processes by I/O time"),
            ("proc_by_bytes", "Processes by bytes moved"),
        ):
            rows = hot.get(key) or []
            if not rows:
                continue
            shown = True
            under = (
                f", paths under <code>{e(hot['file_prefix'])}</code>"
                if key.startswith("file") and hot["file_prefix"]
                else ""
            )
            out.append(f"<h3>{e(title)} ({e(arm)}{under})</h3>")
            out.append(
                table(
                    ["name", "I/O time (s)", "read", "written", "calls"],
                    [
                        [
                            e(r["name"]),
                            e(f"{r['io_time_s']:.4g}"),
                            e(_bytes(r["read_bytes"])),
                            e(_bytes(r["write_bytes"])),
                            e(f"{r['ops']:,}"),
                        ]
                        for r in rows
                    ],
                    num=(1, 2, 3, 4),
                )
            )
    if not shown:
        out.append('<p class="note">No traced arm: no hotspots.</p>')
    out.append("</section>")
    return "".join(out)
