"""The native fast path: one C pass per trace file (``_fastscan``), same partial as DuckDB.

Why: DuckDB's JSON reader plus per-batch aggregate queries cost about 4 CPU-s per
1.25M-event file; the C scanner decompresses, parses and aggregates in one pass and
hands back the same per-file tables :class:`batch.BatchReducer` builds, so the finishing
SQL, the merge and every number stay shared with the DuckDB path.

The scanner accepts only lines it understands completely; on anything else it raises
``Fallback`` and :func:`reader.read_file` reads the file with DuckDB, so results and error
messages never depend on which path ran.  ``DFTUNE_TRACE_NATIVE=0`` forces the DuckDB path.
"""

from __future__ import annotations

import importlib
import os
from functools import cache
from pathlib import Path
from types import ModuleType
from typing import Any

import numpy as np
import pyarrow as pa

from dftune.tools.trace import limits
from dftune.tools.trace import semantics as S
from dftune.tools.trace import vectorized as V

ENV = "DFTUNE_TRACE_NATIVE"
#: DuckDB's JSON reader hands back rows in batches of this many (reader.BATCH_ROWS); the
#: native scanner keeps one ``fam`` row per batch so float sums add up in the same order.
_SCALES = {"US": 0, "NS": 1, "MS": 2, "S": 3}
_FAM_INDEX = {f: i for i, f in enumerate(S.FAMILIES)}


class Fallback(Exception):
    """The native scanner cannot read this file exactly; use the DuckDB path."""


def module() -> ModuleType | None:
    """The compiled extension, or None when it was not built here."""
    try:  # an optional C extension (setup.py builds it when a compiler and zlib are there)
        return importlib.import_module("dftune.tools.trace._fastscan")
    except ImportError:
        return None


def enabled() -> bool:
    """Use the native path unless DFTUNE_TRACE_NATIVE=0 or the extension is missing."""
    return (
        os.environ.get(ENV, "1").strip().lower() not in ("0", "false", "no", "off") and module() is not None
    )


def _config() -> tuple[Any, ...]:
    """Semantics and the trace limits (read per scan: they are settings) as the C code reads them."""
    return (*_semantics(), limits.max_ts(), limits.max_value(), limits.max_line_bytes())


@cache
def _semantics() -> tuple[Any, ...]:
    """Semantics (semantics.py and batch.py's call table) in the shape the C code reads."""
    from dftune.tools.trace.batch import _call_rows

    calls = tuple(
        (name, _FAM_INDEX[fam], role, bool(item), setter) for name, fam, role, item, setter in _call_rows()
    )
    assert S.COMPUTE_NAME_PATTERN.startswith("%") and S.COMPUTE_NAME_PATTERN.endswith("%")
    return (
        calls,
        tuple(c.upper() for c in S.IO_CATEGORIES),
        tuple(c.lower() for c in S.COMPUTE_CATEGORIES),
        S.COMPUTE_NAME_PATTERN.strip("%").lower(),
        tuple(lo for _, lo in S.SIZE_BINS),
        S.SMALL_IO_BYTES,
        S.O_APPEND,
        S.SEEK_SET,
        S.ALIGNMENT_BYTES,
    )


_FAMCOLS = " ".join(
    f"{f}_{m}"
    for f in S.FAMILIES
    for m in ("count", "bytes", "time_us")
    if not (m == "bytes" and f in ("metadata", "sync"))
)
#: The columns of each table the scanner returns, as "name:kind" (kind i64 when left out; str =
#: string id, fam = family index, rw = read/write flag).
_SCHEMAS: dict[str, tuple[tuple[str, str], ...]] = {
    name: tuple((c.partition(":")[0], c.partition(":")[2] or "i64") for c in spec.split())
    for name, spec in {
        "fam": "fam:fam count bytes sized time_us small small_time_us bw_sum:f64 bw_n no_args",
        "agg": "fam:fam records count bytes time_us",
        "hist": "fam:fam sbin count bytes",
        "path": f"fkey:str fk is_path:bool {_FAMCOLS} name:str processes consecutive sequential random",
        "names": "cat:str name:str count time_us",
        "iface": "iface:str fam:fam count bytes time_us",
        "layer": "cat:str count time_us first_ts last_end checkpoint_events",
        "proctot": "hkey:str host_inline:bool pid events first_ts last_end rank cmd_hash:str",
        "procfam": f"hkey:str pid {_FAMCOLS}",
        "steps": "epoch:str step:str",
        "epochspan": "hkey:str host_inline:bool pid epoch:str first_ts last_end",
        "meta": "kind:kind h:str v:str",
        "start": "version:str cfg:str",
        "time": "bin fam:fam count bytes time_us",
        "acc": "fk fam:rw consecutive sequential random positioned misaligned "
        "random_time_us misaligned_time_us",
        "ovl": "g io_wall_us overlap_us compute_wall_us",
    }.items()
}
_RAW_NAMES = {"acc": {"fam": "is_write"}, "path": {"fk": "fkey"}}
_FAMILY_ARRAY = pa.array(list(S.FAMILIES), pa.string())
_RW_ARRAY = pa.array(["read", "write"], pa.string())
_META_KINDS = pa.array([None, "FH", "HH", "SH"], pa.string())  # the C scanner's codes


def _table(name: str, cols: dict[str, tuple[bytes, bytes]], strings: pa.Array) -> pa.Table:
    """An Arrow table from the scanner's columns: (int64 or float64 values, validity bytes)."""
    arrays, names = [], []
    for col, kind in _SCHEMAS[name]:
        raw = cols.get(_RAW_NAMES.get(name, {}).get(col, col))
        if raw is None:  # a column the scanner leaves out (file-view columns without the view)
            continue
        values = np.frombuffer(raw[0], dtype=np.float64 if kind == "f64" else np.int64)
        valid = np.frombuffer(raw[1], dtype=np.bool_)
        mask = None if valid.all() else ~valid
        if kind == "str":
            arr = strings.take(pa.array(values))
        elif kind == "fam":
            arr = _FAMILY_ARRAY.take(pa.array(values))
        elif kind == "rw":
            arr = _RW_ARRAY.take(pa.array(values))
        elif kind == "kind":
            arr = _META_KINDS.take(pa.array(values))
        elif kind == "bool":
            arr = pa.array(values != 0, pa.bool_())
        else:
            arr = pa.array(values, mask=mask)
        arrays.append(arr)
        names.append(col)
    return pa.table(arrays, names=names)


def scan(
    path: Path, *, metric: str, file_view: bool, time_bins: int | None, batch_rows: int
) -> tuple[dict[str, Any], dict[str, pa.Table]]:
    """(counts, tables) for one file; raises :class:`Fallback` when the C scanner declines it."""
    mod = module()
    if mod is None or metric not in _SCALES:
        raise Fallback("native scanner unavailable" if mod is None else f"time metric {metric!r}")
    try:
        raw = mod.scan(str(path), _config(), _SCALES[metric], file_view, time_bins, batch_rows)
    except mod.Fallback as exc:
        raise Fallback(str(exc)) from None
    offsets, data = raw.pop("strings")
    n = len(offsets) // 8 - 1
    valid = np.ones(n, dtype=np.bool_)
    valid[0] = False  # id 0 is SQL NULL
    strings = pa.LargeStringArray.from_buffers(
        n, pa.py_buffer(offsets), pa.py_buffer(data), pa.py_buffer(np.packbits(valid, bitorder="little"))
    )
    strings.validate(full=True)  # UTF-8 and offsets checked once, in C++
    counts = raw.pop("counts")
    tables = {name: _table(name, cols, strings) for name, cols in raw.items()}
    return counts, tables


#: Position roles the C code hard-codes; a change in vectorized.py must be mirrored there.
assert (V.OTHER, V.STREAM, V.POSITIONAL, V.SETTER, V.UNKNOWN) == (0, 1, 2, 3, -1)
