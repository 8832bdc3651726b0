"""Reduce a stream of parsed event batches from one trace file to its partial tables.

A trace file is read as bounded Arrow batches so memory does not follow its size: each
batch is folded into small aggregate tables (by family, size bin, accessed file,
process, category) plus a few integer columns per I/O call that the order-dependent
passes (position tracking, interval unions) need over the whole file.  ``finish`` runs
those passes with :mod:`vectorized`, resolves hashes with the file's own metadata lines
and re-aggregates the batch tables into one partial per file.
"""

from __future__ import annotations

import os
import threading
from dataclasses import dataclass, field
from typing import Any

import duckdb
import numpy as np
import pyarrow as pa

from dftune.tools.trace import semantics as S
from dftune.tools.trace import vectorized as V

_IO = S.sql_list(S.IO_CATEGORIES)

_HEALTH_SQL = """
SELECT count(*) FILTER (WHERE k IS NULL AND name IS NULL) AS nulls,
       count(*) FILTER (WHERE (k IS NULL AND name IS NOT NULL) OR (k IS NOT NULL AND name IS NULL)
                         OR (k = 1 AND (ts IS NULL OR dur IS NULL OR dur < 0)) OR (k IN (2, 3) AND ts IS NULL)
                         OR bad_num) AS semantic_bad,
       count(*) FILTER (WHERE k IS NOT NULL) AS rows, count(*) FILTER (WHERE k = 1) AS events,
       count(*) FILTER (WHERE k = 4) AS metadata_lines, count(*) FILTER (WHERE k = 2) AS counter_events,
       count(*) FILTER (WHERE k = 3) AS aggregated_events,
       count(*) FILTER (WHERE k IS NOT NULL AND legacy) AS legacy_rows,
       count(*) FILTER (WHERE k IS NOT NULL AND NOT legacy) AS v2_rows,
       min(ts) FILTER (WHERE k = 1) AS first_ts, max(ts + dur) FILTER (WHERE k = 1) AS last_end
FROM ev
"""


#: Role of a call in position tracking (see :mod:`vectorized`) and how it sets the position.
_SET_OPEN, _SET_LSEEK, _SET_FSEEK, _SET_REWIND = 1, 2, 3, 4


def _call_rows() -> list[tuple[str, str, int, bool, int]]:
    """(name, family, position role, bytes are items*size, setter kind) for every named call."""
    rows: dict[str, tuple[str, str, int, bool, int]] = {}
    setters = (
        (S.OPEN_CALLS, _SET_OPEN),
        (S.LSEEK_CALLS, _SET_LSEEK),
        (S.FSEEK_CALLS, _SET_FSEEK),
        (S.REWIND_CALLS, _SET_REWIND),
    )
    names = {*S.READ_CALLS, *S.WRITE_CALLS, *S.SYNC_CALLS, *(n for group, _ in setters for n in group)}
    for name in sorted(names):
        fam = (
            "read"
            if name in S.READ_CALLS
            else "write"
            if name in S.WRITE_CALLS
            else "sync"
            if name in S.SYNC_CALLS
            else "metadata"
        )
        setter = next((kind for group, kind in setters if name in group), 0)
        role = (
            V.POSITIONAL
            if name in S.POSITIONAL_CALLS
            else V.STREAM
            if name in S.STREAM_CALLS
            else V.SETTER
            if setter
            else V.OTHER
        )
        rows[name] = (name, fam, role, name in S.ITEM_CALLS, setter)
    return list(rows.values())


def _lookup(field: int, default: str) -> str:
    """SQL CASE giving field ``field`` (fam, role, item, setter) of :func:`_call_rows` for ``e.name``."""
    whens = " ".join(
        f"WHEN '{row[0]}' THEN {repr(row[1 + field]).lower() if field == 2 else repr(row[1 + field])}"
        for row in _call_rows()
    )
    return f"(CASE e.name {whens} ELSE {default} END)"


def _io_sql() -> str:
    """I/O calls with family, bytes, size bin and position role (docs/analyze.md, "What each number means").

    CASE lookups generated from :func:`_call_rows` classify each call; unlike a join with a
    table of calls they keep the rows in trace-file order, which the position pass relies on
    for calls with equal timestamps (and the native scanner reproduces);
    everything the order-dependent passes need is computed here as integers:
    group hashes per (process, file) and per process, the call's position role, and the
    position a setter establishes.
    """
    return f"""
    SELECT *, {S.size_bin_sql("nbytes")}::UTINYINT AS sbin,
           CASE WHEN fkey IS NULL THEN {V.OTHER} ELSE role END::TINYINT AS pkind,
           COALESCE(CASE setter
             WHEN {_SET_OPEN} THEN
               CASE WHEN (flags IS NOT NULL AND (flags & {S.O_APPEND}) <> 0)
                      OR (fmode IS NOT NULL AND fmode LIKE 'a%')
                    THEN NULL ELSE 0 END
             WHEN {_SET_LSEEK} THEN CASE WHEN ret >= 0 THEN ret WHEN whence = {S.SEEK_SET} THEN off END
             WHEN {_SET_FSEEK} THEN CASE WHEN whence = {S.SEEK_SET} AND ret = 0 THEN off END
             WHEN {_SET_REWIND} THEN 0
           END, {V.UNKNOWN}) AS setpos,
           hash(hkey, pid, fkey) AS g_file, hash(hkey, pid) AS g_proc, hash(fkey) AS fk
    FROM (
      SELECT e.hkey, e.host_inline, e.pid, e.tid, e.name, COALESCE(e.fname, e.fhash) AS fkey,
             e.fname IS NOT NULL AS fkey_is_path, upper(e.cat) AS iface, e.ts,
             e.dur, e.ret, e.off, e.whence, e.flags, e.fmode, e.no_args,
             {_lookup(0, "'metadata'")} AS fam, {_lookup(1, str(V.OTHER))} AS role,
             {_lookup(3, "0")} AS setter,
             CASE WHEN e.ret IS NULL THEN NULL WHEN e.ret <= 0 THEN 0
                  WHEN {_lookup(2, "false")} THEN e.ret * e.isize ELSE e.ret END AS nbytes
      FROM ev e
      WHERE e.k = 1 AND upper(e.cat) IN {_IO}
    )
    """


_IO_SQL = _io_sql()

_FAMILY_COLUMNS = """
  count(*) FILTER (WHERE fam = 'read') AS read_count, sum(nbytes) FILTER (WHERE fam = 'read') AS read_bytes,
  sum(dur) FILTER (WHERE fam = 'read') AS read_time_us,
  count(*) FILTER (WHERE fam = 'write') AS write_count,
  sum(nbytes) FILTER (WHERE fam = 'write') AS write_bytes,
  sum(dur) FILTER (WHERE fam = 'write') AS write_time_us,
  count(*) FILTER (WHERE fam = 'metadata') AS metadata_count,
  sum(dur) FILTER (WHERE fam = 'metadata') AS metadata_time_us,
  count(*) FILTER (WHERE fam = 'sync') AS sync_count, sum(dur) FILTER (WHERE fam = 'sync') AS sync_time_us
"""
_FAMILY_SUMS = ", ".join(
    f"sum({f}_{m}) AS {f}_{m}"
    for f in S.FAMILIES
    for m in ("count", "bytes", "time_us")
    if not (m == "bytes" and f in ("metadata", "sync"))
)

#: Per-batch aggregates: name -> SQL over the batch tables ``ev`` and ``io``.
_BATCH_SQL = {
    "fam": f"""
        SELECT fam, count(*) AS count, sum(nbytes) AS bytes, count(nbytes) AS sized, sum(dur) AS time_us,
               count(*) FILTER (WHERE nbytes < {S.SMALL_IO_BYTES}) AS small,
               sum(dur) FILTER (WHERE nbytes < {S.SMALL_IO_BYTES}) AS small_time_us,
               sum(CASE WHEN dur > 0 AND nbytes IS NOT NULL THEN nbytes / dur END) AS bw_sum,
               count(*) FILTER (WHERE dur > 0 AND nbytes IS NOT NULL) AS bw_n,
               count(*) FILTER (WHERE no_args) AS no_args
        FROM io GROUP BY fam""",
    # dftracer's aggregated (ph 3) records: counts and sums per call, no per-op detail.
    "agg": f"""
        SELECT {S.family_sql("name")} AS fam, count(*) AS records, sum(agg_cnt) AS count,
               sum(CASE WHEN agg_ret IS NULL THEN NULL WHEN agg_ret <= 0 THEN 0
                        WHEN name IN {S.sql_list(S.ITEM_CALLS)}
                          THEN agg_ret * CASE WHEN agg_size_min = agg_size_max THEN agg_size_max END
                        ELSE agg_ret END) AS bytes,
               sum(agg_dur) AS time_us
        FROM ev WHERE k = 3 AND upper(cat) IN {_IO} GROUP BY 1""",
    "hist": """
        SELECT fam, sbin, count(*) AS count, sum(nbytes) AS bytes
        FROM io WHERE fam IN ('read', 'write') AND sbin IS NOT NULL GROUP BY fam, sbin""",
    "path": f"""
        SELECT fkey, any_value(fk) AS fk, any_value(fkey_is_path) AS is_path, {_FAMILY_COLUMNS}
        FROM io WHERE fkey IS NOT NULL GROUP BY fkey""",
    "pathproc": "SELECT DISTINCT fk, g_proc FROM io WHERE fkey IS NOT NULL",
    "names": """
        SELECT cat, name, count(*) AS count, sum(dur) AS time_us FROM ev
        WHERE k = 1 AND cat IS NOT NULL AND upper(cat) NOT IN ('POSIX', 'STDIO', 'DFTRACER') GROUP BY ALL""",
    "iface": "SELECT iface, fam, count(*) AS count, sum(nbytes) AS bytes, sum(dur) AS time_us "
    "FROM io GROUP BY ALL",
    "layer": """
        SELECT cat, count(*) AS count, sum(dur) AS time_us, min(ts) AS first_ts, max(ts + dur) AS last_end,
               CASE WHEN lower(cat) = 'checkpoint' THEN count(*)
                    WHEN upper(cat) IN ('POSIX', 'STDIO') THEN 0
                    ELSE count(*) FILTER (WHERE lower(name) LIKE '%checkpoint%'
                                          AND lower(name) NOT LIKE '%init%')
               END AS checkpoint_events
        FROM ev WHERE k = 1 AND cat IS NOT NULL AND upper(cat) <> 'DFTRACER' GROUP BY cat""",
    "proctot": """
        SELECT hkey, any_value(host_inline) AS host_inline, pid, count(*) AS events, min(ts) AS first_ts,
               max(ts + dur) AS last_end, max(rank) AS rank,
               any_value(cmd_hash) FILTER (WHERE name = 'start' AND upper(cat) = 'DFTRACER') AS cmd_hash
        FROM ev WHERE k = 1 GROUP BY hkey, pid""",
    "procfam": f"SELECT hkey, pid, {_FAMILY_COLUMNS} FROM io GROUP BY hkey, pid",
    "steps": "SELECT DISTINCT epoch, step FROM ev WHERE k = 1 AND epoch IS NOT NULL",
    "epochspan": "SELECT hkey, bool_or(host_inline) AS host_inline, pid, epoch, min(ts) AS first_ts, "
    "max(ts + dur) AS last_end FROM ev WHERE k = 1 AND epoch IS NOT NULL GROUP BY hkey, pid, epoch",
    "meta": "SELECT name AS kind, mvalue AS h, mname AS v FROM ev WHERE k = 4 AND name IN ('FH', 'HH', 'SH') "
    "AND mvalue IS NOT NULL",
    "start": "SELECT version, cfg FROM ev "
    "WHERE k = 1 AND name IN ('start', 'end') AND upper(cat) = 'DFTRACER'",
}

_APP_SQL = """
    SELECT cat, name, count(*) AS count, sum(isize) AS size_sum, count(isize) AS sized FROM ev
    WHERE k = 1 AND cat IS NOT NULL AND upper(cat) NOT IN ('POSIX', 'STDIO', 'DFTRACER') GROUP BY ALL"""

_COMPUTE = (
    f"k = 1 AND (lower(name) LIKE '{S.COMPUTE_NAME_PATTERN}' "
    f"OR lower(cat) IN {S.sql_list(S.COMPUTE_CATEGORIES)})"
    f" AND upper(cat) NOT IN {_IO}"
)
_POSITION_COLUMNS = ("g_file", "ts", "pkind", "nbytes", "off", "setpos", "fk", "is_write", "dur")
_POSITION_DTYPES = (np.uint64, np.int64, np.int8, np.int64, np.int64, np.int64, np.uint64, np.bool_, np.int64)
#: the profile's per-thread columns: (host, process, thread, file) and (host, process, thread) keys,
#: and whether the call is a STDIO call (the layer above POSIX)
_STREAM_COLUMNS = ("g_tfile", "g_stream", "stdio")
_STREAM_DTYPES = (np.uint64, np.uint64, np.bool_)


def _fetch_arrow(rel: duckdb.DuckDBPyRelation) -> pa.Table:
    # DuckDB 2.x renamed Relation.arrow() to to_arrow_table().
    fetch = getattr(rel, "to_arrow_table", None) or rel.arrow
    table: pa.Table = fetch()
    return table


_BASE: tuple[int, duckdb.DuckDBPyConnection] | None = None  # (owning pid, connection)
_BASE_LOCK = threading.Lock()


def _connection() -> duckdb.DuckDBPyConnection:
    """A fresh connection (its own temp tables and registrations) to this process's one
    in-memory database: a cursor costs ~1 ms, a new database ~15 ms per file.  A forked
    child opens its own database rather than use the parent's copy."""
    global _BASE
    with _BASE_LOCK:
        if _BASE is None or _BASE[0] != os.getpid():
            _BASE = (os.getpid(), duckdb.connect(config={"threads": 1}))
        return _BASE[1].cursor()


@dataclass
class BatchReducer:
    """Folds parsed batches of one file into its partial; see the module docstring."""

    #: size of the time view's ring of fine bins (a power of two); None: no time view
    time_bins: int | None = None
    file_view: bool = False
    #: build the access-profile tables (see :mod:`profile`); needs ``file_view``
    profile: bool = False
    counts: dict[str, Any] = field(default_factory=dict)
    parts: dict[str, list[pa.Table]] = field(default_factory=dict)
    positions: list[dict[str, np.ndarray]] = field(default_factory=list)
    io_spans: list[dict[str, np.ndarray]] = field(default_factory=list)
    compute_spans: list[dict[str, np.ndarray]] = field(default_factory=list)

    #: set by :meth:`add_native`: the access and overlap tables came from the C scanner
    native: bool = False
    #: also keep each process's merged I/O and compute intervals (the ``spans`` table)
    spans: bool = False

    def __post_init__(self) -> None:
        self.con = _connection()
        self.con.execute("SET enable_progress_bar = false")
        #: Arrow tables registered under a name for the life of the connection
        self._held: dict[str, pa.Table] = {}

    def close(self) -> None:
        self.con.close()
        self._held.clear()

    def health(self, batch: pa.Table) -> dict[str, Any]:
        """Counts that say whether the batch parsed cleanly (and what it holds)."""
        self.con.register("ev", batch)
        try:
            cur = self.con.execute(_HEALTH_SQL)
            names = [d[0] for d in cur.description]
            return dict(zip(names, cur.fetchall()[0], strict=True))
        finally:
            self.con.unregister("ev")

    def add(self, batch: pa.Table, health: dict[str, Any]) -> None:
        """Fold one healthy batch in."""
        c = self.counts
        for key in (
            "rows",
            "events",
            "metadata_lines",
            "counter_events",
            "aggregated_events",
            "legacy_rows",
            "v2_rows",
        ):
            c[key] = c.get(key, 0) + int(health[key] or 0)
        for key, pick in (("first_ts", min), ("last_end", max)):
            if health[key] is not None:
                c[key] = health[key] if c.get(key) is None else pick(c[key], health[key])
        con = self.con
        con.register("ev", batch)
        io = _fetch_arrow(con.sql(_IO_SQL))
        con.register("io", io)
        try:
            for name, sql in _BATCH_SQL.items():
                if name in ("path", "pathproc") and not self.file_view:
                    continue
                self.parts.setdefault(name, []).append(_fetch_arrow(con.sql(sql)))
            if not self.file_view:
                # distinct accessed files, as 8-byte hashes, for the summary's files_accessed
                self.parts.setdefault("fks", []).append(
                    _fetch_arrow(con.sql("SELECT DISTINCT fk FROM io WHERE fkey IS NOT NULL"))
                )
            if self.profile:
                # application-level events (not POSIX/STDIO/tracer): what the program itself says it
                # did, with the size it logged; the access-pattern guard compares them between arms
                self.parts.setdefault("papp", []).append(_fetch_arrow(con.sql(_APP_SQL)))
            if self.time_bins:
                self._add_time_bins(con)
            # in the profile, each thread is a stream of its own (see _profile_rows)
            streams = (
                "hash(hkey, pid, tid, fkey) AS g_tfile, hash(hkey, pid, tid) AS g_stream, "
                "iface = 'STDIO' AS stdio, "
                if self.profile
                else ""
            )
            self.positions.append(
                con.execute(
                    f"SELECT {streams}g_file, ts, pkind, COALESCE(nbytes, "
                    "-1) AS nbytes, COALESCE(off, -1) AS off, "
                    f"setpos, fk, fam = 'write' AS is_write, dur FROM io WHERE pkind <> {V.OTHER}"
                ).fetchnumpy()
            )
            self.io_spans.append(con.execute("SELECT g_proc AS g, ts, ts + dur AS e FROM io").fetchnumpy())
            self.compute_spans.append(
                con.execute(
                    f"SELECT hash(hkey, pid) AS g, ts, ts + dur AS e FROM ev WHERE {_COMPUTE}"
                ).fetchnumpy()
            )
        finally:
            con.unregister("io")
            con.unregister("ev")

    def _add_time_bins(self, con: duckdb.DuckDBPyConnection) -> None:
        """Bin this batch's I/O calls by ``ts >> shift`` (the absolute power-of-two grid).

        The shift is the least one at which the file's I/O calls so far span fewer than
        ``time_bins`` bins; it only grows, so earlier batches are coarsened to the final shift
        in :meth:`finish` (exactly: integer sums).  The C scanner keeps the same grid in a ring.
        """
        assert self.time_bins is not None
        lo, hi = con.execute("SELECT min(ts), max(ts) FROM io").fetchall()[0]
        if lo is None:
            return
        c = self.counts
        c["time_lo"] = lo if c.get("time_lo") is None else min(c["time_lo"], lo)
        c["time_hi"] = hi if c.get("time_hi") is None else max(c["time_hi"], hi)
        shift = int(c.get("time_shift", 0))
        while (c["time_hi"] >> shift) - (c["time_lo"] >> shift) >= self.time_bins:
            shift += 1
        c["time_shift"] = shift
        self.parts.setdefault("time", []).append(
            _fetch_arrow(
                con.sql(
                    f"SELECT {shift} AS shift, ts >> {shift} AS bin, "
                    "fam, count(*) AS count, sum(nbytes) AS bytes, "
                    "sum(dur) AS time_us FROM io GROUP BY 2, 3"
                )
            )
        )

    def add_native(self, counts: dict[str, Any], tables: dict[str, pa.Table]) -> None:
        """Take a whole file's tables from the native scanner (:mod:`native`) instead of batches.

        They are the per-batch tables above, already summed over the file, plus the results
        of the position and overlap passes, keyed by the scanner's own ids; only the keys
        that leave this file (``fks``, the per-process overlap key) are turned into DuckDB's
        hashes here, on the small distinct tables, so partials from both paths merge.
        """
        self.native = True
        self.counts = dict(counts)
        tables = dict(tables)
        path, acc, ovl = tables.pop("path"), tables.pop("acc"), tables.pop("ovl")
        if self.time_bins is None:
            tables.pop("time", None)
        self.parts = {name: [table] for name, table in tables.items()}
        con = self.con
        con.register("path_native", path)
        con.register("ovl_native", ovl)
        procs = tables["proctot"]
        con.register(
            "procs_native",
            pa.table(
                {"g": pa.array(range(procs.num_rows), pa.int64()), "hkey": procs["hkey"], "pid": procs["pid"]}
            ),
        )
        # The scanner's tables are final: register them instead of copying them into DuckDB
        # (acc has a row per accessed file, meta one per distinct (kind, hash) already).
        self._hold("acc", acc)
        try:
            if self.file_view:
                self.parts["path"] = [path]
            else:  # distinct keys hash to distinct values but for collisions: finish's DISTINCT
                self.parts["fks"] = [_fetch_arrow(con.sql("SELECT hash(fkey) AS fk FROM path_native"))]
            con.execute(
                "CREATE TEMP TABLE ovl AS SELECT hash(p.hkey, p.pid) AS g, o.io_wall_us, o.overlap_us, "
                "o.compute_wall_us FROM ovl_native o JOIN procs_native p ON p.g = o.g"
            )
        finally:
            for name in ("path_native", "ovl_native", "procs_native"):
                con.unregister(name)

    @staticmethod
    def _native_path_sql() -> str:
        """The scanner's path rows are final (one per key, named, with processes and pattern counts)."""
        sums = ", ".join(
            f"{f}_{m}"
            for f in S.FAMILIES
            for m in ("count", "bytes", "time_us")
            if not (m == "bytes" and f in ("metadata", "sync"))
        )
        return (
            "SELECT CASE WHEN is_path THEN fkey ELSE COALESCE(name, 'fhash:' || fkey) END AS path, "
            f"hash(fkey) AS pkey, {sums}, processes, consecutive, sequential, random FROM b_path"
        )

    def _hold(self, name: str, table: pa.Table) -> None:
        self._held[name] = table
        self.con.register(name, table)

    # ----------------------------------------------------------------------------------
    def finish(self, rank_from_name: int | None) -> tuple[dict[str, pa.Table], dict[str, Any]]:
        """Whole-file passes and re-aggregation: (tables, scalars)."""
        con = self.con
        for name in (
            "meta",
            "fam",
            "agg",
            "hist",
            "path",
            "pathproc",
            "layer",
            "proctot",
            "procfam",
            "steps",
            "start",
            "time",
            "fks",
            "iface",
            "names",
            "epochspan",
        ):
            batches = self.parts.get(name)
            if batches:
                con.register(f"b_{name}", pa.concat_tables(batches, promote_options="permissive"))
        if not self.parts.get("meta"):  # no batch was added
            return {}, {}
        if self.native:  # the scanner keeps one row per (kind, h): the first non-null v
            self._hold("hmap", pa.concat_tables(self.parts["meta"]))
        else:
            con.execute(
                "CREATE TEMP TABLE hmap AS SELECT kind, h, any_value(v) AS v FROM b_meta GROUP BY kind, h"
            )
        if not self.native:
            self._positions()
            self._overlap()
        host = "COALESCE(hh.v, t.hkey, '')"
        host_join = "LEFT JOIN hmap hh ON hh.kind = 'HH' AND hh.h = t.hkey AND NOT t.host_inline"
        rank = "NULL" if rank_from_name is None else str(rank_from_name)
        out = {
            "fam": """
                SELECT b.fam, sum(count) AS count, sum(bytes) AS bytes, sum(sized) AS sized,
                       sum(time_us) AS time_us, sum(small) AS small, sum(small_time_us) AS small_time_us,
                       sum(bw_sum) AS bw_sum, sum(bw_n) AS bw_n,
                       COALESCE(any_value(p.consecutive), 0) AS consecutive,
                       COALESCE(any_value(p.sequential), 0) AS sequential,
                       COALESCE(any_value(p.random), 0) AS random,
                       COALESCE(any_value(p.positioned), 0) AS positioned,
                       COALESCE(any_value(p.misaligned), 0) AS misaligned,
                       COALESCE(any_value(p.random_time_us), 0) AS random_time_us,
                       COALESCE(any_value(p.misaligned_time_us), 0) AS misaligned_time_us
                FROM b_fam b LEFT JOIN (SELECT fam, sum(consecutive) AS consecutive,
                                               sum(sequential) AS sequential,
                                               sum(random) AS random, sum(positioned) AS positioned,
                                               sum(misaligned) AS misaligned,
                                               sum(random_time_us) AS random_time_us,
                                               sum(misaligned_time_us) AS misaligned_time_us
                                        FROM acc GROUP BY fam) p ON p.fam = b.fam
                GROUP BY b.fam""",
            "agg": "SELECT fam, sum(records) AS records, sum(count) AS count, sum(bytes) AS bytes, "
            "sum(time_us) AS time_us FROM b_agg GROUP BY fam",
            "hist": "SELECT fam, sbin, sum(count) AS count, "
            "sum(bytes) AS bytes FROM b_hist GROUP BY fam, sbin",
            "names": "SELECT cat, name, sum(count) AS count, "
            "sum(time_us) AS time_us FROM b_names GROUP BY ALL",
            "epochspan": f"SELECT {host} AS host, t.pid, t.epoch, min(t.first_ts) "
            "AS first_ts, max(t.last_end) AS last_end "
            f"FROM b_epochspan t {host_join} GROUP BY ALL",
            "iface": "SELECT iface, fam, sum(count) AS count, sum(bytes) AS bytes, sum(time_us) AS time_us "
            "FROM b_iface GROUP BY iface, fam",
            "path": self._native_path_sql()
            if self.native
            else f"""
                WITH f AS (SELECT fkey, any_value(fk) AS fk, bool_or(is_path) AS is_path, {_FAMILY_SUMS}
                           FROM b_path GROUP BY fkey),
                     q AS (SELECT fk, sum(consecutive) AS consecutive, sum(sequential) AS sequential,
                                  sum(random) AS random FROM acc GROUP BY fk),
                     n AS (SELECT fk, count(DISTINCT g_proc) AS processes FROM b_pathproc GROUP BY fk)
                SELECT CASE WHEN f.is_path THEN f.fkey ELSE COALESCE(fh.v, 'fhash:' || f.fkey) END AS path,
                       hash(f.fkey) AS pkey, f.* EXCLUDE (fkey, fk, is_path),
                       COALESCE(n.processes, 0) AS processes,
                       COALESCE(q.consecutive, 0) AS consecutive, COALESCE(q.sequential, 0) AS sequential,
                       COALESCE(q.random, 0) AS random
                FROM f LEFT JOIN q ON q.fk = f.fk LEFT JOIN n ON n.fk = f.fk
                LEFT JOIN hmap fh ON fh.kind = 'FH' AND fh.h = f.fkey AND NOT f.is_path""",
            "layer": "SELECT cat, sum(count) AS count, sum(time_us) AS time_us, min(first_ts) AS first_ts, "
            "max(last_end) AS last_end FROM b_layer GROUP BY cat",
            "proc": f"""
                WITH t AS (SELECT hkey, bool_or(host_inline) AS host_inline, pid, sum(events) AS events,
                                  min(first_ts) AS first_ts, max(last_end) AS last_end,
                                  COALESCE(max(rank), {rank}) AS rank, any_value(cmd_hash) AS cmd_hash
                           FROM b_proctot GROUP BY hkey, pid),
                     fam AS (SELECT hkey, pid, {_FAMILY_SUMS} FROM b_procfam GROUP BY hkey, pid)
                SELECT {host} AS host, t.pid, t.rank, sh.v AS cmd,
                       t.cmd_hash, t.events, t.first_ts, t.last_end,
                       COALESCE(fam.read_count, 0) AS read_count, fam.read_bytes, fam.read_time_us,
                       COALESCE(fam.write_count, 0) AS write_count, fam.write_bytes, fam.write_time_us,
                       COALESCE(fam.metadata_count, 0) AS metadata_count, fam.metadata_time_us,
                       COALESCE(fam.sync_count, 0) AS sync_count, fam.sync_time_us,
                       COALESCE(ovl.io_wall_us, 0) AS io_wall_us,
                       COALESCE(ovl.io_wall_us, 0) - COALESCE(ovl.overlap_us, 0) AS unoverlapped_us,
                       COALESCE(ovl.compute_wall_us, 0) AS compute_wall_us
                FROM t
                LEFT JOIN fam ON fam.hkey IS NOT DISTINCT FROM t.hkey AND fam.pid IS NOT DISTINCT FROM t.pid
                LEFT JOIN ovl ON ovl.g = hash(t.hkey, t.pid)
                {host_join}
                LEFT JOIN hmap sh ON sh.kind = 'SH' AND sh.h = t.cmd_hash""",
        }
        if not self.file_view:
            del out["path"]
        tables: dict[str, pa.Table] = {}
        for name, sql in out.items():
            tables[name] = _fetch_arrow(con.sql(sql))
        if self.parts.get("fks"):
            tables["fks"] = _fetch_arrow(con.sql("SELECT DISTINCT fk FROM b_fks"))
        if self.spans and "spans_rows" in self._held:
            tables["spans"] = _fetch_arrow(
                con.sql(
                    f"SELECT {host} AS host, t.pid, r.kind, r.s, r.e FROM spans_rows r "
                    "JOIN (SELECT DISTINCT hkey, pid, host_inline "
                    "FROM b_proctot) t ON r.g = hash(t.hkey, t.pid) "
                    f"{host_join}"
                )
            )
        if self.profile:
            tables.update(self._profile_tables())
        if self.parts.get("time"):
            # the native table is final; batches are coarsened to the file's last (largest) shift
            final = 0 if self.native else int(self.counts["time_shift"])
            shifted = "bin" if self.native else f"bin >> ({final} - shift)"
            tables["time"] = _fetch_arrow(
                con.sql(
                    f"SELECT {shifted} AS bin, fam, sum(count) AS count, "
                    "sum(bytes) AS bytes, sum(time_us) AS time_us "
                    "FROM b_time GROUP BY 1, 2 ORDER BY 1, 2"
                )
            )
        scalars: dict[str, Any] = {}
        io_row = con.execute(
            "SELECT COALESCE(sum(count), 0), COALESCE(sum(no_args), 0) FROM b_fam"
        ).fetchall()[0]
        scalars["io_events"], scalars["io_events_without_args"] = int(io_row[0]), int(io_row[1])
        ckpt = con.execute("SELECT COALESCE(sum(checkpoint_events), 0) FROM b_layer").fetchall()[0]
        scalars["checkpoint_events"] = int(ckpt[0])
        if self.parts.get("steps"):
            row = con.execute(
                "SELECT list(DISTINCT epoch), count(DISTINCT (epoch, step)) FILTER (WHERE step IS NOT NULL) "
                "FROM b_steps"
            ).fetchall()[0]
            scalars["epochs"] = sorted(str(e) for e in (row[0] or []))
            scalars["steps"] = int(row[1] or 0)
        if self.parts.get("start"):
            start = con.execute("SELECT version, cfg FROM b_start").fetchall()
            scalars["dftracer_version"] = next((v for v, _ in start if v), None)
            scalars["tracer_config"] = next((c for _, c in start if c), None)
        # command lines by hash: a forked child's command may be defined in its parent's file only
        scalars["sh_map"] = dict(
            con.execute("SELECT h, v FROM hmap WHERE kind = 'SH' AND v IS NOT NULL").fetchall()
        )
        if self.file_view:
            # names of file hashes this file defines but never accesses, for the file view's rows of
            # other trace files (2.x hashes are global); the hashes it accesses are named in its own rows
            tables["fh"] = _fetch_arrow(
                con.sql(
                    "SELECT h, v FROM hmap WHERE kind = 'FH' AND h "
                    "NOT IN (SELECT fkey FROM b_path WHERE NOT is_path)"
                )
            )
        return tables, scalars

    def _positions(self) -> None:
        cols: dict[str, np.ndarray] = {}
        columns = list(zip(_POSITION_COLUMNS, _POSITION_DTYPES, strict=True))
        if self.profile:
            columns += list(zip(_STREAM_COLUMNS, _STREAM_DTYPES, strict=True))
        for key, dtype in columns:
            # column by column, dropping each batch's piece once copied: peak ~1x, not 2x
            pieces: list[np.ndarray] = [np.asarray(p.pop(key), dtype=dtype) for p in self.positions]
            cols[key] = np.concatenate(pieces) if pieces else np.zeros(0, dtype=dtype)
            del pieces
        self.positions.clear()
        res = V.classify_accesses(
            cols["g_file"], cols["ts"], cols["pkind"], cols["nbytes"], cols["off"], cols["setpos"]
        )
        keep = res.start >= 0  # accesses with a known start offset (classified ones are a subset)
        acc = pa.table(
            {
                "fk": cols["fk"][keep],
                "is_write": cols["is_write"][keep],
                "consecutive": res.consecutive[keep],
                "sequential": res.sequential[keep],
                "random": res.random[keep],
                "misaligned": (res.start[keep] % S.ALIGNMENT_BYTES) != 0,
                "dur": cols["dur"][keep],
            }
        )
        if self.profile:
            self._profile_rows(cols, res.start)
        self.con.register("acc_rows", acc)
        self.con.execute(
            "CREATE TEMP TABLE acc AS SELECT fk, CASE WHEN is_write THEN 'write' ELSE 'read' END AS fam, "
            "count(*) FILTER (WHERE consecutive) AS consecutive, "
            "count(*) FILTER (WHERE sequential) AS sequential, "
            "count(*) FILTER (WHERE random) AS random, count(*) AS positioned, "
            "count(*) FILTER (WHERE misaligned) AS misaligned, "
            "sum(dur) FILTER (WHERE random) AS random_time_us, "
            "sum(dur) FILTER (WHERE misaligned) AS misaligned_time_us FROM acc_rows GROUP BY ALL"
        )
        self.con.unregister("acc_rows")

    def _profile_rows(self, cols: dict[str, np.ndarray], start: np.ndarray) -> None:
        """Per (file, direction): disjoint byte segments, calls, bytes, first access, size bins."""
        fk, is_write, nb, ts, dur = cols["fk"], cols["is_write"], cols["nbytes"], cols["ts"], cols["dur"]
        access = cols["pkind"] != V.SETTER
        pairs = np.stack([fk[access], is_write[access].astype(np.uint64)], axis=1)
        keys, inv = (
            np.unique(pairs, axis=0, return_inverse=True)
            if len(pairs)
            else (np.zeros((0, 2), np.uint64), np.zeros(0, np.int64))
        )
        inv = inv.reshape(-1).astype(np.uint64)
        a_start, a_nb, a_ts, a_dur = start[access], nb[access], ts[access], dur[access]
        ranged = (a_start >= 0) & (a_nb > 0)
        sg, slo, shi = V.interval_union(inv[ranged], a_start[ranged], a_start[ranged] + a_nb[ranged])
        sg_i = sg.astype(np.int64)
        self.con.register(
            "pseg_rows",
            pa.table(
                {
                    "fk": keys[sg_i, 0] if len(sg_i) else np.zeros(0, np.uint64),
                    "is_write": keys[sg_i, 1].astype(bool) if len(sg_i) else np.zeros(0, bool),
                    "lo": slo,
                    "hi": shi,
                }
            ),
        )
        self.con.execute("CREATE TEMP TABLE pseg AS SELECT * FROM pseg_rows")
        self.con.unregister("pseg_rows")
        self._request_rows(cols, start)
        sized = a_nb >= 0
        sbin = np.searchsorted(
            np.array([lo for _, lo in S.SIZE_BINS[1:]], dtype=np.int64), a_nb, side="right"
        )
        self.con.register(
            "pacc_rows",
            pa.table(
                {
                    "g": inv,
                    "nbytes": np.where(sized, a_nb, 0),
                    "sized": sized,
                    "ranged": ranged,
                    "ts": a_ts,
                    "sbin": sbin.astype(np.int64),
                    "dur": a_dur,
                }
            ),
        )
        self.con.register(
            "pkeys",
            pa.table(
                {
                    "g": np.arange(len(keys), dtype=np.uint64),
                    "fk": keys[:, 0] if len(keys) else np.zeros(0, np.uint64),
                    "is_write": keys[:, 1].astype(bool) if len(keys) else np.zeros(0, bool),
                }
            ),
        )
        self.con.execute(
            "CREATE TEMP TABLE pacc AS SELECT k.fk, k.is_write, count(*) AS calls, sum(r.nbytes) AS bytes, "
            "count(*) FILTER (WHERE r.ranged) AS ranged, min(r.ts) AS first_ts "
            "FROM pacc_rows r JOIN pkeys k USING (g) GROUP BY ALL"
        )
        self.con.execute(
            "CREATE TEMP TABLE psize AS SELECT k.fk, k.is_write, r.sbin, count(*) AS count, "
            "sum(r.nbytes) AS bytes, sum(r.dur) AS time_us "
            "FROM pacc_rows r JOIN pkeys k USING (g) WHERE r.sized GROUP BY ALL"
        )
        self.con.unregister("pacc_rows")
        self.con.unregister("pkeys")

    def _request_rows(self, cols: dict[str, np.ndarray], start: np.ndarray) -> None:
        """Every data request with its thread (``preq``): the logical pattern is judged per stream.

        A thread's unpositioned read/write advances from its own last open or seek (threads of one
        process seeking and reading on their own descriptors); when the thread set no position
        itself (a descriptor opened by another thread) the process-wide position is used.
        """
        own = V.classify_accesses(
            cols["g_tfile"], cols["ts"], cols["pkind"], cols["nbytes"], cols["off"], cols["setpos"]
        ).start
        at = np.where(own >= 0, own, start)
        keep = (cols["pkind"] != V.SETTER) & (cols["nbytes"] > 0)
        order = np.lexsort((cols["ts"][keep], cols["g_stream"][keep]))
        self.con.register(
            "preq_rows",
            pa.table(
                {
                    name: cols[key][keep][order] if key != "start" else at[keep][order]
                    for name, key in (
                        ("fk", "fk"),
                        ("is_write", "is_write"),
                        ("stream", "g_stream"),
                        ("stdio", "stdio"),
                        ("ts", "ts"),
                        ("start", "start"),
                        ("nbytes", "nbytes"),
                    )
                }
            ),
        )
        self.con.execute("CREATE TEMP TABLE preq AS SELECT * FROM preq_rows")
        self.con.unregister("preq_rows")

    def _profile_tables(self) -> dict[str, pa.Table]:
        """The access profile of this file: per accessed file and direction, the byte ranges
        touched (already merged into disjoint segments), call counts, bytes, first access and
        transfer sizes; application events; and which path each file key names."""
        con = self.con
        out = {
            name: _fetch_arrow(con.sql(f"SELECT * FROM {name}")) for name in ("pseg", "pacc", "psize", "preq")
        }
        con.register(
            "b_papp_all",
            pa.concat_tables(
                self.parts.get("papp")
                or [
                    _fetch_arrow(
                        con.sql(
                            "SELECT NULL::VARCHAR AS cat, NULL::VARCHAR AS "
                            "name, 0::BIGINT AS count, 0::HUGEINT AS size_sum, "
                            "0::BIGINT AS sized WHERE false"
                        )
                    )
                ],
                promote_options="permissive",
            ),
        )
        out["papp"] = _fetch_arrow(
            con.sql(
                "SELECT cat, name, sum(count) AS count, sum(size_sum) AS size_sum, sum(sized) AS sized "
                "FROM b_papp_all GROUP BY ALL"
            )
        )
        con.unregister("b_papp_all")
        out["pfk"] = _fetch_arrow(
            con.sql(
                "SELECT DISTINCT p.fk, CASE WHEN p.is_path THEN p.fkey "
                "ELSE COALESCE(fh.v, 'fhash:' || p.fkey) END AS path "
                "FROM b_path p LEFT JOIN hmap fh ON fh.kind = 'FH' AND fh.h = p.fkey AND NOT p.is_path"
            )
        )
        return out

    def _overlap(self) -> None:
        def cat(parts: list[dict[str, np.ndarray]], key: str, dtype: Any) -> np.ndarray:
            return (
                np.concatenate([np.asarray(p[key], dtype=dtype) for p in parts])
                if parts
                else np.zeros(0, dtype)
            )

        per = V.union_and_overlap(
            cat(self.io_spans, "g", np.uint64),
            cat(self.io_spans, "ts", np.int64),
            cat(self.io_spans, "e", np.int64),
            cat(self.compute_spans, "g", np.uint64),
            cat(self.compute_spans, "ts", np.int64),
            cat(self.compute_spans, "e", np.int64),
        )
        if self.spans:
            rows = [
                (g, 0, s, e)
                for g, s, e in _islands(
                    cat(self.io_spans, "g", np.uint64),
                    cat(self.io_spans, "ts", np.int64),
                    cat(self.io_spans, "e", np.int64),
                )
            ]
            rows += [
                (g, 1, s, e)
                for g, s, e in _islands(
                    cat(self.compute_spans, "g", np.uint64),
                    cat(self.compute_spans, "ts", np.int64),
                    cat(self.compute_spans, "e", np.int64),
                )
            ]
            table = pa.table(
                {
                    "g": pa.array([r[0] for r in rows], pa.uint64()),
                    "kind": pa.array([r[1] for r in rows], pa.int8()),
                    "s": pa.array([r[2] for r in rows], pa.int64()),
                    "e": pa.array([r[3] for r in rows], pa.int64()),
                }
            )
            self._hold("spans_rows", table)
        self.io_spans.clear()
        self.compute_spans.clear()
        keys = list(per)
        ovl = pa.table(
            {
                "g": pa.array(keys, type=pa.uint64()),
                "io_wall_us": pa.array([per[k][0] for k in keys], type=pa.int64()),
                "overlap_us": pa.array([per[k][1] for k in keys], type=pa.int64()),
                "compute_wall_us": pa.array([per[k][2] for k in keys], type=pa.int64()),
            }
        )
        self.con.register("ovl_rows", ovl)
        self.con.execute("CREATE TEMP TABLE ovl AS SELECT * FROM ovl_rows")
        self.con.unregister("ovl_rows")


def _islands(g: np.ndarray, s: np.ndarray, e: np.ndarray) -> list[tuple[int, int, int]]:
    """Disjoint intervals of the union of [s, e) per group g: (g, start, end), touching ones merged."""
    out: list[tuple[int, int, int]] = []
    if not len(g):
        return out
    order = np.lexsort((s, g))
    cur_g, cur_s, cur_e = None, 0, 0
    for i in order:
        gi, si, ei = int(g[i]), int(s[i]), int(e[i])
        if gi != cur_g or si > cur_e:
            if cur_g is not None:
                out.append((cur_g, cur_s, cur_e))
            cur_g, cur_s, cur_e = gi, si, ei
        else:
            cur_e = max(cur_e, ei)
    assert cur_g is not None
    out.append((cur_g, cur_s, cur_e))
    return out
