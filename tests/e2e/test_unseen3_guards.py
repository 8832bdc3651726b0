"""The measuring guards on the unseen3 workloads (real dftracer traces): a writer pool keeps the
pattern, a stage of the same tiles is a question for a person, and the disguised knobs (tiles
never written under a preallocation id, more output files under a file-per-process id, the
shuffle removed under a readahead-hint id) are stopped whatever their strategy says."""

from __future__ import annotations

from pathlib import Path

import pytest

from dftune.tools.catalog import default_catalog
from dftune.tools.guards import Arm, access_pattern_guard, no_doing_less_guard
from tests.e2e.guard_arms import traced_arm

# one xdist worker runs the module: its module fixture (real runs, traced) is then made once,
# not once on each worker that receives one of its tests
pytestmark = [pytest.mark.e2e, pytest.mark.xdist_group("unseen3")]
UNSEEN3 = Path(__file__).parent / "unseen3"
CAT = default_catalog()


def _arm(workload: str, tmp: Path, **settings: str) -> Arm:
    return traced_arm(UNSEEN3 / workload / "workload.toml", tmp, **settings)


@pytest.fixture(scope="module")
def writer(tmp_path_factory: pytest.TempPathFactory) -> dict[str, Arm]:
    tmp = tmp_path_factory.mktemp("tiles")
    return {
        "base": _arm("tile_writer", tmp),
        "writers": _arm("tile_writer", tmp, WRITERS="4"),
        "stage": _arm("tile_writer", tmp, STAGE_KIB="64"),
        "prealloc": _arm("tile_writer", tmp, PREALLOC="1"),
        "split": _arm("tile_writer", tmp, SPLIT="1"),
    }


def test_a_writer_pool_keeps_the_pattern(writer: dict[str, Arm]) -> None:
    strategy = CAT.strategies["l1.async_io"]
    assert access_pattern_guard(strategy, writer["base"], writer["writers"]).passed
    assert no_doing_less_guard(writer["base"], writer["writers"], strategy=strategy).passed


def test_staged_tiles_are_not_refused(writer: dict[str, Arm]) -> None:
    d = access_pattern_guard(CAT.strategies["l1.write_buffering"], writer["base"], writer["stage"])
    assert d.passed or d.verdict == "inconclusive", d.reason  # a question for a person at most


def test_tiles_never_written_are_doing_less(writer: dict[str, Arm]) -> None:
    strategy = CAT.strategies["l1.fallocate"]
    d = no_doing_less_guard(writer["base"], writer["prealloc"], strategy=strategy)
    a = access_pattern_guard(strategy, writer["base"], writer["prealloc"])
    assert not d.passed or not a.passed, (d.reason, a.reason)


def test_more_output_files_change_the_pattern(writer: dict[str, Arm]) -> None:
    d = access_pattern_guard(CAT.strategies["l1.file_per_process"], writer["base"], writer["split"])
    assert not d.passed and d.verdict == "rejected", d.reason


def test_a_removed_shuffle_under_a_readahead_hint_is_caught(tmp_path: Path) -> None:
    base = _arm("batch_loader", tmp_path)
    stream = _arm("batch_loader", tmp_path, STREAM="1")
    d = access_pattern_guard(CAT.strategies["l1.prefetch_fadvise"], base, stream)
    assert not d.passed and d.verdict == "rejected", d.reason
