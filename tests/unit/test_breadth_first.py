"""Breadth before depth within a small experiment budget (scripted run states): a knob not measured
yet goes before another value of a measured one at an equal estimate, never before a higher one."""

from __future__ import annotations

from typing import Any

from dftune.agents.optimizer.search import breadth_first, cheaper_layers_first, winning_levers_first
from dftune.agents.reasoner import rank_key
from dftune.core.domain.experiments import Experiment
from dftune.core.domain.measurements import Measurement
from dftune.core.domain.proposals import Change, Proposal
from dftune.core.domain.run import TuningState


def _p(pid: str, score: float, order: int, status: str = "proposed") -> Proposal:
    knob, value = pid.split("=")
    return Proposal(
        id=pid,
        strategy="l1.dataloader_workers" if knob == "THREADS" else "l1.background_prefetch",
        strategy_name="s",
        layer="L1",
        checklist=6 if knob == "THREADS" else 3,
        description=pid,
        change=Change(kind="knob", settings={knob: value}),
        app_impact_pct=score,
        system_impact_pct=score,
        app_impact_source="trace model",
        order=order,
        status=status,  # type: ignore[arg-type]
    )


def _m(**settings: Any) -> Measurement:
    return Measurement(
        settings=settings,
        values=[1.0] * 5,
        median=1.0,
        ci95=None,
        ok=5,
        replicates=5,
        traced=False,
        workdir="/x",
    )


def _exp(n: int, pid: str, verdict: str, kept: bool = False, voided_by: int | None = None) -> Experiment:
    return Experiment(
        iteration=n,
        proposal_id=pid,
        strategy="s",
        reference=_m(),
        verdict=verdict,  # type: ignore[arg-type]
        kept=kept,
        voided_by=voided_by,
    )


def _state(proposals: list[Proposal], experiments: list[Experiment]) -> TuningState:
    return TuningState(
        run_id="r", spec_path="/x", proposals=proposals, experiments=experiments, incumbent=_m()
    )


def _pick(options: list[Proposal]) -> str:
    """What the rules policy chooses among ``options`` (its ranking)."""
    return sorted(options, key=rank_key)[0].id


def test_an_untried_knob_goes_before_a_further_value_at_an_equal_estimate() -> None:
    """The sample reader's run: 2 threads measured no gain under load; 4 threads and a prefetch
    depth of 2 share the trace model's estimate (both capped by the 2 cores), and the plan's order
    put the threads first, so the budget ended before prefetching (the sweep's largest lever)."""
    ps = [_p("THREADS=2", 20, 1, "measured"), _p("THREADS=4", 20, 2), _p("PREFETCH=2", 20, 3)]
    state = _state(ps, [_exp(1, "THREADS=2", "no_change")])
    options = [p for p in ps if p.status == "proposed"]
    assert _pick(options) == "THREADS=4"  # what the ranking alone does
    assert _pick(breadth_first(options, state)) == "PREFETCH=2"


def test_also_after_the_knob_won() -> None:
    ps = [_p("THREADS=2", 20, 1, "measured"), _p("THREADS=4", 20, 2), _p("PREFETCH=2", 20, 3)]
    state = _state(ps, [_exp(1, "THREADS=2", "win", kept=True)])
    assert [p.id for p in breadth_first(ps[1:], state)] == ["PREFETCH=2"]


def test_a_higher_estimate_goes_first_only_for_a_knob_that_won() -> None:
    ps = [_p("THREADS=2", 20, 1, "measured"), _p("THREADS=4", 30, 2), _p("PREFETCH=2", 20, 3)]
    won = _state(ps, [_exp(1, "THREADS=2", "win", kept=True)])
    assert _pick(breadth_first(ps[1:], won)) == "THREADS=4"
    # a flat response measured outweighs the estimate: the untried knob first (it only waits)
    flat = _state(ps, [_exp(1, "THREADS=2", "no_change")])
    assert [p.id for p in breadth_first(ps[1:], flat)] == ["PREFETCH=2"]


def test_only_further_values_left_are_all_offered() -> None:
    ps = [_p("THREADS=2", 20, 1, "measured"), _p("THREADS=4", 20, 2)]
    state = _state(ps, [_exp(1, "THREADS=2", "no_change")])
    assert [p.id for p in breadth_first(ps[1:], state)] == ["THREADS=4"]


def test_a_voided_experiment_did_not_measure_its_knob() -> None:
    """Measured on top of a change a person refused: it says nothing about the knob here."""
    ps = [_p("THREADS=2", 20, 1, "measured"), _p("THREADS=4", 20, 2), _p("PREFETCH=2", 20, 3)]
    state = _state(ps, [_exp(1, "THREADS=2", "win", voided_by=2)])
    assert {p.id for p in breadth_first(ps[1:], state)} == {"THREADS=4", "PREFETCH=2"}


def _stage(score: float, source: str = "trace model") -> Proposal:
    return Proposal(
        id="l3.stage_shm",
        strategy="l3.stage_shm",
        strategy_name="stage",
        layer="L3",
        checklist=12,
        description="stage the data set",
        change=Change(kind="stage"),
        app_impact_pct=score,
        system_impact_pct=4 * score,  # a faster tier multiplies bandwidth: never compared
        app_impact_source=source,  # type: ignore[arg-type]
        order=9,
    )


def test_a_system_change_waits_while_a_workload_setting_is_estimated_at_over_half_of_it() -> None:
    """The batch loader's run: staging (estimated 20%) went before the loader's own prefetching (11%),
    and once the data sat in memory prefetching measured +3% where alone it gave +31%."""
    options = [_stage(20.5), _p("AHEAD=2", 10.9, 1), _p("THREADS=2", 10.9, 0)]
    assert [p.id for p in cheaper_layers_first(options)] == ["AHEAD=2", "THREADS=2"]
    assert _pick(cheaper_layers_first(options)) == "THREADS=2"


def test_a_system_change_goes_first_when_it_is_estimated_at_over_twice_the_rest() -> None:
    options = [_stage(30.0), _p("AHEAD=2", 10.0, 1)]
    assert _pick(cheaper_layers_first(options)) == "l3.stage_shm"


def test_a_measured_or_known_system_change_is_never_held_back() -> None:
    for source in ("kb", "measured"):
        options = [_stage(5.0, source), _p("AHEAD=2", 10.0, 1)]
        assert {p.id for p in cheaper_layers_first(options)} == {"l3.stage_shm", "AHEAD=2"}


def test_only_system_changes_left_are_all_options() -> None:
    assert [p.id for p in cheaper_layers_first([_stage(1.0)])] == ["l3.stage_shm"]


def test_a_knob_that_won_goes_on_before_one_that_lost() -> None:
    """The pool reader's run: a 64 KiB buffer regressed, two threads won; the trace model still
    estimates a 1 MiB buffer highest, yet the next step is four threads."""
    ps = [
        _p("PREFETCH=64", 40, 1, "measured"),
        _p("THREADS=2", 20, 2, "measured"),
        _p("PREFETCH=1024", 45, 3),
        _p("THREADS=4", 20, 4),
    ]
    state = _state(ps, [_exp(1, "PREFETCH=64", "regression"), _exp(2, "THREADS=2", "win", kept=True)])
    options = [p for p in ps if p.status == "proposed"]
    assert _pick(options) == "PREFETCH=1024"  # what the estimates alone do
    assert [p.id for p in winning_levers_first(options, state)] == ["THREADS=4"]
    # with no winning knob, nothing waits
    flat = _state(ps, [_exp(1, "PREFETCH=64", "regression"), _exp(2, "THREADS=2", "no_change")])
    assert len(winning_levers_first(options, flat)) == 2
