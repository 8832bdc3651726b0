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
* ``timeout``: the job ran our own ``timeout_s`` (counted from the first poll that saw it
  running: the queue is not the program's time), waited ``launcher.queue_timeout_s`` without
  starting (the job is then cancelled with ``scancel`` / ``flux cancel`` and we wait for it to
  leave the queue), or the scheduler's time limit hit.

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
