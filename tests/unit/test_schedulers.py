"""Slurm and Flux launchers (``tools/runner/schedulers/``): the job scripts and submit commands
they build, and their parsers of what the schedulers print. Running jobs through fake schedulers
is end-to-end: tests/e2e/test_schedulers_fake.py.
"""

from __future__ import annotations

import sys
from pathlib import Path

import pytest

from dftune.tools.runner import schedulers
from dftune.tools.runner.schedulers import (
    flux_submit_argv,
    jobs,
    parse_flux_id,
    parse_flux_result,
    parse_sacct,
    parse_sbatch_id,
    parse_scontrol_job,
    run_scheduled,
    slurm_script,
)
from dftune.tools.runner.spec import Launcher

FAKES = Path(__file__).resolve().parent.parent / "fakes"
KINDS = ("slurm", "flux")
PY = sys.executable


# --------------------------------------------------------------------------- builders


def test_slurm_script_golden() -> None:
    launcher = Launcher(
        kind="slurm", ranks=4, nodes=2, partition="batch", time_limit_min=15, extra_args=["--exclusive"]
    )
    text = slurm_script(
        ["python", "train.py", "--data", "/d/my data", "it's"],
        cwd=Path("/w/run"),
        log_dir=Path("/w/logs"),
        label="opt1-r2",
        launcher=launcher,
    )
    assert text == (
        "#!/bin/bash\n"
        "#SBATCH --job-name=dftune-opt1-r2\n"
        "#SBATCH --nodes=2\n"
        "#SBATCH --ntasks=4\n"
        "#SBATCH --time=15\n"
        "#SBATCH --partition=batch\n"
        "#SBATCH --output=/w/logs/opt1-r2.out\n"
        "#SBATCH --error=/w/logs/opt1-r2.err\n"
        "#SBATCH --chdir=/w/run\n"
        "#SBATCH --export=ALL\n"
        "\n"
        "# dftune: the job's own clock around the program (the queue wait is not in it)\n"
        'echo "start $(date +%s.%N)" > /w/logs/opt1-r2.time\n'
        "srun python train.py --data '/d/my data' 'it'\"'\"'s'\n"
        "rc=$?\n"
        'echo "end $(date +%s.%N) $rc" >> /w/logs/opt1-r2.time\n'
        "exit $rc\n"
    )


def test_slurm_script_quotes_escapes_and_refuses() -> None:
    launcher = Launcher(kind="slurm")
    text = slurm_script(["a"], cwd=Path("/w/my run"), log_dir=Path("/w/100%"), label="x y", launcher=launcher)
    lines = text.splitlines()
    assert "#SBATCH --partition" not in text  # no partition: the cluster default
    assert "#SBATCH --job-name=dftune-x_y" in lines
    assert '#SBATCH --chdir="/w/my run"' in lines
    assert "#SBATCH --output=/w/100%%/x y.out" not in lines  # blanks need quotes
    assert '#SBATCH --output="/w/100%%/x y.out"' in lines  # % is sbatch's pattern character
    with pytest.raises(ValueError, match="line break"):
        slurm_script(
            ["a"], cwd=Path("/w/evil\n#SBATCH --mem=1T"), log_dir=Path("/l"), label="x", launcher=launcher
        )
    with pytest.raises(ValueError, match="non-empty"):
        slurm_script([], cwd=Path("/w"), log_dir=Path("/l"), label="x", launcher=launcher)


def test_flux_submit_argv_golden() -> None:
    launcher = Launcher(
        kind="flux",
        ranks=8,
        nodes=2,
        partition="pbatch",
        time_limit_min=90,
        extra_args=["--exclusive", "--setattr=system.bank=io"],
    )
    argv = flux_submit_argv(
        ["python", "-c", "print(1)"],
        cwd=Path("/w/run"),
        log_dir=Path("/w/logs"),
        label="base",
        launcher=launcher,
    )
    assert argv == [
        "flux",
        "submit",
        "--job-name=dftune-base",
        "--nodes=2",
        "--ntasks=8",
        "--time-limit=90m",
        "--output=/w/logs/base.out",
        "--error=/w/logs/base.err",
        "--cwd=/w/run",
        "--queue=pbatch",
        "--exclusive",
        "--setattr=system.bank=io",
        "python",
        "-c",
        "print(1)",
    ]
    plain = flux_submit_argv(
        ["a"], cwd=Path("/w"), log_dir=Path("/l"), label="x", launcher=Launcher(kind="flux")
    )
    assert not any(a.startswith("--queue") for a in plain)
    assert plain[-1] == "a" and "--time-limit=30m" in plain
    with pytest.raises(ValueError, match="template"):
        flux_submit_argv(
            ["a"], cwd=Path("/w"), log_dir=Path("/l/{{id}}"), label="x", launcher=Launcher(kind="flux")
        )


@pytest.mark.parametrize(
    ("text", "expected"),
    [
        ("1234\n", "1234"),
        ("1234;cluster2\n", "1234"),
        ("sbatch: warning: x\n77\n", "77"),
        ("Submitted batch job 12\n", None),
        ("", None),
        ("12a\n", None),
    ],
)
def test_parse_sbatch_id(text: str, expected: str | None) -> None:
    assert parse_sbatch_id(text) == expected


def test_parse_sacct_reads_every_line() -> None:
    """The job line first, then its steps; ``N:S`` split; decorations dropped."""
    rows = parse_sacct(
        "7.batch|FAILED|137:0|2024-05-01T12:00:00|2024-05-01T12:00:05|2024-05-01T12:00:09\n"
        "7|FAILED|137:0|2024-05-01T12:00:00|2024-05-01T12:00:05|2024-05-01T12:00:09\n"
        "7.0|CANCELLED|0:9|2024-05-01T12:00:05|2024-05-01T12:00:05|2024-05-01T12:00:09\n"
        "\n"
    )
    assert [(r.step, r.state, r.code, r.signal) for r in rows] == [
        ("", "FAILED", 137, 0),
        ("batch", "FAILED", 137, 0),
        ("0", "CANCELLED", 0, 9),
    ]
    assert rows[0].end is not None and rows[0].start is not None and rows[0].end - rows[0].start == 4
    assert [
        (r.state, r.code, r.signal) for r in parse_sacct("1|CANCELLED by 1000|0:15\n2|FAILED+|3:0\n")
    ] == [("CANCELLED", 0, 15), ("FAILED", 3, 0)]
    assert parse_sacct("") == [] and parse_sacct("garbage\n") == []
    (running,) = parse_sacct("9|RUNNING||2024-05-01T12:00:00|2024-05-01T12:00:01|Unknown\n")
    assert running.code is None and running.end is None


def test_parse_scontrol_job() -> None:
    line = (
        "JobId=5 JobName=x UserId=root(0) JobState=TIMEOUT Reason=TimeLimit Dependency=(null) ExitCode=0:15 "
        "DerivedExitCode=0:0 SubmitTime=2026-12-01T09:24:51 StartTime=2026-12-01T09:24:52 "
        "EndTime=2026-12-01T09:26:18 Command=/w/my job.sh WorkDir=/w StdErr=/w/5.err\n"
    )
    info = parse_scontrol_job(line)
    assert info["JobState"] == "TIMEOUT" and info["ExitCode"] == "0:15" and info["Reason"] == "TimeLimit"
    assert info["StartTime"] == "2026-12-01T09:24:52" and info["Command"] == "/w/my"


def test_never_starting_reasons() -> None:
    for reason in (
        "PartitionConfig",
        "PartitionNodeLimit",
        "PartitionTimeLimit",
        "JobHeldUser",
        "JobHeldAdmin",
        "DependencyNeverSatisfied",
        "BadConstraints",
        "QOSMaxCpuPerJobLimit",
        "AssocMaxWallDurationPerJobLimit",
        "QOSMaxMemoryPerJob",
        "QOSMinCpuNotSatisfied",
    ):
        assert schedulers.slurm_never_starts(reason), reason
    for reason in (
        "Resources",
        "Priority",
        "None",
        "Dependency",
        "ReqNodeNotAvail",
        "QOSGrpCpuLimit",
        "AssocGrpJobsLimit",
        "QOSMaxJobsPerUserLimit",
        "BeginTime",
        "PartitionDown",
        "",
    ):
        assert not schedulers.slurm_never_starts(reason), reason


def test_srun_signal_and_program_stderr() -> None:
    err = (
        "dying\n"
        "srun: error: vm: task 0: Killed\n"
        "srun: Force Terminated StepId=3.0\n"
        "slurmstepd-vm: error: *** STEP 3.0 ON vm CANCELLED AT 2026-12-01T09:24:54 ***\n"
    )
    assert schedulers.srun_signal(err, 137) == 9
    assert schedulers.srun_signal("srun: error: n1: tasks 0-3: Segmentation fault (core dumped)\n", 139) == 11
    assert schedulers.srun_signal("srun: error: vm: task 0: Exited with exit code 137\n", 137) == 0
    assert schedulers.srun_signal(err, 3) == 0
    assert schedulers.program_stderr(err) == "dying\n"
    assert schedulers.program_stderr("flux-shell[0]: task 0: exited\nreal line\n") == "real line\n"


@pytest.mark.parametrize(
    ("state", "code", "sig", "steps", "stderr", "expected"),
    [
        ("COMPLETED", 0, 0, [], "", ("ok", 0)),
        ("FAILED", 3, 0, [], "", ("failed", 3)),
        ("FAILED", 137, 0, [("batch", "FAILED", 137, 0), ("0", "CANCELLED", 0, 9)], "", ("failed", -9)),
        ("FAILED", 137, 0, [], "srun: error: vm: task 0: Killed\n", ("failed", -9)),
        ("FAILED", 137, 0, [], "", ("failed", 137)),
        ("TIMEOUT", 0, 0, [("batch", "CANCELLED", 0, 15)], "", ("timeout", -15)),
        ("TIMEOUT", 0, 15, [], "", ("timeout", -15)),
        ("TIMEOUT", 0, 0, [], "", ("timeout", None)),
        ("CANCELLED", 0, 15, [], "", ("failed", -15)),
        ("OUT_OF_MEMORY", 0, 125, [], "", ("failed", -125)),
    ],
)
def test_slurm_outcome(
    state: str,
    code: int,
    sig: int,
    steps: list[tuple[str, str, int, int]],
    stderr: str,
    expected: tuple[str, int | None],
) -> None:
    rows = [schedulers.SacctRow(step=a, state=b, code=c, signal=d) for a, b, c, d in steps]
    status, exit_code, reason = schedulers.slurm_outcome("7", state, code, sig, rows, stderr, "sacct")
    assert (status, exit_code) == expected, reason
    if status != "ok":
        assert "Slurm job 7, state from sacct" in reason
        assert exit_code != 0  # never "exit code 0" for a job that did not complete
    if exit_code is not None and exit_code < 0:
        assert f"killed by signal {-exit_code}" in reason


def test_wall_time_sources(tmp_path: Path) -> None:
    """The job script's clock first, then the scheduler's times; never the submit-to-end span."""
    watch = jobs._Watch(submitted=100.0, submitted_epoch=1000.0, first_running=103.0, gone=110.0)
    clock = tmp_path / "r.time"
    clock.write_text("start 1002.25\nend 1004.75 0\n")
    assert jobs._wall(watch, None, clock) == (2.5, "job script clock around srun (date +%s.%N)", 2.25)
    clock.write_text("start 1002.25\n")  # killed before the end line
    end = schedulers.JobEnd("failed", 1, "", "scontrol (accounting disabled)", 1000.0, 1003.0, 1009.0)
    assert jobs._wall(watch, end, clock) == (
        6.0,
        "scontrol (accounting disabled) start/end (whole seconds)",
        3.0,
    )
    flux = schedulers.JobEnd("ok", 0, "", "flux jobs", 1000.0, 1001.5, None, runtime_s=0.42)
    assert jobs._wall(watch, flux, None) == (0.42, "flux jobs runtime", 1.5)
    wall, source, queue = jobs._wall(watch, None, tmp_path / "missing.time")
    assert (wall, queue) == (7.0, 3.0) and "poll clock" in source


def test_parse_flux_output() -> None:
    assert parse_flux_id("ƒ2Vs3mC\n") == "ƒ2Vs3mC"
    assert parse_flux_id("f2Vs3mC\n") == "f2Vs3mC"
    assert parse_flux_id("123456789\n") == "123456789"
    assert parse_flux_id("flux-submit: ERROR: oops\n") is None
    assert parse_flux_id("") is None
    assert parse_flux_result("COMPLETED 0\n") == ("COMPLETED", 0)
    assert parse_flux_result("FAILED 3") == ("FAILED", 3)
    assert parse_flux_result("CANCELED \n") == ("CANCELED", None)
    assert parse_flux_result(" \n") is None


def test_run_scheduled_refuses_local_launchers(tmp_path: Path) -> None:
    with pytest.raises(ValueError, match="not a batch scheduler"):
        run_scheduled(
            ["true"], cwd=tmp_path, env={}, timeout_s=1, log_dir=tmp_path, launcher=Launcher(kind="local")
        )
