"""The ROMIO hints in effect before any change and in each arm that asked for hints, as ROMIO
printed them (``ROMIO_PRINT_HINTS=1``), for the run report.

A hint file is a request: the program's own MPI_Info wins key by key (ROMIO Users Guide), so the
report shows what was asked next to what the MPI library said it used. The numbers come from the
run's event log: the optimizer's probe of the untouched program and the verifier's check of
every arm (see ``agents/optimizer/hints.py``).
"""

from __future__ import annotations

import re

from dftune.core.domain.proposals import Proposal
from dftune.core.domain.run import RunReport
from dftune.tools.report.htmlkit import e, table
from dftune.tools.report.table import markdown_table

BEFORE_PREFIX = "hints in effect before any change: "
_OPT = re.compile(r"^opt(\d+): ")
HEAD = ["arm", "hints asked", "hints in effect (as ROMIO printed them)"]


def _asked(proposal: Proposal | None) -> dict[str, str]:
    change = proposal.change if proposal else None
    return dict(change.params) if change and "ROMIO_HINTS" in change.env else {}


def hint_rows(r: RunReport) -> list[list[str]]:
    """[arm, asked, in effect] rows: the baseline first, then each experiment that asked for hints."""
    rows: list[list[str]] = []
    before = next((ev.message for ev in r.events if ev.message.startswith(BEFORE_PREFIX)), None)
    if before is not None:
        rows.append(["baseline (before any change)", "-", before.removeprefix(BEFORE_PREFIX)])
    said: dict[int, str] = {}
    asked_by: dict[int, dict[str, str]] = {}  # what the arm asked: the kept hints merged with the new ones
    replaced: dict[int, str] = {}
    for ev in r.events:
        m = _OPT.match(ev.message) if ev.node == "verifier" else None
        if not m:
            continue
        n, data = int(m.group(1)), ev.data  # the verifier's free-form details of the arm
        if data.get("hints_asked"):
            asked_by[n] = {str(k): str(v) for k, v in data["hints_asked"].items()}
        if data.get("hints_replaced"):
            replaced[n] = str(data["hints_replaced"])
        if data.get("hints_in_effect"):
            said[n] = str(data["hints_in_effect"])
        elif "overrode the hint" in ev.message:
            said[n] = ev.message[m.end() :]
    proposals = {p.id: p for p in r.proposals}
    for exp in r.experiments:
        n = exp.iteration
        asked = asked_by.get(n) or _asked(proposals.get(exp.proposal_id))
        if not asked:
            continue
        shown = ", ".join(f"{k}={v}" for k, v in asked.items())
        rows.append(
            [
                f"opt{n} ({exp.proposal_id})",
                f"{shown} ({replaced[n]})" if n in replaced else shown,
                said.get(n, "unknown (the MPI library printed none)"),
            ]
        )
    return rows


def hints_markdown(r: RunReport) -> list[str]:
    """The report.md section (nothing when the run set no ROMIO hint)."""
    rows = hint_rows(r)
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


def hints_html(r: RunReport) -> str:
    """The report.html section (empty when the run set no ROMIO hint)."""
    rows = hint_rows(r)
    if not rows:
        return ""
    return (
        '<section id="hints"><h2>ROMIO hints in effect</h2><p>What each arm asked for (a ROMIO_HINTS '
        "file) and what ROMIO said it used at every open; a hint the program overrode in its own "
        f"MPI_Info is not counted.</p>{table(HEAD, [[e(c) for c in r] for r in rows])}</section>"
    )
