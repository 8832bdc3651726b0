"""A wall-clock deadline: parse ``--time-budget 8h`` / ``--deadline 06:30``, and say what still fits.

The rule for an overnight run: start nothing whose measured cost does not fit in the time
left before the deadline minus a reserve (for reverting a change and writing the reports).
Costs come from measurements made in this run (replicate and arm times), never guessed; a job
whose cost is not known yet (the first baseline replicate) only needs the reserve to be free,
and its timeout is capped to the time left so it cannot run past the deadline.
"""

from __future__ import annotations

import re
import time
from collections.abc import Callable
from dataclasses import dataclass, field
from datetime import datetime, timedelta
from typing import TYPE_CHECKING

from dftune.core.errors import DftuneError

if TYPE_CHECKING:
    from dftune.tools.runner.spec import WorkloadSpec

_UNITS = {"s": 1, "m": 60, "h": 3600, "d": 86400}


class BudgetError(DftuneError):
    """A time budget or deadline that cannot be understood (one line, with an example)."""


def parse_duration(text: str) -> float:
    """``90s``, ``4m``, ``8h``, ``1h30m``, ``2d`` (or bare seconds) in seconds."""
    t = text.strip().lower().replace(" ", "")
    if re.fullmatch(r"\d+(\.\d+)?", t):
        return float(t)
    parts = re.findall(r"(\d+(?:\.\d+)?)([smhd])", t)
    if not parts or "".join(n + u for n, u in parts) != t:
        raise BudgetError(f"--time-budget {text!r}: expected a duration such as 90s, 4m, 8h or 1h30m")
    seconds = sum(float(n) * _UNITS[u] for n, u in parts)
    if seconds <= 0:
        raise BudgetError(f"--time-budget {text!r}: the budget must be longer than 0 s")
    return seconds


def parse_deadline(text: str, now: datetime | None = None) -> float:
    """``06:30`` (the next time the local clock shows it) or an ISO date-time, as epoch seconds."""
    now = now or datetime.now().astimezone()
    m = re.fullmatch(r"(\d{1,2}):(\d{2})(?::(\d{2}))?", text.strip())
    if m:
        h, mi, s = int(m.group(1)), int(m.group(2)), int(m.group(3) or 0)
        if h > 23 or mi > 59 or s > 59:
            raise BudgetError(f"--deadline {text!r}: not a time of day (HH:MM, 00:00 to 23:59)")
        at = now.replace(hour=h, minute=mi, second=s, microsecond=0)
        if at <= now:
            at += timedelta(days=1)
        return at.timestamp()
    try:
        at = datetime.fromisoformat(text.strip())
    except ValueError:
        raise BudgetError(f"--deadline {text!r}: expected HH:MM (e.g. 06:30) or an ISO date-time") from None
    if at.tzinfo is None:
        at = at.astimezone()
    if at <= now:
        raise BudgetError(f"--deadline {text!r} is already past")
    return at.timestamp()


def resolve(time_budget: str | None, deadline: str | None, *, now: float | None = None) -> float | None:
    """The deadline (epoch seconds) from one of the two options, or None when neither is given."""
    if time_budget and deadline:
        raise BudgetError("give --time-budget or --deadline, not both")
    if time_budget:
        return (now if now is not None else time.time()) + parse_duration(time_budget)
    if deadline:
        return parse_deadline(deadline)
    return None


def clock(epoch: float) -> str:
    """A deadline as the reader's local clock shows it: ``06:30:00`` (date added when not today)."""
    at = datetime.fromtimestamp(epoch).astimezone()
    today = datetime.now().astimezone().date()
    return at.strftime("%H:%M:%S") if at.date() == today else at.strftime("%Y-%m-%d %H:%M:%S")


@dataclass(frozen=True)
class Deadline:
    """When everything must be over, and how much of the end is kept for reverting and reports."""

    at: float
    reserve_s: float = 15.0
    #: where "now" comes from: the wall clock, or a test's own clock (a deadline test must not
    #: depend on how busy the machine is)
    now: Callable[[], float] = field(default=time.time, compare=False, repr=False)

    def left(self) -> float:
        """Seconds until the work must stop (the reserve excluded); negative once past."""
        return self.at - self.reserve_s - self.now()

    def refuse(self, what: str, need_s: float | None) -> str | None:
        """Why ``what`` (costing about ``need_s`` seconds, None: unknown yet) must not start, or None."""
        left = self.left()
        if left <= 0:
            return (
                f"not started: {what}: the deadline {clock(self.at)} is {self.reserve_s:.0f} s away or past"
            )
        if need_s is not None and need_s > left:
            return (
                f"not started: {what} needs about {need_s:.0f} s (measured) but only {left:.0f} s are left "
                f"before the deadline {clock(self.at)} (minus "
                f"{self.reserve_s:.0f} s for reverting and reports)"
            )
        return None

    def cap(self, timeout_s: float) -> float:
        """A job's timeout, never past the deadline."""
        return max(1.0, min(timeout_s, self.left()))

    def capped(self, spec: WorkloadSpec) -> WorkloadSpec:
        """``spec`` with timeouts that cannot run past the deadline.

        A Slurm or Flux job waits in the queue (``queue_timeout_s``) before its run
        (``timeout_s``); when both together could pass the deadline, they share one clock
        from submission instead, capped like a local run's timeout."""
        update: dict[str, object] = {"timeout_s": self.cap(spec.timeout_s)}
        launcher = spec.launcher
        queue = launcher.queue_timeout_s
        if launcher.kind in ("slurm", "flux") and queue is not None and queue + spec.timeout_s > self.left():
            update["launcher"] = launcher.model_copy(update={"queue_timeout_s": None})
        return spec.model_copy(update=update)
