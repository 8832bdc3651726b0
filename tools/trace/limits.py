"""What a trace line may hold: its length and the range of its numbers (settings, docs/limits.md).

Why: a trace is input from outside.  One 2 GiB line must not take 2 GiB of memory, and a
number no real run can produce (NaN, 1e308, 2^64-1, a negative time) must not become a
silent zero or overflow a 64-bit sum later.  Every reader (the C scanner, DuckDB, the
line validator) applies the same limits, so a line is refused by name whichever path ran.

The defaults come from what dftracer writes: its lines are a few hundred bytes (a metadata
line with a long command line a few KiB); timestamps are microseconds (or nanoseconds) since
the epoch, about 2^51 (2^61); one call moves at most 2 GiB on Linux and durations, offsets and
counts of a real run stay far below 2^50 (a PiB of bytes, 35 years of microseconds).
"""

from __future__ import annotations

import math

from dftune.core.envnum import env_int

LINE_ENV = "DFTUNE_TRACE_MAX_LINE_BYTES"
TS_ENV = "DFTUNE_TRACE_MAX_TS"
VALUE_ENV = "DFTUNE_TRACE_MAX_VALUE"

#: Default longest line: 16 MiB (also DuckDB's object size limit in the reader).
DEFAULT_MAX_LINE = 16 << 20
#: Default largest timestamp magnitude in microseconds: 2^62 (nanosecond clocks until the year 2116;
#: a timestamp may be negative, relative to a clock's origin, but no nearer to 2^63).
DEFAULT_MAX_TS = 1 << 62
#: Default largest magnitude of any other number (dur, ret, size, offset, pid, ...): 2^50.
DEFAULT_MAX_VALUE = 1 << 50


def _setting(env: str, default: int, lo: int, hi: int) -> int:
    return env_int(env, default, low=lo, high=hi)


def max_line_bytes() -> int:
    """The longest trace line read (longer lines are cut and reported as bad lines)."""
    return _setting(LINE_ENV, DEFAULT_MAX_LINE, 1024, 1 << 31)


def max_ts() -> int:
    """The largest accepted timestamp, in microseconds."""
    return _setting(TS_ENV, DEFAULT_MAX_TS, 1, 1 << 62)


def max_value() -> int:
    """The largest accepted magnitude of every other number of an event."""
    return _setting(VALUE_ENV, DEFAULT_MAX_VALUE, 1, 1 << 53)


def number_problem(
    value: object,
    *,
    scale: float = 1.0,
    lo: int | None = None,
    hi: int | None = None,
    setting: str = VALUE_ENV,
) -> str | None:
    """Why ``value`` (a JSON number, or a legacy number-as-string) is out of range, or None.

    ``scale`` converts the trace's time unit to microseconds (timestamps only).  Text that is
    not a number is not judged here (the readers treat it as absent, as before)."""
    if isinstance(value, bool) or value is None:
        return None
    if isinstance(value, str):
        try:
            number: float | int = int(value) if value.strip().lstrip("-").isdigit() else float(value)
        except ValueError:
            return None
    elif isinstance(value, int | float):
        number = value
    else:
        return None
    if isinstance(number, float) and not math.isfinite(number):
        return f"{value!r} is not a finite number"
    scaled = number * scale if scale != 1.0 else number
    top = hi if hi is not None else max_value()
    bottom = lo if lo is not None else -top
    if scaled < bottom:
        return f"{value!r} is below {bottom}" if bottom else f"{value!r} is negative"
    if scaled > top:
        return f"{value!r} exceeds the limit {top} ({setting})"
    return None
