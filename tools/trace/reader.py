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
import pyarrow as pa

from dftune.tools.trace import semantics as S
from dftune.tools.trace.errors import TraceError
from dftune.tools.trace.linescan import STRUCTURAL_LINES, BadLine, first_line, scan

#: args keys read from every event; all as VARCHAR so ints, strings, 64-bit unsigned
#: hashes and hex hashes survive unchanged, then cast where numbers are meant.
_ARG_KEYS = (
    "ret", "offset", "count", "size", "fhash", "hhash", "fname", "hostname", "name", "value",
    "whence", "flags", "mode", "epoch", "step", "rank", "cmd_hash", "exec_hash", "version",
    "cfg", "dft_cnt", "dur_sum", "ret_sum", "size_min", "size_max",
)  # fmt: skip
_TOP_KEYS = ("id", "name", "cat", "pid", "tid", "ts", "dur", "ph", "type")


def _columns_literal() -> str:
    args = ", ".join(f'"{k}" VARCHAR' for k in _ARG_KEYS)
    top = ", ".join(f"'{k}': 'VARCHAR'" for k in _TOP_KEYS)
    return "{" + top + f", 'args': 'STRUCT({args})'" + "}"


_COLUMNS = _columns_literal()
_RANK_IN_NAME = re.compile(r"(?:^|[-_.])(\d+)-of-(\d+)(?:[-_.]|$)")


def _int(expr: str) -> str:
    """Cast a VARCHAR holding an int (or a float like '1.5e3') to BIGINT, NULL otherwise."""
    return f"COALESCE(TRY_CAST({expr} AS BIGINT), TRY_CAST(TRY_CAST({expr} AS DOUBLE) AS BIGINT))"


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
                if result.good_lines == 0 and not result.truncated:
                    raise TraceError(str(p), "not a dftracer trace: no line is a trace event")
                partial.bad_lines = result.bad
                partial.scalars["bad_line_count"] = result.bad_count + (1 if result.truncated else 0)
                partial.scalars["truncated"] = result.truncated
                if result.truncated:
                    partial.bad_lines.append(BadLine(-1, result.truncated_reason))
                con.execute("DROP TABLE IF EXISTS ev")
                if result.good_lines:
                    _load(con, str(cleaned))
                else:
                    partial.scalars.update(_empty_scalars())
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
    ).fetchone()
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
    a = "args"
    con.execute(
        f"""
        CREATE OR REPLACE TEMP TABLE ev AS
        SELECT
          CASE WHEN ph IN ('X', '1') THEN 1 WHEN ph IN ('M', '4') THEN 4
               WHEN ph = '3' THEN 3 WHEN ph IN ('C', '2') THEN 2
               WHEN ph IS NULL THEN NULL ELSE 0 END AS k,
          (ph IN ('X', 'M')) AS legacy,
          name, cat, upper(cat) AS ucat,
          {_int("pid")} AS pid, {_int("tid")} AS tid,
          {_int("ts")} AS ts, {_int("dur")} AS dur, {_int("id")} AS id,
          {a} IS NULL AS no_args,
          {_int(f"{a}.ret")} AS ret, {_int(f"{a}.offset")} AS off, {_int(f"{a}.size")} AS isize,
          {_int(f"{a}.whence")} AS whence, {_int(f"{a}.flags")} AS flags, {a}.mode AS fmode,
          {a}.fhash AS fhash, {a}.hhash AS hhash, {a}.fname AS fname, {a}.hostname AS hostname,
          {a}.name AS mname, {a}.value AS mvalue, {a}.epoch AS epoch, {a}.step AS step,
          {_int(f"{a}.rank")} AS rank, {a}.cmd_hash AS cmd_hash, {a}.version AS version, {a}.cfg AS cfg,
          {_int(f"{a}.dft_cnt")} AS agg_cnt, {_int(f"{a}.dur_sum")} AS agg_dur,
          {_int(f"{a}.ret_sum")} AS agg_ret, {_int(f"{a}.size_min")} AS agg_size_min,
          {_int(f"{a}.size_max")} AS agg_size_max
        FROM read_json('{src}', format = 'newline_delimited', ignore_errors = true,
                       maximum_object_size = 16777216, columns = {_COLUMNS})
        """
    )


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
    ).fetchone()
    assert row is not None
    return int(row[0]), int(row[1])


def _reduce(con: duckdb.DuckDBPyConnection, partial: FilePartial, path: Path, options: ReadOptions) -> None:
    sc = partial.scalars
    sc.update(_empty_scalars())
    if "bad_line_count" in partial.scalars and partial.bad_lines:
        sc["bad_line_count"] = len(partial.bad_lines)
    counts = con.execute(
        """
        SELECT count(*) FILTER (WHERE k IS NOT NULL), count(*) FILTER (WHERE k = 1),
               count(*) FILTER (WHERE k = 4), count(*) FILTER (WHERE k = 2), count(*) FILTER (WHERE k = 3),
               count(*) FILTER (WHERE k IS NOT NULL AND legacy), count(*) FILTER (WHERE k IS NOT NULL AND NOT legacy)
        FROM ev
        """
    ).fetchone()
    assert counts is not None
    sc.update(
        rows=counts[0], events=counts[1], metadata_lines=counts[2], counter_events=counts[3],
        aggregated_events=counts[4],
        formats={k: v for k, v in (("dftracer-1.x", counts[5]), ("dftracer-2.x", counts[6])) if v},
    )  # fmt: skip

    # --- metadata: hash dictionaries, time unit, tracer configuration -----------------
    meta = con.execute(
        "SELECT name, mname, mvalue FROM ev WHERE k = 4 AND name IN ('FH', 'HH', 'SH', 'CM')"
    ).fetchall()
    time_metric = "US"
    for kind, mname, mvalue in meta:
        if kind == "CM" and mname == "time_metric" and mvalue:
            time_metric = str(mvalue).upper()
    scale = {"NS": 0.001, "US": 1.0, "MS": 1000.0, "S": 1_000_000.0}.get(time_metric, 1.0)
    sc["time_metric"] = time_metric
    con.execute("CREATE OR REPLACE TEMP TABLE hmap AS SELECT DISTINCT name AS kind, mvalue AS h, mname AS v "
                "FROM ev WHERE k = 4 AND name IN ('FH', 'HH', 'SH') AND mvalue IS NOT NULL")  # fmt: skip
    partial.fh_map = dict(con.execute("SELECT h, any_value(v) FROM hmap WHERE kind = 'FH' GROUP BY h").fetchall())
    start = con.execute(
        "SELECT version, cfg FROM ev WHERE k = 1 AND name IN ('start', 'end') AND ucat = 'DFTRACER' "
        "ORDER BY name DESC"
    ).fetchall()
    sc["dftracer_version"] = next((v for v, _ in start if v), None)
    sc["tracer_config"] = next((c for _, c in start if c), None)

    ts = "ts" if scale == 1.0 else f"CAST(round(ts * {scale}) AS BIGINT)"
    du = "dur" if scale == 1.0 else f"CAST(round(dur * {scale}) AS BIGINT)"
    rank_from_name = _rank_from_filename(path.name)

    # --- complete events with resolved host / path / process ---------------------------
    con.execute(
        f"""
        CREATE OR REPLACE TEMP TABLE ce AS
        SELECT e.name, e.cat, e.ucat, e.pid, e.tid, {ts} AS ts, {du} AS dur, e.id,
               COALESCE(e.hostname, hh.v, e.hhash, '') AS host,
               COALESCE(e.fname, e.fhash) AS fkey,
               COALESCE(e.fname, fh.v, CASE WHEN e.fhash IS NOT NULL THEN 'fhash:' || e.fhash END) AS path,
               e.no_args, e.ret, e.off, e.isize, e.whence, e.flags, e.fmode, e.epoch, e.step, e.rank, e.cmd_hash
        FROM ev e
        LEFT JOIN (SELECT h, any_value(v) AS v FROM hmap WHERE kind = 'HH' GROUP BY h) hh ON hh.h = e.hhash
        LEFT JOIN (SELECT h, any_value(v) AS v FROM hmap WHERE kind = 'FH' GROUP BY h) fh ON fh.h = e.fhash
        WHERE e.k = 1
        """
    )
    row = con.execute(
        "SELECT min(ts), max(ts + dur), count(*) FILTER (WHERE ucat IN ('POSIX','STDIO')), "
        "count(*) FILTER (WHERE ucat IN ('POSIX','STDIO') AND no_args) FROM ce"
    ).fetchone()
    assert row is not None
    sc["first_ts"], sc["last_end"], sc["io_events"], sc["io_events_without_args"] = row
    if sc["io_events"] and sc["io_events"] == sc["io_events_without_args"] and not options.skip_bad:
        raise TraceError(
            str(path),
            f"none of its {sc['io_events']} I/O events carries args (traced without "
            "DFTRACER_INC_METADATA=1?): bytes, offsets and file names are unknown; use --skip-bad to analyze anyway",
        )

    _io_table(con)
    _positions(con)
    partial.tables["fam"] = _arrow(con, _FAMILY_SQL)
    partial.tables["agg"] = _arrow(con, _aggregated_sql(scale))
    partial.tables["hist"] = _arrow(con, _HIST_SQL)
    partial.tables["path"] = _arrow(con, _PATH_SQL)
    partial.tables["layer"] = _arrow(con, _LAYER_SQL)
    partial.tables["proc"] = _arrow(con, _proc_sql(rank_from_name))
    app = con.execute(
        "SELECT list(DISTINCT epoch) FILTER (WHERE epoch IS NOT NULL), "
        "count(DISTINCT (epoch, step)) FILTER (WHERE step IS NOT NULL), "
        "count(*) FILTER (WHERE lower(cat) = 'checkpoint' OR (ucat NOT IN ('POSIX','STDIO') "
        "AND lower(name) LIKE '%checkpoint%' AND lower(name) NOT LIKE '%init%')) FROM ce"
    ).fetchone()
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
    rel = con.sql(sql)
    # DuckDB 2.x renamed Relation.arrow() to to_arrow_table().
    fetch = getattr(rel, "to_arrow_table", None) or rel.arrow
    table: pa.Table = fetch()
    return table


def _io_table(con: duckdb.DuckDBPyConnection) -> None:
    """I/O calls with family, bytes and size bin (DESIGN.md "I/O semantics")."""
    items = S.sql_list(S.ITEM_CALLS)
    con.execute(
        f"""
        CREATE OR REPLACE TEMP TABLE io AS
        SELECT *, {S.size_bin_sql("nbytes")} AS sbin
        FROM (
          SELECT host, pid, tid, name, fkey, path, ts, dur, id, ret, off, whence, flags, fmode, no_args,
                 {S.family_sql("name")} AS fam,
                 CASE WHEN ret IS NULL THEN NULL
                      WHEN ret <= 0 THEN 0
                      WHEN name IN {items} THEN ret * isize
                      ELSE ret END AS nbytes
          FROM ce WHERE ucat IN {S.sql_list(S.IO_CATEGORIES)}
        )
        """
    )


def _positions(con: duckdb.DuckDBPyConnection) -> None:
    """Classify each read/write as consecutive, sequential or random, per (process, file).

    The position is only known after an open (0), an lseek (its ``ret``), an fseek with
    SEEK_SET, or for pread/pwrite (their ``offset``); read/write advance it by their bytes.
    An access whose start is unknown, or that has no earlier access, stays unclassified:
    we never assume sequential.
    """
    opens = S.sql_list(S.OPEN_CALLS)
    lseeks = S.sql_list(S.LSEEK_CALLS)
    fseeks = S.sql_list(S.FSEEK_CALLS)
    rewinds = S.sql_list(S.REWIND_CALLS)
    positional = S.sql_list(S.POSITIONAL_CALLS)
    stream = S.sql_list(S.STREAM_CALLS)
    con.execute(
        f"""
        CREATE OR REPLACE TEMP TABLE acc AS
        WITH t AS (
          SELECT host, pid, fkey, ts, id, fam, name, nbytes, off,
                 (name IN {opens} OR name IN {lseeks} OR name IN {fseeks} OR name IN {rewinds}) AS setter,
                 CASE
                   WHEN name IN {opens} THEN
                     CASE WHEN (flags IS NOT NULL AND (flags & {S.O_APPEND}) <> 0)
                               OR (fmode IS NOT NULL AND fmode LIKE 'a%') THEN NULL ELSE 0 END
                   WHEN name IN {lseeks} THEN
                     CASE WHEN ret >= 0 THEN ret WHEN whence = {S.SEEK_SET} THEN off END
                   WHEN name IN {fseeks} THEN CASE WHEN whence = {S.SEEK_SET} AND ret = 0 THEN off END
                   WHEN name IN {rewinds} THEN 0
                 END AS setpos,
                 CASE WHEN name IN {stream} THEN COALESCE(nbytes, 0) ELSE 0 END AS adv,
                 name IN {stream} AS is_stream, name IN {positional} AS is_pos
          FROM io
          WHERE fkey IS NOT NULL AND (fam IN ('read', 'write') OR name IN {opens} OR name IN {lseeks}
                                      OR name IN {fseeks} OR name IN {rewinds})
        ), s AS (
          SELECT *, sum(setter::INT) OVER w AS seg, sum(CASE WHEN is_stream AND nbytes IS NULL THEN 1 ELSE 0 END)
                 OVER w AS unknown_adv
          FROM t WINDOW w AS (PARTITION BY host, pid, fkey ORDER BY ts, id ROWS UNBOUNDED PRECEDING)
        ), b AS (
          SELECT *,
                 first_value(setpos) OVER (PARTITION BY host, pid, fkey, seg ORDER BY ts, id) AS base,
                 first_value(unknown_adv) OVER (PARTITION BY host, pid, fkey, seg ORDER BY ts, id) AS unknown_base,
                 COALESCE(sum(adv) OVER (PARTITION BY host, pid, fkey, seg ORDER BY ts, id
                                         ROWS BETWEEN UNBOUNDED PRECEDING AND 1 PRECEDING), 0) AS advanced
          FROM s
        ), a AS (
          SELECT host, pid, fkey, ts, id, fam, nbytes,
                 CASE WHEN is_pos THEN off
                      WHEN seg = 0 OR base IS NULL THEN NULL
                      -- an earlier read/write in this segment of unknown size loses the position
                      WHEN unknown_adv - unknown_base - (CASE WHEN is_stream AND nbytes IS NULL THEN 1 ELSE 0 END) > 0
                        THEN NULL
                      ELSE base + advanced END AS start
          FROM b WHERE fam IN ('read', 'write')
        )
        SELECT host, pid, fkey, fam, nbytes, start,
               lag(CASE WHEN start IS NOT NULL AND nbytes IS NOT NULL THEN start + nbytes END)
                 OVER (PARTITION BY host, pid, fkey ORDER BY ts, id) AS prev_end
        FROM a
        """
    )


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
  SELECT fam,
         count(*) FILTER (WHERE start = prev_end) AS consecutive,
         count(*) FILTER (WHERE start >= prev_end) AS sequential,
         count(*) FILTER (WHERE start < prev_end) AS random
  FROM acc GROUP BY fam
) p ON p.fam = i.fam
GROUP BY i.fam
"""


def _aggregated_sql(scale: float) -> str:
    """dftracer's aggregated (ph 3) records: counts and sums per call, no per-op detail."""
    items = S.sql_list(S.ITEM_CALLS)
    dur = "agg_dur" if scale == 1.0 else f"CAST(round(agg_dur * {scale}) AS BIGINT)"
    return f"""
    SELECT {S.family_sql("name")} AS fam, count(*) AS records, sum(agg_cnt) AS count,
           sum(CASE WHEN agg_ret IS NULL THEN NULL WHEN agg_ret <= 0 THEN 0
                    WHEN name IN {items} THEN agg_ret * CASE WHEN agg_size_min = agg_size_max THEN agg_size_max END
                    ELSE agg_ret END) AS bytes,
           sum({dur}) AS time_us
    FROM ev WHERE k = 3 AND ucat IN {S.sql_list(S.IO_CATEGORIES)}
    GROUP BY 1
    """


_HIST_SQL = """
SELECT fam, sbin, count(*) AS count, sum(nbytes) AS bytes
FROM io WHERE fam IN ('read', 'write') AND sbin IS NOT NULL GROUP BY fam, sbin
"""

_PATH_SQL = """
WITH f AS (
  SELECT path, any_value(fkey) AS fkey,
         count(*) FILTER (WHERE fam = 'read') AS read_count, sum(nbytes) FILTER (WHERE fam = 'read') AS read_bytes,
         sum(dur) FILTER (WHERE fam = 'read') AS read_time_us,
         count(*) FILTER (WHERE fam = 'write') AS write_count, sum(nbytes) FILTER (WHERE fam = 'write') AS write_bytes,
         sum(dur) FILTER (WHERE fam = 'write') AS write_time_us,
         count(*) FILTER (WHERE fam = 'metadata') AS metadata_count,
         sum(dur) FILTER (WHERE fam = 'metadata') AS metadata_time_us,
         count(*) FILTER (WHERE fam = 'sync') AS sync_count, sum(dur) FILTER (WHERE fam = 'sync') AS sync_time_us,
         count(DISTINCT (host, pid)) AS processes
  FROM io WHERE path IS NOT NULL GROUP BY path
), q AS (
  SELECT fkey, count(*) FILTER (WHERE start = prev_end) AS consecutive,
         count(*) FILTER (WHERE start >= prev_end) AS sequential, count(*) FILTER (WHERE start < prev_end) AS random
  FROM acc GROUP BY fkey
)
SELECT f.* EXCLUDE (fkey), COALESCE(q.consecutive, 0) AS consecutive, COALESCE(q.sequential, 0) AS sequential,
       COALESCE(q.random, 0) AS random
FROM f LEFT JOIN q ON q.fkey = f.fkey
"""

_LAYER_SQL = """
SELECT cat, count(*) AS count, sum(dur) AS time_us, min(ts) AS first_ts, max(ts + dur) AS last_end
FROM ce WHERE cat IS NOT NULL AND ucat <> 'DFTRACER' GROUP BY cat
"""


def _proc_sql(rank_from_name: int | None) -> str:
    """Per-process totals plus I/O wall time and I/O not hidden behind compute.

    A sweep over interval boundaries (columnar, no Python loop): at each boundary the
    number of open I/O and compute intervals is a running sum; the time between two
    boundaries counts as I/O time when any I/O is open, and as unoverlapped when no
    compute is open at the same time in the same process.
    """
    compute = (
        f"(lower(name) LIKE '{S.COMPUTE_NAME_PATTERN}' OR lower(cat) IN {S.sql_list(S.COMPUTE_CATEGORIES)})"
        f" AND ucat NOT IN {S.sql_list(S.IO_CATEGORIES)}"
    )
    rank = "NULL" if rank_from_name is None else str(rank_from_name)
    return f"""
    WITH edges AS (
      SELECT host, pid, ts AS t, 1 AS dio, 0 AS dc FROM io
      UNION ALL SELECT host, pid, ts + dur, -1, 0 FROM io
      UNION ALL SELECT host, pid, ts, 0, 1 FROM ce WHERE {compute}
      UNION ALL SELECT host, pid, ts + dur, 0, -1 FROM ce WHERE {compute}
    ), steps AS (
      SELECT host, pid, t, sum(dio) AS dio, sum(dc) AS dc FROM edges GROUP BY host, pid, t
    ), run AS (
      SELECT host, pid, t, lead(t) OVER w - t AS span,
             sum(dio) OVER (w ROWS UNBOUNDED PRECEDING) AS io_open,
             sum(dc) OVER (w ROWS UNBOUNDED PRECEDING) AS c_open
      FROM steps WINDOW w AS (PARTITION BY host, pid ORDER BY t)
    ), ov AS (
      SELECT host, pid, sum(span) FILTER (WHERE io_open > 0) AS io_wall_us,
             sum(span) FILTER (WHERE io_open > 0 AND c_open = 0) AS unoverlapped_us,
             sum(span) FILTER (WHERE c_open > 0) AS compute_wall_us
      FROM run GROUP BY host, pid
    ), tot AS (
      SELECT host, pid, count(*) AS events, min(ts) AS first_ts, max(ts + dur) AS last_end,
             COALESCE(max(rank), {rank}) AS rank,
             any_value(cmd_hash) FILTER (WHERE name = 'start' AND ucat = 'DFTRACER') AS cmd_hash
      FROM ce GROUP BY host, pid
    ), fam AS (
      SELECT host, pid,
             count(*) FILTER (WHERE fam = 'read') AS read_count, sum(nbytes) FILTER (WHERE fam = 'read') AS read_bytes,
             sum(dur) FILTER (WHERE fam = 'read') AS read_time_us,
             count(*) FILTER (WHERE fam = 'write') AS write_count,
             sum(nbytes) FILTER (WHERE fam = 'write') AS write_bytes,
             sum(dur) FILTER (WHERE fam = 'write') AS write_time_us,
             count(*) FILTER (WHERE fam = 'metadata') AS metadata_count,
             sum(dur) FILTER (WHERE fam = 'metadata') AS metadata_time_us,
             count(*) FILTER (WHERE fam = 'sync') AS sync_count, sum(dur) FILTER (WHERE fam = 'sync') AS sync_time_us
      FROM io GROUP BY host, pid
    )
    SELECT tot.host, tot.pid, tot.rank, sh.v AS cmd, tot.events, tot.first_ts, tot.last_end,
           COALESCE(fam.read_count, 0) AS read_count, fam.read_bytes, fam.read_time_us,
           COALESCE(fam.write_count, 0) AS write_count, fam.write_bytes, fam.write_time_us,
           COALESCE(fam.metadata_count, 0) AS metadata_count, fam.metadata_time_us,
           COALESCE(fam.sync_count, 0) AS sync_count, fam.sync_time_us,
           COALESCE(ov.io_wall_us, 0) AS io_wall_us, COALESCE(ov.unoverlapped_us, 0) AS unoverlapped_us,
           COALESCE(ov.compute_wall_us, 0) AS compute_wall_us
    FROM tot
    LEFT JOIN fam USING (host, pid)
    LEFT JOIN ov USING (host, pid)
    LEFT JOIN (SELECT h, any_value(v) AS v FROM hmap WHERE kind = 'SH' GROUP BY h) sh ON sh.h = tot.cmd_hash
    """


def _time_sql(origin: int, width: int, nbins: int) -> str:
    """I/O per time window; an event belongs to the window its start falls in."""
    return f"""
    SELECT least(greatest((ts - {origin}) // {width}, 0), {nbins - 1}) AS bin, fam,
           count(*) AS count, sum(nbytes) AS bytes, sum(dur) AS time_us
    FROM io GROUP BY 1, 2
    """
