"""Combine one or more logs (one per job, or one per process as DLIO writes them) into columns.

The POSIX and STDIO records (the interfaces dftune's families count, as the trace reader
counts the POSIX and STDIO calls of dftracer) become one table with a row per record and a
column per normalized counter; STDIO rows have zeros where STDIO keeps no such counter.
Ranks are made global across logs (log k's rank r becomes offset_k + r); a shared record
(rank -1, Darshan's reduction over all ranks of its log) keeps rank -1 and ``nranks`` says
how many ranks it stands for.  Timestamps are moved onto the earliest log's clock.
"""

from __future__ import annotations

from dataclasses import dataclass, field

import numpy as np

from dftune.core.facts import darshan_facts
from dftune.tools.trace.darshan.reader import DarshanLog, ModuleTable

_FACTS = darshan_facts()
#: Darshan's access-size bins (POSIX_SIZE_READ_* / POSIX_SIZE_WRITE_*), labelled for dftune
DARSHAN_BINS, BIN_LABELS, SMALL_BINS = _FACTS.size_bins, _FACTS.size_labels, _FACTS.small_bins
MIB = 1 << 20

#: normalized column -> (POSIX counter, STDIO counter); None = no such counter (0); "f:" = floating point
_COLUMNS: dict[str, tuple[str | None, str | None]] = {
    **{col: (posix or None, stdio or None) for col, (posix, stdio) in _FACTS.columns.items()},
    **{f"rb{i}": (f"POSIX_SIZE_READ_{b}", None) for i, b in enumerate(DARSHAN_BINS)},
    **{f"wb{i}": (f"POSIX_SIZE_WRITE_{b}", None) for i, b in enumerate(DARSHAN_BINS)},
    **{f"acc{k}": (f"POSIX_ACCESS{k}_ACCESS", None) for k in range(1, 5)},
    **{f"acc{k}_count": (f"POSIX_ACCESS{k}_COUNT", None) for k in range(1, 5)},
}
#: columns where Darshan's -1 means "not recorded" (older formats, unset rank ids): not data
_MAY_BE_NEGATIVE = {"fastest_rank", "slowest_rank", "open_start", "close_end"}
TIMESTAMPS = ("open_start", "close_end")


@dataclass
class Records:
    """One row per POSIX or STDIO record of every log."""

    iface: np.ndarray  # "POSIX" / "STDIO"
    ids: np.ndarray
    rank: np.ndarray  # global rank, -1 for a shared (reduced) record
    log: np.ndarray
    nranks: np.ndarray  # ranks the record stands for (1, or its log's nprocs when shared)
    cols: dict[str, np.ndarray]
    #: counter name -> records where it was negative (a broken value) and was treated as 0
    negative: dict[str, int] = field(default_factory=dict)
    #: counter name -> records where it was -1: not recorded by the log's Darshan (treated as 0)
    not_recorded: dict[str, int] = field(default_factory=dict)

    def __len__(self) -> int:
        return len(self.ids)

    def __getitem__(self, name: str) -> np.ndarray:
        return self.cols[name]


@dataclass
class Job:
    """The logs of one analysis, with global ranks and a common clock."""

    logs: list[DarshanLog]
    offsets: np.ndarray  # first global rank of each log
    clock: np.ndarray  # seconds from the earliest log start to each log's start
    nprocs: int
    names: dict[int, str]
    records: Records
    #: module -> that module's tables of all logs, concatenated (ranks global)
    modules: dict[str, ModuleTable]
    module_logs: dict[str, np.ndarray]


def log_start(log: DarshanLog) -> float:
    j = log.job
    return float(j["start_time_sec"]) + float(j.get("start_time_nsec") or 0) / 1e9


def log_end(log: DarshanLog) -> float:
    j = log.job
    return float(j["end_time_sec"]) + float(j.get("end_time_nsec") or 0) / 1e9


def build_job(logs: list[DarshanLog]) -> Job:
    nprocs = np.array([max(int(lg.job["nprocs"]), 1) for lg in logs], dtype=np.int64)
    offsets = np.concatenate([[0], np.cumsum(nprocs)[:-1]]).astype(np.int64)
    starts = np.array([log_start(lg) for lg in logs])
    clock = starts - starts.min() if len(starts) else starts
    names: dict[int, str] = {}
    for lg in logs:
        names.update(lg.names)
    modules: dict[str, ModuleTable] = {}
    module_logs: dict[str, np.ndarray] = {}
    for mod in sorted({m for lg in logs for m in lg.tables}):
        parts = [(i, lg.tables[mod]) for i, lg in enumerate(logs) if mod in lg.tables]
        modules[mod], module_logs[mod] = _concat(mod, parts, offsets)
    return Job(
        logs=logs,
        offsets=offsets,
        clock=clock,
        nprocs=int(nprocs.sum()),
        names=names,
        records=_records(modules, module_logs, nprocs, clock),
        modules=modules,
        module_logs=module_logs,
    )


def _concat(
    mod: str, parts: list[tuple[int, ModuleTable]], offsets: np.ndarray
) -> tuple[ModuleTable, np.ndarray]:
    first = parts[0][1]
    ranks = np.concatenate([np.where(t.ranks >= 0, t.ranks + offsets[i], -1) for i, t in parts])
    table = ModuleTable(
        name=mod,
        ids=np.concatenate([t.ids for _, t in parts]),
        ranks=ranks,
        counters=np.concatenate([t.counters for _, t in parts]),
        fcounters=np.concatenate([t.fcounters for _, t in parts]),
        names=first.names,
        fnames=first.fnames,
        file_ids=np.concatenate([t.file_ids for _, t in parts]) if first.file_ids is not None else None,
    )
    which = np.concatenate([np.full(len(t), i, dtype=np.int64) for i, t in parts])
    return table, which


def _records(
    modules: dict[str, ModuleTable], module_logs: dict[str, np.ndarray], nprocs: np.ndarray, clock: np.ndarray
) -> Records:
    blocks = []
    negative: dict[str, int] = {}
    not_recorded: dict[str, int] = {}
    for mod, side in (("POSIX", 0), ("STDIO", 1)):
        t = modules.get(mod)
        if t is None or not len(t):
            continue
        cols: dict[str, np.ndarray] = {}
        for col, names in _COLUMNS.items():
            name = names[side]
            if name is None:
                cols[col] = np.zeros(len(t), dtype=np.float64 if col.endswith("time") else np.int64)
                continue
            values = t.f(name[2:]) if name.startswith("f:") else t.c(name)
            bad = values < 0
            if bad.any() and col not in _MAY_BE_NEGATIVE:
                # -1 in an integer counter: not recorded by this Darshan version or configuration
                unset = bad & (values == -1) & (not name.startswith("f:"))
                if unset.any():
                    not_recorded[name] = int(unset.sum())
                if (bad & ~unset).any():
                    negative[name.removeprefix("f:")] = int((bad & ~unset).sum())
                values = np.where(bad, 0, values)
            cols[col] = values
        logs = module_logs[mod]
        for ts in TIMESTAMPS:  # onto the earliest log's clock; <= 0 means never happened
            cols[ts] = np.where(cols[ts] > 0, cols[ts] + clock[logs], 0.0)
        blocks.append((mod, t, logs, cols))
    if not blocks:
        empty = {
            c: np.zeros(0, dtype=np.float64 if c.endswith("time") or c in TIMESTAMPS else np.int64)
            for c in _COLUMNS
        }
        z = np.zeros(0, dtype=np.int64)
        return Records(
            iface=np.zeros(0, dtype=object),
            ids=np.zeros(0, dtype=np.uint64),
            rank=z,
            log=z,
            nranks=z,
            cols=empty,
        )
    return Records(
        iface=np.concatenate([np.full(len(t), mod, dtype=object) for mod, t, _, _ in blocks]),
        ids=np.concatenate([t.ids for _, t, _, _ in blocks]),
        rank=np.concatenate([t.ranks for _, t, _, _ in blocks]),
        log=np.concatenate([lg for _, _, lg, _ in blocks]),
        nranks=np.concatenate([np.where(t.ranks < 0, nprocs[lg], 1) for _, t, lg, _ in blocks]),
        cols={c: np.concatenate([b[3][c] for b in blocks]) for c in _COLUMNS},
        negative=negative,
        not_recorded=not_recorded,
    )


def exact_1mib(rec: Records) -> tuple[np.ndarray, np.ndarray]:
    """Reads and writes of exactly 1 MiB per record, where the common-access counters prove it.

    Darshan's 100K_1M bin includes 1 MiB itself; dftune's small boundary is < 1 MiB.  The four
    most common access sizes (POSIX_ACCESSn_ACCESS/COUNT) are exact; their 1 MiB count is
    attributed to reads or writes only when the record has just one of the two in that bin.
    """
    n = np.zeros(len(rec), dtype=np.int64)
    for k in range(1, 5):
        n += np.where(rec[f"acc{k}"] == MIB, rec[f"acc{k}_count"], 0)
    rbin, wbin = rec[f"rb{SMALL_BINS - 1}"], rec[f"wb{SMALL_BINS - 1}"]
    only_r = (wbin == 0) & (rbin > 0)
    only_w = (rbin == 0) & (wbin > 0)
    return np.where(only_r, np.minimum(n, rbin), 0), np.where(only_w, np.minimum(n, wbin), 0)
