"""Terminal rendering of an :class:`Analysis` (Rich).  Analysis code never prints; this does.

Readable at 80 columns: small tables are key/value lists or transposed (size bins down the
side), the views are tables when they fit and stacked blocks when not (see
:mod:`dftune.core.terminal`); paths and counts are never cut. Trace data (file names, command
lines, hosts, categories) is printed as text: never Rich markup, never a raw control character.
"""

from __future__ import annotations

from typing import Any

from rich.console import Console, Group, RenderableType
from rich.panel import Panel
from rich.table import Table

from dftune.core.labels import labels
from dftune.core.terminal import Col, responsive, text
from dftune.tools.trace.model import Analysis, FamilyStats

MIB = float(1 << 20)
_BYTE_COLUMNS = {"read_bytes", "write_bytes"}
_TEXT_COLUMNS = {"path", "host", "cmd", "cat"}
#: Heads of the stacked layout per view (the cells that name the row).
_HEADS = {"file": (0,), "proc": (0, 1, 2), "time": (0, 1), "layer": (0,)}


def human_bytes(n: float | None) -> str:
    if n is None:
        return "-"
    for unit in ("B", "KiB", "MiB", "GiB", "TiB", "PiB"):
        if abs(n) < 1024 or unit == "PiB":
            return f"{n:,.0f} {unit}" if unit == "B" else f"{n:,.1f} {unit}"
        n /= 1024
    return f"{n:,.1f} PiB"  # pragma: no cover


def _num(v: Any, digits: int = 2) -> str:
    if v is None:
        return "-"
    if isinstance(v, float):
        return f"{v:,.{digits}f}"
    if isinstance(v, int):
        return f"{v:,}"
    return str(v)


def _pairs(title: str, rows: list[tuple[str, str]]) -> Table:
    """A key/value list: fits any width (the values wrap at word boundaries)."""
    t = Table.grid(padding=(0, 2))
    t.title, t.title_justify = title, "left"
    t.add_column(style="bold", no_wrap=True)
    t.add_column(overflow="fold")
    for k, v in rows:
        t.add_row(text(k), text(v))
    return t


class AnalysisRenderer:
    """Renders the summary and any requested views."""

    def __init__(self, console: Console) -> None:
        self.console = console

    def render(self, a: Analysis, views: list[str]) -> None:
        self.console.print(self.summary(a))
        for name in views:
            if name == "summary":
                continue
            view = a.views.get(name)
            if view is not None:
                self.console.print(self.view(name, view))

    def summary(self, a: Analysis) -> Group:
        fmt = ", ".join(f"{k} ({v:,} lines)" for k, v in a.formats.items()) or "-"
        helpers = len(a.helper_processes)
        head = _pairs(
            "",
            [
                (
                    "trace files",
                    f"{a.files:,}" + (f"  ({len(a.empty_files)} empty)" if a.empty_files else ""),
                ),
                ("format", fmt),
                (
                    "events",
                    f"{a.events:,} complete, {a.metadata_lines:,} "
                    f"metadata, {a.aggregated_events:,} aggregated, "
                    f"{a.counter_events:,} counter",
                ),
                ("skipped lines", f"{a.skipped_lines:,}"),
                (
                    "processes / hosts",
                    f"{a.processes:,} / {len(a.hosts):,}"
                    + (
                        f"  ({a.app_processes:,} do the application's I/O, {helpers:,} helpers)"
                        if helpers
                        else ""
                    ),
                ),
                *(
                    [("run", f"{a.run.index} of {a.run.runs}" + (f" ({a.run.apart})" if a.run.apart else ""))]
                    if a.run is not None and a.run.runs > 1
                    else []
                ),
                ("job time", f"{a.job_time_s:,.3f} s"),
                ("files accessed", f"{a.files_accessed:,}"),
            ],
        )
        shares = {"read": a.read_time_pct, "write": a.write_time_pct, "metadata": a.metadata_time_pct}
        fam_cols = [
            Col("family"),
            *(
                Col(h, justify="right")
                for h in ("ops", "bytes", "time s", "time %", "mean xfer", "MiB/s in I/O")
            ),
        ]
        fam_rows = [
            [
                name,
                _num(st.count),
                _bytes_cell(st, name),
                _num(st.time_s, 3),
                _num(shares.get(name), 1) if name in shares else "-",
                human_bytes(st.mean_xfer_bytes),
                _num(st.bw_io_time_mib_s, 1),
            ]
            for name, st in (("read", a.read), ("write", a.write), ("metadata", a.metadata), ("sync", a.sync))
        ]
        pattern = _pairs(
            "Access pattern",
            [
                ("small (< 1 MiB)", f"{_num(a.small_io_pct, 1)} %"),
                ("sequential", f"{_num(a.seq_pct, 1)} %"),
                ("consecutive", f"{_num(a.consecutive_pct, 1)} %"),
                ("random", f"{_num(a.rand_pct, 1)} %"),
                ("classified accesses", _num(a.classified_accesses)),
                ("shape", f"{a.shape.kind}: {a.shape.reason}"),
            ],
        )
        times = _pairs(
            "Time",
            [
                ("I/O call time", f"{_num(a.io_time_s, 3)} s"),
                ("I/O wall time", f"{_num(a.io_wall_time_s, 3)} s"),
                ("unoverlapped I/O", f"{_num(a.unoverlapped_io_time_s, 3)} s"),
                ("I/O share of app time", f"{100 * a.io_fraction_of_job:,.1f} %"),
                ("imbalance (time)", _num(a.imbalance.time_max_mean, 3)),
            ],
        )
        bins = list(next(iter(a.xfer_size_hist.values()), {}).keys())
        fams = list(a.xfer_size_hist)
        hist = responsive(
            self.console,
            "Transfer sizes (ops per bin)",
            [Col("size"), *(Col(f, justify="right") for f in fams)],
            [[b, *(_num(a.xfer_size_hist[f][b]) for f in fams)] for b in bins],
        )
        if a.darshan is not None:  # a Darshan log: its header instead of the trace-file counts
            from dftune.tools.trace.darshan.render import header

            head = header(a, a.darshan)
        parts: list[RenderableType] = [
            Panel(head, title="dftune analyze", expand=False),
            responsive(self.console, "I/O by family", fam_cols, fam_rows),
            pattern,
            times,
            hist,
        ]
        if a.layers:
            layers = [layer.model_dump() for layer in a.layers[:15]]
            parts.append(self.view("layer", {"rows": layers}, title="Layers (application categories)"))
        if a.helper_processes:
            cols = [
                Col("process"),
                Col("command", wrap=True, min_width=16),
                Col("events", justify="right"),
                Col("lifetime s", justify="right"),
                Col("why", wrap=True, min_width=16),
            ]
            rows = [
                [
                    f"{h.host}:{h.pid}",
                    (h.cmd or "?").replace(";", " "),
                    _num(h.events),
                    _num(h.lifetime_s, 3),
                    h.why,
                ]
                for h in a.helper_processes[:10]
            ]
            parts.append(
                responsive(self.console, "Helper processes (none of the application's I/O)", cols, rows)
            )
        for w in a.warnings:
            parts.append(text(f"warning: {w}", "yellow"))
        for s in a.skipped[:10]:
            where = f"{s.file}:{s.line}" if s.line is not None else s.file
            parts.append(text(f"skipped {where}: {s.reason}", "yellow"))
        return Group(*parts)

    def view(self, name: str, view: dict[str, Any], title: str | None = None) -> RenderableType:
        rows: list[dict[str, Any]] = view.get("rows", [])
        title = title or f"View: {name}"
        limit = 50 if name == "file" else 200
        total = max(int(view.get("total") or 0), len(rows))
        if total > min(len(rows), limit):
            title += f" (top {min(len(rows), limit):,} of {total:,}; --json has all)"
        if not rows:
            return text(f"{title}: no rows")
        spec = labels().view.get(name, tuple((k, k) for k in rows[0]))
        columns = [(key, header) for key, header in spec if key in rows[0]]
        cols = [Col(header, justify="left" if key in _TEXT_COLUMNS else "right") for key, header in columns]
        cells = [
            [
                human_bytes(row[k])
                if k in _BYTE_COLUMNS
                else row[k]
                if k in _TEXT_COLUMNS
                else _num(row[k], 3)
                for k, _ in columns
            ]
            for row in rows[:limit]
        ]
        heads = tuple(i for i in _HEADS.get(name, (0,)) if i < len(cols))
        caption = (
            layer_share_caption([float(r.get("share_of_job_pct") or 0) for r in rows])
            if name == "layer"
            else None
        )
        table = responsive(self.console, title, cols, cells, head=heads, caption=caption)
        system = view.get("system_paths") or {}
        if name == "file" and system.get("files") and not system.get("included"):
            note = (
                f"{system['files']:,} system file(s) (/proc, /sys, /dev; {system['io_time_s']:.3g} s of I/O) "
                "left out; --include-system-paths shows them"
            )
            return Group(table, text(note, "dim"))
        return table


def layer_share_caption(shares: list[float]) -> str:
    """What the layer shares sum, so a column past 100% is read as what it is."""
    out = (
        "% of process-time: a category's call time summed over every thread, over job time x processes; "
        "categories nest (a reader's time holds its POSIX calls), so the column does not add to 100%"
    )
    return out + ("; above 100%: threads of one process overlap" if max(shares, default=0.0) > 100.0 else "")


def _bytes_cell(st: FamilyStats, name: str) -> str:
    if name not in ("read", "write"):
        return "-"
    return human_bytes(st.bytes)
