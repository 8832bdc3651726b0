"""A held-out buffered writer under the real dftracer: the run leaves its win pending, the person's
``dftune approve --json`` turns it into a KB win.

The writer (written here, not one of the bundled workloads) appends short log lines; with
``LOG_BUFFER_KB`` set it stages them and writes whole buffers: the same bytes at the same offsets in
fewer, larger calls, and no application events. The trace cannot tell that from a program that
writes larger records, so the change can only be a question for a person.

The writer reports the CPU time of its loop: its writes go to the page cache, so the time is the
calls' own and the tracer's work on each, and a preemption by another test's processes (CI runs
two workers on two cores, some of them MPI ranks that spin) does not count. Timed in wall time, its
50 ms loop once left no pending item in CI.
"""

from __future__ import annotations

import json
import os
import subprocess
import sys
import textwrap
from pathlib import Path

import pytest

from dftune.tools.kb import opt_kb_lookup

pytestmark = pytest.mark.e2e

WRITER = textwrap.dedent("""
    import os, sys, time
    out = sys.argv[1]
    stage = int(os.environ.get("LOG_BUFFER_KB", "0")) * 1024
    os.makedirs(out, exist_ok=True)
    start = time.process_time()
    fd = os.open(os.path.join(out, "events.log"), os.O_WRONLY | os.O_CREAT | os.O_TRUNC, 0o644)
    pending = []
    size = 0
    for i in range(12000):
        line = f"{i:08d} step={i % 97:03d} loss={(i * 7919) % 1000 / 1000:.3f} ok\\n".encode()
        if not stage:
            os.write(fd, line)
            continue
        pending.append(line)
        size += len(line)
        if size >= stage:
            os.write(fd, b"".join(pending))
            pending, size = [], 0
    if pending:
        os.write(fd, b"".join(pending))
    os.close(fd)
    print(f"elapsed_s {time.process_time() - start:.6f}")
""")

SPEC = textwrap.dedent("""
    name = "held-out-log-writer"
    command = ["{python}", "logwriter.py", "{data_dir}"]
    replicates = 3
    timeout_s = 60
    [metric]
    kind = "stdout_regex"
    pattern = 'elapsed_s ([0-9.]+)'
    [tracing]
    mode = "preload"
    [[knobs]]
    name = "LOG_BUFFER_KB"
    kind = "env"
    values = [0, 256]
    default = 0
    strategy = "l1.write_buffering"
""")


def _dftune(home: Path, *args: str) -> dict[str, object]:
    res = subprocess.run(
        [sys.executable, "-m", "dftune.cli", *args, "--json"],
        capture_output=True,
        text=True,
        timeout=600,
        check=False,
        env={**os.environ, "DFTUNE_HOME": str(home)},
    )
    assert res.returncode == 0, res.stderr[-2000:]
    return json.loads(res.stdout)  # type: ignore[no-any-return]


def test_a_held_out_buffered_writer_ends_pending_and_approve_makes_it_a_kb_win(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    pytest.importorskip("dftracer")
    home = tmp_path / "home"
    monkeypatch.setenv("DFTUNE_HOME", str(home))
    (tmp_path / "logwriter.py").write_text(WRITER)
    (tmp_path / "workload.toml").write_text(SPEC)
    # --force: the writer's I/O is a few percent of a Python process's time (start-up dominates), so
    # the worth-tuning gate may stop it; this test is about what happens after the gate
    doc = _dftune(home, "run", str(tmp_path / "workload.toml"), "--max-experiments", "1", "--force")
    assert doc["status"] == "completed", doc["status_reason"]
    assert len(doc["pending"]) == 1, (doc["verdicts"], doc["proposal_table"][:1])  # type: ignore[index]
    (item,) = doc["pending"]  # type: ignore[misc]
    assert item["proposal_id"] == "LOG_BUFFER_KB=256" and item["kind"] == "confirm_pending"
    assert item["change_pct"] > 0 and "coalescing" in item["question"]
    (verdict,) = doc["verdicts"]  # type: ignore[misc]
    assert verdict["verdict"] == "pending" and verdict["kept"]
    found = opt_kb_lookup(workload="held-out-log-writer", strategy="l1.write_buffering").workload_findings
    assert [r.verdict for r in found if r.metric_scope == "app"] == ["pending"]

    answered = _dftune(home, "approve", str(doc["run_id"]), "--reason", "it stages whole lines")
    assert answered["pending"] == [] and answered["status"] == "completed"
    (verdict,) = answered["verdicts"]  # type: ignore[misc]
    assert verdict["verdict"] == "win" and verdict["kept"]
    found = opt_kb_lookup(workload="held-out-log-writer", strategy="l1.write_buffering").workload_findings
    (win,) = [r for r in found if r.metric_scope == "app"]
    assert win.verdict == "win" and win.supersedes is not None
    assert any("confirmed by a person (it stages whole lines)" in g.reason for g in win.guards)
