"""Reading a replicate's metric where the program puts it: a regex over stdout, stderr or both, a
JSON or CSV file it writes, or the summary of a benchmark dftune knows (IOR, DLIO).

Pure functions over text: the runner reads the streams and the file, these pick the number.
Several values (patterns, keys, columns, fields) are combined with ``sum``, ``mean``, ``max`` or
``min``: IOR's write time plus its read time is one metric of a write-then-read job.
"""

from __future__ import annotations

import csv
import io
import json
import math
import os
import re
import stat
from collections.abc import Callable, Sequence
from pathlib import Path
from typing import Any

#: How several values become one metric.
COMBINE: dict[str, Callable[[list[float]], float]] = {
    "sum": lambda v: math.fsum(v),
    "mean": lambda v: math.fsum(v) / len(v),
    "max": max,
    "min": min,
}


class MetricNotFound(ValueError):
    """The replicate's output does not hold the metric; ``str()`` says what was looked for and where."""


def last_text(pattern: str, text: str, where: str) -> str:
    """The last match of ``pattern`` (its first group, or the whole match), as the program printed it."""
    matches = list(re.finditer(pattern, text, flags=re.MULTILINE))
    if not matches:
        raise MetricNotFound(f"pattern {pattern!r} not found in {where}")
    last = matches[-1]
    return last.group(1) if last.groups() else last.group(0)


def last_number(pattern: str, text: str, where: str) -> float:
    """The last match of ``pattern`` (its first group, or the whole match) as a number."""
    raw = last_text(pattern, text, where)
    try:
        return float(raw)
    except ValueError:
        raise MetricNotFound(f"{raw!r} (pattern {pattern!r} in {where}) is not a number") from None


def combined(values: Sequence[float], how: str) -> float:
    return COMBINE[how](list(values))


# --------------------------------------------------------------------------- JSON and CSV files


def json_value(doc: Any, key: str, where: str) -> float:
    """``key`` as a dotted path (``metric.train_io_mean_MB_per_second``; a number indexes a list)."""
    node = doc
    for part in key.split("."):
        if isinstance(node, dict) and part in node:
            node = node[part]
        elif (
            isinstance(node, list)
            and re.fullmatch(r"-?\d{1,18}", part)
            and -len(node) <= int(part) < len(node)
        ):
            node = node[int(part)]
        else:
            raise MetricNotFound(f"key {key!r} not found in {where} (no {part!r})")
    if isinstance(node, bool) or not isinstance(node, int | float | str):
        raise MetricNotFound(f"key {key!r} in {where} is not a number: {str(node)[:60]!r}")
    try:
        return float(node)
    except (ValueError, OverflowError):  # an integer past a float's range overflows
        raise MetricNotFound(f"key {key!r} in {where} is not a usable number: {str(node)[:60]!r}") from None


#: the most of a metric file read: a program's summary is a few KiB (DLIO's, IOR's JSON)
METRIC_FILE_BYTES = 16 << 20
#: the deepest nesting of a metric file's JSON read (a summary is a few levels deep)
METRIC_JSON_DEPTH = 64


def read_metric_file(path: Path) -> str:
    """A metric file's text, read as a trace is: a regular file only (a link to /dev/zero or a
    named pipe is refused, never opened to block), at most :data:`METRIC_FILE_BYTES`."""
    try:
        st = os.stat(path)
    except OSError as exc:
        raise MetricNotFound(f"metric file {path} not readable: {exc.strerror or exc}") from None
    if not stat.S_ISREG(st.st_mode):
        raise MetricNotFound(f"metric file {path} is not a regular file (a pipe, a device or a folder)")
    if st.st_size > METRIC_FILE_BYTES:
        raise MetricNotFound(
            f"metric file {path} is {st.st_size:,} bytes, more than the {METRIC_FILE_BYTES >> 20} MiB "
            "a program's summary can be"
        )
    try:
        fd = os.open(path, os.O_RDONLY | os.O_NONBLOCK)  # swapped for a pipe since the stat: no wait
        with os.fdopen(fd, "rb") as fh:
            raw = fh.read(METRIC_FILE_BYTES + 1)
    except OSError as exc:
        raise MetricNotFound(f"metric file {path} not readable: {exc.strerror or exc}") from None
    if len(raw) > METRIC_FILE_BYTES:
        raise MetricNotFound(f"metric file {path} grew past {METRIC_FILE_BYTES >> 20} MiB while read")
    return raw.decode("utf-8", errors="replace")


def _depth_ok(text: str, limit: int = METRIC_JSON_DEPTH) -> bool:
    """Whether no bracket nesting in ``text`` goes deeper than ``limit`` (strings skipped)."""
    depth, in_string, escaped = 0, False, False
    for ch in text:
        if in_string:
            if escaped:
                escaped = False
            elif ch == "\\":
                escaped = True
            elif ch == '"':
                in_string = False
            continue
        if ch == '"':
            in_string = True
        elif ch in "[{":
            depth += 1
            if depth > limit:
                return False
        elif ch in "]}":
            depth -= 1
    return True


def json_values(text: str, keys: Sequence[str], where: str) -> list[float]:
    if not _depth_ok(text):
        raise MetricNotFound(f"{where} nests deeper than {METRIC_JSON_DEPTH} levels: not a program's summary")
    try:
        doc = json.loads(text)
    except json.JSONDecodeError as exc:
        raise MetricNotFound(f"{where} is not JSON: {exc}") from None
    except RecursionError:
        raise MetricNotFound(f"{where} nests too deep to read: not a program's summary") from None
    except ValueError as exc:  # an integer of more digits than Python converts (4300)
        raise MetricNotFound(f"{where} is not JSON dftune reads: {str(exc).split(';')[0]}") from None
    return [json_value(doc, k, where) for k in keys]


def _filled(value: object) -> bool:
    """A cell with something in it (the extra cells of a long row come as a list)."""
    if isinstance(value, list):
        return any(_filled(v) for v in value)
    return bool((value or "").strip()) if isinstance(value, str | None) else True


def csv_values(text: str, columns: Sequence[str], where: str) -> list[float]:
    """The named columns of the last data row of a CSV file with a header line."""
    last: dict[Any, Any] | None = None  # only the last row is kept: millions of rows cost no memory
    try:
        for row in csv.DictReader(io.StringIO(text)):
            if any(_filled(v) for v in row.values()):
                last = row
    except csv.Error as exc:  # a field past the csv module's limit (128 KiB), a NUL byte
        raise MetricNotFound(f"{where} is not a CSV file dftune reads: {exc}") from None
    if last is None:
        raise MetricNotFound(f"{where} has no data row under a header line")
    out = []
    for col in columns:
        if col not in last:
            header = ", ".join(k for k in last if k is not None)[:300]
            raise MetricNotFound(f"column {col!r} not found in {where} (columns: {header})")
        raw = (last[col] or "").strip()
        try:
            out.append(float(raw))
        except ValueError:
            raise MetricNotFound(
                f"column {col!r} of the last row of {where} is not a number: {raw[:60]!r}"
            ) from None
    return out


# --------------------------------------------------------------------------- IOR

#: IOR's fields: its summary's "Max Write"/"Max Read" (MiB/s, higher is better) and the mean over
#: iterations of the total(s) column of its results table for each access (seconds, lower is better).
IOR_FIELDS = {"max_write": False, "max_read": False, "write_time": True, "read_time": True}
_IOR_MAX = {
    "max_write": r"^Max Write:\s+([0-9.eE+-]+)\s+MiB/sec",
    "max_read": r"^Max Read:\s+([0-9.eE+-]+)\s+MiB/sec",
}
#: "access bw(MiB/s) IOPS Latency(s) block(KiB) xfer(KiB) open(s) wr/rd(s) close(s) total(s) iter"
_IOR_ROW = re.compile(r"^(write|read)\s+((?:[0-9.eE+-]+\s+){9})(\d+)\s*$", re.MULTILINE)
_IOR_TOTAL_COLUMN = 8  # total(s), counted from bw(MiB/s)


def ior_value(text: str, field: str, where: str) -> float:
    """One field of IOR's output (see :data:`IOR_FIELDS`)."""
    if field in _IOR_MAX:
        return last_number(_IOR_MAX[field], text, f"{where} (IOR's summary)")
    access = field.removesuffix("_time")
    totals = [
        float(m.group(2).split()[_IOR_TOTAL_COLUMN]) for m in _IOR_ROW.finditer(text) if m.group(1) == access
    ]
    if not totals:
        raise MetricNotFound(f"no {access} row in IOR's results table in {where}")
    return math.fsum(totals) / len(totals)


# --------------------------------------------------------------------------- DLIO

#: DLIO's fields (all higher-is-better): its ``[METRIC]`` lines at the end of a run, and the same
#: numbers under ``metric`` in the summary.json of its output folder.
DLIO_FIELDS = {
    "train_au": ("Training Accelerator Utilization [AU] (%)", "train_au_mean_percentage"),
    "train_throughput": ("Training Throughput (samples/second)", "train_throughput_mean_samples_per_second"),
    "train_io": ("Training I/O Throughput (MB/second)", "train_io_mean_MB_per_second"),
    "eval_au": ("Eval Accelerator Utilization [AU] (%)", "eval_au_mean_percentage"),
    "eval_throughput": ("Eval Throughput (samples/second)", "eval_throughput_mean_samples_per_second"),
}


def dlio_value(text: str, field: str, where: str, *, summary_json: bool = False) -> float:
    """One field of DLIO's summary: from its log lines, or from its summary.json text."""
    label, key = DLIO_FIELDS[field]
    if summary_json:
        return json_values(text, [f"metric.{key}"], where)[0]
    return last_number(
        r"\[METRIC\] " + re.escape(label) + r":\s+([0-9.eE+-]+)", text, f"{where} (DLIO's [METRIC] lines)"
    )


def higher_is_better(kind: str, fields: Sequence[str]) -> bool | None:
    """The direction a benchmark's field implies (None: the field does not say)."""
    if kind == "ior" and fields:
        lower = {IOR_FIELDS[f] for f in fields if f in IOR_FIELDS}
        return None if len(lower) != 1 else not lower.pop()
    if kind == "dlio" and fields:
        return True
    return None
