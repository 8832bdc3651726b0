"""Reports an I/O engineer can trust: plots inside their axes, heatmap scales that mean what the
legend says, a rank x time heatmap and per-process table for dftracer traces, sizes in binary
units, a fix snippet per recommendation, and Drishti's severity levels.

The plots are checked by measuring the drawn figures (matplotlib's own extents against the axes
box), the heatmap against the trace's own totals, never against numbers written into the test.
"""

from __future__ import annotations

import re
from pathlib import Path
from typing import Any

import pytest
from pydantic import ValidationError

from dftune.tools.catalog import default_catalog
from dftune.tools.catalog.models import Strategy
from dftune.tools.diagnose.engine import diagnose_analysis
from dftune.tools.diagnose.rules import render_message
from dftune.tools.report.analysis_report import TIME_WINDOWS, build_input_plots, render_input_html
from dftune.tools.report.fixes import severity, snippet_markdown, snippets
from dftune.tools.report.plots import (
    ProcessSeries,
    _figure,
    fitting_top,
    heatmap_plot,
    timeline_plot,
)
from dftune.tools.trace import analyze
from tests.plotcheck import artists_outside_axes


def _series(label: str, scale: float, n: int = 12) -> ProcessSeries:
    starts = [0.25 * i for i in range(n)]
    return ProcessSeries(
        label=label,
        io_time_s=scale,
        width_s=0.25,
        starts=starts,
        mib_s=[scale * (1 + i % 3) for i in range(n)],
        busy_pct=[min(400.0, 30.0 * scale * (1 + i % 2)) for i in range(n)],
    )


# --------------------------------------------------------------------------- the overflow check itself


def test_the_check_sees_a_curve_cut_off_by_its_axes_and_a_label_cut_by_the_figure() -> None:
    fig = _figure(4, 3)
    ax = fig.subplots()
    ax.plot([0, 1, 2], [1, 5, 40])
    ax.set_ylim(0, 10)  # the last point is clipped away: a reader would never see it
    found = artists_outside_axes(fig)
    assert len(found) == 1 and "line" in found[0], found
    ax.set_ylim(0, fitting_top([1, 5, 40]))
    assert artists_outside_axes(fig) == []

    fig = _figure(1.2, 0.8)  # far too small for its labels; constrained layout cannot fit them
    ax = fig.subplots()
    ax.bar([0, 1], [3, 4])
    ax.set_ylabel("a very long y label that cannot fit in this figure at all")
    assert any(x.startswith("figure:") for x in artists_outside_axes(fig))


def test_timeline_arms_on_one_scale_that_fits_the_busier_arm() -> None:
    """The best kept arm moves four times the baseline's bytes: its curve stays inside the axes."""
    plot = timeline_plot([("baseline", [_series("pid 1", 1.0)]), ("best kept", [_series("pid 2", 4.0)])])
    assert plot.figure is not None and plot.svg
    assert artists_outside_axes(plot.figure) == []
    top, bottom = plot.figure.axes[0], plot.figure.axes[2]  # the two arms share each row's scale
    assert top.get_ylim() == plot.figure.axes[1].get_ylim()
    assert top.get_ylim()[1] >= max(_series("x", 4.0).mib_s)
    assert bottom.get_ylim()[1] >= max(_series("x", 4.0).busy_pct)


def test_heatmap_scale_is_0_to_100_percent_and_says_what_passes_it() -> None:
    plot = heatmap_plot([("baseline", [_series("pid 1", 1.0)]), ("best kept", [_series("pid 2", 4.0)])])
    assert plot.figure is not None and artists_outside_axes(plot.figure) == []
    mesh = plot.figure.axes[0].collections[0]
    assert (mesh.norm.vmin, mesh.norm.vmax) == (0.0, 100.0)  # a 60%-busy baseline is not drawn as idle
    over = [v for s in (_series("a", 1.0), _series("b", 4.0)) for v in s.busy_pct if v > 100]
    assert f"{len(over)} cell(s) here, up to {max(over):.0f}%" in plot.caption
    assert "threads are summed" in plot.caption


# ---------------------------------------------------------------------- dftracer heatmap and per-rank table


@pytest.fixture(scope="module")
def unet(shared_traces: Path) -> Any:
    return analyze(
        [shared_traces / "dlio-unet3d-8ranks-legacy"],
        views=["file", "proc", "time", "layer"],
        time_windows=TIME_WINDOWS,
    )


def test_dftracer_time_view_has_a_process_heatmap_holding_every_byte_and_second(unet: Any) -> None:
    hm = unet.views["time"]["heatmap"]
    assert hm["ranks_total"] == unet.processes == len(hm["ranks"])
    assert all(re.fullmatch(r"rank \d+", r) for r in hm["ranks"])
    assert sum(map(sum, hm["read_bytes"])) == unet.read.bytes
    assert sum(map(sum, hm["write_bytes"])) == (unet.write.bytes or 0)
    assert sum(map(sum, hm["io_time_s"])) == pytest.approx(unet.io_time_s, rel=1e-6)
    assert sum(hm["window_span_s"]) == pytest.approx(unet.job_time_s, rel=1e-6)


def test_input_report_of_a_dftracer_trace_draws_the_heatmap_and_lists_every_rank(unet: Any) -> None:
    plots = {p.key: p for p in build_input_plots(unet)}
    assert plots["heatmap"].svg and not plots["heatmap"].note
    for p in plots.values():
        assert p.figure is None or artists_outside_axes(p.figure) == [], p.key
    page = render_input_html("dlio-unet3d-8ranks-legacy", unet, diagnose_analysis(unet))
    assert "DXT" not in page and "HEATMAP module" not in page  # no Darshan message for a dftracer trace
    section = page[page.index('<section id="processes">') :]
    assert all(f"<td>rank {r}</td>" in section for r in range(unet.processes))
    # sizes people read, never a raw byte count or "15,905.2 KiB"
    assert not re.search(r"\d{1,3},\d{3},\d{3}", page)
    assert not re.search(r"\d,\d{3}\.\d KiB", page)
    # Drishti's levels, and a snippet under each recommendation
    assert 'class="tag sev-HIGH"' in page and 'class="tag sev-OK"' in page
    assert page.count('<pre class="snippet">') >= 1


# --------------------------------------------------------------------------- sizes, snippets, severity


def test_rule_messages_print_sizes_in_binary_units() -> None:
    assert render_message("mean {x:size}", {"x": 15_905.2 * 1024}) == "mean 15.5 MiB"
    assert render_message("{x:size}", {"x": 512}) == "512 B"
    assert render_message("{x:.1f}", {"x": 2.25}) == "2.2"  # other specs unchanged


def test_every_strategy_that_can_be_applied_has_a_fix_snippet() -> None:
    catalog = default_catalog()
    usable = [s for s in catalog.strategies.values() if not s.forbidden]
    assert usable
    for s in usable:
        snip = s.fix_snippet()
        assert snip is not None and snip.code.strip(), s.id
        assert "{" not in snip.code or s.apply is None or s.apply.kind in ("source_patch", "manual"), s.id
    env = next(s for s in usable if s.apply is not None and s.apply.kind == "env")
    assert all(f"export {k}=" in env.fix_snippet().code for k in env.apply.env)  # type: ignore[union-attr]


def test_a_prose_strategy_without_a_snippet_is_refused() -> None:
    patch = next(
        s for s in default_catalog().strategies.values() if s.apply and s.apply.kind == "source_patch"
    )
    data = patch.model_dump(exclude={"snippet"})
    with pytest.raises(ValidationError, match="snippet"):
        Strategy.model_validate(data)


def test_severity_follows_drishti_levels_and_snippets_render_as_fenced_code() -> None:
    assert [severity(s) for s in (5, 4, 3, 2, 1, None)] == ["HIGH", "HIGH", "WARN", "WARN", "INFO", "INFO"]
    (snip,) = snippets(["l1.dataloader_workers", "l1.dataloader_workers"])
    md = snippet_markdown(snip, "WORKERS=4")
    assert md[0].endswith("(dftune measured it as `WORKERS=4`)") and md[2] == "```python"


def test_every_plot_of_a_run_report_stays_inside_its_axes() -> None:
    """The run report's own plots (two traced arms, experiments), built from a report.json."""
    from dftune.tools.report.plots import build_plots
    from dftune.tools.session.workspace import Workspace
    from tests.unit.test_report import make_report

    ws = Workspace()
    doc = make_report(ws.run_dir(ws.create_run(None, "toy").id))
    plots = build_plots(doc)
    drawn = [p for p in plots if p.figure is not None]
    assert {p.key for p in drawn} == {"heatmap", "timeline", "xfer", "families", "experiments"}
    for p in drawn:
        assert artists_outside_axes(p.figure) == [], p.key
