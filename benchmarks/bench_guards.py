"""How long the measuring guards take on a large trace, next to reading it.

    .venv/bin/python benchmarks/bench_guards.py                 # 1M events in 4 files, best of 3
    .venv/bin/python benchmarks/bench_guards.py --events 5000000 --json
    .venv/bin/python benchmarks/bench_guards.py --check         # exit 1 if a target is missed

The same cached synthetic dftracer 2.x trace as ``bench_analyze.py`` (``gen_trace.py``), read
once with its access profile (``analyze(..., profile=True)``, what every experiment's arm gets).
Each guard then judges that trace against itself, as the judge node does after an experiment:
fresh arms every time (nothing cached between runs), under three strategies whose categories
take different paths: data loader parallelism (the logical comparison of each stream's
requests), caching (re-reads and the program's passes) and data sieving (the library's
read-modify-write and read windows over the request log).

Target: judging an experiment (both guards, under each strategy) takes at most half the time
the profiled read of one arm's trace takes, since a run reads every arm's trace once anyway.
Progress goes to stderr; stdout carries the table (or one JSON document,
schema ``dftune.bench.guards/1``).
"""

from __future__ import annotations

import json
import sys
import time
from pathlib import Path
from typing import Any

HERE = Path(__file__).resolve().parent
sys.path.insert(0, str(HERE))
import bench_analyze as B  # noqa: E402 - the sibling benchmark's data set and options

STRATEGIES = ("l1.dataloader_workers", "l1.dataset_cache", "l2.romio_ds")
#: judging both guards may take at most this share of one profiled read of the trace
TARGET_SHARE = 0.5


def _best(fn: Any, repeat: int) -> float:
    best = float("inf")
    for _ in range(repeat):
        t0 = time.perf_counter()
        fn()
        best = min(best, time.perf_counter() - t0)
    return best


def measure(data: Path, repeat: int) -> dict[str, Any]:
    from dftune.tools.catalog import default_catalog
    from dftune.tools.guards import Arm, access_pattern_guard, no_doing_less_guard
    from dftune.tools.trace import analyze

    t0 = time.perf_counter()
    analysis = analyze([data], profile=True)
    read_s = time.perf_counter() - t0
    profile = analysis.profile
    log = profile.requests if profile is not None else None
    requests = sum(run[4] for s in log.streams for run in s.runs) if log is not None else 0
    cat = default_catalog()

    def arms() -> tuple[Arm, Arm]:
        return Arm(analysis=analysis, label="incumbent"), Arm(analysis=analysis, label="experiment")

    rows = []
    for sid in STRATEGIES:
        strategy = cat.strategies[sid]
        pattern_s = _best(lambda s=strategy: access_pattern_guard(s, *arms()), repeat)
        work_s = _best(lambda s=strategy: no_doing_less_guard(*arms(), strategy=s), repeat)
        rows.append({"strategy": sid, "access_pattern_s": pattern_s, "no_doing_less_s": work_s})
    return {
        "schema": "dftune.bench.guards/1",
        "events": analysis.events,
        "data_files": len(profile.files) if profile else 0,
        "requests": requests,
        "profiled_read_s": read_s,
        "strategies": rows,
        "target_share": TARGET_SHARE,
    }


def missed(r: dict[str, Any]) -> list[str]:
    limit = TARGET_SHARE * r["profiled_read_s"]
    return [
        f"{row['strategy']}: {row['access_pattern_s'] + row['no_doing_less_s']:.2f} s > {limit:.2f} s"
        for row in r["strategies"]
        if row["access_pattern_s"] + row["no_doing_less_s"] > limit
    ]


def render(r: dict[str, Any]) -> str:
    lines = [
        f"trace: {r['events']:,} events, {r['data_files']:,} data files, "
        f"{r['requests']:,} requests in the log",
        f"profiled read of one arm: {r['profiled_read_s']:.2f} s "
        f"(target: both guards within {TARGET_SHARE:.0%} of it)",
        f"{'strategy':<24}{'access pattern':>16}{'no doing less':>15}",
    ]
    for row in r["strategies"]:
        lines.append(
            f"{row['strategy']:<24}{row['access_pattern_s']:>14.3f} s{row['no_doing_less_s']:>13.3f} s"
        )
    return "\n".join(lines)


def main(argv: list[str] | None = None) -> int:
    args = B.parse_args(__doc__, argv)
    if args.events == 5_000_000 and "--events" not in (argv or sys.argv[1:]):
        args.events = 1_000_000  # the request log of 5M events is the analysis benchmark's job
    data, _, _ = B.dataset_under_load(args)
    B.log(f"reading {data} with its access profile, then judging it {args.repeat} time(s) a guard")
    r = measure(data, args.repeat)
    print(json.dumps(r, indent=2) if args.json else render(r))
    problems = missed(r)
    for p in problems:
        B.log(f"target missed: {p}")
    return 1 if args.check and problems else 0


if __name__ == "__main__":
    raise SystemExit(main())
