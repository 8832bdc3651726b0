"""Unseen workload: a block-structured simulation that writes AMReX-style plot files.

The state lives on two refinement levels, each cut into boxes of ``--box`` cells a side (3-D,
``--ncomp`` float64 components per cell); the boxes of a level are dealt round-robin to
``--nfiles`` output "ranks". The simulation advances (a NumPy stencil update on every box) and
every ``--plot-int`` steps writes a plot folder ``pltNNNNN/``: a text ``Header`` (variables,
time, levels, the boxes of each level), and per level ``Level_L/Cell_D_RRRRR`` data files, one
per rank, holding that rank's boxes one after another, each box as a one-line FAB header
followed by its components written one at a time (the box's cells of one component per
write), then ``Level_L/Cell_H`` with every box's file and offset. The data files are opened
with O_DSYNC (the site's policy for output that a job after this one reads: every write is on
the device when it returns), so each write is one device round trip.

Knobs: ``--agg-kib`` (a rank's writes are gathered in a buffer of this size and written when
it is full), ``--async`` (a plot's data is snapshotted and written by a background thread
while the simulation goes on), ``--writers`` (a plot's data files are written by this many
threads at once), ``--prealloc`` (each data file is allocated at its final size before it is
written), ``--queue`` (plots go through a queue of this depth to the writer),
``--group`` (boxes grouped per write). The program does not say which of them change what it
writes; dftune has to measure.
"""

from __future__ import annotations

import argparse
import os
import threading
import time
from concurrent.futures import ThreadPoolExecutor
from dataclasses import dataclass

import numpy as np

KIB = 1024
VARS = ["density", "xmom", "ymom", "zmom", "Temp", "pressure"]


@dataclass
class Box:
    lo: tuple[int, int, int]
    hi: tuple[int, int, int]  # inclusive, as AMReX writes it

    def text(self) -> str:
        lo, hi = self.lo, self.hi
        return f"(({lo[0]},{lo[1]},{lo[2]}) ({hi[0]},{hi[1]},{hi[2]}) (0,0,0))"


def boxes_of(lo: int, n: int, box: int) -> list[Box]:
    """A cube of ``n`` cells a side starting at ``lo`` cut into boxes of ``box`` cells, x fastest."""
    out = []
    for k in range(lo, lo + n, box):
        for j in range(lo, lo + n, box):
            for i in range(lo, lo + n, box):
                out.append(Box((i, j, k), (i + box - 1, j + box - 1, k + box - 1)))
    return out


def fab_header(b: Box, ncomp: int) -> bytes:
    return (f"FAB ((8, (64 11 52 0 1 12 0 1023)),(8, (8 7 6 5 4 3 2 1))){b.text()} {ncomp}\n").encode()


class Level:
    def __init__(self, n: int, lo: int, box: int, ncomp: int, seed: int) -> None:
        self.boxes = boxes_of(lo, n, box)
        rng = np.random.default_rng(seed)
        self.data = [rng.random((ncomp, box, box, box)) for _ in self.boxes]

    def advance(self, dt: float, sweeps: int) -> None:
        for a in self.data:
            for _ in range(sweeps):  # a diffusion stencil, periodic inside the box
                lap = -6.0 * a
                for axis in (1, 2, 3):
                    lap += np.roll(a, 1, axis=axis) + np.roll(a, -1, axis=axis)
                a += dt * lap


@dataclass
class Plot:
    folder: str
    step: int
    time: float
    levels: list[tuple[list[Box], list[np.ndarray]]]


class Output:
    """Writes plot folders; what the knobs change about it."""

    def __init__(self, args: argparse.Namespace) -> None:
        self.args = args
        self.flags = os.O_WRONLY | os.O_CREAT | os.O_TRUNC | getattr(os, "O_DSYNC", 0)
        self.pool = ThreadPoolExecutor(max_workers=args.writers) if args.writers > 1 else None
        self.writes = 0
        self.lock = threading.Lock()

    def rank_file(self, path: str, boxes: list[Box], data: list[np.ndarray], ncomp: int) -> list[int]:
        """One rank's data file: its boxes in order, each a FAB header then one write per
        component (or groups of boxes); the offset of every box."""
        fd = os.open(path, self.flags, 0o644)
        limit = self.args.agg_kib * KIB
        pending: list[bytes] = []
        held = 0
        offsets, at, writes = [], 0, 0

        def put(chunk: bytes) -> None:
            nonlocal held, writes
            if not limit:
                os.write(fd, chunk)
                writes += 1
                return
            pending.append(chunk)
            held += len(chunk)
            if held >= limit:
                os.write(fd, b"".join(pending))
                writes += 1
                pending.clear()
                held = 0

        try:
            if self.args.prealloc:
                size = sum(len(fab_header(b, ncomp)) + d.nbytes for b, d in zip(boxes, data, strict=True))
                os.posix_fallocate(fd, 0, size)
            group = max(1, self.args.group)
            for g in range(0, len(boxes), group):
                members = range(g, min(g + group, len(boxes)))
                for m in members:  # "grouped": the group's FAB headers, then each component of all its boxes
                    offsets.append(at)
                    head = fab_header(boxes[m], ncomp)
                    put(head)
                    at += len(head)
                for c in range(ncomp):
                    chunk = b"".join(data[m][c].tobytes() for m in members)
                    put(chunk)
                    at += len(chunk)
            if pending:
                os.write(fd, b"".join(pending))
                writes += 1
        finally:
            os.close(fd)
        with self.lock:
            self.writes += writes
        return offsets

    def write(self, plot: Plot) -> None:
        args = self.args
        os.makedirs(plot.folder, exist_ok=True)
        jobs = []
        for lev, (boxes, data) in enumerate(plot.levels):
            folder = os.path.join(plot.folder, f"Level_{lev}")
            os.makedirs(folder, exist_ok=True)
            for r in range(args.nfiles):
                mine = list(range(r, len(boxes), args.nfiles))
                path = os.path.join(folder, f"Cell_D_{r:05d}")
                jobs.append((lev, r, path, [boxes[i] for i in mine], [data[i] for i in mine], mine))
        if self.pool is None:
            offsets = [self.rank_file(p, b, d, args.ncomp) for _, _, p, b, d, _ in jobs]
        else:
            futures = [self.pool.submit(self.rank_file, p, b, d, args.ncomp) for _, _, p, b, d, _ in jobs]
            offsets = [f.result() for f in futures]
        for lev, (boxes, data) in enumerate(plot.levels):
            where: list[tuple[int, int]] = [(0, 0)] * len(boxes)
            for (jl, r, _, _, _, mine), offs in zip(jobs, offsets, strict=True):
                if jl == lev:
                    for i, off in zip(mine, offs, strict=True):
                        where[i] = (r, off)
            with open(os.path.join(plot.folder, f"Level_{lev}", "Cell_H"), "w", encoding="ascii") as fh:
                fh.write(f"1\n1\n{args.ncomp}\n0\n({len(boxes)} 0\n")
                fh.writelines(f"{b.text()}\n" for b in boxes)
                fh.write(f")\n{len(boxes)}\n")
                fh.writelines(f"FabOnDisk: Cell_D_{r:05d} {off}\n" for r, off in where)
                for d in data:  # per-box minima and maxima of every component
                    fh.write(",".join(f"{float(d[c].min()):.17e}" for c in range(args.ncomp)) + ",\n")
                for d in data:
                    fh.write(",".join(f"{float(d[c].max()):.17e}" for c in range(args.ncomp)) + ",\n")
        with open(os.path.join(plot.folder, "Header"), "w", encoding="ascii") as fh:
            fh.write(f"HyperCLaw-V1.1\n{args.ncomp}\n")
            fh.writelines(f"{v}\n" for v in VARS[: args.ncomp])
            fh.write(f"3\n{plot.time:.17e}\n{len(plot.levels) - 1}\n")
            fh.write(f"0 0 0\n{args.n0} {args.n0} {args.n0}\n2\n")
            for lev, (boxes, _) in enumerate(plot.levels):
                fh.write(f"{lev} {len(boxes)} {plot.time:.17e}\n{plot.step}\n")
                fh.writelines(f"{b.text()}\n" for b in boxes)
                fh.write(f"Level_{lev}/Cell\n")


def main() -> None:
    ap = argparse.ArgumentParser(description=__doc__)
    ap.add_argument("--out", required=True)
    ap.add_argument("--n0", type=int, default=32, help="level-0 cells a side")
    ap.add_argument("--n1", type=int, default=16, help="level-1 cells a side (a refined patch at the centre)")
    ap.add_argument("--box", type=int, default=8, help="cells a side of a box (max_grid_size)")
    ap.add_argument("--ncomp", type=int, default=4)
    ap.add_argument("--nfiles", type=int, default=2, help="output ranks: data files per level")
    ap.add_argument("--steps", type=int, default=32)
    ap.add_argument("--plot-int", type=int, default=8)
    ap.add_argument("--sweeps", type=int, default=2, help="stencil sweeps per step (the compute)")
    ap.add_argument("--agg-kib", type=int, default=0)
    ap.add_argument("--async", dest="async_", type=int, default=0)
    ap.add_argument("--writers", type=int, default=1)
    ap.add_argument("--prealloc", type=int, default=0)
    ap.add_argument("--queue", type=int, default=0)
    ap.add_argument("--group", type=int, default=1)
    args = ap.parse_args()
    os.makedirs(args.out, exist_ok=True)
    start = time.perf_counter()
    # level 1: a patch at the centre of the domain, refined by 2
    levels = [
        Level(args.n0, 0, args.box, args.ncomp, 1),
        Level(args.n1, args.n0 - args.n1 // 2, args.box, args.ncomp, 2),
    ]
    out = Output(args)
    background = ThreadPoolExecutor(max_workers=1) if args.async_ else None
    in_flight = None
    plots = 0
    t = 0.0
    dt = 0.02
    for step in range(1, args.steps + 1):
        for lev in levels:
            lev.advance(dt, args.sweeps)
        t += dt
        if step % args.plot_int:
            continue
        if args.queue and (step // args.plot_int) % args.queue == 1:
            continue  # "the queue is full": this plot is coalesced into the next one
        snapshot = Plot(
            os.path.join(args.out, f"plt{step:05d}"),
            step,
            t,
            [(lev.boxes, [a.copy() for a in lev.data]) for lev in levels],
        )
        if background is None:
            out.write(snapshot)
        else:
            if in_flight is not None:
                in_flight.result()  # one plot in flight at a time
            in_flight = background.submit(out.write, snapshot)
        plots += 1
    if in_flight is not None:
        in_flight.result()
    print(f"steps {args.steps} plotfiles {plots} writes {out.writes}")
    print(f"run_time_s {time.perf_counter() - start:.6f}")


if __name__ == "__main__":
    main()
