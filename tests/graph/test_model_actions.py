"""Whole runs in which a model takes an expert's actions, over real HTTP, with SQLite checkpoints.

The toy workload declares a range for WORKERS; a competent scripted model proposes a value
outside its list and a catalog L2 setting, asks for more replicates, explains each verdict and
stops the run. Every proposal goes through the same screen, measurement, guards and statistics;
a model that answers garbage leaves the run to the rules, and the decisions say so.
"""

from __future__ import annotations

import json
from typing import Any

import pytest

from dftune.core.domain.run import LLMSettings
from dftune.graphs.runs import start_run
from dftune.tools.session.workspace import Workspace
from tests.fakes.llm_api import MODELS, Reply, by_tool, text, tool_call
from tests.fakes.measurer import Arm, steady
from tests.graph.conftest import toy_measurer
from tests.graph.test_llm_runs import _state
from tests.unit.test_model_actions import RANGED

#: WORKERS=8, a value only the range allows: the toy's eight items of an epoch on eight threads
EIGHT = Arm({"WORKERS": 8}, steady(0.02))
#: and the catalog's L2 setting the model adds on top (the sleeps do not allocate: no change)
EIGHT_FEWER_ARENAS = Arm({"WORKERS": 8}, steady(0.02), env={"MALLOC_ARENA_MAX": "2"})

SETTINGS = LLMSettings(timeout_s=2.0, retries=1, deadline_s=4.0, backoff_s=0.05)
L2_ID = "l2.malloc_arena-arena_max=2"


def _prompt(body_text: str) -> str:
    body = json.loads(body_text)
    msgs = [m for m in body["messages"] if m.get("role") == "user"]
    content = msgs[0]["content"]
    return content if isinstance(content, str) else " ".join(b.get("text", "") for b in content)


def _ids(body_text: str, start: str, end: str) -> list[str]:
    part = _prompt(body_text).split(start, 1)[1].split(end, 1)[0]
    return [o["id"] for o in json.loads(part)]


def _estimates(body_text: str) -> Reply:
    ids = _ids(body_text, "Proposals:\n", "\n\nThe rules")
    return tool_call(
        "ImpactEstimates",
        {
            "estimates": [
                {
                    "proposal_id": i,
                    "app_impact_pct": 40.0 if i == "WORKERS=8" else 5.0,
                    "reason": "threads overlap sleeps",
                }
                for i in ids
            ]
        },
    )


def _choice(body_text: str) -> Reply:
    ids = _ids(body_text, "(choose one id):\n", "\u0000")
    pick = next((i for i in ("WORKERS=8", L2_ID) if i in ids), ids[0])
    return tool_call("Choice", {"proposal_id": pick, "reason": "the model's plan"})


@pytest.mark.parametrize("provider", ["anthropic", "openai"])
def test_a_competent_model_uses_a_new_knob_value_an_l2_setting_more_replicates_and_stops(
    provider: str, api: Any
) -> None:
    explain = tool_call("Explanation", {"text": "The experiment was measured against the incumbent."})
    api(
        provider,
        [
            by_tool(
                {
                    "KnobValues": [
                        tool_call(
                            "KnobValues", {"values": [{"knob": "WORKERS", "value": 8, "reason": "8 threads"}]}
                        )
                    ],
                    "L2Settings": [
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
                    ],
                    "ImpactEstimates": [_estimates] * 4,
                    "Choice": [_choice] * 4,
                    "Pace": [
                        tool_call(
                            "Pace", {"action": "continue", "replicates": 4, "reason": "a small effect next"}
                        ),
                        tool_call(
                            "Pace", {"action": "stop", "replicates": None, "reason": "nothing left pays"}
                        ),
                    ],
                    "Explanation": [explain] * 4,
                    "Summary": [tool_call("Summary", {"text": "WORKERS=8 was kept."})],
                }
            )
        ],
    )
    result = start_run(
        RANGED,
        model=MODELS[provider],
        max_experiments=4,
        replicates=3,
        llm=SETTINGS,
        measurer=toy_measurer(EIGHT, EIGHT_FEWER_ARENAS),
    )
    assert result.status == "completed"
    state = _state(result.run_id)
    new = state.proposal("WORKERS=8")
    assert new.proposed_by == f"model:{MODELS[provider]}" and new.citation is not None
    first, second = state.experiments
    assert (first.proposal_id, first.verdict, first.kept) == ("WORKERS=8", "win", True)
    assert first.candidate is not None and first.candidate.settings["WORKERS"] == 8
    assert second.proposal_id == L2_ID and second.candidate is not None
    assert second.candidate.env == {"MALLOC_ARENA_MAX": "2"} and second.verdict is not None
    paces = [d.answer for d in state.decisions if d.question == "pace"]
    assert paces == ["continue, 4 replicates", "stop"]
    # up to 4 pairs: all of them, or fewer when the sitting saw early that the verdict was clear
    assert second.candidate.replicates >= 4 or any("of 4 pair(s)" in n for n in second.candidate.notes), (
        second.candidate.notes
    )
    assert "the model stopped the run: nothing left pays" in state.status_reason
    assert all(
        e.explanation == "The experiment was measured against the incumbent." for e in state.experiments
    )
    who = {(d.question, d.decided_by) for d in state.decisions}
    assert {
        ("knob_values", "model"),
        ("l2_settings", "model"),
        ("pace", "model"),
        ("explain_verdict", "model"),
    } <= who
    # EPOCHS=1 (doing less) was still refused by the screen: the model's actions do not bypass it
    assert state.proposal("EPOCHS=1").status == "rejected"
    report = (Workspace().run_dir(result.run_id) / "report.md").read_text()
    assert "knob_values" in report and "explain_verdict" in report


def test_a_model_that_answers_garbage_to_every_action_leaves_the_run_to_the_rules(api: Any) -> None:
    api("anthropic", [text("I would rather not use the tool.").always()])
    result = start_run(
        RANGED,
        model=MODELS["anthropic"],
        max_experiments=2,
        replicates=3,
        llm=SETTINGS,
        measurer=toy_measurer(),
    )
    assert result.status == "completed"
    state = _state(result.run_id)
    assert all(p.proposed_by == "plan" for p in state.proposals)
    assert {d.question for d in state.decisions} >= {"knob_values", "l2_settings", "pace", "explain_verdict"}
    assert all(d.decided_by == "rules" and d.fallback for d in state.decisions)
    assert all(e.explanation == e.verdict_reason for e in state.experiments)


# --------------------------------------------------------------------------- drafted patches

WIN = """--- a/toy.py
+++ b/toy.py
@@ -20,5 +20,6 @@
 a = ap.parse_args()
 start = time.perf_counter()
 for _ in range(a.epochs):
-    chunks = [range(i, a.items, a.workers) for i in range(a.workers)]
+    n = max(a.workers, 8)  # the same sleeps, spread over eight threads
+    chunks = [range(i, a.items, n) for i in range(n)]
     threads = [threading.Thread(target=lambda c=c: [time.sleep(a.unit) for _ in c]) for c in chunks]
"""
BREAK = """--- a/toy.py
+++ b/toy.py
@@ -20,3 +20,4 @@
 a = ap.parse_args()
+raise SystemExit("drafted patch broke the program")
 start = time.perf_counter()
 for _ in range(a.epochs):
"""


def _manual() -> Any:
    from dftune.agents.optimizer import catalog_proposal
    from dftune.tools.catalog import default_catalog

    p = catalog_proposal(default_catalog().strategies["l1.background_prefetch"], {})
    assert p.status == "manual"
    return p


@pytest.mark.parametrize("provider", ["anthropic", "openai"])
def test_a_drafted_patch_that_wins_is_kept_and_one_that_breaks_the_program_is_reverted(
    provider: str, api: Any, harness: Any
) -> None:
    from dftune.agents.reasoner import make_reasoner

    rec = _manual()
    api(
        provider,
        [
            by_tool(
                {
                    "L2Settings": [tool_call("L2Settings", {"settings": []})],
                    "PatchDrafts": [
                        tool_call(
                            "PatchDrafts",
                            {
                                "patches": [
                                    {
                                        "recommendation": rec.id,
                                        "diff": BREAK,
                                        "reason": "start the work sooner",
                                    },
                                    {"recommendation": rec.id, "diff": WIN, "reason": "overlap the waits"},
                                ]
                            },
                        )
                    ],
                    "ImpactEstimates": [_estimates] * 4,
                    "Choice": [lambda b: _pick(b, "patch-")] * 4,
                    "Pace": [tool_call("Pace", {"action": "continue", "replicates": None, "reason": "go on"})]
                    * 3,
                    "Explanation": [
                        tool_call("Explanation", {"text": "The patch was measured against the incumbent."})
                    ]
                    * 3,
                    "Summary": [tool_call("Summary", {"text": "A drafted patch was measured."})],
                }
            )
        ],
    )
    reasoner = make_reasoner(MODELS[provider], settings=SETTINGS)
    harness.measurer = toy_measurer(
        # the broken draft exits before its work; the winning one spreads the sleeps over 8 threads
        Arm({}, fails="drafted patch broke the program", source={"toy.py": "raise SystemExit"}),
        Arm({}, steady(0.02), source={"toy.py": "max(a.workers, 8)"}),
    )
    harness.invoke(
        harness.state(model=MODELS[provider], max_experiments=2, replicates=3, proposals=[rec]),
        harness.context(reasoner=reasoner),
    )
    state = harness.values()
    drafts = [p for p in state.proposals if p.proposed_by.startswith("model:")]
    assert len(drafts) == 2 and all(p.change.kind == "patch" for p in drafts)
    by_verdict = {e.verdict: e for e in state.experiments}
    broke = by_verdict["failed"]
    assert broke.reverted and not broke.kept and "drafted patch broke" not in state.status_reason
    won = by_verdict["win"]
    assert won.kept and won.candidate is not None and won.candidate.source_dir
    patched = (harness.ws.iteration_dir(harness.run_id, won.iteration) / "source" / "toy.py").read_text()
    assert (
        "max(a.workers, 8)" in patched and "max(a.workers, 8)" not in (RANGED.parent / "toy.py").read_text()
    )
    assert state.proposal(rec.id).status == "manual"  # the recommendation itself is never applied


def _pick(body_text: str, prefix: str) -> Reply:
    ids = _ids(body_text, "(choose one id):\n", "\u0000")
    return tool_call(
        "Choice",
        {
            "proposal_id": next((i for i in ids if i.startswith(prefix)), ids[0]),
            "reason": "the drafted patches first",
        },
    )
