"""Bare specs of programs nobody tuned, run for real: the run finds the thread pool's size behind
``--threads`` in the program's source, measures it traced, and keeps it only when the same
requests are served faster.

Two readers written for this test, the same command line: an honest one, whose pool serves the
same 4 KiB reads of every file; and one whose ``--threads`` secretly reads only the first half
of each file when it is above 1 (doing less under a legitimate pool strategy), which the guards
must refuse from its traces."""

from __future__ import annotations

import json
import subprocess
import sys
import textwrap
from pathlib import Path

import pytest

from tests.conftest import dftracer_preload_lib

pytestmark = pytest.mark.e2e

READER = """
import argparse, os, sys, time
from concurrent.futures import ThreadPoolExecutor
p = argparse.ArgumentParser()
p.add_argument("--data", required=True)
p.add_argument("--threads", type=int, default=1, help="reader threads")
p.add_argument("--chunk", type=int, default=4096, help="read size")
p.add_argument("--files", type=int, default=240)
p.add_argument("--generate", action="store_true")
a = p.parse_args()
if a.generate:
    os.makedirs(a.data, exist_ok=True)
    for i in range(a.files):
        with open(os.path.join(a.data, f"f{i:04d}.bin"), "wb") as f:
            f.write(os.urandom(16384))
    sys.exit(0)
def read(name):
    n = 0
    with open(os.path.join(a.data, name), "rb", buffering=0) as f:
        limit = SIZE_LIMIT
        while n < limit and (b := f.read(a.chunk)):
            n += len(b)
            time.sleep(0.0015)  # the storage's latency per request (a wait, the GIL released)
    return n
t0 = time.perf_counter()
with ThreadPoolExecutor(max_workers=a.threads) as pool:
    total = sum(pool.map(read, sorted(os.listdir(a.data))))
print(f"read_time_s {time.perf_counter() - t0:.4f}")
print(f"bytes_read {total}")
"""

SPEC = """
name = "{name}"
command = ["{{python}}", "reader.py", "--data", "{{data_dir}}"]
setup = ["{{python}}", "reader.py", "--data", "{{data_dir}}", "--generate"]
replicates = 3
timeout_s = 120
[metric]
kind = "stdout_regex"
pattern = 'read_time_s ([0-9.]+)'
"""


def _run(tmp_path: Path, name: str, limit: str) -> dict:  # type: ignore[type-arg]
    if dftracer_preload_lib() is None:
        pytest.skip("dftracer (with libdftracer_preload.so) is not installed")
    (tmp_path / "reader.py").write_text(textwrap.dedent(READER).replace("SIZE_LIMIT", limit))
    (tmp_path / "bare.toml").write_text(SPEC.format(name=name))
    home = tmp_path / "home"
    cmd = [sys.executable, "-m", "dftune.cli", "run", "bare.toml", "--max-experiments", "2", "--json"]
    env = {**__import__("os").environ, "DFTUNE_HOME": str(home)}
    done = subprocess.run(
        cmd, cwd=tmp_path, capture_output=True, text=True, timeout=900, env=env, check=False
    )
    assert done.returncode == 0, done.stderr[-2000:]
    return json.loads(done.stdout)


def test_an_honest_pool_is_found_and_kept(tmp_path: Path) -> None:
    result = _run(tmp_path, "pool-honest", "1 << 30")
    found = {lv["knob"]: lv for lv in result["levers"]["found"]}
    lever = found["THREADS"]
    assert lever["values"] == [1, 2, 4, 8]
    # open(..., buffering=0) is written in the source: an env-gated lever on a copy
    assert found["DFTUNE_BUFFERING"]["kind"] == "env" and found["DFTUNE_BUFFERING"]["default"] == 0
    assert "(ThreadPoolExecutor max_workers=)" in lever["origin"]
    kept = [v for v in result["verdicts"] if v["kept"]]
    assert kept and kept[0]["proposal"].startswith("THREADS="), result["verdicts"]
    assert result["best_median"] < 0.7 * result["baseline_median"]


def test_a_pool_flag_that_reads_less_is_refused(tmp_path: Path) -> None:
    result = _run(tmp_path, "pool-cheat", "(1 << 30) if a.threads == 1 else 8192")
    assert "THREADS" in {lv["knob"] for lv in result["levers"]["found"]}
    assert not [v for v in result["verdicts"] if v["kept"]], result["verdicts"]
    thread_verdicts = [v for v in result["verdicts"] if v["proposal"].startswith("THREADS=")]
    assert thread_verdicts and all(v["verdict"] == "rejected" for v in thread_verdicts), thread_verdicts


def test_a_program_that_ignores_help_writes_nothing_beside_the_users_files(tmp_path: Path) -> None:
    """The run asks a binary for --help in an empty folder: one that does its work instead
    writes there, and its whole process group is gone at the time limit."""
    import os
    import time

    from dftune.tools.runner.draft import run_help

    user, scratch = tmp_path / "user", tmp_path / "scratch"
    user.mkdir()
    scratch.mkdir()
    prog = user / "prog.sh"
    prog.write_text("#!/bin/sh\necho working > out.txt\nsleep 60 &\necho $! > child.pid\nsleep 60\n")
    prog.chmod(0o755)
    t0 = time.monotonic()
    assert run_help(["./prog.sh"], user, 1.0, scratch).strip() == ""
    assert time.monotonic() - t0 < 30
    assert sorted(os.listdir(user)) == ["prog.sh"] and (scratch / "out.txt").is_file()
    child = int((scratch / "child.pid").read_text())
    with pytest.raises(ProcessLookupError):  # the child it left behind went with its group
        os.kill(child, 0)
