"""Path classes in a trace's tables: the file view marked, and which processes do data I/O.

Why: a real job's trace is full of reads the program never asked for: MPI and GPU start-up
reading ``/proc`` and ``/sys``, the interpreter importing its libraries from ``site-packages``,
the dynamic linker opening ``.so`` files.  Counted with the program's data they fill the file
view, fire metadata rules on ``/proc/net/route`` and, on a busy machine, make the start-up
reads of a checkpoint writer its top bottleneck.  Darshan and Drishti leave such paths out of
their reports; here every path gets its class from the one classifier of the facts layer
(:mod:`dftune.core.facts.paths`), in Python and in SQL alike.
"""

from __future__ import annotations

from collections.abc import Callable
from typing import Any

from dftune.core.facts.paths import NO_RUN, RunPaths, classify, set_apart_when
from dftune.tools.trace.model import PathClassStats
from dftune.tools.trace.reader import FilePartial


def split_file_view(
    view: dict[str, Any],
    include_system: bool,
    classes: dict[str, PathClassStats] | None = None,
    run: RunPaths = NO_RUN,
) -> None:
    """Mark each file-view row with its path class; leave the classes the diagnosis never judges
    (system pseudo-files) out unless included.

    What is left out is said in the view itself (``system_paths``: how many files, how much
    I/O time, over every accessed file when ``classes`` holds the classes' totals)."""
    rows = view.get("rows", [])
    for row in rows:
        row["path_class"] = classify(str(row.get("path") or ""), run).class_
    hidden = {str(r["path_class"]) for r in rows if set_apart_when(r["path_class"]) == "always"}
    shown = [r for r in rows if r["path_class"] in hidden]
    totals = [s for c, s in (classes or {}).items() if set_apart_when(c) == "always"]
    files = sum(s.files for s in totals) if classes else len(shown)
    io_time = (
        sum(s.io_time_s for s in totals) if classes else sum(float(r.get("io_time_s") or 0.0) for r in shown)
    )
    view["system_paths"] = {
        "included": include_system,
        "files": files,
        "io_time_s": round(io_time, 6),
        "examples": [str(r["path"]) for r in shown[:3]],
    }
    if not include_system:
        view["rows"] = [r for r in rows if r["path_class"] not in hidden]
        if "total" in view:
            view["total"] = max(len(view["rows"]), int(view["total"]) - files)


def data_processes(partials: list[FilePartial], run: RunPaths = NO_RUN) -> set[tuple[str, int | None]] | None:
    """(host, pid) of the processes that read or write a data file (None: the partials hold no
    per-path tables).  dftracer writes one trace file per process, so a file's paths are its
    process's; a process touching only its runtime's and the system's files does no data I/O."""
    return processes_touching(partials, lambda path, moved: moved and classify(path, run).is_data)


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
