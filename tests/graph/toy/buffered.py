"""A toy writer for the pending-confirmation tests: its records can be staged in a buffer.

``--records`` records of ``--record`` bytes each go to one file, in order, with the same offsets
whatever the settings. ``--buffer 0`` writes each record with its own call; ``--buffer N`` stages
them in an N-byte buffer and writes it whole (fewer, larger calls over the same byte ranges: the
trace alone cannot tell this from a program that writes larger records). ``--workers`` spreads
``--items`` items of compute over threads: faster, the same work, the same writes.

The reported time is the toy's own clock, a cost model of what this run did: each write call it
made costs ``CALL_S`` and each item on its busiest thread ``ITEM_S``. The graph tier tests what the
graph decides from measurements, not the machine: on two cores shared with the other test workers,
measured time, wall or CPU (a busy sibling hyperthread stretches CPU time too), blurred a 30% gain
often enough to fail CI. The clock still counts only what the run really did (the calls are traced
by dftracer, the items really run on the threads), so a knob that changes nothing shows nothing.
The defaults make each change worth a quarter or more: 4,096 calls against 16, and 8 items
against 2 on the busiest thread.
"""

import argparse
import hashlib
import os
import threading

CALL_S = 60e-6  # one write call: the system call and the tracer's work on it
ITEM_S = 0.030  # one item of compute

ap = argparse.ArgumentParser()
ap.add_argument("--out", required=True)
ap.add_argument("--records", type=int, default=4096)
ap.add_argument("--record", type=int, default=1024)
ap.add_argument("--buffer", type=int, default=0)
ap.add_argument("--workers", type=int, default=1)
ap.add_argument("--items", type=int, default=8)
a = ap.parse_args()
os.makedirs(a.out, exist_ok=True)
payload = bytes(range(256)) * (a.record // 256 + 1)
done = [0] * a.workers


def compute(worker: int) -> None:
    """This thread's share of the items, counted as it finishes each."""
    for item in range(worker, a.items, a.workers):
        hashlib.sha256(payload * (item + 1)).digest()
        done[worker] += 1


threads = [threading.Thread(target=compute, args=(w,)) for w in range(a.workers)]
for t in threads:
    t.start()
for t in threads:
    t.join()
calls = 0
fd = os.open(os.path.join(a.out, "records.bin"), os.O_WRONLY | os.O_CREAT | os.O_TRUNC, 0o644)
staged = bytearray()
for _ in range(a.records):
    record = payload[: a.record]
    if a.buffer:
        staged += record
        if len(staged) >= a.buffer:
            calls += os.write(fd, staged) > 0
            staged.clear()
    else:
        calls += os.write(fd, record) > 0
if staged:
    calls += os.write(fd, staged) > 0
os.close(fd)
print(f"run_time_s {calls * CALL_S + max(done) * ITEM_S:.6f}")
