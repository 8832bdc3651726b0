"""A toy writer for the pending-confirmation tests: its records can be staged in a buffer.

``--records`` records of ``--record`` bytes each go to one file, in order, with the same offsets
whatever the settings. ``--buffer 0`` writes each record with its own call; ``--buffer N`` stages
them in an N-byte buffer and writes it whole (fewer, larger calls over the same byte ranges: the
trace alone cannot tell this from a program that writes larger records). ``--workers`` spreads a
fixed amount of compute (``--items`` items of ``--unit`` MiB of hashing each) over threads: faster,
the same work, the same writes.

The defaults make each change worth a third or more (16,384 traced calls against 64: about 90 ms
of CPU; 8 items of 32 MiB hashed against 2 on the busiest thread: about 115 ms). The reported
time is CPU time, which a busy machine does not stretch: the compute's critical path (the busiest
thread's CPU time; hashing releases the GIL, so the threads really run side by side) plus the
writes' CPU time (the calls, and the tracer's work on each). The test tiers run three workers on
two cores: a wall-time metric, even of a sleep, came late there often enough to blur a 40% gain
in five pairs of replicates.
"""

import argparse
import hashlib
import os
import threading
import time

ap = argparse.ArgumentParser()
ap.add_argument("--out", required=True)
ap.add_argument("--records", type=int, default=16384)
ap.add_argument("--record", type=int, default=1024)
ap.add_argument("--buffer", type=int, default=0)
ap.add_argument("--workers", type=int, default=1)
ap.add_argument("--items", type=int, default=8)
ap.add_argument("--unit", type=int, default=32)
a = ap.parse_args()
os.makedirs(a.out, exist_ok=True)
payload = bytes(range(256)) * (a.record // 256 + 1)
block = bytes(1 << 20)
busiest = [0.0] * a.workers


def compute(worker: int) -> None:
    """This thread's share of the items; its CPU time, whoever else runs beside it."""
    began = time.thread_time()
    for _ in range(worker, a.items, a.workers):
        digest = hashlib.sha256()
        for _ in range(a.unit):
            digest.update(block)
    busiest[worker] = time.thread_time() - began


threads = [threading.Thread(target=compute, args=(w,)) for w in range(a.workers)]
for t in threads:
    t.start()
for t in threads:
    t.join()
cpu = time.thread_time()
fd = os.open(os.path.join(a.out, "records.bin"), os.O_WRONLY | os.O_CREAT | os.O_TRUNC, 0o644)
staged = bytearray()
for _ in range(a.records):
    record = payload[: a.record]
    if a.buffer:
        staged += record
        if len(staged) >= a.buffer:
            os.write(fd, staged)
            staged.clear()
    else:
        os.write(fd, record)
if staged:
    os.write(fd, staged)
os.close(fd)
print(f"run_time_s {max(busiest) + time.thread_time() - cpu:.6f}")
