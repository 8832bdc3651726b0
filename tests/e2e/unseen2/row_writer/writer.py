"""Unseen workload: an exporter that writes fixed-size rows to a few durable output files.

Rows are produced one at a time (a little CPU work each) and written, in row order, to the
output files round-robin; the files are opened with O_DSYNC, so every write reaches the device
before it returns. Knobs: ``--buffer-kib`` (rows staged in memory and written when the buffer
is full: the same bytes at the same offsets), ``--pack`` (rows packed into one record before
they are written), ``--dedup`` (rows whose key was written already are dropped), ``--merge``
(all rows go to one output file). The program does not say which of them change what it
writes; dftune has to measure.
"""

from __future__ import annotations

import argparse
import os
import time


def main() -> None:
    ap = argparse.ArgumentParser(description=__doc__)
    ap.add_argument("--out", required=True)
    ap.add_argument("--rows", type=int, default=512)
    ap.add_argument("--row-kib", type=int, default=4)
    ap.add_argument("--files", type=int, default=4)
    ap.add_argument("--buffer-kib", type=int, default=0)
    ap.add_argument("--pack", type=int, default=1)
    ap.add_argument("--dedup", type=int, default=0)
    ap.add_argument("--merge", type=int, default=0)
    ap.add_argument("--work-us", type=float, default=100.0)
    args = ap.parse_args()
    os.makedirs(args.out, exist_ok=True)
    files = 1 if args.merge else args.files
    flags = os.O_WRONLY | os.O_CREAT | os.O_TRUNC | getattr(os, "O_DSYNC", 0)
    fds = [os.open(os.path.join(args.out, f"part_{k:02d}.rows"), flags, 0o644) for k in range(files)]
    row = args.row_kib * 1024
    pending: list[list[bytes]] = [[] for _ in fds]
    limit = args.buffer_kib * 1024
    start = time.perf_counter()
    written = records = 0

    def flush(k: int) -> None:
        nonlocal records
        if pending[k]:
            os.write(fds[k], b"".join(pending[k]))
            records += 1
            pending[k].clear()

    packed: list[list[bytes]] = [[] for _ in fds]
    for i in range(args.rows):
        t = time.perf_counter() + args.work_us / 1e6
        while time.perf_counter() < t:  # producing the row
            pass
        if args.dedup and i % 2:  # "a key seen before"
            continue
        data = (i.to_bytes(8, "little") * (row // 8))[:row]
        k = i % files
        packed[k].append(data)
        if len(packed[k]) < args.pack:
            continue
        pending[k].append(b"".join(packed[k]))
        packed[k].clear()
        written += 1
        if sum(len(p) for p in pending[k]) >= limit:
            flush(k)
    for k in range(files):
        if packed[k]:
            pending[k].append(b"".join(packed[k]))
            written += 1
        flush(k)
        os.close(fds[k])
    print(f"rows {args.rows // (2 if args.dedup else 1)} records {written}")
    print(f"run_time_s {time.perf_counter() - start:.6f}")


if __name__ == "__main__":
    main()
