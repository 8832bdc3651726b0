"""A whole tuning run of a bundled workload, traced by the real dftracer, with a competent model
behind a strict local API server (the official SDK over HTTP).

The model takes an expert's actions: a WORKERS value outside the knob's list (inside its declared
range), a catalog L2 setting, and two drafted patches for the background-prefetch recommendation:
one that overlaps the same reads with compute (it wins and is kept), and one that skips half of
the samples (faster, and refused by the no-doing-less guard, which measures the bytes read).
Every one of them goes through the same screen, paired measurement, guards and statistics.
"""

from __future__ import annotations

import difflib
import json
import shutil
from pathlib import Path
from typing import Any

import pytest

from dftune.agents.optimizer.actions import draft_path
from dftune.agents.optimizer.plan import slug
from dftune.core.domain.run import LLMSettings
from dftune.graphs.runs import load_state, start_run
from dftune.tools.session.workspace import Workspace
from tests.e2e.test_bundle_verify import carried_and_verified
from tests.fakes.llm_api import MODELS, Reply, by_tool, tool_call
from tests.graph.test_model_actions import _estimates, _ids, _prompt

pytestmark = pytest.mark.e2e

BUNDLED = Path(__file__).resolve().parents[2] / "resources" / "workloads" / "small_reads"
SETTINGS = LLMSettings(timeout_s=5.0, retries=1, deadline_s=10.0, backoff_s=0.05)
STRATEGY = "l1.background_prefetch"
OVERLAP = (
    "    if workers <= 1 and prefetch <= 0:\n"
    "        for p, o in zip(paths, offsets, strict=True):\n"
    "            yield read_sample(p, request, o)\n"
    "        return\n",
    "    if workers <= 1 and prefetch <= 0:  # background readers keep the next samples coming\n"
    "        workers, prefetch = 4, 2\n",
)
HALF = (
    "    paths = sorted(os.path.join(args.data, n) for n in os.listdir(args.data))\n",
    "    paths = sorted(os.path.join(args.data, n) for n in os.listdir(args.data))[::2]\n",
)


def _diff(source: str, old: str, new: str) -> str:
    assert old in source, f"the bundled reader changed: {old!r} is gone"
    lines = difflib.unified_diff(
        source.splitlines(keepends=True),
        source.replace(old, new).splitlines(keepends=True),
        "a/reader.py",
        "b/reader.py",
    )
    return "".join(lines)


def _draft_id(diff: str) -> str:
    """The id dftune gives a draft (its strategy and the digest of its text)."""
    return slug(f"patch:{draft_path(Path('/'), STRATEGY, diff).stem}")


@pytest.fixture
def workload(tmp_path: Path) -> Path:
    """The bundled small-files reader, with a declared range for WORKERS (so a new value can be asked)."""
    root = tmp_path / "small_reads"
    shutil.copytree(BUNDLED, root)
    toml = root / "workload.toml"
    text = toml.read_text()
    text = text.replace(
        "values = [1, 2, 4]\ndefault = 1\n", "values = [1, 2, 4]\ndefault = 1\nmin = 1\nmax = 16\n"
    )
    text = text.replace('"--files", "100"', '"--files", "60"')  # the same reader, a shorter night
    toml.write_text(text)
    return toml


def _l2(body_text: str) -> Reply:
    """The first offered L2 strategy, each parameter at its first declared value (or its minimum)."""
    part = _prompt(body_text).split("(their parameters, and the variables they set):\n", 1)[1]
    offered = json.loads(part)
    pick = next((s for s in offered if s["strategy"] == "l2.malloc_arena"), offered[0])
    params = {p["name"]: str(p["values"][0] if p.get("values") else p["min"]) for p in pick["parameters"]}
    return tool_call(
        "L2Settings",
        {
            "settings": [
                {
                    "strategy": pick["strategy"],
                    "params": params,
                    "reason": "a catalog setting worth one experiment",
                }
            ]
        },
    )


def _drafts(win: str, less: str) -> Any:
    def reply(body_text: str) -> Reply:
        part = _prompt(body_text).split("The recommendations (answer with their ids):\n", 1)[1]
        recs = json.loads(part.split("\n\nThe source tree", 1)[0])
        rec = next(r["id"] for r in recs if r.get("strategy") == STRATEGY or r["id"] == STRATEGY)
        return tool_call(
            "PatchDrafts",
            {
                "patches": [
                    {
                        "recommendation": rec,
                        "diff": win,
                        "reason": "overlap the reads with the training step",
                    },
                    {"recommendation": rec, "diff": less, "reason": "read ahead fewer samples"},
                ]
            },
        )

    return reply


def _choice(order: list[str]) -> Any:
    def reply(body_text: str) -> Reply:
        ids = _ids(body_text, "(choose one id):\n", "\u0000")
        pick = next(
            (i for want in order for i in ids if i == want or (want.endswith(".") and i.startswith(want))),
            ids[0],
        )
        return tool_call("Choice", {"proposal_id": pick, "reason": "the model's plan"})

    return reply


@pytest.mark.parametrize("provider", ["anthropic"])
def test_a_model_driven_run_of_a_bundled_workload_takes_new_actions_under_the_guards(
    provider: str, workload: Path, api: Any, tmp_path: Path
) -> None:
    source = (workload.parent / "reader.py").read_text()
    win, less = _diff(source, *OVERLAP), _diff(source, *HALF)
    win_id, less_id = _draft_id(win), _draft_id(less)
    explain = tool_call("Explanation", {"text": "Measured against the incumbent in the same sitting."})
    go_on = tool_call("Pace", {"action": "continue", "replicates": None, "reason": "more to try"})
    api(
        provider,
        [
            by_tool(
                {
                    "KnobValues": [
                        tool_call(
                            "KnobValues", {"values": [{"knob": "WORKERS", "value": 8, "reason": "8 readers"}]}
                        )
                    ],
                    "L2Settings": [_l2],
                    "PatchDrafts": [_drafts(win, less)],
                    "ImpactEstimates": [_estimates] * 8,
                    "Choice": [_choice([win_id, "WORKERS=8", less_id, "l2."])] * 6,
                    "Pace": [go_on] * 6,
                    "Explanation": [explain] * 6,
                    "Summary": [
                        tool_call(
                            "Summary", {"text": "A drafted patch and a new WORKERS value were measured."}
                        )
                    ],
                }
            )
        ],
    )
    result = start_run(workload, model=MODELS[provider], max_experiments=4, replicates=3, llm=SETTINGS)
    assert result.status == "completed", result.status_reason
    state = load_state(result.run_id)
    by_id = {e.proposal_id: e for e in state.experiments}

    kept_patch = by_id[win_id]  # the same reads, overlapped: a measured win, kept in a patched copy
    assert (kept_patch.verdict, kept_patch.kept) == ("win", True), kept_patch.verdict_reason
    assert kept_patch.candidate is not None and kept_patch.candidate.source_dir
    patched = Path(kept_patch.candidate.source_dir) / "reader.py"
    assert "workers, prefetch = 4, 2" in patched.read_text() and "workers, prefetch" not in source

    new_value = by_id["WORKERS=8"]  # a value the spec does not list, measured like any other
    assert state.proposal("WORKERS=8").proposed_by == f"model:{MODELS[provider]}"
    assert new_value.candidate is not None and new_value.candidate.settings["WORKERS"] == 8

    refused = by_id[less_id]  # half the samples is faster, and it is doing less: the measuring guard says so
    assert not refused.kept and refused.reverted
    stopped = [
        g.decision
        for g in state.guard_decisions
        if g.iteration == refused.iteration and g.decision.guard == "no_doing_less"
    ]
    assert stopped and not stopped[0].passed, [
        (e.proposal_id, e.verdict, e.verdict_reason[:300]) for e in state.experiments
    ]

    l2 = [p for p in state.proposals if p.layer == "L2" and p.proposed_by.startswith("model:")]
    assert l2 and all(
        p.change.env for p in l2
    )  # rendered from the catalog's templates, never named by the model
    measured = [by_id[p.id] for p in l2 if p.id in by_id]
    assert measured and measured[0].candidate is not None
    assert measured[0].candidate.env.items() >= l2[0].change.env.items()
    assert {("knob_values", "model"), ("l2_settings", "model"), ("draft_patch", "model")} <= {
        (d.question, d.decided_by) for d in state.decisions
    }
    report = (Workspace().run_dir(result.run_id) / "report.md").read_text()
    assert win_id in report and less_id in report and "Who decided" in report
    assert (workload.parent / "reader.py").read_text() == source  # the original source is never touched

    # the bundle carries the kept drafted patch for the tuned arm alone, and a copy of it verified
    # under a fresh DFTUNE_HOME applies it to a copy of the source and still shows the gain
    assert result.bundle, result
    bundle = Path(result.bundle)
    doc = json.loads((bundle / "bundle.json").read_text())
    assert doc["baseline"]["patches"] == [] and doc["tuned"]["patches"] == [
        {"path": "changes/source.patch", "strip": 1}
    ]
    assert "workers, prefetch = 4, 2" in (bundle / "changes" / "source.patch").read_text()
    assert "patch -s -d" in (bundle / "scripts" / "tuned.sh").read_text()
    verified = carried_and_verified(bundle, tmp_path / "elsewhere" / "bundle", rounds=4)
    assert verified["verdict"] in ("holds", "larger"), verified
