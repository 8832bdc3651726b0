"""The report's record of every approval: which change, who said yes or no (a person, by account,
or the run's policy), why, and exactly what the change ran and how it is undone."""

from __future__ import annotations

from typing import Any

from dftune.core.safetext import md_code, md_text
from dftune.tools.report.run_glance import change_lines


def approvals_markdown(doc: dict[str, Any]) -> list[str]:
    """``## Approvals`` lines (none when the run asked nothing and approved nothing)."""
    rows = doc.get("approvals") or []
    if not rows:
        return []
    proposals = {p.get("id"): p for p in doc.get("proposals") or []}
    out = ["## Approvals", ""]
    for a in rows:
        answer = "approved" if a.get("approved") else "refused"
        who = (
            f"{a.get('user') or 'a person'} (dftune approve)"
            if a.get("by") == "person"
            else "the run's policy"
        )
        out.append(
            f"- {md_code(a.get('proposal_id'))}: {answer} by {md_text(who)}: {md_text(a.get('reason'))}"
        )
        for line in change_lines((proposals.get(a.get("proposal_id")) or {}).get("change")):
            out.append(f"  - {md_text(line)}")
    out.append("")
    return out
