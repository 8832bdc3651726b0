"""Two ROMIO hints kept in sequence by a whole autonomous run: the second arm runs with both, and the
best configuration carries both.

The program (written here, mpi4py on the mpich wheel's ROMIO) opens its file with MPI-IO, so ROMIO
applies the ROMIO_HINTS file; it reads the hints in effect back (MPI_File_get_info), writes them
next to its data, and pays a fixed cost for each of two ROMIO defaults still in effect
(romio_cb_write and romio_ds_write not ``disable``), a stand-in for what an aggregation exchange or
a read-modify-write costs a real program. So both of dftune's first two hint sets win, and only
an arm that runs with both in effect is the fastest. The spec is bare: the command and the metric.
"""

from __future__ import annotations

import json
from pathlib import Path

import conftest as c  # tests/ is on sys.path (rootdir conftest, prepend import mode)
import pytest

from dftune.tools.runner.changes.layering import read_hint_file
from tests.e2e.test_bundle_verify import carried_and_verified

pytestmark = pytest.mark.e2e

PROGRAM = '''\
"""Writes 8 MiB with MPI-IO (mpi4py); what ROMIO says is in effect decides two fixed costs."""
import json, os, sys, time
from mpi4py import MPI

data = sys.argv[sys.argv.index("--data") + 1]
os.makedirs(data, exist_ok=True)
start = time.perf_counter()
fh = MPI.File.Open(MPI.COMM_WORLD, os.path.join(data, "out.dat"), MPI.MODE_CREATE | MPI.MODE_RDWR)
info = fh.Get_info()
hints = {info.Get_nthkey(i): info.Get(info.Get_nthkey(i)) for i in range(info.Get_nkeys())}
block = bytearray(1 << 20)
for i in range(8):
    fh.Write_at(i * len(block), block)
fh.Sync()
fh.Close()
with open(os.path.join(data, "hints-in-effect.json"), "w") as out:
    json.dump(hints, out)
for key in ("romio_cb_write", "romio_ds_write"):
    if hints.get(key) != "disable":
        time.sleep(0.4)
print(f"io_time_s {time.perf_counter() - start:.6f}")
'''

SPEC = """\
name = "hint-pair"
command = ["{python}", "hint_pair.py", "--data", "{data_dir}"]
replicates = 3
timeout_s = 60

[metric]
kind = "regex"
pattern = '^io_time_s ([0-9.]+)'
"""


def test_two_hints_kept_in_sequence_run_together_and_stay_together(tmp_path: Path) -> None:
    c.needs_traced_mpi()
    doc = c.tune_in(tmp_path, {"hint_pair.py": PROGRAM, "workload.toml": SPEC}, experiments=2)
    tried = [(v["proposal"], v["verdict"], v["kept"]) for v in doc["verdicts"]]
    cb, ds = (
        "romio-romio_cb_write=disable-romio_cb_read=disable",
        "romio-romio_ds_write=disable-romio_ds_read=disable",
    )
    run_dir = Path(doc["run_dir"])
    reasons = [e["verdict_reason"] for e in json.loads((run_dir / "report.json").read_text())["experiments"]]
    assert [t[0] for t in tried] == [cb, ds] and all(t[2] for t in tried), (tried, reasons)
    both = {"romio_cb_write": "disable", "romio_cb_read": "disable", "romio_ds_write": "disable"}
    both["romio_ds_read"] = "disable"

    # what the second arm's program received: one hint file with both, and ROMIO applied both
    received = json.loads((run_dir / "opt2" / "data" / "hints-in-effect.json").read_text())
    assert {k: received[k] for k in both} == both, received
    report = json.loads((run_dir / "report.json").read_text())
    (opt2,) = [e for e in report["experiments"] if e["iteration"] == 2]
    arm_file = opt2["candidate"]["env"]["ROMIO_HINTS"]
    assert Path(arm_file).name.startswith("combined-") and read_hint_file(arm_file) == both
    assert opt2["reference"]["env"]["ROMIO_HINTS"].endswith(f"{cb}.txt")  # the incumbent: the first hint

    # the best configuration carries both; the report shows what the arm asked and what was in effect
    best = report["incumbent"]["env"]
    assert best["ROMIO_HINTS"] == arm_file and read_hint_file(best["ROMIO_HINTS"]) == both
    md = (run_dir / "report.md").read_text()
    row = next(line for line in md.splitlines() if line.startswith(f"| opt2 ({ds})"))
    assert all(f"{k}={v}" in row.split("|")[2] for k, v in both.items()), row
    assert "romio_cb_write=disable" in row.split("|")[3], row  # in effect, as ROMIO printed it

    # the bundle carries the merged hint file: its scripts, kept.env and a verification of a copy
    # under a fresh DFTUNE_HOME name the bundle's copy, and ROMIO applies both hints from it
    bundle = Path(doc["bundle"])
    spec = json.loads((bundle / "bundle.json").read_text())
    rel = spec["tuned"]["env_files"]["ROMIO_HINTS"]
    assert rel.startswith("changes/files/combined-") and read_hint_file(bundle / rel) == both
    assert f'"$HERE"/{rel}' in (bundle / "scripts" / "tuned.sh").read_text()
    assert rel in (bundle / "changes" / "kept.env").read_text()
    assert doc["bundle_check"], doc  # the run's own check from a copy
    verified = carried_and_verified(bundle, tmp_path / "elsewhere" / "bundle", rounds=4)
    assert verified["verdict"] in ("holds", "larger"), verified
