"""The command line starts fast: importing it, --help and a refused path load none of the heavy
engines (LangGraph, SciPy, the trace engine, chromadb, DuckDB), and the early refusals say what
the engines would say."""

from __future__ import annotations

import json
import subprocess
import sys
from pathlib import Path

import pytest

HEAVY = ("langgraph", "scipy", "chromadb", "duckdb", "dask", "numpy", "dftune.tools.trace", "dftune.graphs")

PROBE = """
import json, sys
sys.argv = ["dftune", *json.loads(sys.argv[1])]
code = 0
try:
    from dftune.cli import app
    if len(sys.argv) > 1:
        app()
except SystemExit as exc:
    code = exc.code
heavy = {heavy}
loaded = sorted(m for m in sys.modules if any(m == h or m.startswith(h + ".") for h in heavy))
print(json.dumps({{"code": code, "loaded": loaded}}), file=sys.__stdout__)
"""


def _probe(args: list[str], home: Path) -> tuple[dict, str]:
    """Run the CLI with ``args`` in a fresh interpreter; which heavy modules did it load?"""
    code = PROBE.format(heavy=repr(HEAVY))
    proc = subprocess.run(
        [sys.executable, "-c", code, json.dumps(args)],
        capture_output=True,
        text=True,
        timeout=60,
        env={"DFTUNE_HOME": str(home), "PATH": "/usr/bin:/bin"},
    )
    last = proc.stdout.strip().splitlines()[-1]
    return json.loads(last), proc.stderr


def test_importing_the_cli_loads_no_engine(tmp_path: Path) -> None:
    doc, _ = _probe([], tmp_path)
    assert doc["loaded"] == []


def test_help_loads_no_engine(tmp_path: Path) -> None:
    doc, _ = _probe(["--help"], tmp_path)
    assert doc["code"] in (0, None)
    assert doc["loaded"] == []


@pytest.mark.parametrize(
    ("args", "message"),
    [
        (["diagnose", "/nonexistent"], "/nonexistent: no such file or directory"),
        (["analyze", "/nonexistent"], "/nonexistent: no such file or directory"),
        (["diagnose", "--data-dir", "/nope", "."], "--data-dir /nope: no such file or directory"),
        (["bench", "/nonexistent.toml"], "/nonexistent.toml: no such file"),
        (["run", "/nonexistent.toml"], "/nonexistent.toml: no such file"),
        (["history", "nosuchrun"], "no run 'nosuchrun' with saved graph states"),
        (["resume", "nosuchrun"], "no run 'nosuchrun' with saved graph states"),
        (["approve", "nosuchrun"], "no run 'nosuchrun' with saved graph states"),
        (["replay", "nosuchrun", "--checkpoint", "1"], "no run 'nosuchrun' with saved graph states"),
        (["report", "nosuchrun"], "no run 'nosuchrun' under"),
    ],
)
def test_a_refusal_is_one_line_before_any_engine(tmp_path: Path, args: list[str], message: str) -> None:
    doc, err = _probe(args, tmp_path)
    assert doc["code"] == 2
    assert doc["loaded"] == []
    lines = err.strip().splitlines()
    assert len(lines) == 1 and lines[0].startswith("dftune: error: ") and message in lines[0]


def test_preflight_names_match_the_workspace() -> None:
    from dftune.graphs.checkpointer import CHECKPOINT_FILE
    from dftune.tools.session import campaigns, layout, preflight

    assert preflight.RUNS_DIRNAME == layout.RUNS_DIRNAME
    assert preflight.CAMPAIGNS_DIRNAME == campaigns.CAMPAIGNS_DIRNAME
    assert preflight.CAMPAIGN_META == campaigns.META
    assert preflight.CHECKPOINT_FILE == CHECKPOINT_FILE


def test_an_existing_run_passes_the_preflight(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    from dftune.tools.session import preflight

    monkeypatch.setenv("DFTUNE_HOME", str(tmp_path))
    run = tmp_path / "runs" / "r1"
    run.mkdir(parents=True)
    assert preflight.unknown_run("r1") is None
    assert "saved graph states" in (preflight.unknown_run("r1", checkpoints=True) or "")
    (run / preflight.CHECKPOINT_FILE).write_bytes(b"")
    assert preflight.unknown_run("r1", checkpoints=True) is None
    (tmp_path / "campaigns" / "c1").mkdir(parents=True)
    (tmp_path / "campaigns" / "c1" / "campaign.json").write_text("{}")
    assert preflight.unknown_run("c1", checkpoints=True) is None
    assert preflight.unknown_run("c1", campaigns=False) is not None


def test_diagnose_refuses_a_missing_data_dir_from_every_front_end(tmp_path: Path) -> None:
    from dftune.core.errors import DftuneError
    from dftune.tools.diagnose.engine import check_data_dirs

    with pytest.raises(DftuneError, match="--data-dir /nope: no such file or directory"):
        check_data_dirs(["/nope"])
    f = tmp_path / "f"
    f.write_text("x")
    with pytest.raises(DftuneError, match="not a directory"):
        check_data_dirs([f])
    assert check_data_dirs([tmp_path]) == [tmp_path]
