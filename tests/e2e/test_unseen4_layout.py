"""An I/O library's own layout on real dftracer traces of an h5py program (tests/e2e/unseen4):
HDF5's chunked layout and chunk cache serve the same rows (a new layout, not a new pattern);
float32 rows and a sorted read phase under the same strategy ids are still caught."""

from __future__ import annotations

from pathlib import Path

import pytest

from dftune.tools.catalog import default_catalog
from dftune.tools.guards import Arm, access_pattern_guard, no_doing_less_guard
from tests.e2e.guard_arms import traced_arm

# one xdist worker runs the module: its module fixture (real runs, traced) is then made once,
# not once on each worker that receives one of its tests
pytestmark = [pytest.mark.e2e, pytest.mark.xdist_group("unseen4")]
UNSEEN4 = Path(__file__).parent / "unseen4"
CAT = default_catalog()
LAYOUT = CAT.strategies["l2.hdf5_chunked_layout"]


@pytest.fixture(scope="module")
def rows(tmp_path_factory: pytest.TempPathFactory) -> dict[str, Arm]:
    pytest.importorskip("h5py")
    tmp = tmp_path_factory.mktemp("h5rows")
    spec = UNSEEN4 / "h5_rows" / "workload.toml"
    return {
        "base": traced_arm(spec, tmp),
        "chunked": traced_arm(spec, tmp, CHUNK_ROWS="64", CACHE_MIB="32"),
        "aligned": traced_arm(spec, tmp, ALIGN_KIB="64"),
        "f4": traced_arm(spec, tmp, DTYPE="f4"),
        "chunked_sorted": traced_arm(spec, tmp, CHUNK_ROWS="64", CACHE_MIB="32", SORTED="1"),
    }


def test_a_chunked_layout_of_the_same_rows_is_a_new_layout(rows: dict[str, Arm]) -> None:
    d = access_pattern_guard(LAYOUT, rows["base"], rows["chunked"])
    # never rejected: passed, or a question for a person (the trace has no HDF5 events)
    assert d.verdict in (None, "inconclusive"), d.reason
    assert "laid out 1 file(s) anew" in d.reason and d.details["relaid_out"] == ["<data>/sim.h5"]
    assert no_doing_less_guard(rows["base"], rows["chunked"], strategy=LAYOUT).passed


def test_hdf5_alignment_moves_the_same_bytes_and_is_not_rejected(rows: dict[str, Arm]) -> None:
    """H5Pset_alignment (h5py's alignment_interval): the dataset starts on a 64 KiB boundary."""
    strategy = CAT.strategies["l2.hdf5_alignment"]
    d = access_pattern_guard(strategy, rows["base"], rows["aligned"])
    assert d.verdict in (None, "inconclusive"), d.reason
    assert d.details["relaid_out"] == ["<data>/sim.h5"], d.reason
    assert no_doing_less_guard(rows["base"], rows["aligned"], strategy=strategy).passed


def test_float32_rows_under_a_layout_id_are_doing_less(rows: dict[str, Arm]) -> None:
    d = access_pattern_guard(LAYOUT, rows["base"], rows["f4"])
    assert not d.passed and d.verdict == "rejected" and "different byte ranges" in d.reason, d.reason
    less = no_doing_less_guard(rows["base"], rows["f4"], strategy=LAYOUT)
    assert not less.passed and less.verdict == "rejected", less.reason


def test_a_sorted_read_phase_behind_a_new_layout_is_not_passed(rows: dict[str, Arm]) -> None:
    d = access_pattern_guard(LAYOUT, rows["chunked"], rows["chunked_sorted"])
    assert not d.passed and d.verdict == "rejected", d.reason  # the same layout: the order is compared
    relaid = access_pattern_guard(LAYOUT, rows["base"], rows["chunked_sorted"])
    assert not relaid.passed and relaid.verdict == "inconclusive" and "go backwards" in relaid.reason, (
        relaid.reason
    )
