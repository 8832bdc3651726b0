"""report.md and report.html show the ROMIO hints in effect before any change and in each arm that
asked for hints, from what ROMIO printed (ROMIO_PRINT_HINTS=1), next to what was asked."""

from __future__ import annotations

from pathlib import Path

import pytest

from dftune.agents.optimizer.hints import override_check
from dftune.core.domain.proposals import Change, Proposal
from dftune.core.domain.run import RunReport, log
from dftune.tools.report.hints import hint_rows
from dftune.tools.report.html import render_run_html
from dftune.tools.report.markdown import render_run_markdown
from dftune.tools.session.workspace import Workspace
from tests.unit.test_report import make_report

#: what ROMIO prints at each MPI_File_open with ROMIO_PRINT_HINTS=1 (two opens)
PRINTED = "".join(
    f"key = cb_buffer_size value = 16777216\nkey = romio_cb_write value = {cb}\n"
    f"key = romio_cb_read value = {cb}\nkey = romio_ds_write value = automatic\n"
    for cb in ("disable", "disable")
)
#: a program whose own MPI_Info sets romio_ds_write=enable (it wins over the hint file)
OVERRIDDEN = "key = romio_ds_write value = enable\nkey = romio_ds_read value = disable\n"


def _hint_proposal(pid: str, hints: dict[str, str]) -> Proposal:
    return Proposal(
        id=pid,
        strategy="l2.romio_cb",
        strategy_name="collective buffering",
        layer="L2",
        checklist=5,
        description=f"ROMIO hints {hints}",
        change=Change(
            kind="env", env={"ROMIO_HINTS": f"/run/hints/{pid}.txt", "ROMIO_PRINT_HINTS": "1"}, params=hints
        ),
    )


def _arm(workdir: Path, printed: str) -> Path:
    (workdir / "logs").mkdir(parents=True)
    (workdir / "logs" / "r0.out").write_text(printed)
    return workdir


@pytest.fixture
def doc(tmp_path: Path) -> RunReport:
    ws = Workspace()
    run_dir = ws.run_dir(ws.create_run(None, "toy").id)
    doc = make_report(run_dir)
    cb = _hint_proposal("romio-cb-disable", {"romio_cb_write": "disable", "romio_cb_read": "disable"})
    ds = _hint_proposal("romio-ds-disable", {"romio_ds_write": "disable", "romio_ds_read": "disable"})
    refused_none, kept = override_check(cb, _arm(tmp_path / "opt2", PRINTED))
    refused, _ = override_check(ds, _arm(tmp_path / "opt3", OVERRIDDEN))
    assert refused_none is None and refused is not None
    first = doc.experiments[0]
    return doc.model_copy(
        update={
            "proposals": [*doc.proposals, cb, ds],
            "experiments": [
                first,
                *(
                    first.model_copy(update={"iteration": n, "proposal_id": p.id, "kept": False})
                    for n, p in ((2, cb), (3, ds))
                ),
            ],
            "events": [
                *doc.events,
                log(
                    "optimizer",
                    "hints in effect before any change: romio_cb_write=automatic, romio_ds_write=automatic",
                ),
                log("verifier", "opt2: win: candidate median 0.65 vs 1.0", hints_in_effect=kept),
                log("verifier", f"opt3: {refused}"),
            ],
        }
    )


def test_rows_show_before_asked_and_in_effect(doc: RunReport) -> None:
    rows = hint_rows(doc)
    assert rows[0] == [
        "baseline (before any change)",
        "-",
        "romio_cb_write=automatic, romio_ds_write=automatic",
    ]
    assert rows[1][0] == "opt2 (romio-cb-disable)"
    assert rows[1][1] == "romio_cb_write=disable, romio_cb_read=disable"
    assert rows[1][2] == "hints in effect at all 2 open(s): romio_cb_write=disable, romio_cb_read=disable"
    assert rows[2][0] == "opt3 (romio-ds-disable)"
    assert "asked disable, in effect enable" in rows[2][2]  # the program's own MPI_Info won
    assert len(rows) == 3  # the knob experiment asked no hint


def test_markdown_and_html_have_the_section(doc: RunReport) -> None:
    md = render_run_markdown(doc)
    section = md.split("## ROMIO hints in effect")[1].split("\n## ")[0]
    assert (
        "| baseline (before any change) | - | romio_cb_write=automatic, romio_ds_write=automatic |" in section
    )
    assert "opt3" in section and "in effect enable" in section
    page = render_run_html(doc, [])
    assert '<section id="hints">' in page and "asked disable, in effect enable" in page


def test_no_section_without_hints(tmp_path: Path) -> None:
    ws = Workspace()
    doc = make_report(ws.run_dir(ws.create_run(None, "toy").id))
    assert hint_rows(doc) == []
    assert "ROMIO hints" not in render_run_markdown(doc)
    assert 'id="hints"' not in render_run_html(doc, [])
