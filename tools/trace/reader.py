"""Map step: read one dftracer trace file and reduce it to small, mergeable tables.

One DuckDB scan parses the file (both the 2.x and the legacy 1.x dialects, detected per
line), then columnar SQL computes everything: hash resolution, I/O families, bytes,
per-(process, file) position tracking, transfer-size bins, interval unions for
unoverlapped I/O.  The result (:class:`FilePartial`) holds only aggregates whose size is
bounded by what the views need (processes, accessed files, categories), never by the
number of events, so traces of any length fit in memory and partials from many files,
threads or Dask workers merge exactly.
"""

from __future__ import annotations

import re
import tempfile
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

import duckdb
import numpy as np
import pyarrow as pa

from dftune.tools.trace import semantics as S
from dftune.tools.trace import vectorized as V
from dftune.tools.trace.errors import TraceError
from dftune.tools.trace.linescan import STRUCTURAL_LINES, BadLine, first_line, scan

#: args keys read from every event.  Numbers are typed BIGINT by the JSON reader itself
#: (it converts legacy numbers-as-strings and floats; garbage becomes NULL, which the health
#: check reports as a bad line); hashes and free text stay VARCHAR so 64-bit unsigned and
#: hex hashes survive unchanged.
_ARG_INTS = ("ret", "offset", "size", "whence", "flags", "rank", "dft_cnt", "dur", "dur_sum", "ret_sum", "size_min",
             "size_max")
_ARG_TEXT = ("fhash", "hhash", "fname", "hostname", "name", "value", "mode", "epoch", "step", "cmd_hash", "version", "cfg")
_TOP = {"id": "BIGINT", "name": "VARCHAR", "cat": "VARCHAR", "pid": "BIGINT", "tid": "BIGINT", "ts": "BIGINT",
        "dur": "BIGINT", "ph": "VARCHAR"}  # fmt: skip


def _columns_literal() -> str:
    args = ", ".join([f'"{k}" BIGINT' for k in _ARG_INTS] + [f'"{k}" VARCHAR' for k in _ARG_TEXT])
    top = ", ".join(f"'{k}': '{t}'" for k, t in _TOP.items())
    return "{" + top + f", 'args': 'STRUCT({args})'" + "}"


_COLUMNS = _columns_literal()
_RANK_IN_NAME = re.compile(r"(?:^|[-_.])(\d+)-of-(\d+)(?:[-_.]|$)")


@dataclass
class FilePartial:
    """Everything one trace file contributes to an analysis; merged by :mod:`merge`."""

    path: str
    scalars: dict[str, Any] = field(default_factory=dict)
    tables: dict[str, pa.Table] = field(default_factory=dict)
    bad_lines: list[BadLine] = field(default_factory=list)
    fh_map: dict[str, str] = field(default_factory=dict)


@dataclass(frozen=True)
class ReadOptions:
    """How to read: strict (raise on the first bad line) or skip-bad, optional time bins."""

    skip_bad: bool = False
    #: (origin_us, width_us, count) for the time view; None skips it.
    time_bins: tuple[int, int, int] | None = None


def read_file(path: str | Path, options: ReadOptions = ReadOptions()) -> FilePartial:
    """Reduce one trace file to a :class:`FilePartial` (the per-file map step)."""
    p = Path(path)
    partial = FilePartial(path=str(p))
    if p.stat().st_size == 0:
        partial.scalars.update(_empty_scalars(), empty=True)
        return partial
    con = duckdb.connect(config={"threads": 1, "preserve_insertion_order": True})
    con.execute("SET enable_progress_bar = false")
    try:
        source = str(p)
        try:
            _load(con, source)
            nulls, semantic_bad = _health(con)
            clean = semantic_bad == 0 and (nulls == 0 or nulls <= _structural_lines(con, p, nulls))
        except duckdb.Error:
            clean = False
        if not clean:
            # Slow path: find the bad lines by number, then parse only the good ones.
            with tempfile.TemporaryDirectory(prefix="dftune-clean-") as tmp:
                cleaned = Path(tmp) / "clean.ndjson"
                result = scan(p, cleaned)
                if result.truncated and not options.skip_bad:
                    raise TraceError(str(p), result.truncated_reason)
                if result.bad_count and not options.skip_bad:
                    first = result.bad[0]
                    more = f" (and {result.bad_count - 1} more bad lines)" if result.bad_count > 1 else ""
                    raise TraceError(str(p), first.reason + more + "; use --skip-bad to analyze the rest", first.line)
                if result.good_lines == 0 and not result.truncated and not options.skip_bad:
                    raise TraceError(str(p), "not a dftracer trace: no line is a trace event")
                partial.bad_lines = result.bad
                partial.scalars["bad_line_count"] = result.bad_count + (1 if result.truncated else 0)
                partial.scalars["truncated"] = result.truncated
                if result.truncated:
                    partial.bad_lines.append(BadLine(-1, result.truncated_reason))
                con.unregister("ev")
                if result.good_lines:
                    _load(con, str(cleaned))
                else:
                    partial.scalars.update(
                        _empty_scalars(), bad_line_count=partial.scalars["bad_line_count"], truncated=result.truncated
                    )
                    return partial
        _reduce(con, partial, p, options)
    finally:
        con.close()
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
    ).fetchall()[0]
    return int(row[0]) if row else 0


def _empty_scalars() -> dict[str, Any]:
    return {
        "rows": 0, "events": 0, "metadata_lines": 0, "counter_events": 0, "aggregated_events": 0,
        "first_ts": None, "last_end": None, "bad_line_count": 0, "truncated": False,
        "empty": False, "formats": {}, "io_events": 0, "io_events_without_args": 0,
    }  # fmt: skip


def _load(con: duckdb.DuckDBPyConnection, source: str) -> None:
    """Parse a trace file into the typed table ``ev`` (one row per non-blank line)."""
    src = source.replace("'", "''")
    # Materialized as Arrow and registered: measured faster than a DuckDB temp table for
    # this wide, NULL-heavy data, and later queries scan it zero-copy.
    table = _fetch_arrow(con.sql(
        f"""
        SELECT
          CASE WHEN ph IN ('X', '1') THEN 1 WHEN ph IN ('M', '4') THEN 4
               WHEN ph = '3' THEN 3 WHEN ph IN ('C', '2') THEN 2
               WHEN ph IS NULL THEN NULL ELSE 0 END::UTINYINT AS k,
          ph IN ('X', 'M') AS legacy, name, cat, pid, tid, ts, dur, id,
          args IS NULL AS no_args,
          args.ret AS ret, args.offset AS off, args.size AS isize, args.whence AS whence, args.flags AS flags,
          args.mode AS fmode, args.fhash AS fhash, COALESCE(args.hostname, args.hhash) AS hkey,
          args.hostname IS NOT NULL AS host_inline, args.fname AS fname,
          args.name AS mname, args.value AS mvalue, args.epoch AS epoch, args.step AS step, args.rank AS rank,
          args.cmd_hash AS cmd_hash, args.version AS version, args.cfg AS cfg,
          -- aggregated (ph 3) records: an interval holding a single call carries the plain
          -- dur/ret/size fields instead of *_sum/_min/_max
          args.dft_cnt AS agg_cnt, COALESCE(args.dur_sum, args.dur) AS agg_dur,
          COALESCE(args.ret_sum, args.ret) AS agg_ret,
          COALESCE(args.size_min, args.size) AS agg_size_min, COALESCE(args.size_max, args.size) AS agg_size_max
        FROM read_json('{src}', format = 'newline_delimited', ignore_errors = true,
                       maximum_object_size = 16777216, columns = {_COLUMNS})
        """
    ))
    con.register("ev", table)


def _health(con: duckdb.DuckDBPyConnection) -> tuple[int, int]:
    """(rows DuckDB could not parse, parsed rows that are not usable events)."""
    row = con.execute(
        """
        SELECT
          count(*) FILTER (WHERE k IS NULL AND name IS NULL),
          count(*) FILTER (WHERE (k IS NULL AND name IS NOT NULL) OR (k IS NOT NULL AND name IS NULL)
                            OR (k = 1 AND (ts IS NULL OR dur IS NULL OR dur < 0)))
        FROM ev
        """
    ).fetchall()[0]
    assert row is not None
    return int(row[0]), int(row[1])


def _reduce(con: duckdb.DuckDBPyConnection, partial: FilePartial, path: Path, options: ReadOptions) -> None:
    sc = partial.scalars
    bad = sc.get("bad_line_count", 0)
    truncated = sc.get("truncated", False)
    sc.update(_empty_scalars(), bad_line_count=bad, truncated=truncated)
    counts = con.execute(
        """
        SELECT count(*) FILTER (WHERE k IS NOT NULL), count(*) FILTER (WHERE k = 1),
               count(*) FILTER (WHERE k = 4), count(*) FILTER (WHERE k = 2), count(*) FILTER (WHERE k = 3),
               count(*) FILTER (WHERE k IS NOT NULL AND legacy), count(*) FILTER (WHERE k IS NOT NULL AND NOT legacy),
               min(ts) FILTER (WHERE k = 1), max(ts + dur) FILTER (WHERE k = 1)
        FROM ev
        """
    ).fetchall()[0]
    assert counts is not None
    sc.update(
        rows=counts[0], events=counts[1], metadata_lines=counts[2], counter_events=counts[3],
        aggregated_events=counts[4],
        formats={k: v for k, v in (("dftracer-1.x", counts[5]), ("dftracer-2.x", counts[6])) if v},
    )  # fmt: skip

    # --- metadata: hash dictionaries, time unit, tracer configuration -----------------
    con.execute(
        "CREATE OR REPLACE TEMP TABLE hmap AS SELECT name AS kind, mvalue AS h, any_value(mname) AS v "
        "FROM ev WHERE k = 4 AND name IN ('FH', 'HH', 'SH') AND mvalue IS NOT NULL GROUP BY ALL"
    )
    cm = next(iter(con.execute("SELECT mvalue FROM ev WHERE k = 4 AND name = 'CM' AND mname = 'time_metric' LIMIT 1").fetchall()), None)
    time_metric = str(cm[0]).upper() if cm and cm[0] else "US"
    scale = {"NS": 0.001, "US": 1.0, "MS": 1000.0, "S": 1_000_000.0}.get(time_metric, 1.0)
    sc["time_metric"] = time_metric
    if scale != 1.0:
        # Normalize to microseconds once; rare (dftracer defaults to US).
        scaled = _arrow(con, f"SELECT * REPLACE (CAST(round(ts * {scale}) AS BIGINT) AS ts, "
                             f"CAST(round(dur * {scale}) AS BIGINT) AS dur, CAST(round(agg_dur * {scale}) AS BIGINT) AS agg_dur) FROM ev")  # fmt: skip
        con.unregister("ev")
        con.register("ev", scaled)
        counts = con.execute("SELECT 0,0,0,0,0,0,0, min(ts) FILTER (WHERE k = 1), max(ts + dur) FILTER (WHERE k = 1) FROM ev").fetchall()[0]
        assert counts is not None
    sc["first_ts"], sc["last_end"] = counts[7], counts[8]
    partial.fh_map = dict(con.execute("SELECT h, v FROM hmap WHERE kind = 'FH'").fetchall())
    start = con.execute(
        "SELECT version, cfg FROM ev WHERE k = 1 AND name IN ('start', 'end') AND upper(cat) = 'DFTRACER' "
        "ORDER BY name DESC"
    ).fetchall()
    sc["dftracer_version"] = next((v for v, _ in start if v), None)
    sc["tracer_config"] = next((c for _, c in start if c), None)

    _io_table(con)
    row = con.execute("SELECT count(*), count(*) FILTER (WHERE no_args) FROM io").fetchall()[0]
    assert row is not None
    sc["io_events"], sc["io_events_without_args"] = row
    if sc["io_events"] and sc["io_events"] == sc["io_events_without_args"] and not options.skip_bad:
        raise TraceError(
            str(path),
            f"none of its {sc['io_events']} I/O events carries args (traced without "
            "DFTRACER_INC_METADATA=1?): bytes, offsets and file names are unknown; use --skip-bad to analyze anyway",
        )
    _positions(con)
    _overlap(con)
    partial.tables["fam"] = _arrow(con, _FAMILY_SQL)
    partial.tables["agg"] = _arrow(con, _AGGREGATED_SQL)
    partial.tables["hist"] = _arrow(con, _HIST_SQL)
    partial.tables["path"] = _arrow(con, _PATH_SQL)
    partial.tables["layer"] = _arrow(con, _LAYER_SQL)
    partial.tables["proc"] = _arrow(con, _proc_sql(_rank_from_filename(path.name)))
    app = con.execute(
        "SELECT list(DISTINCT epoch) FILTER (WHERE epoch IS NOT NULL), "
        "count(DISTINCT (epoch, step)) FILTER (WHERE step IS NOT NULL), "
        "count(*) FILTER (WHERE lower(cat) = 'checkpoint' OR (upper(cat) NOT IN ('POSIX', 'STDIO') "
        "AND lower(name) LIKE '%checkpoint%' AND lower(name) NOT LIKE '%init%')) FROM ev WHERE k = 1"
    ).fetchall()[0]
    assert app is not None
    sc["epochs"] = sorted(str(e) for e in (app[0] or []))
    sc["steps"] = int(app[1] or 0)
    sc["checkpoint_events"] = int(app[2] or 0)
    if options.time_bins:
        origin, width, nbins = options.time_bins
        partial.tables["time"] = _arrow(con, _time_sql(origin, width, nbins))
        sc["time_bins"] = [origin, width, nbins]


def _rank_from_filename(name: str) -> int | None:
    m = _RANK_IN_NAME.search(name)
    return int(m.group(1)) if m else None


def _arrow(con: duckdb.DuckDBPyConnection, sql: str) -> pa.Table:
    return _fetch_arrow(con.sql(sql))


def _fetch_arrow(rel: duckdb.DuckDBPyRelation) -> pa.Table:
    # DuckDB 2.x renamed Relation.arrow() to to_arrow_table().
    fetch = getattr(rel, "to_arrow_table", None) or rel.arrow
    table: pa.Table = fetch()
    return table


#: Resolve host and file hashes from the file's own metadata lines (after aggregation,
#: so the join touches one row per host or file, not one per event).
_HOST = "COALESCE(hh.v, {t}.hkey, '')"
_HOST_JOIN = "LEFT JOIN hmap hh ON hh.kind = 'HH' AND hh.h = {t}.hkey AND NOT {t}.host_inline"


def _io_table(con: duckdb.DuckDBPyConnection) -> None:
    """I/O calls with family, bytes, size bin and position role (DESIGN.md "I/O semantics").

    Everything the order-dependent passes need is computed here once, as integers, so
    they fetch plain numeric columns: group hashes per (process, file) and per process,
    the call's role for position tracking, and the position a setter establishes.
    """
    items = S.sql_list(S.ITEM_CALLS)
    opens = S.sql_list(S.OPEN_CALLS)
    lseeks = S.sql_list(S.LSEEK_CALLS)
    fseeks = S.sql_list(S.FSEEK_CALLS)
    rewinds = S.sql_list(S.REWIND_CALLS)
    setters = f"name IN {opens} OR name IN {lseeks} OR name IN {fseeks} OR name IN {rewinds}"
    io = _arrow(
        con,
        f"""
        SELECT *, {S.size_bin_sql("nbytes")}::UTINYINT AS sbin,
               CASE WHEN fkey IS NULL THEN {V.OTHER}
                    WHEN name IN {S.sql_list(S.POSITIONAL_CALLS)} THEN {V.POSITIONAL}
                    WHEN name IN {S.sql_list(S.STREAM_CALLS)} THEN {V.STREAM}
                    WHEN {setters} THEN {V.SETTER} ELSE {V.OTHER} END::TINYINT AS pkind,
               COALESCE(CASE
                 WHEN name IN {opens} THEN
                   CASE WHEN (flags IS NOT NULL AND (flags & {S.O_APPEND}) <> 0) OR (fmode IS NOT NULL AND fmode LIKE 'a%')
                        THEN NULL ELSE 0 END
                 WHEN name IN {lseeks} THEN CASE WHEN ret >= 0 THEN ret WHEN whence = {S.SEEK_SET} THEN off END
                 WHEN name IN {fseeks} THEN CASE WHEN whence = {S.SEEK_SET} AND ret = 0 THEN off END
                 WHEN name IN {rewinds} THEN 0
               END, {V.UNKNOWN}) AS setpos,
               hash(hkey, pid, fkey) AS g_file, hash(hkey, pid) AS g_proc, hash(fkey) AS fk
        FROM (
          SELECT hkey, host_inline, pid, name, COALESCE(fname, fhash) AS fkey, fname IS NOT NULL AS fkey_is_path,
                 ts, dur, ret, off, whence, flags, fmode, no_args,
                 {S.family_sql("name")} AS fam,
                 CASE WHEN ret IS NULL THEN NULL
                      WHEN ret <= 0 THEN 0
                      WHEN name IN {items} THEN ret * isize
                      ELSE ret END AS nbytes
          FROM ev WHERE k = 1 AND upper(cat) IN {S.sql_list(S.IO_CATEGORIES)}
        )
        """,
    )
    con.register("io", io)


def _positions(con: duckdb.DuckDBPyConnection) -> None:
    """Classify each read/write as consecutive, sequential or random, per (process, file).

    The position is only known after an open (0), an lseek (its ``ret``), an fseek with
    SEEK_SET, a rewind, or for pread/pwrite (their ``offset``); read/write advance it by
    their bytes.  An access whose start is unknown, or that has no earlier access, stays
    unclassified: we never assume sequential.  The order-dependent part runs in
    :func:`vectorized.classify_accesses`; per-file counts come back as table ``acc``.
    """
    cols = con.execute(
        f"""
        SELECT g_file, ts, pkind, COALESCE(nbytes, -1) AS nbytes, COALESCE(off, -1) AS off, setpos, fk,
               (fam = 'write')::BOOLEAN AS is_write
        FROM io WHERE pkind <> {V.OTHER}
        """
    ).fetchnumpy()
    res = V.classify_accesses(
        np.asarray(cols["g_file"], dtype=np.uint64), np.asarray(cols["ts"], dtype=np.int64),
        np.asarray(cols["pkind"], dtype=np.int8), np.asarray(cols["nbytes"], dtype=np.int64),
        np.asarray(cols["off"], dtype=np.int64), np.asarray(cols["setpos"], dtype=np.int64),
    )  # fmt: skip
    classified = res.sequential | res.random
    acc = pa.table({
        "fk": np.asarray(cols["fk"], dtype=np.uint64)[classified],
        "is_write": np.asarray(cols["is_write"], dtype=bool)[classified],
        "consecutive": res.consecutive[classified], "sequential": res.sequential[classified],
        "random": res.random[classified],
    })  # fmt: skip
    con.register("acc_rows", acc)
    con.execute(
        "CREATE OR REPLACE TEMP TABLE acc AS SELECT fk, CASE WHEN is_write THEN 'write' ELSE 'read' END AS fam, "
        "count(*) FILTER (WHERE consecutive) AS consecutive, count(*) FILTER (WHERE sequential) AS sequential, "
        "count(*) FILTER (WHERE random) AS random FROM acc_rows GROUP BY ALL"
    )
    con.unregister("acc_rows")


def _overlap(con: duckdb.DuckDBPyConnection) -> None:
    """Per process: I/O wall time, its overlap with compute, compute wall time (table ``ovl``)."""
    compute = (
        f"k = 1 AND (lower(name) LIKE '{S.COMPUTE_NAME_PATTERN}' OR lower(cat) IN {S.sql_list(S.COMPUTE_CATEGORIES)})"
        f" AND upper(cat) NOT IN {S.sql_list(S.IO_CATEGORIES)}"
    )
    io = con.execute("SELECT g_proc AS g, ts, ts + dur AS e FROM io").fetchnumpy()
    cp = con.execute(f"SELECT hash(hkey, pid) AS g, ts, ts + dur AS e FROM ev WHERE {compute}").fetchnumpy()

    def arr(d: dict[str, Any], key: str, dtype: Any) -> Any:
        return np.asarray(d[key], dtype=dtype)

    per = V.union_and_overlap(
        arr(io, "g", np.uint64), arr(io, "ts", np.int64), arr(io, "e", np.int64),
        arr(cp, "g", np.uint64), arr(cp, "ts", np.int64), arr(cp, "e", np.int64),
    )  # fmt: skip
    keys = list(per)
    ovl = pa.table({
        "g": pa.array(keys, type=pa.uint64()),
        "io_wall_us": pa.array([per[k][0] for k in keys], type=pa.int64()),
        "overlap_us": pa.array([per[k][1] for k in keys], type=pa.int64()),
        "compute_wall_us": pa.array([per[k][2] for k in keys], type=pa.int64()),
    })  # fmt: skip
    con.register("ovl_rows", ovl)
    con.execute("CREATE OR REPLACE TEMP TABLE ovl AS SELECT * FROM ovl_rows")
    con.unregister("ovl_rows")


_FAMILY_SQL = f"""
SELECT i.fam,
       count(*) AS count, sum(nbytes) AS bytes, count(nbytes) AS sized, sum(dur) AS time_us,
       count(*) FILTER (WHERE nbytes < {S.SMALL_IO_BYTES}) AS small,
       sum(dur) FILTER (WHERE nbytes < {S.SMALL_IO_BYTES}) AS small_time_us,
       sum(CASE WHEN dur > 0 AND nbytes IS NOT NULL THEN nbytes / dur END) AS bw_sum,
       count(*) FILTER (WHERE dur > 0 AND nbytes IS NOT NULL) AS bw_n,
       COALESCE(any_value(p.consecutive), 0) AS consecutive, COALESCE(any_value(p.sequential), 0) AS sequential,
       COALESCE(any_value(p.random), 0) AS random
FROM io i
LEFT JOIN (
  SELECT fam, sum(consecutive) AS consecutive, sum(sequential) AS sequential, sum(random) AS random
  FROM acc GROUP BY fam
) p ON p.fam = i.fam
GROUP BY i.fam
"""

#: dftracer's aggregated (ph 3) records: counts and sums per call, no per-op detail.
_AGGREGATED_SQL = f"""
SELECT {S.family_sql("name")} AS fam, count(*) AS records, sum(agg_cnt) AS count,
       sum(CASE WHEN agg_ret IS NULL THEN NULL WHEN agg_ret <= 0 THEN 0
                WHEN name IN {S.sql_list(S.ITEM_CALLS)}
                  THEN agg_ret * CASE WHEN agg_size_min = agg_size_max THEN agg_size_max END
                ELSE agg_ret END) AS bytes,
       sum(agg_dur) AS time_us
FROM ev WHERE k = 3 AND upper(cat) IN {S.sql_list(S.IO_CATEGORIES)}
GROUP BY 1
"""

_HIST_SQL = """
SELECT fam, sbin, count(*) AS count, sum(nbytes) AS bytes
FROM io WHERE fam IN ('read', 'write') AND sbin IS NOT NULL GROUP BY fam, sbin
"""

_FAMILY_COLUMNS = """
  count(*) FILTER (WHERE fam = 'read') AS read_count, sum(nbytes) FILTER (WHERE fam = 'read') AS read_bytes,
  sum(dur) FILTER (WHERE fam = 'read') AS read_time_us,
  count(*) FILTER (WHERE fam = 'write') AS write_count, sum(nbytes) FILTER (WHERE fam = 'write') AS write_bytes,
  sum(dur) FILTER (WHERE fam = 'write') AS write_time_us,
  count(*) FILTER (WHERE fam = 'metadata') AS metadata_count, sum(dur) FILTER (WHERE fam = 'metadata') AS metadata_time_us,
  count(*) FILTER (WHERE fam = 'sync') AS sync_count, sum(dur) FILTER (WHERE fam = 'sync') AS sync_time_us
"""

_PATH_SQL = f"""
WITH f AS (
  SELECT fkey, any_value(fk) AS fk, any_value(fkey_is_path) AS is_path, {_FAMILY_COLUMNS},
         count(DISTINCT (hkey, pid)) AS processes
  FROM io WHERE fkey IS NOT NULL GROUP BY fkey
), q AS (
  SELECT fk, sum(consecutive) AS consecutive, sum(sequential) AS sequential, sum(random) AS random
  FROM acc GROUP BY fk
)
SELECT CASE WHEN f.is_path THEN f.fkey ELSE COALESCE(fh.v, 'fhash:' || f.fkey) END AS path,
       f.* EXCLUDE (fkey, fk, is_path), COALESCE(q.consecutive, 0) AS consecutive,
       COALESCE(q.sequential, 0) AS sequential, COALESCE(q.random, 0) AS random
FROM f LEFT JOIN q ON q.fk = f.fk
LEFT JOIN hmap fh ON fh.kind = 'FH' AND fh.h = f.fkey AND NOT f.is_path
"""

_LAYER_SQL = """
SELECT cat, count(*) AS count, sum(dur) AS time_us, min(ts) AS first_ts, max(ts + dur) AS last_end
FROM ev WHERE k = 1 AND cat IS NOT NULL AND upper(cat) <> 'DFTRACER' GROUP BY cat
"""


def _proc_sql(rank_from_name: int | None) -> str:
    """Per-process totals, I/O wall time and I/O not hidden behind compute (from ``ovl``)."""
    rank = "NULL" if rank_from_name is None else str(rank_from_name)
    return f"""
    WITH tot AS (
      SELECT hkey, any_value(host_inline) AS host_inline, pid, count(*) AS events, min(ts) AS first_ts,
             max(ts + dur) AS last_end, COALESCE(max(rank), {rank}) AS rank,
             any_value(cmd_hash) FILTER (WHERE name = 'start' AND upper(cat) = 'DFTRACER') AS cmd_hash
      FROM ev WHERE k = 1 GROUP BY hkey, pid
    ), fam AS (
      SELECT hkey, pid, {_FAMILY_COLUMNS} FROM io GROUP BY hkey, pid
    )
    SELECT {_HOST.format(t="tot")} AS host, tot.pid, tot.rank, sh.v AS cmd, tot.events, tot.first_ts, tot.last_end,
           COALESCE(fam.read_count, 0) AS read_count, fam.read_bytes, fam.read_time_us,
           COALESCE(fam.write_count, 0) AS write_count, fam.write_bytes, fam.write_time_us,
           COALESCE(fam.metadata_count, 0) AS metadata_count, fam.metadata_time_us,
           COALESCE(fam.sync_count, 0) AS sync_count, fam.sync_time_us,
           COALESCE(ovl.io_wall_us, 0) AS io_wall_us,
           COALESCE(ovl.io_wall_us, 0) - COALESCE(ovl.overlap_us, 0) AS unoverlapped_us,
           COALESCE(ovl.compute_wall_us, 0) AS compute_wall_us
    FROM tot
    LEFT JOIN fam ON fam.hkey IS NOT DISTINCT FROM tot.hkey AND fam.pid IS NOT DISTINCT FROM tot.pid
    LEFT JOIN ovl ON ovl.g = hash(tot.hkey, tot.pid)
    {_HOST_JOIN.format(t="tot")}
    LEFT JOIN hmap sh ON sh.kind = 'SH' AND sh.h = tot.cmd_hash
    """


def _time_sql(origin: int, width: int, nbins: int) -> str:
    """I/O per time window; an event belongs to the window its start falls in."""
    return f"""
    SELECT least(greatest((ts - {origin}) // {width}, 0), {nbins - 1}) AS bin, fam,
           count(*) AS count, sum(nbytes) AS bytes, sum(dur) AS time_us
    FROM io GROUP BY 1, 2
    """
