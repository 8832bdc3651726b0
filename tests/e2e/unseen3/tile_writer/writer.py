"""Unseen workload: a tile exporter that encodes fixed-size tiles and writes them durably.

Each tile is encoded (a little CPU work that releases the GIL: a hash over the tile) and written
at its offset, in tile order, to one of two output files (the first half of the tiles to the
first file, the second half to the second); the files are opened with O_DSYNC, so every write
reaches the device before it returns. Knobs: ``--writers`` (a pool of writer threads: the
encoder hands each write to the pool and goes on with the next tile), ``--stage-kib`` (tiles
staged in memory and written when the stage is full: the same bytes at the same offsets),
``--prealloc`` (tiles the output already holds are not rewritten),
``--split`` (the output is spread over more files). The first two interact: a larger stage
leaves fewer, larger writes for the pool to overlap.
The program does not say which of them change what it writes; dftune has to measure.
"""

from __future__ import annotations

import argparse
import hashlib
import os
import time
from concurrent.futures import Future, ThreadPoolExecutor

KIB = 1024


def main() -> None:
    ap = argparse.ArgumentParser(description=__doc__)
    ap.add_argument("--out", required=True)
    ap.add_argument("--tiles", type=int, default=384)
    ap.add_argument("--tile-kib", type=int, default=8)
    ap.add_argument("--writers", type=int, default=1)
    ap.add_argument("--stage-kib", type=int, default=0)
    ap.add_argument("--prealloc", type=int, default=0)
    ap.add_argument("--split", type=int, default=0)
    ap.add_argument("--rounds", type=int, default=6, help="hash rounds per tile (the encoding work)")
    args = ap.parse_args()
    os.makedirs(args.out, exist_ok=True)
    nfiles = 4 if args.split else 2
    flags = os.O_WRONLY | os.O_CREAT | os.O_TRUNC | getattr(os, "O_DSYNC", 0)
    fds = [os.open(os.path.join(args.out, f"tiles_{k}.bin"), flags, 0o644) for k in range(nfiles)]
    tile = args.tile_kib * KIB
    per_file = -(-args.tiles // nfiles)
    pool = ThreadPoolExecutor(max_workers=args.writers) if args.writers > 1 else None
    futures: list[Future[int]] = []
    stage: list[list[bytes]] = [[] for _ in fds]
    stage_at = [0] * nfiles
    limit = args.stage_kib * KIB
    writes = written = 0

    def put(k: int, offset: int, data: bytes) -> None:
        nonlocal writes
        writes += 1
        if pool is None:
            os.pwrite(fds[k], data, offset)
        else:
            futures.append(pool.submit(os.pwrite, fds[k], data, offset))

    def flush(k: int) -> None:
        if stage[k]:
            put(k, stage_at[k], b"".join(stage[k]))
            stage[k] = []

    start = time.perf_counter()
    for i in range(args.tiles):
        seed = i.to_bytes(8, "little") * (tile // 8)
        digest = seed
        for _ in range(args.rounds):  # encoding the tile
            digest = hashlib.sha256(digest + seed).digest() * (tile // 32)
        data = digest[:tile]
        k, slot = divmod(i, per_file)
        if args.prealloc and i % 4 == 3:  # "already there"
            continue
        written += 1
        offset = slot * tile
        if not limit:
            put(k, offset, data)
            continue
        if not stage[k]:
            stage_at[k] = offset
        stage[k].append(data)
        if len(stage[k]) * tile >= limit:
            flush(k)
    for k in range(nfiles):
        flush(k)
    for f in futures:
        f.result()
    if pool is not None:
        pool.shutdown()
    for fd in fds:
        os.close(fd)
    print(f"tiles {written} writes {writes}")
    print(f"run_time_s {time.perf_counter() - start:.6f}")


if __name__ == "__main__":
    main()
