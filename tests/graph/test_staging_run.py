"""A whole run on a read-heavy workload: staging onto /dev/shm is offered from the baseline's trace,
measured with its copies inside every replicate, passes the pattern and work guards on the staged
files, and the report says how much of each replicate was staging."""

from __future__ import annotations

import os
from pathlib import Path

import pytest

from dftune.core.domain.run import TuningState
from tests.conftest import dftracer_preload_lib
from tests.e2e.test_staging import STAGE_PREFIX, make_spec
from tests.graph.conftest import Harness


def test_staging_is_offered_measured_honestly_and_judged_on_the_same_files(
    tmp_path: Path, harness: Harness
) -> None:
    if dftracer_preload_lib() is None:
        pytest.skip("dftracer (with libdftracer_preload.so) is not installed")
    shm = Path("/dev/shm")
    if not shm.is_dir() or os.stat(shm).st_dev == os.stat(tmp_path).st_dev:
        pytest.skip("no /dev/shm on another filesystem than the test's folder")
    toml = make_spec(tmp_path)
    toml.write_text(toml.read_text().replace("replicates = 2", "replicates = 3"))
    harness.invoke(
        TuningState(run_id=harness.run_id, spec_path=str(toml), max_experiments=1, mode="autonomous")
    )
    state = harness.values()
    staging = state.proposal("l3.stage_shm")
    assert staging.change.kind == "stage" and staging.change.stage is not None
    (exp,) = state.experiments
    assert exp.proposal_id == "l3.stage_shm" and exp.candidate is not None
    assert exp.change_ids == []  # nothing of the system was changed: each replicate made its own copy
    cand = exp.candidate
    assert cand.stage == staging.change.stage and cand.staged_dir is not None
    assert cand.staged_dir.startswith("/dev/shm/" + STAGE_PREFIX)
    assert exp.reference.stage is None
    assert any(n.startswith("staged ") and "counted in the metric" in n for n in cand.notes)
    mine = {d.decision.guard: d.decision for d in state.guard_decisions if d.iteration == exp.iteration}
    assert mine["no_doing_less"].passed, mine["no_doing_less"].reason
    assert mine["access_pattern"].passed, mine["access_pattern"].reason
    report = (harness.ws.run_dir(harness.run_id) / "report.md").read_text()
    assert "Staging (candidate): staged " in report
    assert not [n for n in os.listdir(shm) if n.startswith(f"{STAGE_PREFIX}{os.getpid()}-")]
