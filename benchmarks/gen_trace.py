"""Generate a synthetic dftracer 2.x trace (one .pfw.gz per process) for benchmarks.

The shape mimics a data-loader workload: per process a few thousand files, each
opened, read in a mix of sequential read() and random pread() calls, then closed,
with application-level ``data_loader``/``compute`` events interleaved.  It writes
the exact counts it produced to ``<out>/expected.json`` so benchmarks can check
that every event was counted.
"""

from __future__ import annotations

import argparse
import gzip
import json
import random
from pathlib import Path


def _hx(value: int) -> str:
    return f"{value & 0xFFFFFFFFFFFFFFFF:016x}"


def generate(out: Path, events: int, files: int, seed: int = 7) -> dict[str, int]:
    """Write ``files`` trace files holding ``events`` complete events in total."""
    out.mkdir(parents=True, exist_ok=True)
    rng = random.Random(seed)
    per_file = events // files
    totals = {"events": 0, "read_count": 0, "read_bytes": 0, "write_count": 0, "write_bytes": 0}
    hhash = _hx(0x6882804A826580CD)
    for f in range(files):
        pid = 4000 + f
        path = out / f"trace-{f:04x}{pid:08x}-preload.pfw.gz"
        eid = 0
        ts = 1_700_000_000_000_000 + f * 17
        lines: list[str] = []
        head = '{"name":"%s","cat":"dftracer","type":1,"pid":%d,"tid":%d,"ph":4,"args":{"hhash":"%s","name":"%s","value":"%s"}}'
        lines.append(head % ("HH", pid, pid, hhash, "node01", hhash))
        lines.append(head % ("CM", pid, pid, hhash, "time_metric", "US"))
        lines.append(head % ("SH", pid, pid, hhash, "python;train.py;--epochs;1", _hx(pid * 31)))
        ev = ('{"id":%d,"name":"%s","cat":"%s","type":3,"pid":%d,"tid":%d,"ts":%d,"dur":%d,"ph":1,'
              '"args":{"hhash":"%s"%s}}')
        written = 0
        sample = 0
        with gzip.open(path, "wt", compresslevel=1) as fh:
            while written < per_file:
                fhash = _hx((pid << 20) + sample)
                lines.append(head % ("FH", pid, pid, hhash, f"/data/train/sample_{pid}_{sample}.npz", fhash))
                eid += 1; written += 1; ts += 5
                lines.append(ev % (eid, "open64", "POSIX", pid, pid, ts, 4, hhash, ',"flags":0,"fhash":"%s"' % fhash))
                pos = 0
                for _ in range(rng.randint(4, 12)):
                    size = rng.choice((4096, 65536, 131072, 1 << 20, 4 << 20))
                    eid += 1; written += 1; ts += rng.randint(1, 40)
                    if rng.random() < 0.3:
                        off = rng.randint(0, 64) * 4096
                        lines.append(ev % (eid, "pread64", "POSIX", pid, pid, ts, size // 2048 + 1, hhash,
                                           ',"ret":%d,"count":%d,"offset":%d,"fhash":"%s"' % (size, size, off, fhash)))
                    else:
                        lines.append(ev % (eid, "read", "POSIX", pid, pid, ts, size // 2048 + 1, hhash,
                                           ',"ret":%d,"count":%d,"fhash":"%s"' % (size, size, fhash)))
                        pos += size
                    totals["read_count"] += 1; totals["read_bytes"] += size
                if sample % 50 == 0:
                    eid += 1; written += 1; ts += 3
                    lines.append(ev % (eid, "write", "POSIX", pid, pid, ts, 9, hhash,
                                       ',"ret":%d,"count":%d,"fhash":"%s"' % (8192, 8192, fhash)))
                    totals["write_count"] += 1; totals["write_bytes"] += 8192
                eid += 1; written += 1; ts += 2
                lines.append(ev % (eid, "close", "POSIX", pid, pid, ts, 1, hhash, ',"ret":0,"fhash":"%s"' % fhash))
                eid += 1; written += 1; ts += 1
                lines.append(ev % (eid, "TorchDataset.__getitem__", "data_loader", pid, pid, ts - 60, 62, hhash, ""))
                eid += 1; written += 1
                lines.append(ev % (eid, "compute", "ai_framework", pid, pid, ts, 300, hhash, ""))
                ts += 300
                sample += 1
                if len(lines) > 20000:
                    fh.write("\n".join(lines) + "\n"); lines.clear()
            fh.write("\n".join(lines) + "\n")
        totals["events"] += written
    (out / "expected.json").write_text(json.dumps(totals, indent=2))
    return totals


def main() -> None:
    ap = argparse.ArgumentParser(description=__doc__)
    ap.add_argument("out", type=Path)
    ap.add_argument("--events", type=int, default=5_000_000)
    ap.add_argument("--files", type=int, default=4)
    args = ap.parse_args()
    print(json.dumps(generate(args.out, args.events, args.files)))


if __name__ == "__main__":
    main()
