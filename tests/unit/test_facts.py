"""One model of the world: every facts file validates, every path has one class for a run, and the
diagnosis, the guards and staging give the same class for the same path (they ask one API)."""

from __future__ import annotations

import json
import os
import sys
from pathlib import Path

import pytest

from dftune.core import facts
from dftune.core.facts.paths import RunPaths, class_sql, classify, container_format
from dftune.core.facts.stacks import Evidence, detect, presumption_gap
from dftune.tools.guards.arms import Arm
from dftune.tools.runner.staging import output_class
from dftune.tools.trace import analyze
from tests.cli_inproc import dftune
from tests.tracegen import Proc, write_trace

DATA = "/w/arm/data"
HINTS = "/w/arm/hints/romio-cb.txt"
ENV = {"ROMIO_HINTS": HINTS}
PREFIX = os.path.realpath(sys.prefix)
#: (path, class): the paths the issue found classified three ways, and one of each rule
TABLE = [
    ("/dev/shm/dataset/s0.bin", "data"),
    ("/tmp/ompi.host.1000/job.0/x", "launcher"),
    ("/tmp/hydra_hwloc_xmlfile_Ab12Cd", "launcher"),
    ("/tmp/prte.host.1000/dvm/x", "launcher"),
    ("/tmp/flux-a1b2c3/local-0", "launcher"),
    ("/var/spool/slurmd/job00042/slurm_script", "launcher"),
    ("/proc/net/route", "system"),
    ("/dev/shm/ucx_shm_posix_77", "system"),
    ("/usr/lib/x86_64-linux-gnu/libc.so.6", "runtime"),
    (f"{PREFIX}/lib/python3.11/json/__init__.py", "runtime"),
    ("/home/u/.venv/lib/python3.11/site-packages/numpy/__init__.py", "runtime"),
    ("/home/u/proj/reader.py", "runtime"),
    ("/w/arm/traces/trace-1-app.pfw.gz", "runtime"),
    ("/tmp/torchinductor_root/ab/kernel.cpp", "tool_cache"),
    ("/home/u/.cache/pip/wheels/x.whl", "tool_cache"),
    (f"{DATA}/__pycache__/util.cpython-311.pyc", "tool_cache"),
    ("/home/u/proj/__pycache__/prog.cpython-311.pyc", "tool_cache"),
    ("/venv/lib/python3.11/site-packages/numpy/lib/__pycache__/_iotools.cpython-311.pyc", "runtime"),
    ("/usr/lib/python3.11/json/__pycache__/decoder.cpython-311.pyc", "runtime"),
    ("/etc/hosts", "config"),
    ("/home/u/proj/workload.yaml", "config"),
    (HINTS, "config"),
    (f"{DATA}/sample_00001.bin", "data"),
    (f"{DATA}/sub/run.yaml", "data"),
    ("/scratch/in.dat", "data"),
    ("/home/u/.keras/datasets/mnist.npz", "data"),
]


def test_every_facts_file_validates_and_every_entry_says_why_and_where_from() -> None:
    for f in facts.all_facts():
        for entry in _entries(f.model_dump()):
            if "id" in entry:  # an entry of its own (rules, launchers, stacks, formats, filesystems)
                assert entry.get("reason") and entry.get("source"), entry["id"]


def _entries(doc: object) -> list[dict[str, object]]:
    if isinstance(doc, dict):
        return [doc, *(e for v in doc.values() for e in _entries(v))]
    if isinstance(doc, list | tuple):
        return [e for v in doc for e in _entries(v)]
    return []


def test_a_bad_facts_file_is_one_line_naming_it(monkeypatch: pytest.MonkeyPatch) -> None:
    from dftune.core import resource
    from dftune.core.facts import FactsError, _load
    from dftune.core.facts.models import LauncherFacts

    class Bad:
        def read_text(self, encoding: str) -> str:
            return '[[launcher]]\nid = "x"\nexecutables = ["x"]\nreason = "r"\n'  # no source

        def __truediv__(self, other: str) -> Bad:
            return self

    monkeypatch.setattr(resource.resources, "files", lambda _pkg: Bad())
    resource._parsed.cache_clear()
    try:
        with pytest.raises(
            FactsError, match=r"^resources/facts/launchers.toml: launcher.0.source: Field required"
        ):
            _load("launchers.toml", LauncherFacts)
    finally:
        resource._parsed.cache_clear()


def _run() -> RunPaths:
    return RunPaths.of(DATA, env=ENV)


@pytest.mark.parametrize(("path", "cls"), TABLE)
def test_the_class_of_each_path(path: str, cls: str) -> None:
    got = classify(path, _run())
    assert got.class_ == cls, got
    assert got.rule and got.source


def test_the_diagnosis_the_guards_and_staging_agree_on_every_path(tmp_path: Path) -> None:
    p = Proc(pid=7)
    for path, _ in TABLE:
        p.open(path)
        p.read(path, 16)
    folder = write_trace(tmp_path / "t", [p])
    run = _run()
    # the diagnosis: the file view (system paths shown) and the per-class totals, in SQL
    a = analyze([folder], views=["file"], include_system_paths=True, profile=True, run_paths=run)
    diagnosis = {r["path"]: r["path_class"] for r in a.views["file"]["rows"]}
    # the guards: the arm's classes, and its data files
    arm = Arm(analysis=a, data_dir=DATA, env=ENV)
    guards = {f.path: c.class_ for f, c in arm.classes}
    data_files = {f.path for f in [*arm.files.values(), *arm.outside_inputs.values()]}
    for path, cls in TABLE:
        assert diagnosis[path] == cls, (path, "diagnosis")
        assert guards[path] == cls, (path, "guards")
        assert output_class(path, run).class_ == cls, (path, "staging")
        assert (path in data_files) == (cls == "data"), (path, "arm.files")
    counted = {c: s.files for c, s in a.path_classes.items()}
    assert counted == {c: sum(1 for _, k in TABLE if k == c) for c in {k for _, k in TABLE}}


def test_sql_and_python_classify_alike(tmp_path: Path) -> None:
    import duckdb

    run = _run()
    con = duckdb.connect()
    con.execute("CREATE TABLE t (path VARCHAR)")
    con.executemany("INSERT INTO t VALUES (?)", [(p,) for p, _ in TABLE])
    rows = dict(con.execute(f"SELECT path, {class_sql('path', run)} FROM t").fetchall())
    assert rows == {p: classify(p, run).class_ for p, _ in TABLE}


def test_a_container_is_known_by_its_suffix_or_its_signature(tmp_path: Path) -> None:
    (tmp_path / "plain.bin").write_bytes(b"\0" * 1024)
    (tmp_path / "h5-without-suffix").write_bytes(b"\0" * 512 + b"\x89HDF\r\n\x1a\n" + b"\0" * 64)
    (tmp_path / "classic").write_bytes(b"CDF\x01" + b"\0" * 60)
    assert container_format(str(tmp_path / "plain.bin")) is None
    assert container_format(str(tmp_path / "h5-without-suffix")) == "hdf5"
    assert container_format(str(tmp_path / "classic")) == "netcdf"
    assert container_format("/gone/run.h5") == "hdf5"  # by its name, when the file is gone


def test_a_stack_is_what_its_signatures_show() -> None:
    mpi = detect(Evidence(texts=[("the program x.py", "from mpi4py import mpi\nmpi.file.open(c)")]))
    assert mpi.software == ["mpi", "mpi-io", "posix", "romio"]
    ompi = detect(Evidence(texts=[("the trace", "/opt/openmpi/lib/libmpi.so mpi_file_open")]))
    assert ompi.has("mpi-io") and not ompi.has("romio")
    assert any(e.startswith("not romio: openmpi") for e in ompi.evidence)
    ior = detect(Evidence(executables=["mpirun", "ior"], launcher="local"))
    assert ior.has("mpi-io") and ior.hint_env_prefix == "IOR_HINT__MPI__"
    assert detect(Evidence(layers=["H5D"])).has("hdf5")
    zarr = detect(Evidence(texts=[("the program z.py", "import zarr\nz = zarr.open('s.zarr')")]))
    assert zarr.has("zarr") and presumption_gap(["zarr"], zarr.software) is None
    assert presumption_gap(["zarr"], ["posix", "hdf5"]) is not None  # never offered without zarr
    assert detect(Evidence(stdio_share=0.5)).has("stdio") and not detect(Evidence(stdio_share=0.05)).has(
        "stdio"
    )


def test_what_a_strategy_presumes() -> None:
    assert presumption_gap(["mpi-io (ROMIO-based)"], ["posix", "mpi"]) is not None
    assert presumption_gap(["mpi-io (ROMIO-based)"], ["posix", "mpi", "mpi-io", "romio"]) is None
    assert presumption_gap(["mpi-io"], ["posix", "mpi"]) is None  # moving an MPI job to MPI-IO
    assert presumption_gap(["pytorch-or-tensorflow"], ["posix", "tensorflow"]) is None
    assert "PYTORCH" in (presumption_gap(["pytorch", "gpu"], ["posix"]) or "")
    assert presumption_gap(["checkpointing"], ["posix"]) is None  # nothing a stack says


def test_doctor_path_names_class_rule_and_source(tmp_path: Path) -> None:
    data = tmp_path / "data"
    data.mkdir()
    r = dftune(
        "doctor",
        "--path",
        "/tmp/ompi.host.1000/x",
        "--path",
        str(data / "s0.bin"),
        "--path",
        "/dev/shm/dataset/s0.bin",
        "--data-dir",
        str(data),
        "--json",
    )
    assert r.returncode == 0, r.stderr
    rows = json.loads(r.stdout)["paths"]
    assert [set(x) for x in rows] == [{"path", "class", "rule", "source"}] * 3
    assert [(x["class"], x["rule"]) for x in rows] == [
        ("launcher", "launcher:mpirun"),
        ("data", "data-folder"),
        ("data", "shm-tmpfs"),
    ]
    # one --path takes several paths, as `--path PATH...` reads
    several = dftune("doctor", "--path", "/tmp/ompi.host.1000/x", "/dev/shm/dataset/s0.bin", "--json")
    assert [x["class"] for x in json.loads(several.stdout)["paths"]] == ["launcher", "data"]
    stray = dftune("doctor", "/dev/shm/dataset/s0.bin")
    assert stray.returncode == 2 and "after --path" in stray.stderr
    screen = dftune("doctor", "--path", "/proc/net/route")
    assert screen.returncode == 0 and "system (rule kernel-pseudo-files)" in screen.stdout
    assert all(len(line) <= 80 for line in screen.stdout.splitlines())
