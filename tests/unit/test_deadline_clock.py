"""A deadline reads its own clock: what it refuses and how it caps a job follow that clock only,
so deadline decisions are tested without waiting and without depending on the machine's load."""

from __future__ import annotations

from dftune.tools.runner.deadline import Deadline


class FakeClock:
    def __init__(self, t: float) -> None:
        self.t = t

    def __call__(self) -> float:
        return self.t


def test_left_follows_the_injected_clock() -> None:
    clock = FakeClock(1000.0)
    d = Deadline(at=1100.0, reserve_s=10.0, now=clock)
    assert d.left() == 90.0
    clock.t = 1095.0
    assert d.left() == -5.0


def test_refuses_work_that_does_not_fit_and_nothing_past_the_reserve() -> None:
    clock = FakeClock(0.0)
    d = Deadline(at=100.0, reserve_s=20.0, now=clock)
    assert d.refuse("opt1", need_s=60.0) is None
    why = d.refuse("opt2", need_s=81.0)
    assert why is not None and "needs about 81 s" in why and "only 80 s are left" in why
    clock.t = 85.0  # inside the reserve kept for reverting and reports
    assert "away or past" in (d.refuse("opt3", need_s=None) or "")


def test_cap_never_runs_a_job_past_the_deadline() -> None:
    clock = FakeClock(0.0)
    d = Deadline(at=100.0, reserve_s=10.0, now=clock)
    assert d.cap(300.0) == 90.0
    assert d.cap(30.0) == 30.0
    clock.t = 99.0
    assert d.cap(30.0) == 1.0  # at least a second, so a job is never given a zero timeout
