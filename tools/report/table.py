"""The dftracer-io-optimization skill's proposal table: its columns and how a row reads, for every renderer.

The Markdown report, the HTML report, the terminal and the MCP ``opt_proposal_table`` tool
all show the same six columns (#, Strategy, Description of Optimization, App Impact, System
Impact, Weighted Score) from the same rows (``agents.optimizer.proposal_table``), so a
number can never read differently in two places.
"""

from __future__ import annotations

from collections.abc import Callable, Sequence
from typing import Any

from dftune.core.domain.run import ProposalRow
from dftune.core.safetext import md_link, md_text
from dftune.core.terminal import Col

#: The skill's proposal-table columns, in its order.
PROPOSAL_COLUMNS = (
    "#",
    "Strategy",
    "Description of Optimization",
    "App Impact",
    "System Impact",
    "Weighted Score",
)
#: What the reports add to the skill's columns.
EXTRA_COLUMNS = ("Status", "Citation")
#: The terminal's columns: the skill's six and the status (the citation is in the reports).
TERMINAL_COLUMNS = (
    Col("#", justify="right"),
    Col("Strategy"),
    Col("Description of Optimization", wrap=True, min_width=28),
    Col("App Impact", justify="right"),
    Col("System Impact", justify="right"),
    Col("Weighted Score", justify="right"),
    Col("Status"),
)


class Md(str):
    """Text that is Markdown already (a link built by :func:`md_link`): not escaped again."""


#: one-word marks of where a number came from, for narrow tables (the legend says them all)
SOURCE_MARKS = {"measured": "meas", "kb": "KB", "trace model": "trace", "model": "LLM", "n/a": "n/a"}
SOURCE_LEGEND = "meas: measured here, KB: by an earlier run, trace: trace model, LLM: the model"


def impact_text(pct: float, source: str) -> str:
    """``12.34% (measured)``: every impact says where its number came from (``n/a``: nothing to say)."""
    return "n/a" if source == "n/a" else f"{pct:.2f}% ({source})"


def impact_mark(pct: float, source: str) -> str:
    """``12.3% meas``: the short form for the terminal."""
    return "n/a" if source == "n/a" else f"{pct:.1f}% {SOURCE_MARKS.get(source, source)}"


def proposal_cells(row: ProposalRow) -> list[str]:
    """One table row as text, in PROPOSAL_COLUMNS order followed by EXTRA_COLUMNS."""
    cited = f"{row.citation} {row.url}" if row.citation else "UNSUPPORTED"
    return [*_cells(row, impact_text), cited]


def terminal_cells(row: ProposalRow) -> list[str]:
    """One row for :data:`TERMINAL_COLUMNS` (impacts as ``30.0% meas``: :data:`SOURCE_LEGEND`)."""
    return _cells(row, impact_mark)


def _cells(row: ProposalRow, impact: Callable[[float, str], str]) -> list[str]:
    return [
        str(row.number),
        row.strategy,
        row.description,
        impact(row.app_impact_pct, row.app_impact_source),
        impact(row.system_impact_pct, row.system_impact_source),
        f"{row.weighted_score:.2f}",
        row.status,
    ]


def markdown_cell(value: Any) -> str:
    """A value as one Markdown table cell: one line, literal text (escaped), '-' for nothing."""
    if isinstance(value, Md):
        return str(value)
    return "-" if value is None or value == "" else md_text(value)


def markdown_table(head: Sequence[str], rows: Sequence[Sequence[Any]]) -> list[str]:
    """A GitHub-flavoured Markdown table, one list item per line."""
    out = ["| " + " | ".join(markdown_cell(h) if h else " " for h in head) + " |", "|" + "---|" * len(head)]
    out += ["| " + " | ".join(markdown_cell(c) for c in row) + " |" for row in rows]
    return out


def proposal_markdown(rows: Sequence[ProposalRow]) -> list[str]:
    """The whole proposal table in Markdown (the reports and the MCP tool); citations link only http(s)."""
    cells = [
        [
            *proposal_cells(r)[:-1],
            Md(f"{md_text(r.citation)} {md_link(r.url)}") if r.citation else "UNSUPPORTED",
        ]
        for r in rows
    ]
    return markdown_table([*PROPOSAL_COLUMNS, *EXTRA_COLUMNS], cells)
