"""Rich renderers for runs: the result, the morning view, the checkpoint history, the run list, compare.

Readable at 80 columns and still good at 200: every table goes through
:func:`dftune.core.terminal.responsive` (a table when it fits, a stacked layout when not, never a
cut cell), ids are never folded, and data is printed as text, never as Rich markup.
"""

from __future__ import annotations

from typing import Any

from rich.console import Console
from rich.table import Table
from rich.text import Text

from dftune.core.domain.run import ApprovalRequest, ConfirmRequest, ProposalRow, RunResult
from dftune.core.terminal import Col, responsive, text, word_wrapped
from dftune.tools.report.run_glance import change_lines, glance_rows, next_commands
from dftune.tools.report.sections import gain_text
from dftune.tools.report.table import SOURCE_LEGEND, TERMINAL_COLUMNS, terminal_cells
from dftune.tools.session.layout import RunInfo
from dftune.tools.trace.render import human_bytes


def _line(*parts: tuple[object, str]) -> Text:
    """A line of (data, style) pieces: data is text, never markup."""
    out = Text()
    for value, style in parts:
        out.append_text(text(value, style))
    return out


def path_line(c: Console, label: str, path: str) -> None:
    """``label: path`` on one line when it fits, else the path alone on the next line (never folded)."""
    if len(label) + 2 + len(path) <= c.width:
        c.print(text(f"{label}: {path}"), soft_wrap=True)
    else:
        c.print(text(f"{label}:"))
        c.print(text(f"  {path}"), soft_wrap=True)


def change_cell(pct: float | None) -> str:
    """A signed change with the word that says which way is better."""
    return "-" if pct is None else gain_text(pct)


def run_status(r: RunInfo) -> str:
    """A run's status with its reason and the pid driving it (a live run), as ``dftune runs`` shows it."""
    status = r.status + (f" ({r.reason})" if r.reason else "")
    return status + (f", driven by pid {r.driver_pid}" if r.driver_pid else "")


class RunRenderer:
    def __init__(self, console: Console) -> None:
        self.console = console

    def render(
        self, r: RunResult, *, table: bool = False, dftune: str | None = None, next_steps: bool = True
    ) -> None:
        """The run's result: at a glance and the next commands; ``table``: also the proposal table,
        the experiments and every refusal (as before the glance existed)."""
        c = self.console
        headline = _line(
            ("run ", "bold"),
            (r.run_id, "bold"),
            (f" ({r.workload}): ", ""),
            (r.status, "bold"),
            ((" - " + r.status_reason) if r.status_reason else "", ""),
        )
        c.print(word_wrapped(headline, c.width, 2), soft_wrap=True)
        if table:
            self._details(r)
        self.render_glance(glance_rows(r))
        for p in r.pending:  # what waits for a person comes first
            if isinstance(p, ConfirmRequest):  # a win kept on trial: the question the trace left open
                pct = f" ({p.change_pct:+.1f}%)" if p.change_pct is not None else ""
                line = _line(
                    ("pending confirmation", "bold yellow"), (f": {p.proposal_id}{pct}: {p.question}", "")
                )
            elif isinstance(p, ApprovalRequest):  # an approval: what exactly it will do, and its rollback
                line = _line(
                    ("waiting for approval", "bold yellow"),
                    (f": {p.proposal_id} ({p.strategy}, {p.privilege}): {p.description or p.question}", ""),
                )
            else:  # an interactive run's question about an access pattern the trace could not settle
                line = _line(
                    ("waiting for approval", "bold yellow"),
                    (f": {p.proposal_id} ({p.kind}, a question): {p.question}", ""),
                )
            c.print(word_wrapped(line, c.width, 2), soft_wrap=True)
            for step in change_lines(p.change) if isinstance(p, ApprovalRequest) else []:
                c.print(text(f"  {step}"), soft_wrap=True)
            c.print(text(f"  {p.resume_with}"), soft_wrap=True)
        if r.report:
            path_line(c, "report", r.report)
        if next_steps:
            self.render_next(r, dftune)

    def render_next(self, r: RunResult, dftune: str | None = None) -> None:
        """The next commands, each on a line of its own, never folded: they are meant to be pasted."""
        c = self.console
        c.print(text("Next:", "bold"))
        for what, cmd in next_commands(r, dftune):
            if len(cmd) + len(what) + 6 <= c.width:
                c.print(text(f"  {cmd}") + text(f"  # {what}", "dim"), soft_wrap=True)
            else:
                c.print(text(f"  # {what}", "dim"))
                c.print(text(f"  {cmd}"), soft_wrap=True)

    def _details(self, r: RunResult) -> None:
        c = self.console
        if r.baseline_median is not None:
            best = f" -> best kept {r.best_median:.4g}" if r.best_median is not None else ""
            c.print(text(f"baseline median {r.baseline_median:.4g}{best}"))
        self.render_table(r.proposal_table)
        if r.verdicts:
            cols = [
                Col("opt", justify="right"),
                Col("proposal"),
                Col("verdict"),
                Col("change", justify="right"),
                Col("kept"),
                Col("KB record", justify="right"),
            ]
            rows = [
                [
                    v.iteration,
                    v.proposal,
                    v.verdict,
                    change_cell(v.change_pct),
                    "yes" if v.kept else ("reverted" if v.reverted else "no"),
                    v.kb_record,
                ]
                for v in r.verdicts
            ]
            c.print(responsive(c, "Experiments", cols, rows, head=(0, 1)))
        for x in r.refused:
            c.print(
                _line(("refused ", "yellow"), (f"{x.proposal} ({x.strategy}): {x.status}: {x.reason}", ""))
            )

    def render_table(self, table_rows: list[ProposalRow]) -> None:
        """The full proposal table (measured rows first, then by weighted score)."""
        if table_rows:
            rows = [terminal_cells(row) for row in table_rows]
            self.console.print(
                responsive(
                    self.console,
                    "Proposal table (measured first, then by weighted score)",
                    TERMINAL_COLUMNS,
                    rows,
                    head=(0, 1),
                    caption=SOURCE_LEGEND,
                )
            )

    def render_glance(self, lines: list[tuple[str, str]]) -> None:
        """The report's first screen in the terminal: one labeled answer per line (the answers wrap)."""
        grid = Table.grid(padding=(0, 2))
        grid.add_column(style="bold", no_wrap=True)
        grid.add_column(overflow="fold")
        for k, v in lines:
            grid.add_row(text(k), text(v))
        self.console.print(grid)

    def render_history(self, rows: list[dict[str, Any]]) -> None:
        cols = [
            Col("step", justify="right"),
            Col("checkpoint"),
            Col("node"),
            Col("time"),
            Col("next"),
            Col("status"),
        ]
        cells: list[list[object]] = [
            [
                h["step"],
                h["checkpoint_id"],
                h["node"],
                str(h["time"])[:19],
                ",".join(h["next"]) or "-",
                h["status"],
            ]
            for h in rows
        ]
        experiments = [h.get("experiment") or "-" for h in rows]
        if any(e != "-" for e in experiments):  # which experiment (opt2 WORKERS=4) each step belongs to
            cols.insert(3, Col("experiment"))
            for row, e in zip(cells, experiments, strict=True):
                row.insert(3, e)
        branches = [h.get("branch") or "main" for h in rows]
        if any(b != "main" for b in branches):  # a replay's fork, and the steps that follow it
            cols.append(Col("branch"))
            for row, b in zip(cells, branches, strict=True):
                row.append(b)
        decided = [decided_cell(h) for h in rows]
        if any(d != "-" for d in decided):  # a run with judgments says who made them, step by step
            cols.append(Col("decided (tokens so far)", wrap=True, min_width=16))
            for row, d in zip(cells, decided, strict=True):
                row.append(d)
        self.console.print(
            responsive(
                self.console,
                "Checkpoints (replay --checkpoint takes the id or the step)",
                cols,
                cells,
                head=(0, 1),
            )
        )

    def render_runs(
        self, runs: list[tuple[RunInfo, str]], campaigns: list[dict[str, Any]] | None = None
    ) -> None:
        """Every run with its result phrase (``run_glance.run_result``), then the campaigns."""
        cols = [
            Col("run"),
            Col("workload"),
            Col("status", wrap=True, min_width=16),
            Col("created"),
            Col("iterations", justify="right"),
            Col("result", wrap=True, min_width=20),
            Col("next"),
        ]
        cells = [
            [
                r.id,
                r.workload,
                run_status(r),
                r.created.isoformat()[:19] if r.created else "-",
                len(r.iterations),
                (f"replay of {r.parent}: " if r.parent else "") + (result or "-"),
                r.next_step or "",
            ]
            for r, result in runs
        ]
        self.console.print(responsive(self.console, "Runs", cols, cells))
        if campaigns:
            cols = [
                Col("campaign"),
                Col("status"),
                Col("workloads", wrap=True, min_width=20),
                Col("deadline"),
            ]
            cells = [
                [
                    c["id"],
                    c["status"],
                    ", ".join(m["workload"] for m in c["members"]),
                    c.get("deadline_text") or "-",
                ]
                for c in campaigns
            ]
            self.console.print(responsive(self.console, "Campaigns", cols, cells))


def decided_cell(row: dict[str, Any]) -> str:
    """Who made this step's judgments: ``choose_next: openai:x (812 tok, 1.2 s)``, or the rules and why."""
    parts = []
    for d in row.get("decisions") or []:
        who = d["reasoner"] if d["decided_by"] == "model" else "rules"
        cost = f"{d['tokens']}{'~' if d.get('tokens_estimated') else ''} tok, " if d.get("tokens") else ""
        why = f": {d['fallback']}" if d.get("fallback") else ""
        parts.append(f"{d['question']}: {who} ({cost}{d['latency_s']:.1f} s){why}")
    if not parts:
        return "-"
    return "; ".join(parts) + f" [{row.get('tokens_spent', 0)}]"


def compare_value(unit: str, v: float | None) -> str:
    """A compared value in its unit (counts with separators, bytes in binary units)."""
    if v is None:
        return "-"
    return {
        "count": lambda: f"{v:,.0f}",
        "bytes": lambda: human_bytes(v),  # one formatter for sizes in every view
        "s": lambda: f"{v:.4g} s",
        "pct": lambda: f"{v:.1f}%",
        "mib_s": lambda: f"{v:.4g} MiB/s",
    }.get(unit, lambda: f"{v:.4g}")()


def compare_change(r: dict[str, Any]) -> str:
    """Percentage points for shares, relative change otherwise ('new' when A was zero), and which way
    is better when the metric has a direction (``better``/``worse``; ``more``/``fewer`` otherwise)."""
    if r["delta"] is None:
        return "-"
    if r["unit"] == "pct":
        out = f"{r['delta']:+.1f} pp"
    elif r["change_pct"] is None:
        return "0" if r["delta"] == 0 else "new"
    else:
        out = f"{r['change_pct']:+.1f}%"
    if r["delta"] == 0:
        return out
    better = r.get("better")
    if better == "lower":
        return out + (" better" if r["delta"] < 0 else " worse")
    if better == "higher":
        return out + (" better" if r["delta"] > 0 else " worse")
    return out + (" more" if r["delta"] > 0 else " less")


class CompareRenderer:
    """``dftune compare`` without --json: one table per compared block, A and B side by side."""

    def __init__(self, console: Console) -> None:
        self.console = console

    def _rows(self, title: str, rows: list[dict[str, Any]], a: str, b: str) -> None:
        cols = [
            Col("metric"),
            Col(a, justify="right"),
            Col(b, justify="right"),
            Col("change (B vs A)", justify="right"),
        ]
        cells = [
            [
                r["label"],
                compare_value(r["unit"], r["a"]),
                compare_value(r["unit"], r["b"]),
                compare_change(r),
            ]
            for r in rows
        ]
        self.console.print(responsive(self.console, title, cols, cells))

    def render(self, doc: dict[str, Any]) -> None:
        c = self.console
        if doc["kind"] == "traces":
            c.print(_line(("A: ", "bold"), (doc["a"]["path"], "")), soft_wrap=True)
            c.print(_line(("B: ", "bold"), (doc["b"]["path"], "")), soft_wrap=True)
            self._rows("Traces", doc["trace"], "A", "B")
            for note in doc.get("notes", []):
                c.print(text(note, "yellow"))
            return
        a, b = doc["a"], doc["b"]
        c.print(_line(("A: ", "bold"), (f"run {a['run_id']} ({a['workload']}, {a['status']})", "")))
        c.print(_line(("B: ", "bold"), (f"run {b['run_id']} ({b['workload']}, {b['status']})", "")))
        self._rows("Outcome", doc["outcome"], "A", "B")
        for key, title in (("baseline_trace", "Baseline traces"), ("best_trace", "Best-kept traces")):
            if doc.get(key):
                self._rows(title, doc[key], "A", "B")
        cols = [
            Col("run"),
            Col("opt", justify="right"),
            Col("proposal"),
            Col("verdict"),
            Col("change", justify="right"),
            Col("kept"),
        ]
        cells = [
            [
                side.upper(),
                x["iteration"],
                x["proposal"],
                x["verdict"],
                change_cell(x["change_pct"]),
                "yes" if x["kept"] else "no",
            ]
            for side in ("a", "b")
            for x in doc[side]["experiments"]
        ]
        c.print(responsive(c, "Experiments", cols, cells, head=(0, 1, 2)))
