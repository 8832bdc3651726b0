"""``make demo``: a full offline tuning run on the bundled example workload, ending in a report.

installer -> diagnoser -> literature -> optimizer -> verifier, with the guards in front of
every knowledge-base record, the rules reasoner (no LLM, no network) and the real dftracer.
What it prints after the install fits one 80x40 screen: a line per milestone (the replicates
and pairs count in place on a terminal), then the run at a glance and the next commands.
"""

from __future__ import annotations

import sys
from importlib import resources

from rich.console import Console

from dftune.core.terminal import text
from dftune.graphs.runs import RunError, start_run
from dftune.tools.report.console import RunRenderer, path_line
from dftune.tools.report.progress_console import ProgressPrinter
from dftune.tools.runner.bench import BenchError
from dftune.tools.runner.spec import SpecError
from dftune.tools.session.workspace import WorkspaceError

PLAN = (
    "[bold]dftune demo[/bold]: tune the bundled example [bold]small_reads[/bold] offline (2-5 min)\n"
    "baseline -> diagnosis -> cited proposals -> measured changes -> report"
)
#: the nodes whose lines stay on screen; the others count in place (on a terminal) or are left out
MILESTONES = frozenset({"installer", "diagnoser", "guards", "kb"})


def main() -> int:
    from dftune.core.terminal import trim_output

    trim_output()  # as the dftune command: no printed line ends in the spaces Rich pads with
    console = Console()
    err = Console(stderr=True)
    console.print(PLAN)
    spec = resources.files("dftune.resources") / "workloads" / "small_reads" / "workload.toml"
    progress = ProgressPrinter(err, fit=True, keep_transient=False, milestones=MILESTONES)
    try:
        result = start_run(str(spec), mode="autonomous", progress=progress)
    except (RunError, SpecError, BenchError, WorkspaceError) as exc:
        progress.clear()
        console.print(text(f"dftune demo: {exc}", "red"))
        return 2
    progress.clear()
    html = None
    if result.status == "completed":
        from dftune.tools.report.writer import write_reports

        html = write_reports(result.run_id, html=True).get("html")
    renderer = RunRenderer(console)
    renderer.render(result.model_copy(update={"report": None}), table=False, next_steps=False)
    if result.report:
        path_line(console, "report", result.report)
    if html:
        from dftune.tools.report.plots import plots_unavailable

        why = plots_unavailable()
        path_line(console, "HTML" if why else "with plots", html)
        if why:
            err.print(text(why))
    renderer.render_next(result)
    return 0 if result.status == "completed" else 1


if __name__ == "__main__":
    sys.exit(main())
