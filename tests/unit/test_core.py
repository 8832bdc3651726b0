"""core: the pieces every layer shares (atomic files, the error line)."""

from __future__ import annotations

import os
from pathlib import Path

import pytest

from dftune.core.errors import DftuneError, one_line
from dftune.core.fsio import atomic_file, atomic_write_bytes


def test_atomic_write_replaces_and_sets_the_mode(tmp_path: Path) -> None:
    target = tmp_path / "f.json"
    target.write_bytes(b"old")
    atomic_write_bytes(target, b"new", 0o600)
    assert target.read_bytes() == b"new"
    assert target.stat().st_mode & 0o777 == 0o600
    assert [p.name for p in tmp_path.iterdir()] == ["f.json"]  # no temporary file left


def test_a_failed_write_leaves_the_old_bytes_and_no_temporary(tmp_path: Path) -> None:
    target = tmp_path / "f"
    target.write_bytes(b"old")
    with pytest.raises(RuntimeError), atomic_file(target) as fh:
        fh.write(b"half")
        raise RuntimeError("disk went away")
    assert target.read_bytes() == b"old"
    assert [p.name for p in tmp_path.iterdir()] == ["f"]


def test_a_planted_link_is_replaced_not_followed(tmp_path: Path) -> None:
    outside = tmp_path / "outside"
    outside.write_bytes(b"precious")
    link = tmp_path / "report.md"
    os.symlink(outside, link)
    atomic_write_bytes(link, b"report")
    assert outside.read_bytes() == b"precious"
    assert not link.is_symlink() and link.read_bytes() == b"report"


def test_exclusive_never_replaces(tmp_path: Path) -> None:
    target = tmp_path / "run.json"
    atomic_write_bytes(target, b"first", exclusive=True)
    with pytest.raises(FileExistsError):
        atomic_write_bytes(target, b"second", exclusive=True)
    assert target.read_bytes() == b"first"
    assert [p.name for p in tmp_path.iterdir()] == ["run.json"]


def test_one_line_folds_and_caps() -> None:
    assert one_line(DftuneError("a.toml:\n  bad   key")) == "a.toml: bad key"
    assert len(one_line(DftuneError("x" * 5000), limit=100)) == 100
    assert one_line(KeyError()) == "KeyError"
