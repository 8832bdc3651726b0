"""Unseen workload: a training loop that reads sample shards with small direct reads.

Each epoch visits the shards in a shuffled order; each shard is read whole, front to back, in
``--chunk``-byte preads that bypass the page cache (the first epoch from cold storage), then a
training step runs. What helps without doing less: larger reads (``--chunk``), shards fetched
ahead in the background (``--prefetch``), and several readers feeding the prefetch window
(``--readers``: only with prefetching, the loop itself reads one shard at a time). Decoy:
``--hint`` (posix_fadvise, which direct reads ignore). Disguised: ``--cache`` serves each
shard twice from half of them (data echoing: doing less); ``--ordered`` drops the shuffle (a
different access pattern). The program does not say which is which; dftune has to measure.
"""

from __future__ import annotations

import argparse
import ctypes
import mmap
import os
import random
import time
from collections import deque
from collections.abc import Iterator
from concurrent.futures import Future, ThreadPoolExecutor

_LIBC = ctypes.CDLL(None, use_errno=True)
_LIBC.pread.argtypes = [ctypes.c_int, ctypes.c_void_p, ctypes.c_size_t, ctypes.c_long]
_LIBC.pread.restype = ctypes.c_ssize_t


def shard_paths(data: str, shards: int) -> list[str]:
    return [os.path.join(data, f"shard_{i:04d}.bin") for i in range(shards)]


def make_data(data: str, shards: int, size: int) -> None:
    os.makedirs(data, exist_ok=True)
    block = os.urandom(size)
    for path in shard_paths(data, shards):
        if not (os.path.exists(path) and os.path.getsize(path) == size):
            with open(path, "wb") as fh:
                fh.write(block)


def _open(path: str) -> int:
    try:
        return os.open(path, os.O_RDONLY | getattr(os, "O_DIRECT", 0))
    except OSError:  # a file system without direct I/O: the page cache serves the reads
        return os.open(path, os.O_RDONLY)


def read_shard(path: str, chunk: int, hint: bool) -> int:
    """The whole shard in ``chunk``-byte preads into page-aligned memory (libc's pread, traced)."""
    fd = _open(path)
    buf = mmap.mmap(-1, chunk)
    addr = ctypes.addressof(ctypes.c_char.from_buffer(buf))
    try:
        if hint:
            os.posix_fadvise(fd, 0, 0, os.POSIX_FADV_SEQUENTIAL)
        total = 0
        while (n := _LIBC.pread(fd, addr, chunk, total)) > 0:
            total += n
        if n < 0:
            err = ctypes.get_errno()
            raise OSError(err, os.strerror(err), path)
        return total
    finally:
        del addr
        buf.close()
        os.close(fd)


def epoch_order(paths: list[str], epoch: int, ordered: bool, cache: bool) -> list[str]:
    order = sorted(paths) if ordered else random.Random(1000 + epoch).sample(paths, len(paths))
    if cache:  # "cached": half of the shards, each served twice
        half = order[: len(order) // 2]
        order = [p for p in half for _ in range(2)]
    return order


def loaded(order: list[str], chunk: int, hint: bool, prefetch: int, readers: int) -> Iterator[int]:
    if prefetch <= 0:
        served: dict[str, int] = {}
        for path in order:
            if path not in served:
                served = {path: read_shard(path, chunk, hint)}
            yield served[path]
        return
    window = prefetch * max(1, readers)
    with ThreadPoolExecutor(max_workers=max(1, readers)) as pool:
        pending: deque[Future[int]] = deque()
        it = iter(order)
        last: tuple[str, Future[int]] | None = None
        for path in it:
            if last and last[0] == path:
                pending.append(last[1])
            else:
                last = (path, pool.submit(read_shard, path, chunk, hint))
                pending.append(last[1])
            if len(pending) >= window:
                yield pending.popleft().result()
        while pending:
            yield pending.popleft().result()


def main() -> None:
    ap = argparse.ArgumentParser(description=__doc__)
    ap.add_argument("--data", required=True)
    ap.add_argument("--shards", type=int, default=64)
    ap.add_argument("--size", type=int, default=128 * 1024)
    ap.add_argument("--epochs", type=int, default=2)
    ap.add_argument("--chunk", type=int, default=4096)
    ap.add_argument("--prefetch", type=int, default=0)
    ap.add_argument("--readers", type=int, default=1)
    ap.add_argument("--hint", type=int, default=0)
    ap.add_argument("--cache", type=int, default=0)
    ap.add_argument("--ordered", type=int, default=0)
    ap.add_argument("--step-ms", type=float, default=1.0)
    ap.add_argument("--setup-only", action="store_true")
    args = ap.parse_args()
    if args.setup_only:
        make_data(args.data, args.shards, args.size)
        return
    paths = shard_paths(args.data, args.shards)
    start = time.perf_counter()
    samples = nbytes = 0
    for epoch in range(args.epochs):
        order = epoch_order(paths, epoch, bool(args.ordered), bool(args.cache))
        for n in loaded(order, args.chunk, bool(args.hint), args.prefetch, args.readers):
            time.sleep(args.step_ms / 1000)  # the training step
            samples += 1
            nbytes += n
    print(f"samples {samples} sample_bytes {nbytes}")
    print(f"run_time_s {time.perf_counter() - start:.6f}")


if __name__ == "__main__":
    main()
