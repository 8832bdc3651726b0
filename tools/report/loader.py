"""The one reader of a run's ``report.json``: every report, ``dftune runs``, ``dftune compare`` and the
campaign report read a run through it, as its typed :class:`RunReport`."""

from __future__ import annotations

import os
from pathlib import Path

from pydantic import ValidationError

from dftune.core import strictjson
from dftune.core.domain.run import STATE_VERSION, RunReport
from dftune.core.errors import DftuneError
from dftune.tools.session.workspace import Workspace

REPORT_JSON = "report.json"


class ReportError(DftuneError):
    """The run has no report to read yet, or its report.json is not one this dftune reads."""


def read_run_report(path: Path) -> RunReport:
    """A run's ``report.json`` as its :class:`RunReport`. A file that is not JSON, or not a report of
    this dftune's shape (written by an older dftune, or edited by hand), is one line naming the
    file, the first field that does not fit and what to do; nothing is rendered from it."""
    try:
        doc = strictjson.read_file(path)
        return RunReport.model_validate(doc)
    except strictjson.JSONFileError as exc:
        raise ReportError(str(exc)) from None
    except ValidationError as exc:
        first = exc.errors()[0]
        where = ".".join(str(p) for p in first["loc"]) or "(the document)"
        version = doc.get("state_version") if isinstance(doc, dict) else None
        who = (
            f"written by an older dftune (state version {version}, this one reads {STATE_VERSION})"
            if isinstance(version, int) and version < STATE_VERSION
            else "written by another dftune, or edited by hand"
        )
        raise ReportError(
            f"{path}: not a run report this dftune reads ({who}): {where}: {first['msg']} "
            f"({exc.error_count()} error(s)); its report.md stays as it was written"
        ) from None


def load_report(run_id: str, workspace: Workspace | None = None) -> tuple[Path, RunReport]:
    """The run's folder and its report (the final graph state, written by finalize)."""
    ws = workspace or Workspace()
    meta = ws.read_meta(run_id)  # unknown run: RunNotFound, one line
    run_dir = ws.run_dir(run_id)
    path = run_dir / REPORT_JSON
    if os.path.lexists(path) and not path.is_file():
        raise ReportError(
            f"{path}: not a regular file (a folder, a pipe, a device or a broken link); move it aside "
            f"and write the report again: dftune report {run_id}"
        )
    if not path.is_file():
        how = (
            f"answer it with `dftune approve {run_id}` (or --reject)"
            if meta.status == "awaiting_approval"
            else f"continue it with `dftune resume {run_id}`"
        )
        raise ReportError(
            f"run {run_id} has not finished (status {meta.status}), so it has no report yet; {how}"
        )
    return run_dir, read_run_report(path)
