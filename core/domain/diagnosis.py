"""What a diagnosis says: the fired rules with their strategies, the metric, the gate, the checklist.

``tools/diagnose`` builds a :class:`Diagnosis` from a trace's analysis (rules as data); the run's
state, the reports and the MCP tools read it as this one typed record.
"""

from __future__ import annotations

from typing import Any, Literal

from pydantic import BaseModel, ConfigDict, Field

from dftune.core.vocabulary import Category

SCHEMA = "dftune.diagnosis/1"
#: Where time that may be I/O (though no traced I/O call shows it) comes from.
PossibleSource = Literal["mpi-collectives", "app-waits", "stdout-metric", "library-time"]


class _Model(BaseModel):
    model_config = ConfigDict(extra="forbid")


class Finding(_Model):
    """A rule that fired: one bottleneck with its evidence."""

    id: str
    name: str
    category: Category
    score: int
    severity_value: float
    view: str
    evidence: str
    rule_source: str
    provenance: str
    citation: str | None = None
    rows: list[dict[str, Any]] = []


class PossiblyIo(_Model):
    """Time that may be I/O although no traced I/O call shows it, and where that comes from."""

    source: PossibleSource
    time_s: float
    #: share of the time it is compared with (the ranks' process time, the run's wall time)
    fraction: float
    evidence: str


class SetApart(_Model):
    """I/O of one path class the diagnosis does not judge, with why."""

    path_class: str
    files: int
    read_count: int
    read_bytes: int
    write_count: int
    write_bytes: int
    metadata_count: int
    io_time_s: float
    example: str | None = None
    why: str


class HelperProcess(_Model):
    """A process that does none of the application's I/O (a shell wrapper, shim, launcher or short
    child): left out of the I/O fraction, imbalance and stragglers, listed here with why."""

    host: str
    pid: int | None
    cmd: str | None
    events: int
    lifetime_s: float
    io_time_s: float
    bytes: int
    why: str


class RunInfo(_Model):
    """One run of the traces: processes alive together (see docs/analyze.md, "What each number means")."""

    index: int
    runs: int
    hosts: list[str]
    processes: int
    app_processes: int
    helper_processes: int
    start_us: int | None
    end_us: int | None
    span_s: float
    commands: list[str]
    #: why it is a separate run from the one before it (None for the first)
    apart: str | None = None


class MetricChoice(_Model):
    metric: str
    rationale: str
    dominant: list[str] = []


class Gate(_Model):
    """Whether tuning I/O can pay off here, and which layers are worth trying."""

    worth_tuning: bool
    io_fraction: float
    min_io_fraction: float
    shape: str
    allowed_layers: list[str]
    reason: str
    #: time the trace cannot show as I/O that may be I/O (MPI collectives, the program's own waits)
    possibly_io: list[PossiblyIo] = []
    #: the run went on although the gate said no (``dftune run --force``)
    forced: bool = False


class FsSummary(_Model):
    path: str
    fs_type: str
    mount_point: str | None = None
    warning: str | None = None


class CandidateStrategy(_Model):
    id: str
    layer: str
    checklist: int
    description: str = ""
    #: a verified citation backs it; uncited candidates stay UNSUPPORTED until the
    #: literature search finds one (dftracer-io-optimization skill: no proposal is applied without a citation)
    cited: bool = False


class Bottleneck(Finding):
    """A fired rule (:class:`rules.Finding`) with the strategies that could address it."""

    candidates: list[CandidateStrategy] = Field(default_factory=list)


class ChecklistEntry(_Model):
    number: int
    category: str
    verdict: str
    reason: str
    strategies: list[str] = []


class Diagnosis(_Model):
    schema_: str = Field(SCHEMA, alias="schema")
    trace_files: int
    events: int
    bottlenecks: list[Bottleneck]
    category_scores: dict[str, int]
    metric: MetricChoice
    fs_type: str
    data_dirs: list[FsSummary] = []
    io_fraction: float
    shape: str
    shape_reason: str
    worth_tuning: bool
    gate: Gate
    checklist: list[ChecklistEntry]
    #: the application's processes judged here, and the helpers left out (listed, not hidden)
    app_processes: int = 0
    helper_processes: list[HelperProcess] = []
    run: RunInfo | None = None
    warnings: list[str] = []
    #: I/O the diagnosis does not judge (system paths, the runtime's start-up reads), with why
    set_apart: list[SetApart] = []
    notes: list[str] = []
    model_config = ConfigDict(extra="forbid", populate_by_name=True)

    def to_json_dict(self) -> dict[str, Any]:
        return self.model_dump(by_alias=True, mode="json")
