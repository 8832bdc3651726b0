"""WisIO-style perspectives on the same analysis: by file, process, time window, layer.

Each view is a list of plain rows (JSON-ready), merged exactly from the per-file partials.
The time view needs no second pass: each file bins its I/O calls on the absolute
power-of-two grid (``ts >> shift``, the least shift at which its calls span fewer than
:func:`fine_bins` bins), and the windows are one coarser step of the same grid, chosen here
once the job's start and end are known (see docs/analyze.md, "What each number means").
"""

from __future__ import annotations

from typing import Any

import duckdb
import pyarrow as pa

from dftune.core.facts.paths import NO_RUN, RunPaths, class_sql
from dftune.tools.trace.merge import concat_partials, connection, query_rows
from dftune.tools.trace.model import Analysis, PathClassStats
from dftune.tools.trace.reader import FilePartial

VIEWS = ("summary", "file", "proc", "time", "layer")
US = 1_000_000.0
MIB = float(1 << 20)
#: Rows kept in the file view (largest I/O time first); the total is reported alongside.
FILE_VIEW_LIMIT = 1000
#: The time view's process x window heatmap: at most this many processes (the busiest) and windows.
HEATMAP_MAX_PROCESSES = 256
HEATMAP_MAX_WINDOWS = 400

_FAMILY_SUMS = """
  sum(read_count) AS read_count, sum(read_bytes) AS read_bytes, sum(read_time_us) / 1e6 AS read_time_s,
  sum(write_count) AS write_count, sum(write_bytes) AS write_bytes, sum(write_time_us) / 1e6 AS write_time_s,
  sum(metadata_count) AS metadata_count, sum(metadata_time_us) / 1e6 AS metadata_time_s,
  sum(sync_count) AS sync_count, sum(sync_time_us) / 1e6 AS sync_time_s,
  (COALESCE(sum(read_time_us), 0) + COALESCE(sum(write_time_us), 0) + COALESCE(sum(metadata_time_us), 0)
   + COALESCE(sum(sync_time_us), 0)) / 1e6 AS io_time_s
"""


def fine_bins(windows: int) -> int:
    """Fine time bins each file keeps: the power of two above ``windows`` (enough that the
    windows' grid step is never finer than any file's, so windows merge bins exactly)."""
    return max(2, 1 << windows.bit_length())


def build_view(
    name: str, partials: list[FilePartial], analysis: Analysis, *, time_windows: int = 20
) -> dict[str, Any]:
    """Rows of one view; ``summary`` needs none (it is the analysis itself)."""
    con = connection()
    try:
        if name == "time":
            return _time_view(con, partials, time_windows)
        builders = {"file": _file_view, "proc": _proc_view, "layer": _layer_view}
        return builders[name](con, partials, analysis)
    finally:
        con.close()


def _rows(
    con: duckdb.DuckDBPyConnection, partials: list[FilePartial], table: str, sql: str
) -> list[dict[str, Any]]:
    names, rows = query_rows(con, concat_partials(partials, table), sql)
    return [dict(zip(names, _clean(row), strict=True)) for row in rows]


def _clean(row: tuple[Any, ...]) -> list[Any]:
    out: list[Any] = []
    for v in row:
        if isinstance(v, float):
            v = round(v, 6)
        elif v is not None and not isinstance(v, int | str | bool):
            v = int(v) if hasattr(v, "__int__") else str(v)
        out.append(v)
    return out


def _file_view(
    con: duckdb.DuckDBPyConnection, partials: list[FilePartial], analysis: Analysis
) -> dict[str, Any]:
    """Accessed files, most I/O time first (top :data:`FILE_VIEW_LIMIT`; the total alongside).

    Rows merge across trace files by ``pkey``, the hash of the file's key (its name, or its
    2.x hash, which is global), so a file named in one trace file and only hashed in another is
    one row.  Only the files that can reach the top get all their sums: a narrow pass ranks
    every file by I/O time first (everything tied with the last kept one is kept too); when no
    file is in two trace files, the rows themselves are ranked.
    """
    paths = concat_partials(partials, "path")
    if paths is None:
        return {"total": 0, "rows": []}
    io = (
        "COALESCE(read_time_us, 0) + COALESCE(write_time_us, 0) + "
        "COALESCE(metadata_time_us, 0) + COALESCE(sync_time_us, 0)"
    )
    con.register("t", paths)
    try:
        total = con.execute("SELECT count(DISTINCT pkey) FROM t").fetchall()[0][0]
        if total == paths.num_rows:  # no file is in two trace files: each row is already its total
            ranked, kept = f"(SELECT {io} AS io FROM t)", f"{io} >= {{cut}}"
        else:
            con.execute(f"CREATE TEMP TABLE g AS SELECT pkey, sum({io}) AS io FROM t GROUP BY pkey")
            ranked, kept = "g", "pkey IN (SELECT pkey FROM g WHERE io >= {cut})"
        cut = con.execute(
            f"SELECT io FROM {ranked} ORDER BY io DESC LIMIT 1 OFFSET {FILE_VIEW_LIMIT - 1}"
        ).fetchall()
        keep = f"WHERE {kept.format(cut=cut[0][0])}" if cut else ""
        cur = con.execute(f"""
            WITH r AS (SELECT * FROM t {keep}),
                 g AS (SELECT pkey,
                              COALESCE(min(path) FILTER (WHERE NOT starts_with(path, 'fhash:')),
                                       min(path)) AS path,
                              sum(processes) AS processes, {_FAMILY_SUMS},
                              CASE WHEN sum(sequential) + sum(random) > 0
                                   THEN round(100.0 * sum(sequential) / (sum(sequential) + sum(random)), 2)
                              END AS seq_pct,
                              CASE WHEN sum(sequential) + sum(random) > 0
                                   THEN round(100.0 * sum(random) / (sum(sequential) + sum(random)), 2)
                              END AS rand_pct
                       FROM r GROUP BY pkey)
            SELECT * EXCLUDE (pkey) FROM g ORDER BY io_time_s DESC, path LIMIT {FILE_VIEW_LIMIT}""")
        names = [d[0] for d in cur.description]
        rows = [dict(zip(names, _clean(row), strict=True)) for row in cur.fetchall()]
    finally:
        con.execute("DROP TABLE IF EXISTS g")
        con.unregister("t")
    unresolved = [r for r in rows if str(r["path"]).startswith("fhash:")]
    fh = concat_partials(partials, "fh") if unresolved else None
    if fh is not None:  # a hash only another trace file's metadata names (2.x hashes are global)
        names_of = _names(con, fh, [str(r["path"])[6:] for r in unresolved])
        for r in unresolved:
            r["path"] = names_of.get(str(r["path"])[6:], r["path"])
    return {"total": int(total), "rows": rows}


def _names(con: duckdb.DuckDBPyConnection, fh: pa.Table, hashes: list[str]) -> dict[str, str]:
    con.register("fh", fh)
    con.register("want", pa.table({"h": pa.array(hashes, pa.string())}))
    try:
        return dict(
            con.execute("SELECT h, any_value(v) FROM fh SEMI JOIN want USING (h) GROUP BY h").fetchall()
        )
    finally:
        con.unregister("fh")
        con.unregister("want")


def _proc_view(
    con: duckdb.DuckDBPyConnection, partials: list[FilePartial], analysis: Analysis
) -> dict[str, Any]:
    rows = _rows(
        con,
        partials,
        "proc",
        f"""
        SELECT host, pid, max(rank) AS rank, any_value(cmd) AS cmd, sum(events) AS events,
               (max(last_end) - min(first_ts)) / 1e6 AS lifetime_s, {_FAMILY_SUMS},
               sum(io_wall_us) / 1e6 AS io_wall_s, sum(unoverlapped_us) / 1e6 AS unoverlapped_io_s,
               sum(compute_wall_us) / 1e6 AS compute_wall_s
        FROM t GROUP BY host, pid ORDER BY io_time_s DESC, host, pid""",
    )
    return {"total": len(rows), "rows": rows}


def window_shift(origin: int, end: int, windows: int, finest: int = 0) -> tuple[int, int]:
    """(shift, count): the least grid step ``2**shift`` us (not finer than ``finest``) at which
    the job's span [origin, end) falls in at most ``windows`` aligned windows, and their count."""

    def count(shift: int) -> int:
        return ((end - 1) >> shift) - (origin >> shift) + 1 if end > origin else 1

    shift = finest
    while count(shift) > windows and shift < 63:  # ts >> 63 is -1 or 0: a span across 0 keeps 2
        shift += 1
    return shift, count(shift)


def _time_view(con: duckdb.DuckDBPyConnection, partials: list[FilePartial], windows: int) -> dict[str, Any]:
    firsts = [p.scalars["first_ts"] for p in partials if p.scalars.get("first_ts") is not None]
    lasts = [p.scalars["last_end"] for p in partials if p.scalars.get("last_end") is not None]
    binned = [p for p in partials if p.scalars.get("time_shift") is not None and "time" in p.tables]
    if not firsts or not lasts:
        return {"origin_us": None, "window_s": 0.0, "windows": 0, "shift": None, "rows": []}
    origin, end = int(min(firsts)), int(max(lasts))
    shift, nwin = window_shift(
        origin, end, windows, max((int(p.scalars["time_shift"]) for p in binned), default=0)
    )
    first = origin >> shift
    tables = []
    for fi, p in enumerate(binned):  # each file's bins, one exact coarsening away from the windows' grid
        t = p.tables["time"]
        t = t.append_column("up", pa.array([shift - int(p.scalars["time_shift"])] * t.num_rows, pa.int64()))
        tables.append(t.append_column("fi", pa.array([fi] * t.num_rows, pa.int64())))
    table = concat_partials([FilePartial(path="", tables={"time": t}) for t in tables], "time")
    names, raw = query_rows(
        con,
        table,
        f"""
        SELECT least((bin >> up) - {first}, {nwin - 1}) AS w,
               sum(count) FILTER (WHERE fam = 'read') AS read_count,
               sum(bytes) FILTER (WHERE fam = 'read') AS read_bytes,
               sum(count) FILTER (WHERE fam = 'write') AS write_count,
               sum(bytes) FILTER (WHERE fam = 'write') AS write_bytes,
               sum(count) FILTER (WHERE fam = 'metadata') AS metadata_count,
               COALESCE(sum(time_us) FILTER (WHERE fam = 'read'), 0) / 1e6 AS read_time_s,
               COALESCE(sum(time_us) FILTER (WHERE fam = 'write'), 0) / 1e6 AS write_time_s,
               COALESCE(sum(time_us) FILTER (WHERE fam = 'metadata'), 0) / 1e6 AS metadata_time_s,
               sum(time_us) / 1e6 AS io_time_s
        FROM t GROUP BY 1 ORDER BY 1""",
    )
    rows = []
    for r in (dict(zip(names, _clean(row), strict=True)) for row in raw):
        w = int(r.pop("w"))
        # a window is one step of the absolute grid, clipped to the job at both ends
        lo, hi = max((first + w) << shift, origin), min((first + w + 1) << shift, end)
        moved = (r["read_bytes"] or 0) + (r["write_bytes"] or 0)
        rows.append(
            {
                "start_s": round((lo - origin) / US, 6),
                "end_s": round((hi - origin) / US, 6),
                **r,
                "bandwidth_mib_s": round(moved / MIB / ((hi - lo) / US), 3) if hi > lo else None,
            }
        )
    out: dict[str, Any] = {
        "origin_us": origin,
        "window_s": (1 << shift) / US,
        "windows": nwin,
        "shift": shift,
        "rows": rows,
    }
    if 0 < nwin <= HEATMAP_MAX_WINDOWS and binned:
        out["heatmap"] = _process_heatmap(con, table, binned, first, nwin, shift, origin, end)
    return out


def _process_heatmap(
    con: duckdb.DuckDBPyConnection,
    table: pa.Table | None,
    binned: list[FilePartial],
    first: int,
    nwin: int,
    shift: int,
    origin: int,
    end: int,
) -> dict[str, Any]:
    """Process x window grids (bytes read, bytes written, seconds inside I/O calls), the dftracer
    counterpart of Darshan's DXT heatmap: dftracer writes one trace file per process, so each file's
    bins are one process's row. Rows are the busiest :data:`HEATMAP_MAX_PROCESSES` by I/O time, in
    rank (else pid) order; ``window_span_s`` is each window's length (the first and last are clipped
    to the job), so a cell's I/O time over its span is the share of that window spent in I/O calls."""
    _, raw = query_rows(
        con,
        table,
        f"""
        SELECT fi, least((bin >> up) - {first}, {nwin - 1}) AS w,
               COALESCE(sum(bytes) FILTER (WHERE fam = 'read'), 0),
               COALESCE(sum(bytes) FILTER (WHERE fam = 'write'), 0),
               sum(time_us) FROM t GROUP BY 1, 2""",
    )
    n = len(binned)
    grids = {k: [[0] * nwin for _ in range(n)] for k in ("read_bytes", "write_bytes", "io_time_us")}
    for fi, w, rb, wb, us in raw:
        grids["read_bytes"][fi][w] += int(rb or 0)
        grids["write_bytes"][fi][w] += int(wb or 0)
        grids["io_time_us"][fi][w] += int(us or 0)
    busy = sorted(range(n), key=lambda i: -sum(grids["io_time_us"][i]))[:HEATMAP_MAX_PROCESSES]
    who = [_file_process(p) for p in binned]
    keep = sorted(busy, key=lambda i: who[i][0])
    spans = [
        round((min((first + w + 1) << shift, end) - max((first + w) << shift, origin)) / US, 6)
        for w in range(nwin)
    ]
    return {
        "source": "dftracer: one trace file per process",
        "window_s": (1 << shift) / US,
        "windows": nwin,
        "window_span_s": spans,
        "ranks": [who[i][1] for i in keep],
        "ranks_total": n,
        "read_bytes": [grids["read_bytes"][i] for i in keep],
        "write_bytes": [grids["write_bytes"][i] for i in keep],
        "io_time_s": [[round(us / US, 6) for us in grids["io_time_us"][i]] for i in keep],
    }


def _file_process(p: FilePartial) -> tuple[tuple[int, int, str], str]:
    """(sort key, label) of the process a trace file holds: its MPI rank when known, else its pid."""
    proc = p.tables.get("proc")
    rows = proc.to_pylist() if proc is not None else []
    if len(rows) == 1:
        r = rows[0]
        if r.get("rank") is not None:
            return (0, int(r["rank"]), ""), f"rank {r['rank']}"
        return (1, int(r.get("pid") or 0), ""), f"pid {r.get('pid')}"
    name = p.path.rsplit("/", 1)[-1]
    return (2, 0, name), f"{name} ({len(rows)} processes)"


def _layer_view(
    con: duckdb.DuckDBPyConnection, partials: list[FilePartial], analysis: Analysis
) -> dict[str, Any]:
    return {"rows": [layer.model_dump() for layer in analysis.layers]}


def path_class_totals(partials: list[FilePartial], run: RunPaths = NO_RUN) -> dict[str, PathClassStats]:
    """I/O per path class over every accessed file of ``partials`` (their ``path`` tables)."""
    con = connection()
    try:
        return class_totals(con, partials, run)
    finally:
        con.close()


def class_totals(
    con: duckdb.DuckDBPyConnection, partials: list[FilePartial], run: RunPaths = NO_RUN
) -> dict[str, PathClassStats]:
    """I/O per path class over every accessed file of ``partials`` (their ``path`` tables)."""
    table = concat_partials(partials, "path")
    names, rows = query_rows(
        con,
        table,
        f"""
        WITH f AS (SELECT pkey,
                          COALESCE(min(path) FILTER (WHERE NOT starts_with(path, 'fhash:')),
                                   min(path)) AS path,
                          sum(read_count) AS rc, sum(read_bytes) AS rb, sum(read_time_us) AS rt,
                          sum(write_count) AS wc, sum(write_bytes) AS wb, sum(write_time_us) AS wt,
                          sum(metadata_count) AS mc, sum(metadata_time_us) AS mt,
                          sum(sync_count) AS sc, sum(sync_time_us) AS st,
                          sum(sequential) AS sq, sum(random) AS rn
                   FROM t GROUP BY pkey)
        SELECT {class_sql("path", run)} AS cls, count(*) AS files,
               sum(rc), sum(rb), sum(rt), sum(wc), sum(wb), sum(wt), sum(mc), sum(mt), sum(sc), sum(st),
               sum(sq), sum(rn), arg_max(path, COALESCE(rt, 0) + COALESCE(wt, 0) + COALESCE(mt, 0)) AS top
        FROM f GROUP BY 1""",
    )
    out: dict[str, PathClassStats] = {}
    for row in rows:
        _cls, files, rc, rb, rt, wc, wb, wt, mc, mt, sc, st, sq, rn = (_num(v) for v in row[:-1])
        top = row[-1]
        out[str(row[0])] = PathClassStats(
            files=int(files),
            read_count=int(rc),
            read_bytes=int(rb),
            read_time_s=rt / 1e6,
            write_count=int(wc),
            write_bytes=int(wb),
            write_time_s=wt / 1e6,
            metadata_count=int(mc),
            metadata_time_s=mt / 1e6,
            sync_count=int(sc),
            sync_time_s=st / 1e6,
            sequential=int(sq),
            random=int(rn),
            example=None if top is None else str(top),
        )
    del names
    return out


def _num(value: Any) -> Any:
    if isinstance(value, str):
        return value
    return 0 if value is None else float(value)
