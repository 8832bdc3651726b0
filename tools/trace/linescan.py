"""Slow, exact line-by-line validation, used only for files the fast scan found broken.

DuckDB's JSON reader tells us *that* a file has unparseable rows (they come back as
all-NULL rows) but not *which* lines, and it stops at a truncated gzip stream.  For such
files this module walks the lines in Python, names every bad line with its number and
reason, and writes the good lines to a clean NDJSON file the fast path can read.  Healthy
files never come here, so the hot path has no per-event Python loop.
"""

from __future__ import annotations

import gzip
import io
import json
import zlib
from collections.abc import Iterator
from dataclasses import dataclass, field
from pathlib import Path

from dftune.tools.trace import limits

#: Lines that are JSON-array punctuation in legacy traces, not events.
STRUCTURAL_LINES = frozenset({"[", "]", "[,", "],"})
COMPLETE_PH = frozenset({"X", "1", 1})
MAX_REPORTED = 50
#: The head of a file (first line, time metric) is read in lines of at most this many bytes.
HEAD_LINE_BYTES = 1 << 16
#: Integer fields of ``args`` (the reader types them BIGINT); checked against the number limits.
ARG_INTS = (
    "ret",
    "offset",
    "size",
    "whence",
    "flags",
    "rank",
    "dft_cnt",
    "dur",
    "dur_sum",
    "ret_sum",
    "size_min",
    "size_max",
)


@dataclass
class BadLine:
    line: int
    reason: str


@dataclass
class ScanResult:
    """Outcome of validating one trace file line by line."""

    good_lines: int = 0
    structural_lines: int = 0
    bad: list[BadLine] = field(default_factory=list)
    bad_count: int = 0
    truncated: bool = False
    truncated_reason: str = ""

    def add_bad(self, line: int, reason: str) -> None:
        self.bad_count += 1
        if len(self.bad) < MAX_REPORTED:
            self.bad.append(BadLine(line, reason))


def _not_utf8(text: str) -> str | None:
    """Why a line is not UTF-8 (its first undecodable byte and column), or None."""
    for col, ch in enumerate(text, start=1):
        if "\udc80" <= ch <= "\udcff":
            return f"not valid UTF-8 (byte 0x{ord(ch) - 0xDC00:02x} at column {col})"
    return None


def is_gzip(path: Path) -> bool:
    with open(path, "rb") as fh:
        return fh.read(2) == b"\x1f\x8b"


def first_line(path: Path) -> str:
    """The first non-blank line of a trace file (cheap: reads only the start)."""
    try:
        with open_bytes(path) as fh:
            for raw, cut in bounded_lines(fh, HEAD_LINE_BYTES):
                line = raw.decode("utf-8", errors="replace").strip()
                if line:
                    return "" if cut else line
    except (OSError, EOFError, zlib.error, gzip.BadGzipFile):
        return ""
    return ""


def _num(value: object) -> bool:
    if isinstance(value, bool):
        return False
    if isinstance(value, int | float):
        return True
    if isinstance(value, str):
        try:
            float(value)
        except ValueError:
            return False
        return True
    return False


def _number_problems(obj: dict[str, object], scale: float) -> str | None:
    """Why a number of the event is outside what a real run can produce (limits.py), or None."""
    top = limits.max_value()
    if why := limits.number_problem(obj.get("ts"), scale=scale, hi=limits.max_ts(), setting=limits.TS_ENV):
        return f"'ts' {why}"
    checks: list[tuple[str, object, float, int, int]] = [
        ("dur", obj.get("dur"), scale, 0, top),
        ("pid", obj.get("pid"), 1.0, -top, top),
    ]
    args = obj.get("args")
    if isinstance(args, dict):
        checks += [(f"args.{k}", args.get(k), 1.0, -top, top) for k in ARG_INTS if k in args]
    for name, value, factor, lo, hi in checks:
        if (why := limits.number_problem(value, scale=factor, lo=lo, hi=hi)) is not None:
            return f"'{name}' {why}"
    return None


def check_event(obj: object, scale: float = 1.0) -> str | None:
    """Why a parsed line is not a usable trace record, or None when it is.

    ``scale`` converts the trace's time unit to microseconds, for the timestamp limit."""
    if not isinstance(obj, dict):
        return "not a JSON object"
    if "ph" not in obj:
        return "no 'ph' field (not a dftracer event)"
    if not isinstance(obj.get("name"), str):
        return "no 'name' field (not a dftracer event)"
    if obj["ph"] in COMPLETE_PH:
        if not _num(obj.get("ts")):
            return "complete event without a numeric 'ts'"
        if not _num(obj.get("dur")):
            return "complete event without a numeric 'dur'"
        if float(obj["dur"]) < 0:
            return "complete event with a negative 'dur'"
    args = obj.get("args")
    if args is not None and not isinstance(args, dict):
        return "'args' is not an object"
    return _number_problems(obj, scale)


def bounded_lines(stream: io.BufferedIOBase, limit: int) -> Iterator[tuple[bytes, int]]:
    """(line, bytes cut) for each line, never holding more than ``limit`` bytes of one line:
    the rest of a longer line is read in pieces and thrown away (its length is reported)."""
    while True:
        line = stream.readline(limit + 1)
        if not line:
            return
        if len(line) <= limit or line.endswith(b"\n"):
            yield line, 0
            continue
        cut = 0
        while True:
            piece = stream.readline(1 << 20)
            cut += len(piece)
            if not piece or piece.endswith(b"\n"):
                break
        yield line[:limit], len(line) - limit + cut


def open_bytes(path: Path) -> io.BufferedIOBase:
    """A .pfw or .pfw.gz as a byte stream (gzip decompressed on the fly)."""
    return gzip.open(path, "rb") if is_gzip(path) else open(path, "rb")


def scan(path: Path, clean_out: Path | None = None, scale: float = 1.0) -> ScanResult:
    """Validate every line of ``path``; optionally write the good lines to ``clean_out``.

    Memory stays bounded by the line-length limit (limits.max_line_bytes): a longer line
    is a bad line that says how many bytes were cut."""
    result = ScanResult()
    sink = open(clean_out, "w", encoding="utf-8") if clean_out else None  # noqa: SIM115
    lineno = 0
    limit = limits.max_line_bytes()
    try:
        with open_bytes(path) as fh:
            try:
                for lineno, (raw_bytes, cut) in enumerate(bounded_lines(fh, limit), start=1):
                    if cut:
                        result.add_bad(
                            lineno,
                            f"line longer than {limit} bytes ({limits.LINE_ENV}): {limit + cut} bytes, "
                            f"{cut} cut",
                        )
                        continue
                    text = raw_bytes.decode("utf-8", errors="surrogateescape").strip()
                    if not text:
                        continue
                    if text.isascii() is False and (bad := _not_utf8(text)):
                        result.add_bad(lineno, bad)
                        continue
                    if text in STRUCTURAL_LINES:
                        result.structural_lines += 1
                        continue
                    if text.endswith(","):
                        text = text[:-1]
                    try:
                        obj = json.loads(text)
                    except json.JSONDecodeError as exc:
                        result.add_bad(lineno, f"invalid JSON ({exc.msg})")
                        continue
                    except RecursionError:
                        result.add_bad(lineno, "JSON nested too deeply (dftracer events nest 2 levels)")
                        continue
                    reason = check_event(obj, scale)
                    if reason:
                        result.add_bad(lineno, reason)
                        continue
                    result.good_lines += 1
                    if sink:
                        sink.write(text)
                        sink.write("\n")
            except (EOFError, zlib.error, gzip.BadGzipFile, OSError) as exc:
                result.truncated = True
                result.truncated_reason = f"truncated or corrupt gzip stream after line {lineno} ({exc})"
                # The last, partially decompressed line (if any) is lost with the stream.
    finally:
        if sink:
            sink.close()
    return result


def head_time_metric(path: Path, lines: int = 64) -> str:
    """The trace's time unit from its ``CM time_metric`` line (dftracer writes it first);
    "US" when absent, as in legacy traces."""
    try:
        with open_bytes(path) as fh:
            for _, (raw_bytes, _cut) in zip(range(lines), bounded_lines(fh, HEAD_LINE_BYTES), strict=False):
                raw = raw_bytes.decode("utf-8", errors="replace")
                if '"CM"' in raw and "time_metric" in raw:
                    try:
                        value = json.loads(raw.strip().rstrip(",")).get("args", {}).get("value")
                    except (json.JSONDecodeError, AttributeError, RecursionError):
                        return "US"
                    return str(value).upper() if value else "US"
    except (OSError, EOFError, zlib.error, gzip.BadGzipFile):
        return "US"
    return "US"
