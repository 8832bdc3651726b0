"""The measurement seam: bench hands every start to the measurer, and reads what it left.

bench's statistics, metric extraction, work counters, paired interleaving and trace gathering
all run on what the measurer returns; the scripted measurer of the graph tier
(tests/fakes/measurer.py) is as strict as a real run: a start it has no arm for, or two arms
for, is an error naming the start's condition, never a silent default.
"""

from __future__ import annotations

from pathlib import Path

import pytest

from dftune.agents.context import Context
from dftune.tools.runner.bench import ProcessMeasurer, bench
from dftune.tools.runner.paired import ArmPlan, paired_bench
from dftune.tools.runner.spec import load_spec
from dftune.tools.trace import analyze
from tests.fakes.measurer import Arm, ScriptedMeasurer, ScriptError, steady
from tests.tracegen import Proc

SPEC = """\
name = "seam"
command = ["{python}", "prog.py", "--out", "{data_dir}", "--n", "{N}"]
setup = ["{python}", "prog.py", "--setup", "{data_dir}"]
replicates = 3
page_cache = "warm"
[metric]
kind = "stdout_regex"
pattern = 'elapsed: ([0-9.]+) s'
[tracing]
mode = "off"
[[work]]
name = "records"
pattern = '^records (\\d+)'
[[knobs]]
name = "N"
kind = "arg"
values = [1, 2]
default = 1
strategy = "l1.dataloader_workers"
"""


def _spec(tmp_path: Path, text: str = SPEC) -> Path:
    path = tmp_path / "seam.toml"
    path.write_text(text)
    return path


def test_the_real_measurer_is_every_contexts_default() -> None:
    assert isinstance(Context().measurer, ProcessMeasurer)


def test_bench_reads_the_scripted_metric_and_work_through_the_specs_own_patterns(tmp_path: Path) -> None:
    script = ScriptedMeasurer([Arm({}, [0.5, 0.7, 0.6], work={"records": 64})])
    result = bench(load_spec(_spec(tmp_path)), workdir=tmp_path / "w", measurer=script)
    assert result.values() == [0.5, 0.7, 0.6] and result.median == 0.6
    assert [r.work for r in result.replicates] == [{"records": 64.0}] * 3
    # every start went through the measurer: the setup, the warm-up, then each replicate
    assert [(s.purpose, s.index, s.label) for s in script.starts] == [
        ("setup", None, "setup"),
        ("warmup", None, "warmup"),
        ("replicate", 0, "r0"),
        ("replicate", 1, "r1"),
        ("replicate", 2, "r2"),
    ]
    first = script.starts[2]
    assert first.settings == {"N": 1} and first.env == {} and first.trace_dir is None
    assert first.argv[-2:] == ["--n", "1"] and first.data_dir == tmp_path / "w" / "data"
    assert (tmp_path / "w" / "logs" / "r1.out").read_text() == "elapsed: 0.7 s\nrecords 64\n"


def test_a_failing_arm_fails_its_replicates_and_stops_the_experiment(tmp_path: Path) -> None:
    script = ScriptedMeasurer([Arm({}, fails="no such dataset: /data/missing")])
    result = bench(load_spec(_spec(tmp_path)), replicates=5, workdir=tmp_path / "w", measurer=script)
    assert result.ok == 0 and len(result.replicates) == 3  # three failures in a row end it
    assert result.replicates[0].status == "failed" and "no such dataset" in result.replicates[0].reason
    assert result.stopped_reason and "3 failed replicates in a row" in result.stopped_reason


def test_a_start_no_arm_covers_is_an_error_naming_its_condition(tmp_path: Path) -> None:
    script = ScriptedMeasurer([Arm({}, steady(0.5), work={"records": 64})])
    with pytest.raises(ScriptError, match=r"no scripted arm covers seam warmup \(N=2, env \{'X': '1'\}"):
        bench(
            load_spec(_spec(tmp_path)),
            overrides={"N": "2"},
            env={"X": "1"},
            workdir=tmp_path / "w",
            measurer=script,
        )


def test_two_arms_for_one_start_is_an_error(tmp_path: Path) -> None:
    script = ScriptedMeasurer([Arm({}, steady(0.5)), Arm({"N": 1}, steady(0.4))])
    with pytest.raises(ScriptError, match="2 scripted arms cover seam warmup"):
        bench(load_spec(_spec(tmp_path)), workdir=tmp_path / "w", measurer=script)


def test_an_arm_without_the_specs_work_counter_or_a_replicate_beyond_its_values_is_an_error(
    tmp_path: Path,
) -> None:
    spec = load_spec(_spec(tmp_path))
    with pytest.raises(ScriptError, match="the spec counts records; the arm reports no such work"):
        bench(spec, workdir=tmp_path / "a", measurer=ScriptedMeasurer([Arm({}, steady(0.5))]))
    short = ScriptedMeasurer([Arm({}, [0.5, 0.6], work={"records": 1})])
    with pytest.raises(ScriptError, match="replicate r2 asked, the script lists 2 value"):
        bench(spec, workdir=tmp_path / "b", measurer=short)


def test_an_unknown_knob_in_an_arm_is_an_error(tmp_path: Path) -> None:
    script = ScriptedMeasurer([Arm({"THREADS": 4}, steady(0.5))])
    with pytest.raises(ScriptError, match="seam has no knob THREADS"):
        bench(load_spec(_spec(tmp_path)), workdir=tmp_path / "w", measurer=script)


def test_a_traced_arm_writes_its_scripted_trace_where_bench_gathers_it(tmp_path: Path) -> None:
    pytest.importorskip("dftracer")  # bench sets the tracer's environment for a traced replicate

    def writes(inv: object) -> list[Proc]:
        proc = Proc(pid=7)
        out = str(tmp_path / "out.bin")
        proc.open(out)
        proc.write(out, 4096, offset=0)
        proc.close(out)
        return [proc]

    spec = load_spec(_spec(tmp_path))
    untold = ScriptedMeasurer([Arm({}, steady(0.5), work={"records": 1})])
    with pytest.raises(ScriptError, match="is traced; the arm does not say what the program did"):
        bench(spec, trace=True, workdir=tmp_path / "a", measurer=untold)
    told = ScriptedMeasurer([Arm({}, steady(0.5), work={"records": 1}, trace=writes)])
    result = bench(spec, trace=True, replicates=1, workdir=tmp_path / "b", measurer=told)
    (rep,) = result.replicates
    assert rep.status == "ok" and rep.trace_dir is not None
    assert analyze([rep.trace_dir]).write.bytes == 4096


def test_a_paired_sitting_interleaves_the_scripted_arms_and_extends_an_undecided_one(tmp_path: Path) -> None:
    spec = load_spec(_spec(tmp_path))
    script = ScriptedMeasurer(
        [
            Arm({}, steady(1.0, spread_pct=4.0), work={"records": 8}),
            Arm({"N": 2}, steady(0.97, spread_pct=4.0), work={"records": 8}),  # 3%: undecided at 5%
        ]
    )
    sitting = paired_bench(
        ArmPlan(spec, tmp_path / "ref"),
        ArmPlan(spec, tmp_path / "cand", {"N": "2"}),
        max_pairs=3,
        extra_pairs=3,
        lower_is_better=True,
        measurer=script,
    )
    order = [(s.workdir.name, s.index) for s in script.starts if s.purpose == "replicate"]
    assert order[:6] == [("ref", 0), ("cand", 0), ("cand", 1), ("ref", 1), ("ref", 2), ("cand", 2)]
    assert sitting.pairs == 6 and any("3 more pair(s)" in n for n in sitting.candidate.notes)


def test_a_patched_copy_is_never_measured_by_an_arm_for_the_workloads_own_source(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    home = tmp_path / "home"
    monkeypatch.setenv("DFTUNE_HOME", str(home))
    (tmp_path / "prog.py").write_text("print('elapsed: 1.0 s')\n")
    copy = home / "runs" / "r" / "opt1" / "source"
    copy.mkdir(parents=True)
    (copy / "prog.py").write_text("print('elapsed: 0.5 s')  # patched\n")
    spec = load_spec(_spec(tmp_path))
    own = ScriptedMeasurer([Arm({}, steady(1.0), work={"records": 1})])
    with pytest.raises(
        ScriptError, match="no scripted arm covers seam warmup \\(default settings, patched source"
    ):
        bench(spec.relocated(copy), workdir=tmp_path / "a", measurer=own)
    both = ScriptedMeasurer(
        [
            Arm({}, steady(1.0), work={"records": 1}),
            Arm({}, steady(0.5), work={"records": 1}, source={"prog.py": "# patched"}),
        ]
    )
    assert bench(spec.relocated(copy), workdir=tmp_path / "b", measurer=both).median == 0.5
    assert bench(spec, workdir=tmp_path / "c", measurer=both).median == 1.0
