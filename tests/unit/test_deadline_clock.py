"""A deadline reads its own clock: what it refuses and how it caps a job follow that clock only,
so deadline decisions are tested without waiting and without depending on the machine's load."""

from __future__ import annotations

from dftune.tools.runner.deadline import Deadline
from dftune.tools.runner.spec import Launcher, WorkloadSpec


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


def _spec(kind: str, timeout_s: float, queue_timeout_s: float | None) -> WorkloadSpec:
    return WorkloadSpec(
        name="w",
        command=["true"],
        timeout_s=timeout_s,
        launcher=Launcher(kind=kind, queue_timeout_s=queue_timeout_s),  # type: ignore[arg-type]
    )


def test_a_queued_job_keeps_its_own_clocks_while_both_fit_before_the_deadline() -> None:
    d = Deadline(at=10_000.0, reserve_s=10.0, now=FakeClock(0.0))
    spec = _spec("slurm", 300.0, 3600.0)
    assert d.capped(spec) == spec  # queue wait and run are counted apart


def test_near_the_deadline_queue_and_run_share_one_clock_that_ends_before_it() -> None:
    d = Deadline(at=1000.0, reserve_s=10.0, now=FakeClock(0.0))
    capped = d.capped(_spec("flux", 300.0, 3600.0))
    assert capped.timeout_s == 300.0 and capped.launcher.queue_timeout_s is None
    later = Deadline(at=1000.0, reserve_s=10.0, now=FakeClock(900.0))
    capped = later.capped(_spec("slurm", 300.0, 3600.0))
    assert capped.timeout_s == 90.0 and capped.launcher.queue_timeout_s is None


def test_a_local_run_only_has_its_timeout_capped() -> None:
    d = Deadline(at=100.0, reserve_s=10.0, now=FakeClock(0.0))
    capped = d.capped(_spec("local", 300.0, 3600.0))
    assert capped.timeout_s == 90.0 and capped.launcher.queue_timeout_s == 3600.0
