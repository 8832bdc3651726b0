"""The report's record of every approval: which change, who said yes or no (a person, by account,
or the run's policy), why, and exactly what the change ran and how it is undone."""

from __future__ import annotations

from dftune.core.domain.run import RunReport
from dftune.core.safetext import md_code, md_text
from dftune.tools.report.run_glance import change_lines


def approvals_markdown(r: RunReport) -> list[str]:
    """``## Approvals`` lines (none when the run asked nothing and approved nothing)."""
    if not r.approvals:
        return []
    changes = {p.id: p.change for p in r.proposals}
    out = ["## Approvals", ""]
    for a in r.approvals:
        who = f"{a.user or 'a person'} (dftune approve)" if a.by == "person" else "the run's policy"
        answer = "approved" if a.approved else "refused"
        out.append(f"- {md_code(a.proposal_id)}: {answer} by {md_text(who)}: {md_text(a.reason)}")
        out += [f"  - {md_text(line)}" for line in change_lines(changes.get(a.proposal_id))]
    out.append("")
    return out
