"""The Dask map (``analyze(..., scheduler=...)``) gives exactly the local result.

One LocalCluster (2 worker processes, 1 thread each) serves the module.  Each recorded
trace set in ../shared/traces is analyzed with every view on the cluster and locally, and
the two JSON documents must be identical, key for key.
"""

from __future__ import annotations

from collections.abc import Iterator
from pathlib import Path
from typing import Any

import pytest

from dftune.tools.trace import analyze, analyze_runs

pytestmark = pytest.mark.dask

TRACES = Path(__file__).resolve().parents[2].parent / "shared" / "traces"
TRACE_SETS = ("cm1-48ranks-legacy", "dlio-legacy-strings", "dlio-unet3d-8ranks-legacy")
VIEWS = ["file", "proc", "layer", "time"]


@pytest.fixture(scope="module")
def cluster() -> Iterator[Any]:
    distributed = pytest.importorskip("distributed")
    with distributed.LocalCluster(
        n_workers=2, threads_per_worker=1, processes=True, dashboard_address=None
    ) as local_cluster:
        yield local_cluster


def _trace_set(name: str) -> Path:
    path = TRACES / name
    if not path.is_dir():
        pytest.skip(f"trace set not found: {path}")
    return path


def _diff(a: Any, b: Any, where: str = "$") -> list[str]:
    """Paths at which two JSON documents differ (for a readable failure)."""
    if isinstance(a, dict) and isinstance(b, dict):
        out = [f"{where}.{k}: only in {'dask' if k in a else 'local'}" for k in sorted(a.keys() ^ b.keys())]
        for k in sorted(a.keys() & b.keys()):
            out += _diff(a[k], b[k], f"{where}.{k}")
        return out
    if isinstance(a, list) and isinstance(b, list) and len(a) == len(b):
        return [d for i, (x, y) in enumerate(zip(a, b, strict=True)) for d in _diff(x, y, f"{where}[{i}]")]
    return [] if a == b and type(a) is type(b) else [f"{where}: dask {a!r} != local {b!r}"]


def _assert_same(path: Path, views: list[str], scheduler: Any) -> None:
    # per run: dlio-legacy-strings holds two separate runs (two hosts, 75 h apart)
    on_dask = {"runs": [a.to_json_dict() for a in analyze_runs([path], views=views, scheduler=scheduler)]}
    local = {"runs": [a.to_json_dict() for a in analyze_runs([path], views=views)]}
    assert all(a["events"] > 0 and set(a["views"]) == set(views) for a in on_dask["runs"])
    differences = _diff(on_dask, local)
    assert not differences, f"{len(differences)} differences, first: {differences[:10]}"
    assert on_dask == local


@pytest.mark.parametrize("name", TRACE_SETS)
def test_dask_result_equals_local(cluster: Any, name: str) -> None:
    """All keys, all views (file, proc, layer, time)."""
    _assert_same(_trace_set(name), VIEWS, cluster.scheduler_address)


def test_dask_accepts_a_client_object(cluster: Any) -> None:
    """``scheduler`` may be a distributed Client; the engine must not close the caller's client."""
    distributed = pytest.importorskip("distributed")
    path = _trace_set("dlio-unet3d-8ranks-legacy")
    with distributed.Client(cluster) as client:
        on_dask = analyze([path], views=["proc"], scheduler=client).to_json_dict()
        assert client.status == "running"
    local = analyze([path], views=["proc"]).to_json_dict()
    assert on_dask == local
