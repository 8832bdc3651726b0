"""Process accounting: which processes do the application's I/O, and which runs a trace holds.

Why: a workload started through a shim or a launch script (pyenv's bash helpers, ``bash
run.sh``, mpirun, env, timeout) leaves processes in its trace that do none of its I/O; counted
as processes they sink the I/O fraction below the worth-tuning gate and fake imbalance and
stragglers.  And traces of separate runs (other hosts, far apart in time, other commands) must
never merge silently into one job.  Both are decided from what the trace shows (commands from
the SH metadata, lifetimes, event counts, bytes moved), with thresholds as data
(``resources/trace/processes.toml``); helpers are listed, never hidden.

This works on one row per process (the partials' ``proc`` tables), never per event.
"""

from __future__ import annotations

import fnmatch
import functools
from dataclasses import dataclass, field
from typing import Any

from dftune.core import facts
from dftune.core.facts.paths import NO_RUN, RunPaths
from dftune.core.facts.stacks import rank_marker_texts
from dftune.tools.trace.paths import data_processes, processes_touching
from dftune.tools.trace.reader import FilePartial

US = 1_000_000.0


@dataclass(frozen=True)
class Rules:
    """The thresholds of ``resources/trace/processes.toml``."""

    max_data_share: float
    max_events: int
    max_lifetime_share: float
    commands: tuple[str, ...]
    interpreters: tuple[str, ...]
    min_gap_s: float
    far_gap_ratio: float
    worker_min_start_delay_s: float = 0.02
    rank_markers: tuple[str, ...] = ()


@functools.cache
def rules() -> Rules:
    """The process roles of resources/facts/processes.toml, with every launcher's executables among
    the helper commands and the MPI libraries' signatures as rank markers (core/facts)."""
    f = facts.process_facts()
    h, r = f.helpers, f.runs
    launcher_exes = tuple(exe for x in facts.launcher_facts().launcher for exe in x.executables)
    return Rules(
        max_data_share=h.max_data_share,
        max_events=h.max_events,
        max_lifetime_share=h.max_lifetime_share,
        commands=(*h.commands, *launcher_exes),
        interpreters=h.interpreters,
        min_gap_s=r.min_gap_s,
        far_gap_ratio=r.far_gap_ratio,
        worker_min_start_delay_s=f.roles.worker_min_start_delay_s,
        rank_markers=rank_marker_texts(),
    )


@dataclass(eq=False)  # identity: two processes are never "equal"
class Proc:
    """One process (host, pid) over all the files that hold its events."""

    host: str
    pid: int | None
    rank: int | None = None
    cmd: str | None = None
    cmd_hash: str | None = None
    events: int = 0
    first_ts: int | None = None
    last_end: int | None = None
    io_calls: int = 0
    moved: int = 0
    io_time_us: float = 0.0
    files: set[int] = field(default_factory=set)
    #: why it is a helper (None: an application process)
    helper: str | None = None
    #: the application process whose rank group this one belongs to (None: it leads its own)
    parent: Proc | None = None
    #: reads or writes a data file (not only its runtime's and the system's files); None: unknown
    data_io: bool | None = None
    #: opens its MPI library's files: an MPI rank (a peer) even when the trace records no rank
    mpi: bool = False

    @property
    def key(self) -> tuple[str, int | None]:
        return (self.host, self.pid)

    @property
    def lifetime_us(self) -> int:
        return (
            (self.last_end - self.first_ts) if self.first_ts is not None and self.last_end is not None else 0
        )

    @property
    def label(self) -> str:
        return f"{self.host}:{self.pid}"

    def program(self, r: Rules) -> tuple[str, str | None]:
        """(program, script): basenames of the command's first word and, for an interpreter, its script."""
        words = [w for w in (self.cmd or "").split(";") if w]
        if not words:
            return ("", None)
        prog = words[0].rsplit("/", 1)[-1]
        script = None
        if any(fnmatch.fnmatchcase(prog, pat) for pat in r.interpreters):
            script = next((w.rsplit("/", 1)[-1] for w in words[1:] if not w.startswith("-")), None)
        return (prog, script)

    def identity(self, r: Rules) -> tuple[str, ...] | None:
        """What counts as "the same command": program and script, or the unresolved command hash."""
        if self.cmd:
            prog, script = self.program(r)
            return (prog, script or "")
        return ("#", self.cmd_hash) if self.cmd_hash else None


@dataclass(eq=False)
class Run:
    """Processes that belong to one run, and the trace files (partial indices) that hold them."""

    procs: list[Proc]
    files: set[int]
    #: why this run is separate from the one before it (None for the first)
    apart: str | None = None

    @property
    def first_ts(self) -> int | None:
        return min((p.first_ts for p in self.procs if p.first_ts is not None), default=None)

    @property
    def last_end(self) -> int | None:
        return max((p.last_end for p in self.procs if p.last_end is not None), default=None)

    @property
    def span_us(self) -> int:
        lo, hi = self.first_ts, self.last_end
        return hi - lo if lo is not None and hi is not None else 0

    @property
    def app(self) -> list[Proc]:
        return [p for p in self.procs if p.helper is None]

    def hosts(self) -> list[str]:
        return sorted({p.host for p in self.app if p.host})

    def commands(self, r: Rules) -> set[tuple[str, ...]]:
        return {i for p in self.app if (i := p.identity(r)) is not None}


@dataclass
class Accounting:
    """Every process of the traces with its role, grouped into runs (one, normally)."""

    runs: list[Run]

    @property
    def procs(self) -> list[Proc]:
        return [p for run in self.runs for p in run.procs]


# ------------------------------------------------------------------------------------------
# gathering


def gather(partials: list[FilePartial]) -> list[Proc]:
    """One :class:`Proc` per (host, pid), summed over the files that hold it."""
    sh: dict[str, str] = {}
    for part in partials:  # 2.x command hashes are global: a child's SH may sit in its parent's file
        sh.update(part.scalars.get("sh_map") or {})
    procs: dict[tuple[str, int | None], Proc] = {}
    for i, partial in enumerate(partials):
        table = partial.tables.get("proc")
        if table is None or not table.num_rows:
            continue
        for row in table.to_pylist():
            key = (str(row.get("host") or ""), _int(row.get("pid")))
            p = procs.get(key)
            if p is None:
                p = procs[key] = Proc(host=key[0], pid=key[1])
            p.files.add(i)
            p.events += _int(row.get("events")) or 0
            p.rank = p.rank if row.get("rank") is None else _int(row["rank"])
            p.cmd_hash = p.cmd_hash or row.get("cmd_hash")
            p.cmd = p.cmd or row.get("cmd") or (sh.get(str(row["cmd_hash"])) if row.get("cmd_hash") else None)
            for attr, pick in (("first_ts", min), ("last_end", max)):
                v = _int(row.get(attr))
                if v is not None:
                    old = getattr(p, attr)
                    setattr(p, attr, v if old is None else pick(old, v))
            p.io_calls += sum(_int(row.get(f"{f}_count")) or 0 for f in ("read", "write", "metadata", "sync"))
            p.moved += (_int(row.get("read_bytes")) or 0) + (_int(row.get("write_bytes")) or 0)
            p.io_time_us += sum(
                float(row.get(f"{f}_time_us") or 0) for f in ("read", "write", "metadata", "sync")
            )
    return list(procs.values())


def _int(v: Any) -> int | None:
    return None if v is None else int(v)


# ------------------------------------------------------------------------------------------
# helpers


def _is_launcher(p: Proc, r: Rules) -> str | None:
    prog, script = p.program(r)
    for name in (prog, script):
        if name and any(fnmatch.fnmatchcase(name, pat) for pat in r.commands):
            return name
    return None


def _helper_shaped(p: Proc, r: Rules) -> bool:
    """Looks like a helper whatever the others do: a launcher's command or a handful of events."""
    return p.rank is None and (_is_launcher(p, r) is not None or p.events <= r.max_events)


def classify(procs: list[Proc], r: Rules) -> None:
    """Set each process's :attr:`Proc.helper` (see ``resources/trace/processes.toml``)."""
    use_bytes = any(p.moved for p in procs)

    def weight(p: Proc) -> float:
        return float(p.moved if use_bytes else p.io_calls)

    top = max((weight(p) for p in procs), default=0.0)
    heavy = [p for p in procs if top > 0 and weight(p) >= r.max_data_share * top]
    app_cmds = {i for p in heavy if (i := p.identity(r)) is not None}
    longest = max((p.lifetime_us for p in heavy), default=0)
    for p in procs:
        p.helper = None
        if not heavy or p in heavy or p.rank is not None or (p.identity(r) in app_cmds):
            continue
        moved = (
            f"moved {p.moved:,} B ({p.moved / top:.2%} of the busiest process's)"
            if use_bytes
            else f"made {p.io_calls:,} I/O calls ({p.io_calls / top:.2%} of the busiest process's)"
        )
        name = _is_launcher(p, r)
        if name is not None:
            p.helper = f"runs {name} (a shell, launcher or tool) and {moved}"
        elif p.events <= r.max_events:
            p.helper = f"{p.events} events only, and {moved}"
        elif longest and p.lifetime_us <= r.max_lifetime_share * longest:
            p.helper = (
                f"lived {p.lifetime_us / US:.3g} s of the application's {longest / US:.3g} s, and {moved}"
            )


# ------------------------------------------------------------------------------------------
# runs


def account(partials: list[FilePartial], r: Rules | None = None, run_paths: RunPaths = NO_RUN) -> Accounting:
    """Roles and runs of the processes in ``partials`` (``run_paths``: the run's own data folder)."""
    r = r or rules()
    procs = gather(partials)
    movers = data_processes(partials, run_paths)
    ranks = processes_touching(partials, lambda path, _moved: any(m in path.lower() for m in r.rank_markers))
    for p in procs:
        p.data_io = None if movers is None else p.key in movers
        p.mpi = ranks is not None and p.key in ranks
    runs = _runs(procs, r, len(partials))
    for run in runs:  # helpers are judged within their run (its busiest process, its lifetimes)
        classify(run.procs, r)
        assign_groups(run.procs, r)
    return Accounting(runs=runs)


# ------------------------------------------------------------------------------------------
# rank groups


def assign_groups(procs: list[Proc], r: Rules) -> None:
    """Attach each worker process to the rank (or lone main process) it belongs to (:attr:`Proc.parent`).

    A worker is an application process without a rank (recorded, or shown by its opening the MPI
    library's files) whose lifetime lies within another
    application process's on the same host, starting ``worker_min_start_delay_s`` or more after
    it; its parent is the outermost such process (the earliest started), so a worker's worker
    belongs to the same root."""
    app = [p for p in procs if p.helper is None and p.first_ts is not None and p.last_end is not None]
    delay = r.worker_min_start_delay_s * US
    for p in procs:
        p.parent = None
    for p in app:
        if p.rank is not None or p.mpi:
            continue
        assert p.first_ts is not None and p.last_end is not None
        hosts = [q for q in app if q is not p and q.host == p.host]
        around = [
            q
            for q in hosts
            if q.first_ts is not None
            and q.last_end is not None
            and p.first_ts - q.first_ts >= delay
            and q.last_end >= p.last_end
        ]
        if around:  # the outermost: a process a worker outlives (a resource tracker) is never its parent
            p.parent = min(around, key=lambda q: (q.first_ts or 0, q.key))


def root(p: Proc) -> Proc:
    """The process leading ``p``'s rank group (``p`` itself for a rank or a lone main process)."""
    seen = {id(p)}
    while p.parent is not None and id(p.parent) not in seen:
        p = p.parent
        seen.add(id(p))
    return p


def group_label(p: Proc) -> str:
    lead = root(p)
    return f"rank {lead.rank}" if lead.rank is not None else lead.label


def _stretches(procs: list[Proc], r: Rules) -> list[list[Proc]]:
    """Processes grouped by time: a new stretch starts after a gap of ``min_gap_s`` with none alive."""
    timed = sorted((p for p in procs if p.first_ts is not None), key=lambda p: (p.first_ts, p.key))
    out: list[list[Proc]] = []
    end: int | None = None
    for p in timed:
        assert p.first_ts is not None and p.last_end is not None
        if end is None or p.first_ts - end >= r.min_gap_s * US:
            out.append([])
            end = p.last_end
        out[-1].append(p)
        end = max(end, p.last_end)
    return out


def _separate(a: Run, b: Run, r: Rules) -> str | None:
    """Why ``b`` (after a gap) is not the same run as ``a``; None when it is."""
    lo, hi = a.last_end, b.first_ts
    if lo is None or hi is None:
        return None
    gap = (hi - lo) / US
    if a.hosts() and b.hosts() and not set(a.hosts()) & set(b.hosts()):
        return (
            f"other hosts ({', '.join(b.hosts()[:3])} after {', '.join(a.hosts()[:3])}), {_span(gap)} later"
        )
    ca, cb = a.commands(r), b.commands(r)
    if ca and cb and not ca & cb:
        return f"other commands ({_cmds(b, r)} after {_cmds(a, r)}), {_span(gap)} later"
    longer = max(a.span_us, b.span_us) / US
    if gap > r.far_gap_ratio * longer:
        return (
            f"{_span(gap)} with no process alive, longer than the activity on either side of the gap "
            f"({_span(longer)})"
        )
    return None


def _runs(procs: list[Proc], r: Rules, nfiles: int) -> list[Run]:
    stretches = _stretches(procs, r)
    untimed = [p for p in procs if p.first_ts is None]
    if not stretches:
        return [Run(procs=untimed, files=set(range(nfiles)))]
    for group in stretches:
        classify(group, r)
    runs: list[Run] = []
    pending: list[Proc] = []  # helper-shaped stretches (a shim's children) join the stretch after them
    for n, group in enumerate(stretches):
        if all(_helper_shaped(p, r) for p in group) and (n + 1 < len(stretches) or runs):
            if n + 1 < len(stretches):
                pending += group
            else:  # trailing helpers (a launch script's last `echo`) stay with the run before them
                runs[-1].procs += group
            continue
        nxt = Run(procs=pending + group, files=set())
        pending = []
        why = _separate(runs[-1], nxt, r) if runs else None
        if runs and why is None:
            runs[-1].procs += nxt.procs
            classify(runs[-1].procs, r)
        else:
            nxt.apart = why
            runs.append(nxt)
    runs[0].procs += untimed
    # A file holding processes of several runs joins them (a file cannot be split).
    owner = {id(p): i for i, run in enumerate(runs) for p in run.procs}
    parent = list(range(len(runs)))

    def find(i: int) -> int:
        while parent[i] != i:
            i = parent[i]
        return i

    by_file: dict[int, set[int]] = {}
    for p in procs:
        for f in p.files:
            by_file.setdefault(f, set()).add(owner[id(p)])
    for owners in by_file.values():
        first, *rest = sorted(owners)
        for o in rest:
            parent[find(o)] = find(first)
    merged: dict[int, Run] = {}
    for i, run in enumerate(runs):
        root = find(i)
        if root in merged:
            merged[root].procs += run.procs
        else:
            merged[root] = Run(procs=list(run.procs), files=set(), apart=run.apart)
    out = sorted(merged.values(), key=lambda run: (run.first_ts is None, run.first_ts or 0))
    for run in out:
        run.files = {f for p in run.procs for f in p.files}
    out[0].apart = None
    claimed = {f for run in out for f in run.files}
    out[0].files |= set(range(nfiles)) - claimed  # files without events (0-byte forks) go with the first run
    return out


def _span(seconds: float) -> str:
    if seconds >= 3600:
        return f"{seconds / 3600:.1f} h"
    if seconds >= 60:
        return f"{seconds / 60:.1f} min"
    return f"{seconds:.3g} s"


def _cmds(run: Run, r: Rules) -> str:
    names = sorted({"/".join(x for x in p.program(r) if x) or (p.cmd or "?") for p in run.app})
    return ", ".join(names[:2]) + (", ..." if len(names) > 2 else "")
