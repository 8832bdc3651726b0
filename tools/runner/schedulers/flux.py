"""Flux: the ``flux submit`` command, the ``flux jobs`` parsers, and the job."""

from __future__ import annotations

import os
import re
import shlex
from pathlib import Path

from dftune.core.facts import launcher_facts
from dftune.core.facts.models import JobStates
from dftune.core.process import ProcessResult, Status
from dftune.tools.runner.schedulers.jobs import (
    Following,
    JobEnd,
    QueueState,
    _check_argv,
    _cli,
    _complaint,
    _failed,
    _find,
    _Job,
    _job_name,
    _paths,
    _QueryError,
    _signal_name,
    _split_preload,
    _submit_and_follow,
)
from dftune.tools.runner.spec import Launcher


def _states() -> JobStates:
    return launcher_facts().scheduler["flux"]


_FLUX_ID = re.compile(
    r"^(?:ƒ[1-9A-HJ-NP-Za-km-z]+|f[1-9A-HJ-NP-Za-km-z]+|\d+|0x[0-9a-fA-F]+|[a-z]+(?:-[a-z]+){3})$"
)


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
        "flux",
        "submit",
        f"--job-name={_job_name(label)}",
        f"--nodes={launcher.nodes}",
        f"--ntasks={launcher.ranks}",
        f"--time-limit={launcher.time_limit_min}m",
        f"--output={_flux_filename(out)}",
        f"--error={_flux_filename(err)}",
        f"--cwd={os.path.abspath(cwd)}",
    ]
    if launcher.partition:
        cmd.append(f"--queue={launcher.partition}")
    return [*cmd, *launcher.extra_args, *argv]


def parse_flux_id(stdout: str) -> str | None:
    """The job id printed by ``flux submit`` (f58 such as ``ƒ2Vs3mC``, decimal, hex or words)."""
    lines = [ln.strip() for ln in stdout.splitlines() if ln.strip()]
    return lines[-1] if lines and _FLUX_ID.match(lines[-1]) else None


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
        if _states().is_over(state):
            return None
        return QueueState(
            state=state,
            reason=f"urgency {urgency.strip()}" if urgency.strip() else "",
            waiting=state in _states().waiting,
        )

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
        how = (
            f"exit code {code} (128+{code - 128}: a task killed by {_signal_name(code - 128)})"
            if code is not None and 128 < code < 128 + 65
            else f"exit code {code}"
            if code is not None
            else "no exit status"
        )
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

    def cancel_argv(self) -> list[str]:
        return [self.tools["flux"], "cancel", self.job_id]


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
        "flux submit",
        [tools["flux"], *cmd[1:]],
        parse_flux_id,
        lambda job_id: _FluxJob(job_id, tools, cli_env, err),
        cli_env=cli_env,
        cwd=cwd,
        how=Following.of(launcher, timeout_s, out, err),
    )
