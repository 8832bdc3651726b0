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
from dataclasses import dataclass, field
from pathlib import Path

#: Lines that are JSON-array punctuation in legacy traces, not events.
STRUCTURAL_LINES = frozenset({"[", "]", "[,", "],"})
COMPLETE_PH = frozenset({"X", "1", 1})
MAX_REPORTED = 50


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


def open_text(path: Path, errors: str = "replace") -> io.TextIOBase:
    """Open a .pfw or .pfw.gz (single- or multi-member gzip) for reading text lines.

    ``errors="surrogateescape"`` keeps every byte that is not UTF-8 as a lone surrogate, so the
    validator can name the line instead of reading a replacement character as data."""
    if is_gzip(path):
        return io.TextIOWrapper(gzip.open(path, "rb"), encoding="utf-8", errors=errors)
    return open(path, encoding="utf-8", errors=errors)


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
        with open_text(path) as fh:
            for line in fh:
                if line.strip():
                    return line.strip()
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


def check_event(obj: object) -> str | None:
    """Why a parsed line is not a usable trace record, or None when it is."""
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
    return None


def scan(path: Path, clean_out: Path | None = None) -> ScanResult:
    """Validate every line of ``path``; optionally write the good lines to ``clean_out``."""
    result = ScanResult()
    sink = open(clean_out, "w", encoding="utf-8") if clean_out else None  # noqa: SIM115
    lineno = 0
    try:
        with open_text(path, errors="surrogateescape") as fh:
            try:
                for lineno, raw in enumerate(fh, start=1):
                    text = raw.strip()
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
                    reason = check_event(obj)
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
        with open_text(path) as fh:
            for _, raw in zip(range(lines), fh, strict=False):
                if '"CM"' in raw and "time_metric" in raw:
                    try:
                        value = json.loads(raw.strip().rstrip(",")).get("args", {}).get("value")
                    except (json.JSONDecodeError, AttributeError):
                        return "US"
                    return str(value).upper() if value else "US"
    except (OSError, EOFError, zlib.error, gzip.BadGzipFile):
        return "US"
    return "US"
