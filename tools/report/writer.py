"""``dftune report``: (re)write a finished run's report.md and, on request, report.html."""

from __future__ import annotations

from pathlib import Path
from typing import Any

from dftune.core import strictjson
from dftune.core.errors import DftuneError
from dftune.core.fsio import atomic_write_bytes
from dftune.tools.report.html import render_run_html
from dftune.tools.report.markdown import render_run_markdown
from dftune.tools.report.plots import build_plots
from dftune.tools.session.workspace import Workspace

REPORT_JSON = "report.json"


class ReportError(DftuneError):
    """The run exists but has no final state to report on yet."""


def load_report(run_id: str, workspace: Workspace | None = None) -> tuple[Path, dict[str, Any]]:
    """The run's folder and its ``report.json`` (the final graph state, written by finalize)."""
    ws = workspace or Workspace()
    meta = ws.read_meta(run_id)  # unknown run: RunNotFound, one line
    run_dir = ws.run_dir(run_id)
    path = run_dir / REPORT_JSON
    if not path.is_file():
        how = (
            f"answer it with `dftune approve {run_id}` (or --reject)"
            if meta.status == "awaiting_approval"
            else f"continue it with `dftune resume {run_id}`"
        )
        raise ReportError(
            f"run {run_id} has not finished (status {meta.status}), so it has no report yet; {how}"
        )
    try:
        doc = strictjson.read_file(path)
    except strictjson.JSONFileError as exc:
        raise ReportError(f"{exc}; rerun `dftune resume {run_id}`") from None
    if not isinstance(doc, dict) or "run_id" not in doc:
        raise ReportError(f"{path} is not a dftune run report")
    return run_dir, doc


def write_reports(run_id: str, *, html: bool = False, workspace: Workspace | None = None) -> dict[str, str]:
    """Write report.md (always) and report.html (``html``); returns their paths by format."""
    run_dir, doc = load_report(run_id, workspace)
    md = run_dir / "report.md"
    atomic_write_bytes(md, render_run_markdown(doc).encode("utf-8"))
    out = {"markdown": str(md)}
    if html:
        page = run_dir / "report.html"
        atomic_write_bytes(page, render_run_html(doc, build_plots(doc)).encode("utf-8"))
        out["html"] = str(page)
    return out
