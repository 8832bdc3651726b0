"""Non-finite and impossible numbers never enter the KB, and a KB poisoned by an older version
still answers lookups in strict JSON.

``opt_kb_record`` with ``before=1e308, after=-1e308`` was stored (``+inf% better time``) while the
MCP client got a protocol error, and every later lookup of that workload failed;
``dftune kb lookup --json`` printed ``"change_pct": Infinity``, which is not JSON.
"""

from __future__ import annotations

import os
import sqlite3
import subprocess
import sys
from pathlib import Path
from typing import Any

import pytest

from dftune.core import strictjson
from dftune.core.domain.kb import KbRecordIn
from dftune.mcp_server.registry import ToolFailure
from dftune.mcp_server.toolset import call
from dftune.tools.kb import opt_kb_lookup, opt_kb_record, opt_kb_records

BASE: dict[str, Any] = {
    "run_id": "run-1",
    "iteration": 1,
    "system": "node-a",
    "workload": "reader",
    "software": "posix",
    "strategy": "l1.dataloader_workers",
    "change": {"READERS": 4},
    "metric": "wall_time_s",
}

BAD = [
    ({"before": 1e308, "after": -1e308}, "before=1e+308 is not a measurement"),
    ({"before": 1.0, "after": -1e308}, "after=-1e+308 is not a measurement"),
    ({"before": 1e308, "after": 1.0}, "before=1e+308 is not a measurement"),
    ({"before": -2.0, "after": 1.0}, "before=-2 is not a measurement"),
    ({"before": 1e-300, "after": 1e17}, "not a finite percentage"),
    ({"before": 2.0, "after": 1.0, "before_ci": [-1.0, 3.0]}, "before_ci[0]=-1 is not a measurement"),
    (
        {"before": 2.0, "after": 1.0, "app_metric": "t", "app_before": float("nan"), "app_after": 1.0},
        "app_before must be a finite number",
    ),
]


@pytest.mark.parametrize(("extra", "needle"), BAD)
def test_impossible_numbers_are_refused_by_the_api_and_mcp(
    db: Path, extra: dict[str, Any], needle: str
) -> None:
    with pytest.raises(ValueError, match=needle.replace("(", r"\(").replace("[", r"\[").replace("+", r"\+")):
        KbRecordIn(**BASE, **extra)
    with pytest.raises(ToolFailure) as err:
        call("opt_kb_record", {**BASE, **extra})
    assert needle.split("=")[0] in str(err.value) and "\n" not in str(err.value)
    assert opt_kb_records(db=db) == []


@pytest.fixture
def db(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> Path:
    monkeypatch.setenv("DFTUNE_HOME", str(tmp_path / "home"))
    from dftune.tools.kb.models import default_db_path

    return default_db_path()


def test_a_poisoned_kb_still_answers_in_strict_json(db: Path) -> None:
    opt_kb_record(KbRecordIn(**BASE, before=2.0, after=1.0))
    conn = sqlite3.connect(db)  # what an older version let in: an infinite change and a NaN CI
    for (name,) in conn.execute("SELECT name FROM sqlite_master WHERE type = 'trigger'").fetchall():
        conn.execute(f"DROP TRIGGER {name}")  # records are insert-only; an older version wrote these
    conn.execute(
        "UPDATE records SET before_median = 1e308, after_median = -1e308, change_pct = ?, before_ci_lo = ?",
        (float("inf"), float("nan")),
    )
    conn.commit()
    conn.close()
    found = opt_kb_lookup(workload="reader", db=db).workload_findings
    assert len(found) == 1 and found[0].change_pct is None and found[0].before_ci is None
    doc = call("opt_kb_lookup", {"workload": "reader"})
    assert strictjson.loads(strictjson.dumps(doc)) == doc
    res = subprocess.run(
        [sys.executable, "-m", "dftune.cli", "kb", "lookup", "--workload", "reader", "--json"],
        capture_output=True,
        text=True,
        timeout=120,
        env=os.environ.copy(),
        check=False,
    )
    assert res.returncode == 0, res.stderr
    parsed = strictjson.loads(res.stdout)
    assert parsed["workload_findings"][0]["change_pct"] is None


def test_the_strict_parser_refuses_what_python_writes_by_default() -> None:
    with pytest.raises(ValueError, match="not JSON: Infinity"):
        strictjson.loads('{"a": Infinity}')
    assert (
        strictjson.dumps({"a": [float("nan"), 1.5, {"b": float("-inf")}]})
        == '{"a": [null, 1.5, {"b": null}]}'
    )
