"""Subprocesses: own process group, timeout kills the whole tree, failures keep their tail."""

from __future__ import annotations

import os
import sys
import time
from pathlib import Path

from dftune.core.process import run_process

ENV = dict(os.environ)


def py(code: str) -> list[str]:
    return [sys.executable, "-c", code]


def alive(pid: int) -> bool:
    try:
        os.kill(pid, 0)
    except ProcessLookupError:
        return False
    # a zombie counts as gone
    try:
        return Path(f"/proc/{pid}/stat").read_text().split()[2] != "Z"
    except OSError:
        return False


def test_ok_and_output_tail(tmp_path: Path) -> None:
    r = run_process(
        py("print('hello'); import sys; print('warn', file=sys.stderr)"),
        cwd=tmp_path,
        env=ENV,
        timeout_s=30,
        log_dir=tmp_path / "logs",
    )
    assert r.status == "ok" and r.exit_code == 0 and r.wall_s > 0
    assert "hello" in r.stdout_tail and "warn" in r.stderr_tail


def test_failure_keeps_exit_code_and_stderr(tmp_path: Path) -> None:
    r = run_process(
        py("import sys; print('boom happened', file=sys.stderr); sys.exit(3)"),
        cwd=tmp_path,
        env=ENV,
        timeout_s=30,
        log_dir=tmp_path / "logs",
    )
    assert (
        r.status == "failed"
        and r.exit_code == 3
        and "boom happened" in r.stderr_tail
        and "exit code 3" in r.reason
    )


def test_timeout_kills_the_whole_process_group(tmp_path: Path) -> None:
    pidfile = tmp_path / "grandchild.pid"
    code = (
        "import subprocess, sys, time\n"
        f"p = subprocess.Popen([sys.executable, '-c', 'import time; time.sleep(60)'])\n"
        f"open({str(pidfile)!r}, 'w').write(str(p.pid))\n"
        "time.sleep(60)\n"
    )
    start = time.monotonic()
    r = run_process(py(code), cwd=tmp_path, env=ENV, timeout_s=1.5, log_dir=tmp_path / "logs")
    assert r.status == "timeout" and "whole process group" in r.reason
    assert time.monotonic() - start < 15
    grandchild = int(pidfile.read_text())
    deadline = time.monotonic() + 5
    while alive(grandchild) and time.monotonic() < deadline:
        time.sleep(0.05)
    assert not alive(grandchild), "the grandchild survived the timeout"


def test_missing_program_is_a_failure_not_a_crash(tmp_path: Path) -> None:
    r = run_process(["/nonexistent/program"], cwd=tmp_path, env=ENV, timeout_s=5, log_dir=tmp_path / "logs")
    assert r.status == "failed" and "cannot start" in r.reason
