"""``dftune run A B C`` / ``resume CAMPAIGN`` / ``history CAMPAIGN`` in the terminal (Rich, 80 columns up)."""

from __future__ import annotations

from typing import Any

from rich.console import Console

from dftune.core.terminal import Col, responsive, text
from dftune.tools.report.campaign import CampaignResult, change_text, medians_text, units_text
from dftune.tools.report.console import path_line


class CampaignRenderer:
    def __init__(self, console: Console) -> None:
        self.console = console

    def render(self, r: CampaignResult) -> None:
        c = self.console
        c.print(text(f"campaign {r.campaign_id}: {r.status}", "bold"))
        c.print(text(r.timing))
        c.print(text(r.coverage, "bold yellow" if r.partial else ""))
        cols = [
            Col("workload"),
            Col("status"),
            Col("baseline units"),
            Col("baseline -> best kept", justify="right"),
            Col("change (95% CI)", wrap=True, min_width=14),
            Col("experiments (kept)", justify="right"),
        ]
        rows = [
            [
                m.workload,
                m.status,
                units_text(m.coverage),
                medians_text(m),
                change_text(m),
                f"{m.experiments} ({m.wins})",
            ]
            for m in r.members
        ]
        c.print(responsive(c, "Workloads", cols, rows, head=(0, 1)))
        for m in r.members:
            c.print(text(f"{m.workload}: run {m.run_id}" + (f" - {m.reason}" if m.reason else "")))
        if r.report:
            path_line(c, "report", r.report)
        if r.html:
            path_line(c, "html", r.html)
        if r.bundle:
            path_line(c, "bundle", r.bundle)

    def render_history(self, events: list[dict[str, Any]]) -> None:
        cols = [Col("time"), Col("event"), Col("what", wrap=True, min_width=30)]
        rows = [[str(ev.get("time", ""))[:19], ev.get("event"), ev.get("message")] for ev in events]
        self.console.print(responsive(self.console, "Campaign events", cols, rows, head=(0, 1)))
