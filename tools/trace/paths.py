"""Whose file an accessed path is: system pseudo-files, the runtime's own files, or data.

Why: a real job's trace is full of reads the program never asked for: MPI and GPU start-up
reading ``/proc`` and ``/sys``, the interpreter importing its libraries from ``site-packages``,
the dynamic linker opening ``.so`` files.  Counted with the program's data they fill the file
view, fire metadata rules on ``/proc/net/route`` and, on a busy machine, make the start-up
reads of a checkpoint writer its top bottleneck.  Darshan and Drishti leave such paths out of
their reports; here they are one class each, decided by one table of prefixes and shell
patterns (``resources/trace/paths.toml``), in Python and in SQL alike.
"""

from __future__ import annotations

import fnmatch
import functools
import tomllib
from dataclasses import dataclass
from importlib import resources
from typing import Any

import duckdb

from dftune.tools.trace.model import PathClassStats
from dftune.tools.trace.reader import FilePartial

#: The classes, in the order a path is tested against them (the first match wins; data is the rest).
SYSTEM, RUNTIME, DATA = "system", "runtime", "data"
_ORDER = (("data_overrides", DATA), ("system", SYSTEM), ("runtime", RUNTIME))


@dataclass(frozen=True)
class PathRules:
    """Prefixes and shell patterns per class (``resources/trace/paths.toml``)."""

    rules: tuple[tuple[str, tuple[str, ...], tuple[str, ...]], ...]  # (class, prefixes, globs)


@functools.cache
def path_rules() -> PathRules:
    text = (resources.files("dftune.resources") / "trace" / "paths.toml").read_text("utf-8")
    data = tomllib.loads(text)
    return PathRules(
        rules=tuple(
            (cls, tuple(data[section].get("prefixes", [])), tuple(data[section].get("globs", [])))
            for section, cls in _ORDER
        )
    )


def classify(path: str, rules: PathRules | None = None) -> str:
    """``system``, ``runtime`` or ``data`` for one accessed path (an unnamed hash is data)."""
    for cls, prefixes, globs in (rules or path_rules()).rules:
        if path.startswith(prefixes) or any(fnmatch.fnmatchcase(path, g) for g in globs):
            return cls
    return DATA


def _quote(text: str) -> str:
    return "'" + text.replace("'", "''") + "'"


def class_sql(column: str, rules: PathRules | None = None) -> str:
    """The same classification as :func:`classify`, as a SQL CASE over ``column`` (DuckDB)."""
    whens = []
    for cls, prefixes, globs in (rules or path_rules()).rules:
        tests = [f"starts_with({column}, {_quote(p)})" for p in prefixes]
        tests += [f"{column} GLOB {_quote(g)}" for g in globs]
        if tests:
            whens.append(f"WHEN {' OR '.join(tests)} THEN {_quote(cls)}")
    return f"(CASE {' '.join(whens)} ELSE {_quote(DATA)} END)"


def path_class_totals(partials: list[FilePartial]) -> dict[str, PathClassStats]:
    """I/O per path class over every accessed file of ``partials`` (their ``path`` tables)."""
    from dftune.tools.trace.merge import connection

    con = connection()
    try:
        return class_totals(con, partials)
    finally:
        con.close()


def class_totals(con: duckdb.DuckDBPyConnection, partials: list[FilePartial]) -> dict[str, PathClassStats]:
    """I/O per path class over every accessed file of ``partials`` (their ``path`` tables)."""
    from dftune.tools.trace.merge import concat_partials, query_rows

    table = concat_partials(partials, "path")
    names, rows = query_rows(
        con,
        table,
        f"""
        WITH f AS (SELECT pkey, COALESCE(min(path) FILTER (WHERE NOT starts_with(path, 'fhash:')), min(path)) AS path,
                          sum(read_count) AS rc, sum(read_bytes) AS rb, sum(read_time_us) AS rt,
                          sum(write_count) AS wc, sum(write_bytes) AS wb, sum(write_time_us) AS wt,
                          sum(metadata_count) AS mc, sum(metadata_time_us) AS mt,
                          sum(sync_count) AS sc, sum(sync_time_us) AS st,
                          sum(sequential) AS sq, sum(random) AS rn
                   FROM t GROUP BY pkey)
        SELECT {class_sql("path")} AS cls, count(*) AS files,
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


def split_file_view(
    view: dict[str, Any],
    include_system: bool,
    system: PathClassStats | None = None,
    rules: PathRules | None = None,
) -> None:
    """Mark each file-view row with its path class; leave system paths out unless included.

    What is left out is said in the view itself (``system_paths``: how many files, how much
    I/O time, over every accessed file when ``system`` holds the class's totals)."""
    rows = view.get("rows", [])
    for row in rows:
        row["path_class"] = classify(str(row.get("path") or ""), rules)
    shown = [r for r in rows if r["path_class"] == SYSTEM]
    files = system.files if system is not None else len(shown)
    view["system_paths"] = {
        "included": include_system,
        "files": files,
        "io_time_s": round(
            system.io_time_s if system is not None else sum(float(r.get("io_time_s") or 0.0) for r in shown),
            6,
        ),
        "examples": [str(r["path"]) for r in shown[:3]],
    }
    if not include_system:
        view["rows"] = [r for r in rows if r["path_class"] != SYSTEM]
        if "total" in view:
            view["total"] = max(len(view["rows"]), int(view["total"]) - files)


def data_processes(
    partials: list[FilePartial], rules: PathRules | None = None
) -> set[tuple[str, int | None]] | None:
    """(host, pid) of the processes that read or write a data file (None: the partials hold no
    per-path tables).  dftracer writes one trace file per process, so a file's paths are its
    process's; a process touching only its runtime's and the system's files does no data I/O."""
    if not any("path" in p.tables for p in partials):
        return None
    out: set[tuple[str, int | None]] = set()
    for part in partials:
        paths, procs = part.tables.get("path"), part.tables.get("proc")
        if paths is None or procs is None or not paths.num_rows:
            continue
        moved = any(
            classify(str(row.get("path") or ""), rules) == DATA
            and int(row.get("read_count") or 0) + int(row.get("write_count") or 0) > 0
            for row in paths.select(["path", "read_count", "write_count"]).to_pylist()
        )
        if moved:
            out |= {
                (str(r.get("host") or ""), None if r.get("pid") is None else int(r["pid"]))
                for r in procs.select(["host", "pid"]).to_pylist()
            }
    return out
