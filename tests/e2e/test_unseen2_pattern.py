"""The logical access pattern on real dftracer traces of programs written for it (tests/e2e/unseen2):
threads per batch and aligned chunks over the same shuffled samples keep the pattern; sorting the
samples, or worker processes given contiguous ranges in file order, change it."""

from __future__ import annotations

from pathlib import Path

import pytest

from dftune.tools.catalog import default_catalog
from dftune.tools.guards import Arm, access_pattern_guard, no_doing_less_guard
from tests.e2e.guard_arms import traced_arm

# one xdist worker runs the module: its module fixture (real runs, traced) is then made once,
# not once on each worker that receives one of its tests
pytestmark = [pytest.mark.e2e, pytest.mark.xdist_group("unseen2")]
UNSEEN2 = Path(__file__).parent / "unseen2"
CAT = default_catalog()


def _arm(workload: str, tmp: Path, **settings: str) -> Arm:
    return traced_arm(UNSEEN2 / workload / "workload.toml", tmp, **settings)


@pytest.fixture(scope="module")
def reader(tmp_path_factory: pytest.TempPathFactory) -> dict[str, Arm]:
    tmp = tmp_path_factory.mktemp("reader")
    return {
        "base": _arm("sample_reader", tmp),
        "threads": _arm("sample_reader", tmp, THREADS="2"),
        "chunks": _arm("sample_reader", tmp, CHUNK_KIB="64"),
        "sorted": _arm("sample_reader", tmp, LOCALITY="1"),
    }


def test_real_threads_carry_their_own_streams(reader: dict[str, Arm]) -> None:
    log = reader["threads"].request_log
    assert log is not None and len(log.streams) >= 2  # dftracer's tid: one stream per reader thread


def test_two_threads_per_batch_keep_the_pattern(reader: dict[str, Arm]) -> None:
    strategy = CAT.strategies["l1.dataloader_workers"]
    d = access_pattern_guard(strategy, reader["base"], reader["threads"])
    assert d.passed, d.reason
    assert no_doing_less_guard(reader["base"], reader["threads"], strategy=strategy).passed


def test_aligned_chunks_over_the_same_shuffled_samples_keep_the_pattern(reader: dict[str, Arm]) -> None:
    d = access_pattern_guard(CAT.strategies["l1.read_chunk_size"], reader["base"], reader["chunks"])
    assert d.passed and "coalescing" in d.reason, d.reason


def test_sorting_the_samples_for_locality_is_caught(reader: dict[str, Arm]) -> None:
    d = access_pattern_guard(CAT.strategies["l1.read_buffering"], reader["base"], reader["sorted"])
    assert not d.passed and d.verdict == "rejected" and "in file order" in d.reason, d.reason


def test_worker_processes_given_contiguous_ranges_are_caught(tmp_path: Path) -> None:
    workers = _arm("loader_procs", tmp_path, WORKERS="2")
    sharded = _arm("loader_procs", tmp_path, WORKERS="2", SHARD_AWARE="1")
    log = workers.request_log
    assert log is not None and len(log.streams) >= 2  # forked workers are streams of their own
    d = access_pattern_guard(CAT.strategies["l1.worker_open_once"], workers, sharded)
    assert not d.passed and d.verdict == "rejected" and "visited in another order" in d.reason, d.reason


def test_records_packed_behind_a_kept_buffer_are_asked_not_passed(tmp_path: Path) -> None:
    """The row writer's 4 KiB rows through a 64 KiB buffer (a person confirmed it), then packed four
    to a 16 KiB record behind the same buffer: the calls are the incumbent's, so only the baseline
    can show that the records behind them are not settled: a question for a person, not a pass."""
    base = _arm("row_writer", tmp_path)
    buffered = _arm("row_writer", tmp_path, BUFFER_KIB="64")
    packed = _arm("row_writer", tmp_path, BUFFER_KIB="64", PACK="4")
    strategy = CAT.strategies["l1.write_buffering"]
    assert access_pattern_guard(strategy, buffered, packed).passed  # against the incumbent alone
    d = access_pattern_guard(strategy, buffered, packed, baseline=base)
    assert not d.passed and d.verdict == "inconclusive", d.reason
    assert "records of 4.0 KiB" in str(d.details["question"])
