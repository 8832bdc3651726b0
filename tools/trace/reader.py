"""Map step: read one dftracer trace file and reduce it to small, mergeable tables.

One streaming DuckDB scan parses the file (the 2.x and legacy 1.x dialects, detected
per line) into bounded Arrow batches; :class:`batch.BatchReducer` folds them into
aggregates and runs the order-dependent passes.  The result (:class:`FilePartial`) holds
only tables keyed by family, size bin, accessed file, process and category, so partials
from many files, processes or Dask workers merge exactly.

Bad input never disappears silently: a batch that does not parse cleanly sends the file
down the slow path, which names every bad line (:mod:`linescan`) and either stops with a
one-line error or, with ``skip_bad``, analyzes the good lines and reports the rest.
"""

from __future__ import annotations

import re
import tempfile
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

import duckdb
import pyarrow as pa

from dftune.tools.trace import limits, native
from dftune.tools.trace.batch import BatchReducer
from dftune.tools.trace.errors import TraceError
from dftune.tools.trace.linescan import (
    ARG_INTS,
    STRUCTURAL_LINES,
    BadLine,
    first_line,
    head_time_metric,
    scan,
)

#: args keys read from every event.  Numbers are typed BIGINT by the JSON reader itself
#: (it converts legacy numbers-as-strings and floats; garbage becomes NULL, which the health
#: check reports as a bad line); hashes and free text stay VARCHAR so 64-bit unsigned and
#: hex hashes survive unchanged.
_ARG_INTS = ARG_INTS  # one list for the scan and the line validator (linescan.py)
_ARG_TEXT = (
    "fhash",
    "hhash",
    "fname",
    "hostname",
    "name",
    "value",
    "mode",
    "epoch",
    "step",
    "cmd_hash",
    "version",
    "cfg",
)
#: Top-level keys.  ``id`` is not read: ordering uses ts then trace order.  ``tid`` names the
#: thread: the access profile keeps each thread's requests as a stream of its own (threads of one
#: process interleave; each keeps its own order).
_TOP = {
    "name": "VARCHAR",
    "cat": "VARCHAR",
    "pid": "BIGINT",
    "tid": "BIGINT",
    "ts": "BIGINT",
    "dur": "BIGINT",
    "ph": "VARCHAR",
}


def _columns_literal() -> str:
    # DOUBLE, not BIGINT: a number BIGINT cannot hold (NaN, 1e30, 2^64-1) would read as a silent
    # NULL; as a double it stays visible to the range check (every accepted value is < 2^53, exact)
    args = ", ".join([f'"{k}" DOUBLE' for k in _ARG_INTS] + [f'"{k}" VARCHAR' for k in _ARG_TEXT])
    top = ", ".join(f"'{k}': '{t}'" for k, t in _TOP.items())
    return "{" + top + f", 'args': 'STRUCT({args})'" + "}"


_COLUMNS = _columns_literal()
_RANK_IN_NAME = re.compile(r"(?:^|[-_.])(\d+)-of-(\d+)(?:[-_.]|$)")
#: Rows per parsed batch: bounds the memory of reading one file (about 1 KiB per row).
BATCH_ROWS = 262_144
#: dftracer's CM time_metric, as microseconds per unit.
_TIME_SCALE = {"NS": 0.001, "US": 1.0, "MS": 1000.0, "S": 1_000_000.0}


class _Unhealthy(Exception):
    """The fast path met lines it cannot account for; the slow path takes over."""


@dataclass
class FilePartial:
    """Everything one trace file contributes to an analysis; merged by :mod:`merge`."""

    path: str
    scalars: dict[str, Any] = field(default_factory=dict)
    tables: dict[str, pa.Table] = field(default_factory=dict)
    bad_lines: list[BadLine] = field(default_factory=list)


@dataclass(frozen=True)
class ReadOptions:
    """How to read: strict (raise on the first bad line) or skip-bad, optional time bins."""

    skip_bad: bool = False
    #: Build per-accessed-file tables (only the file view needs them; they grow with the
    #: number of distinct files, which ML datasets make large).
    file_view: bool = False
    #: Fine time bins per file for the time view (a power of two; see views.py); None skips it.
    #: They need no global start or end, so every view comes from the one pass over the files.
    time_bins: int | None = None
    #: Try the native C scanner first (:mod:`native`); False goes straight to DuckDB.
    native: bool = True
    #: Per-file access profile tables (byte ranges, calls, sizes, app events) for the guards
    #: and the estimates (:mod:`profile`); computed on the DuckDB path, which keeps per-access rows.
    profile: bool = False
    #: The merged I/O and compute intervals of each process (``spans``), so the overlap of a rank
    #: group's processes can be measured across them; computed on the DuckDB path.
    spans: bool = False


def read_file(path: str | Path, options: ReadOptions = ReadOptions()) -> FilePartial:
    """Reduce one trace file to a :class:`FilePartial` (the per-file map step)."""
    p = Path(path)
    if p.stat().st_size == 0:
        partial = FilePartial(path=str(p))
        partial.scalars.update(_empty_scalars(), empty=True)
        return partial
    metric = head_time_metric(p)
    if options.native and not options.profile and not options.spans and native.enabled():
        try:
            return _native(p, options, metric)
        except native.Fallback:
            pass  # something the C scanner does not handle exactly: DuckDB reads the file
    try:
        return _stream(p, str(p), options, metric, trusted=False)
    except (_Unhealthy, duckdb.Error):
        pass
    # Slow path: find the bad lines by number, then parse only the good ones.
    with tempfile.TemporaryDirectory(prefix="dftune-clean-") as tmp:
        cleaned = Path(tmp) / "clean.ndjson"
        result = scan(p, cleaned, _TIME_SCALE.get(metric, 1.0))
        if result.truncated and not options.skip_bad:
            raise TraceError(str(p), result.truncated_reason)
        if result.bad_count and not options.skip_bad:
            first = result.bad[0]
            more = f" (and {result.bad_count - 1} more bad lines)" if result.bad_count > 1 else ""
            raise TraceError(str(p), first.reason + more + "; use --skip-bad to analyze the rest", first.line)
        if result.good_lines == 0 and not result.truncated and not options.skip_bad:
            raise TraceError(str(p), "not a dftracer trace: no line is a trace event")
        if result.good_lines:
            partial = _stream(p, str(cleaned), options, metric, trusted=True)
        else:
            partial = FilePartial(path=str(p))
            partial.scalars.update(_empty_scalars())
    partial.bad_lines = list(result.bad)
    if result.truncated:
        partial.bad_lines.append(BadLine(-1, result.truncated_reason))
    partial.scalars["bad_line_count"] = result.bad_count + (1 if result.truncated else 0)
    partial.scalars["truncated"] = result.truncated
    return partial


def read_file_native(path: str | Path, options: ReadOptions = ReadOptions()) -> FilePartial | None:
    """The native scanner's partial of one file, or None when it declines the file (or is off);
    the caller then uses :func:`read_file` with ``native=False``."""
    p = Path(path)
    if options.profile or not native.enabled() or p.stat().st_size == 0:
        return None
    try:
        return _native(p, options, head_time_metric(p))
    except native.Fallback:
        return None


def _stream(path: Path, source: str, options: ReadOptions, metric: str, *, trusted: bool) -> FilePartial:
    """Parse ``source`` batch by batch and reduce it; ``trusted`` sources were cleaned already."""
    reducer = BatchReducer(
        time_bins=options.time_bins,
        file_view=options.file_view or options.profile,
        spans=options.spans,
        profile=options.profile,
    )
    con = duckdb.connect(config={"threads": 1})
    try:
        con.execute("SET enable_progress_bar = false")
        nulls = 0
        for record_batch in con.sql(_load_sql(source, _TIME_SCALE.get(metric, 1.0))).to_arrow_reader(
            BATCH_ROWS
        ):
            batch = pa.Table.from_batches([record_batch])
            health = reducer.health(batch)
            if health["semantic_bad"] and not trusted:
                raise _Unhealthy
            nulls += int(health["nulls"] or 0)
            reducer.add(batch, health)
        if nulls and not trusted and nulls > _structural_lines(con, path, nulls):
            raise _Unhealthy
        if not trusted and _has_long_line(con, path):
            raise _Unhealthy
        tables, extra = reducer.finish(_rank_from_filename(path.name))
    finally:
        reducer.close()
        con.close()
    return _partial(path, reducer.counts, tables, extra, options, metric)


def _native(path: Path, options: ReadOptions, metric: str) -> FilePartial:
    """The same partial as :func:`_stream`, from the C scanner's single pass over the file."""
    counts, native_tables = native.scan(
        path, metric=metric, file_view=options.file_view, time_bins=options.time_bins, batch_rows=BATCH_ROWS
    )
    reducer = BatchReducer(time_bins=options.time_bins, file_view=options.file_view)
    try:
        reducer.add_native(counts, native_tables)
        tables, extra = reducer.finish(_rank_from_filename(path.name))
    finally:
        reducer.close()
    return _partial(path, reducer.counts, tables, extra, options, metric)


def _partial(
    path: Path,
    c: dict[str, Any],
    tables: dict[str, pa.Table],
    extra: dict[str, Any],
    options: ReadOptions,
    metric: str,
) -> FilePartial:
    """Assemble a file's partial from its counts and finished tables (both read paths)."""
    partial = FilePartial(path=str(path))
    sc = partial.scalars
    sc.update(_empty_scalars())
    sc.update(
        rows=c.get("rows", 0),
        events=c.get("events", 0),
        metadata_lines=c.get("metadata_lines", 0),
        counter_events=c.get("counter_events", 0),
        aggregated_events=c.get("aggregated_events", 0),
        first_ts=c.get("first_ts"),
        last_end=c.get("last_end"),
        formats={
            k: v
            for k, v in (("dftracer-1.x", c.get("legacy_rows", 0)), ("dftracer-2.x", c.get("v2_rows", 0)))
            if v
        },
        time_metric=metric,
        **extra,
    )
    if c.get("time_shift") is not None:  # the file's fine time bins are ts >> time_shift
        sc["time_shift"] = int(c["time_shift"])
    if sc["io_events"] and sc["io_events"] == sc["io_events_without_args"] and not options.skip_bad:
        raise TraceError(
            str(path),
            f"none of its {sc['io_events']} I/O events carries args (traced without "
            "DFTRACER_INC_METADATA=1?): bytes, offsets and file "
            "names are unknown; use --skip-bad to analyze anyway",
        )
    partial.tables = tables
    return partial


def _structural_lines(con: duckdb.DuckDBPyConnection, path: Path, nulls: int) -> int:
    """How many lines are legacy JSON-array punctuation (``[``/``]``), which DuckDB also
    returns as NULL rows.  The cheap first-line check settles the common case; otherwise
    a C-speed line scan counts them, so only genuinely broken files reach Python."""
    if nulls == 1 and first_line(path) in STRUCTURAL_LINES:
        return 1
    src = str(path).replace("'", "''")
    marks = ", ".join(f"'{m}'" for m in STRUCTURAL_LINES)
    row = con.execute(
        f"""SELECT count(*) FROM read_csv('{src}', columns = {{'l': 'VARCHAR'}}, delim = chr(1), quote = '',
                     escape = '', header = false, auto_detect = false, strict_mode = false)
            WHERE trim(l) IN ({marks})"""
    ).fetchall()
    return int(row[0][0]) if row else 0


def _has_long_line(con: duckdb.DuckDBPyConnection, path: Path) -> bool:
    """Whether a line is longer than the line limit.  DuckDB's JSON reader holds lines up to its
    own 32 MiB buffer whatever the limit, so this C-speed pass (which stops at the first long
    line) keeps both readers refusing the same lines."""
    src = str(path).replace("'", "''")
    try:
        con.execute(
            f"""SELECT count(*) FROM read_csv('{src}', columns = {{'l': 'VARCHAR'}},
                         delim = chr(1), quote = '', escape = '', header = false, auto_detect = false,
                         strict_mode = false, max_line_size = {limits.max_line_bytes()})"""
        ).fetchall()
    except duckdb.Error:
        return True
    return False


def _empty_scalars() -> dict[str, Any]:
    return {
        "rows": 0,
        "events": 0,
        "metadata_lines": 0,
        "counter_events": 0,
        "aggregated_events": 0,
        "first_ts": None,
        "last_end": None,
        "bad_line_count": 0,
        "truncated": False,
        "empty": False,
        "formats": {},
        "io_events": 0,
        "io_events_without_args": 0,
    }


def _load_sql(source: str, scale: float) -> str:
    """The one scan: every line of a trace file as a typed row (NULL row when unparseable)."""
    src = source.replace("'", "''")

    def t(col: str) -> str:  # normalize the trace's time unit to microseconds
        return col if scale == 1.0 else f"CAST(round({col} * {scale}) AS BIGINT)"

    top, max_ts = limits.max_value(), limits.max_ts()
    # a number no real run produces (limits.py) marks the row: the validator then names the line
    out_of_range = " OR ".join(
        [f'NOT (abs(args."{k}") <= {top})' for k in _ARG_INTS]
        + [
            f"NOT (abs({t('ts')}) <= {max_ts})",
            f"NOT ({t('dur')} BETWEEN 0 AND {top})",
            f"NOT (abs(pid) <= {top})",
        ]
    )
    ints = ", ".join(f'"{k}" := TRY_CAST(args."{k}" AS BIGINT)' for k in _ARG_INTS)
    text = ", ".join(f'"{k}" := args."{k}"' for k in _ARG_TEXT)

    return f"""
        SELECT
          CASE WHEN ph IN ('X', '1') THEN 1 WHEN ph IN ('M', '4') THEN 4
               WHEN ph = '3' THEN 3 WHEN ph IN ('C', '2') THEN 2
               WHEN ph IS NULL THEN NULL ELSE 0 END::UTINYINT AS k,
          ph IN ('X', 'M') AS legacy, name, cat, pid, tid, {t("ts")} AS ts, {t("dur")} AS dur,
          args IS NULL AS no_args,
          args.ret AS ret, args.offset AS off, args.size AS isize, args.whence AS whence, args.flags AS flags,
          args.mode AS fmode, args.fhash AS fhash, COALESCE(args.hostname, args.hhash) AS hkey,
          args.hostname IS NOT NULL AS host_inline, args.fname AS fname,
          args.name AS mname, args.value AS mvalue, args.epoch AS epoch, args.step AS step, args.rank AS rank,
          args.cmd_hash AS cmd_hash, args.version AS version, args.cfg AS cfg,
          -- aggregated (ph 3) records: an interval holding a single call carries the plain
          -- dur/ret/size fields instead of *_sum/_min/_max
          args.dft_cnt AS agg_cnt, {t("COALESCE(args.dur_sum, args.dur)")} AS agg_dur,
          COALESCE(args.ret_sum, args.ret) AS agg_ret,
          COALESCE(args.size_min, args.size) AS agg_size_min,
          COALESCE(args.size_max, args.size) AS agg_size_max
          , bad_num
        FROM (SELECT name, cat, pid, tid, ts, dur, ph, COALESCE({out_of_range}, false) AS bad_num,
                     CASE WHEN args IS NULL THEN NULL ELSE struct_pack({ints}, {text}) END AS args
              FROM read_json('{src}', format = 'newline_delimited', ignore_errors = true,
                             maximum_object_size = {limits.max_line_bytes()}, columns = {_COLUMNS}))
    """


def _rank_from_filename(name: str) -> int | None:
    m = _RANK_IN_NAME.search(name)
    return int(m.group(1)) if m else None
