"""Independent reference implementation of the trace semantics in docs/analyze.md.

This is a test oracle, not the product: a deliberately plain per-line loop over the trace
files (``json`` + ``gzip``), written from the "I/O semantics" and "Interface contract"
sections of docs/analyze.md without looking at ``dftune.tools.trace``. The end-to-end tests
compare the engine's counts, bytes and percentages with what this module computes.

Semantics implemented (docs/analyze.md):

* Lines: every non-blank line of a ``.pfw`` / ``.pfw.gz`` file (any number of gzip members);
  lines that are exactly ``[`` or ``]`` are skipped; a trailing ``,`` is tolerated; lines
  that are not a JSON object are counted in ``skipped_lines``.
* Legacy 1.x: ``"ph":"X"`` (complete) / ``"ph":"M"`` (metadata); numbers may be strings.
  2.x: integer ``ph`` 1 complete, 2 counter, 3 aggregated, 4 metadata.
* ``events`` = complete events (ph X or 1); ``processes`` = distinct pids with a complete
  event; ``job_time_s`` = max(ts + dur) - min(ts) over complete events (microseconds).
* I/O call = complete event whose ``cat`` upper-cased is POSIX or STDIO. Families: read /
  write / sync as listed in docs/analyze.md, metadata = every other I/O call.
* bytes = ``args.ret`` when > 0 (fread/fwrite: ``ret * size``), else 0.
* Aggregated records (ph 3, I/O cat) add ``args.dft_cnt`` operations, ``args.dur_sum`` time
  and ``args.ret_sum`` bytes to their family (a record with ``dft_cnt == 1`` carries plain
  ``dur`` / ``ret`` instead of the ``_sum`` fields, as dftracer 2.2 writes it).
* small_io_pct: read+write ops with a known size (``args.ret`` present) whose bytes are
  < 1 MiB, over read+write ops with a known size (also per family: small_read_pct,
  small_write_pct). The transfer-size histogram counts the same ops in DESIGN's bins, one
  histogram per family (read, write). Aggregated records have no per-op size: they are in
  neither, nor in the sequentiality counts.
* Sequentiality per (host, pid, file): open sets the position to 0, lseek to ``args.ret``,
  read/write start at the position and advance it by their bytes, pread/pwrite start at
  ``args.offset``. consecutive: start == previous access end; sequential: start >= it;
  random: start < it. Accesses with no previous access or an unknown start are
  unclassified; percentages are shares of classified accesses.
* Processes (docs/analyze.md "Helper processes and runs"): per (host key, pid) its complete events,
  lifetime (first ts to last ts + dur), bytes its complete reads/writes moved, I/O calls, I/O
  wall time (union of its I/O call intervals), rank (``args.rank`` or ``-<r>-of-<n>`` in the
  file name) and command (the SH name of its ``start`` event's ``cmd_hash``, any file). A
  helper moves < 5% of the busiest process's bytes (of its I/O calls when nothing moved bytes),
  has no rank, runs no command a busy process runs, and runs a listed program (or an
  interpreter running a listed script), or has <= 32 events, or lived <= 10% of the longest
  busy process.  ``io_fraction_of_job`` = I/O wall of the others / their summed lifetimes.
  The traces given are taken as one run (the engine's ``merge_runs``).
* Time view (docs/analyze.md "What each number means", time windows): window width ``2**shift`` us for
  the least ``shift`` at which [first ts, last ts + dur) of the job meets at most ``windows``
  windows aligned on multiples of the width (absolute time); each I/O call counts in the
  window holding its ts; windows are reported clipped to the job, relative to its first ts.
"""

from __future__ import annotations

import fnmatch
import gzip
import json
import math
import os
import re
import tomllib
from collections import defaultdict
from collections.abc import Iterable, Iterator
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

READ = frozenset({"read", "pread", "pread64", "readv", "preadv", "preadv2", "fread"})
WRITE = frozenset({"write", "pwrite", "pwrite64", "writev", "pwritev", "pwritev2", "fwrite"})
SYNC = frozenset({"fsync", "fdatasync", "sync", "msync"})
POSITIONED = frozenset({"pread", "pread64", "preadv", "preadv2", "pwrite", "pwrite64", "pwritev", "pwritev2"})
OPENS = frozenset(
    {"open", "open64", "openat", "openat64", "creat", "creat64", "fopen", "fopen64", "freopen", "freopen64"}
)
SEEKS = frozenset({"lseek", "lseek64"})
ITEMIZED = frozenset({"fread", "fwrite"})  # bytes = ret * size

KIB = 1024
MIB = 1024 * KIB
SMALL_LIMIT = MIB
# The size bins of docs/analyze.md: <4K, 4-16K, 16-64K, 64-256K, 256K-1M, 1-4M, 4-16M, 16-64M, >=64M
HIST_LABELS = ("<4K", "4-16K", "16-64K", "64-256K", "256K-1M", "1-4M", "4-16M", "16-64M", ">=64M")
HIST_EDGES = (4 * KIB, 16 * KIB, 64 * KIB, 256 * KIB, MIB, 4 * MIB, 16 * MIB, 64 * MIB)


def family(name: str) -> str:
    if name in READ:
        return "read"
    if name in WRITE:
        return "write"
    if name in SYNC:
        return "sync"
    return "metadata"


def hist_bin(nbytes: int) -> int:
    for i, edge in enumerate(HIST_EDGES):
        if nbytes < edge:
            return i
    return len(HIST_EDGES)


def num(value: Any) -> int | float | None:
    """A JSON number, or a number written as a string; anything else is None."""
    if isinstance(value, bool):
        return None
    if isinstance(value, int):
        return value
    if isinstance(value, float):
        return value if math.isfinite(value) else None
    if isinstance(value, str):
        s = value.strip()
        try:
            return int(s)
        except ValueError:
            pass
        try:
            f = float(s)
        except ValueError:
            return None
        return f if math.isfinite(f) else None
    return None


def ident(value: Any) -> str | None:
    """Identity of a host/file hash or name (int, hex string or path) as a string."""
    if value is None or isinstance(value, bool | dict | list):
        return None
    return str(value)


# --------------------------------------------------------------------------- reading


def trace_files(paths: Iterable[str | os.PathLike[str]]) -> list[Path]:
    out: list[Path] = []
    for p in paths:
        path = Path(p)
        if path.is_dir():
            out.extend(
                sorted(f for f in path.rglob("*") if f.is_file() and f.name.endswith((".pfw", ".pfw.gz")))
            )
        else:
            out.append(path)
    return out


def iter_lines(path: Path) -> Iterator[str]:
    """Text lines of one trace file; gzip.open reads every member of a multi-member file."""
    if path.name.endswith(".gz"):
        if path.stat().st_size == 0:
            return
        with gzip.open(path, "rt", encoding="utf-8", errors="replace") as fh:
            yield from fh
    else:
        with open(path, encoding="utf-8", errors="replace") as fh:
            yield from fh


@dataclass
class Access:
    ts: float
    order: int
    kind: str  # "open", "seek", "rw", "prw"
    value: int | None  # seek: new position; prw: offset
    nbytes: int


@dataclass
class Fam:
    count: int = 0
    bytes: int = 0
    time_us: float = 0.0

    def as_dict(self) -> dict[str, Any]:
        return {"count": self.count, "bytes": self.bytes, "time_s": self.time_us / 1e6}


@dataclass
class Process:
    events: int = 0
    first: float | None = None
    last: float | None = None
    moved: int = 0
    io_calls: int = 0
    intervals: list[tuple[float, float]] = field(default_factory=list)
    rank: int | None = None
    cmd_hash: str | None = None

    @property
    def lifetime(self) -> float:
        return (self.last - self.first) if self.first is not None and self.last is not None else 0.0

    def io_wall(self) -> float:
        wall, end = 0.0, None
        for lo, hi in sorted(self.intervals):
            if end is None or lo > end:
                wall += hi - lo
                end = hi
            elif hi > end:
                wall += hi - end
                end = hi
        return wall


# the program lists are data (resources/facts/processes.toml, with every launcher's executables of
# resources/facts/launchers.toml), as docs/analyze.md's call lists are
_FACTS = Path(__file__).resolve().parents[1] / "resources" / "facts"
_PROCESS_DATA = tomllib.loads((_FACTS / "processes.toml").read_text(encoding="utf-8"))["helpers"]
_PROCESS_DATA["commands"] += [
    exe
    for launcher in tomllib.loads((_FACTS / "launchers.toml").read_text(encoding="utf-8"))["launcher"]
    for exe in launcher["executables"]
]
_RANK_IN_NAME = re.compile(r"(?:^|[-_.])(\d+)-of-(\d+)(?:[-_.]|$)")


def _program(cmd: str | None) -> tuple[str, str]:
    words = [w for w in (cmd or "").split(";") if w]
    if not words:
        return ("", "")
    prog = words[0].rsplit("/", 1)[-1]
    script = ""
    if any(fnmatch.fnmatchcase(prog, pat) for pat in _PROCESS_DATA["interpreters"]):
        script = next((w.rsplit("/", 1)[-1] for w in words[1:] if not w.startswith("-")), "")
    return (prog, script)


@dataclass
class Reference:
    files: int = 0
    lines: int = 0
    events: int = 0
    metadata_lines: int = 0
    aggregated_records: int = 0
    skipped_lines: int = 0
    pids: set[int | float | str] = field(default_factory=set)
    min_ts: float | None = None
    max_end: float | None = None
    fam: dict[str, Fam] = field(
        default_factory=lambda: {k: Fam() for k in ("read", "write", "sync", "metadata")}
    )
    sized: dict[str, int] = field(default_factory=lambda: {"read": 0, "write": 0})
    small: dict[str, int] = field(default_factory=lambda: {"read": 0, "write": 0})
    hist: dict[str, list[int]] = field(
        default_factory=lambda: {"read": [0] * len(HIST_LABELS), "write": [0] * len(HIST_LABELS)}
    )
    consecutive: int = 0
    sequential: int = 0
    random: int = 0
    unclassified: int = 0
    by_name: dict[str, Fam] = field(default_factory=lambda: defaultdict(Fam))
    #: (ts, family, bytes or None when the size is unknown, dur) of every I/O call, for the time view
    io_calls: list[tuple[int, str, int | None, float]] = field(default_factory=list)
    procs: dict[tuple[str | None, Any], Process] = field(default_factory=lambda: defaultdict(Process))
    commands: dict[str, str] = field(default_factory=dict)  # SH: hash -> command line

    def helpers(self) -> dict[tuple[str | None, Any], bool]:
        """Each process: is it a helper (see the module docstring)?"""
        procs = self.procs
        by_bytes = any(p.moved for p in procs.values())
        weight = {k: float(p.moved if by_bytes else p.io_calls) for k, p in procs.items()}
        top = max(weight.values(), default=0.0)
        heavy = {k for k, w in weight.items() if top > 0 and w >= _PROCESS_DATA["max_data_share"] * top}

        def ident(p: Process) -> tuple[str, str] | None:
            cmd = self.commands.get(p.cmd_hash or "")
            return _program(cmd) if cmd else (("#", p.cmd_hash) if p.cmd_hash else None)

        busy_cmds = {ident(procs[k]) for k in heavy} - {None}
        longest = max((procs[k].lifetime for k in heavy), default=0.0)
        out = {}
        for k, p in procs.items():
            helper = False
            if heavy and k not in heavy and p.rank is None and ident(p) not in busy_cmds:
                prog, script = _program(self.commands.get(p.cmd_hash or ""))
                listed = any(
                    n and fnmatch.fnmatchcase(n, pat)
                    for n in (prog, script)
                    for pat in _PROCESS_DATA["commands"]
                )
                short = longest > 0 and p.lifetime <= _PROCESS_DATA["max_lifetime_share"] * longest
                helper = listed or p.events <= _PROCESS_DATA["max_events"] or short
            out[k] = helper
        return out

    def process_accounting(self) -> dict[str, Any]:
        helpers = self.helpers()
        app = [p for k, p in self.procs.items() if not helpers[k]]
        life = sum(p.lifetime for p in app)
        return {
            "app_processes": len(app),
            "helper_processes": sum(helpers.values()),
            "io_fraction_of_job": sum(p.io_wall() for p in app) / life if life else 0.0,
        }

    # ------------------------------------------------------------------ derived values
    @property
    def processes(self) -> int:
        return len(self.pids)

    @property
    def job_time_s(self) -> float:
        if self.min_ts is None or self.max_end is None:
            return 0.0
        return (self.max_end - self.min_ts) / 1e6

    def _pct(self, part: float, whole: float) -> float:
        return 100.0 * part / whole if whole else 0.0

    @property
    def classified(self) -> int:
        return self.sequential + self.random

    def time_view(self, windows: int) -> dict[str, Any]:
        """Windows of the time view, computed from the definition (no fine bins, no merging)."""
        if self.min_ts is None or self.max_end is None:
            return {"windows": 0, "rows": []}
        origin, end = int(self.min_ts), int(self.max_end)

        def count(shift: int) -> int:
            if end <= origin:
                return 1
            return (end - 1) // 2**shift - origin // 2**shift + 1

        shift = 0
        while count(shift) > windows and shift < 63:  # a job across ts 0 spans 2 windows at most
            shift += 1
        width, first = 2**shift, origin // 2**shift
        rows: dict[int, dict[str, Any]] = {}
        for ts, fam, nbytes, dur in self.io_calls:
            w = min(int(ts) // width - first, count(shift) - 1)
            r = rows.setdefault(w, defaultdict(float))
            r[f"{fam}_count"] += 1
            r[f"{fam}_bytes"] += nbytes or 0
            r[f"{fam}_time_us"] += dur
        out = []
        for w in sorted(rows):
            lo, hi = max((first + w) * width, origin), min((first + w + 1) * width, end)
            out.append({"start_s": (lo - origin) / 1e6, "end_s": (hi - origin) / 1e6, **rows[w]})
        return {"windows": count(shift), "window_s": width / 1e6, "rows": out}

    def summary(self) -> dict[str, Any]:
        rwm = self.fam["read"].time_us + self.fam["write"].time_us + self.fam["metadata"].time_us
        return {
            "files": self.files,
            "events": self.events,
            "skipped_lines": self.skipped_lines,
            "processes": self.processes,
            "job_time_s": self.job_time_s,
            "read": {**self.fam["read"].as_dict(), "sized": self.sized["read"]},
            "write": {**self.fam["write"].as_dict(), "sized": self.sized["write"]},
            "metadata": self.fam["metadata"].as_dict(),
            "sync": self.fam["sync"].as_dict(),
            "read_time_pct": self._pct(self.fam["read"].time_us, rwm),
            "write_time_pct": self._pct(self.fam["write"].time_us, rwm),
            "metadata_time_pct": self._pct(self.fam["metadata"].time_us, rwm),
            "small_io_pct": self._pct(sum(self.small.values()), sum(self.sized.values())),
            "small_read_pct": self._pct(self.small["read"], self.sized["read"]),
            "small_write_pct": self._pct(self.small["write"], self.sized["write"]),
            "seq_pct": self._pct(self.sequential, self.classified),
            "consecutive_pct": self._pct(self.consecutive, self.classified),
            "rand_pct": self._pct(self.random, self.classified),
            "classified_accesses": self.classified,
            "metadata_lines": self.metadata_lines,
            "aggregated_events": self.aggregated_records,
            "xfer_size_hist": {
                fam: dict(zip(HIST_LABELS, counts, strict=True)) for fam, counts in self.hist.items()
            },
        }


def _access_bytes(name: str, args: dict[str, Any], ret: int | float | None) -> int:
    if ret is None or ret <= 0:
        return 0
    if name in ITEMIZED:
        size = num(args.get("size"))
        if size is None:
            return int(ret)
        return int(ret * size)
    return int(ret)


def reference(paths: Iterable[str | os.PathLike[str]]) -> Reference:
    """Compute the reference numbers for the given trace files or folders."""
    ref = Reference()
    # (host, pid, file) -> list of position-relevant accesses
    streams: dict[tuple[str | None, Any, str], list[Access]] = defaultdict(list)
    order = 0
    for path in trace_files(paths):
        ref.files += 1
        for raw in iter_lines(path):
            line = raw.strip()
            if not line or line in ("[", "]"):
                continue
            ref.lines += 1
            if line.endswith(","):
                line = line[:-1].rstrip()
            try:
                ev = json.loads(line)
            except ValueError:
                ref.skipped_lines += 1
                continue
            if not isinstance(ev, dict):
                ref.skipped_lines += 1
                continue
            ph = ev.get("ph")
            if isinstance(ph, str) and ph.strip().isdigit():
                ph = int(ph)
            args = ev.get("args")
            if not isinstance(args, dict):
                args = {}
            if ph in ("M", 4):
                ref.metadata_lines += 1
                if (
                    ev.get("name") == "SH"
                    and ident(args.get("value")) is not None
                    and args.get("name") is not None
                ):
                    ref.commands.setdefault(str(ident(args.get("value"))), str(args["name"]))
                continue
            cat = str(ev.get("cat", "")).upper()
            name = str(ev.get("name", ""))
            is_io = cat in ("POSIX", "STDIO")
            if ph == 3:
                ref.aggregated_records += 1
                if not is_io:
                    continue
                cnt = num(args.get("dft_cnt"))
                dur = num(args.get("dur_sum"))
                if dur is None:
                    dur = num(args.get("dur"))
                ret = num(args.get("ret_sum"))
                if ret is None:
                    ret = num(args.get("ret"))
                f = ref.fam[family(name)]
                f.count += int(cnt or 0)
                f.time_us += dur or 0
                nb = 0
                if family(name) in ("read", "write") and ret is not None and ret > 0:
                    nb = _access_bytes(name, _agg_size(args), ret)
                f.bytes += nb
                bn = ref.by_name[name]
                bn.count += int(cnt or 0)
                bn.time_us += dur or 0
                bn.bytes += nb
                continue
            if ph not in ("X", 1):
                continue
            # complete event
            ref.events += 1
            pid = num(ev.get("pid"))
            ref.pids.add(pid if pid is not None else str(ev.get("pid")))
            ts = num(ev.get("ts"))
            dur = num(ev.get("dur")) or 0
            host = ident(args.get("hostname")) or ident(args.get("hhash"))
            proc = ref.procs[(host, pid if pid is not None else ev.get("pid"))]
            proc.events += 1
            if name == "start" and cat == "DFTRACER" and ident(args.get("cmd_hash")) is not None:
                proc.cmd_hash = proc.cmd_hash or ident(args.get("cmd_hash"))
            rank = num(args.get("rank"))
            named = _RANK_IN_NAME.search(path.name)
            if rank is not None or named:
                proc.rank = max(
                    int(rank if rank is not None else -1),
                    proc.rank if proc.rank is not None else -1,
                    int(named.group(1)) if named and rank is None else -1,
                )
            if ts is not None:
                proc.first = ts if proc.first is None else min(proc.first, ts)
                proc.last = ts + dur if proc.last is None else max(proc.last, ts + dur)
                if is_io:
                    proc.intervals.append((ts, ts + dur))
            if is_io:
                proc.io_calls += 1
            if ts is not None:
                if ref.min_ts is None or ts < ref.min_ts:
                    ref.min_ts = ts
                end = ts + dur
                if ref.max_end is None or end > ref.max_end:
                    ref.max_end = end
            if not is_io:
                continue
            fam_name = family(name)
            ret = num(args.get("ret"))
            nbytes = _access_bytes(name, args, ret) if fam_name in ("read", "write") else 0
            f = ref.fam[fam_name]
            f.count += 1
            f.time_us += dur
            f.bytes += nbytes
            bn = ref.by_name[name]
            bn.count += 1
            bn.time_us += dur
            bn.bytes += nbytes
            proc.moved += nbytes
            if ts is not None:
                ref.io_calls.append((int(ts), fam_name, nbytes if ret is not None else None, dur))
            if fam_name in ("read", "write") and ret is not None:
                ref.sized[fam_name] += 1
                if nbytes < SMALL_LIMIT:
                    ref.small[fam_name] += 1
                ref.hist[fam_name][hist_bin(nbytes)] += 1
            # position tracking
            fid = ident(args.get("fhash"))
            if fid is None:
                fid = ident(args.get("fname"))
            if fid is None:
                if fam_name in ("read", "write"):
                    ref.unclassified += 1
                continue
            host = ident(args.get("hhash"))
            if host is None:
                host = ident(args.get("hostname"))
            key = (host, pid if pid is not None else ev.get("pid"), fid)
            order += 1
            t = ts if ts is not None else -math.inf
            if name in OPENS:
                streams[key].append(Access(t, order, "open", 0, 0))
            elif name in SEEKS:
                pos = int(ret) if ret is not None and ret >= 0 else None
                streams[key].append(Access(t, order, "seek", pos, 0))
            elif fam_name in ("read", "write"):
                if name in POSITIONED:
                    off = num(args.get("offset"))
                    streams[key].append(Access(t, order, "prw", None if off is None else int(off), nbytes))
                else:
                    streams[key].append(Access(t, order, "rw", None, nbytes))
    for accesses in streams.values():
        _classify(ref, accesses)
    return ref


def _agg_size(args: dict[str, Any]) -> dict[str, Any]:
    """Item size of an aggregated fread/fwrite record (exact only when all sizes agree)."""
    if "size" in args:
        return {"size": args["size"]}
    lo, hi = num(args.get("size_min")), num(args.get("size_max"))
    if lo is not None and lo == hi:
        return {"size": lo}
    return {}


def _classify(ref: Reference, accesses: list[Access]) -> None:
    accesses.sort(key=lambda a: (a.ts, a.order))
    pos: int | None = None
    prev_end: int | None = None
    seen_access = False
    for a in accesses:
        if a.kind == "open":
            pos = 0
            continue
        if a.kind == "seek":
            pos = a.value
            continue
        start = a.value if a.kind == "prw" else pos
        if start is None:
            ref.unclassified += 1
            prev_end = None
            seen_access = True
            continue
        end = start + a.nbytes
        if a.kind == "rw":
            pos = end
        if not seen_access or prev_end is None:
            ref.unclassified += 1
        elif start == prev_end:
            ref.consecutive += 1
            ref.sequential += 1
        elif start > prev_end:
            ref.sequential += 1
        else:
            ref.random += 1
        seen_access = True
        prev_end = end


if __name__ == "__main__":  # pragma: no cover - manual use: python tests/reference.py PATH...
    import sys

    print(json.dumps(reference(sys.argv[1:]).summary(), indent=2))
