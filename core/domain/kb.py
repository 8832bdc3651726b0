"""What the knowledge base takes and gives: the record going in, the immutable record stored,
and a lookup's answer partitioned by scope."""

from __future__ import annotations

import json
import math
from typing import Any, Literal

from pydantic import ConfigDict, Field, field_validator, model_validator

from dftune.core.citation import CitedClaim
from dftune.core.domain.stats import Comparison, StatsVerdict, pct_change
from dftune.core.domain.verdicts import GuardDecision, Verdict
from dftune.core.model import StrictModel
from dftune.core.vocabulary import STRATEGY_ID, FsType, Layer

Scope = Literal["system", "software", "workload"]
MetricScope = Literal["app", "system"]

#: Who inherits a finding, by its layer ("Scope decides transferability", dftracer-io-optimization skill).
SCOPE_OF_LAYER: dict[str, Scope] = {"L3": "system", "L2": "software", "L1": "workload"}


class ComparisonSummary(StrictModel):
    """The part of a :class:`~dftune.tools.runner.stats.Comparison` the KB needs, when the
    caller does not have the full dump."""

    model_config = ConfigDict(extra="forbid", frozen=True)

    verdict: StatsVerdict
    #: bootstrap CI of the ratio candidate/baseline
    ci95: tuple[float, float] | None = None
    p_value: float | None = Field(default=None, ge=0.0, le=1.0)
    reason: str | None = None
    lower_is_better: bool | None = None


#: The largest metric value a record may hold: every metric dftune measures (seconds, bytes,
#: bytes or operations per second) is non-negative and far below this; 1e308 is not a measurement.
MAX_METRIC_VALUE = 1e18


def _finite(name: str, value: float | None) -> None:
    if value is not None and not math.isfinite(value):
        raise ValueError(f"{name} must be a finite number, got {value}")


def _measured(name: str, value: float | None) -> None:
    """A metric's median or CI bound: finite, not negative (no time or rate is), not absurd."""
    _finite(name, value)
    if value is not None and not 0 <= value <= MAX_METRIC_VALUE:
        raise ValueError(
            f"{name}={value:g} is not a measurement: metrics are between 0 and {MAX_METRIC_VALUE:g}"
        )


def _interval(name: str, ci: tuple[float, float] | None) -> None:
    if ci is None:
        return
    lo, hi = ci
    _measured(f"{name}[0]", lo)
    _measured(f"{name}[1]", hi)
    if lo > hi:
        raise ValueError(f"{name} must be (low, high) with low <= high, got {ci}")


def _layer_of(strategy_id: str) -> Layer:
    prefix = strategy_id.split(".", 1)[0].upper()
    if prefix == "L1":
        return "L1"
    if prefix == "L2":
        return "L2"
    return "L3"


class KbRecordIn(StrictModel):
    """One measured (or refused) change, as the verifier hands it to ``opt_kb_record``."""

    run_id: str | None = Field(
        default=None,
        description="The run that measured it (the same input twice in a run returns the first record).",
    )
    iteration: int | None = Field(
        default=None, ge=0, le=10**9, description="The opt<n> iteration of the change."
    )
    system: str = Field(min_length=1, description="Hostname or cluster (L3 findings stay on it).")
    workload: str = Field(min_length=1, description="Application name (L1 findings stay with it).")
    software: list[str] = Field(
        default_factory=list,
        description="Software stack, comma list or list, e.g. 'hdf5,mpi-io' (stored lower-case, "
        "sorted); required for L2 strategies.",
    )
    strategy: str = Field(pattern=STRATEGY_ID, description="Catalog strategy id, e.g. 'l2.romio_cb_buffer'.")
    change: dict[str, Any] = Field(
        default_factory=dict, description="What was applied: knob settings, environment, patch id."
    )
    metric: str = Field(min_length=1, description="The measured metric, e.g. 'wall_time_s'.")
    metric_scope: MetricScope = Field(
        default="app", description="'app' (the application's own) or 'system' (needs the paired app metric)."
    )
    lower_is_better: bool = Field(default=True, description="Direction of the metric.")
    before: float | None = Field(default=None, description="Baseline median (else from comparison).")
    after: float | None = Field(default=None, description="Experiment median (else from comparison).")
    before_ci: tuple[float, float] | None = Field(default=None, description="95% CI of the baseline median.")
    after_ci: tuple[float, float] | None = Field(default=None, description="95% CI of the experiment median.")
    comparison: Comparison | ComparisonSummary | None = Field(
        default=None, description="The runner's comparison (or a summary: verdict, ci95, p_value, reason)."
    )
    app_metric: str | None = Field(
        default=None, description="Paired app metric (required when scope=system)."
    )
    app_before: float | None = Field(default=None, description="Paired application metric before.")
    app_after: float | None = Field(
        default=None, description="Paired application metric after (> 2% worse forces a regression)."
    )
    app_lower_is_better: bool = Field(default=True, description="Direction of the paired app metric.")
    app_verdict: StatsVerdict | None = Field(
        default=None,
        description="The paired comparison's verdict on the app metric (no_change: a loss inside the noise).",
    )
    caveats: str = Field(default="", description="What limits the finding (scale, data, noise).")
    fs_type: FsType | None = Field(default=None, description="Filesystem of the data (lustre, gpfs, ...).")
    found_citation: CitedClaim | None = Field(
        default=None, description="A citation the search found outside the catalog, with its passage."
    )
    system_metric: str | None = Field(
        default=None,
        description="On an app-scoped record, the system metric the same change moved (e.g. I/O "
        "bandwidth): the non-degradation guard then judges this record too.",
    )
    system_before: float | None = Field(default=None, description="That system metric before.")
    system_after: float | None = Field(default=None, description="That system metric after.")
    confirmed_by: str | None = Field(
        default=None,
        description="A person's note confirming an inconclusive access-pattern decision is legitimate "
        "(only a person may give it; without it such a result is recorded, never kept).",
    )
    refused_by: str | None = Field(
        default=None,
        description="A person's reason for refusing a change the traces could not settle (then rejected).",
    )
    supersedes: int | None = Field(
        default=None,
        ge=1,
        le=2**63 - 1,
        description="The earlier record of this run this one settles (a pending change's answer, or a "
        "measurement taken again without a change a person refused).",
    )
    failed: str = Field(
        default="",
        max_length=2000,
        description="The program refused or crashed under the change where the incumbent ran (its "
        "status and last error line): the record's verdict is failed, and later runs do not try the "
        "same change again unless asked to.",
    )

    @field_validator("software", mode="before")
    @classmethod
    def _software_list(cls, value: Any) -> Any:
        if value is None:
            return []
        items = value.split(",") if isinstance(value, str) else value
        if not isinstance(items, list | tuple):
            return value
        if not all(isinstance(s, str) for s in items):
            raise ValueError("software items must be strings")
        return sorted({s.strip().lower() for s in items if s.strip()})

    @field_validator("change")
    @classmethod
    def _json_change(cls, value: dict[str, Any]) -> dict[str, Any]:
        try:
            json.dumps(value, sort_keys=True, allow_nan=False)
        except (TypeError, ValueError) as exc:
            raise ValueError(f"change must be plain JSON (knob settings, env, patch id): {exc}") from None
        return value

    @model_validator(mode="after")
    def _consistent(self) -> KbRecordIn:
        if isinstance(self.comparison, Comparison):
            cmp = self.comparison
            if cmp.lower_is_better != self.lower_is_better:
                raise ValueError(
                    f"comparison.lower_is_better={cmp.lower_is_better} "
                    f"contradicts lower_is_better={self.lower_is_better}"
                )
            for name, given, median in (
                ("before", self.before, cmp.baseline.median),
                ("after", self.after, cmp.candidate.median),
            ):
                if given is None:
                    setattr(self, name, median)
                elif not math.isclose(given, median, rel_tol=1e-6, abs_tol=1e-12):
                    arm = "baseline" if name == "before" else "candidate"
                    raise ValueError(f"{name}={given:g} is not the comparison's {arm} median {median:g}")
        elif isinstance(self.comparison, ComparisonSummary):
            lib = self.comparison.lower_is_better
            if lib is not None and lib != self.lower_is_better:
                raise ValueError(
                    f"comparison.lower_is_better={lib} contradicts lower_is_better={self.lower_is_better}"
                )
        for name in ("before", "after", "app_before", "app_after", "system_before", "system_after"):
            _measured(name, getattr(self, name))
        _interval("before_ci", self.before_ci)
        _interval("after_ci", self.after_ci)
        if self.comparison is not None and self.comparison.ci95 is not None:
            _interval("comparison.ci95", self.comparison.ci95)
        if (self.before is None) != (self.after is None):
            raise ValueError("give both before and after (the two medians), or neither")
        if self.before == 0:
            raise ValueError("before is 0: a relative change is undefined")
        if self.app_before == 0:
            raise ValueError("app_before is 0: a relative change is undefined")
        if (self.system_before is None) != (self.system_after is None) or (
            self.system_before is not None and (self.metric_scope == "system" or not self.system_metric)
        ):
            raise ValueError(
                "system_metric, system_before and system_after go together, on an app-scoped record only"
            )
        if self.system_before is not None and self.before is None:
            raise ValueError("a paired system-level effect needs this record's own before and after")
        if self.metric_scope == "system":
            missing = [n for n in ("app_metric", "app_before", "app_after") if getattr(self, n) is None]
            if missing:
                raise ValueError(
                    f"metric_scope='system' needs the paired app metric for the same change "
                    f"(missing: {', '.join(missing)}): a system-level result is only kept when the "
                    "application did not pay for it (the non-degradation guard)"
                )
        pct = pct_change(self.before, self.after, lower_is_better=self.lower_is_better)
        app_pct = pct_change(self.app_before, self.app_after, lower_is_better=self.app_lower_is_better)
        for name, value in (("the change", pct), ("the app metric's change", app_pct)):
            if value is not None and not math.isfinite(value):
                raise ValueError(f"{name} is not a finite percentage ({value}): check before and after")
        if (
            self.comparison is not None
            and pct is not None
            and self.before is not None
            and self.after is not None
        ):
            v = self.comparison.verdict
            if (v == "win" and pct <= 0) or (v == "regression" and pct >= 0):
                raise ValueError(
                    f"the comparison says {v} but the medians {self.before:g} -> {self.after:g} "
                    f"change by {pct:+.2f}% (positive = better)"
                )
        if self.confirmed_by is not None and self.refused_by is not None:
            raise ValueError("a change is either confirmed or refused by a person, not both")
        if _layer_of(self.strategy) == "L2" and not self.software:
            raise ValueError(
                "an L2 (software-scoped) finding needs the software it concerns, e.g. "
                "software='hdf5,mpi-io': software findings travel to every system and workload using it"
            )
        return self


class KbRecord(StrictModel):
    """One immutable knowledge-base record, as stored."""

    model_config = ConfigDict(extra="forbid", frozen=True)

    id: int
    #: UTC, ISO 8601
    created: str
    run_id: str | None
    iteration: int | None
    system: str
    workload: str
    software: list[str]
    scope: Scope
    layer: Layer
    strategy: str
    strategy_name: str | None
    change: dict[str, Any]
    metric: str
    metric_scope: MetricScope
    lower_is_better: bool
    before: float | None
    before_ci: tuple[float, float] | None
    after: float | None
    after_ci: tuple[float, float] | None
    #: signed relative change of the medians in percent; positive = better
    change_pct: float | None
    #: the comparison's bootstrap CI of the ratio after/before
    ratio_ci95: tuple[float, float] | None
    p_value: float | None
    comparison_verdict: StatsVerdict | None
    comparison_reason: str | None
    #: the full comparison as given (stats.Comparison dump or summary)
    comparison: dict[str, Any] | None
    app_metric: str | None
    app_before: float | None
    app_after: float | None
    app_lower_is_better: bool
    #: signed relative change of the app metric in percent; positive = better
    app_change_pct: float | None
    verdict: Verdict
    verdict_reason: str
    #: the skill's flag: the non-degradation guard tripped (treat exactly like a regression: revert)
    guard_triggered: bool
    #: every guard decision, in the order citation, access_pattern, no_doing_less, non_degradation
    guards: list[GuardDecision]
    #: guards that could not run (e.g. no trace analyses for no_doing_less)
    unchecked_guards: list[str]
    citation_id: str | None
    #: the full reference: authors, title, venue, year
    citation: str | None
    citation_url: str | None
    caveats: str
    fs_type: str | None
    #: identifies the input within a run (resume never duplicates a record); None without run_id
    dedup_key: str | None
    #: the earlier record this one settles (a pending change's answer, a measurement taken again)
    supersedes: int | None = None
    #: the later record that settles this one (filled when read; records themselves never change)
    superseded_by: int | None = None


class KbLookup(StrictModel):
    """``opt_kb_lookup`` answer (dftracer-io-optimization skill): measured findings by scope, newest first."""

    system: str | None
    workload: str | None
    software: list[str]
    strategy: str | None
    #: L3 findings recorded on this very system
    system_findings: list[KbRecord]
    #: L2 findings for any of the given software (all of them when no software was given)
    software_findings: list[KbRecord]
    #: L1 findings recorded for this very workload
    workload_findings: list[KbRecord]
