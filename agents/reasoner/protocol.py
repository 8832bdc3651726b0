"""What every reasoner shares: the typed answers, what a judgment may look at, and the interface.

A node asks a :class:`Reasoner` one question at a time and gets a :class:`Judgment`: the answer
and the :class:`~dftune.core.domain.run.Decision` that says who gave it (the model, or the rules and
why) and what it cost. The node puts the decision into the state, so the token budget, the
history and the reports all read the same record.
"""

from __future__ import annotations

from collections.abc import Callable, Sequence
from dataclasses import dataclass, field
from typing import Any, Generic, Literal, Protocol, TypeVar

from pydantic import BaseModel, Field

from dftune.core.domain.diagnosis import Diagnosis
from dftune.core.domain.proposals import Proposal
from dftune.core.domain.run import Decision, Outcome
from dftune.core.errors import DftuneError
from dftune.core.model import StrictModel

DEFAULT_TOKEN_BUDGET = 200_000


class ReasonerError(DftuneError):
    """The reasoner cannot be set up (unknown provider, missing package or key, bad URL): one line."""


# --------------------------------------------------------------------------- typed answers


class Choice(StrictModel):
    """Which proposal to try next, and why."""

    proposal_id: str = Field(description="id of one of the offered proposals, exactly as given")
    reason: str = Field(description="one or two sentences a performance engineer would accept")


class ImpactEstimate(StrictModel):
    """A bounded estimate of what one proposal may save."""

    proposal_id: str
    app_impact_pct: float = Field(ge=0.0, le=100.0)
    reason: str


class ImpactEstimates(StrictModel):
    estimates: list[ImpactEstimate]


class Summary(StrictModel):
    text: str = Field(description="a short plain-text summary of the run for its report")


class KnobProposal(StrictModel):
    knob: str = Field(description="name of one of the offered knobs")
    value: float = Field(description="a value inside the knob's declared range that is not in its value list")
    reason: str


class KnobValues(StrictModel):
    """New values of ranged knobs to measure (none is a fine answer)."""

    values: list[KnobProposal] = Field(max_length=3)


class L2Setting(StrictModel):
    strategy: str = Field(description="id of one of the offered L2 strategies")
    params: dict[str, str] = Field(description="a value for each of the strategy's parameters, by name")
    reason: str


class L2Settings(StrictModel):
    """Catalog L2 settings to measure, with parameter values (none is a fine answer)."""

    settings: list[L2Setting] = Field(max_length=3)


class PatchDraft(StrictModel):
    recommendation: str = Field(description="id of one of the offered manual recommendations")
    diff: str = Field(description="a unified diff against the source tree shown (paths a/<file> b/<file>)")
    reason: str


class PatchDrafts(StrictModel):
    """Source patches that implement manual recommendations (none is a fine answer)."""

    patches: list[PatchDraft] = Field(max_length=2)


class Pace(StrictModel):
    """Whether to go on, and with how many replicates."""

    action: Literal["continue", "stop"]
    replicates: int | None = Field(default=None, description="replicates per arm of the next experiment")
    reason: str


class Explanation(StrictModel):
    text: str = Field(
        description="two or three plain sentences explaining the verdict from the numbers given"
    )


# --------------------------------------------------------------------------- inputs


@dataclass
class Budget:
    """The run's token budget: ``spent`` comes from the state's decisions and grows as the model is asked."""

    limit: int = DEFAULT_TOKEN_BUDGET
    spent: int = 0

    def allows(self, tokens: int) -> bool:
        """Would spending ``tokens`` more stay within the budget?"""
        return self.spent + tokens <= self.limit


@dataclass
class Facts:
    """What a judgment may look at: the diagnosis and the measured history of this run."""

    workload: str
    diagnosis: Diagnosis | None
    io_fraction: float | None
    unoverlapped_fraction: float | None
    kb_prior: dict[str, float] = field(default_factory=dict)
    history: list[dict[str, Any]] = field(default_factory=list)
    budget: Budget = field(default_factory=Budget)
    #: the bound of every estimate: unoverlapped I/O over process time (%), and why
    bound_pct: float | None = None
    bound_reason: str = ""
    #: what the workload is, what is measured and which way is better
    description: str = ""
    metric: str = ""
    lower_is_better: bool = True
    #: the analysis views that matter (top files and processes, time windows, size histogram), bounded
    views: dict[str, Any] = field(default_factory=dict)
    #: every screened proposal's citation and its supporting passage
    citations: list[dict[str, Any]] = field(default_factory=list)
    #: experiments left, wall clock left (s, None: no deadline), replicates per arm
    experiments_left: int | None = None
    wall_clock_left_s: float | None = None
    replicates: int | None = None
    #: the KB's earlier results for this system, software and workload
    kb_records: list[dict[str, Any]] = field(default_factory=list)


A = TypeVar("A")


@dataclass(frozen=True)
class Accepted(Generic[A]):
    """A model's answer after its check: the result, and what the check changed (capped, dropped)."""

    answer: A
    notes: list[str] = field(default_factory=list)


@dataclass(frozen=True)
class Question(Generic[A]):
    """One typed judgment, whoever answers it (see :mod:`.questions` for the builders).

    ``schema`` is the one tool the model must call; ``accept`` checks a model's answer and turns it
    into the result (a ``ValueError`` sends the reason back to the model); ``rules`` is the
    deterministic answer (offline, and the fallback)."""

    name: str
    schema: type[BaseModel]
    prompt: str
    rules: Callable[[], A]
    accept: Callable[[Any], Accepted[A]]
    #: a short form of an answer for the decision record
    brief: Callable[[A], str] = str


@dataclass(frozen=True)
class Judgment(Generic[A]):
    """An answer and the record of who gave it."""

    answer: A
    decision: Decision


class Reasoner(Protocol):
    """Every judgment of the tuning graph. New kinds of judgment are new typed questions
    (see :mod:`.questions`); an implementation answers any question through ``decide``."""

    name: str

    def estimate_impacts(
        self, proposals: Sequence[Proposal], facts: Facts
    ) -> Judgment[list[ImpactEstimate]]: ...

    def choose_next(self, options: Sequence[Proposal], facts: Facts) -> Judgment[Choice]: ...

    def summarize(self, facts: Facts, outcome: Outcome) -> Judgment[str]: ...

    def decide(self, q: Question[A], facts: Facts) -> Judgment[A]:
        """Any typed question: a new kind of judgment needs a question builder, not a new method."""
        ...
