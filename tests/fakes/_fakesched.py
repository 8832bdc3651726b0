"""Shared machinery of the fake Slurm and Flux commands in this folder.

The fakes keep their state in ``$FAKE_SCHED_DIR`` (default: a folder under the system
temporary directory), one folder per job::

    <root>/<slurm|flux>/counter        last job id handed out
    <root>/<slurm|flux>/<id>/meta.json what was submitted (argv, cwd, env, files, limit)
    <root>/<slurm|flux>/<id>/lock      flock'ed around every state change
    <root>/<slurm|flux>/<id>/run.json  the job's process group, once it started
    <root>/<slurm|flux>/<id>/cancelled written by scancel / flux cancel
    <root>/<slurm|flux>/<id>/timeout   written when the job overran its time limit
    <root>/<slurm|flux>/<id>/end.json  exit status, written when the job is over
    <root>/slurm/<id>/steps/<n>.json   how srun step n ended (written by the fake srun)

A submitted job is run by a detached supervisor (``python _fakesched.py supervise KIND
ID``, its own session) that waits ``$FAKE_SCHED_PENDING_S`` (default 0.2 s; the job is
pending meanwhile), starts the job in a new process group with the recorded environment,
working directory and output files, enforces the time limit (one minute lasts
``$FAKE_SCHED_TIME_SCALE`` seconds, default 60), kills what the job left behind when it
ends, and records how it ended.

A job whose meta has ``never`` (a Slurm pending reason such as ``PartitionConfig`` or
``JobHeldUser``, a Flux hold) is never started: it stays pending until it is cancelled.

Knobs for tests: ``FAKE_SLURM_PARTITIONS`` (comma list, default ``debug,batch``),
``FAKE_SLURM_CPUS`` (CPUs of the fake partition, default 1000: more tasks pend forever with
reason PartitionConfig), ``FAKE_SACCT_DISABLED`` (sacct says accounting storage is disabled),
``FAKE_FLUX_QUEUES`` (comma list; unset = any queue), ``FAKE_SQUEUE_MIN_JOB_AGE`` (seconds
squeue keeps listing a finished job in its final state, then "Invalid job id"; unset =
it prints nothing for finished jobs; scontrol forgets the job after the same age),
``FAKE_SACCT_DELAY_S`` (seconds after the end
during which sacct still says RUNNING, like a lagging slurmdbd).
"""

from __future__ import annotations

import contextlib
import fcntl
import json
import os
import signal
import subprocess
import sys
import tempfile
import time
from collections.abc import Iterator
from pathlib import Path
from typing import Any

KILL_GRACE_S = 1.0
HERE = Path(__file__).resolve().parent


def root() -> Path:
    base = os.environ.get("FAKE_SCHED_DIR") or os.path.join(
        tempfile.gettempdir(), f"fake-sched-{os.getuid()}"
    )
    return Path(base)


def kind_dir(kind: str) -> Path:
    d = root() / kind
    d.mkdir(parents=True, exist_ok=True)
    return d


@contextlib.contextmanager
def locked(path: Path) -> Iterator[None]:
    path.parent.mkdir(parents=True, exist_ok=True)
    with open(path, "a+") as fh:
        fcntl.flock(fh, fcntl.LOCK_EX)
        try:
            yield
        finally:
            fcntl.flock(fh, fcntl.LOCK_UN)


def write_json(path: Path, data: Any) -> None:
    tmp = path.with_name(path.name + ".tmp")
    tmp.write_text(json.dumps(data), encoding="utf-8")
    os.replace(tmp, path)


def read_json(path: Path) -> Any:
    try:
        return json.loads(path.read_text(encoding="utf-8"))
    except (OSError, ValueError):
        return None


def new_job_id(kind: str, first: int) -> int:
    d = kind_dir(kind)
    counter = d / "counter"
    with locked(d / "counter.lock"):
        try:
            last = int(counter.read_text())
        except (OSError, ValueError):
            last = first - 1
        job_id = last + 1
        counter.write_text(str(job_id))
    (d / str(job_id)).mkdir()
    return job_id


def job_dir(kind: str, job_id: int) -> Path:
    return kind_dir(kind) / str(job_id)


def submit(kind: str, job_id: int, meta: dict[str, Any]) -> None:
    """Record the job and start its detached supervisor."""
    d = job_dir(kind, job_id)
    meta = {**meta, "submit_time": time.time()}
    write_json(d / "meta.json", meta)
    sup = subprocess.Popen(
        [sys.executable, str(HERE / "_fakesched.py"), "supervise", kind, str(job_id)],
        stdin=subprocess.DEVNULL,
        stdout=subprocess.DEVNULL,
        stderr=open(d / "supervisor.log", "wb"),  # noqa: SIM115 - handed to the child
        start_new_session=True,
        close_fds=True,
    )
    (d / "supervisor.pid").write_text(str(sup.pid))


# ------------------------------------------------------------------------------ job state


def job_info(kind: str, job_id: int) -> dict[str, Any] | None:
    """Everything known about a job, or None if there is no such job."""
    d = job_dir(kind, job_id)
    meta = read_json(d / "meta.json")
    if meta is None:
        return None
    return {
        "id": job_id,
        "meta": meta,
        "run": read_json(d / "run.json"),
        "end": read_json(d / "end.json"),
        "cancelled": (d / "cancelled").exists(),
        "timeout": (d / "timeout").exists(),
    }


def phase(info: dict[str, Any]) -> str:
    """pending | running | stopping | done."""
    if info["end"] is not None:
        return "done"
    if info["run"] is None:
        return "pending"
    if info["cancelled"] or info["timeout"]:
        return "stopping"
    return "running"


def cancel(kind: str, job_id: int) -> str:
    """Mark the job cancelled and SIGTERM its process group; returns an error or ""."""
    d = job_dir(kind, job_id)
    with locked(d / "lock"):
        info = job_info(kind, job_id)
        if info is None:
            return "no such job"
        if info["end"] is not None:
            return "job already completed"
        (d / "cancelled").write_text(str(time.time()))
        run = info["run"]
    if run:
        with contextlib.suppress(ProcessLookupError, PermissionError):
            os.killpg(run["pgid"], signal.SIGTERM)
    return ""


def _killpg(pgid: int, sig: int) -> bool:
    try:
        os.killpg(pgid, sig)
        return True
    except (ProcessLookupError, PermissionError):
        return False


def supervise(kind: str, job_id: int) -> None:
    d = job_dir(kind, job_id)
    meta = read_json(d / "meta.json")
    start_at = time.monotonic() + float(os.environ.get("FAKE_SCHED_PENDING_S", "0.2"))
    # pending (for ever when it can never start) until its time comes or it is cancelled
    while (meta.get("never") or time.monotonic() < start_at) and not (d / "cancelled").exists():
        time.sleep(0.02)
    with locked(d / "lock"):
        if (d / "cancelled").exists():
            write_json(d / "end.json", {"returncode": None, "start": None, "end": time.time()})
            return
        out_path, err_path = meta["output"], meta["error"]
        Path(out_path).parent.mkdir(parents=True, exist_ok=True)
        with open(out_path, "wb") as out:
            err = out if err_path == out_path else open(err_path, "wb")  # noqa: SIM115
            try:
                proc = subprocess.Popen(
                    meta["argv"],
                    cwd=meta["cwd"],
                    env=meta["env"],
                    stdin=subprocess.DEVNULL,
                    stdout=out,
                    stderr=err,
                    start_new_session=True,
                )
            except OSError as exc:
                err.write(f"fake scheduler: cannot start {meta['argv'][0]}: {exc}\n".encode())
                write_json(d / "end.json", {"returncode": 127, "start": time.time(), "end": time.time()})
                return
            finally:
                if err is not out:
                    err.close()
        start = time.time()
        write_json(d / "run.json", {"pid": proc.pid, "pgid": proc.pid, "start": start})
    limit_s = float(meta["time_limit_min"]) * float(os.environ.get("FAKE_SCHED_TIME_SCALE", "60"))
    kill_at: float | None = None
    while proc.poll() is None:
        now = time.time()
        if now - start > limit_s and not (d / "timeout").exists():
            (d / "timeout").write_text(str(now))
            _killpg(proc.pid, signal.SIGTERM)
            kill_at = now + KILL_GRACE_S
        if kill_at is None and (d / "cancelled").exists():
            kill_at = now + KILL_GRACE_S
        if kill_at is not None and now >= kill_at:
            _killpg(proc.pid, signal.SIGKILL)
        time.sleep(0.02)
    # the scheduler's cleanup: nothing of the job survives it
    _killpg(proc.pid, signal.SIGKILL)
    with locked(d / "lock"):
        write_json(d / "end.json", {"returncode": proc.returncode, "start": start, "end": time.time()})


# ------------------------------------------------------------------------------ tasks


def run_tasks(ntasks: int, argv: list[str], rank_var: str) -> int:
    """Start ``ntasks`` copies of ``argv`` (rank in ``rank_var``); exec directly for one task."""
    if not argv:
        sys.stderr.write("fake launcher: no command given\n")
        return 2
    if ntasks <= 1:
        os.environ[rank_var] = "0"
        try:
            os.execvp(argv[0], argv)
        except OSError as exc:
            sys.stderr.write(f"fake launcher: {argv[0]}: {exc}\n")
            return 127
    procs = [subprocess.Popen(argv, env={**os.environ, rank_var: str(r)}) for r in range(ntasks)]
    codes = [p.wait() for p in procs]
    bad = [c for c in codes if c != 0]
    if not bad:
        return 0
    return bad[0] if bad[0] > 0 else 128 - bad[0]


# ------------------------------------------------------------------------------ options


def parse_options(
    args: list[str], spec: dict[str, tuple[str, bool]], prog: str
) -> tuple[dict[str, str], list[str]]:
    """GNU-style options until the first operand (or ``--``).

    ``spec`` maps every spelling (``--time``, ``-t``) to (canonical name, takes a value).
    Returns (options, operands); an unknown option raises ``SystemExit`` with a message.
    """
    opts: dict[str, str] = {}
    i = 0
    while i < len(args):
        a = args[i]
        if a == "--":
            return opts, args[i + 1 :]
        if not a.startswith("-") or a == "-":
            return opts, args[i:]
        if a.startswith("--"):
            name, eq, value = a.partition("=")
            if name not in spec:
                usage_error(prog, f"unrecognized option '{name}'")
            canon, takes = spec[name]
            if takes and not eq:
                i += 1
                if i >= len(args):
                    usage_error(prog, f"option '{name}' requires an argument")
                value = args[i]
            opts[canon] = value if takes else "1"
        else:
            name, value = a[:2], a[2:]
            if name not in spec:
                usage_error(prog, f"invalid option -- '{a[1:2]}'")
            canon, takes = spec[name]
            if takes and not value:
                i += 1
                if i >= len(args):
                    usage_error(prog, f"option requires an argument -- '{a[1:2]}'")
                value = args[i]
            opts[canon] = value if takes else "1"
        i += 1
    return opts, []


def usage_error(prog: str, msg: str) -> None:
    sys.stderr.write(f'{prog}: {msg}\nTry "{prog} --help" for more information\n')
    raise SystemExit(1)


def main(argv: list[str]) -> int:
    if len(argv) >= 3 and argv[0] == "supervise":
        supervise(argv[1], int(argv[2]))
        return 0
    if len(argv) >= 3 and argv[0] == "tasks":
        return run_tasks(int(argv[2]), argv[3:], argv[1])
    sys.stderr.write("usage: _fakesched.py supervise KIND ID | tasks RANK_VAR N CMD...\n")
    return 2


if __name__ == "__main__":
    sys.exit(main(sys.argv[1:]))


# ------------------------------------------------------------------------------ final states


def exit_pair(rc: int | None) -> str:
    """Slurm's ``N:S`` for a wait status as Python reports it (negative: killed by that signal)."""
    return "0:0" if rc is None else (f"0:{-rc}" if rc < 0 else f"{rc}:0")


def slurm_final(info: dict[str, Any]) -> tuple[str, str]:
    """(State, ExitCode "N:S") of a finished Slurm job as scontrol shows it (Slurm 22.05, measured).

    The batch script's status: ``FAILED 137:0`` when srun reported a task killed by SIGKILL,
    ``TIMEOUT 0:15`` when the time limit's SIGTERM ended the script.
    """
    rc = info["end"]["returncode"]
    code = exit_pair(rc)
    if info["cancelled"]:
        return f"CANCELLED by {os.getuid()}", code
    if info["timeout"]:
        return "TIMEOUT", code
    if rc == 0:
        return "COMPLETED", code
    return "FAILED", code


def slurm_steps(info: dict[str, Any]) -> list[tuple[str, str, str]]:
    """sacct's step lines (step, State, ExitCode): ``batch`` (the script), then each srun step.

    A step whose task died of a signal is ``CANCELLED|0:S``, as sacct shows it.
    """
    d = job_dir("slurm", info["id"])
    rc = info["end"]["returncode"]
    batch_state = (
        "CANCELLED" if (info["cancelled"] or info["timeout"]) else ("COMPLETED" if rc == 0 else "FAILED")
    )
    rows = [("batch", batch_state, exit_pair(rc))]
    steps = sorted((d / "steps").glob("*.json"), key=lambda p: int(p.stem)) if (d / "steps").is_dir() else []
    for path in steps:
        step_rc = (read_json(path) or {}).get("returncode")
        state = (
            "CANCELLED"
            if step_rc is not None and step_rc < 0
            else ("COMPLETED" if step_rc == 0 else "FAILED")
        )
        rows.append((path.stem, state, exit_pair(step_rc)))
    return rows


def slurm_times(info: dict[str, Any]) -> dict[str, str]:
    """SubmitTime/StartTime/EndTime as slurmctld prints them: local time, whole seconds."""

    def fmt(t: float | None) -> str:
        return time.strftime("%Y-%m-%dT%H:%M:%S", time.localtime(t)) if t else "Unknown"

    end, run = info["end"] or {}, info["run"] or {}
    return {
        "submit": fmt(info["meta"].get("submit_time")),
        "start": fmt(end.get("start") or run.get("start")),
        "end": fmt(end.get("end") if end else None),
    }


def flux_final(info: dict[str, Any]) -> tuple[str, str]:
    """(result, returncode) of an inactive Flux job; a signal ``S`` gives 128+S."""
    rc = info["end"]["returncode"]
    code = "" if rc is None else str(rc if rc >= 0 else 128 - rc)
    if info["cancelled"]:
        return "CANCELED", code
    if info["timeout"]:
        return "TIMEOUT", code
    return ("COMPLETED" if rc == 0 else "FAILED"), code
