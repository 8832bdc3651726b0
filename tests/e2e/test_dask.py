"""The Dask map (``analyze(..., scheduler=...)``) gives exactly the local result.

One LocalCluster (2 worker processes, 1 thread each) serves the module.  Each recorded
trace set in ../shared/traces is analyzed with every view on the cluster and locally, and
the two JSON documents must be identical, key for key.
"""

from __future__ import annotations

import json
import os
import signal
import socket
import subprocess
import sys
import time
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import pytest

from dftune.tools.trace import analyze, analyze_runs
from dftune.tools.trace.engine import DaskError

pytestmark = pytest.mark.dask

TRACES = Path(__file__).resolve().parents[2].parent / "shared" / "traces"
TRACE_SETS = ("cm1-48ranks-legacy", "dlio-legacy-strings", "dlio-unet3d-8ranks-legacy")
VIEWS = ["file", "proc", "layer", "time"]


@pytest.fixture(scope="module")
def cluster() -> Iterator[Any]:
    distributed = pytest.importorskip("distributed")
    with distributed.LocalCluster(
        n_workers=2, threads_per_worker=1, processes=True, dashboard_address=":0"
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


# --------------------------------------------------------------------------- a cluster that fails


def _free_port() -> int:
    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        return int(s.getsockname()[1])


def _dftune(
    *args: str, env: dict[str, str] | None = None, timeout: float = 120
) -> subprocess.CompletedProcess[str]:
    return subprocess.run(
        [sys.executable, "-m", "dftune.cli", *args],
        capture_output=True,
        text=True,
        timeout=timeout,
        env={**os.environ, **(env or {})},
        check=False,
    )


def _assert_one_line_json_error(res: subprocess.CompletedProcess[str], *needles: str) -> str:
    """--json failure contract: non-zero exit, nothing on stdout, one line on stderr."""
    assert res.returncode != 0, res
    assert res.stdout == "", res.stdout[:500]
    lines = res.stderr.strip().splitlines()
    assert len(lines) == 1, res.stderr[-2000:]
    assert "internal error" not in lines[0] and "Traceback" not in res.stderr
    for needle in needles:
        assert needle in lines[0], lines[0]
    return lines[0]


def _kill_on_read(client: Any) -> None:
    """Register a worker plugin that SIGKILLs its own worker process when a trace read starts there.

    The worker dies for real (no exception, no clean shutdown), as on an OOM kill or a node
    failure: what the engine sees is exactly what a dying cluster gives it.  The class is
    local so cloudpickle ships it by value (the workers cannot import this test module).
    """
    from distributed import WorkerPlugin

    class KillOnRead(WorkerPlugin):
        name = "dftune-test-kill-on-read"

        def transition(self, key: Any, start: str, finish: str, **kwargs: Any) -> None:
            if finish == "executing" and "read_file" in str(key):
                os.kill(os.getpid(), signal.SIGKILL)

    client.register_plugin(KillOnRead())


def test_unreachable_scheduler_is_named_as_such() -> None:
    """Not "input: Timed out ..." as if a trace file were bad."""
    address = f"tcp://127.0.0.1:{_free_port()}"
    t0 = time.monotonic()
    res = _dftune(
        "analyze",
        str(_trace_set("dlio-unet3d-8ranks-legacy")),
        "--scheduler",
        address,
        "--json",
        env={"DFTUNE_DASK_CONNECT_S": "2"},
    )
    line = _assert_one_line_json_error(res, f"Dask scheduler {address} unreachable")
    assert not line.startswith("dftune: error: input:")
    assert time.monotonic() - t0 < 30


@pytest.fixture
def lone_worker_cluster(tmp_path: Path) -> Iterator[tuple[str, subprocess.Popen[bytes]]]:
    """A real scheduler and one worker without a nanny (nothing restarts it), as separate processes."""
    pytest.importorskip("distributed")
    info = tmp_path / "scheduler.json"
    procs: list[subprocess.Popen[bytes]] = []
    log = open(tmp_path / "dask.log", "wb")  # noqa: SIM115 - closed at teardown
    try:
        procs.append(
            subprocess.Popen(
                [
                    sys.executable,
                    "-m",
                    "distributed.cli.dask_scheduler",
                    "--port",
                    "0",
                    "--host",
                    "127.0.0.1",
                    "--no-dashboard",
                    "--scheduler-file",
                    str(info),
                ],
                stdout=log,
                stderr=log,
                start_new_session=True,
            )
        )
        deadline = time.monotonic() + 60
        while not info.exists() and time.monotonic() < deadline:
            time.sleep(0.1)
        address = json.loads(info.read_text())["address"]
        worker = subprocess.Popen(
            [
                sys.executable,
                "-m",
                "distributed.cli.dask_worker",
                address,
                "--no-nanny",
                "--nthreads",
                "1",
                "--no-dashboard",
                "--host",
                "127.0.0.1",
            ],
            stdout=log,
            stderr=log,
            start_new_session=True,
        )
        procs.append(worker)
        distributed = pytest.importorskip("distributed")
        with distributed.Client(address, timeout=30) as client:
            client.wait_for_workers(1, timeout=60)
        yield address, worker
    finally:
        for p in reversed(procs):
            if p.poll() is None:
                os.killpg(p.pid, signal.SIGTERM)
                try:
                    p.wait(timeout=10)
                except subprocess.TimeoutExpired:
                    os.killpg(p.pid, signal.SIGKILL)
                    p.wait()
        log.close()


def test_every_worker_dies_mid_analysis_and_analyze_does_not_hang(
    lone_worker_cluster: tuple[str, subprocess.Popen[bytes]], monkeypatch: pytest.MonkeyPatch
) -> None:
    """The only worker is SIGKILLed while it reads a file: a clear error after the no-worker limit."""
    distributed = pytest.importorskip("distributed")
    address, worker = lone_worker_cluster
    with distributed.Client(address, timeout=30) as client:
        _kill_on_read(client)
    monkeypatch.setenv("DFTUNE_DASK_NO_WORKERS_S", "3")
    t0 = time.monotonic()
    with pytest.raises(DaskError, match="has had no worker for 3 s") as caught:
        analyze([_trace_set("dlio-unet3d-8ranks-legacy")], scheduler=address)
    assert time.monotonic() - t0 < 60
    assert worker.wait(timeout=10) == -signal.SIGKILL  # it really died
    assert address in str(caught.value) and "\n" not in str(caught.value)


def test_every_worker_dead_cli_json(lone_worker_cluster: tuple[str, subprocess.Popen[bytes]]) -> None:
    """The same through `dftune analyze --scheduler --json`: one line on stderr, nothing on stdout."""
    address, worker = lone_worker_cluster
    os.kill(worker.pid, signal.SIGKILL)
    worker.wait(timeout=10)
    res = _dftune(
        "analyze",
        str(_trace_set("dlio-unet3d-8ranks-legacy")),
        "--scheduler",
        address,
        "--json",
        env={"DFTUNE_DASK_NO_WORKERS_S": "3"},
    )
    _assert_one_line_json_error(res, "no worker for 3 s", address)


def test_killed_worker_is_a_one_line_error(tmp_path: Path) -> None:
    """A file whose reading kills worker after worker (the nanny restarts them): KilledWorker, one line."""
    distributed = pytest.importorskip("distributed")
    dask = pytest.importorskip("dask")
    with (
        dask.config.set({"distributed.scheduler.allowed-failures": 0}),
        distributed.LocalCluster(
            n_workers=1, threads_per_worker=1, processes=True, dashboard_address=":0"
        ) as local,
        distributed.Client(local) as client,
    ):
        _kill_on_read(client)
        path = _trace_set("dlio-unet3d-8ranks-legacy")
        res = _dftune("analyze", str(path), "--scheduler", local.scheduler_address, "--json")
        _assert_one_line_json_error(res, "KilledWorker", "a Dask worker died every time it read")
        with pytest.raises(DaskError, match="KilledWorker"):
            analyze([path], scheduler=client)


def test_no_progress_with_workers_ends_the_analysis(
    lone_worker_cluster: tuple[str, subprocess.Popen[bytes]], monkeypatch: pytest.MonkeyPatch
) -> None:
    """A worker that stays connected but never finishes (stuck, here for real: its event loop sleeps)."""
    distributed = pytest.importorskip("distributed")
    address, _ = lone_worker_cluster

    class StuckOnRead(distributed.WorkerPlugin):
        name = "dftune-test-stuck-on-read"

        def transition(self, key: Any, start: str, finish: str, **kwargs: Any) -> None:
            if finish == "executing" and "read_file" in str(key):
                time.sleep(60)

    with distributed.Client(address, timeout=30) as client:
        client.register_plugin(StuckOnRead())
    monkeypatch.setenv("DFTUNE_DASK_STALL_S", "3")
    t0 = time.monotonic()
    with pytest.raises(DaskError, match=r"no file finished on the Dask cluster at .* for 3 s \(1 worker"):
        analyze([_trace_set("dlio-unet3d-8ranks-legacy")], scheduler=address)
    assert time.monotonic() - t0 < 30
