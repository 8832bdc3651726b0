"""Data is never markup: hostile strings (script tags, ANSI/OSC escape sequences, Rich markup) in knob
values, paper metadata, the model's summary and file names reach report.md, report.html and the terminal
as literal text."""

from __future__ import annotations

import json
import re
from pathlib import Path

from rich.console import Console

from dftune.core.domain.run import ProposalRow, RefusedRow, RunResult, VerdictRow
from dftune.core.safetext import md_code, md_link, md_text, printable
from dftune.core.terminal import Col, responsive
from dftune.tools.report.console import RunRenderer
from dftune.tools.report.markdown import render_run_markdown
from dftune.tools.session.workspace import Workspace
from dftune.tools.trace import analyze
from dftune.tools.trace.render import AnalysisRenderer
from tests.unit.test_report import HOSTILE, _trace, make_report

ANSI = "\x1b[31mRED\x1b[0m"
OSC_LINK = "\x1b]8;;https://evil.example/\x1b\\click\x1b]8;;\x1b\\"
TITLE = "\x1b]0;owned\x07"
RICH = "app[/]"
MARKUP = "[link=https://evil.example]x[/link][bold red]loud"
IMG = "![x](https://evil.example/t.png)"
JS_LINK = "[click](javascript:alert(1))"


def _control(text: str) -> list[str]:
    return re.findall(r"[\x00-\x08\x0b-\x1f\x7f-\x9f]", text)


def test_printable_shows_every_control_character_as_an_escape() -> None:
    for hostile in (ANSI, OSC_LINK, TITLE, "bell\x07", "c1\x9b31m", "bidi\u202eevil"):
        out = printable(hostile)
        assert not _control(out) and "\u202e" not in out
        assert "\\x" in out or "\\u" in out
    assert printable("plain text [ok]") == "plain text [ok]"


def test_markdown_text_cannot_become_html_a_link_an_image_or_a_table_break() -> None:
    for hostile in (HOSTILE, "<img src=x onerror=alert(1)>", IMG, JS_LINK, "a | b", "`code`", ANSI):
        out = md_text(hostile)
        assert "<" not in out.replace("\\<", "") and "](" not in out.replace("\\](", "")
        assert "|" not in out.replace("\\|", "") and not _control(out)
    assert md_link("javascript:alert(1)") == "javascript:alert(1)"
    assert md_link("https://doi.org/10.1/x", "paper") == "[paper](https://doi.org/10.1/x)"
    assert md_code("a`b") == "``a`b``"


def test_report_md_escapes_knob_values_paper_metadata_and_the_summary(tmp_path: Path) -> None:
    ws = Workspace()
    run_dir = ws.run_dir(ws.create_run(None, "toy").id)
    doc = make_report(run_dir)
    doc.summary = f"all good {HOSTILE} {JS_LINK} {ANSI}"  # a model-written summary is untrusted too
    doc.proposals[0].description = f"WORKERS={HOSTILE} {IMG}"
    doc.proposal_table[0].description = f"WORKERS={HOSTILE} {IMG}"
    assert doc.baseline is not None
    doc.baseline.settings = {"WORKERS": HOSTILE}
    md = render_run_markdown(doc)
    # no raw tag: every "<" of the data is escaped (the only raw "<" open http(s) autolinks)
    assert all(m.group(1).startswith("https://") for m in re.finditer(r"(?<!\\)<(\S+)", md)), md
    assert not re.search(r"(?<!\\)\]\((javascript|https://evil)", md)  # no link or image of data
    assert not _control(md)
    # still readable: the text is there, escaped
    assert '\\<script\\>alert("pwned")\\</script\\>' in md
    assert "javascript:alert(1)" in md  # the evil citation's URL is shown as text, never linked
    assert "[Drishti" not in md or "](https://doi.org/10.1109/PDSW56643.2022.00006)" in md


def test_terminal_renderers_print_data_as_text(tmp_path: Path) -> None:
    hostile = f"{RICH} {MARKUP} {OSC_LINK} {ANSI} {TITLE}"
    result = RunResult(
        run_id="r1",
        workload=hostile,
        status="completed",
        status_reason=hostile,
        baseline_median=1.0,
        best_median=0.5,
        proposal_table=[
            ProposalRow(
                number=1,
                id=hostile,
                strategy=hostile,
                description=hostile,
                app_impact_pct=1.0,
                app_impact_source="trace model",
                system_impact_pct=0.0,
                system_impact_source="trace model",
                weighted_score=0.5,
                status="proposed",
                layer="L1",
            )
        ],
        verdicts=[
            VerdictRow(
                iteration=1,
                proposal=hostile,
                strategy=hostile,
                verdict="win",
                change_pct=12.0,
                kept=True,
                reverted=False,
                kb_record=3,
                voided_by=None,
            )
        ],
        refused=[RefusedRow(proposal=hostile, strategy=hostile, status="rejected", reason=hostile)],
        report=hostile,
        run_dir=hostile,
    )
    for width in (80, 200):
        c = Console(width=width, record=True, force_terminal=True, color_system="truecolor")
        RunRenderer(c).render(result)  # no MarkupError on "[/]"
        out = c.export_text(styles=False, clear=False)
        raw = c.export_text(styles=True)
        assert RICH in out and "[bold red]loud" in out and "[link=" in out  # shown, not interpreted
        assert "\x1b]" not in raw and "\x07" not in raw  # no OSC (link, title) ever reaches the terminal
        assert "\x1b[31mRED" not in raw and "\x1b[" in raw  # the data's colour neither; Rich's own styles do
        assert "\\x1b]8;;https://evil.example/" in out
    table = responsive(Console(width=80), "t", [Col("path")], [[hostile]])
    c = Console(width=80, record=True)
    c.print(table)
    assert RICH in c.export_text()


def test_analyze_of_a_trace_with_hostile_file_names(tmp_path: Path) -> None:
    """A trace file named ``app[/]`` and a traced file whose name carries OSC and ANSI sequences."""
    tdir = tmp_path / "traces"
    (tdir / "app[").mkdir(parents=True)
    _trace(tdir, 9, 1_000_000, 3, 4096)
    hostile_trace = tdir / "app[" / "]\x1b]8;;evil\x1b\\-9-preload.pfw.gz"  # its path reads app[/]...
    (tdir / "trace-9-preload.pfw.gz").rename(hostile_trace)
    import gzip

    name = json.dumps(f"/data/{RICH}{OSC_LINK}{ANSI}")[1:-1]  # as dftracer writes it: JSON-escaped
    with gzip.open(hostile_trace, "rt") as fh:
        text = fh.read().replace("/data/f9", name)
    with gzip.open(hostile_trace, "wt") as fh:
        fh.write(text)
    (tdir / "bad[").mkdir()
    with open(tdir / "bad[" / "].pfw", "w") as fh:  # a bad line: its message names the file bad[/].pfw
        fh.write('{"ph": 1, "name": \n')
    a = analyze([tdir], views=["file", "proc"], skip_bad=True)
    assert any(RICH in str(r["path"]) for r in a.views["file"]["rows"])
    for width in (80, 200):
        c = Console(width=width, record=True, force_terminal=True)
        AnalysisRenderer(c).render(a, ["summary", "file", "proc"])
        raw = c.export_text(styles=True, clear=False)
        out = c.export_text()
        assert RICH in out and "\x1b]" not in raw and "\x1b[31m" not in raw
        # the skipped file is named, as text (a long temporary path folds at 80 columns)
        assert "bad[/].pfw" in "".join(line.rstrip() for line in out.splitlines())
    json.dumps(a.to_json_dict())  # --json stays valid JSON with the hostile names


def test_error_lines_carry_no_escape_sequence(tmp_path: Path) -> None:
    from tests.cli_inproc import dftune

    bad = tmp_path / f"missing{ANSI}{TITLE}"
    res = dftune("analyze", str(bad))
    assert res.returncode == 2
    assert "\x1b" not in res.stderr and "\x07" not in res.stderr
    assert "\\x1b[31mRED" in res.stderr and len(res.stderr.strip().splitlines()) == 1
