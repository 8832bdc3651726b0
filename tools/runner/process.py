"""Run one program the careful way: argv only, own process group, hard timeout.

The program gets its own session (process group), so a timeout kills everything it
started, not just the direct child.  Output goes to files (a chatty program cannot
block on a full pipe); the tail is kept for error messages.
"""

from __future__ import annotations

import os
import signal
import subprocess
import time
from pathlib import Path
from typing import Literal

from pydantic import BaseModel, ConfigDict

Status = Literal["ok", "failed", "timeout"]
#: Seconds between SIGTERM and SIGKILL for a process group that overran its timeout.
KILL_GRACE_S = 3.0
TAIL_BYTES = 4000


class ProcessResult(BaseModel):
    model_config = ConfigDict(extra="forbid")
    status: Status
    exit_code: int | None
    wall_s: float
    stdout_tail: str = ""
    stderr_tail: str = ""
    reason: str = ""


def _tail(path: Path) -> str:
    try:
        with open(path, "rb") as fh:
            fh.seek(0, os.SEEK_END)
            size = fh.tell()
            fh.seek(max(0, size - TAIL_BYTES))
            return fh.read().decode("utf-8", errors="replace")
    except OSError:
        return ""


def kill_group(pgid: int, grace_s: float = KILL_GRACE_S) -> None:
    """SIGTERM the whole group, then SIGKILL whatever is left after ``grace_s``."""
    for sig, wait in ((signal.SIGTERM, grace_s), (signal.SIGKILL, 0.0)):
        try:
            os.killpg(pgid, sig)
        except ProcessLookupError:
            return
        deadline = time.monotonic() + wait
        while time.monotonic() < deadline:
            try:
                os.killpg(pgid, 0)
            except ProcessLookupError:
                return
            time.sleep(0.05)


def run_process(
    argv: list[str],
    *,
    cwd: Path,
    env: dict[str, str],
    timeout_s: float,
    log_dir: Path,
    label: str = "run",
) -> ProcessResult:
    """Run ``argv`` to completion or timeout; stdout/stderr land in ``log_dir/label.{out,err}``."""
    if not argv or not all(isinstance(a, str) for a in argv):
        raise ValueError("argv must be a non-empty list of strings")
    log_dir.mkdir(parents=True, exist_ok=True)
    out_path, err_path = log_dir / f"{label}.out", log_dir / f"{label}.err"
    start = time.perf_counter()
    with open(out_path, "wb") as out, open(err_path, "wb") as err:
        try:
            proc = subprocess.Popen(argv, cwd=cwd, env=env, stdout=out, stderr=err, stdin=subprocess.DEVNULL,
                                    start_new_session=True)  # fmt: skip
        except OSError as exc:
            return ProcessResult(
                status="failed", exit_code=None, wall_s=0.0, reason=f"cannot start {argv[0]}: {exc}"
            )
        try:
            code = proc.wait(timeout=timeout_s)
            status: Status = "ok" if code == 0 else "failed"
            reason = "" if code == 0 else f"exit code {code}"
        except subprocess.TimeoutExpired:
            kill_group(proc.pid)
            code = proc.wait()
            status, reason = "timeout", f"killed after {timeout_s:g} s (whole process group)"
        else:
            # the program may have left children behind in its group: they go too
            kill_group(proc.pid, grace_s=0.5)
    wall = time.perf_counter() - start
    return ProcessResult(
        status=status, exit_code=code, wall_s=wall, stdout_tail=_tail(out_path), stderr_tail=_tail(err_path),
        reason=reason,
    )  # fmt: skip
