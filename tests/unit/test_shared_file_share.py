"""A row rule's share of I/O time never exceeds 100%: files accessed concurrently by two
processes, with fsync and system-file calls, still split the job's I/O time (Drishti's
shared-file insight, dftune rule F02)."""

from __future__ import annotations

import re
from pathlib import Path

from dftune.tools.diagnose.engine import row_metrics
from dftune.tools.diagnose.metrics import summary_metrics
from dftune.tools.diagnose.rules import evaluate, load_rulesets
from dftune.tools.diagnose.scope import data_summary
from dftune.tools.trace import analyze
from tests.tracegen import Proc, write_trace


def _concurrent_trace(folder: Path) -> Path:
    procs = []
    for pid in (101, 102):
        p = Proc(pid=pid)  # both start at the same instant: their calls overlap in time
        for path in ("/data/a.bin", "/data/b.bin"):
            p.open(path)
        for i in range(20):
            p.read("/data/a.bin", 4096, offset=i * 4096, dur=400)
            p.write("/data/b.bin", 4096, offset=i * 4096, dur=400)
        p.event("fsync", dur=30_000, fhash=p._fhash("/data/b.bin"), ret=0)
        p.open("/proc/net/route")
        p.read("/proc/net/route", 512, dur=20_000)
        procs.append(p)
    return write_trace(folder, procs)


def test_shared_files_hold_at_most_all_io_time(tmp_path: Path) -> None:
    analysis = analyze([_concurrent_trace(tmp_path / "t")], views=("file", "proc", "time"))
    everything = summary_metrics(analysis)
    summary = data_summary(everything, analysis)  # the program's data I/O, as the diagnosis judges it
    rows = row_metrics(analysis, summary, everything)
    assert sum(r["io_time_share"] for r in rows["file"]) <= 1.0 + 1e-9
    findings = evaluate(load_rulesets(), summary, rows)
    shared = [f for f in findings if f.id == "F02"]
    assert shared, [f.id for f in findings]
    assert 0 < shared[0].severity_value <= 1.0, shared[0].evidence
    for f in findings:
        for pct in re.findall(r"(\d+)% of all I/O time", f.evidence):
            assert int(pct) <= 100, f.evidence
