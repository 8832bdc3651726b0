"""Does ``dftune diagnose`` cost no more than one ``analyze``?  Speed and memory of the views.

    python benchmarks/bench_diagnose.py                     # 5M events in 4 .pfw.gz files, best of 3
    python benchmarks/bench_diagnose.py --events 10000000
    python benchmarks/bench_diagnose.py --json --check      # exit 1 when a target is missed

The same cached synthetic dftracer 2.x trace as ``bench_analyze.py`` (``gen_trace.py``) is
measured three ways, each in a fresh subprocess, alternating run by run so all three see the
same load on a shared machine (best of ``--repeat``):

1. ``analyze``: ``analyze([dir])`` with default options (the summary only);
2. ``all views``: ``analyze([dir], views=summary, file, proc, time, layer)``;
3. ``diagnose``: ``diagnose([dir])`` (the analysis with the file, proc and time views the rule
   sets read, then the rules, the gate and the checklist).

Each wall time is the call itself, timed inside the child, and so is its CPU time (all threads
of the child and its reaped workers): on a loaded machine the wall times wait for cores, and
the CPU ratio says what the extra work is.  Peak RSS is that of the process tree (sampled
every 50 ms, as in ``bench_analyze.py``).  Every run must count exactly what
the generator wrote (events, read/write counts and bytes), else exit code 2.

Targets: diagnose / analyze <= 1.15 (every view comes from the one pass over the traces; the
time view used to read them a second time) and peak RSS < 1024 MiB for all three.
"""

from __future__ import annotations

import datetime as dt
import json
import os
import sys
import time
from pathlib import Path
from typing import Any

HERE = Path(__file__).resolve().parent
sys.path.insert(0, str(HERE))
import bench_analyze as B  # noqa: E402 - the sibling benchmark's data set, child runner and sampler

TARGET_RATIO = 1.15
TARGET_RSS_MIB = B.TARGET_RSS_MIB
ALL_VIEWS = ["summary", "file", "proc", "time", "layer"]
KINDS = ("analyze", "views", "diagnose")
LABELS = {"analyze": "analyze (summary)", "views": "analyze, all views", "diagnose": "diagnose"}


def _cpu_s() -> float:
    """CPU seconds of this process (all threads) and of its reaped children (worker processes)."""
    import resource

    kids = resource.getrusage(resource.RUSAGE_CHILDREN)
    return time.process_time() + kids.ru_utime + kids.ru_stime


def _child(kind: str, data: Path) -> dict[str, Any]:
    """One measurement in this (fresh) process: the call's wall and CPU time and what it counted."""
    from dftune.tools.diagnose.engine import diagnose
    from dftune.tools.trace import analyze

    t0, c0 = time.perf_counter(), _cpu_s()
    if kind == "diagnose":
        d = diagnose([data])
        wall, cpu = time.perf_counter() - t0, _cpu_s() - c0
        doc = {"events": d.events, "bottlenecks": [b.id for b in d.bottlenecks]}
        counts = {"events": d.events}
    else:
        a = analyze([data], views=ALL_VIEWS if kind == "views" else ())
        wall, cpu = time.perf_counter() - t0, _cpu_s() - c0
        doc = {"views": sorted(a.views)}
        counts = {
            "events": a.events,
            "skipped_lines": a.skipped_lines,
            "read_count": a.read.count,
            "read_bytes": a.read.bytes,
            "write_count": a.write.count,
            "write_bytes": a.write.bytes,
        }
    return {"wall_s": wall, "cpu_s": cpu, **counts, **doc}


def _child_main(kind: str, data: Path) -> None:
    import resource

    out = _child(kind, data)
    out["peak_rss_kib"] = B._peak_rss_kib()
    workers = resource.getrusage(resource.RUSAGE_CHILDREN).ru_maxrss
    out["worker_peak_rss_kib"] = workers // 1024 if sys.platform == "darwin" else workers
    sys.stdout.write(json.dumps(out) + "\n")


def _run(kind: str, data: Path) -> dict[str, Any]:
    """:func:`bench_analyze.run_child`'s process-tree sampling, with this file's child."""
    import subprocess

    argv = [sys.executable, str(Path(__file__).resolve()), "--child", kind, str(data)]
    t0 = time.perf_counter()
    proc = subprocess.Popen(argv, stdout=subprocess.PIPE, stderr=subprocess.PIPE, text=True)
    sampler = B.TreeSampler(proc.pid)
    sampler.start()
    stdout, stderr = proc.communicate()
    sampler.done.set()
    sampler.join()
    if proc.returncode != 0:
        tail = (stderr.strip().splitlines() or ["(no stderr)"])[-1]
        raise SystemExit(f"bench: {kind} child failed with exit code {proc.returncode}: {tail}")
    out: dict[str, Any] = json.loads(stdout.strip().splitlines()[-1])
    out["process_s"] = time.perf_counter() - t0
    out["tree_peak_rss_kib"] = max(sampler.peak_rss_kib, out["peak_rss_kib"])
    return out


def _problems(kind: str, run: dict[str, Any], expected: dict[str, int]) -> list[str]:
    keys = (
        ("events",)
        if kind == "diagnose"
        else ("events", "read_count", "read_bytes", "write_count", "write_bytes")
    )
    out = [
        f"{k}: {kind} {run.get(k)!r} != expected {expected.get(k)!r}"
        for k in keys
        if run.get(k) != expected.get(k)
    ]
    if run.get("skipped_lines"):
        out.append(f"{kind}: {run['skipped_lines']} skipped lines (the generated trace has none)")
    return out


def main(argv: list[str] | None = None) -> int:
    args = B.parse_args(__doc__, argv)
    if args.child:
        _child_main(args.child[0], Path(args.child[1]))
        return 0

    data, expected, load_before = B.dataset_under_load(args)
    runs: dict[str, list[dict[str, Any]]] = {k: [] for k in KINDS}
    for i in range(1, args.repeat + 1):
        for kind in KINDS:  # interleaved: all three see the same load
            run = _run(kind, data)
            problems = _problems(kind, run, expected)
            if problems:
                B.log("result does not match expected.json: " + "; ".join(problems))
                return 2
            runs[kind].append(run)
            B.log(
                f"{LABELS[kind]:<20} run {i}/{args.repeat}: "
                f"{run['wall_s']:.2f} s wall, {run['cpu_s']:.2f} s CPU, "
                f"peak RSS {run['tree_peak_rss_kib'] / 1024:.0f} MiB, load {os.getloadavg()[0]:.1f}"
            )
    best = {k: min(r["wall_s"] for r in v) for k, v in runs.items()}
    best_cpu = {k: min(r["cpu_s"] for r in v) for k, v in runs.items()}
    peak = {k: max(r["tree_peak_rss_kib"] for r in v) / 1024 for k, v in runs.items()}
    ratio = {k: best[k] / best["analyze"] for k in KINDS}
    cpu_ratio = {k: best_cpu[k] / best_cpu["analyze"] for k in KINDS}
    # the run-by-run ratios say how much of the best-of ratio is noise
    paired = {
        k: [d["wall_s"] / a["wall_s"] for d, a in zip(runs[k], runs["analyze"], strict=True)] for k in KINDS
    }
    report: dict[str, Any] = {
        "schema": "dftune.bench.diagnose/1",
        "date": dt.datetime.now(dt.UTC).isoformat(timespec="seconds"),
        **B.machine_and_data(load_before, data, args.files, int(expected["events"])),
        "repeat": args.repeat,
        "runs_wall_s": {k: [r["wall_s"] for r in v] for k, v in runs.items()},
        "runs_peak_rss_mib": {k: [r["tree_peak_rss_kib"] / 1024 for r in v] for k, v in runs.items()},
        "runs_cpu_s": {k: [r["cpu_s"] for r in v] for k, v in runs.items()},
        "best_wall_s": best,
        "best_cpu_s": best_cpu,
        "cpu_ratio_over_analyze": cpu_ratio,
        "peak_rss_mib": peak,
        "ratio_over_analyze": ratio,
        "paired_ratios": paired,
        "targets": {
            "diagnose_ratio_max": TARGET_RATIO,
            "diagnose_ratio_ok": ratio["diagnose"] <= TARGET_RATIO,
            "peak_rss_mib_max": TARGET_RSS_MIB,
            "peak_rss_ok": all(p < TARGET_RSS_MIB for p in peak.values()),
        },
    }
    print(json.dumps(report, indent=2) if args.json else render(report))
    ok = report["targets"]["diagnose_ratio_ok"] and report["targets"]["peak_rss_ok"]
    return 1 if args.check and not ok else 0


def render(r: dict[str, Any]) -> str:
    d, t = r["data"], r["targets"]
    lines = [
        f"{d['events']:,} events in {d['files']} files ({d['bytes_on_disk'] / 2**20:.0f} MiB gz), best of "
        f"{r['repeat']}, {r['host']['cpus']} CPUs, load {r['host']['loadavg_1m_before']:.1f} before / "
        f"{r['host']['loadavg_1m_after']:.1f} after"
    ]
    lines.append(
        f"{'':<20}  {'best s':>7}  {'runs s':<20}  {'vs analyze':>10}  {'CPU s':>6}  {'CPU vs':>6}  "
        f"{'peak RSS MiB':>12}"
    )
    for k in KINDS:
        runs = ", ".join(f"{w:.2f}" for w in r["runs_wall_s"][k])
        lines.append(
            f"{LABELS[k]:<20}  {r['best_wall_s'][k]:>7.2f}  {runs:<20}  {r['ratio_over_analyze'][k]:>10.2f}  "
            f"{r['best_cpu_s'][k]:>6.2f}  {r['cpu_ratio_over_analyze'][k]:>6.2f}  "
            f"{r['peak_rss_mib'][k]:>12.0f}"
        )
    mark = {True: "ok", False: "MISSED"}
    lines.append(
        f"targets: diagnose/analyze <= {t['diagnose_ratio_max']}: {r['ratio_over_analyze']['diagnose']:.2f} "
        f"{mark[t['diagnose_ratio_ok']]}; peak RSS < {t['peak_rss_mib_max']:.0f} MiB: "
        f"{max(r['peak_rss_mib'].values()):.0f} {mark[t['peak_rss_ok']]}"
    )
    lines.append(
        "run-by-run ratios: "
        + "; ".join(f"{LABELS[k]} {', '.join(f'{x:.2f}' for x in r['paired_ratios'][k])}" for k in KINDS[1:])
    )
    return "\n".join(lines)


if __name__ == "__main__":
    sys.exit(main())
