"""Terminal output at 80 and 200 columns: nothing cut, nothing squeezed to zero width, ids whole.

The run tables are snapshot-tested on a real run (``recorded/run_small_reads.json``: the ``dftune run
--json`` document and the history of one real run of the bundled small_reads workload); the trace views
and the diagnosis are checked on real dftracer traces. ``DFTUNE_UPDATE_SNAPSHOTS=1`` rewrites the
snapshots (review the diff).
"""

from __future__ import annotations

import json
import os
from collections.abc import Callable
from pathlib import Path
from typing import Any

import pytest
from rich.console import Console
from rich.text import Text

from dftune.core.domain.run import RunResult
from dftune.core.terminal import word_wrapped
from dftune.tools.diagnose.engine import diagnose_analysis
from dftune.tools.diagnose.render import DiagnosisRenderer
from dftune.tools.report.console import RunRenderer
from dftune.tools.report.table import PROPOSAL_COLUMNS
from dftune.tools.trace import analyze
from dftune.tools.trace.render import AnalysisRenderer

HERE = Path(__file__).parent
RECORDED = json.loads((HERE / "recorded" / "run_small_reads.json").read_text())
SNAPSHOTS = HERE / "snapshots"
WIDTHS = (80, 200)


def render(width: int, draw: Callable[[Console], None]) -> str:
    c = Console(width=width, record=True, color_system=None, force_terminal=False)
    draw(c)
    return c.export_text()


def check_fits(text: str, width: int) -> None:
    """Every line within the width, and no cell cut short by an ellipsis."""
    for line in text.splitlines():
        assert len(line.rstrip()) <= width, f"{len(line.rstrip())} > {width}: {line!r}"
    assert "…" not in text, text


def flat(text: str) -> str:
    return " ".join(text.split())


def dense(text: str) -> str:
    """Without any whitespace: a long word folded across lines still matches."""
    return "".join(text.split())


def column(text: str, head: str, next_head: str) -> str:
    """The text of one column of a wide table (by position under its header); the whole text when
    the table is stacked (its header line is absent)."""
    lines = text.splitlines()
    header = next((i for i, line in enumerate(lines) if head in line and next_head in line), None)
    if header is None:
        return text
    start, end = lines[header].index(head), lines[header].index(next_head)
    return "\n".join(line[start:end] for line in lines[header + 1 :])


def snapshot(name: str, text: str) -> None:
    path = SNAPSHOTS / name
    if os.environ.get("DFTUNE_UPDATE_SNAPSHOTS"):
        path.parent.mkdir(exist_ok=True)
        path.write_text(text)
    assert path.is_file(), f"no snapshot {path}: run with DFTUNE_UPDATE_SNAPSHOTS=1 and review it"
    assert text == path.read_text(), (
        f"{name} differs from its snapshot (DFTUNE_UPDATE_SNAPSHOTS=1 rewrites it)"
    )


@pytest.mark.parametrize("width", WIDTHS)
def test_the_run_result_reads_whole_at_80_and_200_columns(width: int) -> None:
    run = RunResult.model_validate(RECORDED["run"])
    text = render(width, lambda c: RunRenderer(c).render(run, table=True, dftune="dftune"))
    check_fits(text, width)
    snapshot(f"run_{width}.txt", text)
    lines = text.splitlines()
    assert any(run.run_id in line for line in lines)  # the run id is never folded
    descriptions = flat(column(text, "Description of Optimization", "App Impact"))
    for row in run.proposal_table:
        assert flat(row.description) in descriptions  # every description whole
        assert row.strategy in text
    if (
        width >= 200
        # the table: one header line with the dftracer-io-optimization
        # skill's six columns, then one row per proposal
    ):
        header = next(line for line in lines if "Description of Optimization" in line)
        for col in PROPOSAL_COLUMNS:
            assert col in header
        numbers = [line.split()[0] for line in lines[lines.index(header) + 2 :] if line[:3].strip().isdigit()]
        assert numbers[: len(run.proposal_table)] == [str(r.number) for r in run.proposal_table]
    else:  # stacked: each proposal's '#n  strategy' line, then every column by name
        for row in run.proposal_table:
            assert f"#{row.number}  {row.strategy}" in text
        for col in PROPOSAL_COLUMNS[2:]:
            assert text.count(f"{col}:") == len(run.proposal_table)


@pytest.mark.parametrize("width", WIDTHS)
def test_history_keeps_every_checkpoint_id_on_one_line(width: int) -> None:
    rows = RECORDED["history"]["checkpoints"]
    text = render(width, lambda c: RunRenderer(c).render_history(rows))
    check_fits(text, width)
    snapshot(f"history_{width}.txt", text)
    lines = text.splitlines()
    for h in rows:
        assert any(h["checkpoint_id"] in line for line in lines), h["checkpoint_id"]


@pytest.mark.parametrize("width", WIDTHS)
def test_trace_views_and_diagnosis_read_whole(width: int, generated_traces: dict[str, Any]) -> None:
    gen = generated_traces["multiproc"]
    a = analyze([gen.trace_dir], views=["file", "proc", "time", "layer"])
    text = render(width, lambda c: AnalysisRenderer(c).render(a, ["summary", "file", "proc", "time"]))
    check_fits(text, width)
    for r in a.views["file"]["rows"][:50]:
        if len(str(r["path"])) <= width - 2:
            assert str(r["path"]) in text  # a path that fits is never cut or folded
    for r in a.views["proc"]["rows"]:
        assert f"{r['pid']:,}" in text or str(r["pid"]) in text
    for header in ("reads", "written", "I/O s", "MiB/s"):
        assert header in text
    d = diagnose_analysis(a)
    text = render(width, lambda c: DiagnosisRenderer(c).render(d))
    check_fits(text, width)
    evidence = dense(column(text, "evidence", "candidates"))
    for b in d.bottlenecks:
        assert dense(b.evidence) in evidence  # whole (a path longer than the column folds, never cut)
        for cand in b.candidates:
            assert cand.id in text


def test_lines_break_at_spaces_and_a_path_longer_than_a_line_stays_whole() -> None:
    path = "/tmp/home/runs/20261203T110028.542Z-dataloader-small-files-c84e44/report.md"
    line = Text.assemble(("    report", "dim"), f" report: {path} " + "and a reason in words " * 4)
    out = word_wrapped(line, 40, 11)
    lines = out.plain.split("\n")
    assert lines[0] == "    report report:" and lines[1] == " " * 11 + path  # copyable as it is
    assert all(len(x) <= 40 for x in lines[2:]) and all(x.startswith(" " * 11) for x in lines[1:])
    assert " ".join(x.strip() for x in lines) == " ".join(line.plain.split())  # nothing lost
    assert out.spans[0].style == "dim" and out.spans[0].end == 10  # the node's style kept
    assert word_wrapped(Text("fits"), 40, 2).plain == "fits"
