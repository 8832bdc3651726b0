"""The main job on every bundled example, under the real dftracer; and a SIGKILL mid-run, then resume.

Done when: each example finds and records a real measured win, the doing-less
knob is refused by the guard, and a killed run resumes without re-applying a change or
duplicating a KB record.
"""

from __future__ import annotations

import json
import os
import signal
import subprocess
import sys
import time
from pathlib import Path

import pytest

from dftune.tools.kb import opt_kb_records
from tests.e2e.main_job import SMALL_READS_GROUP, FinishedRun, bundled_spec, dftune_cli, run_main_job

pytestmark = pytest.mark.e2e

EXAMPLES = {
    # workload folder: the doing-less knob the guard must refuse
    "small_reads": "EPOCHS=1",
    "checkpoint_writer": "CHECKPOINTS=2",
    "hdf5_reader": "SAMPLES=1024",
    "mpiio_shared": "RECORDS=4096",
}


@pytest.mark.parametrize(
    "example",
    [
        pytest.param(name, marks=pytest.mark.xdist_group(SMALL_READS_GROUP))
        if name == "small_reads"
        else name
        for name in sorted(EXAMPLES)
    ],
)
def test_the_main_job_finds_a_win_and_refuses_doing_less(
    example: str, request: pytest.FixtureRequest, monkeypatch: pytest.MonkeyPatch
) -> None:
    pytest.importorskip("dftracer")
    if example == "hdf5_reader":
        pytest.importorskip("h5py")
    if example == "mpiio_shared":
        pytest.importorskip("mpi4py")
    doing_less = EXAMPLES[example]
    if example == "small_reads":  # the report tests read this same run
        run: FinishedRun = request.getfixturevalue("small_reads_main_job")
        monkeypatch.setenv("DFTUNE_HOME", str(run.home))
    else:
        run = run_main_job(example)
    doc = run.doc
    assert doc["status"] == "completed", doc["status_reason"]
    wins = [v for v in doc["verdicts"] if v["verdict"] == "win"]
    assert wins, doc["verdicts"]
    refused = {r["proposal"]: r for r in doc["refused"]}
    assert refused[doing_less]["status"] == "rejected" and "doing less" in refused[doing_less]["reason"]
    assert all(v["proposal"] != doing_less for v in doc["verdicts"])  # never applied
    kb = {r.id: r for r in opt_kb_records()}
    assert {kb[v["kb_record"]].verdict for v in wins} == {"win"}
    assert Path(doc["report"]).is_file()
    assert doc["best_median"] < doc["baseline_median"]
    if example == "mpiio_shared":  # independent calls: collective buffering has nothing to aggregate yet
        assert doc["verdicts"][0]["proposal"] == "COLLECTIVE=1", doc["verdicts"]
        cb = next(
            r
            for r in doc["proposal_table"]
            if r["id"] == "romio-romio_cb_write=disable-romio_cb_read=disable"
        )
        assert "independent" not in cb["impact_reason"], cb  # estimated again from the collective trace


def _wait_for(path: Path, timeout: float) -> None:
    deadline = time.monotonic() + timeout
    while not path.exists():
        if time.monotonic() > deadline:
            raise AssertionError(f"{path} did not appear within {timeout} s")
        time.sleep(0.05)


def test_sigkill_in_the_middle_of_a_real_run_then_resume() -> None:
    pytest.importorskip("dftracer")
    home = Path(os.environ["DFTUNE_HOME"])
    run_dir = home / "runs" / "killed"
    proc = subprocess.Popen(
        [
            sys.executable,
            "-m",
            "dftune.cli",
            "run",
            str(bundled_spec("small_reads")),
            "--run-id",
            "killed",
            "--max-experiments",
            "3",  # killed in the second, resumed through the third: what a resume must get right
            "--replicates",
            "3",  # what is checked is the bookkeeping across the kill, not a verdict
            "--json",
        ],
        stdout=subprocess.PIPE,
        stderr=subprocess.PIPE,
        start_new_session=True,
    )
    try:
        # kill while the second experiment's replicates run (after opt1 is recorded)
        _wait_for(run_dir / "opt2" / "traces" / "raw" / "r1", timeout=600)
    finally:
        os.killpg(proc.pid, signal.SIGKILL)
        proc.wait()
    assert proc.returncode == -signal.SIGKILL
    before = [r for r in opt_kb_records() if r.run_id == "killed"]
    res = dftune_cli("resume", "killed", "--json")
    assert res.returncode == 0, res.stderr[-2000:]
    doc = json.loads(res.stdout)
    assert doc["status"] == "completed"
    iterations = [v["iteration"] for v in doc["verdicts"]]
    assert iterations == sorted(set(iterations)) and iterations[:2] == [1, 2]
    after = [r for r in opt_kb_records() if r.run_id == "killed"]
    assert [r.id for r in after[: len(before)]] == [r.id for r in before]  # nothing recorded twice
    keys = [r.dedup_key for r in after]
    assert len(keys) == len(set(keys))
    assert sum(1 for r in after if r.iteration == 1 and r.metric_scope == "app") == 1
    history = json.loads(dftune_cli("history", "killed", "--json").stdout)["checkpoints"]
    assert history[-1]["status"] == "completed"


def test_doctor_reports_the_tracer_its_blind_spots_and_the_data_filesystem(tmp_path: Path) -> None:
    pytest.importorskip("dftracer")
    res = dftune_cli("doctor", "--data-dir", str(tmp_path), "--json")
    doc = json.loads(res.stdout)
    assert doc["schema"] == "dftune.doctor/1" and doc["tracer"]["usable"] is True
    traced = doc["tracer"]["smoke_calls_traced"]
    assert {"open64", "read", "write"} <= set(traced)
    # whatever this machine hides is reported as a pitfall, never silently assumed traced
    for p in doc["pitfalls"]:
        call = p["id"].split(":", 1)[1]
        assert not any(name in traced for name in (call, f"{call}64", f"__x{call}"))
    assert doc["filesystems"][0]["path"] == str(tmp_path)
    assert res.returncode == (0 if doc["ok"] else 1)


def test_runs_lists_a_finished_run() -> None:
    from typer.testing import CliRunner

    from dftune.cli import app
    from tests.graph.conftest import TOY

    runner = CliRunner()
    assert (
        runner.invoke(
            app, ["run", str(TOY), "--run-id", "listed", "--max-experiments", "0", "--json"]
        ).exit_code
        == 0
    )
    doc = json.loads(runner.invoke(app, ["runs", "--json"]).stdout)
    assert [(r["id"], r["status"]) for r in doc["runs"]] == [("listed", "completed")]


def test_a_job_whose_io_is_not_worth_tuning_stops_after_the_baseline(tmp_path: Path) -> None:
    pytest.importorskip("dftracer")
    (tmp_path / "compute.py").write_text(
        "import time\nstart = time.perf_counter()\nx = 0\n"
        "while time.perf_counter() - start < 0.3:\n    x += 1\n"
        "open('out.txt', 'w').write('done')\nprint(f'run_time_s {time.perf_counter() - start:.6f}')\n"
    )
    (tmp_path / "workload.toml").write_text(
        'name = "compute-bound"\ncommand = ["{python}", "compute.py"]\nreplicates = 3\n'
        "[metric]\nkind = \"stdout_regex\"\npattern = 'run_time_s ([0-9.]+)'\n"
        '[[knobs]]\nname = "OMP_NUM_THREADS"\nkind = "env"\nvalues = [1, 2]\ndefault = 1\n'
        'strategy = "l2.omp_threads"\n'
    )
    res = dftune_cli("run", str(tmp_path / "workload.toml"), "--json")
    assert res.returncode == 0, res.stderr[-2000:]
    doc = json.loads(res.stdout)
    assert doc["status"] == "not_worth_tuning" and "%" in doc["status_reason"]
    assert doc["verdicts"] == [] and Path(doc["report"]).is_file()
