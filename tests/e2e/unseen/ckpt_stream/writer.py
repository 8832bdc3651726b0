"""Unseen workload: a simulation that streams its state to checkpoints in small records.

Every ``--every`` steps the state goes to a new checkpoint file as ``--record``-byte records,
each its own ``write`` unless ``--buffer`` collects them into larger writes first; the step
loop waits unless ``--async`` hands the checkpoint to a background thread. The steps are
Python code that lets other threads in only between small pieces of work, as an interpreter
with C kernels does, so a background writer issuing thousands of tiny writes keeps waiting
for the interpreter: asynchronous checkpoints pay once the writes are few and large.
Decoy: ``--prealloc`` (posix_fallocate first). Disguised: ``--skip`` writes every other
checkpoint (doing less); ``--record`` changes the application's own record size (a different
access pattern). The program does not say which is which; dftune has to measure.
"""

from __future__ import annotations

import argparse
import os
import threading
import time


def write_checkpoint(path: str, state: bytes, record: int, buffer: int, prealloc: bool) -> int:
    fd = os.open(path, os.O_WRONLY | os.O_CREAT | os.O_TRUNC, 0o644)
    records = 0
    try:
        if prealloc:
            os.posix_fallocate(fd, 0, len(state))
        pending = bytearray()
        for start in range(0, len(state), record):
            piece = state[start : start + record]
            records += 1
            if buffer <= 0:
                os.write(fd, piece)
                continue
            pending += piece
            if len(pending) >= buffer:
                os.write(fd, pending)
                pending.clear()
        if pending:
            os.write(fd, pending)
        os.fsync(fd)
    finally:
        os.close(fd)
    return records


def step(work: int) -> int:
    """Interpreter work that yields to other threads every thousand iterations."""
    acc = 0
    for i in range(work):
        acc += i * i
        if i % 1000 == 0:
            time.sleep(0)
    return acc


def main() -> None:
    ap = argparse.ArgumentParser(description=__doc__)
    ap.add_argument("--out", required=True)
    ap.add_argument("--state-kib", type=int, default=4096)
    ap.add_argument("--steps", type=int, default=60)
    ap.add_argument("--every", type=int, default=10)
    ap.add_argument("--work", type=int, default=5000)
    ap.add_argument("--record", type=int, default=1024)
    ap.add_argument("--buffer", type=int, default=0)
    ap.add_argument("--async", dest="async_", type=int, default=0)
    ap.add_argument("--prealloc", type=int, default=0)
    ap.add_argument("--skip", type=int, default=0)
    args = ap.parse_args()
    os.makedirs(args.out, exist_ok=True)
    state = os.urandom(args.state_kib * 1024)
    counts = {"checkpoints": 0, "records": 0}
    pending: threading.Thread | None = None

    def checkpoint(path: str) -> None:
        counts["records"] += write_checkpoint(path, state, args.record, args.buffer, bool(args.prealloc))

    start = time.perf_counter()
    for s in range(1, args.steps + 1):
        step(args.work)
        if s % args.every:
            continue
        index = s // args.every
        if args.skip and index % 2:
            continue  # "deduplicated": every other checkpoint is not written
        path = os.path.join(args.out, f"ckpt_{index:03d}.bin")
        counts["checkpoints"] += 1
        if args.async_:
            if pending:
                pending.join()  # one checkpoint in flight
            pending = threading.Thread(target=checkpoint, args=(path,))
            pending.start()
        else:
            checkpoint(path)
    if pending:
        pending.join()
    print(f"checkpoints {counts['checkpoints']} records {counts['records']} record_bytes {args.record}")
    print(f"run_time_s {time.perf_counter() - start:.6f}")


if __name__ == "__main__":
    main()
