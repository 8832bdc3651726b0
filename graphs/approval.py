"""The approval node: approve by the run's one rule (agents.policy), or wait for a person.

The node has no side effect before the interrupt, so a resumed node never repeats one:
applying happens in the next node, after the answer. The answer, whoever sends it (``dftune
approve``, LangGraph Studio, the API, a script), must be an :class:`ApprovalAnswer`; anything
else (``"no"``, ``{"approved": "false"}``, a number) is refused, applies nothing, and the run
keeps waiting with the refusal in its pending request. Before asking (and before the policy
approves anything) the proposal is checked against what the catalog and the archived spec
derive (``agents.optimizer.trust``): an edited checkpoint is refused, not shown as if it were
the original change.
"""

from __future__ import annotations

from typing import Any, Literal

from langgraph.runtime import Runtime
from langgraph.types import interrupt
from pydantic import BaseModel, ConfigDict, Field, ValidationError

from dftune.agents.context import Context
from dftune.agents.optimizer.trust import TamperedProposal, trusted_proposal
from dftune.agents.policy import approval_rule
from dftune.core.domain.experiments import Approval
from dftune.core.domain.proposals import Proposal
from dftune.core.domain.run import ApprovalRequest, PatternQuestion, TuningState, Update, log, update

#: What to send as the resume value (``Command(resume=...)``), shown in every pending request.
ANSWER_FORMAT = {"decision": "approve | reject", "reason": "(optional) why, kept in the run's record"}


class ApprovalAnswer(BaseModel):
    """The one accepted answer: an explicit decision and, optionally, why. Strict: no coercion
    (``"false"`` is not a decision), no extra keys."""

    model_config = ConfigDict(extra="forbid", strict=True, frozen=True)

    decision: Literal["approve", "reject"]
    reason: str = Field("", max_length=2000)
    #: who answered (the account running ``dftune approve``; kept in the run's record and report)
    user: str = Field("", max_length=200)
    #: where the answer came from: a terminal (``dftune approve``) or an MCP client (``run_answer``)
    channel: Literal["terminal", "mcp"] = "terminal"


def parse_answer(raw: Any) -> tuple[ApprovalAnswer | None, str]:
    """The answer, or None and why it was refused (one line)."""
    try:
        return ApprovalAnswer.model_validate(raw), ""
    except ValidationError as exc:
        what = "; ".join(
            f"{'.'.join(str(x) for x in e['loc']) or 'answer'}: {e['msg']}" for e in exc.errors()
        )
        return None, (
            f"refused the answer {str(raw)[:80]!r} ({what}): nothing was applied; answer with "
            '{"decision": "approve"} or {"decision": "reject", "reason": "..."}'
        )


def _answer_for(p: Proposal, raw: Any) -> tuple[ApprovalAnswer | None, str]:
    """The answer to ``p``'s approval: a privileged change is approved in a terminal only (an MCP
    client's approval of one is no answer: the run keeps waiting and says where to give it)."""
    answer, why = parse_answer(raw)
    if (
        answer is not None
        and answer.decision == "approve"
        and p.privilege != "no-sudo"
        and answer.channel != "terminal"
    ):
        return None, (
            f"{p.id} needs {p.privilege} privileges: it is approved in a terminal only "
            "(dftune approve), never through an MCP client; nothing was applied"
        )
    return answer, why


def request(p: Proposal, run_id: str, refused: str | None = None) -> ApprovalRequest:
    """What the person sees at the interrupt (and ``dftune run --json`` prints under ``pending``);
    ``refused``: why the last answer was not one."""
    return ApprovalRequest(
        run_id=run_id,
        proposal_id=p.id,
        strategy=p.strategy,
        layer=p.layer,
        privilege=p.privilege,
        description=p.description,
        change=p.change,
        app_impact_pct=p.app_impact_pct,
        app_impact_source=p.app_impact_source,
        citation=p.citation.reference() if p.citation else None,
        resume_with=f"dftune approve {run_id}  (or --reject)",
        answer_format=ANSWER_FORMAT,
        refused=refused,
        settings=dict(p.change.settings),
        question=f"apply {p.id}? ({p.description})",
    )


def receipt(asked: ApprovalRequest | PatternQuestion | str, answer: ApprovalAnswer) -> str:
    """What was answered (the question the graph stopped at, or a change kept on trial named in a
    phrase), said back before anything else runs."""
    if isinstance(asked, ApprovalRequest):
        what = f"{asked.proposal_id} ({asked.strategy}, {asked.privilege})"
    else:
        what = asked if isinstance(asked, str) else asked.proposal_id
    done = "approved" if answer.decision == "approve" else "rejected"
    why = f" because {answer.reason!r}" if answer.reason else ""
    who = f" by {answer.user}" if answer.user else ""
    return f"{done} {what}{who}{why}"


def approval(state: TuningState, runtime: Runtime[Context]) -> Update:
    """Node: approve by policy, or interrupt and wait for ``dftune approve RUN_ID [--reject]``."""
    assert state.current is not None
    try:
        p = trusted_proposal(state.proposal(state.current), state, runtime.context)
    except TamperedProposal as exc:
        bad = state.proposal(state.current)
        return update(
            proposals=[bad.model_copy(update={"status": "rejected", "reason": str(exc)})],
            current=None,
            approvals=[Approval(proposal_id=bad.id, approved=False, by="policy", reason=str(exc))],
            events=[log("approval", f"{bad.id}: {exc}")],
        )
    decision = approval_rule(p, state.mode)
    if decision == "manual":
        why = "admin-only: reported as a manual recommendation, never applied by dftune"
        return update(
            proposals=[p.model_copy(update={"status": "manual", "reason": why})],
            current=None,
            approvals=[Approval(proposal_id=p.id, approved=False, by="policy", reason=why)],
            events=[log("approval", f"{p.id}: {why}")],
        )
    if decision == "approve":
        why = f"autonomous mode: a no-sudo {p.layer} change"
        return update(
            approvals=[Approval(proposal_id=p.id, approved=True, by="policy", reason=why)],
            events=[log("approval", f"{p.id} approved by policy ({why})")],
        )
    answer, why = _answer_for(p, interrupt(request(p, state.run_id).model_dump(mode="json")))
    while answer is None:  # each refused answer is one more interrupt: the run keeps waiting
        answer, why = _answer_for(p, interrupt(request(p, state.run_id, refused=why).model_dump(mode="json")))
    approved = answer.decision == "approve"
    entry = Approval(
        proposal_id=p.id,
        approved=approved,
        by="person",
        channel=answer.channel,
        user=answer.user,
        reason=answer.reason or ("approved" if approved else "rejected"),
    )
    if approved:
        return update(approvals=[entry], events=[log("approval", f"{p.id} approved by a person")])
    return update(
        approvals=[entry],
        current=None,
        proposals=[
            p.model_copy(update={"status": "declined", "reason": f"rejected at approval: {entry.reason}"})
        ],
        events=[log("approval", f"{p.id} rejected by a person")],
    )
