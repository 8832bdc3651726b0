"""The run at a glance (what ``dftune run`` and ``make demo`` end with), the pending change shown
with its exact command and rollback, the next commands as they must be pasted, and the progress
printer whose replicate/pair lines count in place."""

from __future__ import annotations

import io
import json
import sys
from pathlib import Path
from typing import Any

from rich.console import Console

from dftune.core.domain.proposals import Change
from dftune.core.domain.run import RunResult
from dftune.graphs.approval import request
from dftune.tools.report.console import RunRenderer
from dftune.tools.report.progress_console import ProgressPrinter
from dftune.tools.report.run_glance import change_lines, dftune_command, glance_rows, next_commands
from dftune.tools.runner.progress_text import Transient
from tests.unit.test_cli_approvals import READAHEAD

HERE = Path(__file__).parent
RUN = RunResult.model_validate(
    {
        **json.loads((HERE / "recorded" / "run_small_reads.json").read_text())["run"],
        "metric": {"name": "epoch_time_s", "unit": "s", "lower_is_better": True, "kind": "stdout_regex"},
    }
)
SUDO = READAHEAD  # a privileged L3 change: its command, what it reads, its rollback
SUDO_PENDING = request(SUDO, "r1")


def _text(draw: Any, width: int = 80) -> str:
    c = Console(width=width, record=True, color_system=None, force_terminal=False)
    draw(c)
    return c.export_text()


def test_the_glance_says_metric_result_kept_refused_and_waiting() -> None:
    rows = dict(glance_rows(RUN))
    assert rows["metric"] == "epoch_time_s (s, lower is better)"
    assert rows["result"].startswith("0.65 s -> 0.1931 s (+70.3% better)")
    assert rows["kept"] == "WORKERS=2 (opt3, +43.6% better), then WORKERS=4 (opt4, +47.3% better)"
    assert rows["tried"] == "4 experiment(s): 2 no change, 2 win"
    assert rows["refused"].startswith(
        "4 by the guards: EPOCHS=1 (no-doing-less), REQUEST=1048576 (access-pattern)"
    )
    assert rows["waiting"] == "nothing"


def test_nothing_kept_says_so() -> None:
    r = RUN.model_copy(update={"verdicts": [v.model_copy(update={"kept": False}) for v in RUN.verdicts]})
    assert dict(glance_rows(r))["kept"] == "nothing"
    assert "no change kept" in dict(glance_rows(r))["result"]


def test_the_default_result_fits_a_screen_and_has_no_table() -> None:
    text = _text(lambda c: RunRenderer(c).render(RUN, dftune=".venv/bin/dftune"))
    lines = text.splitlines()
    assert len(lines) <= 20, text
    assert all(len(line.rstrip()) <= 80 for line in lines)
    assert "Proposal table" not in text and "Description of Optimization" not in text
    assert f"  .venv/bin/dftune history {RUN.run_id}" in lines
    assert "  .venv/bin/dftune kb lookup --workload small-files-reader" in lines


def test_a_privileged_change_shows_its_command_and_rollback_before_the_answer() -> None:
    r = RUN.model_copy(update={"status": "awaiting_approval", "pending": [SUDO_PENDING]})
    text = _text(lambda c: RunRenderer(c).render(r, dftune="dftune"), width=120)
    assert "runs: sudo -n blockdev --setra 8192 /dev/sda" in text
    assert "rollback: sudo -n blockdev --setra '{current}' /dev/sda" in text
    assert "reads the value now (kept for the rollback): blockdev --getra /dev/sda" in text
    assert text.index("runs: sudo") < text.index(f"dftune approve {RUN.run_id}")
    assert [c for _, c in next_commands(r, "dftune")][:2] == [
        f"dftune approve {RUN.run_id}",
        f"dftune approve {RUN.run_id} --reject --reason '...'",
    ]


def test_a_knob_change_says_what_it_sets_and_that_nothing_on_the_system_changes() -> None:
    lines = change_lines(Change(kind="knob", settings={"LUSTRE_STRIPES": "4,8"}))
    assert lines[0] == "sets: LUSTRE_STRIPES=4,8"
    assert lines[1].startswith("rollback: the next experiment starts from the kept settings")


def test_the_dftune_command_is_the_venvs_when_not_on_path(monkeypatch: Any, tmp_path: Path) -> None:
    # a virtual environment of its own: the interpreter and its dftune script side by side
    venv_bin = tmp_path / "proj" / ".venv" / "bin"
    venv_bin.mkdir(parents=True)
    (venv_bin / "python").write_text("")
    (venv_bin / "dftune").write_text("#!/bin/sh\n")
    (venv_bin / "dftune").chmod(0o755)
    monkeypatch.setattr(sys, "executable", str(venv_bin / "python"))
    monkeypatch.setenv("PATH", "/usr/bin:/bin")
    elsewhere = tmp_path / "elsewhere"
    elsewhere.mkdir()
    assert dftune_command(cwd=elsewhere) == str(venv_bin / "dftune")
    assert dftune_command(cwd=venv_bin.parent.parent) == f"{venv_bin.parent.name}/bin/dftune"
    monkeypatch.setenv("PATH", f"{venv_bin}:/usr/bin:/bin")
    assert dftune_command(cwd=elsewhere) == "dftune"


class _Tty(io.StringIO):
    def isatty(self) -> bool:
        return True


def test_transient_lines_count_in_place_on_a_terminal() -> None:
    out = _Tty()
    p = ProgressPrinter(Console(file=out, width=80, force_terminal=True, color_system=None))
    p("diagnoser", "baseline: 3 replicate(s)")
    p("diagnoser", Transient("baseline replicate 1/3: 1.000 s"))
    p("diagnoser", Transient("baseline replicate 2/3: 1.000 s"))
    p("optimizer", "16 candidate change(s)")
    raw = out.getvalue()
    assert raw.count("\r\x1b[2K") == 3  # two overwrites and the clear before the milestone
    assert raw.count("\n") == 2  # only the milestones end a line
    assert raw.index("replicate 2/3") < raw.index("16 candidate")


def test_off_a_terminal_transient_lines_are_kept_or_left_out() -> None:
    kept = io.StringIO()
    ProgressPrinter(Console(file=kept, width=80))(
        "verifier", Transient("opt1: pair 1/5: incumbent 1 s, candidate 1 s")
    )
    assert "pair 1/5" in kept.getvalue() and "\r" not in kept.getvalue()
    dropped = io.StringIO()
    p = ProgressPrinter(Console(file=dropped, width=80), keep_transient=False, milestones=frozenset({"kb"}))
    p("verifier", Transient("opt1: pair 1/5"))
    p("optimizer", "opt1: applied WORKERS=2")
    p("kb", "opt1: win (kept) -> KB record 5 " + "x" * 100)
    # the kb line wraps at a space, under its message; a word longer than a line stays whole
    assert dropped.getvalue().count("\n") == 2 and "pair" not in dropped.getvalue()
    assert "\n" + " " * ProgressPrinter.INDENT + "x" * 100 + "\n" in dropped.getvalue()
    fit = io.StringIO()
    ProgressPrinter(Console(file=fit, width=80), fit=True)("kb", "y" * 200)
    assert fit.getvalue().count("\n") == 1 and "…" in fit.getvalue()


def test_a_run_whose_baseline_could_not_run_says_fix_the_spec_never_resume() -> None:
    """The run keeps its archived spec, so resuming repeats the mistake: a fixed spec is a new run."""
    r = RUN.model_copy(
        update={
            "status": "failed",
            "baseline_median": None,
            "spec_path": "/home/u/my spec.toml",
            "verdicts": [],
        }
    )
    commands = [c for _, c in next_commands(r, "dftune")]
    assert commands[:2] == [
        "dftune bench '/home/u/my spec.toml' --replicates 1 --no-trace",
        "dftune run '/home/u/my spec.toml'",
    ]
    assert not any("resume" in c for c in commands)
    crashed = r.model_copy(update={"baseline_median": 0.65})  # a run that measured and then failed
    assert f"dftune resume {RUN.run_id}" in [c for _, c in next_commands(crashed, "dftune")]
