"""Terminal rendering of a :class:`Diagnosis` (Rich); the diagnosis itself never prints."""

from __future__ import annotations

from rich.console import Console, Group
from rich.markup import escape
from rich.panel import Panel
from rich.table import Table
from rich.text import Text

from dftune.tools.diagnose.engine import Diagnosis

_SCORE_STYLE = {5: "bold red", 4: "red", 3: "yellow", 2: "cyan", 1: "dim"}
_VERDICT = {
    "applied_measured": "applied & measured",
    "applicable_not_measured": "not measured",
    "not_applicable": "not applicable",
}


class DiagnosisRenderer:
    def __init__(self, console: Console) -> None:
        self.console = console

    def render(self, d: Diagnosis) -> None:
        self.console.print(self.build(d))

    def build(self, d: Diagnosis) -> Group:
        head = Table.grid(padding=(0, 2))
        head.add_column(style="bold")
        head.add_column()
        verdict = "[green]yes[/green]" if d.worth_tuning else "[yellow]no[/yellow]"
        head.add_row("worth tuning I/O", f"{verdict}: {escape(d.gate.reason)}")
        head.add_row("metric to optimize", Text(f"{d.metric.metric} ({d.metric.rationale})"))
        head.add_row("I/O shape", Text(f"{d.shape}: {d.shape_reason}"))
        mounts = "".join(f"  ({f.path} on {f.mount_point})" for f in d.data_dirs)
        head.add_row("filesystem", Text(d.fs_type + mounts))
        head.add_row("layers worth trying", ", ".join(d.gate.allowed_layers))
        if d.run is not None and d.run.runs > 1:
            head.add_row("run", Text(f"{d.run.index} of {d.run.runs}: {len(d.run.hosts)} host(s), {d.run.span_s:,.3f} s"
                                     + (f" ({d.run.apart})" if d.run.apart else "")))  # fmt: skip
        parts: list[object] = [Panel(head, title="dftune diagnose", expand=False)]
        table = Table(title="Bottlenecks (most severe first)", title_justify="left")
        for col in ("score", "id", "category", "evidence", "candidates"):
            table.add_column(col, justify="right" if col == "score" else "left", overflow="fold")
        for b in d.bottlenecks:
            table.add_row(
                Text(str(b.score), style=_SCORE_STYLE.get(b.score, "")), b.id, b.category, Text(b.evidence),
                Text(", ".join(c.id + ("" if c.cited else " (uncited)") for c in b.candidates[:4]) or "-"),
            )  # fmt: skip
        if not d.bottlenecks:
            table.add_row("-", "-", "-", "no rule fired", "-")
        parts.append(table)
        check = Table(title="Optimization checklist (reasons in --json)", title_justify="left")
        for col in ("#", "category", "verdict", "candidates"):
            check.add_column(col, overflow="fold")
        for e in d.checklist:
            shown = ", ".join(e.strategies[:3]) + (
                f" (+{len(e.strategies) - 3})" if len(e.strategies) > 3 else ""
            )
            check.add_row(
                str(e.number), Text(e.category), _VERDICT.get(e.verdict, e.verdict), Text(shown or "-")
            )
        parts.append(check)
        for w in d.warnings:
            parts.append(Text(f"warning: {w}", style="yellow"))
        return Group(*parts)  # type: ignore[arg-type]
