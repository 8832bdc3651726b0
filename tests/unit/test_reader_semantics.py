"""Reader details on small hand-written traces: units, names, hashes, ranks, families."""

from __future__ import annotations

import gzip
import json
from pathlib import Path

import pytest

from dftune.tools.trace import analyze

#: every test here runs on both readers (native C scanner and DuckDB)
pytestmark = pytest.mark.usefixtures("read_path")


def meta(kind: str, name: str, value: str, pid: int = 7) -> str:
    return json.dumps(
        {
            "name": kind,
            "cat": "dftracer",
            "type": 1,
            "pid": pid,
            "tid": pid,
            "ph": 4,
            "args": {"hhash": "aa", "name": name, "value": value},
        }
    )


def ev(name: str, ts: int, dur: int, cat: str = "POSIX", pid: int = 7, **args: object) -> str:
    return json.dumps(
        {
            "id": ts,
            "name": name,
            "cat": cat,
            "type": 3,
            "pid": pid,
            "tid": pid,
            "ts": ts,
            "dur": dur,
            "ph": 1,
            "args": {"hhash": "aa", **args},
        }
    )


def write(path: Path, lines: list[str]) -> Path:
    path.parent.mkdir(parents=True, exist_ok=True)
    with gzip.open(path, "wt") as fh:
        fh.write("\n".join(lines) + "\n")
    return path


def test_nanosecond_time_metric_is_normalized(tmp_path: Path) -> None:
    lines = [
        meta("CM", "time_metric", "NS"),
        meta("FH", "/d/x", "bb"),
        ev("read", 1_000_000, 5_000, fhash="bb", ret=10),
        ev("read", 2_000_000, 3_000, fhash="bb", ret=10),
    ]
    a = analyze([write(tmp_path / "t.pfw.gz", lines)])
    assert a.time_metric == "NS"
    assert a.read.time_s == pytest.approx(8e-6)
    assert a.job_time_s == pytest.approx((2_003_000 - 1_000_000) / 1e9)


def test_host_command_and_rank_are_resolved(tmp_path: Path) -> None:
    lines = [
        meta("HH", "node042", "aa"),
        meta("SH", "python;train.py", "cc"),
        meta("FH", "/d/x", "bb"),
        ev("start", 1, 0, cat="dftracer", cmd_hash="cc"),
        ev("open64", 2, 1, fhash="bb", flags=0),
        ev("read", 3, 1, fhash="bb", ret=4096),
    ]
    a = analyze([write(tmp_path / "trace-3-of-8.pfw.gz", lines)], views=["proc", "file"])
    row = a.views["proc"]["rows"][0]
    assert (row["host"], row["cmd"], row["rank"]) == ("node042", "python;train.py", 3)
    assert a.hosts == ["node042"]
    assert a.views["file"]["rows"][0]["path"] == "/d/x"


def test_legacy_inline_fname_hostname_and_string_numbers(tmp_path: Path) -> None:
    rows = [
        {
            "id": "0",
            "name": "open",
            "cat": "POSIX",
            "pid": "5",
            "tid": "5",
            "ts": "100",
            "dur": "2",
            "ph": "X",
            "args": {"hostname": "lassen1", "fname": "/p/f", "ret": 3},
        },
        {
            "id": "1",
            "name": "read",
            "cat": "POSIX",
            "pid": "5",
            "tid": "5",
            "ts": "110",
            "dur": "3",
            "ph": "X",
            "args": {"hostname": "lassen1", "fname": "/p/f", "ret": "2048"},
        },
    ]
    p = tmp_path / "legacy.pfw"
    p.write_text("[\n" + "\n".join(json.dumps(r) for r in rows) + "\n]\n")
    a = analyze([p], views=["file"])
    assert a.skipped_lines == 0 and a.events == 2
    assert a.read.bytes == 2048 and a.hosts == ["lassen1"]
    assert a.formats == {"dftracer-1.x": 2}
    assert a.views["file"]["rows"][0]["path"] == "/p/f"


def test_fread_fwrite_bytes_are_items_times_size_and_families(tmp_path: Path) -> None:
    lines = [
        meta("FH", "/d/x", "bb"),
        ev("fopen", 1, 1, cat="STDIO", fhash="bb", mode="r"),
        ev("fread", 2, 1, cat="STDIO", fhash="bb", ret=3, size=100, count=4),
        ev("fwrite", 3, 1, cat="stdio", fhash="bb", ret=2, size=50),
        ev("fsync", 4, 7, fhash="bb", ret=0),
        ev("stat", 5, 2, fhash="bb"),
        ev("fclose", 6, 1, cat="STDIO"),
    ]
    a = analyze([write(tmp_path / "t.pfw.gz", lines)])
    assert (a.read.count, a.read.bytes) == (1, 300)
    assert (a.write.count, a.write.bytes) == (1, 100)  # category matched in any case
    assert (a.sync.count, a.metadata.count) == (1, 3)
    assert a.sync.time_s == pytest.approx(7e-6)


def test_counts_are_independent_of_worker_count(tmp_path: Path) -> None:
    files = []
    for pid in range(4):
        lines = [meta("FH", f"/d/{pid}", "bb", pid=pid)]
        lines += [ev("read", 10 + i, 1, pid=pid, fhash="bb", ret=4096) for i in range(50)]
        files.append(write(tmp_path / f"t{pid}.pfw.gz", lines))
    one = analyze([tmp_path], workers=1).to_json_dict()
    two = analyze([tmp_path], workers=2).to_json_dict()
    assert one == two
    assert one["read"]["count"] == 200 and one["processes"] == 4


def test_epoch_spreads_find_the_straggling_process(tmp_path: Path) -> None:
    """Per process, an epoch lasts from its first to its last event tagged with that epoch."""
    from dftune.tools.diagnose.engine import diagnose_analysis

    for pid, slow in ((1, False), (2, False), (3, True)):
        lines = [meta("HH", "n1", "aa", pid=pid), meta("FH", "/d/x", "bb", pid=pid)]
        # epoch 0: 10 s for everyone; epoch 1: 10 s, but 20 s for the slow process
        lines += [
            ev("TorchDataLoader.next", 0, 1_000_000, cat="data_loader", pid=pid, epoch="0"),
            ev("TorchDataLoader.next", 9_000_000, 1_000_000, cat="data_loader", pid=pid, epoch="0"),
            ev("TorchDataLoader.next", 20_000_000, 1_000_000, cat="data_loader", pid=pid, epoch="1"),
            ev(
                "TorchDataLoader.next",
                (39 if slow else 29) * 1_000_000,
                1_000_000,
                cat="data_loader",
                pid=pid,
                epoch="1",
            ),
            ev("TorchDataLoader.next", 5, 1, cat="data_loader", pid=pid, epoch="-1"),
            ev("read", 30, 10, pid=pid, fhash="bb", ret=4096),
        ]
        write(tmp_path / f"t{pid}.pfw.gz", lines)
    a = analyze([tmp_path])
    assert [e.epoch for e in a.epoch_spreads] == ["0", "1"]  # epoch -1 (set-up) is not a training epoch
    e0, e1 = a.epoch_spreads
    assert e0.straggler_spread == 0.0 and e0.processes == 3
    assert (e1.min_s, e1.median_s, e1.max_s) == (10.0, 10.0, 20.0)
    assert e1.straggler_spread == 0.5 and e1.slowest_process == "n1:3"
    d = diagnose_analysis(a)
    l02 = next(b for b in d.bottlenecks if b.id == "L02")
    assert l02.category == "stragglers" and "epoch 1" in l02.evidence and "n1:3" in l02.evidence
