"""Terminal rendering of a :class:`Diagnosis` (Rich); the diagnosis itself never prints.

Readable at 80 columns (tables stack when they do not fit, see :mod:`dftune.core.terminal`);
evidence and paths from the trace are printed as text, never as Rich markup.
"""

from __future__ import annotations

from rich.console import Console, Group, RenderableType
from rich.panel import Panel
from rich.table import Table
from rich.text import Text

from dftune.core.domain.diagnosis import Diagnosis
from dftune.core.terminal import Col, responsive, text

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
        head.add_column(style="bold", no_wrap=True)
        head.add_column(overflow="fold")
        verdict = Text("yes", style="green") if d.worth_tuning else Text("no", style="yellow")
        head.add_row("worth tuning I/O", verdict + text(f": {d.gate.reason}"))
        if d.gate.forced:
            head.add_row("", text("tuned anyway, as --force asked"))
        for p in d.gate.possibly_io:
            head.add_row("possibly I/O", text(f"{p.source}: {p.evidence}"))
        head.add_row("metric to optimize", text(f"{d.metric.metric} ({d.metric.rationale})"))
        head.add_row("I/O shape", text(f"{d.shape}: {d.shape_reason}"))
        mounts = "".join(f"  ({f.path} on {f.mount_point})" for f in d.data_dirs)
        head.add_row("filesystem", text(d.fs_type + mounts))
        head.add_row("layers worth trying", text(", ".join(d.gate.allowed_layers)))
        if d.run is not None and d.run.runs > 1:
            head.add_row(
                "run",
                text(
                    f"{d.run.index} of {d.run.runs}: {len(d.run.hosts)} host(s), {d.run.span_s:,.3f} s"
                    + (f" ({d.run.apart})" if d.run.apart else "")
                ),
            )
        parts: list[RenderableType] = [Panel(head, title="dftune diagnose", expand=False)]
        cols = [
            Col("score", justify="right"),
            Col("id"),
            Col("category"),
            Col("evidence", wrap=True, min_width=24),
            Col("candidates", wrap=True, min_width=20),
        ]
        rows: list[list[object]] = [
            [
                Text(str(b.score), style=_SCORE_STYLE.get(b.score, "")),
                b.id,
                b.category,
                b.evidence,
                ", ".join(c.id + ("" if c.cited else " (uncited)") for c in b.candidates) or "-",
            ]
            for b in d.bottlenecks
        ]
        if rows:
            parts.append(
                responsive(self.console, "Bottlenecks (most severe first)", cols, rows, head=(0, 1, 2))
            )
        else:
            parts.append(text("Bottlenecks: no rule fired"))
        check_cols = [
            Col("#", justify="right"),
            Col("category"),
            Col("verdict"),
            Col("candidates", wrap=True, min_width=20),
        ]
        check_rows = [
            [e.number, e.category, _VERDICT.get(e.verdict, e.verdict), ", ".join(e.strategies) or "-"]
            for e in d.checklist
        ]
        parts.append(
            responsive(
                self.console,
                "Optimization checklist (reasons in --json)",
                check_cols,
                check_rows,
                head=(0, 1),
            )
        )
        for n in d.notes:
            parts.append(text(f"note: {n}", "dim"))
        for w in d.warnings:
            parts.append(text(f"warning: {w}", "yellow"))
        return Group(*parts)
