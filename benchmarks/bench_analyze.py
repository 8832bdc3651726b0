"""Speed and memory benchmark of ``dftune.tools.trace.analyze`` against a raw DuckDB scan.

    python benchmarks/bench_analyze.py                      # 5M events in 4 .pfw.gz files
    python benchmarks/bench_analyze.py --events 10000000    # 10M events
    python benchmarks/bench_analyze.py --json               # one JSON document on stdout

Steps:

1. Generate (once, cached) a synthetic dftracer 2.x trace with ``benchmarks/gen_trace.py``
   under ``--out`` (default ``./bench-data/``), one sub-folder per (events, files, seed).
   A cached folder is reused only when its ``params.json`` and ``expected.json`` match the
   requested size, the generator source is unchanged and every trace file is present.
2. Raw-scan floor: ``SELECT count(*) FROM read_json('<dir>/*.pfw.gz',
   format='newline_delimited', ignore_errors=true)`` in DuckDB with ``threads=2``.
3. ``analyze([dir])`` with default options.  Steps 2 and 3 alternate, run by run, so
   both see the same load on a shared machine.

Both measurements run in a fresh subprocess per repetition (best of ``--repeat``, default 3),
so each run starts with cold Python caches and its peak memory is its own.  Because
``analyze`` may fan out to worker processes, peak RSS is that of the whole process tree:
the parent samples the summed RSS (and PSS) of the child and its descendants every 50 ms;
the child also reports its own ``VmHWM`` (``/proc/self/status``) and its reaped workers'
``getrusage(RUSAGE_CHILDREN).ru_maxrss``, and the tree peak is never below the child's VmHWM.
The wall time reported is the query / ``analyze()`` call itself, timed inside the child;
interpreter start-up and imports are included only in ``process_s``.

The analysis must count exactly what the generator wrote (``expected.json``: events,
read/write counts and bytes); any difference aborts the benchmark with exit code 2.
Targets: analyze / raw-scan wall time <= 1.5 and peak RSS < 1024 MiB; ``--check`` makes a
missed target exit with code 1.
"""

from __future__ import annotations

import argparse
import datetime as dt
import hashlib
import json
import os
import platform
import subprocess
import sys
import threading
import time
from pathlib import Path
from typing import Any

HERE = Path(__file__).resolve().parent
SEED = 7
TARGET_RATIO = 1.5
TARGET_RSS_MIB = 1024.0
RAW_THREADS = 2


# --------------------------------------------------------------------------------------
# data set


def _generator_digest() -> str:
    return hashlib.sha256((HERE / "gen_trace.py").read_bytes()).hexdigest()[:16]


def dataset_dir(out: Path, events: int, files: int) -> Path:
    return out / f"2x-{events}ev-{files}f-seed{SEED}"


def ensure_dataset(out: Path, events: int, files: int, log: Any) -> tuple[Path, dict[str, int]]:
    """The cached trace folder for (events, files), generated if missing or stale."""
    d = dataset_dir(out, events, files)
    params = {"events": events, "files": files, "seed": SEED, "generator": _generator_digest()}
    expected_path, params_path = d / "expected.json", d / "params.json"
    if expected_path.is_file() and params_path.is_file():
        try:
            cached_params = json.loads(params_path.read_text())
            expected = json.loads(expected_path.read_text())
        except ValueError:
            cached_params, expected = None, None
        traces = sorted(d.glob("*.pfw.gz"))
        if (
            cached_params == params
            and isinstance(expected, dict)
            and expected.get("events", -1) >= events
            and len(traces) == files
            and all(t.stat().st_size > 0 for t in traces)
        ):
            log(f"reusing {d} ({expected['events']:,} events)")
            return d, expected
    log(f"generating {events:,} events in {files} files under {d} ...")
    sys.path.insert(0, str(HERE))
    try:
        from gen_trace import generate
    finally:
        sys.path.pop(0)
    if d.exists():
        for old in d.iterdir():
            if old.is_file():
                old.unlink()
    t0 = time.perf_counter()
    expected = generate(d, events, files, seed=SEED)
    params_path.write_text(json.dumps(params, indent=2))
    log(f"generated in {time.perf_counter() - t0:.1f} s: {json.dumps(expected)}")
    return d, expected


# --------------------------------------------------------------------------------------
# child processes (one measurement each)


def _peak_rss_kib() -> int:
    try:
        with open("/proc/self/status", encoding="ascii") as fh:
            for line in fh:
                if line.startswith("VmHWM:"):
                    return int(line.split()[1])
    except OSError:
        pass
    import resource

    rss = resource.getrusage(resource.RUSAGE_SELF).ru_maxrss
    return rss // 1024 if sys.platform == "darwin" else rss  # macOS reports bytes


def _child_raw(data: Path) -> dict[str, Any]:
    import duckdb

    con = duckdb.connect(config={"threads": RAW_THREADS})
    con.execute("SET enable_progress_bar = false")
    glob = str(data / "*.pfw.gz").replace("'", "''")
    t0 = time.perf_counter()
    row = con.execute(
        f"SELECT count(*) FROM read_json('{glob}', format='newline_delimited', ignore_errors=true)"
    ).fetchone()
    wall = time.perf_counter() - t0
    con.close()
    return {"wall_s": wall, "rows": int(row[0]) if row else 0}


def _child_analyze(data: Path) -> dict[str, Any]:
    from dftune.tools.trace import analyze

    t0 = time.perf_counter()
    result = analyze([data]).to_json_dict()
    wall = time.perf_counter() - t0
    return {
        "wall_s": wall,
        "events": result["events"],
        "skipped_lines": result["skipped_lines"],
        "files": result["files"],
        "read_count": result["read"]["count"],
        "read_bytes": result["read"]["bytes"],
        "write_count": result["write"]["count"],
        "write_bytes": result["write"]["bytes"],
    }


def _child_main(kind: str, data: Path) -> None:
    import resource

    out = _child_raw(data) if kind == "raw" else _child_analyze(data)
    out["peak_rss_kib"] = _peak_rss_kib()
    # Worker processes the child started and reaped (the engine's local process pool).
    workers = resource.getrusage(resource.RUSAGE_CHILDREN).ru_maxrss
    out["worker_peak_rss_kib"] = workers // 1024 if sys.platform == "darwin" else workers
    sys.stdout.write(json.dumps(out) + "\n")


# --------------------------------------------------------------------------------------
# process-tree memory sampling (the engine may fan out to worker processes)

_PAGE_KIB = (os.sysconf("SC_PAGE_SIZE") // 1024) if hasattr(os, "sysconf") else 4


def _tree(root: int) -> list[int]:
    """``root`` and all its descendants (from /proc; just ``root`` where /proc is missing)."""
    parents: dict[int, list[int]] = {}
    try:
        entries = os.listdir("/proc")
    except OSError:
        return [root]
    for name in entries:
        if not name.isdigit():
            continue
        try:
            with open(f"/proc/{name}/stat", encoding="ascii", errors="replace") as fh:
                stat = fh.read()
        except OSError:
            continue
        ppid = int(stat[stat.rfind(")") + 2 :].split()[1])
        parents.setdefault(ppid, []).append(int(name))
    out, todo = [], [root]
    while todo:
        pid = todo.pop()
        out.append(pid)
        todo.extend(parents.get(pid, []))
    return out


def _mem_kib(pid: int) -> tuple[int, int]:
    """(RSS, PSS) of one process in KiB; PSS splits shared pages between the processes."""
    rss = pss = 0
    try:
        with open(f"/proc/{pid}/statm", encoding="ascii") as fh:
            rss = int(fh.read().split()[1]) * _PAGE_KIB
        with open(f"/proc/{pid}/smaps_rollup", encoding="ascii") as fh:
            for line in fh:
                if line.startswith("Pss:"):
                    pss = int(line.split()[1])
                    break
    except (OSError, ValueError, IndexError):
        pass
    return rss, pss


class TreeSampler(threading.Thread):
    """Sample the summed RSS/PSS of a process tree every ``interval`` seconds."""

    def __init__(self, pid: int, interval: float = 0.05) -> None:
        super().__init__(daemon=True)
        self.pid, self.interval = pid, interval
        self.peak_rss_kib = self.peak_pss_kib = self.max_procs = 0
        self.done = threading.Event()

    def run(self) -> None:
        while not self.done.is_set():
            pids = _tree(self.pid)
            mems = [_mem_kib(p) for p in pids]
            self.peak_rss_kib = max(self.peak_rss_kib, sum(m[0] for m in mems))
            self.peak_pss_kib = max(self.peak_pss_kib, sum(m[1] for m in mems))
            self.max_procs = max(self.max_procs, sum(1 for m in mems if m[0]))
            self.done.wait(self.interval)


def run_child(kind: str, data: Path) -> dict[str, Any]:
    argv = [sys.executable, str(Path(__file__).resolve()), "--child", kind, str(data)]
    t0 = time.perf_counter()
    proc = subprocess.Popen(argv, stdout=subprocess.PIPE, stderr=subprocess.PIPE, text=True)
    sampler = TreeSampler(proc.pid)
    sampler.start()
    stdout, stderr = proc.communicate()
    sampler.done.set()
    sampler.join()
    process_s = time.perf_counter() - t0
    if proc.returncode != 0:
        tail = (stderr.strip().splitlines() or ["(no stderr)"])[-1]
        raise SystemExit(f"bench: {kind} child failed with exit code {proc.returncode}: {tail}")
    out: dict[str, Any] = json.loads(stdout.strip().splitlines()[-1])
    out["process_s"] = process_s
    out["tree_peak_rss_kib"] = max(sampler.peak_rss_kib, out["peak_rss_kib"])
    out["tree_peak_pss_kib"] = sampler.peak_pss_kib
    out["max_processes"] = sampler.max_procs
    return out


# --------------------------------------------------------------------------------------
# driver


def _best(runs: list[dict[str, Any]]) -> dict[str, Any]:
    return min(runs, key=lambda r: r["wall_s"])


def check_counts(run: dict[str, Any], expected: dict[str, int]) -> list[str]:
    """Differences between what analyze counted and what the generator wrote."""
    problems = []
    for key in ("events", "read_count", "read_bytes", "write_count", "write_bytes"):
        if run.get(key) != expected.get(key):
            problems.append(f"{key}: analyze {run.get(key)!r} != expected {expected.get(key)!r}")
    if run.get("skipped_lines"):
        problems.append(f"skipped_lines: {run['skipped_lines']} (the generated trace has no bad line)")
    return problems


def log(msg: str) -> None:
    print(f"bench: {msg}", file=sys.stderr, flush=True)


def parse_args(doc: str | None, argv: list[str] | None) -> argparse.Namespace:
    """The options the trace benchmarks share (bench_analyze, bench_diagnose)."""
    ap = argparse.ArgumentParser(description=doc, formatter_class=argparse.RawDescriptionHelpFormatter)
    ap.add_argument("--events", type=int, default=5_000_000, help="complete events to generate (default 5M)")
    ap.add_argument("--files", type=int, default=4, help="trace files (processes) (default 4)")
    ap.add_argument(
        "--out", type=Path, default=Path("bench-data"), help="cache folder (default ./bench-data/)"
    )
    ap.add_argument(
        "--repeat", type=int, default=3, help="runs per measurement, best is reported (default 3)"
    )
    ap.add_argument("--json", action="store_true", help="print one JSON document on stdout")
    ap.add_argument("--check", action="store_true", help="exit 1 when a target is missed")
    ap.add_argument("--child", nargs=2, metavar=("KIND", "DIR"), help=argparse.SUPPRESS)
    return ap.parse_args(argv)


def dataset_under_load(args: argparse.Namespace) -> tuple[Path, dict[str, int], float]:
    """The generated trace (made once, cached) and the 1-minute load average, with a warning
    when the machine is busy."""
    data, expected = ensure_dataset(args.out.resolve(), args.events, args.files, log)
    load_before = os.getloadavg()[0]
    if load_before > 0.5 * (os.cpu_count() or 1):
        log(
            f"warning: 1-minute load average is {load_before:.1f} "
            f"on {os.cpu_count()} CPUs; timings will be noisy"
        )
    return data, expected, load_before


def main(argv: list[str] | None = None) -> int:
    args = parse_args(__doc__, argv)

    if args.child:
        _child_main(args.child[0], Path(args.child[1]))
        return 0

    data, expected, load_before = dataset_under_load(args)
    raw_runs, ana_runs = [], []
    # Alternate raw and analyze so that both see the same (shared, changing) machine load.
    for i in range(1, args.repeat + 1):
        raw_runs.append(run_child("raw", data))
        log(f"raw scan  run {i}/{args.repeat}: {raw_runs[-1]['wall_s']:.2f} s")
        run = run_child("analyze", data)
        problems = check_counts(run, expected)
        if problems:
            print(
                "bench: analyze result does not match expected.json: " + "; ".join(problems), file=sys.stderr
            )
            return 2
        ana_runs.append(run)
        log(
            f"analyze   run {i}/{args.repeat}: {run['wall_s']:.2f} s, "
            f"peak RSS {run['tree_peak_rss_kib'] / 1024:.0f} MiB "
            f"(process tree, {run['max_processes']} processes)"
        )

    raw, ana = _best(raw_runs), _best(ana_runs)
    events = int(expected["events"])
    ratio = ana["wall_s"] / raw["wall_s"] if raw["wall_s"] else float("inf")
    peak_mib = max(r["tree_peak_rss_kib"] for r in ana_runs) / 1024
    report: dict[str, Any] = {
        "schema": "dftune.bench.analyze/1",
        "date": dt.datetime.now(dt.UTC).isoformat(timespec="seconds"),
        **machine_and_data(load_before, data, args.files, events),
        "expected": expected,
        "repeat": args.repeat,
        "raw_scan": {
            "sql": "SELECT count(*) FROM read_json('<dir>/*.pfw.gz', "
            "format='newline_delimited', ignore_errors=true)",
            "threads": RAW_THREADS,
            "rows": raw["rows"],
            "best_wall_s": raw["wall_s"],
            "events_per_s": events / raw["wall_s"],
            "peak_rss_mib": max(r["tree_peak_rss_kib"] for r in raw_runs) / 1024,
            "runs_wall_s": [r["wall_s"] for r in raw_runs],
        },
        "analyze": {
            "events": ana["events"],
            "best_wall_s": ana["wall_s"],
            "events_per_s": events / ana["wall_s"],
            "peak_rss_mib": peak_mib,
            "runs_wall_s": [r["wall_s"] for r in ana_runs],
            "runs_peak_rss_mib": [r["tree_peak_rss_kib"] / 1024 for r in ana_runs],
            "peak_pss_mib": max(r["tree_peak_pss_kib"] for r in ana_runs) / 1024,
            "main_process_peak_rss_mib": max(r["peak_rss_kib"] for r in ana_runs) / 1024,
            "worker_process_peak_rss_mib": max(r["worker_peak_rss_kib"] for r in ana_runs) / 1024,
            "max_processes": max(r["max_processes"] for r in ana_runs),
            "best_process_s": ana["process_s"],
            "counts_match_expected": True,
        },
        "ratio_analyze_over_raw": ratio,
        "targets": {
            "ratio_max": TARGET_RATIO,
            "ratio_ok": ratio <= TARGET_RATIO,
            "peak_rss_mib_max": TARGET_RSS_MIB,
            "peak_rss_ok": peak_mib < TARGET_RSS_MIB,
        },
    }
    if args.json:
        print(json.dumps(report, indent=2))
    else:
        print(render(report))
    ok = report["targets"]["ratio_ok"] and report["targets"]["peak_rss_ok"]
    return 1 if args.check and not ok else 0


def machine_and_data(load_before: float, data: Path, files: int, events: int) -> dict[str, Any]:
    """The report's ``host`` and ``data`` sections (the sibling benchmarks share them)."""
    return {
        "host": {
            "cpus": os.cpu_count(),
            "python": platform.python_version(),
            "platform": platform.platform(),
            "loadavg_1m_before": load_before,
            "loadavg_1m_after": os.getloadavg()[0],
        },
        "data": {
            "dir": str(data),
            "files": files,
            "events": events,
            "bytes_on_disk": sum(p.stat().st_size for p in data.glob("*.pfw.gz")),
        },
    }


def render(r: dict[str, Any]) -> str:
    raw, ana, t = r["raw_scan"], r["analyze"], r["targets"]
    rows = [
        ("", "events", "wall s", "events/s", "peak RSS MiB", "vs raw scan"),
        (
            f"raw scan (DuckDB count(*), {raw['threads']} threads)",
            f"{r['data']['events']:,}",
            f"{raw['best_wall_s']:.2f}",
            f"{raw['events_per_s']:,.0f}",
            f"{raw['peak_rss_mib']:.0f}",
            "1.00",
        ),
        (
            "dftune analyze",
            f"{ana['events']:,}",
            f"{ana['best_wall_s']:.2f}",
            f"{ana['events_per_s']:,.0f}",
            f"{ana['peak_rss_mib']:.0f}",
            f"{r['ratio_analyze_over_raw']:.2f}",
        ),
    ]
    widths = [max(len(row[i]) for row in rows) for i in range(len(rows[0]))]
    lines = [
        f"{r['data']['events']:,} events in {r['data']['files']} files "
        f"({r['data']['bytes_on_disk'] / 2**20:.0f} MiB gz), "
        f"best of {r['repeat']}, {r['host']['cpus']} CPUs, "
        f"load {r['host']['loadavg_1m_before']:.1f} before / {r['host']['loadavg_1m_after']:.1f} after",
    ]
    for row in rows:
        lines.append(
            "  ".join(
                c.ljust(w) if i == 0 else c.rjust(w) for i, (c, w) in enumerate(zip(row, widths, strict=True))
            )
        )
    mark = {True: "ok", False: "MISSED"}
    lines.append(
        f"targets: analyze/raw <= {t['ratio_max']}: {r['ratio_analyze_over_raw']:.2f} {mark[t['ratio_ok']]}; "
        f"peak RSS < {t['peak_rss_mib_max']:.0f} MiB: {ana['peak_rss_mib']:.0f} {mark[t['peak_rss_ok']]}"
    )
    lines.append(
        f"analyze memory: tree PSS {ana['peak_pss_mib']:.0f} MiB, "
        f"main process {ana['main_process_peak_rss_mib']:.0f} "
        f"MiB, largest worker {ana['worker_process_peak_rss_mib']:.0f} "
        f"MiB, up to {ana['max_processes']} processes"
    )
    lines.append("counts: events, read/write counts and bytes equal expected.json")
    return "\n".join(lines)


if __name__ == "__main__":
    sys.exit(main())
