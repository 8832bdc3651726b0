"""How much CPU does ``dftune`` spend before it answers?  Start-up of the command line.

    python benchmarks/bench_cli_start.py                  # median of 7 per command
    python benchmarks/bench_cli_start.py --json --check   # exit 1 when a target is missed

Each command runs in a fresh subprocess (the installed ``dftune`` next to this interpreter) with
an empty ``DFTUNE_HOME``; its CPU time (user + system of the child, from ``wait4``) is what a
user pays on a loaded machine, where wall time only adds the wait for a core.  Measured:
``--help``, ``run --help``, and the one-line refusals of a missing trace, data folder, spec and
run id, which must be answered before any engine (LangGraph, SciPy, the trace engine, chromadb)
is imported.

Target: every median below 0.5 s of CPU (the refusals used to cost 0.7-2.4 s: each command
imported its engine before it looked at its arguments).
"""

from __future__ import annotations

import argparse
import json
import os
import statistics
import subprocess
import sys
import tempfile
from pathlib import Path

TARGET_CPU_S = 0.5
COMMANDS: list[list[str]] = [
    ["--help"],
    ["run", "--help"],
    ["diagnose", "/nonexistent"],
    ["analyze", "/nonexistent"],
    ["diagnose", "--data-dir", "/nope", "/"],
    ["run", "/nonexistent.toml"],
    ["history", "nosuchrun"],
    ["report", "nosuchrun"],
]


def _dftune() -> str:
    exe = Path(sys.executable).with_name("dftune")
    if not exe.exists():
        sys.exit(f"bench_cli_start: {exe} not found (install dftune into this interpreter's venv)")
    return str(exe)


def cpu_of(argv: list[str], env: dict[str, str]) -> tuple[float, int]:
    """CPU seconds (user + system) of one child and its exit code."""
    proc = subprocess.Popen(argv, stdout=subprocess.DEVNULL, stderr=subprocess.DEVNULL, env=env)
    _, status, usage = os.wait4(proc.pid, 0)
    proc.returncode = os.waitstatus_to_exitcode(status)
    return usage.ru_utime + usage.ru_stime, proc.returncode


def main() -> int:
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--repeat", type=int, default=7)
    ap.add_argument("--json", action="store_true")
    ap.add_argument("--check", action="store_true", help="exit 1 when a median exceeds the target")
    args = ap.parse_args()
    exe = _dftune()
    rows = []
    with tempfile.TemporaryDirectory() as home:
        env = {**os.environ, "DFTUNE_HOME": home}
        samples: dict[int, list[float]] = {i: [] for i in range(len(COMMANDS))}
        codes: dict[int, int] = {}
        for _ in range(args.repeat):  # interleaved: every command sees the same load
            for i, cmd in enumerate(COMMANDS):
                cpu, codes[i] = cpu_of([exe, *cmd], env)
                samples[i].append(cpu)
        for i, cmd in enumerate(COMMANDS):
            med = statistics.median(samples[i])
            rows.append(
                {
                    "command": "dftune " + " ".join(cmd),
                    "exit_code": codes[i],
                    "cpu_s_median": round(med, 3),
                    "cpu_s_max": round(max(samples[i]), 3),
                    "ok": med < TARGET_CPU_S,
                }
            )
    if args.json:
        print(json.dumps({"target_cpu_s": TARGET_CPU_S, "repeat": args.repeat, "rows": rows}, indent=2))
    else:
        print(f"{'command':<44} {'exit':>4} {'cpu med':>8} {'cpu max':>8}")
        for r in rows:
            flag = "" if r["ok"] else "  over target"
            print(
                f"{r['command']:<44} {r['exit_code']:>4} "
                f"{r['cpu_s_median']:>7.3f}s {r['cpu_s_max']:>7.3f}s{flag}"
            )
        print(f"target: every median below {TARGET_CPU_S} s of CPU")
    return 1 if args.check and not all(r["ok"] for r in rows) else 0


if __name__ == "__main__":
    sys.exit(main())
