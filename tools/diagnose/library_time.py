"""Time a program spends inside its I/O libraries, from its sampled stacks.

A zarr codec pipeline decoding chunks, h5py filling its chunk cache, a DataLoader waiting for
its batches: none of it is a POSIX call, so a traced run can show a program as compute-bound
while it waits for its data most of the time. A sampling profiler (py-spy, run by
tools/runner/sampling.py) sees it: each sample is the program's stacks at one instant, and a
sample of the main thread with a frame in a library's own source (resources/facts/stacks.toml,
``frames``) is an instant spent inside that library. The share of such samples is an upper
bound of the I/O the trace cannot show (the library's own compute is in it too), which the
worth-tuning gate weighs beside MPI and wait time (tools/diagnose/engine.py).

This module only reads py-spy's ``--format raw`` output (collapsed stacks, one per line:
``process PID:"CMD";thread (TID): NAME;frame;...;frame COUNT``); it never runs anything.
"""

from __future__ import annotations

import re
from collections import Counter
from collections.abc import Mapping, Sequence
from dataclasses import dataclass

from dftune.core.domain.diagnosis import PossiblyIo

#: a process part, up to the next process or its thread (a command line may hold ';'), or up to
#: the first frame; with --subprocesses py-spy writes the chain from the launcher down
_PROCESS = (
    re.compile(r'^process (\d+):"(.*?)";(?=thread \(|process \d+:)'),
    re.compile(r'^process (\d+):"(.*?)";'),
)
_THREAD = re.compile(r"^thread \((0x[0-9a-fA-F]+|\d+)\)(?:: (.*))?$")


@dataclass(frozen=True)
class Sample:
    """One collapsed stack: which process and thread, its frames (outermost first), how often."""

    pid: int
    command: str
    main_thread: bool
    frames: tuple[str, ...]
    count: int


def read_samples(text: str) -> list[Sample]:
    """The collapsed stacks of py-spy's raw output (lines it cannot read are left out)."""
    out: list[Sample] = []
    for line in text.splitlines():
        stack, _, count = line.rstrip().rpartition(" ")
        if not stack or not count.isdigit():
            continue
        pid, command = 0, ""
        while (p := _PROCESS[0].match(stack) or _PROCESS[1].match(stack)) is not None:
            pid, command = int(p.group(1)), p.group(2)  # the innermost process is the sampled one
            stack = stack[p.end() :]
        parts = stack.split(";")
        main = True  # without --threads every sample is the process's
        if parts and (t := _THREAD.match(parts[0])) is not None:
            tid, name = t.group(1), (t.group(2) or "").strip()
            main = name == "MainThread" or (tid.isdigit() and int(tid) == pid)
            parts = parts[1:]
        out.append(Sample(pid=pid, command=command, main_thread=main, frames=tuple(parts), count=int(count)))
    return out


@dataclass(frozen=True)
class LibraryTime:
    """The main thread's samples of the program's longest-lived Python process, and how many
    of them were inside each library."""

    command: str
    samples: int
    inside: int
    by_library: dict[str, int]

    @property
    def share(self) -> float:
        return self.inside / self.samples if self.samples else 0.0


def library_time(samples: Sequence[Sample], libraries: Mapping[str, Sequence[str]]) -> LibraryTime | None:
    """How much of the program's main thread was inside ``libraries`` (id -> source fragments).

    The program is its Python process with the most main-thread samples (a wrapper's child, not
    a helper that lived briefly); a sample counts once however many libraries it passes through,
    and for each library it passes through. None when no main thread was sampled."""
    per_process = Counter[int]()
    for s in samples:
        if s.main_thread:
            per_process[s.pid] += s.count
    if not per_process:
        return None
    pid = per_process.most_common(1)[0][0]
    inside = 0
    by_library = Counter[str]()
    command = ""
    for s in samples:
        if s.pid != pid or not s.main_thread:
            continue
        command = command or s.command
        hit = [lib for lib, parts in libraries.items() if any(p in f for f in s.frames for p in parts)]
        if hit:
            inside += s.count
            by_library.update({lib: s.count for lib in hit})
    return LibraryTime(command=command, samples=per_process[pid], inside=inside, by_library=dict(by_library))


def possibly_io(
    got: LibraryTime | None, wall_s: float | None, *, min_samples: int, rate_hz: float, tool: str = "py-spy"
) -> PossiblyIo | None:
    """The gate's view of one sampled run (None: too few samples to say anything)."""
    if got is None or got.samples < min_samples:
        return None
    libs = ", ".join(
        f"{lib} {n / got.samples:.0%}" for lib, n in sorted(got.by_library.items(), key=lambda kv: -kv[1])
    )
    span = wall_s if wall_s else got.samples / rate_hz
    return PossiblyIo(
        source="library-time",
        time_s=round(got.share * span, 6),
        fraction=round(got.share, 6),
        evidence=(
            f"one untraced run sampled by {tool} ({got.samples:,} samples of the program's main thread "
            f"at {rate_hz:g} Hz): inside its I/O libraries for {got.share:.0%} of them"
            + (f" ({libs})" if libs else "")
            + "; reads through a library (decoding, its cache, its own threads) are no POSIX call"
        ),
    )
