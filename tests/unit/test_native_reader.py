"""The native C scanner and the DuckDB path give identical analyses, line quirk by quirk.

Each case is a small trace built to exercise one thing the scanner must get exactly right
(escapes, numbers written as strings, huge hashes, legacy syntax, aggregated records, the
position and overlap passes, gzip members, ...).  Every case is analysed with all views
twice, with ``DFTUNE_TRACE_NATIVE`` on and off, and the JSON documents must be equal.
Cases the scanner supports must really be read natively (so a scanner that silently
declined everything would fail here); cases it must decline must fall back to DuckDB.
"""

from __future__ import annotations

import gzip
import itertools
import json
import os
import random
import shutil
import sysconfig
from collections.abc import Callable
from pathlib import Path
from typing import Any

import pytest

from dftune.tools.trace import TraceError, native, reader
from dftune.tools.trace.reader import read_file_native
from tests.readers import analyze_with

VIEWS = ["summary", "file", "proc", "time", "layer"]

needs_native = pytest.mark.skipif(native.module() is None, reason="native trace scanner not built")


def _d(obj: dict[str, Any]) -> str:
    return json.dumps(obj, separators=(",", ":"))


def meta(kind: str, name: Any, value: Any, pid: int = 7, **args: Any) -> str:
    return _d(
        {
            "name": kind,
            "cat": "dftracer",
            "type": 1,
            "pid": pid,
            "tid": pid,
            "ph": 4,
            "args": {"hhash": "aa", "name": name, "value": value, **args},
        }
    )


def ev(
    name: str, ts: Any, dur: Any, cat: str | None = "POSIX", pid: Any = 7, ph: Any = 1, **args: Any
) -> str:
    obj: dict[str, Any] = {
        "id": 1,
        "name": name,
        "type": 3,
        "pid": pid,
        "tid": pid,
        "ts": ts,
        "dur": dur,
        "ph": ph,
        "args": {"hhash": "aa", **args},
    }
    if cat is not None:
        obj["cat"] = cat
    return _d(obj)


def write(path: Path, lines: list[str], *, gz: bool = True, end: str = "\n") -> Path:
    data = (end.join(lines) + end).encode()
    path.write_bytes(gzip.compress(data) if gz else data)
    return path


def run(paths: list[Path], mode: str, **kw: Any) -> dict[str, Any]:
    return analyze_with(paths, mode, views=VIEWS, **kw)


def assert_same(paths: list[Path], **kw: Any) -> dict[str, Any]:
    got, want = run(paths, "native", **kw), run(paths, "duckdb", **kw)
    assert got == want
    return got


def error_of(paths: list[Path], mode: str, **kw: Any) -> str:
    with pytest.raises(TraceError) as info:
        run(paths, mode, **kw)
    return str(info.value)


# --------------------------------------------------------------------------------------
# cases the native scanner reads itself


def _escapes() -> list[str]:
    return [
        meta("HH", 'h\u00f6st "one"', "aa"),
        meta("FH", '/d/caf\u00e9 "q"\\/x\n\t\u2603\U0001f600', "bb"),
        meta("SH", "python;a\\b.py", "cc"),
        ev("start", 1, 0, cat="dftracer", cmd_hash="cc", version="2.0\u00e9"),
        ev("open64", 2, 1, fhash="bb", flags=0),
        ev("read", 3, 2, fhash="bb", ret=100),
        ev('step "one"\ttab', 4, 5, cat='app/"x"', epoch="\u0031", step="a\u00e9"),
    ]


def _numbers_as_strings() -> list[str]:
    return [
        meta("FH", "/d/x", "bb"),
        ev("open", "10", "2", pid="5", fhash="bb", flags="0"),
        ev("read", "20", "3", pid="5", fhash="bb", ret="2048", count="4096"),
        ev("pread", 30, "4", pid=5, fhash="bb", ret=10, offset="8192"),
        ev("lseek", "40", 1, pid="5", fhash="bb", ret="-1", offset="100", whence="0"),
        ev("read", "50", "3", pid="5", fhash="bb", ret="-1125899906842624"),
    ]


def _missing_args() -> list[str]:
    no_args = _d({"name": "close", "cat": "POSIX", "pid": 7, "tid": 7, "ts": 30, "dur": 1, "ph": 1})
    null_args = _d(
        {"name": "stat", "cat": "POSIX", "pid": 7, "tid": 7, "ts": 31, "dur": 1, "ph": 1, "args": None}
    )
    empty_args = _d(
        {"name": "read", "cat": "POSIX", "pid": 7, "tid": 7, "ts": 32, "dur": 1, "ph": 1, "args": {}}
    )
    return [
        meta("FH", "/d/x", "bb"),
        ev("read", 10, 2, fhash="bb", ret=7),
        no_args,
        null_args,
        empty_args,
        ev("write", 40, 2, fhash="bb", ret=None, count=5),
        ev("fread", 50, 2, cat="STDIO", fhash="bb", ret=3),
    ]


def _huge_ints() -> list[str]:
    big = 18446744073709551615
    return [
        meta("HH", "node", 9509357668201227806),
        meta("FH", "/d/h", big),
        meta("FH", "/d/n", -12),
        ev("read", 1, 2, hhash=9509357668201227806, fhash=big, ret=2**50),
        ev("read", 5, 2, hhash=9509357668201227806, fhash=-12, ret=1, offset=-3),
        ev("write", 2**62 - 8, 7, hhash=9509357668201227806, fhash=big, ret=10),
    ]


def _legacy() -> list[str]:
    rows = [
        {
            "id": 1,
            "name": "HH",
            "cat": "dftracer",
            "pid": 3,
            "tid": 3,
            "ph": "M",
            "args": {"name": "n1", "value": 56},
        },
        {
            "id": 2,
            "name": "open",
            "cat": "POSIX",
            "pid": "3",
            "tid": "3",
            "ts": "100",
            "dur": "2",
            "ph": "X",
            "args": {"hostname": "lassen1", "fname": "/p/f", "ret": 3, "mode": 420, "fd": 18},
        },
        {
            "id": 3,
            "name": "read",
            "cat": "POSIX",
            "pid": "3",
            "tid": "3",
            "ts": "110",
            "dur": "3",
            "ph": "X",
            "args": {"hostname": "lassen1", "fname": "/p/f", "ret": "2048"},
        },
        {
            "id": 4,
            "name": "fclose",
            "cat": "STDIO",
            "pid": 3,
            "ts": 120,
            "dur": 1,
            "ph": "X",
            "args": {"hhash": 56, "fhash": 33084, "level": 1},
        },
    ]
    return ["[", *(_d(r) for r in rows), "]"]


def _aggregated() -> list[str]:
    def agg(name: str, ts: int, cat: str = "POSIX", **args: Any) -> str:
        return _d(
            {
                "name": name,
                "cat": cat,
                "type": 3,
                "ts": ts,
                "ph": 3,
                "pid": 1,
                "tid": 1,
                "args": {"hhash": "aa", **args},
            }
        )

    return [
        ev("start", 1, 0, cat="dftracer", pid=1),
        agg("write", 10, dur=795, ret=1048576, dft_cnt=1),
        agg("pread64", 20, dur_sum=30, ret_sum=8192, dft_cnt=2, size=4096),
        agg("fread", 30, cat="STDIO", dur_sum=9, ret_sum=6, size_min=10, size_max=10, dft_cnt=3),
        agg("fwrite", 30, cat="STDIO", dur_sum=9, ret_sum=6, size_min=10, size_max=20, dft_cnt=3),
        agg("close", 40, dur=10, ret=0, dft_cnt=1),
        agg("read", 50, cat="app", dur=10, ret=9, dft_cnt=1),
    ]


def _counters_and_odd_ph() -> list[str]:
    return [
        meta("FH", "/d/x", "bb"),
        ev("read", 10, 2, fhash="bb", ret=5),
        ev("mem", 11, 0, ph="C", cat="sys"),
        ev("mem", 12, 0, ph=2, cat="sys"),
        ev("span", 13, 4, ph="B", cat="app"),
        ev("i", 14, 0, ph="i"),
        ev("x", 15, 1, ph=7, cat="app"),
        ev("nocat", 16, 3, cat=None, epoch="1"),
    ]


def _nanoseconds() -> list[str]:
    return [
        meta("CM", "time_metric", "NS"),
        meta("FH", "/d/x", "bb"),
        ev("read", 1500, 500, fhash="bb", ret=10),
        ev("read", 2500, 499, fhash="bb", ret=10),
        ev("read", 3499, 1501, fhash="bb", ret=10),
        ev("compute", 1000, 2500, cat="ai_framework"),
    ]


def _positions() -> list[str]:
    a, b = "bb", "cc"
    lines = [
        meta("FH", "/d/a", a),
        meta("FH", "/d/b", b),
        ev("open64", 1, 1, fhash=a, flags=0),
        ev("read", 2, 1, fhash=a, ret=100),
        ev("read", 3, 1, fhash=a, ret=50),
        ev("read", 4, 1, fhash=a),  # unknown size: position lost
        ev("read", 5, 1, fhash=a, ret=10),
        ev("lseek64", 6, 1, fhash=a, ret=4096, offset=4096, whence=0),
        ev("read", 7, 1, fhash=a, ret=4096),
        ev("pread64", 8, 2, fhash=a, ret=4096, offset=0),
        ev("lseek", 9, 1, fhash=a, ret=-1, offset=300, whence=0),
        ev("read", 10, 1, fhash=a, ret=1),
        ev("lseek", 11, 1, fhash=a, ret=-1, offset=300, whence=1),
        ev("read", 12, 1, fhash=a, ret=1),
        ev("open", 13, 1, fhash=b, flags=1024 | 1),
        ev("write", 14, 3, fhash=b, ret=7),
        ev("fopen", 15, 1, cat="STDIO", fhash=b, mode="a+"),
        ev("fwrite", 16, 1, cat="STDIO", fhash=b, ret=2, size=9),
        ev("fopen64", 17, 1, cat="STDIO", fhash=b, mode="r"),
        ev("fread", 18, 1, cat="STDIO", fhash=b, ret=2, size=8),
        ev("fseek", 19, 1, cat="STDIO", fhash=b, ret=0, offset=8192, whence=0),
        ev("fread", 20, 1, cat="STDIO", fhash=b, ret=1, size=8),
        ev("fseeko", 21, 1, cat="STDIO", fhash=b, ret=0, offset=5, whence=2),
        ev("fread", 22, 1, cat="STDIO", fhash=b, ret=1, size=8),
        ev("rewind", 23, 1, cat="STDIO", fhash=b),
        ev("fread", 24, 1, cat="STDIO", fhash=b, ret=1, size=8),
        ev("read", 6, 1, fhash=a, ret=5),  # written late: out of ts order
        ev("read", 3, 1, fhash=a, ret=5, pid=8),
        ev("pwrite", 2, 1, fhash=a, ret=5, offset=4097, pid=8),
        ev("fsync", 25, 9, fhash=a, ret=0),
        ev("msync", 26, 1, ret=0),
        ev("unlink", 27, 1, fname="/d/c"),
    ]
    return lines


def _compute_overlap() -> list[str]:
    return [
        meta("FH", "/d/x", "bb"),
        ev("read", 10, 20, fhash="bb", ret=4096),
        ev("read", 15, 10, fhash="bb", ret=4096),
        ev("read", 30, 0, fhash="bb", ret=0),
        ev("read", 50, 10, fhash="bb", ret=4096),
        ev("model.COMPUTE_step", 20, 40, cat="ai_framework"),
        ev("fwd", 45, 2, cat="Compute"),
        ev("fwd", 58, 10, cat="compute"),
        ev("read", 70, 5, fhash="bb", ret=1, pid=9),
        ev("compute", 100, 1, cat="POSIX"),
    ]


def _epochs_ranks_checkpoints() -> list[str]:
    cfg = {
        "enable": 1,
        "io": 1,
        "time_metric": "US",
        "nested": {"a": [1, 2, -3], "b": None, "t": True},
        "s": "x",
    }
    return [
        meta("HH", "node042", "aa"),
        meta("SH", "python;train.py", "cc"),
        meta("FH", "/d/x", "bb"),
        meta("FH", "/d/x2", "bb"),  # a second name for the same hash: the first one wins
        ev("start", 1, 0, cat="dftracer", cmd_hash="cc", version=20003, rank=3),
        ev("TorchDataLoader.next", 2, 5, cat="data_loader", epoch="1", step="1"),
        ev("TorchDataLoader.next", 9, 5, cat="data_loader", epoch="1", step="2"),
        ev("TorchDataLoader.next", 20, 5, cat="data_loader", epoch=2, step=None),
        ev("save_checkpoint", 30, 5, cat="app"),
        ev("checkpoint_init", 31, 5, cat="app"),
        ev("write", 32, 5, cat="checkpoint"),
        ev("write", 33, 5, fhash="bb", ret=10, rank=1),
        ev("end", 40, 0, cat="dftracer", cfg=cfg, version="", app={}, used={"LIBC_IO": 1}, num_events=9),
    ]


def _unknown_keys() -> list[str]:
    line = _d(
        {
            "id": 1,
            "name": "read",
            "cat": "POSIX",
            "extra": {"a": [1, 2.5e-3, True, False, None, "x\\y"]},
            "pid": 7,
            "tid": 7,
            "ts": 10,
            "dur": 2,
            "ph": 1,
            "weird": -0.0,
            "args": {
                "hhash": "aa",
                "fhash": "bb",
                "ret": 7,
                "p_idx": -1,
                "date": "Sun Nov 29",
                "deep": [[{"k": [[]]}]],
                "f": 1.5e10,
            },
        }
    )
    return [meta("FH", "/d/x", "bb"), line]


def _number_and_key_edges() -> list[str]:
    """Around the scanner's word-at-a-time paths: integers of 8, 9 and 15-19 digits (up to the
    trace limits: 2^50 for most numbers, 2^62 for timestamps), keys of 8 and 9
    bytes (a known key plus a suffix is another key), spaces around colons."""
    return [
        meta("FH", "/d/x", "bb"),
        '{"id":12345678,"name":"read","cat":"POSIX","pid":0,"tid":123456789012345678,"ts":99999999,'
        '"dur":100000000,"ph":1,"args":{"hhash":"aa","fhash":"bb","ret":123456789012345,'
        '"offset":1000000000000000,"hostname2":"x","size_minx":3,"re":1,"rets":2,"cmd_hash":"c"}}',
        '{ "name" : "write" , "cat":"POSIX" ,"pid": 7,"ts" :1234567890123456,"dur": 1123456789012345 ,'
        '"ph":1,"args": { "fhash" :"bb" , "ret": 0 , "offset" :10000000 } }',
        '{"name":"pread","cat":"POSIX","pid":7,"ts":1234567890123456789,"dur":1,"ph":1,"args":{"fhash":"bb",'
        '"ret":4096,"offset":999999999999999,"count":1e3,"n0":0,"tid2":12345678901234567890}}',
        '{"name":"pread","cat":"POSIX","pid":7,"ts":2,"dur":0,"ph":1,"args":{"fhash":"bb","ret":40960000,'
        '"offset":12345678,"count":0.5}}',
    ]


def _key_order_changes() -> list[str]:
    """The scanner predicts each field's key from the line before: lines whose keys move,
    grow or shrink at a position ("ret", "rets", "re", "ret ") must still be read right."""
    top = (
        '{"name":"read","cat":"POSIX","pid":7,"ts":%d,"dur":2,"ph":1,"args":%s}',
        '{"ph":1,"dur":3,"ts":%d,"pid":7,"cat":"POSIX","name":"read","args":%s}',
        '{"ts":%d,"name":"pread","cat":"POSIX","ph":1,"pid":7,"dur":1,"tsx":5,"args":%s}',
    )
    args = (
        '{"fhash":"bb","ret":10,"offset":4}',
        '{"fhash":"bb","rets":11,"ret":12,"offset":8}',
        '{"fhash":"bb","re":1,"ret":13}',
        '{"fhash":"bb","ret" :14,"offset":0}',
        '{"offset":16,"ret":15,"fhash":"bb"}',
        '{"fhashes":"x","fhash":"bb","ret":16}',
    )
    lines = [meta("FH", "/d/x", "bb")]
    for i in range(60):
        lines.append(top[i % 3] % (10 + i, args[(i * 7) % 6]))
    return lines


CASES: dict[str, Callable[[], list[str]]] = {
    "number-and-key-edges": _number_and_key_edges,
    "key-order-changes": _key_order_changes,
    "escapes": _escapes,
    "numbers-as-strings": _numbers_as_strings,
    "missing-args": _missing_args,
    "huge-ints": _huge_ints,
    "legacy": _legacy,
    "aggregated": _aggregated,
    "counters-odd-ph": _counters_and_odd_ph,
    "nanoseconds": _nanoseconds,
    "positions": _positions,
    "compute-overlap": _compute_overlap,
    "epochs-ranks-checkpoints": _epochs_ranks_checkpoints,
    "unknown-keys": _unknown_keys,
}


@needs_native
@pytest.mark.parametrize("case", list(CASES))
def test_supported_quirks_are_read_natively_and_match_duckdb(tmp_path: Path, case: str) -> None:
    path = write(tmp_path / "trace-3-of-8.pfw.gz", CASES[case]())
    assert read_file_native(path, reader.ReadOptions()) is not None, "the native scanner declined the file"
    doc = assert_same([path])
    assert doc["events"] > 0


@needs_native
def test_crlf_blank_lines_plain_file_and_shuffled_lines(tmp_path: Path) -> None:
    lines = _positions()
    lines[3:3] = ["", "   ", "\t"]
    crlf = write(tmp_path / "crlf.pfw.gz", lines, end="\r\n")
    plain = write(tmp_path / "plain.pfw", ["  " + line + " " for line in _compute_overlap()], gz=False)
    for path in (crlf, plain):
        assert read_file_native(path) is not None, path.name
        assert_same([path])


@needs_native
def test_multi_member_gzip_split_mid_line(tmp_path: Path) -> None:
    data = ("\n".join(_positions() + _compute_overlap()) + "\n").encode()
    cuts = [0, 37, 38, 500, len(data) // 2, len(data) - 3, len(data)]
    path = tmp_path / "members.pfw.gz"
    path.write_bytes(b"".join(gzip.compress(data[a:b]) for a, b in itertools.pairwise(cuts)))
    one = write(tmp_path / "one.pfw.gz", (_positions() + _compute_overlap()))
    assert read_file_native(path) is not None
    got = assert_same([path])
    assert got["events"] == run([one], "duckdb")["events"]


@needs_native
def test_float_sums_add_up_in_duckdbs_batch_order(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    """bw_per_op_mean sums bytes/dur doubles: the native scanner keeps DuckDB's batch order."""
    monkeypatch.setattr(reader, "BATCH_ROWS", 97)
    lines = [meta("FH", "/d/x", "bb"), "["]
    for i in range(1500):
        lines.append(ev("read", 10 * i, 1 + (i * 7919) % 113, fhash="bb", ret=1 + (i * 104729) % 65537))
        if i % 100 == 0:
            lines += ["", meta("CM", "k", "v")]
    path = write(tmp_path / "big.pfw.gz", lines)
    assert read_file_native(path) is not None
    doc = assert_same([path])
    assert doc["read"]["bw_per_op_mean_mib_s"] is not None


@needs_native
@pytest.mark.parametrize("windows", [1, 3, 20, 1000])
def test_time_bins_coarsen_exactly_across_batches_and_files(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch, windows: int
) -> None:
    """The time view's per-file fine bins grow coarser as a file's span grows (the C ring, and
    DuckDB batch by batch); the windows come out the same and hold every call exactly once."""
    monkeypatch.setattr(reader, "BATCH_ROWS", 61)
    rng = random.Random(3)
    paths = []
    for pid, start in ((5, -7_000), (6, 1 << 20)):  # overlapping in time: one run
        lines, ts = [meta("FH", "/d/x", "bb", pid=pid)], start
        for i in range(700):  # gaps from 1 us to ~1 s, lines not in ts order (written at call end)
            ts += rng.choice((1, 2, 3, 50, 4_000, 1_000_000))
            at = ts - rng.randrange(0, 40)
            lines.append(
                ev(
                    "read" if i % 3 else "write",
                    at,
                    rng.randrange(0, 9),
                    pid=pid,
                    fhash="bb",
                    ret=rng.randrange(0, 1 << 20),
                )
            )
        paths.append(write(tmp_path / f"p{pid}.pfw.gz", lines))
    assert all(read_file_native(p) is not None for p in paths)
    doc = assert_same(paths, time_windows=windows)
    view = doc["views"]["time"]
    assert 1 <= view["windows"] <= max(windows, 2)  # one file starts before ts 0
    width_us = round(view["window_s"] * 1e6)
    assert width_us & (width_us - 1) == 0  # a power of two
    rows = view["rows"]
    for fam in ("read", "write"):
        assert sum(r[f"{fam}_count"] or 0 for r in rows) == doc[fam]["count"]
        assert sum(r[f"{fam}_bytes"] or 0 for r in rows) == doc[fam]["bytes"]
    for r in rows[1:]:  # after the first (clipped) window, each starts on the absolute grid
        assert (view["origin_us"] + round(r["start_s"] * 1e6)) % width_us == 0
    assert rows[0]["start_s"] >= 0 and rows[-1]["end_s"] == pytest.approx(doc["job_time_s"], abs=1e-6)


def test_file_view_merges_a_file_across_trace_files_and_keeps_the_top(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    """A 2.x hash named only in another trace file's metadata is one row with its name; the top
    rows are the files with the most I/O time, ties kept by name; the total counts them all."""
    import dftune.tools.trace.views as views

    monkeypatch.setattr(views, "FILE_VIEW_LIMIT", 3)
    a = [
        meta("FH", "/d/shared", "bb", pid=1),
        meta("FH", "/d/kid", "ee", pid=1),
        ev("read", 10, 50, pid=1, fhash="bb", ret=10),
    ]
    a += [ev("read", 20 + i, 5, pid=1, fhash=f"c{i}", ret=1) for i in range(4)]  # four files, 5 us each
    b = [
        ev("read", 30, 40, pid=2, fhash="bb", ret=20),
        ev("read", 40, 1, pid=2, fhash="dd", ret=1),
        ev("read", 50, 30, pid=2, fhash="ee", ret=1),
    ]
    paths = [write(tmp_path / "a.pfw.gz", a), write(tmp_path / "b.pfw.gz", b)]
    doc = assert_same(paths)
    view = doc["views"]["file"]
    assert view["total"] == 7 == doc["files_accessed"]
    rows = view["rows"]
    # "ee" is named only in a.pfw.gz, which never accesses it
    assert [r["path"] for r in rows] == ["/d/shared", "/d/kid", "fhash:c0"]
    assert (rows[0]["processes"], rows[0]["read_bytes"], rows[0]["read_count"]) == (2, 30, 2)
    assert rows[0]["io_time_s"] == pytest.approx(90e-6)


# --------------------------------------------------------------------------------------
# cases the native scanner must decline (DuckDB reads them, with the same outcome)

DECLINED: dict[str, list[str]] = {
    "float-ts": [ev("read", 10.5, 2, fhash="bb", ret=1), ev("read", 12, 2.5, fhash="bb", ret=1)],
    "bool-ret": [ev("read", 10, 2, fhash="bb", ret=True)],
    "duplicate-key": [
        '{"name":"read","name":"write","cat":"POSIX","pid":1,"ts":1,"dur":1,"ph":1,"args":{"ret":1}}'
    ],
    "leading-zero-string": [ev("read", 10, 2, fhash="bb", ret="0042")],
    "negative-zero": [ev("read", 10, 2, fhash="bb", ret=-0.0).replace("-0.0", "-0")],
    "non-ascii-name": [ev("lecture_\u00e9", 10, 2, cat="app")],
    "float-in-text": [ev("read", 10, 2, fhash=1.5, ret=1)],
    "array-args": ['{"name":"read","cat":"POSIX","pid":1,"ts":1,"dur":1,"ph":1,"args":[1]}'],
    "trailing-comma": [ev("read", 5, 1, fhash="bb", ret=3) + ","],
    "exponent-int": [ev("read", 10, 2, fhash="bb", ret=1).replace('"ret":1', '"ret":1E2')],
    "fraction-ts": [ev("read", 10, 2, fhash="bb", ret=1).replace('"ts":10', '"ts":12345678.0')],
}


@needs_native
@pytest.mark.parametrize("case", list(DECLINED))
def test_unsupported_lines_fall_back_to_duckdb(tmp_path: Path, case: str) -> None:
    path = write(
        tmp_path / "t.pfw.gz",
        [meta("FH", "/d/x", "bb"), ev("read", 1, 1, fhash="bb", ret=3), *DECLINED[case]],
    )
    assert read_file_native(path) is None, "the native scanner must decline this file"
    assert_same([path])


BROKEN: dict[str, Callable[[Path], Path]] = {
    "corrupt-line": lambda d: write(
        d / "t.pfw.gz", [ev("read", 1, 1, ret=3), "{not json", ev("read", 2, 1, ret=3)]
    ),
    "invalid-escape": lambda d: write(
        d / "t.pfw.gz", [ev("read", 1, 1, ret=3), ev("re@d", 2, 1, ret=3).replace("@", "\\x")]
    ),
    "leading-zero": lambda d: write(
        d / "t.pfw.gz", [ev("read", 1, 1, ret=3), ev("read", 2, 1, ret=3).replace('"ret":3', '"ret":03')]
    ),
    "19-digit-overflow": lambda d: write(  # once a silent NULL; now a bad line, named
        d / "t.pfw.gz",
        [
            ev("read", 1, 1, ret=3),
            ev("read", 10, 2, fhash="bb", ret=1).replace('"ret":1', '"ret":9999999999999999999'),
        ],
    ),
    "negative-dur": lambda d: write(d / "t.pfw.gz", [ev("read", 1, 1, ret=3), ev("read", 2, -1, ret=3)]),
    "truncated-gzip": lambda d: _truncated(d / "t.pfw.gz"),
    "garbage-after-member": lambda d: _garbage_after(d / "t.pfw.gz"),
}


def _truncated(path: Path) -> Path:
    data = gzip.compress(("\n".join(ev("read", i, 1, ret=i) for i in range(2000)) + "\n").encode())
    path.write_bytes(data[: len(data) // 2])
    return path


def _garbage_after(path: Path) -> Path:
    path.write_bytes(gzip.compress((ev("read", 1, 1, ret=3) + "\n").encode()) + b"not gzip")
    return path


@needs_native
@pytest.mark.parametrize("case", list(BROKEN))
def test_broken_files_give_the_same_error_and_skip_bad_result(tmp_path: Path, case: str) -> None:
    path = BROKEN[case](tmp_path)
    assert read_file_native(path) is None
    native_error, duckdb_error = error_of([path], "native"), error_of([path], "duckdb")
    assert native_error == duckdb_error
    assert_same([path], skip_bad=True)


@needs_native
def test_a_bad_gzip_crc_is_declined(tmp_path: Path) -> None:
    """The inflate checks each member's CRC; DuckDB does not, so it reads the file alone."""
    data = bytearray(gzip.compress(("\n".join(ev("read", i, 1, ret=i) for i in range(2000)) + "\n").encode()))
    data[-6] ^= 1  # a byte of the member's CRC-32
    path = tmp_path / "t.pfw.gz"
    path.write_bytes(bytes(data))
    assert read_file_native(path) is None
    assert assert_same([path])["events"] == 2000


@needs_native
def test_all_no_args_error_is_the_same(tmp_path: Path) -> None:
    plain = _d({"name": "read", "cat": "POSIX", "pid": 1, "ts": 1, "dur": 1, "ph": 1})
    path = write(tmp_path / "t.pfw.gz", [plain, plain])
    assert error_of([path], "native") == error_of([path], "duckdb")
    assert_same([path], skip_bad=True)


@needs_native
def test_mixed_native_and_fallback_files_merge_exactly(tmp_path: Path) -> None:
    """A declined file next to native ones: cross-file keys (files accessed) still agree."""
    write(
        tmp_path / "a.pfw.gz",
        [meta("FH", "/d/x", "bb"), ev("read", 1, 1, fhash="bb", ret=3), ev("read", 2, 1, fhash="zz", ret=3)],
    )
    write(
        tmp_path / "b.pfw.gz", [meta("FH", "/d/x", "bb", pid=8), ev("read", 1, 1, pid=8, fhash="bb", ret=3.5)]
    )
    assert read_file_native(tmp_path / "a.pfw.gz") is not None
    assert read_file_native(tmp_path / "b.pfw.gz") is None
    doc = assert_same([tmp_path])
    assert doc["files_accessed"] == 2


# --------------------------------------------------------------------------------------
# the extension itself


def _compiler_and_zlib() -> bool:
    cc = shutil.which(os.environ.get("CC", "cc")) or shutil.which("gcc")
    include = Path(sysconfig.get_paths().get("include", "")) / "Python.h"
    return bool(cc) and Path("/usr/include/zlib.h").is_file() and include.is_file()


def test_extension_is_built_where_a_compiler_exists() -> None:
    """CI installs gcc and zlib1g-dev: the optional build must then really have happened."""
    if not _compiler_and_zlib():
        pytest.skip("no C compiler, zlib.h or Python.h here: the DuckDB path is used")
    assert native.module() is not None, (
        "a C compiler and zlib.h are present but dftune.tools.trace._fastscan is missing: "
        "rebuild with `pip install -e .` and read the build warnings"
    )


def test_isal_inflate_is_linked_where_its_header_exists() -> None:
    """CI installs libisal-dev: setup.py must then have built the reader against ISA-L."""
    if not _compiler_and_zlib() or not Path("/usr/include/isa-l/igzip_lib.h").is_file():
        pytest.skip("no compiler or no ISA-L header here: zlib inflates")
    if os.environ.get("DFTUNE_NO_ISAL", "") not in ("", "0"):
        pytest.skip("DFTUNE_NO_ISAL is set: the zlib build was asked for")
    mod = native.module()
    assert mod is not None
    assert mod.INFLATE == "isa-l", (
        "isa-l/igzip_lib.h is present but _fastscan was built with zlib: rebuild with "
        "`pip install -e .` and read setup.py's probe output"
    )


def test_env_switch_forces_the_duckdb_path(monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setenv(native.ENV, "0")
    assert not native.enabled()
    monkeypatch.setenv(native.ENV, "1")
    assert native.enabled() == (native.module() is not None)
