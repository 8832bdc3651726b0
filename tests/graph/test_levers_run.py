"""A bare spec (command and metric, no knob) of a program nobody tuned: the run finds the
program's own lever in its source, measures it like a declared knob, keeps the win, and the
morning view names the lever and where it came from.

The program (written here, never started: the measurements are scripted) reads a folder through
a thread pool whose size is its ``--threads`` option; its read size and file count are the
workload's definition and are never drafted."""

from __future__ import annotations

import json
import textwrap
from collections.abc import Callable
from pathlib import Path

import pytest

from dftune.core.domain.run import TuningState
from dftune.graphs.runs import archived_spec, start_run
from dftune.tools.runner.levers import LEVERS_FILE
from dftune.tools.runner.measurer import Invocation
from dftune.tools.session.workspace import Workspace
from tests.fakes.measurer import Arm, ScriptedMeasurer, steady
from tests.tracegen import Proc

READER = """
import argparse, os, time
from concurrent.futures import ThreadPoolExecutor
p = argparse.ArgumentParser()
p.add_argument("--data", required=True)
p.add_argument("--threads", type=int, default=1)
p.add_argument("--chunk", type=int, default=4096)
p.add_argument("--files", type=int, default=2000)
a = p.parse_args()
def read(name):
    with open(os.path.join(a.data, name), "rb") as f:
        while f.read(a.chunk):
            pass
t0 = time.perf_counter()
with ThreadPoolExecutor(max_workers=a.threads) as pool:
    list(pool.map(read, os.listdir(a.data)))
print(f"read_time_s {time.perf_counter() - t0}")
"""

BARE = """
name = "pool-reader"
command = ["{python}", "reader.py", "--data", "{data_dir}"]
replicates = 3
[metric]
kind = "stdout_regex"
pattern = 'read_time_s ([0-9.]+)'
[tracing]
mode = "off"
"""


def _bare(tmp_path: Path, program: str = READER) -> Path:
    (tmp_path / "reader.py").write_text(textwrap.dedent(program))
    spec = tmp_path / "bare.toml"
    spec.write_text(BARE)
    return spec


def _state(result_run_dir: str) -> TuningState:
    doc = json.loads((Path(result_run_dir) / "report.json").read_text())
    return TuningState.model_validate({k: v for k, v in doc.items() if k in TuningState.model_fields})


def test_a_bare_spec_finds_the_pool_size_and_keeps_its_win(tmp_path: Path) -> None:
    script = ScriptedMeasurer(
        [
            Arm({}, steady(2.8)),
            Arm({"THREADS": 2}, steady(1.5)),
            Arm({"THREADS": 4}, steady(0.8)),
            Arm({"THREADS": 8}, steady(0.78)),
        ]
    )
    result = start_run(_bare(tmp_path), max_experiments=2, measurer=script)
    assert result.status == "completed", result.status_reason
    assert result.levers is not None
    (lever,) = result.levers.found
    assert lever.knob == "THREADS" and lever.flag == "--threads"
    assert lever.origin == "reader.py:15 (ThreadPoolExecutor max_workers=)"
    assert lever.values == [1, 2, 4, 8] and lever.strategy == "l1.concurrent_io_pool"
    # every start passed the lever, at the program's default in the baseline
    assert all("--threads" in inv.argv for inv in script.starts if inv.purpose != "setup")
    kept = [v for v in result.verdicts if v.kept]
    assert kept and all(v.proposal.startswith("THREADS=") for v in kept)
    run_dir = Path(result.run_dir)
    saved = json.loads((run_dir / LEVERS_FILE).read_text())
    assert saved["command"][-2:] == ["--threads", "{THREADS}"]
    # a resumed or replayed run works from the same knobs: the archived spec carries them
    state = _state(result.run_dir)
    assert [k.name for k in archived_spec(state, Workspace()).knobs] == ["THREADS"]
    report = (run_dir / "report.md").read_text()
    assert "**Levers:** found in the program: THREADS (--threads, from reader.py:15" in report


def test_declared_only_drafts_nothing(tmp_path: Path) -> None:
    script = ScriptedMeasurer([Arm({}, steady(2.8))])
    result = start_run(_bare(tmp_path), max_experiments=1, declared_only=True, measurer=script)
    assert result.levers is None
    assert not (Path(result.run_dir) / LEVERS_FILE).exists()
    assert all(not v.proposal.startswith("THREADS") for v in result.verdicts)


def test_a_program_without_levers_says_what_to_add(tmp_path: Path) -> None:
    plain = READER.replace("max_workers=a.threads", "max_workers=os.cpu_count()").replace(
        'p.add_argument("--threads", type=int, default=1)\n', ""
    )
    script = ScriptedMeasurer([Arm({}, steady(2.8))])
    result = start_run(_bare(tmp_path, plain), max_experiments=1, measurer=script)
    assert result.levers is not None and result.levers.found == []
    assert "[[knobs]]" in result.levers.note
    assert any("max_workers (reader.py" in x for x in result.levers.listed)
    report = (Path(result.run_dir) / "report.md").read_text()
    assert "**Levers:** no option of the program decides" in report


LOADER = """
import time
from torch.utils.data import DataLoader
loader = DataLoader(range(64), batch_size=8, num_workers=2)
t0 = time.perf_counter()
for batch in loader:
    pass
print(f"read_time_s {time.perf_counter() - t0}")
"""


def test_a_literal_argument_becomes_an_env_gated_lever_on_a_copy(tmp_path: Path) -> None:
    """``num_workers=2`` written in the source: a patch of a copy reads DFTUNE_NUM_WORKERS with 2
    as its default, every arm runs the copy, and the user's file is never touched."""
    gate = {"reader.py": "environ['DFTUNE_NUM_WORKERS']"}
    script = ScriptedMeasurer(
        [
            Arm({}, steady(2.0), source=gate),
            Arm({"DFTUNE_NUM_WORKERS": 0}, steady(2.6), source=gate),
            Arm({"DFTUNE_NUM_WORKERS": 4}, steady(1.1), source=gate),
            Arm({"DFTUNE_NUM_WORKERS": 1}, steady(2.3), source=gate),
            Arm({"DFTUNE_PIN_MEMORY": True}, steady(2.0), source=gate),
        ]
    )
    spec = _bare(tmp_path, LOADER)
    before = (tmp_path / "reader.py").read_text()
    result = start_run(spec, max_experiments=4, measurer=script)
    assert result.status == "completed", result.status_reason
    assert result.levers is not None
    by = {lv.knob: lv for lv in result.levers.found}
    assert by["DFTUNE_NUM_WORKERS"].kind == "env" and by["DFTUNE_NUM_WORKERS"].default == 2
    assert by["DFTUNE_NUM_WORKERS"].values[0] == 2
    assert by["DFTUNE_NUM_WORKERS"].origin == "reader.py:line 4 (DataLoader num_workers=, written)"
    assert "DFTUNE_PIN_MEMORY" in by  # left out: added around DataLoader's documented default
    assert result.levers.listed == []  # the literal num_workers=2 is a lever now, not a listing
    assert (tmp_path / "reader.py").read_text() == before
    diff = Path(result.levers.patch).read_text()
    assert "-loader = DataLoader(range(64), batch_size=8, num_workers=2)" in diff
    # every arm names the gate's text: no start ran the unpatched program
    assert Path(result.levers.source_copy, "reader.py").read_text().count("DFTUNE_") >= 2
    assert [v.proposal for v in result.verdicts if v.kept] == ["DFTUNE_NUM_WORKERS=4"]


def test_the_copy_leaves_out_dftunes_home_and_the_data_inside_the_tree(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    monkeypatch.setenv("DFTUNE_HOME", str(tmp_path / "home"))  # a run folder inside the source tree
    (tmp_path / "data").mkdir()
    (tmp_path / "data" / "big.bin").write_bytes(b"x" * 4096)
    spec = _bare(tmp_path, LOADER)
    spec.write_text(spec.read_text().replace("replicates = 3", 'replicates = 3\ndata_dir = "data"'))
    gate = {"reader.py": "environ['DFTUNE_NUM_WORKERS']"}
    script = ScriptedMeasurer([Arm({}, steady(2.0), source=gate)])
    result = start_run(spec, max_experiments=0, measurer=script)
    assert result.levers is not None and result.levers.source_copy
    copied = {p.name for p in Path(result.levers.source_copy).iterdir()}
    assert "reader.py" in copied and "home" not in copied and "data" not in copied


def test_two_calls_with_the_same_setting_share_one_knob(tmp_path: Path) -> None:
    source = (
        "import h5py, time\n"
        'with h5py.File("t.h5", "w") as f:\n    pass\n'
        't0 = time.perf_counter()\nwith h5py.File("t.h5", "r") as f:\n    pass\n'
        'print(f"read_time_s {time.perf_counter() - t0}")\n'
    )
    gate = {"reader.py": "environ['DFTUNE_RDCC_NBYTES']"}
    script = ScriptedMeasurer([Arm({}, steady(2.0), source=gate)])
    result = start_run(_bare(tmp_path, source), max_experiments=0, measurer=script)
    assert result.levers is not None
    knobs = [lv.knob for lv in result.levers.found]
    assert knobs.count("DFTUNE_RDCC_NBYTES") == 1 and "DFTUNE_RDCC_NSLOTS" in knobs
    assert Path(result.levers.source_copy, "reader.py").read_text().count("'DFTUNE_RDCC_NBYTES' in") == 2


def test_a_draft_that_does_not_fit_leaves_the_spec_as_declared(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    """A lever whose placeholder is missing from the drafted command: the run goes on with the
    spec as the user wrote it, and says why no lever was used."""
    from dftune.core.domain.levers import Lever, Levers
    from dftune.tools.runner import levers

    broken = Levers(
        command=["{python}", "reader.py", "--data", "{data_dir}"],
        found=[Lever(knob="X", flag="--x", origin="o", why="w", values=[1, 2], default=1)],
    )
    monkeypatch.setattr(levers, "draft_levers", lambda spec, run_dir=None: broken)
    result = start_run(_bare(tmp_path), max_experiments=0, measurer=ScriptedMeasurer([Arm({}, steady(2.0))]))
    assert result.status == "completed", result.status_reason
    assert result.levers is not None and result.levers.found == []
    assert "do not fit the spec" in result.levers.note and "[[knobs]]" in result.levers.note


H5_ANALYSIS = """
import argparse, os, random, time
import h5py
p = argparse.ArgumentParser()
p.add_argument("--data", required=True)
a = p.parse_args()
rows = list(range(400))
random.Random(0).shuffle(rows)
t0 = time.perf_counter()
with h5py.File(os.path.join(a.data, "table.h5"), "r") as f:
    for r in rows:
        f["x"][r]
print(f"read_time_s {time.perf_counter() - t0}")
"""


def _table_reads(passes: int, *, cached: bool) -> Callable[[Invocation], list[Proc]]:
    """The table's chunks read ``passes`` times (the random rows revisit them), or once when the
    chunk cache holds them all."""

    def program(inv: Invocation) -> list[Proc]:
        p = Proc(pid=30)
        table = f"{inv.data_dir}/table.h5"
        p.open(table)
        for n in range(1 if cached else passes):
            for chunk in range(32):
                p.read(table, 64 * 1024, offset=chunk * 64 * 1024, dur=400)
            p.compute(2_000 * (n + 1))
        p.close(table)
        return [p]

    return program


@pytest.mark.parametrize("the_program_reads_it_too", [False, True])
def test_a_cache_lever_only_the_library_reads_is_kept_without_asking(
    tmp_path: Path, the_program_reads_it_too: bool
) -> None:
    """Dropped re-reads under the chunk cache's lever: when the variable reaches only h5py.File's
    argument (the patch is the only code that reads it), the passes cannot depend on it and the
    win is kept; a program that reads the variable itself leaves the question to a person."""
    program = H5_ANALYSIS
    if the_program_reads_it_too:
        program += "if os.environ.get('DFTUNE_RDCC_NBYTES'):\n    rows = rows[:100]\n"
    gate = {"reader.py": "environ['DFTUNE_RDCC_NBYTES']"}
    base, cached = _table_reads(3, cached=False), _table_reads(3, cached=True)
    script = ScriptedMeasurer(
        [
            Arm({}, steady(3.0), source=gate, trace=base),
            Arm({"DFTUNE_RDCC_NBYTES": 16 << 20}, steady(1.2), source=gate, trace=cached),
            Arm({"DFTUNE_RDCC_NSLOTS": 10007}, steady(3.0), source=gate, trace=base),
        ]
    )
    spec = _bare(tmp_path, program)
    spec.write_text(spec.read_text().replace('[tracing]\nmode = "off"\n', ""))
    (tmp_path / "data").mkdir()
    spec.write_text(spec.read_text().replace("replicates = 3", 'replicates = 3\ndata_dir = "data"'))
    result = start_run(spec, max_experiments=1, measurer=script)
    assert result.status == "completed", result.status_reason
    (verdict,) = result.verdicts
    assert verdict.proposal == "DFTUNE_RDCC_NBYTES=16777216"
    doc = json.loads((Path(result.run_dir) / "report.json").read_text())
    (exp,) = doc["experiments"]
    if the_program_reads_it_too:
        assert exp["verdict"] == "pending", exp["verdict_reason"]
        assert "Does the program still make as many passes" in exp["verdict_reason"]
    else:
        assert exp["verdict"] == "win" and exp["kept"], exp["verdict_reason"]
        guards = [g["decision"] for g in doc["guard_decisions"] if g.get("iteration") == 1]
        less = next(d for d in guards if d["guard"] == "no_doing_less")
        assert less["passed"] and "only through the I/O calls' arguments" in less["reason"]


CONFIGURED = """
import argparse, time, yaml
from concurrent.futures import ThreadPoolExecutor
p = argparse.ArgumentParser()
p.add_argument("--config", required=True)
p.add_argument("--data", required=True)
a = p.parse_args()
cfg = yaml.safe_load(open(a.config))
t0 = time.perf_counter()
with ThreadPoolExecutor(max_workers=cfg["loader"]["threads"]) as pool:
    pass
print(f"read_time_s {time.perf_counter() - t0}")
"""


def test_a_key_of_the_named_config_is_a_lever_passed_as_a_copy(tmp_path: Path) -> None:
    """``--config conf/run.yaml`` with ``loader.threads: 1``: the key is drafted as a config knob;
    every start passes a copy of the file holding its arm's value, the user's file never changes."""
    (tmp_path / "conf").mkdir()
    original = "loader:\n  threads: 1  # pool\nio:\n  block_size: 4096\n"
    (tmp_path / "conf" / "run.yaml").write_text(original)
    spec = _bare(tmp_path, CONFIGURED)
    spec.write_text(spec.read_text().replace('"--data"', '"--config", "conf/run.yaml", "--data"'))
    script = ScriptedMeasurer(
        [
            Arm({}, steady(2.8)),
            Arm({"THREADS": 2}, steady(1.5)),
            Arm({"THREADS": 4}, steady(0.8)),
            Arm({"THREADS": 8}, steady(0.79)),
        ]
    )
    # every start's configuration copy is read below: no check of the bundle from a scratch copy
    result = start_run(spec, max_experiments=2, measurer=script, verify_pairs=0)
    assert result.status == "completed", result.status_reason
    assert result.levers is not None
    (lever,) = result.levers.found
    assert (lever.kind, lever.flag, lever.file) == ("config", "loader.threads", "conf/run.yaml")
    (knob,) = archived_spec(_state(result.run_dir), Workspace()).knobs  # a resume works from it
    assert (knob.kind, knob.file, knob.key) == ("config", "conf/run.yaml", "loader.threads")
    passed = [inv for inv in script.starts if inv.purpose != "setup"]
    assert passed and all("conf/run.yaml" not in inv.argv for inv in passed)
    import yaml

    for inv in passed:
        (copy,) = [a for a in inv.argv if a.endswith("/dftune-config/run.yaml")]
        assert yaml.safe_load(Path(copy).read_text())["io"] == {"block_size": 4096}
    copies = {a for inv in passed for a in inv.argv if "dftune-config" in a}
    values = {yaml.safe_load(Path(a).read_text())["loader"]["threads"] for a in copies}
    assert {1, 2, 4} <= values  # the baseline's copy holds the file's own value
    assert (tmp_path / "conf" / "run.yaml").read_text() == original
    assert [v.proposal for v in result.verdicts if v.kept][:1] == ["THREADS=2"]
    report = (Path(result.run_dir) / "report.md").read_text()
    assert "THREADS (loader.threads, from conf/run.yaml)" in report
