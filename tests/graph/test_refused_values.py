"""A value the program refuses (a pool of 0 workers) costs one replicate, is recorded in the
knowledge base as failed with what the program said, and the next run does not spend an
experiment on it again unless asked to (``--retry-known``)."""

from __future__ import annotations

import json
from pathlib import Path

from dftune.graphs.runs import start_run
from tests.fakes.measurer import Arm, ScriptedMeasurer, steady

SPEC = """
name = "pool-reader"
command = ["{python}", "reader.py", "--threads", "{THREADS}"]
replicates = 3
[metric]
kind = "stdout_regex"
pattern = 'read_time_s ([0-9.]+)'
[tracing]
mode = "off"
[[knobs]]
name = "THREADS"
kind = "arg"
values = [1, 0, 4]
default = 1
strategy = "l1.concurrent_io_pool"
"""

REFUSAL = "ValueError: max_workers must be greater than 0"


def _script() -> ScriptedMeasurer:
    return ScriptedMeasurer(
        [
            Arm({}, steady(2.8)),
            Arm({"THREADS": 0}, fails=f"Traceback (most recent call last):\n{REFUSAL}"),
            Arm({"THREADS": 4}, steady(1.0)),
        ]
    )


def _spec(tmp_path: Path) -> Path:
    (tmp_path / "reader.py").write_text("print('never started: the measurements are scripted')\n")
    spec = tmp_path / "pool.toml"
    spec.write_text(SPEC)
    return spec


def _doc(run_dir: str) -> dict:
    return json.loads((Path(run_dir) / "report.json").read_text())


def test_a_refused_value_costs_one_replicate_and_is_not_tried_again(tmp_path: Path) -> None:
    spec = _spec(tmp_path)
    first = _script()
    one = start_run(spec, max_experiments=2, measurer=first)
    assert one.status == "completed", one.status_reason
    refused = [inv for inv in first.starts if inv.settings.get("THREADS") == 0]
    assert len(refused) == 1  # dropped at its first replicate, where the incumbent's ran
    doc = _doc(one.run_dir)
    (failed,) = [e for e in doc["experiments"] if e["verdict"] == "failed"]
    assert REFUSAL in failed["program_failed"] and failed["kb_record_id"] is not None
    assert any(e["kept"] and e["proposal_id"] == "THREADS=4" for e in doc["experiments"])

    second = _script()
    two = start_run(spec, max_experiments=2, measurer=second)
    assert two.status == "completed", two.status_reason
    assert not [inv for inv in second.starts if inv.settings.get("THREADS") == 0]
    (known,) = [p for p in _doc(two.run_dir)["proposals"] if p["id"] == "THREADS=0"]
    assert known["status"] == "known"
    assert known["reason"].startswith(
        f"the program refused this change before (KB record #{failed['kb_record_id']}"
    )
    assert REFUSAL in known["reason"] and "--retry-known tries it again" in known["reason"]

    again = _script()
    start_run(spec, max_experiments=3, retry_known=True, measurer=again)
    assert [inv for inv in again.starts if inv.settings.get("THREADS") == 0]
