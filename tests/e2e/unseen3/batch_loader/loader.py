"""Unseen workload: a training loop that reads shuffled records from a few shard files.

Every epoch visits the records (8 KiB each, spread over 4 shards) in a seeded shuffled order,
in batches of 16; each record is one direct pread (cold storage: no page cache), then the batch
goes to a training step the loop waits for (a sleep: an accelerator's time). Knobs:
``--workers`` (a pool reads each batch's records), ``--ahead`` (batches submitted to the pool
before the loop needs them, so reading overlaps the step), ``--reuse-pct`` (records reused from
memory "for a warm cache"), ``--window-kib`` (records read "through an aligned window"),
``--stream`` (the shards "hinted sequential" for the kernel's readahead).
The program does not say which of them change what it reads; dftune has to measure.
"""

from __future__ import annotations

import argparse
import ctypes
import mmap
import os
import random
import threading
import time
from collections import deque
from concurrent.futures import Future, ThreadPoolExecutor

_LIBC = ctypes.CDLL(None, use_errno=True)
_LIBC.pread.argtypes = [ctypes.c_int, ctypes.c_void_p, ctypes.c_size_t, ctypes.c_long]
_LIBC.pread.restype = ctypes.c_ssize_t
KIB = 1024
_LOCAL = threading.local()


def _open(path: str) -> int:
    try:
        return os.open(path, os.O_RDONLY | getattr(os, "O_DIRECT", 0))
    except OSError:  # no direct I/O here: the page cache serves the reads
        return os.open(path, os.O_RDONLY)


def pread(fd: int, offset: int, size: int) -> int:
    """One direct pread into this thread's page-aligned buffer."""
    if getattr(_LOCAL, "size", 0) < size:
        _LOCAL.buf = mmap.mmap(-1, size)
        _LOCAL.addr = ctypes.addressof(ctypes.c_char.from_buffer(_LOCAL.buf))
        _LOCAL.size = size
    n = _LIBC.pread(fd, _LOCAL.addr, size, offset)
    if n < 0:
        err = ctypes.get_errno()
        raise OSError(err, os.strerror(err))
    return n


def main() -> None:
    ap = argparse.ArgumentParser(description=__doc__)
    ap.add_argument("--data", required=True)
    ap.add_argument("--shards", type=int, default=4)
    ap.add_argument("--shard-mib", type=int, default=2)
    ap.add_argument("--record-kib", type=int, default=8)
    ap.add_argument("--batch", type=int, default=16)
    ap.add_argument("--workers", type=int, default=1)
    ap.add_argument("--ahead", type=int, default=0)
    ap.add_argument("--reuse-pct", type=int, default=0)
    ap.add_argument("--window-kib", type=int, default=0)
    ap.add_argument("--stream", type=int, default=0)
    ap.add_argument("--step-ms", type=float, default=3.0)
    ap.add_argument("--setup-only", action="store_true")
    args = ap.parse_args()
    paths = [os.path.join(args.data, f"shard_{k}.rec") for k in range(args.shards)]
    size = args.shard_mib * 1024 * KIB
    if args.setup_only:
        os.makedirs(args.data, exist_ok=True)
        for p in paths:
            if not (os.path.exists(p) and os.path.getsize(p) == size):
                with open(p, "wb") as fh:
                    fh.write(os.urandom(size))
        return
    record = args.record_kib * KIB
    window = max(args.window_kib * KIB, record) if args.window_kib else record
    fds = [_open(p) for p in paths]
    per_shard = size // record
    keys = [(s, i) for s in range(args.shards) for i in range(per_shard)]
    order = random.Random(7).sample(keys, len(keys))
    if args.stream:  # "hinted sequential": and each epoch walks the shards in file order
        order.sort()
    batches = [order[b : b + args.batch] for b in range(0, len(order), args.batch)]
    pool = ThreadPoolExecutor(max_workers=args.workers)
    seen: list[tuple[int, int]] = []

    def read_one(key: tuple[int, int]) -> int:
        s, i = key
        if args.reuse_pct and seen and (i * 2654435761 + s * 40503) % 100 < args.reuse_pct:
            return record  # "served from the warm cache": a record read before stands in
        offset = i * record
        start = offset - offset % window  # "through an aligned window"
        pread(fds[s], start, window)
        return record

    def read_batch(batch: list[tuple[int, int]]) -> int:
        shares = [batch[w :: args.workers] for w in range(args.workers)]
        if args.workers == 1:
            return sum(read_one(k) for k in batch)
        futures = [pool.submit(lambda s: sum(read_one(k) for k in s), s) for s in shares]
        return sum(f.result() for f in futures)

    driver = ThreadPoolExecutor(max_workers=1) if args.ahead else None
    queue: deque[Future[int]] = deque()
    start = time.perf_counter()
    nbytes = 0
    for b, batch in enumerate(batches):
        if driver is None:
            nbytes += read_batch(batch)
        else:
            while len(queue) <= args.ahead and b + len(queue) < len(batches):
                queue.append(driver.submit(read_batch, batches[b + len(queue)]))
            nbytes += queue.popleft().result()
        seen.extend(batch[:1])
        time.sleep(args.step_ms / 1000)  # the training step
    pool.shutdown()
    print(f"records {len(order)} bytes {nbytes}")
    print(f"run_time_s {time.perf_counter() - start:.6f}")


if __name__ == "__main__":
    main()
