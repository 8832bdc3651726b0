"""dftune's diagnosis next to Drishti's on the same Darshan logs (peer comparison).

    python benchmarks/bench_darshan_drishti.py [--markdown]

Runs the real Drishti (PyPI drishti-io, its ``drishti`` command with ``--csv``) on every log
PyDarshan ships and on the darshan-logs collection in tests/data, and ``dftune diagnose`` on the
same logs.  For every issue Drishti raises (HIGH or WARN level), the table says whether dftune
names the same problem (one of the rule ids below fired) or why not.  Drishti's INFO/OK
messages (read/write intensive, "mostly sequential", "uses collective I/O") are not issues.
"""

from __future__ import annotations

import argparse
import csv
import subprocess
import sys
import tempfile
from pathlib import Path
from typing import Any

import darshan

from dftune.tools.diagnose.engine import diagnose_analysis
from dftune.tools.trace import Analysis, analyze

ROOT = Path(__file__).resolve().parent.parent
SHIPPED = [
    *sorted((Path(darshan.__file__).parent / "examples" / "example_logs").glob("*.darshan")),
    *sorted((Path(darshan.__file__).parent / "tests" / "input").glob("*.darshan")),
]
COLLECTION = sorted(
    p for p in (ROOT / "tests" / "data" / "darshan_logs").rglob("*.darshan") if "dlio" not in str(p)
)
#: Drishti issue code -> (dftune rules that name the same problem, why dftune does not when none fires)
SAME: dict[str, tuple[tuple[str, ...], str]] = {
    "S01": (("DS01",), "same threshold (STDIO > 10% of bytes)"),
    "P05": (("DP05", "DA04"), "same thresholds; dftune does not count exactly-1-MiB reads as small"),
    "P06": (("DP06", "DA05"), "same thresholds; dftune does not count exactly-1-MiB writes as small"),
    "P07": (("DD07",), "same threshold (misaligned memory > 10%)"),
    "P08": (
        ("DP07",),
        "dftune also requires more than 1,000 misaligned requests (Drishti has no absolute floor): "
        "a few dozen misaligned requests are not a bottleneck",
    ),
    "P09": (
        (),
        "not used by dftune: Drishti compares the largest offset of any one file with the bytes read from "
        "all files, which is no evidence of re-reading",
    ),
    "P10": (
        (),
        "not used by dftune: Drishti compares the largest offset of any one file with the bytes written to "
        "all files, which is no evidence of rewriting",
    ),
    "P11": (
        ("DP11", "W02"),
        "dftune leaves each rank's first access to a file unclassified (Drishti counts it "
        "as random when it starts at offset 0)",
    ),
    "P13": (("DP13", "W02"), "dftune leaves each rank's first access to a file unclassified"),
    "P15": (("DD15", "DA04"), "same thresholds"),
    "P16": (("DD16", "DA05"), "same thresholds"),
    "P17": (
        ("DP17", "DD17"),
        "dftune checks each rank's own records and the shared records' summed metadata time "
        "with the same 30 s threshold",
    ),
    "P18": (("DD18", "DP18"), "same threshold"),
    "P19": (("DD19", "DA02"), "same threshold"),
    "P21": (("DD21", "DP21"), "same threshold"),
    "P22": (("DD22", "DP21"), "same threshold"),
    "M01": (
        (),
        "advice, not a measured problem: a job without MPI-IO is not slow for that reason; dftune names the "
        "problems MPI-IO would address (shared-file small I/O, stragglers) when they occur",
    ),
    "M02": (("DD02",), "same thresholds"),
    "M03": (("DD03",), "same thresholds"),
    "M06": ((), "advice Drishti gives whenever no non-blocking MPI-IO call is seen: not a measured problem"),
    "M07": ((), "advice Drishti gives whenever no non-blocking MPI-IO call is seen: not a measured problem"),
    "M08": ((), "needs the node count, which Drishti asks Slurm for (sacct)"),
    "M09": ((), "needs the node count, which Drishti asks Slurm for (sacct)"),
}
#: Darshan-only problems dftune names that Drishti has no trigger for (resources/rules/darshan_*.toml)
DFTUNE_ONLY = {"DA01", "DA02", "DA03", "DA04", "DA05", "DL01"}
NOT_ISSUES = {"P01", "P02", "P03", "P04", "P12", "P14", "M04", "M05", "M10"}


def drishti(log: Path, out: Path) -> set[str] | None:
    exe = Path(sys.executable).with_name("drishti")
    proc = subprocess.run(
        [str(exe), "--csv", "--export_dir", str(out), str(log)],
        capture_output=True,
        text=True,
        timeout=600,
        check=False,
    )
    path = out / (log.name.replace(".darshan", "") + ".csv")
    if proc.returncode != 0 or not path.is_file():
        return None
    with path.open() as fh:
        rows = list(csv.reader(fh))
    return {code for code, value in zip(rows[0], rows[1], strict=True) if value == "True" and code != "JOB"}


def why_not(code: str, why: str, a: Analysis) -> str:
    """The static reason, made specific where the log's numbers show the cause."""
    d = a.darshan
    if code in ("P05", "P06", "P15", "P16") and d is not None and d.exact_1mib_ops:
        return (
            f"{d.exact_1mib_ops:,} operations are exactly 1 MiB: "
            "Darshan's 100K-1M bin includes 1 MiB, so Drishti "
            "counts them as small; dftune (small = < 1 MiB) takes them out with the POSIX_ACCESS* counters"
        )
    if code == "P08" and d is not None:
        return f"{why} (here {d.file_not_aligned:,})"
    return why


def compare(log: Path, tmp: Path) -> dict[str, Any]:
    codes = drishti(log, tmp)
    analysis = analyze([log], views=["file", "proc"])
    fired = {b.id for b in diagnose_analysis(analysis).bottlenecks}
    rows = []
    for code in sorted((codes or set()) - NOT_ISSUES):
        ours, why = SAME.get(code, ((), "no dftune counterpart"))
        hit = sorted(set(ours) & fired)
        why = why_not(code, why, analysis)
        rows.append({"code": code, "dftune": hit, "same": bool(hit), "why": "" if hit else why})
    return {"log": log.name, "drishti_ok": codes is not None, "issues": rows, "dftune": sorted(fired)}


def _full(results: list[dict[str, Any]]) -> None:
    print("| log | Drishti issue | dftune | why not |")
    print("|---|---|---|---|")
    for r in results:
        if not r["drishti_ok"]:
            print(f"| {r['log'][:40]} | (Drishti failed on this log) | {', '.join(r['dftune']) or '-'} | |")
            continue
        if not r["issues"]:
            print(f"| {r['log'][:40]} | none | {', '.join(r['dftune']) or '-'} | |")
        for i in r["issues"]:
            print(f"| {r['log'][:40]} | {i['code']} | {', '.join(i['dftune']) or '-'} | {i['why']} |")


def _condensed(results: list[dict[str, Any]]) -> None:
    """One row per log: the issues dftune names (Drishti code -> dftune rule) and those it does not."""
    reasons: dict[str, int] = {}
    print(
        "| log | Drishti issue -> dftune rule | Drishti issues "
        "dftune does not raise (reason) | only dftune names |"
    )
    print("|---|---|---|---|")
    for r in results:
        if not r["drishti_ok"]:
            print(f"| {r['log'][:44]} | Drishti fails on this log (traceback) | | {', '.join(r['dftune'])} |")
            continue
        only = ", ".join(x for x in r["dftune"] if x in DFTUNE_ONLY) or "-"
        named = ", ".join(f"{i['code']}->{'/'.join(i['dftune'])}" for i in r["issues"] if i["same"]) or "-"
        other = []
        for i in r["issues"]:
            if not i["same"]:
                key = reasons.setdefault(i["why"], len(reasons) + 1)
                other.append(f"{i['code']} ({key})")
        print(f"| {r['log'][:44]} | {named} | {', '.join(other) or '-'} | {only} |")
    print()
    for why, key in reasons.items():
        print(f"{key}. {why}")


def main() -> None:
    ap = argparse.ArgumentParser()
    ap.add_argument("--markdown", action="store_true", help="one row per log, reasons as footnotes")
    args = ap.parse_args()
    seen: set[str] = set()
    results = []
    with tempfile.TemporaryDirectory() as tmp:
        for log in SHIPPED + COLLECTION:
            if log.name in seen:
                continue
            seen.add(log.name)
            results.append(compare(log, Path(tmp)))
    (_condensed if args.markdown else _full)(results)
    issues = [i for r in results for i in r["issues"]]
    countable = [i for i in issues if SAME.get(i["code"], ((), ""))[0]]
    print(
        f"\nDrishti raised {len(issues)} issues (HIGH/WARN) on "
        f"{len(results)} logs; {len(countable)} have a dftune "
        f"counterpart rule and dftune names {sum(i['same'] for i in countable)} of those; every other one is "
        "explained above."
    )


if __name__ == "__main__":
    main()
