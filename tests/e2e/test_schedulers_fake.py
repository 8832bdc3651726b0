"""Slurm and Flux launchers against fake schedulers (``tests/fakes``): real processes
submitted, polled, cancelled and killed, the way a cluster does it. The parsers and the
job-script builders are unit-tested in tests/unit/test_schedulers.py.

The fakes in ``tests/fakes`` (sbatch, squeue, sacct, scancel, srun, flux) are small Python programs
that behave like the real commands: sbatch reads the ``#SBATCH`` lines and runs the script detached
in its own process group, squeue reports PENDING then RUNNING, sacct the recorded exit status,
scancel / flux cancel kill the job's process group. They are put first on PATH, with their state in
a per-test folder.
"""

from __future__ import annotations

import contextlib
import json
import os
import signal
import sys
import threading
import time
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import pytest

from dftune.core.process import ProcessResult
from dftune.tools.runner.schedulers import (
    jobs,
    run_flux,
    run_slurm,
)
from dftune.tools.runner.spec import Launcher

FAKES = Path(__file__).resolve().parent.parent / "fakes"
KINDS = ("slurm", "flux")
PY = sys.executable


# --------------------------------------------------------------------------- builders


# --------------------------------------------------------------------------- the fake cluster


class Cluster:
    """The fake schedulers' state folder plus a way to run a job through them."""

    def __init__(self, tmp: Path) -> None:
        self.tmp = tmp
        self.state = tmp / "sched"
        self.cwd = tmp / "work"
        self.logs = tmp / "logs"
        self.cwd.mkdir()

    def run(
        self,
        kind: str,
        argv: list[str],
        *,
        timeout_s: float = 20.0,
        env: dict[str, str] | None = None,
        **launcher: Any,
    ) -> ProcessResult:
        runner = run_slurm if kind == "slurm" else run_flux
        return runner(
            argv,
            cwd=self.cwd,
            env={**os.environ, **(env or {})},
            timeout_s=timeout_s,
            log_dir=self.logs,
            label="rep1",
            launcher=Launcher(kind=kind, poll_s=0.1, **launcher),
        )

    def job_dirs(self, kind: str) -> list[Path]:
        d = self.state / kind
        return sorted(p for p in d.iterdir() if p.name.isdigit()) if d.is_dir() else []

    def only_job(self, kind: str) -> dict[str, Any]:
        dirs = self.job_dirs(kind)
        assert len(dirs) == 1, dirs
        d = dirs[0]
        info: dict[str, Any] = {"dir": d, "meta": json.loads((d / "meta.json").read_text())}
        for name in ("run", "end"):
            f = d / f"{name}.json"
            info[name] = json.loads(f.read_text()) if f.exists() else None
        info["cancelled"] = (d / "cancelled").exists()
        return info

    def cleanup(self) -> None:
        """Kill whatever a failed test left running (only processes the fakes started)."""
        for kind in KINDS:
            for d in self.job_dirs(kind):
                if (d / "end.json").exists():
                    continue
                with contextlib.suppress(OSError, ValueError, KeyError):
                    os.killpg(json.loads((d / "run.json").read_text())["pgid"], signal.SIGKILL)
                with contextlib.suppress(OSError, ValueError):
                    os.kill(int((d / "supervisor.pid").read_text()), signal.SIGKILL)


@pytest.fixture
def cluster(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> Iterator[Cluster]:
    path = [str(FAKES), str(Path(PY).parent), os.environ.get("PATH", os.defpath)]
    monkeypatch.setenv("PATH", os.pathsep.join(path))
    monkeypatch.setenv("FAKE_SCHED_DIR", str(tmp_path / "sched"))
    monkeypatch.setenv("FAKE_SCHED_PENDING_S", "0.1")
    for var in (
        "FAKE_SCHED_TIME_SCALE",
        "FAKE_SQUEUE_MIN_JOB_AGE",
        "FAKE_SACCT_DELAY_S",
        "LD_PRELOAD",
        "FAKE_SLURM_PARTITIONS",
        "FAKE_FLUX_QUEUES",
        "FAKE_SACCT_DISABLED",
        "FAKE_SLURM_CPUS",
    ):
        monkeypatch.delenv(var, raising=False)
    c = Cluster(tmp_path)
    yield c
    c.cleanup()


def _gone(pid: int, within_s: float = 5.0) -> bool:
    """True once ``pid`` no longer runs (a zombie waiting for its reaper counts as gone)."""
    deadline = time.monotonic() + within_s
    while time.monotonic() < deadline:
        try:
            stat = Path(f"/proc/{pid}/stat").read_text()
        except FileNotFoundError:
            return True
        if stat.rsplit(")", 1)[1].split()[0] in ("Z", "X"):
            return True
        time.sleep(0.05)
    return False


# --------------------------------------------------------------------------- jobs

HELLO = (
    "import os, sys; rank = os.environ.get('SLURM_PROCID', os.environ.get('FLUX_TASK_RANK'));"
    # one write per rank: the ranks share the output file, and an unbuffered print writes word by word
    "sys.stdout.write(f'hello from rank {rank} in "
    "{os.getcwd()}\\n'); print('note on stderr', file=sys.stderr)"
)


@pytest.mark.parametrize("kind", KINDS)
def test_successful_job(cluster: Cluster, kind: str) -> None:
    queue = "batch" if kind == "slurm" else "pdebug"
    res = cluster.run(kind, [PY, "-c", HELLO], ranks=2, partition=queue, extra_args=["--exclusive"])
    assert res.status == "ok", res
    assert res.exit_code == 0 and res.reason == ""
    assert res.stdout_tail.count("hello from rank") == 2  # two ranks, both through the launcher
    assert f"in {cluster.cwd}" in res.stdout_tail
    assert "note on stderr" in res.stderr_tail
    assert 0 < res.wall_s < 10
    job = cluster.only_job(kind)
    opts = job["meta"]["options"]
    assert opts["exclusive"] == "1"  # extra_args reached the submit command
    assert job["meta"]["ntasks"] == 2 and job["meta"]["partition"] == queue
    assert opts["job-name"] == "dftune-rep1"
    if kind == "slurm":
        assert opts["time"] == "30" and opts["export"] == "ALL"
        assert (
            (cluster.logs / "rep1.sbatch")
            .read_text()
            .startswith("#!/bin/bash\n#SBATCH --job-name=dftune-rep1")
        )
    else:
        assert opts["time-limit"] == "30m" and (cluster.logs / "rep1.flux").exists()


@pytest.mark.parametrize("kind", KINDS)
def test_failing_job(cluster: Cluster, kind: str) -> None:
    res = cluster.run(kind, [PY, "-c", "import sys; print('bad input file', file=sys.stderr); sys.exit(3)"])
    assert res.status == "failed", res
    assert res.exit_code == 3
    assert "exit code 3" in res.reason
    assert "bad input file" in res.stderr_tail


HANG = (
    "import os, subprocess, time; child = subprocess.Popen(['sleep', '60']);"
    "print(os.getpid(), child.pid, flush=True); time.sleep(60)"
)


@pytest.mark.parametrize("kind", KINDS)
def test_hung_job_is_cancelled_and_killed(cluster: Cluster, kind: str) -> None:
    t0 = time.monotonic()
    res = cluster.run(kind, [PY, "-c", HANG], timeout_s=2)
    assert res.status == "timeout", res
    assert ("scancel" if kind == "slurm" else "flux cancel") in res.reason
    assert 1.5 <= res.wall_s < 10 and time.monotonic() - t0 < 10  # from the job's start, not its submission
    pids = [int(p) for p in res.stdout_tail.split()]
    assert len(pids) == 2, res.stdout_tail
    assert all(_gone(pid) for pid in pids), "the job's processes survived the cancel"
    job = cluster.only_job(kind)
    assert job["cancelled"] and job["end"] is not None  # the scheduler saw the cancel, the job is over


@pytest.mark.parametrize("kind", KINDS)
def test_scheduler_time_limit_is_a_timeout(
    cluster: Cluster, kind: str, monkeypatch: pytest.MonkeyPatch
) -> None:
    """The time limit's signal is the exit status (sacct's job line says TIMEOUT|0:0, the batch step 0:15)."""
    monkeypatch.setenv("FAKE_SCHED_TIME_SCALE", "0.5")  # one minute of time limit lasts 0.5 s
    res = cluster.run(kind, [PY, "-c", "import time; time.sleep(30)"], time_limit_min=1)
    assert res.status == "timeout", res
    assert "time limit" in res.reason
    assert res.wall_s < 10
    assert res.exit_code not in (0, None), res  # not "exit code 0"
    if kind == "slurm":
        assert res.exit_code == -15 and "killed by signal 15 (SIGTERM)" in res.reason
    else:
        assert res.exit_code == 143 and "SIGTERM" in res.reason


@pytest.mark.parametrize("kind", KINDS)
def test_job_cancelled_by_someone_else_is_failed(cluster: Cluster, kind: str) -> None:
    def cancel_when_running() -> None:
        deadline = time.monotonic() + 10
        while time.monotonic() < deadline:
            dirs = cluster.job_dirs(kind)
            if dirs and (dirs[0] / "run.json").exists():
                job_id = dirs[0].name
                cmd = (
                    [str(FAKES / "scancel"), job_id]
                    if kind == "slurm"
                    else [str(FAKES / "flux"), "cancel", job_id]
                )
                os.spawnv(os.P_WAIT, cmd[0], cmd)
                return
            time.sleep(0.05)

    helper = threading.Thread(target=cancel_when_running)
    helper.start()
    res = cluster.run(kind, [PY, "-c", "import time; time.sleep(30)"])
    helper.join()
    assert res.status == "failed", res
    assert "cancel" in res.reason and "outside dftune" in res.reason


@pytest.mark.parametrize("kind", KINDS)
def test_environment_reaches_the_job_and_preload_only_the_program(cluster: Cluster, kind: str) -> None:
    prog = (
        "import os; print('VAR=' + os.environ['DFTUNE_SCHED_VAR']); "
        "print('PRELOAD=' + os.environ['LD_PRELOAD'])"
    )
    lib = str(cluster.tmp / "libnothing.so")  # missing: the loader warns on stderr and goes on
    res = cluster.run(kind, [PY, "-c", prog], env={"DFTUNE_SCHED_VAR": "a b=c", "LD_PRELOAD": lib})
    assert res.status == "ok", res
    assert "VAR=a b=c" in res.stdout_tail
    assert f"PRELOAD={lib}" in res.stdout_tail
    job = cluster.only_job(kind)
    assert job["meta"]["submit_env_has_ld_preload"] is False  # sbatch / flux submit were not preloaded
    assert job["meta"]["env"]["DFTUNE_SCHED_VAR"] == "a b=c"


@pytest.mark.parametrize("kind", KINDS)
def test_scheduler_missing_from_path(cluster: Cluster, kind: str) -> None:
    empty = cluster.tmp / "empty"
    empty.mkdir()
    res = cluster.run(kind, ["true"], env={"PATH": str(empty)})
    assert res.status == "failed" and res.exit_code is None
    tool = "sbatch" if kind == "slurm" else "flux"
    assert f"{tool}" in res.reason and "not found on PATH" in res.reason
    assert cluster.job_dirs(kind) == []


@pytest.mark.parametrize("kind", KINDS)
def test_submission_refused(cluster: Cluster, kind: str, monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setenv("FAKE_FLUX_QUEUES", "pbatch,pdebug")
    res = cluster.run(kind, ["true"], partition="nosuchqueue")
    assert res.status == "failed", res
    assert ("sbatch refused" if kind == "slurm" else "flux submit refused") in res.reason
    assert ("Invalid partition name" if kind == "slurm" else "invalid queue") in res.reason
    assert cluster.job_dirs(kind) == []


@pytest.mark.parametrize("kind", KINDS)
def test_unparsable_job_id(cluster: Cluster, kind: str) -> None:
    liar_dir = cluster.tmp / "liar"
    liar_dir.mkdir()
    tool = "sbatch" if kind == "slurm" else "flux"
    liar = liar_dir / tool
    liar.write_text("#!/bin/sh\necho 'Your job has been submitted to the moon'\n")
    liar.chmod(0o755)
    res = cluster.run(kind, ["true"], env={"PATH": f"{liar_dir}{os.pathsep}{os.environ['PATH']}"})
    assert res.status == "failed", res
    assert "no job id" in res.reason and "moon" in res.reason


@pytest.mark.parametrize("min_age", ["0", "600"])
def test_squeue_listing_finished_jobs(
    cluster: Cluster, monkeypatch: pytest.MonkeyPatch, min_age: str
) -> None:
    """Real squeue lists a finished job in its final state for MinJobAge, then says "Invalid job id"."""
    monkeypatch.setenv("FAKE_SQUEUE_MIN_JOB_AGE", min_age)
    res = cluster.run("slurm", [PY, "-c", "print('done')"])
    assert res.status == "ok", res
    assert "done" in res.stdout_tail


def test_sacct_lagging_behind(cluster: Cluster, monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setenv("FAKE_SACCT_DELAY_S", "0.4")  # slurmdbd has not recorded the end yet
    res = cluster.run("slurm", [PY, "-c", "import sys; sys.exit(5)"])
    assert res.status == "failed" and res.exit_code == 5, res


def test_lost_job_is_reported(cluster: Cluster, monkeypatch: pytest.MonkeyPatch) -> None:
    """squeue keeps failing (controller down): give up after a few polls and say so."""
    monkeypatch.setattr(jobs, "MAX_QUERY_ERRORS", 2)
    broken = cluster.tmp / "broken"
    broken.mkdir()
    squeue = broken / "squeue"
    squeue.write_text("#!/bin/sh\necho 'squeue: error: Unable to contact slurm controller' >&2\nexit 1\n")
    squeue.chmod(0o755)
    res = cluster.run(
        "slurm",
        [PY, "-c", "import time; time.sleep(30)"],
        env={"PATH": f"{broken}{os.pathsep}{os.environ['PATH']}"},
    )
    assert res.status == "failed", res
    assert "lost track" in res.reason and "Unable to contact slurm controller" in res.reason


@pytest.mark.parametrize("kind", ["slurm", "flux"])
def test_bench_runs_a_workload_through_the_scheduler(cluster: Cluster, tmp_path: Path, kind: str) -> None:
    """dftune bench submits each replicate as a job and reads the program's metric from its output."""
    from dftune.tools.runner.bench import bench
    from dftune.tools.runner.spec import load_spec

    toml = tmp_path / "sched.toml"
    toml.write_text(
        'name = "sched-demo"\n'
        'command = ["{python}", "-c", "import os; print(\'value\', int(os.environ[\'KNOB_X\']) * 2)"]\n'
        "replicates = 3\ntimeout_s = 60\n"
        '[metric]\nkind = "stdout_regex"\npattern = "value ([0-9]+)"\n'
        '[tracing]\nmode = "off"\n'
        f'[launcher]\nkind = "{kind}"\nranks = 1\npoll_s = 0.1\n'
        '[[knobs]]\nname = "KNOB_X"\nkind = "env"\nvalues = [1, 21]\ndefault = 1\n'
    )
    result = bench(load_spec(toml), overrides={"KNOB_X": "21"}, workdir=tmp_path / "w")
    assert result.ok == 3, [r.reason for r in result.replicates]
    assert result.median == 42.0


def test_bench_wraps_the_command_in_mpirun(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    """launcher.kind = "mpirun" runs ``mpirun -n ranks <extra> argv``; every rank runs."""
    from dftune.tools.runner import bench as bench_mod
    from dftune.tools.runner.bench import bench, launch_argv
    from dftune.tools.runner.spec import load_spec

    monkeypatch.setenv("PATH", os.pathsep.join([str(FAKES), os.environ.get("PATH", os.defpath)]))
    marks = tmp_path / "marks"
    marks.mkdir()
    toml = tmp_path / "mpi.toml"
    toml.write_text(
        'name = "mpi-demo"\n'
        'command = ["{python}", "-c", "import os, sys; '
        "open(os.path.join(sys.argv[1], os.environ['PMI_RANK']), 'w')\", "
        f'"{marks}"]\n'
        'replicates = 1\n[tracing]\nmode = "off"\n[launcher]\n'
        'kind = "mpirun"\nranks = 3\nextra_args = ["-genv", "X"]\n'
    )
    spec = load_spec(toml)
    monkeypatch.setattr(bench_mod, "_python_bin_dir", lambda: tmp_path)  # no mpirun beside Python
    assert launch_argv(spec, ["prog"]) == [str(FAKES / "mpirun"), "-n", "3", "-genv", "X", "prog"]
    result = bench(spec, workdir=tmp_path / "w")
    assert result.ok == 1, [r.reason for r in result.replicates]
    assert sorted(p.name for p in marks.iterdir()) == ["0", "1", "2"]


def test_mpirun_beside_python_comes_before_path(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    """A pip-installed MPI's launcher sits beside the interpreter (not on PATH unless activated)."""
    from dftune.tools.runner import bench as bench_mod

    beside = tmp_path / "venv-bin"
    beside.mkdir()
    monkeypatch.setattr(bench_mod, "_python_bin_dir", lambda: beside)
    on_path = {"PATH": str(FAKES)}
    assert bench_mod.find_mpirun(on_path) == str(FAKES / "mpirun")  # nothing beside Python yet
    launcher = beside / "mpirun"
    launcher.write_text("#!/bin/sh\nexit 0\n")
    assert bench_mod.find_mpirun(on_path) == str(FAKES / "mpirun")  # not executable: ignored
    launcher.chmod(0o755)
    assert bench_mod.find_mpirun(on_path) == str(launcher)
    monkeypatch.setattr(bench_mod, "_python_bin_dir", lambda: tmp_path / "nowhere")
    assert bench_mod.find_mpirun({"PATH": str(tmp_path)}) == "mpirun"  # none at all: fail when run


def test_mpirun_ranks_get_the_tracer_and_the_launcher_does_not(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    """LD_PRELOAD (dftracer) goes to each rank through ``env``; mpirun itself runs without it."""
    from dftune.tools.runner import bench as bench_mod
    from dftune.tools.runner.spec import load_spec

    monkeypatch.setattr(bench_mod, "_python_bin_dir", lambda: tmp_path)
    marks = tmp_path / "marks"
    marks.mkdir()
    toml = tmp_path / "mpi.toml"
    toml.write_text(
        'name = "mpi-env"\n'
        'command = ["{python}", "-c", "import json, os, sys; json.dump(dict((k, os.environ.get(k)) for k in '
        "('LD_PRELOAD', 'DFTRACER_LOG_FILE', 'OTHER')), "
        "open(os.path.join(sys.argv[1], os.environ['PMI_RANK']), 'w'))\", "
        f'"{marks}"]\n'
        '[launcher]\nkind = "mpirun"\nranks = 2\n'
    )
    spec = load_spec(toml)
    preload = "libc.so.6"  # a harmless library that is loaded anyway
    env = {
        **os.environ,
        "PATH": os.pathsep.join([str(FAKES), os.environ.get("PATH", os.defpath)]),
        "LD_PRELOAD": preload,
        "DFTRACER_LOG_FILE": str(tmp_path / "t" / "trace"),
        "OTHER": "x",
        "FAKE_MPIRUN_ENV": str(tmp_path / "launcher-env.json"),
    }
    argv = bench_mod.launch_argv(spec, ["prog", "arg"], env)
    assert argv[:3] == [str(FAKES / "mpirun"), "-n", "2"]
    assert argv[3:] == [
        "env",
        f"DFTRACER_LOG_FILE={tmp_path / 't' / 'trace'}",
        f"LD_PRELOAD={preload}",
        "prog",
        "arg",
    ]
    assert "LD_PRELOAD" not in bench_mod.launcher_env(spec, env)
    assert bench_mod.launcher_env(spec, env)["OTHER"] == "x"
    res = bench_mod._run(
        spec,
        spec.render(spec.command, {}, workdir=tmp_path),
        cwd=tmp_path,
        env=env,
        log_dir=tmp_path / "logs",
        label="r0",
    )
    assert res.status == "ok", res.stderr_tail
    seen = {p.name: json.loads(p.read_text()) for p in marks.iterdir()}
    assert set(seen) == {"0", "1"}
    for got in seen.values():
        assert got == {
            "LD_PRELOAD": preload,
            "DFTRACER_LOG_FILE": str(tmp_path / "t" / "trace"),
            "OTHER": "x",
        }
    launcher = json.loads((tmp_path / "launcher-env.json").read_text())
    assert "LD_PRELOAD" not in launcher and launcher["OTHER"] == "x"


def test_local_runs_keep_the_tracer_in_their_environment() -> None:
    from dftune.tools.runner.bench import launch_argv, launcher_env
    from dftune.tools.runner.spec import WorkloadSpec

    spec = WorkloadSpec(name="local", command=["prog"])
    env = {"LD_PRELOAD": "x.so", "DFTRACER_ENABLE": "1"}
    assert launch_argv(spec, ["prog"], env) == ["prog"]
    assert launcher_env(spec, env) == env


# --------------------------------------------------------------------------- Slurm as it really is


@pytest.mark.parametrize("disabled", [False, True])
def test_job_killed_by_a_signal_reports_the_signal(
    cluster: Cluster, monkeypatch: pytest.MonkeyPatch, disabled: bool
) -> None:
    """srun exits 137 for a task killed by SIGKILL: sacct's
    step line (CANCELLED|0:9) or srun's "Killed" say so."""
    if disabled:
        monkeypatch.setenv("FAKE_SACCT_DISABLED", "1")
    prog = (
        "import os, signal, sys; print('dying', file=sys.stderr, "
        "flush=True); os.kill(os.getpid(), signal.SIGKILL)"
    )
    res = cluster.run("slurm", [PY, "-c", prog])
    assert res.status == "failed", res
    assert res.exit_code == -9, res
    assert "killed by signal 9 (SIGKILL)" in res.reason and "exit code" not in res.reason
    assert res.state_source == ("scontrol (accounting disabled)" if disabled else "sacct")


def test_exit_code_137_is_not_taken_for_a_signal(cluster: Cluster) -> None:
    res = cluster.run("slurm", [PY, "-c", "import sys; sys.exit(137)"])
    assert res.status == "failed" and res.exit_code == 137, res
    assert "exit code 137" in res.reason


def test_no_accounting_falls_back_to_scontrol(cluster: Cluster, monkeypatch: pytest.MonkeyPatch) -> None:
    """AccountingStorageType=accounting_storage/none: sacct is disabled, scontrol still knows the job."""
    monkeypatch.setenv("FAKE_SACCT_DISABLED", "1")
    monkeypatch.setenv("FAKE_SQUEUE_MIN_JOB_AGE", "300")
    ok = cluster.run("slurm", [PY, "-c", "print('fine')"])
    assert ok.status == "ok" and ok.exit_code == 0, ok
    assert ok.state_source == "scontrol (accounting disabled)"
    bad = cluster.run(
        "slurm", [PY, "-c", "import sys; print('bad input file', file=sys.stderr); sys.exit(3)"]
    )
    assert bad.status == "failed" and bad.exit_code == 3, bad
    assert "state from scontrol (accounting disabled)" in bad.reason


def test_no_accounting_and_a_purged_job(cluster: Cluster, monkeypatch: pytest.MonkeyPatch) -> None:
    """After MinJobAge scontrol forgets the job too: say so, do not call it a success or a crash."""
    monkeypatch.setenv("FAKE_SACCT_DISABLED", "1")
    monkeypatch.setenv("FAKE_SQUEUE_MIN_JOB_AGE", "0")
    monkeypatch.setattr(jobs, "FINAL_TRIES", 2)
    res = cluster.run("slurm", [PY, "-c", "print('fine')"])
    assert res.status == "failed", res
    assert "MinJobAge" in res.reason and "accounting disabled" in res.reason


@pytest.mark.parametrize(
    ("kind", "env", "launcher", "said"),
    [
        ("slurm", {"FAKE_SLURM_CPUS": "2"}, {"ranks": 4}, "PartitionConfig"),
        ("slurm", {}, {"extra_args": ["--hold"]}, "JobHeldUser"),
        ("flux", {}, {"extra_args": ["--urgency=0"]}, "held (urgency 0"),
    ],
)
def test_job_that_can_never_start_fails_fast(
    cluster: Cluster,
    monkeypatch: pytest.MonkeyPatch,
    kind: str,
    env: dict[str, str],
    launcher: dict[str, Any],
    said: str,
) -> None:
    for k, v in env.items():
        monkeypatch.setenv(k, v)
    t0 = time.monotonic()
    res = cluster.run(kind, [PY, "-c", "print('never')"], timeout_s=60, **launcher)
    took = time.monotonic() - t0
    assert res.status == "failed", res
    assert took < 10, f"waited {took:.1f} s for a job that can never start"
    assert "can never start" in res.reason and said in res.reason
    assert res.wall_s == 0.0 and res.stdout_tail == ""
    job = cluster.only_job(kind)
    assert job["cancelled"] and job["run"] is None  # cancelled, never ran


@pytest.mark.parametrize("kind", KINDS)
@pytest.mark.parametrize("limits", [{"queue_timeout_s": 1.0}, {"queue_timeout_s": None}])
def test_pending_until_the_timeout_is_not_described_as_a_run(
    cluster: Cluster, monkeypatch: pytest.MonkeyPatch, kind: str, limits: dict[str, Any]
) -> None:
    """A job still queued at its queue limit (or, with one clock, at timeout_s) is cancelled."""
    monkeypatch.setenv("FAKE_SCHED_PENDING_S", "30")  # the queue is busy
    res = cluster.run(kind, [PY, "-c", "print('late')"], timeout_s=1, **limits)
    assert res.status == "timeout", res
    assert "never started within 1 s" in res.reason
    which = "queue_timeout_s" if limits["queue_timeout_s"] else "timeout_s"
    assert f"{which} bounds the wait" in res.reason
    assert res.wall_s == 0.0 and res.wall_source == "none: the job never started"
    if kind == "slurm":
        assert "reason Resources" in res.reason


@pytest.mark.parametrize("kind", KINDS)
def test_timeout_counts_the_run_not_the_queue(
    cluster: Cluster, monkeypatch: pytest.MonkeyPatch, kind: str
) -> None:
    """On a busy cluster a job waits longer than its own timeout and still runs to its end."""
    monkeypatch.setenv("FAKE_SCHED_PENDING_S", "3")
    res = cluster.run(kind, [PY, "-c", "print('done')"], timeout_s=2.5, queue_timeout_s=30)
    assert res.status == "ok", res
    assert res.stdout_tail.strip() == "done"
    if kind == "slurm":
        assert res.queue_s is not None and res.queue_s >= 2.8


@pytest.mark.parametrize("kind", KINDS)
def test_a_started_job_is_killed_at_its_timeout(
    cluster: Cluster, monkeypatch: pytest.MonkeyPatch, kind: str
) -> None:
    monkeypatch.setenv("FAKE_SCHED_PENDING_S", "2")
    t0 = time.monotonic()
    res = cluster.run(kind, [PY, "-c", "import time; time.sleep(60)"], timeout_s=1.5, queue_timeout_s=30)
    assert res.status == "timeout", res
    assert res.reason.startswith("killed after 1.5 s"), res.reason
    assert 3.0 <= time.monotonic() - t0 < 20


@pytest.mark.parametrize("kind", KINDS)
def test_queue_wait_is_not_in_the_wall_time(
    cluster: Cluster, monkeypatch: pytest.MonkeyPatch, kind: str
) -> None:
    monkeypatch.setenv("FAKE_SCHED_PENDING_S", "4")  # four seconds in the queue
    res = cluster.run(kind, [PY, "-c", "import time; time.sleep(0.3)"])
    assert res.status == "ok", res
    assert 0.3 <= res.wall_s < 3.5, res  # the program (and its Python start-up), not the wait
    if kind == "slurm":
        assert res.wall_source == "job script clock around srun (date +%s.%N)"
        assert res.queue_s is not None and res.queue_s >= 3.8
    else:
        assert res.wall_source == "flux jobs runtime"


def test_failure_reason_quotes_the_program_not_srun(cluster: Cluster, tmp_path: Path) -> None:
    """srun's "task 0: Exited with exit code 3" is the last stderr line; the reason quotes the program."""
    from dftune.tools.runner.bench import bench
    from dftune.tools.runner.spec import load_spec

    toml = tmp_path / "fails.toml"
    toml.write_text(
        'name = "sched-fails"\n'
        'command = ["{python}", "-c", '
        "\"import sys; print('bad input file', file=sys.stderr); sys.exit(3)\"]\n"
        'replicates = 1\ntimeout_s = 60\n[metric]\nkind = "wall_time"\n[tracing]\nmode = "off"\n'
        '[launcher]\nkind = "slurm"\npoll_s = 0.1\n'
    )
    result = bench(load_spec(toml), workdir=tmp_path / "w")
    (rep,) = result.replicates
    assert rep.status == "failed" and rep.exit_code == 3
    assert rep.reason.endswith(": bad input file"), rep.reason
    assert "srun" not in rep.reason
    assert rep.state_source == "sacct" and rep.wall_source.startswith("job script clock")
    assert "srun: error" in (tmp_path / "w" / "logs" / "r0.err").read_text()  # still in the job's file


def test_sacct_failing_falls_back_to_scontrol(cluster: Cluster) -> None:
    """slurmdbd unreachable: sacct errors, scontrol still knows the job; the source says why."""
    broken = cluster.tmp / "broken"
    broken.mkdir()
    sacct = broken / "sacct"
    sacct.write_text(
        "#!/bin/sh\necho 'sacct: error: Problem talking to the database: Connection refused' >&2\nexit 1\n"
    )
    sacct.chmod(0o755)
    res = cluster.run(
        "slurm",
        [PY, "-c", "import sys; sys.exit(4)"],
        env={"PATH": f"{broken}{os.pathsep}{os.environ['PATH']}"},
    )
    assert res.status == "failed" and res.exit_code == 4, res
    assert res.state_source.startswith(
        "scontrol (sacct failed: sacct exited with code 1: sacct: error: Problem"
    )
