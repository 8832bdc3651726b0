"""Partial baselines: each replicate of a workload's baseline is its own job (a unit).

dftracer-io-optimization skill: when a multi-workload or multi-replicate baseline is partly done, start on
what is ready, do not block on the slowest or broken unit, feed pending units in as they
finish without re-running what is done, and state the coverage everywhere. So:

* a unit is one replicate, run by :func:`~dftune.tools.runner.bench.bench` with
  ``replicates=1`` in the run's ``baseline/`` folder (trace ``traces/raw/r<i>``, logs
  ``logs/r<i>.*``); its record is kept in ``baseline/units/r<i>.json`` as soon as it ends, so a
  resumed run never runs it again;
* local units take a slot of the campaign's :class:`~dftune.tools.runner.pool.SlotPool` (one
  at a time unless the spec's ``launcher.parallel`` allows more of its own at once); Slurm and
  Flux units are submitted together and run as the cluster schedules them;
* the baseline is *ready* as soon as ``min_ok`` units succeeded (or it can no longer get
  there); the rest keep running and join later (:meth:`BaselineUnits.result`);
* nothing starts that its measured cost says cannot finish before the deadline; a unit the
  deadline cut short is not recorded (it stays pending and runs on resume).
"""

from __future__ import annotations

import threading
import time
from collections.abc import Callable
from concurrent.futures import ThreadPoolExecutor
from contextlib import nullcontext
from pathlib import Path

from dftune.core import strictjson
from dftune.core.errors import DftuneError
from dftune.core.model import StrictModel
from dftune.core.supervise import owned_by
from dftune.tools.runner.bench import BenchError, BenchResult, bench
from dftune.tools.runner.deadline import Deadline
from dftune.tools.runner.measurer import Measurer
from dftune.tools.runner.pool import SlotPool
from dftune.tools.runner.spec import WorkloadSpec

UNITS_DIR = "units"
#: Seconds between checks while waiting (a deadline or a stop is noticed this fast).
POLL_S = 0.5


class BaselineNotReady(DftuneError):
    """The deadline came before enough baseline units finished; the run can be resumed."""


class UnitRecord(StrictModel):
    """One finished unit: its one-replicate bench record and how long the job took."""

    index: int
    elapsed_s: float
    bench: BenchResult


class BaselineUnits:
    """The baseline units of one workload, run in a background thread."""

    def __init__(
        self,
        spec: WorkloadSpec,
        workdir: Path,
        replicates: int,
        *,
        traced: bool,
        lane: str,
        pool: SlotPool | None = None,
        deadline: Deadline | None = None,
        min_ok: int = 3,
        gate: Callable[[], bool] | None = None,
        owner: str | None = None,
        measurer: Measurer | None = None,
    ) -> None:
        """``gate``: units start once it says yes (the run's folder exists: its run creates it);
        ``owner``: whose programs the units are (its run's process owner; ``lane`` when None);
        ``measurer``: what starts each unit's program (None: the real one, as in ``bench``)."""
        self.spec, self.workdir, self.n, self.traced = spec, workdir, replicates, traced
        self.measurer = measurer
        self.gate = gate
        self.lane, self.pool, self.deadline = lane, pool, deadline
        self.owner = owner or lane
        self.min_ok = min(min_ok, replicates)
        self._records: dict[int, UnitRecord] = {}
        self._running: set[int] = set()
        self._fatal: str | None = None
        self._refused: str | None = None
        self._finished = False
        self._stop = threading.Event()
        self._cond = threading.Condition()
        self._thread: threading.Thread | None = None

    # ----- what is known

    @property
    def store(self) -> Path:
        return self.workdir / UNITS_DIR

    def _load(self) -> None:
        if not self.store.is_dir():
            return
        for f in sorted(self.store.glob("r*.json")):
            try:
                rec = UnitRecord.model_validate(strictjson.loads(f.read_bytes()))
            except ValueError:
                continue  # a unit whose record is unreadable runs again
            if rec.index < self.n:
                self._records[rec.index] = rec

    def counts(self) -> dict[str, list[int]]:
        """Unit indexes by state: ok, failed, running, pending (not started yet, or cut by the deadline)."""
        with self._cond:
            ok = sorted(i for i, r in self._records.items() if r.bench.ok)
            failed = sorted(i for i, r in self._records.items() if not r.bench.ok)
            running = sorted(self._running)
            pending = [i for i in range(self.n) if i not in self._records and i not in self._running]
        return {"ok": ok, "failed": failed, "running": running, "pending": pending}

    def _ready(self) -> bool:
        ok = sum(r.bench.ok > 0 for r in self._records.values())
        failed = len(self._records) - ok
        return ok >= self.min_ok or failed > self.n - self.min_ok or (self._finished and not self._refused)

    def result(self) -> BenchResult | None:
        """Every finished unit merged into one bench record (None before the first one ends)."""
        with self._cond:
            recs = [self._records[i] for i in sorted(self._records)]
            fatal = self._fatal
        if not recs:
            return None
        reps = [r.bench.replicates[0] for r in recs]
        notes = list(dict.fromkeys(n for r in recs for n in r.bench.notes))
        notes.append(
            f"baseline measured as {self.n} independent units (one replicate each); {len(recs)} finished"
        )
        merged = recs[0].bench.regathered(reps, notes, fatal)
        return merged.model_copy(update={"started": min(r.bench.started for r in recs)})

    def elapsed_s(self) -> float:
        """Slot time the finished units took (the baseline arm's measured cost)."""
        with self._cond:
            return sum(r.elapsed_s for r in self._records.values())

    def estimate_s(self) -> float | None:
        """The next unit's cost from the ones already measured (None before the first one ends).

        The first unit's setup and warm-up are not counted: later units never repeat them."""
        with self._cond:
            times = [max(0.0, r.elapsed_s - r.bench.prepare_s) for r in self._records.values()]
        return 1.1 * max(times) + 0.5 if times else None

    # ----- running

    def start(self) -> None:
        """Run the missing units in a background thread (the finished ones are read back, never re-run)."""
        self._thread = threading.Thread(target=self._work, name=f"units-{self.lane}", daemon=True)
        self._thread.start()

    def stop(self) -> None:
        """Start no further unit (the one running finishes)."""
        self._stop.set()
        with self._cond:
            self._cond.notify_all()

    def _local(self) -> bool:
        return self.spec.launcher.kind in ("local", "mpirun")

    def _work(self) -> None:
        try:
            while self.gate is not None and not self.gate():
                if self._stop.wait(0.05):
                    return
            self._load()
            todo = [i for i in range(self.n) if i not in self._records]
            first = bool(self.spec.setup)
            width = self.spec.launcher.parallel if self._local() else max(1, len(todo))
            while todo and not self._stop.is_set():
                batch = todo[:1] if first else todo[:width]
                holder = (
                    self.pool.slot(self.lane) if (self.pool is not None and self._local()) else nullcontext()
                )
                with holder:
                    if self._stop.is_set():
                        break
                    why = (
                        self.deadline.refuse(
                            f"baseline unit r{batch[0]} of {self.spec.name}", self.estimate_s()
                        )
                        if self.deadline
                        else None
                    )
                    if why:
                        self._refused = why
                        break
                    self._run_batch(batch, with_setup=first)
                first = False
                todo = todo[len(batch) :]
        except BenchError as exc:
            self._fatal = str(exc)
        except Exception as exc:  # a unit thread must never die silently
            self._fatal = f"baseline units stopped: {type(exc).__name__}: {exc}"
        finally:
            with self._cond:
                self._finished = True
                self._cond.notify_all()

    def _run_batch(self, batch: list[int], *, with_setup: bool) -> None:
        if len(batch) == 1:
            self._run_one(batch[0], with_setup=with_setup)
            return
        with ThreadPoolExecutor(max_workers=len(batch), thread_name_prefix=f"unit-{self.lane}") as ex:
            for f in [ex.submit(self._run_one, i, with_setup=False) for i in batch]:
                f.result()

    def _run_one(self, i: int, *, with_setup: bool) -> None:
        spec = self.spec if with_setup else self.spec.model_copy(update={"setup": None})
        capped = False
        if self.deadline is not None:
            unbound = spec
            spec = self.deadline.capped(spec)
            capped = spec != unbound
        with self._cond:
            self._running.add(i)
        start = time.monotonic()
        try:
            with owned_by(self.owner):  # a campaign member's unit: its run sweeps and kills it, no other
                res = bench(
                    spec,
                    replicates=1,
                    first_index=i,
                    trace=self.traced,
                    workdir=self.workdir,
                    measurer=self.measurer,
                )
        finally:
            with self._cond:
                self._running.discard(i)
        rep = res.replicates[0]
        if capped and rep.status == "timeout":
            return  # cut by the deadline, not by the workload: it stays pending and runs on resume
        rec = UnitRecord(index=i, elapsed_s=round(time.monotonic() - start, 3), bench=res)
        self.store.mkdir(parents=True, exist_ok=True)
        strictjson.write_file(self.store / f"r{i}.json", rec.model_dump(mode="json"), indent=1)
        with self._cond:
            self._records[i] = rec
            self._cond.notify_all()

    # ----- waiting

    def wait_ready(self) -> BenchResult:
        """Block until the baseline is ready; :class:`BaselineNotReady` when the deadline comes first."""
        with self._cond:
            while not self._ready():
                if self._finished or self._stop.is_set() or (self.deadline and self.deadline.left() <= 0):
                    break
                self._cond.wait(POLL_S)
            ready = self._ready()
        result = self.result()
        if self._fatal and (result is None or result.ok == 0):
            raise BenchError(self._fatal)
        if not ready:
            c = self.counts()
            why = self._refused or "the deadline came first"
            raise BaselineNotReady(
                f"baseline of {self.spec.name} not ready: {len(c['ok'])} of {self.n} replicates done "
                f"({self.min_ok} needed), {len(c['pending']) + len(c['running'])} pending ({why}); "
                "resuming measures only the pending ones"
            )
        assert result is not None
        return result

    def wait_all(self, until: float | None = None) -> None:
        """Let the running and queued units finish (until the epoch time ``until``, when given)."""
        with self._cond:
            while not self._finished and not self._stop.is_set():
                if until is not None and time.time() >= until:
                    break
                self._cond.wait(POLL_S)
