"""Approvals a person can follow: a receipt names what was answered and by whom, and the report
records every approval with the exact change and its rollback."""

from __future__ import annotations

from dftune.graphs.approval import ApprovalAnswer, parse_answer, receipt
from dftune.tools.report.approvals import approvals_markdown

ASKED = {"proposal_id": "READAHEAD=8192", "strategy": "l3.readahead", "privilege": "sudo"}


def test_the_receipt_says_what_was_answered_by_whom_and_why() -> None:
    yes = ApprovalAnswer(decision="approve", user="alice")
    assert receipt(ASKED, yes) == "approved READAHEAD=8192 (l3.readahead, sudo) by alice"
    no = ApprovalAnswer(decision="reject", reason="not on the shared node")
    assert (
        receipt(ASKED, no) == "rejected READAHEAD=8192 (l3.readahead, sudo) because 'not on the shared node'"
    )
    assert receipt({"kind": "confirm_pattern"}, yes).startswith("approved the pending question")


def test_an_answer_without_a_user_is_still_accepted() -> None:
    answer, why = parse_answer({"decision": "approve"})
    assert answer is not None and answer.user == "" and why == ""


def test_the_report_records_every_approval_with_its_change() -> None:
    doc = {
        "approvals": [
            {
                "proposal_id": "READAHEAD=8192",
                "approved": True,
                "by": "person",
                "user": "alice",
                "reason": "ok",
            },
            {"proposal_id": "WORKERS=4", "approved": True, "by": "policy", "reason": "autonomous mode"},
        ],
        "proposals": [
            {
                "id": "READAHEAD=8192",
                "change": {
                    "argv": ["sudo", "-n", "blockdev", "--setra", "8192", "/dev/sda"],
                    "rollback_argv": ["sudo", "-n", "blockdev", "--setra", "{current}", "/dev/sda"],
                },
            },
            {"id": "WORKERS=4", "change": {"settings": {"WORKERS": "4"}}},
        ],
    }
    text = "\n".join(approvals_markdown(doc))
    assert text.startswith("## Approvals")
    assert "`READAHEAD=8192`: approved by alice (dftune approve): ok" in text
    assert "runs: sudo -n blockdev --setra 8192 /dev/sda" in text
    assert "rollback: sudo -n blockdev --setra" in text
    assert "`WORKERS=4`: approved by the run's policy: autonomous mode" in text
    assert approvals_markdown({"approvals": []}) == []
