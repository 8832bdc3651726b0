"""Measurement slots shared by the workloads of a campaign, handed out by fair share of time.

On one machine two measurements at once disturb each other, so local jobs (a baseline
replicate, an experiment's arm, the analysis of its trace) take a slot, and there is one slot
unless the campaign says otherwise. Which waiting job goes next: the one whose lane (workload)
has held slots for the least time so far, then the one that asked first. A workload whose
replicates are slow therefore gets its share of the night, not all of it, and a fast workload
is diagnosed and tuned while the slow one is still measuring its baseline.

A lane runs its jobs one after the other, so between two of them nobody of that lane waits; a
lane that just released its slot and has used the least time keeps it reserved for a moment
(:data:`GRACE_S`) so its next job is not queued behind a long job of a lane that has had more.
"""

from __future__ import annotations

import itertools
import threading
import time
from collections.abc import Iterator
from contextlib import contextmanager
from dataclasses import dataclass, field

#: How long a released slot stays reserved for its lane when that lane has used the least time.
GRACE_S = 0.3


@dataclass(order=True)
class _Waiter:
    used: float
    seq: int
    lane: str = field(compare=False)


class SlotPool:
    """``slots`` measurement slots; :meth:`slot` blocks until this lane's turn comes."""

    def __init__(self, slots: int = 1) -> None:
        if slots < 1:
            raise ValueError("a pool needs at least one slot")
        self.slots = slots
        self._busy = 0
        self._used: dict[str, float] = {}
        self._waiting: list[_Waiter] = []
        self._seq = itertools.count()
        self._cond = threading.Condition()
        self._reserved: tuple[str, float] | None = None

    def used(self, lane: str) -> float:
        """Seconds this lane has held a slot."""
        with self._cond:
            return self._used.get(lane, 0.0)

    def _my_turn(self, me: _Waiter) -> bool:
        free = self.slots - self._busy
        if free <= 0:
            return False
        if self._reserved is not None:
            lane, until = self._reserved
            if time.monotonic() >= until or lane == me.lane:
                self._reserved = None
            else:
                return False
        order = sorted(_Waiter(self._used.get(w.lane, 0.0), w.seq, w.lane) for w in self._waiting)
        return any(w.seq == me.seq for w in order[:free])

    @contextmanager
    def slot(self, lane: str) -> Iterator[float]:
        """Hold one slot for the body; yields the seconds spent waiting for it."""
        asked = time.monotonic()
        with self._cond:
            me = _Waiter(0.0, next(self._seq), lane)
            self._waiting.append(me)
            try:
                while not self._my_turn(me):
                    self._cond.wait(GRACE_S)
            finally:
                self._waiting.remove(me)
            self._busy += 1
        start = time.monotonic()
        try:
            yield start - asked
        finally:
            with self._cond:
                self._busy -= 1
                self._used[lane] = self._used.get(lane, 0.0) + time.monotonic() - start
                others = [self._used.get(w.lane, 0.0) for w in self._waiting if w.lane != lane]
                if others and self._used[lane] <= min(others):
                    self._reserved = (lane, time.monotonic() + GRACE_S)
                self._cond.notify_all()
