"""The four guards in front of every KB record, at their edges."""

from __future__ import annotations

from pathlib import Path
from typing import Any

import pytest

from dftune.tools.catalog import default_catalog
from dftune.tools.guards import (
    access_pattern_guard,
    citation_guard,
    no_doing_less_guard,
    non_degradation_guard,
)
from dftune.tools.trace import analyze
from dftune.tools.trace.model import FamilyStats

CAT = default_catalog()
SHARED = Path(__file__).resolve().parents[2].parent / "shared" / "traces"


def test_citation_guard_passes_a_verified_citation_with_url() -> None:
    d = citation_guard("l1.stat_cache")
    assert d.passed and d.details["url"].startswith("http") and d.details["citation"]


@pytest.mark.parametrize(
    "sid", [s.id for s in CAT.strategies.values() if not s.citations and not s.forbidden][:3]
)
def test_citation_guard_marks_uncited_strategies_unsupported(sid: str) -> None:
    d = citation_guard(sid)
    assert not d.passed and d.verdict == "unsupported" and d.reason.startswith("UNSUPPORTED")


def test_citation_guard_unknown_strategy() -> None:
    d = citation_guard("l1.does_not_exist")
    assert not d.passed and "not in the strategy catalog" in d.reason


def test_every_supported_strategy_passes_and_every_unsupported_fails() -> None:
    for sid in CAT.strategies:
        assert citation_guard(sid).passed == CAT.is_supported(sid), sid


@pytest.mark.parametrize(
    ("before", "after", "lower", "passed"),
    [
        (100.0, 102.0, True, True),
        (100.0, 102.1, True, False),
        (100.0, 98.0, False, True),
        (100.0, 97.9, False, False),
        (100.0, 90.0, True, True),
    ],
)
def test_non_degradation_at_the_2_percent_edge(
    before: float, after: float, lower: bool, passed: bool
) -> None:
    d = non_degradation_guard(
        metric_scope="system", app_before=before, app_after=after, lower_is_better=lower
    )
    assert d.passed is passed
    if not passed:
        assert d.verdict == "regression" and d.guard_triggered and "revert" in d.reason


def test_a_loss_inside_the_noise_is_no_cost_and_one_beyond_it_is() -> None:
    """Staging on a zarr job: the application's median 17% worse, p=0.77 - no measured cost."""
    inside = non_degradation_guard(
        metric_scope="system", app_before=10.0, app_after=11.73, app_verdict="no_change"
    )
    assert inside.passed and inside.verdict is None and "inside the noise" in inside.reason
    beyond = non_degradation_guard(
        metric_scope="system", app_before=10.0, app_after=11.73, app_verdict="regression"
    )
    assert not beyond.passed and beyond.verdict == "regression"
    # no comparison at all: the medians decide, as the rule says
    assert not non_degradation_guard(metric_scope="system", app_before=10.0, app_after=11.73).passed


def test_non_degradation_needs_the_paired_app_metric() -> None:
    d = non_degradation_guard(metric_scope="system", app_before=None, app_after=3.0)
    assert not d.passed and d.verdict == "rejected" and "paired app metric" in d.reason
    assert non_degradation_guard(metric_scope="app", app_before=None, app_after=None).passed


def test_access_pattern_guard() -> None:
    assert not access_pattern_guard(CAT.strategies["l1.transfer_size_sweep"]).passed
    assert not access_pattern_guard(CAT.strategies["l1.access_pattern_flip"]).passed
    assert access_pattern_guard(CAT.strategies["l1.read_buffering"]).passed


@pytest.fixture(scope="module")
def baseline() -> Any:
    if not SHARED.is_dir():
        pytest.skip("shared traces not found")
    return analyze([SHARED / "dlio-unet3d-8ranks-legacy"])


def shrunk(a: Any, **changes: Any) -> Any:
    copy = a.model_copy(deep=True)
    for key, value in changes.items():
        target, _, field = key.partition("__")
        if field:
            fam: FamilyStats = getattr(copy, target)
            setattr(fam, field, value)
        else:
            setattr(copy, key, value)
    return copy


def test_same_work_passes(baseline: Any) -> None:
    assert no_doing_less_guard(baseline, baseline).passed


def test_fewer_bytes_is_doing_less_with_the_numbers(baseline: Any) -> None:
    half = shrunk(baseline, read__bytes=baseline.read.bytes // 2)
    d = no_doing_less_guard(baseline, half, strategy=CAT.strategies["l1.dataloader_workers"])
    assert not d.passed and d.verdict == "rejected" and "read bytes" in d.reason and "-50.0%" in d.reason


def test_fewer_epochs_or_checkpoints_is_doing_less(baseline: Any) -> None:
    fewer = shrunk(baseline, epochs=baseline.epochs[:1], checkpoint_events=0)
    d = no_doing_less_guard(baseline, fewer)
    assert not d.passed and "epochs" in d.reason and "checkpoints" in d.reason


def test_tolerance_edge(baseline: Any) -> None:
    b = baseline.read.bytes
    assert no_doing_less_guard(baseline, shrunk(baseline, read__bytes=int(b * 0.995))).passed
    assert not no_doing_less_guard(baseline, shrunk(baseline, read__bytes=int(b * 0.98))).passed


def test_buffering_may_reduce_calls_but_not_bytes(baseline: Any) -> None:
    fewer_calls = shrunk(baseline, read__count=baseline.read.count // 4)
    buffering = CAT.strategies["l1.read_buffering"]
    assert buffering.checklist == 1
    d = no_doing_less_guard(baseline, fewer_calls, strategy=buffering)
    assert d.passed and "as buffering/coalescing allows: read calls" in d.reason
    # the same drop without a coalescing strategy is doing less
    assert not no_doing_less_guard(
        baseline, fewer_calls, strategy=CAT.strategies["l1.dataloader_workers"]
    ).passed


def test_a_doing_less_strategy_is_rejected_whatever_the_trace(baseline: Any) -> None:
    d = no_doing_less_guard(baseline, baseline, strategy=CAT.strategies["l1.fewer_epochs"])
    assert not d.passed and "doing less by definition" in d.reason
