"""One applied proposal measured against the incumbent, its guards' decisions, a person's answers."""

from __future__ import annotations

from typing import Literal

from pydantic import Field

from dftune.core.domain.measurements import Measurement
from dftune.core.domain.stats import Comparison
from dftune.core.domain.verdicts import GuardDecision, Verdict
from dftune.core.model import StrictModel

#: An experiment's verdict: its KB record's (``failed`` also when it could not be applied or measured).
ExperimentVerdict = Verdict


class Experiment(StrictModel):
    """One applied proposal in its own opt<n> iteration, measured against the incumbent."""

    iteration: int
    proposal_id: str
    strategy: str
    reference: Measurement
    candidate: Measurement | None = None
    comparison: Comparison | None = None
    verdict: ExperimentVerdict | None = None
    verdict_reason: str = ""
    #: the program refused or crashed under the change where the incumbent ran (the candidate's
    #: status and last error line): a failed experiment the KB remembers
    program_failed: str = ""
    guard_triggered: bool = False
    kept: bool = False
    reverted: bool = False
    kb_record_id: int | None = None
    change_ids: list[str] = Field(default_factory=list)
    #: a person confirmed an inconclusive access-pattern decision (their note)
    confirmed_by: str | None = None
    #: a person refused a change the traces could not settle (their reason)
    refused_by: str | None = None
    #: verdict ``pending``: the question a person must answer (kept on the incumbent until then)
    question: str = ""
    #: measured on top of opt<n>, a pending change a person then refused: it no longer stands and
    #: is measured again without it
    voided_by: int | None = Field(default=None, ge=1)
    #: the verdict in a few checked sentences (the model's, or the rules' reason); prose, never markup
    explanation: str = ""

    @property
    def change_pct(self) -> float | None:
        """The measured change of the metric in percent (positive = better); None before a comparison."""
        return self.comparison.change_pct if self.comparison else None


class GuardRecord(StrictModel):
    """A guard decision with what it was about."""

    proposal_id: str
    iteration: int | None = None
    decision: GuardDecision


class ChecklistVerdict(StrictModel):
    number: int
    category: str
    verdict: str
    reason: str
    strategies: list[str] = Field(default_factory=list)


class PendingAnswer(StrictModel):
    """A person's answer to a pending confirmation (``dftune approve RUN_ID [--reject]``)."""

    iteration: int = Field(ge=1)
    proposal_id: str = Field(min_length=1)
    decision: Literal["approve", "reject"]
    reason: str = Field(default="", max_length=2000)
    #: the account that answered, and where the answer came from (a terminal or an MCP client)
    user: str = ""
    channel: Literal["terminal", "mcp", ""] = ""


class Approval(StrictModel):
    proposal_id: str
    approved: bool
    by: Literal["person", "policy"]
    reason: str
    #: the account that answered (a person's answer), as the answering process saw it
    user: str = ""
    #: where a person's answer came from: a terminal (``dftune approve``) or an MCP client
    channel: Literal["terminal", "mcp", ""] = ""
