"""Unseen workload: an HDF5 (h5py) simulation output, written row by row and read back shuffled.

Phase one computes a row (a little NumPy work) and writes it into a 2-D float64 dataset, one
row at a time in row order. Phase two reads the rows back one at a time in a seeded shuffled
order (an analysis that samples the output) and reduces them. Knobs: ``--chunk-rows`` (the
dataset's chunked layout: 0 is contiguous), ``--cache-mib`` (HDF5's chunk cache per dataset),
``--align-kib`` (HDF5's alignment of objects: 0 is none), ``--dtype`` (the element type
written) and ``--sorted`` (the read phase visits the rows in
ascending order). The chunk layout and the chunk cache interact: chunks larger than the cache
are read again for every row. The program does not say which knob changes what it does.
"""

from __future__ import annotations

import argparse
import os
import time

import h5py
import numpy as np


def main() -> None:
    ap = argparse.ArgumentParser(description=__doc__)
    ap.add_argument("--out", required=True)
    ap.add_argument("--rows", type=int, default=1536)
    ap.add_argument("--cols", type=int, default=1024)
    ap.add_argument("--chunk-rows", type=int, default=0)
    ap.add_argument("--cache-mib", type=int, default=1)
    ap.add_argument("--align-kib", type=int, default=0)
    ap.add_argument("--dtype", default="f8")
    ap.add_argument("--sorted", type=int, default=0)
    args = ap.parse_args()
    os.makedirs(args.out, exist_ok=True)
    path = os.path.join(args.out, "sim.h5")
    t0 = time.perf_counter()
    chunks = (args.chunk_rows, args.cols) if args.chunk_rows else None
    base = np.linspace(0.0, 1.0, args.cols)
    align = {"alignment_threshold": 1, "alignment_interval": args.align_kib << 10} if args.align_kib else {}
    with h5py.File(path, "w", rdcc_nbytes=args.cache_mib << 20, rdcc_nslots=10007, **align) as f:
        ds = f.create_dataset("field", (args.rows, args.cols), dtype=args.dtype, chunks=chunks)
        for i in range(args.rows):
            ds[i, :] = np.sin(base * (i + 1))
    rng = np.random.default_rng(7)
    order = np.arange(args.rows) if args.sorted else rng.permutation(args.rows)
    total = 0.0
    with h5py.File(path, "r", rdcc_nbytes=args.cache_mib << 20, rdcc_nslots=10007) as f:
        ds = f["field"]
        for i in order:
            total += float(ds[int(i), :].sum())
    print(f"checksum {total:.6f}")
    print(f"run_time_s {time.perf_counter() - t0:.4f}")


if __name__ == "__main__":
    main()
