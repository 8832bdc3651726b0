"""Example workload: a data loader reading many small sample files with small requests.

What is wrong with it: one reader thread fetches every sample with 4 KiB reads, one file
after another, and the "training step" waits for each sample: I/O is neither parallel nor
overlapped with compute.  Knobs that fix it without doing less: ``--workers`` (reader
parallelism) and ``--prefetch`` (samples fetched ahead by background threads).  The
``--epochs`` knob does less (fewer epochs), which the guards must reject; ``--request``
changes the transfer size, an access-pattern change the guards must also reject.
"""

from __future__ import annotations

import argparse
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


def read_sample(path: str, request: int, offset: int) -> int:
    fd = os.open(path, os.O_RDONLY)
    try:
        total = len(os.pread(fd, 64, offset))  # index lookup
        while chunk := os.read(fd, request):
            total += len(chunk)
    finally:
        os.close(fd)
    return total


def samples(paths: list[str], request: int, workers: int, prefetch: int, rng: random.Random) -> Iterator[int]:
    offsets = [rng.randrange(0, 4096) for _ in paths]
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
