"""A win the traces cannot settle is a question for a person, never a silent loss.

The toy writer stages its records in a buffer: the same byte ranges, larger physical writes and no
application events, so the access-pattern guard really cannot tell buffering from a larger record
(nothing here hard-codes its verdict: the guards judge the analyses of the writer's scripted
traces). An autonomous run keeps the change on trial and goes on on top of it; the person's answer
afterwards makes it a KB win, or a refusal after which what was kept on top of it is measured
again without it.
"""

from __future__ import annotations

import json
import textwrap
import uuid
from pathlib import Path
from typing import Any, Literal

import pytest

from dftune.agents.context import Context
from dftune.agents.reasoner import RulesOnly
from dftune.core.domain.run import TuningState
from dftune.graphs.checkpointer import open_checkpointer
from dftune.graphs.pending import answer_first, answer_for
from dftune.graphs.pipeline import builder
from dftune.graphs.runs import approve_run, history, replay_run, resume_run, start_run
from dftune.tools.kb import opt_kb_get, opt_kb_lookup, opt_kb_records
from dftune.tools.runner.measurer import Invocation
from dftune.tools.runner.spec import load_spec
from dftune.tools.session.workspace import Workspace
from tests.fakes.measurer import Arm, Program, ScriptedMeasurer, steady
from tests.graph.conftest import InOrder
from tests.tracegen import Proc

SPEC = Path(__file__).parent / "toy" / "buffered.toml"

#: The toy writer: 1,024 records of 1 KiB to one file, in order, each with its own write call or
#: staged in a 256 KiB buffer (4 calls over the same byte ranges); WORKERS spreads 8 items of
#: compute over threads (no I/O). It reports a cost model of what it did: 60 us a write call, 30 ms
#: an item on its busiest thread.
RECORDS, RECORD, BUFFER = 1024, 1024, 262144
CALL_S, ITEM_S = 60e-6, 0.030


def writer(buffer: int) -> Program:
    """What a traced replicate of the writer did: its writes into the arm's data folder."""

    def did(inv: Invocation) -> list[Proc]:
        proc, path = Proc(pid=4100), str(inv.data_dir / "records.bin")
        proc.open(path)
        for _ in range(RECORDS * RECORD // (buffer or RECORD)):
            proc.write(path, buffer or RECORD)
        proc.close(path)
        return [proc]

    return did


def reports(buffer: int, busiest_items: int) -> float:
    return (RECORDS * RECORD // (buffer or RECORD)) * CALL_S + busiest_items * ITEM_S


WRITER_ARMS = [
    Arm({}, steady(reports(0, 8)), trace=writer(0)),
    Arm({"BUF": BUFFER}, steady(reports(BUFFER, 8)), trace=writer(BUFFER)),
    Arm({"BUF": BUFFER, "WORKERS": 4}, steady(reports(BUFFER, 2)), trace=writer(BUFFER)),
    Arm({"WORKERS": 4}, steady(reports(0, 2)), trace=writer(0)),
]


class Run:
    """One run of the buffered writer on its own checkpointer and thread."""

    def __init__(self, tmp: Path) -> None:
        self.ws = Workspace()
        self.saver = open_checkpointer(tmp / "checkpoints.sqlite")
        self.graph = builder.compile(checkpointer=self.saver)
        self.config: Any = {"configurable": {"thread_id": str(uuid.uuid4())}}
        self.run_id = self.ws.create_run(None, "toy-buffered-writer").id
        self.measurer = ScriptedMeasurer(WRITER_ARMS)

    def ctx(self) -> Context:
        return Context(
            workspace=self.ws,
            spec=load_spec(SPEC),
            reasoner=RulesOnly(InOrder(["BUF=262144", "WORKERS=4"])),
            measurer=self.measurer,
        )

    def start(self) -> TuningState:
        state = TuningState(
            run_id=self.run_id, spec_path=str(SPEC), mode="autonomous", max_experiments=2, force=True
        )
        self.graph.invoke(state, self.config, context=self.ctx(), durability="sync")
        started = self.state()
        # what every test here stands on: both changes won and wait, on trial, for a person
        assert [e.verdict for e in started.experiments] == ["pending", "pending"], _outcome(started)
        return started

    def answer(
        self,
        decision: Literal["approve", "reject"],
        reason: str,
        channel: Literal["terminal", "mcp", ""] = "",
    ) -> TuningState:
        state = self.state()
        given = answer_for(state, decision, reason, user="alice" if channel else "", channel=channel)
        fork = answer_first(self.graph, self.config, state, given)
        self.graph.invoke(None, fork, context=self.ctx(), durability="sync")
        return self.state()

    def state(self) -> TuningState:
        v = self.graph.get_state(self.config).values
        return v if isinstance(v, TuningState) else TuningState(**v)


@pytest.fixture
def run(tmp_path: Path) -> Any:
    r = Run(tmp_path)
    yield r
    r.saver.conn.close()


def _outcome(state: TuningState) -> str:
    """What each experiment ended as and why: the message of an assertion on the verdicts."""
    return "; ".join(
        f"{e.proposal_id}: {e.verdict} ({e.comparison.change_pct if e.comparison else None}%) "
        f"{e.verdict_reason}"
        for e in state.experiments
    )


def _lookup_verdicts(state: TuningState) -> dict[str, str]:
    found = opt_kb_lookup(workload=state.workload).workload_findings
    return {r.strategy: r.verdict for r in found if r.metric_scope == "app"}


def test_an_autonomous_run_keeps_the_unsettled_win_on_trial_and_goes_on(run: Run) -> None:
    state = run.start()
    assert state.status == "completed"
    buf, workers = state.experiments
    assert buf.proposal_id == "BUF=262144" and buf.verdict == "pending" and buf.kept
    assert "cannot tell coalescing" in buf.question
    pattern = [
        g.decision
        for g in state.guard_decisions
        if g.iteration == buf.iteration and g.decision.guard == "access_pattern"
    ]
    assert pattern and pattern[-1].verdict == "inconclusive"  # the trace, not a declaration, left it open
    # the search went on on top of it: the next experiment ran with the buffer
    assert workers.reference.settings["BUF"] in (262144, "262144")
    # behind the buffer's 256 KiB flushes the trace cannot see the records either: a second question
    assert workers.verdict == "pending" and workers.kept
    assert "whose kept change serves the application's requests with larger calls" in workers.question
    assert state.incumbent is not None and str(state.incumbent.settings["BUF"]) == "262144"
    assert [e.proposal_id for e in state.pending] == ["BUF=262144", "WORKERS=4"]
    record = opt_kb_get(buf.kb_record_id or 0)
    assert record is not None and record.verdict == "pending"
    assert _lookup_verdicts(state)["l1.write_buffering"] == "pending"
    report = json.loads((run.ws.run_dir(run.run_id) / "report.json").read_text())
    item, _ = report["outcome"]["pending"]
    assert item["proposal"] == "BUF=262144" and item["change_pct"] > 0 and item["question"] == buf.question
    assert report["outcome"]["wins"] == []
    md = (run.ws.run_dir(run.run_id) / "report.md").read_text()
    assert md.index("Pending confirmation") < md.index("Proposal table")


def test_a_confirmation_makes_it_a_kb_win_and_the_best_configuration_keeps_it(run: Run) -> None:
    run.start()
    state = run.answer("approve", "the program stages whole records, I read its code")
    buf = state.experiments[0]
    assert buf.verdict == "win" and buf.kept and buf.confirmed_by
    assert [e.proposal_id for e in state.pending] == ["WORKERS=4"]  # its own question is still open
    state = run.answer("approve", "more writer threads, the same records", channel="mcp")
    assert not state.pending and state.experiments[1].verdict == "win"
    # who answered, and through what, stays with the confirmation (the KB record and the log)
    assert state.experiments[1].confirmed_by == "more writer threads, the same records"
    said = [e for e in state.events if "a person confirmed WORKERS=4" in e.message]
    assert said and (said[-1].data["user"], said[-1].data["channel"]) == ("alice", "mcp")
    records = {r.id: r for r in opt_kb_records()}
    win = records[buf.kb_record_id or 0]
    assert win.verdict == "win" and win.supersedes is not None
    assert records[win.supersedes].verdict == "pending" and records[win.supersedes].superseded_by == win.id
    assert _lookup_verdicts(state)["l1.write_buffering"] == "win"
    assert len(state.experiments) == 2  # nothing measured again: what stood on it still stands
    assert state.incumbent is not None
    assert {k: str(v) for k, v in state.incumbent.settings.items()} == {"BUF": "262144", "WORKERS": "4"}
    assert state.status == "completed"


def test_a_refusal_records_the_reason_and_measures_again_what_stood_on_it(run: Run) -> None:
    run.start()
    state = run.answer("reject", "the format needs 1 KiB records on disk")
    buf, workers, again = state.experiments
    assert (
        buf.verdict == "rejected"
        and not buf.kept
        and buf.refused_by == "the format needs 1 KiB records on disk"
    )
    refusal = opt_kb_get(buf.kb_record_id or 0)
    assert refusal is not None and refusal.verdict == "rejected" and "1 KiB records" in refusal.verdict_reason
    # the win measured on top of the refused buffer no longer stands; it is measured again without it
    assert workers.voided_by == buf.iteration and not workers.kept and workers.verdict == "pending"
    assert again.proposal_id == "WORKERS=4@without-opt1" and str(again.reference.settings["BUF"]) == "0"
    assert again.verdict == "win" and again.kept, _outcome(state)
    assert state.incumbent is not None
    assert {k: str(v) for k, v in state.incumbent.settings.items()} == {"BUF": "0", "WORKERS": "4"}
    verdicts = _lookup_verdicts(state)  # (and whatever the diagnosis refused on the way, unapplied)
    assert verdicts["l1.write_buffering"] == "rejected" and verdicts["l1.dataloader_workers"] == "win"
    redone = opt_kb_get(again.kb_record_id or 0)
    assert redone is not None and redone.supersedes == workers.kb_record_id
    assert not state.pending and state.status == "completed"


#: the buffering alone, on a writer with no compute (``--items 0``): its clock then counts the write
#: calls only (this test needs no thread knob, so no compute to measure it by)
BUF_ONLY = textwrap.dedent("""
    name = "toy-buffered-only"
    command = ["{python}", "buffered.py", "--out", "{data_dir}", "--buffer", "{BUF}", "--items", "0"]
    replicates = 5
    timeout_s = 60
    page_cache = "warm"
    [metric]
    kind = "stdout_regex"
    pattern = 'run_time_s ([0-9.]+)'
    [tracing]
    mode = "preload"
    [[knobs]]
    name = "BUF"
    kind = "arg"
    values = [0, 262144]
    default = 0
    strategy = "l1.write_buffering"
""")


def test_run_json_carries_pending_through_resume_replay_and_approve(tmp_path: Path) -> None:
    spec = tmp_path / "workload.toml"
    spec.write_text(BUF_ONLY)
    (tmp_path / "buffered.py").write_text("# scripted: never started\n")
    ws = Workspace()
    script = ScriptedMeasurer(
        [
            Arm({}, steady(reports(0, 0)), trace=writer(0)),
            Arm({"BUF": BUFFER}, steady(reports(BUFFER, 0)), trace=writer(BUFFER)),
        ]
    )
    # the gate is not under test
    doc = start_run(spec, max_experiments=1, force=True, workspace=ws, measurer=script)
    run_id = doc.run_id
    assert doc.status == "completed"
    assert len(doc.pending) == 1, doc.verdicts
    (item,) = doc.document()["pending"]  # the keys the run JSON carries
    assert {"proposal_id", "settings", "question", "change_pct"} <= set(item)
    assert item["proposal_id"] == "BUF=262144" and item["settings"] == {"BUF": "262144"}
    assert item["change_pct"] > 0 and "coalescing" in item["question"]
    assert resume_run(run_id, workspace=ws, measurer=script).pending == doc.pending  # nothing moves
    # a fork from the state right after the record keeps the change on trial
    after = [h for h in history(run_id, workspace=ws) if h["node"] == "record" and h["experiments"] == 1]
    forked = replay_run(
        run_id, after[0]["checkpoint_id"], {"max_experiments": "1"}, workspace=ws, measurer=script
    )
    assert [p.proposal_id for p in forked.pending] == ["BUF=262144"] and forked.run_id != run_id
    assert resume_run(run_id, workspace=ws, measurer=script).pending == doc.pending  # the original's own
    answered = approve_run(run_id, reason="buffering, not a new record size", workspace=ws, measurer=script)
    assert answered.pending == [] and answered.status == "completed"
    assert [v.verdict for v in answered.verdicts] == ["win"]
    with pytest.raises(Exception, match="not waiting"):
        approve_run(run_id, workspace=ws)
