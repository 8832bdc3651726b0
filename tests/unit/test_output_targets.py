"""An output path someone names replaces only a regular file: `dftune report TRACE --output
/dev/full` turned the device into a file (the hostile round). Here a named pipe and a link to one
stand for every special file; no real device is touched."""

from __future__ import annotations

import os
import stat
import threading
from pathlib import Path

import pytest

from dftune.core.fsio import NotRegularTarget, atomic_write_bytes
from tests.cli_inproc import dftune
from tests.darshan_logs import shipped

LOG = shipped("ior_hdf5_example.darshan")


def _targets(tmp_path: Path) -> dict[str, Path]:
    os.mkfifo(tmp_path / "fifo")
    (tmp_path / "link").symlink_to(tmp_path / "fifo")
    (tmp_path / "folder").mkdir()
    return {"pipe": tmp_path / "fifo", "link to a pipe": tmp_path / "link", "folder": tmp_path / "folder"}


@pytest.mark.parametrize("kind", ["pipe", "link to a pipe", "folder"])
def test_report_output_that_is_no_regular_file_is_refused_and_left_alone(tmp_path: Path, kind: str) -> None:
    target = _targets(tmp_path)[kind]
    res = dftune("report", str(LOG), "--output", str(target))
    assert res.returncode == 2, res.stderr
    assert len(res.stderr.strip().splitlines()) == 1 and str(target) in res.stderr
    assert "not a regular file" in res.stderr and "nothing written" in res.stderr
    assert stat.S_ISFIFO((tmp_path / "fifo").stat().st_mode) and (tmp_path / "link").is_symlink()
    assert sorted(p.name for p in tmp_path.iterdir()) == ["fifo", "folder", "link"]  # no temporary left


def test_report_output_over_a_regular_file_still_replaces_it(tmp_path: Path) -> None:
    (tmp_path / "r.html").write_text("old")
    res = dftune("report", str(LOG), "--output", str(tmp_path / "r.html"))
    assert res.returncode == 0, res.stderr
    assert (tmp_path / "r.html").read_text().startswith("<!DOCTYPE html>")


def test_the_atomic_writer_checks_the_target_again_just_before_the_rename(tmp_path: Path) -> None:
    os.mkfifo(tmp_path / "fifo")
    with pytest.raises(NotRegularTarget, match="not a regular file"):
        atomic_write_bytes(tmp_path / "fifo", b"x", only_over_file=True)
    assert stat.S_ISFIFO((tmp_path / "fifo").stat().st_mode) and os.listdir(tmp_path) == ["fifo"]


def test_spec_init_out_never_writes_into_a_pipe(tmp_path: Path) -> None:
    os.mkfifo(tmp_path / "fifo")
    done: list[object] = []
    t = threading.Thread(
        target=lambda: done.append(dftune("spec", "init", "--out", str(tmp_path / "fifo"), "--", "true")),
        daemon=True,
    )
    t.start()
    t.join(10)
    if not done:  # a write into the pipe waits for a reader: be one, so the thread ends
        with open(tmp_path / "fifo", "rb") as fh:
            fh.read()
        pytest.fail("spec init --out blocked writing into a named pipe")
    res = done[0]
    assert res.returncode == 2 and "not a regular file" in res.stderr  # type: ignore[attr-defined]
    assert stat.S_ISFIFO((tmp_path / "fifo").stat().st_mode)
