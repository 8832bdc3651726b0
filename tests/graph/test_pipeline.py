"""The tuning graph end to end on the toy workload: fake LLM, fresh checkpointer, scripted measurements."""

from __future__ import annotations

from pathlib import Path
from typing import Any

import pytest
from langchain_core.messages import ToolMessage
from langgraph.types import Command

from dftune.agents.reasoner import LLMReasoner
from dftune.core.domain.run import LLMSettings, TuningState
from dftune.tools.kb import opt_kb_records
from tests.fakes.chat import ScriptedChatModel, tool_reply
from tests.fakes.measurer import Arm, ScriptedMeasurer, steady
from tests.graph.conftest import TOY, Harness


def _by_proposal(state: TuningState) -> dict[str, Any]:
    return {e.proposal_id: e for e in state.experiments}


def test_autonomous_run_keeps_the_win_reverts_the_regression_and_refuses_doing_less(harness: Harness) -> None:
    out = harness.invoke(harness.state(mode="autonomous"))
    state = harness.values()
    assert out["status"] == state.status == "completed"
    exps = _by_proposal(state)
    assert set(exps) == {"WORKERS=4", "SLOW=1"}  # EPOCHS=1 never ran
    assert exps["WORKERS=4"].verdict == "win" and exps["WORKERS=4"].kept
    assert exps["SLOW=1"].verdict == "regression" and not exps["SLOW=1"].kept
    # the incumbent is the win, measured in its own iteration
    assert state.incumbent is not None and state.incumbent.settings["WORKERS"] == 4
    refused = state.proposal("EPOCHS=1")
    assert refused.status == "rejected" and "doing less" in refused.reason and refused.iteration is None
    records = {r.id: r for r in opt_kb_records()}
    assert records[refused.kb_record_id].verdict == "rejected"  # type: ignore[index]
    assert {records[e.kb_record_id].verdict for e in exps.values()} == {"win", "regression"}  # type: ignore[index]
    # every experiment went through the guard nodes before its record
    judged = {(g.proposal_id, g.decision.guard) for g in state.guard_decisions if g.iteration is not None}
    assert ("WORKERS=4", "non_degradation") in judged and ("SLOW=1", "non_degradation") in judged
    assert len(state.checklist) == 12 and all(c.reason for c in state.checklist)
    run_dir = harness.ws.run_dir(harness.run_id)
    assert (run_dir / "report.md").is_file() and "Proposal table" in (run_dir / "report.md").read_text()
    assert harness.ws.validate_structure(harness.run_id).clean


def test_interactive_mode_asks_before_every_change_and_does_nothing_first(harness: Harness) -> None:
    out = harness.invoke(harness.state(mode="interactive", max_experiments=2))
    pending = out["__interrupt__"][0].value
    first = pending["proposal_id"]
    assert pending["resume_with"].startswith("dftune approve")
    assert harness.ws.iterations(harness.run_id) == []  # nothing applied before the answer
    out = harness.invoke(Command(resume={"decision": "reject", "reason": "not tonight"}))
    state = harness.values()
    assert state.proposal(first).status == "declined" and "not tonight" in state.proposal(first).reason
    assert harness.ws.iterations(harness.run_id) == []
    second = out["__interrupt__"][0].value["proposal_id"]
    assert second != first
    harness.invoke(Command(resume={"decision": "approve"}))
    state = harness.values()
    assert [e.proposal_id for e in state.experiments] == [second]
    assert [a.by for a in state.approvals] == ["person", "person"]
    assert state.status == "completed"


def test_a_scripted_model_chooses_and_is_reasked_when_it_answers_outside_the_options(
    harness: Harness,
) -> None:
    model = ScriptedChatModel(
        script=[
            tool_reply("ImpactEstimates", {"estimates": []}),  # wrong: no estimate per proposal
            tool_reply(
                "ImpactEstimates",
                {"estimates": [{"proposal_id": "WORKERS=4", "app_impact_pct": 300.0, "reason": "x"}]},
            ),  # out of range
            tool_reply("ImpactEstimates", {"estimates": []}),  # third strike: the rules estimate
            tool_reply("Choice", {"proposal_id": "rm -rf /", "reason": "a command is not an option"}),
            tool_reply("Choice", {"proposal_id": "SLOW=1", "reason": "cheap to check first"}),
            tool_reply("Choice", {"proposal_id": "WORKERS=4", "reason": "the remaining one"}),
            tool_reply("Summary", {"text": "scripted summary"}),
        ]
    )
    reasoner = LLMReasoner(model, name="fake:scripted", settings=LLMSettings(actions=[]))
    harness.invoke(harness.state(model="fake:scripted"), harness.context(reasoner=reasoner))
    state = harness.values()
    assert model.violations == []  # every re-ask kept both APIs' message rules
    assert [e.proposal_id for e in state.experiments] == ["SLOW=1", "WORKERS=4"]
    assert model.script == []
    assert any("estimate_impacts: no valid answer" in f for f in reasoner.fallbacks)
    # only what the guards let through was estimated, and by the rules after the failed answers
    first_prompt = str(model.seen[0][1].content)
    assert "WORKERS=4" in first_prompt and "EPOCHS=1" not in first_prompt
    assert {state.proposal(i).impact_estimated_by for i in ("SLOW=1", "WORKERS=4")} == {"rules"}
    assert state.proposal("EPOCHS=1").impact_reason == ""  # refused: never estimated
    # the invalid id went back as the tool call's error result, not as a human turn
    tool_results = [m for msgs in model.seen for m in msgs if isinstance(m, ToolMessage)]
    assert any("not one of the offered ids" in str(m.content) and m.status == "error" for m in tool_results)
    who = [(d.question, d.decided_by) for d in state.decisions]
    assert who == [
        ("estimate_impacts", "rules"),
        ("choose_next", "model"),
        ("choose_next", "model"),
        ("summarize", "model"),
    ]
    report = (harness.ws.run_dir(harness.run_id) / "report.md").read_text()
    assert "> scripted summary" in report and "summary by the model fake:scripted" in report


def _facts(state: TuningState) -> Any:
    from dftune.agents.optimizer import facts_of

    return facts_of(state)


def test_token_budget_hands_every_judgment_back_to_the_rules(harness: Harness) -> None:
    model = ScriptedChatModel(script=[tool_reply("ImpactEstimates", {"estimates": []}, tokens=10_000)])
    reasoner = LLMReasoner(model, name="fake:budget", settings=LLMSettings(actions=[]))
    harness.invoke(
        harness.state(max_experiments=1, token_budget=5_000, model="fake:budget"),
        harness.context(reasoner=reasoner),
    )
    state = harness.values()
    assert state.status == "completed" and model.violations == []
    assert any("token budget" in f for f in reasoner.fallbacks)
    assert len(model.seen) == 1  # the one call that overran; none after it
    assert state.tokens_spent == 10_000
    assert all(d.decided_by == "rules" for d in state.decisions)


def test_resume_after_a_crash_repeats_no_experiment_and_no_record(
    harness: Harness, monkeypatch: pytest.MonkeyPatch
) -> None:
    import dftune.agents.verifier as verifier

    real = verifier.measure_paired
    calls = {"n": 0}

    def crash_on_second(*args: Any, **kwargs: Any) -> Any:
        calls["n"] += 1
        if calls["n"] == 2:
            raise RuntimeError("power cut")
        return real(*args, **kwargs)

    monkeypatch.setattr(verifier, "measure_paired", crash_on_second)
    with pytest.raises(RuntimeError, match="power cut"):
        harness.invoke(harness.state())
    crashed = harness.values()
    assert len(crashed.experiments) == 2 and crashed.experiments[-1].candidate is None
    harness.invoke(None)  # resume from the last checkpoint
    state = harness.values()
    assert state.status == "completed"
    assert [e.iteration for e in state.experiments] == [1, 2]
    records = opt_kb_records()
    keys = [r.dedup_key for r in records]
    assert len(keys) == len(set(keys))
    assert sorted(r.iteration for r in records if r.iteration is not None and r.metric_scope == "app") == [
        1,
        2,
    ]


def test_policy_never_applies_admin_only_and_asks_for_sudo() -> None:
    from dftune.agents.policy import approval_rule as policy
    from dftune.core.domain.proposals import Change, Proposal

    def prop(privilege: str, layer: str, kind: str = "env") -> Proposal:
        return Proposal(
            id="p",
            strategy="l2.malloc_arena",
            strategy_name="x",
            layer=layer,
            checklist=11,  # type: ignore[arg-type]
            description="d",
            change=Change(kind=kind),
            privilege=privilege,
        )  # type: ignore[arg-type]

    assert policy(prop("no-sudo", "L2"), "autonomous") == "approve"
    assert policy(prop("no-sudo", "L1"), "interactive") == "ask"
    assert policy(prop("sudo", "L3", "command"), "autonomous") == "ask"
    assert policy(prop("no-sudo", "L3", "command"), "autonomous") == "ask"
    assert policy(prop("admin-only", "L3", "manual"), "autonomous") == "manual"


def test_a_source_patch_is_applied_to_a_copy_measured_and_kept(tmp_path: Path, harness: Harness) -> None:
    import shutil

    work = tmp_path / "app"
    work.mkdir()
    (work / "app.py").write_text(
        "import sys, time\nstart = time.perf_counter()\ntime.sleep(0.05)\n"
        "print(f'run_time_s {time.perf_counter() - start:.6f}')\n"
    )
    (work / "fast.diff").write_text(
        "--- a/app.py\n+++ b/app.py\n@@ -1,4 +1,4 @@\n import sys, time\n start = time.perf_counter()\n"
        "-time.sleep(0.05)\n+time.sleep(0.01)\n print(f'run_time_s {time.perf_counter() - start:.6f}')\n"
    )
    (work / "workload.toml").write_text(
        'name = "patched"\ncommand = ["{python}", "app.py"]\nreplicates = 5\npage_cache = "warm"\n'
        '[metric]\nkind = "stdout_regex"\npattern = \'run_time_s ([0-9.]+)\'\n[tracing]\nmode = "off"\n'
        '[[patches]]\nname = "shorter-stall"\nfile = "fast.diff"\nstrategy = "l1.vectored_io"\n'
    )
    original = (work / "app.py").read_bytes()
    # the program reports its stall: 50 ms, 10 ms once the patch shortened it
    harness.measurer = ScriptedMeasurer(
        [Arm({}, steady(0.05)), Arm({}, steady(0.01), source={"app.py": "time.sleep(0.01)"})]
    )
    harness.invoke(TuningState(run_id=harness.run_id, spec_path=str(work / "workload.toml")))
    state = harness.values()
    (exp,) = state.experiments
    assert exp.proposal_id == "patch-shorter-stall" and exp.verdict == "win" and exp.kept
    copy = harness.ws.iteration_dir(harness.run_id, 1) / "source"
    assert b"sleep(0.01)" in (copy / "app.py").read_bytes()
    assert (work / "app.py").read_bytes() == original  # the user's source is never touched
    assert state.incumbent is not None and state.incumbent.source_dir == str(copy)
    shutil.rmtree(work)


def test_a_run_that_needs_traces_stops_clearly_when_dftracer_is_unusable(
    tmp_path: Path, harness: Harness, monkeypatch: pytest.MonkeyPatch
) -> None:
    import dftune.agents.installer as installer
    from dftune.tools.trace.tracer import TracerUnavailable

    def missing() -> Path:
        raise TracerUnavailable("the dftracer package is not installed: pip install 'dftune[tracer]'")

    monkeypatch.setattr(installer, "preload_library", missing)
    spec = tmp_path / "workload.toml"
    spec.write_text(TOY.read_text().replace('mode = "off"', 'mode = "preload"'))
    (tmp_path / "toy.py").write_text((TOY.parent / "toy.py").read_text())
    harness.invoke(TuningState(run_id=harness.run_id, spec_path=str(spec)))
    state = harness.values()
    assert state.status == "failed" and "tracing is required" in state.status_reason
    assert "--allow-install" in state.status_reason and state.baseline is None
    assert (harness.ws.run_dir(harness.run_id) / "report.md").is_file()


def test_a_second_run_starts_from_the_first_runs_knowledge_base(tmp_path: Path) -> None:
    first = Harness(tmp_path / "one")
    first.invoke(first.state(mode="autonomous"))
    assert [e.proposal_id for e in first.values().experiments] == ["WORKERS=4", "SLOW=1"]
    second = Harness(tmp_path / "two")
    second.invoke(second.state(mode="autonomous"))
    state = second.values()
    # the known win is confirmed first, with the KB's number; the known regression against the same
    # incumbent is not measured again
    assert [e.proposal_id for e in state.experiments] == ["WORKERS=4"]
    chose = next(e for e in state.events if e.message.startswith("chose"))
    assert "knowledge base measured a win" in chose.data["reason"]
    slow = state.proposal("SLOW=1")
    assert slow.status == "known" and "--retry-known" in slow.reason and slow.app_impact_source == "kb"
    report = (second.ws.run_dir(second.run_id) / "report.md").read_text()
    assert "(kb)" in report
    # unless the run asks for it
    third = Harness(tmp_path / "three")
    third.invoke(third.state(mode="autonomous", retry_known=True))
    assert [e.proposal_id for e in third.values().experiments] == ["WORKERS=4", "SLOW=1"]
