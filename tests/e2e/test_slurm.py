"""dftune on a real Slurm: bench and tune a bundled workload through the Slurm launcher.

Needs a reachable Slurm controller: CI starts a single-node one with ``.ci/start-slurm``
(Debian's slurm-wlm and munge, no accounting), and so can a developer.  Without one the
module is skipped and says why; with ``DFTUNE_REQUIRE_SLURM=1`` (set by ``.ci/run``) a
missing controller is a failure instead.  What a single node cannot produce (node
failures, lagging slurmdbd, step lines of sacct) is covered by the fakes in
tests/e2e/test_schedulers_fake.py.

Kept lean: 1-3 replicates, one tuning experiment, tiny programs.  A job that overruns its
one-minute Slurm time limit is submitted when the module starts and checked at its end,
so its ~90 s run alongside the other tests instead of after them.
"""

from __future__ import annotations

import json
import os
import shutil
import subprocess
import sys
import threading
import time
from collections.abc import Iterator
from importlib import resources
from pathlib import Path
from typing import Any

import pytest

from dftune.core.process import ProcessResult
from dftune.tools.runner.schedulers import run_slurm
from dftune.tools.runner.spec import Launcher

# one xdist worker runs the whole module: it shares one single-node controller and its module
# fixture holds a time-limited job that a failure cancels by name
pytestmark = [pytest.mark.e2e, pytest.mark.slurm, pytest.mark.xdist_group("slurm")]

PY = sys.executable
#: Where .ci/start-slurm keeps its config when SLURM_CONF is not set.
START_SCRIPT_CONF = Path(os.environ.get("DFTUNE_SLURM_DIR", "/tmp/dftune-slurm")) / "slurm.conf"


def _slurm_unreachable() -> str | None:
    """Why no Slurm controller can be used from here, or None when one answers."""
    for tool in ("sbatch", "squeue", "scontrol", "scancel", "sacct", "srun"):
        if shutil.which(tool) is None:
            return f"{tool} not found on PATH (apt-get install slurm-wlm munge, then .ci/start-slurm)"
    conf_known = "SLURM_CONF" in os.environ or Path("/etc/slurm/slurm.conf").exists()
    if not conf_known and START_SCRIPT_CONF.exists():
        os.environ["SLURM_CONF"] = str(START_SCRIPT_CONF)
    conf = Path(os.environ.get("SLURM_CONF", "/etc/slurm/slurm.conf"))
    if not conf.is_file():  # without one, scontrol would look for a controller in DNS
        return f"no Slurm controller configured ({conf} not found): start one with .ci/start-slurm"
    try:
        ping = subprocess.run(["scontrol", "ping"], capture_output=True, text=True, timeout=20, check=False)
    except subprocess.TimeoutExpired:
        return "scontrol ping did not answer within 20 s"
    said = " ".join((ping.stdout + ping.stderr).split())
    if ping.returncode != 0 or "UP" not in ping.stdout:
        return (
            "no Slurm controller reachable (start one with "
            f".ci/start-slurm): scontrol ping said {said[:120]!r}"
        )
    return None


_WHY = _slurm_unreachable()
if _WHY and os.environ.get("DFTUNE_REQUIRE_SLURM") == "1":
    raise RuntimeError(f"DFTUNE_REQUIRE_SLURM=1 but {_WHY}")
if _WHY:
    pytest.skip(_WHY, allow_module_level=True)


def _config(key: str) -> str:
    out = subprocess.run(
        ["scontrol", "show", "config"], capture_output=True, text=True, timeout=20, check=True
    )
    for line in out.stdout.splitlines():
        name, _, value = line.partition("=")
        if name.strip() == key:
            return value.strip()
    return ""


ACCOUNTING = _config("AccountingStorageType")
#: What state_source must say on this cluster: the scontrol fallback without accounting.
EXPECTED_SOURCE = "scontrol (accounting disabled)" if ACCOUNTING.endswith("/none") else "sacct"


def _total_cpus() -> int:
    out = subprocess.run(["sinfo", "-h", "-o", "%C"], capture_output=True, text=True, timeout=20, check=True)
    # allocated/idle/other/total, one line per partition
    return max(int(line.split("/")[-1]) for line in out.stdout.split() if line.count("/") == 3)


def _launcher(**kw: Any) -> Launcher:
    return Launcher(kind="slurm", poll_s=0.2, time_limit_min=5, **kw)


def _run(
    argv: list[str], tmp: Path, *, timeout_s: float = 60, label: str = "job", **kw: Any
) -> ProcessResult:
    return run_slurm(
        argv,
        cwd=tmp,
        env=dict(os.environ),
        timeout_s=timeout_s,
        log_dir=tmp / "logs",
        label=label,
        launcher=_launcher(**kw),
    )


def _job_field(job_id: str, key: str) -> str:
    out = subprocess.run(
        ["scontrol", "-o", "show", "job", job_id], capture_output=True, text=True, timeout=20, check=False
    )
    for word in out.stdout.split():
        if word.startswith(key + "="):
            return word.partition("=")[2]
    return ""


def _gone(pid: int, within_s: float = 10.0) -> bool:
    deadline = time.monotonic() + within_s
    while time.monotonic() < deadline:
        try:
            state = Path(f"/proc/{pid}/stat").read_text().rsplit(")", 1)[1].split()[0]
        except (FileNotFoundError, IndexError):
            return True
        if state in ("Z", "X"):
            return True
        time.sleep(0.1)
    return False


def _spec(tmp: Path, **launcher: Any) -> Path:
    """The bundled small_reads workload, run through Slurm (paths made absolute, a [launcher] added)."""
    folder = Path(str(resources.files("dftune.resources") / "workloads" / "small_reads"))
    text = (folder / "workload.toml").read_text(encoding="utf-8")
    text = text.replace('cwd = "."', f'cwd = "{folder}"').replace(
        'source_dir = "."', f'source_dir = "{folder}"'
    )
    extra = "".join(f"{k} = {json.dumps(v)}\n" for k, v in launcher.items())
    text += f'\n[launcher]\nkind = "slurm"\npoll_s = 0.2\ntime_limit_min = 5\n{extra}'
    path = tmp / "small_reads_slurm.toml"
    path.write_text(text, encoding="utf-8")
    return path


def _dftune(*args: str, timeout: float = 600) -> subprocess.CompletedProcess[str]:
    return subprocess.run(
        [PY, "-m", "dftune.cli", *args], capture_output=True, text=True, timeout=timeout, check=False
    )


# -------------------------------------------------------------------- the time-limit job, in the background


class _Background:
    def __init__(self, log_dir: Path) -> None:
        self.log_dir = log_dir
        self.result: ProcessResult | None = None
        self.took = 0.0
        self.thread = threading.Thread(target=self._run, daemon=True)

    def _run(self) -> None:
        t0 = time.monotonic()
        self.result = run_slurm(
            [PY, "-c", "import time; time.sleep(600)"],
            cwd=self.log_dir,
            env=dict(os.environ),
            timeout_s=300,
            log_dir=self.log_dir,
            label="timelimit",
            launcher=Launcher(kind="slurm", poll_s=1.0, time_limit_min=1),
        )
        self.took = time.monotonic() - t0


@pytest.fixture(scope="module", autouse=True)
def time_limit_job(tmp_path_factory: pytest.TempPathFactory) -> Iterator[_Background]:
    job = _Background(tmp_path_factory.mktemp("slurm-timelimit"))
    job.thread.start()
    yield job
    job.thread.join(timeout=1)
    if job.thread.is_alive():  # a failed module: do not leave the job behind
        subprocess.run(["scancel", "--name", "dftune-timelimit"], timeout=20, check=False)
        job.thread.join(timeout=30)


# --------------------------------------------------------------------------- tests


def test_bench_traces_inside_the_job_and_times_the_job_not_the_queue(tmp_path: Path) -> None:
    """dftune bench --trace through sbatch/srun: the traces
    come from inside the job; wall_time is the job's."""
    pytest.importorskip("dftracer")
    spec = _spec(tmp_path)
    text = spec.read_text().replace('kind = "stdout_regex"', 'kind = "wall_time"')
    text = text.replace("pattern = 'epoch_time_s ([0-9.]+)'\n", "")
    spec.write_text(text)
    res = _dftune("bench", str(spec), "--replicates", "2", "--trace", "--json")
    assert res.returncode == 0, res.stderr[-2000:]
    doc = json.loads(res.stdout)
    assert doc["ok"] == 2, [r["reason"] for r in doc["replicates"]]
    for rep in doc["replicates"]:
        assert rep["state_source"] == EXPECTED_SOURCE
        assert rep["wall_source"] == "job script clock around srun (date +%s.%N)"
        assert rep["metric"] == pytest.approx(rep["wall_s"], abs=1e-5) and 0 < rep["wall_s"] < 30
        traces = list(Path(rep["trace_dir"]).glob("*.pfw*"))
        assert traces, f"no trace written inside the job in {rep['trace_dir']}"
        log = Path(doc["workdir"]) / "logs" / f"r{rep['index']}.sbatch"
        assert log.read_text().count("srun ") == 1  # it really went through the batch script
    # one replicate's traces (the bench folder holds one run per replicate: analyze refuses to merge them)
    analysis = _dftune("analyze", doc["replicates"][0]["trace_dir"], "--json")
    assert analysis.returncode == 0, analysis.stderr[-2000:]
    assert json.loads(analysis.stdout)["read"]["count"] > 0


def test_tune_through_slurm(tmp_path: Path) -> None:
    """dftune run (autonomous) measures a baseline and one experiment, every replicate a Slurm job."""
    pytest.importorskip("dftracer")
    res = _dftune(
        "run",
        str(_spec(tmp_path)),
        "--mode",
        "autonomous",
        "--max-experiments",
        "1",
        "--replicates",
        "3",
        "--json",
    )
    assert res.returncode == 0, res.stderr[-2000:]
    doc = json.loads(res.stdout)
    assert doc["status"] == "completed", doc["status_reason"]
    assert len(doc["verdicts"]) == 1, doc["verdicts"]
    assert doc["baseline_median"] and doc["baseline_median"] > 0
    run_dir = Path(doc["run_dir"])
    scripts = [p for p in run_dir.rglob("*.sbatch") if "bundle" not in p.relative_to(run_dir).parts]
    assert len(scripts) >= 6, scripts  # baseline and experiment replicates, each submitted with sbatch
    assert all(p.with_suffix(".time").read_text().startswith("start ") for p in scripts)
    assert Path(doc["report"]).is_file()
    if not any(v["kept"] for v in doc["verdicts"]):
        return  # nothing kept: no bundle to carry
    # the bundle: its check from a copy ran as Slurm jobs, and its batch script runs the tuned arm
    bundle = Path(doc["bundle"])
    check = json.loads((bundle / "check.json").read_text())
    assert check["pairs"] >= 4 and check["verdict"] != "gone", check
    batch = (bundle / "scripts" / "tuned.sbatch").read_text()
    assert "#SBATCH --ntasks=1" in batch and "srun" in (bundle / "scripts" / "tuned.sh").read_text()
    copy = tmp_path / "carried"
    shutil.copytree(bundle, copy)
    job = subprocess.run(
        ["sbatch", "--wait", "--parsable", "--output", str(tmp_path / "tuned.out"), "scripts/tuned.sbatch"],
        cwd=copy,
        capture_output=True,
        text=True,
        timeout=300,
        check=False,
    )
    assert job.returncode == 0, (job.stdout, job.stderr, (tmp_path / "tuned.out").read_text(errors="replace"))
    assert "epoch_time_s" in (tmp_path / "tuned.out").read_text(), (tmp_path / "tuned.out").read_text()


def test_timeout_is_cancelled_with_scancel(tmp_path: Path) -> None:
    hang = (
        "import os, subprocess, time; child = subprocess.Popen(['sleep', '120']);"
        "print(os.getpid(), child.pid, flush=True); time.sleep(120)"
    )
    # the timeout counts the run only: on the busy 2-core node the job may wait for a core behind the
    # module's time-limited job, then has 30 s to print its pids before it is cancelled
    t0 = time.monotonic()
    res = _run([PY, "-c", hang], tmp_path, timeout_s=30, queue_timeout_s=300)
    took = time.monotonic() - t0
    assert res.status == "timeout", res
    assert res.reason.startswith("killed after 30 s: scancel"), res.reason
    assert took < (res.queue_s or 0.0) + 60, (took, res.queue_s)
    pids = [int(p) for p in res.stdout_tail.split()]
    assert len(pids) == 2, (res.reason, res.wall_s, res.queue_s, res.stdout_tail)
    assert all(_gone(pid) for pid in pids), "the job's processes survived scancel"
    job_id = res.reason.split("scancel ")[1].split()[0]
    assert _job_field(job_id, "JobState") == "CANCELLED"


def test_failed_job_quotes_the_program(tmp_path: Path) -> None:
    res = _run([PY, "-c", "import sys; print('bad input file', file=sys.stderr); sys.exit(3)"], tmp_path)
    assert res.status == "failed" and res.exit_code == 3, res
    assert res.state_source == EXPECTED_SOURCE and f"state from {EXPECTED_SOURCE}" in res.reason
    assert res.stderr_tail.strip() == "bad input file"  # srun's "task 0: Exited with exit code 3" left out
    assert "srun: error" in (tmp_path / "logs" / "job.err").read_text()


def test_job_killed_by_a_signal(tmp_path: Path) -> None:
    prog = "import os, signal; os.kill(os.getpid(), signal.SIGKILL)"
    res = _run([PY, "-c", prog], tmp_path)
    assert res.status == "failed" and res.exit_code == -9, res
    assert "killed by signal 9 (SIGKILL)" in res.reason


def test_job_that_can_never_start_fails_fast(tmp_path: Path) -> None:
    """More ranks than the partition has CPUs: Slurm accepts
    the job and leaves it pending (PartitionConfig)."""
    ranks = _total_cpus() + 1
    t0 = time.monotonic()
    res = _run([PY, "-c", "print(1)"], tmp_path, timeout_s=120, ranks=ranks)
    assert res.status == "failed", res
    assert time.monotonic() - t0 < 30
    assert "can never start" in res.reason and "PartitionConfig" in res.reason
    assert res.wall_s == 0.0


def test_time_limit_reports_its_signal(time_limit_job: _Background) -> None:
    """Slurm's own time limit (1 min): a timeout with the signal that ended it, never exit code 0."""
    time_limit_job.thread.join(timeout=240)
    assert not time_limit_job.thread.is_alive(), "the time-limit job did not end within 4 minutes"
    res = time_limit_job.result
    assert res is not None
    assert res.status == "timeout", res
    assert "Slurm time limit reached" in res.reason
    assert res.exit_code not in (0, None) and res.exit_code < 0, res
    assert res.state_source == EXPECTED_SOURCE
