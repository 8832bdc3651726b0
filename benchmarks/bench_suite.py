"""How long the test suite takes, per tier, and which tests cost the most.

`make test` must stay fast (the unit and graph tiers, minutes on a 2-core machine); a slow test
is noticed here, not by a timed test. Runs pytest once over the chosen tiers with a JUnit XML
report, then sums the test times by tier (the folder a test lives in) and lists the slowest.

    .venv/bin/python benchmarks/bench_suite.py                 # the fast tiers (make test)
    .venv/bin/python benchmarks/bench_suite.py --tiers all     # every tier (.ci/run)
    .venv/bin/python benchmarks/bench_suite.py --json
    .venv/bin/python benchmarks/bench_suite.py --tiers all --write-durations

``--write-durations`` also refreshes ``tests/durations.json``: the measured time of every test
over half a second, from which the test runs hand out the longest work first (tests/schedule.py).
"""

from __future__ import annotations

import argparse
import json
import subprocess
import sys
import tempfile
import time
import xml.etree.ElementTree as ET
from collections import defaultdict
from pathlib import Path

REPO = Path(__file__).resolve().parent.parent
sys.path.insert(0, str(REPO))
from tests.schedule import DURATIONS, durations_from  # noqa: E402

TIERS = {"fast": ["-m", "not e2e"], "e2e": ["-m", "e2e"], "all": []}


def _tier(classname: str) -> str:
    """tests.unit.test_x -> unit; tests.e2e.test_y.TestZ -> e2e."""
    parts = classname.split(".")
    return parts[1] if len(parts) > 1 and parts[0] == "tests" else "other"


def _nodeid(classname: str, name: str) -> str:
    """JUnit's (classname, name) back to a pytest node id: tests.unit.test_x.TestY, test_z ->
    tests/unit/test_x.py::TestY::test_z."""
    parts = classname.split(".")
    for cut in range(len(parts), 0, -1):
        path = "/".join(parts[:cut]) + ".py"
        if (REPO / path).is_file():
            return "::".join([path, *parts[cut:], name])
    return f"{classname}::{name}"


def write_durations(cases: list[tuple[str, float]], path: Path = DURATIONS) -> int:
    """Refresh the durations file the test runs schedule by; returns how many tests it lists."""
    tests = durations_from(cases)
    path.write_text(json.dumps({"schema": "dftune.test_durations/1", "tests": tests}, indent=0) + "\n")
    return len(tests)


def run(tiers: str, extra: list[str]) -> dict[str, object]:
    with tempfile.TemporaryDirectory(prefix="dftune-bench-suite-") as tmp:
        xml = Path(tmp) / "suite.xml"
        cmd = [
            sys.executable,
            "-m",
            "pytest",
            "-q",
            "-p",
            "no:cacheprovider",
            f"--junitxml={xml}",
            *TIERS[tiers],
            *extra,
        ]
        t0 = time.perf_counter()
        proc = subprocess.run(cmd, cwd=REPO, capture_output=True, text=True)
        wall = time.perf_counter() - t0
        if not xml.exists():
            raise SystemExit(f"pytest wrote no report (exit {proc.returncode}):\n{proc.stdout[-2000:]}")
        root = ET.parse(xml).getroot()
    per_tier: dict[str, float] = defaultdict(float)
    counts: dict[str, int] = defaultdict(int)
    tests = []
    for case in root.iter("testcase"):
        t, tier = float(case.get("time", 0.0)), _tier(case.get("classname", ""))
        per_tier[tier] += t
        counts[tier] += 1
        tests.append((t, _nodeid(case.get("classname", ""), case.get("name", ""))))
    cases = [(name, t) for t, name in tests]
    tests.sort(reverse=True)
    return {
        "schema": "dftune.bench_suite/1",
        "tiers": tiers,
        "exit_code": proc.returncode,
        "wall_s": round(wall, 1),
        "per_tier": {k: {"tests": counts[k], "time_s": round(v, 1)} for k, v in sorted(per_tier.items())},
        "slowest": [{"test": name, "time_s": round(t, 2)} for t, name in tests[:15]],
        "cases": cases,
    }


def main() -> int:
    ap = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    ap.add_argument("--tiers", choices=sorted(TIERS), default="fast")
    ap.add_argument("--json", action="store_true")
    ap.add_argument(
        "--write-durations",
        action="store_true",
        help=f"refresh {DURATIONS.relative_to(REPO)} (the order the test runs hand out work in)",
    )
    ap.add_argument("pytest_args", nargs="*", help="passed to pytest (after --)")
    args = ap.parse_args()
    out = run(args.tiers, args.pytest_args)
    cases = out.pop("cases")
    if args.write_durations:
        n = write_durations(cases)  # type: ignore[arg-type]
        print(f"{DURATIONS.relative_to(REPO)}: {n} tests over 0.5 s", file=sys.stderr)
    if args.json:
        print(json.dumps(out, indent=2))
        return 0
    print(f"tiers {out['tiers']}: {out['wall_s']} s wall, pytest exit {out['exit_code']}")
    for tier, row in out["per_tier"].items():  # type: ignore[attr-defined]
        print(f"  {tier:<6} {row['tests']:>5} tests {row['time_s']:>8.1f} s")
    print("slowest:")
    for row in out["slowest"]:  # type: ignore[attr-defined]
        print(f"  {row['time_s']:>7.2f} s  {row['test'][-66:]}")
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
