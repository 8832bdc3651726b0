"""A metric file is read with the limits traces have: a regular file only, a size cap, bounded
nesting, never opened to block (the fourth hostile round's attacks on `[metric] kind = "file"`)."""

from __future__ import annotations

import os
import threading
import time
from pathlib import Path

import pytest

from dftune.tools.runner.metrics import METRIC_JSON_DEPTH, MetricNotFound, json_values, read_metric_file


def test_a_link_to_a_device_is_refused_not_read(tmp_path: Path) -> None:
    (tmp_path / "m.json").symlink_to("/dev/zero")
    with pytest.raises(MetricNotFound, match="not a regular file"):
        read_metric_file(tmp_path / "m.json")


def test_a_named_pipe_is_refused_without_waiting_for_a_writer(tmp_path: Path) -> None:
    os.mkfifo(tmp_path / "m.json")
    done: list[BaseException | None] = []

    def read() -> None:
        try:
            read_metric_file(tmp_path / "m.json")
        except BaseException as exc:  # handed to the test thread
            done.append(exc)
        else:
            done.append(None)

    t = threading.Thread(target=read, daemon=True)
    started = time.monotonic()
    t.start()
    t.join(5)
    assert done and isinstance(done[0], MetricNotFound) and time.monotonic() - started < 5


def test_a_huge_file_is_refused_by_its_size(tmp_path: Path) -> None:
    with open(tmp_path / "m.json", "wb") as fh:
        fh.truncate(200 << 20)  # 200 MB, sparse: nothing written to the disk
    with pytest.raises(MetricNotFound, match="more than the 16 MiB"):
        read_metric_file(tmp_path / "m.json")


def test_deep_json_is_refused_in_one_line(tmp_path: Path) -> None:
    deep = "[" * 200_000 + "]" * 200_000
    with pytest.raises(MetricNotFound, match=f"nests deeper than {METRIC_JSON_DEPTH}"):
        json_values(deep, ["a"], "m.json")
    # a string holding brackets is no nesting; an escaped quote does not end it
    text = '{"note": "[[[[\\"[[[[", "a": {"b": 2.5}}'
    assert json_values(text, ["a.b"], "m.json") == [2.5]


def test_a_program_summary_still_reads(tmp_path: Path) -> None:
    (tmp_path / "m.json").write_text('{"throughput": 12.5}')
    assert read_metric_file(tmp_path / "m.json") == '{"throughput": 12.5}'
