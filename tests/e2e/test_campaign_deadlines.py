"""Campaigns and deadlines on real (toy) workloads: nothing waits for a broken or slow workload, nothing
starts that cannot finish, the reports state the coverage, and a resumed campaign re-measures nothing.

The toy workloads run for real (tracing off, so the tests stay quick): ``fast`` has a winning knob,
``broken`` fails every replicate, ``slow`` takes 32 s a replicate, ``deadline`` offers three
experiments that each cost as much as its baseline (about 5 s). They wait on real programs against
the wall clock, so they live in the end-to-end tier; the deadline arithmetic itself is tested with
an injected clock in tests/unit/test_deadline_clock.py.
"""

from __future__ import annotations

import time
from pathlib import Path

from dftune.agents.budget import Budget
from dftune.graphs.campaign import campaign_history, resume_campaign, start_campaign
from dftune.graphs.runs import start_run
from dftune.tools.report.campaign import CampaignResult, MemberRow
from dftune.tools.runner.deadline import Deadline
from dftune.tools.session.workspace import Workspace

HERE = Path(__file__).parent.parent / "graph" / "campaign"


def _member(result: CampaignResult, workload: str) -> MemberRow:
    return next(m for m in result.members if m.workload == workload)


def test_a_broken_and_a_slow_workload_do_not_hold_the_fast_one_back() -> None:
    start = time.time()
    # 95 s: the fast workload's baseline and one experiment fit on a loaded 2-core node (there its
    # baseline and diagnosis took 28 s, and runs that had to stop 30 s in left its 5 s experiment 3 s
    # short; here they stop 60 s in, the campaign keeping 35 s for reverting and the reports); the
    # slow one's three 32 s units do not
    deadline = start + 95
    result = start_campaign(
        [HERE / "fast.toml", HERE / "broken.toml", HERE / "slow.toml"], deadline=deadline, budget_text="95s"
    )
    assert result.finished_before_deadline and time.time() < deadline
    fast, broken, slow = (_member(result, w) for w in ("toy-fast", "toy-broken", "toy-slow"))
    # the fast workload was diagnosed and tuned while the slow one was still measuring
    assert fast.status == "completed" and fast.experiments >= 1 and fast.wins == 1, fast
    assert fast.coverage and fast.coverage["units_ok"] == 3
    # the broken one failed alone, saying why
    assert broken.status == "failed" and "no such dataset" in broken.reason, broken
    # the slow one's baseline is partial: measured units are kept, the rest pending
    assert slow.status == "interrupted" and slow.coverage, (slow.reason, slow.coverage)
    assert slow.coverage["units_pending"] >= 1 and slow.coverage["units_ok"] >= 1
    # the combined report says exactly what is covered
    assert result.report and result.html and fast.report
    md = Path(result.report).read_text()
    assert (
        "Partial coverage" in md and "toy-broken (baseline: only 0 of 3" in md and "pending: toy-slow" in md
    )
    assert "1 of 3 workload(s) tuned: toy-fast (1 experiment(s), 1 kept)" in md
    assert Path(result.html).read_text().startswith("<!DOCTYPE html>")
    assert Path(fast.report).is_file()  # each workload keeps its own run and report
    assert campaign_history(result.campaign_id)[0]["event"] == "start"

    # a resumed campaign measures only the pending units of the slow workload, then tunes it
    units = Workspace().baseline_dir(slow.run_id) / "units"
    before = {p.name: p.stat().st_mtime_ns for p in units.glob("r*.json")}
    again = resume_campaign(result.campaign_id, deadline=time.time() + 140)
    after = {p.name: p.stat().st_mtime_ns for p in units.glob("r*.json")}
    assert all(after[k] == v for k, v in before.items())  # nothing measured twice
    assert len(after) == 3
    slow2 = _member(again, "toy-slow")
    assert slow2.status == "completed" and slow2.coverage and slow2.coverage["units_ok"] == 3, slow2
    assert _member(again, "toy-fast").status == "completed"  # an ended member is left alone


def test_a_deadline_stops_before_an_experiment_that_cannot_finish() -> None:
    start = time.time()
    at = start + 34  # the baseline (~7 s), one paired sitting (~13 s, planned at ~16 s), the reserve
    result = start_run(HERE / "deadline.toml", budget=Budget(deadline=Deadline(at, reserve_s=3)))
    end = time.time()
    assert end < at, f"ended {end - at:.1f} s after the deadline"
    assert result.status == "completed" and result.report is not None
    measured = [v for v in result.verdicts if v.verdict != "failed"]
    assert 1 <= len(measured) < 3, result.verdicts  # some experiments ran, not all of them fit
    assert "not started" in result.status_reason and "left before the deadline" in result.status_reason
    assert all(v.kept or v.reverted for v in result.verdicts)  # nothing left half-applied
    report = Path(result.report).read_text()
    assert "not started" in report
    timings = (Path(result.run_dir) / "logs" / "timings.jsonl").read_text().splitlines()
    assert len(timings) >= 1 + len(measured)  # every arm's measured cost planned the next one
