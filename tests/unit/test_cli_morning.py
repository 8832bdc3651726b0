"""The CLI's morning-view promises: bench says why replicates failed, doctor finds the launcher the runner
uses and refuses a data dir that does not exist, budgets parse, compare says which way is better."""

from __future__ import annotations

import subprocess
import sys
import time
from datetime import datetime, timedelta
from pathlib import Path

import pytest

from dftune.agents.doctor import mpi_launcher
from dftune.tools.report.compare import row
from dftune.tools.report.console import compare_change
from dftune.tools.runner.bench import find_mpirun
from dftune.tools.runner.deadline import BudgetError, Deadline, parse_deadline, parse_duration, resolve
from tests.cli_inproc import dftune as run_cli

CAMPAIGN = Path(__file__).resolve().parents[1] / "graph" / "campaign"


def dftune(*args: str, timeout: float = 120) -> subprocess.CompletedProcess[str]:
    return run_cli(*args, env={"COLUMNS": "80"})


def test_bench_prints_why_each_replicate_failed_and_fails_when_none_succeeded() -> None:
    res = dftune("bench", str(CAMPAIGN / "broken.toml"), "--replicates", "2")
    assert res.returncode == 3, (res.returncode, res.stderr)
    assert "replicate 1/2: failed" in res.stderr and "no such dataset: /data/missing" in res.stderr
    assert "replicate r0 failed: exit code 3: no such dataset: /data/missing" in res.stdout
    last = res.stderr.strip().splitlines()[-1]
    assert last.startswith("dftune: error: no replicate of toy-broken succeeded") and "exit code 3" in last
    # --json: the document on stdout, the one-line reason on stderr, still non-zero
    res = dftune("bench", str(CAMPAIGN / "broken.toml"), "--replicates", "1", "--json")
    assert res.returncode == 3 and res.stdout.lstrip().startswith("{")
    assert len(res.stderr.strip().splitlines()) == 1


def test_bench_of_a_good_workload_still_exits_zero() -> None:
    res = dftune("bench", str(CAMPAIGN / "fast.toml"), "--replicates", "1", "--no-trace")
    assert res.returncode == 0, res.stderr
    assert "untraced: 1/1 replicates ok" in res.stdout
    median = next(line for line in res.stdout.splitlines() if ": median " in line)
    assert median.split(": median ")[1].split(",")[0].endswith(" s")  # every number with its unit


def test_doctor_refuses_a_data_dir_that_does_not_exist(tmp_path: Path) -> None:
    res = dftune("doctor", "--data-dir", str(tmp_path / "nope"))
    assert res.returncode == 2
    assert res.stderr.strip() == f"dftune: error: --data-dir {tmp_path / 'nope'}: no such file or directory"
    f = tmp_path / "file"
    f.write_text("x")
    assert "not a directory" in dftune("doctor", "--data-dir", str(f)).stderr


def test_doctor_names_the_mpirun_the_runner_would_use() -> None:
    found = mpi_launcher()
    runner = find_mpirun()
    if Path(runner).is_absolute():
        assert found["path"] == runner
    beside = Path(sys.executable).parent / "mpirun"
    if beside.is_file():  # a pip-installed MPI beside the interpreter wins over PATH, as in the runner
        assert found["path"] == str(beside) and found["where"] == "beside the Python running dftune"


def test_budgets_and_deadlines_parse_or_say_how() -> None:
    assert parse_duration("90s") == 90 and parse_duration("4m") == 240 and parse_duration("8h") == 8 * 3600
    assert parse_duration("1h30m") == 5400
    for bad in ("4 minutes", "m4", "", "-3m"):
        with pytest.raises(BudgetError):
            parse_duration(bad)
    now = datetime(2026, 1, 1, 22, 0).astimezone()
    assert parse_deadline("06:30", now) == (now.replace(hour=6, minute=30) + timedelta(days=1)).timestamp()
    assert parse_deadline("23:15", now) == now.replace(hour=23, minute=15).timestamp()
    with pytest.raises(BudgetError):
        parse_deadline("25:00", now)
    with pytest.raises(BudgetError):
        resolve("4m", "06:30")
    at = resolve("4m", None, now=1000.0)
    assert at == 1240.0 and resolve(None, None) is None


def test_a_deadline_refuses_what_its_measured_cost_says_cannot_finish() -> None:
    d = Deadline(time.time() + 60, reserve_s=10)
    assert d.refuse("opt1", 20.0) is None and d.refuse("opt1", None) is None
    why = d.refuse("opt2", 80.0)
    assert why is not None and why.startswith("not started: opt2 needs about 80 s (measured)")
    assert Deadline(time.time() + 5, reserve_s=10).refuse("x", None) is not None
    assert d.cap(300.0) <= 50.0 and d.cap(5.0) == 5.0


def test_compare_changes_say_better_or_worse() -> None:
    assert compare_change(row("io_time_s", "t", "s", 1.0, 2.916, "lower")) == "+191.6% worse"
    assert compare_change(row("io_time_s", "t", "s", 2.0, 1.0, "lower")) == "-50.0% better"
    assert compare_change(row("bw", "bw", "mib_s", 1.0, 2.0, "higher")) == "+100.0% better"
    assert compare_change(row("events", "events", "count", 10.0, 20.0)) == "+100.0% more"
    assert compare_change(row("seq", "seq", "pct", 10.0, 20.0)) == "+10.0 pp more"
