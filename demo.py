"""``make demo``: what a user sees first.

The full offline tuning run (installer -> diagnoser -> literature -> optimizer ->
verifier, ending in a report) lands with the agent graph.  Until then the demo runs the
parts that exist for real: it traces the bundled example workload with the real
dftracer and analyzes the trace.
"""

from __future__ import annotations

import shutil
from importlib import resources

from rich.console import Console

from dftune.tools.diagnose.engine import diagnose_analysis
from dftune.tools.diagnose.render import DiagnosisRenderer
from dftune.tools.home import dftune_home
from dftune.tools.runner.bench import BenchError, bench
from dftune.tools.runner.spec import SpecError, load_spec
from dftune.tools.trace import analyze
from dftune.tools.trace.render import AnalysisRenderer

PLAN = """[bold]dftune demo[/bold]
The full run will: check dftracer (installer) -> trace a baseline and name the bottleneck (diagnoser)
-> find cited fixes (literature) -> apply one change at a time (optimizer) -> measure and guard it
(verifier) -> record what worked -> write a report.
[dim]Available now: benchmarking with the real dftracer, exact trace analysis, diagnosis, and the guards.[/dim]
"""


def main() -> int:
    console = Console()
    console.print(PLAN)
    toml = resources.files("dftune.resources") / "workloads" / "small_reads" / "workload.toml"
    spec = load_spec(str(toml))
    work = dftune_home() / "demo"
    shutil.rmtree(work, ignore_errors=True)
    console.print(f"[bold]1.[/bold] benchmarking [bold]{spec.name}[/bold]: {spec.description}")
    try:
        traced = bench(spec, replicates=3, trace=True, workdir=work / "traced")
        plain = bench(spec, replicates=3, trace=False, workdir=work / "untraced")
    except (BenchError, SpecError) as exc:
        console.print(f"[red]dftune demo: {exc}[/red]")
        return 2
    for label, r in (("traced", traced), ("untraced", plain)):
        ci = f" (95% CI {r.ci95[0]:.4f}-{r.ci95[1]:.4f})" if r.ci95 else ""
        console.print(f"   {label}: {r.ok}/{len(r.replicates)} ok, median epoch time {r.median:.4f} s{ci}")
    console.print(f"   {traced.notes[0]}")
    trace_dir = traced.replicates[0].trace_dir
    console.print(f"[bold]2.[/bold] analyzing the first traced replicate ({trace_dir})")
    result = analyze([trace_dir], views=["file", "proc"])
    AnalysisRenderer(console).render(result, ["summary"])
    console.print("[bold]3.[/bold] diagnosing: rules, metric, whether tuning pays off, candidate fixes")
    data_dir = spec.placeholder_values(traced.settings, workdir=work / "traced")["data_dir"]
    DiagnosisRenderer(console).render(diagnose_analysis(result, data_dirs=[data_dir]))
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
