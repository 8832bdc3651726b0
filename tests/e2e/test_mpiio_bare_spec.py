"""A bare spec (command, launcher and metric; no knob) of an MPI-IO program gets ROMIO's hints tried.

The program (resources/workloads/mpiio_interleaved, C compiled with the mpich wheel's mpicc)
writes then reads one shared file in interleaved 4 KiB transfers with independent calls. Here it
pins romio_ds_write=enable and romio_ds_read=enable through its own MPI_Info, as a site's setting
would: dftune's first data-sieving hint set (disabled) is then overridden, which ROMIO reports,
and the experiment must be refused with that reason rather than counted. The collective-buffering
hint sets are offered too, estimated at nothing: the trace shows independent calls, which
ROMIO's collective buffering does not serve.
"""

from __future__ import annotations

import json
import shutil
import subprocess
import sys
from importlib import resources
from pathlib import Path

import conftest as c  # tests/ is on sys.path (rootdir conftest, prepend import mode)
import pytest

pytestmark = pytest.mark.e2e
EXAMPLE = Path(str(resources.files("dftune.resources") / "workloads" / "mpiio_interleaved"))


def _bare_spec(tmp_path: Path) -> Path:
    work = tmp_path / "example"
    shutil.copytree(EXAMPLE, work)
    spec = work / "independent.toml"
    text = spec.read_text()
    text = text.replace('"--segments", "4096"', '"--segments", "512"').replace(
        "replicates = 5", "replicates = 3"
    )
    text = text.replace(
        '"--pin", "cb_buffer_size=16777216"',
        '"--pin", "romio_ds_write=enable", "--pin", "romio_ds_read=enable"',
    )
    assert "[[knobs]]" not in text and "--pin" in text
    spec.write_text(text)
    return spec


def test_bare_spec_tries_romio_hints_and_refuses_the_overridden_one(tmp_path: Path) -> None:
    pytest.importorskip("dftracer")
    why = c.mpi_unavailable()
    if why:
        pytest.skip(why)
    if not (Path(sys.executable).parent / "mpicc").is_file() and shutil.which("mpicc") is None:
        pytest.skip("no mpicc beside this Python nor on PATH (pip install mpich)")
    spec = _bare_spec(tmp_path)
    res = subprocess.run(
        [
            sys.executable,
            "-m",
            "dftune.cli",
            "run",
            str(spec),
            "--mode",
            "autonomous",
            "--max-experiments",
            "2",
            "--json",
        ],
        capture_output=True,
        text=True,
        timeout=900,
        check=False,
    )
    assert res.returncode == 0, res.stderr[-2000:]
    doc = json.loads(res.stdout)
    assert doc["status"] == "completed", doc["status_reason"]
    refused = {r["proposal"]: r["reason"] for r in doc["refused"]}
    romio = [i for i in [*(row["id"] for row in doc["proposal_table"]), *refused] if i.startswith("romio-")]
    # both directions of collective buffering and data sieving, with no knob in the spec
    for pid in (
        "romio-romio_cb_write=disable-romio_cb_read=disable",
        "romio-romio_cb_write=enable-romio_cb_read=enable",
        "romio-romio_ds_write=disable-romio_ds_read=disable",
        "romio-romio_ds_write=enable-romio_ds_read=enable",
    ):
        assert pid in romio, romio
    table = {row["id"]: row for row in doc["proposal_table"]}
    cb_on = table["romio-romio_cb_write=enable-romio_cb_read=enable"]
    assert float(cb_on["app_impact_pct"]) == 0.0 and "independent" in cb_on["impact_reason"], cb_on
    tried = [v for v in doc["verdicts"] if v["proposal"].startswith("romio-")]
    run_dir = Path(doc["run_dir"])
    before = json.loads((run_dir / "hints" / "before.json").read_text())
    assert "romio_ds_write=enable" in before["said"] and before["blocks"], before
    ds_off = "romio-romio_ds_write=disable-romio_ds_read=disable"
    assert ds_off in [v["proposal"] for v in tried], doc["verdicts"]  # the first hint set worth trying
    assert (
        "the program overrode the hint (romio_ds_read: asked disable, in effect enable; romio_ds_write"
        in refused[ds_off]
    )
    assert next(v for v in tried if v["proposal"] == ds_off)["verdict"] == "failed"
