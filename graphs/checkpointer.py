"""One SQLite checkpointer per run, whose serializer loads only the state's own types.

``runs/<run_id>/checkpoints.sqlite``; the graph is streamed with durability ``sync`` so a
checkpoint is on disk before the next node starts. The serializer never unpickles and
accepts exactly :data:`dftune.agents.state.STATE_MODELS` and the state itself (plus JSON): a checkpoint file
cannot make dftune instantiate arbitrary classes.
"""

from __future__ import annotations

import sqlite3
from pathlib import Path

from langgraph.checkpoint.serde.jsonplus import JsonPlusSerializer
from langgraph.checkpoint.sqlite import SqliteSaver

from dftune.agents.state import STATE_MODELS, TuningState

CHECKPOINT_FILE = "checkpoints.sqlite"


def serializer() -> JsonPlusSerializer:
    allowed = [(m.__module__, m.__name__) for m in (*STATE_MODELS, TuningState)]
    return JsonPlusSerializer(pickle_fallback=False, allowed_msgpack_modules=allowed)


def open_checkpointer(path: Path) -> SqliteSaver:
    """A SqliteSaver on ``path`` (created if needed); close it with ``saver.conn.close()``."""
    path.parent.mkdir(parents=True, exist_ok=True)
    conn = sqlite3.connect(str(path), check_same_thread=False, timeout=30.0)
    conn.execute("PRAGMA journal_mode=WAL")
    conn.execute("PRAGMA synchronous=FULL")
    return SqliteSaver(conn, serde=serializer())
