"""The measurement seam: each start of a workload's program, handed to a measurer.

``bench`` never starts a workload itself. Every start (the setup, the warm-up, each replicate)
goes to a :class:`Measurer` as an :class:`Invocation`, and ``bench`` reads the replicate from
what the measurer returns and leaves behind, exactly as it reads a real run:

- the :class:`~dftune.core.process.ProcessResult` (status, exit code, wall time, tails);
- the program's output in ``log_dir/<label>.out`` and ``.err`` (the metric and the work
  counters are read from there, or from the metric file the spec names);
- for a traced replicate, its trace files in ``trace_dir``.

The real measurer (:class:`~dftune.tools.runner.bench.ProcessMeasurer`) runs the program. A
scripted one (the graph tier's, ``tests/fakes/measurer.py``) writes what a script says each
replicate measured, so what comes after the start (metric extraction, statistics, the paired
interleaving and its extension, trace analysis, the guards) runs for real on it, and no
verdict depends on how busy the machine is. The measurer is part of the run's
:class:`~dftune.agents.context.Context`, like the reasoner.
"""

from __future__ import annotations

from dataclasses import dataclass
from pathlib import Path
from typing import Literal, Protocol

from dftune.core.process import ProcessResult
from dftune.tools.runner.spec import KnobValue, WorkloadSpec

#: why bench starts the program: the spec's setup, the page-cache warm-up, or a measured replicate
Purpose = Literal["setup", "warmup", "replicate"]


@dataclass(frozen=True)
class Invocation:
    """One start of the workload's program, with the arm it belongs to."""

    purpose: Purpose
    #: the arm's spec (relocated to the arm's source copy when the arm runs a patched source)
    spec: WorkloadSpec
    #: every knob's value in this arm
    settings: dict[str, KnobValue]
    #: the arm's own environment on top of the spec's (an L2 setting, a hint file): what ``bench``
    #: was given as ``env``; the whole environment of the program is ``process_env``
    env: dict[str, str]
    #: the arm's folder
    workdir: Path
    #: the data folder the program is given (a replicate's staged copy when the arm stages)
    data_dir: Path
    #: the replicate's number (None for the setup and the warm-up)
    index: int | None
    #: where a traced replicate's trace files go (None: untraced)
    trace_dir: Path | None
    #: what is started, where, with which environment (the tracer's variables included)
    argv: list[str]
    cwd: Path
    process_env: dict[str, str]
    #: the program's stdout and stderr go to ``log_dir/<label>.out`` and ``.err``
    log_dir: Path
    label: str
    #: where the program's sampled stacks go (tools/runner/sampling.py): the replicate runs under a
    #: sampling profiler that writes them there; None: not sampled
    samples: Path | None = None

    @property
    def source_dir(self) -> Path:
        """The source tree the program runs from (an iteration's patched copy, or the original)."""
        return self.spec.resolve(self.spec.source_dir)


class Measurer(Protocol):
    """Starts the program as ``inv`` says and returns how it ended; its stdout and stderr are in
    ``inv.log_dir`` under ``inv.label``, a traced replicate's trace in ``inv.trace_dir``."""

    def run(self, inv: Invocation) -> ProcessResult: ...
