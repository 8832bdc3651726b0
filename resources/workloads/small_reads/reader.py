"""Example workload: a data loader reading many small sample files with small requests.

It is deliberately I/O-bound in the way ML data loaders often are: many files, 4 KiB
reads, a metadata call per sample, and a random-access index lookup per file.
"""

from __future__ import annotations

import argparse
import os
import random
import time


def make_data(data_dir: str, files: int, size: int) -> None:
    os.makedirs(data_dir, exist_ok=True)
    payload = os.urandom(size)
    for i in range(files):
        path = os.path.join(data_dir, f"sample_{i:05d}.bin")
        if not os.path.exists(path) or os.path.getsize(path) != size:
            with open(path, "wb") as fh:
                fh.write(payload)


def read_epoch(data_dir: str, request: int, rng: random.Random) -> int:
    total = 0
    for name in sorted(os.listdir(data_dir)):
        path = os.path.join(data_dir, name)
        fd = os.open(path, os.O_RDONLY)
        try:
            header = os.pread(fd, 64, rng.randrange(0, 4096))  # index lookup
            total += len(header)
            while chunk := os.read(fd, request):
                total += len(chunk)
        finally:
            os.close(fd)
        time.sleep(0.0002)  # "compute" on the sample
    return total


def main() -> None:
    ap = argparse.ArgumentParser(description=__doc__)
    ap.add_argument("--data", required=True)
    ap.add_argument("--files", type=int, default=200)
    ap.add_argument("--size", type=int, default=256 * 1024)
    ap.add_argument("--request", type=int, default=4096)
    ap.add_argument("--epochs", type=int, default=2)
    args = ap.parse_args()
    make_data(args.data, args.files, args.size)
    rng = random.Random(0)
    moved = sum(read_epoch(args.data, args.request, rng) for _ in range(args.epochs))
    print(f"read {moved} bytes")


if __name__ == "__main__":
    main()
