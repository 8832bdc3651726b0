"""The model's actions over real HTTP: each typed question, scripted valid and invalid, for both providers.

The official SDKs talk to the strict local servers of tests/fakes/llm_api.py. A valid answer
becomes an ordinary proposal (checked against the spec's declared range, the catalog's declared
parameters, or a patch that applies cleanly); an invalid one goes back as the tool call's error
result, and after the re-asks the rules answer (nothing new) with the fallback recorded.
"""

from __future__ import annotations

import json
import shutil
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import pytest

from dftune.agents.optimizer.actions import draft_proposal, knob_value_proposal, l2_proposal
from dftune.agents.reasoner import Budget, Facts, LLMReasoner, make_reasoner
from dftune.agents.reasoner.protocol import L2Setting, PatchDraft
from dftune.agents.reasoner.questions import (
    draft_question,
    explain_question,
    knob_value_question,
    l2_question,
    pace_question,
)
from dftune.core.domain.proposals import Proposal
from dftune.core.domain.run import LLMSettings
from dftune.tools.catalog import default_catalog
from dftune.tools.runner.spec import load_spec
from tests.fakes.llm_api import MODELS, SERVERS, tool_call

RANGED = Path(__file__).parents[1] / "graph" / "toy" / "ranged.toml"
FAST = LLMSettings(timeout_s=5, retries=1, deadline_s=20, backoff_s=0.05)
WHO = "test:model"


def _facts() -> Facts:
    return Facts(
        workload="toy",
        diagnosis=None,
        io_fraction=0.6,
        unoverlapped_fraction=0.5,
        budget=Budget(limit=200_000),
        description="sleeps",
        metric="run_time_s",
    )


@pytest.fixture(params=["anthropic", "openai"])
def serve(request: pytest.FixtureRequest, monkeypatch: pytest.MonkeyPatch) -> Iterator[Any]:
    started: list[Any] = []

    def start(script: list[Any]) -> tuple[Any, LLMReasoner]:
        server = SERVERS[request.param](script).__enter__()
        started.append(server)
        for k, v in server.env().items():
            monkeypatch.setenv(k, v)
        reasoner = make_reasoner(MODELS[request.param], settings=FAST)
        assert isinstance(reasoner, LLMReasoner)
        return server, reasoner

    yield start
    for s in started:
        s.__exit__(None, None, None)


def _errors(server: Any) -> list[str]:
    """The error texts the server received as tool results (what the model was told was wrong)."""
    out = []
    for seen in server.requests:
        for m in seen.body.get("messages", []):
            if m.get("role") == "tool":
                out.append(str(m.get("content")))
            for block in m.get("content") if isinstance(m.get("content"), list) else []:
                if isinstance(block, dict) and block.get("type") == "tool_result":
                    out.append(json.dumps(block.get("content")))
    return out


# --------------------------------------------------------------------------- a knob value


def _knob_question() -> Any:
    spec, catalog = load_spec(RANGED), default_catalog()
    offer = [{"knob": "WORKERS", "type": "int", "min": 1, "max": 8, "values": [1, 4]}]
    return knob_value_question(
        offer, lambda k: knob_value_proposal(spec, catalog, k.knob, k.value, WHO), _facts()
    )


def test_a_new_knob_value_inside_the_range_becomes_a_cited_proposal(serve: Any) -> None:
    _, reasoner = serve(
        [tool_call("KnobValues", {"values": [{"knob": "WORKERS", "value": 8, "reason": "8 threads"}]})]
    )
    j = reasoner.decide(_knob_question(), _facts())
    (p,) = j.answer
    assert (p.id, p.strategy, p.proposed_by, p.change.settings) == (
        "WORKERS=8",
        "l1.dataloader_workers",
        f"model:{WHO}",
        {"WORKERS": "8"},
    )
    assert j.decision.decided_by == "model" and j.decision.answer == "WORKERS=8"


def test_out_of_range_listed_and_fractional_values_are_sent_back_then_the_rules_decide(serve: Any) -> None:
    server, reasoner = serve(
        [
            tool_call("KnobValues", {"values": [{"knob": "WORKERS", "value": 64, "reason": "many"}]}),
            tool_call("KnobValues", {"values": [{"knob": "WORKERS", "value": 4, "reason": "listed"}]}),
            tool_call("KnobValues", {"values": [{"knob": "EPOCHS", "value": 2.5, "reason": "not ranged"}]}),
        ]
    )
    j = reasoner.decide(_knob_question(), _facts())
    assert j.answer == [] and j.decision.decided_by == "rules" and "no valid answer" in j.decision.fallback
    errors = _errors(server)
    assert any("outside its declared range [1, 8]" in e for e in errors)
    assert any("already in its value list" in e for e in errors)


# --------------------------------------------------------------------------- L2 settings


def _l2_question() -> Any:
    catalog = default_catalog()
    offered = {"l2.malloc_arena": catalog.strategies["l2.malloc_arena"]}

    def build(item: L2Setting) -> Proposal:
        if item.strategy not in offered:
            raise ValueError(f"{item.strategy!r} is not one of the offered strategies")
        return l2_proposal(offered[item.strategy], item.params, {}, WHO)

    return l2_question([{"strategy": "l2.malloc_arena"}], build, _facts())


def test_an_l2_setting_is_rendered_from_the_catalogs_template(serve: Any) -> None:
    _, reasoner = serve(
        [
            tool_call(
                "L2Settings",
                {
                    "settings": [
                        {
                            "strategy": "l2.malloc_arena",
                            "params": {"arena_max": "2"},
                            "reason": "fewer arenas",
                        }
                    ]
                },
            )
        ]
    )
    (p,) = reasoner.decide(_l2_question(), _facts()).answer
    assert p.change.kind == "env" and p.change.env == {"MALLOC_ARENA_MAX": "2"} and p.layer == "L2"
    assert p.change.params == {"arena_max": "2"}


def test_undeclared_variables_out_of_range_and_unoffered_strategies_are_refused(serve: Any) -> None:
    server, reasoner = serve(
        [
            tool_call(
                "L2Settings",
                {
                    "settings": [
                        {
                            "strategy": "l2.malloc_arena",
                            "params": {"LD_PRELOAD": "/tmp/x.so"},
                            "reason": "sneaky",
                        }
                    ]
                },
            ),
            tool_call(
                "L2Settings",
                {
                    "settings": [
                        {"strategy": "l2.malloc_arena", "params": {"arena_max": "99999"}, "reason": "big"}
                    ]
                },
            ),
            tool_call(
                "L2Settings",
                {
                    "settings": [
                        {
                            "strategy": "l2.fadvise_preload",
                            "params": {"preload_lib": "/tmp/x.so"},
                            "reason": "x",
                        }
                    ]
                },
            ),
        ]
    )
    j = reasoner.decide(_l2_question(), _facts())
    assert j.answer == [] and j.decision.decided_by == "rules"
    errors = _errors(server)
    assert any("declares no settable parameter LD_PRELOAD" in e for e in errors)
    assert any("outside its declared range [0, 4096]" in e for e in errors)


# --------------------------------------------------------------------------- a drafted patch

GOOD = "".join(
    [
        "--- a/toy.py\n",
        "+++ b/toy.py\n",
        "@@ -1,3 +1,4 @@\n",
        "+# drafted: nothing else changes\n",
        ' """A toy workload for graph tests: its time is set by its knobs, so verdicts are predictable.\n',
        " \n",  # a context line: the file's blank line
        " The work is ``--items`` sleeps of ``--unit`` seconds spread over ``--workers`` threads (more\n",
    ]
)
STALE = GOOD.replace("A toy workload for graph tests", "A workload that is not there")


def _draft_question(tmp: Path) -> tuple[Any, Path]:
    src = tmp / "source"
    shutil.copytree(RANGED.parent, src)
    run_dir = tmp / "run"
    s = default_catalog().strategies["l1.write_buffering"]

    def build(item: PatchDraft) -> Proposal:
        if item.recommendation != "l1.write_buffering":
            raise ValueError("not an offered recommendation")
        return draft_proposal(s, item.diff, src, run_dir, WHO)

    return draft_question([{"id": "l1.write_buffering"}], "toy.py", build, _facts()), run_dir


def test_a_drafted_patch_that_applies_is_kept_as_a_draft_file(serve: Any, tmp_path: Path) -> None:
    _, reasoner = serve(
        [
            tool_call(
                "PatchDrafts",
                {"patches": [{"recommendation": "l1.write_buffering", "diff": GOOD, "reason": "buffer"}]},
            )
        ]
    )
    q, run_dir = _draft_question(tmp_path)
    (p,) = reasoner.decide(q, _facts()).answer
    assert p.change.kind == "patch" and Path(p.change.patch_file).parent == run_dir / "drafts"
    assert Path(p.change.patch_file).read_text() == GOOD and p.id.startswith("patch-l1.write_buffering-")


def test_a_patch_that_does_not_apply_is_sent_back_and_never_written(serve: Any, tmp_path: Path) -> None:
    server, reasoner = serve(
        [
            tool_call(
                "PatchDrafts",
                {"patches": [{"recommendation": "l1.write_buffering", "diff": STALE, "reason": "stale"}]},
            )
        ]
        * 3
    )
    q, run_dir = _draft_question(tmp_path)
    j = reasoner.decide(q, _facts())
    assert j.answer == [] and j.decision.decided_by == "rules" and not (run_dir / "drafts").exists()
    assert any("does not apply cleanly" in e for e in _errors(server))


# --------------------------------------------------------------------------- pace and explanations


def test_pace_is_bounded_and_the_model_may_stop(serve: Any) -> None:
    server, reasoner = serve(
        [
            tool_call("Pace", {"action": "continue", "replicates": 50, "reason": "more"}),
            tool_call("Pace", {"action": "stop", "replicates": None, "reason": "nothing left pays"}),
        ]
    )
    j = reasoner.decide(pace_question(_facts(), 3, 6), _facts())
    assert j.answer.action == "stop" and j.decision.decided_by == "model"
    assert any("replicates must be between 3 and 6" in e for e in _errors(server))
    rules = pace_question(_facts(), 3, 6).rules()
    assert (rules.action, rules.replicates) == ("continue", None)


def test_an_explanation_keeps_only_what_the_experiment_says(serve: Any) -> None:
    exp = {"proposal": "WORKERS=8", "verdict": "win", "kept": True, "change_pct": 41.2, "p_value": 0.01}
    _, reasoner = serve(
        [tool_call("Explanation", {"text": "WORKERS=8 was kept: 41.2% faster. It saved 99% of I/O."})]
    )
    j = reasoner.decide(explain_question(_facts(), exp, "the rules' reason"), _facts())
    assert j.answer == "WORKERS=8 was kept: 41.2% faster." and any("dropped" in n for n in j.decision.notes)
