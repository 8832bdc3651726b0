"""How fast dftune analyzes Darshan logs: real logs PyDarshan ships, and large generated ones.

    python benchmarks/bench_darshan.py [--ranks 512] [--files 1000] [--keep DIR]

For each log: ``dftune.tools.trace.analyze`` (summary; then every view), ``diagnose``, and for
reference PyDarshan's own ``DarshanReport(read_all=True)`` plus ``records["POSIX"].to_df()``
(what darshan-job-summary and Drishti start from).  The large log is written by
benchmarks/gen_darshan_log.py with libdarshan-util's writer (see its docstring for what it is).
"""

from __future__ import annotations

import argparse
import sys
import tempfile
import time
import warnings
from pathlib import Path

import darshan

from dftune.tools.diagnose.engine import diagnose
from dftune.tools.trace import analyze

sys.path.insert(0, str(Path(__file__).resolve().parent))
from gen_darshan_log import build

SHIPPED = Path(darshan.__file__).parent / "examples" / "example_logs"
COLLECTION = Path(__file__).resolve().parent.parent / "tests" / "data" / "darshan_logs"


def timed(fn: object, *args: object, **kw: object) -> tuple[float, object]:
    t = time.perf_counter()
    out = fn(*args, **kw)  # type: ignore[operator]
    return time.perf_counter() - t, out


def pydarshan(path: Path) -> float:
    with warnings.catch_warnings():
        warnings.simplefilter("ignore")
        t = time.perf_counter()
        # closed at once: a report left to the garbage collector can close inside cffi's type
        # parser, which holds the lock closing needs (tests/darshan_logs.py), and hang the process
        with darshan.DarshanReport(str(path), read_all=True) as r:
            if "POSIX" in r.records and len(r.records["POSIX"]):
                r.records["POSIX"].to_df()
        return time.perf_counter() - t


def main() -> None:
    ap = argparse.ArgumentParser()
    ap.add_argument("--ranks", type=int, default=512)
    ap.add_argument("--files", type=int, default=1000, help="files per rank in the generated log")
    ap.add_argument("--keep", type=Path, default=None, help="write the generated log here")
    args = ap.parse_args()
    tmp = Path(args.keep or tempfile.mkdtemp())
    tmp.mkdir(parents=True, exist_ok=True)
    big = tmp / f"generated-{args.ranks}x{args.files}.darshan"
    build(big, args.ranks, args.files)
    logs = [
        SHIPPED / "sample-badost.darshan",
        COLLECTION / "imbalanced_io" / "imbalanced-io.darshan",
        COLLECTION / "e3sm_io_heatmaps_and_dxt" / "e3sm_io_heatmap_only.darshan",
        COLLECTION / "dlio_logs",
        big,
    ]
    print(
        "| log | processes | files | records | analyze (s) | all "
        "views (s) | diagnose (s) | PyDarshan read+to_df (s) |"
    )
    print("|---|---|---|---|---|---|---|---|")
    for log in logs:
        t1, a = timed(analyze, [log])
        t2, _ = timed(analyze, [log], views=["file", "proc", "time", "layer"])
        t3, _ = timed(diagnose, [log])
        assert a.darshan is not None  # type: ignore[attr-defined]
        recs = sum(m.records for m in a.darshan.modules.values())  # type: ignore[attr-defined]
        ref = "-" if log.is_dir() else f"{pydarshan(log):.2f}"
        note = " (all records unnamed: PyDarshan drops them)" if log == big else ""
        print(
            f"| {log.name} | {a.processes:,} | {a.files_accessed:,} "
            f"| {recs:,} | {t1:.2f} | {t2:.2f} | {t3:.2f} | "  # type: ignore[attr-defined]
            f"{ref}{note} |"
        )


if __name__ == "__main__":
    main()
