"""Programs that initialize dftracer themselves are traced in FUNCTION mode, never preloaded twice."""

from __future__ import annotations

import gzip
import json
import textwrap
from pathlib import Path

import pytest

from dftune.tools.runner.bench import bench
from dftune.tools.runner.spec import load_spec

pytestmark = pytest.mark.e2e
pytest.importorskip("dftracer", reason="install dftune[tracer] (the dftracer wheel) for real tracing")

# Writes and reads 20 small files inside a dftracer-annotated function; its own trace goes to argv[2].
APP = textwrap.dedent(
    """
    import os, sys
    {import_line}
    out, trace_to = sys.argv[1], sys.argv[2]
    log = dftracer.{init}(logfile=os.path.join(trace_to, "trace-0-of-1.pfw"), data_dir=None, process_id=0)
    dft = dft_fn("APP")

    @dft.log
    def epoch():
        os.makedirs(out, exist_ok=True)
        for i in range(20):
            with open(os.path.join(out, f"s{i}"), "wb") as fh:
                fh.write(b"x" * 4096)
        for i in range(20):
            with open(os.path.join(out, f"s{i}"), "rb") as fh:
                fh.read()

    epoch()
    log.finalize()
    print("done")
    """
)
STATIC = "from dftracer.python import dftracer, dft_fn"
# an import no source scan sees: only the empty preload trace of the first replicate gives it away
HIDDEN = (
    "import importlib\n_m = importlib.import_module('dft' + 'racer.python')\n"
    "dftracer, dft_fn = _m.dftracer, _m.dft_fn\n"
    "dftracer.start = getattr(dftracer, 'initialize' + '_log')"
)


def _spec(tmp_path: Path, import_line: str, trace_to: str, extra: str = "") -> Path:
    (tmp_path / "app.py").write_text(
        APP.replace("{import_line}", import_line).replace(
            "{init}", "start" if import_line == HIDDEN else "initialize_log"
        )
    )
    toml = tmp_path / "w.toml"
    toml.write_text(
        textwrap.dedent(
            f"""
            name = "self-tracing"
            command = ["{{python}}", "app.py", "{{data_dir}}", "{trace_to}"]
            replicates = 2
            timeout_s = 60
            {extra}
            """
        )
    )
    return toml


def _categories(trace_dir: str) -> set[str]:
    cats: set[str] = set()
    for p in Path(trace_dir).iterdir():
        opener = gzip.open if p.name.endswith(".gz") else open
        with opener(p, "rt") as fh:
            for line in fh:
                line = line.strip().rstrip(",")
                if line.startswith("{"):
                    cats.add(json.loads(line).get("cat", ""))
    return cats


def test_detected_program_is_traced_by_its_own_tracer(tmp_path: Path) -> None:
    spec = load_spec(_spec(tmp_path, STATIC, "{workdir}/app_out"))  # the default spec: mode preload
    result = bench(spec, trace=True, workdir=tmp_path / "run")
    assert result.ok == 2, [r.reason for r in result.replicates]
    assert any("self-tracing program: app.py:3" in n for n in result.notes), result.notes
    for rep in result.replicates:
        files = list(Path(rep.trace_dir).iterdir())
        assert [f.name for f in files if "preload" in f.name] == []  # no second tracer in the process
        assert {"APP", "POSIX"} <= _categories(rep.trace_dir)  # the program's own events and its I/O


def test_hidden_self_tracer_is_caught_by_its_empty_preload_trace(tmp_path: Path) -> None:
    spec = load_spec(_spec(tmp_path, HIDDEN, "{workdir}/app_out"))
    result = bench(spec, trace=True, workdir=tmp_path / "run")
    assert result.ok == 2, [r.reason for r in result.replicates]
    assert any("left an empty preload trace" in n for n in result.notes), result.notes
    assert [r.index for r in result.replicates] == [0, 1]
    for rep in result.replicates:
        assert "APP" in _categories(rep.trace_dir)


def test_traces_written_elsewhere_are_a_clear_failure_until_declared(tmp_path: Path) -> None:
    elsewhere = tmp_path / "elsewhere"  # neither the run's folder nor the workdir
    spec = load_spec(_spec(tmp_path / "", STATIC, str(elsewhere)))
    (tmp_path / "sub").mkdir()
    spec = spec.model_copy(update={"cwd": str(tmp_path / "sub"), "source_dir": str(tmp_path / "sub")})
    spec = spec.model_copy(update={"command": [spec.command[0], str(tmp_path / "app.py"), *spec.command[2:]]})
    failed = bench(spec, trace=True, workdir=tmp_path / "run1")
    assert failed.ok == 0
    reason = failed.replicates[0].reason
    assert "traced run left no events" in reason and "[tracing] output" in reason and "\n" not in reason
    declared = spec.model_copy(
        update={"tracing": spec.tracing.model_copy(update={"output": [str(elsewhere)]})}
    )
    fixed = bench(declared, trace=True, workdir=tmp_path / "run2")
    assert fixed.ok == 2, [r.reason for r in fixed.replicates]
    assert "APP" in _categories(fixed.replicates[0].trace_dir)


def test_trace_dir_placeholder_points_the_program_at_its_replicate_folder(tmp_path: Path) -> None:
    spec = load_spec(_spec(tmp_path, STATIC, "{trace_dir}", extra='[tracing]\noutput = "{trace_dir}"'))
    result = bench(spec, trace=True, workdir=tmp_path / "run")
    assert result.ok == 2, [r.reason for r in result.replicates]
    names = [p.name for p in Path(result.replicates[1].trace_dir).iterdir()]
    assert any(n.startswith("trace-0-of-1") and n.endswith(".pfw.gz") for n in names), names


def test_later_calls_in_the_workdir_start_in_function_mode(tmp_path: Path) -> None:
    """Interleaved arms run one replicate per call: the empty preload trace is paid once, not per call."""
    spec = load_spec(_spec(tmp_path, HIDDEN, "{workdir}/app_out"))
    first = bench(spec, replicates=1, trace=True, workdir=tmp_path / "run")
    assert any("left an empty preload trace" in n for n in first.notes)
    later = bench(spec, replicates=1, trace=True, workdir=tmp_path / "run", first_index=1, prepare=False)
    assert later.ok == 1, [r.reason for r in later.replicates]
    assert not any("left an empty preload trace" in n for n in later.notes), later.notes
    assert any("r0's preload trace was empty" in n for n in later.notes), later.notes
