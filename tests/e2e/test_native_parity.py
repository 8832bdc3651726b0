"""Both trace readers agree on real traces: the recorded legacy sets and real dftracer 2.x.

The native scanner must read every file of these sets itself (a scanner that quietly
declined them would make the comparison vacuous), and the full Analysis JSON, every view
included, must equal the DuckDB reader's.
"""

from __future__ import annotations

from pathlib import Path
from typing import Any

import conftest as c
import pytest

from dftune.tools.trace import native
from dftune.tools.trace.discover import discover
from dftune.tools.trace.reader import read_file_native
from tests.readers import analyze_with

pytestmark = [
    pytest.mark.e2e,
    pytest.mark.skipif(native.module() is None, reason="native trace scanner not built"),
]

SETS = [pytest.param(("shared", n), id=n) for n in c.SHARED_TRACE_SETS] + [
    pytest.param(("generated", n), id=f"gen-{n}") for n in c.GENERATED_SETS
]


def _analyze(path: Path, mode: str) -> dict[str, Any]:
    return analyze_with([path], mode, views=["summary", "file", "proc", "time", "layer"], merge_runs=True)


@pytest.mark.parametrize("which", SETS)
def test_native_and_duckdb_readers_agree(request: pytest.FixtureRequest, which: tuple[str, str]) -> None:
    kind, name = which
    if kind == "shared":
        root: Path = request.getfixturevalue("shared_traces")
        path = root / name
        if not path.is_dir():
            pytest.skip(f"trace set {name} not found in {root}")
    else:
        path = request.getfixturevalue("generated_traces")[name].trace_dir
    files = [f for f in discover([path]) if f.stat().st_size > 0]
    assert files
    declined = [f.name for f in files if read_file_native(f) is None]
    assert declined == [], f"the native scanner declined {declined}"
    got, want = _analyze(path, "native"), _analyze(path, "duckdb")
    assert got == want
    assert got["events"] > 0
