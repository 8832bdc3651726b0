"""The knowledge base on disk: its SQLite schema, migrations, and how a record maps to a row.

``$DFTUNE_HOME/kb/opt_kb.sqlite``. Records are insert-only: triggers refuse UPDATE and DELETE.
A damaged file (zero bytes, truncated, not SQLite) is a :class:`KbError` naming it, never
recreated empty; a full or read-only disk is a :class:`~dftune.core.errors.StorageError` naming it.
"""

from __future__ import annotations

import json
import math
import sqlite3
from collections.abc import Callable, Iterator
from contextlib import contextmanager
from datetime import UTC, datetime
from pathlib import Path
from typing import Any

from dftune.core import strictjson
from dftune.core.domain.kb import KbRecord
from dftune.core.domain.verdicts import GuardDecision
from dftune.core.errors import is_storage_error, storage_error
from dftune.tools.kb.models import KbError, default_db_path

SCHEMA_VERSION = 4

_SCHEMA_V1 = (
    """
    CREATE TABLE records (
        id INTEGER PRIMARY KEY AUTOINCREMENT,
        dedup_key TEXT UNIQUE,
        created TEXT NOT NULL,
        run_id TEXT,
        iteration INTEGER,
        system TEXT NOT NULL,
        workload TEXT NOT NULL,
        software TEXT NOT NULL,
        scope TEXT NOT NULL CHECK (scope IN ('system', 'software', 'workload')),
        layer TEXT NOT NULL CHECK (layer IN ('L1', 'L2', 'L3')),
        strategy TEXT NOT NULL,
        strategy_name TEXT,
        change TEXT NOT NULL,
        metric TEXT NOT NULL,
        metric_scope TEXT NOT NULL CHECK (metric_scope IN ('app', 'system')),
        lower_is_better INTEGER NOT NULL,
        before_median REAL,
        before_ci_lo REAL,
        before_ci_hi REAL,
        after_median REAL,
        after_ci_lo REAL,
        after_ci_hi REAL,
        change_pct REAL,
        ratio_ci_lo REAL,
        ratio_ci_hi REAL,
        p_value REAL,
        comparison_verdict TEXT,
        comparison_reason TEXT,
        comparison TEXT,
        app_metric TEXT,
        app_before REAL,
        app_after REAL,
        app_lower_is_better INTEGER NOT NULL,
        app_change_pct REAL,
        verdict TEXT NOT NULL
            CHECK (verdict IN ('win', 'no_change', 'regression', 'unsupported', 'rejected')),
        verdict_reason TEXT NOT NULL,
        guard_triggered INTEGER NOT NULL,
        guards TEXT NOT NULL,
        unchecked_guards TEXT NOT NULL,
        citation_id TEXT,
        citation TEXT,
        citation_url TEXT,
        caveats TEXT NOT NULL,
        fs_type TEXT
    )
    """,
    "CREATE INDEX records_scope ON records (scope, system, workload)",
    "CREATE INDEX records_strategy ON records (strategy)",
    "CREATE INDEX records_run ON records (run_id, iteration)",
    """
    CREATE TRIGGER records_no_update BEFORE UPDATE ON records
    BEGIN SELECT RAISE(ABORT, 'knowledge-base records are immutable (insert only)'); END
    """,
    """
    CREATE TRIGGER records_no_delete BEFORE DELETE ON records
    BEGIN SELECT RAISE(ABORT, 'knowledge-base records are immutable (insert only)'); END
    """,
)


def _create_v1(conn: sqlite3.Connection) -> None:
    for stmt in _SCHEMA_V1:
        conn.execute(stmt)


_V1_VERDICTS = "CHECK (verdict IN ('win', 'no_change', 'regression', 'unsupported', 'rejected'))"
_V2_VERDICTS = (
    "CHECK (verdict IN ('win', 'no_change', 'regression', 'unsupported', 'rejected', 'inconclusive'))"
)


def _allow_inconclusive(conn: sqlite3.Connection) -> None:
    """v2: the verdict ``inconclusive`` (a guard that cannot tell). SQLite cannot alter a CHECK
    constraint, so the table is rebuilt with the new one and every row copied unchanged."""
    for name in ("records_no_update", "records_no_delete"):
        conn.execute(f"DROP TRIGGER {name}")
    for name in ("records_scope", "records_strategy", "records_run"):
        conn.execute(f"DROP INDEX {name}")
    conn.execute("ALTER TABLE records RENAME TO records_v1")
    for stmt in _SCHEMA_V1:
        conn.execute(stmt.replace(_V1_VERDICTS, _V2_VERDICTS))
    conn.execute("INSERT INTO records SELECT * FROM records_v1")
    conn.execute("DROP TABLE records_v1")


assert _V1_VERDICTS in _SCHEMA_V1[0]

_V3_VERDICTS = _V2_VERDICTS.replace("'inconclusive'", "'inconclusive', 'pending'")
_V1_LAST_COLUMN = "fs_type TEXT\n"
assert _V1_LAST_COLUMN in _SCHEMA_V1[0]


def _allow_pending(conn: sqlite3.Connection) -> None:
    """v3: the verdict ``pending`` (a win the traces cannot settle, waiting for a person) and the
    column ``supersedes`` (the earlier record a person's answer or a new measurement settles).
    Rebuilt like v2 (SQLite cannot alter a CHECK); every row is copied unchanged."""
    for name in ("records_no_update", "records_no_delete"):
        conn.execute(f"DROP TRIGGER {name}")
    for name in ("records_scope", "records_strategy", "records_run"):
        conn.execute(f"DROP INDEX {name}")
    conn.execute("ALTER TABLE records RENAME TO records_v2")
    table = (
        _SCHEMA_V1[0]
        .replace(_V1_VERDICTS, _V3_VERDICTS)
        .replace(_V1_LAST_COLUMN, "fs_type TEXT,\n        supersedes INTEGER REFERENCES records (id)\n")
    )
    for stmt in (table, *_SCHEMA_V1[1:]):
        conn.execute(stmt)
    conn.execute("CREATE INDEX records_supersedes ON records (supersedes)")
    conn.execute("INSERT INTO records SELECT *, NULL FROM records_v2")
    conn.execute("DROP TABLE records_v2")


_V4_VERDICTS = _V3_VERDICTS.replace("'pending'", "'pending', 'failed'")


def _allow_failed(conn: sqlite3.Connection) -> None:
    """v4: the verdict ``failed`` (the program refused or crashed under the change: a value it
    rejects is remembered, not tried again by every run). Rebuilt like v2 and v3 (SQLite cannot
    alter a CHECK); every row is copied unchanged."""
    for name in ("records_no_update", "records_no_delete"):
        conn.execute(f"DROP TRIGGER {name}")
    for name in ("records_scope", "records_strategy", "records_run", "records_supersedes"):
        conn.execute(f"DROP INDEX {name}")
    table = conn.execute(
        "SELECT sql FROM sqlite_master WHERE type = 'table' AND name = 'records'"
    ).fetchone()[0]
    if _V3_VERDICTS not in table:
        raise KbError("the knowledge base's records table is not the one schema version 3 made")
    conn.execute("ALTER TABLE records RENAME TO records_v3")
    conn.execute(table.replace(_V3_VERDICTS, _V4_VERDICTS))
    for stmt in _SCHEMA_V1[1:]:
        conn.execute(stmt)
    conn.execute("CREATE INDEX records_supersedes ON records (supersedes)")
    conn.execute("INSERT INTO records SELECT * FROM records_v3")
    conn.execute("DROP TABLE records_v3")


#: The migration hook: ``MIGRATIONS[n]`` upgrades a database at version ``n`` to ``n + 1``.
#: Version 0 is an empty file. Add an entry (and bump SCHEMA_VERSION) for every schema change;
#: all steps run in one transaction, so a failed upgrade leaves the file untouched.
MIGRATIONS: dict[int, Callable[[sqlite3.Connection], None]] = {
    0: _create_v1,
    1: _allow_inconclusive,
    2: _allow_pending,
    3: _allow_failed,
}


def now() -> str:
    return datetime.now(UTC).isoformat(timespec="microseconds")


def _ensure_schema(conn: sqlite3.Connection) -> None:
    conn.execute(
        "CREATE TABLE IF NOT EXISTS schema_version (version INTEGER NOT NULL, applied TEXT NOT NULL)"
    )
    if (conn.execute("SELECT MAX(version) FROM schema_version").fetchone()[0] or 0) == SCHEMA_VERSION:
        return
    conn.execute("BEGIN IMMEDIATE")  # another process may be migrating: look again under the lock
    try:
        version = conn.execute("SELECT MAX(version) FROM schema_version").fetchone()[0] or 0
        if version > SCHEMA_VERSION:
            raise KbError(
                f"the knowledge base is at schema version {version}, newer than this dftune "
                f"understands ({SCHEMA_VERSION}); upgrade dftune"
            )
        while version < SCHEMA_VERSION:
            MIGRATIONS[version](conn)
            version += 1
            conn.execute("INSERT INTO schema_version (version, applied) VALUES (?, ?)", (version, now()))
        conn.execute("COMMIT")
    except BaseException:
        conn.execute("ROLLBACK")
        raise


#: SQLite's words for a damaged file (as opposed to a full disk or a bad query).
_DAMAGED = ("malformed", "not a database", "disk image", "corrupt", "no such table")


@contextmanager
def connect(db: Path | str | None) -> Iterator[sqlite3.Connection]:
    """A connection to the knowledge base, its schema current. Opening is serialized across
    processes (a lock file beside it): two workloads of a campaign that open a new knowledge base
    at once must not take each other's file, 0 bytes until its schema is written, for damage."""
    path = Path(db) if db is not None else default_db_path()
    try:
        path.parent.mkdir(parents=True, exist_ok=True)
        with _opening(path):
            fresh = not path.exists()
            if not fresh and path.stat().st_size == 0:  # sqlite would silently start an empty KB in it
                raise KbError(
                    f"the knowledge base {path} is empty (0 bytes): it is never recreated over a damaged "
                    "file; dftune kb restore (or --from FILE)"
                )
            conn = sqlite3.connect(path, timeout=30.0, isolation_level=None)
            try:
                conn.row_factory = sqlite3.Row
                _ensure_schema(conn)
            except BaseException:
                conn.close()
                raise
    except OSError as exc:
        if is_storage_error(exc):
            raise storage_error(exc, path) from exc
        raise
    except sqlite3.DatabaseError as exc:
        said = _database_error(exc, path, fresh)
        if said is exc:
            raise
        raise said from exc
    try:
        yield conn
    except sqlite3.DatabaseError as exc:
        said = _database_error(exc, path, False)
        if said is exc:
            raise
        raise said from exc
    finally:
        conn.close()


@contextmanager
def _opening(path: Path) -> Iterator[None]:
    """Hold ``<kb>.lock`` exclusively (released when the process dies)."""
    import fcntl

    with open(path.with_name(path.name + ".lock"), "a") as lock:
        fcntl.flock(lock, fcntl.LOCK_EX)
        try:
            yield
        finally:
            fcntl.flock(lock, fcntl.LOCK_UN)


def _database_error(exc: sqlite3.DatabaseError, path: Path, fresh: bool) -> Exception:
    if fresh and path.exists() and path.stat().st_size == 0:
        path.unlink()  # our own empty file (the disk filled up): not a damaged KB next time
    if is_storage_error(exc):
        return storage_error(exc, path)
    if any(word in str(exc).lower() for word in _DAMAGED):
        return KbError(f"the knowledge base {path} is damaged ({exc}): dftune kb restore (or --from FILE)")
    return exc


# --------------------------------------------------------------------------- rows


def _split(ci: tuple[float, float] | None) -> tuple[float | None, float | None]:
    return (ci[0], ci[1]) if ci is not None else (None, None)


def to_row(f: dict[str, Any]) -> dict[str, Any]:
    before_lo, before_hi = _split(f["before_ci"])
    after_lo, after_hi = _split(f["after_ci"])
    ratio_lo, ratio_hi = _split(f["ratio_ci95"])
    return {
        "dedup_key": f["dedup_key"],
        "created": f["created"],
        "run_id": f["run_id"],
        "iteration": f["iteration"],
        "system": f["system"],
        "workload": f["workload"],
        "software": ",".join(f["software"]),
        "scope": f["scope"],
        "layer": f["layer"],
        "strategy": f["strategy"],
        "strategy_name": f["strategy_name"],
        "change": strictjson.dumps_checked(f["change"], "the knowledge base record", sort_keys=True),
        "metric": f["metric"],
        "metric_scope": f["metric_scope"],
        "lower_is_better": int(f["lower_is_better"]),
        "before_median": f["before"],
        "before_ci_lo": before_lo,
        "before_ci_hi": before_hi,
        "after_median": f["after"],
        "after_ci_lo": after_lo,
        "after_ci_hi": after_hi,
        "change_pct": f["change_pct"],
        "ratio_ci_lo": ratio_lo,
        "ratio_ci_hi": ratio_hi,
        "p_value": f["p_value"],
        "comparison_verdict": f["comparison_verdict"],
        "comparison_reason": f["comparison_reason"],
        "comparison": (
            strictjson.dumps_checked(f["comparison"], "the knowledge base record", sort_keys=True)
            if f["comparison"] is not None
            else None
        ),
        "app_metric": f["app_metric"],
        "app_before": f["app_before"],
        "app_after": f["app_after"],
        "app_lower_is_better": int(f["app_lower_is_better"]),
        "app_change_pct": f["app_change_pct"],
        "verdict": f["verdict"],
        "verdict_reason": f["verdict_reason"],
        "guard_triggered": int(f["guard_triggered"]),
        "guards": strictjson.dumps_checked(
            [d.model_dump(mode="json") for d in f["guards"]], "the knowledge base record", sort_keys=True
        ),
        "unchecked_guards": strictjson.dumps_checked(f["unchecked_guards"], "the knowledge base record"),
        "citation_id": f["citation_id"],
        "citation": f["citation"],
        "citation_url": f["citation_url"],
        "caveats": f["caveats"],
        "fs_type": f["fs_type"],
        "supersedes": f.get("supersedes"),
    }


def _pair(lo: float | None, hi: float | None) -> tuple[float, float] | None:
    return (lo, hi) if lo is not None and hi is not None else None


def _number(value: Any) -> Any:
    """A stored number as read: a non-finite one (only an older version could store it) is unknown."""
    return None if isinstance(value, float) and not math.isfinite(value) else value


def from_row(row: sqlite3.Row) -> KbRecord:
    """The record of a row; a non-finite number in it reads as unknown (None), so one poisoned row
    never breaks a lookup or a JSON answer."""
    row = {k: _number(row[k]) for k in row.keys()}  # type: ignore[assignment]  # noqa: SIM118 (a Row iterates values)
    return KbRecord(
        id=row["id"],
        created=row["created"],
        run_id=row["run_id"],
        iteration=row["iteration"],
        system=row["system"],
        workload=row["workload"],
        software=[s for s in row["software"].split(",") if s],
        scope=row["scope"],
        layer=row["layer"],
        strategy=row["strategy"],
        strategy_name=row["strategy_name"],
        change=json.loads(row["change"]),
        metric=row["metric"],
        metric_scope=row["metric_scope"],
        lower_is_better=bool(row["lower_is_better"]),
        before=row["before_median"],
        before_ci=_pair(row["before_ci_lo"], row["before_ci_hi"]),
        after=row["after_median"],
        after_ci=_pair(row["after_ci_lo"], row["after_ci_hi"]),
        change_pct=row["change_pct"],
        ratio_ci95=_pair(row["ratio_ci_lo"], row["ratio_ci_hi"]),
        p_value=row["p_value"],
        comparison_verdict=row["comparison_verdict"],
        comparison_reason=row["comparison_reason"],
        comparison=json.loads(row["comparison"]) if row["comparison"] is not None else None,
        app_metric=row["app_metric"],
        app_before=row["app_before"],
        app_after=row["app_after"],
        app_lower_is_better=bool(row["app_lower_is_better"]),
        app_change_pct=row["app_change_pct"],
        verdict=row["verdict"],
        verdict_reason=row["verdict_reason"],
        guard_triggered=bool(row["guard_triggered"]),
        guards=[GuardDecision.model_validate(d) for d in json.loads(row["guards"])],
        unchecked_guards=json.loads(row["unchecked_guards"]),
        citation_id=row["citation_id"],
        citation=row["citation"],
        citation_url=row["citation_url"],
        caveats=row["caveats"],
        fs_type=row["fs_type"],
        dedup_key=row["dedup_key"],
        supersedes=row["supersedes"],
    )
