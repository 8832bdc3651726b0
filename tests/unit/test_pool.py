"""Measurement slots: one job at a time, and the lane that has used the least time goes next."""

from __future__ import annotations

import threading
import time

from dftune.tools.runner.pool import SlotPool


def test_one_job_at_a_time_and_a_fast_lane_is_not_queued_behind_a_slow_one() -> None:
    pool = SlotPool(1)
    order: list[str] = []
    active = [0]
    peak = [0]
    lock = threading.Lock()

    def job(lane: str, seconds: float) -> None:
        with pool.slot(lane):
            with lock:
                active[0] += 1
                peak[0] = max(peak[0], active[0])
                order.append(lane)
            time.sleep(seconds)
            with lock:
                active[0] -= 1

    def lane(name: str, jobs: int, seconds: float, delay: float = 0.0) -> threading.Thread:
        def run() -> None:
            time.sleep(delay)
            for _ in range(jobs):
                job(name, seconds)  # one after the other, like a workload's replicates

        t = threading.Thread(target=run)
        t.start()
        return t

    threads = [lane("slow", 3, 0.4), lane("fast", 5, 0.02, delay=0.05)]
    for t in threads:
        t.join()
    assert peak[0] == 1
    # the slow lane's first job was running when the fast lane asked; after it, the fast lane (less
    # time used) runs all its jobs back to back before the slow lane's second job
    assert order == ["slow", "fast", "fast", "fast", "fast", "fast", "slow", "slow"], order
    assert pool.used("slow") > pool.used("fast")


def test_several_slots_run_jobs_at_once() -> None:
    pool = SlotPool(2)
    started: list[float] = []

    def job() -> None:
        with pool.slot("x"):
            started.append(time.monotonic())
            time.sleep(0.2)

    threads = [threading.Thread(target=job) for _ in range(2)]
    for t in threads:
        t.start()
    for t in threads:
        t.join()
    assert abs(started[0] - started[1]) < 0.15
