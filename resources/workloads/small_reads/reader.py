"""Example workload: a data loader reading many small sample files with small requests.

What is wrong with it: one reader thread fetches every sample with 4 KiB reads, one file
after another, and the "training step" waits for each sample: I/O is neither parallel nor
overlapped with compute.  Reads bypass the page cache (O_DIRECT, where the filesystem allows
it) so each request pays the device's latency, as a first epoch from cold
storage does.  Knobs that fix it without doing less: ``--workers`` (reader
parallelism) and ``--prefetch`` (samples fetched ahead by background threads).  The
``--epochs`` knob does less (fewer epochs), which the guards must reject; ``--request``
changes the transfer size, an access-pattern change the guards must also reject.
"""

from __future__ import annotations

import argparse
import ctypes
import mmap
import os
import random
import time
from collections.abc import Iterator
from concurrent.futures import ThreadPoolExecutor


def make_data(data_dir: str, files: int, size: int) -> None:
    os.makedirs(data_dir, exist_ok=True)
    payload = os.urandom(size)
    for i in range(files):
        path = os.path.join(data_dir, f"sample_{i:05d}.bin")
        if not os.path.exists(path) or os.path.getsize(path) != size:
            with open(path, "wb") as fh:
                fh.write(payload)


_LIBC = ctypes.CDLL(None, use_errno=True)
_LIBC.pread.argtypes = [ctypes.c_int, ctypes.c_void_p, ctypes.c_size_t, ctypes.c_long]
_LIBC.pread.restype = ctypes.c_ssize_t


def pread_into(fd: int, buf: mmap.mmap, offset: int) -> int:
    """pread(2) into page-aligned memory (os.pread's fresh buffer is not aligned for O_DIRECT;
    os.preadv is, but dftracer does not trace preadv)."""
    addr = ctypes.addressof(ctypes.c_char.from_buffer(buf))
    n = _LIBC.pread(fd, addr, len(buf), offset)
    if n < 0:
        err = ctypes.get_errno()
        raise OSError(err, os.strerror(err))
    return int(n)


def read_sample(path: str, request: int, offset: int) -> int:
    """One sample: an aligned index block at ``offset``, then the whole file in ``request``-byte reads."""
    fd = open_direct(path)
    buf = mmap.mmap(-1, request)  # page-aligned memory, as direct I/O requires
    try:
        total = pread_into(fd, buf, offset)  # index lookup
        pos = 0
        while (n := pread_into(fd, buf, pos)) > 0:
            total += n
            pos += n
    finally:
        os.close(fd)
        buf.close()
    return total


def open_direct(path: str) -> int:
    """Read past the page cache (O_DIRECT) so every request meets the device, as a first epoch
    from cold storage would; where the filesystem refuses direct I/O, fall back to buffered reads."""
    try:
        return os.open(path, os.O_RDONLY | os.O_DIRECT)
    except OSError:
        return os.open(path, os.O_RDONLY)


def samples(paths: list[str], request: int, workers: int, prefetch: int, rng: random.Random) -> Iterator[int]:
    offsets = [rng.randrange(0, 16) * 4096 for _ in paths]  # aligned, inside every sample
    if workers <= 1 and prefetch <= 0:
        for p, o in zip(paths, offsets, strict=True):
            yield read_sample(p, request, o)
        return
    depth = max(prefetch, 1) * max(workers, 1)
    with ThreadPoolExecutor(max_workers=max(workers, 1)) as pool:
        pending = [
            pool.submit(read_sample, p, request, o)
            for p, o in zip(paths[:depth], offsets[:depth], strict=True)
        ]
        nxt = depth
        while pending:
            yield pending.pop(0).result()
            if nxt < len(paths):
                pending.append(pool.submit(read_sample, paths[nxt], request, offsets[nxt]))
                nxt += 1


def main() -> None:
    ap = argparse.ArgumentParser(description=__doc__)
    ap.add_argument("--data", required=True)
    ap.add_argument("--files", type=int, default=200)
    ap.add_argument("--size", type=int, default=256 * 1024)
    ap.add_argument("--request", type=int, default=4096)
    ap.add_argument("--epochs", type=int, default=2)
    ap.add_argument("--workers", type=int, default=1)
    ap.add_argument("--prefetch", type=int, default=0)
    ap.add_argument("--compute-ms", type=float, default=0.2)
    ap.add_argument("--setup-only", action="store_true")
    args = ap.parse_args()
    make_data(args.data, args.files, args.size)
    if args.setup_only:
        return
    rng = random.Random(0)
    paths = sorted(os.path.join(args.data, n) for n in os.listdir(args.data))
    start = time.perf_counter()
    moved = 0
    for _ in range(args.epochs):
        for n in samples(paths, args.request, args.workers, args.prefetch, rng):
            moved += n
            time.sleep(args.compute_ms / 1000)  # the training step on this sample
    print(f"read {moved} bytes")
    print(f"epoch_time_s {(time.perf_counter() - start) / args.epochs:.6f}")


if __name__ == "__main__":
    main()
