"""Bad trace input: every problem is a one-line TraceError naming the file (and line), and
``skip_bad=True`` analyzes the rest without silent loss.

Each bad input is built in ``tmp_path`` from small, valid dftracer 2.x lines.  In strict mode
(the default) the analysis must stop with a one-line ``path[:line]: reason`` message.  With
``skip_bad=True`` a folder holding the bad file next to a good file must be analyzed: the
good file's events counted exactly (checked per process through the ``proc`` view), the
bad file's surviving events counted exactly, and every dropped line counted in
``skipped_lines`` and named (file, line) in ``skipped``.
"""

from __future__ import annotations

import gzip
import json
import random
import re
import zlib
from collections.abc import Callable
from dataclasses import dataclass
from pathlib import Path
from typing import Any

import pytest

from dftune.tools.trace import TraceError, analyze

#: every test here runs on both readers (native C scanner and DuckDB)
pytestmark = pytest.mark.usefixtures("read_path")

# --------------------------------------------------------------------------------------
# building blocks: dftracer 2.x lines

BAD_PID = 7
GOOD_PID = 8
GOOD_EVENTS = 25
GOOD_SIZES = [4096 * (1 + i % 5) for i in range(GOOD_EVENTS)]
GOOD_BYTES = sum(GOOD_SIZES)
BLOCK = 4096


def _dumps(obj: dict[str, Any]) -> str:
    return json.dumps(obj, separators=(",", ":"))


def fh_line(pid: int, path: str, fhash: str) -> str:
    """dftracer 2.x file-hash metadata line."""
    return _dumps(
        {
            "name": "FH",
            "cat": "dftracer",
            "type": 1,
            "pid": pid,
            "tid": pid,
            "ph": 4,
            "args": {"hhash": "aa", "name": path, "value": fhash},
        }
    )


def read_line(i: int, pid: int, fhash: str, size: int = BLOCK, **over: Any) -> str:
    """dftracer 2.x complete POSIX read event (``ph`` 1) with ``DFTRACER_INC_METADATA=1`` args."""
    ev: dict[str, Any] = {
        "id": i,
        "name": "read",
        "cat": "POSIX",
        "type": 3,
        "pid": pid,
        "tid": pid,
        "ts": 1000 + 10 * i,
        "dur": 5,
        "ph": 1,
        "args": {"hhash": "aa", "ret": size, "count": size, "fhash": fhash},
    }
    ev.update(over)
    return _dumps(ev)


def bad_trace_lines(n: int) -> list[str]:
    """A valid trace of process BAD_PID: one FH line, then ``n`` reads of BLOCK bytes."""
    return [fh_line(BAD_PID, "/data/x", "bb")] + [read_line(i, BAD_PID, "bb") for i in range(1, n + 1)]


def write_lines(path: Path, lines: list[str]) -> Path:
    data = ("\n".join(lines) + "\n").encode()
    path.write_bytes(gzip.compress(data) if path.name.endswith(".gz") else data)
    return path


def write_good(folder: Path) -> Path:
    """A healthy trace of process GOOD_PID next to the bad file."""
    lines = [fh_line(GOOD_PID, "/data/good", "cc")]
    lines += [read_line(i, GOOD_PID, "cc", size) for i, size in enumerate(GOOD_SIZES, start=1)]
    return write_lines(folder / "good-00000008-preload.pfw.gz", lines)


def proc_row(result: dict[str, Any], pid: int) -> dict[str, Any]:
    rows = [r for r in result["views"]["proc"]["rows"] if r["pid"] == pid]
    assert len(rows) == 1, f"expected one proc row for pid {pid}, got {rows}"
    return rows[0]


def assert_good_file_intact(result: dict[str, Any], good: Path) -> None:
    row = proc_row(result, GOOD_PID)
    assert row["events"] == GOOD_EVENTS
    assert row["read_count"] == GOOD_EVENTS
    assert row["read_bytes"] == GOOD_BYTES
    assert all(s["file"] != str(good) for s in result["skipped"]), "the good file must not be blamed"
    assert str(good) not in result["truncated_files"]


def assert_one_line_error(exc: BaseException, path: Path, line: int | None = None) -> str:
    msg = str(exc)
    assert msg.strip(), "empty error message"
    assert "\n" not in msg and "\r" not in msg, f"error message is not one line: {msg!r}"
    assert msg.startswith(f"{path}:"), f"error does not start with the file name {path}: {msg!r}"
    if line is not None:
        assert re.match(rf"^{re.escape(str(path))}:{line}: \S", msg), (
            f"error does not name line {line}: {msg!r}"
        )
    return msg


# --------------------------------------------------------------------------------------
# the bad inputs


@dataclass
class Bad:
    """One bad trace file and what a correct engine reports about it."""

    path: Path
    #: line named by the strict error (``path:LINE: reason``); None when no single line applies
    line: int | None
    #: regular expression the strict error must match (case-insensitive)
    reason: str
    #: complete events of the bad file that survive ``skip_bad`` (all are BLOCK-byte reads)
    kept: int
    #: exact ``skipped_lines`` expected with ``skip_bad``; None means "at least one"
    dropped: int | None
    #: line numbers that ``skipped`` must name for this file
    skipped_at: list[int]
    truncated: bool = False


def corrupt_line(folder: Path, name: str = "corrupt-00000007-preload.pfw") -> Bad:
    """A line cut in the middle of its JSON, in the middle of the file."""
    lines = bad_trace_lines(20)
    lines[10] = lines[10][:37]  # line 11
    return Bad(write_lines(folder / name, lines), 11, "invalid json", kept=19, dropped=1, skipped_at=[11])


def corrupt_line_gz(folder: Path) -> Bad:
    return corrupt_line(folder, "corrupt-00000007-preload.pfw.gz")


def corrupt_line_after_blank(folder: Path) -> Bad:
    """Line numbers are physical lines: blank lines before the bad one are counted."""
    lines = bad_trace_lines(10)
    lines[3:3] = ["", "   "]  # now lines 4 and 5 are blank
    lines[8] = lines[8][:-1]  # line 9 loses its closing brace
    return Bad(
        write_lines(folder / "blank-00000007-preload.pfw.gz", lines),
        9,
        "invalid json",
        kept=9,
        dropped=1,
        skipped_at=[9],
    )


def many_corrupt_lines(folder: Path) -> Bad:
    """More bad lines than any report limit: skipped_lines must still count every one."""
    lines = [fh_line(BAD_PID, "/data/x", "bb")]
    for i in range(1, 241):
        line = read_line(i, BAD_PID, "bb")
        lines.append(line if i % 2 else line[:20])  # even events are broken (lines 3, 5, ...)
    return Bad(
        write_lines(folder / "many-00000007-preload.pfw.gz", lines),
        3,
        "invalid json",
        kept=120,
        dropped=120,
        skipped_at=[3, 5, 7],
    )


def ts_not_numeric(folder: Path) -> Bad:
    """A complete event whose ts is a non-numeric string."""
    lines = bad_trace_lines(12)
    lines[4] = read_line(4, BAD_PID, "bb", ts="not-a-time")  # line 5
    return Bad(
        write_lines(folder / "ts-00000007-preload.pfw.gz", lines),
        5,
        r"\bts\b",
        kept=11,
        dropped=1,
        skipped_at=[5],
    )


def non_utf8_line(folder: Path, name: str = "latin-00000007-preload.pfw") -> Bad:
    """An event whose bytes are not UTF-8 (a Latin-1 file name): named, never read as data."""
    lines = bad_trace_lines(12)
    # line 6 carries the raw byte 0xe9 (json.dumps would have escaped it as \\u00e9)
    lines[5] = read_line(5, BAD_PID, "bb", name="re\xe9ad").replace("\\u00e9", "\xe9")
    path = folder / name
    data = "\n".join(lines).encode("latin-1") + b"\n"
    path.write_bytes(gzip.compress(data) if name.endswith(".gz") else data)
    return Bad(path, 6, "utf-8", kept=11, dropped=1, skipped_at=[6])


def non_utf8_line_gz(folder: Path) -> Bad:
    return non_utf8_line(folder, "latin-00000007-preload.pfw.gz")


def log_line_in_trace(folder: Path) -> Bad:
    """Valid JSON that is not a trace event, in the middle of a trace."""
    lines = bad_trace_lines(10)
    lines.insert(6, '{"level":"info","msg":"epoch 1 done"}')  # line 7
    return Bad(
        write_lines(folder / "log-00000007-preload.pfw", lines),
        7,
        "event|ph|name",
        kept=10,
        dropped=1,
        skipped_at=[7],
    )


def json_not_events(folder: Path) -> Bad:
    """A file of valid JSON lines, none of them a trace event."""
    lines = [
        '{"level":"info","msg":"started"}',
        '{"a":1,"b":[1,2]}',
        "[1,2,3]",
        '"just a string"',
        '{"name":"read","cat":"POSIX"}',
        '{"ph":1,"ts":5,"dur":1}',
    ]
    return Bad(
        write_lines(folder / "json-00000007-preload.pfw", lines),
        1,
        "event|ph|name|object",
        kept=0,
        dropped=6,
        skipped_at=[1, 2, 3, 4, 5, 6],
    )


def prose(folder: Path) -> Bad:
    """A text file of prose with a trace name (e.g. a log redirected to the trace prefix)."""
    text = "This run used 8 ranks.\nThe data lives on Lustre.\n\nNothing else to report.\n"
    path = folder / "notes-00000007-preload.pfw"
    path.write_text(text)
    return Bad(path, 1, "json|trace", kept=0, dropped=3, skipped_at=[1, 2, 4])


def random_bytes(folder: Path) -> Bad:
    """Random bytes under a .pfw.gz name (not even gzip)."""
    blob = random.Random(1234).randbytes(6000)
    assert not blob.startswith(b"\x1f\x8b")
    path = folder / "blob-00000007-preload.pfw.gz"
    path.write_bytes(blob)
    return Bad(path, None, "json|trace|gzip|utf|corrupt", kept=0, dropped=None, skipped_at=[])


def truncated_gzip(folder: Path) -> Bad:
    """A gzip trace cut in half (the process died while writing)."""
    rng = random.Random(99)
    lines = [fh_line(BAD_PID, "/data/x", "bb")]
    for i in range(1, 801):
        lines.append(
            read_line(i, BAD_PID, "bb", ts=1000 + 10 * i + rng.randint(0, 9), dur=rng.randint(1, 999))
        )
    whole = gzip.compress(("\n".join(lines) + "\n").encode())
    cut = whole[: len(whole) // 2]
    path = folder / "trunc-00000007-preload.pfw.gz"
    path.write_bytes(cut)
    # What can be recovered: the complete lines in the decompressible prefix.
    prefix = zlib.decompressobj(wbits=31).decompress(cut)
    complete = prefix[: prefix.rfind(b"\n") + 1].decode().splitlines()
    assert 1 < len(complete) < len(lines)
    kept = sum(1 for line in complete if '"ph":1' in line)
    return Bad(path, None, "truncat|corrupt|gzip", kept=kept, dropped=None, skipped_at=[], truncated=True)


Builder = Callable[[Path], Bad]
SKIPPABLE: list[Any] = [
    pytest.param(truncated_gzip, id="truncated-gzip"),
    pytest.param(corrupt_line, id="corrupt-line"),
    pytest.param(corrupt_line_gz, id="corrupt-line-gz"),
    pytest.param(corrupt_line_after_blank, id="corrupt-line-after-blank-lines"),
    pytest.param(many_corrupt_lines, id="120-corrupt-lines"),
    pytest.param(ts_not_numeric, id="ts-not-numeric"),
    pytest.param(non_utf8_line, id="non-utf8-line"),
    pytest.param(non_utf8_line_gz, id="non-utf8-line-gz"),
    pytest.param(log_line_in_trace, id="json-log-line-in-trace"),
    pytest.param(json_not_events, id="json-not-trace-events"),
    pytest.param(prose, id="prose-text"),
    pytest.param(random_bytes, id="random-bytes"),
]
#: In skip mode every kind of bad file is skipped, including files with no trace event at all.
SKIPPABLE_SKIP_MODE = SKIPPABLE


# --------------------------------------------------------------------------------------
# strict mode: one-line error naming file and line


@pytest.mark.parametrize("build", SKIPPABLE)
def test_strict_error_names_file_and_line(tmp_path: Path, build: Builder) -> None:
    bad = build(tmp_path)
    with pytest.raises(TraceError) as info:
        analyze([bad.path])
    msg = assert_one_line_error(info.value, bad.path, bad.line)
    assert re.search(bad.reason, msg, re.IGNORECASE), msg


@pytest.mark.parametrize("build", SKIPPABLE)
def test_strict_folder_with_one_bad_file_fails(tmp_path: Path, build: Builder) -> None:
    """A healthy neighbour does not hide the bad file: strict analysis of the folder fails."""
    bad = build(tmp_path)
    write_good(tmp_path)
    with pytest.raises(TraceError) as info:
        analyze([tmp_path])
    assert_one_line_error(info.value, bad.path, bad.line)


@pytest.mark.parametrize("build", SKIPPABLE_SKIP_MODE)
def test_skip_bad_keeps_good_file_and_counts_dropped(tmp_path: Path, build: Builder) -> None:
    bad = build(tmp_path)
    good = write_good(tmp_path)
    result = analyze([tmp_path], skip_bad=True, views=["proc"]).to_json_dict()

    assert result["files"] == 2
    assert_good_file_intact(result, good)
    # Nothing lost silently: the bad file's surviving events are counted exactly ...
    assert result["events"] == GOOD_EVENTS + bad.kept
    assert result["read"]["count"] == GOOD_EVENTS + bad.kept
    assert result["read"]["bytes"] == GOOD_BYTES + BLOCK * bad.kept
    if bad.kept:
        assert proc_row(result, BAD_PID)["events"] == bad.kept
    # ... and what was dropped is counted and named.
    if bad.dropped is None:
        assert result["skipped_lines"] > 0
    else:
        assert result["skipped_lines"] == bad.dropped
    mine = [s for s in result["skipped"] if s["file"] == str(bad.path)]
    assert mine, f"skipped does not name {bad.path}: {result['skipped']}"
    assert len(result["skipped"]) == len(mine)
    assert all(s["reason"] and "\n" not in s["reason"] for s in mine)
    named = [s["line"] for s in mine]
    for line in bad.skipped_at:
        assert line in named, f"skipped does not name line {line}: {mine}"
    for s in mine:
        # every entry locates the problem: a line number, or (stream truncation) the line it follows
        assert isinstance(s["line"], int) or re.search(r"line \d+", s["reason"]), s


def test_skip_bad_reports_truncated_file(tmp_path: Path) -> None:
    bad = truncated_gzip(tmp_path)
    good = write_good(tmp_path)
    result = analyze([tmp_path], skip_bad=True).to_json_dict()
    assert result["truncated_files"] == [str(bad.path)]
    assert str(good) not in result["truncated_files"]
    assert result["events"] == GOOD_EVENTS + bad.kept


# --------------------------------------------------------------------------------------
# a non-trace file given explicitly (a name that folder discovery would never pick)


@pytest.mark.parametrize(
    ("name", "content"),
    [
        pytest.param("blob.bin", random.Random(5).randbytes(4000), id="random-bytes"),
        pytest.param("notes.txt", b"Run log.\nEverything went fine.\n", id="prose"),
        pytest.param("config.json", b'{"workers": 4, "batch": 32}\n', id="json-config"),
    ],
)
def test_explicit_non_trace_file_is_an_error(tmp_path: Path, name: str, content: bytes) -> None:
    path = tmp_path / name
    path.write_bytes(content)
    with pytest.raises(TraceError) as info:
        analyze([path])
    assert_one_line_error(info.value, path)


def test_non_trace_names_in_a_folder_are_ignored(tmp_path: Path) -> None:
    """Only *.pfw / *.pfw.gz are traces inside a folder; a README next to them is not bad input."""
    (tmp_path / "README.txt").write_text("traces of run 42\n")
    (tmp_path / "run.log").write_bytes(random.Random(3).randbytes(500))
    good = write_good(tmp_path)
    result = analyze([tmp_path], views=["proc"]).to_json_dict()
    assert result["files"] == 1
    assert result["skipped_lines"] == 0
    assert_good_file_intact(result, good)
    assert result["events"] == GOOD_EVENTS


# --------------------------------------------------------------------------------------
# path problems: not data problems, so skip_bad does not hide them


@pytest.mark.parametrize("skip_bad", [False, True])
def test_empty_folder_is_an_error_naming_it(tmp_path: Path, skip_bad: bool) -> None:
    empty = tmp_path / "traces"
    empty.mkdir()
    with pytest.raises(TraceError) as info:
        analyze([empty], skip_bad=skip_bad)
    msg = assert_one_line_error(info.value, empty)
    assert "trace" in msg.lower()


def test_empty_subfolder_next_to_a_trace_is_fine(tmp_path: Path) -> None:
    (tmp_path / "rank-7-nothing").mkdir()
    good = write_good(tmp_path)
    result = analyze([tmp_path], views=["proc"]).to_json_dict()
    assert result["skipped_lines"] == 0
    assert result["events"] == GOOD_EVENTS
    assert_good_file_intact(result, good)


@pytest.mark.parametrize("skip_bad", [False, True])
def test_nonexistent_path_is_an_error_naming_it(tmp_path: Path, skip_bad: bool) -> None:
    write_good(tmp_path)
    missing = tmp_path / "no-such-trace.pfw.gz"
    with pytest.raises(TraceError) as info:
        analyze([tmp_path, missing], skip_bad=skip_bad)
    msg = assert_one_line_error(info.value, missing)
    assert "no such" in msg.lower() or "not exist" in msg.lower() or "not found" in msg.lower()


# --------------------------------------------------------------------------------------
# traced without DFTRACER_INC_METADATA=1: I/O events carry no args at all


def _no_args_trace(folder: Path, n: int = 6) -> Path:
    lines = []
    for i in range(1, n + 1):
        ev = json.loads(read_line(i, BAD_PID, "bb"))
        del ev["args"]
        lines.append(_dumps(ev))
    return write_lines(folder / "noargs-00000007-preload.pfw.gz", lines)


def test_no_args_strict_names_dftracer_inc_metadata(tmp_path: Path) -> None:
    path = _no_args_trace(tmp_path)
    with pytest.raises(TraceError) as info:
        analyze([path])
    msg = assert_one_line_error(info.value, path)
    assert "DFTRACER_INC_METADATA" in msg


def test_no_args_skip_bad_counts_events_and_warns(tmp_path: Path) -> None:
    """Nothing is dropped (the events are complete, only sizes are unknown): they are counted,
    skipped_lines stays 0, and a warning names the cause and the file."""
    path = _no_args_trace(tmp_path, n=6)
    good = write_good(tmp_path)
    result = analyze([tmp_path], skip_bad=True, views=["proc"]).to_json_dict()
    assert_good_file_intact(result, good)
    assert result["events"] == GOOD_EVENTS + 6
    assert result["read"]["count"] == GOOD_EVENTS + 6
    assert result["read"]["bytes"] == GOOD_BYTES  # sizes of the arg-less reads are unknown, not invented
    assert proc_row(result, BAD_PID)["events"] == 6
    assert result["skipped_lines"] == 0
    warning = " ".join(result["warnings"])
    assert "DFTRACER_INC_METADATA" in warning
    assert str(path) in warning


# --------------------------------------------------------------------------------------
# not bad: 0-byte files of forked children, legacy JSON-array punctuation


def test_zero_byte_gz_is_listed_not_an_error(tmp_path: Path) -> None:
    empty = tmp_path / "trace-00000009-preload.pfw.gz"
    empty.write_bytes(b"")
    good = write_good(tmp_path)
    result = analyze([tmp_path], views=["proc"]).to_json_dict()
    assert result["files"] == 2
    assert result["empty_files"] == [str(empty)]
    assert result["skipped_lines"] == 0
    assert result["skipped"] == []
    assert result["events"] == GOOD_EVENTS
    assert_good_file_intact(result, good)


def test_only_zero_byte_gz_is_not_an_error(tmp_path: Path) -> None:
    empty = tmp_path / "trace-00000009-preload.pfw.gz"
    empty.write_bytes(b"")
    result = analyze([empty]).to_json_dict()
    assert result["empty_files"] == [str(empty)]
    assert result["events"] == 0
    assert result["skipped_lines"] == 0


def _legacy_lines(n: int, numbers_as_strings: bool = False) -> list[str]:
    """dftracer 1.x lines: ph "X"/"M", integer hashes, fname inline."""
    lines = [
        _dumps(
            {"name": "process_name", "ph": "M", "pid": BAD_PID, "tid": BAD_PID, "args": {"name": "python"}}
        )
    ]
    for i in range(1, n + 1):
        ev: dict[str, Any] = {
            "id": i,
            "name": "read",
            "cat": "POSIX",
            "pid": BAD_PID,
            "tid": BAD_PID,
            "ts": 1000 + 10 * i,
            "dur": 5,
            "ph": "X",
            "args": {"hhash": 6882804, "fhash": 1234567890123456789, "ret": BLOCK, "fname": "/data/x"},
        }
        if numbers_as_strings and i % 2:
            ev["ts"], ev["dur"], ev["args"]["ret"] = str(ev["ts"]), str(ev["dur"]), str(BLOCK)
        lines.append(_dumps(ev))
    return lines


@pytest.mark.parametrize("name", ["legacy.pfw", "legacy.pfw.gz"])
@pytest.mark.parametrize("strings", [False, True], ids=["numbers", "numbers-as-strings"])
def test_legacy_array_brackets_are_not_bad(tmp_path: Path, name: str, strings: bool) -> None:
    path = write_lines(tmp_path / name, ["[", *_legacy_lines(15, strings), "]"])
    result = analyze([path]).to_json_dict()
    assert result["skipped_lines"] == 0
    assert result["skipped"] == []
    assert result["events"] == 15
    assert result["read"]["count"] == 15
    assert result["read"]["bytes"] == 15 * BLOCK


def test_2x_lines_between_brackets_are_not_bad(tmp_path: Path) -> None:
    path = write_lines(tmp_path / "trace.pfw.gz", ["[", *bad_trace_lines(9), "]"])
    result = analyze([path]).to_json_dict()
    assert result["skipped_lines"] == 0
    assert result["events"] == 9
    assert result["read"]["bytes"] == 9 * BLOCK


def test_blank_and_whitespace_lines_are_not_bad(tmp_path: Path) -> None:
    lines = bad_trace_lines(8)
    lines[2:2] = ["", "  ", "\t"]
    path = write_lines(tmp_path / "blank.pfw.gz", [*lines, "", ""])
    result = analyze([path]).to_json_dict()
    assert result["skipped_lines"] == 0
    assert result["events"] == 8


@pytest.mark.parametrize("kind", ["loop", "dangling"])
def test_a_trace_link_that_cannot_be_read_is_named_not_ignored(tmp_path: Path, kind: str) -> None:
    good = write_good(tmp_path)
    link = tmp_path / "loop-00000007-preload.pfw"
    link.symlink_to(link.name if kind == "loop" else "gone.pfw")
    with pytest.raises(TraceError) as info:
        analyze([tmp_path])
    msg = assert_one_line_error(info.value, link)
    assert ("loop" if kind == "loop" else "to nothing") in msg
    result = analyze([tmp_path], skip_bad=True, views=["proc"]).to_json_dict()
    assert_good_file_intact(result, good)
    assert [s["file"] for s in result["skipped"]] == [str(link)]
    assert any(str(link) in w for w in result["warnings"])
