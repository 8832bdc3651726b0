"""A toy workload for graph tests: its time is set by its knobs, so verdicts are predictable.

The work is ``--items`` sleeps of ``--unit`` seconds spread over ``--workers`` threads (more
workers: faster, the same work); ``--epochs`` repeats it (fewer epochs: doing less).
"""

import argparse
import threading
import time

ap = argparse.ArgumentParser()
ap.add_argument("--workers", type=int, default=1)
ap.add_argument("--epochs", type=int, default=2)
ap.add_argument("--items", type=int, default=8)
ap.add_argument("--unit", type=float, default=0.01)
ap.add_argument("--slow", type=int, default=0)
ap.add_argument(
    "--depth", type=int, default=0
)  # accepted, no effect: experiments that cost what the baseline costs
a = ap.parse_args()
start = time.perf_counter()
for _ in range(a.epochs):
    chunks = [range(i, a.items, a.workers) for i in range(a.workers)]
    threads = [threading.Thread(target=lambda c=c: [time.sleep(a.unit) for _ in c]) for c in chunks]
    for t in threads:
        t.start()
    for t in threads:
        t.join()
    if a.slow:
        time.sleep(a.unit * a.items * 0.5)
print(f"run_time_s {time.perf_counter() - start:.6f}")
