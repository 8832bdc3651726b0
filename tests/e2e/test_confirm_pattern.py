"""Larger calls over the same ranges, with no application-level evidence: the access-pattern guard
cannot tell buffering from a larger record, so the result is inconclusive: an autonomous run keeps
the win on trial as a pending question (never credited as a win on its own), an interactive run asks
a person, and only an explicit approval makes it a win.

The runs pass ``force``: the writer's I/O is a few percent of a Python process's time, and on a
loaded machine the worth-tuning gate may stop it before the experiment these tests are about."""

from __future__ import annotations

import textwrap
from pathlib import Path

import pytest

from dftune.graphs.runs import approve_run, load_state, start_run
from dftune.tools.session.workspace import Workspace

pytestmark = pytest.mark.e2e

WRITER = textwrap.dedent("""
    import os, sys, time
    out, buf = sys.argv[1], int(sys.argv[2])
    os.makedirs(out, exist_ok=True)
    data = os.urandom(4 << 20)
    start = time.perf_counter()
    fd = os.open(os.path.join(out, "state.bin"), os.O_WRONLY | os.O_CREAT | os.O_TRUNC, 0o644)
    step = buf or 1024
    for i in range(0, len(data), step):
        os.write(fd, data[i : i + step])
    os.close(fd)
    print(f"run_time_s {time.perf_counter() - start:.6f}")
""")

SPEC = textwrap.dedent("""
    name = "no-evidence-writer"
    command = ["{python}", "writer.py", "{data_dir}", "{BUF}"]
    replicates = 3
    [metric]
    kind = "stdout_regex"
    pattern = 'run_time_s ([0-9.]+)'
    [tracing]
    mode = "preload"
    [[knobs]]
    name = "BUF"
    kind = "arg"
    values = [0, 262144]
    default = 0
    strategy = "l1.write_buffering"
""")


@pytest.fixture
def spec(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> Path:
    monkeypatch.setenv("DFTUNE_HOME", str(tmp_path / "home"))
    (tmp_path / "writer.py").write_text(WRITER)
    (tmp_path / "workload.toml").write_text(SPEC)
    return tmp_path / "workload.toml"


def _pattern_decision(state: object) -> str:
    ds = [
        g.decision for g in state.guard_decisions if g.iteration == 1 and g.decision.guard == "access_pattern"
    ]  # type: ignore[attr-defined]
    assert ds, "no access-pattern decision for the experiment"
    return ds[-1].verdict or ("passed" if ds[-1].passed else "rejected")


def test_autonomous_runs_never_credit_an_inconclusive_pattern_on_their_own(spec: Path) -> None:
    ws = Workspace()
    result = start_run(spec, mode="autonomous", max_experiments=1, force=True, workspace=ws)
    state = load_state(result.run_id, ws)
    (exp,) = state.experiments
    assert _pattern_decision(state) == "inconclusive"
    assert exp.confirmed_by is None
    # a win the trace cannot settle is kept on trial and asked; anything else is not kept
    assert exp.verdict in ("pending", "inconclusive")
    assert exp.kept == (exp.verdict == "pending")
    assert [p.proposal_id for p in result.pending] == (["BUF=262144"] if exp.kept else [])


@pytest.mark.parametrize("confirm", [True, False], ids=["confirmed", "not-confirmed"])
def test_interactive_runs_ask_and_keep_only_what_a_person_confirms(spec: Path, confirm: bool) -> None:
    ws = Workspace()
    result = start_run(spec, mode="interactive", max_experiments=1, force=True, workspace=ws)
    run_id = result.run_id
    assert result.status == "awaiting_approval"
    result = approve_run(run_id, workspace=ws)  # apply BUF=262144
    assert result.status == "awaiting_approval"
    assert result.pending[0].kind == "confirm_pattern" and "inconclusive" in result.pending[0].question
    result = approve_run(
        run_id, reject=not confirm, reason="the program buffers, I read its code", workspace=ws
    )
    state = load_state(run_id, ws)
    (exp,) = state.experiments
    if confirm:
        assert exp.confirmed_by == "the program buffers, I read its code"
        assert exp.verdict != "inconclusive"  # the person's word settles the pattern; the numbers decide
        assert exp.kept == (exp.verdict == "win")
    else:
        assert exp.confirmed_by is None and not exp.kept
        assert exp.refused_by == "the program buffers, I read its code"
        assert exp.verdict == "rejected"  # the person's refusal, with their reason, is the verdict
    assert state.status == "completed"
