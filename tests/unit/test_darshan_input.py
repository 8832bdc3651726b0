"""Darshan logs as input: recognised by content, bad logs named in one line (exit code 2), the CLI,
the MCP tools, compare and the HTML report work on them with the same schema as traces."""

from __future__ import annotations

import json
import shutil
from pathlib import Path

import pytest

from dftune.tools.trace import TraceError, analyze
from dftune.tools.trace.darshan.detect import is_darshan_log
from tests.cli_inproc import dftune
from tests.darshan_logs import collection, shipped, shipped_logs

GOOD = shipped("ior_hdf5_example.darshan")


def test_logs_are_recognised_by_content_not_name(tmp_path: Path) -> None:
    assert all(is_darshan_log(p) for p in shipped_logs())
    renamed = tmp_path / "job_output.bin"
    shutil.copy(GOOD, renamed)
    assert is_darshan_log(renamed)
    a = analyze([renamed])
    assert a.darshan is not None and a.read.count == analyze([GOOD]).read.count
    text = tmp_path / "x.darshan"
    text.write_text("not a log\n")
    assert not is_darshan_log(text)


def _truncations(tmp_path: Path) -> list[Path]:
    data = shipped("sample-badost.darshan").read_bytes()
    out = []
    for cut in (16, 600, 2000, len(data) // 2, len(data) - 100):
        p = tmp_path / f"cut{cut}.darshan"
        p.write_bytes(data[:cut])
        out.append(p)
    return out


def bad_inputs(tmp_path: Path) -> dict[str, Path]:
    empty = tmp_path / "empty.darshan"
    empty.write_bytes(b"")
    text = tmp_path / "notes.darshan"
    text.write_text("this is not a Darshan log\n" * 10)
    return {"empty": empty, "not a log": text, **{f"truncated {p.name}": p for p in _truncations(tmp_path)}}


def test_bad_logs_are_one_line_naming_the_file(tmp_path: Path) -> None:
    for what, path in bad_inputs(tmp_path).items():
        with pytest.raises(TraceError) as err:
            analyze([path])
        msg = str(err.value)
        assert msg.startswith(str(path)) and "\n" not in msg, (what, msg)


def test_bad_log_on_the_command_line_is_exit_code_2_and_one_stderr_line(tmp_path: Path) -> None:
    for path in bad_inputs(tmp_path).values():
        out = dftune("analyze", str(path), "--json")
        assert out.returncode == 2, out.stderr
        assert out.stdout == "" and out.stderr.count("\n") == 1 and str(path) in out.stderr, out.stderr


def test_a_folder_mixing_traces_and_logs_is_refused(tmp_path: Path) -> None:
    folder = tmp_path / "mixed"
    folder.mkdir()
    shutil.copy(GOOD, folder / "job.darshan")
    (folder / "t-1-preload.pfw").write_text(
        '{"id":1,"name":"read","cat":"POSIX","pid":1,"tid":1,"ts":1,"dur":1,"ph":"X"}\n'
    )
    out = dftune("analyze", str(folder), "--json")
    assert out.returncode == 2 and out.stderr.count("\n") == 1
    assert "t-1-preload.pfw" in out.stderr and "job.darshan" in out.stderr


def test_skip_bad_analyzes_the_good_logs_and_names_the_bad(tmp_path: Path) -> None:
    folder = tmp_path / "logs"
    folder.mkdir()
    shutil.copy(GOOD, folder / "good.darshan")
    (folder / "bad.darshan").write_bytes(GOOD.read_bytes()[:500])
    with pytest.raises(TraceError):
        analyze([folder])
    a = analyze([folder], skip_bad=True)
    assert a.files == 1 and [s.file for s in a.skipped] == [str(folder / "bad.darshan")]
    assert a.read.count == analyze([GOOD]).read.count


def test_analyze_and_diagnose_json_on_a_log() -> None:
    out = dftune("analyze", str(GOOD), "--json", "--view", "file", "--view", "time")
    assert out.returncode == 0, out.stderr
    doc = json.loads(out.stdout)
    assert doc["schema"] == "dftune.analysis/1" and doc["processes"] == 4
    assert doc["darshan"]["dxt"]["modules"] == ["DXT_MPIIO", "DXT_POSIX"]
    assert doc["views"]["time"]["source"] == "DXT_POSIX" and doc["views"]["file"]["rows"]
    out = dftune("diagnose", str(GOOD), "--json")
    assert out.returncode == 0, out.stderr
    diag = json.loads(out.stdout)
    assert diag["schema"] == "dftune.diagnosis/1" and diag["bottlenecks"]


def test_terminal_output_shows_the_darshan_header() -> None:
    out = dftune("analyze", str(collection("partial_data_stdio/partial_data_stdio.darshan")))
    assert out.returncode == 0, out.stderr
    assert (
        "Darshan logs" in out.stdout and "PARTIAL" in out.stdout and "module STDIO is partial" in out.stdout
    )


def test_mcp_analyze_and_diagnose_take_logs() -> None:
    from dftune import mcp_server

    doc = mcp_server.call("analyze", {"paths": [str(GOOD)], "views": ["file"]})
    assert doc["schema"] == "dftune.analysis/1" and doc["darshan"]["nprocs"] == 4
    diag = mcp_server.call("diagnose", {"paths": [str(collection("imbalanced_io/imbalanced-io.darshan"))]})
    assert "DL01" in {b["id"] for b in diag["bottlenecks"]}


def test_compare_two_logs() -> None:
    out = dftune(
        "compare", str(shipped("sample-badost.darshan")), str(shipped("sample-goodost.darshan")), "--json"
    )
    assert out.returncode == 0, out.stderr
    doc = json.loads(out.stdout)
    rows = {r["key"]: r for r in doc["trace"]}
    assert rows["processes"]["a"] == 2048 and rows["processes"]["b"] == 48


def test_html_report_for_a_log_is_self_contained(tmp_path: Path) -> None:
    out = dftune(
        "report", str(shipped("dxt.darshan")), "--html", "--output", str(tmp_path / "r.html"), "--json"
    )
    assert out.returncode == 0, out.stderr
    doc = json.loads(out.stdout)
    page = Path(doc["html"]).read_text()
    assert page.startswith("<!DOCTYPE html>") and "default-src 'none'" in page
    assert "Heatmap" in page and "data:image/svg+xml;base64," in page and "Bottlenecks" in page
    assert "<script" not in page
