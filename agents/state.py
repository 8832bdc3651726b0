"""The one typed state every agent of the tuning graph reads and updates.

Nodes return partial updates. Lists that several agents add to carry reducers: append-only
logs (events, guard decisions, experiments, KB records) use :func:`append`; proposals and
citations are keyed, so a later update of the same id replaces the earlier one
(:func:`merge_by_id`). Values are pydantic models or plain JSON, and :data:`STATE_MODELS` is
the exact list of classes the checkpointer may load back (see :mod:`checkpointer`).
"""

from __future__ import annotations

from dataclasses import dataclass, field
from datetime import UTC, datetime
from typing import Annotated, Any, Literal, TypeVar

from pydantic import BaseModel, ConfigDict, Field, field_validator

from dftune.core.citation import Citation, CitedClaim
from dftune.core.model import StrictModel
from dftune.tools.diagnose.engine import (
    Bottleneck,
    CandidateStrategy,
    ChecklistEntry,
    Diagnosis,
    FsSummary,
    Gate,
    MetricChoice,
)
from dftune.tools.diagnose.rules import Finding
from dftune.tools.guards import GuardDecision
from dftune.tools.runner.staging import StagePlan
from dftune.tools.runner.stats import ArmStats, Comparison

Mode = Literal["autonomous", "interactive"]
#: interrupted: the process driving it is gone with work left (resume it)
RunStatus = Literal["running", "awaiting_approval", "interrupted", "not_worth_tuning", "completed", "failed"]
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
#: Where a number of the proposal table comes from: this run's measurement, the knowledge base's
#: measurement of the same change on this workload, a trace model (agents/optimizer/estimates.py), the model
#: (an LLM's estimate), or nothing ("n/a": the change does not act on that metric).
ImpactSource = Literal["measured", "kb", "trace model", "model", "n/a"]


class _Model(StrictModel):
    """Strict on creation and on ``model_copy(update=...)`` (core/model.py)."""


class LogEntry(_Model):
    """One line of the run's event log: who did what, when, and why."""

    time: str
    node: str
    message: str
    data: dict[str, Any] = Field(default_factory=dict)


class Pitfall(_Model):
    """A blind spot of the tracer on this machine (e.g. stat/fstat untraced from Python)."""

    id: str
    message: str
    detail: str = ""


class TracerFacts(_Model):
    """What the installer found out about dftracer on this machine."""

    python: str
    usable: bool = False
    #: why it is not usable (or what went wrong), one line
    reason: str = ""
    installed: str = ""
    preload_library: str = ""
    #: call name -> count in the smoke program's trace
    smoke_calls_traced: dict[str, int] = Field(default_factory=dict)


class PriorResult(_Model):
    """An earlier KB finding that applies to this run (dftracer-io-optimization skill: KB lookup first)."""

    id: int
    strategy: str
    verdict: str
    scope: str
    change_pct: float | None = None
    run_id: str | None = None
    #: what was changed (settings, env, argv) and what it was measured against (incumbent settings, env)
    change: dict[str, Any] = Field(default_factory=dict)


class KbPrior(_Model):
    """What the knowledge base already knows for this system, software and workload."""

    #: strategy -> the latest measured change (win or no_change), % (positive = better)
    measured_pct: dict[str, float] = Field(default_factory=dict)
    records: list[PriorResult] = Field(default_factory=list)


class Change(_Model):
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


class Proposal(_Model):
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


class Measurement(_Model):
    """One arm of a comparison: the replicates of one condition and what their trace shows."""

    settings: dict[str, Any]
    env: dict[str, str] = Field(default_factory=dict)
    #: the source tree this arm ran from (an iteration's patched copy); None: the user's original
    source_dir: str | None = None
    values: list[float]
    median: float | None
    ci95: list[float] | None
    ok: int
    replicates: int
    traced: bool
    workdir: str
    trace_dir: str | None = None
    #: the analysis of the first successful replicate's trace (written next to the bench)
    analysis_path: str | None = None
    #: aggregate I/O bandwidth of that trace, bytes/s (the skill's trace-derived system-metric proxy)
    io_bandwidth: float | None = None
    io_time_s: float | None = None
    #: share of job time spent in I/O not hidden behind compute (bounds any I/O fix's gain)
    unoverlapped_io_fraction: float | None = None
    #: the arm's data folder (its trace's files are compared relative to it)
    data_dir: str | None = None
    #: a staged arm: the tier each replicate copied the data folder to, and the copy's path (the
    #: same in every replicate; its traced files are the data folder's, see tools/runner/staging.py)
    stage: StagePlan | None = None
    staged_dir: str | None = None
    #: the spec's work counters as the replicates printed them (the same in every replicate)
    work: dict[str, float] = Field(default_factory=dict)
    notes: list[str] = Field(default_factory=list)
    stopped_reason: str | None = None


class Experiment(_Model):
    """One applied proposal in its own opt<n> iteration, measured against the incumbent."""

    iteration: int
    proposal_id: str
    strategy: str
    reference: Measurement
    candidate: Measurement | None = None
    comparison: Comparison | None = None
    verdict: (
        Literal[
            "win", "no_change", "regression", "unsupported", "rejected", "inconclusive", "pending", "failed"
        ]
        | None
    ) = None
    verdict_reason: str = ""
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


class GuardRecord(_Model):
    """A guard decision with what it was about."""

    proposal_id: str
    iteration: int | None = None
    decision: GuardDecision


class ChecklistVerdict(_Model):
    number: int
    category: str
    verdict: str
    reason: str
    strategies: list[str] = Field(default_factory=list)


class Coverage(_Model):
    """Which units a diagnosis pass covered (partial baselines, dftracer-io-optimization skill)."""

    units_total: int
    units_included: list[str]
    units_pending: list[str] = Field(default_factory=list)
    units_failed: list[str] = Field(default_factory=list)

    @property
    def partial(self) -> bool:
        return bool(self.units_pending or self.units_failed)


class PendingAnswer(_Model):
    """A person's answer to a pending confirmation (``dftune approve RUN_ID [--reject]``)."""

    iteration: int = Field(ge=1)
    proposal_id: str = Field(min_length=1)
    decision: Literal["approve", "reject"]
    reason: str = Field(default="", max_length=2000)


class Approval(_Model):
    proposal_id: str
    approved: bool
    by: Literal["person", "policy"]
    reason: str
    #: the account that answered (a person's answer), as the answering process saw it
    user: str = ""


#: The model's actions beyond the three judgments: new knob values, catalog L2 settings, drafted
#: patches, when to stop or add replicates, and an explanation of each verdict.
ModelAction = Literal["knob_value", "l2_settings", "draft_patch", "pace", "explain"]
MODEL_ACTIONS: tuple[ModelAction, ...] = ("knob_value", "l2_settings", "draft_patch", "pace", "explain")


class LLMSettings(_Model):
    """How a run talks to its chat model; kept in the state so resume and approve use the same.

    A request waits at most ``timeout_s``; a failed request is retried ``retries`` times with
    exponential backoff from ``backoff_s`` (or the server's retry-after); one judgment never
    takes longer than ``deadline_s`` in all (then the rules decide)."""

    timeout_s: float = Field(
        default=30.0, gt=0, le=3600, description="Seconds one request to the chat model may take."
    )
    retries: int = Field(
        default=2,
        ge=0,
        le=10,
        description="Retries of a failed request (429, 5xx, timeouts), with backoff and retry-after.",
    )
    deadline_s: float = Field(
        default=60.0,
        gt=0,
        le=7200,
        description="Seconds one judgment may take in all (retries, re-asks); then the rules decide.",
    )
    backoff_s: float = Field(
        default=1.0, ge=0, le=60, description="Seconds before the first retry; doubled for each next one."
    )
    max_output_tokens: int = Field(
        default=2048,
        ge=64,
        le=64_000,
        description="The answer's size cap (the API's max_tokens); the token budget reserves this per call.",
    )
    actions: list[ModelAction] = Field(
        default_factory=lambda: list(MODEL_ACTIONS),
        description="What the model may do besides choosing, estimating and summarizing "
        "(see agents.reasoner.questions).",
    )

    @field_validator("actions", mode="before")
    @classmethod
    def _split(cls, value: Any) -> Any:
        if isinstance(value, str):  # DFTUNE_LLM_ACTIONS=knob_value,l2_settings (or "none")
            return [] if value.strip() in ("", "none") else [v.strip() for v in value.split(",") if v.strip()]
        return value


class RunSettings(_Model):
    """How one run is driven: the one place a run setting is declared, defaulted and validated.

    The command line, a campaign file, a campaign's members, ``graphs.runs.start_run``, the
    state's inputs and ``dftune replay --set`` all read these fields; ``layered`` applies the
    precedence (command line, then file, then these defaults) in one place."""

    model_config = ConfigDict(extra="forbid", frozen=True)
    mode: Mode = Field(
        default="autonomous",
        description="autonomous (overnight: no-sudo L1/L2 changes approved by policy) or interactive "
        "(every change waits for a person's answer: dftune approve, or the MCP tool run_answer).",
    )
    max_experiments: int = Field(
        default=6, ge=0, description="Experiments per workload (each a guarded, measured change)."
    )
    replicates: int | None = Field(
        default=None, ge=1, description="Replicates per arm (default: the spec's)."
    )
    model: str = Field(
        default="rules",
        description="rules (offline, deterministic) or PROVIDER:MODEL (anthropic:..., openai:...; "
        "OPENAI_BASE_URL for compatible servers).",
    )
    token_budget: int = Field(
        default=200_000,
        ge=0,
        description="Tokens the chat model may spend in the run; then the rules decide.",
    )
    allow_install: bool = Field(
        default=False, description="Let the installer pip-install dftracer if it is missing."
    )
    retry_known: bool = Field(
        default=False,
        description="Measure again what the knowledge base already measured here without a gain "
        "(against the same incumbent).",
    )
    force: bool = Field(
        default=False, description="Tune even when the worth-tuning gate says I/O cannot pay off here."
    )
    llm: LLMSettings = Field(
        default_factory=LLMSettings,
        description="The chat model's timeouts, retries and per-judgment deadline (unused with rules).",
    )

    @classmethod
    def layered(cls, *layers: BaseModel | dict[str, Any] | None) -> RunSettings:
        """The settings from ``layers``, first one wins per field (a None value or a missing field
        falls through to the next layer, then to the default): ``layered(cli, file)``."""
        names = cls.model_fields
        merged: dict[str, Any] = {}
        for layer in reversed(layers):
            if layer is None:
                continue
            values = layer.model_dump(exclude_unset=True) if isinstance(layer, BaseModel) else layer
            merged.update({k: v for k, v in values.items() if k in names and v is not None})
        return cls.model_validate(merged)

    @classmethod
    def check(cls, values: dict[str, Any]) -> None:
        """Refuse keys that are not run settings (a typo must not vanish into a default)."""
        unknown = sorted(set(values) - set(cls.model_fields))
        if unknown:
            raise ValueError(f"not a run setting: {', '.join(unknown)}")


#: Every run setting at its default: the state's inputs take their defaults from here.
DEFAULT_SETTINGS = RunSettings()


class Decision(_Model):
    """Who made one judgment and what it cost: the run's record of the model and its fallbacks."""

    #: the typed question (estimate_impacts, choose_next, summarize, ...)
    question: str
    #: the run's reasoner: ``rules`` or ``PROVIDER:MODEL``
    reasoner: str
    decided_by: Literal["model", "rules"]
    #: tokens the model calls of this judgment spent (estimated from the text when the server sent no usage)
    tokens: int = 0
    tokens_estimated: bool = False
    #: requests sent to the model (re-asks and retries included)
    calls: int = 0
    latency_s: float = 0.0
    #: why the rules decided although a model was configured (empty otherwise)
    fallback: str = ""
    #: what happened on the way: invalid answers, retries, summary sentences dropped
    notes: list[str] = Field(default_factory=list)
    #: a short form of the answer (the chosen id, how many estimates, the summary's length)
    answer: str = ""
    time: str = ""

    @property
    def by(self) -> str:
        """Who decided, for event lines: the model's name, or ``rules`` (with the fallback)."""
        if self.decided_by == "model":
            return self.reasoner
        return "rules" if self.reasoner == "rules" else f"rules (fallback from {self.reasoner})"


#: Exactly the classes the checkpointer's serializer may load back.
STATE_MODELS: tuple[type[BaseModel], ...] = (
    LogEntry,
    Pitfall,
    TracerFacts,
    PriorResult,
    KbPrior,
    Citation,
    CitedClaim,
    Change,
    Proposal,
    Measurement,
    Experiment,
    GuardRecord,
    ChecklistVerdict,
    Coverage,
    Approval,
    PendingAnswer,
    LLMSettings,
    Decision,
    GuardDecision,
    Comparison,
    ArmStats,
    Diagnosis,
    Bottleneck,
    Finding,
    CandidateStrategy,
    MetricChoice,
    Gate,
    FsSummary,
    ChecklistEntry,
)
#: Bumped when the state's shape changes; a run saved under another version is refused with a
#: clear line instead of resuming on half-understood data (1: dict-typed diagnosis and priors;
#: 2: estimates without their source).
STATE_VERSION = 3


T = TypeVar("T")


def append(left: list[T] | None, right: list[T] | None) -> list[T]:
    """Reducer for append-only logs."""
    return [*(left or []), *(right or [])]


def merge_by_id(left: list[Any] | None, right: list[Any] | None) -> list[Any]:
    """Reducer for keyed lists: an update with a known ``id`` replaces the earlier value in place."""
    out = list(left or [])
    index = {_key(item): i for i, item in enumerate(out)}
    for item in right or []:
        k = _key(item)
        if k in index:
            out[index[k]] = item
        else:
            index[k] = len(out)
            out.append(item)
    return out


def merge_experiments(left: list[Experiment] | None, right: list[Experiment] | None) -> list[Experiment]:
    """Experiments are keyed by iteration: the verifier and the recorder refine the same one."""
    out = {e.iteration: e for e in left or []}
    for e in right or []:
        out[e.iteration] = e
    return [out[k] for k in sorted(out)]


def _key(item: Any) -> Any:
    return item.id if hasattr(item, "id") else item.get("id") if isinstance(item, dict) else item


def log(node: str, message: str, **data: Any) -> LogEntry:
    return LogEntry(
        time=datetime.now(UTC).isoformat(timespec="seconds"), node=node, message=message, data=data
    )


@dataclass(kw_only=True)
class TuningState:
    """Everything a run knows; the checkpointer saves it after every node."""

    # ----- inputs (set at start; ``dftune replay --set`` may change the scalar ones)
    run_id: str
    spec_path: str
    # (the run settings: declared, defaulted and validated once, in RunSettings)
    mode: Mode = DEFAULT_SETTINGS.mode
    max_experiments: int = DEFAULT_SETTINGS.max_experiments
    replicates: int | None = DEFAULT_SETTINGS.replicates
    model: str = DEFAULT_SETTINGS.model
    token_budget: int = DEFAULT_SETTINGS.token_budget
    llm: LLMSettings = field(default_factory=LLMSettings)
    allow_install: bool = DEFAULT_SETTINGS.allow_install
    system: str = ""
    workload: str = ""
    #: iterations of this branch are numbered above this (a replayed fork never reuses opt<n> or change ids)
    iteration_floor: int = 0
    retry_known: bool = DEFAULT_SETTINGS.retry_known
    force: bool = DEFAULT_SETTINGS.force
    #: the state's shape this run was saved with (see STATE_VERSION); 0 for runs older than it
    state_version: int = 0

    # ----- progress
    status: RunStatus = "running"
    status_reason: str = ""
    events: Annotated[list[LogEntry], append] = field(default_factory=list)
    pitfalls: Annotated[list[Pitfall], merge_by_id] = field(default_factory=list)
    tracer: TracerFacts | None = None

    # ----- diagnoser
    baseline: Measurement | None = None
    coverage: Coverage | None = None
    diagnosis: Diagnosis | None = None
    software: list[str] = field(default_factory=list)
    fs_type: str = "unknown"

    # ----- literature + optimizer
    kb_prior: KbPrior = field(default_factory=KbPrior)
    citations: Annotated[list[CitedClaim], merge_by_id] = field(default_factory=list)
    proposals: Annotated[list[Proposal], merge_by_id] = field(default_factory=list)
    checklist: list[ChecklistVerdict] = field(default_factory=list)
    screened: bool = False
    #: the proposal the optimizer chose and that the approval/apply/verify nodes work on
    current: str | None = None
    #: replicates of the next experiment when the model asked for more (bounded; None: the run's count)
    next_replicates: int | None = None
    approvals: Annotated[list[Approval], append] = field(default_factory=list)
    #: a person's answers to pending confirmations, oldest first (the settle node applies each once)
    answers: Annotated[list[PendingAnswer], append] = field(default_factory=list)
    #: every judgment the reasoner made, who made it and what it cost (the token budget is their sum)
    decisions: Annotated[list[Decision], append] = field(default_factory=list)

    # ----- verifier + guards + KB
    incumbent: Measurement | None = None
    experiments: Annotated[list[Experiment], merge_experiments] = field(default_factory=list)
    guard_decisions: Annotated[list[GuardRecord], append] = field(default_factory=list)
    kb_records: Annotated[list[int], append] = field(default_factory=list)

    # ----- outputs
    report_path: str | None = None
    kb_skill_path: str | None = None

    @property
    def settings(self) -> RunSettings:
        """The run settings this run was started (or forked) with."""
        return RunSettings.model_validate({name: getattr(self, name) for name in RunSettings.model_fields})

    @property
    def tokens_spent(self) -> int:
        """Tokens the model spent in this run so far: kept in
        the checkpoints, so resume and approve keep it."""
        return sum(d.tokens for d in self.decisions)

    @property
    def pending(self) -> list[Experiment]:
        """Changes kept on trial that wait for a person's confirmation, oldest first."""
        return [e for e in self.experiments if e.verdict == "pending" and e.kept]

    def proposal(self, proposal_id: str) -> Proposal:
        for p in self.proposals:
            if p.id == proposal_id:
                return p
        raise KeyError(f"no proposal {proposal_id!r} in the state")


#: Scalar inputs ``dftune replay --set FIELD=VALUE`` may change before forking.
REPLAYABLE_FIELDS: tuple[str, ...] = tuple(f for f in RunSettings.model_fields if f != "llm")
