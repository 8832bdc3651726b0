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
from collections.abc import Callable
from dataclasses import dataclass
from importlib import resources
from typing import Any

from dftune.tools.trace.model import PathClassStats
from dftune.tools.trace.reader import FilePartial

#: The classes, in the order a path is tested against them (the first match wins; data is the rest).
SYSTEM, RUNTIME, DATA = "system", "runtime", "data"
_ORDER = (("shm_system", SYSTEM), ("data_overrides", DATA), ("system", SYSTEM), ("runtime", RUNTIME))


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
    return processes_touching(
        partials,
        lambda path, moved: moved and classify(path, rules) == DATA,
    )


def processes_touching(
    partials: list[FilePartial], test: Callable[[str, bool], bool]
) -> set[tuple[str, int | None]] | None:
    """(host, pid) of the processes whose trace file names a path for which ``test(path, moved
    bytes)`` holds (None: the partials hold no per-path tables)."""
    if not any("path" in p.tables for p in partials):
        return None
    out: set[tuple[str, int | None]] = set()
    for part in partials:
        paths, procs = part.tables.get("path"), part.tables.get("proc")
        if paths is None or procs is None or not paths.num_rows:
            continue
        hit = any(
            test(
                str(row.get("path") or ""),
                int(row.get("read_count") or 0) + int(row.get("write_count") or 0) > 0,
            )
            for row in paths.select(["path", "read_count", "write_count"]).to_pylist()
        )
        if hit:
            out |= {
                (str(r.get("host") or ""), None if r.get("pid") is None else int(r["pid"]))
                for r in procs.select(["host", "pid"]).to_pylist()
            }
    return out
