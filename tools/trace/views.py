"""WisIO-style perspectives on the same analysis: by file, process, time window, layer.

Each view is a list of plain rows (JSON-ready), merged exactly from the per-file partials.
"""

from __future__ import annotations

from typing import Any

import duckdb

from dftune.tools.trace.merge import concat_partials, query_rows
from dftune.tools.trace.model import Analysis
from dftune.tools.trace.reader import FilePartial

VIEWS = ("summary", "file", "proc", "time", "layer")
US = 1_000_000.0
MIB = float(1 << 20)
#: Rows kept in the file view (largest I/O time first); the total is reported alongside.
FILE_VIEW_LIMIT = 1000

_FAMILY_SUMS = """
  sum(read_count) AS read_count, sum(read_bytes) AS read_bytes, sum(read_time_us) / 1e6 AS read_time_s,
  sum(write_count) AS write_count, sum(write_bytes) AS write_bytes, sum(write_time_us) / 1e6 AS write_time_s,
  sum(metadata_count) AS metadata_count, sum(metadata_time_us) / 1e6 AS metadata_time_s,
  sum(sync_count) AS sync_count, sum(sync_time_us) / 1e6 AS sync_time_s,
  (COALESCE(sum(read_time_us), 0) + COALESCE(sum(write_time_us), 0) + COALESCE(sum(metadata_time_us), 0)
   + COALESCE(sum(sync_time_us), 0)) / 1e6 AS io_time_s
"""


def build_view(name: str, partials: list[FilePartial], analysis: Analysis) -> dict[str, Any]:
    """Rows of one view; ``summary`` needs none (it is the analysis itself)."""
    builders = {"file": _file_view, "proc": _proc_view, "time": _time_view, "layer": _layer_view}
    con = duckdb.connect(config={"threads": 1})
    try:
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
    fh: dict[str, str] = {}
    for p in partials:
        fh.update(p.fh_map)
    rows = _rows(con, partials, "path", f"""
        SELECT path, sum(processes) AS processes, {_FAMILY_SUMS},
               CASE WHEN sum(sequential) + sum(random) > 0
                    THEN round(100.0 * sum(sequential) / (sum(sequential) + sum(random)), 2) END AS seq_pct,
               CASE WHEN sum(sequential) + sum(random) > 0
                    THEN round(100.0 * sum(random) / (sum(sequential) + sum(random)), 2) END AS rand_pct
        FROM t GROUP BY path ORDER BY io_time_s DESC, path""")  # fmt: skip
    for r in rows:
        # A hash defined in another trace file's metadata (2.x hashes are global).
        if str(r["path"]).startswith("fhash:"):
            r["path"] = fh.get(str(r["path"])[6:], r["path"])
    return {"total": len(rows), "rows": rows[:FILE_VIEW_LIMIT]}


def _proc_view(
    con: duckdb.DuckDBPyConnection, partials: list[FilePartial], analysis: Analysis
) -> dict[str, Any]:
    rows = _rows(con, partials, "proc", f"""
        SELECT host, pid, max(rank) AS rank, any_value(cmd) AS cmd, sum(events) AS events,
               (max(last_end) - min(first_ts)) / 1e6 AS lifetime_s, {_FAMILY_SUMS},
               sum(io_wall_us) / 1e6 AS io_wall_s, sum(unoverlapped_us) / 1e6 AS unoverlapped_io_s,
               sum(compute_wall_us) / 1e6 AS compute_wall_s
        FROM t GROUP BY host, pid ORDER BY io_time_s DESC, host, pid""")  # fmt: skip
    return {"total": len(rows), "rows": rows}


def _time_view(
    con: duckdb.DuckDBPyConnection, partials: list[FilePartial], analysis: Analysis
) -> dict[str, Any]:
    bins = next((p.scalars["time_bins"] for p in partials if p.scalars.get("time_bins")), [0, 1, 1])
    origin, width_us, nbins = int(bins[0]), float(bins[1]), int(bins[2])
    rows = _rows(con, partials, "time", """
        SELECT bin,
               sum(count) FILTER (WHERE fam = 'read') AS read_count, sum(bytes) FILTER (WHERE fam = 'read') AS read_bytes,
               sum(count) FILTER (WHERE fam = 'write') AS write_count,
               sum(bytes) FILTER (WHERE fam = 'write') AS write_bytes,
               sum(count) FILTER (WHERE fam = 'metadata') AS metadata_count,
               COALESCE(sum(time_us) FILTER (WHERE fam = 'read'), 0) / 1e6 AS read_time_s,
               COALESCE(sum(time_us) FILTER (WHERE fam = 'write'), 0) / 1e6 AS write_time_s,
               COALESCE(sum(time_us) FILTER (WHERE fam = 'metadata'), 0) / 1e6 AS metadata_time_s,
               sum(time_us) / 1e6 AS io_time_s
        FROM t GROUP BY bin ORDER BY bin""")  # fmt: skip
    windows = []
    for r in rows:
        start = int(r.pop("bin")) * width_us / US
        moved = (r["read_bytes"] or 0) + (r["write_bytes"] or 0)
        windows.append({"start_s": round(start, 6), "end_s": round(start + width_us / US, 6), **r,
                        "bandwidth_mib_s": round(moved / MIB / (width_us / US), 3) if width_us else None})  # fmt: skip
    return {"origin_us": origin, "window_s": width_us / US, "windows": nbins, "rows": windows}


def _layer_view(
    con: duckdb.DuckDBPyConnection, partials: list[FilePartial], analysis: Analysis
) -> dict[str, Any]:
    return {"rows": [layer.model_dump() for layer in analysis.layers]}
