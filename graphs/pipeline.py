"""The tuning graph: five agents, the guard nodes, approvals, and the KB record node.

    installer -> diagnoser -> plan -> literature -> expand (a
    model's own proposals) -> screen -> estimate -> record
    record -> settle (a person's answers to changes pending confirmation) -> choose
    choose -> approval -> apply -> verifier -> judge -> record -> settle -> choose ...
    choose -> finalize (nothing left, or the budget is spent)

``builder`` is the uncompiled graph (tests compile it with their own checkpointer);
``graph`` is compiled without a checkpointer for LangGraph Studio (``langgraph.json``).
"""

from __future__ import annotations

from typing import Literal

from langgraph.graph import END, START, StateGraph

from dftune.agents.context import Context
from dftune.agents.diagnoser import diagnoser
from dftune.agents.installer import installer
from dftune.agents.literature import literature
from dftune.agents.optimizer import apply_change, choose, estimate, plan
from dftune.agents.optimizer.expand import expand
from dftune.agents.verifier import verifier
from dftune.core.domain.run import TuningState
from dftune.graphs.approval import approval
from dftune.graphs.finalize import finalize
from dftune.graphs.guard_nodes import judge, record, screen
from dftune.graphs.pending import settle


def after_installer(state: TuningState) -> Literal["diagnoser", "finalize"]:
    return "finalize" if state.status == "failed" else "diagnoser"


def after_diagnoser(state: TuningState) -> Literal["plan", "finalize"]:
    return "finalize" if state.status in ("failed", "not_worth_tuning") else "plan"


def after_choose(state: TuningState) -> Literal["approval", "finalize"]:
    return "approval" if state.current else "finalize"


def after_approval(state: TuningState) -> Literal["apply", "choose"]:
    return "apply" if state.current else "choose"


def build() -> StateGraph[TuningState, Context, TuningState, TuningState]:
    g = StateGraph(TuningState, context_schema=Context)
    g.add_node("installer", installer)
    g.add_node("diagnoser", diagnoser)
    g.add_node("plan", plan)
    g.add_node("literature", literature)
    g.add_node("expand", expand)
    g.add_node("screen", screen)
    g.add_node("estimate", estimate)
    g.add_node("record", record)
    g.add_node("settle", settle)
    g.add_node("choose", choose)
    g.add_node("approval", approval)
    g.add_node("apply", apply_change)
    g.add_node("verifier", verifier)
    g.add_node("judge", judge)
    g.add_node("finalize", finalize)
    g.add_edge(START, "installer")
    g.add_conditional_edges("installer", after_installer)
    g.add_conditional_edges("diagnoser", after_diagnoser)
    g.add_edge("plan", "literature")
    g.add_edge("literature", "expand")
    g.add_edge("expand", "screen")
    g.add_edge("screen", "estimate")
    g.add_edge("estimate", "record")
    g.add_edge("record", "settle")
    g.add_edge("settle", "choose")
    g.add_conditional_edges("choose", after_choose)
    g.add_conditional_edges("approval", after_approval)
    g.add_edge("apply", "verifier")
    g.add_edge("verifier", "judge")
    g.add_edge("judge", "record")
    g.add_edge("finalize", END)
    return g


builder = build()
graph = builder.compile()


if __name__ == "__main__":  # the drawing docs/architecture.md carries (tests/unit/test_docs.py)
    print(graph.get_graph().draw_mermaid(), end="")
