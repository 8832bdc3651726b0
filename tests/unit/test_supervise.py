"""Programs never outlive dftune: PDEATHSIG, the subreaper sweep, the ledger, signals (real processes)."""

from __future__ import annotations

import hashlib
import json
import os
import signal
import subprocess
import sys
import textwrap
import time
from pathlib import Path

import pytest

from dftune.core import supervise
from dftune.core.process import run_process

pytestmark = pytest.mark.skipif(not sys.platform.startswith("linux"), reason="PDEATHSIG and /proc are Linux")

ENV = dict(os.environ)


def alive(pid: int) -> bool:
    info = supervise.proc_info(pid)
    return info is not None and info.state != "Z"


def wait_gone(pid: int, timeout: float = 5.0) -> bool:
    deadline = time.monotonic() + timeout
    while alive(pid) and time.monotonic() < deadline:
        time.sleep(0.02)
    return not alive(pid)


def grandchild_program(where: Path, setsid: bool, then_sleep: float) -> list[str]:
    """A program that starts a long-sleeping grandchild (optionally in its own session) and records it."""
    code = textwrap.dedent(f"""
        import os, subprocess, sys, time
        gc = "import os, time\\n" + ("os.setsid()\\n" if {setsid!r} else "") + "time.sleep(120)\\n"
        p = subprocess.Popen([sys.executable, "-c", gc])
        open({str(where)!r}, "w").write(f"{{os.getpid()}} {{p.pid}}")
        time.sleep({then_sleep})
    """)
    return [sys.executable, "-c", code]


def wait_for(path: Path, timeout: float = 20.0) -> str:
    deadline = time.monotonic() + timeout
    while time.monotonic() < deadline:
        if path.exists() and path.read_text().strip():
            time.sleep(0.1)  # the grandchild has called setsid by now
            return path.read_text()
        time.sleep(0.02)
    raise AssertionError(f"{path} never appeared")


@pytest.mark.parametrize("setsid", [False, True], ids=["same-group", "setsid"])
def test_a_grandchild_is_gone_when_run_process_returns(tmp_path: Path, setsid: bool) -> None:
    rec = tmp_path / "pids"
    with supervise.supervised("unit-test"):
        r = run_process(
            grandchild_program(rec, setsid, 0.3),
            cwd=tmp_path,
            env=ENV,
            timeout_s=30,
            log_dir=tmp_path / "logs",
        )
    assert r.status == "ok", r.stderr_tail
    _main, gc = (int(x) for x in rec.read_text().split())
    assert wait_gone(gc, 2.0), "the grandchild outlived the workload"
    assert bool(r.leftovers) == setsid  # one outside the group is named; one inside went with the group


def test_a_setsid_grandchild_is_caught_by_its_tag_without_the_subreaper(tmp_path: Path) -> None:
    rec = tmp_path / "pids"
    assert not supervise.is_subreaper()
    r = run_process(
        grandchild_program(rec, True, 0.3), cwd=tmp_path, env=ENV, timeout_s=30, log_dir=tmp_path / "logs"
    )
    gc = int(rec.read_text().split()[1])
    assert wait_gone(gc, 2.0) and r.leftovers


def test_wall_time_stops_when_the_program_exits_not_after_the_cleanup(tmp_path: Path) -> None:
    """Killing a leftover group (up to 0.5 s of grace) is not part of the measured time."""
    rec = tmp_path / "pids"
    r = run_process(
        grandchild_program(rec, False, 0.0), cwd=tmp_path, env=ENV, timeout_s=30, log_dir=tmp_path / "logs"
    )
    assert r.status == "ok" and r.wall_s < 2.0


DRIVER = textwrap.dedent("""
    import json, os, sys
    from pathlib import Path
    from dftune.core import supervise
    from dftune.core.process import run_process
    program, ledger, owner = sys.argv[1:4]
    try:
        with supervise.supervised(owner, Path(ledger)):
            run_process(json.loads(program), cwd=Path(ledger).parent, env=dict(os.environ), timeout_s=120,
                        log_dir=Path(ledger).parent / "logs")
    except supervise.DriverInterrupted as exc:
        print(json.dumps({"interrupted": exc.signum}))
        sys.exit(128 + exc.signum)
""")


def owner_of(tmp_path: Path) -> str:
    """Unique per test: two xdist workers give their tests the same folder name (``..._e0`` under
    ``popen-gw0`` and ``popen-gw1``), and one test's sweep by its owner tag killed the other's program."""
    return f"run-{hashlib.sha1(str(tmp_path).encode()).hexdigest()[:12]}"


def start_driver(tmp_path: Path) -> tuple[subprocess.Popen[str], Path, Path]:
    rec, ledger = tmp_path / "pids", tmp_path / supervise.LEDGER_FILE
    program = json.dumps(grandchild_program(rec, True, 120))
    proc = subprocess.Popen(
        # an owner of its own: kill_leftovers kills whatever carries the owner's tag, and the
        # other test workers' drivers run at the same time
        [sys.executable, "-c", DRIVER, program, str(ledger), owner_of(tmp_path)],
        text=True,
        stdout=subprocess.PIPE,
        stderr=subprocess.PIPE,
        env=ENV,
    )
    return proc, rec, ledger


def guardians_of(pid: int) -> list[int]:
    """The guardian process(es) a driver started (core/guardian.py): its children that carry the tag."""
    found = []
    for name in os.listdir("/proc"):
        info = supervise.proc_info(int(name)) if name.isdigit() else None
        if info is not None and info.ppid == pid:
            try:
                if b"DFTUNE_PROC_TAG" in Path(f"/proc/{name}/cmdline").read_bytes():
                    found.append(info.pid)
            except OSError:
                continue
    return found


def recorded(ledger: Path, within_s: float = 10.0) -> list[dict[str, object]]:
    """The ledger's entries once the driver has written one (it records a program right after
    handing it to the guardian, which may be after the program wrote its pids)."""
    deadline = time.monotonic() + within_s
    while time.monotonic() < deadline:
        if ledger.is_file() and (entries := json.loads(ledger.read_text() or "[]")):
            return entries  # type: ignore[no-any-return]
        time.sleep(0.02)
    return []


def started_guardians(pid: int, within_s: float = 10.0) -> list[int]:
    """The driver's guardians once it has one: the workload may write its pids before the driver,
    busy on a loaded machine, has started the guardian that watches its group."""
    deadline = time.monotonic() + within_s
    while not (found := guardians_of(pid)) and time.monotonic() < deadline:
        time.sleep(0.02)
    return found


def test_sigkill_of_the_driver_alone_leaves_nothing_the_guardian_ends_the_rest(tmp_path: Path) -> None:
    proc, rec, _ledger = start_driver(tmp_path)
    main, gc = (int(x) for x in wait_for(rec).split())
    assert started_guardians(proc.pid), "the driver started no guardian"
    proc.kill()
    proc.wait()
    assert wait_gone(main), "PR_SET_PDEATHSIG did not take the direct child with the driver"
    assert wait_gone(gc), "the guardian did not end the setsid'd grandchild when the driver was killed"


def test_sigkill_of_the_driver_and_its_guardian_the_next_driver_kills_the_rest(tmp_path: Path) -> None:
    proc, rec, ledger = start_driver(tmp_path)
    main, gc = (int(x) for x in wait_for(rec).split())
    entries = recorded(ledger)
    assert [e["pid"] for e in entries] == [main] and entries[0]["tag"].startswith(f"{owner_of(tmp_path)}/")
    for pid in started_guardians(proc.pid):  # the guardian killed too (the OOM killer, a cgroup's kill)
        os.kill(pid, signal.SIGKILL)
    proc.kill()
    proc.wait()
    assert wait_gone(main), "PR_SET_PDEATHSIG did not take the direct child with the driver"
    assert alive(gc)  # a setsid'd grandchild survives that; the next driver of the run kills it
    found = supervise.kill_leftovers(supervise.Ledger(ledger), owner_of(tmp_path))
    assert found and wait_gone(gc, 2.0)
    assert json.loads(ledger.read_text()) == []


@pytest.mark.parametrize("sig", [signal.SIGTERM, signal.SIGINT])
def test_sigterm_and_sigint_kill_every_program_and_interrupt_the_driver(tmp_path: Path, sig: int) -> None:
    proc, rec, _ledger = start_driver(tmp_path)
    main, gc = (int(x) for x in wait_for(rec).split())
    proc.send_signal(sig)
    out, err = proc.communicate(timeout=30)
    assert proc.returncode == 128 + sig, err
    assert json.loads(out.strip().splitlines()[-1]) == {"interrupted": sig}
    assert wait_gone(main, 2.0) and wait_gone(gc, 2.0)


def test_leftovers_skip_a_recycled_pid(tmp_path: Path) -> None:
    """A ledger entry whose pid now belongs to another process (another start time) is not killed."""
    bystander = subprocess.Popen([sys.executable, "-c", "import time; time.sleep(30)"])
    try:
        info = supervise.proc_info(bystander.pid)
        assert info is not None
        ledger = supervise.Ledger(tmp_path / supervise.LEDGER_FILE)
        ledger.add(
            {"pid": bystander.pid, "pgid": bystander.pid, "start": info.start - 1, "argv0": "x", "tag": "r/1"}
        )
        assert supervise.kill_leftovers(ledger, "r") == []
        assert alive(bystander.pid)
    finally:
        bystander.kill()
        bystander.wait()


def test_drivers_in_two_threads_keep_their_own_programs(tmp_path: Path) -> None:
    """A campaign drives one run per thread: one run's many short programs (each followed by a
    sweep for orphans) and its end never kill the other run's program, and each ledger holds only
    its own run's groups."""
    import threading

    results: dict[str, object] = {}
    long_started = threading.Event()

    def long_run() -> None:
        with supervise.supervised("run-a", tmp_path / "a.json"):
            long_started.set()
            results["a"] = run_process(
                [sys.executable, "-c", "import time; time.sleep(3)"],
                cwd=tmp_path,
                env=ENV,
                timeout_s=30,
                log_dir=tmp_path / "a",
                label="long",
            )

    def short_runs() -> None:
        long_started.wait(10)
        with supervise.supervised("run-b", tmp_path / "b.json"):
            for i in range(20):  # each ends with a sweep that looks for orphans of this process
                run_process(
                    [sys.executable, "-c", "pass"],
                    cwd=tmp_path,
                    env=ENV,
                    timeout_s=30,
                    log_dir=tmp_path / "b",
                    label=f"short{i}",
                )
            seen = json.loads((tmp_path / "a.json").read_text()) if (tmp_path / "a.json").exists() else []
            results["a_ledger_during_b"] = seen
        # run-b ended (its supervision exited) while run-a's program still runs

    threads = [threading.Thread(target=long_run), threading.Thread(target=short_runs)]
    for t in threads:
        t.start()
    for t in threads:
        t.join(60)
    a = results["a"]
    assert a.status == "ok", a  # type: ignore[attr-defined]
    assert all(
        "long" in str(e.get("argv0", "")) or e.get("tag", "").startswith("run-a/")
        for e in results["a_ledger_during_b"]
    )  # type: ignore[union-attr]
