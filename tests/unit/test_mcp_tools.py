"""The MCP tools in-process: the comparator's arithmetic and the one-line error contract."""

from __future__ import annotations

from pathlib import Path

import pytest

from dftune import mcp_server as m
from dftune.tools.report.compare import compare_traces, moved_bytes
from dftune.tools.trace import analyze


def _rows(doc: dict[str, object]) -> dict[str, dict[str, object]]:
    return {r["key"]: r for r in doc["trace"]}  # type: ignore[index,attr-defined]


def test_a_trace_set_compared_with_itself_changes_nothing(shared_traces: Path) -> None:
    a = analyze([shared_traces / "dlio-legacy-strings"], merge_runs=True)  # two runs, compared as one set
    doc = compare_traces(a, a, ("x", "x"))
    assert all(r["delta"] in (0.0, None) and r["change_pct"] in (0.0, None) for r in _rows(doc).values())
    assert doc["notes"] == []


def test_fewer_bytes_moved_is_flagged_as_possibly_doing_less(shared_traces: Path) -> None:
    legacy = shared_traces / "dlio-legacy-strings"
    big, small = analyze([legacy / "dlio-1proc.pfw.gz"]), analyze([legacy / "posix-1proc.pfw"])
    assert moved_bytes(big) > moved_bytes(small)
    rows = _rows(compare_traces(big, small, ("big", "small")))
    assert rows["read.bytes"]["a"] == big.read.bytes and rows["read.bytes"]["b"] == small.read.bytes
    assert rows["read.bytes"]["change_pct"] == 100.0 * (small.read.bytes - big.read.bytes) / big.read.bytes  # type: ignore[operator]
    assert any("doing less" in n for n in compare_traces(big, small, ("a", "b"))["notes"])
    assert compare_traces(small, big, ("a", "b"))["notes"] == []


def test_errors_are_one_line_and_name_the_tool(tmp_path: Path) -> None:
    with pytest.raises(m.ToolFailure, match="unknown tool"):
        m.call("nope")
    cases = [
        ("analyze", {"paths": [str(tmp_path / "missing")]}, str(tmp_path / "missing")),
        ("analyze", {"paths": ["x"], "bogus": 1}, "bogus"),
        ("session_analyze_traces", {"run_id": "absent"}, "no run 'absent'"),
        ("session_analyze_traces", {"run_id": "absent", "iteration": "zzz"}, "no run 'absent'"),
        (
            "opt_kb_record",
            {
                "system": "s",
                "workload": "w",
                "strategy": "l1.dataloader_workers",
                "metric": "m",
                "before": 1.0,
            },
            "give both before and after",
        ),
    ]
    for name, args, needle in cases:
        with pytest.raises(m.ToolFailure) as err:
            m.call(name, args)
        text = str(err.value)
        assert text.startswith(f"{name}: ") and "\n" not in text and needle in text, text


def test_iteration_names(tmp_path: Path) -> None:
    from dftune.tools.session.workspace import Workspace

    ws = Workspace()
    ws.create_run("r1", "toy")
    assert m.iteration_number("r1", "baseline") is None
    assert m.iteration_number("r1", "latest") is None  # no opt<n> yet: the baseline
    ws.new_iteration("r1")
    ws.new_iteration("r1")
    assert m.iteration_number("r1", "latest") == 2
    assert m.iteration_number("r1", "opt1") == 1 and m.iteration_number("r1", "2") == 2
    with pytest.raises(m.ToolFailure, match="expected 'baseline'"):
        m.iteration_number("r1", "first")
    with pytest.raises(m.ToolFailure, match=r"^session_analyze_traces: iteration 'first': expected"):
        m.call("session_analyze_traces", {"run_id": "r1", "iteration": "first"})
    with pytest.raises(LookupError, match="has no opt3"):
        m.iteration_number("r1", "opt3")
