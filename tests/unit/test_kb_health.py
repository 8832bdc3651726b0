"""A damaged KB is refused with its path, never recreated empty; backups roll; restore puts one back."""

from __future__ import annotations

import json
import os
import sqlite3
from pathlib import Path

import pytest
from typer.testing import CliRunner

from dftune.cli import app
from dftune.tools.kb import KbError, default_db_path, opt_kb_lookup, opt_kb_record, opt_kb_records
from dftune.tools.kb.backup import backup_kb, backups, check_kb, integrity, restore_kb


def record(n: int) -> dict[str, object]:
    return {
        "run_id": f"run-{n}",
        "iteration": 1,
        "system": "node-a",
        "workload": "reader",
        "software": "posix",
        "strategy": "l1.dataloader_workers",
        "change": {"READERS": n},
        "metric": "wall_time_s",
        "before": 10.0,
        "after": 9.0,
    }


@pytest.fixture
def kb() -> Path:
    for n in range(3):
        opt_kb_record(record(n))
    return default_db_path()


def damage(path: Path, how: str) -> None:
    data = path.read_bytes()
    if how == "zero-byte":
        path.write_bytes(b"")
    elif how == "truncated":
        path.write_bytes(data[: len(data) // 2])
    else:  # the header survives, every page after it is garbage
        path.write_bytes(data[:100] + os.urandom(len(data) - 100))


@pytest.mark.parametrize("how", ["zero-byte", "truncated", "garbage"])
def test_a_damaged_kb_is_refused_with_its_path_and_never_recreated(kb: Path, how: str) -> None:
    damage(kb, how)
    before = kb.read_bytes()
    with pytest.raises(KbError, match=str(kb)):
        check_kb()
    with pytest.raises(KbError, match=str(kb)):  # every reader and writer, not only the run's start
        opt_kb_lookup(system="node-a", workload="reader")
    with pytest.raises(KbError, match=str(kb)):
        opt_kb_record(record(9))
    assert kb.read_bytes() == before  # nothing was written over it
    res = CliRunner().invoke(app, ["kb", "lookup", "--workload", "reader"])
    assert res.exit_code == 2 and str(kb) in res.stderr and len(res.stderr.strip().splitlines()) == 1


def test_a_missing_kb_is_simply_new() -> None:
    assert not default_db_path().exists()
    assert check_kb() == default_db_path()
    assert opt_kb_records() == []


def test_backups_roll_and_restore_puts_the_newest_good_one_back(kb: Path) -> None:
    first = backup_kb(keep=2)
    assert first is not None and integrity(first) is None
    assert backup_kb(keep=2) is None  # unchanged since: nothing new to keep
    for n in range(3, 6):
        opt_kb_record(record(n))
        assert backup_kb(keep=2) is not None
    assert len(backups()) == 2  # only the newest two are kept
    damage(kb, "truncated")
    assert backup_kb(keep=2) is None  # a damaged KB never replaces a good copy
    doc = restore_kb()
    assert doc["records"] == 6 and doc["restored_from"] == str(backups()[0])
    assert [Path(p).name.startswith("opt_kb.sqlite.damaged-") for p in doc["moved_aside"]] == [True]
    assert len(opt_kb_records()) == 6 and check_kb() == kb


def test_kb_restore_from_a_file_and_refusals(kb: Path, tmp_path: Path) -> None:
    copy = tmp_path / "copy.sqlite"
    src, dst = sqlite3.connect(kb), sqlite3.connect(copy)
    src.backup(dst)
    src.close()
    dst.close()
    bad = tmp_path / "bad.sqlite"
    bad.write_bytes(b"not a database at all" * 100)
    runner = CliRunner()
    res = runner.invoke(app, ["kb", "restore", "--from", str(bad)])
    assert res.exit_code == 2 and str(bad) in res.stderr
    damage(kb, "zero-byte")
    res = runner.invoke(app, ["kb", "restore", "--json"])  # no backup was ever made
    assert res.exit_code == 2 and "no good backup" in res.stderr
    res = runner.invoke(app, ["kb", "restore", "--from", str(copy), "--json"])
    assert res.exit_code == 0, res.output
    doc = json.loads(res.stdout)
    assert doc["records"] == 3 and doc["restored_from"] == str(copy)
    assert len(opt_kb_records()) == 3
