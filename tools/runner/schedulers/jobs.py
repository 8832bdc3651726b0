"""What Slurm and Flux jobs share: following a submitted job to its end, and the result.

Submit (argv lists only, never a shell), poll the queue every ``launcher.poll_s`` seconds until
the job leaves it (or cancel it after ``timeout_s`` of running, ``launcher.queue_timeout_s`` of
waiting, or when it can never start), then ask the
scheduler for the final state and exit code, and take the wall time from the most precise clock
there is. The schedulers themselves are ``slurm.py`` and ``flux.py``; the overview is in the
package's docstring.
"""

from __future__ import annotations

import abc
import os
import re
import shutil
import signal
import time
from collections.abc import Callable
from dataclasses import dataclass
from pathlib import Path

from dftune.core.process import CommandResult, ProcessResult, Status, run_command
from dftune.tools.runner.spec import Launcher

#: Longest a single scheduler command (sbatch, squeue, ...) may take before we give up on it.
CLI_TIMEOUT_S = 60.0


#: Consecutive failed queue queries before we stop following a job (and cancel it).
MAX_QUERY_ERRORS = 5


#: Attempts at the final state once the job left the queue (accounting may lag behind).
FINAL_TRIES = 10


#: How long to wait for a cancelled job to leave the queue.
CANCEL_WAIT_S = 60.0


#: Polls in a row that must show a never-satisfiable pending reason before we give up on a job.
NEVER_POLLS = 2


TAIL_BYTES = 4000


#: Lines the launcher writes into the job's stderr (not the program's): srun, slurmstepd
#: (``slurmstepd-<host>:`` on Debian), Flux's shell and job tools.
_LAUNCHER_LINE = re.compile(
    r"^(?:srun|sbatch|salloc|slurmstepd(?:-[\w.-]+)?|flux-(?:shell|job)(?:\[\d+\])?): "
)


class _QueryError(RuntimeError):
    """A scheduler command failed in a way that says nothing about the job."""


def _job_name(label: str) -> str:
    return "dftune-" + (re.sub(r"[^A-Za-z0-9_.-]", "_", label) or "run")


def _paths(log_dir: Path, label: str) -> tuple[Path, Path]:
    base = Path(os.path.abspath(log_dir))
    return base / f"{label}.out", base / f"{label}.err"


def _clock_path(log_dir: Path, label: str) -> Path:
    return Path(os.path.abspath(log_dir)) / f"{label}.time"


def parse_job_clock(text: str) -> tuple[float | None, float | None]:
    """(start, end) epoch seconds from the batch script's clock file (``start T`` / ``end T rc``)."""
    start = end = None
    for line in text.splitlines():
        words = line.split()
        try:
            if len(words) >= 2 and words[0] == "start":
                start = float(words[1])
            elif len(words) >= 2 and words[0] == "end":
                end = float(words[1])
        except ValueError:  # a ``date`` without %N prints a literal N: no clock
            continue
    return start, end


def _signal_name(sig: int) -> str:
    try:
        return signal.Signals(sig).name
    except ValueError:
        return f"signal {sig}"


def program_stderr(text: str) -> str:
    """``text`` without the launcher's own lines (srun, slurmstepd, flux-shell): the program's stderr."""
    return "".join(ln for ln in text.splitlines(keepends=True) if not _LAUNCHER_LINE.match(ln))


@dataclass(frozen=True)
class JobEnd:
    """How a job ended, as its scheduler tells it."""

    status: Status
    exit_code: int | None
    reason: str
    source: str  #: the command that told (``sacct``, ``scontrol``, ``flux jobs``)
    submit: float | None = None  #: epoch seconds, as the scheduler recorded them
    start: float | None = None
    end: float | None = None
    runtime_s: float | None = None  #: the scheduler's own run time, when it keeps one (Flux)


def _check_argv(argv: list[str]) -> None:
    if not argv or not all(isinstance(a, str) for a in argv):
        raise ValueError("argv must be a non-empty list of strings")


def _read_tail(path: Path, limit: int) -> str:
    try:
        with open(path, "rb") as fh:
            fh.seek(0, os.SEEK_END)
            fh.seek(max(0, fh.tell() - limit))
            return fh.read().decode("utf-8", errors="replace")
    except OSError:
        return ""


def _tail(path: Path) -> str:
    return _read_tail(path, TAIL_BYTES)


def _failed(reason: str, wall_s: float = 0.0, exit_code: int | None = None) -> ProcessResult:
    return ProcessResult(status="failed", exit_code=exit_code, wall_s=wall_s, reason=reason)


def _find(tools: tuple[str, ...], env: dict[str, str]) -> dict[str, str] | str:
    """Full paths of the scheduler commands on ``env``'s PATH, or a reason naming the missing ones."""
    path = env.get("PATH", os.defpath)
    found = {t: shutil.which(t, path=path) for t in tools}
    missing = [t for t, p in found.items() if p is None]
    if missing:
        return (
            f"{', '.join(missing)} not found on PATH (is this a "
            f"{'Slurm' if 'sbatch' in tools else 'Flux'} machine?)"
        )
    return {t: p for t, p in found.items() if p is not None}


def _split_preload(env: dict[str, str], argv: list[str]) -> tuple[dict[str, str], list[str]]:
    """Keep LD_PRELOAD away from the scheduler commands and give it to the program alone."""
    preload = env.get("LD_PRELOAD")
    if not preload:
        return dict(env), list(argv)
    cli_env = {k: v for k, v in env.items() if k != "LD_PRELOAD"}
    return cli_env, ["env", f"LD_PRELOAD={preload}", *argv]


def _cli(argv: list[str], env: dict[str, str], cwd: Path | None = None) -> CommandResult:
    """Run a scheduler command through the project's one runner (argv only, bounded, own group).

    A crash or hang raises :class:`_QueryError`; a non-zero exit is the caller's to read.
    """
    res = run_command(argv, timeout_s=CLI_TIMEOUT_S, cwd=cwd, env=env)
    if res.timed_out:
        raise _QueryError(f"{Path(argv[0]).name} did not answer within {CLI_TIMEOUT_S:g} s")
    if res.error:
        raise _QueryError(res.error)
    return res


def _last_line(text: str) -> str:
    lines = [ln.strip() for ln in text.splitlines() if ln.strip()]
    return lines[-1] if lines else ""


def _complaint(proc: CommandResult) -> str:
    name = Path(proc.argv[0]).name
    msg = _last_line(proc.stderr) or _last_line(proc.stdout) or "no message"
    return f"{name} exited with code {proc.exit_code}: {msg}"


@dataclass(frozen=True)
class QueueState:
    """What one poll of the queue saw."""

    state: str
    reason: str = ""
    waiting: bool = False  #: not started yet (pending, held, being scheduled)


class _Job(abc.ABC):
    """One submitted job, seen through its scheduler's commands."""

    scheduler = ""
    queue_tool = ""
    cancel_tool = ""
    final_tools = ""

    def __init__(self, job_id: str, tools: dict[str, str], env: dict[str, str], err: Path) -> None:
        self.job_id, self.tools, self.env, self.err = job_id, tools, env, err

    @abc.abstractmethod
    def poll(self) -> QueueState | None:
        """The job's place in the queue; ``None`` once it left it.  Raises :class:`_QueryError`."""

    def never_starts(self, q: QueueState) -> str:
        """Why a waiting job can never start ("" if it may yet)."""
        return ""

    @abc.abstractmethod
    def final(self) -> JobEnd | None:
        """How the job ended, once the scheduler knows; ``None`` while it does not."""

    @abc.abstractmethod
    def cancel_argv(self) -> list[str]:
        """The command that asks the scheduler to kill the job."""

    def cancel(self) -> str:
        """Ask the scheduler to kill the job; returns a complaint, or "" when it accepted."""
        try:
            proc = _cli(self.cancel_argv(), self.env)
        except _QueryError as exc:
            return str(exc)
        return "" if proc.exit_code == 0 else _complaint(proc)


def _cancel_and_wait(job: _Job, poll_s: float) -> str:
    """Cancel ``job`` and wait until it left the queue; returns what went wrong, if anything."""
    problem = job.cancel()
    deadline = time.monotonic() + CANCEL_WAIT_S
    errors = 0
    while time.monotonic() < deadline:
        try:
            if job.poll() is None:
                return problem
            errors = 0
        except _QueryError as exc:
            errors += 1
            if errors >= MAX_QUERY_ERRORS:
                return "; ".join(filter(None, [problem, f"cannot see whether it stopped: {exc}"]))
        time.sleep(min(poll_s, 1.0))
    late = f"job {job.job_id} still in the queue {CANCEL_WAIT_S:g} s after cancel"
    return "; ".join(filter(None, [problem, late]))


@dataclass
class _Watch:
    """What dftune saw while following a job: its clocks, for the wall time."""

    submitted: float  #: perf_counter at submission
    submitted_epoch: float
    first_running: float | None = None  #: perf_counter at the first poll that saw the job started
    gone: float | None = None  #: perf_counter at the first poll that no longer saw it


def _wall(watch: _Watch, end: JobEnd | None, clock: Path | None) -> tuple[float, str, float | None]:
    """(wall seconds, where they came from, queue wait) from the most precise clock there is."""
    start, stop = parse_job_clock(_read_tail(clock, 4096)) if clock else (None, None)
    if start is not None and stop is not None and stop >= start:
        return (
            stop - start,
            "job script clock around srun (date +%s.%N)",
            max(0.0, start - watch.submitted_epoch),
        )
    if end is not None:
        queue = max(0.0, end.start - (end.submit or watch.submitted_epoch)) if end.start else None
        if end.runtime_s is not None:
            return end.runtime_s, f"{end.source} runtime", queue
        if end.start is not None and end.end is not None and end.end >= end.start:
            return end.end - end.start, f"{end.source} start/end (whole seconds)", queue
    if watch.first_running is not None and watch.gone is not None:
        queue = watch.first_running - watch.submitted
        return (
            watch.gone - watch.first_running,
            "dftune's poll clock from first seen running (±poll_s)",
            queue,
        )
    return 0.0, "none: the job's run time is unknown", None


@dataclass(frozen=True)
class Following:
    """How a submitted job is followed: its limits, the poll interval, and where its output lands."""

    #: the run's limit, from the first poll that saw the job running
    timeout_s: float
    #: the wait's limit, from submission; None: ``timeout_s`` counts from submission
    queue_timeout_s: float | None
    poll_s: float
    out: Path
    err: Path
    #: the job script's own clock file (Slurm); None where there is none (Flux)
    clock: Path | None

    @classmethod
    def of(
        cls, launcher: Launcher, timeout_s: float, out: Path, err: Path, clock: Path | None = None
    ) -> Following:
        """The launcher's queue limit and poll interval with the run's timeout and output files."""
        return cls(timeout_s, launcher.queue_timeout_s, launcher.poll_s, out, err, clock)


def _follow(job: _Job, *, watch: _Watch, how: Following) -> ProcessResult:
    """Poll ``job`` until it leaves the queue, then read its result.

    It is cancelled when it waited ``queue_timeout_s`` in the queue without starting, or ran
    ``timeout_s`` from the first poll that saw it running (a busy cluster's queue is not the
    program's time).  With ``queue_timeout_s`` None, ``timeout_s`` counts from submission."""
    timeout_s, queue_timeout_s, poll_s = how.timeout_s, how.queue_timeout_s, how.poll_s
    out, err, clock = how.out, how.err, how.clock

    def result(
        status: Status, code: int | None, reason: str, end: JobEnd | None = None, source: str = ""
    ) -> ProcessResult:
        if watch.gone is None:  # stopped following it (timeout, lost): it ran until now at most
            watch.gone = time.perf_counter()
        wall, wall_source, queue = _wall(watch, end, clock)
        if status != "ok" and watch.first_running is None and end is None:
            wall, wall_source = 0.0, "none: the job never started"
        return ProcessResult(
            status=status,
            exit_code=code,
            wall_s=wall,
            stdout_tail=_tail(out),
            stderr_tail=program_stderr(_read_tail(err, 2 * TAIL_BYTES))[-TAIL_BYTES:],
            reason=reason,
            wall_source=wall_source,
            state_source=source or (end.source if end else ""),
            queue_s=queue,
        )

    one_clock = queue_timeout_s is None
    #: how long after submission a job that has not started is cancelled
    wait_limit = timeout_s if queue_timeout_s is None else queue_timeout_s

    def deadline() -> float:
        if one_clock or watch.first_running is None:
            return watch.submitted + wait_limit
        return watch.first_running + timeout_s

    errors: list[str] = []
    never = ("", 0)  # (why, polls in a row)
    q: QueueState | None = QueueState(state="SUBMITTED", waiting=True)
    while True:
        try:
            q = job.poll()
            errors.clear()
        except _QueryError as exc:  # keep the last state seen: a controller may be restarting
            errors.append(str(exc))
            if len(errors) >= MAX_QUERY_ERRORS:
                problem = _cancel_and_wait(job, poll_s)
                extra = f"; cancel: {problem}" if problem else ""
                return result(
                    "failed", None, f"lost track of {job.scheduler} job {job.job_id}: {errors[-1]}{extra}"
                )
        now = time.perf_counter()
        if q is None:
            watch.gone = now
            break
        if not q.waiting and watch.first_running is None:
            watch.first_running = now
        why = job.never_starts(q) if q.waiting and not errors else ""
        never = (why, never[1] + 1 if why and why == never[0] else 1 if why else 0)
        if never[1] >= NEVER_POLLS:
            problem = _cancel_and_wait(job, poll_s)
            extra = f"; cancel: {problem}" if problem else ""
            reason = (
                f"{job.scheduler} job {job.job_id} can never start ({why}); cancelled with {job.cancel_tool}"
            )
            return result("failed", None, reason + extra, source=job.queue_tool)
        if now >= deadline():
            problem = _cancel_and_wait(job, poll_s)
            if watch.first_running is None:
                said = f"{q.state.lower()}" + (f", reason {q.reason}" if q.reason else "")
                which = "timeout_s" if one_clock else "[launcher] queue_timeout_s"
                reason = (
                    f"job {job.job_id} never started within {wait_limit:g} "
                    f"s ({said}): {job.cancel_tool} {job.job_id}; {which} bounds the wait"
                )
            else:
                reason = f"killed after {timeout_s:g} s: {job.cancel_tool} {job.job_id}"
            reason += f" ({problem})" if problem else ""
            return result("timeout", None, reason)
        time.sleep(min(poll_s, max(0.0, deadline() - now)))

    problem = ""
    for attempt in range(FINAL_TRIES):
        try:
            final = job.final()
        except _QueryError as exc:
            final, problem = None, str(exc)
        if final is not None:
            return result(final.status, final.exit_code, final.reason, final)
        if attempt + 1 < FINAL_TRIES:
            time.sleep(min(poll_s, 1.0))
    why = f": {problem}" if problem else ""
    return result(
        "failed",
        None,
        f"{job.scheduler} job {job.job_id} left the queue but {job.final_tools} gave no final state{why}",
    )


def _submit_and_follow(
    what: str,
    cmd: list[str],
    parse_id: Callable[[str], str | None],
    make_job: Callable[[str], _Job],
    *,
    cli_env: dict[str, str],
    cwd: Path,
    how: Following,
) -> ProcessResult:
    """Submit with ``cmd``, read the job id, then follow the job to its end (both schedulers)."""
    for stale in (how.out, how.err, how.clock):
        if stale is not None:
            stale.unlink(missing_ok=True)
    watch = _Watch(submitted=time.perf_counter(), submitted_epoch=time.time())
    try:
        proc = _cli(cmd, cli_env, cwd=cwd)
    except _QueryError as exc:
        return _failed(f"{what} failed: {exc}")
    if proc.exit_code != 0:
        return _failed(f"{what} refused the job: {_complaint(proc)}")
    job_id = parse_id(proc.stdout)
    if job_id is None:
        return _failed(f"{what} printed no job id (stdout: {proc.stdout.strip()[:200]!r})")
    return _follow(make_job(job_id), watch=watch, how=how)
