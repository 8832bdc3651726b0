"""One SQLite checkpointer per run, whose serializer loads only the state's own types.

``runs/<run_id>/checkpoints.sqlite``; the graph is streamed with durability ``sync`` so a
checkpoint is on disk before the next node starts. The serializer never unpickles and
accepts exactly :data:`dftune.core.domain.run.STATE_MODELS` and the state itself (plus JSON):
a checkpoint file cannot make dftune instantiate arbitrary classes. A full or read-only disk is a
:class:`~dftune.core.errors.StorageError` naming the checkpoint file (the last saved state stays
intact and the run resumable), never an anonymous "database or disk is full".
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
from dftune.core.errors import is_storage_error, storage_error

CHECKPOINT_FILE = "checkpoints.sqlite"


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
            if is_storage_error(exc):
                raise storage_error(exc, self.path) from exc
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


def open_checkpointer(path: Path) -> SqliteSaver:
    """A SqliteSaver on ``path`` (created if needed); close it with ``saver.conn.close()``."""
    try:
        path.parent.mkdir(parents=True, exist_ok=True)
        conn = sqlite3.connect(str(path), check_same_thread=False, timeout=30.0)
        conn.execute("PRAGMA journal_mode=WAL")
        conn.execute("PRAGMA synchronous=FULL")
    except (sqlite3.Error, OSError) as exc:
        if is_storage_error(exc):
            raise storage_error(exc, path) from exc
        raise
    return RunSaver(conn, path, serde=serializer())
