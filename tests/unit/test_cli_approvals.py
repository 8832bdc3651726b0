"""Approvals a person can follow: a receipt names what was answered and by whom, and the report
records every approval with the exact change and its rollback."""

from __future__ import annotations

from dftune.core.domain.experiments import Approval
from dftune.core.domain.proposals import Change, Proposal
from dftune.core.domain.run import RunReport
from dftune.graphs.approval import ApprovalAnswer, parse_answer, receipt, request
from dftune.tools.report.approvals import approvals_markdown

READAHEAD = Proposal(
    id="READAHEAD=8192",
    strategy="l3.readahead",
    strategy_name="readahead",
    layer="L3",
    checklist=11,
    privilege="sudo",
    description="Raise the block device readahead",
    change=Change(
        kind="command",
        argv=["sudo", "-n", "blockdev", "--setra", "8192", "/dev/sda"],
        read_argv=["blockdev", "--getra", "/dev/sda"],
        rollback_argv=["sudo", "-n", "blockdev", "--setra", "{current}", "/dev/sda"],
    ),
)


def test_the_receipt_says_what_was_answered_by_whom_and_why() -> None:
    asked = request(READAHEAD, "r1")
    yes = ApprovalAnswer(decision="approve", user="alice")
    assert receipt(asked, yes) == "approved READAHEAD=8192 (l3.readahead, sudo) by alice"
    no = ApprovalAnswer(decision="reject", reason="not on the shared node")
    assert (
        receipt(asked, no) == "rejected READAHEAD=8192 (l3.readahead, sudo) because 'not on the shared node'"
    )
    assert receipt("opt2 BUF=4 (kept on trial)", yes) == "approved opt2 BUF=4 (kept on trial) by alice"


def test_an_answer_without_a_user_is_still_accepted() -> None:
    answer, why = parse_answer({"decision": "approve"})
    assert answer is not None and answer.user == "" and why == ""


def test_the_report_records_every_approval_with_its_change() -> None:
    workers = READAHEAD.model_copy(
        update={
            "id": "WORKERS=4",
            "privilege": "no-sudo",
            "change": Change(kind="knob", settings={"WORKERS": "4"}),
        }
    )
    doc = RunReport(
        run_id="r1",
        spec_path="w.toml",
        proposals=[READAHEAD, workers],
        approvals=[
            Approval(proposal_id="READAHEAD=8192", approved=True, by="person", user="alice", reason="ok"),
            Approval(proposal_id="WORKERS=4", approved=True, by="policy", reason="autonomous mode"),
        ],
    )
    text = "\n".join(approvals_markdown(doc))
    assert text.startswith("## Approvals")
    assert "`READAHEAD=8192`: approved by alice (dftune approve): ok" in text
    assert "runs: sudo -n blockdev --setra 8192 /dev/sda" in text
    assert "rollback: sudo -n blockdev --setra" in text
    assert "`WORKERS=4`: approved by the run's policy: autonomous mode" in text
    assert approvals_markdown(doc.model_copy(update={"approvals": []})) == []
