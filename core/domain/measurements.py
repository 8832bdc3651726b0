"""One measured condition (an arm): its replicate values, its trace, its data folder, its staging.

The baseline and every experiment's two arms are measured alike (agents/measure.py) and kept
as :class:`Measurement` records in the state; :class:`Coverage` says which replicates a
diagnosis pass covered.
"""

from __future__ import annotations

from typing import Any, Literal

from pydantic import ConfigDict, Field

from dftune.core.model import StrictModel

Tier = Literal["shm", "local"]
SHM_ROOT = "/dev/shm"
#: Share of node memory a tmpfs stage may take (node-local tier guides: SHM <= 20% of node memory).
SHM_SHARE = 0.20


class StagePlan(StrictModel):
    """Where an arm stages its data set: the tier and the folder the fresh copies go under."""

    model_config = ConfigDict(extra="forbid", frozen=True)
    tier: Tier
    root: str = SHM_ROOT
    shm_share: float = Field(default=SHM_SHARE, gt=0, le=1)


class Measurement(StrictModel):
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


class Coverage(StrictModel):
    """Which units a diagnosis pass covered (partial baselines, dftracer-io-optimization skill)."""

    units_total: int
    units_included: list[str]
    units_pending: list[str] = Field(default_factory=list)
    units_failed: list[str] = Field(default_factory=list)

    @property
    def partial(self) -> bool:
        return bool(self.units_pending or self.units_failed)
