"""The one way dftune runs a program: argv only, its own process group, a hard timeout.

The program gets its own session (process group), so a timeout kills everything it
started, not just the direct child; :mod:`core.supervise` makes it die with dftune (PDEATHSIG),
records its group for the run, and sweeps what it leaves behind. Two shapes over the same
mechanism:

- :func:`run_process` for workloads: output to files (a chatty program cannot block on a
  full pipe), tails kept for error messages, leftovers of the group killed at the end;
- :func:`run_command` for short commands (a sysctl read, pip, a PDF parser child, a
  scheduler query): output captured in memory.
"""

from __future__ import annotations

import os
import select
import signal
import subprocess
import threading
import time
from contextlib import nullcontext, suppress
from dataclasses import dataclass
from pathlib import Path
from typing import IO, Any, Literal

from pydantic import Field

from dftune.core import supervise
from dftune.core.errors import storage_error
from dftune.core.model import StrictModel

Status = Literal["ok", "failed", "timeout"]
#: Seconds between SIGTERM and SIGKILL for a process group that overran its timeout.
KILL_GRACE_S = 3.0
TAIL_BYTES = 4000
TAIL_CHARS = 2000


class ProcessResult(StrictModel):
    status: Status
    exit_code: int | None
    wall_s: float
    stdout_tail: str = ""
    stderr_tail: str = ""
    reason: str = ""
    #: batch jobs: where ``wall_s`` came from (the job's own clock, never the queue wait) and
    #: which command gave the final state (sacct, or scontrol when accounting is disabled)
    wall_source: str = ""
    state_source: str = ""
    queue_s: float | None = None
    #: processes the program left behind outside its group (a setsid'd grandchild), killed after it
    leftovers: list[str] = Field(default_factory=list)


@dataclass
class CommandResult:
    """A short command's outcome with its whole output."""

    argv: list[str]
    exit_code: int | None
    stdout: str
    stderr: str
    timed_out: bool
    wall_s: float
    error: str = ""

    @property
    def ok(self) -> bool:
        return self.exit_code == 0 and not self.timed_out and not self.error

    def summary(self) -> dict[str, Any]:
        out: dict[str, Any] = {
            "argv": self.argv,
            "exit_code": self.exit_code,
            "stdout_tail": self.stdout[-TAIL_CHARS:],
            "stderr_tail": self.stderr[-TAIL_CHARS:],
            "wall_s": round(self.wall_s, 3),
        }
        if self.timed_out:
            out["timed_out"] = True
        if self.error:
            out["error"] = self.error
        return out

    def reason(self) -> str:
        if self.error:
            return self.error
        if self.timed_out:
            return f"{self.argv[0]} timed out"
        tail = self.stderr.strip().splitlines()[-1:] or [""]
        return f"{self.argv[0]} exited with {self.exit_code}" + (f": {tail[0][-300:]}" if tail[0] else "")


def kill_group(
    pgid: int, grace_s: float = KILL_GRACE_S, leader: subprocess.Popen[bytes] | None = None
) -> None:
    """SIGTERM the whole group, then SIGKILL whatever is left after ``grace_s``. ``leader``: the
    group's first process; it and any member re-parented to this (subreaper) process are reaped as
    they end, since a zombie still counts as a member and the grace would otherwise always run out."""
    for sig, wait in ((signal.SIGTERM, grace_s), (signal.SIGKILL, 0.0)):
        try:
            os.killpg(pgid, sig)
        except ProcessLookupError:
            return
        deadline = time.monotonic() + wait
        while time.monotonic() < deadline:
            if leader is not None:
                _reap_group(pgid, leader)
            try:
                os.killpg(pgid, 0)
            except ProcessLookupError:
                return
            time.sleep(0.05)


def _reap_group(pgid: int, leader: subprocess.Popen[bytes]) -> None:
    """Collect the group's ended members that are this process's children: the leader through its
    Popen (which keeps its exit status), the others (adopted) here."""
    leader.poll()
    waitid = getattr(os, "waitid", None)
    for _ in range(64):  # no group of a short command has more zombies to collect at once
        try:  # which member is waitable, without collecting it yet
            ended = waitid(os.P_PGID, pgid, os.WEXITED | os.WNOHANG | os.WNOWAIT) if waitid else None
        except ChildProcessError:
            return
        if ended is None or ended.si_pid == leader.pid:
            return  # none, or the leader, whose Popen collects it (its next poll)
        with suppress(ChildProcessError):
            os.waitpid(ended.si_pid, os.WNOHANG)


def _check_argv(argv: list[str]) -> None:
    if not argv or not all(isinstance(a, str) for a in argv):
        raise ValueError("argv must be a non-empty list of strings")


def _start(
    argv: list[str],
    cwd: Path | None,
    env: dict[str, str] | None,
    out: IO[bytes] | int,
    err: IO[bytes] | int,
    tag: str = "",
) -> tuple[subprocess.Popen[bytes], int]:
    """Start in a new session, dying with its starting thread; returns it and its start tick."""
    supervise.check_stopping()
    if tag:
        env = {**(env if env is not None else os.environ), supervise.TAG_ENV: tag}
    with supervise.spawning():  # registered before any sweep can see it
        proc = subprocess.Popen(
            argv,
            cwd=cwd,
            env=env,
            stdout=out,
            stderr=err,
            stdin=subprocess.DEVNULL,
            start_new_session=True,
            preexec_fn=supervise.child_preexec(),
        )
        try:
            start = supervise.started(proc.pid, argv[0], tag)
        except BaseException as exc:
            failed: BaseException | None = exc
        else:
            failed = None
    if failed is not None:
        kill_group(proc.pid, grace_s=0.0)
        proc.wait()
        supervise.finished(proc.pid)
        if isinstance(failed, OSError):  # the run's process ledger, not the program
            raise storage_error(failed) from failed
        raise failed
    return proc, start


def _tail(path: Path) -> str:
    try:
        with open(path, "rb") as fh:
            fh.seek(0, os.SEEK_END)
            size = fh.tell()
            fh.seek(max(0, size - TAIL_BYTES))
            return fh.read().decode("utf-8", errors="replace")
    except OSError:
        return ""


def run_process(
    argv: list[str],
    *,
    cwd: Path,
    env: dict[str, str],
    timeout_s: float,
    log_dir: Path,
    label: str = "run",
) -> ProcessResult:
    """Run ``argv`` to completion or timeout; stdout/stderr land in ``log_dir/label.{out,err}``."""
    _check_argv(argv)
    log_dir.mkdir(parents=True, exist_ok=True)
    out_path, err_path = log_dir / f"{label}.out", log_dir / f"{label}.err"
    tag = supervise.new_tag()
    with open(out_path, "wb") as out, open(err_path, "wb") as err:
        start = time.perf_counter()
        try:
            proc, ticks = _start(argv, cwd, env, out, err, tag)
        except OSError as exc:
            return ProcessResult(
                status="failed", exit_code=None, wall_s=0.0, reason=f"cannot start {argv[0]}: {exc}"
            )
        try:
            try:
                code = proc.wait(timeout=timeout_s)
                wall = time.perf_counter() - start
                status: Status = "ok" if code == 0 else "failed"
                reason = "" if code == 0 else f"exit code {code}"
            except subprocess.TimeoutExpired:
                kill_group(proc.pid, leader=proc)
                code = proc.wait()
                wall = time.perf_counter() - start
                status, reason = "timeout", f"killed after {timeout_s:g} s (whole process group)"
            else:
                # the program may have left children behind in its group: they go too
                kill_group(proc.pid, grace_s=0.5)
        finally:
            # whatever it left outside its group (setsid), and the group itself on any exit path
            leftovers = supervise.sweep(tag, since=ticks, pgid=proc.pid)
            if proc.poll() is None:
                proc.wait()
            supervise.finished(proc.pid)
    supervise.check_stopping()  # killed by dftune's own SIGTERM: not a result
    return ProcessResult(
        status=status,
        exit_code=code,
        wall_s=wall,
        stdout_tail=_tail(out_path),
        stderr_tail=_tail(err_path),
        reason=reason,
        leftovers=leftovers,
    )


#: the most of each stream a short command's result keeps (a --help that never ends is cut here)
COMMAND_OUTPUT_CAP = 1 << 20


#: how long a command's output is still read once the command and what it left are gone: a process
#: out of reach (another user's, unkillable) may hold the pipe open forever
READ_AFTER_S = 2.0


def run_command(
    argv: list[str],
    *,
    timeout_s: float,
    cwd: Path | None = None,
    env: dict[str, str] | None = None,
    output_cap: int = COMMAND_OUTPUT_CAP,
    contain: bool = False,
) -> CommandResult:
    """Run a short command with its output captured (at most ``output_cap`` bytes of each stream;
    the rest is read and dropped); on timeout its group is killed. ``contain``: a program that is
    not a tool of ours (a --help probe) is a workload's peer: whatever it left (its group, a child
    that started its own session or scrubbed its environment, anything adopted) is killed when it
    ends, dftune being the subreaper meanwhile. A tool's command (``sbatch``, ``flux submit``) is
    meant to leave its jobs running, so it is not contained. Either way it returns within about
    ``timeout_s`` + :data:`KILL_GRACE_S` + :data:`READ_AFTER_S` (and a contained one's sweep)."""
    _check_argv(argv)
    with supervise.reaping() if contain else nullcontext():
        return _run_command(argv, timeout_s, cwd, env, output_cap, contain)


def _run_command(
    argv: list[str],
    timeout_s: float,
    cwd: Path | None,
    env: dict[str, str] | None,
    output_cap: int,
    contain: bool,
) -> CommandResult:
    t0 = time.monotonic()
    tag = supervise.new_tag() if contain else ""
    try:
        proc, ticks = _start(argv, cwd, env, subprocess.PIPE, subprocess.PIPE, tag)
    except OSError as exc:
        return CommandResult(argv, None, "", "", False, time.monotonic() - t0, f"cannot run {argv[0]}: {exc}")
    assert proc.stdout is not None and proc.stderr is not None
    outs = [_Capped(proc.stdout, output_cap), _Capped(proc.stderr, output_cap)]
    timed_out = False
    try:
        try:
            proc.wait(timeout=timeout_s)
        except subprocess.TimeoutExpired:
            timed_out = True
            kill_group(proc.pid, leader=proc)
    finally:
        if proc.poll() is None:
            kill_group(proc.pid, grace_s=0.0)
            proc.wait()
        try:
            if contain:
                supervise.sweep(tag, since=ticks, pgid=proc.pid)  # no child outlives the command
            supervise.finished(proc.pid)
        finally:
            until = time.monotonic() + READ_AFTER_S
            for o in outs:
                o.finish(until)
    supervise.check_stopping()
    return CommandResult(
        argv,
        proc.returncode,
        outs[0].text(),
        outs[1].text(),
        timed_out,
        time.monotonic() - t0,
    )


class _Capped:
    """Reads a pipe on a thread, keeping its first ``cap`` bytes, until its end or until told to
    stop: a process that outlived the command may hold the pipe open, so the reader waits for data
    a short while at a time and never blocks the command's return, and it closes the pipe itself."""

    #: how long one wait for data lasts: the most a stop waits for the reader
    POLL_S = 0.05

    def __init__(self, pipe: IO[bytes], cap: int) -> None:
        self.pipe, self.cap = pipe, cap
        self.kept = bytearray()
        self.dropped = 0
        self.stop = threading.Event()
        self.thread = threading.Thread(target=self._read, daemon=True)
        self.thread.start()

    def _read(self) -> None:
        fd = self.pipe.fileno()
        try:
            with suppress(OSError, ValueError):
                ready = select.poll()
                ready.register(fd, select.POLLIN | select.POLLHUP | select.POLLERR)
                while not self.stop.is_set():
                    if not ready.poll(self.POLL_S * 1000):
                        continue
                    chunk = os.read(fd, 65536)
                    if not chunk:
                        return
                    room = max(self.cap - len(self.kept), 0)
                    self.kept += chunk[:room]
                    self.dropped += len(chunk) - len(chunk[:room])
        finally:
            with suppress(OSError):
                self.pipe.close()

    def finish(self, until: float) -> None:
        """Read until the stream ends or the clock reaches ``until``, then stop."""
        self.thread.join(max(0.0, until - time.monotonic()))
        self.stop.set()
        self.thread.join(self.POLL_S * 20)

    def text(self) -> str:
        out = self.kept.decode("utf-8", errors="replace")
        return out + (f"\n[{self.dropped:,} more bytes not kept]\n" if self.dropped else "")
