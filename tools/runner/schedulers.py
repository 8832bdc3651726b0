"""Batch-scheduler launchers: run one program as a Slurm or Flux job and wait for it.

Both follow the same steps: build the job (a batch script for ``sbatch``, an argv for
``flux submit``), submit it (argv lists only, never a shell), poll the queue every
``launcher.poll_s`` seconds until the job leaves it, then ask the scheduler for the final
state and exit code.  The result is a :class:`~dftune.core.process.ProcessResult` like a
local run's:

* ``ok``: the job completed with exit code 0;
* ``failed``: the program failed (its exit code, or ``-S`` when signal ``S`` killed it),
  the scheduler failed it (node failure, out of memory, cancelled by someone else), the job
  can never start (a pending reason such as ``PartitionConfig``: it is cancelled at once
  instead of waiting out ``timeout_s``) or it could not be submitted or followed;
* ``timeout``: our own ``timeout_s`` ran out (the job is then cancelled with ``scancel`` /
  ``flux cancel`` and we wait for it to leave the queue) or the scheduler's time limit hit.

Where the final state comes from (``state_source``): Slurm's ``sacct`` (every line: the
job, its batch step and the program's steps, whose ``N:S`` exit code carries the signal);
when accounting is disabled (``AccountingStorageType=accounting_storage/none``, common on
small clusters) or has no record, ``scontrol -o show job``, which slurmctld answers until
``MinJobAge`` after the end.  Flux: ``flux jobs``.

``wall_s`` is the job's own run time, never the time spent waiting in the queue
(``queue_s`` holds that), and ``wall_source`` says where it came from: the batch script's
own clock around ``srun`` (``date +%s.%N`` into ``<label>.time``), else the scheduler's
start and end times (Slurm's are whole seconds; Flux's ``runtime``), else dftune's poll
clock from the first poll that saw the job running (only as precise as ``poll_s``).

``stderr_tail`` is the program's stderr: the launcher's own lines (``srun: error: ...``,
``slurmstepd: ...``, ``flux-shell[0]: ...``) stay in the ``.err`` file but are left out
of it, so a failure's reason quotes the program, not srun.

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
import signal
import time
from collections.abc import Callable
from dataclasses import dataclass
from datetime import datetime
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

#: Slurm job states after which a job is over (squeue may still list it for MinJobAge).
SLURM_TERMINAL = frozenset(
    {"BOOT_FAIL", "CANCELLED", "COMPLETED", "DEADLINE", "FAILED", "NODE_FAIL", "OUT_OF_MEMORY", "PREEMPTED",
     "REVOKED", "TIMEOUT"}
)  # fmt: skip
#: Slurm states of a job that has not started its program yet.
SLURM_WAITING = frozenset(
    {"PENDING", "CONFIGURING", "REQUEUED", "REQUEUE_HOLD", "REQUEUE_FED", "RESV_DEL_HOLD"}
)
#: squeue reasons (``%r``) under which a pending job can never start as submitted: only an
#: administrator's change or the user (``scontrol release``) can help, so waiting is pointless.
#: Names as Slurm's ``job_reason_string`` spells them; see :func:`slurm_never_starts`.
SLURM_NEVER_REASONS: dict[str, str] = {
    "PartitionConfig": "the request (tasks, nodes, memory) does not fit the partition's configuration",
    "PartitionNodeLimit": "the node count is outside the partition's MinNodes/MaxNodes",
    "PartitionTimeLimit": "the time limit exceeds the partition's MaxTime",
    "BadConstraints": "the constraints cannot be satisfied by any node",
    "DependencyNeverSatisfied": "its dependency can never be satisfied",
    "InvalidAccount": "the account is invalid",
    "InvalidQOS": "the QOS is invalid",
    "AccountNotAllowed": "the account may not use this partition",
    "QOSNotAllowed": "the QOS may not use this partition",
    "JobHeldAdmin": "an administrator holds it (scontrol release)",
    "JobHeldUser": "it is held (scontrol release)",
    "JobHoldMaxRequeue": "it was requeued too often and is held",
    "MaxMemPerLimit": "its memory per CPU/node exceeds MaxMemPerCPU/MaxMemPerNode",
    "ReservationDeleted": "its reservation was deleted",
}
#: Per-job and per-node limits of a QOS or association (``QOSMaxCpuPerJobLimit``,
#: ``AssocMaxWallDurationPerJobLimit``, ``QOSMinCpuNotSatisfied``, ...): the job exceeds them
#: whatever else runs.  Group (``Grp``) and per-user limits clear when other jobs end.
_SLURM_NEVER_LIMIT = re.compile(r"^(?:QOS|Assoc)Max\w*Per(?:Job|Node)|^QOSMin")
FLUX_ACTIVE = frozenset({"DEPEND", "PRIORITY", "SCHED", "RUN", "CLEANUP"})
FLUX_WAITING = frozenset({"DEPEND", "PRIORITY", "SCHED"})

_SLURM_ID = re.compile(r"^(\d+)(?:;\S+)?$")
_FLUX_ID = re.compile(
    r"^(?:ƒ[1-9A-HJ-NP-Za-km-z]+|f[1-9A-HJ-NP-Za-km-z]+|\d+|0x[0-9a-fA-F]+|[a-z]+(?:-[a-z]+){3})$"
)
#: Lines the launcher writes into the job's stderr (not the program's): srun, slurmstepd
#: (``slurmstepd-<host>:`` on Debian), Flux's shell and job tools.
_LAUNCHER_LINE = re.compile(
    r"^(?:srun|sbatch|salloc|slurmstepd(?:-[\w.-]+)?|flux-(?:shell|job)(?:\[\d+\])?): "
)
#: ``srun: error: node1: tasks 0-3: Killed``: srun's account of how the program's tasks ended.
_SRUN_TASKS = re.compile(r"^srun: error: \S+: tasks? [0-9,\[\]-]+: (.+?)\s*$", re.MULTILINE)
_SACCT_FIELDS = "JobID,State,ExitCode,Submit,Start,End"


class _QueryError(RuntimeError):
    """A scheduler command failed in a way that says nothing about the job."""


# ------------------------------------------------------------------------------ builders


def _job_name(label: str) -> str:
    return "dftune-" + (re.sub(r"[^A-Za-z0-9_.-]", "_", label) or "run")


def _paths(log_dir: Path, label: str) -> tuple[Path, Path]:
    base = Path(os.path.abspath(log_dir))
    return base / f"{label}.out", base / f"{label}.err"


def _clock_path(log_dir: Path, label: str) -> Path:
    return Path(os.path.abspath(log_dir)) / f"{label}.time"


def _directive(value: str) -> str:
    """A value on an ``#SBATCH`` line (sbatch splits them on blanks and honours double quotes)."""
    if any(c in value for c in '"\n\r'):
        raise ValueError(f"cannot put {value!r} on an #SBATCH line (quote or line break)")
    return f'"{value}"' if any(c.isspace() for c in value) else value


def _slurm_filename(path: Path) -> str:
    # sbatch expands %j, %x, ... in --output/--error; %% is a literal %
    return _directive(str(path).replace("%", "%%"))


def slurm_script(argv: list[str], *, cwd: Path, log_dir: Path, label: str, launcher: Launcher) -> str:
    """The batch script ``run_slurm`` submits: ``#SBATCH`` directives, then ``srun <argv>``.

    The script times ``srun`` with its own clock (``date +%s.%N`` into ``<label>.time``), so
    the wall time is the program's and not the queue wait's, to the nanosecond instead of
    the whole seconds sacct and scontrol record; it exits with srun's status.
    """
    _check_argv(argv)
    out, err = _paths(log_dir, label)
    clock = shlex.quote(str(_clock_path(log_dir, label)))
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
        "# dftune: the job's own clock around the program (the queue wait is not in it)",
        f'echo "start $(date +%s.%N)" > {clock}',
        f"srun {shlex.join(argv)}",
        "rc=$?",
        f'echo "end $(date +%s.%N) $rc" >> {clock}',
        "exit $rc",
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


@dataclass(frozen=True)
class SacctRow:
    """One line of ``sacct -P -o JobID,State,ExitCode,...``: the job, or one of its steps."""

    step: str  #: "" for the job itself, else "batch", "extern", "0", "1", ...
    state: str  #: without decorations (``CANCELLED by 1000`` -> ``CANCELLED``, ``FAILED+`` -> ``FAILED``)
    code: int | None  #: the N of ``N:S``
    signal: int  #: the S of ``N:S`` (0: no signal)
    submit: float | None = None  #: epoch seconds (whole seconds, local time), when sacct printed them
    start: float | None = None
    end: float | None = None


def parse_sbatch_id(stdout: str) -> str | None:
    """The job id from ``sbatch --parsable`` output (``1234`` or ``1234;cluster``)."""
    lines = [ln.strip() for ln in stdout.splitlines() if ln.strip()]
    m = _SLURM_ID.match(lines[-1]) if lines else None
    return m.group(1) if m else None


def parse_flux_id(stdout: str) -> str | None:
    """The job id printed by ``flux submit`` (f58 such as ``ƒ2Vs3mC``, decimal, hex or words)."""
    lines = [ln.strip() for ln in stdout.splitlines() if ln.strip()]
    return lines[-1] if lines and _FLUX_ID.match(lines[-1]) else None


def _exit_pair(text: str) -> tuple[int | None, int]:
    """Slurm's ``N:S`` exit code: (N, S); (None, 0) when unreadable."""
    num, _, sig = text.strip().partition(":")
    try:
        return int(num), int(sig or 0)
    except ValueError:
        return None, 0


def _slurm_time(text: str) -> float | None:
    """``2024-05-01T12:00:00`` (slurmctld's local time) as epoch seconds; None for Unknown/None."""
    try:
        return datetime.fromisoformat(text.strip()).timestamp()
    except ValueError:
        return None


def parse_sacct(stdout: str) -> list[SacctRow]:
    """Every line of ``sacct -n -P -o JobID,State,ExitCode[,Submit,Start,End]``, the job's first.

    A job killed by a signal shows it on its steps (``1234.0|CANCELLED|0:9``) while the job
    line may say ``FAILED|137:0``, so all lines are kept.
    """
    rows: list[SacctRow] = []
    for line in stdout.splitlines():
        fields = line.strip().split("|")
        if len(fields) < 3 or not fields[1].split():
            continue
        step = fields[0].partition(".")[2]
        code, sig = _exit_pair(fields[2])
        times = [_slurm_time(f) for f in fields[3:6]] + [None, None, None]
        rows.append(SacctRow(step=step, state=fields[1].split()[0].rstrip("+").upper(), code=code, signal=sig,
                             submit=times[0], start=times[1], end=times[2]))  # fmt: skip
    rows.sort(key=lambda r: r.step != "")  # the job line first
    return rows


def parse_scontrol_job(stdout: str) -> dict[str, str]:
    """``Key=Value`` fields of ``scontrol -o show job ID`` (the first of each key wins).

    Values with blanks (``Command=``, ``WorkDir=`` with a space) come after every field
    dftune reads, so splitting on blanks is safe for those.
    """
    out: dict[str, str] = {}
    for key, value in re.findall(r"(?:^|\s)([A-Za-z][A-Za-z0-9_:/]*)=(\S*)", stdout):
        out.setdefault(key, value)
    return out


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


def slurm_never_starts(reason: str) -> str:
    """Why a job pending with squeue reason ``reason`` can never start, or "" if it may yet."""
    if reason in SLURM_NEVER_REASONS:
        return SLURM_NEVER_REASONS[reason]
    if _SLURM_NEVER_LIMIT.match(reason):
        return "it exceeds a per-job limit of its QOS or association"
    return ""


def _signal_name(sig: int) -> str:
    try:
        return signal.Signals(sig).name
    except ValueError:
        return f"signal {sig}"


def srun_signal(stderr: str, status: int) -> int:
    """The signal behind an srun exit status ``128+S`` when srun said so (``task 0: Killed``), else 0.

    srun exits with 128+S when a task died of signal S, the same status as a program that
    called ``exit(128+S)``; its own message (``strsignal(S)``) tells the two apart.
    """
    if not 128 < status < 128 + 65:
        return 0
    sig = status - 128
    try:
        name = signal.strsignal(sig)
    except ValueError:
        return 0
    said = {m.group(1) for m in _SRUN_TASKS.finditer(stderr)}
    return sig if name and any(s == name or s.startswith(name + " ") for s in said) else 0


def program_stderr(text: str) -> str:
    """``text`` without the launcher's own lines (srun, slurmstepd, flux-shell): the program's stderr."""
    return "".join(ln for ln in text.splitlines(keepends=True) if not _LAUNCHER_LINE.match(ln))


# ------------------------------------------------------------------------------ outcomes


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


def slurm_outcome(job_id: str, state: str, code: int | None, sig: int, steps: list[SacctRow], stderr: str,
                  source: str) -> tuple[Status, int | None, str]:  # fmt: skip
    """(status, exit code, reason) of a finished Slurm job.

    ``state``/``code``/``sig`` are the job's (``N:S``); ``steps`` its sacct step lines (none
    from scontrol).  A signal on a program step (``.0``) wins, then one on the batch step,
    then the job's own, then srun's ``128+S`` with srun's word for it: exit code ``-S``.
    """
    program = [r for r in steps if r.step.isdigit()]
    batch = [r for r in steps if r.step == "batch"]
    killed = next((r.signal for r in (*program, *batch) if r.signal), 0) or sig
    if not killed and code is not None:
        killed = srun_signal(stderr, code)
    failed_step = next((r.code for r in program if r.code), None)
    code_now = failed_step if failed_step is not None else code
    exit_code: int | None = -killed if killed else (code_now or None)
    where = f"Slurm job {job_id}, state from {source}"
    if state == "COMPLETED" and not killed and not code:
        return "ok", 0, ""
    how = (f"killed by signal {killed} ({_signal_name(killed)})" if killed
           else f"exit code {exit_code}" if exit_code is not None else "no exit status")  # fmt: skip
    if state == "TIMEOUT":
        return "timeout", exit_code, f"Slurm time limit reached, {how} ({where})"
    if state == "CANCELLED":
        return "failed", exit_code, f"job {job_id} was cancelled outside dftune, {how} ({where})"
    if state == "FAILED" or state == "COMPLETED":
        return "failed", exit_code, f"{how} ({where})"
    return "failed", exit_code, f"Slurm job {job_id} ended in state {state}, {how} ({where})"


# ------------------------------------------------------------------------------ running


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
        return f"{', '.join(missing)} not found on PATH (is this a {'Slurm' if 'sbatch' in tools else 'Flux'} machine?)"
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
    def cancel(self) -> str:
        """Ask the scheduler to kill the job; returns a complaint, or "" when it accepted."""


class _SlurmJob(_Job):
    scheduler = "Slurm"
    queue_tool = "squeue"
    cancel_tool = "scancel"
    final_tools = "sacct or scontrol"

    def __init__(self, job_id: str, tools: dict[str, str], env: dict[str, str], err: Path) -> None:
        super().__init__(job_id, tools, env, err)
        self.sacct_off = ""  # why sacct cannot answer (accounting disabled), once we know

    def poll(self) -> QueueState | None:
        proc = _cli([self.tools["squeue"], "-h", "-j", self.job_id, "-o", "%T|%r"], self.env)
        if proc.exit_code != 0:
            if "invalid job id" in proc.stderr.lower():  # purged from slurmctld after MinJobAge
                return None
            raise _QueryError(_complaint(proc))
        line = _last_line(proc.stdout)
        state, _, reason = line.partition("|")
        state = state.strip().upper()
        if not state or state in SLURM_TERMINAL:
            return None
        return QueueState(state=state, reason=reason.strip(), waiting=state in SLURM_WAITING)

    def never_starts(self, q: QueueState) -> str:
        why = slurm_never_starts(q.reason)
        return f"squeue reason {q.reason}: {why}" if why else ""

    def final(self) -> JobEnd | None:
        why = self.sacct_off
        if not why:
            try:
                end = self._from_sacct()
            except _QueryError as exc:  # slurmdbd down, say: slurmctld may still know the job
                why = f"sacct failed: {exc}"
            else:
                if end is not None:
                    return end
                why = self.sacct_off or "no sacct record"
        return self._from_scontrol(why)

    def _from_sacct(self) -> JobEnd | None:
        proc = _cli([self.tools["sacct"], "-n", "-P", "-j", self.job_id, "-o", _SACCT_FIELDS], self.env)
        if proc.exit_code != 0:
            message = _last_line(proc.stderr) or _last_line(proc.stdout)
            if "accounting storage is disabled" in message.lower():
                self.sacct_off = "accounting disabled"
                return None
            raise _QueryError(_complaint(proc))
        rows = parse_sacct(proc.stdout)
        if not rows or rows[0].step or rows[0].state not in SLURM_TERMINAL:
            return None  # accounting has not caught up yet
        job = rows[0]
        status, code, reason = slurm_outcome(self.job_id, job.state, job.code, job.signal, rows[1:],
                                             _read_tail(self.err, 4 * TAIL_BYTES), "sacct")  # fmt: skip
        return JobEnd(status, code, reason, "sacct", job.submit, job.start, job.end)

    def _from_scontrol(self, why: str) -> JobEnd | None:
        """The end as slurmctld still knows it (until MinJobAge); ``why`` sacct could not tell."""
        proc = _cli([self.tools["scontrol"], "-o", "show", "job", self.job_id], self.env)
        if proc.exit_code != 0:
            if "invalid job id" in proc.stderr.lower():
                raise _QueryError(f"scontrol no longer knows job {self.job_id} (purged after MinJobAge) "
                                  f"and sacct cannot tell ({why})")  # fmt: skip
            raise _QueryError(_complaint(proc))
        info = parse_scontrol_job(proc.stdout)
        state = info.get("JobState", "").upper()
        if state not in SLURM_TERMINAL:
            return None
        code, sig = _exit_pair(info.get("ExitCode", ""))
        source = f"scontrol ({why})"
        status, exit_code, reason = slurm_outcome(self.job_id, state, code, sig, [],
                                                  _read_tail(self.err, 4 * TAIL_BYTES), source)  # fmt: skip
        return JobEnd(status, exit_code, reason, source, _slurm_time(info.get("SubmitTime", "")),
                      _slurm_time(info.get("StartTime", "")), _slurm_time(info.get("EndTime", "")))  # fmt: skip

    def cancel(self) -> str:
        try:
            proc = _cli([self.tools["scancel"], self.job_id], self.env)
        except _QueryError as exc:
            return str(exc)
        return "" if proc.exit_code == 0 else _complaint(proc)


#: ``flux jobs`` fields read at the end; the exception note (free text) comes last.
_FLUX_FINAL = "{result}|{returncode}|{runtime}|{t_submit}|{t_run}|{exception.type}|{exception.note}"


def _float(text: str) -> float | None:
    try:
        value = float(text)
    except ValueError:
        return None
    return value if value > 0 else None


class _FluxJob(_Job):
    scheduler = "Flux"
    queue_tool = "flux jobs"
    cancel_tool = "flux cancel"
    final_tools = "flux jobs"

    def poll(self) -> QueueState | None:
        proc = _cli([self.tools["flux"], "jobs", "-n", "-o", "{state}|{urgency}", self.job_id], self.env)
        if proc.exit_code != 0:
            raise _QueryError(_complaint(proc))
        state, _, urgency = proc.stdout.strip().partition("|")
        state = state.strip().upper()
        if not state:
            raise _QueryError(f"flux jobs printed no state for {self.job_id}")
        if state not in FLUX_ACTIVE:
            return None
        return QueueState(state=state, reason=f"urgency {urgency.strip()}" if urgency.strip() else "",
                          waiting=state in FLUX_WAITING)  # fmt: skip

    def never_starts(self, q: QueueState) -> str:
        # urgency 0 is Flux's hold: the scheduler never considers the job until someone raises it
        return "it is held (urgency 0; flux job urgency ID default)" if q.reason == "urgency 0" else ""

    def final(self) -> JobEnd | None:
        proc = _cli([self.tools["flux"], "jobs", "-n", "-o", _FLUX_FINAL, self.job_id], self.env)
        if proc.exit_code != 0:
            raise _QueryError(_complaint(proc))
        fields = proc.stdout.strip().split("|", 6)
        parsed = parse_flux_result(" ".join(fields[:2]))
        if parsed is None:
            return None
        fields += [""] * (7 - len(fields))
        result, code = parsed
        runtime, submit, started = _float(fields[2]), _float(fields[3]), _float(fields[4])
        exc = " ".join(f for f in fields[5:7] if f.strip()).strip()
        where = f"Flux job {self.job_id}, state from flux jobs"
        exception = f", exception: {exc}" if exc else ""

        def end(status: Status, exit_code: int | None, reason: str) -> JobEnd:
            return JobEnd(status, exit_code, reason, "flux jobs", submit, started, None, runtime)

        if result == "COMPLETED" and code in (0, None):
            return end("ok", 0, "")
        # Flux's job shell exits 128+S when a task died of signal S
        how = (f"exit code {code} (128+{code - 128}: a task killed by {_signal_name(code - 128)})"
               if code is not None and 128 < code < 128 + 65 else
               f"exit code {code}" if code is not None else "no exit status")  # fmt: skip
        if result == "TIMEOUT":
            return end("timeout", code, f"Flux time limit reached, {how} ({where}{exception})")
        if result == "CANCELED":
            return end(
                "failed", code, f"job {self.job_id} was canceled outside dftune, {how} ({where}{exception})"
            )
        if result == "FAILED":
            return end("failed", code, f"{how} ({where}{exception})")
        return end(
            "failed", code, f"Flux job {self.job_id} ended with result {result}, {how} ({where}{exception})"
        )

    def cancel(self) -> str:
        try:
            proc = _cli([self.tools["flux"], "cancel", self.job_id], self.env)
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


def _follow(
    job: _Job, *, watch: _Watch, timeout_s: float, poll_s: float, out: Path, err: Path, clock: Path | None
) -> ProcessResult:
    """Poll ``job`` until it leaves the queue (or cancel it at ``timeout_s``), then read its result."""

    def result(status: Status, code: int | None, reason: str, end: JobEnd | None = None,
               source: str = "") -> ProcessResult:  # fmt: skip
        if watch.gone is None:  # stopped following it (timeout, lost): it ran until now at most
            watch.gone = time.perf_counter()
        wall, wall_source, queue = _wall(watch, end, clock)
        if status != "ok" and watch.first_running is None and end is None:
            wall, wall_source = 0.0, "none: the job never started"
        return ProcessResult(status=status, exit_code=code, wall_s=wall, stdout_tail=_tail(out),
                             stderr_tail=program_stderr(_read_tail(err, 2 * TAIL_BYTES))[-TAIL_BYTES:],
                             reason=reason, wall_source=wall_source, state_source=source or (end.source if end else ""),
                             queue_s=queue)  # fmt: skip

    deadline = watch.submitted + timeout_s
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
        if now >= deadline:
            problem = _cancel_and_wait(job, poll_s)
            if watch.first_running is None:
                said = f"{q.state.lower()}" + (f", reason {q.reason}" if q.reason else "")
                reason = f"job {job.job_id} never started within {timeout_s:g} s ({said}): {job.cancel_tool} {job.job_id}"
            else:
                reason = f"killed after {timeout_s:g} s: {job.cancel_tool} {job.job_id}"
            reason += f" ({problem})" if problem else ""
            return result("timeout", None, reason)
        time.sleep(min(poll_s, max(0.0, deadline - now)))

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
    return result("failed", None,
                  f"{job.scheduler} job {job.job_id} left the queue but {job.final_tools} gave no final state{why}")  # fmt: skip


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
    ``log_dir/<label>.out`` and ``.err`` and its clock to ``.time``, which must be
    visible from the compute nodes.
    """
    _check_argv(argv)
    tools = _find(("sbatch", "squeue", "sacct", "scontrol", "scancel"), env)
    if isinstance(tools, str):
        return _failed(f"cannot submit to Slurm: {tools}")
    cli_env, job_argv = _split_preload(env, argv)
    log_dir.mkdir(parents=True, exist_ok=True)
    out, err = _paths(log_dir, label)
    clock = _clock_path(log_dir, label)
    script = Path(os.path.abspath(log_dir)) / f"{label}.sbatch"
    try:
        text = slurm_script(job_argv, cwd=cwd, log_dir=log_dir, label=label, launcher=launcher)
    except ValueError as exc:
        return _failed(f"cannot build the Slurm job: {exc}")
    script.write_text(text, encoding="utf-8")
    cmd = [tools["sbatch"], "--parsable", *launcher.extra_args, str(script)]
    return _submit_and_follow(
        "sbatch", cmd, parse_sbatch_id, lambda job_id: _SlurmJob(job_id, tools, cli_env, err),
        cli_env=cli_env, cwd=cwd, timeout_s=timeout_s, poll_s=launcher.poll_s, out=out, err=err, clock=clock,
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
        "flux submit", [tools["flux"], *cmd[1:]], parse_flux_id, lambda job_id: _FluxJob(job_id, tools, cli_env, err),
        cli_env=cli_env, cwd=cwd, timeout_s=timeout_s, poll_s=launcher.poll_s, out=out, err=err, clock=None,
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
    clock: Path | None,
) -> ProcessResult:
    """Submit with ``cmd``, read the job id, then follow the job to its end (both schedulers)."""
    for stale in (out, err, clock):
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
    return _follow(
        make_job(job_id), watch=watch, timeout_s=timeout_s, poll_s=poll_s, out=out, err=err, clock=clock
    )


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
