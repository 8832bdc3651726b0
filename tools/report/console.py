"""Rich renderers for runs: the final result, the checkpoint history (never used with --json)."""

from __future__ import annotations

from typing import Any

from rich.console import Console
from rich.table import Table


class RunRenderer:
    def __init__(self, console: Console) -> None:
        self.console = console

    def render(self, r: dict[str, Any]) -> None:
        c = self.console
        c.print(f"[bold]run {r['run_id']}[/bold] ({r['workload']}): [bold]{r['status']}[/bold]"
                + (f" - {r['status_reason']}" if r.get("status_reason") else ""))  # fmt: skip
        if r.get("baseline_median") is not None:
            c.print(f"baseline median {r['baseline_median']:.4g} -> best kept {r['best_median']:.4g}")
        if r["proposal_table"]:
            t = Table(title="Proposal table", show_lines=False)
            for col in ("#", "Strategy", "Description of Optimization", "App Impact", "System Impact",
                        "Weighted Score", "Status"):  # fmt: skip
                t.add_column(col, overflow="fold")
            for row in r["proposal_table"]:
                t.add_row(str(row["#"]), row["strategy"], row["description"][:90],
                          f"{row['app_impact_pct']:.1f}% ({row['app_impact_source']})",
                          f"{row['system_impact_pct']:.1f}% ({row['system_impact_source']})",
                          f"{row['weighted_score']:.2f}", row["status"])  # fmt: skip
            c.print(t)
        if r["verdicts"]:
            t = Table(title="Experiments")
            for col in ("opt", "proposal", "verdict", "change", "kept", "KB record"):
                t.add_column(col)
            for v in r["verdicts"]:
                pct = "-" if v["change_pct"] is None else f"{v['change_pct']:+.1f}%"
                t.add_row(str(v["iteration"]), v["proposal"], str(v["verdict"]), pct,
                          "yes" if v["kept"] else ("reverted" if v["reverted"] else "no"), str(v["kb_record"]))  # fmt: skip
            c.print(t)
        for x in r.get("refused", []):
            c.print(
                f"[yellow]refused[/yellow] {x['proposal']} ({x['strategy']}): {x['status']}: {x['reason']}"
            )
        if r.get("pending"):
            p = r["pending"]
            c.print(f"[bold yellow]waiting for approval[/bold yellow]: {p['proposal_id']} ({p['strategy']}, "
                    f"{p['privilege']}): {p['description'][:120]}")  # fmt: skip
            c.print(f"  {p['resume_with']}")
        if r.get("report"):
            c.print(f"report: {r['report']}")

    def render_history(self, rows: list[dict[str, Any]]) -> None:
        t = Table(title="Checkpoints")
        for col in ("step", "checkpoint", "node", "time", "next", "status"):
            t.add_column(col, overflow="fold")
        for h in rows:
            t.add_row(str(h["step"]), h["checkpoint_id"], str(h["node"]), str(h["time"])[:19],
                      ",".join(h["next"]) or "-", str(h["status"]))  # fmt: skip
        self.console.print(t)
