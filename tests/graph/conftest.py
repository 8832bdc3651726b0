"""Graph tests: a fresh SQLite checkpointer and a uuid thread per test, the toy workload."""

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
from dftune.tools.runner.spec import load_spec
from dftune.tools.session.workspace import Workspace

TOY = Path(__file__).parent / "toy" / "workload.toml"


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
    def __init__(self, tmp: Path) -> None:
        self.ws = Workspace()
        self.saver = open_checkpointer(tmp / "checkpoints.sqlite")
        self.graph = builder.compile(checkpointer=self.saver)
        self.thread = str(uuid.uuid4())
        self.config: Any = {"configurable": {"thread_id": self.thread}}
        self.run_id = self.ws.create_run(None, "toy").id

    def state(self, **inputs: Any) -> TuningState:
        return TuningState(run_id=self.run_id, spec_path=str(TOY), **inputs)

    def invoke(self, payload: Any, ctx: Context | None = None) -> dict[str, Any]:
        ctx = ctx or Context(workspace=self.ws)
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
