"""Experiments to spare measure again what showed no gain before a change was kept.

The toy loader's persistent pool does nothing without workers, so measured first it shows no
gain; once more workers are kept it saves their start-up in every epoch. The interactions table
does not list a data-loader change with another data-loader change, and the run measures what
the table leaves out rather than assume it away, once nothing else is open.
"""

from __future__ import annotations

from pathlib import Path

from dftune.agents.reasoner import RulesOnly
from dftune.core.domain.run import TuningState
from dftune.tools.runner.spec import load_spec
from tests.fakes.measurer import Arm, ScriptedMeasurer, steady
from tests.graph.conftest import Harness, InOrder

LOADER = Path(__file__).parent / "toy" / "loader.toml"

#: What the loader reports: four epochs of eight items of 10 ms on an epoch's busiest worker, and
#: 5 ms for each worker it starts. One worker runs the items itself (a pool is never started, so
#: keeping it changes nothing); four start a pool every epoch, or once when it persists.
LOADER_ARMS = [
    Arm({}, steady(0.32)),  # 32 items on the one worker
    Arm({"PERSIST": 1}, steady(0.32)),  # no pool to keep
    Arm({"WORKERS": 4}, steady(0.16)),  # 8 items on the busiest worker, 16 workers started
    Arm({"WORKERS": 4, "PERSIST": 1}, steady(0.10)),  # the same items, 4 workers started
]


def _run(harness: Harness, budget: int) -> TuningState:
    harness.measurer = ScriptedMeasurer(LOADER_ARMS)
    ctx = harness.context(spec=load_spec(LOADER), reasoner=RulesOnly(InOrder(["PERSIST=1", "WORKERS=4"])))
    state = TuningState(
        run_id=harness.run_id, spec_path=str(LOADER), mode="autonomous", max_experiments=budget, force=True
    )
    harness.invoke(state, ctx)
    return harness.values()


def _outcome(state: TuningState) -> list[tuple[str, str, bool]]:
    return [(e.proposal_id, e.verdict, e.kept) for e in state.experiments]


def test_a_no_gain_change_is_measured_again_on_top_of_a_later_win(harness: Harness) -> None:
    state = _run(harness, budget=4)
    assert _outcome(state) == [
        ("PERSIST=1", "no_change", False),
        ("WORKERS=4", "win", True),
        ("PERSIST=1@opt2", "win", True),
    ], [e.verdict_reason for e in state.experiments]
    retry = state.proposal("PERSIST=1@opt2")
    assert retry.retry_of == "PERSIST=1" and "experiments to spare" in retry.reason
    assert state.incumbent is not None
    assert {k: str(v) for k, v in state.incumbent.settings.items()} == {"PERSIST": "1", "WORKERS": "4"}
    # one retry per kept change: the win on top of the pool leaves nothing to measure again
    assert state.status == "completed" and len(state.experiments) == 3


def test_no_retry_when_the_budget_is_spent(harness: Harness) -> None:
    state = _run(harness, budget=2)
    assert _outcome(state) == [("PERSIST=1", "no_change", False), ("WORKERS=4", "win", True)]
    assert not any(p.retry_of for p in state.proposals)  # nothing listed as left untried
