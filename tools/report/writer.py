"""``dftune report``: (re)write a finished run's report.md and, on request, report.html."""

from __future__ import annotations

from dftune.core.fsio import atomic_write_bytes
from dftune.tools.report.html import render_run_html
from dftune.tools.report.loader import load_report
from dftune.tools.report.markdown import render_run_markdown
from dftune.tools.report.plots import build_plots
from dftune.tools.session.workspace import Workspace


def write_reports(run_id: str, *, html: bool = False, workspace: Workspace | None = None) -> dict[str, str]:
    """Write report.md (always) and report.html (``html``); returns their paths by format."""
    run_dir, report = load_report(run_id, workspace)
    md = run_dir / "report.md"
    atomic_write_bytes(md, render_run_markdown(report).encode("utf-8"))
    out = {"markdown": str(md)}
    if html:
        page = run_dir / "report.html"
        atomic_write_bytes(page, render_run_html(report, build_plots(report)).encode("utf-8"))
        out["html"] = str(page)
    return out
