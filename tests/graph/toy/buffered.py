"""A toy writer for the pending-confirmation tests: its records can be staged in a buffer.

``--records`` records of ``--record`` bytes each go to one file, in order, with the same offsets
whatever the settings. ``--buffer 0`` writes each record with its own call; ``--buffer N`` stages
them in an N-byte buffer and writes it whole (fewer, larger calls over the same byte ranges: the
trace alone cannot tell this from a program that writes larger records). ``--workers`` spreads a
fixed amount of compute (sleeps) over threads: faster, the same work, the same writes.

The defaults make each change worth about 40% (16,384 traced calls against 64; 80 ms of compute
against 20 ms). The reported time is the compute's wall time plus the writes' CPU time: the test
tiers run three workers on two cores, and a writer preempted there for tens of milliseconds once
turned a 40% gain into five replicates no test could settle. CPU time does not count the
preemption; the calls, and the tracer's work on each, it does.
"""

import argparse
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
ap.add_argument("--unit", type=float, default=0.01)
a = ap.parse_args()
os.makedirs(a.out, exist_ok=True)
payload = bytes(range(256)) * (a.record // 256 + 1)
start = time.perf_counter()
chunks = [range(i, a.items, a.workers) for i in range(a.workers)]
# one sleep per thread for all its items: each wake-up on a loaded machine can come late
threads = [threading.Thread(target=time.sleep, args=(a.unit * len(c),)) for c in chunks]
for t in threads:
    t.start()
for t in threads:
    t.join()
computed = time.perf_counter() - start
cpu = time.process_time()
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
print(f"run_time_s {computed + time.process_time() - cpu:.6f}")
