"""The `dftune analyze` command line honours the interface
contract (JSON keys, one-line errors, exit codes)."""

from __future__ import annotations

import gzip
import json
from pathlib import Path

import pytest

from tests.cli_inproc import dftune

FH = (
    '{"name":"FH","cat":"dftracer","type":1,"pid":7,"tid":7,"ph":4,'
    '"args":{"hhash":"aa","name":"/data/x","value":"bb"}}'
)
HH = (
    '{"name":"HH","cat":"dftracer","type":1,"pid":7,"tid":7,"ph":4,'
    '"args":{"hhash":"aa","name":"node1","value":"aa"}}'
)


def ev(i: int, name: str, ts: int, dur: int, **args: object) -> str:
    a = {"hhash": "aa", "fhash": "bb", **args}
    return json.dumps(
        {
            "id": i,
            "name": name,
            "cat": "POSIX",
            "type": 3,
            "pid": 7,
            "tid": 7,
            "ts": ts,
            "dur": dur,
            "ph": 1,
            "args": a,
        }
    )


@pytest.fixture
def trace_dir(tmp_path: Path) -> Path:
    lines = [
        HH,
        FH,
        ev(1, "open64", 1000, 5, flags=0),
        ev(2, "read", 1010, 10, ret=4096, count=4096),
        ev(3, "read", 1030, 10, ret=4096, count=4096),
        ev(4, "pread64", 1050, 10, ret=100, count=100, offset=0),
        ev(5, "close", 1070, 1, ret=0),
    ]
    d = tmp_path / "traces"
    d.mkdir()
    with gzip.open(d / "t-1-preload.pfw.gz", "wt") as fh:
        fh.write("\n".join(lines) + "\n")
    return d


def test_json_is_one_document_with_the_contract_keys(trace_dir: Path) -> None:
    out = dftune("analyze", str(trace_dir), "--json")
    assert out.returncode == 0, out.stderr
    doc = json.loads(out.stdout)
    for key in (
        "schema",
        "files",
        "events",
        "skipped_lines",
        "processes",
        "job_time_s",
        "read",
        "write",
        "metadata",
        "sync",
        "read_time_pct",
        "write_time_pct",
        "metadata_time_pct",
        "small_io_pct",
        "seq_pct",
        "consecutive_pct",
        "rand_pct",
        "xfer_size_hist",
        "unoverlapped_io_time_s",
        "layers",
    ):
        assert key in doc, key
    assert doc["schema"] == "dftune.analysis/1"
    assert doc["events"] == 5 and doc["files"] == 1 and doc["processes"] == 1
    assert doc["read"] == {**doc["read"], "count": 3, "bytes": 8292}
    assert doc["job_time_s"] == pytest.approx((1071 - 1000) / 1e6)
    # read@0, read@4096 (consecutive), pread@0 (random)
    assert doc["consecutive_pct"] == 50.0 and doc["rand_pct"] == 50.0


def test_every_view_renders_in_json_and_terminal(trace_dir: Path) -> None:
    views = ["--view", "file", "--view", "proc", "--view", "time", "--view", "layer"]
    out = dftune("analyze", str(trace_dir), "--json", *views)
    assert out.returncode == 0, out.stderr
    doc = json.loads(out.stdout)
    assert set(doc["views"]) == {"file", "proc", "time", "layer"}
    assert doc["views"]["file"]["rows"][0]["path"] == "/data/x"
    assert doc["views"]["proc"]["rows"][0]["host"] == "node1"
    assert sum(r["read_count"] or 0 for r in doc["views"]["time"]["rows"]) == 3
    text = dftune("analyze", str(trace_dir), *views)
    assert text.returncode == 0, text.stderr
    assert "View: file" in text.stdout and "/data/x" in text.stdout


@pytest.mark.parametrize(
    ("args", "needle"),
    [
        (["analyze", "/definitely/not/here"], "/definitely/not/here: no such file or directory"),
        (["analyze", "{tmp}", "--view", "bogus"], "--view 'bogus'"),
    ],
)
def test_errors_are_one_line_on_stderr_and_nonzero(tmp_path: Path, args: list[str], needle: str) -> None:
    out = dftune(*[a.replace("{tmp}", str(tmp_path)) for a in args], "--json")
    assert out.returncode != 0
    assert out.stdout == ""
    lines = out.stderr.strip().splitlines()
    assert len(lines) == 1, out.stderr
    assert needle in lines[0]


def test_empty_folder_names_the_folder(tmp_path: Path) -> None:
    out = dftune("analyze", str(tmp_path), "--json")
    assert out.returncode == 2
    assert str(tmp_path) in out.stderr and "no trace files" in out.stderr
