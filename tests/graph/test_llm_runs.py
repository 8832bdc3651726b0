"""Whole tuning runs with a chat model over real HTTP: the real graph, SQLite checkpoints, a script
of what each replicate measured.

``graphs.runs`` drives the toy workload with ``--model anthropic:...`` / ``openai:...`` against the
local API servers of tests/fakes/llm_api.py. Whatever the model does (garbage, 429s, 500s, 401s,
hanging, lying in its summary), the run completes, the rules take over, and the state, the
history and both reports say who decided.
"""

from __future__ import annotations

import json
import re
from pathlib import Path
from typing import Any

import pytest

from dftune.agents.reasoner import ReasonerError
from dftune.core.domain.run import LLMSettings
from dftune.core.home import dftune_home
from dftune.graphs.runs import RunError, approve_run, history, resume_run, start_run
from dftune.tools.report.writer import write_reports
from dftune.tools.runner.measurer import Invocation
from dftune.tools.session.workspace import Workspace
from tests.fakes.llm_api import KEY, MODELS, hang, http_error, text, tool_call
from tests.fakes.measurer import Arm, ScriptedMeasurer, steady
from tests.graph.conftest import TOY, toy_measurer

#: the three judgments only (the model's actions are scripted in test_model_actions.py)
FAST = LLMSettings(timeout_s=1.0, retries=2, deadline_s=2.0, backoff_s=0.05, actions=[])


def _state(run_id: str) -> Any:
    from dftune.graphs.checkpointer import CHECKPOINT_FILE, open_checkpointer
    from dftune.graphs.pipeline import builder
    from dftune.graphs.runs import _as_state

    saver = open_checkpointer(Workspace().run_dir(run_id) / CHECKPOINT_FILE)
    try:
        snap = builder.compile(checkpointer=saver).get_state({"configurable": {"thread_id": run_id}})
        return _as_state(snap.values)
    finally:
        saver.conn.close()


def _competent(summary: str) -> list[Any]:
    return [
        tool_call(
            "ImpactEstimates",
            {
                "estimates": [
                    {
                        "proposal_id": "WORKERS=4",
                        "app_impact_pct": 40.0,
                        "reason": "threads overlap the sleeps",
                    },
                    {"proposal_id": "SLOW=1", "app_impact_pct": 5.0, "reason": "cheap to rule out"},
                ]
            },
        ),
        tool_call("Choice", {"proposal_id": "WORKERS=4", "reason": "largest expected gain"}),
        tool_call("Choice", {"proposal_id": "SLOW=1", "reason": "the one left"}),
        tool_call("Summary", {"text": summary}),
    ]


def _run(provider: str, **kw: Any) -> dict[str, Any]:
    return start_run(
        TOY,
        model=MODELS[provider],
        max_experiments=2,
        replicates=3,
        llm=kw.pop("llm", FAST),
        measurer=toy_measurer(),
        **kw,
    )


def _report(run_id: str) -> str:
    return (Workspace().run_dir(run_id) / "report.md").read_text()


# --------------------------------------------------------------------------- a competent model


@pytest.mark.parametrize("provider", ["anthropic", "openai"])
def test_a_competent_model_decides_and_the_report_says_so(provider: str, api: Any) -> None:
    server = api(provider, _competent("Two experiments were measured. SLOW=1 was reverted."))
    result = _run(provider)
    assert result.status == "completed"
    state = _state(result.run_id)
    assert [e.proposal_id for e in state.experiments] == ["WORKERS=4", "SLOW=1"]
    assert [(d.question, d.decided_by) for d in state.decisions] == [
        ("estimate_impacts", "model"),
        ("choose_next", "model"),
        ("choose_next", "model"),
        ("summarize", "model"),
    ]
    assert state.tokens_spent == 4 * 150 and len(server.requests) == 4
    chose = [e for e in state.events if e.message.startswith("chose")]
    assert {e.data["reasoner"] for e in chose} == {MODELS[provider]}
    report = _report(result.run_id)
    assert "> Two experiments were measured. SLOW=1 was reverted." in report
    assert f"summary by the model {MODELS[provider]}" in report
    assert "## Who decided" in report and "4 of 4 judgment(s) were made by the model" in report
    html = Path(write_reports(result.run_id, html=True)["html"]).read_text()
    assert 'id="decisions"' in html and "Who decided" in html


@pytest.mark.parametrize("provider", ["anthropic", "openai"])
def test_the_models_estimates_are_labeled_as_the_models_not_the_literatures(provider: str, api: Any) -> None:
    script = _competent("One experiment was measured.")
    api(provider, [script[0], script[1], script[3]])
    result = start_run(
        TOY, model=MODELS[provider], max_experiments=1, replicates=3, llm=FAST, measurer=toy_measurer()
    )
    state = _state(result.run_id)
    assert state.proposal("SLOW=1").status == "proposed"  # never measured: the estimate stays
    assert state.proposal("SLOW=1").impact_estimated_by == MODELS[provider]
    report = _report(result.run_id)
    (row,) = [line for line in report.splitlines() if "l1.dataloader_prefetch (SLOW=1)" in line]
    assert row.startswith("| model estimate |") and f"the model {MODELS[provider]}'s estimate" in row
    assert "literature:" not in row and "literature estimate" not in row
    html = Path(write_reports(result.run_id, html=True)["html"]).read_text()
    assert "model estimate" in html and f"the model {MODELS[provider]}&#x27;s estimate" in html


def test_rules_estimates_say_where_they_come_from() -> None:
    """The toy runs untraced: no trace to estimate from, so the table says n/a (never a silent 0)."""
    result = start_run(TOY, max_experiments=1, replicates=3, measurer=toy_measurer())
    (left,) = [p for p in _state(result.run_id).proposals if p.status == "proposed"]
    assert left.app_impact_source == "n/a" and "no trace" in left.impact_reason
    (row,) = [
        line
        for line in _report(result.run_id).splitlines()
        if line.startswith("|") and f" {left.id} " in line and "n/a" in line
    ]
    assert "literature" not in row


# --------------------------------------------------------------------------- models that fail


def _garbage() -> list[Any]:
    return [tool_call("Choice", {"proposal_id": "rm -rf /", "reason": "x"}).always()]


SCENARIOS = {
    "garbage": ("anthropic", _garbage, "no valid answer after 3 tries"),
    "429": ("openai", lambda: [http_error(429, retry_after=0.1).always()], "HTTP 429"),
    "500": ("anthropic", lambda: [http_error(500).always()], "HTTP 500"),
    "529": ("anthropic", lambda: [http_error(529).always()], "HTTP 529"),
    "401": ("openai", lambda: [http_error(401).always()], "HTTP 401"),
    "hang-anthropic": ("anthropic", lambda: [hang().always()], "timed out"),
    "hang-openai": ("openai", lambda: [hang().always()], "timed out"),
}


@pytest.mark.parametrize("scenario", sorted(SCENARIOS))
def test_a_failing_model_never_ends_the_run_and_the_rules_take_over(scenario: str, api: Any) -> None:
    provider, script, why = SCENARIOS[scenario]
    api(provider, script(), expect_violations=False)
    result = _run(provider)
    assert result.status == "completed", result.status_reason
    state = _state(result.run_id)
    assert len(state.experiments) == 2 and all(e.verdict for e in state.experiments)
    assert state.decisions and all(d.decided_by == "rules" for d in state.decisions)
    assert why in state.decisions[0].fallback
    # no event claims the model decided
    assert all(e.data.get("reasoner", "rules").startswith("rules") for e in state.events)
    report = _report(result.run_id)
    assert f"0 of {len(state.decisions)} judgment(s) were made by the model" in report
    assert "summary by the rules" in report and why in report


def test_a_hanging_model_costs_at_most_two_deadlines_per_run(api: Any) -> None:
    server = api("openai", [hang().always()])
    result = _run("openai")
    state = _state(result.run_id)
    asked = [d for d in state.decisions if d.calls]
    assert len(asked) == 2 and all(d.latency_s <= FAST.deadline_s + 0.5 for d in asked)
    assert len(server.requests) == sum(d.calls for d in asked)
    assert all(d.calls == 0 and "could not reach" in d.fallback for d in state.decisions[2:])


# --------------------------------------------------------------------------- a model that lies


LIE = (
    "Fewer epochs (EPOCHS=1) was the best fix: +95% faster. "
    "| opt | change |\n|---|---|\n| EPOCHS=1 | +95% |\n"
    "WORKERS=4 won with a 99.9% gain. SLOW=1 was reverted."
)


@pytest.mark.parametrize("provider", ["anthropic", "openai"])
def test_a_lying_summary_is_checked_and_only_what_holds_reaches_the_report(provider: str, api: Any) -> None:
    api(provider, _competent(LIE))
    result = _run(provider)
    report = _report(result.run_id)
    head = report.split("## Outcome", 1)[0]
    quoted = "\n".join(line for line in head.splitlines() if line.startswith(">"))  # the summary, as prose
    assert "95%" not in quoted and "99.9" not in quoted and "EPOCHS=1" not in head and "| opt |" not in head
    assert "> SLOW=1 was reverted." in head
    assert "sentence(s) dropped" in head
    state = _state(result.run_id)
    (summary,) = [d for d in state.decisions if d.question == "summarize"]
    assert summary.decided_by == "model" and len([n for n in summary.notes if "dropped" in n]) == 4
    doc = json.loads((Workspace().run_dir(result.run_id) / "report.json").read_text())
    assert doc["summary"] == "SLOW=1 was reverted."


def test_a_summary_with_nothing_true_in_it_falls_back_to_the_rules(api: Any) -> None:
    lies = [tool_call("Summary", {"text": "EPOCHS=1 gave +95%."})] * 3
    api("openai", [*_competent("x")[:3], *lies])
    result = _run("openai")
    doc = json.loads((Workspace().run_dir(result.run_id) / "report.json").read_text())
    assert "95" not in doc["summary"] and doc["summary"].startswith("toy: 2 experiment(s) measured")
    assert "summary by the rules" in _report(result.run_id)


# --------------------------------------------------------------------------- the budget holds


def test_the_budget_holds_across_approve(api: Any) -> None:
    """7,000 tokens: two calls of 2,500 fit, a third (its prompt plus the 2,048 answer cap) does not, even
    after ``dftune approve`` started a new process context."""
    heavy = (2_000, 500)
    server = api(
        "openai",
        [
            tool_call(
                "ImpactEstimates",
                {
                    "estimates": [
                        {"proposal_id": "WORKERS=4", "app_impact_pct": 40.0, "reason": "r"},
                        {"proposal_id": "SLOW=1", "app_impact_pct": 5.0, "reason": "r"},
                    ]
                },
                tokens=heavy,
            ),
            tool_call("Choice", {"proposal_id": "WORKERS=4", "reason": "r"}, tokens=heavy),
        ],
    )
    result = _run("openai", mode="interactive", token_budget=7_000)
    assert result.status == "awaiting_approval"
    run_id = result.run_id
    assert _state(run_id).tokens_spent == 5_000
    while result.status == "awaiting_approval":
        result = approve_run(run_id, measurer=toy_measurer())
    state = _state(run_id)
    assert result.status == "completed" and len(server.requests) == 2
    assert state.tokens_spent == 5_000 <= state.token_budget
    later = [d for d in state.decisions[2:]]
    assert later and all(
        d.decided_by == "rules" and "token budget: 5,000 of 7,000" in d.fallback for d in later
    )


def test_the_budget_holds_across_resume_after_a_crash(api: Any, monkeypatch: pytest.MonkeyPatch) -> None:
    import dftune.agents.verifier as verifier

    heavy = (2_000, 500)
    server = api(
        "anthropic",
        [
            tool_call(
                "ImpactEstimates",
                {
                    "estimates": [
                        {"proposal_id": "WORKERS=4", "app_impact_pct": 40.0, "reason": "r"},
                        {"proposal_id": "SLOW=1", "app_impact_pct": 5.0, "reason": "r"},
                    ]
                },
                tokens=heavy,
            ),
            tool_call("Choice", {"proposal_id": "WORKERS=4", "reason": "r"}, tokens=heavy),
        ],
    )
    real = verifier.measure_paired

    def power_cut(*args: Any, **kwargs: Any) -> Any:
        raise RuntimeError("power cut")

    monkeypatch.setattr(verifier, "measure_paired", power_cut)
    with pytest.raises(RuntimeError, match="power cut"):
        _run("anthropic", token_budget=7_000, run_id="crashy")
    monkeypatch.setattr(verifier, "measure_paired", real)
    assert _state("crashy").tokens_spent == 5_000
    result = resume_run("crashy", measurer=toy_measurer())
    state = _state("crashy")
    assert result.status == "completed" and len(server.requests) == 2 and state.tokens_spent == 5_000


# --------------------------------------------------------------------------- history


def test_history_shows_who_decided_at_each_step(api: Any) -> None:
    from rich.console import Console

    from dftune.tools.report.console import RunRenderer

    api("anthropic", [http_error(500).always()])
    result = _run("anthropic", llm=LLMSettings(timeout_s=1, retries=0, deadline_s=2, actions=[]))
    rows = history(result.run_id)
    decided = [(r["node"], d) for r in rows for d in r["decisions"]]
    assert [n for n, _ in decided][:2] == ["estimate", "choose"] and decided[-1][0] == "finalize"
    assert all(d["decided_by"] == "rules" and d["fallback"] for _, d in decided)
    assert sum(len(r["decisions"]) for r in rows) == len(_state(result.run_id).decisions)
    console = Console(record=True, width=400)
    RunRenderer(console).render_history(rows)
    shown = console.export_text()
    assert "choose_next: rules" in shown and "HTTP 500" in shown


# --------------------------------------------------------------------------- before anything runs


@pytest.mark.parametrize(
    ("model", "env", "message"),
    [
        ("openai:gpt-test", {}, "OPENAI_API_KEY is not set"),
        ("anthropic:claude-test", {}, "ANTHROPIC_API_KEY is not set"),
        ("mistral:large", {}, "unknown provider 'mistral'"),
        ("openai", {}, "expected rules or PROVIDER:MODEL"),
        (
            "openai:gpt-test",
            {"OPENAI_API_KEY": KEY, "DFTUNE_OPENAI_BASE_URL": "ftp://127.0.0.1/v1"},
            "is not an http(s) URL",
        ),
        (
            "openai:gpt-test",
            {"OPENAI_API_KEY": KEY, "DFTUNE_OPENAI_BASE_URL": "not a url"},
            "is not an http(s) URL",
        ),
        (
            "anthropic:claude-test",
            {"ANTHROPIC_API_KEY": KEY, "DFTUNE_ANTHROPIC_BASE_URL": "http://127.0.0.1:1"},
            "cannot connect to 127.0.0.1:1",
        ),
    ],
)
def test_an_unusable_model_is_refused_before_anything_runs(
    model: str, env: dict[str, str], message: str, monkeypatch: pytest.MonkeyPatch
) -> None:
    for name in ("OPENAI_API_KEY", "ANTHROPIC_API_KEY", "OPENAI_BASE_URL", "ANTHROPIC_BASE_URL"):
        monkeypatch.delenv(name, raising=False)
    for k, v in env.items():
        monkeypatch.setenv(k, v)
    with pytest.raises((ReasonerError, RunError)) as err:
        start_run(TOY, model=model)
    assert message in str(err.value) and "\n" not in str(err.value)
    assert not (dftune_home() / "runs").exists() or not any((dftune_home() / "runs").iterdir())


def test_the_cli_prints_one_line_for_a_missing_key(monkeypatch: pytest.MonkeyPatch) -> None:
    from tests.cli_inproc import dftune

    monkeypatch.delenv("OPENAI_API_KEY", raising=False)
    proc = dftune("run", str(TOY), "--model", "openai:gpt-test")
    assert proc.returncode == 2 and proc.stdout == ""
    assert re.fullmatch(r"[^\n]*OPENAI_API_KEY is not set[^\n]*\n", proc.stderr), proc.stderr


def test_llm_settings_come_from_the_cli_or_the_environment(monkeypatch: pytest.MonkeyPatch) -> None:
    from dftune.agents.reasoner import llm_settings

    monkeypatch.setenv("DFTUNE_LLM_DEADLINE_S", "12")
    s = llm_settings(timeout_s=3.0)
    assert (s.timeout_s, s.deadline_s, s.retries) == (3.0, 12.0, 2)
    monkeypatch.setenv("DFTUNE_LLM_RETRIES", "-1")
    with pytest.raises(ReasonerError, match="DFTUNE_LLM_RETRIES"):
        llm_settings()


def test_free_text_in_every_answer_still_completes_the_run(api: Any) -> None:
    api("openai", [text("I think you should add workers.").always()])
    result = _run("openai")
    assert result.status == "completed"
    assert all("not free text" in d.fallback for d in _state(result.run_id).decisions if d.calls)


# --------------------------------------------------------------------------- no key reaches a workload


def test_no_key_reaches_the_workload_or_dftune_home(
    tmp_path: Path, api: Any, monkeypatch: pytest.MonkeyPatch
) -> None:
    """A tuning run with a model: the workload prints its whole environment (the one bench gives it)
    into its logs under DFTUNE_HOME; the model's key (and any other credential) is not in any file
    there."""
    monkeypatch.setenv("HF_TOKEN", "hf_not-for-the-workload-0123")

    def environment(inv: Invocation) -> str:
        return "\n".join(f"{k}={v}" for k, v in sorted(inv.process_env.items()))

    dumps = ScriptedMeasurer(  # more workers, a shorter wait
        [
            Arm({}, steady(0.02), prints=environment),
            Arm({"WORKERS": 2}, steady(0.01), prints=environment),
        ]
    )
    spec = tmp_path / "workload.toml"
    (spec.parent / "dump.py").write_text("# scripted: never started\n")
    spec.write_text(
        'name = "envdump"\ncommand = ["{python}", "dump.py"]\nreplicates = 3\npage_cache = "warm"\n'
        '[metric]\nkind = "wall_time"\n[tracing]\nmode = "off"\n'
        '[[knobs]]\nname = "WORKERS"\nkind = "env"\nvalues = [1, 2]\ndefault = 1\n'
        'strategy = "l1.dataloader_workers"\n'
    )
    server = api(
        "openai",
        [
            tool_call(
                "ImpactEstimates",
                {"estimates": [{"proposal_id": "WORKERS=2", "app_impact_pct": 30.0, "reason": "r"}]},
            ),
            tool_call("Choice", {"proposal_id": "WORKERS=2", "reason": "r"}),
            text("no tool call: the rules summarize"),
            text("still none"),
            text("none again"),
        ],
    )
    result = start_run(spec, model=MODELS["openai"], max_experiments=1, llm=FAST, measurer=dumps)
    assert result.status == "completed" and len(server.requests) == 5
    files = [p for p in dftune_home().rglob("*") if p.is_file()]
    logs = b"".join(p.read_bytes() for p in files if p.suffix == ".out")
    assert (
        b"DFTUNE_OPENAI_BASE_URL=" in logs and b"WORKERS=2" in logs
    )  # the workload did print its environment
    for secret in (KEY, "hf_not-for-the-workload-0123"):
        assert not [str(p) for p in files if secret.encode() in p.read_bytes()], secret
