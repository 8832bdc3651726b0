"""``make demo``: a full offline tuning run on the bundled example workload, ending in a report.

installer -> diagnoser -> literature -> optimizer -> verifier, with the guards in front of
every knowledge-base record, the rules reasoner (no LLM, no network) and the real dftracer.
"""

from __future__ import annotations

import sys
from importlib import resources

from rich.console import Console

from dftune.core.terminal import text
from dftune.graphs.runs import RunError, start_run
from dftune.tools.report.console import RunRenderer
from dftune.tools.runner.bench import BenchError
from dftune.tools.runner.spec import SpecError
from dftune.tools.session.workspace import WorkspaceError

PLAN = """[bold]dftune demo[/bold]: a full offline tuning run of the bundled example [bold]small_reads[/bold]
installer (is dftracer usable, what can it not see) -> diagnoser (traced baseline, bottlenecks)
-> literature (a verified citation per candidate) -> optimizer (proposal table, one change at a time)
-> verifier (same replicates, statistics) -> guards -> knowledge base -> report.
"""


def main() -> int:
    console = Console()
    err = Console(stderr=True)
    console.print(PLAN)
    spec = resources.files("dftune.resources") / "workloads" / "small_reads" / "workload.toml"
    try:
        result = start_run(
            str(spec),
            mode="autonomous",
            progress=lambda node, msg: err.print(text(f"{node:>10}", "dim") + text(f" {msg}")),
        )
    except (RunError, SpecError, BenchError, WorkspaceError) as exc:
        console.print(text(f"dftune demo: {exc}", "red"))
        return 2
    RunRenderer(console).render(result)
    if result["status"] == "completed":
        from dftune.tools.report.writer import write_reports

        paths = write_reports(result["run_id"], html=True)
        console.print(
            text("HTML report (plots embedded): ") + text(paths.get("html"), "bold"), soft_wrap=True
        )
    # each command on a line of its own, never folded: it is meant to be copied
    console.print(text("\nEvery saved graph state:"))
    console.print(text(f"  dftune history {result['run_id']}", "bold"), soft_wrap=True)
    console.print(text("The knowledge base:"))
    console.print(text("  dftune kb lookup --json", "bold"), soft_wrap=True)
    return 0 if result["status"] == "completed" else 1


if __name__ == "__main__":
    sys.exit(main())
