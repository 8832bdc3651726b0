"""matplotlib is the optional ``plots`` extra: reports render whole without it, with one line naming it.

Each report is rendered twice in this process, with matplotlib as installed and with it made
unimportable (``sys.modules`` entries set to None, what an uninstalled package looks like to
``import``); everything but the plots section must come out the same, and the page stays valid HTML.
"""

from __future__ import annotations

import re
import sys
from collections.abc import Callable
from html.parser import HTMLParser
from pathlib import Path

import pytest

from dftune.core.extras import MissingExtra, missing, require
from dftune.tools.diagnose.engine import diagnose_analysis
from dftune.tools.report.analysis_report import build_input_plots, render_input_html
from dftune.tools.report.html import SECTIONS, render_run_html
from dftune.tools.report.plots import build_plots, plots_unavailable
from dftune.tools.session.workspace import Workspace
from dftune.tools.trace import analyze
from tests.cli_inproc import dftune
from tests.unit.test_report import _trace, make_report

INSTALL = "pip install 'dftune[plots]'"
PLOTS_SECTION = re.compile(r'<section id="plots">.*?</section>', re.DOTALL)
#: elements HTML never closes
VOID = {"meta", "img", "br", "hr", "link", "input", "col", "wbr", "source", "area", "base"}


def hide_matplotlib(monkeypatch: pytest.MonkeyPatch) -> None:
    """Make matplotlib unimportable for this test (restored afterwards by monkeypatch)."""
    loaded = [m for m in sys.modules if m == "matplotlib" or m.startswith(("matplotlib.", "mpl_toolkits"))]
    for name in loaded:
        monkeypatch.setitem(sys.modules, name, None)
    monkeypatch.setitem(sys.modules, "matplotlib", None)


class Checked(HTMLParser):
    """Tags nest and close properly; collects ids, images and text."""

    def __init__(self) -> None:
        super().__init__()
        self.open: list[str] = []
        self.problems: list[str] = []
        self.ids: set[str] = set()
        self.imgs = 0
        self.text: list[str] = []

    def handle_starttag(self, tag: str, attrs: list[tuple[str, str | None]]) -> None:
        a = dict(attrs)
        if a.get("id"):
            if a["id"] in self.ids:
                self.problems.append(f"duplicate id {a['id']}")
            self.ids.add(str(a["id"]))
        self.imgs += tag == "img"
        if tag not in VOID:
            self.open.append(tag)

    def handle_endtag(self, tag: str) -> None:
        if not self.open or self.open[-1] != tag:
            self.problems.append(f"</{tag}> closes {self.open[-1:] or 'nothing'}")
        else:
            self.open.pop()

    def handle_data(self, data: str) -> None:
        self.text.append(data)


def checked(page: str) -> Checked:
    p = Checked()
    p.feed(page)
    p.close()
    assert page.startswith("<!DOCTYPE html>")
    assert not p.problems and not p.open, (p.problems, p.open)
    return p


def both_ways(monkeypatch: pytest.MonkeyPatch, render: Callable[[], str]) -> tuple[str, str]:
    """The page rendered with matplotlib, then without it."""
    with_plots = render()
    hide_matplotlib(monkeypatch)
    return with_plots, render()


def test_the_missing_line_follows_the_extras_style(monkeypatch: pytest.MonkeyPatch) -> None:
    assert plots_unavailable() is None  # installed here (the dev extra pulls it in)
    hide_matplotlib(monkeypatch)
    why = plots_unavailable()
    assert why == missing("matplotlib", "plots", "Drawing the report's plots")
    assert why and "\n" not in why and INSTALL in why and "-e '.[plots]'" in why
    with pytest.raises(MissingExtra) as raised:
        require("matplotlib", "plots", "Drawing the report's plots")
    assert str(raised.value) == why  # the same line as every other missing extra


def test_run_report_renders_whole_without_matplotlib(monkeypatch: pytest.MonkeyPatch) -> None:
    ws = Workspace()
    run_dir = ws.run_dir(ws.create_run(None, "toy").id)
    doc = make_report(run_dir)
    with_plots, without = both_ways(monkeypatch, lambda: render_run_html(doc, build_plots(doc)))
    full, bare = checked(with_plots), checked(without)
    assert full.imgs == 5 and bare.imgs == 0
    assert {k for k, _ in SECTIONS} <= bare.ids  # every section, the plots one included
    assert "".join(bare.text).count(INSTALL) == 1 and INSTALL not in with_plots
    # everything but the plots is the same page
    assert PLOTS_SECTION.sub("", with_plots) == PLOTS_SECTION.sub("", without)
    assert build_plots(doc) == []  # the traces are not read for plots that cannot be drawn


def test_input_report_renders_whole_without_matplotlib(
    monkeypatch: pytest.MonkeyPatch, tmp_path: Path
) -> None:
    _trace(tmp_path, 11, 1_000_000, 30, 4096)
    _trace(tmp_path, 12, 1_003_000, 20, 1 << 20)
    a = analyze([tmp_path], views=["file", "proc", "time", "layer"])
    d = diagnose_analysis(a)
    with_plots, without = both_ways(monkeypatch, lambda: render_input_html(str(tmp_path), a, d))
    full, bare = checked(with_plots), checked(without)
    assert full.imgs == 4 and bare.imgs == 0
    assert {"findings", "numbers", "plots", "processes", "files"} <= bare.ids
    assert "".join(bare.text).count(INSTALL) == 1
    assert PLOTS_SECTION.sub("", with_plots) == PLOTS_SECTION.sub("", without)
    assert build_input_plots(a) == []


def test_cli_says_it_once_on_stderr_and_still_writes_the_report(
    monkeypatch: pytest.MonkeyPatch, tmp_path: Path
) -> None:
    traces = tmp_path / "traces"
    traces.mkdir()
    for pid in (21, 22, 23):  # several processes: several plots that could each have complained
        _trace(traces, pid, 1_000_000 + pid, 12, 8192)
    drawn = dftune("report", str(traces), "--output", str(tmp_path / "drawn.html"))
    assert drawn.returncode == 0, drawn.stderr
    assert "dftune[plots]" not in drawn.stderr
    hide_matplotlib(monkeypatch)
    res = dftune("report", str(traces), "--output", str(tmp_path / "bare.html"))
    assert res.returncode == 0, res.stderr
    assert res.stderr.count("dftune[plots]") == 1, res.stderr
    page = checked((tmp_path / "bare.html").read_text())
    assert "".join(page.text).count(INSTALL) == 1 and page.imgs == 0
    ws = Workspace()
    run_dir = ws.run_dir(ws.create_run(None, "toy").id)
    make_report(run_dir)
    run = dftune("report", run_dir.name, "--html", "--json")
    assert run.returncode == 0, run.stderr
    assert run.stderr.count("dftune[plots]") == 1, run.stderr
    assert "".join(checked((run_dir / "report.html").read_text()).text).count(INSTALL) == 1
    md_only = dftune("report", run_dir.name)  # Markdown has no plots: nothing to say
    assert md_only.returncode == 0 and "dftune[plots]" not in md_only.stderr
