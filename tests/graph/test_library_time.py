"""A program whose reads go through an I/O library: the trace shows little POSIX time, yet the
program waits inside the library (a zarr codec pipeline decoding its chunks). Before the
worth-tuning gate stops the run, one more run is sampled by a stack profiler; its samples say
how much of the main thread was inside the library, and the gate weighs that. The library's
documented settings are then proposed whatever the I/O's shape.

The program is written here and never started: its traced replicates, its measurements and
what the profiler saw are scripted (tests/fakes/measurer.py)."""

from __future__ import annotations

import json
import textwrap
from pathlib import Path

from dftune.graphs.runs import start_run
from dftune.tools.runner.measurer import Invocation
from tests.fakes.measurer import Arm, ScriptedMeasurer, steady
from tests.tracegen import Proc

PROGRAM = """
import argparse, time
import numpy as np
import zarr
p = argparse.ArgumentParser()
p.add_argument("--data", required=True)
a = p.parse_args()
z = zarr.open_array(a.data, mode="r")
t0 = time.perf_counter()
for i in range(0, z.shape[0], 32):
    x = z.oindex[np.arange(i, min(i + 32, z.shape[0])), :]
print(f"epoch_time_s {time.perf_counter() - t0}")
"""

SPEC = """
name = "zarr-epoch"
command = ["{python}", "epoch.py", "--data", "{data_dir}"]
data_dir = "data.zarr"
replicates = 3
[metric]
kind = "stdout_regex"
pattern = 'epoch_time_s ([0-9.]+)'
"""

PACKAGES = "/venv/lib/python3.11/site-packages"


def _spec(tmp_path: Path) -> Path:
    (tmp_path / "epoch.py").write_text(textwrap.dedent(PROGRAM))
    (tmp_path / "data.zarr").mkdir()
    spec = tmp_path / "zarr.toml"
    spec.write_text(SPEC)
    return spec


def _little_posix(inv: Invocation) -> list[Proc]:
    """40 small chunk reads (0.2 ms in all) in 2 s of the program's life: 0.01% of it."""
    p = Proc(pid=100)
    for i in range(40):
        chunk = f"{inv.data_dir}/c/{i}/0"
        p.open(chunk)
        p.read(chunk, 4096)
        p.close(chunk)
    p.compute(2_000_000)
    return [p]


def _stacks(inside: int, outside: int) -> str:
    """py-spy's raw output: the main thread inside zarr ``inside`` times, in the program's own
    code ``outside`` times, and zarr's I/O thread idle (never counted)."""
    head = 'process 100:"python epoch.py --data data.zarr"'
    main = f"{head};thread (100): MainThread;<module> (/w/epoch.py:11)"
    return (
        f"{main};OIndex.__getitem__ ({PACKAGES}/zarr/core/indexing.py:998);"
        f"decode ({PACKAGES}/numcodecs/zstd.py:40) {inside}\n"
        f"{main} {outside}\n"
        f"{head};thread (101): zarr_io;run ({PACKAGES}/zarr/core/sync.py:120) {inside + outside}\n"
    )


def _run(tmp_path: Path, stacks: str) -> tuple[dict, ScriptedMeasurer, Path]:
    script = ScriptedMeasurer(
        [
            Arm({}, steady(2.0), trace=_little_posix, stacks=lambda inv: stacks),
            Arm({}, steady(1.4), env={"ZARR_ASYNC__CONCURRENCY": "64"}, trace=_little_posix),
        ]
    )
    result = start_run(_spec(tmp_path), max_experiments=2, measurer=script)
    run_dir = Path(result.run_dir)
    return json.loads((run_dir / "report.json").read_text()), script, run_dir


def test_time_inside_the_library_passes_the_gate_and_its_settings_are_tried(tmp_path: Path) -> None:
    doc, script, run_dir = _run(tmp_path, _stacks(inside=180, outside=20))
    assert doc["status"] == "completed", doc["status_reason"]
    gate = doc["diagnosis"]["gate"]
    (inside,) = [p for p in gate["possibly_io"] if p["source"] == "library-time"]
    assert inside["fraction"] == 0.9
    assert "zarr 90%" in inside["evidence"] and "200 samples" in inside["evidence"]
    assert gate["worth_tuning"] and "library-time" in gate["reason"]
    # exactly one start was sampled: untraced, after the baseline's three replicates
    (sampled,) = [inv for inv in script.starts if inv.samples is not None]
    assert sampled.trace_dir is None and sampled.index == 3
    # the library's own setting is proposed although the I/O is many tiny reads
    assert doc["diagnosis"]["shape"] == "op-count-bound"
    offered = {p["strategy"]: p["status"] for p in doc["proposals"]}
    assert offered["l2.zarr_async_concurrency"] in ("proposed", "measured")
    tried = [e["strategy"] for e in doc["experiments"]]
    assert "l2.zarr_async_concurrency" in tried
    # the morning view says why a run whose trace shows little I/O was tuned
    report = (run_dir / "report.md").read_text()
    assert "**Unseen I/O:** the trace shows 0.0% of the process time in I/O calls" in report
    assert "(library-time): one untraced run sampled by py-spy" in report


def test_a_program_that_barely_enters_the_library_is_still_not_worth_tuning(tmp_path: Path) -> None:
    doc, _, _ = _run(tmp_path, _stacks(inside=2, outside=198))
    assert doc["status"] == "not_worth_tuning"
    reason = doc["status_reason"]
    assert "library-time: one untraced run sampled by py-spy" in reason and "for 1% of them" in reason
    assert doc["experiments"] == []


def test_too_few_samples_say_nothing_and_the_gate_says_why_it_stopped(tmp_path: Path) -> None:
    doc, _, _ = _run(tmp_path, _stacks(inside=5, outside=3))
    assert doc["status"] == "not_worth_tuning"
    said = [e["message"] for e in doc["events"] if e["node"] == "diagnoser"]
    assert any("8 sample(s) of the program's main thread, too few to say" in m for m in said)
