"""The search within a run: knob values nearest-first from the incumbent, directions that close on
a regression, interacting proposals that come back after a kept change, the KB's prior."""

from __future__ import annotations

from typing import Any

from dftune.agents.optimizer.prior import apply_prior
from dftune.agents.optimizer.search import interactions, reopened, searchable, spare_retries
from dftune.agents.reasoner import RulesReasoner, rank_key
from dftune.core.domain.experiments import Experiment
from dftune.core.domain.measurements import Measurement
from dftune.core.domain.proposals import Change, Proposal
from dftune.core.domain.run import KbPrior, PriorResult, TuningState
from dftune.tools.runner.spec import WorkloadSpec
from dftune.tools.runner.stats import compare

SPEC = WorkloadSpec.model_validate(
    {
        "name": "w",
        "command": ["true"],
        "knobs": [
            {
                "name": "CHUNK",
                "kind": "env",
                "values": [4096, 16384, 65536, 262144, 1048576],
                "default": 16384,
                "strategy": "l1.larger_requests",
            },
            {
                "name": "ASYNC",
                "kind": "env",
                "values": [0, 1],
                "default": 0,
                "strategy": "l1.async_checkpoint",
            },
            {
                "name": "MODE",
                "kind": "env",
                "values": ["a", "b", "c"],
                "default": "a",
                "strategy": "l1.larger_requests",
            },
        ],
    }
)


def _p(pid: str, settings: dict[str, str], checklist: int = 1, **kw: Any) -> Proposal:
    return Proposal(
        id=pid,
        strategy="l1.larger_requests",
        strategy_name="s",
        layer="L1",
        checklist=checklist,
        description=pid,
        change=Change(kind="knob", settings=settings),
        **kw,
    )


def _m(**settings: Any) -> Measurement:
    return Measurement(
        settings=settings,
        values=[1.0, 1.0, 1.0],
        median=1.0,
        ci95=None,
        ok=3,
        replicates=3,
        traced=False,
        workdir="/tmp/x",
    )


def _exp(n: int, pid: str, verdict: str, kept: bool = False) -> Experiment:
    return Experiment(
        iteration=n,
        proposal_id=pid,
        strategy="l1.larger_requests",
        reference=_m(),
        verdict=verdict,
        kept=kept,
    )  # type: ignore[arg-type]


def _chunks(**status: str) -> list[Proposal]:
    return [
        _p(f"CHUNK={v}", {"CHUNK": str(v)}, status=status.get(f"c{v}", "proposed"))  # type: ignore[arg-type]
        for v in (4096, 65536, 262144, 1048576)
    ]


def _state(proposals: list[Proposal], experiments: list[Experiment] = (), **incumbent: Any) -> TuningState:  # type: ignore[assignment]
    return TuningState(
        run_id="r",
        spec_path="/x",
        proposals=proposals,
        experiments=list(experiments),
        incumbent=_m(**incumbent),
    )


def _ids(ps: list[Proposal]) -> list[str]:
    return sorted(p.id for p in ps)


def test_a_knob_offers_the_nearest_value_on_each_side_of_the_incumbent() -> None:
    ps = _chunks()
    assert _ids(searchable(ps, _state(ps), SPEC)) == ["CHUNK=4096", "CHUNK=65536"]


def test_after_a_value_was_measured_the_next_one_that_way_opens() -> None:
    ps = _chunks(c65536="measured")
    state = _state(ps, [_exp(1, "CHUNK=65536", "no_change")])
    assert _ids(searchable([p for p in ps if p.status == "proposed"], state, SPEC)) == [
        "CHUNK=262144",
        "CHUNK=4096",
    ]


def test_after_a_kept_win_the_frontier_moves_with_the_incumbent() -> None:
    ps = _chunks(c65536="measured")
    state = _state(ps, [_exp(1, "CHUNK=65536", "win", kept=True)], CHUNK="65536")
    assert _ids(searchable([p for p in ps if p.status == "proposed"], state, SPEC)) == [
        "CHUNK=262144",
        "CHUNK=4096",
    ]


def test_a_regression_closes_its_direction() -> None:
    ps = _chunks(c65536="measured")
    state = _state(ps, [_exp(1, "CHUNK=65536", "regression")])
    assert _ids(searchable([p for p in ps if p.status == "proposed"], state, SPEC)) == ["CHUNK=4096"]


def test_a_guard_refusal_closes_its_direction_too() -> None:
    ps = _chunks(c4096="measured")
    state = _state(ps, [_exp(1, "CHUNK=4096", "rejected")])
    assert _ids(searchable([p for p in ps if p.status == "proposed"], state, SPEC)) == ["CHUNK=65536"]


def _unsettled(n: int, pid: str, candidate: list[float]) -> Experiment:
    """An experiment the access-pattern guard could not settle, with its real statistics."""
    exp = _exp(n, pid, "inconclusive")
    return exp.model_copy(update={"comparison": compare([1.0, 1.01, 0.99, 1.0, 1.02], candidate)})


def test_an_unsettled_value_without_a_gain_leaves_its_direction_open() -> None:
    """A guard's doubt about CHUNK=65536 says nothing about what 262144 does to the metric."""
    ps = _chunks(c65536="measured")
    state = _state(ps, [_unsettled(1, "CHUNK=65536", [1.0, 1.01, 0.99, 1.01, 1.0])])
    assert state.experiments[0].comparison is not None
    assert state.experiments[0].comparison.verdict == "no_change"
    assert _ids(searchable([p for p in ps if p.status == "proposed"], state, SPEC)) == [
        "CHUNK=262144",
        "CHUNK=4096",
    ]


def test_an_unsettled_value_that_measured_worse_closes_its_direction() -> None:
    ps = _chunks(c65536="measured")
    state = _state(ps, [_unsettled(1, "CHUNK=65536", [1.4, 1.5, 1.45, 1.42, 1.48])])
    assert state.experiments[0].comparison is not None
    assert state.experiments[0].comparison.verdict == "regression"
    assert _ids(searchable([p for p in ps if p.status == "proposed"], state, SPEC)) == ["CHUNK=4096"]


def test_unordered_knobs_and_other_proposals_are_not_gated() -> None:
    ps = [
        _p("MODE=b", {"MODE": "b"}),
        _p("MODE=c", {"MODE": "c"}),
        Proposal(
            id="env",
            strategy="l2.x",
            strategy_name="x",
            layer="L2",
            checklist=11,
            description="",
            change=Change(kind="env", env={"X": "1"}),
        ),
    ]
    assert _ids(searchable(ps, _state(ps), SPEC)) == ["MODE=b", "MODE=c", "env"]


def test_interacting_no_gain_proposals_come_back_after_a_kept_change() -> None:
    asyncw = _p("ASYNC=1", {"ASYNC": "1"}, checklist=4, status="measured")
    other = _p("MODE=b", {"MODE": "b"}, checklist=9, status="measured")
    buf = _p("CHUNK=1048576", {"CHUNK": "1048576"}, checklist=1, status="measured")
    state = _state(
        [asyncw, other, buf],
        [
            _exp(1, "ASYNC=1", "no_change"),
            _exp(2, "MODE=b", "no_change"),
            _exp(3, "CHUNK=1048576", "win", kept=True),
        ],
    )
    back = reopened(state)
    assert [p.id for p in back] == ["ASYNC=1@opt3"]
    assert back[0].status == "proposed" and back[0].retry_of == "ASYNC=1"
    assert "asynchronous writes pay once the writes are large" in back[0].reason
    # once back, not again
    state2 = _state([asyncw, other, buf, back[0]], list(state.experiments))
    assert reopened(state2) == []


def test_nothing_comes_back_after_a_change_that_was_not_kept() -> None:
    asyncw = _p("ASYNC=1", {"ASYNC": "1"}, checklist=4, status="measured")
    buf = _p("CHUNK=1048576", {"CHUNK": "1048576"}, checklist=1, status="measured")
    state = _state([asyncw, buf], [_exp(1, "ASYNC=1", "no_change"), _exp(2, "CHUNK=1048576", "no_change")])
    assert reopened(state) == []


def test_with_nothing_open_every_earlier_no_gain_proposal_comes_back_once() -> None:
    other = _p("MODE=b", {"MODE": "b"}, checklist=9, status="measured")  # not listed with category 1
    worse = _p("MODE=c", {"MODE": "c"}, checklist=9, status="measured")
    small = _p("CHUNK=65536", {"CHUNK": "65536"}, checklist=1, status="measured")
    buf = _p("CHUNK=1048576", {"CHUNK": "1048576"}, checklist=1, status="measured")
    experiments = [
        _exp(1, "MODE=b", "no_change"),
        _exp(2, "MODE=c", "regression"),  # only a no-gain result is measured again
        _exp(3, "CHUNK=65536", "no_change"),  # its knob moved since: the kept value measured it
        _exp(4, "CHUNK=1048576", "win", kept=True),
    ]
    state = _state([other, worse, small, buf], experiments)
    assert reopened(state) == []  # the table lists no interaction of 9 with 1
    (back,) = spare_retries(state)
    assert back.id == "MODE=b@opt4" and back.retry_of == "MODE=b" and back.status == "proposed"
    assert "opt1" in back.reason and "CHUNK=1048576 was kept" in back.reason
    # waiting, or measured against the current incumbent: not again
    assert spare_retries(_state([other, worse, small, buf, back], experiments)) == []
    measured = back.model_copy(update={"status": "measured"})
    again = [*experiments, _exp(5, "MODE=b@opt4", "no_change")]
    assert spare_retries(_state([other, worse, small, buf, measured], again)) == []
    # a later kept change gives it one more, under its first id (CHUNK=65536's knob still moved)
    later = [*again, _exp(6, "ASYNC=1", "win", kept=True)]
    asyncw = _p("ASYNC=1", {"ASYNC": "1"}, checklist=4, status="measured")
    back6 = spare_retries(_state([other, worse, small, buf, measured, asyncw], later))
    assert [p.id for p in back6] == ["MODE=b@opt6"]


def test_nothing_is_spare_before_a_change_was_kept_or_after_a_refusal_voided_it() -> None:
    other = _p("MODE=b", {"MODE": "b"}, checklist=9, status="measured")
    buf = _p("CHUNK=1048576", {"CHUNK": "1048576"}, checklist=1, status="measured")
    assert spare_retries(_state([other, buf], [_exp(1, "MODE=b", "no_change")])) == []
    voided = _exp(2, "CHUNK=1048576", "win", kept=True).model_copy(update={"voided_by": 1})
    assert spare_retries(_state([other, buf], [_exp(1, "MODE=b", "no_change"), voided])) == []


def test_the_interaction_table_is_symmetric_data() -> None:
    t = interactions()
    assert 4 in t.partners(1) and 1 in t.partners(4)
    assert t.partners(12) == {}
    # a chunk cache's size and slots: one category whose settings act together
    assert "rdcc_nslots" in t.partners(2)[2]


def _prior(verdict: str, pct: float | None, incumbent: dict[str, Any] | None = None) -> KbPrior:
    change = {"settings": {"CHUNK": "65536"}, "env": {}, "argv": []}
    if incumbent is not None:
        change["incumbent"] = {"settings": incumbent, "env": {}}
    return KbPrior(
        records=[
            PriorResult(
                id=7,
                strategy="l1.larger_requests",
                verdict=verdict,
                scope="workload",
                change_pct=pct,
                run_id="earlier",
                change=change,
            )
        ]
    )


def test_a_known_win_takes_the_kb_number_and_goes_first() -> None:
    p = apply_prior(_p("CHUNK=65536", {"CHUNK": "65536"}), _prior("win", 12.5), _m(), retry_known=False)
    assert p.app_impact_source == "kb" and p.app_impact_pct == 12.5 and "KB record #7" in p.impact_reason
    guess = _p("CHUNK=4096", {"CHUNK": "4096"}, app_impact_pct=60.0)
    choice = RulesReasoner().choose_next([guess, p], facts=None)  # type: ignore[arg-type]
    assert choice.proposal_id == "CHUNK=65536"


def test_a_known_no_gain_is_not_retried_against_the_same_incumbent() -> None:
    p = apply_prior(_p("CHUNK=65536", {"CHUNK": "65536"}), _prior("no_change", 0.4), _m(), retry_known=False)
    assert p.status == "known" and "--retry-known" in p.reason


def test_a_known_no_gain_is_retried_against_another_incumbent_or_when_asked() -> None:
    other = apply_prior(
        _p("CHUNK=65536", {"CHUNK": "65536"}), _prior("no_change", 0.4), _m(ASYNC="1"), retry_known=False
    )
    assert other.status == "proposed" and "another incumbent" in other.impact_reason
    asked = apply_prior(
        _p("CHUNK=65536", {"CHUNK": "65536"}), _prior("no_change", 0.4), _m(), retry_known=True
    )
    assert asked.status == "proposed"


def test_ties_break_by_layer_then_plan_order_never_by_name() -> None:
    a = _p("CHUNK=262144", {"CHUNK": "262144"}, order=1, app_impact_pct=5.0)
    b = _p("CHUNK=65536", {"CHUNK": "65536"}, order=0, app_impact_pct=5.0)
    c = _p("AAA", {"CHUNK": "4096"}, order=2, app_impact_pct=5.0)
    assert [p.id for p in sorted([a, b, c], key=rank_key)] == ["CHUNK=65536", "CHUNK=262144", "AAA"]
    measured = _p("m", {"CHUNK": "1"}, app_impact_pct=1.0, app_impact_source="measured")
    assert sorted([a, measured], key=rank_key)[0].id == "m"


def test_when_every_direction_is_closed_nothing_is_searchable_and_choose_ends_the_search(
    tmp_path: Any,
) -> None:
    from types import SimpleNamespace

    from dftune.agents.context import Context
    from dftune.agents.optimizer.choose import choose
    from dftune.tools.session.workspace import Workspace

    # 65536 regressed above the incumbent, 4096 was refused below it: the values beyond them wait
    ps = [*_chunks(c65536="measured", c4096="measured"), _p("CHUNK=1024", {"CHUNK": "1024"})]
    ps = [p.model_copy(update={"status": "proposed"}) if p.id == "CHUNK=1024" else p for p in ps]
    state = _state(ps, [_exp(1, "CHUNK=65536", "regression"), _exp(2, "CHUNK=4096", "rejected")])
    spec = SPEC.model_copy(
        update={"knobs": [SPEC.knobs[0].model_copy(update={"values": [1024, *SPEC.knobs[0].values]})]}
    )
    assert searchable([p for p in ps if p.status == "proposed"], state, spec) == []
    ctx = Context(spec=spec, workspace=Workspace(tmp_path))
    update = choose(state, SimpleNamespace(context=ctx))  # type: ignore[arg-type]
    assert update["current"] is None
    assert "the search closed every direction" in update["status_reason"]


def test_the_model_is_asked_to_pace_once_per_measured_experiment(tmp_path: Any) -> None:
    """Not again when choose runs again for the same experiment count (a decline, a resume): tokens."""
    from types import SimpleNamespace

    from dftune.agents.context import Context
    from dftune.agents.optimizer.choose import pace
    from dftune.core.domain.run import Decision, LLMSettings
    from dftune.tools.session.workspace import Workspace

    asked: list[str] = []

    def decide(question: Any, facts: Any) -> Any:
        asked.append(question.name)
        return SimpleNamespace(answer=None, decision=None)

    model = SimpleNamespace(name="openai:gpt-test", settings=LLMSettings(), decide=decide)
    ctx = Context(spec=SPEC, workspace=Workspace(tmp_path), reasoner=model)  # type: ignore[arg-type]
    ps = _chunks(c65536="measured")
    state = _state(ps, [_exp(1, "CHUNK=65536", "no_change")])
    pace(state, ctx)
    assert asked == ["pace"]
    once = Decision(question="pace", reasoner="openai:gpt-test", decided_by="model", answer="continue")
    assert pace(state.model_copy(update={"decisions": [once]}), ctx) is None and asked == ["pace"]


def test_a_system_record_beside_a_win_never_decides_a_retry() -> None:
    """A win records the application's metric and, when it moved the I/O bandwidth, a system
    record beside it (newest first): the second run took that bandwidth record's no_change for
    the change's own and skipped a +46% win. Only the application's record decides."""
    app, system = _prior("win", 46.2).records[0], _prior("no_change", 6.9).records[0]
    prior = KbPrior(records=[system.model_copy(update={"id": 8, "metric_scope": "system"}), app])
    p = apply_prior(_p("CHUNK=65536", {"CHUNK": "65536"}), prior, _m(), retry_known=False)
    assert p.status == "proposed" and p.app_impact_source == "kb" and p.app_impact_pct == 46.2
    assert "KB record #7" in p.impact_reason


def test_a_value_the_kb_measured_a_win_for_need_not_wait_its_turn() -> None:
    """A later run of the same spec: the earlier run kept CHUNK=1048576 (the far end of the
    walk); its KB number makes it triable now, beside the nearest values."""
    ps = _chunks()
    known = apply_prior(ps[3], _prior_for("1048576", 40.0), _m(), retry_known=False)
    ps = [*ps[:3], known]
    assert _ids(searchable(ps, _state(ps), SPEC)) == ["CHUNK=1048576", "CHUNK=4096", "CHUNK=65536"]


def _prior_for(value: str, pct: float) -> KbPrior:
    rec = _prior("win", pct).records[0]
    return KbPrior(
        records=[rec.model_copy(update={"change": {"settings": {"CHUNK": value}, "env": {}, "argv": []}})]
    )
