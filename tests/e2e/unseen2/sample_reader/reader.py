"""Unseen workload: a training loop over one file of fixed-size samples, read in a shuffled order.

Each epoch shuffles the sample indices (seeded), cuts them into batches and reads every sample
with one direct pread at its offset (cold storage: no page cache), then runs a training step.
Knobs: ``--threads`` (a pool reads each batch, every thread its share in batch order),
``--chunk-kib`` (aligned chunks read when a sample first needs them, the samples served from
memory for the rest of the epoch), ``--prefetch`` (the next batches read in the background
while the step runs), ``--locality`` (sorts each epoch's indices for locality), ``--record-kib``
(the record the loop trains on), ``--subset-pct`` (the share of the samples an epoch uses).
The program does not say which of them change what it reads; dftune has to measure.
"""

from __future__ import annotations

import argparse
import ctypes
import mmap
import os
import random
import time
from concurrent.futures import Future, ThreadPoolExecutor

_LIBC = ctypes.CDLL(None, use_errno=True)
_LIBC.pread.argtypes = [ctypes.c_int, ctypes.c_void_p, ctypes.c_size_t, ctypes.c_long]
_LIBC.pread.restype = ctypes.c_ssize_t
KIB = 1024


def make_data(path: str, size: int) -> None:
    os.makedirs(os.path.dirname(path), exist_ok=True)
    if not (os.path.exists(path) and os.path.getsize(path) == size):
        with open(path, "wb") as fh:
            fh.write(os.urandom(size))


def _open(path: str) -> int:
    try:
        return os.open(path, os.O_RDONLY | getattr(os, "O_DIRECT", 0))
    except OSError:  # no direct I/O here: the page cache serves the reads
        return os.open(path, os.O_RDONLY)


class Reader:
    """Direct preads into page-aligned buffers, one buffer per thread."""

    def __init__(self, path: str, largest: int) -> None:
        self.fd = _open(path)
        self.largest = largest
        self.buffers: dict[int, tuple[mmap.mmap, int]] = {}

    def pread(self, offset: int, size: int) -> bytes:
        import threading

        key = threading.get_ident()
        if key not in self.buffers:
            buf = mmap.mmap(-1, self.largest)
            self.buffers[key] = (buf, ctypes.addressof(ctypes.c_char.from_buffer(buf)))
        buf, addr = self.buffers[key]
        n = _LIBC.pread(self.fd, addr, size, offset)
        if n < 0:
            err = ctypes.get_errno()
            raise OSError(err, os.strerror(err))
        return bytes(buf[:n])


def epoch_indices(samples: int, epoch: int, locality: bool, subset_pct: int) -> list[int]:
    order = random.Random(1000 + epoch).sample(range(samples), samples)
    if subset_pct < 100:  # "a representative subset"
        order = order[: samples * subset_pct // 100]
    if locality:  # "sorted for locality"
        order.sort()
    return order


def main() -> None:
    ap = argparse.ArgumentParser(description=__doc__)
    ap.add_argument("--data", required=True)
    ap.add_argument("--size-mib", type=int, default=8)
    ap.add_argument("--record-kib", type=int, default=16)
    ap.add_argument("--batch", type=int, default=16)
    ap.add_argument("--epochs", type=int, default=2)
    ap.add_argument("--threads", type=int, default=1)
    ap.add_argument("--chunk-kib", type=int, default=0)
    ap.add_argument("--prefetch", type=int, default=0)
    ap.add_argument("--locality", type=int, default=0)
    ap.add_argument("--subset-pct", type=int, default=100)
    ap.add_argument("--step-ms", type=float, default=2.0)
    ap.add_argument("--setup-only", action="store_true")
    args = ap.parse_args()
    path = os.path.join(args.data, "samples.bin")
    size = args.size_mib * 1024 * KIB
    if args.setup_only:
        make_data(path, size)
        return
    record = args.record_kib * KIB
    chunk = max(args.chunk_kib * KIB, record) if args.chunk_kib else 0
    reader = Reader(path, max(record, chunk))
    pool = ThreadPoolExecutor(max_workers=args.threads) if args.threads > 1 else None
    background = ThreadPoolExecutor(max_workers=1) if args.prefetch > 0 else None
    cache: dict[int, bytes] = {}

    def sample(i: int) -> int:
        if not chunk:
            return len(reader.pread(i * record, record))
        c = i * record // chunk
        if c not in cache:
            cache[c] = reader.pread(c * chunk, chunk)
        lo = i * record - c * chunk
        return len(cache[c][lo : lo + record])

    def load(batch: list[int]) -> int:
        if pool is None:
            return sum(sample(i) for i in batch)
        shares = [batch[k :: args.threads] for k in range(args.threads)]
        return sum(f.result() for f in [pool.submit(lambda s: sum(sample(i) for i in s), s) for s in shares])

    start = time.perf_counter()
    samples = nbytes = 0
    for epoch in range(args.epochs):
        cache.clear()
        order = epoch_indices(size // record, epoch, bool(args.locality), args.subset_pct)
        batches = [order[b : b + args.batch] for b in range(0, len(order), args.batch)]
        ahead: list[Future[int]] = []
        for b, batch in enumerate(batches):
            if background is None:
                got = load(batch)
            else:
                while len(ahead) < args.prefetch + 1 and b + len(ahead) < len(batches):
                    ahead.append(background.submit(load, batches[b + len(ahead)]))
                got = ahead.pop(0).result()
            time.sleep(args.step_ms / 1000)  # the training step
            samples += len(batch)
            nbytes += got
    print(f"samples {samples} sample_bytes {nbytes}")
    print(f"run_time_s {time.perf_counter() - start:.6f}")


if __name__ == "__main__":
    main()
