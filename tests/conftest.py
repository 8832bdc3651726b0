"""Shared fixtures: state isolation, the recorded traces, and real dftracer 2.x traces.

``generated_traces`` runs small Python programs under the real dftracer (PRELOAD via
LD_PRELOAD, the FUNCTION-mode Python API, and aggregation mode) once per session. Their
I/O is fixed so the tests can check known byte counts; see ``GENERATED`` below.
"""

from __future__ import annotations

import importlib.util
import json
import os
import subprocess
import sys
import textwrap
from collections.abc import Iterator, Mapping
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

import pytest

from tests.schedule import load_durations, longest_first

REPO = Path(__file__).resolve().parent.parent
SHARED_TRACES = REPO.parent / "shared" / "traces"
SHARED_TRACE_SETS = ("cm1-48ranks-legacy", "dlio-legacy-strings", "dlio-unet3d-8ranks-legacy")
GENERATED_SETS = ("preload", "multiproc", "function", "aggregated")
GEN_TIMEOUT_S = 120


@pytest.fixture(autouse=True)
def _dftune_home(tmp_path_factory: pytest.TempPathFactory, monkeypatch: pytest.MonkeyPatch) -> Path:
    """Every test gets its own DFTUNE_HOME; nothing touches ~/.local/share/dftune."""
    home = tmp_path_factory.mktemp("dftune_home")
    monkeypatch.setenv("DFTUNE_HOME", str(home))
    return home


@pytest.fixture(autouse=True)
def _no_real_llm(monkeypatch: pytest.MonkeyPatch) -> None:
    """Tests never reach a model provider. A chat client for anything but a loopback URL (the local
    API servers of tests/fakes/llm_api.py), a pre-flight probe of a remote host, and any request the
    SDKs' HTTP transport would send to a remote host all fail the test."""
    from urllib.parse import urlsplit

    import dftune.agents.reasoner.transport as transport

    real_build, real_probe = transport.build_chat_model, transport.probe_endpoint

    def build(spec: str, settings: object = None) -> object:
        url = transport.endpoint(transport.parse_model_spec(spec)[0]).url
        if not transport.is_loopback(urlsplit(url).hostname):
            raise AssertionError(f"a test tried to build a real chat model client ({spec} at {url})")
        return real_build(spec, settings)  # type: ignore[arg-type]

    def probe(host: str, port: int, timeout: float = transport.PROBE_TIMEOUT_S) -> str | None:
        if not transport.is_loopback(host):
            raise AssertionError(f"a test tried to reach a model provider: {host}:{port}")
        return real_probe(host, port, timeout)

    monkeypatch.setattr(transport, "build_chat_model", build)
    monkeypatch.setattr(transport, "probe_endpoint", probe)
    for name in ("httpx2", "httpx"):  # the SDKs' HTTP clients
        try:
            module = importlib.import_module(name)
        except ImportError:
            continue
        original = module.HTTPTransport.handle_request

        def handle(self: object, request: object, _original: object = original) -> object:
            host = request.url.host  # type: ignore[attr-defined]
            if not transport.is_loopback(host):
                raise AssertionError(f"a test tried to reach the network: {request.url}")  # type: ignore[attr-defined]
            return _original(self, request)  # type: ignore[operator]

        monkeypatch.setattr(module.HTTPTransport, "handle_request", handle)


@pytest.fixture(params=["native", "duckdb"])
def read_path(request: pytest.FixtureRequest, monkeypatch: pytest.MonkeyPatch) -> str:
    """Run a trace test once per reader: the native C scanner and the DuckDB path.

    Both must give the same answers; the DuckDB run is forced with DFTUNE_TRACE_NATIVE=0.
    """
    from dftune.tools.trace import native

    if request.param == "native" and native.module() is None:
        pytest.skip("the native trace scanner (dftune.tools.trace._fastscan) is not built here")
    monkeypatch.setenv(native.ENV, "1" if request.param == "native" else "0")
    return str(request.param)


@pytest.fixture(autouse=True)
def _no_network(monkeypatch: pytest.MonkeyPatch) -> None:
    """Tests never reach the network: literature searches run offline unless a test injects a
    recorded transport, and the real HTTP transport fails the test if anything calls it."""
    from dftune.core.network import OFFLINE_ENV
    from dftune.tools.literature import net, remote

    monkeypatch.setenv(OFFLINE_ENV, "1")
    monkeypatch.setattr(remote, "_default_remote", None)

    def _refuse(self: object, url: str, **_kw: object) -> object:
        raise AssertionError(f"a test tried to reach the network: GET {url}")

    monkeypatch.setattr(net.UrllibTransport, "get", _refuse)


@pytest.fixture(scope="session")
def shared_traces() -> Path:
    """The recorded legacy traces in ../shared/traces (skip when absent)."""
    if not SHARED_TRACES.is_dir():
        pytest.skip(f"shared traces not found at {SHARED_TRACES}")
    return SHARED_TRACES


# --------------------------------------------------------------------------- generated


# Known I/O of the generated programs (the tests check these exact numbers).
DATA_CHUNKS = (4096, 65536, 2 * 1024 * 1024, 1000)  # os.write sizes into data.bin
DATA_SIZE = sum(DATA_CHUNKS)
SEQ_CHUNK = 65536  # sequential os.read size
SEEK_TO, SEEK_READ = 4096, 8192  # lseek then read
PREADS, PREAD_SIZE = 20, 4096  # random preads
FWRITE_SIZE, FWRITE_ITEMS = 100, 80  # fwrite(buf, 100, 80) -> 8000 bytes
FREAD_SIZE, FREAD_ITEMS = 10, 30  # fread(buf, 10, 30) -> 300 bytes
CHILDREN = 2
CHILD_BYTES = (100_000, 200_000)  # child i writes CHILD_BYTES[i] and reads it back
FUNC_WRITES = (50_000, 50_000, 50_000)
FUNC_PREADS = ((1000, 10), (1000, 60_000))  # (size, offset)
AGG_SECONDS, AGG_PREAD = 2.5, 4096

PRELOAD_PROG = textwrap.dedent(
    f"""
    import ctypes, os, random, sys
    d = sys.argv[1]
    p = os.path.join(d, "data.bin")
    fd = os.open(p, os.O_CREAT | os.O_WRONLY | os.O_TRUNC, 0o644)
    for n in {DATA_CHUNKS!r}:
        assert os.write(fd, b"x" * n) == n
    os.fsync(fd)
    os.close(fd)
    fd = os.open(p, os.O_RDONLY)
    while os.read(fd, {SEQ_CHUNK}):
        pass
    os.lseek(fd, {SEEK_TO}, os.SEEK_SET)
    assert len(os.read(fd, {SEEK_READ})) == {SEEK_READ}
    rng = random.Random(7)
    for _ in range({PREADS}):
        off = rng.randrange(0, {DATA_SIZE} - {PREAD_SIZE})
        assert len(os.pread(fd, {PREAD_SIZE}, off)) == {PREAD_SIZE}
    os.close(fd)
    libc = ctypes.CDLL(None)
    libc.fopen.restype = ctypes.c_void_p
    libc.fopen.argtypes = [ctypes.c_char_p, ctypes.c_char_p]
    libc.fwrite.argtypes = [ctypes.c_char_p, ctypes.c_size_t, ctypes.c_size_t, ctypes.c_void_p]
    libc.fread.argtypes = [ctypes.c_char_p, ctypes.c_size_t, ctypes.c_size_t, ctypes.c_void_p]
    libc.fclose.argtypes = [ctypes.c_void_p]
    s = os.path.join(d, "stdio.bin").encode()
    buf = ctypes.create_string_buffer(b"z" * {FWRITE_SIZE * FWRITE_ITEMS})
    f = libc.fopen(s, b"wb")
    assert libc.fwrite(buf, {FWRITE_SIZE}, {FWRITE_ITEMS}, f) == {FWRITE_ITEMS}
    libc.fclose(f)
    f = libc.fopen(s, b"rb")
    assert libc.fread(buf, {FREAD_SIZE}, {FREAD_ITEMS}, f) == {FREAD_ITEMS}
    libc.fclose(f)
    """
)

MULTI_PROG = textwrap.dedent(
    f"""
    import os, subprocess, sys
    d = sys.argv[1]
    if len(sys.argv) > 2:
        i = int(sys.argv[2])
        n = {CHILD_BYTES!r}[i]
        p = os.path.join(d, f"part-{{i}}.bin")
        fd = os.open(p, os.O_CREAT | os.O_WRONLY | os.O_TRUNC, 0o644)
        assert os.write(fd, b"c" * n) == n
        os.close(fd)
        fd = os.open(p, os.O_RDONLY)
        assert len(os.pread(fd, n, 0)) == n
        os.close(fd)
        sys.exit(0)
    kids = [subprocess.Popen([sys.executable, __file__, d, str(i)]) for i in range({CHILDREN})]
    assert all(k.wait(timeout=60) == 0 for k in kids)
    """
)

FUNCTION_PROG = textwrap.dedent(
    f"""
    import os, sys
    from dftracer.python import dftracer, dft_fn
    d = sys.argv[1]
    log = dftracer.initialize_log(logfile=os.environ["DFTRACER_LOG_FILE"], data_dir="all", process_id=-1)
    app = dft_fn("app")

    @app.log
    def produce():
        fd = os.open(os.path.join(d, "func.bin"), os.O_CREAT | os.O_WRONLY | os.O_TRUNC, 0o644)
        for n in {FUNC_WRITES!r}:
            assert os.write(fd, b"f" * n) == n
        os.close(fd)

    @app.log
    def consume():
        fd = os.open(os.path.join(d, "func.bin"), os.O_RDONLY)
        for size, off in {FUNC_PREADS!r}:
            assert len(os.pread(fd, size, off)) == size
        os.close(fd)

    with dft_fn("app", name="region"):
        produce()
        consume()
    log.finalize()
    """
)

AGG_PROG = textwrap.dedent(
    f"""
    import os, random, sys, time
    d = sys.argv[1]
    p = os.path.join(d, "agg.bin")
    fd = os.open(p, os.O_CREAT | os.O_WRONLY | os.O_TRUNC, 0o644)
    assert os.write(fd, b"a" * (1 << 20)) == 1 << 20
    os.close(fd)
    fd = os.open(p, os.O_RDONLY)
    rng = random.Random(3)
    n = 0
    t0 = time.monotonic()
    while time.monotonic() - t0 < {AGG_SECONDS}:
        for _ in range(200):
            assert len(os.pread(fd, {AGG_PREAD}, rng.randrange(0, (1 << 20) - {AGG_PREAD}))) == {AGG_PREAD}
        n += 200
        time.sleep(0.002)
    os.close(fd)
    sys.stdout.write(f"{{n}}\\n")
    """
)


@dataclass
class GeneratedTrace:
    name: str
    trace_dir: Path  # the folder holding only the .pfw.gz files
    data_dir: Path  # where the program wrote its files
    stdout: str = ""
    extra: dict[str, int] = field(default_factory=dict)


def dftracer_preload_lib() -> Path | None:
    spec = importlib.util.find_spec("dftracer")
    if spec is None or not spec.submodule_search_locations:
        return None
    lib = Path(next(iter(spec.submodule_search_locations))) / "lib64" / "libdftracer_preload.so"
    return lib if lib.is_file() else None


def mpi_unavailable() -> str | None:
    """Why an MPI workload cannot run here (None when it can): mpi4py and an mpirun are needed.

    Both come with the ``examples`` extra (mpi4py + the ``mpich`` wheel), which ``make venv``
    installs; a machine without them cannot run the MPI example at all."""
    if importlib.util.find_spec("mpi4py") is None:
        return "mpi4py is not installed (pip install 'dftune[examples]' brings mpi4py and the mpich wheel)"
    from dftune.tools.runner.bench import find_mpirun

    launcher = find_mpirun()
    if not Path(launcher).is_file():
        return "no mpirun beside this Python nor on PATH (pip install mpich, or an MPI from the OS)"
    return None


def needs_traced_mpi() -> None:
    """Skip the calling test unless dftracer and an MPI (mpi4py and an mpirun) are here."""
    pytest.importorskip("dftracer")
    why = mpi_unavailable()
    if why:
        pytest.skip(why)


def run_cli_json(*args: str, env: dict[str, str] | None = None, timeout: float = 900) -> dict[str, Any]:
    """``python -m dftune.cli ARGS --json`` in a subprocess, as a user runs it: exit 0 and its JSON
    document (the failure shows the end of its stderr)."""
    done = subprocess.run(
        [sys.executable, "-m", "dftune.cli", *args, "--json"],
        capture_output=True,
        text=True,
        timeout=timeout,
        check=False,
        env=env,
    )
    assert done.returncode == 0, done.stderr[-2000:]
    doc: dict[str, Any] = json.loads(done.stdout)
    return doc


def tune_in(folder: Path, files: Mapping[str, str], *, experiments: int) -> dict[str, Any]:
    """Write ``files`` (name -> text, ``workload.toml`` among them) to ``folder`` and tune that spec
    autonomously under the folder's own DFTUNE_HOME (``dftune run --json``); it must complete."""
    for name, text in files.items():
        (folder / name).write_text(text)
    env = {**os.environ, "DFTUNE_HOME": str(folder / "home")}
    spec, n = str(folder / "workload.toml"), str(experiments)
    doc = run_cli_json("run", spec, "--mode", "autonomous", "--max-experiments", n, "--force", env=env)
    assert doc["status"] == "completed", doc["status_reason"]
    return doc


def _clean_env() -> dict[str, str]:
    env = {k: v for k, v in os.environ.items() if not k.startswith("DFTRACER_") and k != "LD_PRELOAD"}
    env["PYTHONDONTWRITEBYTECODE"] = "1"
    return env


@pytest.fixture(scope="session")
def generated_traces(tmp_path_factory: pytest.TempPathFactory) -> dict[str, GeneratedTrace]:
    """Real dftracer 2.x traces of the programs above, generated once per session."""
    lib = dftracer_preload_lib()
    if lib is None:
        pytest.skip("dftracer (with libdftracer_preload.so) is not installed")
    root = tmp_path_factory.mktemp("gen_traces")
    jobs: list[tuple[GeneratedTrace, subprocess.Popen[str]]] = []
    for name, prog, mode in (
        ("preload", PRELOAD_PROG, "preload"),
        ("multiproc", MULTI_PROG, "preload"),
        ("function", FUNCTION_PROG, "function"),
        ("aggregated", AGG_PROG, "aggregated"),
    ):
        base = root / name
        tdir, ddir = base / "trace", base / "data"
        tdir.mkdir(parents=True)
        ddir.mkdir(parents=True)
        script = base / f"{name}_prog.py"
        script.write_text(prog)
        env = _clean_env()
        env.update(
            DFTRACER_ENABLE="1",
            DFTRACER_INC_METADATA="1",
            DFTRACER_LOG_FILE=str(tdir / "trace"),
            DFTRACER_DATA_DIR="all",
        )
        if mode == "function":
            env["DFTRACER_INIT"] = "FUNCTION"
        else:
            env["DFTRACER_INIT"] = "PRELOAD"
            env["LD_PRELOAD"] = str(lib)
        if mode == "aggregated":
            env["DFTRACER_ENABLE_AGGREGATION"] = "1"
            env["DFTRACER_TRACE_INTERVAL_MS"] = "1000"
        proc = subprocess.Popen(
            [sys.executable, str(script), str(ddir)],
            cwd=str(base),
            env=env,
            stdout=subprocess.PIPE,
            stderr=subprocess.PIPE,
            text=True,
        )
        jobs.append((GeneratedTrace(name, tdir, ddir), proc))
    stdouts = wait_for_traced([(gen.name, gen.trace_dir, proc) for gen, proc in jobs], GEN_TIMEOUT_S)
    out: dict[str, GeneratedTrace] = {}
    for gen, _ in jobs:
        gen.stdout = stdouts[gen.name]
        out[gen.name] = gen
    return out


def wait_for_traced(jobs: list[tuple[str, Path, subprocess.Popen[str]]], timeout: float) -> dict[str, str]:
    """Wait for programs running under dftracer; each must exit 0 and leave a non-empty trace.

    Returns each program's stdout by name; every problem is reported at once with a
    single pytest failure."""
    out: dict[str, str] = {}
    failures: list[str] = []
    for name, trace_dir, proc in jobs:
        try:
            stdout, stderr = proc.communicate(timeout=timeout)
        except subprocess.TimeoutExpired:
            proc.kill()
            stdout, stderr = proc.communicate()
            failures.append(f"{name}: timed out after {timeout} s\n{stderr[-2000:]}")
            continue
        if proc.returncode != 0:
            failures.append(f"{name}: exit {proc.returncode}\n{stderr[-2000:]}")
            continue
        if not any(p.stat().st_size > 0 for p in trace_dir.glob("*.pfw*")):
            failures.append(f"{name}: no non-empty trace file in {trace_dir}")
            continue
        out[name] = stdout
    if failures:
        pytest.fail("running programs under dftracer failed:\n" + "\n".join(failures))
    return out


@pytest.fixture
def api(monkeypatch: pytest.MonkeyPatch) -> Iterator[Any]:
    """``api(provider, script, **kw)``: a strict local API server (tests/fakes/llm_api.py) that
    dftune is pointed at through the environment; stopped (and its rules checked) after the test."""
    from tests.fakes.llm_api import SERVERS

    servers: list[Any] = []

    def start(provider: str, script: list[Any], **kw: Any) -> Any:
        server = SERVERS[provider](script, **kw).__enter__()
        servers.append(server)
        for k, v in server.env().items():
            monkeypatch.setenv(k, v)
        return server

    yield start
    for s in servers:
        s.__exit__(None, None, None)


def pytest_collection_modifyitems(config: pytest.Config, items: list[pytest.Item]) -> None:
    """A test's tier is where it lives: everything under tests/e2e is ``e2e`` (real dftracer, real
    programs and services), so `make test` (``-m "not e2e"``) never runs one by accident, even
    when a new e2e file forgets its ``pytestmark``."""
    e2e = REPO / "tests" / "e2e"
    for item in items:
        if e2e in Path(str(item.path)).parents:
            item.add_marker(pytest.mark.e2e)


@pytest.hookimpl(tryfirst=True)
def pytest_collection_finish(session: pytest.Session) -> None:
    """On an xdist worker, hand out the longest work units first (tests/schedule.py). Every worker
    sorts its identical collection the same way before it reports it (xdist's own hook, after this
    one), and the controller schedules in that order."""
    if hasattr(session.config, "workerinput"):
        session.items[:] = longest_first(session.items, load_durations())


def pytest_runtest_setup(item: pytest.Item) -> None:
    """Under ``--dist loadgroup`` a test marked ``xdist_group`` must carry its group in its node id
    (pytest-xdist's own mark of it, added while the items were collected): without it the group is
    silently ignored and a module's fixtures are made once on each worker, so a module that holds a
    shared resource (a Slurm job holding a core) meets itself. Such a test fails at once, saying why."""
    grouped = getattr(item.config.option, "loadgroup", False) and item.get_closest_marker("xdist_group")
    if grouped and "@" not in item.nodeid:
        pytest.fail(
            "xdist_group is not honoured by this pytest/pytest-xdist pair (the node id has no "
            "@group suffix): install the versions pyproject.toml's dev extra allows",
            pytrace=False,
        )
