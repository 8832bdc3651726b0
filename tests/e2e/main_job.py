"""The main job (`dftune run SPEC --mode autonomous`) on a bundled workload, as the README runs it.

Overnight, everything the policy may approve alone runs first; a sudo or system change then waits
for a person, whom CI stands in for by refusing it ("no sudo in CI"). One helper, so the main-job
test and the report tests that read its run check the same kind of run.
"""

from __future__ import annotations

import json
import os
import subprocess
import sys
from dataclasses import dataclass
from importlib import resources
from pathlib import Path
from typing import Any

#: the xdist group of every test that reads the small_reads main job (made once per worker)
SMALL_READS_GROUP = "small_reads_main_job"


@dataclass(frozen=True)
class FinishedRun:
    """A finished main job: the DFTUNE_HOME it ran under and its final ``--json`` document."""

    home: Path
    doc: dict[str, Any]

    @property
    def run_id(self) -> str:
        return str(self.doc["run_id"])


def bundled_spec(name: str) -> Path:
    return Path(str(resources.files("dftune.resources") / "workloads" / name / "workload.toml"))


def dftune_cli(
    *args: str,
    home: Path | None = None,
    env: dict[str, str] | None = None,
    timeout: float = 900,
) -> subprocess.CompletedProcess[str]:
    """``python -m dftune.cli ARGS`` in a real subprocess: this environment plus ``env``, under
    ``home`` when given."""
    extra = {**(env or {}), **({"DFTUNE_HOME": str(home)} if home else {})}
    return subprocess.run(
        [sys.executable, "-m", "dftune.cli", *args],
        capture_output=True,
        text=True,
        timeout=timeout,
        check=False,
        env={**os.environ, **extra},
    )


#: The experiment budget of the main jobs whose checked win comes first (the spec's default budget,
#: 6, runs in the demo and the other examples' main jobs). What follows it there is no-gain
#: experiments, each extended to 10 pairs before it is settled: about a third of the end-to-end
#: tier's longest tests, and nothing these tests check.
WIN_FIRST_BUDGET = {"small_reads": 3, "mpiio_shared": 3}


def run_main_job(example: str, home: Path | None = None) -> FinishedRun:
    """Run the main job on ``example`` to its end, refusing every change that waits for a person."""
    budget = WIN_FIRST_BUDGET.get(example)
    extra = ["--max-experiments", str(budget)] if budget else []
    res = dftune_cli("run", str(bundled_spec(example)), "--mode", "autonomous", "--json", *extra, home=home)
    assert res.returncode == 0, res.stderr[-2000:]
    doc = json.loads(res.stdout)
    for _ in range(10):
        if doc["status"] != "awaiting_approval":
            break
        pending = doc["pending"][0]
        assert pending["privilege"] != "no-sudo" or pending["layer"] == "L3", pending
        assert all(v["proposal"] != pending["proposal_id"] for v in doc["verdicts"])
        res = dftune_cli(
            "approve", doc["run_id"], "--reject", "--reason", "no sudo in CI", "--json", home=home
        )
        assert res.returncode == 0, res.stderr[-2000:]
        doc = json.loads(res.stdout)
    return FinishedRun(home=home or Path(os.environ["DFTUNE_HOME"]), doc=doc)
