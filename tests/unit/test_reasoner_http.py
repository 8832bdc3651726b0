"""The LLM reasoner over real HTTP: the official SDKs against local servers that enforce each API's rules.

Every test runs once per provider (Anthropic Messages API, OpenAI Chat Completions API). The
servers answer what each test scripts and refuse what the real API refuses, with its real status
code and body; nothing leaves 127.0.0.1.
"""

from __future__ import annotations

import time
from collections.abc import Iterator
from typing import Any

import pytest
from langchain_core.messages import AIMessage, HumanMessage, SystemMessage, ToolMessage

from dftune.agents.reasoner import Budget, Facts, LLMReasoner, make_reasoner
from dftune.agents.reasoner.llm import MAX_FAILED_DECISIONS, MAX_REASKS
from dftune.core.domain.proposals import Change, Proposal
from dftune.core.domain.run import LLMSettings, Outcome
from tests.fakes.chat import api_violations
from tests.fakes.llm_api import MODELS, SERVERS, hang, http_error, text, tool_call

PROVIDERS = ("anthropic", "openai")
FAST = LLMSettings(timeout_s=5, retries=2, deadline_s=20, backoff_s=0.05)


def _props(*ids: str) -> list[Proposal]:
    return [
        Proposal(
            id=i,
            strategy="l1.dataloader_workers",
            strategy_name="workers",
            layer="L1",
            checklist=6,
            description=f"more workers: {i}",
            change=Change(kind="knob", settings={"WORKERS": i[-1]}),
        )
        for i in ids
    ]


OPTIONS = _props("WORKERS=2", "WORKERS=4")


def _facts(budget: int = 200_000, spent: int = 0) -> Facts:
    return Facts(
        workload="toy",
        diagnosis=None,
        io_fraction=0.6,
        unoverlapped_fraction=0.5,
        budget=Budget(limit=budget, spent=spent),
        bound_pct=50.0,
        bound_reason="unoverlapped I/O 0.5 s of 1 s of process time (bound 50.0%)",
    )


@pytest.fixture(params=PROVIDERS)
def provider(request: pytest.FixtureRequest) -> str:
    return str(request.param)


@pytest.fixture
def serve(provider: str, monkeypatch: pytest.MonkeyPatch) -> Iterator[Any]:
    """``serve(script, settings=..., expect_violations=...)`` ->
    (server, reasoner), the server stopped after the test."""
    started: list[Any] = []

    def start(script: list[Any], settings: LLMSettings = FAST, **kw: Any) -> tuple[Any, LLMReasoner]:
        server = SERVERS[provider](script, **kw).__enter__()
        started.append(server)
        for k, v in server.env().items():
            monkeypatch.setenv(k, v)
        reasoner = make_reasoner(MODELS[provider], settings=settings)
        assert isinstance(reasoner, LLMReasoner)
        return server, reasoner

    yield start
    for server in started:
        server.__exit__(None, None, None)


# --------------------------------------------------------------------------- the fakes are strict


def test_the_servers_refuse_a_human_turn_after_a_tool_call_as_the_real_apis_do(
    provider: str, monkeypatch: pytest.MonkeyPatch
) -> None:
    """What the old re-ask sent: the assistant's tool call followed by a human turn. Both APIs answer 400."""
    from dftune.agents.reasoner import transport

    with SERVERS[provider]([], expect_violations=True) as server:
        for k, v in server.env().items():
            monkeypatch.setenv(k, v)
        model = transport.build_chat_model(MODELS[provider], FAST)
        call = AIMessage(
            content="",
            tool_calls=[
                {
                    "name": "Choice",
                    "args": {"proposal_id": "x", "reason": "r"},
                    "id": "toolu_01" if provider == "anthropic" else "call_01",
                }
            ],
        )
        with pytest.raises(Exception) as err:
            model.invoke(
                [SystemMessage("s"), HumanMessage("pick"), call, HumanMessage("invalid: answer again")]
            )
    assert getattr(err.value, "status_code", None) == 400
    expected = {
        "anthropic": "`tool_use` ids were found without `tool_result` blocks immediately after",
        "openai": "must be followed by tool messages responding to each 'tool_call_id'",
    }[provider]
    assert expected in str(err.value) and len(server.violations) == 1


def test_the_servers_refuse_a_tool_result_that_answers_no_call(
    provider: str, monkeypatch: pytest.MonkeyPatch
) -> None:
    from dftune.agents.reasoner import transport

    with SERVERS[provider]([], expect_violations=True) as server:
        for k, v in server.env().items():
            monkeypatch.setenv(k, v)
        model = transport.build_chat_model(MODELS[provider], FAST)
        with pytest.raises(Exception) as err:
            model.invoke(
                [HumanMessage("pick"), AIMessage("thinking"), ToolMessage("orphan", tool_call_id="toolu_9")]
            )
    assert getattr(err.value, "status_code", None) == 400 and server.violations


def test_the_scripted_chat_model_is_as_strict_as_both_apis() -> None:
    call = AIMessage(content="", tool_calls=[{"name": "Choice", "args": {}, "id": "call_1"}])
    broken = api_violations([HumanMessage("pick"), call, HumanMessage("again")])
    assert [b.split(":", 1)[0] for b in broken] == ["anthropic", "openai"]
    ok = api_violations(
        [HumanMessage("pick"), call, ToolMessage("error", tool_call_id="call_1", status="error")]
    )
    assert ok == []


# --------------------------------------------------------------------------- re-asks


def test_an_invalid_answer_gets_its_tool_result_with_the_reason_and_is_asked_again(
    serve: Any, provider: str
) -> None:
    server, reasoner = serve(
        [
            tool_call("Choice", {"proposal_id": "rm -rf /", "reason": "not an option"}),
            tool_call("Choice", {"proposal_id": "WORKERS=4", "reason": "more parallel reads"}),
        ]
    )
    judged = reasoner.choose_next(OPTIONS, _facts())
    assert judged.answer.proposal_id == "WORKERS=4"
    d = judged.decision
    assert (d.decided_by, d.calls, d.fallback, d.tokens) == ("model", 2, "", 300)
    reask = server.requests[1].body["messages"]
    if provider == "anthropic":
        (result,) = reask[-1]["content"]
        assert result["type"] == "tool_result" and result["is_error"] is True
        assert result["tool_use_id"] == reask[-2]["content"][0]["id"]
        assert "not one of the offered ids" in str(result["content"])
    else:
        assert reask[-1]["role"] == "tool" and reask[-1]["tool_call_id"] == reask[-2]["tool_calls"][0]["id"]
        assert "not one of the offered ids" in reask[-1]["content"]


def test_malformed_arguments_and_free_text_are_sent_back_too(serve: Any, provider: str) -> None:
    bad_args = "{'proposal_id': WORKERS=2" if provider == "openai" else {"proposal": "WORKERS=2"}
    _, reasoner = serve(
        [
            tool_call("Choice", bad_args),
            text("I would pick WORKERS=2."),
            tool_call("Choice", {"proposal_id": "WORKERS=2", "reason": "r"}),
        ]
    )
    judged = reasoner.choose_next(OPTIONS, _facts())
    assert judged.answer.proposal_id == "WORKERS=2" and judged.decision.calls == 3
    assert len(judged.decision.notes) == 2 and "not free text" in judged.decision.notes[1]


def test_three_invalid_answers_and_the_rules_decide(serve: Any) -> None:
    server, reasoner = serve([tool_call("Choice", {"proposal_id": "nope", "reason": "r"})] * (1 + MAX_REASKS))
    judged = reasoner.choose_next(OPTIONS, _facts())
    assert (
        judged.decision.decided_by == "rules" and "no valid answer after 3 tries" in judged.decision.fallback
    )
    assert judged.decision.by == f"rules (fallback from {reasoner.name})"
    assert judged.answer.proposal_id in {"WORKERS=2", "WORKERS=4"} and len(server.requests) == 3


def test_model_estimates_are_capped_and_labeled_as_the_models(serve: Any) -> None:
    _, reasoner = serve(
        [
            tool_call(
                "ImpactEstimates",
                {
                    "estimates": [
                        {"proposal_id": "WORKERS=2", "app_impact_pct": 90.0, "reason": "guess"},
                        {"proposal_id": "WORKERS=4", "app_impact_pct": 10.0, "reason": "guess"},
                    ]
                },
            )
        ]
    )
    judged = reasoner.estimate_impacts(OPTIONS, _facts())
    by_id = {e.proposal_id: e for e in judged.answer}
    assert by_id["WORKERS=2"].app_impact_pct == 50.0  # the unoverlapped I/O share bounds any fix
    assert "the model's estimate" in by_id["WORKERS=4"].reason
    assert judged.decision.decided_by == "model" and "capped" in judged.decision.notes[0]


# --------------------------------------------------------------------------- transport failures


def test_429_waits_for_retry_after_then_the_model_answers(serve: Any) -> None:
    server, reasoner = serve(
        [http_error(429, retry_after=1), tool_call("Choice", {"proposal_id": "WORKERS=4", "reason": "r"})]
    )
    judged = reasoner.choose_next(OPTIONS, _facts())
    gap = server.requests[1].at - server.requests[0].at
    assert judged.decision.decided_by == "model" and judged.decision.calls == 2
    assert 1.0 <= gap < 3.0 and "retry in 1.0 s" in judged.decision.notes[0]


def test_server_errors_are_retried_with_backoff(serve: Any, provider: str) -> None:
    overloaded = 529 if provider == "anthropic" else 503
    _, reasoner = serve(
        [
            http_error(500),
            http_error(overloaded),
            tool_call("Choice", {"proposal_id": "WORKERS=2", "reason": "r"}),
        ]
    )
    judged = reasoner.choose_next(OPTIONS, _facts())
    assert judged.decision.decided_by == "model" and judged.decision.calls == 3
    assert "HTTP 500" in judged.decision.notes[0] and f"HTTP {overloaded}" in judged.decision.notes[1]


def test_429_after_every_retry_hands_the_judgment_to_the_rules(serve: Any) -> None:
    _, reasoner = serve([http_error(429, retry_after=0.1)] * 3)
    judged = reasoner.choose_next(OPTIONS, _facts())
    assert judged.decision.decided_by == "rules" and judged.decision.calls == 3
    assert "HTTP 429" in judged.decision.fallback and "after 3 request(s)" in judged.decision.fallback


def test_a_retry_after_beyond_the_deadline_is_not_waited_for(serve: Any) -> None:
    server, reasoner = serve([http_error(429, retry_after=3600)])
    start = time.monotonic()
    judged = reasoner.choose_next(OPTIONS, _facts())
    assert time.monotonic() - start < 2 and judged.decision.decided_by == "rules"
    assert "deadline" in judged.decision.fallback and len(server.requests) == 1


def test_401_stops_asking_that_model_for_the_rest_of_the_run(serve: Any) -> None:
    server, reasoner = serve([])
    server.key = "sk-rotated-elsewhere-111111"  # the key the reasoner holds is no longer valid
    first = reasoner.choose_next(OPTIONS, _facts())
    second = reasoner.summarize(_facts(), Outcome(status="completed"))
    assert first.decision.decided_by == second.decision.decided_by == "rules"
    assert "HTTP 401" in first.decision.fallback and "for the rest of the run" in second.decision.fallback
    assert len(server.requests) == 1 and second.decision.calls == 0


def test_a_hanging_server_costs_one_deadline_per_decision_then_is_no_longer_asked(serve: Any) -> None:
    settings = LLMSettings(timeout_s=1.0, retries=5, deadline_s=2.5, backoff_s=0.05)
    _, reasoner = serve([hang(), hang(), hang(), hang(), hang(), hang()], settings=settings)
    times = []
    for _ in range(MAX_FAILED_DECISIONS + 1):
        start = time.monotonic()
        judged = reasoner.choose_next(OPTIONS, _facts())
        times.append(time.monotonic() - start)
        assert judged.decision.decided_by == "rules"
    assert all(t < settings.deadline_s + 1.0 for t in times), times
    assert times[-1] < 0.1 and "decisions in a row could not reach" in judged.decision.fallback
    assert "timed out" in reasoner.fallbacks[0]


def test_usage_missing_from_the_reply_is_estimated_from_the_text(serve: Any) -> None:
    server, reasoner = serve([tool_call("Choice", {"proposal_id": "WORKERS=4", "reason": "r"}, usage=False)])
    judged = reasoner.choose_next(OPTIONS, _facts())
    d = judged.decision
    assert d.decided_by == "model" and d.tokens_estimated
    prompt = sum(len(str(m.get("content"))) for m in server.requests[0].body["messages"])
    assert d.tokens >= prompt / 4  # at least the prompt, counted conservatively


# --------------------------------------------------------------------------- the budget


def test_a_call_that_could_exceed_the_budget_is_never_made(serve: Any) -> None:
    server, reasoner = serve([])
    facts = _facts(budget=2_500, spent=1_000)  # a request needs its prompt plus the answer's cap (2048)
    judged = reasoner.choose_next(OPTIONS, facts)
    assert server.requests == [] and judged.decision.decided_by == "rules"
    assert "token budget: 1,000 of 2,500 spent" in judged.decision.fallback


def test_spend_is_charged_to_the_budget_as_it_happens(serve: Any) -> None:
    _, reasoner = serve([tool_call("Choice", {"proposal_id": "WORKERS=4", "reason": "r"}, tokens=(900, 100))])
    facts = _facts(budget=10_000, spent=50)
    reasoner.choose_next(OPTIONS, facts)
    assert facts.budget.spent == 1_050
