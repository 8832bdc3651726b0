"""The MCP tools in-process: the comparator's arithmetic and the one-line error contract."""

from __future__ import annotations

from pathlib import Path

import pytest

from dftune.tools import mcp_server as m
from dftune.tools.trace import analyze
from dftune.tools.trace.compare_traces import compare_analyses, relative_change_pct


def test_relative_change_is_undefined_from_zero_or_unknown() -> None:
    assert relative_change_pct(10, 5) == -50.0
    assert relative_change_pct(4, 5) == 25.0
    assert relative_change_pct(0, 5) is None
    assert relative_change_pct(None, 5) is None
    assert relative_change_pct(5, None) is None


def test_a_trace_set_compared_with_itself_changes_nothing(shared_traces: Path) -> None:
    a = analyze([shared_traces / "dlio-legacy-strings"])
    doc = compare_analyses(a, a, label_a="x", label_b="x")
    assert all(q["change_pct"] in (0.0, None) for q in doc["summary"].values())
    for fam in doc["families"].values():
        assert all(q["change_pct"] in (0.0, None) and q["a"] == q["b"] for q in fam.values())
    assert all(s["delta_pp"] == 0 for s in doc["shares"].values())
    assert doc["notes"] == []


def test_fewer_bytes_moved_is_flagged_as_possibly_doing_less(shared_traces: Path) -> None:
    legacy = shared_traces / "dlio-legacy-strings"
    big, small = analyze([legacy / "dlio-1proc.pfw.gz"]), analyze([legacy / "posix-1proc.pfw"])
    moved = lambda a: (a.read.bytes or 0) + (a.write.bytes or 0)  # noqa: E731
    assert moved(big) > moved(small)
    doc = compare_analyses(big, small)
    assert doc["families"]["read"]["bytes"] == {
        "a": big.read.bytes,
        "b": small.read.bytes,
        "change_pct": relative_change_pct(big.read.bytes, small.read.bytes),
    }
    assert any("doing less" in n for n in doc["notes"])
    assert compare_analyses(small, big)["notes"] == []


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
    assert m._iteration_number("r1", "baseline") is None
    assert m._iteration_number("r1", "latest") is None  # no opt<n> yet: the baseline
    ws.new_iteration("r1")
    ws.new_iteration("r1")
    assert m._iteration_number("r1", "latest") == 2
    assert m._iteration_number("r1", "opt1") == 1 and m._iteration_number("r1", "2") == 2
    with pytest.raises(m.ToolFailure, match="expected 'baseline'"):
        m._iteration_number("r1", "first")
    with pytest.raises(m.ToolFailure, match=r"^session_analyze_traces: iteration 'first': expected"):
        m.call("session_analyze_traces", {"run_id": "r1", "iteration": "first"})
    with pytest.raises(LookupError, match="has no opt3"):
        m._iteration_number("r1", "opt3")
