"""Pending confirmation in the verdict and the knowledge base: a win an inconclusive guard cannot
settle is ``pending``; a person's answer is a new record that settles it; lookups show what stands;
a version-2 knowledge base migrates with every row kept."""

from __future__ import annotations

import sqlite3
from pathlib import Path
from typing import Any

import pytest

from dftune.core.domain.verdicts import GuardDecision
from dftune.tools.guards import Arm
from dftune.tools.kb import decide, opt_kb_lookup, opt_kb_of_experiment, opt_kb_record, opt_kb_records
from dftune.tools.kb.schema import MIGRATIONS, SCHEMA_VERSION, connect, now
from dftune.tools.kb.store import MeasuredArms
from dftune.tools.runner.stats import compare
from dftune.tools.trace import analyze
from tests.tracegen import Proc, write_trace

BASE = [10.0, 10.1, 9.9, 10.05, 9.95]
DATA = "/data/run"
UNSURE = GuardDecision(guard="access_pattern", passed=False, verdict="inconclusive", reason="cannot tell")


def _numbers(factor: float) -> dict[str, Any]:
    cand = [v * factor for v in BASE]
    return {
        "metric": "t",
        "before": 10.0,
        "after": 10.0 * factor,
        "lower_is_better": True,
        "comparison": compare(BASE, cand),
    }


@pytest.mark.parametrize(
    ("factor", "verdict"), [(0.7, "pending"), (1.0, "inconclusive"), (1.3, "inconclusive")]
)
def test_only_a_win_the_guard_cannot_settle_is_a_question_for_a_person(factor: float, verdict: str) -> None:
    d = decide([UNSURE], **_numbers(factor))
    assert d.verdict == verdict
    if verdict == "pending":
        assert "cannot tell" in d.reason and "person" in d.reason


def test_without_numbers_an_unsure_guard_stays_inconclusive() -> None:
    d = decide([UNSURE], metric="t", before=None, after=None, lower_is_better=True)
    assert d.verdict == "inconclusive"


def _arm(tmp: Path, label: str, record: int) -> Arm:
    p = Proc(pid=1)
    p.open(f"{DATA}/out.bin")
    for _ in range((256 * 1024) // record):
        p.write(f"{DATA}/out.bin", record)
    p.close(f"{DATA}/out.bin")
    folder = write_trace(tmp / label, [p])
    return Arm(analysis=analyze([folder], profile=True), data_dir=DATA, label=label)


def _writer_record(tmp_path: Path, **extra: Any) -> Any:
    """An experiment whose writes got larger over the same ranges: the access-pattern guard is unsure."""
    arms = MeasuredArms(
        baseline=_arm(tmp_path, "baseline", 1024),
        incumbent=_arm(tmp_path, "incumbent", 1024),
        experiment=_arm(tmp_path, "experiment", 65536),
    )
    rec = {
        "run_id": "r1",
        "iteration": 1,
        "system": "h",
        "workload": "writer",
        "software": "posix",
        "strategy": "l1.write_buffering",
        "metric": "wall_time_s",
        "comparison": compare(BASE, [v * 0.6 for v in BASE]),
        **extra,
    }
    return opt_kb_record(rec, arms=arms)


def test_a_pending_record_is_settled_by_the_persons_answer(tmp_path: Path) -> None:
    pending = _writer_record(tmp_path)
    assert pending.verdict == "pending", pending.verdict_reason
    assert [r.verdict for r in opt_kb_lookup(workload="writer").workload_findings] == ["pending"]
    win = _writer_record(tmp_path, confirmed_by="it buffers", supersedes=pending.id)
    assert win.verdict == "win" and win.supersedes == pending.id
    assert [r.id for r in opt_kb_lookup(workload="writer").workload_findings] == [win.id]
    assert {r.id: r.superseded_by for r in opt_kb_records()} == {pending.id: win.id, win.id: None}
    assert [(r.id, r.superseded_by) for r in opt_kb_of_experiment("r1", 1)] == [
        (pending.id, win.id),
        (win.id, None),
    ]
    again = _writer_record(tmp_path, confirmed_by="it buffers", supersedes=pending.id)
    assert again.id == win.id  # the same answer recorded again (a re-run after a crash) adds nothing


def test_a_refusal_is_a_rejection_with_the_persons_reason(tmp_path: Path) -> None:
    pending = _writer_record(tmp_path)
    assert pending.verdict == "pending", pending.verdict_reason
    refused = _writer_record(tmp_path, refused_by="records must stay 1 KiB", supersedes=pending.id)
    assert refused.verdict == "rejected" and "records must stay 1 KiB" in refused.verdict_reason
    with pytest.raises(ValueError, match="confirmed or refused"):
        _writer_record(tmp_path, refused_by="no", confirmed_by="yes")


def test_a_version_2_knowledge_base_migrates_with_every_row(tmp_path: Path) -> None:
    db = tmp_path / "kb.sqlite"
    conn = sqlite3.connect(db, isolation_level=None)
    conn.execute("CREATE TABLE schema_version (version INTEGER NOT NULL, applied TEXT NOT NULL)")
    for v in (0, 1):
        MIGRATIONS[v](conn)
        conn.execute("INSERT INTO schema_version VALUES (?, ?)", (v + 1, now()))
    conn.close()
    conn = sqlite3.connect(db, isolation_level=None)  # a v2 row, written through the v2 schema by hand
    cols = [r[1] for r in conn.execute("PRAGMA table_info(records)")]
    assert "supersedes" not in cols
    values = {c: None for c in cols if c != "id"}
    values.update(
        created=now(),
        system="h",
        workload="w",
        software="posix",
        scope="workload",
        layer="L1",
        strategy="l1.x",
        change="{}",
        metric="t",
        metric_scope="app",
        lower_is_better=1,
        app_lower_is_better=1,
        verdict="inconclusive",
        verdict_reason="old",
        guard_triggered=0,
        guards="[]",
        unchecked_guards="[]",
        caveats="",
    )
    conn.execute(
        f"INSERT INTO records ({', '.join(values)}) VALUES ({', '.join('?' for _ in values)})",
        list(values.values()),
    )
    conn.close()
    with connect(db) as c:
        assert c.execute("SELECT MAX(version) FROM schema_version").fetchone()[0] == SCHEMA_VERSION
        cols = [r[1] for r in c.execute("PRAGMA table_info(records)")]
    assert cols[-1] == "supersedes"
    (row,) = opt_kb_records(db=db)
    assert row.verdict == "inconclusive" and row.verdict_reason == "old" and row.supersedes is None
    # the migrated KB remembers a change the program refused (schema 4)
    failed = opt_kb_record(
        {
            "run_id": "r2",
            "iteration": 1,
            "system": "h",
            "workload": "w",
            "strategy": "l1.concurrent_io_pool",
            "metric": "read_time_s",
            "change": {"settings": {"THREADS": "0"}},
            "failed": "failed (exit code 1: ValueError: max_workers must be greater than 0)",
        },
        db=db,
    )
    assert failed.verdict == "failed"
    assert failed.verdict_reason == (
        "the program failed under this change: failed (exit code 1: ValueError: max_workers must be "
        "greater than 0)"
    )
