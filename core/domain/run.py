"""The run: its settings, its log, and the one typed state every agent of the tuning graph updates.

:class:`TuningState` is the LangGraph state (``graphs/pipeline.py``). Nodes return partial
updates, validated by :func:`update` (an unknown field or a value of the wrong type fails where
the node made it, instead of vanishing: LangGraph drops keys that are not channels). Lists that
several agents add to carry reducers: append-only logs (events, guard decisions, experiments, KB
records) use :func:`append`; proposals and citations are keyed, so a later update of the same id
replaces the earlier one (:func:`merge_by_id`). :data:`STATE_MODELS` is the exact list of classes
the checkpointer may load back. :class:`RunReport` is the run's document (``report.json``): the
final state with its summary and outcome, read by the reports and the MCP tools.
"""

from __future__ import annotations

from collections.abc import Mapping
from datetime import UTC, datetime
from typing import Annotated, Any, Literal, Optional, TypeVar

from pydantic import (
    BaseModel,
    ConfigDict,
    Field,
    SerializerFunctionWrapHandler,
    ValidationError,
    create_model,
    field_validator,
    model_serializer,
    model_validator,
)

from dftune.core.citation import Citation, CitedClaim
from dftune.core.domain.diagnosis import (
    Bottleneck,
    CandidateStrategy,
    ChecklistEntry,
    Diagnosis,
    Finding,
    FsSummary,
    Gate,
    MetricChoice,
)
from dftune.core.domain.experiments import (
    Approval,
    ChecklistVerdict,
    Experiment,
    ExperimentVerdict,
    GuardRecord,
    PendingAnswer,
)
from dftune.core.domain.levers import Lever, Levers
from dftune.core.domain.measurements import Coverage, Measurement
from dftune.core.domain.proposals import Change, ImpactSource, Proposal, ProposalStatus
from dftune.core.domain.stats import MIN_DECIDING_PAIRS, ArmStats, Comparison
from dftune.core.domain.verdicts import GuardDecision
from dftune.core.model import StrictModel

Mode = Literal["autonomous", "interactive"]
#: interrupted: the process driving it is gone with work left (resume it)
RunStatus = Literal["running", "awaiting_approval", "interrupted", "not_worth_tuning", "completed", "failed"]


class LogEntry(StrictModel):
    """One line of the run's event log: who did what, when, and why."""

    time: str
    node: str
    message: str
    data: dict[str, Any] = Field(default_factory=dict)


class Pitfall(StrictModel):
    """A blind spot of the tracer on this machine (e.g. stat/fstat untraced from Python)."""

    id: str
    message: str
    detail: str = ""


class TracerFacts(StrictModel):
    """What the installer found out about dftracer on this machine."""

    python: str
    usable: bool = False
    #: why it is not usable (or what went wrong), one line
    reason: str = ""
    installed: str = ""
    preload_library: str = ""
    #: call name -> count in the smoke program's trace
    smoke_calls_traced: dict[str, int] = Field(default_factory=dict)


class PriorResult(StrictModel):
    """An earlier KB finding that applies to this run (dftracer-io-optimization skill: KB lookup first)."""

    id: int
    strategy: str
    verdict: str
    scope: str
    change_pct: float | None = None
    run_id: str | None = None
    #: what was changed (settings, env, argv) and what it was measured against (incumbent settings, env)
    change: dict[str, Any] = Field(default_factory=dict)
    #: why the record has its verdict (a failed one: what the program said)
    reason: str = ""
    #: what the record measured: the application's metric, or a system metric (I/O bandwidth)
    #: beside it; only the application's decides whether the run tries a change again
    metric_scope: Literal["app", "system"] = "app"


class KbPrior(StrictModel):
    """What the knowledge base already knows for this system, software and workload."""

    #: strategy -> the latest measured change (win or no_change), % (positive = better)
    measured_pct: dict[str, float] = Field(default_factory=dict)
    records: list[PriorResult] = Field(default_factory=list)


#: The model's actions beyond the three judgments: new knob values, catalog L2 settings, drafted
#: patches, when to stop or add replicates, and an explanation of each verdict.
ModelAction = Literal["knob_value", "l2_settings", "draft_patch", "pace", "explain"]
MODEL_ACTIONS: tuple[ModelAction, ...] = ("knob_value", "l2_settings", "draft_patch", "pace", "explain")


class LLMSettings(StrictModel):
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


class RunSettings(StrictModel):
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
    # upper bounds keep every number a checkpoint can store (msgpack: 64-bit) and a run can do
    max_experiments: int = Field(
        default=6, ge=0, le=10_000, description="Experiments per workload (each a guarded, measured change)."
    )
    replicates: int | None = Field(
        default=None, ge=1, le=1000, description="Replicates per arm (default: the spec's)."
    )
    model: str = Field(
        default="rules",
        description="rules (offline, deterministic) or PROVIDER:MODEL (anthropic:..., openai:...; "
        "OPENAI_BASE_URL for compatible servers).",
    )
    token_budget: int = Field(
        default=200_000,
        ge=0,
        le=10**12,
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
    declared_only: bool = Field(
        default=False,
        description="Measure only what the spec declares: when it has no knob, do not look for the "
        "program's own levers (its options, the arguments of its I/O calls, its workload config).",
    )
    verify_pairs: int = Field(
        default=5,
        ge=0,
        le=100,
        description="Pairs of baseline and tuned runs with which the run's end checks its bundle "
        "from a copy, when the budget leaves time (0: no check; at least 4 can show a gain).",
    )
    llm: LLMSettings = Field(
        default_factory=LLMSettings,
        description="The chat model's timeouts, retries and per-judgment deadline (unused with rules).",
    )

    @field_validator("verify_pairs")
    @classmethod
    def _enough_pairs(cls, v: int) -> int:
        if 0 < v < MIN_DECIDING_PAIRS:
            raise ValueError(
                f"{v} pairs can never show a gain (the rank test needs {MIN_DECIDING_PAIRS}); "
                "0 turns the check off"
            )
        return v

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


class Decision(StrictModel):
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


class ReplayOrigin(StrictModel):
    """The run and saved state a replay forked from, and the inputs it changed."""

    run_id: str
    checkpoint_id: str
    step: int | None = None
    changed: dict[str, str] = Field(default_factory=dict)

    def line(self) -> str:
        """``run R at step 12 (checkpoint C), with max_experiments=4`` for the reports."""
        at = f" at step {self.step}" if self.step is not None else ""
        changed = ", ".join(f"{k}={v}" for k, v in self.changed.items()) or "no input changed"
        return f"run {self.run_id}{at} (checkpoint {self.checkpoint_id}); {changed}"


#: Exactly the classes the checkpointer's serializer may load back.
STATE_MODELS: tuple[type[BaseModel], ...] = (
    ReplayOrigin,
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
    Levers,
    Lever,
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


class TuningState(StrictModel):
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
    llm: LLMSettings = Field(default_factory=LLMSettings)
    allow_install: bool = DEFAULT_SETTINGS.allow_install
    system: str = ""
    workload: str = ""
    #: iterations of this branch are numbered above this (a replayed fork never reuses opt<n> or change ids)
    iteration_floor: int = 0
    retry_known: bool = DEFAULT_SETTINGS.retry_known
    force: bool = DEFAULT_SETTINGS.force
    declared_only: bool = DEFAULT_SETTINGS.declared_only
    verify_pairs: int = DEFAULT_SETTINGS.verify_pairs
    #: the program's own levers the run drafted at its start (None: the spec declared knobs)
    levers: Levers | None = None
    #: the run and saved state this one was replayed from (None: started anew)
    replay_of: ReplayOrigin | None = None
    #: the state's shape this run was saved with (see STATE_VERSION); 0 for runs older than it
    state_version: int = 0

    # ----- progress
    status: RunStatus = "running"
    status_reason: str = ""
    events: Annotated[list[LogEntry], append] = Field(default_factory=list)
    pitfalls: Annotated[list[Pitfall], merge_by_id] = Field(default_factory=list)
    tracer: TracerFacts | None = None

    # ----- diagnoser
    baseline: Measurement | None = None
    coverage: Coverage | None = None
    diagnosis: Diagnosis | None = None
    software: list[str] = Field(default_factory=list)
    fs_type: str = "unknown"

    # ----- literature + optimizer
    kb_prior: KbPrior = Field(default_factory=KbPrior)
    citations: Annotated[list[CitedClaim], merge_by_id] = Field(default_factory=list)
    proposals: Annotated[list[Proposal], merge_by_id] = Field(default_factory=list)
    checklist: list[ChecklistVerdict] = Field(default_factory=list)
    screened: bool = False
    #: the proposal the optimizer chose and that the approval/apply/verify nodes work on
    current: str | None = None
    #: replicates of the next experiment when the model asked for more (bounded; None: the run's count)
    next_replicates: int | None = None
    approvals: Annotated[list[Approval], append] = Field(default_factory=list)
    #: a person's answers to pending confirmations, oldest first (the settle node applies each once)
    answers: Annotated[list[PendingAnswer], append] = Field(default_factory=list)
    #: every judgment the reasoner made, who made it and what it cost (the token budget is their sum)
    decisions: Annotated[list[Decision], append] = Field(default_factory=list)

    # ----- verifier + guards + KB
    incumbent: Measurement | None = None
    experiments: Annotated[list[Experiment], merge_experiments] = Field(default_factory=list)
    guard_decisions: Annotated[list[GuardRecord], append] = Field(default_factory=list)
    kb_records: Annotated[list[int], append] = Field(default_factory=list)

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


#: Scalar inputs ``dftune replay --set FIELD=VALUE`` may change before forking (not the ones a run
#: acts on only when it starts: its levers are drafted then).
REPLAYABLE_FIELDS: tuple[str, ...] = tuple(
    f for f in RunSettings.model_fields if f not in ("llm", "declared_only")
)


#: What a node returns: a partial update of :class:`TuningState`, validated by :func:`update`.
Update = dict[str, Any]
#: every state field, optional: an update names the ones it sets
_OPTIONAL: dict[str, Any] = {n: (Optional[f.annotation], None) for n, f in TuningState.model_fields.items()}  # noqa: UP045
_UpdateModel = create_model("TuningStateUpdate", __base__=StrictModel, **_OPTIONAL)


def update(*parts: Mapping[str, Any], **changes: Any) -> Update:
    """A node's partial update, validated against the state's fields: an unknown field or a value
    of the wrong type raises here, naming the field, instead of being dropped by the graph.
    ``parts`` (updates built up before) are merged first, then ``changes``; a later value wins."""
    changes = {k: v for part in (*parts, changes) for k, v in part.items()}
    try:
        checked = _UpdateModel.model_validate(changes)
    except ValidationError as exc:
        raise ValueError(f"invalid state update: {' '.join(str(exc).split())[:400]}") from None
    return {name: getattr(checked, name) for name in changes}


class KeptChange(StrictModel):
    """A change the run ended with: a win, or one kept on trial that waits for a person."""

    strategy: str
    proposal: str
    iteration: int
    change_pct: float
    #: a change on trial: the question a person must answer
    question: str = ""


class Outcome(StrictModel):
    """How the run ended: the kept wins, the changes on trial, and the overall change."""

    status: RunStatus
    status_reason: str = ""
    experiments: int = 0
    wins: list[KeptChange] = Field(default_factory=list)
    pending: list[KeptChange] = Field(default_factory=list)
    baseline_median: float | None = None
    best_median: float | None = None
    overall_pct: float = 0.0


class MetricInfo(StrictModel):
    """The metric a run optimizes, named as the program calls it, with its unit and direction."""

    name: str = "metric"
    unit: str = ""
    lower_is_better: bool = True
    kind: str = ""


class ProposalRow(StrictModel):
    """One row of the proposal table (dftracer-io-optimization skill): cited proposals, sorted."""

    model_config = ConfigDict(extra="forbid", populate_by_name=True)
    number: int = Field(alias="#")
    id: str
    strategy: str
    description: str
    app_impact_pct: float
    app_impact_source: ImpactSource
    system_impact_pct: float
    system_impact_source: ImpactSource
    weighted_score: float
    status: ProposalStatus
    layer: Literal["L1", "L2", "L3"]
    impact_reason: str = ""
    system_reason: str = ""
    citation: str | None = None
    url: str | None = None


class RunReport(TuningState):
    """The run's document (``report.json``, ``dftune run --json``): the final state, its proposal
    table, the summary and the outcome. The reports and the MCP tools read this, not the JSON."""

    model_config = ConfigDict(extra="forbid", populate_by_name=True)
    proposal_table: list[ProposalRow] = Field(default_factory=list)
    summary: str = ""
    outcome: Outcome | None = None
    metric: MetricInfo = Field(default_factory=MetricInfo)


# --------------------------------------------------------------------------- the run's result


class VerdictRow(StrictModel):
    """One experiment as the run's result lists it (``verdicts``)."""

    iteration: int
    proposal: str
    strategy: str
    verdict: ExperimentVerdict | None
    change_pct: float | None
    kept: bool
    reverted: bool
    kb_record: int | None
    voided_by: int | None

    @classmethod
    def of(cls, e: Experiment) -> VerdictRow:
        return cls(
            iteration=e.iteration,
            proposal=e.proposal_id,
            strategy=e.strategy,
            verdict=e.verdict,
            change_pct=e.change_pct,
            kept=e.kept,
            reverted=e.reverted,
            kb_record=e.kb_record_id,
            voided_by=e.voided_by,
        )


class RefusedRow(StrictModel):
    """A proposal refused before anything was applied (``refused``)."""

    proposal: str
    strategy: str
    status: ProposalStatus
    reason: str


class _Question(StrictModel):
    """What the graph asks a person at an interrupt (its value is the record's dump). ``refused``, why
    the last answer was not one (the run keeps waiting), appears only once an answer was refused."""

    refused: str | None = None

    @model_serializer(mode="wrap")
    def _without_unset_refusal(self, handler: SerializerFunctionWrapHandler) -> dict[str, Any]:
        out: dict[str, Any] = handler(self)
        if self.refused is None:
            out.pop("refused", None)
        return out


class ApprovalRequest(_Question):
    """A change that waits for a person's approval before it is applied, as the run's result lists it
    under ``pending`` (a value a run saved before they were part of it gets ``settings`` and
    ``question`` from the change)."""

    kind: Literal["approval"] = "approval"
    run_id: str
    proposal_id: str
    strategy: str
    layer: Literal["L1", "L2", "L3"]
    privilege: Literal["no-sudo", "sudo", "admin-only"]
    description: str
    change: Change
    app_impact_pct: float
    app_impact_source: ImpactSource
    citation: str | None = None
    resume_with: str
    answer_format: dict[str, str]
    settings: dict[str, str]
    question: str
    change_pct: float | None = None

    @model_validator(mode="before")
    @classmethod
    def _derived(cls, data: Any) -> Any:
        if not isinstance(data, dict):
            return data
        out = dict(data)
        if not out.get("settings"):
            change = out.get("change") or {}
            out["settings"] = change.settings if isinstance(change, Change) else change.get("settings", {})
        if not out.get("question"):
            out["question"] = f"apply {out.get('proposal_id')}? ({out.get('description', '')})"
        return out


class PatternQuestion(_Question):
    """An interactive run asks whether a change the access-pattern guard could not settle is legitimate."""

    kind: Literal["confirm_pattern"] = "confirm_pattern"
    run_id: str
    proposal_id: str
    iteration: int
    question: str
    resume_with: str
    settings: dict[str, str] = Field(default_factory=dict)
    change_pct: float | None = None


class ConfirmRequest(StrictModel):
    """A change kept on trial that waits for a person's confirmation (``pending``)."""

    kind: Literal["confirm_pending"] = "confirm_pending"
    proposal_id: str
    iteration: int
    strategy: str
    settings: dict[str, str]
    env: dict[str, str]
    question: str
    change_pct: float | None
    kb_record: int | None
    resume_with: str


#: What waits for a person: the question the graph stopped at, or a change kept on trial.
PendingItem = Annotated[ApprovalRequest | PatternQuestion | ConfirmRequest, Field(discriminator="kind")]
#: What the graph may stop at (the interrupt's value).
Interrupt = Annotated[ApprovalRequest | PatternQuestion, Field(discriminator="kind")]


class RunResult(StrictModel):
    """The run's result (schema ``dftune.run/1``): what ``dftune run|resume|approve|replay --json``
    prints and the MCP run tools return, built once from the run's saved state."""

    model_config = ConfigDict(extra="forbid", populate_by_name=True)
    schema_: Literal["dftune.run/1"] = Field(default="dftune.run/1", alias="schema")
    run_id: str
    status: RunStatus
    status_reason: str = ""
    workload: str = ""
    #: the spec the run was started from (the file a person fixes when the baseline cannot run)
    spec_path: str = ""
    #: in the order ``dftune approve`` answers them
    pending: list[PendingItem] = Field(default_factory=list)
    proposal_table: list[ProposalRow] = Field(default_factory=list)
    verdicts: list[VerdictRow] = Field(default_factory=list)
    refused: list[RefusedRow] = Field(default_factory=list)
    kb_records: list[int] = Field(default_factory=list)
    #: report.md, once the run wrote it
    report: str | None = None
    #: the kept configuration as a folder (docs/bundle.md), once the run kept something
    bundle: str | None = None
    #: the run's own check of its bundle from a copy (Verification.line), when it made one
    bundle_check: str | None = None
    kb_skill: str | None = None
    baseline_median: float | None = None
    best_median: float | None = None
    run_dir: str
    #: None when the run's archived spec cannot be read
    metric: MetricInfo | None = None
    #: the program's own levers the run drafted (None: the spec declared its knobs)
    levers: Levers | None = None

    def document(self) -> dict[str, Any]:
        """The JSON document (the keys as the docs describe them)."""
        return self.model_dump(mode="json", by_alias=True)
