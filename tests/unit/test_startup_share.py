"""The share of a run spent before its first data I/O (imports, framework start-up)."""

from __future__ import annotations

import gzip
import json
from pathlib import Path

from dftune.tools.trace.startup import first_data_io, startup

T0 = 1_800_000_000.0  # run start, epoch seconds


def _write(path: Path, events: list[dict]) -> None:
    with gzip.open(path, "wt") as fh:
        for ev in events:
            fh.write(json.dumps(ev) + "\n")


def _fh(name: str, h: str) -> dict:
    return {"name": "FH", "cat": "dftracer", "ph": 4, "args": {"name": name, "value": h}}


def _io(name: str, at_s: float, fhash: str, ret: int = 4096) -> dict:
    return {
        "name": name,
        "cat": "POSIX",
        "ph": 1,
        "ts": int((T0 + at_s) * 1e6),
        "dur": 10,
        "args": {"ret": ret, "fhash": fhash},
    }


def test_code_reads_are_start_up(tmp_path: Path) -> None:
    _write(
        tmp_path / "t-1-preload.pfw.gz",
        [
            _fh("/venv/lib/python3.11/site-packages/torch/__init__.py", "a"),
            _fh("/usr/lib/libc.so.6", "b"),
            _fh("/data/sample_0.bin", "c"),
            _io("read", 0.5, "a"),
            _io("read", 1.0, "b"),
            _io("read", 3.0, "c", ret=0),  # an empty read moves no data
            _io("read", 6.0, "c"),
        ],
    )
    got = startup(tmp_path, T0, wall_s=8.0)
    assert got is not None
    assert got.seconds == 6.0 and got.share == 0.75 and got.first_file == "/data/sample_0.bin"


def test_data_dir_preferred(tmp_path: Path) -> None:
    _write(
        tmp_path / "t.pfw.gz",
        [
            _fh("/tmp/scratch/log.bin", "x"),
            _fh("/data/s1.bin", "y"),
            _io("write", 1.0, "x"),
            _io("read", 2.0, "y"),
        ],
    )
    assert first_data_io(tmp_path, "/data")[1] == "/data/s1.bin"
    assert first_data_io(tmp_path, None)[1] == "/tmp/scratch/log.bin"


def test_legacy_inline_names(tmp_path: Path) -> None:
    ev = {
        "name": "read",
        "cat": "POSIX",
        "ph": "X",
        "ts": str(int((T0 + 2.5) * 1e6)),
        "dur": "5",
        "args": {"ret": "100", "fname": "/d/a.npz"},
    }
    (tmp_path / "trace-0-of-1.pfw").write_text("[\n" + json.dumps(ev) + "\n")
    got = startup(tmp_path, T0, wall_s=10.0)
    assert got is not None and got.seconds == 2.5


def test_no_data_io_or_foreign_clock(tmp_path: Path) -> None:
    _write(tmp_path / "t.pfw.gz", [_fh("/x/mod.py", "a"), _io("read", 1.0, "a")])
    assert startup(tmp_path, T0, wall_s=5.0) is None
    _write(
        tmp_path / "u.pfw.gz", [_fh("/d/a.bin", "b"), {**_io("read", 0, "b"), "ts": 123}]
    )  # not epoch time
    assert startup(tmp_path, T0, wall_s=5.0) is None
