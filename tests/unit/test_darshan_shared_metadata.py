"""Drishti's metadata-time rule on a shared file's record (P17 on rank -1, dftune's DD17).

Darshan reduces the records of a file every rank opened into one record whose POSIX_F_META_TIME
is the sum over the ranks; Drishti compares that sum with its per-rank limit (30 s) and reports
HIGH.  dftune fires on the same records with the same threshold, states what the sum is made of
(seconds, ranks, per-rank average, opens, share of I/O time) and scores it by that share, as
every finding: 99% of the I/O time on skew-app ranks it among the first, 2.3% on the IOR log
does not outrank reads that take 98%.
"""

from __future__ import annotations

import sys
from pathlib import Path

import pytest

from dftune.tools.diagnose.engine import diagnose_analysis
from dftune.tools.trace import analyze
from tests.darshan_logs import collection, shipped

sys.path.insert(0, str(Path(__file__).resolve().parents[2] / "benchmarks"))
from gen_darshan_log import build


def _diagnose(log: Path):  # type: ignore[no-untyped-def]
    a = analyze([log], views=["file", "proc"])
    return a, diagnose_analysis(a)


def test_the_shared_ior_record_is_named_with_what_its_sum_is_made_of() -> None:
    a, d = _diagnose(collection("skew_io/skew-autobench-ior.darshan"))
    assert a.darshan is not None
    s = a.darshan.signals
    assert s["shared_meta_ranks"] == 2048 and s["shared_meta_opens"] == 4098
    assert s["shared_meta_time_s"] == pytest.approx(212.571097, abs=1e-5)  # POSIX_F_META_TIME of the record
    assert s["shared_meta_per_rank_s"] == pytest.approx(212.571097 / 2048)
    assert s["shared_meta_time_frac"] == pytest.approx(212.571097 / a.io_time_s, rel=1e-6)
    f = next(b for b in d.bottlenecks if b.id == "DD17")
    assert f.category == "metadata" and f.rule_source == "Drishti (Darshan counters)"
    for text in ("2,048 ranks", "212.6 s", "opens: 4,098", "0.10 s per rank", "2.3% of I/O time", "HIGH"):
        assert text in f.evidence, text
    # scored by its share of I/O time: above the other findings of its score, below what takes the time
    assert f.score == 1
    ids = [b.id for b in d.bottlenecks]
    assert ids[:3] == ["T01", "F02", "DD07"] and ids[3] == "DD17"
    assert "metadata" in {b.category for b in d.bottlenecks}


def test_where_metadata_holds_the_io_time_the_shared_record_ranks_first() -> None:
    _, d = _diagnose(collection("skew_io/skew-app.darshan"))
    f = next(b for b in d.bottlenecks if b.id == "DD17")
    assert f.score == 5 and "65,536 ranks" in f.evidence and "99.3% of I/O time" in f.evidence
    assert "DD17" in [b.id for b in d.bottlenecks[:3]]


@pytest.mark.parametrize(
    ("where", "name"),
    [
        ("shipped", "sample.darshan"),  # 2,048 ranks share a file: 11.3 s of metadata in all
        ("collection", "imbalanced_io/imbalanced-io.darshan"),  # 15.4 s over 496 ranks
        ("collection", "e3sm_io_heatmaps_and_dxt/e3sm_io_heatmap_only.darshan"),
        ("collection", "skew_io/skew-autobench-ior.darshan"),
    ],
)
def test_it_fires_only_over_drishtis_threshold(where: str, name: str) -> None:
    log = shipped(name) if where == "shipped" else collection(name)
    a, d = _diagnose(log)
    assert a.darshan is not None
    over = a.darshan.signals.get("shared_meta_time_s", 0.0) > 30
    assert ("DD17" in {b.id for b in d.bottlenecks}) is over
    assert over is (name == "skew_io/skew-autobench-ior.darshan")


@pytest.mark.parametrize(
    ("shared", "meta_s", "fires"),
    [(True, 0.001, False), (True, 30.0, False), (True, 45.0, True), (False, 45.0, False)],
)
def test_a_written_log(tmp_path: Path, shared: bool, meta_s: float, fires: bool) -> None:
    """Real-format logs (libdarshan-util's writer): negligible, at-the-limit and large metadata on
    shared records, and per-rank records (their own rule, DP17, reads them per rank)."""
    log = tmp_path / "gen.darshan"
    build(log, 64, 4, shared=shared, meta_time_s=meta_s)
    a, d = _diagnose(log)
    assert a.processes == 64 and a.darshan is not None
    assert a.darshan.signals.get("shared_meta_time_s", 0.0) == (meta_s if shared else 0.0)
    found = {b.id: b for b in d.bottlenecks}
    assert ("DD17" in found) is fires
    if fires:
        assert "64 ranks" in found["DD17"].evidence and "45.0 s" in found["DD17"].evidence
        assert "0.70 s per rank" in found["DD17"].evidence
