"""What nodes receive besides the state: the run-time context (never checkpointed).

Objects live here, not in the state: the workload spec (read once per run, from the run's
archived copy), the reasoner, the catalog, where the KB is, and how to report progress.
``dftune resume`` rebuilds the context from the state's inputs.
"""

from __future__ import annotations

from collections.abc import Callable
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

from dftune.agents.budget import Budget
from dftune.agents.reasoner import Reasoner, RulesOnly
from dftune.tools.catalog import Catalog, default_catalog
from dftune.tools.runner.bench import ProcessMeasurer
from dftune.tools.runner.measurer import Measurer
from dftune.tools.runner.spec import WorkloadSpec
from dftune.tools.session.workspace import Workspace

#: Called with (node, message) for progress on screen; silent by default.
ProgressFn = Callable[[str, str], None]


def silent(node: str, message: str) -> None:
    """The default progress: nothing (tests, --json)."""
    return None


#: How the literature-searcher looks beyond the catalog: (strategy id, strategy name, bottleneck)
#: -> (a CitedClaim-shaped dict or None, search attempts made).
SearchFn = Callable[[str, str, str], tuple[dict[str, Any] | None, int]]


#: The supporting passage of a catalog citation: (strategy id, citation id) -> Evidence-shaped dict or None.
EvidenceFn = Callable[[str, str], dict[str, Any] | None]


@dataclass
class Context:
    #: the run's workload spec, loaded once from the run's archived copy (see graphs.runs)
    spec: WorkloadSpec | None = None
    reasoner: Reasoner = field(default_factory=RulesOnly)
    catalog: Catalog = field(default_factory=default_catalog)
    workspace: Workspace = field(default_factory=Workspace)
    #: the KB file (None: ``$DFTUNE_HOME/kb/opt_kb.sqlite``)
    kb_db: Path | None = None
    progress: ProgressFn = silent
    #: extra literature search after the catalog (the literature tools plug their search in here)
    search: SearchFn | None = None
    #: the passage that supports a catalog claim (from ingested PDFs or stored abstracts)
    evidence: EvidenceFn | None = None
    #: the wall-clock budget, measurement slots and baseline units (None: no deadline, run alone)
    budget: Budget | None = None
    #: what starts the workload's program for every measurement (tools/runner/measurer.py): the
    #: real one; the graph tier scripts what each replicate measured
    measurer: Measurer = field(default_factory=ProcessMeasurer)

    @property
    def workload_spec(self) -> WorkloadSpec:
        """The spec every node works from (a tuning run's context always carries one)."""
        if self.spec is None:
            raise RuntimeError("this context carries no workload spec (build it with graphs.runs)")
        return self.spec
