"""Process accounting: helpers are told from the application's processes, runs from each other.

The partials here hold only the per-process rows the accounting reads (the ``proc`` table the
trace readers build); the real launches (pyenv shims, launch scripts, two runs) are traced
with the real dftracer in tests/e2e/test_launch_styles.py.
"""

from __future__ import annotations

from typing import Any

import pyarrow as pa
import pytest

from dftune.tools.trace.processes import account, rules
from dftune.tools.trace.reader import FilePartial

S = 1_000_000  # us


def proc(
    pid: int,
    start_s: float,
    end_s: float,
    *,
    host: str = "n1",
    cmd: str | None = "python;app.py",
    events: int = 500,
    moved: int = 1 << 30,
    rank: int | None = None,
    cmd_hash: str | None = None,
    calls: int = 1000,
) -> dict[str, Any]:
    return {
        "host": host,
        "pid": pid,
        "rank": rank,
        "cmd": cmd,
        "cmd_hash": cmd_hash,
        "events": events,
        "first_ts": int(start_s * S),
        "last_end": int(end_s * S),
        "read_count": calls,
        "read_bytes": moved,
        "read_time_us": 10,
        "write_count": 0,
        "write_bytes": 0,
        "write_time_us": 0,
        "metadata_count": 0,
        "metadata_time_us": 0,
        "sync_count": 0,
        "sync_time_us": 0,
    }


def files(
    *rows: dict[str, Any] | list[dict[str, Any]], sh: dict[str, str] | None = None
) -> list[FilePartial]:
    """One trace file per argument (a row, or several processes in one file)."""
    out = []
    for i, r in enumerate(rows):
        table = pa.Table.from_pylist(r if isinstance(r, list) else [r])
        out.append(FilePartial(path=f"f{i}", scalars={"sh_map": sh or {}}, tables={"proc": table}))
    return out


def roles(parts: list[FilePartial]) -> dict[int | None, str | None]:
    acc = account(parts)
    assert len(acc.runs) == 1, [r.apart for r in acc.runs]
    return {p.pid: p.helper for p in acc.procs}


def test_a_launch_script_and_its_tools_are_helpers_the_application_is_not() -> None:
    got = roles(
        files(
            proc(1, 0, 30, cmd="/bin/bash;./run.sh", events=22, moved=80),  # waits for the job in waitpid
            proc(2, 0.1, 0.11, cmd="cat;/etc/hostname", events=7, moved=12),
            proc(3, 0.2, 0.3, cmd=None, cmd_hash="ab", events=5, moved=0),  # a subshell: command unknown
            proc(4, 0.5, 29.9),  # the application
        )
    )
    assert got[4] is None
    assert "bash" in str(got[1]) and "cat" in str(got[2]) and "5 events" in str(got[3])


def test_idle_ranks_of_the_application_stay_application_processes() -> None:
    """Rank 0 does all the I/O: the other ranks run the same command (or have a rank); they are
    what imbalance is about, never helpers, even with a handful of events."""
    got = roles(
        files(
            proc(10, 0, 100, cmd="./ior;-w", moved=1 << 34),
            proc(11, 0, 100, cmd="./ior;-w", events=3, moved=0),
            proc(12, 0, 100, cmd=None, rank=2, events=3, moved=0),
        )
    )
    assert got == {10: None, 11: None, 12: None}


def test_interpreter_scripts_and_short_lives_are_recognised() -> None:
    got = roles(
        files(
            proc(20, 0, 100, cmd="python3;/opt/conda/bin/conda;run;-n;x;python;train.py", moved=40 << 20),
            proc(21, 1, 99, cmd="python3;train.py", moved=50 << 30),
            proc(
                22, 0.5, 0.9, cmd="python3;-c;import sys; print(sys.prefix)", moved=1 << 20
            ),  # 0.4 s of 98 s
            proc(23, 1, 99, cmd="python3;monitor.py", moved=1 << 20),  # long-lived: kept (not ours to hide)
        )
    )
    assert "conda" in str(got[20]) and "lived" in str(got[22])
    assert got[21] is None and got[23] is None


def test_a_process_moving_a_real_share_of_the_data_is_never_a_helper() -> None:
    got = roles(
        files(proc(30, 0, 10, cmd="cat;big.bin", events=9, moved=1 << 30), proc(31, 0, 10, moved=1 << 30))
    )
    assert got == {30: None, 31: None}


def test_commands_resolve_across_files() -> None:
    """A forked child's command hash may be defined in its parent's file only (2.x hashes are global)."""
    parts = files(
        proc(40, 0, 10), proc(41, 1, 2, cmd=None, cmd_hash="cc", events=5, moved=0), sh={"cc": "bash;x"}
    )
    acc = account(parts)
    child = next(p for p in acc.procs if p.pid == 41)
    assert child.cmd == "bash;x" and "bash" in str(child.helper)


def test_helpers_before_and_after_the_application_belong_to_its_run() -> None:
    """A shim's tools run before the application starts (its shell's own events are lost at exec),
    a script's last tools after it ends; gaps of more than min_gap_s do not make them runs."""
    gap = rules().min_gap_s + 1
    acc = account(
        files(
            proc(50, 0, 0.2, cmd="bash;pyenv-exec", events=20, moved=80),
            proc(51, 0.2 + gap, 10),
            proc(52, 10 + gap, 10.1 + gap, cmd="echo;done", events=4, moved=5),
        )
    )
    assert len(acc.runs) == 1 and {p.pid: p.helper is None for p in acc.procs} == {
        50: False,
        51: True,
        52: False,
    }


@pytest.mark.parametrize(
    ("second", "why"),
    [
        (proc(61, 101, 150, host="n2"), "other hosts"),  # right after, but elsewhere
        (proc(61, 101, 150, cmd="./other"), "other commands"),
        (
            proc(61, 300, 390),
            "with no process alive, longer than the activity on either side",
        ),  # the same command, far apart
    ],
)
def test_separate_runs_are_found_and_said_why(second: dict[str, Any], why: str) -> None:
    acc = account(files(proc(60, 0, 100), second))
    assert [len(r.procs) for r in acc.runs] == [1, 1]
    assert acc.runs[0].apart is None and why in str(acc.runs[1].apart)
    assert acc.runs[0].files == {0} and acc.runs[1].files == {1}


@pytest.mark.parametrize(
    "second",
    [
        proc(61, 100.5, 150, host="n2", cmd="./other"),  # a gap shorter than min_gap_s: one stretch
        proc(61, 50, 150, host="n2", cmd="./other"),  # overlapping: a multi-host job, a server and client
        proc(61, 102, 150),  # same host and command, a short gap: one job's next step
    ],
)
def test_processes_close_in_time_are_one_run(second: dict[str, Any]) -> None:
    assert len(account(files(proc(60, 0, 100), second)).runs) == 1


def test_a_file_holding_processes_of_two_runs_joins_them() -> None:
    acc = account(files([proc(70, 0, 10), proc(71, 5000, 5010, host="n2")]))
    assert len(acc.runs) == 1 and acc.runs[0].files == {0}
