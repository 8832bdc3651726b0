"""The ROMIO hints in effect before any change and in each arm that asked for hints, as ROMIO
printed them (``ROMIO_PRINT_HINTS=1``), for the run report.

A hint file is a request: the program's own MPI_Info wins key by key (ROMIO Users Guide), so the
report shows what was asked next to what the MPI library said it used. The numbers come from the
run's event log: the optimizer's probe of the untouched program and the verifier's check of
every arm (see ``agents/optimizer/hints.py``).
"""

from __future__ import annotations

import re
from typing import Any

from dftune.tools.report.htmlkit import e, table
from dftune.tools.report.table import markdown_table

BEFORE_PREFIX = "hints in effect before any change: "
_OPT = re.compile(r"^opt(\d+): ")
HEAD = ["arm", "hints asked", "hints in effect (as ROMIO printed them)"]


def _asked(proposal: dict[str, Any] | None) -> dict[str, str]:
    change = (proposal or {}).get("change") or {}
    return dict(change.get("params") or {}) if "ROMIO_HINTS" in (change.get("env") or {}) else {}


def hint_rows(doc: dict[str, Any]) -> list[list[str]]:
    """[arm, asked, in effect] rows: the baseline first, then each experiment that asked for hints."""
    events = doc.get("events") or []
    rows: list[list[str]] = []
    before = next(
        (ev["message"] for ev in events if str(ev.get("message", "")).startswith(BEFORE_PREFIX)), None
    )
    if before is not None:
        rows.append(["baseline (before any change)", "-", before.removeprefix(BEFORE_PREFIX)])
    said: dict[int, str] = {}
    asked_by: dict[int, dict[str, str]] = {}  # what the arm asked: the kept hints merged with the new ones
    replaced: dict[int, str] = {}
    for ev in events:
        if ev.get("node") != "verifier":
            continue
        m = _OPT.match(str(ev.get("message", "")))
        if not m:
            continue
        data = ev.get("data") or {}
        if data.get("hints_asked"):
            asked_by[int(m.group(1))] = {str(k): str(v) for k, v in data["hints_asked"].items()}
        if data.get("hints_replaced"):
            replaced[int(m.group(1))] = str(data["hints_replaced"])
        if data.get("hints_in_effect"):
            said[int(m.group(1))] = str(data["hints_in_effect"])
        elif "overrode the hint" in ev["message"]:
            said[int(m.group(1))] = ev["message"][m.end() :]
    proposals = {p["id"]: p for p in doc.get("proposals") or []}
    for exp in doc.get("experiments") or []:
        n = int(exp["iteration"])
        asked = asked_by.get(n) or _asked(proposals.get(exp.get("proposal_id")))
        if not asked:
            continue
        shown = ", ".join(f"{k}={v}" for k, v in asked.items())
        rows.append(
            [
                f"opt{n} ({exp['proposal_id']})",
                f"{shown} ({replaced[n]})" if n in replaced else shown,
                said.get(n, "unknown (the MPI library printed none)"),
            ]
        )
    return rows


def hints_markdown(doc: dict[str, Any]) -> list[str]:
    """The report.md section (nothing when the run set no ROMIO hint)."""
    rows = hint_rows(doc)
    if not rows:
        return []
    return [
        "## ROMIO hints in effect",
        "",
        "What each arm asked for (a ROMIO_HINTS file: the kept hints and the new ones) and what ROMIO "
        "said it used at every open; "
        "a hint the program overrode in its own MPI_Info is not counted.",
        "",
        *markdown_table(HEAD, rows),
        "",
    ]


def hints_html(doc: dict[str, Any]) -> str:
    """The report.html section (empty when the run set no ROMIO hint)."""
    rows = hint_rows(doc)
    if not rows:
        return ""
    return (
        '<section id="hints"><h2>ROMIO hints in effect</h2><p>What each arm asked for (a ROMIO_HINTS '
        "file) and what ROMIO said it used at every open; a hint the program overrode in its own "
        f"MPI_Info is not counted.</p>{table(HEAD, [[e(c) for c in r] for r in rows])}</section>"
    )


__all__ = ["hint_rows", "hints_html", "hints_markdown"]
