"""A toy data loader whose worker pool can persist: a pair of knobs where one acts only with the other.

Each of ``--epochs`` epochs processes ``--items`` items. With ``--workers`` above 1 they are spread
over a pool of threads that the epoch starts first, unless ``--persistent 1`` keeps the pool of the
epoch before (PyTorch's ``persistent_workers``: with no workers it changes nothing, so measured
first it shows no gain).

The reported time is the toy's own clock, a cost model of what this run did: each worker started
costs ``START_S``, each item on an epoch's busiest worker ``ITEM_S``. The graph tier tests what the
graph decides from measurements, so the numbers must not depend on how busy the machine is; they
still count only what the run did (the pools really start, the items really run on them).
"""

import argparse
import hashlib
from concurrent.futures import ThreadPoolExecutor

START_S = 0.005  # one worker started
ITEM_S = 0.010  # one item on the busiest worker

ap = argparse.ArgumentParser()
ap.add_argument("--workers", type=int, default=1)
ap.add_argument("--persistent", type=int, default=0)
ap.add_argument("--epochs", type=int, default=4)
ap.add_argument("--items", type=int, default=8)
a = ap.parse_args()


def item(n: int) -> int:
    hashlib.sha256(bytes(n % 251) * 4096).digest()
    return n


started = 0
busiest = 0
pool: ThreadPoolExecutor | None = None
for _ in range(a.epochs):
    if a.workers == 1:
        busiest += len([item(n) for n in range(a.items)])
        continue
    if pool is None or not a.persistent:
        if pool is not None:
            pool.shutdown()
        pool = ThreadPoolExecutor(a.workers)
        started += a.workers
    shares = [range(w, a.items, a.workers) for w in range(a.workers)]
    done = pool.map(lambda share: len([item(n) for n in share]), shares)
    busiest += max(done)
if pool is not None:
    pool.shutdown()
print(f"run_time_s {started * START_S + busiest * ITEM_S:.6f}")
