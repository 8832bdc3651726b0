"""A whole run on a read-heavy workload: staging onto /dev/shm is offered from the baseline's trace,
measured with its copies inside every replicate, passes the pattern and work guards on the staged
files, and the report says how much of each replicate was staging.

The reader (tests/e2e/test_staging.py's, run for real there) is scripted: its setup writes the
data set (the copies are real), and each replicate reads every sample of the folder it is given,
the staged copy in the candidate's replicates, as its scripted trace says."""

from __future__ import annotations

import os
from pathlib import Path

import pytest

from dftune.core.domain.run import TuningState
from dftune.tools.runner.measurer import Invocation
from tests.conftest import dftracer_preload_lib
from tests.e2e.test_staging import SAMPLES, SIZE, STAGE_PREFIX, make_spec
from tests.fakes.measurer import Arm, ScriptedMeasurer, steady
from tests.graph.conftest import Harness
from tests.tracegen import Proc

CHUNK = 65536


def make_data(inv: Invocation) -> None:
    """The reader's setup: SAMPLES files of SIZE bytes in the data folder's train/."""
    train = inv.data_dir / "train"
    train.mkdir(parents=True, exist_ok=True)
    for i in range(SAMPLES):
        (train / f"s{i:03d}.bin").write_bytes(bytes([i]) * SIZE)


def reads_every_sample(inv: Invocation) -> list[Proc]:
    """A replicate of the reader: every sample of the folder it is given, whole, in name order,
    then a line appended to its summary."""
    proc = Proc(pid=5100)
    for i in range(SAMPLES):
        path = str(inv.data_dir / "train" / f"s{i:03d}.bin")
        proc.open(path)
        for _ in range(SIZE // CHUNK):
            proc.read(path, CHUNK)
        proc.close(path)
    summary = str(inv.data_dir / "out" / "summary.txt")
    proc.open(summary)
    proc.write(summary, 12)
    proc.close(summary)
    return [proc]


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
    harness.measurer = ScriptedMeasurer(
        [Arm({}, steady(0.05), work={"files": SAMPLES}, trace=reads_every_sample)], setup=make_data
    )
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
