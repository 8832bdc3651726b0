"""An MCP client drives a whole tuning run over stdio: start it with a budget, read it, answer its
question, read its report; with the MCP SDK's own client and the real `dftune mcp` server.

The toy workload (tests/graph/toy) is a real program; interactive mode makes its first change
wait for a person, so the answer really goes through the run's approval node.
"""

from __future__ import annotations

import json
import os
import sys
from collections.abc import AsyncIterator
from contextlib import asynccontextmanager
from pathlib import Path
from typing import Any

import anyio
import pytest
from mcp import ClientSession, StdioServerParameters, stdio_client

from dftune.graphs.runs import load_state

pytestmark = pytest.mark.e2e
REPO = Path(__file__).resolve().parents[2]
TOY = REPO / "tests" / "graph" / "toy" / "workload.toml"
RUN_TOOLS = {"run_start", "run_list", "run_show", "run_answer", "run_resume", "run_report"}
#: every `mcp__dftracer__<name>` a pipeline skill page calls, once the server is registered as "dftracer"
SKILL_NAMES = {
    "analyze",
    "diagnose",
    "comparator",
    "event_count",
    "reader",
    "session_analyze_traces",
    "session_validate_structure",
    "session_reorganize_structure",
    "session_search_optimization_context",
    "session_search_local_papers",
    "opt_kb_lookup",
    "opt_kb_record",
    "opt_kb_render",
    "opt_proposal_table",
    "rag_search",
    "search_arxiv",
    "search_papers_combined",
}


@asynccontextmanager
async def _session(errlog: Path) -> AsyncIterator[ClientSession]:
    env = {
        "DFTUNE_HOME": os.environ["DFTUNE_HOME"],
        "DFTUNE_OFFLINE": "1",
        "PATH": os.environ.get("PATH", ""),
    }
    params = StdioServerParameters(
        command=sys.executable, args=["-m", "dftune.cli", "mcp"], env=env, cwd=REPO
    )
    with errlog.open("w") as err:
        async with stdio_client(params, errlog=err) as (read, write), ClientSession(read, write) as session:
            await session.initialize()
            yield session


async def _call(s: ClientSession, name: str, args: dict[str, Any]) -> tuple[bool, Any]:
    res = await s.call_tool(name, args)
    text = res.content[0].text if res.content else ""  # type: ignore[union-attr]
    return bool(res.is_error), (text if res.is_error else json.loads(text))


async def _ok(s: ClientSession, name: str, args: dict[str, Any]) -> dict[str, Any]:
    failed, doc = await _call(s, name, args)
    assert not failed, f"{name}: {doc}"
    return doc  # type: ignore[no-any-return]


async def _err(s: ClientSession, name: str, args: dict[str, Any]) -> str:
    failed, text = await _call(s, name, args)
    assert failed, f"{name} should have been refused: {text}"
    assert "\n" not in text and text.startswith(f"{name}: "), text
    return str(text)


def test_a_client_starts_a_run_answers_it_and_reads_its_report(tmp_path: Path) -> None:
    errlog = tmp_path / "server.stderr"
    run_id = "mcp-driven"

    async def scenario(s: ClientSession) -> None:
        names = {t.name for t in (await s.list_tools()).tools}
        assert names >= RUN_TOOLS | SKILL_NAMES
        # refused before anything runs, as `dftune run` refuses it
        assert "nope.toml" in await _err(s, "run_start", {"spec": str(tmp_path / "nope.toml")})
        assert "budget" in (await _err(s, "run_start", {"spec": str(TOY), "time_budget": "soon"})).lower()
        assert (await _ok(s, "run_list", {}))["runs_total"] == 0

        started = await _ok(
            s,
            "run_start",
            {
                "spec": str(TOY),
                "run_id": run_id,
                "mode": "interactive",
                "max_experiments": 1,
                "replicates": 3,
                "time_budget": "5m",
                "wait_s": 240,
            },
        )
        assert started["run_id"] == run_id and started["started"]
        shown = await _ok(s, "run_show", {"run_id": run_id, "wait_s": 240})
        assert shown["status"] == "awaiting_approval", shown
        pending = shown["pending"][0]  # approvals first, then changes kept on trial
        assert pending["proposal_id"] and pending["answer_format"]
        assert [r["id"] for r in (await _ok(s, "run_list", {}))["runs"]] == [run_id]
        assert "report" in await _err(s, "run_report", {"run_id": run_id})  # not finished: no report yet

        # only an exact decision is an answer; a refused one changes nothing
        assert "nothing was applied" in await _err(s, "run_answer", {"run_id": run_id, "decision": "yes"})
        assert (await _ok(s, "run_show", {"run_id": run_id}))["pending"][0]["proposal_id"] == pending[
            "proposal_id"
        ]

        done = await _ok(
            s,
            "run_answer",
            {"run_id": run_id, "decision": "approve", "reason": "ok from the client", "wait_s": 300},
        )
        assert done["answered"] == {
            "proposal_id": pending["proposal_id"],
            "strategy": pending["strategy"],
            "kind": pending["kind"],
            "decision": "approve",
            "reason": "ok from the client",
        }
        assert done["status"] == "completed", done
        assert len(done["verdicts"]) == 1 and done["verdicts"][0]["proposal"] == pending["proposal_id"]
        assert "not waiting" in await _err(s, "run_answer", {"run_id": run_id, "decision": "reject"})

        report = await _ok(s, "run_report", {"run_id": run_id, "html": True})
        assert Path(report["markdown"]).is_file() and Path(report["html"]).is_file()
        assert report["text"] == Path(report["markdown"]).read_text("utf-8") and run_id in report["text"]

    try:
        anyio.run(lambda: _run(scenario, errlog))
    except BaseException:
        sys.stderr.write(f"--- server stderr ---\n{errlog.read_text() if errlog.exists() else ''}\n")
        raise
    # the run's own saved state holds the person's answer, as after `dftune approve`
    state = load_state(run_id)
    person = [a for a in state.approvals if a.by == "person"]
    assert [(a.approved, a.reason) for a in person] == [(True, "ok from the client")]
    assert state.max_experiments == 1 and len(state.experiments) == 1


async def _run(scenario: Any, errlog: Path) -> None:
    async with _session(errlog) as s:
        await scenario(s)
