"""Rich renderers for runs: the final result, the checkpoint history (never used with --json)."""

from __future__ import annotations

from typing import Any

from rich.console import Console
from rich.table import Table

from dftune.tools.report.table import SOURCE_LEGEND, impact_mark


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
            t = Table(title="Proposal table", caption=SOURCE_LEGEND, show_lines=False)
            t.add_column("#", no_wrap=True)
            t.add_column("Strategy", no_wrap=True)
            t.add_column("Description of Optimization", ratio=1, overflow="fold")
            for col in ("App Impact", "System Impact", "Weighted Score", "Status"):
                t.add_column(col, no_wrap=True, justify="right" if col != "Status" else "left")
            for row in r["proposal_table"]:
                t.add_row(str(row["#"]), row["strategy"], row["description"][:90],
                          impact_mark(row["app_impact_pct"], row["app_impact_source"]),
                          impact_mark(row["system_impact_pct"], row["system_impact_source"]),
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


def _human_bytes(v: float) -> str:
    for unit, size in (("GiB", 1 << 30), ("MiB", 1 << 20), ("KiB", 1 << 10)):
        if abs(v) >= size:
            return f"{v / size:.2f} {unit}"
    return f"{v:,.0f} B"


def compare_value(unit: str, v: float | None) -> str:
    """A compared value in its unit (counts with separators, bytes in binary units)."""
    if v is None:
        return "-"
    return {
        "count": lambda: f"{v:,.0f}", "bytes": lambda: _human_bytes(v), "s": lambda: f"{v:.4g} s",
        "pct": lambda: f"{v:.1f}%", "mib_s": lambda: f"{v:.4g} MiB/s",
    }.get(unit, lambda: f"{v:.4g}")()  # fmt: skip


def compare_change(r: dict[str, Any]) -> str:
    """Percentage points for shares, relative change otherwise ('new' when A was zero)."""
    if r["delta"] is None:
        return "-"
    if r["unit"] == "pct":
        return f"{r['delta']:+.1f} pp"
    if r["change_pct"] is None:
        return "0" if r["delta"] == 0 else "new"
    return f"{r['change_pct']:+.1f}%"


class CompareRenderer:
    """``dftune compare`` without --json: one table per compared block, A and B side by side."""

    def __init__(self, console: Console) -> None:
        self.console = console

    def _rows(self, title: str, rows: list[dict[str, Any]], a: str, b: str) -> None:
        t = Table(title=title)
        t.add_column("metric")
        t.add_column(a, justify="right", overflow="fold")
        t.add_column(b, justify="right", overflow="fold")
        t.add_column("change (B vs A)", justify="right")
        for r in rows:
            t.add_row(r["label"], compare_value(r["unit"], r["a"]), compare_value(r["unit"], r["b"]),
                      compare_change(r))  # fmt: skip
        self.console.print(t)

    def render(self, doc: dict[str, Any]) -> None:
        if doc["kind"] == "traces":
            self.console.print(f"A: {doc['a']['path']}\nB: {doc['b']['path']}", highlight=False)
            self._rows("Traces", doc["trace"], "A", "B")
            return
        a, b = doc["a"], doc["b"]
        self.console.print(f"A: run {a['run_id']} ({a['workload']}, {a['status']})\n"
                           f"B: run {b['run_id']} ({b['workload']}, {b['status']})", highlight=False)  # fmt: skip
        self._rows("Outcome", doc["outcome"], "A", "B")
        for key, title in (("baseline_trace", "Baseline traces"), ("best_trace", "Best-kept traces")):
            if doc.get(key):
                self._rows(title, doc[key], "A", "B")
        t = Table(title="Experiments")
        for col in ("run", "opt", "proposal", "verdict", "change", "kept"):
            t.add_column(col)
        for side in ("a", "b"):
            for x in doc[side]["experiments"]:
                pct = "-" if x["change_pct"] is None else f"{x['change_pct']:+.1f}%"
                t.add_row(side.upper(), str(x["iteration"]), x["proposal"], str(x["verdict"]), pct,
                          "yes" if x["kept"] else "no")  # fmt: skip
        self.console.print(t)
