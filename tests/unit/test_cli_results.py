"""``dftune runs`` shows each run's result; ``kb lookup`` shows the exact change (knob values as
written, commas kept) and the numbers behind its verdict."""

from __future__ import annotations

import json
from pathlib import Path
from types import SimpleNamespace
from typing import Any

from dftune.agents.optimizer.plan import knob_id
from dftune.core.domain.run import KeptChange, MetricInfo, Outcome, RunReport
from dftune.tools.report.kb_lines import change_text, finding_line
from dftune.tools.report.run_glance import run_result


def _report(run_dir: Path, **outcome: Any) -> None:
    """A report.json with this outcome and metric (the rest as a finished run of the toy wrote it)."""
    metric = MetricInfo(name=outcome.pop("metric"), unit="s")
    report = RunReport(
        run_id=run_dir.name,
        spec_path="w.toml",
        status="completed",
        outcome=Outcome(status="completed", **outcome),
        metric=metric,
    )
    (run_dir / "report.json").write_text(report.model_dump_json(by_alias=True))


def test_a_finished_run_shows_baseline_to_best(tmp_path: Path) -> None:
    win = KeptChange(strategy="l1.dataloader_workers", proposal="WORKERS=4", iteration=1, change_pct=71.4)
    _report(
        tmp_path,
        metric="epoch_time_s",
        experiments=4,
        wins=[win],
        baseline_median=1.5717,
        best_median=0.4495,
        overall_pct=71.4,
    )
    assert run_result(tmp_path) == "epoch_time_s 1.572 s -> 0.4495 s (+71.4% better), 1 of 4 kept"


def test_a_run_without_a_win_or_a_report(tmp_path: Path) -> None:
    assert run_result(tmp_path) == "-"
    _report(tmp_path, metric="wall_time_s", experiments=2, baseline_median=3.0, best_median=3.0)
    assert run_result(tmp_path) == "wall_time_s 3 s, none of 2 experiment(s) kept"
    (tmp_path / "report.json").write_text("{not json")
    assert run_result(tmp_path) == "report.json unreadable (see dftune report)"
    (tmp_path / "report.json").write_text(json.dumps({"outcome": {"wins": [{"proposal": "WORKERS=4"}]}}))
    assert (
        run_result(tmp_path) == "report.json unreadable (see dftune report)"
    )  # not a report this dftune wrote


def test_a_finding_names_the_exact_change_and_its_numbers() -> None:
    r = SimpleNamespace(
        strategy="l2.lustre_striping",
        workload="w",
        system="vm",
        verdict="win",
        metric="epoch_time_s",
        before=0.8476,
        after=0.4495,
        change_pct=47.0,
        change={"settings": {"STRIPES": "4,8"}, "incumbent": {"settings": {"STRIPES": "1"}, "env": {}}},
    )
    assert finding_line(r) == (
        "l2.lustre_striping STRIPES=4,8 (was STRIPES=1) on "
        "w@vm: win, epoch_time_s 0.8476 -> 0.4495 (+47.0% better)"
    )
    bandwidth = SimpleNamespace(
        **{**vars(r), "metric": "io_bandwidth_bytes_per_s", "before": 5.343e7, "after": 6.036e7}
    )
    assert "io_bandwidth_bytes_per_s 51.0 MiB/s -> 57.6 MiB/s" in finding_line(bandwidth)
    assert change_text({"env": {"OMP_NUM_THREADS": "4"}}) == "env OMP_NUM_THREADS=4"
    assert change_text({"argv": ["sudo", "-n", "sysctl", "vm.x=1"]}) == "runs: sudo -n sysctl vm.x=1"
    no_numbers = SimpleNamespace(**{**vars(r), "change_pct": None, "verdict": "unsupported", "change": {}})
    assert finding_line(no_numbers) == "l2.lustre_striping no recorded change on w@vm: unsupported"


def test_a_knob_proposal_keeps_its_commas() -> None:
    assert knob_id("STRIPES", "4,8") == "STRIPES=4,8"
    assert knob_id("HINTS", "a b") == "HINTS=a-b"
