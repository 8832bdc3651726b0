"""Kept ROMIO hints and a new one reach the real MPI-IO program together, as ROMIO reports them.

The bundled example (resources/workloads/mpiio_interleaved, C built with the mpich wheel's mpicc)
writes the hints in effect after MPI_File_open (MPI_File_get_info) to DATA/hints-in-effect.txt,
and ROMIO prints them with ROMIO_PRINT_HINTS=1. Measured before the layering existed: an arm whose
environment was ``{**kept, **new}`` ran with ROMIO_HINTS naming the new proposal's file only, and
ROMIO reported romio_cb_write=automatic although disable had been kept.
"""

from __future__ import annotations

import shutil
import sys
from importlib import resources
from pathlib import Path

import conftest as c  # tests/ is on sys.path (rootdir conftest, prepend import mode)
import pytest

from dftune.agents.optimizer.hints import arm_hints, hint_proposals, override_check
from dftune.core.domain.proposals import Proposal
from dftune.tools.catalog import default_catalog
from dftune.tools.runner.bench import bench
from dftune.tools.runner.changes.layering import layer_env
from dftune.tools.runner.spec import WorkloadSpec, load_spec

pytestmark = pytest.mark.e2e
EXAMPLE = Path(str(resources.files("dftune.resources") / "workloads" / "mpiio_interleaved"))
SOFTWARE = ["mpi", "mpi-io", "posix", "romio"]  # a program that reads a hint file only (no MPI_Info env)


def _spec(tmp_path: Path, pins: list[str]) -> WorkloadSpec:
    why = c.mpi_unavailable()
    if why:
        pytest.skip(why)
    if not (Path(sys.executable).parent / "mpicc").is_file() and shutil.which("mpicc") is None:
        pytest.skip("no mpicc beside this Python nor on PATH (pip install mpich)")
    work = tmp_path / "example"
    shutil.copytree(EXAMPLE, work, dirs_exist_ok=True)
    text = (work / "workload.toml").read_text().replace('"--segments", "4096"', '"--segments", "64"')
    pin_args = ", ".join(f'"--pin", "{p}"' for p in pins) or '"--fsync", "1"'
    text = text.replace('"--pin", "cb_buffer_size=16777216"', pin_args)
    (work / "workload.toml").write_text(text)
    return load_spec(work / "workload.toml")


def _in_effect(workdir: Path) -> dict[str, str]:
    """What the program read back with MPI_File_get_info (``key value`` lines)."""
    lines = (workdir / "data" / "hints-in-effect.txt").read_text().splitlines()
    return {k: v.strip() for k, _, v in (line.partition(" ") for line in lines)}


def _pick(props: list[Proposal], start: str) -> Proposal:
    return next(p for p in props if p.id.startswith(start))


def test_a_second_hint_runs_with_the_kept_one_and_a_conflict_takes_the_newer(tmp_path: Path) -> None:
    spec = _spec(tmp_path, [])
    props = hint_proposals(default_catalog(), SOFTWARE, 2, tmp_path / "run")
    kept = _pick(props, "romio-romio_cb_write=disable")
    size = _pick(props, "romio-cb_buffer_size=")
    enable = _pick(props, "romio-romio_cb_write=enable")

    arm = layer_env(kept.change.env, size.change.env)  # the verifier's environment for the second arm
    result = bench(spec, replicates=1, trace=False, workdir=tmp_path / "opt2", env=arm.env)
    assert result.ok == 1, [r.reason for r in result.replicates]
    got = _in_effect(Path(result.workdir))
    want = {"romio_cb_write": "disable", "romio_cb_read": "disable", **size.change.params}
    assert {k: got[k] for k in want} == want
    refused, shown = override_check(size, Path(result.workdir), arm_hints(arm.env))
    assert refused is None and "romio_cb_write=disable" in shown and "cb_buffer_size=" in shown
    assert arm.replaced == []

    # the kept incumbent is now both; a conflicting proposal for cb_write wins, and says it replaced disable
    third = layer_env(arm.env, enable.change.env)
    result = bench(spec, replicates=1, trace=False, workdir=tmp_path / "opt3", env=third.env)
    assert result.ok == 1, [r.reason for r in result.replicates]
    got = _in_effect(Path(result.workdir))
    assert got["romio_cb_write"] == "enable" and got["romio_cb_read"] == "enable"
    assert got["cb_buffer_size"] == size.change.params["cb_buffer_size"]  # the kept one stays
    assert sorted(str(r) for r in third.replaced) == [
        "romio_cb_read=enable replaced romio_cb_read=disable",
        "romio_cb_write=enable replaced romio_cb_write=disable",
    ]


def test_a_kept_hint_the_program_overrides_refuses_the_combined_arm(tmp_path: Path) -> None:
    """The program pins romio_cb_write=enable in its own MPI_Info: the arm 'kept disable + cb_buffer_size'
    did not run what it asked, and the check names the kept hint the program overrode."""
    spec = _spec(tmp_path, ["romio_cb_write=enable"])
    props = hint_proposals(default_catalog(), SOFTWARE, 2, tmp_path / "run")
    kept, size = _pick(props, "romio-romio_cb_write=disable"), _pick(props, "romio-cb_buffer_size=")
    arm = layer_env(kept.change.env, size.change.env)
    result = bench(spec, replicates=1, trace=False, workdir=tmp_path / "opt2", env=arm.env)
    assert result.ok == 1, [r.reason for r in result.replicates]
    refused, _ = override_check(size, Path(result.workdir), arm_hints(arm.env))
    assert refused is not None and "romio_cb_write: asked disable, in effect enable" in refused
    # the new hint alone did take effect: only the combined check sees what the arm lost
    assert override_check(size, Path(result.workdir))[0] is None
