"""A small guardian process that ends dftune's programs when dftune itself dies, even by SIGKILL.

Why: ``PR_SET_PDEATHSIG`` kills only the direct child when dftune dies; a grandchild in the
workload's process group that ignores SIGTERM lived on after ``kill -9`` of ``dftune bench``.
Nothing inside a SIGKILLed process can act, so the guardian acts from outside: one process per
dftune process, in its own session, reading a pipe from dftune.  dftune writes ``+<pgid>`` when
it starts a program and ``-<pgid>`` when the program is done.  When the pipe reaches end of file
(dftune exited or was killed: the kernel closes its end either way) the guardian SIGKILLs every
group still registered, then every process that carries one of this dftune's tags
(``DFTUNE_PROC_TAG=<owner>/<pid>.<n>``, so a grandchild that left the group with ``setsid`` goes
too), then removes every folder registered with ``+d<path>`` (a staged data set copy, only when it
still holds its staging marker), and exits.  It sits outside the workload's process tree, so exit
codes, signals and the measured wall time of the workload are untouched.

What it cannot catch (docs/limits.md): a grandchild that left the group *and* scrubbed its
environment; and everything, if the guardian is killed together with dftune (e.g. the OOM killer
or ``kill -9`` of both).  The next driver of the same run still cleans up from the run's ledger.
"""

from __future__ import annotations

import os
import subprocess
import sys
import threading
from contextlib import suppress
from typing import IO

#: The guardian's whole program (run with ``python -I -S``: no site, no user paths, fast start).
GUARDIAN_SOURCE = r"""
import os, shutil, signal, sys
parent, key = sys.argv[1], sys.argv[2].encode() + b"="
signal.signal(signal.SIGINT, signal.SIG_IGN)
signal.signal(signal.SIGTERM, signal.SIG_IGN)
groups, folders = set(), set()
for line in sys.stdin.buffer:
    word = line.rstrip(b"\n")
    if word[:2] in (b"+d", b"-d") and word[2:3] == b"/":
        (folders.add if word[:1] == b"+" else folders.discard)(word[2:])
        continue
    word = word.strip()
    if word[:1] in (b"+", b"-") and word[1:].isdigit():
        (groups.add if word[:1] == b"+" else groups.discard)(int(word[1:]))
for pgid in groups:
    try:
        os.killpg(pgid, signal.SIGKILL)
    except OSError:
        pass
mark = ("/" + parent + ".").encode()
me = os.getpid()
for name in os.listdir("/proc"):
    if not name.isdigit() or int(name) == me:
        continue
    try:
        with open("/proc/" + name + "/environ", "rb") as fh:
            env = fh.read()
    except OSError:
        continue
    for item in env.split(b"\0"):
        if item.startswith(key) and (b"/" + item[len(key):].rsplit(b"/", 1)[-1]).startswith(mark):
            try:
                os.kill(int(name), signal.SIGKILL)
            except OSError:
                pass
for folder in folders:
    if os.path.isfile(os.path.join(folder, b".dftune-stage.json")):
        shutil.rmtree(folder, ignore_errors=True)
"""


class Guardian:
    """This process's guardian, started on first use (Linux only; elsewhere it does nothing)."""

    def __init__(self, tag_env: str) -> None:
        self.tag_env = tag_env
        self.lock = threading.Lock()
        self.proc: subprocess.Popen[bytes] | None = None
        self.owner_pid = 0

    def pid(self) -> int | None:
        """The guardian's pid, when one runs for this process."""
        proc = self.proc
        return proc.pid if proc is not None and self.owner_pid == os.getpid() else None

    def _pipe(self) -> IO[bytes] | None:
        if not sys.platform.startswith("linux"):
            return None
        if self.proc is not None and self.owner_pid == os.getpid() and self.proc.poll() is None:
            return self.proc.stdin
        env = {k: v for k, v in os.environ.items() if k != self.tag_env}
        try:
            self.proc = subprocess.Popen(
                [sys.executable, "-I", "-S", "-c", GUARDIAN_SOURCE, str(os.getpid()), self.tag_env],
                stdin=subprocess.PIPE,
                stdout=subprocess.DEVNULL,
                stderr=subprocess.DEVNULL,
                start_new_session=True,
                env=env,
                close_fds=True,
            )
        except OSError:
            self.proc = None
            return None
        self.owner_pid = os.getpid()
        return self.proc.stdin

    def _send(self, line: str) -> None:
        with self.lock:
            pipe = self._pipe()
            if pipe is None:
                return
            with suppress(OSError, ValueError):  # a dead guardian: the next call starts a new one
                pipe.write(line.encode() + b"\n")
                pipe.flush()

    def watch(self, pgid: int) -> None:
        """Kill group ``pgid`` if dftune dies before :meth:`release`."""
        self._send(f"+{pgid}")

    def release(self, pgid: int) -> None:
        self._send(f"-{pgid}")

    def watch_dir(self, path: str) -> None:
        """Remove folder ``path`` (an absolute path holding a staging marker) if dftune dies first."""
        self._send(f"+d{path}")

    def release_dir(self, path: str) -> None:
        self._send(f"-d{path}")
