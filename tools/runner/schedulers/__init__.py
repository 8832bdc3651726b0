"""Batch-scheduler launchers: run one program as a Slurm or Flux job and wait for it.

Both build the job (a batch script for ``sbatch``, an argv for ``flux submit``: argv lists,
never a shell), submit it, poll the queue every ``launcher.poll_s`` until the job leaves it,
then ask the scheduler for the final state and exit code: a
:class:`~dftune.core.process.ProcessResult` like a local run's, whose ``wall_s`` is the job's
own run time, never its queue wait. What each outcome is reported as, where the state and the
clock come from (``state_source``, ``wall_source``), and why ``LD_PRELOAD`` reaches the program
alone: docs/scale-out.md.
"""

from __future__ import annotations

from pathlib import Path

from dftune.core.process import ProcessResult
from dftune.tools.runner.schedulers.flux import (
    flux_submit_argv,
    parse_flux_id,
    parse_flux_result,
    run_flux,
)
from dftune.tools.runner.schedulers.jobs import JobEnd, QueueState, parse_job_clock, program_stderr
from dftune.tools.runner.schedulers.slurm import (
    SacctRow,
    parse_sacct,
    parse_sbatch_id,
    parse_scontrol_job,
    run_slurm,
    slurm_never_starts,
    slurm_outcome,
    slurm_script,
    srun_signal,
)
from dftune.tools.runner.spec import Launcher


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
    return runners[launcher.kind](
        argv, cwd=cwd, env=env, timeout_s=timeout_s, log_dir=log_dir, label=label, launcher=launcher
    )
