"""One SQLite checkpointer per run, whose serializer loads only the state's own types.

``runs/<run_id>/checkpoints.sqlite``; the graph is streamed with durability ``sync`` so a
checkpoint is on disk before the next node starts. The serializer never unpickles and
accepts exactly :data:`dftune.core.domain.run.STATE_MODELS` and the state itself (plus JSON):
a checkpoint file cannot make dftune instantiate arbitrary classes. A full or read-only disk is a
:class:`~dftune.core.errors.StorageError` naming the checkpoint file (the last saved state stays
intact and the run resumable), never an anonymous "database or disk is full"; a file that is not
an SQLite database, or one damaged (cut short, overwritten), is a :class:`CheckpointDamaged` naming
it, never an internal error.
"""

from __future__ import annotations

import sqlite3
from collections.abc import Iterator
from contextlib import contextmanager
from pathlib import Path
from typing import Any

from langgraph.checkpoint.serde.jsonplus import JsonPlusSerializer
from langgraph.checkpoint.sqlite import SqliteSaver
from pydantic import BaseModel

from dftune.core.domain.run import STATE_MODELS, TuningState
from dftune.core.errors import DftuneError, is_storage_error, storage_error

CHECKPOINT_FILE = "checkpoints.sqlite"
#: SQLite's own names for "this database is damaged" and "this is not a database" (and their
#: extended codes, SQLITE_CORRUPT_INDEX and the like)
_DAMAGED = ("SQLITE_CORRUPT", "SQLITE_NOTADB")


class CheckpointDamaged(DftuneError):
    """The run's checkpoint file is not an SQLite database, or is damaged: its saved states cannot be read."""


def _damaged(exc: BaseException, path: Path) -> CheckpointDamaged | None:
    """The one-line error for a damaged checkpoint file, None for any other failure."""
    if not isinstance(exc, sqlite3.DatabaseError):
        return None
    name = str(getattr(exc, "sqlite_errorname", "") or "")
    if name.startswith(_DAMAGED) or any(m in str(exc).lower() for m in ("malformed", "not a database")):
        return CheckpointDamaged(
            f"{path}: not a checkpoint database, or damaged ({exc}); the run's saved states cannot be "
            "read: restore the file from a copy, or start the run again"
        )
    return None


def _failure(exc: BaseException, path: Path) -> BaseException | None:
    """What a failure of the checkpoint file is said as: a storage or a damage error, else None."""
    if is_storage_error(exc):
        return storage_error(exc, path)
    return _damaged(exc, path)


def serializer() -> JsonPlusSerializer:
    models: list[type[BaseModel]] = [*STATE_MODELS, TuningState]
    allowed = [(m.__module__, m.__name__) for m in models]
    return JsonPlusSerializer(pickle_fallback=False, allowed_msgpack_modules=allowed)


class RunSaver(SqliteSaver):
    """The SqliteSaver whose storage failures name the checkpoint file."""

    def __init__(self, conn: sqlite3.Connection, path: Path, **kw: Any) -> None:
        super().__init__(conn, **kw)
        self.path = path

    @contextmanager
    def _storage(self) -> Iterator[None]:
        try:
            yield
        except (sqlite3.Error, OSError) as exc:
            if (said := _failure(exc, self.path)) is not None:
                raise said from exc
            raise

    def put(self, *args: Any, **kw: Any) -> Any:
        with self._storage():
            return super().put(*args, **kw)

    def put_writes(self, *args: Any, **kw: Any) -> None:
        with self._storage():
            super().put_writes(*args, **kw)

    def get_tuple(self, *args: Any, **kw: Any) -> Any:
        with self._storage():
            return super().get_tuple(*args, **kw)

    def list(self, *args: Any, **kw: Any) -> Any:
        with self._storage():
            yield from super().list(*args, **kw)

    def setup(self) -> None:
        with self._storage():
            super().setup()


def open_checkpointer(path: Path) -> SqliteSaver:
    """A SqliteSaver on ``path`` (created if needed); close it with ``saver.conn.close()``."""
    conn: sqlite3.Connection | None = None
    try:
        path.parent.mkdir(parents=True, exist_ok=True)
        conn = sqlite3.connect(str(path), check_same_thread=False, timeout=30.0)
        conn.execute("PRAGMA journal_mode=WAL")
        conn.execute("PRAGMA synchronous=FULL")
    except (sqlite3.Error, OSError) as exc:
        if conn is not None:
            conn.close()
        if (said := _failure(exc, path)) is not None:
            raise said from exc
        raise
    return RunSaver(conn, path, serde=serializer())


def copy_branch(source: Path, thread: str, checkpoint_id: str, target: SqliteSaver, new_thread: str) -> int:
    """Copy the saved states leading to ``checkpoint_id`` (it and its ancestors, with their
    pending writes) from the run ``thread`` in ``source`` into ``target`` as the run
    ``new_thread``: a replay starts its own run from them and never writes into the original's
    file. Returns how many states were copied (0: no such checkpoint)."""
    try:
        chain, checkpoints, writes = _branch_rows(source, thread, checkpoint_id)
    except sqlite3.Error as exc:
        if (said := _failure(exc, source)) is not None:
            raise said from exc
        raise
    if not chain:
        return 0
    target.setup()
    with target.conn:
        target.conn.executemany(
            "INSERT INTO checkpoints (thread_id, checkpoint_ns, checkpoint_id, parent_checkpoint_id, "
            "type, checkpoint, metadata) VALUES (?, ?, ?, ?, ?, ?, ?)",
            [(new_thread, *row) for row in checkpoints],
        )
        target.conn.executemany(
            "INSERT INTO writes (thread_id, checkpoint_ns, checkpoint_id, task_id, task_path, idx, "
            "channel, type, value) VALUES (?, ?, ?, ?, ?, ?, ?, ?, ?)",
            [(new_thread, *row) for row in writes],
        )
    return len(chain)


def _branch_rows(source: Path, thread: str, checkpoint_id: str) -> tuple[list[str], list[Any], list[Any]]:
    """The chain of checkpoint ids from ``checkpoint_id`` up, and its checkpoint and write rows."""
    src = sqlite3.connect(f"file:{source}?mode=ro", uri=True, timeout=30.0)
    try:
        chain: list[str] = []
        current: str | None = checkpoint_id
        while current is not None and current not in chain:
            row = src.execute(
                "SELECT parent_checkpoint_id FROM checkpoints WHERE thread_id=? AND checkpoint_ns='' "
                "AND checkpoint_id=?",
                (thread, current),
            ).fetchone()
            if row is None:
                break
            chain.append(current)
            current = row[0]
        if not chain:
            return chain, [], []
        marks = ",".join("?" * len(chain))
        checkpoints = src.execute(
            "SELECT checkpoint_ns, checkpoint_id, parent_checkpoint_id, type, checkpoint, metadata "
            f"FROM checkpoints WHERE thread_id=? AND checkpoint_id IN ({marks})",
            (thread, *chain),
        ).fetchall()
        writes = src.execute(
            "SELECT checkpoint_ns, checkpoint_id, task_id, task_path, idx, channel, type, value "
            f"FROM writes WHERE thread_id=? AND checkpoint_id IN ({marks})",
            (thread, *chain),
        ).fetchall()
    finally:
        src.close()
    return chain, checkpoints, writes
