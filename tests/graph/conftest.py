"""Graph tests: a fresh SQLite checkpointer and a uuid thread per test, scripted measurements.

No graph test starts a workload's program or times anything: every measurement goes through a
:class:`~tests.fakes.measurer.ScriptedMeasurer` that says what each replicate of each arm
measured (and, for traced arms, what the program did), and a start that reaches the real
measurer fails the test. Real programs run in the end-to-end tier (tests/e2e).
"""

from __future__ import annotations

import uuid
from collections.abc import Iterator, Sequence
from pathlib import Path
from typing import Any

import pytest

from dftune.agents.context import Context
from dftune.agents.reasoner import RulesReasoner
from dftune.agents.reasoner.protocol import Choice, Facts
from dftune.core.domain.proposals import Proposal
from dftune.core.domain.run import TuningState
from dftune.graphs.checkpointer import open_checkpointer
from dftune.graphs.pipeline import builder
from dftune.tools.runner.bench import ProcessMeasurer
from dftune.tools.runner.measurer import Invocation
from dftune.tools.runner.spec import load_spec
from dftune.tools.session.workspace import Workspace
from tests.fakes.measurer import Arm, ScriptedMeasurer, steady

TOY = Path(__file__).parent / "toy" / "workload.toml"

#: The toy workload (toy/workload.toml): its work is sleeps of 10 ms, 8 items an epoch, two epochs,
#: spread over WORKERS threads; SLOW=1 adds half an epoch's sleeps to each epoch. What the toy
#: program reports for each condition the graph tests measure (EPOCHS=1, doing less, is refused
#: before it runs, so no arm says what it measured).
TOY_ARMS = (
    Arm({}, steady(0.16)),
    Arm({"WORKERS": 4}, steady(0.04)),
    Arm({"SLOW": 1}, steady(0.24)),
    Arm({"WORKERS": 4, "SLOW": 1}, steady(0.12)),
)


def toy_measurer(*more: Arm) -> ScriptedMeasurer:
    """The toy workload's script, and ``more`` arms (other knob values, L2 settings, patches)."""
    return ScriptedMeasurer([*TOY_ARMS, *more])


@pytest.fixture(autouse=True)
def _no_real_program(monkeypatch: pytest.MonkeyPatch) -> None:
    """A graph test that reaches the real measurer fails: it would time a real program."""

    def refuse(self: ProcessMeasurer, inv: Invocation) -> Any:
        raise AssertionError(
            f"a graph test started {' '.join(inv.argv)} ({inv.label}): give the run a scripted "
            "measurer (tests/fakes/measurer.py); real programs belong to tests/e2e"
        )

    monkeypatch.setattr(ProcessMeasurer, "run", refuse)


def measured_by(monkeypatch: pytest.MonkeyPatch, measurer: ScriptedMeasurer) -> ScriptedMeasurer:
    """For the CLI, which builds the run's context itself: every start made while the test runs
    goes to ``measurer``."""
    monkeypatch.setattr(ProcessMeasurer, "run", lambda self, inv: measurer.run(inv))
    return measurer


class InOrder(RulesReasoner):
    """Stands in for a model's choice: the proposals in a scripted order (the rest after them)."""

    def __init__(self, order: Sequence[str]) -> None:
        self.order = list(order)

    def choose_next(self, options: Sequence[Proposal], facts: Facts) -> Choice:
        ranked = sorted(
            options, key=lambda p: self.order.index(p.id) if p.id in self.order else len(self.order)
        )
        return Choice(proposal_id=ranked[0].id, reason="scripted order")


class Harness:
    def __init__(self, tmp: Path, measurer: ScriptedMeasurer | None = None) -> None:
        self.ws = Workspace()
        self.measurer = measurer or toy_measurer()
        self.saver = open_checkpointer(tmp / "checkpoints.sqlite")
        self.graph = builder.compile(checkpointer=self.saver)
        self.thread = str(uuid.uuid4())
        self.config: Any = {"configurable": {"thread_id": self.thread}}
        self.run_id = self.ws.create_run(None, "toy").id

    def state(self, **inputs: Any) -> TuningState:
        return TuningState(run_id=self.run_id, spec_path=str(TOY), **inputs)

    def context(self, **fields: Any) -> Context:
        """The run's context, measured by the harness's script."""
        return Context(workspace=self.ws, measurer=self.measurer, **fields)

    def invoke(self, payload: Any, ctx: Context | None = None) -> dict[str, Any]:
        ctx = ctx or self.context()
        if ctx.spec is None:  # what graphs.runs does: the run's spec, loaded once
            ctx.spec = load_spec(payload.spec_path if isinstance(payload, TuningState) else TOY)
        return self.graph.invoke(payload, self.config, context=ctx, durability="sync")

    def values(self) -> TuningState:
        v = self.graph.get_state(self.config).values
        return v if isinstance(v, TuningState) else TuningState(**v)


@pytest.fixture
def harness(tmp_path: Path) -> Iterator[Harness]:
    h = Harness(tmp_path)
    yield h
    h.saver.conn.close()
