"""`dftune mcp` driven by the MCP SDK's own stdio client, as Claude Code or Codex would drive it.

Each test starts the real server (`python -m dftune.cli mcp`) with the test's DFTUNE_HOME and
DFTUNE_OFFLINE=1, lists or calls tools over stdio, and checks the answers against dftune's own
functions run in-process (never against numbers written into the test).
"""

from __future__ import annotations

import json
import os
import shutil
import subprocess
import sys
import time
from collections.abc import AsyncIterator, Awaitable, Callable
from contextlib import asynccontextmanager
from pathlib import Path
from typing import Any

import anyio
import conftest as c  # tests/ is on sys.path (rootdir conftest, prepend import mode)
import pytest
from mcp import ClientSession, StdioServerParameters, stdio_client
from mcp.shared.exceptions import MCPError

from dftune.tools.trace import analyze

pytestmark = pytest.mark.e2e
REPO = Path(__file__).resolve().parents[2]
TOY = REPO / "tests" / "graph" / "toy" / "workload.toml"
TOOLS = {
    "analyze",
    "diagnose",
    "comparator",
    "event_count",
    "reader",
    "session_analyze_traces",
    "session_validate_structure",
    "session_reorganize_structure",
    "opt_kb_lookup",
    "opt_kb_record",
    "opt_kb_render",
    "opt_proposal_table",
    "rag_search",
    "search_arxiv",
    "search_papers_combined",
    "get_arxiv_paper",
    "session_search_optimization_context",
    "session_search_local_papers",
    "run_start",
    "run_list",
    "run_bundle",
    "bundle_verify",
    "run_show",
    "run_answer",
    "run_resume",
    "run_report",
}


def _env() -> dict[str, str]:
    """What the server process gets: this test's state folder, no network, this Python's PATH."""
    return {
        "DFTUNE_HOME": os.environ["DFTUNE_HOME"],
        "DFTUNE_OFFLINE": "1",
        "PATH": os.environ.get("PATH", ""),
        "PYTHONDONTWRITEBYTECODE": "1",
    }


@asynccontextmanager
async def _session(errlog: Path) -> AsyncIterator[ClientSession]:
    params = StdioServerParameters(
        command=sys.executable, args=["-m", "dftune.cli", "mcp"], env=_env(), cwd=REPO
    )
    with errlog.open("w") as err:
        async with stdio_client(params, errlog=err) as (read, write), ClientSession(read, write) as session:
            await session.initialize()
            yield session


def _drive(tmp_path: Path, scenario: Callable[[ClientSession], Awaitable[None]]) -> None:
    """Run one scenario against a fresh server; on failure show what the server said on stderr."""
    errlog = tmp_path / "server.stderr"

    async def main() -> None:
        async with _session(errlog) as s:
            await scenario(s)

    try:
        anyio.run(main)
    except BaseException:
        sys.stderr.write(f"--- server stderr ---\n{errlog.read_text() if errlog.exists() else ''}\n")
        raise


async def _ok(s: ClientSession, name: str, args: dict[str, Any]) -> dict[str, Any]:
    res = await s.call_tool(name, args)
    text = res.content[0].text if res.content else ""  # type: ignore[union-attr]
    assert not res.is_error, f"{name}: {text}"
    assert isinstance(res.structured_content, dict)
    assert json.loads(text) == res.structured_content  # the text block carries the same JSON
    return res.structured_content


async def _err(s: ClientSession, name: str, args: dict[str, Any]) -> str:
    res = await s.call_tool(name, args)
    assert res.is_error, f"{name} should have failed: {res.structured_content}"
    text: str = res.content[0].text  # type: ignore[union-attr]
    assert "\n" not in text and text.startswith(f"{name}: "), text
    return text


# --------------------------------------------------------------------------- listing


def test_lists_every_seed_tool_with_a_described_input_schema(tmp_path: Path) -> None:
    async def scenario(s: ClientSession) -> None:
        listed = (await s.list_tools()).tools
        assert {t.name for t in listed} == TOOLS
        for t in listed:
            assert t.description and len(t.description) > 40, t.name
            schema = t.input_schema
            assert schema["type"] == "object" and schema["properties"], t.name
            for field, prop in schema["properties"].items():
                assert "description" in prop or "$ref" in prop or "allOf" in prop, f"{t.name}.{field}"
        by_name = {t.name: t.input_schema for t in listed}
        assert by_name["analyze"]["required"] == ["paths"]
        assert set(by_name["opt_kb_record"]["required"]) == {"system", "workload", "strategy", "metric"}
        assert by_name["opt_proposal_table"]["required"] == ["rows"]
        with pytest.raises(MCPError, match="unknown tool"):
            await s.call_tool("no_such_tool", {})

    _drive(tmp_path, scenario)


# --------------------------------------------------------------------------- trace tools


def test_trace_tools_agree_with_dftune_in_process(tmp_path: Path, shared_traces: Path) -> None:
    two_runs = shared_traces / "dlio-legacy-strings"  # two hosts, 75 h apart
    dlio = two_runs / "dlio-1proc.pfw.gz"
    unet = shared_traces / "dlio-unet3d-8ranks-legacy"
    want_dlio, want_unet = analyze([dlio]), analyze([unet])

    async def scenario(s: ClientSession) -> None:
        for tool in ("analyze", "diagnose"):  # several runs: refused with the way out, or one result per run
            assert "split_runs" in await _err(s, tool, {"paths": [str(two_runs)]})
            runs = (await _ok(s, tool, {"paths": [str(two_runs)], "split_runs": True}))["runs"]
            assert [r["run"]["hosts"] for r in runs] == [["corona237"], ["ruby165"]]
            assert sum(r["events"] for r in runs) == analyze([two_runs], merge_runs=True).events
        got = await _ok(s, "analyze", {"paths": [str(dlio)], "views": ["summary", "file"], "max_rows": 2})
        assert got["schema"] == "dftune.analysis/1"
        for key in ("events", "files", "processes", "read", "write", "metadata", "read_time_pct", "seq_pct"):
            assert got[key] == want_dlio.to_json_dict()[key], key
        assert len(got["views"]["file"]["rows"]) <= 2
        assert got["views"]["file"].get("rows_total", 2) >= len(got["views"]["file"]["rows"])

        diag = await _ok(s, "diagnose", {"paths": [str(unet)]})
        assert diag["schema"] == "dftune.diagnosis/1" and diag["events"] == want_unet.events
        assert len(diag["checklist"]) == 12

        counted = await _ok(s, "event_count", {"paths": [str(unet)]})
        assert counted["files"] == want_unet.files == len(counted["per_file"])
        assert counted["total"]["events"] == want_unet.events
        assert counted["total"]["skipped_lines"] == want_unet.skipped_lines
        assert sum(r["events"] for r in counted["per_file"]) == want_unet.events

        meta = await _ok(s, "reader", {"paths": [str(unet)]})
        assert meta["hosts"] == want_unet.hosts and meta["processes"] == want_unet.processes
        assert meta["formats"] == want_unet.formats and meta["trace_files"] == want_unet.trace_files
        rng = meta["time_range"]
        assert rng["duration_s"] == want_unet.job_time_s
        assert rng["end_us"] - rng["start_us"] == round(want_unet.job_time_s * 1e6)

        cmp = await _ok(s, "comparator", {"a": {"paths": [str(dlio)]}, "b": {"paths": [str(unet)]}})
        rows = {r["key"]: r for r in cmp["trace"]}
        assert (rows["events"]["a"], rows["events"]["b"]) == (want_dlio.events, want_unet.events)
        assert rows["events"]["change_pct"] == pytest.approx(
            100 * (want_unet.events - want_dlio.events) / want_dlio.events
        )
        assert rows["read.bytes"]["b"] == want_unet.read.bytes
        assert rows["read_time_pct"]["delta"] == pytest.approx(
            want_unet.read_time_pct - want_dlio.read_time_pct
        )

    _drive(tmp_path, scenario)


def test_reader_shows_the_dftracer_2x_metadata(
    tmp_path: Path, generated_traces: dict[str, c.GeneratedTrace]
) -> None:
    trace_dir = generated_traces["preload"].trace_dir
    want = analyze([trace_dir])

    async def scenario(s: ClientSession) -> None:
        meta = await _ok(s, "reader", {"paths": [str(trace_dir)]})
        assert meta["dftracer_versions"] == want.dftracer_versions and meta["dftracer_versions"]
        assert meta["tracer_config"] == want.tracer_config
        assert meta["time_range"]["start_utc"].startswith(time.strftime("%Y"))  # traced just now

    _drive(tmp_path, scenario)


def test_bad_input_is_one_line_naming_the_problem(tmp_path: Path, shared_traces: Path) -> None:
    missing = tmp_path / "no" / "such" / "trace.pfw.gz"
    broken = tmp_path / "broken.pfw"
    broken.write_text('{"id":1,"name":"read","cat":"POSIX","ph":"X","ts":1,"dur":2\nnot json at all\n')

    async def scenario(s: ClientSession) -> None:
        for tool in ("analyze", "diagnose", "event_count", "reader"):
            assert str(missing) in await _err(s, tool, {"paths": [str(missing)]})
        assert "paths" in await _err(s, "analyze", {"paths": []})
        assert "views" in await _err(s, "analyze", {"paths": [str(shared_traces)], "views": ["nope"]})
        assert str(broken) in await _err(s, "analyze", {"paths": [str(broken)]})
        counted = await _ok(
            s, "event_count", {"paths": [str(broken)]}
        )  # skip_bad by default: counted, reported
        assert counted["total"]["skipped_lines"] >= 1 and counted["per_file"][0]["skipped"]
        text = await _err(
            s, "comparator", {"a": {"paths": [str(missing)]}, "b": {"run_id": "x", "paths": ["y"]}}
        )
        assert "exactly one of paths or run_id" in text

    _drive(tmp_path, scenario)


# --------------------------------------------------------------------------- session tools


@pytest.fixture
def toy_run(tmp_path: Path, shared_traces: Path) -> str:
    """A real run (`dftune run` of the toy workload, one experiment) whose folders hold traces.

    The toy workload runs untraced (it only sleeps), so a recorded trace is placed in the
    baseline's and opt1's traces/raw, where the runner would have written them."""
    run_id = "mcp-toy"
    proc = subprocess.run(
        [
            sys.executable,
            "-m",
            "dftune.cli",
            "run",
            str(TOY),
            "--max-experiments",
            "1",
            "--run-id",
            run_id,
            "--json",
        ],
        capture_output=True,
        text=True,
        timeout=300,
        env={**os.environ, "DFTUNE_OFFLINE": "1"},
    )
    assert proc.returncode == 0, proc.stderr
    run = Path(os.environ["DFTUNE_HOME"]) / "runs" / run_id
    assert (run / "opt1").is_dir()
    legacy = shared_traces / "dlio-legacy-strings"
    shutil.copy(legacy / "posix-1proc.pfw", run / "baseline" / "traces" / "raw")
    shutil.copy(legacy / "dlio-1proc.pfw.gz", run / "opt1" / "traces" / "raw")
    return run_id


def test_session_tools_on_a_real_run(tmp_path: Path, toy_run: str) -> None:
    run = Path(os.environ["DFTUNE_HOME"]) / "runs" / toy_run
    want_base = analyze([run / "baseline" / "traces" / "raw"])
    want_opt = analyze([run / "opt1" / "traces" / "raw"])
    stray = run / "stray-0.pfw"  # a trace outside traces/raw: the layout check must catch it
    shutil.copy(run / "baseline" / "traces" / "raw" / "posix-1proc.pfw", stray)

    async def scenario(s: ClientSession) -> None:
        got = await _ok(s, "session_analyze_traces", {"run_id": toy_run})
        assert got["iteration"] == "baseline" and got["analysis"]["events"] == want_base.events
        got = await _ok(
            s, "session_analyze_traces", {"run_id": toy_run, "iteration": "latest", "views": ["proc"]}
        )
        assert got["iteration"] == "opt1" and got["analysis"]["events"] == want_opt.events
        assert "proc" in got["analysis"]["views"]
        assert "no run 'nope'" in await _err(s, "session_analyze_traces", {"run_id": "nope"})
        assert "has no opt9" in await _err(
            s, "session_analyze_traces", {"run_id": toy_run, "iteration": "opt9"}
        )
        assert "run id" in await _err(s, "session_validate_structure", {"run_id": "../etc"})

        cmp = await _ok(
            s, "comparator", {"a": {"run_id": toy_run}, "b": {"run_id": toy_run, "iteration": "1"}}
        )
        assert (cmp["a"]["path"], cmp["b"]["path"]) == (f"{toy_run}/baseline", f"{toy_run}/opt1")
        rows = {r["key"]: r for r in cmp["trace"]}
        assert (rows["read.count"]["a"], rows["read.count"]["b"]) == (
            want_base.read.count,
            want_opt.read.count,
        )

        report = await _ok(s, "session_validate_structure", {"run_id": toy_run})
        assert not report["clean"]
        assert [p["path"] for p in report["problems"] if p["kind"] == "stray_trace"] == ["stray-0.pfw"]
        plan = await _ok(s, "session_reorganize_structure", {"run_id": toy_run})
        assert plan["dry_run"] and any(m["src"] == "stray-0.pfw" for m in plan["moves"])
        assert stray.exists()  # a dry run changes nothing
        done = await _ok(s, "session_reorganize_structure", {"run_id": toy_run, "dry_run": False})
        assert done["clean_after"] and not stray.exists()
        assert (await _ok(s, "session_validate_structure", {"run_id": toy_run}))["clean"]

        ctx = await _ok(
            s,
            "session_search_optimization_context",
            {"run_id": toy_run, "system": "testbox", "workload": "toy"},
        )
        assert ctx["online"] is False and ctx["iteration"] == 1
        assert (run / "opt1" / "context_opportunities.json").is_file()
        assert (run / "opt1" / "optimization_papers.json").is_file()

    _drive(tmp_path, scenario)


# --------------------------------------------------------------------------- knowledge base


def test_kb_tools_enforce_the_guards(tmp_path: Path, shared_traces: Path) -> None:
    trace = shared_traces / "dlio-legacy-strings" / "posix-1proc.pfw"
    # an MCP client's writes stay inside DFTUNE_HOME
    kb_md = (Path(os.environ["DFTUNE_HOME"]) / "kb" / "team" / "kb.md").resolve()

    async def scenario(s: ClientSession) -> None:
        forbidden = await _ok(
            s,
            "opt_kb_record",
            {
                "system": "testbox",
                "workload": "toy",
                "strategy": "l1.fewer_epochs",
                "metric": "wall_time_s",
                "before": 10.0,
                "after": 5.0,
            },
        )
        assert forbidden["verdict"] == "rejected"
        assert "doing less" in forbidden["verdict_reason"].lower()

        text = await _err(
            s,
            "opt_kb_record",
            {
                "system": "testbox",
                "workload": "toy",
                "strategy": "l2.romio_cb_buffer",
                "software": "mpi-io",
                "metric": "bw",
                "metric_scope": "system",
                "before": 1.0,
                "after": 2.0,
            },
        )
        assert "paired app metric" in text
        assert "strategy" in await _err(s, "opt_kb_record", {"system": "x", "workload": "y", "metric": "m"})

        measured = await _ok(
            s,
            "opt_kb_record",
            {
                "system": "testbox",
                "workload": "toy",
                "strategy": "l1.dataloader_workers",
                "metric": "wall_time_s",
                "before": 10.0,
                "after": 7.0,
                "before_ci": [9.5, 10.5],
                "after_ci": [6.5, 7.5],
                "baseline_traces": [str(trace)],
                "experiment_traces": [str(trace)],
            },
        )
        assert measured["verdict"] == "win" and measured["unchecked_guards"] == []
        assert measured["citation_url"]

        found = await _ok(s, "opt_kb_lookup", {"workload": "toy"})
        assert {r["id"] for r in found["workload_findings"]} == {forbidden["id"], measured["id"]}
        assert (await _ok(s, "opt_kb_lookup", {"workload": "other"}))["workload_findings"] == []

        rendered = await _ok(s, "opt_kb_render", {"path": str(kb_md)})
        assert rendered["path"] == str(kb_md) and rendered["records"] == 2
        assert kb_md.read_text() == rendered["markdown"]
        assert "l1.fewer_epochs" in rendered["markdown"] and "REJECTED" in rendered["markdown"]

    _drive(tmp_path, scenario)


def test_proposal_table_sorts_and_rejects_uncited_rows(tmp_path: Path) -> None:
    paper = {
        "authors": ["Rajeev Thakur", "William Gropp", "Ewing Lusk"],
        "title": "Data Sieving and Collective I/O in ROMIO",
        "venue": "Frontiers '99",
        "year": 1999,
        "url": "https://doi.org/10.1109/FMPC.1999.750599",
        "claim": "collective buffering",
    }
    rows = [
        {
            "strategy": "l1.dataloader_workers",
            "description": "4 loader workers",
            "app_impact_pct": 20.0,
            "citation_id": "mohan_datastalls_vldb2021",
        },
        {
            "strategy": "l2.romio_cb_buffer",
            "description": "64 MiB collective buffer",
            "app_impact_pct": 10.0,
            "system_impact_pct": 40.0,
            "system_impact_source": "measured",
            "citation": paper,
        },
    ]

    async def scenario(s: ClientSession) -> None:
        table = await _ok(s, "opt_proposal_table", {"rows": rows})
        assert table["columns"] == [
            "#",
            "Strategy",
            "Description of Optimization",
            "App Impact",
            "System Impact",
            "Weighted Score",
        ]
        got = [(r["#"], r["strategy"], r["weighted_score"]) for r in table["rows"]]
        assert got == [(1, "l2.romio_cb_buffer", 25.0), (2, "l1.dataloader_workers", 10.0)]
        assert all(r["citation"] and r["url"].startswith("https://") for r in table["rows"])
        header = table["markdown"].splitlines()[0]
        assert "Description of Optimization" in header and "Weighted Score" in header

        uncited = [*rows, {"strategy": "l1.read_ahead", "description": "no paper", "app_impact_pct": 50.0}]
        text = await _err(s, "opt_proposal_table", {"rows": uncited})
        assert "row 3 (l1.read_ahead) has no citation" in text
        no_url = {**rows[1], "citation": {k: v for k, v in paper.items() if k != "url"}}
        assert "url" in await _err(s, "opt_proposal_table", {"rows": [no_url]})
        assert "no_such_paper" in await _err(
            s, "opt_proposal_table", {"rows": [{**rows[0], "citation_id": "no_such_paper"}]}
        )

    _drive(tmp_path, scenario)


# --------------------------------------------------------------------------- literature


def test_literature_tools_offline(tmp_path: Path) -> None:
    async def scenario(s: ClientSession) -> None:
        local = await _ok(
            s, "rag_search", {"query": "data loader workers stalls", "bottleneck": "fetch-pressure"}
        )
        assert local["skipped"] is False and local["papers"]
        assert any(p["complete"] and p["passage"] for p in local["papers"])
        assert "bottleneck" in await _err(s, "rag_search", {"query": "x", "bottleneck": "not-a-category"})
        for name, args in (
            ("search_arxiv", {"query": "small I/O coalescing"}),
            ("search_papers_combined", {"query": "small I/O coalescing"}),
            ("get_arxiv_paper", {"paper_id": "2007.06775"}),
        ):
            t0 = time.monotonic()
            res = await _ok(s, name, args)
            assert res["skipped"] is True and res["papers"] == [], name
            assert time.monotonic() - t0 < 5, f"{name} took too long offline"

    _drive(tmp_path, scenario)


def test_stdout_carries_only_the_protocol(tmp_path: Path, shared_traces: Path) -> None:
    """stdout is the transport: every line the server writes there must be a JSON-RPC message."""
    import mcp.types as types

    calls = [
        ("analyze", {"paths": [str(shared_traces / "dlio-unet3d-8ranks-legacy")], "views": ["time"]}),
        ("diagnose", {"paths": [str(shared_traces / "dlio-legacy-strings")], "split_runs": True}),
        ("rag_search", {"query": "collective buffering"}),
        ("search_arxiv", {"query": "lustre"}),
        ("analyze", {"paths": [str(tmp_path / "missing")]}),
    ]
    init = {
        "protocolVersion": types.LATEST_PROTOCOL_VERSION,
        "capabilities": {},
        "clientInfo": {"name": "raw", "version": "0"},
    }
    messages = [
        {"jsonrpc": "2.0", "id": 0, "method": "initialize", "params": init},
        {"jsonrpc": "2.0", "method": "notifications/initialized"},
    ]
    messages += [
        {"jsonrpc": "2.0", "id": i, "method": "tools/call", "params": {"name": n, "arguments": a}}
        for i, (n, a) in enumerate(calls, 1)
    ]
    with (tmp_path / "stderr").open("w") as err:
        proc = subprocess.Popen(
            [sys.executable, "-m", "dftune.cli", "mcp"],
            stdin=subprocess.PIPE,
            stdout=subprocess.PIPE,
            stderr=err,
            text=True,
            env=_env(),
            cwd=REPO,
        )
        assert proc.stdin is not None and proc.stdout is not None
        for msg in messages:
            proc.stdin.write(json.dumps(msg) + "\n")
        proc.stdin.flush()
        replies: dict[int, dict[str, Any]] = {}
        try:
            while len(replies) < len(calls) + 1:
                line = proc.stdout.readline()
                assert line, f"server stopped early: {(tmp_path / 'stderr').read_text()}"
                doc = json.loads(line)  # anything but JSON here would break every client
                assert doc["jsonrpc"] == "2.0"
                if "id" in doc:
                    replies[doc["id"]] = doc
        finally:
            proc.stdin.close()
            proc.wait(timeout=30)
    assert proc.returncode == 0
    assert [replies[i]["result"].get("isError", False) for i in range(1, len(calls) + 1)] == [
        False,
        False,
        False,
        False,
        True,
    ]


# --------------------------------------------------------------------------- lines it cannot read


def test_a_line_the_transport_cannot_read_gets_a_json_rpc_error_and_the_server_goes_on() -> None:
    """Not JSON, nested past the parser, a lone surrogate: each is answered (JSON-RPC 2.0: -32700
    with a null id, or -32600 with the request's own id), never left to wait forever."""
    import select

    proc = subprocess.Popen(
        [sys.executable, "-m", "dftune.cli", "mcp"],
        stdin=subprocess.PIPE,
        stdout=subprocess.PIPE,
        stderr=subprocess.DEVNULL,
        env=_env(),
        cwd=REPO,
    )
    assert proc.stdin is not None and proc.stdout is not None

    def ask(line: str) -> dict[str, Any]:
        assert proc.stdin is not None and proc.stdout is not None
        proc.stdin.write(line.encode() + b"\n")
        proc.stdin.flush()
        ready, _, _ = select.select([proc.stdout], [], [], 30)
        assert ready, f"no answer to {line[:80]!r}"
        return dict(json.loads(proc.stdout.readline()))

    try:
        hello = {
            "protocolVersion": "2025-06-18",
            "capabilities": {},
            "clientInfo": {"name": "t", "version": "1"},
        }
        assert "result" in ask(
            json.dumps({"jsonrpc": "2.0", "id": 1, "method": "initialize", "params": hello})
        )
        proc.stdin.write(b'{"jsonrpc":"2.0","method":"notifications/initialized"}\n')
        call = '{"jsonrpc":"2.0","id":2,"method":"tools/call","params":'
        lone = call + '{"name":"run_show","arguments":{"run_id":"\\ud800"}}}'
        said = ask(lone)
        assert (said["id"], said["error"]["code"]) == (2, -32600), said
        said = ask("{not json")
        assert (said["id"], said["error"]["code"]) == (None, -32700), said
        said = ask('{"jsonrpc":"2.0","id":3,"params":' + "[" * 100_000 + "]" * 100_000 + "}")
        assert said["error"]["code"] == -32700 and len(json.dumps(said)) < 1000, said
        listed = ask(json.dumps({"jsonrpc": "2.0", "id": 4, "method": "tools/list"}))
        assert listed["id"] == 4 and listed["result"]["tools"]
    finally:
        proc.stdin.close()
        proc.wait(timeout=30)
