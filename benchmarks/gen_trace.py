"""Generate a synthetic dftracer 2.x trace (one .pfw.gz per process) for benchmarks.

The shape mimics a data-loader workload: per process thousands of sample files, each
opened, read with a mix of sequential read() and random pread() calls, sometimes
written, then closed, with application ``data_loader``/``compute`` events around them.
It writes the exact counts it produced to ``<out>/expected.json`` so a benchmark can
check that every event was counted.
"""

from __future__ import annotations

import argparse
import gzip
import json
import random
from pathlib import Path

HHASH = f"{0x6882804A826580CD:016x}"
SIZES = (4096, 65536, 131072, 1 << 20, 4 << 20)
FLUSH_LINES = 20_000


def _meta(pid: int, kind: str, name: str, value: str) -> str:
    return json.dumps(
        {
            "name": kind,
            "cat": "dftracer",
            "type": 1,
            "pid": pid,
            "tid": pid,
            "ph": 4,
            "args": {"hhash": HHASH, "name": name, "value": value},
        },
        separators=(",", ":"),
    )


def _event(eid: int, name: str, cat: str, pid: int, ts: int, dur: int, **args: object) -> str:
    return json.dumps(
        {
            "id": eid,
            "name": name,
            "cat": cat,
            "type": 3,
            "pid": pid,
            "tid": pid,
            "ts": ts,
            "dur": dur,
            "ph": 1,
            "args": {"hhash": HHASH, **args},
        },
        separators=(",", ":"),
    )


class _Writer:
    """Buffers lines for one trace file and tracks what it wrote."""

    def __init__(self, path: Path, pid: int, totals: dict[str, int]) -> None:
        self.fh = gzip.open(path, "wt", compresslevel=1)  # noqa: SIM115 - closed in close()
        self.pid, self.totals, self.lines, self.eid, self.events = pid, totals, [], 0, 0

    def meta(self, kind: str, name: str, value: str) -> None:
        self.lines.append(_meta(self.pid, kind, name, value))

    def event(self, name: str, cat: str, ts: int, dur: int, **args: object) -> None:
        self.eid += 1
        self.events += 1
        self.lines.append(_event(self.eid, name, cat, self.pid, ts, dur, **args))
        if len(self.lines) >= FLUSH_LINES:
            self.flush()

    def flush(self) -> None:
        if self.lines:
            self.fh.write("\n".join(self.lines) + "\n")
            self.lines.clear()

    def close(self) -> None:
        self.flush()
        self.fh.close()
        self.totals["events"] += self.events


def _one_file(path: Path, pid: int, events: int, rng: random.Random, totals: dict[str, int]) -> None:
    w = _Writer(path, pid, totals)
    w.meta("HH", "node01", HHASH)
    w.meta("CM", "time_metric", "US")
    w.meta("SH", "python;train.py;--epochs;1", f"{pid * 31:016x}")
    ts = 1_700_000_000_000_000 + pid * 17
    sample = 0
    while w.events < events:
        fhash = f"{(pid << 20) + sample:016x}"
        w.meta("FH", f"/data/train/sample_{pid}_{sample}.npz", fhash)
        ts += 5
        w.event("open64", "POSIX", ts, 4, flags=0, fhash=fhash)
        for _ in range(rng.randint(4, 12)):
            size = rng.choice(SIZES)
            ts += rng.randint(1, 40)
            if rng.random() < 0.3:
                w.event(
                    "pread64",
                    "POSIX",
                    ts,
                    size // 2048 + 1,
                    ret=size,
                    count=size,
                    offset=rng.randint(0, 64) * 4096,
                    fhash=fhash,
                )
            else:
                w.event("read", "POSIX", ts, size // 2048 + 1, ret=size, count=size, fhash=fhash)
            totals["read_count"] += 1
            totals["read_bytes"] += size
        if sample % 50 == 0:
            ts += 3
            w.event("write", "POSIX", ts, 9, ret=8192, count=8192, fhash=fhash)
            totals["write_count"] += 1
            totals["write_bytes"] += 8192
        ts += 2
        w.event("close", "POSIX", ts, 1, ret=0, fhash=fhash)
        ts += 1
        w.event("TorchDataset.__getitem__", "data_loader", ts - 60, 62)
        w.event("compute", "ai_framework", ts, 300)
        ts += 300
        sample += 1
    w.close()


def generate(out: Path, events: int, files: int, seed: int = 7) -> dict[str, int]:
    """Write ``files`` trace files holding about ``events`` complete events in total."""
    out.mkdir(parents=True, exist_ok=True)
    rng = random.Random(seed)
    totals = {"events": 0, "read_count": 0, "read_bytes": 0, "write_count": 0, "write_bytes": 0}
    for f in range(files):
        pid = 4000 + f
        _one_file(out / f"trace-{f:04x}{pid:08x}-preload.pfw.gz", pid, events // files, rng, totals)
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
