"""Two processes (a campaign's workloads) open a new knowledge base at once: both get it, neither
takes the other's file, 0 bytes until its schema is written, for a damaged one."""

from __future__ import annotations

import multiprocessing
from pathlib import Path

import pytest

from dftune.tools.kb.schema import KbError, connect


def _open(db: str, barrier: multiprocessing.synchronize.Barrier, out: multiprocessing.Queue) -> None:  # type: ignore[type-arg]
    barrier.wait()
    try:
        with connect(db) as conn:
            conn.execute("SELECT 1")
        out.put("ok")
    except Exception as exc:  # the test reports what failed
        out.put(f"{type(exc).__name__}: {exc}")


def test_two_processes_creating_the_knowledge_base_at_once_both_succeed(tmp_path: Path) -> None:
    ctx = multiprocessing.get_context("fork")
    for n in range(8):
        db = str(tmp_path / f"kb{n}" / "opt_kb.sqlite")
        barrier, out = ctx.Barrier(3), ctx.Queue()
        procs = [ctx.Process(target=_open, args=(db, barrier, out)) for _ in range(3)]
        for p in procs:
            p.start()
        for p in procs:
            p.join(60)
        said = [out.get(timeout=10) for _ in procs]
        assert said == ["ok"] * 3, said


def test_an_empty_file_left_by_nothing_is_still_damage(tmp_path: Path) -> None:
    db = tmp_path / "opt_kb.sqlite"
    db.write_bytes(b"")
    with pytest.raises(KbError, match="is empty"), connect(db):
        pass
