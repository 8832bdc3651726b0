"""Terminal rendering of an :class:`Analysis` (Rich).  Analysis code never prints; this does."""

from __future__ import annotations

from typing import Any

from rich.console import Console, Group
from rich.panel import Panel
from rich.table import Table
from rich.text import Text

from dftune.tools.trace.model import Analysis, FamilyStats

MIB = float(1 << 20)
#: Columns shown in the terminal per view (``--json`` carries every column).
VIEW_COLUMNS: dict[str, tuple[str, ...]] = {
    "file": ("path", "processes", "read_count", "read_bytes", "write_count", "write_bytes", "metadata_count",
             "io_time_s", "seq_pct", "rand_pct"),
    "proc": ("host", "pid", "rank", "events", "lifetime_s", "read_count", "read_bytes", "write_count", "write_bytes",
             "io_time_s", "io_wall_s", "unoverlapped_io_s"),
    "time": ("start_s", "end_s", "read_count", "read_bytes", "write_count", "write_bytes", "metadata_count",
             "io_time_s", "bandwidth_mib_s"),
    "layer": ("cat", "count", "time_s", "mean_ms", "share_of_job_pct"),
}  # fmt: skip
_BYTE_COLUMNS = {"read_bytes", "write_bytes"}


def human_bytes(n: float | None) -> str:
    if n is None:
        return "-"
    for unit in ("B", "KiB", "MiB", "GiB", "TiB", "PiB"):
        if abs(n) < 1024 or unit == "PiB":
            return f"{n:,.0f} {unit}" if unit == "B" else f"{n:,.1f} {unit}"
        n /= 1024
    return f"{n:,.1f} PiB"  # pragma: no cover


def shorten(text: str, width: int = 48) -> str:
    """Keep the informative tail of a long path: '…/train/img_002_of_168.hdf5'."""
    return text if len(text) <= width else "…" + text[-(width - 1) :]


def _num(v: Any, digits: int = 2) -> str:
    if v is None:
        return "-"
    if isinstance(v, float):
        return f"{v:,.{digits}f}"
    if isinstance(v, int):
        return f"{v:,}"
    return str(v)


class AnalysisRenderer:
    """Renders the summary and any requested views as Rich tables."""

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
        head = Table.grid(padding=(0, 2))
        head.add_column(style="bold")
        head.add_column()
        fmt = ", ".join(f"{k} ({v:,} lines)" for k, v in a.formats.items()) or "-"
        head.add_row(
            "trace files", f"{a.files:,}" + (f"  ({len(a.empty_files)} empty)" if a.empty_files else "")
        )
        head.add_row("format", fmt)
        head.add_row("events", f"{a.events:,} complete, {a.metadata_lines:,} metadata, "
                     f"{a.aggregated_events:,} aggregated, {a.counter_events:,} counter")  # fmt: skip
        head.add_row("skipped lines", f"{a.skipped_lines:,}")
        helpers = len(a.helper_processes)
        head.add_row("processes / hosts", f"{a.processes:,} / {len(a.hosts):,}" + (
            f"  ({a.app_processes:,} do the application's I/O, {helpers:,} helpers)" if helpers else ""))  # fmt: skip
        if a.run is not None and a.run.runs > 1:
            head.add_row(
                "run", f"{a.run.index} of {a.run.runs}" + (f" ({a.run.apart})" if a.run.apart else "")
            )
        head.add_row("job time", f"{a.job_time_s:,.3f} s")
        head.add_row("files accessed", f"{a.files_accessed:,}")

        fam = Table(title="I/O by family", title_justify="left")
        for col in ("family", "ops", "bytes", "time (s)", "time %", "mean xfer", "MiB/s (io time)"):
            fam.add_column(col, justify="right" if col != "family" else "left")
        shares = {"read": a.read_time_pct, "write": a.write_time_pct, "metadata": a.metadata_time_pct}
        for name, st in (("read", a.read), ("write", a.write), ("metadata", a.metadata), ("sync", a.sync)):
            fam.add_row(name, _num(st.count), _bytes_cell(st, name), _num(st.time_s, 3),
                        _num(shares.get(name), 1) if name in shares else "-",
                        human_bytes(st.mean_xfer_bytes), _num(st.bw_io_time_mib_s, 1))  # fmt: skip

        pat = Table(title="Access pattern", title_justify="left")
        for col in ("small (<1 MiB) %", "sequential %", "consecutive %", "random %", "classified", "shape"):
            pat.add_column(col, justify="right")
        pat.add_row(_num(a.small_io_pct, 1), _num(a.seq_pct, 1), _num(a.consecutive_pct, 1), _num(a.rand_pct, 1),
                    _num(a.classified_accesses), a.shape.kind)  # fmt: skip

        ovl = Table(title="Time", title_justify="left")
        for col in (
            "I/O call time (s)",
            "I/O wall (s)",
            "unoverlapped I/O (s)",
            "I/O share of app time",
            "imbalance (time)",
        ):
            ovl.add_column(col, justify="right")
        ovl.add_row(_num(a.io_time_s, 3), _num(a.io_wall_time_s, 3), _num(a.unoverlapped_io_time_s, 3),
                    f"{100 * a.io_fraction_of_job:,.1f} %", _num(a.imbalance.time_max_mean, 3))  # fmt: skip

        hist = Table(title="Transfer sizes (ops)", title_justify="left")
        hist.add_column("family")
        bins = list(next(iter(a.xfer_size_hist.values()), {}).keys())
        for b in bins:
            hist.add_column(b, justify="right")
        for fam_name, counts in a.xfer_size_hist.items():
            hist.add_row(fam_name, *(_num(counts[b]) for b in bins))

        if a.darshan is not None:  # a Darshan log: its header instead of the trace-file counts
            from dftune.tools.trace.darshan.render import header

            head = header(a, a.darshan)
        parts: list[Any] = [Panel(head, title="dftune analyze", expand=False), fam, pat, ovl, hist]
        if a.layers:
            lay = Table(title="Layers (application categories)", title_justify="left")
            for col in ("category", "events", "time (s)", "mean (ms)", "% of process-time"):
                lay.add_column(col, justify="right" if col != "category" else "left")
            for layer in a.layers[:15]:
                lay.add_row(layer.cat, _num(layer.count), _num(layer.time_s, 3), _num(layer.mean_ms, 3),
                            _num(layer.share_of_job_pct, 1))  # fmt: skip
            parts.append(lay)
        if a.helper_processes:
            helpers_t = Table(title="Helper processes (none of the application's I/O)", title_justify="left")
            for col in ("process", "command", "events", "lifetime (s)", "why"):
                helpers_t.add_column(col, overflow="fold")
            for h in a.helper_processes[:10]:
                helpers_t.add_row(f"{h.host}:{h.pid}", shorten((h.cmd or "?").replace(";", " "), 40), _num(h.events),
                                  _num(h.lifetime_s, 3), h.why)  # fmt: skip
            parts.append(helpers_t)
        parts.append(Text(f"shape: {a.shape.kind} - {a.shape.reason}", style="dim"))
        for w in a.warnings:
            parts.append(Text(f"warning: {w}", style="yellow"))
        for s in a.skipped[:10]:
            where = f"{s.file}:{s.line}" if s.line is not None else s.file
            parts.append(Text(f"skipped {where}: {s.reason}", style="yellow"))
        return Group(*parts)

    def view(self, name: str, view: dict[str, Any]) -> Table:
        rows: list[dict[str, Any]] = view.get("rows", [])
        title = f"View: {name}"
        if "total" in view and view["total"] > len(rows):
            title += f" (top {len(rows):,} of {view['total']:,})"
        table = Table(title=title, title_justify="left")
        if not rows:
            table.add_column("(no rows)")
            return table
        columns = [c for c in VIEW_COLUMNS.get(name, tuple(rows[0])) if c in rows[0]]
        for col in columns:
            table.add_column(col, justify="left" if col in ("path", "host", "cmd", "cat") else "right",
                             no_wrap=col == "path")  # fmt: skip
        limit = 50 if name == "file" else 200
        for row in rows[:limit]:
            table.add_row(*(
                human_bytes(row[c]) if c in _BYTE_COLUMNS else shorten(str(row[c])) if c == "path" else _num(row[c], 3)
                for c in columns
            ))  # fmt: skip
        return table


def _bytes_cell(st: FamilyStats, name: str) -> str:
    if name not in ("read", "write"):
        return "-"
    return human_bytes(st.bytes)
