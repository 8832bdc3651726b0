"""The KB's health: an integrity check before a run, a rolling backup after it, and restore.

A knowledge base is years of measurements; a damaged one is never silently replaced by an
empty one. :func:`check_kb` runs at the start of every drive (``PRAGMA integrity_check``; a
zero-byte or truncated file is refused with its path), :func:`backup_kb` keeps the last
:data:`KEEP` good copies under ``kb/backups/`` (SQLite's online backup API, so a copy is
consistent even while another process writes), and :func:`restore_kb` (``dftune kb restore``)
puts the newest good copy (or a given file) back, moving the damaged one aside, never deleting it.
"""

from __future__ import annotations

import os
import sqlite3
from datetime import UTC, datetime
from pathlib import Path
from typing import Any

from dftune.core.errors import is_storage_error, storage_error
from dftune.core.fsio import fsync_dir
from dftune.tools.kb.models import KbError, default_db_path

BACKUP_DIR = "backups"
KEEP = 5
#: SQLite's companion files: moved aside with a damaged KB (a stale journal would "repair" it wrongly).
SIDE_FILES = ("-journal", "-wal", "-shm")


def _restore_hint(path: Path) -> str:
    return f"dftune kb restore (from {path.parent / BACKUP_DIR}) or dftune kb restore --from FILE"


def integrity(path: Path) -> str | None:
    """Why ``path`` is not a healthy KB file, or None when it is (read only; touches nothing)."""
    try:
        size = path.stat().st_size
    except OSError as exc:
        return f"cannot be read ({exc.strerror or exc})"
    if size == 0:
        return "is empty (0 bytes), so it was truncated or never completed"
    try:
        conn = sqlite3.connect(f"{path.resolve().as_uri()}?mode=ro", uri=True, timeout=30.0)
    except sqlite3.Error as exc:
        return f"cannot be opened ({exc})"
    try:
        rows = [r[0] for r in conn.execute("PRAGMA integrity_check").fetchall()]
        if rows != ["ok"]:
            return f"fails SQLite's integrity check ({'; '.join(str(r) for r in rows[:3])})"
        tables = {r[0] for r in conn.execute("SELECT name FROM sqlite_master WHERE type = 'table'")}
        if not {"records", "schema_version"} <= tables:
            return "is an SQLite file but not a dftune knowledge base (no records table)"
    except sqlite3.Error as exc:
        return f"is not a readable SQLite database ({exc})"
    finally:
        conn.close()
    return None


def check_kb(db: Path | str | None = None) -> Path:
    """Refuse (KbError, with the path) a damaged KB before anything is measured; a missing one is
    fine (it is created on first use)."""
    path = Path(db) if db is not None else default_db_path()
    if not path.exists():
        return path
    why = integrity(path)
    if why is not None:
        raise KbError(
            f"the knowledge base {path} {why}: it is never recreated over a damaged file; "
            f"{_restore_hint(path)}"
        )
    return path


def _stamp() -> str:
    return datetime.now(UTC).strftime("%Y%m%dT%H%M%S%fZ")


def backups(db: Path | str | None = None) -> list[Path]:
    """The rolling backups of the KB, newest first."""
    path = Path(db) if db is not None else default_db_path()
    folder = path.parent / BACKUP_DIR
    if not folder.is_dir():
        return []
    return sorted(folder.glob(f"{path.stem}-*.sqlite"), reverse=True)


def _copy(src: Path, dest: Path) -> None:
    """A consistent copy through SQLite's backup API, written to a temporary name and renamed."""
    tmp = dest.parent / f".{dest.name}.tmp"
    tmp.unlink(missing_ok=True)
    source = sqlite3.connect(f"{src.resolve().as_uri()}?mode=ro", uri=True, timeout=30.0)
    target = sqlite3.connect(tmp)
    try:
        source.backup(target)
    finally:
        target.close()
        source.close()
    fd = os.open(tmp, os.O_RDONLY)
    try:
        os.fsync(fd)
    finally:
        os.close(fd)
    os.replace(tmp, dest)
    fsync_dir(dest.parent)


def backup_kb(db: Path | str | None = None, keep: int = KEEP) -> Path | None:
    """Copy a healthy KB to ``kb/backups/<name>-<time>.sqlite`` and keep the newest ``keep``; None when
    there is nothing (new) to keep. A damaged KB is never backed up over the good copies."""
    path = Path(db) if db is not None else default_db_path()
    if not path.exists() or integrity(path) is not None:
        return None
    existing = backups(path)
    if existing and existing[0].stat().st_mtime_ns >= path.stat().st_mtime_ns:
        return None  # unchanged since the newest copy
    folder = path.parent / BACKUP_DIR
    try:
        folder.mkdir(parents=True, exist_ok=True)
        dest = folder / f"{path.stem}-{_stamp()}.sqlite"
        _copy(path, dest)
    except (OSError, sqlite3.Error) as exc:
        if is_storage_error(exc):
            raise storage_error(exc, folder) from exc
        raise
    for old in backups(path)[keep:]:
        old.unlink(missing_ok=True)
    return dest


def restore_kb(source: Path | str | None = None, db: Path | str | None = None) -> dict[str, Any]:
    """Put a good copy back: ``source`` or the newest backup that passes the integrity check. The
    current file (damaged or not) is moved aside as ``<name>.damaged-<time>``, never deleted."""
    path = Path(db) if db is not None else default_db_path()
    if source is not None:
        src = Path(source)
        why = integrity(src) if src.exists() else "does not exist"
        if why is not None:
            raise KbError(f"cannot restore the knowledge base from {src}: it {why}")
    else:
        good = [b for b in backups(path) if integrity(b) is None]
        if not good:
            raise KbError(
                f"no good backup of the knowledge base under {path.parent / BACKUP_DIR}; "
                "give one with dftune kb restore --from FILE"
            )
        src = good[0]
    path.parent.mkdir(parents=True, exist_ok=True)
    moved: list[str] = []
    stamp = _stamp()
    for suffix in ("", *SIDE_FILES):
        current = Path(f"{path}{suffix}")
        if current.exists():
            aside = Path(f"{path}.damaged-{stamp}{suffix}")
            os.replace(current, aside)
            moved.append(str(aside))
    _copy(src, path)
    conn = sqlite3.connect(f"{path.resolve().as_uri()}?mode=ro", uri=True)
    try:
        records = int(conn.execute("SELECT count(*) FROM records").fetchone()[0])
    finally:
        conn.close()
    return {
        "schema": "dftune.kb.restore/1",
        "kb": str(path),
        "restored_from": str(src),
        "records": records,
        "moved_aside": moved,
    }
