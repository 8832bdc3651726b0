"""The MCP run tools' driver output ($DFTUNE_HOME/mcp-drivers) is bounded: an ended driver's files
go once its run's report is read, and only the most recent drivers' files are kept."""

from __future__ import annotations

import os
import subprocess
import sys
import time

from dftune.core.home import dftune_home
from dftune.mcp_server import run_tools as rt


def _fake_output(run_id: str, age_s: float) -> None:
    for f in rt._driver_files(run_id):
        f.write_text("{}\n" if f.suffix == ".json" else "progress\n")
        t = time.time() - age_s
        os.utime(f, (t, t))


def _left() -> set[str]:
    return {f.stem for f in (dftune_home() / rt.DRIVERS_DIR).iterdir()}


def test_only_the_most_recent_drivers_files_are_kept() -> None:
    for i in range(7):
        _fake_output(f"run{i}", age_s=100 - i)  # run6 is the newest
    gone = rt.prune_driver_files(keep=3)
    assert sorted(gone) == ["run0", "run1", "run2", "run3"]
    assert _left() == {"run4", "run5", "run6"}
    assert rt.prune_driver_files(keep=3) == []


def test_a_live_drivers_files_are_never_removed() -> None:
    _fake_output("live", age_s=1000)
    _fake_output("new", age_s=0)
    rt._drivers["live"] = subprocess.Popen([sys.executable, "-c", "import time; time.sleep(30)"])
    try:
        assert rt.prune_driver_files(keep=0) == ["new"]
        assert rt.forget_driver("live") is False
        assert _left() == {"live"}
    finally:
        rt._drivers["live"].kill()
        rt._drivers["live"].wait()
    assert rt.forget_driver("live") is True
    assert _left() == set() and "live" not in rt._drivers


def test_an_ended_drivers_files_are_removed_once_forgotten() -> None:
    _fake_output("ended", age_s=0)
    assert rt.forget_driver("ended")
    assert not any(f.exists() for f in rt._driver_files("ended"))


def test_run_report_removes_the_ended_runs_driver_files() -> None:
    from pathlib import Path

    from dftune import mcp_server as m
    from dftune.tools.session.workspace import Workspace
    from tests.unit.test_report import make_report

    ws = Workspace()
    ws.create_run("ended", "small-reads")
    make_report(ws.run_dir("ended"), traced=False)
    _fake_output("ended", age_s=0)
    _fake_output("other", age_s=0)
    out = m.call("run_report", {"run_id": "ended"})
    assert Path(out["markdown"]).is_file()
    assert _left() == {"other"}  # only the reported run's driver output went
