"""Plots for the HTML report, rendered offline with matplotlib (Agg canvas) to SVG text.

People would rather look than read for four things: when each process did its I/O, which
transfer sizes it used, where the I/O time went, and how far each experiment moved the metric
(with its confidence interval). Each plot is built from the run's report and the analyses and
traces the run saved; a plot whose input is gone comes back as a :class:`Plot` with a note
instead of an image, so the report still renders. matplotlib is the optional ``plots`` extra:
without it no plot is built and the report says, in one line, what to install.
"""

from __future__ import annotations

import io
import math
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

from dftune.core import strictjson
from dftune.core.domain.experiments import Experiment
from dftune.core.domain.run import MetricInfo, RunReport
from dftune.core.extras import missing
from dftune.tools.trace import Analysis, TraceError, analyze

FAMILIES = ("read", "write", "metadata", "sync")
FAMILY_COLORS = {"read": "#2b6cb0", "write": "#c05621", "metadata": "#6b46c1", "sync": "#718096"}
VERDICT_COLORS = {"win": "#2f855a", "regression": "#c53030", "no_change": "#718096"}
#: at most this many per-process series in the timeline (largest I/O time first)
MAX_PROCESSES = 16
TIME_WINDOWS = 40
MIB = float(1 << 20)


@dataclass(frozen=True)
class Plot:
    """One figure: SVG text, or a note saying why it could not be drawn."""

    key: str
    title: str
    caption: str
    svg: str | None = None
    note: str = ""
    #: the matplotlib figure the SVG was drawn from (kept so a check can measure what was drawn)
    figure: Any = field(default=None, compare=False, repr=False)


@dataclass
class ProcessSeries:
    """I/O of one process over time: window starts (s since the earliest process start), MiB/s, busy %."""

    label: str
    io_time_s: float
    width_s: float = 0.0
    starts: list[float] = field(default_factory=list)
    mib_s: list[float] = field(default_factory=list)
    busy_pct: list[float] = field(default_factory=list)


def plots_unavailable() -> str | None:
    """The one line naming the extra to install when matplotlib is absent (None when plots can be drawn)."""
    return missing("matplotlib", "plots", "Drawing the report's plots")


def load_analysis(path: str | None) -> Analysis | None:
    """The saved analysis of a measurement (None when it was not traced or the file is gone)."""
    if not path or not Path(path).is_file():
        return None
    return strictjson.read_model(path, Analysis)


def traced_arms(r: RunReport) -> list[tuple[str, Analysis]]:
    """The saved trace analyses of the baseline and of the best kept arm (when it is another arm),
    named so; an arm that was not traced, or whose analysis is gone, is left out."""
    base, inc = r.baseline, r.incumbent
    arms = [("baseline", base)]
    if inc is not None and (base is None or inc.workdir != base.workdir):
        arms.append(("best kept", inc))
    loaded = [(name, load_analysis(m.analysis_path if m else None)) for name, m in arms]
    return [(name, a) for name, a in loaded if a is not None]


def plain(text: object) -> str:
    """Text from the run shown as is: matplotlib would otherwise read ``$...$`` as math."""
    return str(text).replace("$", r"\$")


def process_series(trace_files: list[str], *, windows: int = TIME_WINDOWS) -> tuple[list[ProcessSeries], str]:
    """Per-process time series, one trace file at a time (dftracer writes one file per process).

    The engine's time view covers all files together; analyzing each file alone with the same
    number of windows gives each process its own series, placed on a common clock through the
    view's ``origin_us``. Returns the series and a note (files missing, series left out).
    """
    present = [f for f in trace_files if Path(f).is_file()]
    notes = []
    if len(present) < len(trace_files):
        notes.append(f"{len(trace_files) - len(present)} trace file(s) no longer present")
    if len(present) > MAX_PROCESSES:
        # each file is read on its own (about a second each): keep the largest traces, the busiest processes
        notes.append(f"the {MAX_PROCESSES} largest of {len(present)} per-process trace files are shown")
        present = sorted(present, key=lambda f: -Path(f).stat().st_size)[:MAX_PROCESSES]
    raw: list[tuple[ProcessSeries, float, list[dict[str, Any]], float]] = []
    for f in present:
        try:
            a = analyze([f], views=["time", "proc"], time_windows=windows)
        except TraceError as exc:
            notes.append(f"{Path(f).name}: {exc}")
            continue
        time_view = a.views.get("time")
        if not a.events or not time_view:
            continue
        procs = (a.views.get("proc") or {}).get("rows", [])
        raw.append(
            (
                ProcessSeries(label=_process_label(procs, Path(f).name), io_time_s=a.io_time_s),
                float(time_view["origin_us"]) / 1e6,
                time_view["rows"],
                float(time_view["window_s"]),
            )
        )
    if not raw:
        return [], "; ".join(notes) or "no I/O events in the trace"
    raw.sort(key=lambda r: -r[0].io_time_s)
    t0 = min(origin for _, origin, _, _ in raw)
    out = []
    for series, origin, rows, window_s in raw:
        series.width_s = window_s
        for r in rows:
            # the first and last windows are clipped to the process's span (docs/analyze.md: time view)
            width = float(r["end_s"]) - float(r["start_s"])
            moved = (r.get("read_bytes") or 0) + (r.get("write_bytes") or 0)
            series.starts.append(origin - t0 + float(r["start_s"]))
            series.mib_s.append(moved / MIB / width if width > 0 else 0.0)
            series.busy_pct.append(100.0 * float(r.get("io_time_s") or 0.0) / width if width > 0 else 0.0)
        out.append(series)
    return out, "; ".join(notes)


def _process_label(procs: list[dict[str, Any]], fallback: str) -> str:
    if len(procs) == 1:
        p = procs[0]
        return (
            f"rank {p['rank']}" if p.get("rank") is not None else f"pid {p.get('pid')}@{p.get('host') or '?'}"
        )
    if procs:
        return f"{fallback} ({len(procs)} processes)"
    return fallback


# --------------------------------------------------------------------------- drawing


def _figure(width: float, height: float) -> Any:
    from matplotlib.backends.backend_agg import FigureCanvasAgg
    from matplotlib.figure import Figure

    fig = Figure(figsize=(width, height), layout="constrained")
    FigureCanvasAgg(fig)
    return fig


def _svg(fig: Any, key: str) -> str:
    import matplotlib

    buf = io.StringIO()
    # text stays text (small, searchable); the salt keeps element ids distinct between figures
    with matplotlib.rc_context({"svg.fonttype": "none", "svg.hashsalt": f"dftune-{key}"}):
        fig.savefig(buf, format="svg", metadata={"Date": None})
    return buf.getvalue()


def timeline_plot(panels: list[tuple[str, list[ProcessSeries]]], note: str = "") -> Plot:
    """I/O over time per process: MiB/s moved and share of the window spent in I/O calls."""
    title = "I/O over time per process"
    caption = (
        "Bytes read+written per second, and the time spent inside I/O calls as a share of each time "
        f"window (at most {TIME_WINDOWS} windows per process), "
        "from the first traced replicate. The share sums the "
        "process's threads, so it exceeds 100% when several threads wait on I/O at once."
    )
    panels = [(name, s) for name, s in panels if s]
    if not panels:
        return Plot("timeline", title, caption, note=note or "no traced measurement with I/O events")
    fig = _figure(5.2 * len(panels) + 0.6, 5.2)
    axes = fig.subplots(2, len(panels), squeeze=False, sharex=True, sharey="row")  # panels on shared axes
    for col, (name, series) in enumerate(panels):
        top, bottom = axes[0][col], axes[1][col]
        for s in series:
            top.step(s.starts, s.mib_s, where="post", label=plain(s.label), linewidth=1.2)
            bottom.step(s.starts, s.busy_pct, where="post", label=plain(s.label), linewidth=1.2)
        top.set_title(plain(name), fontsize=10)
        top.set_ylabel("MiB/s (read+write)")
        bottom.set_ylabel("time in I/O calls (%)")
        bottom.set_xlabel("seconds since the first process started")
        for ax in (top, bottom):
            ax.grid(alpha=0.3)
        if len(series) <= 8:
            top.legend(fontsize=7, loc="upper right")
    # one scale per row that fits every arm (set once all arms are drawn: a limit set while only the
    # baseline was drawn cut the best kept arm's higher curve off at the top)
    for row, values in (
        (0, [v for _, ss in panels for s in ss for v in s.mib_s]),
        (1, [v for _, ss in panels for s in ss for v in s.busy_pct]),
    ):
        axes[row][0].set_ylim(0, fitting_top(values))
    return Plot("timeline", title, caption, svg=_svg(fig, "timeline"), note=note, figure=fig)


def fitting_top(values: list[float]) -> float:
    """An upper axis limit above every value, with a little headroom (1 when there is nothing to show)."""
    finite = [v for v in values if math.isfinite(v)]
    top = max(finite, default=0.0)
    return top * 1.08 if top > 0 else 1.0


#: colour for heatmap cells above 100% of the window (several threads of one process inside I/O at once)
OVER_COLOR = "#e53e3e"


def busy_colormap() -> Any:
    """Viridis for 0..100% of a window spent in I/O calls, red above it: the scale means what it says."""
    from matplotlib import colormaps

    return colormaps["viridis"].with_extremes(over=OVER_COLOR)


def busy_caption(cells: list[float]) -> str:
    """What the heatmap's colour sums, and how many cells passed 100%."""
    over = [v for v in cells if v > 100.0]
    text = (
        "Colour: the share of the window the process spent inside I/O calls, 0-100%. A process's threads are "
        "summed, so a cell passes 100% when several of its threads were inside I/O calls at once; such cells "
        "are drawn red"
    )
    if over:
        return text + f" ({len(over)} cell(s) here, up to {max(over):.0f}%)."
    busiest = max(cells, default=0.0)
    return text + f" (none here; the busiest cell is at {busiest:.1f}%)."


def heatmap_plot(panels: list[tuple[str, list[ProcessSeries]]], note: str = "") -> Plot:
    """Darshan DXT-style heatmap: one row per process (rank), time across, colour = share of the
    window spent in I/O calls on a fixed 0-100% scale (above it: red), the same for every panel."""
    title = "I/O activity: process x time heatmap"
    panels = [(name, s) for name, s in panels if s]
    cells = [v for _, series in panels for s in series for v in s.busy_pct]
    caption = (
        "Each row is one process (rank when the trace names it), each cell one time window. "
        + busy_caption(cells)
        + " Panels share the time axis, the row count and the colour scale, so the "
        "best kept arm can be read against the baseline directly."
    )
    if not panels:
        return Plot("heatmap", title, caption, note=note or "no traced measurement with I/O events")
    from matplotlib.colors import Normalize

    norm = Normalize(vmin=0.0, vmax=100.0)
    cmap = busy_colormap()
    rows = max(len(series) for _, series in panels)
    fig = _figure(5.2 * len(panels) + 1.2, max(3.2, 1.6 + 0.32 * rows))  # the colour bar's label fits
    # time axis and colour scale shared; each panel names its own processes (pids differ between arms)
    axes = fig.subplots(1, len(panels), squeeze=False, sharex=True)[0]
    mesh = None
    for ax, (name, series) in zip(axes, panels, strict=True):
        for y, s in enumerate(series):
            if not s.starts:
                continue
            edges = [*s.starts, s.starts[-1] + (s.width_s or 0.0)]
            mesh = ax.pcolormesh(edges, [y, y + 1], [s.busy_pct], cmap=cmap, norm=norm, shading="flat")
        ax.set_yticks([y + 0.5 for y in range(len(series))], [plain(s.label) for s in series], fontsize=7)
        ax.set_ylim(rows, 0)
        ax.set_title(plain(name), fontsize=10)
        ax.set_xlabel("seconds since the first process started")
    if mesh is not None:
        fig.colorbar(mesh, ax=list(axes), label="time in I/O calls, % of window", shrink=0.9, extend="max")
    return Plot("heatmap", title, caption, svg=_svg(fig, "heatmap"), note=note, figure=fig)


def xfer_histogram_plot(analysis: Analysis | None) -> Plot:
    title = "Transfer sizes"
    caption = "Read and write calls per transfer-size bin (baseline trace); small means < 1 MiB."
    if analysis is None:
        return Plot("xfer", title, caption, note="the baseline was not traced")
    hist = analysis.xfer_size_hist
    bins = list(next(iter(hist.values()), {}).keys())
    if not bins or not any(sum(h.values()) for h in hist.values()):
        return Plot("xfer", title, caption, note="the baseline trace has no sized reads or writes")
    fig = _figure(7.0, 3.4)
    ax = fig.subplots()
    fams = [f for f in ("read", "write") if sum(hist.get(f, {}).values())]
    width = 0.8 / len(fams)
    for i, fam in enumerate(fams):
        xs = [j + (i - (len(fams) - 1) / 2) * width for j in range(len(bins))]
        ax.bar(xs, [hist[fam].get(b, 0) for b in bins], width=width, label=fam, color=FAMILY_COLORS[fam])
    ax.set_xticks(range(len(bins)), [plain(b) for b in bins])
    ax.axvline(
        bins.index("1-4M") - 0.5 if "1-4M" in bins else len(bins) - 0.5,
        color="#999",
        linestyle="--",
        linewidth=1,
    )
    ax.set_ylabel("calls")
    ax.set_xlabel("transfer size (bytes, K = KiB, M = MiB); dashed line: 1 MiB")
    ax.grid(axis="y", alpha=0.3)
    ax.legend(fontsize=8)
    return Plot("xfer", title, caption, svg=_svg(fig, "xfer"), figure=fig)


def family_split_plot(arms: list[tuple[str, Analysis]]) -> Plot:
    """Time in read/write/metadata/sync calls, summed over processes, per traced arm."""
    title = "Where the I/O time went"
    caption = (
        "Seconds spent in read, write, metadata and sync calls (summed over processes), with each "
        "family's share of that I/O time."
    )
    if not arms:
        return Plot("families", title, caption, note="no traced measurement")
    fig = _figure(7.0, 1.3 + 0.7 * len(arms))
    ax = fig.subplots()
    names = [plain(n) for n, _ in arms]
    lefts = [0.0] * len(arms)
    for fam in FAMILIES:
        vals = [float(getattr(a, fam).time_s or 0.0) for _, a in arms]
        if not any(vals):
            continue
        ax.barh(names, vals, left=lefts, color=FAMILY_COLORS[fam], label=fam, height=0.55)
        for i, v in enumerate(vals):
            total = sum(float(getattr(arms[i][1], f).time_s or 0.0) for f in FAMILIES)
            if total and v / total >= 0.08:
                ax.text(
                    lefts[i] + v / 2,
                    i,
                    f"{100 * v / total:.0f}%",
                    ha="center",
                    va="center",
                    color="white",
                    fontsize=8,
                )
        lefts = [lefts[i] + vals[i] for i in range(len(arms))]
    ax.invert_yaxis()
    ax.set_xlabel("seconds in I/O calls")
    ax.grid(axis="x", alpha=0.3)
    fig.legend(fontsize=8, ncols=4, loc="outside upper center")  # above the bars, never over them
    return Plot("families", title, caption, svg=_svg(fig, "families"), figure=fig)


def experiments_plot(experiments: list[Experiment], metric: MetricInfo | None = None) -> Plot:
    """Before/after medians with their 95% confidence intervals and the replicates, per experiment."""
    title = "Experiments: before and after"
    caption = (
        "Median of the reference (incumbent) and candidate arms with the 95% confidence interval of "
        "the median (bars) and every replicate (dots); colour = verdict."
    )
    done = [
        (e, e.reference, e.candidate)
        for e in experiments
        if e.candidate is not None and e.candidate.median is not None and e.reference.median is not None
    ]
    if not done:
        return Plot("experiments", title, caption, note="no experiment was measured")
    lower = next((e.comparison.lower_is_better for e, _, _ in done if e.comparison), True)
    fig = _figure(max(5.0, 1.5 * len(done) + 1.5), 3.8)
    ax = fig.subplots()
    for i, (e, before, after) in enumerate(done):
        for j, (arm, m) in enumerate((("before", before), ("after", after))):
            median = m.median or 0.0  # both medians are known (``done``)
            x = i + (j - 0.5) * 0.38
            color = "#a0aec0" if j == 0 else VERDICT_COLORS.get(str(e.verdict), "#4a5568")
            ci = m.ci95 or [median, median]
            err = [[max(0.0, median - ci[0])], [max(0.0, ci[1] - median)]]
            ax.bar(
                x,
                median,
                width=0.34,
                color=color,
                yerr=err,
                capsize=4,
                ecolor="#1a202c",
                label=arm if i == 0 else None,
            )
            ax.scatter([x] * len(m.values), m.values, s=9, color="#1a202c", zorder=3, alpha=0.7)
    ax.set_xticks(
        range(len(done)),
        [plain(f"opt{e.iteration}\n{e.proposal_id}\n{e.verdict}") for e, _, _ in done],
        fontsize=8,
    )
    named = (
        f"{metric.name} ({metric.unit})"
        if metric is not None and metric.unit
        else (metric.name if metric is not None else "metric")
    )
    ax.set_ylabel(plain(f"{named}, " + ("lower" if lower else "higher") + " is better"))
    ax.set_ylim(bottom=0)
    ax.grid(axis="y", alpha=0.3)
    ax.legend(fontsize=8, loc="upper right")
    return Plot("experiments", title, caption, svg=_svg(fig, "experiments"), figure=fig)


def build_plots(r: RunReport) -> list[Plot]:
    """Every plot of a run's report, from the report and the analyses/traces it points to
    (none without matplotlib: the traces are not even read then)."""
    if plots_unavailable():
        return []
    arms = traced_arms(r)
    panels: list[tuple[str, list[ProcessSeries]]] = []
    notes = []
    for name, a in arms:
        series, note = process_series(a.trace_files)
        panels.append((name, series))
        if note:
            notes.append(f"{name}: {note}")
    return [
        heatmap_plot(panels, "; ".join(notes)),
        timeline_plot(panels, "; ".join(notes)),
        xfer_histogram_plot(dict(arms).get("baseline")),
        family_split_plot(arms),
        experiments_plot(r.experiments, r.metric),
    ]
