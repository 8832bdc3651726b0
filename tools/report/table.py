"""The seed's proposal table: its columns and how a row reads, for every renderer.

The Markdown report, the HTML report, the terminal and the MCP ``opt_proposal_table`` tool
all show the same six columns (#, Strategy, Description of Optimization, App Impact, System
Impact, Weighted Score) from the same row dicts (``agents.optimizer.proposal_table``), so a
number can never read differently in two places.
"""

from __future__ import annotations

from collections.abc import Mapping, Sequence
from typing import Any

#: The seed's proposal-table columns, in its order.
PROPOSAL_COLUMNS = (
    "#",
    "Strategy",
    "Description of Optimization",
    "App Impact",
    "System Impact",
    "Weighted Score",
)
#: What the reports add to the seed's columns.
EXTRA_COLUMNS = ("Status", "Citation")


#: one-word marks of where a number came from, for narrow tables (the legend says them all)
SOURCE_MARKS = {"measured": "meas", "kb": "KB", "trace model": "trace", "model": "LLM", "n/a": "n/a"}
SOURCE_LEGEND = "meas = measured here, KB = measured by an earlier run, trace = trace model, LLM = the model"


def impact_text(pct: float, source: str) -> str:
    """``12.34% (measured)``: every impact says where its number came from (``n/a``: nothing to say)."""
    return "n/a" if source == "n/a" else f"{pct:.2f}% ({source})"


def impact_mark(pct: float, source: str) -> str:
    """``12.3% meas``: the short form for the terminal."""
    return "n/a" if source == "n/a" else f"{pct:.1f}% {SOURCE_MARKS.get(source, source)}"


def proposal_cells(row: Mapping[str, Any]) -> list[str]:
    """One table row as text, in PROPOSAL_COLUMNS order followed by EXTRA_COLUMNS."""
    return [
        str(row["#"]),
        str(row["strategy"]),
        str(row["description"]),
        impact_text(row["app_impact_pct"], row["app_impact_source"]),
        impact_text(row["system_impact_pct"], row["system_impact_source"]),
        f"{row['weighted_score']:.2f}",
        str(row["status"]),
        f"{row['citation']} {row['url']}" if row.get("citation") else "UNSUPPORTED",
    ]


def markdown_cell(value: Any) -> str:
    """A value as one Markdown table cell: one line, pipes escaped, '-' for nothing."""
    text = "-" if value is None or value == "" else str(value)
    return " ".join(text.split()).replace("|", "\\|")


def markdown_table(head: Sequence[str], rows: Sequence[Sequence[Any]]) -> list[str]:
    """A GitHub-flavoured Markdown table, one list item per line."""
    out = ["| " + " | ".join(head) + " |", "|" + "---|" * len(head)]
    out += ["| " + " | ".join(markdown_cell(c) for c in row) + " |" for row in rows]
    return out


def proposal_markdown(rows: Sequence[Mapping[str, Any]]) -> list[str]:
    """The whole proposal table in Markdown (the reports and the MCP tool)."""
    return markdown_table([*PROPOSAL_COLUMNS, *EXTRA_COLUMNS], [proposal_cells(r) for r in rows])
