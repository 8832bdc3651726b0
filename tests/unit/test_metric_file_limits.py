"""A metric file is read with the limits traces have: a regular file only, a size cap, bounded
nesting, never opened to block (the fourth hostile round's attacks on `[metric] kind = "file"`)."""

from __future__ import annotations

import os
import threading
import time
from pathlib import Path

import pytest

from dftune.core.process import ProcessResult
from dftune.tools.runner.bench import bench, extract_metric
from dftune.tools.runner.metrics import METRIC_JSON_DEPTH, MetricNotFound, json_values, read_metric_file
from dftune.tools.runner.spec import WorkloadSpec, load_spec


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


# --------------------------------------------------------------------------- the fifth hostile round


def _file_spec(tmp_path: Path, metric: str) -> WorkloadSpec:
    (tmp_path / "w.toml").write_text(f'name = "w"\ncommand = ["prog"]\n[metric]\nkind = "file"\n{metric}\n')
    return load_spec(tmp_path / "w.toml")


def _reason(tmp_path: Path, spec: WorkloadSpec, name: str) -> str:
    (tmp_path / "r0.out").write_text("")
    value, why = extract_metric(
        spec, ProcessResult(status="ok", exit_code=0, wall_s=1.0), tmp_path / "r0.out", tmp_path / name
    )
    assert value is None and "\n" not in why and len(why) < 600, why
    return why


def test_an_integer_of_thousands_of_digits_is_the_replicates_reason(tmp_path: Path) -> None:
    spec = _file_spec(tmp_path, 'path = "m.json"\nkey = "t"')
    (tmp_path / "m.json").write_text('{"t": ' + "9" * 5000 + "}")
    why = _reason(tmp_path, spec, "m.json")
    assert f"{tmp_path / 'm.json'} is not JSON dftune reads: Exceeds the limit (4300 digits)" in why
    (tmp_path / "m.json").write_text('{"t": ' + "9" * 400 + "}")  # parses, but no float holds it
    assert f"key 't' in {tmp_path / 'm.json'} is not a usable number" in _reason(tmp_path, spec, "m.json")


def test_a_csv_field_past_the_csv_limit_is_the_replicates_reason(tmp_path: Path) -> None:
    spec = _file_spec(tmp_path, 'path = "m.csv"\ncolumn = "t"')
    (tmp_path / "m.csv").write_text("t,note\n1.5," + "x" * 200_000 + "\n")
    why = _reason(tmp_path, spec, "m.csv")
    assert f"{tmp_path / 'm.csv'} is not a CSV file dftune reads: field larger than field limit" in why
    # a row longer than its header, and a missing column next to it: one line, no internal error
    (tmp_path / "m.csv").write_text("a,b\n1,2,3,4\n")
    assert "column 't' not found" in _reason(tmp_path, spec, "m.csv")


def test_a_metric_path_that_is_a_folder_fails_that_replicate_only(tmp_path: Path) -> None:
    (tmp_path / "metric.out").mkdir()
    (tmp_path / "prog.py").write_text("print('ran')\n")
    (tmp_path / "w.toml").write_text(
        'name = "w"\ncommand = ["{python}", "prog.py"]\nreplicates = 2\ntimeout_s = 60\npage_cache = "warm"\n'
        f'[metric]\nkind = "file"\npath = "{tmp_path}/metric.out"\nkey = "t"\n[tracing]\nmode = "off"\n'
    )
    result = bench(load_spec(tmp_path / "w.toml"), workdir=tmp_path / "w", prepare=False)
    assert result.replicates and all(r.status == "failed" for r in result.replicates)
    reason = result.replicates[0].reason
    assert f"metric file {tmp_path / 'metric.out'} is not a regular file" in reason and "\n" not in reason
    assert (tmp_path / "metric.out").is_dir()  # left alone, never removed


def test_a_stale_metric_file_that_cannot_be_removed_is_never_read(tmp_path: Path) -> None:
    from dftune.tools.runner.bench import clear_metric_file

    assert clear_metric_file(tmp_path / "absent.json") == ""
    (tmp_path / "folder").mkdir()
    assert clear_metric_file(tmp_path / "folder") == ""
    if os.geteuid() == 0:
        pytest.skip("root removes a file from a read-only folder")
    ro = tmp_path / "ro"
    ro.mkdir()
    (ro / "m.json").write_text('{"t": 1}')
    ro.chmod(0o500)
    try:
        assert "left by an earlier run could not be removed" in clear_metric_file(ro / "m.json")
    finally:
        ro.chmod(0o700)
