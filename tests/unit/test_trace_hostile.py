"""Hostile trace input: numbers no run produces, nesting bombs, over-long lines, special files.

Each case was once a crash (ArrowInvalid, INT64 overflow, RecursionError) or a silent zero (NaN,
1e30, 2^64-1 read as "no bytes"). Now every one is a one-line error naming file and line, or with
``skip_bad`` a counted, named skip whose good events are counted exactly, on both readers.
"""

from __future__ import annotations

import gzip
import json
import os
from pathlib import Path

import pytest

from dftune.tools.trace import TraceError, analyze, limits
from dftune.tools.trace.linescan import bounded_lines

pytestmark = pytest.mark.usefixtures("read_path")

GOOD = 40
SIZE = 4096


def event(i: int, **over: object) -> dict[str, object]:
    e: dict[str, object] = {
        "id": i,
        "name": "read",
        "cat": "POSIX",
        "pid": 7,
        "tid": 7,
        "ts": 1000 + 10 * i,
        "dur": 5,
        "ph": "X",
        "args": {"fhash": "fh", "hhash": "hh", "ret": SIZE, "size": SIZE},
    }
    for key, value in over.items():
        if key.startswith("a_"):
            e["args"][key[2:]] = value  # type: ignore[index]
        else:
            e[key] = value
    return e


def trace(path: Path, bad_line: str) -> Path:
    """GOOD good reads, then ``bad_line`` as line GOOD + 3 (after '[' and the file-hash line)."""
    meta = {
        "id": 0,
        "name": "FH",
        "cat": "dftracer",
        "pid": 7,
        "tid": 7,
        "ph": "M",
        "args": {"name": "/data/f", "value": "fh"},
    }
    lines = ["[", json.dumps(meta), *(json.dumps(event(i)) for i in range(1, GOOD + 1)), bad_line]
    path.write_text("\n".join(lines) + "\n")
    return path


def replaced(field: str, literal: str) -> str:
    """An event line whose ``field`` holds ``literal`` verbatim (NaN, 1e308: not json.dumps'able)."""
    key = field[2:] if field.startswith("a_") else field
    text = json.dumps(event(GOOD + 1, **{field: 123456789}))
    return text.replace(f'"{key}": 123456789', f'"{key}": {literal}')


HOSTILE = {
    "ret-int64-max": (replaced("a_ret", "9223372036854775807"), "'args.ret'"),
    "ts-int64-min": (replaced("ts", "-9223372036854775808"), "'ts'"),
    "ret-uint64-max": (replaced("a_ret", "18446744073709551615"), "'args.ret'"),
    "dur-nan": (replaced("dur", "NaN"), "'dur' nan is not a finite number"),
    "ts-infinity": (replaced("ts", "Infinity"), "'ts' inf is not a finite number"),
    "ret-1e30": (replaced("a_ret", "1e30"), "'args.ret'"),
    "dur-1e308": (replaced("dur", "1e308"), "'dur'"),
    "size-string-nan": (replaced("a_size", '"NaN"'), "'args.size'"),
    "offset-negative-huge": (replaced("a_offset", "-1e300"), "'args.offset'"),
    "nested-200000": ("[" * 200_000 + "]" * 200_000, "nested too deeply"),
}


@pytest.mark.parametrize("case", list(HOSTILE))
def test_a_hostile_line_is_named_strict_and_counted_with_skip_bad(tmp_path: Path, case: str) -> None:
    line, reason = HOSTILE[case]
    path = trace(tmp_path / "t.pfw", line)
    with pytest.raises(TraceError) as err:
        analyze([path])
    msg = str(err.value)
    assert msg.startswith(f"{path}:{GOOD + 3}: ") and reason in msg and "\n" not in msg
    doc = analyze([path], skip_bad=True)
    assert doc.skipped_lines == 1 and doc.skipped[0].line == GOOD + 3 and reason in doc.skipped[0].reason
    assert doc.read.count == GOOD and doc.read.bytes == GOOD * SIZE  # nothing silently zeroed


def test_limits_are_settings(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    """A ret of 2 MiB is fine by default and refused, by name, under a 1 MiB value limit."""
    path = trace(tmp_path / "t.pfw", json.dumps(event(GOOD + 1, a_ret=2 << 20, a_size=2 << 20)))
    assert analyze([path]).read.bytes == GOOD * SIZE + (2 << 20)
    monkeypatch.setenv(limits.VALUE_ENV, str(1 << 20))
    with pytest.raises(
        TraceError, match=rf"t\.pfw:{GOOD + 3}: 'args\.ret' 2097152 exceeds the limit 1048576 "
    ):
        analyze([path])
    monkeypatch.setenv(limits.VALUE_ENV, "lots")
    with pytest.raises(Exception, match="DFTUNE_TRACE_MAX_VALUE='lots': not an integer"):
        analyze([path])


def test_an_over_long_line_is_cut_and_reported(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    """A line over the line limit is a bad line saying how many bytes were cut; the rest is read."""
    monkeypatch.setenv(limits.LINE_ENV, str(64 << 10))
    long_line = json.dumps(event(GOOD + 1, a_note="x" * (300 << 10)))
    path = tmp_path / "t.pfw.gz"
    plain = trace(tmp_path / "plain.pfw", long_line).read_bytes()
    path.write_bytes(gzip.compress(plain + (json.dumps(event(GOOD + 2)) + "\n").encode()))
    with pytest.raises(TraceError, match=rf":{GOOD + 3}: line longer than 65536 bytes .* cut"):
        analyze([path])
    doc = analyze([path], skip_bad=True)
    assert doc.skipped_lines == 1 and doc.read.count == GOOD + 1


def test_bounded_lines_never_hold_more_than_the_limit() -> None:
    import io

    data = b"short\n" + b"y" * 1000 + b"\nlast"
    got = list(bounded_lines(io.BytesIO(data), 100))
    assert got == [(b"short\n", 0), (b"y" * 100, 901), (b"last", 0)]


def test_special_files_are_skipped_by_name_in_a_folder_and_refused_directly(tmp_path: Path) -> None:
    folder = tmp_path / "traces"
    folder.mkdir()
    trace(folder / "good.pfw", json.dumps(event(GOOD + 1)))
    os.mkfifo(folder / "pipe.pfw")
    (folder / "zero.pfw").symlink_to("/dev/zero")
    doc = analyze([folder])
    reasons = {Path(s.file).name: s.reason for s in doc.skipped}
    assert (
        "a FIFO" in reasons["pipe.pfw"] and "a character device (a link to /dev/zero)" in reasons["zero.pfw"]
    )
    assert doc.read.count == GOOD + 1
    for name, kind in (("pipe.pfw", "a FIFO"), ("zero.pfw", "a character device")):
        with pytest.raises(TraceError, match=f"{name}: {kind}"):
            analyze([folder / name])


def test_mcp_analyze_names_the_line_and_counts_it_with_skip_bad(tmp_path: Path) -> None:
    from dftune.mcp_server.registry import ToolFailure
    from dftune.mcp_server.toolset import call

    path = trace(tmp_path / "t.pfw", HOSTILE["ret-int64-max"][0])
    with pytest.raises(ToolFailure, match=rf"t\.pfw:{GOOD + 3}: 'args\.ret'"):
        call("analyze", {"paths": [str(path)]})
    assert call("analyze", {"paths": [str(path)], "skip_bad": True})["skipped_lines"] == 1


def test_a_counter_with_a_nan_timestamp_is_named_and_one_without_is_fine(tmp_path: Path) -> None:
    """A counter's NaN ts read as a silent NULL on the DuckDB path; an absent ts is still fine."""
    nan = (
        '{"id": 90, "name": "mem", "cat": "sys", "pid": 7, '
        '"tid": 7, "ts": NaN, "ph": "C", "args": {"value": 3}}'
    )
    absent = '{"id": 91, "name": "mem", "cat": "sys", "pid": 7, "tid": 7, "ph": "C", "args": {"value": 3}}'
    with pytest.raises(TraceError, match=rf":{GOOD + 3}: 'ts' nan is not a finite number"):
        analyze([trace(tmp_path / "nan.pfw", nan)])
    assert analyze([trace(tmp_path / "absent.pfw", absent)]).read.count == GOOD
