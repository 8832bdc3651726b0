"""Three mistakes a new user makes, each run for real (a small reader written here): a metric
pattern that never matches, a data folder that is not there, a program that is not there. Each
ends within a replicate (or before any), with a message that names the fix; a crash that may be
the program's own still gets its three attempts."""

from __future__ import annotations

import textwrap
import time
from pathlib import Path

import pytest

from dftune.tools.runner.bench import bench
from dftune.tools.runner.spec import SpecError, load_spec
from dftune.tools.runner.spec_check import check_runnable

pytestmark = pytest.mark.e2e

READER = """
import os, sys, time
folder = sys.argv[1]
t = time.perf_counter()
n = sum(len(open(os.path.join(folder, f), "rb").read()) for f in sorted(os.listdir(folder)))
print(f"read {n} bytes")
print(f"elapsed_s {time.perf_counter() - t:.4f}")
if os.environ.get("CRASH"):
    sys.exit("the reader crashed")
"""

SPEC = """
name = "reader"
command = ["{{python}}", "{script}", "{{data_dir}}"]
data_dir = "{data}"
replicates = 5
env = {{ {env} }}
[metric]
kind = "stdout_regex"
pattern = '{pattern}'
[tracing]
mode = "off"
"""


def _spec(
    tmp_path: Path,
    *,
    script: str = "reader.py",
    data: str = "data",
    pattern: str = r"elapsed_s ([0-9.]+)",
    env: str = "",
):  # type: ignore[no-untyped-def]
    (tmp_path / "reader.py").write_text(textwrap.dedent(READER))
    (tmp_path / "data").mkdir(exist_ok=True)
    (tmp_path / "data" / "a.bin").write_bytes(b"x" * 4096)
    path = tmp_path / "spec.toml"
    path.write_text(SPEC.format(script=script, data=data, pattern=pattern, env=env))
    return load_spec(path)


def test_a_pattern_that_never_matches_ends_at_the_first_replicate_with_what_was_printed(
    tmp_path: Path,
) -> None:
    spec = _spec(tmp_path, pattern=r"elapsed_ms ([0-9.]+)")
    started = time.monotonic()
    result = bench(spec, workdir=tmp_path / "w")
    assert len(result.replicates) == 1 and result.ok == 0
    assert time.monotonic() - started < 20
    why = result.stopped_reason or ""
    assert "[metric]" in why and "elapsed_ms" in why and str(tmp_path / "spec.toml") in why
    assert "the program printed: 'read 4096 bytes' | 'elapsed_s " in why  # what to match instead


def test_a_missing_data_folder_ends_at_the_first_replicate_and_names_the_key(tmp_path: Path) -> None:
    spec = _spec(tmp_path, data="nodata")
    result = bench(spec, workdir=tmp_path / "w")
    assert len(result.replicates) == 1
    why = result.stopped_reason or ""
    assert f"data_dir: {tmp_path / 'nodata'} does not exist and the program failed" in why
    assert "FileNotFoundError" in result.replicates[0].reason  # the program's own words, whole
    assert "No such file or directory" in result.replicates[0].reason


def test_a_crash_of_the_programs_own_gets_three_attempts(tmp_path: Path) -> None:
    spec = _spec(tmp_path, env='CRASH = "1"')
    result = bench(spec, workdir=tmp_path / "w")
    assert len(result.replicates) == 3
    assert "3 failed replicates in a row" in (result.stopped_reason or "")
    assert "the reader crashed" in result.replicates[0].reason


def test_a_program_or_script_that_is_not_there_is_refused_before_anything_runs(tmp_path: Path) -> None:
    with pytest.raises(SpecError, match=r"command: nosuch\.py: no such script \(from cwd"):
        check_runnable(_spec(tmp_path, script="nosuch.py"))
    spec = _spec(tmp_path)
    bad = spec.model_copy(update={"command": ["no-such-program-xyz", "{data_dir}"]})
    with pytest.raises(SpecError, match="no-such-program-xyz: not found on PATH"):
        check_runnable(bad)
    (tmp_path / "tool.sh").write_text("#!/bin/sh\necho elapsed_s 1\n")
    with pytest.raises(SpecError, match=r"tool\.sh is not executable: chmod \+x it"):
        check_runnable(spec.model_copy(update={"command": ["./tool.sh"]}))
    with pytest.raises(SpecError, match=r"cwd: .* is not a folder"):
        check_runnable(spec.model_copy(update={"cwd": str(tmp_path / "gone")}))
    check_runnable(spec)  # and a spec that can run passes
