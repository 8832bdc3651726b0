"""Exhaustive sweep of ROMIO's collective-buffering and data-sieving hints for an MPI-IO workload.

Every combination of romio_cb_write, romio_cb_read, romio_ds_write and romio_ds_read over
automatic/enable/disable (81), each given through a ROMIO hint file and run untraced with
``dftune bench``'s machinery (same setup, cache policy and metric as a tuning run). The hints in
effect are checked per combination (ROMIO_PRINT_HINTS): a combination the program overrode is
marked, never counted. The score of a tuning run is the sweep's best median over the median of
the combination the run kept (both from this sweep).

usage: python benchmarks/mpiio_hint_sweep.py SPEC.toml [--replicates N] [--json OUT]
"""

from __future__ import annotations

import argparse
import itertools
import json
import sys
import tempfile
from pathlib import Path

from dftune.tools.diagnose.stack import hints_printed, overridden
from dftune.tools.runner.bench import bench
from dftune.tools.runner.spec import load_spec

KEYS = ("romio_cb_write", "romio_cb_read", "romio_ds_write", "romio_ds_read")
VALUES = ("automatic", "enable", "disable")


def main() -> int:
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("spec")
    ap.add_argument("--replicates", type=int, default=3)
    ap.add_argument("--json", dest="out")
    args = ap.parse_args()
    spec = load_spec(args.spec)
    rows = []
    with tempfile.TemporaryDirectory(prefix="hint-sweep-") as tmp:
        root = Path(tmp)
        for i, combo in enumerate(itertools.product(VALUES, repeat=len(KEYS))):
            hints = dict(zip(KEYS, combo, strict=True))
            hint_file = root / f"h{i}.txt"
            hint_file.write_text("".join(f"{k} {v}\n" for k, v in hints.items()))
            res = bench(
                spec,
                replicates=args.replicates,
                trace=False,
                workdir=root / f"w{i}",
                env={"ROMIO_HINTS": str(hint_file), "ROMIO_PRINT_HINTS": "1"},
            )
            blocks = []
            for out in sorted((root / f"w{i}" / "logs").glob("r*.out")):
                blocks += hints_printed(out.read_text(errors="replace"))
            lost = overridden(hints, blocks)
            rows.append(
                {"hints": hints, "median": res.median, "values": res.values(), "overridden": sorted(lost)}
            )
            print(
                f"{i + 1:2d}/81 {' '.join(f'{v[:4]:4s}' for v in combo)} median {res.median}"
                + (f" OVERRIDDEN {sorted(lost)}" if lost else ""),
                file=sys.stderr,
                flush=True,
            )
    legit = [r for r in rows if r["median"] is not None and not r["overridden"]]
    lib = spec.metric.lower_is_better
    best = min(legit, key=lambda r: r["median"]) if lib else max(legit, key=lambda r: r["median"])
    default = next(r for r in rows if all(v == "automatic" for v in r["hints"].values()))
    doc = {
        "spec": spec.spec_path,
        "replicates": args.replicates,
        "lower_is_better": lib,
        "best": best,
        "default": default,
        "rows": rows,
    }
    if args.out:
        Path(args.out).write_text(json.dumps(doc, indent=1))
    print(json.dumps({"best": best, "default": default}, indent=1))
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
