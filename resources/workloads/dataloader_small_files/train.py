"""A PyTorch training loop over many small sample files, fed by a DataLoader.

What is wrong by default: the loader reads in the training process (num_workers=0), so every
sample's open/read/close waits in line before its step, nothing is fetched ahead, and a loader
with workers would start them again every epoch. The loader's own arguments fix that without
reading less: num_workers, prefetch_factor, persistent_workers, pin_memory.

    python train.py --data DIR --setup-only        # write the samples once
    python train.py --data DIR --num-workers 2     # train; prints train_time_s
"""

from __future__ import annotations

import argparse
import os
import time

import torch
from torch.utils.data import DataLoader, Dataset


class SampleFiles(Dataset):
    """One sample per file: open, read it whole, close (what image/npz datasets do)."""

    def __init__(self, root: str, compute_s: float) -> None:
        self.paths = sorted(os.path.join(root, n) for n in os.listdir(root) if n.endswith(".bin"))
        self.compute_s = compute_s

    def __len__(self) -> int:
        return len(self.paths)

    def __getitem__(self, index: int) -> torch.Tensor:
        with open(self.paths[index], "rb") as fh:
            raw = fh.read()
        time.sleep(self.compute_s)  # decoding/augmentation: CPU time per sample that does no I/O
        return torch.frombuffer(bytearray(raw), dtype=torch.uint8).float()


def make_data(root: str, files: int, sample_bytes: int) -> None:
    os.makedirs(root, exist_ok=True)
    block = os.urandom(sample_bytes)
    for i in range(files):
        with open(os.path.join(root, f"sample_{i:05d}.bin"), "wb") as fh:
            fh.write(block)


def main() -> None:
    p = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    p.add_argument("--data", required=True, help="folder of sample files")
    p.add_argument("--files", type=int, default=256, help="number of sample files (the dataset)")
    p.add_argument("--sample-size", type=int, default=16384, help="bytes per sample file")
    p.add_argument("--epochs", type=int, default=2, help="passes over the dataset")
    p.add_argument("--batch-size", type=int, default=16)
    p.add_argument("--num-workers", type=int, default=0, help="DataLoader worker processes")
    p.add_argument("--prefetch-factor", type=int, default=2, help="batches each worker loads ahead")
    p.add_argument("--persistent-workers", type=int, default=0, help="1: keep workers between epochs")
    p.add_argument("--pin-memory", type=int, default=0, help="1: page-locked batches")
    p.add_argument("--step-s", type=float, default=0.004, help="training step time per batch")
    p.add_argument("--decode-s", type=float, default=0.002, help="CPU time per sample in the loader")
    p.add_argument("--setup-only", action="store_true", help="write the dataset and stop")
    args = p.parse_args()
    if args.setup_only:
        make_data(args.data, args.files, args.sample_size)
        return
    workers = args.num_workers
    loader = DataLoader(
        SampleFiles(args.data, args.decode_s),
        batch_size=args.batch_size,
        shuffle=True,
        num_workers=args.num_workers,
        prefetch_factor=args.prefetch_factor if workers > 0 else None,
        persistent_workers=bool(args.persistent_workers) and workers > 0,
        pin_memory=bool(args.pin_memory),
    )
    samples = 0
    start = time.perf_counter()
    for _ in range(args.epochs):
        for batch in loader:
            samples += batch.shape[0]
            time.sleep(args.step_s)  # the model's step
    elapsed = time.perf_counter() - start
    print(f"samples {samples}")
    print(f"train_time_s {elapsed:.4f}")


if __name__ == "__main__":
    main()
