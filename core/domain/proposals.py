"""A proposed change: what it sets, where its numbers come from, its citation and its status.

The optimizer makes them (a knob value, an environment or ROMIO setting, a source patch, a
staging plan, a system command); the guards, the verifier and the reports read them.
"""

from __future__ import annotations

from typing import Literal

from pydantic import Field

from dftune.core.citation import CitedClaim
from dftune.core.domain.measurements import StagePlan
from dftune.core.model import StrictModel

ProposalStatus = Literal[
    "proposed",  # passed the pre-apply guards, waiting its turn
    "unsupported",  # no verifiable citation: never applied
    "rejected",  # a guard refused it (access pattern, doing less, approval rejected)
    "manual",  # admin-only: reported as a recommendation, never applied by dftune
    "not_applicable",  # presumes software or hardware this workload or machine does not have
    "declined",  # a person said no at the approval interrupt
    "failed",  # it could not be applied or its experiment could not run
    "measured",  # applied and measured; the experiment holds the verdict
    "known",  # the knowledge base measured it here before (no gain): not re-tried without --retry-known
]
#: Statuses of a proposal that never reached an experiment because something (a guard, a person) refused it.
REFUSED: tuple[ProposalStatus, ...] = ("rejected", "unsupported", "declined")
#: Where a number of the proposal table comes from: this run's measurement, the knowledge base's
#: measurement of the same change on this workload, a trace model (agents/optimizer/estimates.py), the model
#: (an LLM's estimate), or nothing ("n/a": the change does not act on that metric).
ImpactSource = Literal["measured", "kb", "trace model", "model", "n/a"]


class Change(StrictModel):
    """What applying a proposal changes: knob settings, L2 environment, or a command."""

    kind: Literal["knob", "env", "command", "patch", "stage", "manual"]
    settings: dict[str, str] = Field(default_factory=dict)
    #: kind "patch": the unified diff (a file next to the workload spec) and its ``-p`` strip
    patch_file: str = ""
    strip: int = 1
    env: dict[str, str] = Field(default_factory=dict)
    argv: list[str] = Field(default_factory=list)
    #: kind "command": the argv that prints the current value (recorded before the change) and the rollback
    read_argv: list[str] = Field(default_factory=list)
    rollback_argv: list[str] = Field(default_factory=list)
    instructions: str = ""
    #: a catalog strategy's parameter values the change was rendered from (a model's L2 settings)
    params: dict[str, str] = Field(default_factory=dict)
    #: kind "stage": every replicate runs on a fresh copy of the data folder on this tier
    stage: StagePlan | None = None


class Proposal(StrictModel):
    """A row of the proposal table (and everything the guards and the report need about it)."""

    id: str
    strategy: str
    strategy_name: str
    layer: Literal["L1", "L2", "L3"]
    checklist: int
    description: str
    change: Change
    privilege: Literal["no-sudo", "sudo", "admin-only"] = "no-sudo"
    #: % of the application's metric this is expected (or was measured) to save; positive = better
    app_impact_pct: float = 0.0
    app_impact_source: ImpactSource = "trace model"
    #: % change of the trace-derived aggregate I/O bandwidth (source "n/a" when the change does not act on it)
    system_impact_pct: float = 0.0
    system_impact_source: ImpactSource = "trace model"
    impact_reason: str = ""
    system_reason: str = ""
    #: the plan's order (ties between equal estimates go by it, never by name)
    order: int = 0
    #: an earlier proposal this one measures again against a new incumbent (interacting changes)
    retry_of: str | None = None
    #: who gave the estimate: ``rules`` (the trace models and the KB) or the chat model's name
    impact_estimated_by: str = "rules"
    #: who proposed it: ``plan`` (the spec and the catalog) or ``model:<PROVIDER:MODEL>`` (a model's action,
    #: checked against the declared ranges and the catalog, and screened and measured like any other)
    proposed_by: str = "plan"
    citation: CitedClaim | None = None
    status: ProposalStatus = "proposed"
    reason: str = ""
    #: the experiment (iteration number) that measured it
    iteration: int | None = None
    kb_record_id: int | None = None
    #: the experiment this proposal measures again: it stood on a change a person refused
    remeasures: int | None = Field(default=None, ge=1)

    @property
    def weighted_score(self) -> float:
        """The 50/50 weighting of application and system impact (dftracer-io-optimization skill)."""
        return round(0.5 * self.app_impact_pct + 0.5 * self.system_impact_pct, 3)
