"""The stack a bare spec runs on (launch, program file, trace) and the ROMIO hints it is offered."""

from __future__ import annotations

import os
from pathlib import Path
from types import SimpleNamespace

import pytest

from dftune.agents.optimizer.hints import hint_proposals, hint_sets, override_check, ranks_of
from dftune.core.domain.proposals import Change, Proposal
from dftune.tools.catalog import default_catalog
from dftune.tools.diagnose.stack import hints_printed, infer_stack, overridden
from dftune.tools.runner.spec import WorkloadSpec

IOR_HINT_PREFIX = "IOR_HINT__MPI__"

# What ROMIO prints at an MPI_File_open with ROMIO_PRINT_HINTS=1 (MPICH 4, rank 0), two opens.
PRINTED = """\
key = cb_buffer_size            value = 16777216
key = romio_cb_read             value = disable
key = romio_cb_write            value = enable
key = romio_ds_write            value = automatic
key = romio_filesystem_type     value = UFS: Generic ROMIO driver for all UNIX-like file systems
ranks 2 segments 4096
key = cb_buffer_size            value = 16777216
key = romio_cb_read             value = disable
key = romio_cb_write            value = disable
write_time_s 0.1
"""


def _script(tmp_path: Path, name: str, text: str) -> Path:
    p = tmp_path / name
    p.write_text(text)
    return p


def _trace(paths: list[str] = (), ranks: bool = False) -> SimpleNamespace:  # type: ignore[assignment]
    proc = [{"cmd": "prog", "rank": 0 if ranks else None}]
    return SimpleNamespace(
        views={"file": {"rows": [{"path": p} for p in paths]}, "proc": {"rows": proc}}, app_events=[]
    )


def test_mpi4py_program_under_mpirun_is_mpiio_on_romio(tmp_path: Path) -> None:
    _script(tmp_path, "io.py", "from mpi4py import MPI\nfh = MPI.File.Open(MPI.COMM_WORLD, 'x', amode)\n")
    s = infer_stack(["python", "io.py"], cwd=tmp_path, launcher="mpirun")
    assert s.hint_env_prefix is None
    assert s.software == ["mpi", "mpi-io", "posix", "romio"]
    assert any("launched by mpirun" in e for e in s.evidence) and any(
        "mpi.file.open" in e for e in s.evidence
    )


def test_mpirun_in_the_command_and_an_executable_strings(tmp_path: Path) -> None:
    exe = tmp_path / "bench"
    exe.write_bytes(b"\x7fELF\x00libmpi.so.12\x00MPI_File_write_at_all\x00IOR_HINT__MPI__\x00")
    s = infer_stack(["mpirun", "-n", "2", str(exe)], cwd=tmp_path)
    assert s.has("mpi-io") and s.has("romio") and s.hint_env_prefix == IOR_HINT_PREFIX
    assert "ior-hint-env" in s.software


def test_ior_found_on_path_reads_its_hint_environment(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    ior = tmp_path / "bin" / "ior"
    ior.parent.mkdir()
    ior.write_bytes(b"\x7fELF\x00")
    ior.chmod(0o755)
    monkeypatch.setenv("PATH", f"{ior.parent}{os.pathsep}{os.environ.get('PATH', '')}")
    s = infer_stack(["ior", "-a", "MPIIO", "-t", "4k"], cwd=tmp_path, launcher="mpirun")
    assert s.hint_env_prefix == IOR_HINT_PREFIX and s.has("mpi-io") and s.has("romio")


def test_open_mpi_is_not_offered_rom_io_hint_files(tmp_path: Path) -> None:
    _script(tmp_path, "io.py", "from mpi4py import MPI\nMPI.File.Open\n")
    trace = _trace(["/opt/openmpi/lib/libopen-pal.so.80", "/opt/openmpi/lib/libmpi.so.40"], ranks=True)
    s = infer_stack(["python", "io.py"], cwd=tmp_path, analysis=trace)
    assert s.has("mpi") and s.has("mpi-io") and not s.has("romio")
    assert any("OMPIO ignores ROMIO hint files" in e for e in s.evidence), s.evidence


def test_a_launch_scripts_mpi_program_is_read_from_the_traced_commands(tmp_path: Path) -> None:
    """The spec runs a shell script that starts the ranks: the program file is only in the trace's
    process command lines (``;``-joined argv), and it is where the MPI-IO calls are."""
    _script(tmp_path, "run.sh", 'exec mpiexec -n 2 python reader.py "$@"\n')
    reader = _script(tmp_path, "reader.py", "from mpi4py import MPI\nMPI.File.Open(comm, p, amode)\n")
    trace = _trace()
    trace.views["proc"]["rows"] = [{"cmd": f"/venv/bin/python;{reader};--data;/in", "rank": None}] * 2
    assert not infer_stack(["bash", "run.sh"], cwd=tmp_path).has("mpi-io")  # the script names no MPI-IO
    s = infer_stack(["bash", "run.sh"], cwd=tmp_path, analysis=trace)
    assert s.has("mpi-io") and s.has("romio"), s.evidence
    assert any("mpi.file.open" in e and "reader.py" in e for e in s.evidence), s.evidence


def test_hdf5_and_frameworks_from_imports_and_the_trace(tmp_path: Path) -> None:
    _script(tmp_path, "train.py", "import h5py\nimport torch\n")
    s = infer_stack(
        ["python", "train.py"],
        cwd=tmp_path,
        analysis=_trace(["/venv/lib/python3.11/site-packages/tensorflow/__init__.py"]),
    )
    assert s.software == ["hdf5", "posix", "pytorch", "tensorflow"]


def test_installed_packages_metadata_is_no_evidence(tmp_path: Path) -> None:
    """importlib.metadata reads every distribution's entry points when zarr looks up its codecs:
    mpi4py's and h5py's dist-info in the trace of a pure-Python zarr reader show neither."""
    _script(tmp_path, "epoch.py", "import zarr\n")
    site = "/venv/lib/python3.11/site-packages"
    s = infer_stack(
        ["python", "epoch.py"],
        cwd=tmp_path,
        analysis=_trace(
            [
                f"{site}/mpi4py-4.1.2.dist-info/entry_points.txt",
                f"{site}/h5py-3.16.0.dist-info/METADATA",
                f"{site}/old.egg-info/entry_points.txt",
                f"{site}/zarr/__pycache__/api.cpython-311.pyc",
            ]
        ),
    )
    assert s.software == ["posix", "zarr"], s.evidence


def test_a_plain_program_is_posix_only(tmp_path: Path) -> None:
    _script(tmp_path, "copy.py", "import shutil\nshutil.copy('a', 'b')\n")
    s = infer_stack(["python", "copy.py", "--out", "missing-file"], cwd=tmp_path)
    assert s.software == ["posix"] and s.evidence == []


def test_printed_hints_are_read_per_open_and_overrides_named() -> None:
    blocks = hints_printed(PRINTED)
    assert (
        len(blocks) == 2
        and blocks[0]["romio_cb_write"] == "enable"
        and blocks[1]["romio_cb_write"] == "disable"
    )
    assert blocks[0]["romio_filesystem_type"].startswith("UFS: Generic")
    asked = {"romio_cb_write": "disable", "romio_cb_read": "disable", "cb_buffer_size": "67108864"}
    assert overridden(asked, blocks) == {"romio_cb_write": {"enable"}, "cb_buffer_size": {"16777216"}}
    assert overridden({"romio_cb_read": "disable"}, blocks) == {}


def test_hint_sets_offer_both_directions_disable_first() -> None:
    sets = hint_sets(default_catalog(), ranks=2)
    values = [(sid, h) for sid, h in sets]
    assert values[0] == ("l2.romio_cb", {"romio_cb_write": "disable", "romio_cb_read": "disable"})
    assert values[1] == ("l2.romio_ds", {"romio_ds_write": "disable", "romio_ds_read": "disable"})
    assert ("l2.romio_cb", {"romio_cb_write": "enable", "romio_cb_read": "enable"}) in values
    assert ("l2.romio_ds", {"romio_ds_write": "enable", "romio_ds_read": "enable"}) in values
    assert ("l2.romio_cb", {"cb_buffer_size": "67108864"}) in values
    assert values[-1] == ("l2.romio_cb_nodes", {"cb_nodes": "2", "cb_config_list": "*:2"})
    assert not any(sid == "l2.romio_cb_nodes" for sid, _ in hint_sets(default_catalog(), ranks=1))


def test_hint_proposals_in_the_form_the_program_reads(tmp_path: Path) -> None:
    cat = default_catalog()
    assert hint_proposals(cat, ["mpi", "mpi-io", "posix"], 2, tmp_path) == []  # Open MPI: no hint file
    plain = hint_proposals(cat, ["mpi", "mpi-io", "posix", "romio"], 2, tmp_path)
    first = plain[0]
    assert first.id == "romio-romio_cb_write=disable-romio_cb_read=disable" and first.layer == "L2"
    assert first.change.kind == "env" and first.change.params == {
        "romio_cb_write": "disable",
        "romio_cb_read": "disable",
    }
    assert set(first.change.env) == {"ROMIO_HINTS", "ROMIO_PRINT_HINTS"}
    assert (
        Path(first.change.env["ROMIO_HINTS"]).read_text() == "romio_cb_write disable\nromio_cb_read disable\n"
    )
    ior = hint_proposals(cat, ["mpi-io", "romio", "ior-hint-env"], 2, tmp_path / "other", write=False)
    assert ior[0].change.env["IOR_HINT__MPI__romio_cb_write"] == "disable"
    assert not (tmp_path / "other").exists()  # derived again without writing
    assert [p.id for p in ior] == [p.id for p in plain]


def test_ranks_from_the_launcher_or_the_command(tmp_path: Path) -> None:
    spec = WorkloadSpec(name="w", command=["mpirun", "-np", "4", "./a.out"])
    assert ranks_of(spec) == 4
    assert ranks_of(WorkloadSpec(name="w", command=["./a.out"], launcher={"kind": "mpirun", "ranks": 3})) == 3
    assert ranks_of(WorkloadSpec(name="w", command=["./a.out"])) == 1


def test_an_overridden_hint_is_not_counted(tmp_path: Path) -> None:
    (tmp_path / "logs").mkdir()
    (tmp_path / "logs" / "r0.out").write_text(PRINTED)
    (tmp_path / "logs" / "warmup.out").write_text("key = romio_cb_read value = enable\n")  # not a replicate
    p = Proposal(
        id="romio-x",
        strategy="l2.romio_cb",
        strategy_name="cb",
        layer="L2",
        checklist=7,
        description="",
        change=Change(
            kind="env",
            env={"ROMIO_HINTS": "/h.txt"},
            params={"romio_cb_write": "disable", "romio_cb_read": "disable"},
        ),
    )
    why, shown = override_check(p, tmp_path)
    assert why is not None and "romio_cb_write: asked disable, in effect enable" in why
    assert "romio_cb_read" not in why and shown == "romio_cb_write=disable|enable, romio_cb_read=disable"
    ok = p.model_copy(update={"change": p.change.model_copy(update={"params": {"romio_cb_read": "disable"}})})
    assert override_check(ok, tmp_path) == (None, "hints in effect at all 2 open(s): romio_cb_read=disable")
    knob = p.model_copy(update={"change": Change(kind="knob", settings={"X": "1"})})
    assert override_check(knob, tmp_path) == (None, "")
    (tmp_path / "logs" / "r0.out").write_text("write_time_s 0.1\n")
    assert override_check(ok, tmp_path)[1].startswith("hints in effect unknown")


def test_a_knob_of_the_spec_takes_the_place_of_the_hint_set_of_its_strategy(tmp_path: Path) -> None:
    from dftune.agents.optimizer.plan import plan_proposals

    cat = default_catalog()
    spec = WorkloadSpec(
        name="w",
        command=["./a.out", "--ds", "{DS}"],
        launcher={"kind": "mpirun", "ranks": 2},
        knobs=[
            {
                "name": "DS",
                "kind": "arg",
                "values": ["automatic", "disable"],
                "default": "automatic",
                "strategy": "l2.romio_ds",
            }
        ],
    )
    stack = hint_proposals(cat, ["mpi-io", "romio"], ranks_of(spec), tmp_path)
    out = plan_proposals(spec, None, cat, {}, ["mpi-io", "romio"], stack)
    assert out[0].id == "DS=disable"  # the user's lever first
    assert [p.strategy for p in out[1:]] == ["l2.romio_cb", "l2.romio_cb", "l2.romio_cb", "l2.romio_cb_nodes"]
