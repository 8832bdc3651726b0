"""``dftune report PATH --html``: the report of one input (Darshan logs or dftracer traces), not of a run.

The counterpart of PyDarshan's darshan-job-summary and Drishti's HTML export: the diagnosis
(bottlenecks with their evidence and the threshold's source), the headline numbers, for a
Darshan log its header, modules (partial ones flagged), files, MPI-IO, Lustre and where each
number comes from, and the plots (transfer sizes, I/O time split, I/O over time, the rank x
time heatmap).  One self-contained HTML file, same rules as the run report: everything from
the input is escaped, nothing is loaded from anywhere.
"""

from __future__ import annotations

from pathlib import Path
from typing import Any

from dftune.core.domain.diagnosis import Diagnosis
from dftune.core.fsio import atomic_write_bytes, check_replaceable
from dftune.tools.diagnose.engine import diagnose_analysis
from dftune.tools.report.fixes import (
    SEVERITY_CSS,
    SEVERITY_LEGEND,
    severity,
    severity_html,
    snippet_html,
    snippets,
)
from dftune.tools.report.html import css, e, plots_section, table
from dftune.tools.report.plots import (
    Plot,
    _figure,
    _svg,
    busy_caption,
    busy_colormap,
    family_split_plot,
    fitting_top,
    plain,
    plots_unavailable,
    xfer_histogram_plot,
)
from dftune.tools.trace import Analysis, analyze
from dftune.tools.trace.render import human_bytes

MIB = float(1 << 20)
#: rows of the heatmap plot (busiest ranks first) and of the file table
HEATMAP_RANKS = 256
TOP_FILES = 25
#: rows of the per-process table (ranks in order; the rest are summarized)
TOP_PROCESSES = 64
#: candidate fixes shown per bottleneck
RECOMMENDATIONS = 3
#: time windows of the timeline and the heatmap
TIME_WINDOWS = 60


def default_output(path: str | Path) -> Path:
    """``<name>_report.html`` in the current directory, as darshan-job-summary names its output."""
    name = Path(path).name.removesuffix(".darshan").removesuffix(".gz").removesuffix(".pfw") or "input"
    return Path.cwd() / f"{name}_report.html"


def write_input_report(path: str | Path, output: str | Path | None = None) -> dict[str, str]:
    """Analyze ``path`` (with every view), diagnose it, write the HTML; returns ``{"html": path}``.

    The output replaces only a regular file (or nothing): a device, a pipe or a folder at its name
    is refused before the analysis starts, and again just before the rename."""
    out = Path(output) if output else default_output(path)
    check_replaceable(out, "report output")
    analysis = analyze([path], views=["file", "proc", "time", "layer"], time_windows=TIME_WINDOWS)
    diagnosis = diagnose_analysis(analysis)
    html = render_input_html(str(path), analysis, diagnosis).encode("utf-8")
    atomic_write_bytes(out, html, only_over_file=True)
    return {"html": str(out)}


def render_input_html(label: str, a: Analysis, d: Diagnosis) -> str:
    kind = "Darshan log" if a.darshan is not None else "dftracer trace"
    title = f"dftune report: {Path(label).name} ({kind})"
    sections = [
        ("findings", "Bottlenecks"),
        ("numbers", "Numbers"),
        ("plots", "Plots"),
        ("processes", "Processes"),
        ("files", "Files"),
    ]
    if a.darshan is not None:
        sections.insert(2, ("darshan", "Darshan log"))
    parts = [
        "<!DOCTYPE html>",
        '<html lang="en"><head><meta charset="utf-8">',
        '<meta name="viewport" content="width=device-width, initial-scale=1">',
        '<meta http-equiv="Content-Security-Policy" content="default-src \'none\'; img-src data:; '
        "style-src 'unsafe-inline'\">",
        f"<title>{e(title)}</title><style>{css()}{SEVERITY_CSS}</style></head><body>",
        f'<header><h1>{e(title)}</h1><div class="meta">{e(label)} · {a.processes:,} process(es) · job time '
        f"{a.job_time_s:,.3f} s · {e(', '.join(f'{k} x{v}' for k, v in a.formats.items()))}</div></header>",
        "<nav>" + "".join(f'<a href="#{k}">{e(t)}</a>' for k, t in sections) + "</nav><main>",
        _warnings(a),
        _findings(d),
        _numbers(a),
        _darshan(a) if a.darshan is not None else "",
        plots_section(build_input_plots(a)),
        _processes(a),
        _files(a),
        "</main></body></html>",
    ]
    return "\n".join(parts) + "\n"


def _warnings(a: Analysis) -> str:
    if not a.warnings:
        return ""
    items = "".join(f"<li>{e(w)}</li>" for w in a.warnings)
    return f'<div class="banner"><b>Read these before the numbers:</b><ul>{items}</ul></div>'


def _findings(d: Diagnosis) -> str:
    rows = [
        [
            severity_html(severity(b.score)),
            e(b.id),
            e(b.name),
            e(b.category),
            e(b.score),
            e(b.evidence),
            e(b.provenance),
        ]
        for b in d.bottlenecks
    ]
    body = (
        table(["severity", "id", "rule", "category", "score", "evidence", "threshold from"], rows, num=(4,))
        if rows
        else '<p class="note">No rule fired.</p>'
    )
    fired = {b.category for b in d.bottlenecks}
    ok = [c.category for c in d.checklist if not (set(_checklist_bottlenecks(c.number)) & fired)]
    ok_line = f"<p>{severity_html('OK')} checked, no rule fired: {e(', '.join(ok))}.</p>" if ok else ""
    gate = f"<p><b>Worth tuning:</b> {e('yes' if d.worth_tuning else 'no')}: {e(d.gate.reason)}</p>"
    metric = f"<p><b>Metric to optimize:</b> {e(d.metric.metric)} ({e(d.metric.rationale)})</p>"
    legend = f'<p class="note">{e(SEVERITY_LEGEND)}</p>'
    return (
        f'<section id="findings"><h2>Bottlenecks</h2>{gate}{metric}{body}{ok_line}{legend}'
        f"{_recommendations(d)}</section>"
    )


def _checklist_bottlenecks(number: int) -> list[str]:
    """The bottleneck categories a checklist category covers (from the catalog's checklist)."""
    from dftune.tools.catalog import default_catalog

    c = default_catalog().checklist.get(number)
    return list(c.bottlenecks) if c is not None else []


def _recommendations(d: Diagnosis) -> str:
    """Under each bottleneck (most severe first), its cited candidate fixes with their snippets,
    each fix shown once: Drishti's 'Recommendations' with a solution example."""
    shown: set[str] = set()
    out = []
    for b in sorted(d.bottlenecks, key=lambda b: -b.score):
        cands = [c for c in sorted(b.candidates, key=lambda c: not c.cited) if c.id not in shown][
            :RECOMMENDATIONS
        ]
        fixes = snippets(c.id for c in cands)
        if not fixes:
            continue
        shown.update(f["strategy"] for f in fixes)
        out.append(f"<h3>{severity_html(severity(b.score))} {e(b.id)} {e(b.name)}: {e(b.evidence)}</h3>")
        out.extend(snippet_html(f) for f in fixes)
    if not out:
        return ""
    return (
        '<h2 id="fixes">Recommendations</h2><p>Candidate fixes per bottleneck, as code or configuration '
        "(from the strategy catalog; cited ones first). Measure before keeping any: `dftune run` does.</p>"
        + "".join(out)
    )


def _numbers(a: Analysis) -> str:
    rows = [
        (
            "read: calls / bytes / time",
            f"{a.read.count:,} / {human_bytes(a.read.bytes or 0)} / {a.read.time_s:.4g} s",
        ),
        (
            "write: calls / bytes / time",
            f"{a.write.count:,} / {human_bytes(a.write.bytes or 0)} / {a.write.time_s:.4g} s",
        ),
        ("metadata: calls / time", f"{a.metadata.count:,} / {a.metadata.time_s:.4g} s"),
        ("sync: calls", f"{a.sync.count:,}"),
        (
            "read / write / metadata share of I/O time",
            f"{a.read_time_pct:.1f}% / {a.write_time_pct:.1f}% / {a.metadata_time_pct:.1f}%",
        ),
        ("small I/O (< 1 MiB)", f"{a.small_io_pct:.1f}% of sized operations"),
        (
            "sequential / consecutive / random",
            f"{a.seq_pct:.1f}% / {a.consecutive_pct:.1f}% / {a.rand_pct:.1f}% "
            f"of {a.classified_accesses:,} classified accesses",
        ),
        ("misaligned", f"{a.misaligned_pct:.1f}%"),
        ("I/O share of process time", f"{100 * a.io_fraction_of_job:.2f}%"),
        (
            "imbalance across processes (time, (max - mean) / max)",
            f"{a.imbalance.time_max_mean:.3f} (slowest {a.imbalance.slowest_process or '-'})",
        ),
        ("files accessed", f"{a.files_accessed:,}"),
        ("shape", f"{a.shape.kind}: {a.shape.reason}"),
    ]
    layers = [
        [e(x.cat), e(f"{x.count:,}"), e(f"{x.time_s:.4g}"), e(f"{x.share_of_job_pct:.2f}")] for x in a.layers
    ]
    extra = (
        "<h3>Layers</h3>" + table(["layer", "calls", "time (s)", "% of process time"], layers, num=(1, 2, 3))
        if layers
        else ""
    )
    return (
        '<section id="numbers"><h2>Numbers</h2>'
        + table(["metric", "value"], [[e(k), e(v)] for k, v in rows])
        + extra
        + "</section>"
    )


def _darshan(a: Analysis) -> str:
    d = a.darshan
    assert d is not None
    out = ['<section id="darshan"><h2>Darshan log</h2>']
    out.append(
        table(
            ["", ""],
            [
                [e("executable"), e(d.executable)],
                [e("job id(s)"), e(", ".join(map(str, d.jobids)))],
                [
                    e("logs"),
                    e(
                        ", ".join(
                            f"{Path(x.path).name} (format {x.log_format}, Darshan {x.darshan_version})"
                            for x in d.logs[:10]
                        )
                    ),
                ],
                [
                    e("hints in the header"),
                    e(
                        f"{d.log_write_hints or '-'} (the hints Darshan used to "
                        "write its own log, not the application's)"
                    ),
                ],
            ],
        )
    )
    out.append("<h3>Modules</h3>")
    out.append(
        table(
            ["module", "records", "role", "partial"],
            [
                [
                    e(m),
                    e(f"{v.records:,}"),
                    e(v.role),
                    e("PARTIAL: lower bounds" if v.partial else "complete"),
                ]
                for m, v in sorted(d.modules.items())
            ],
            num=(1,),
        )
    )
    f = d.files
    out.append(
        "<h3>POSIX files</h3>"
        + table(
            [
                "total",
                "read-only",
                "write-only",
                "read-write",
                "shared (all ranks)",
                "partially shared",
                "unique",
            ],
            [
                [
                    e(f"{x:,}")
                    for x in (
                        f.total,
                        f.read_only,
                        f.write_only,
                        f.read_write,
                        f.shared,
                        f.partially_shared,
                        f.unique,
                    )
                ]
            ],
            num=tuple(range(7)),
        )
    )
    if d.mpiio:
        m = d.mpiio
        out.append(
            "<h3>MPI-IO</h3>"
            + table(
                ["", "reads", "writes"],
                [
                    [e("collective"), e(f"{m.coll_reads:,}"), e(f"{m.coll_writes:,}")],
                    [e("independent"), e(f"{m.indep_reads:,}"), e(f"{m.indep_writes:,}")],
                    [e("non-blocking"), e(f"{m.nb_reads:,}"), e(f"{m.nb_writes:,}")],
                    [e("split"), e(f"{m.split_reads:,}"), e(f"{m.split_writes:,}")],
                ],
                num=(1, 2),
            )
        )
        out.append(
            '<p class="note">Hints set by the application: '
            f"{m.hints_set:,} time(s) (MPIIO_HINTS). MPI-IO time "
            f"{m.time_s:.4g} s over POSIX time {m.posix_time_s:.4g} s of the same files.</p>"
        )
    if d.lustre:
        lu = d.lustre
        out.append(
            "<h3>Lustre</h3>"
            + table(
                ["stripe count", "files"],
                [[e(k), e(f"{v:,}")] for k, v in sorted(lu.stripe_counts.items(), key=lambda kv: int(kv[0]))],
            )
        )
        out.append(
            f'<p class="note">{lu.osts_used:,} OSTs used; '
            f"{lu.shared_stripe1:,} shared file(s) on one OST.</p>"
        )
    p = d.perf
    if p.agg_perf_by_slowest_mib_s is not None:
        out.append(
            "<p><b>POSIX performance estimate</b> "
            f"(darshan-job-summary's): {p.agg_perf_by_slowest_mib_s:,.1f} "
            f"MiB/s, {p.total_bytes / MIB:,.1f} MiB in "
            f"{p.agg_time_by_slowest_s:,.3f} s of the slowest rank.</p>"
        )
    out.append("<h3>Where each number comes from</h3>")
    out.append(table(["number", "source"], [[e(k), e(v)] for k, v in d.sources.items()]))
    out.append("</section>")
    return "".join(out)


def _files(a: Analysis) -> str:
    rows = (a.views.get("file") or {}).get("rows", [])[:TOP_FILES]
    cols = ["path", "processes", "read", "written", "I/O time (s)", "sequential %", "stripe count"]
    body = (
        table(
            cols,
            [
                [
                    e(r.get("path")),
                    e(r.get("processes")),
                    e(human_bytes(r.get("read_bytes") or 0)),
                    e(human_bytes(r.get("write_bytes") or 0)),
                    e(_g(r.get("io_time_s"))),
                    e(_g(r.get("seq_pct"))),
                    e(r.get("stripe_count") if r.get("stripe_count") is not None else "-"),
                ]
                for r in rows
            ],
            num=(1, 2, 3, 4, 5, 6),
        )
        if rows
        else '<p class="note">No file.</p>'
    )
    system = (a.views.get("file") or {}).get("system_paths") or {}
    if system.get("files") and not system.get("included"):
        body += (
            f'<p class="note">{system["files"]:,} system files '
            f"(/proc, /sys, /dev; {system['io_time_s']:.3g} s "
            "of I/O) left out; dftune analyze --include-system-paths shows them.</p>"
        )
    return f'<section id="files"><h2>Files (top {TOP_FILES} by I/O time)</h2>{body}</section>'


def _g(v: Any) -> str:
    return "-" if v is None else f"{float(v):.4g}"


def _processes(a: Analysis) -> str:
    """One row per process (rank when the trace names it): where each spent its I/O time, and how
    the slowest compares with the rest, the per-rank table of Darshan's job summary and Drishti."""
    rows = (a.views.get("proc") or {}).get("rows", [])
    if not rows:
        return '<section id="processes"><h2>Processes</h2><p class="note">No process view.</p></section>'
    ordered = sorted(
        rows,
        key=lambda r: (r.get("rank") is None, r.get("rank") or 0, r.get("host") or "", r.get("pid") or 0),
    )
    times = sorted(float(r.get("io_time_s") or 0.0) for r in rows)
    mid = times[len(times) // 2]
    head = (
        f"<p>{len(rows):,} process(es). I/O time per process: min {times[0]:.4g} s, median {mid:.4g} s, "
        f"max {times[-1]:.4g} s (imbalance (max - mean) / max = {a.imbalance.time_max_mean:.2f}; "
        f"slowest {e(a.imbalance.slowest_process or '-')}). I/O share = I/O time over the process's lifetime "
        "(its threads summed).</p>"
    )
    body = []
    for r in ordered[:TOP_PROCESSES]:
        life = float(r.get("lifetime_s") or 0.0)
        io = float(r.get("io_time_s") or 0.0)
        who = f"rank {r['rank']}" if r.get("rank") is not None else f"pid {r.get('pid')}"
        body.append(
            [
                e(who),
                e(r.get("host") or "-"),
                e(_g(life)),
                e(_g(io)),
                e(f"{100 * io / life:.1f}%" if life > 0 else "-"),
                e(human_bytes(r.get("read_bytes") or 0)),
                e(human_bytes(r.get("write_bytes") or 0)),
                e(f"{int(r.get('metadata_count') or 0):,}"),
                e(_g(r.get("metadata_time_s"))),
            ]
        )
    more = (
        f'<p class="note">{len(ordered) - TOP_PROCESSES:,} more process(es) not listed.</p>'
        if len(ordered) > TOP_PROCESSES
        else ""
    )
    cols = [
        "process",
        "host",
        "lifetime (s)",
        "I/O time (s)",
        "I/O share",
        "read",
        "written",
        "metadata calls",
        "metadata time (s)",
    ]
    return (
        '<section id="processes"><h2>Processes</h2>'
        + head
        + table(cols, body, num=(2, 3, 4, 5, 6, 7, 8))
        + more
        + "</section>"
    )


def build_input_plots(a: Analysis) -> list[Plot]:
    """The input report's plots (none without matplotlib; the page says what to install)."""
    if plots_unavailable():
        return []
    return [xfer_histogram_plot(a), family_split_plot([("this input", a)]), timeline(a), heatmap(a)]


def timeline(a: Analysis) -> Plot:
    title = "I/O over time"
    view = a.views.get("time") or {}
    source = view.get("source", "trace")
    caption = f"Bytes read and written per second in each time window (source: {source})."
    rows = view.get("rows") or []
    if not rows:
        return Plot("timeline", title, caption, note=view.get("note") or "no timed operation in the input")
    fig = _figure(7.5, 3.2)
    ax = fig.subplots()
    width = float(view.get("window_s") or 1.0)
    starts = [float(r["start_s"]) for r in rows]
    for key, color in (("read_bytes", "#2b6cb0"), ("write_bytes", "#c05621")):
        ax.step(
            starts,
            [(r.get(key) or 0) / MIB / width for r in rows],
            where="post",
            label=key.split("_")[0],
            color=color,
        )
    ax.set_xlabel("seconds since the job started")
    ax.set_ylabel("MiB/s")
    ax.set_ylim(
        0, fitting_top([(r.get(k) or 0) / MIB / width for r in rows for k in ("read_bytes", "write_bytes")])
    )
    ax.grid(alpha=0.3)
    ax.legend(fontsize=8)
    return Plot("timeline", title, caption, svg=_svg(fig, "timeline"), figure=fig)


def heatmap(a: Analysis) -> Plot:
    """Ranks x time windows: for dftracer traces the share of each window a process spent in I/O
    calls (every file is one process); for Darshan logs the bytes moved (DXT, or the HEATMAP module)."""
    hm: dict[str, Any] = (a.views.get("time") or {}).get("heatmap") or {}
    if not hm or not hm.get("ranks"):
        why = (
            "no DXT trace and no HEATMAP module in the log"
            if a.darshan is not None
            else "no timed I/O call in the trace"
        )
        return Plot(
            "heatmap", "Heatmap: ranks x time", "One row per rank, one column per time window.", note=why
        )
    import numpy as np

    busy = "io_time_s" in hm and hm.get("window_span_s")
    if busy:
        grid = 100.0 * np.asarray(hm["io_time_s"], dtype=float) / np.asarray(hm["window_span_s"], dtype=float)
        weight = np.asarray(hm["io_time_s"], dtype=float).sum(axis=1)
    else:
        grid = np.asarray(hm["read_bytes"], dtype=float) + np.asarray(hm["write_bytes"], dtype=float)
        weight = grid.sum(axis=1)
    ranks = np.asarray(hm["ranks"], dtype=object)
    keep = np.sort(np.argsort(-weight, kind="stable")[:HEATMAP_RANKS])
    grid, ranks = grid[keep], ranks[keep]
    total = int(hm.get("ranks_total") or len(ranks))
    shown = f"the {len(ranks)} busiest of {total}" if len(ranks) < total else f"all {total}"
    if busy:
        title = "Heatmap: time in I/O calls per process and time window"
        caption = (
            f"One row per process ({shown}; rank when the trace names it, else pid), one column per time "
            f"window of {float(hm['window_s']):.3g} s (source: {hm.get('source')}). "
            + busy_caption(grid.ravel().tolist())
        )
    else:
        title = "Heatmap: bytes per rank and time window"
        caption = (
            f"Read + write bytes of each rank in each time window (source: {hm.get('source', '-')}); {shown} "
            "ranks."
        )
    fig = _figure(7.5, min(max(3.0, 1.5 + 0.12 * len(ranks)), 9.0))
    ax = fig.subplots()
    width = float(hm.get("window_s") or 1.0)
    extent = (0, width * grid.shape[1], len(ranks) - 0.5, -0.5)
    if busy:
        from matplotlib.colors import Normalize

        im = ax.imshow(
            grid,
            aspect="auto",
            interpolation="nearest",
            cmap=busy_colormap(),
            norm=Normalize(0.0, 100.0),
            extent=extent,
        )
        fig.colorbar(im, ax=ax, label="time in I/O calls, % of window", extend="max")
    else:
        unit, size = next(
            (
                (u, n)
                for u, n in (("GiB", 1 << 30), ("MiB", 1 << 20), ("KiB", 1 << 10))
                if float(grid.max(initial=0.0)) >= n
            ),
            ("bytes", 1),
        )
        im = ax.imshow(grid / size, aspect="auto", interpolation="nearest", cmap="viridis", extent=extent)
        fig.colorbar(im, ax=ax, label=f"{unit} per window")
    ax.set_xlabel("seconds since the job started")
    ax.set_ylabel(
        plain("rank" if all(str(r).startswith("rank") or isinstance(r, int) for r in ranks) else "process")
    )
    step = max(1, len(ranks) // 24)  # at most about 24 labels
    ax.set_yticks(range(0, len(ranks), step), [plain(str(r)) for r in ranks[::step]], fontsize=7)
    return Plot("heatmap", title, caption, svg=_svg(fig, "heatmap"), figure=fig)
