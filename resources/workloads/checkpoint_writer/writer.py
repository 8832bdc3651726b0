"""Example workload: a training loop that checkpoints its state with many small unbuffered writes.

What is wrong with it: each checkpoint goes to disk as tens of thousands of 1 KiB ``os.write`` calls
(no buffering), and the training loop stops while it writes.  Knobs that fix it without
doing less: ``--buffer`` (coalesce writes through a user-space buffer of that many bytes)
and ``--async-checkpoint`` (write from a background thread while training continues; the
bytes written are identical).  ``--checkpoints`` does less (fewer checkpoints), which the
guards must reject.
"""

from __future__ import annotations

import argparse
import os
import threading
import time

CHUNK = 1024


def write_checkpoint(path: str, state: bytes, buffer: int) -> None:
    fd = os.open(path + ".tmp", os.O_WRONLY | os.O_CREAT | os.O_TRUNC, 0o644)
    try:
        if buffer > 0:
            for start in range(0, len(state), buffer):  # coalesced: few large writes
                os.write(fd, state[start : start + buffer])
        else:
            for start in range(0, len(state), CHUNK):  # the problem: many tiny writes
                os.write(fd, state[start : start + CHUNK])
        os.fsync(fd)
    finally:
        os.close(fd)
    os.replace(path + ".tmp", path)


def main() -> None:
    ap = argparse.ArgumentParser(description=__doc__)
    ap.add_argument("--out", required=True)
    ap.add_argument("--state-mib", type=int, default=16)
    ap.add_argument("--steps", type=int, default=40)
    ap.add_argument("--checkpoints", type=int, default=4)
    ap.add_argument("--buffer", type=int, default=0)
    ap.add_argument("--async-checkpoint", type=int, default=0)
    ap.add_argument("--step-ms", type=float, default=5.0)
    args = ap.parse_args()
    os.makedirs(args.out, exist_ok=True)
    state = os.urandom(args.state_mib << 20)
    every = max(1, args.steps // max(args.checkpoints, 1))
    pending: threading.Thread | None = None
    start = time.perf_counter()
    written = 0
    for step in range(1, args.steps + 1):
        time.sleep(args.step_ms / 1000)  # the training step
        if step % every == 0 and written < args.checkpoints:
            path = os.path.join(args.out, f"ckpt_{written}.bin")
            if args.async_checkpoint:
                if pending:
                    pending.join()  # at most one checkpoint in flight
                pending = threading.Thread(target=write_checkpoint, args=(path, state, args.buffer))
                pending.start()
            else:
                write_checkpoint(path, state, args.buffer)
            written += 1
    if pending:
        pending.join()
    print(f"checkpoints {written} bytes {written * len(state)}")
    # the logical work: how many records of what size this run wrote (buffering keeps both; the
    # guards compare them to tell coalescing from a larger record)
    print(f"records {written * (len(state) // CHUNK)} record_bytes {CHUNK}")
    print(f"run_time_s {time.perf_counter() - start:.6f}")


if __name__ == "__main__":
    main()
