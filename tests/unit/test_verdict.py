"""The one verdict (tools/kb/verdict.decide): guard precedence, the numbers, and a run's records
agreeing with each other."""

from __future__ import annotations

from typing import Any

import pytest

from dftune.core.domain.verdicts import GuardDecision
from dftune.tools.kb import decide, opt_kb_record
from dftune.tools.runner.stats import compare

BASE = [10.0, 10.1, 9.9, 10.05, 9.95]


def _g(guard: Any, passed: bool, verdict: Any = None, triggered: bool = False) -> GuardDecision:
    return GuardDecision(guard=guard, passed=passed, verdict=verdict, guard_triggered=triggered, reason=guard)


NUMBERS: dict[str, Any] = {
    "metric": "t",
    "before": 10.0,
    "after": 7.0,
    "lower_is_better": True,
    "comparison": compare(BASE, [v * 0.7 for v in BASE]),
}


def test_a_rejecting_guard_beats_a_missing_citation_and_a_big_win() -> None:
    d = decide([_g("citation", False, "unsupported"), _g("access_pattern", False, "rejected")], **NUMBERS)
    assert d.verdict == "rejected" and "access_pattern" in d.reason


def test_a_missing_citation_is_unsupported_whatever_the_numbers() -> None:
    assert decide([_g("citation", False, "unsupported")], **NUMBERS).verdict == "unsupported"


def test_a_tripped_non_degradation_guard_is_a_regression() -> None:
    d = decide([_g("citation", True), _g("non_degradation", False, "regression", True)], **NUMBERS)
    assert d.verdict == "regression" and d.guard_triggered


def test_a_guard_that_did_not_run_does_not_decide() -> None:
    assert decide([_g("no_doing_less", False, None)], **NUMBERS).verdict == "win"


@pytest.mark.parametrize(
    ("factor", "verdict"), [(0.7, "win"), (0.97, "no_change"), (1.0, "no_change"), (1.3, "regression")]
)
def test_the_numbers_decide_when_every_guard_passed(factor: float, verdict: str) -> None:
    cand = [v * factor for v in BASE]
    d = decide(
        [_g("citation", True)],
        metric="t",
        before=10.0,
        after=10.0 * factor,
        lower_is_better=True,
        comparison=compare(BASE, cand),
    )
    assert d.verdict == verdict
    assert d.change_pct == pytest.approx(100 * (1 - factor))


def test_an_app_record_with_a_system_effect_gets_the_same_verdict_as_its_system_record() -> None:
    """The trace bandwidth moved: 3% slower within the noise is no cost (both records say
    no_change); 3% slower beyond the noise is one (both say regression)."""
    common = {
        "run_id": "r",
        "iteration": 1,
        "system": "h",
        "workload": "w",
        "software": "posix",
        "strategy": "l1.dataloader_workers",
        "metric": "wall_time_s",
    }
    for slower, verdict in (
        ([10.3, 10.0, 10.6, 10.1, 10.5], "no_change"),
        ([10.3, 10.31, 10.29, 10.32, 10.3], "regression"),
    ):
        cmp = compare(BASE, slower)
        app = opt_kb_record(
            {
                **common,
                "comparison": cmp,
                "system_metric": "bw",
                "system_before": 100.0,
                "system_after": 130.0,
            }
        )
        system = opt_kb_record(
            {
                **common,
                "metric": "bw",
                "metric_scope": "system",
                "lower_is_better": False,
                "before": 100.0,
                "after": 130.0,
                "app_metric": "wall_time_s",
                "app_before": 10.0,
                "app_after": 10.3,
                "app_verdict": cmp.verdict,
            }
        )
        assert app.verdict == system.verdict == verdict, (cmp.verdict, app.verdict_reason)
        assert app.guard_triggered is system.guard_triggered is (verdict == "regression")


def test_a_system_effect_without_the_records_own_numbers_is_refused() -> None:
    with pytest.raises(ValueError, match="own before and after"):
        opt_kb_record(
            {
                "system": "h",
                "workload": "w",
                "strategy": "l1.dataloader_workers",
                "metric": "t",
                "system_metric": "bw",
                "system_before": 1.0,
                "system_after": 2.0,
            }
        )
