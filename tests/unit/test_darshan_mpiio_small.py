"""Drishti's HIGH findings on the skewed public Darshan logs (darshan-logs skew_io), named by dftune.

skew-app: Drishti reports 41,632 small writes as HIGH. At POSIX they are ROMIO's exactly-1-MiB
aggregator writes, but the application itself issued 1.1 million MPI-IO writes under 1 MiB
(MPIIO_SIZE_WRITE_AGG_*): dftune now names that small-I/O problem among its dominant categories,
next to the metadata finding it already ranked first.  skew-autobench-ior: Drishti's "1 rank where
metadata takes over 30 s" is one shared record whose metadata time is the sum over 2,048 ranks;
dftune names it (DD17, tests/unit/test_darshan_shared_metadata.py) with the numbers that sum is
made of, scored by its share of I/O time like every other finding.
"""

from __future__ import annotations

import importlib
import sys
from pathlib import Path

from dftune.tools.diagnose.engine import diagnose_analysis
from dftune.tools.trace import analyze
from tests.darshan_logs import collection

sys.path.insert(0, str(Path(__file__).resolve().parents[2] / "benchmarks"))
bench = importlib.import_module("bench_darshan_drishti")


def test_small_mpiio_writes_are_named_among_the_top_findings() -> None:
    a = analyze([collection("skew_io/skew-app.darshan")], views=["file", "proc"])
    d = diagnose_analysis(a)
    small = next(b for b in d.bottlenecks if b.id == "DA05")
    assert (
        small.score >= 4
        and small.category == "small-io"
        and "1,114,112 small MPI-IO writes" in small.evidence
    )
    assert a.darshan is not None and a.darshan.signals["mpiio_small_writes"] > 1_000_000
    assert "small-io" in d.metric.dominant and d.category_scores["small-io"] == max(
        d.category_scores.values()
    )
    assert {"metadata", "small-io"} <= set(d.metric.dominant)
    top3 = {b.category for b in d.bottlenecks[:3]}
    assert "metadata" in top3


def test_posix_only_small_io_is_not_double_counted() -> None:
    """IOR reads of exactly 1 MiB through 4 MiB collective MPI-IO reads: nothing small at either layer."""
    a = analyze([collection("skew_io/skew-autobench-ior.darshan")], views=["file", "proc"])
    assert a.darshan is not None and a.darshan.signals["mpiio_small_reads"] == 0
    assert not any(b.id in ("DA04", "DA05", "DP05") for b in diagnose_analysis(a).bottlenecks)


def test_drishtis_metadata_rank_finding_on_a_shared_record_is_named(tmp_path: Path) -> None:
    result = bench.compare(collection("skew_io/skew-autobench-ior.darshan"), tmp_path)
    assert "DD17" in result["dftune"]
    assert result["drishti_ok"], "the drishti command (drishti-io, a dependency) failed on the log"
    p17 = next(i for i in result["issues"] if i["code"] == "P17")
    assert p17["same"] and p17["dftune"] == ["DD17"]
