"""``dftune runs`` shows each run's result; ``kb lookup`` shows the exact change (knob values as
written, commas kept) and the numbers behind its verdict."""

from __future__ import annotations

import json
from pathlib import Path
from types import SimpleNamespace

from dftune.agents.optimizer.plan import knob_id
from dftune.tools.report.kb_lines import change_text, finding_line
from dftune.tools.report.run_glance import run_result


def test_a_finished_run_shows_baseline_to_best(tmp_path: Path) -> None:
    (tmp_path / "report.json").write_text(
        json.dumps(
            {
                "metric": {"name": "epoch_time_s", "unit": "s", "lower_is_better": True},
                "outcome": {
                    "experiments": 4,
                    "wins": [{"proposal": "WORKERS=4"}],
                    "baseline_median": 1.5717,
                    "best_median": 0.4495,
                    "overall_pct": 71.4,
                },
            }
        )
    )
    assert run_result(tmp_path) == "epoch_time_s 1.572 s -> 0.4495 s (+71.4% better), 1 of 4 kept"


def test_a_run_without_a_win_or_a_report(tmp_path: Path) -> None:
    assert run_result(tmp_path) == "-"
    (tmp_path / "report.json").write_text(
        json.dumps(
            {
                "metric": {"name": "wall_time_s", "unit": "s"},
                "outcome": {"experiments": 2, "wins": [], "baseline_median": 3.0, "best_median": 3.0},
            }
        )
    )
    assert run_result(tmp_path) == "wall_time_s 3 s, none of 2 experiment(s) kept"
    (tmp_path / "report.json").write_text("{not json")
    assert run_result(tmp_path) == "-"


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
