"""Slurm: the batch script around ``srun``, the queue and accounting parsers, and the job.

The final state comes from ``sacct`` (the job, its batch step and the program's steps, whose
``N:S`` exit code carries the signal); when accounting is disabled or has no record, from
``scontrol -o show job``, which slurmctld answers until ``MinJobAge`` after the end.
"""

from __future__ import annotations

import os
import re
import shlex
import signal
from dataclasses import dataclass
from datetime import datetime
from pathlib import Path

from dftune.core.facts import launcher_facts
from dftune.core.facts.models import JobStates
from dftune.core.process import ProcessResult, Status
from dftune.tools.runner.schedulers.jobs import (
    TAIL_BYTES,
    Following,
    JobEnd,
    QueueState,
    _check_argv,
    _cli,
    _clock_path,
    _complaint,
    _failed,
    _find,
    _Job,
    _job_name,
    _last_line,
    _paths,
    _QueryError,
    _read_tail,
    _signal_name,
    _split_preload,
    _submit_and_follow,
)
from dftune.tools.runner.spec import Launcher


def _states() -> JobStates:
    return launcher_facts().scheduler["slurm"]


_SLURM_ID = re.compile(r"^(\d+)(?:;\S+)?$")


#: ``srun: error: node1: tasks 0-3: Killed``: srun's account of how the program's tasks ended.
_SRUN_TASKS = re.compile(r"^srun: error: \S+: tasks? [0-9,\[\]-]+: (.+?)\s*$", re.MULTILINE)


_SACCT_FIELDS = "JobID,State,ExitCode,Submit,Start,End"


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
        rows.append(
            SacctRow(
                step=step,
                state=fields[1].split()[0].rstrip("+").upper(),
                code=code,
                signal=sig,
                submit=times[0],
                start=times[1],
                end=times[2],
            )
        )
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


def slurm_never_starts(reason: str) -> str:
    """Why a job pending with squeue reason ``reason`` can never start, or "" if it may yet."""
    return _states().never_starts(reason)


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


def slurm_outcome(
    job_id: str, state: str, code: int | None, sig: int, steps: list[SacctRow], stderr: str, source: str
) -> tuple[Status, int | None, str]:
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
    how = (
        f"killed by signal {killed} ({_signal_name(killed)})"
        if killed
        else f"exit code {exit_code}"
        if exit_code is not None
        else "no exit status"
    )
    if state == "TIMEOUT":
        return "timeout", exit_code, f"Slurm time limit reached, {how} ({where})"
    if state == "CANCELLED":
        return "failed", exit_code, f"job {job_id} was cancelled outside dftune, {how} ({where})"
    if state == "FAILED" or state == "COMPLETED":
        return "failed", exit_code, f"{how} ({where})"
    return "failed", exit_code, f"Slurm job {job_id} ended in state {state}, {how} ({where})"


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
        if not state or _states().is_over(state):
            return None
        return QueueState(state=state, reason=reason.strip(), waiting=state in _states().waiting)

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
        if not rows or rows[0].step or not _states().is_over(rows[0].state):
            return None  # accounting has not caught up yet
        job = rows[0]
        status, code, reason = slurm_outcome(
            self.job_id,
            job.state,
            job.code,
            job.signal,
            rows[1:],
            _read_tail(self.err, 4 * TAIL_BYTES),
            "sacct",
        )
        return JobEnd(status, code, reason, "sacct", job.submit, job.start, job.end)

    def _from_scontrol(self, why: str) -> JobEnd | None:
        """The end as slurmctld still knows it (until MinJobAge); ``why`` sacct could not tell."""
        proc = _cli([self.tools["scontrol"], "-o", "show", "job", self.job_id], self.env)
        if proc.exit_code != 0:
            if "invalid job id" in proc.stderr.lower():
                raise _QueryError(
                    f"scontrol no longer knows job {self.job_id} (purged after MinJobAge) "
                    f"and sacct cannot tell ({why})"
                )
            raise _QueryError(_complaint(proc))
        info = parse_scontrol_job(proc.stdout)
        state = info.get("JobState", "").upper()
        if not _states().is_over(state):
            return None
        code, sig = _exit_pair(info.get("ExitCode", ""))
        source = f"scontrol ({why})"
        status, exit_code, reason = slurm_outcome(
            self.job_id, state, code, sig, [], _read_tail(self.err, 4 * TAIL_BYTES), source
        )
        return JobEnd(
            status,
            exit_code,
            reason,
            source,
            _slurm_time(info.get("SubmitTime", "")),
            _slurm_time(info.get("StartTime", "")),
            _slurm_time(info.get("EndTime", "")),
        )

    def cancel_argv(self) -> list[str]:
        return [self.tools["scancel"], self.job_id]


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
        "sbatch",
        cmd,
        parse_sbatch_id,
        lambda job_id: _SlurmJob(job_id, tools, cli_env, err),
        cli_env=cli_env,
        cwd=cwd,
        how=Following.of(launcher, timeout_s, out, err, clock),
    )
