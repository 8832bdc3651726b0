"""Telling a self-tracing program (DLIO, dftracer-annotated apps) from one dftune must preload."""

from __future__ import annotations

import gzip
import os
import time
from pathlib import Path

import pytest

from dftune.tools.trace import selftrace


def _script(tmp_path: Path, text: str, name: str = "app.py") -> Path:
    p = tmp_path / name
    p.write_text(text, encoding="utf-8")
    return p


@pytest.mark.parametrize(
    "source",
    [
        "from dftracer.python import dftracer, dft_fn\n",
        "import os\nfrom dftracer.logger import dftracer as PerfTrace\n",
        "import pydftracer\n",
        "from dlio_benchmark.main import main\n",
        "log = PerfTrace.initialize_log(logfile='x.pfw', data_dir=None, process_id=0)\n",
        "os.environ['DFTRACER_ENABLE'] = '1'\n",
        'os.environ.setdefault("DFTRACER_INIT", "FUNCTION")\n',
    ],
)
def test_source_that_initializes_dftracer_is_self_tracing(tmp_path: Path, source: str) -> None:
    _script(tmp_path, "import sys\n" + source)
    found = selftrace.detect(["python", "app.py"], tmp_path, {})
    assert found
    assert found.reason.startswith("app.py:")


def test_plain_program_is_not_self_tracing(tmp_path: Path) -> None:
    # a comment or a string naming dftracer is not an import
    _script(tmp_path, "import os\n# traced with dftracer by dftune\nprint('dftracer')\n")
    assert not selftrace.detect(["python", "app.py"], tmp_path, {})


def test_dlio_scripts_and_modules_are_self_tracing(tmp_path: Path) -> None:
    assert selftrace.detect(["/venv/bin/dlio_benchmark", "workload=unet3d"], tmp_path, {})
    assert selftrace.detect(["python", "-m", "dlio_benchmark.main"], tmp_path, {})
    assert not selftrace.detect(["python", "-m", "json.tool"], tmp_path, {})


def test_spec_that_sets_function_mode_counts(tmp_path: Path) -> None:
    _script(tmp_path, "print(1)\n")
    assert selftrace.detect(["python", "app.py"], tmp_path, {"DFTRACER_INIT": "FUNCTION"})
    assert not selftrace.detect(["python", "app.py"], tmp_path, {"DFTRACER_INIT": "PRELOAD"})


def test_missing_script_is_not_an_error(tmp_path: Path) -> None:
    assert not selftrace.detect(["python", "gone.py"], tmp_path, {})


def _gz(path: Path, lines: list[str]) -> Path:
    with gzip.open(path, "wt") as fh:
        fh.write("\n".join(lines) + "\n")
    return path


def test_has_events_needs_a_complete_event(tmp_path: Path) -> None:
    assert not selftrace.has_events(tmp_path)
    (tmp_path / "t-1-preload.pfw.gz").write_bytes(b"")  # what a double preload leaves
    assert not selftrace.has_events(tmp_path)
    _gz(tmp_path / "t-2-preload.pfw.gz", ['{"name":"FH","cat":"dftracer","ph":4,"args":{}}'])
    assert not selftrace.has_events(tmp_path)
    (tmp_path / "t-3.pfw.gz").write_bytes(b"\x1f\x8b\x08\x00garbage")  # a gzip that ends early
    assert not selftrace.has_events(tmp_path)
    _gz(tmp_path / "t-4-app.pfw.gz", ['{"name":"read","cat":"POSIX","ph":1,"ts":1,"dur":2}'])
    assert selftrace.has_events(tmp_path)


def test_has_events_reads_legacy_plain_traces(tmp_path: Path) -> None:
    (tmp_path / "trace-0-of-1.pfw").write_text('[\n{"name":"open64","cat":"POSIX","ph":"X","ts":"1"}\n')
    assert selftrace.has_events(tmp_path)


def test_collect_moves_only_new_trace_files(tmp_path: Path) -> None:
    out = tmp_path / "app_output"
    out.mkdir()
    old = out / "trace-old.pfw"
    old.write_text("{}")
    past = time.time() - 3600
    os.utime(old, (past, past))
    since = selftrace.now()
    (out / "trace-0-of-1.pfw").write_text("{}")
    (out / "summary.json").write_text("{}")
    dest = tmp_path / "traces" / "r0"
    other = tmp_path / "traces" / "r1"
    other.mkdir(parents=True)
    (other / "trace-r1.pfw").write_text("{}")  # another replicate's trace is never taken
    moved = selftrace.collect([tmp_path], dest, since, exclude=[tmp_path / "traces"])
    assert [p.name for p in moved] == ["trace-0-of-1.pfw"]
    assert old.exists() and (other / "trace-r1.pfw").exists()
    assert (out / "summary.json").exists()


def test_collect_never_overwrites(tmp_path: Path) -> None:
    a, b = tmp_path / "a", tmp_path / "b"
    a.mkdir()
    b.mkdir()
    since = selftrace.now()
    (a / "trace.pfw").write_text("1")
    (b / "trace.pfw").write_text("2")
    dest = tmp_path / "dest"
    moved = selftrace.collect([a, b], dest, since)
    assert sorted(p.read_text() for p in moved) == ["1", "2"]
    assert len(list(dest.iterdir())) == 2


def test_expand_globs_relative_to_the_spec(tmp_path: Path) -> None:
    (tmp_path / "out" / "x").mkdir(parents=True)
    (tmp_path / "out" / "x" / "trace-0.pfw").write_text("{}")
    found = selftrace.expand(["out/*/trace-*.pfw", "plain_folder"], tmp_path)
    assert tmp_path / "out" / "x" / "trace-0.pfw" in found
    assert tmp_path / "plain_folder" in found


def test_reason_names_the_line(tmp_path: Path) -> None:
    _script(tmp_path, "import sys\n\nfrom dftracer.python import dft_fn\n")
    assert "app.py:3" in selftrace.detect(["python", "app.py"], tmp_path, {}).reason


def test_installer_names_a_self_tracing_workload(tmp_path: Path) -> None:
    from dftune.agents.installer import workload_traces_itself
    from dftune.tools.runner.spec import load_spec

    _script(tmp_path, "from dftracer.python import dftracer\n")
    (tmp_path / "w.toml").write_text('name = "w"\ncommand = ["{python}", "app.py", "{data_dir}"]\n')
    assert workload_traces_itself(load_spec(tmp_path / "w.toml")).reason.startswith("app.py:1")
    (tmp_path / "app.py").write_text("print(1)\n")
    assert not workload_traces_itself(load_spec(tmp_path / "w.toml"))
