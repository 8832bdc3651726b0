"""Who owns the programs dftune starts, so none outlives dftune or spoils the next measurement.

- Every program runs in its own process group (:mod:`core.process`) and, on Linux, under
  ``PR_SET_PDEATHSIG``: the direct child dies with the thread that started it, even when
  dftune is killed with SIGKILL.
- While a driver is :func:`supervised` or a contained command runs (:func:`reaping`), dftune is a
  child subreaper (``PR_SET_CHILD_SUBREAPER``): a grandchild that calls ``setsid`` and loses its
  parent is re-parented to dftune instead of init, so the sweep after each program still finds
  it; the sweep also follows the process tree below the program, so a scrubbed environment
  (``env -i``) hides nothing from it.
- Every workload carries ``DFTUNE_PROC_TAG=<owner>/<pid>.<n>`` in its environment. After the
  program ends, :func:`sweep` kills whatever still carries that tag or was adopted from it
  (a setsid'd grandchild included) and reaps it.
- Under a run, every group is recorded in the run's ``processes.json`` (:class:`Ledger`); the next
  driver of that run (start, resume, approve, replay) calls :func:`kill_leftovers` before it
  measures anything, so what a SIGKILLed dftune left behind is gone first.
- SIGTERM/SIGINT of a supervised dftune kill every live group and raise
  :class:`DriverInterrupted`, so a node never completes with a half-killed measurement and the
  run stays resumable.

- A guardian process (:mod:`core.guardian`) outlives a SIGKILLed dftune just long enough to
  SIGKILL every program group still registered and every process carrying this dftune's tags:
  a grandchild that ignores SIGTERM and stays in the workload's group is gone at once, not only
  at the next start.

Not caught anywhere: on a platform without ``/proc`` and ``prctl`` (not Linux), a grandchild
that leaves the process group; after a SIGKILL of dftune, one that left the group and also
scrubbed its environment (no cgroup is used); and anything, if the guardian is killed together
with dftune. They are named in :data:`LIMITS` and in docs/limits.md.
"""

from __future__ import annotations

import ctypes
import os
import signal
import sys
import threading
import time
from collections.abc import Callable, Iterator
from contextlib import contextmanager, suppress
from dataclasses import dataclass, field
from pathlib import Path
from types import FrameType
from typing import Any

from dftune.core import strictjson
from dftune.core.fsio import atomic_write_bytes
from dftune.core.guardian import Guardian

TAG_ENV = "DFTUNE_PROC_TAG"
LEDGER_FILE = "processes.json"
PR_SET_PDEATHSIG = 1
PR_SET_CHILD_SUBREAPER = 36
PR_GET_CHILD_SUBREAPER = 37
LINUX = sys.platform.startswith("linux")
#: Kills every program group still registered when this process dies, SIGKILL included.
GUARDIAN = Guardian(TAG_ENV)
#: What this platform cannot guarantee (empty on Linux with /proc).
LIMITS = (
    ""
    if LINUX and Path("/proc/self/stat").exists()
    else "grandchildren that leave the workload's process group cannot be tracked on this platform"
)


class DriverInterrupted(BaseException):
    """SIGTERM/SIGINT reached a supervised dftune: its programs were killed, the work left undone.

    A ``BaseException`` (like ``KeyboardInterrupt``) so no ``except Exception`` in a node records a
    half-killed measurement as a result."""

    def __init__(self, signum: int) -> None:
        super().__init__(f"stopped by {signal.Signals(signum).name}")
        self.signum = signum


# --------------------------------------------------------------------------- prctl


_libc: Any = None


def _prctl_fn() -> Any:
    """libc's prctl (Linux), loaded on first use; None elsewhere."""
    global _libc
    if not LINUX:
        return None
    if _libc is None:
        try:
            _libc = ctypes.CDLL(None, use_errno=True)
        except OSError:
            return None
    return getattr(_libc, "prctl", None)


def _prctl(option: int, arg: Any) -> bool:
    fn = _prctl_fn()
    return fn is not None and int(fn(option, arg, 0, 0, 0)) == 0


def is_subreaper() -> bool:
    value = ctypes.c_int(0)
    return _prctl(PR_GET_CHILD_SUBREAPER, ctypes.byref(value)) and bool(value.value)


def child_preexec() -> Callable[[], None] | None:
    """What the forked child runs before exec: die with the thread that started it (Linux)."""
    fn = _prctl_fn()  # resolved in the parent, so the child only makes the call
    if fn is None:
        return None
    parent = os.getpid()

    def preexec() -> None:
        fn(PR_SET_PDEATHSIG, int(signal.SIGKILL), 0, 0, 0)
        if os.getppid() != parent:  # the parent died between fork and prctl
            os._exit(255)

    return preexec


# --------------------------------------------------------------------------- /proc


@dataclass(frozen=True)
class ProcInfo:
    pid: int
    ppid: int
    pgrp: int
    session: int
    start: int  # clock ticks after boot: with the pid, identifies a process across pid reuse
    state: str


def pid_alive(pid: int) -> bool:
    """Whether process ``pid`` exists on this host (one we may not signal exists too)."""
    try:
        os.kill(pid, 0)
    except ProcessLookupError:
        return False
    except PermissionError:
        return True
    return True


def proc_info(pid: int) -> ProcInfo | None:
    try:
        raw = Path(f"/proc/{pid}/stat").read_text()
    except (OSError, ValueError):
        return None
    rest = raw[raw.rfind(")") + 2 :].split()
    try:
        return ProcInfo(pid, int(rest[1]), int(rest[2]), int(rest[3]), int(rest[19]), rest[0])
    except (IndexError, ValueError):
        return None


def _tag_of(pid: int) -> str | None:
    try:
        env = Path(f"/proc/{pid}/environ").read_bytes()
    except OSError:
        return None
    key = TAG_ENV.encode() + b"="
    for item in env.split(b"\0"):
        if item.startswith(key):
            return item[len(key) :].decode("utf-8", "replace")
    return None


def _all_pids() -> list[int]:
    try:
        return [int(n) for n in os.listdir("/proc") if n.isdigit()]
    except OSError:
        return []


def _kill(pid: int, pgid: int | None = None) -> None:
    with suppress(ProcessLookupError, PermissionError):
        if pgid is not None:
            os.killpg(pgid, signal.SIGKILL)
        os.kill(pid, signal.SIGKILL)


def _reap(pids: list[int], wait_s: float = 2.0) -> None:
    """Wait until killed processes are gone; collect the ones re-parented to us (no zombies left)."""
    me = os.getpid()
    deadline = time.monotonic() + wait_s
    pending = list(pids)
    while pending and time.monotonic() < deadline:
        still = []
        for pid in pending:
            info = proc_info(pid)
            if info is not None and info.ppid == me:
                with suppress(ChildProcessError):
                    os.waitpid(pid, os.WNOHANG)
                info = proc_info(pid)
            if info is not None and info.state != "Z":
                still.append(pid)
        pending = still
        if pending:
            time.sleep(0.02)


#: how long a sweep goes on finding what the program's tree forks while it is being stopped
SWEEP_S = 3.0


def sweep(tag: str, *, since: int, pgid: int) -> list[str]:
    """Kill what a finished program left: its group, everything below it in the process tree,
    anything carrying ``tag``, and anything re-parented to this (subreaper) process since clock
    tick ``since``; return descriptions of those outside its group (empty almost always).

    Each is stopped (SIGSTOP, which nothing can ignore) before the tree is read again, so a process
    forking as fast as it can leaves its children where the next reading finds them; once a
    reading finds nothing new, all are killed. Neither a new session (``setsid``) nor a scrubbed
    environment (``env -i``) hides a process from the tree or from the subreaper."""
    with suppress(ProcessLookupError, PermissionError):
        os.killpg(pgid, signal.SIGSTOP)
    if not LINUX:
        with suppress(ProcessLookupError, PermissionError):
            os.killpg(pgid, signal.SIGKILL)
        return []
    me = os.getpid()
    mine = proc_info(me)
    guardian = GUARDIAN.pid()
    found: list[str] = []
    stopped: dict[int, ProcInfo] = {}
    deadline = time.monotonic() + SWEEP_S

    def fresh(info: ProcInfo) -> bool:
        return info.start >= since and info.state != "Z" and info.pid not in (me, guardian)

    while True:
        with _STATE.spawn:  # every direct child another thread started is in `live` by now
            table = {i.pid: i for i in map(proc_info, _all_pids()) if i is not None}
            live = set(_STATE.live)
        below: dict[int, list[int]] = {}
        for info in table.values():
            below.setdefault(info.ppid, []).append(info.pid)
        new: set[int] = set()
        for info in table.values():
            if not fresh(info) or info.pid in stopped:
                continue
            adopted = info.ppid == me and mine is not None and info.pgrp != mine.pgrp and info.pid not in live
            if adopted or info.pgrp == pgid or _tag_of(info.pid) == tag:
                new.add(info.pid)
        root = table.get(pgid)  # the program itself, unless its pid was freed and taken since
        frontier = [*([pgid] if root is not None and root.start == since else []), *new, *stopped]
        while frontier:  # and everything below the program or below one of those
            for child in below.get(frontier.pop(), ()):
                info = table[child]
                if child not in new and child not in stopped and fresh(info):
                    new.add(child)
                    frontier.append(child)
        for pid in new:
            with suppress(ProcessLookupError, PermissionError):
                os.kill(pid, signal.SIGSTOP)
            stopped[pid] = table[pid]
        if not new or time.monotonic() > deadline:
            break
        time.sleep(0.01)  # a fork under way when the stop landed shows its child by now
    with suppress(ProcessLookupError, PermissionError):
        os.killpg(pgid, signal.SIGKILL)
    for pid, info in stopped.items():
        if pid in live:  # the program itself: its group's kill ends it, and its Popen reaps it
            continue
        _kill(pid)
        if info.pgrp != pgid:
            found.append(f"pid {pid} (session {info.session})")
    killed = [pid for pid in stopped if pid not in live]
    _reap(killed)
    for pid in killed:  # one whose parent died after it did was handed to us as a zombie
        now = proc_info(pid)
        if now is not None and now.ppid == me:
            with suppress(ChildProcessError):
                os.waitpid(pid, os.WNOHANG)
    return found


# --------------------------------------------------------------------------- ledger


@dataclass
class Ledger:
    """A run's process groups on disk (``runs/<id>/processes.json``): what the next driver kills."""

    path: Path
    lock: threading.Lock = field(default_factory=threading.Lock)

    def entries(self) -> list[dict[str, Any]]:
        try:
            data = strictjson.read_file(self.path)  # a regular file, bounded: never a pipe to wait on
        except ValueError:
            return []
        return [e for e in data if isinstance(e, dict)] if isinstance(data, list) else []

    def _write(self, entries: list[dict[str, Any]]) -> None:
        atomic_write_bytes(self.path, strictjson.dumps_checked(entries, self.path, indent=1).encode("utf-8"))

    def add(self, entry: dict[str, Any]) -> None:
        with self.lock:
            self._write([*self.entries(), entry])

    def remove(self, pid: int) -> None:
        with self.lock:
            self._write([e for e in self.entries() if e.get("pid") != pid])


def kill_leftovers(ledger: Ledger, owner: str) -> list[str]:
    """Kill every process a dead driver of ``owner`` left: recorded groups whose leader is the
    recorded process (or whose members carry the owner's tag), and anything tagged ``owner/``."""
    found: list[str] = []
    killed: list[int] = []
    prefix = f"{owner}/"
    recorded = ledger.entries()
    for e in recorded:
        pid, pgid, start = int(e.get("pid", 0)), int(e.get("pgid", 0)), int(e.get("start", -1))
        if pid <= 1 or pgid <= 1:
            continue
        info = proc_info(pid)
        if info is not None and info.start == start and info.state != "Z":
            _kill(pid, pgid)
            killed.append(pid)
            found.append(f"group {pgid} ({e.get('argv0', '?')})")
    if LINUX:
        me = os.getpid()
        for pid in _all_pids():
            tag = _tag_of(pid) if pid != me else None
            if tag is not None and tag.startswith(prefix):
                info = proc_info(pid)
                _kill(pid)
                killed.append(pid)
                found.append(f"pid {pid} (session {info.session if info else '?'})")
    _reap(killed)
    if recorded:  # nothing to write when nothing was recorded (a full disk need not stop a resume here)
        ledger._write([])
    return found


# --------------------------------------------------------------------------- supervision


@dataclass
class _State:
    """What this process supervises. Several drivers may share it (a campaign drives one run per
    thread), so every program belongs to the owner of the thread that started it, and each driver
    records, sweeps and kills only its own."""

    #: the owner of threads that did not say (one driver alone: its threads are its own)
    default_owner: str = ""
    ledgers: dict[str, Ledger] = field(default_factory=dict)  # owner -> its run's ledger
    live: dict[int, tuple[int, str]] = field(default_factory=dict)  # pid -> (pgid, owner) of running programs
    counter: int = 0
    stopping: int | None = None  # the signal that stopped the driver
    active: int = 0  # drivers under supervised()
    reapers: int = 0  # holders of the subreaper (drivers, contained commands): on until the last ends
    reaper_set: bool = False  # whether a holder turned the subreaper on (and so the last turns it off)
    lock: threading.Lock = field(default_factory=threading.Lock)
    #: held while a program is started and registered, and while a sweep looks for orphans, so a
    #: sweep never takes another thread's just-started program for an orphan
    spawn: threading.Lock = field(default_factory=threading.Lock)


_STATE = _State()
_THREAD = threading.local()


def current_owner() -> str:
    """The owner of this thread's programs: set by :func:`supervised` or :func:`owned_by`."""
    return getattr(_THREAD, "owner", None) or _STATE.default_owner


@contextmanager
def owned_by(owner: str) -> Iterator[None]:
    """Programs this thread starts belong to ``owner`` (a worker thread of one run)."""
    previous = getattr(_THREAD, "owner", None)
    _THREAD.owner = owner
    try:
        yield
    finally:
        _THREAD.owner = previous


@contextmanager
def spawning() -> Iterator[None]:
    """Hold while starting a program and calling :func:`started` (see ``_State.spawn``)."""
    with _STATE.spawn:
        yield


def new_tag() -> str:
    with _STATE.lock:
        _STATE.counter += 1
        return f"{current_owner() or 'dftune'}/{os.getpid()}.{_STATE.counter}"


def _owner_of(tag: str) -> str:
    return tag.rsplit("/", 1)[0]


def started(pid: int, argv0: str, tag: str) -> int:
    """Record a started program (its group is its pid); returns its start tick."""
    info = proc_info(pid)
    start = info.start if info else 0
    owner = _owner_of(tag)
    GUARDIAN.watch(pid)
    with _STATE.lock:
        _STATE.live[pid] = (pid, owner)
        ledger = _STATE.ledgers.get(owner)
    if ledger is not None:
        ledger.add({"pid": pid, "pgid": pid, "start": start, "argv0": argv0, "tag": tag})
    return start


def finished(pid: int) -> None:
    GUARDIAN.release(pid)
    with _STATE.lock:
        _pgid, owner = _STATE.live.pop(pid, (0, ""))
        ledger = _STATE.ledgers.get(owner)
    if ledger is not None:
        ledger.remove(pid)


def check_stopping() -> None:
    """Raise :class:`DriverInterrupted` once a signal stopped the driver (a killed program is no result)."""
    if _STATE.stopping is not None:
        raise DriverInterrupted(_STATE.stopping)


def _on_signal(signum: int, frame: FrameType | None) -> None:
    _STATE.stopping = signum
    for pgid, _owner in list(_STATE.live.values()):
        with suppress(ProcessLookupError, PermissionError):
            os.killpg(pgid, signal.SIGKILL)
    raise DriverInterrupted(signum)


@contextmanager
def supervised(owner: str = "", ledger: Path | None = None) -> Iterator[list[str]]:
    """Drive with dftune as subreaper, programs tagged ``owner`` (and recorded in ``ledger``), and
    SIGTERM/SIGINT turned into :class:`DriverInterrupted`; yields what :func:`kill_leftovers` found.

    Drivers in other threads of this process (a campaign's runs) keep their own programs: this one
    records, sweeps and, on the way out, kills only what its owner started."""
    book = Ledger(ledger) if ledger is not None else None
    found = kill_leftovers(book, owner) if book is not None else []
    with _STATE.lock:
        _STATE.active += 1
        _hold_reaper()
        if _STATE.active == 1:
            _STATE.stopping = None
        if book is not None:
            _STATE.ledgers[owner] = book
        previous_default, _STATE.default_owner = _STATE.default_owner, owner
    handlers: dict[int, Any] = {}
    if threading.current_thread() is threading.main_thread():
        for sig in (signal.SIGTERM, signal.SIGINT):
            handlers[sig] = signal.signal(sig, _on_signal)
    try:
        with owned_by(owner):
            yield found
    finally:
        for signum, old in handlers.items():
            signal.signal(signum, old)
        with _STATE.lock:
            mine = [(pid, pgid) for pid, (pgid, who) in _STATE.live.items() if who == owner]
        for pid, pgid in mine:
            _kill(pid, pgid)
        with _STATE.lock:
            if book is not None and _STATE.ledgers.get(owner) is book:
                del _STATE.ledgers[owner]
            if _STATE.default_owner == owner:
                _STATE.default_owner = previous_default
            _STATE.active -= 1
            _release_reaper()
            if _STATE.active == 0:
                _STATE.stopping = None


def _hold_reaper() -> None:
    """Under ``_STATE.lock``: one more holder of the subreaper (turned on by the first)."""
    _STATE.reapers += 1
    if _STATE.reapers == 1:
        _STATE.reaper_set = not is_subreaper() and _prctl(PR_SET_CHILD_SUBREAPER, 1)


def _release_reaper() -> None:
    """Under ``_STATE.lock``: one holder fewer (the last turns it off if a holder turned it on)."""
    _STATE.reapers -= 1
    if _STATE.reapers == 0 and _STATE.reaper_set:
        _prctl(PR_SET_CHILD_SUBREAPER, 0)
        _STATE.reaper_set = False


@contextmanager
def reaping() -> Iterator[None]:
    """Be the subreaper while a contained program runs (Linux): a descendant that loses its parent
    (``setsid env -i sleep &`` from a script that then exits) is re-parented here, where the sweep
    after the program finds it, instead of to init, where nothing would."""
    with _STATE.lock:
        _hold_reaper()
    try:
        yield
    finally:
        with _STATE.lock:
            _release_reaper()
