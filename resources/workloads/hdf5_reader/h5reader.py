"""Example workload: random sample reads from a chunked HDF5 dataset with a tiny chunk cache.

What is wrong with it: samples (rows) are read in a shuffled order from a dataset stored in
chunks of 64 rows; HDF5's default chunk cache (1 MiB) holds fewer chunks than the shuffle
revisits, so the same chunks are read from disk again and again.  The knob that fixes it
without doing less: ``--chunk-cache-mib`` (the HDF5 chunk cache, ``rdcc_nbytes``): the same
samples in the same order, served from cache.  ``--samples`` does less (fewer samples).
"""

from __future__ import annotations

import argparse
import os
import time

import h5py
import numpy as np

ROWS, COLS, CHUNK_ROWS = 4096, 1024, 64  # 16 MiB of float32, 256 KiB chunks


def make_data(path: str) -> None:
    if os.path.exists(path):
        return
    os.makedirs(os.path.dirname(path), exist_ok=True)
    rng = np.random.default_rng(0)
    with h5py.File(path + ".tmp", "w") as f:
        f.create_dataset("x", data=rng.random((ROWS, COLS), dtype=np.float32), chunks=(CHUNK_ROWS, COLS))
    os.replace(path + ".tmp", path)


def main() -> None:
    ap = argparse.ArgumentParser(description=__doc__)
    ap.add_argument("--data", required=True)
    ap.add_argument("--samples", type=int, default=4096)
    ap.add_argument("--chunk-cache-mib", type=int, default=1)
    ap.add_argument("--setup-only", action="store_true")
    args = ap.parse_args()
    path = os.path.join(args.data, "train.h5")
    make_data(path)
    if args.setup_only:
        return
    order = np.random.default_rng(1).permutation(ROWS)[: args.samples]
    start = time.perf_counter()
    total = 0.0
    with h5py.File(path, "r", rdcc_nbytes=args.chunk_cache_mib << 20, rdcc_nslots=10007) as f:
        x = f["x"]
        for i in order:
            total += float(x[int(i), :8].sum())  # touch the sample
    print(f"samples {len(order)}")  # its own account of the work: a chunk cache must keep it
    print(f"checksum {total:.3f}")
    print(f"read_time_s {time.perf_counter() - start:.6f}")


if __name__ == "__main__":
    main()
