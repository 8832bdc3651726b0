"""An overnight campaign, shortened: three bundled workloads under the real dftracer, one wall-clock budget.

Done when: the campaign finishes before its deadline, every workload keeps its own run and
report, and the combined report states the coverage; ``dftune runs``, ``history`` and ``report`` know
the campaign, and every table reads at 80 columns.
"""

from __future__ import annotations

import json
import subprocess
import time
from importlib import resources
from pathlib import Path

import pytest

from tests.e2e.main_job import dftune_cli

pytestmark = pytest.mark.e2e

WORKLOADS = ("small_reads", "checkpoint_writer", "hdf5_reader")
#: the runs stop 35 s before it: reverting, each workload's HTML page, the combined report
BUDGET_S = 170


def _spec(name: str) -> str:
    return str(resources.files("dftune.resources") / "workloads" / name / "workload.toml")


def _dftune(*args: str, timeout: float = 600) -> subprocess.CompletedProcess[str]:
    return dftune_cli(*args, env={"COLUMNS": "80"}, timeout=timeout)


def test_three_bundled_workloads_finish_before_the_deadline_with_a_combined_report() -> None:
    pytest.importorskip("dftracer")
    pytest.importorskip("h5py")
    start = time.time()
    res = _dftune(
        "run",
        *(_spec(w) for w in WORKLOADS),
        "--time-budget",
        f"{BUDGET_S}s",
        "--replicates",
        "3",
        "--max-experiments",
        "3",
        "--json",
    )
    end = time.time()
    assert res.returncode == 0, res.stderr[-3000:]
    doc = json.loads(res.stdout)
    assert doc["schema"] == "dftune.campaign/1"
    assert end < start + BUDGET_S and doc["finished_before_deadline"], (end - start, doc["timing"])
    assert {m["workload"] for m in doc["members"]} == {
        "small-files-reader",
        "checkpoint-writer",
        "hdf5-chunk-reader",
    }
    for m in doc["members"]:
        # overnight, everything the policy may approve alone runs; a sudo change may then wait for a person
        assert m["status"] in ("completed", "awaiting_approval"), m
        assert Path(m["report"]).is_file() and Path(m["html"]).is_file()  # each keeps its own report
        assert m["coverage"]["units_ok"] == m["coverage"]["units_total"] == 3
    assert sum(m["experiments"] for m in doc["members"]) >= 3
    md = Path(doc["report"]).read_text()
    assert doc["coverage"] in md and "3 of 3 workload(s) tuned" in doc["coverage"]
    assert "baseline units measured: 9 of 9" in md
    assert Path(doc["html"]).read_text().startswith("<!DOCTYPE html>")
    # every report opens with the morning view
    for m in doc["members"]:
        text = Path(m["report"]).read_text()
        head = text[: text.index("## Outcome")]
        for label in ("I/O:", "Bottleneck:", "Best change:", "Next:", "Coverage:"):
            assert label in head, (m["workload"], head)

    # the campaign is a first-class citizen of the CLI, readable at 80 columns
    runs = _dftune("runs")
    assert doc["campaign_id"] in runs.stdout and max(len(x) for x in runs.stdout.splitlines()) <= 80
    hist = _dftune("history", doc["campaign_id"])
    assert (
        hist.returncode == 0
        and "start" in hist.stdout
        and max(len(x) for x in hist.stdout.splitlines()) <= 80
    )
    rep = _dftune("report", doc["campaign_id"], "--json")
    assert json.loads(rep.stdout)["kind"] == "campaign"
