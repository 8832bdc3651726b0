"""Side by side with Drishti (PyPI drishti-io): where it raises an issue with the same threshold,
dftune's diagnosis names the same problem; where dftune differs, benchmarks/bench_darshan_drishti.py
explains why (the full table is in benchmarks/README.md)."""

from __future__ import annotations

import importlib
import sys
from pathlib import Path

import pytest

from tests.darshan_logs import collection, shipped

sys.path.insert(0, str(Path(__file__).resolve().parents[2] / "benchmarks"))
bench = importlib.import_module("bench_darshan_drishti")

#: logs where Drishti raises issues that share dftune's thresholds (and one it does not)
CASES = [
    collection("imbalanced_io/imbalanced-io.darshan"),
    shipped("noposix.darshan"),
    shipped("shane_macsio_id29959_5-22-32552-7035573431850780836_1590156158.darshan"),
    collection("skew_io/skew-app.darshan"),
]


@pytest.mark.parametrize("log", CASES, ids=[p.name[:30] for p in CASES])
def test_drishti_issues_are_named_or_explained(log: Path, tmp_path: Path) -> None:
    result = bench.compare(log, tmp_path)
    assert result["drishti_ok"] and result["issues"]
    for issue in result["issues"]:
        ours, _ = bench.SAME[issue["code"]]
        if issue["same"]:
            assert set(issue["dftune"]) <= set(ours)
        else:
            assert issue["why"], issue
    named = {i["code"] for i in result["issues"] if i["same"]}
    if log.name == "imbalanced-io.darshan":
        assert {"P05", "P06", "P07", "P08", "P15", "P16", "P18", "P19", "P21"} <= named
    if log.name == "noposix.darshan":
        assert "S01" in named
    if log.name == "skew-app.darshan":
        # POSIX sees exactly-1-MiB aggregator writes; the application's own MPI-IO writes are small
        p06 = next(i for i in result["issues"] if i["code"] == "P06")
        assert p06["same"] and p06["dftune"] == ["DA05"]
        # Drishti's 30 s metadata limit on the shared record (its time summed over the ranks)
        assert next(i for i in result["issues"] if i["code"] == "P17")["dftune"] == ["DD17"]
