"""Batch-scheduler launchers: run one program as a Slurm or Flux job and wait for it.

Both follow the same steps: build the job (a batch script for ``sbatch``, an argv for
``flux submit``), submit it (argv lists only, never a shell), poll the queue every
``launcher.poll_s`` seconds until the job leaves it, then ask the accounting side
(``sacct`` / ``flux jobs``) for the final state and exit code.  The result is a
:class:`~dftune.core.process.ProcessResult` like a local run's:

* ``ok``: the job completed with exit code 0;
* ``failed``: the program failed, the scheduler failed it (node failure, out of memory,
  cancelled by someone else) or the job could not be submitted or followed;
* ``timeout``: our own ``timeout_s`` ran out (the job is then cancelled with ``scancel`` /
  ``flux cancel`` and we wait for it to leave the queue) or the scheduler's time limit hit.

``wall_s`` runs from submission to the moment the poll sees the job gone, so it includes
the time spent waiting in the queue and is only as precise as ``poll_s``.

The job inherits ``env``: ``sbatch`` gets it and the script says ``--export=ALL``;
``flux submit`` copies its environment into the job.  ``LD_PRELOAD`` (dftracer's preload
library) is the exception: it is removed from the scheduler commands' environment, so
``sbatch``, ``squeue`` and friends are not traced, and handed to the program alone through
``env LD_PRELOAD=... <argv>`` inside the job.
"""

from __future__ import annotations

import abc
import os
import re
import shlex
import shutil
import subprocess
import time
from collections.abc import Callable
from pathlib import Path

from dftune.core.process import ProcessResult, Status
from dftune.tools.runner.spec import Launcher

#: Longest a single scheduler command (sbatch, squeue, ...) may take before we give up on it.
CLI_TIMEOUT_S = 60.0
#: Consecutive failed queue queries before we stop following a job (and cancel it).
MAX_QUERY_ERRORS = 5
#: Attempts at the final state once the job left the queue (accounting may lag behind).
FINAL_TRIES = 10
#: How long to wait for a cancelled job to leave the queue.
CANCEL_WAIT_S = 60.0
TAIL_BYTES = 4000

#: Slurm job states after which a job is over (squeue may still list it for MinJobAge).
SLURM_TERMINAL = frozenset(
    {"BOOT_FAIL", "CANCELLED", "COMPLETED", "DEADLINE", "FAILED", "NODE_FAIL", "OUT_OF_MEMORY", "PREEMPTED",
     "REVOKED", "TIMEOUT"}
)  # fmt: skip
FLUX_ACTIVE = frozenset({"DEPEND", "PRIORITY", "SCHED", "RUN", "CLEANUP"})

_SLURM_ID = re.compile(r"^(\d+)(?:;\S+)?$")
_FLUX_ID = re.compile(
    r"^(?:ƒ[1-9A-HJ-NP-Za-km-z]+|f[1-9A-HJ-NP-Za-km-z]+|\d+|0x[0-9a-fA-F]+|[a-z]+(?:-[a-z]+){3})$"
)


class _QueryError(RuntimeError):
    """A scheduler command failed in a way that says nothing about the job."""


# ------------------------------------------------------------------------------ builders


def _job_name(label: str) -> str:
    return "dftune-" + (re.sub(r"[^A-Za-z0-9_.-]", "_", label) or "run")


def _paths(log_dir: Path, label: str) -> tuple[Path, Path]:
    base = Path(os.path.abspath(log_dir))
    return base / f"{label}.out", base / f"{label}.err"


def _directive(value: str) -> str:
    """A value on an ``#SBATCH`` line (sbatch splits them on blanks and honours double quotes)."""
    if any(c in value for c in '"\n\r'):
        raise ValueError(f"cannot put {value!r} on an #SBATCH line (quote or line break)")
    return f'"{value}"' if any(c.isspace() for c in value) else value


def _slurm_filename(path: Path) -> str:
    # sbatch expands %j, %x, ... in --output/--error; %% is a literal %
    return _directive(str(path).replace("%", "%%"))


def slurm_script(argv: list[str], *, cwd: Path, log_dir: Path, label: str, launcher: Launcher) -> str:
    """The batch script ``run_slurm`` submits: ``#SBATCH`` directives, then ``srun <argv>``."""
    _check_argv(argv)
    out, err = _paths(log_dir, label)
    lines = [
        "#!/bin/bash",
        f"#SBATCH --job-name={_directive(_job_name(label))}",
        f"#SBATCH --nodes={launcher.nodes}",
        f"#SBATCH --ntasks={launcher.ranks}",
        f"#SBATCH --time={launcher.time_limit_min}",
    ]
    if launcher.partition:
        lines.append(f"#SBATCH --partition={_directive(launcher.partition)}")
    lines += [
        f"#SBATCH --output={_slurm_filename(out)}",
        f"#SBATCH --error={_slurm_filename(err)}",
        f"#SBATCH --chdir={_directive(os.path.abspath(cwd))}",
        "#SBATCH --export=ALL",
        "",
        f"srun {shlex.join(argv)}",
        "",
    ]
    return "\n".join(lines)


def _flux_filename(path: Path) -> str:
    text = str(path)
    if "{{" in text:  # flux expands {{id}}-style templates in --output/--error
        raise ValueError(f"cannot use {text!r} as a Flux output file ('{{{{' starts a template)")
    return text


def flux_submit_argv(
    argv: list[str], *, cwd: Path, log_dir: Path, label: str, launcher: Launcher
) -> list[str]:
    """The ``flux submit ...`` command ``run_flux`` runs (``extra_args`` before the program)."""
    _check_argv(argv)
    out, err = _paths(log_dir, label)
    cmd = [
        "flux", "submit", f"--job-name={_job_name(label)}", f"--nodes={launcher.nodes}",
        f"--ntasks={launcher.ranks}", f"--time-limit={launcher.time_limit_min}m",
        f"--output={_flux_filename(out)}", f"--error={_flux_filename(err)}", f"--cwd={os.path.abspath(cwd)}",
    ]  # fmt: skip
    if launcher.partition:
        cmd.append(f"--queue={launcher.partition}")
    return [*cmd, *launcher.extra_args, *argv]


# ------------------------------------------------------------------------------ parsers


def parse_sbatch_id(stdout: str) -> str | None:
    """The job id from ``sbatch --parsable`` output (``1234`` or ``1234;cluster``)."""
    lines = [ln.strip() for ln in stdout.splitlines() if ln.strip()]
    m = _SLURM_ID.match(lines[-1]) if lines else None
    return m.group(1) if m else None


def parse_flux_id(stdout: str) -> str | None:
    """The job id printed by ``flux submit`` (f58 such as ``ƒ2Vs3mC``, decimal, hex or words)."""
    lines = [ln.strip() for ln in stdout.splitlines() if ln.strip()]
    return lines[-1] if lines and _FLUX_ID.match(lines[-1]) else None


def parse_sacct(stdout: str) -> tuple[str, int | None] | None:
    """(state, exit code) from the first line of ``sacct -n -P -o State,ExitCode``.

    The state loses decorations such as ``CANCELLED by 1000`` or a trailing ``+``; the
    exit code ``N:S`` becomes ``N``, or ``-S`` when a signal ``S`` ended the job (the
    convention of :mod:`subprocess`).  ``None`` when there is no line yet.
    """
    lines = [ln for ln in stdout.splitlines() if ln.strip()]
    if not lines:
        return None
    state_field, _, code_field = lines[0].partition("|")
    words = state_field.split()
    if not words:
        return None
    state = words[0].rstrip("+").upper()
    code: int | None = None
    num, _, sig = code_field.strip().partition(":")
    try:
        n, s = int(num), int(sig or 0)
        code = -s if s else n
    except ValueError:
        code = None
    return state, code


def parse_flux_result(stdout: str) -> tuple[str, int | None] | None:
    """(result, return code) from ``flux jobs -n -o "{result} {returncode}"``; ``None`` while running."""
    words = stdout.split()
    if not words:
        return None
    code: int | None = None
    if len(words) > 1:
        try:
            code = int(words[1])
        except ValueError:
            code = None
    return words[0].upper(), code


# ------------------------------------------------------------------------------ running


def _check_argv(argv: list[str]) -> None:
    if not argv or not all(isinstance(a, str) for a in argv):
        raise ValueError("argv must be a non-empty list of strings")


def _tail(path: Path) -> str:
    try:
        with open(path, "rb") as fh:
            fh.seek(0, os.SEEK_END)
            fh.seek(max(0, fh.tell() - TAIL_BYTES))
            return fh.read().decode("utf-8", errors="replace")
    except OSError:
        return ""


def _failed(reason: str, wall_s: float = 0.0, exit_code: int | None = None) -> ProcessResult:
    return ProcessResult(status="failed", exit_code=exit_code, wall_s=wall_s, reason=reason)


def _find(tools: tuple[str, ...], env: dict[str, str]) -> dict[str, str] | str:
    """Full paths of the scheduler commands on ``env``'s PATH, or a reason naming the missing ones."""
    path = env.get("PATH", os.defpath)
    found = {t: shutil.which(t, path=path) for t in tools}
    missing = [t for t, p in found.items() if p is None]
    if missing:
        return f"{', '.join(missing)} not found on PATH (is this a {'Slurm' if 'sbatch' in tools else 'Flux'} machine?)"
    return {t: p for t, p in found.items() if p is not None}


def _split_preload(env: dict[str, str], argv: list[str]) -> tuple[dict[str, str], list[str]]:
    """Keep LD_PRELOAD away from the scheduler commands and give it to the program alone."""
    preload = env.get("LD_PRELOAD")
    if not preload:
        return dict(env), list(argv)
    cli_env = {k: v for k, v in env.items() if k != "LD_PRELOAD"}
    return cli_env, ["env", f"LD_PRELOAD={preload}", *argv]


def _cli(argv: list[str], env: dict[str, str], cwd: Path | None = None) -> subprocess.CompletedProcess[str]:
    """Run a scheduler command; a crash or hang raises :class:`_QueryError`."""
    try:
        return subprocess.run(argv, env=env, cwd=cwd, stdin=subprocess.DEVNULL, capture_output=True, text=True,
                              encoding="utf-8", errors="replace", timeout=CLI_TIMEOUT_S, check=False)  # fmt: skip
    except subprocess.TimeoutExpired:
        raise _QueryError(f"{Path(argv[0]).name} did not answer within {CLI_TIMEOUT_S:g} s") from None
    except OSError as exc:
        raise _QueryError(f"cannot run {argv[0]}: {exc}") from None


def _last_line(text: str) -> str:
    lines = [ln.strip() for ln in text.splitlines() if ln.strip()]
    return lines[-1] if lines else ""


def _complaint(proc: subprocess.CompletedProcess[str]) -> str:
    name = Path(str(proc.args[0])).name
    msg = _last_line(proc.stderr) or _last_line(proc.stdout) or "no message"
    return f"{name} exited with code {proc.returncode}: {msg}"


class _Job(abc.ABC):
    """One submitted job, seen through its scheduler's commands."""

    scheduler = ""

    def __init__(self, job_id: str, tools: dict[str, str], env: dict[str, str]) -> None:
        self.job_id, self.tools, self.env = job_id, tools, env

    @abc.abstractmethod
    def active(self) -> bool:
        """Still in the queue (pending, running or cleaning up)?  Raises :class:`_QueryError`."""

    @abc.abstractmethod
    def final(self) -> tuple[Status, int | None, str] | None:
        """(status, exit code, reason) once the scheduler knows; ``None`` while it does not."""

    @abc.abstractmethod
    def cancel(self) -> str:
        """Ask the scheduler to kill the job; returns a complaint, or "" when it accepted."""


class _SlurmJob(_Job):
    scheduler = "Slurm"

    def active(self) -> bool:
        proc = _cli([self.tools["squeue"], "-h", "-j", self.job_id, "-o", "%T"], self.env)
        if proc.returncode != 0:
            if "invalid job id" in proc.stderr.lower():  # purged from slurmctld after MinJobAge
                return False
            raise _QueryError(_complaint(proc))
        states = proc.stdout.split()
        return bool(states) and states[0].upper() not in SLURM_TERMINAL

    def final(self) -> tuple[Status, int | None, str] | None:
        proc = _cli([self.tools["sacct"], "-n", "-P", "-j", self.job_id, "-o", "State,ExitCode"], self.env)
        if proc.returncode != 0:
            raise _QueryError(_complaint(proc))
        parsed = parse_sacct(proc.stdout)
        if parsed is None or parsed[0] not in SLURM_TERMINAL:
            return None  # accounting has not caught up yet
        state, code = parsed
        line = next(ln.strip() for ln in proc.stdout.splitlines() if ln.strip())
        if state == "COMPLETED" and code in (0, None):
            return "ok", 0, ""
        if state == "TIMEOUT":
            return "timeout", code, f"Slurm time limit reached (job {self.job_id}, sacct: {line})"
        if state == "CANCELLED":
            return "failed", code, f"job {self.job_id} was cancelled outside dftune (sacct: {line})"
        if state == "FAILED":
            what = f"exit code {code}" if code is None or code >= 0 else f"killed by signal {-code}"
            return "failed", code, f"{what} (Slurm job {self.job_id}, sacct: {line})"
        return "failed", code, f"Slurm job {self.job_id} ended in state {state} (sacct: {line})"

    def cancel(self) -> str:
        try:
            proc = _cli([self.tools["scancel"], self.job_id], self.env)
        except _QueryError as exc:
            return str(exc)
        return "" if proc.returncode == 0 else _complaint(proc)


class _FluxJob(_Job):
    scheduler = "Flux"

    def active(self) -> bool:
        proc = _cli([self.tools["flux"], "jobs", "-n", "-o", "{state}", self.job_id], self.env)
        if proc.returncode != 0:
            raise _QueryError(_complaint(proc))
        state = proc.stdout.strip().upper()
        if not state:
            raise _QueryError(f"flux jobs printed no state for {self.job_id}")
        return state in FLUX_ACTIVE

    def final(self) -> tuple[Status, int | None, str] | None:
        proc = _cli([self.tools["flux"], "jobs", "-n", "-o", "{result} {returncode}", self.job_id], self.env)
        if proc.returncode != 0:
            raise _QueryError(_complaint(proc))
        parsed = parse_flux_result(proc.stdout)
        if parsed is None:
            return None
        result, code = parsed
        said = proc.stdout.strip()
        if result == "COMPLETED" and code in (0, None):
            return "ok", 0, ""
        if result == "TIMEOUT":
            return "timeout", code, f"Flux time limit reached (job {self.job_id}, flux jobs: {said})"
        if result == "CANCELED":
            return "failed", code, f"job {self.job_id} was canceled outside dftune (flux jobs: {said})"
        if result == "FAILED":
            return "failed", code, f"exit code {code} (Flux job {self.job_id}, flux jobs: {said})"
        return "failed", code, f"Flux job {self.job_id} ended with result {result} (flux jobs: {said})"

    def cancel(self) -> str:
        try:
            proc = _cli([self.tools["flux"], "cancel", self.job_id], self.env)
        except _QueryError as exc:
            return str(exc)
        return "" if proc.returncode == 0 else _complaint(proc)


def _cancel_and_wait(job: _Job, poll_s: float) -> str:
    """Cancel ``job`` and wait until it left the queue; returns what went wrong, if anything."""
    problem = job.cancel()
    deadline = time.monotonic() + CANCEL_WAIT_S
    errors = 0
    while time.monotonic() < deadline:
        try:
            if not job.active():
                return problem
            errors = 0
        except _QueryError as exc:
            errors += 1
            if errors >= MAX_QUERY_ERRORS:
                return "; ".join(filter(None, [problem, f"cannot see whether it stopped: {exc}"]))
        time.sleep(min(poll_s, 1.0))
    late = f"job {job.job_id} still in the queue {CANCEL_WAIT_S:g} s after cancel"
    return "; ".join(filter(None, [problem, late]))


def _follow(
    job: _Job, *, start: float, timeout_s: float, poll_s: float, out: Path, err: Path
) -> ProcessResult:
    """Poll ``job`` until it leaves the queue (or cancel it at ``timeout_s``), then read its result."""

    def result(status: Status, code: int | None, wall: float, reason: str) -> ProcessResult:
        return ProcessResult(status=status, exit_code=code, wall_s=wall, stdout_tail=_tail(out),
                             stderr_tail=_tail(err), reason=reason)  # fmt: skip

    deadline = start + timeout_s
    errors: list[str] = []
    while True:
        try:
            still = job.active()
            errors.clear()
        except _QueryError as exc:
            errors.append(str(exc))
            still = True
            if len(errors) >= MAX_QUERY_ERRORS:
                problem = _cancel_and_wait(job, poll_s)
                extra = f"; cancel: {problem}" if problem else ""
                return result("failed", None, time.perf_counter() - start,
                              f"lost track of {job.scheduler} job {job.job_id}: {errors[-1]}{extra}")  # fmt: skip
        now = time.perf_counter()
        if not still:
            break
        if now >= deadline:
            problem = _cancel_and_wait(job, poll_s)
            tool = "scancel" if job.scheduler == "Slurm" else "flux cancel"
            reason = f"killed after {timeout_s:g} s: {tool} {job.job_id}"
            reason += f" ({problem})" if problem else ""
            return result("timeout", None, time.perf_counter() - start, reason)
        time.sleep(min(poll_s, max(0.0, deadline - now)))
    wall = time.perf_counter() - start

    last = ""
    for attempt in range(FINAL_TRIES):
        try:
            final = job.final()
        except _QueryError as exc:
            final, last = None, str(exc)
        if final is not None:
            status, code, reason = final
            return result(status, code, wall, reason)
        if attempt + 1 < FINAL_TRIES:
            time.sleep(min(poll_s, 1.0))
    source = "sacct" if job.scheduler == "Slurm" else "flux jobs"
    why = f": {last}" if last else ""
    return result("failed", None, wall,
                  f"{job.scheduler} job {job.job_id} left the queue but {source} gave no final state{why}")  # fmt: skip


def run_slurm(
    argv: list[str],
    *,
    cwd: Path,
    env: dict[str, str],
    timeout_s: float,
    log_dir: Path,
    label: str = "run",
    launcher: Launcher,
) -> ProcessResult:
    """Run ``argv`` as a Slurm batch job (``srun`` inside ``sbatch``) and wait for it.

    The batch script is ``log_dir/<label>.sbatch``; the job's output goes to
    ``log_dir/<label>.out`` and ``.err``, which must be visible from the compute nodes.
    """
    _check_argv(argv)
    tools = _find(("sbatch", "squeue", "sacct", "scancel"), env)
    if isinstance(tools, str):
        return _failed(f"cannot submit to Slurm: {tools}")
    cli_env, job_argv = _split_preload(env, argv)
    log_dir.mkdir(parents=True, exist_ok=True)
    out, err = _paths(log_dir, label)
    script = Path(os.path.abspath(log_dir)) / f"{label}.sbatch"
    try:
        text = slurm_script(job_argv, cwd=cwd, log_dir=log_dir, label=label, launcher=launcher)
    except ValueError as exc:
        return _failed(f"cannot build the Slurm job: {exc}")
    script.write_text(text, encoding="utf-8")
    cmd = [tools["sbatch"], "--parsable", *launcher.extra_args, str(script)]
    return _submit_and_follow(
        "sbatch", cmd, parse_sbatch_id, lambda job_id: _SlurmJob(job_id, tools, cli_env),
        cli_env=cli_env, cwd=cwd, timeout_s=timeout_s, poll_s=launcher.poll_s, out=out, err=err,
    )  # fmt: skip


def run_flux(
    argv: list[str],
    *,
    cwd: Path,
    env: dict[str, str],
    timeout_s: float,
    log_dir: Path,
    label: str = "run",
    launcher: Launcher,
) -> ProcessResult:
    """Run ``argv`` as a Flux job (``flux submit``) and wait for it.

    The job's output goes to ``log_dir/<label>.out`` and ``.err``; the exact submit
    command is written to ``log_dir/<label>.flux`` for the record.
    """
    _check_argv(argv)
    tools = _find(("flux",), env)
    if isinstance(tools, str):
        return _failed(f"cannot submit to Flux: {tools}")
    cli_env, job_argv = _split_preload(env, argv)
    log_dir.mkdir(parents=True, exist_ok=True)
    out, err = _paths(log_dir, label)
    try:
        cmd = flux_submit_argv(job_argv, cwd=cwd, log_dir=log_dir, label=label, launcher=launcher)
    except ValueError as exc:
        return _failed(f"cannot build the Flux job: {exc}")
    (Path(os.path.abspath(log_dir)) / f"{label}.flux").write_text(shlex.join(cmd) + "\n", encoding="utf-8")
    return _submit_and_follow(
        "flux submit", [tools["flux"], *cmd[1:]], parse_flux_id, lambda job_id: _FluxJob(job_id, tools, cli_env),
        cli_env=cli_env, cwd=cwd, timeout_s=timeout_s, poll_s=launcher.poll_s, out=out, err=err,
    )  # fmt: skip


def _submit_and_follow(
    what: str,
    cmd: list[str],
    parse_id: Callable[[str], str | None],
    make_job: Callable[[str], _Job],
    *,
    cli_env: dict[str, str],
    cwd: Path,
    timeout_s: float,
    poll_s: float,
    out: Path,
    err: Path,
) -> ProcessResult:
    """Submit with ``cmd``, read the job id, then follow the job to its end (both schedulers)."""
    for stale in (out, err):
        stale.unlink(missing_ok=True)
    start = time.perf_counter()
    try:
        proc = _cli(cmd, cli_env, cwd=cwd)
    except _QueryError as exc:
        return _failed(f"{what} failed: {exc}", time.perf_counter() - start)
    if proc.returncode != 0:
        return _failed(f"{what} refused the job: {_complaint(proc)}", time.perf_counter() - start)
    job_id = parse_id(proc.stdout)
    if job_id is None:
        return _failed(
            f"{what} printed no job id (stdout: {proc.stdout.strip()[:200]!r})", time.perf_counter() - start
        )
    return _follow(make_job(job_id), start=start, timeout_s=timeout_s, poll_s=poll_s, out=out, err=err)


def run_scheduled(
    argv: list[str],
    *,
    cwd: Path,
    env: dict[str, str],
    timeout_s: float,
    log_dir: Path,
    label: str = "run",
    launcher: Launcher,
) -> ProcessResult:
    """:func:`run_slurm` or :func:`run_flux`, as ``launcher.kind`` says."""
    runners = {"slurm": run_slurm, "flux": run_flux}
    if launcher.kind not in runners:
        raise ValueError(f"launcher kind {launcher.kind!r} is not a batch scheduler (slurm or flux)")
    return runners[launcher.kind](argv, cwd=cwd, env=env, timeout_s=timeout_s, log_dir=log_dir, label=label,
                                  launcher=launcher)  # fmt: skip
