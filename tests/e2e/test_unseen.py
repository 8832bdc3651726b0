"""Workloads dftune was not written for (tests/e2e/unseen): interacting knobs, a decoy, and knobs
that secretly do less or change the access pattern under legitimate strategy ids.

A 5-experiment autonomous run, followed by a person answering its pending questions truthfully,
must keep no disguised knob, stop every disguised knob it tries with a measuring guard (or hold it
as a pending question the person then refuses), label every number of its
proposal table, and end faster than it started. How close it gets to the best configuration an
exhaustive sweep finds is measured by ``benchmarks/bench_tuning.py``, not here.
"""

from __future__ import annotations

import tomllib
from pathlib import Path

import pytest

from dftune.core.domain.run import TuningState
from dftune.graphs.runs import approve_run, load_state, start_run
from dftune.tools.session.workspace import Workspace

# one xdist worker runs the module: its module fixture (real runs, traced) is then made once,
# not once on each worker that receives one of its tests
pytestmark = [pytest.mark.e2e, pytest.mark.xdist_group("unseen")]
UNSEEN = Path(__file__).parent / "unseen"
WORKLOADS = sorted(UNSEEN.glob("*/workload.toml"))
SOURCES = {"measured", "kb", "trace model", "model", "n/a"}
MEASURING = {"no_doing_less", "access_pattern"}


def truth(toml: Path) -> dict[str, object]:
    return tomllib.loads((toml.parent / "truth.toml").read_text())


def _setting(p_settings: dict[str, str]) -> str:
    ((k, v),) = p_settings.items()
    return f"{k}={v}"


@pytest.fixture(scope="module", params=WORKLOADS, ids=[p.parent.name for p in WORKLOADS])
def tuned(
    request: pytest.FixtureRequest, tmp_path_factory: pytest.TempPathFactory
) -> tuple[Path, TuningState]:
    toml: Path = request.param
    home = tmp_path_factory.mktemp(toml.parent.name)
    mp = pytest.MonkeyPatch()
    mp.setenv("DFTUNE_HOME", str(home))
    try:
        ws = Workspace()
        result = start_run(toml, mode="autonomous", max_experiments=5, replicates=3, workspace=ws)
        disguised = set(truth(toml)["disguised"])  # type: ignore[arg-type]
        for _ in range(20):  # the morning: each pending question answered truthfully
            waiting = result.pending
            if not waiting or waiting[0].kind != "confirm_pending":
                break
            refuse = _setting(waiting[0].settings) in disguised
            why = "the truth of the workload"
            result = approve_run(result.run_id, reject=refuse, reason=why, workspace=ws)
        state = load_state(result.run_id, ws)
    finally:
        mp.undo()
    return toml, state


def test_the_run_completes_and_ends_faster(tuned: tuple[Path, TuningState]) -> None:
    _, state = tuned
    assert state.status == "completed", state.status_reason
    assert sum(e.voided_by is None for e in state.experiments) == 5  # re-measured ones replace voided ones
    assert any(e.kept for e in state.experiments), [(e.proposal_id, e.verdict) for e in state.experiments]
    assert state.incumbent is not None and state.baseline is not None
    assert state.incumbent.median < state.baseline.median  # type: ignore[operator]


def test_no_disguised_knob_is_kept(tuned: tuple[Path, TuningState]) -> None:
    toml, state = tuned
    disguised = set(truth(toml)["disguised"])  # type: ignore[arg-type]
    assert state.incumbent is not None
    kept = {f"{k}={v}" for k, v in state.incumbent.settings.items()}
    assert not kept & disguised, kept & disguised
    for e in state.experiments:
        p = state.proposal(e.proposal_id)
        if p.change.kind == "knob" and _setting(p.change.settings) in disguised:
            assert not e.kept and e.verdict in ("rejected", "inconclusive"), (e.proposal_id, e.verdict)
            assert e.refused_by is None or e.verdict == "rejected"  # held as a question, then refused


def test_every_disguised_knob_tried_is_stopped_by_a_measuring_guard(tuned: tuple[Path, TuningState]) -> None:
    toml, state = tuned
    disguised = set(truth(toml)["disguised"])  # type: ignore[arg-type]
    for e in state.experiments:
        p = state.proposal(e.proposal_id)
        if p.change.kind != "knob" or _setting(p.change.settings) not in disguised:
            continue
        stops = [
            g.decision
            for g in state.guard_decisions
            if g.iteration == e.iteration
            and g.decision.guard in MEASURING
            and (not g.decision.passed or g.decision.verdict == "inconclusive")
        ]
        assert stops, (
            e.proposal_id,
            [g.decision for g in state.guard_decisions if g.iteration == e.iteration],
        )
        assert any(ch.isdigit() for ch in stops[0].reason), stops[0].reason  # the numbers, not a declaration


def test_every_number_of_the_table_says_where_it_came_from(tuned: tuple[Path, TuningState]) -> None:
    _, state = tuned
    for p in state.proposals:
        assert p.app_impact_source in SOURCES and p.system_impact_source in SOURCES
        if p.status == "measured":
            assert p.app_impact_source == "measured"
        elif p.status == "proposed":
            assert p.app_impact_source in ("trace model", "kb") and p.impact_reason
            assert p.system_impact_source != "n/a" or p.system_reason.startswith("n/a")
