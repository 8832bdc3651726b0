"""``make demo``: what a user sees first.

The full offline tuning run (installer -> diagnoser -> literature -> optimizer ->
verifier, ending in a report) lands with the agent graph.  Until then the demo runs the
parts that exist for real: it traces the bundled example workload with the real
dftracer and analyzes the trace.
"""

from __future__ import annotations

import os
import shutil
import subprocess
import sys
import time
from importlib import resources

from rich.console import Console

from dftune.tools.diagnose.engine import diagnose_analysis
from dftune.tools.diagnose.render import DiagnosisRenderer
from dftune.tools.home import dftune_home
from dftune.tools.trace import analyze
from dftune.tools.trace.render import AnalysisRenderer
from dftune.tools.trace.tracer import TracerUnavailable, trace_env

PLAN = """[bold]dftune demo[/bold]
The full run will: check dftracer (installer) -> trace a baseline and name the bottleneck (diagnoser)
-> find cited fixes (literature) -> apply one change at a time (optimizer) -> measure and guard it
(verifier) -> record what worked -> write a report.
[dim]Available now: tracing with the real dftracer, exact trace analysis, and diagnosis.[/dim]
"""


def main() -> int:
    console = Console()
    console.print(PLAN)
    workload = resources.files("dftune.resources") / "workloads" / "small_reads" / "reader.py"
    work = dftune_home() / "demo"
    traces = work / "traces"
    shutil.rmtree(traces, ignore_errors=True)
    traces.mkdir(parents=True)
    data = work / "data"
    try:
        env = {**os.environ, **trace_env(traces / "small_reads", data_dir="all")}
    except TracerUnavailable as exc:
        console.print(f"[red]dftune demo: {exc}[/red]")
        return 2
    cmd = [sys.executable, str(workload), "--data", str(data), "--files", "200", "--epochs", "2"]
    console.print(f"[bold]1.[/bold] tracing the example workload: {' '.join(cmd[1:])}")
    start = time.perf_counter()
    proc = subprocess.run(cmd, env=env, capture_output=True, text=True, timeout=300, check=False)
    if proc.returncode != 0:
        console.print(f"[red]workload failed ({proc.returncode}): {proc.stderr.strip()[-500:]}[/red]")
        return 1
    console.print(f"   done in {time.perf_counter() - start:.1f} s; traces in {traces}")
    console.print("[bold]2.[/bold] analyzing the trace")
    result = analyze([traces], views=["file", "proc"])
    AnalysisRenderer(console).render(result, ["summary"])
    console.print("[bold]3.[/bold] diagnosing: rules, metric, whether tuning pays off, candidate fixes")
    DiagnosisRenderer(console).render(diagnose_analysis(result, data_dirs=[data]))
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
