"""Unseen workload: a DataLoader-style pipeline, one small file per sample, worker processes.

The main process shuffles the file list each epoch (seeded), cuts it into batches and hands
the batches, in order, to ``--workers`` worker processes (multiprocessing, forked), which read
each sample file whole with direct I/O and return the batch; the main process runs a training
step per batch. ``--workers 0`` reads in the main process. Other knobs: ``--shard-aware``
(each worker is given a shard of the file list), ``--index-cache`` (how many index entries are
kept). The program does not say which of them change what it reads; dftune has to measure.
"""

from __future__ import annotations

import argparse
import ctypes
import mmap
import multiprocessing as mp
import os
import random
import time

_LIBC = ctypes.CDLL(None, use_errno=True)
_LIBC.pread.argtypes = [ctypes.c_int, ctypes.c_void_p, ctypes.c_size_t, ctypes.c_long]
_LIBC.pread.restype = ctypes.c_ssize_t
_BUF: list[tuple[mmap.mmap, int]] = []


def paths(data: str, n: int) -> list[str]:
    return [os.path.join(data, f"img_{i:05d}.bin") for i in range(n)]


def make_data(data: str, n: int, size: int) -> None:
    os.makedirs(data, exist_ok=True)
    block = os.urandom(size)
    for p in paths(data, n):
        if not (os.path.exists(p) and os.path.getsize(p) == size):
            with open(p, "wb") as fh:
                fh.write(block)


def read_whole(path: str, size: int) -> int:
    if not _BUF:
        buf = mmap.mmap(-1, size)
        _BUF.append((buf, ctypes.addressof(ctypes.c_char.from_buffer(buf))))
    addr = _BUF[0][1]
    try:
        fd = os.open(path, os.O_RDONLY | getattr(os, "O_DIRECT", 0))
    except OSError:
        fd = os.open(path, os.O_RDONLY)
    try:
        n = _LIBC.pread(fd, addr, size, 0)
        if n < 0:
            raise OSError(ctypes.get_errno(), path)
        return int(n)
    finally:
        os.close(fd)


def load_batch(job: tuple[list[str], int]) -> int:
    batch, size = job
    return sum(read_whole(p, size) for p in batch)


def main() -> None:
    ap = argparse.ArgumentParser(description=__doc__)
    ap.add_argument("--data", required=True)
    ap.add_argument("--samples", type=int, default=256)
    ap.add_argument("--size-kib", type=int, default=32)
    ap.add_argument("--batch", type=int, default=8)
    ap.add_argument("--epochs", type=int, default=2)
    ap.add_argument("--workers", type=int, default=0)
    ap.add_argument("--shard-aware", type=int, default=0)
    ap.add_argument("--index-cache", type=int, default=0)
    ap.add_argument("--step-ms", type=float, default=4.0)
    ap.add_argument("--setup-only", action="store_true")
    args = ap.parse_args()
    size = args.size_kib * 1024
    if args.setup_only:
        make_data(args.data, args.samples, size)
        return
    files = paths(args.data, args.samples)
    if args.index_cache:  # "entries kept in the index cache"
        files = files[: args.index_cache]
    pool = mp.get_context("fork").Pool(args.workers) if args.workers > 0 else None
    start = time.perf_counter()
    samples = nbytes = 0
    for epoch in range(args.epochs):
        order = random.Random(2000 + epoch).sample(files, len(files))
        if args.shard_aware:  # "each worker a shard": contiguous ranges of the sorted list
            order = sorted(order)
            w = max(1, args.workers)
            per = -(-len(order) // w)
            shards = [order[k * per : (k + 1) * per] for k in range(w)]
            order = [
                p
                for group in zip(
                    *[[s[i : i + args.batch] for i in range(0, len(s), args.batch)] for s in shards],
                    strict=False,
                )
                for b in group
                for p in b
            ]
        batches = [(order[b : b + args.batch], size) for b in range(0, len(order), args.batch)]
        results = pool.imap(load_batch, batches) if pool else map(load_batch, batches)
        for (batch, _), got in zip(batches, results, strict=True):
            time.sleep(args.step_ms / 1000)  # the training step
            samples += len(batch)
            nbytes += got
    if pool:
        pool.close()
        pool.join()
    print(f"samples {samples} sample_bytes {nbytes}")
    print(f"run_time_s {time.perf_counter() - start:.6f}")


if __name__ == "__main__":
    main()
