"""A run's wall-clock budget: what the nodes ask before they start a measurement.

``Context.budget`` is None for a run without ``--time-budget``/``--deadline`` outside a
campaign, and nothing changes then. Otherwise every measurement goes through
:meth:`Budget.job`: it waits for a measurement slot (a campaign's workloads share the
machine), refuses to start when the arm's measured cost does not fit before the deadline
(:class:`OutOfTime`), caps the replicates' timeout at the deadline, and records how long the
arm took in ``logs/timings.jsonl`` so the next estimate (also after a resume) comes from
measured times.
"""

from __future__ import annotations

import time
from collections.abc import Iterator
from contextlib import contextmanager, nullcontext
from dataclasses import dataclass, field
from pathlib import Path

from dftune.core import strictjson
from dftune.tools.runner.bench import BenchError
from dftune.tools.runner.deadline import Deadline
from dftune.tools.runner.pool import SlotPool
from dftune.tools.runner.spec import WorkloadSpec
from dftune.tools.runner.units import BaselineUnits

TIMINGS = "timings.jsonl"
#: An experiment is estimated at its most expensive measured predecessor times this, plus a second.
SAFETY = 1.2
#: An experiment's sitting measures the incumbent and the candidate: twice a baseline arm.
ARMS_PER_SITTING = 2


class OutOfTime(BenchError):
    """The measurement was not started: its measured cost does not fit before the deadline."""


@dataclass
class Budget:
    """The deadline, the measurement slots and (in a campaign) the baseline units of one run."""

    deadline: Deadline | None = None
    pool: SlotPool | None = None
    lane: str = ""
    units: BaselineUnits | None = None
    _arms: dict[str, list[float]] = field(default_factory=dict)

    def _timings(self, run_dir: Path) -> list[float]:
        key = str(run_dir)
        if key not in self._arms:
            found: list[float] = []
            try:
                lines = (run_dir / "logs" / TIMINGS).read_text(encoding="utf-8").splitlines()
            except OSError:
                lines = []
            for line in lines:
                try:
                    rec = strictjson.loads(line)
                    # a baseline measures one arm; an experiment's sitting runs the incumbent beside the
                    # candidate (A B A B), so it costs two arms
                    seconds = float(rec["seconds"]) * (
                        ARMS_PER_SITTING if rec.get("kind") == "baseline" else 1
                    )
                except (ValueError, KeyError, TypeError):
                    continue
                found.append(seconds)
            self._arms[key] = found
        return self._arms[key]

    def record(self, run_dir: Path, label: str, seconds: float, *, kind: str = "sitting") -> None:
        """A measurement's cost (``kind``: a ``baseline`` arm or an experiment's ``sitting``), kept for
        the next estimates (and for a resumed run)."""
        self._timings(run_dir).append(seconds * (ARMS_PER_SITTING if kind == "baseline" else 1))
        logs = run_dir / "logs"
        logs.mkdir(parents=True, exist_ok=True)
        line = {"label": label, "kind": kind, "seconds": round(seconds, 3), "at": time.time()}
        with open(logs / TIMINGS, "a", encoding="utf-8") as fh:
            fh.write(strictjson.dumps_checked(line, logs / TIMINGS) + "\n")

    def arm_estimate(self, run_dir: Path) -> float | None:
        """What the next experiment will cost, from what this run measured (None before the first arm)."""
        times = self._timings(run_dir)
        return SAFETY * max(times) + 1.0 if times else None

    def refuse_next(self, run_dir: Path, what: str) -> str | None:
        """Why ``what`` (one more arm) must not start now, or None (always None without a deadline)."""
        if self.deadline is None:
            return None
        return self.deadline.refuse(what, self.arm_estimate(run_dir))

    @contextmanager
    def job(
        self, run_dir: Path, label: str, spec: WorkloadSpec, *, arm: bool = True, kind: str = "sitting"
    ) -> Iterator[WorkloadSpec]:
        """Hold a measurement slot for the body and yield the spec to run it with (timeout capped).

        ``arm``: the body measures an arm; it is refused when it cannot finish in time
        (:class:`OutOfTime`) and its duration is recorded as ``kind``
        (see :meth:`record`). Otherwise (an analysis) it only waits
        for the slot."""
        local = spec.launcher.kind in ("local", "mpirun")
        holder = self.pool.slot(self.lane) if (self.pool is not None and local) else nullcontext()
        with holder:
            if arm:
                why = self.refuse_next(run_dir, label)
                if why:
                    raise OutOfTime(why)
            capped = spec
            if self.deadline is not None:
                capped = self.deadline.capped(spec)
            start = time.monotonic()
            yield capped
            if arm:
                self.record(run_dir, label, time.monotonic() - start, kind=kind)
