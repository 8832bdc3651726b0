"""Third, independent count: dftracer-utils' own native ``dftracer_event_count``.

The engine must agree with dftracer's C++ counter wherever that tool can read the trace
(it aborts on legacy traces that write numbers as strings; those are skipped, and
tests/reference.py covers them).
"""

from __future__ import annotations

import shutil
import subprocess
import sys
from pathlib import Path

import pytest

from dftune.tools.trace import analyze

pytestmark = pytest.mark.e2e


def native_event_count(trace_dir: Path, index_dir: Path) -> int | None:
    tool = shutil.which("dftracer_event_count") or str(Path(sys.executable).parent / "dftracer_event_count")
    if not Path(tool).exists():
        pytest.skip("dftracer_event_count (dftracer-utils) is not installed")
    proc = subprocess.run(
        [tool, "-d", str(trace_dir), "--index-dir", str(index_dir), "--log-level", "off"],
        capture_output=True,
        text=True,
        timeout=300,
        check=False,
    )
    if proc.returncode != 0:
        return None
    return int(proc.stdout.strip().splitlines()[-1])


@pytest.mark.parametrize("name", ["cm1-48ranks-legacy", "dlio-unet3d-8ranks-legacy", "dlio-legacy-strings"])
def test_events_match_dftracer_event_count_on_shared_traces(
    shared_traces: Path, tmp_path: Path, name: str
) -> None:
    native = native_event_count(shared_traces / name, tmp_path)
    if native is None:
        pytest.skip(f"dftracer_event_count cannot read {name}")
    assert analyze([shared_traces / name], merge_runs=True).events == native


@pytest.mark.parametrize("name", ["preload", "multiproc", "function"])
def test_events_match_dftracer_event_count_on_generated_traces(
    generated_traces: dict, tmp_path: Path, name: str
) -> None:
    trace_dir = generated_traces[name].trace_dir
    native = native_event_count(trace_dir, tmp_path)
    if native is None:
        pytest.skip(f"dftracer_event_count cannot read the {name} trace")
    assert analyze([trace_dir]).events == native
