"""The small files a run keeps (run.json, driver.lock, JSON artifacts, a campaign's files) are read
as regular files only, bounded, never opened to block: a named pipe at driver.lock hung `dftune
runs`, a run.json linked to a device filled memory (the hostile round's attacks on DFTUNE_HOME)."""

from __future__ import annotations

import os
import threading
from collections.abc import Callable
from pathlib import Path
from typing import Any

import pytest

from dftune import mcp_server as m
from dftune.core import strictjson
from dftune.core.fsio import UnreadableFile, read_regular
from dftune.tools.session.campaigns import CampaignStore
from dftune.tools.session.layout import RUN_META_BYTES, WorkspaceError
from dftune.tools.session.workspace import Workspace
from tests.cli_inproc import dftune

#: what "at once" means here: a blocked open never returns at all
PROMPT_S = 5.0


def _within(fn: Callable[[], Any], unblock: Path | None = None) -> Any:
    """``fn()`` in a thread; fails the test if it has not returned within :data:`PROMPT_S` (then a
    writer opens ``unblock``, a pipe, so the stuck reader ends rather than outliving the test)."""
    out: list[tuple[bool, Any]] = []

    def call() -> None:
        try:
            out.append((True, fn()))
        except BaseException as exc:  # handed to the test thread
            out.append((False, exc))

    t = threading.Thread(target=call, daemon=True)
    t.start()
    t.join(PROMPT_S)
    if not out:
        if unblock is not None:
            fd = os.open(unblock, os.O_WRONLY | os.O_NONBLOCK)
            os.close(fd)
        pytest.fail(f"blocked for more than {PROMPT_S} s")
    ok, value = out[0]
    if not ok:
        raise value
    return value


def test_a_named_pipe_at_driver_lock_never_hangs_the_run_list() -> None:
    ws = Workspace()
    ws.create_run("h12", "toy")
    ws.create_run("ok1", "toy")
    lock = ws.run_dir("h12") / "driver.lock"
    os.mkfifo(lock)
    runs = {r.id: r for r in _within(ws.list_runs, lock)}
    assert set(runs) == {"h12", "ok1"} and runs["h12"].status == "created" and runs["h12"].driver_pid is None
    listed = _within(lambda: m.call("run_list", {}), lock)
    assert sorted(r["id"] for r in listed["runs"]) == ["h12", "ok1"]
    res = _within(lambda: dftune("runs"), lock)
    assert res.returncode == 0 and "h12" in res.stdout


def test_driving_a_run_whose_lock_is_a_pipe_is_refused_in_one_line() -> None:
    ws = Workspace()
    ws.create_run("h12", "toy")
    lock = ws.run_dir("h12") / "driver.lock"
    os.mkfifo(lock)

    def drive() -> None:
        with ws.driving("h12"):
            pass

    with pytest.raises(WorkspaceError, match="lock is not a regular file"):
        _within(drive, lock)


@pytest.mark.parametrize("kind", ["device", "pipe", "huge"])
def test_a_run_json_that_is_no_small_regular_file_is_one_line(kind: str) -> None:
    ws = Workspace()
    ws.create_run("h4", "toy")
    ws.create_run("ok1", "toy")
    meta = ws.run_dir("h4") / "run.json"
    meta.unlink()
    if kind == "device":
        meta.symlink_to("/dev/null")  # read as a device would be (a link to /dev/zero filled 16 GB)
    elif kind == "pipe":
        os.mkfifo(meta)
    else:
        with open(meta, "wb") as fh:
            fh.truncate(RUN_META_BYTES * 8)  # sparse: nothing written to the disk
    why = "larger than 1 MiB" if kind == "huge" else "not a regular file"
    with pytest.raises(WorkspaceError, match=why) as info:
        _within(lambda: ws.read_meta("h4"), meta if kind == "pipe" else None)
    assert str(meta) in str(info.value) and "\n" not in str(info.value)
    runs = {r.id: r for r in _within(ws.list_runs, meta if kind == "pipe" else None)}
    assert runs["h4"].status == "invalid" and why in runs["h4"].reason and runs["ok1"].status == "created"
    res = _within(lambda: dftune("report", "h4"), meta if kind == "pipe" else None)
    assert res.returncode == 2 and "run.json" in res.stderr and why in res.stderr
    assert len(res.stderr.strip().splitlines()) == 1 and "internal error" not in res.stderr


def test_kept_json_and_campaign_files_are_read_as_regular_files_only(tmp_path: Path) -> None:
    os.mkfifo(tmp_path / "analysis.json")
    with pytest.raises(strictjson.JSONFileError, match="not a regular file"):
        _within(lambda: strictjson.read_file(tmp_path / "analysis.json"), tmp_path / "analysis.json")
    store = CampaignStore()
    store.root.mkdir(parents=True)
    (store.root / "night").mkdir()
    os.mkfifo(store.root / "night" / "campaign.json")
    with pytest.raises(WorkspaceError, match="not a regular file"):
        _within(lambda: store.read("night"), store.root / "night" / "campaign.json")


def test_the_bounded_reader_reads_a_file_and_tells_absent_from_broken(tmp_path: Path) -> None:
    (tmp_path / "a").write_bytes(b"12345\n")
    (tmp_path / "link").symlink_to(tmp_path / "a")
    assert read_regular(tmp_path / "a", 6) == b"12345\n" == read_regular(tmp_path / "link", 6)
    with pytest.raises(UnreadableFile, match="larger than 5 bytes"):
        read_regular(tmp_path / "a", 5)
    with pytest.raises(FileNotFoundError):
        read_regular(tmp_path / "none", 5)
    with pytest.raises(UnreadableFile, match="a folder"):
        read_regular(tmp_path, 5)


def test_a_report_json_that_is_no_regular_file_is_named_not_a_run_to_resume(tmp_path: Path) -> None:
    from dftune.tools.report.loader import ReportError, load_report
    from dftune.tools.session.workspace import Workspace

    ws = Workspace()
    ws.create_run("h8", "toy")
    ws.set_status("h8", "completed")
    os.mkfifo(ws.run_dir("h8") / "report.json")
    with pytest.raises(ReportError, match=r"report\.json: not a regular file"):
        load_report("h8", ws)
