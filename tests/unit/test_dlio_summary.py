"""DLIO's metric from the summary.json it writes, with no wrapper: where DLIO 2.0.0 puts it (its output
folder, or Hydra's timestamped run folder when the command names none), and one-line errors naming
the file when it is missing or malformed.

The program here writes its summary the way DLIO's ``StatsCounter.save_data`` does (the layout and
keys of a real DLIO 2.0.0 summary.json, recorded in tests/e2e/test_dlio_example.py's run); the real
DLIO run is the e2e test's."""

from __future__ import annotations

import json
import os
import sys
import time
from pathlib import Path

import pytest

from dftune.tools.runner.bench import bench
from dftune.tools.runner.dlio_summary import find_summary, keep_summary
from dftune.tools.runner.spec import load_spec

#: the metric part of a real DLIO 2.0.0 summary.json (2 epochs of unet3d_mini on this machine)
METRIC = {
    "train_au_percentage": [33.59597582381871, 55.396781491216],
    "train_au_mean_percentage": 44.496378657517354,
    "train_au_meet_expectation": "fail",
    "train_throughput_samples_per_second": [7.32575056374084, 82.11496289407835],
    "train_throughput_mean_samples_per_second": 44.72035672890959,
    "train_io_mean_MB_per_second": 11.180089182227398,
}

#: writes summary.json like DLIO: into --out when given (workload.output.folder), else into
#: ./hydra_log/<model>/<date>-<time> (Hydra's run folder in DLIO's config.yaml); logs [METRIC] to stderr
PROGRAM = """\
import json, os, sys, time
args = dict(a.split("=", 1) for a in sys.argv[1:])
folder = args.get("out") or time.strftime("hydra_log/unet3d_mini/%Y-%m-%d-%H-%M-%S")
os.makedirs(folder, exist_ok=True)
metric = json.loads(os.environ["FAKE_METRIC"])
text = "{not json" if args.get("broken") else json.dumps({"metric": metric, "epochs": 2}, indent=4)
if not args.get("nosummary"):
    with open(os.path.join(folder, "summary.json"), "w") as f:
        f.write(text)
if args.get("log"):
    print("[METRIC] Training Throughput (samples/second): 44.7204 (37.3946)", file=sys.stderr)
"""


def _spec(tmp_path: Path, args: list[str], path: str | None = None) -> Path:
    (tmp_path / "dlio_like.py").write_text(PROGRAM)
    argv = ", ".join(json.dumps(a) for a in [sys.executable, "dlio_like.py", *args])
    where = f'\npath = "{path}"' if path else ""
    toml = tmp_path / "w.toml"
    toml.write_text(
        f'name = "dlio-like"\ncommand = [{argv}]\nreplicates = 1\ntimeout_s = 60\n'
        f"[env]\nFAKE_METRIC = {json.dumps(json.dumps(METRIC))}\n"
        f'[metric]\nkind = "dlio"\nfield = "train_throughput"{where}\n'
    )
    return toml


def test_a_bare_spec_reads_the_summary_in_hydras_run_folder(tmp_path: Path) -> None:
    result = bench(load_spec(_spec(tmp_path, [])), replicates=1, trace=False, workdir=tmp_path / "run")
    rep = result.replicates[0]
    assert rep.status == "ok", rep.reason
    assert rep.metric == METRIC["train_throughput_mean_samples_per_second"]  # exact, not the log's 4 decimals
    (written,) = tmp_path.glob("hydra_log/unet3d_mini/*/summary.json")
    kept = tmp_path / "run" / "untraced" / "r0" / "summary.json"  # the replicate's own copy
    assert json.loads(kept.read_text()) == json.loads(written.read_text())


def test_the_output_folder_named_by_the_spec_is_read_as_is(tmp_path: Path) -> None:
    toml = _spec(tmp_path, ["out={trace_dir}"], path="{trace_dir}/summary.json")
    result = bench(load_spec(toml), replicates=1, trace=False, workdir=tmp_path / "run")
    assert result.replicates[0].metric == METRIC["train_throughput_mean_samples_per_second"]
    assert not (tmp_path / "hydra_log").exists()


def test_a_missing_summary_is_one_line_naming_the_file(tmp_path: Path) -> None:
    toml = _spec(tmp_path, ["out={workdir}/elsewhere"], path="{trace_dir}/summary.json")
    rep = bench(load_spec(toml), replicates=1, trace=False, workdir=tmp_path / "run").replicates[0]
    assert rep.status == "failed" and rep.metric is None
    want = str(tmp_path / "run" / "untraced" / "r0" / "summary.json")
    assert rep.reason.startswith(f"metric: DLIO's summary {want} not readable")
    assert "workload.output.folder" in rep.reason and "\n" not in rep.reason


def test_a_malformed_summary_is_one_line_naming_the_file(tmp_path: Path) -> None:
    toml = _spec(tmp_path, ["broken=1"])
    rep = bench(load_spec(toml), replicates=1, trace=False, workdir=tmp_path / "run").replicates[0]
    assert rep.status == "failed"
    assert "summary.json (DLIO's summary.json) is not JSON" in rep.reason and "\n" not in rep.reason


def test_no_summary_falls_back_to_dlios_metric_lines_and_says_where_it_looked(tmp_path: Path) -> None:
    toml = _spec(tmp_path, ["nosummary=1", "log=1"])
    rep = bench(load_spec(toml), replicates=1, trace=False, workdir=tmp_path / "run").replicates[0]
    assert rep.status == "ok" and rep.metric == pytest.approx(44.7204)  # the [METRIC] line on stderr
    toml = _spec(tmp_path, ["nosummary=1"])
    rep = bench(load_spec(toml), replicates=1, trace=False, workdir=tmp_path / "run2").replicates[0]
    assert rep.status == "failed" and "no DLIO summary.json written by this run in" in rep.reason
    assert "hydra_log/*/*/summary.json" in rep.reason and "\n" not in rep.reason


def test_find_summary_takes_the_newest_since_the_start(tmp_path: Path) -> None:
    old = tmp_path / "hydra_log" / "m" / "2026-01-01-00-00-00" / "summary.json"
    new = tmp_path / "hydra_log" / "m" / "2026-12-02-03-00-00" / "summary.json"
    for p in (old, new):
        p.parent.mkdir(parents=True)
        p.write_text("{}")
    os.utime(old, (time.time() - 3600, time.time() - 3600))
    since = time.time() - 60
    assert find_summary([tmp_path], since) == new
    os.utime(new, (time.time() - 3600, time.time() - 3600))
    assert find_summary([tmp_path], since) is None  # an earlier run's summary is never this one's
    rep = tmp_path / "r0"
    assert keep_summary(new, rep) == rep / "summary.json" and (rep / "summary.json").read_text() == "{}"
    assert keep_summary(rep / "summary.json", rep) == rep / "summary.json"
