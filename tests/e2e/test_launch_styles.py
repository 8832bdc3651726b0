"""A workload diagnoses the same however it is started; traces of separate runs are never merged.

One small-write program (reported case: its bottleneck is small writes) runs under the
real dftracer (PRELOAD) once per launch style, one after another so all see similar load:

- ``direct``: ``python prog.py``;
- ``pyenv-shim``: a ``python3`` that is a pyenv-style shim, a bash script that runs short
  helper commands (``cat``, ``basename``, ``uname``, command substitutions) and then execs
  the real interpreter;
- ``launch-script``: ``bash run.sh``, which echoes, exports, runs python as its child and waits;
- ``timeout``: ``env OMP_NUM_THREADS=1 timeout 300 python prog.py`` (launchers);
- ``mpirun``: ``mpirun -n 1 python prog.py`` (when mpi is installed: mpirun and its proxy);
- ``real-pyenv``: this machine's own pyenv shim, when there is one (27 helper processes).

Every wrapped start must give the direct start's top bottleneck, dominant categories, metric
and worth-tuning gate, with the wrappers listed as helpers.  Then two separate runs of two
programs in one folder are detected, refused without ``--split-runs`` (exit code 2, one line)
and analyzed per run with it, as are two runs of one command far apart in time.
"""

from __future__ import annotations

import json
import shutil
import subprocess
import sys
import textwrap
import time
from dataclasses import dataclass
from pathlib import Path
from typing import Any

import conftest as c  # tests/ is on sys.path (rootdir conftest, prepend import mode)
import pytest
from reference import reference

from dftune.core.domain.diagnosis import Diagnosis
from dftune.tools.diagnose.engine import diagnose, diagnose_runs
from dftune.tools.trace import MultipleRunsError, analyze, analyze_runs

# one xdist worker runs the module: its module fixture (real runs, traced) is then made once,
# not once on each worker that receives one of its tests
pytestmark = [pytest.mark.e2e, pytest.mark.xdist_group("launch_styles")]

TIMEOUT_S = 300
WRITES, WRITE_SIZE = 40_000, 8192
SMALL_WRITER = textwrap.dedent(
    f"""
    import os, sys
    d = sys.argv[1]
    p = os.path.join(d, "small.bin")
    fd = os.open(p, os.O_CREAT | os.O_WRONLY | os.O_TRUNC, 0o644)
    buf = b"w" * {WRITE_SIZE}
    for _ in range({WRITES}):
        assert os.write(fd, buf) == {WRITE_SIZE}
    os.close(fd)
    """
)
READER = textwrap.dedent(
    """
    import os, sys
    p = os.path.join(sys.argv[1], "big.bin")
    fd = os.open(p, os.O_CREAT | os.O_WRONLY | os.O_TRUNC, 0o644)
    os.ftruncate(fd, 64 << 20)  # a sparse file: no write time in the trace
    os.close(fd)
    fd = os.open(p, os.O_RDONLY)
    for _ in range(16):
        os.lseek(fd, 0, os.SEEK_SET)
        while os.read(fd, 1 << 16):
            pass
    os.close(fd)
    os.unlink(p)
    """
)
# A pyenv-style shim: what pyenv's shims and libexec scripts do before they exec python.
SHIM = textwrap.dedent(
    """\
    #!/usr/bin/env bash
    set -e
    program="${{0##*/}}"
    root="$(dirname "$(readlink -f "$0")")"
    version="$(cat "$root/version")"
    for hook in exec which version-name; do
      name="$(basename "$root/$hook")"; true "$name"
    done
    [ "$(uname -s)" = Linux ] || true
    prefix="$(printf '%s' "$version" | tr . -)"; true "$prefix" "$program"
    exec {python} "$@"
    """
)
LAUNCH_SCRIPT = textwrap.dedent(
    """\
    #!/bin/bash
    echo "starting on $(hostname) at $(date)"
    export OMP_NUM_THREADS=1
    cd "$(dirname "$0")"
    {python} prog.py "$1"
    echo done
    """
)
REAL_PYENV = Path.home() / ".pyenv" / "shims" / "python3"
STYLES = ["direct", "pyenv-shim", "launch-script", "timeout", "mpirun", "real-pyenv"]


@dataclass
class Traced:
    style: str
    trace_dir: Path
    data_dir: Path


def _env(trace_dir: Path) -> dict[str, str]:
    lib = c.dftracer_preload_lib()
    assert lib is not None
    env = c._clean_env()
    env.update(
        DFTRACER_ENABLE="1",
        DFTRACER_INIT="PRELOAD",
        DFTRACER_INC_METADATA="1",
        DFTRACER_LOG_FILE=str(trace_dir / "trace"),
        DFTRACER_DATA_DIR="all",
        LD_PRELOAD=str(lib),
    )
    return env


def _run_traced(argv: list[str], base: Path, trace_dir: Path, data_dir: Path) -> None:
    trace_dir.mkdir(parents=True, exist_ok=True)
    data_dir.mkdir(parents=True, exist_ok=True)
    proc = subprocess.Popen(
        argv, cwd=str(base), env=_env(trace_dir), stdout=subprocess.PIPE, stderr=subprocess.PIPE, text=True
    )
    c.wait_for_traced([(argv[0], trace_dir, proc)], TIMEOUT_S)
    # The written file is removed untraced: how long the kernel takes to free 320 MB
    # depends on its writeback, not on the launcher (a slow unlink, or an O_TRUNC of the
    # last run's file, is a real metadata cost that would decide the diagnosis).
    for f in data_dir.glob("small.bin"):
        f.unlink()


def _argv(style: str, base: Path, data: Path) -> list[str] | None:
    py, prog = sys.executable, str(base / "prog.py")
    if style == "direct":
        return [py, prog, str(data)]
    if style == "pyenv-shim":
        shims = base / "shims"
        shims.mkdir()
        (shims / "version").write_text("3.11\n")
        (shims / "python3").write_text(SHIM.format(python=py))
        (shims / "python3").chmod(0o755)
        return [str(shims / "python3"), prog, str(data)]
    if style == "launch-script":
        (base / "run.sh").write_text(LAUNCH_SCRIPT.format(python=py))
        return ["bash", str(base / "run.sh"), str(data)]
    if style == "timeout":
        return ["env", "OMP_NUM_THREADS=1", "timeout", str(TIMEOUT_S), py, prog, str(data)]
    if style == "mpirun":
        if c.mpi_unavailable():
            return None
        from dftune.tools.runner.bench import find_mpirun

        return [find_mpirun(), "-n", "1", py, prog, str(data)]
    if style == "real-pyenv":
        ok = (
            REAL_PYENV.is_file()
            and shutil.which("bash")
            and subprocess.run(
                [str(REAL_PYENV), "-c", "import os"], capture_output=True, timeout=120, check=False
            ).returncode
            == 0
        )
        return [str(REAL_PYENV), prog, str(data)] if ok else None  # its python: only os is imported
    raise AssertionError(style)


@pytest.fixture(scope="module")
def launched(tmp_path_factory: pytest.TempPathFactory) -> dict[str, Traced | None]:
    """The small-write program traced once per launch style, one style after the other."""
    if c.dftracer_preload_lib() is None:
        pytest.skip("dftracer (with libdftracer_preload.so) is not installed")
    root = tmp_path_factory.mktemp("launch")
    out: dict[str, Traced | None] = {}
    for style in STYLES:
        base = root / style
        base.mkdir()
        (base / "prog.py").write_text(SMALL_WRITER)
        argv = _argv(style, base, base / "data")
        if argv is None:
            out[style] = None
            continue
        _run_traced(argv, base, base / "trace", base / "data")
        out[style] = Traced(style, base / "trace", base / "data")
    return out


def _traced(launched: dict[str, Traced | None], style: str) -> Traced:
    t = launched[style]
    if t is None:
        pytest.skip(f"{style}: not available here (no MPI, or no pyenv shim)")
    return t


def _essence(d: Diagnosis) -> dict[str, Any]:
    """What a diagnosis decides: top bottleneck, dominant categories, metric, gate."""
    top = d.bottlenecks[0]
    return {
        "top": (top.id, top.category),
        "categories >= 3": sorted(cat for cat, s in d.category_scores.items() if s >= 3),
        "metric": d.metric.metric,
        "worth_tuning": d.worth_tuning,
        "shape": d.shape,
        "layers": d.gate.allowed_layers,
        "app_processes": d.app_processes,
    }


@pytest.mark.parametrize("style", STYLES[1:])
def test_a_wrapped_start_diagnoses_as_the_direct_start(
    launched: dict[str, Traced | None], style: str
) -> None:
    direct = diagnose([_traced(launched, "direct").trace_dir])
    wrapped = diagnose([_traced(launched, style).trace_dir])
    # the reported case: small writes lead the direct start's diagnosis
    assert direct.bottlenecks[0].category in ("write-time", "small-io") and direct.worth_tuning, (
        direct.gate.reason
    )
    assert _essence(wrapped) == _essence(direct), (wrapped.gate.reason, [b.id for b in wrapped.bottlenecks])
    assert not {b.category for b in wrapped.bottlenecks} & {"imbalance", "stragglers"}
    # the I/O fraction is the application's: it does not sink with the helpers' lifetimes
    assert 0.5 < wrapped.io_fraction / direct.io_fraction < 2, (wrapped.io_fraction, direct.io_fraction)
    # the helpers are listed, with why
    assert direct.helper_processes == []
    assert wrapped.helper_processes and all(h.why for h in wrapped.helper_processes)
    helpers = len(wrapped.helper_processes)
    assert f"{helpers} helper process{'es' if helpers > 1 else ''} left out" in wrapped.gate.reason


@pytest.mark.parametrize("style", STYLES[1:])
def test_helpers_are_listed_in_the_analysis_and_counted_in_its_totals(
    launched: dict[str, Traced | None], style: str
) -> None:
    t = _traced(launched, style)
    whole, app = analyze([t.trace_dir]), analyze([t.trace_dir], exclude_helpers=True)
    helpers = whole.helper_processes
    assert whole.app_processes == app.app_processes == 1
    assert whole.processes == whole.app_processes + len(helpers)
    assert whole.events > app.events  # analyze counts every event; diagnose judges the application's
    assert whole.io_fraction_of_job == app.io_fraction_of_job
    names = " ".join(h.cmd or "" for h in helpers)
    expected = {
        "pyenv-shim": "cat",
        "launch-script": "bash",
        "timeout": "timeout",
        "mpirun": "mpirun",
        "real-pyenv": "pyenv",
    }[style]
    assert expected in names, [(h.cmd, h.why) for h in helpers]
    assert any("helper process" in w for w in whole.warnings)
    # the independent oracle (tests/reference.py) finds the same helpers and I/O fraction
    exp = reference([t.trace_dir]).process_accounting()
    assert (exp["app_processes"], exp["helper_processes"]) == (whole.app_processes, len(helpers))
    assert whole.io_fraction_of_job == pytest.approx(exp["io_fraction_of_job"], abs=2e-6)


def test_cli_diagnosis_of_a_shimmed_start_agrees(launched: dict[str, Traced | None]) -> None:
    t = _traced(launched, "pyenv-shim")
    res = subprocess.run(
        [sys.executable, "-m", "dftune.cli", "diagnose", str(t.trace_dir), "--json"],
        capture_output=True,
        text=True,
        timeout=TIMEOUT_S,
        env=c._clean_env(),
        check=False,
    )
    assert res.returncode == 0, res.stderr
    doc = json.loads(res.stdout)
    d = diagnose([t.trace_dir])
    assert (doc["bottlenecks"][0]["id"], doc["worth_tuning"]) == (d.bottlenecks[0].id, d.worth_tuning)
    assert len(doc["helper_processes"]) == len(d.helper_processes) > 0


# --------------------------------------------------------------------------- separate runs


@pytest.fixture(scope="module")
def two_runs(tmp_path_factory: pytest.TempPathFactory) -> dict[str, Path]:
    """Two programs traced into one folder 1.5 s apart, each also alone; and one program twice."""
    if c.dftracer_preload_lib() is None:
        pytest.skip("dftracer (with libdftracer_preload.so) is not installed")
    root = tmp_path_factory.mktemp("runs")
    (root / "reader.py").write_text(READER)
    (root / "writer.py").write_text(SMALL_WRITER)
    mixed, data = root / "mixed", root / "data"
    _run_traced([sys.executable, str(root / "reader.py"), str(data)], root, mixed, data)
    time.sleep(1.5)
    _run_traced([sys.executable, str(root / "writer.py"), str(data)], root, mixed, data)
    twice = root / "twice"
    start = time.monotonic()
    _run_traced([sys.executable, str(root / "writer.py"), str(data)], root, twice, data)
    time.sleep(2 * (time.monotonic() - start) + 0.5)  # the same command again, longer after than it ran
    _run_traced([sys.executable, str(root / "writer.py"), str(data)], root, twice, data)
    return {"mixed": mixed, "twice": twice}


def _cli(*args: str) -> subprocess.CompletedProcess[str]:
    return subprocess.run(
        [sys.executable, "-m", "dftune.cli", *args],
        capture_output=True,
        text=True,
        timeout=TIMEOUT_S,
        env=c._clean_env(),
        check=False,
    )


@pytest.mark.parametrize("command", ["analyze", "diagnose"])
def test_separate_runs_are_refused_in_one_line_that_says_how(two_runs: dict[str, Path], command: str) -> None:
    for folder in two_runs.values():
        res = _cli(command, str(folder), "--json")
        assert res.returncode == 2 and res.stdout == ""
        assert len(res.stderr.strip().splitlines()) == 1 and "--split-runs" in res.stderr, res.stderr
        assert "2 separate runs" in res.stderr
    with pytest.raises(MultipleRunsError):
        analyze([two_runs["mixed"]])


def test_split_runs_analyzes_each_run_as_if_alone(two_runs: dict[str, Path]) -> None:
    res = _cli("analyze", str(two_runs["mixed"]), "--split-runs", "--json")
    assert res.returncode == 0, res.stderr
    doc = json.loads(res.stdout)
    assert doc["schema"] == "dftune.analysis.runs/1" and len(doc["runs"]) == 2
    reader, writer = doc["runs"]
    assert [r["run"]["index"] for r in doc["runs"]] == [1, 2] and reader["run"]["apart"] is None
    assert "other commands" in writer["run"]["apart"], writer["run"]
    assert reader["app_processes"] == writer["app_processes"] == 1
    # each run is exactly its own files: the same numbers as analyzing those files alone
    for run in doc["runs"]:
        alone = analyze(run["trace_files"]).to_json_dict()
        for key in ("events", "processes", "job_time_s", "read", "write", "metadata", "io_fraction_of_job"):
            assert run[key] == alone[key], key
    merged = analyze([two_runs["mixed"]], merge_runs=True)
    assert reader["events"] + writer["events"] == merged.events
    assert reader["job_time_s"] + writer["job_time_s"] < merged.job_time_s  # the gap is in no run
    assert reader["read"]["bytes"] >= 16 * (64 << 20) and writer["write"]["bytes"] >= WRITES * WRITE_SIZE


def test_split_runs_diagnoses_each_run(two_runs: dict[str, Path]) -> None:
    runs = diagnose_runs([two_runs["mixed"]])
    assert [d.bottlenecks[0].category for d in runs][1] in ("write-time", "small-io")
    assert runs[0].bottlenecks[0].category in ("read-time", "small-io")
    assert all(d.run is not None and d.run.runs == 2 for d in runs)
    res = _cli("diagnose", str(two_runs["mixed"]), "--split-runs", "--json")
    assert res.returncode == 0, res.stderr
    doc = json.loads(res.stdout)
    assert doc["schema"] == "dftune.diagnosis.runs/1"
    assert [r["bottlenecks"][0]["id"] for r in doc["runs"]] == [d.bottlenecks[0].id for d in runs]


def test_the_same_command_far_apart_is_two_runs(two_runs: dict[str, Path]) -> None:
    runs = analyze_runs([two_runs["twice"]])
    assert len(runs) == 2 and runs[1].run is not None
    assert "longer than the activity on either side" in str(runs[1].run.apart)
    assert [a.write.count for a in runs] == [runs[0].write.count] * 2 and runs[0].write.count >= WRITES


# --------------------------------------------------------------------------- the recorded traces


@pytest.mark.parametrize(("name", "ranks"), [("cm1-48ranks-legacy", 48), ("dlio-unet3d-8ranks-legacy", 8)])
def test_recorded_jobs_are_one_run_and_keep_every_process(shared_traces: Path, name: str, ranks: int) -> None:
    path = shared_traces / name
    if not path.is_dir():
        pytest.skip(f"{path} not found")
    a = analyze([path])
    assert a.run is not None and a.run.runs == 1
    assert a.processes == a.app_processes == ranks and a.helper_processes == []
    d = diagnose([path])
    assert d.app_processes == ranks and d.events == a.events


def test_the_recorded_two_host_set_is_two_runs(shared_traces: Path) -> None:
    path = shared_traces / "dlio-legacy-strings"
    if not path.is_dir():
        pytest.skip(f"{path} not found")
    runs = analyze_runs([path])
    assert [a.hosts for a in runs] == [["corona237"], ["ruby165"]]
    assert "other hosts" in str(runs[1].run.apart if runs[1].run else "") and "75.5 h" in str(runs[1].run)
    assert all(a.app_processes == a.processes == 1 for a in runs)
    assert sum(a.events for a in runs) == analyze([path], merge_runs=True).events
    # per run the job is minutes, not the 271,871 s the two runs spanned together
    assert max(a.job_time_s for a in runs) < 200 and min(a.io_fraction_of_job for a in runs) > 0.05
