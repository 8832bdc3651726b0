"""The JSON files a run keeps (bench.json, analysis.json, ...) are written and read strictly.

JSON has no NaN or Infinity: Python's ``json`` writes them unless told not to, and reads them
(and ``1e999`` as infinity) back without a word.  A file dftune writes never holds one (the
writer fails, naming the file and the key), and a file it reads back that is corrupt or holds one
is a one-line error naming the file and what is wrong (exit 2 from the command line).
"""

from __future__ import annotations

import re
from pathlib import Path

import pytest

from dftune.agents import measure
from dftune.core import strictjson
from dftune.tools.runner.bench import BenchResult, Replicate, extract_work
from dftune.tools.runner.spec import WorkCounter, WorkloadSpec
from dftune.tools.session.workspace import Workspace
from tests.cli_inproc import dftune
from tests.unit.test_report import make_report


def _bench(work: float) -> BenchResult:
    rep = Replicate.model_validate(
        {
            "index": 0,
            "status": "ok",
            "exit_code": 0,
            "traced": False,
            "wall_s": 1.0,
            "metric": 2.0,
            "work": {"items": work},
        }
    )
    return BenchResult.model_validate(
        {
            "workload": "toy",
            "spec_path": "toy.yaml",
            "settings": {},
            "traced": False,
            "metric": {"name": "wall"},
            "replicates": [rep],
            "ok": 1,
            "median": 2.0,
            "p95": 2.0,
            "ci95": None,
            "trace_dir": None,
            "workdir": "w",
            "cache_policy": "warm_up",
            "started": "now",
        }
    )


@pytest.mark.parametrize("bad", [float("nan"), float("inf"), float("-inf")])
def test_a_non_finite_number_is_refused_at_the_bench_writer(tmp_path: Path, bad: float) -> None:
    with pytest.raises(strictjson.JSONFileError, match=r"bench\.json.*replicates\[0\]\.work\.items"):
        measure._summarize(_bench(bad), tmp_path, {}, False, (), reuse_analysis=False)
    assert not (tmp_path / measure.BENCH_FILE).exists()


def test_a_finite_bench_is_written_as_strict_json(tmp_path: Path) -> None:
    measure._summarize(_bench(3.0), tmp_path, {}, False, (), reuse_analysis=False)
    doc = strictjson.read_file(tmp_path / measure.BENCH_FILE)
    assert doc["replicates"][0]["work"] == {"items": 3.0}


@pytest.mark.parametrize(
    ("text", "what"),
    [
        ('{"a": NaN}', "NaN"),
        ('{"a": [1, -Infinity]}', "-Infinity"),
        ('{"a": 1e999}', "1e999"),
        ('{"a": 1', "not valid JSON"),
        ("", "not valid JSON"),
        (b"\xff\xfe{}", "not UTF-8"),
    ],
)
def test_reading_back_names_the_file_and_what_is_wrong(tmp_path: Path, text: str | bytes, what: str) -> None:
    f = tmp_path / "x.json"
    f.write_bytes(text if isinstance(text, bytes) else text.encode())
    with pytest.raises(strictjson.JSONFileError) as exc:
        strictjson.read_file(f)
    msg = str(exc.value)
    assert str(f) in msg and what in msg and "\n" not in msg


def _set_io_time(text: str, value: str) -> str:
    out, n = re.subn(r'"io_time_s": [-0-9.eE+]+', f'"io_time_s": {value}', text, count=1)
    assert n == 1
    return out


@pytest.fixture
def run_dir() -> Path:
    ws = Workspace()
    return ws.run_dir(ws.create_run(None, "toy").id)


@pytest.mark.parametrize(
    ("corrupt", "what"),
    [
        (lambda t: _set_io_time(t, "NaN"), "NaN"),
        (lambda t: _set_io_time(t, "1e999"), "1e999"),
        (lambda t: t[: len(t) // 2], "not valid JSON"),
        (lambda t: _set_io_time(t, '"soon"'), "io_time_s"),
    ],
)
def test_a_corrupt_analysis_json_is_one_line_exit_2(run_dir: Path, corrupt, what: str) -> None:  # type: ignore[no-untyped-def]
    make_report(run_dir)
    path = run_dir / "baseline" / measure.ANALYSIS_FILE
    path.write_text(corrupt(path.read_text()))
    out = dftune("report", run_dir.name, "--html")
    assert out.returncode == 2, (out.returncode, out.stderr)
    assert out.stderr.count("\n") == 1 and str(path) in out.stderr and what in out.stderr
    assert "internal error" not in out.stderr


@pytest.mark.parametrize("printed", ["nan", "inf", "1e999", "-Infinity"])
def test_a_non_finite_work_counter_is_said_not_recorded(tmp_path: Path, printed: str) -> None:
    """Where the non-finite number would come from: a program's output (``float('1e999')`` is inf)."""
    spec = WorkloadSpec(name="w", command=["true"], work=[WorkCounter(name="items", pattern=r"items=(\S+)")])
    out = tmp_path / "r0.out"
    out.write_text(f"items={printed}\n")
    counters, why = extract_work(spec, out)
    assert counters == {} and f"work counter items {printed!r} is not a finite number" in why
    out.write_text("items=12\n")
    assert extract_work(spec, out) == ({"items": 12.0}, "")


def test_a_report_json_with_a_nan_is_one_line_exit_2(run_dir: Path) -> None:
    make_report(run_dir)
    path = run_dir / "report.json"
    text = path.read_text()
    path.write_text(text[: text.rindex("}")] + ', "late": NaN}')
    out = dftune("report", run_dir.name, "--html")
    assert out.returncode == 2 and out.stderr.count("\n") == 1
    assert str(path) in out.stderr and "NaN is not JSON" in out.stderr


def test_the_other_files_dftune_keeps_refuse_a_nan_at_the_writer(tmp_path: Path) -> None:
    from dftune.tools.session.layout import dumps_json

    with pytest.raises(strictjson.JSONFileError, match=r"run\.json: budget\.seconds is nan"):
        dumps_json({"budget": {"seconds": float("nan")}}, tmp_path / "run.json")
    with pytest.raises(strictjson.JSONFileError, match=r"cannot write .*x\.json: \[1\] is inf"):
        strictjson.write_file(tmp_path / "x.json", [1.0, float("inf")])
    assert not (tmp_path / "x.json").exists()
