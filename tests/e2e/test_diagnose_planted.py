"""Diagnosis finds problems planted in real dftracer traces, and only those.

Four small programs, each spending most of its time in one I/O pattern, run concurrently
under the real dftracer (PRELOAD mode, LD_PRELOAD) once per module:

- ``random``: ~20k 4 KiB ``os.pread`` at random block offsets of a 64 MiB file;
- ``smallwrite``: 200 MB written with 8 KiB ``os.write`` calls, fsync at the end;
- ``metastorm``: 5,000 empty files created, re-opened several times, then unlinked
  (``os.stat`` is not traced from Python on glibc >= 2.33, so only open/close/unlink/mkdir);
- ``control``: a 256 MiB file written and read back sequentially in 4 MiB calls.

Each program prints what it did (counts computed with the I/O semantics of docs/analyze.md: a pread is
random when it starts before the end of the previous access to the file), and the
evidence of the planted bottleneck must quote those numbers. The recorded legacy traces
(cm1, DLIO unet3d) check the metric choice and the "worth tuning" gate on real jobs.

One expectation is kept as a strict xfail because today's rules do not meet it: random
4 KiB preads do not rank ``sequentiality`` in the top two nor pick the ``iops`` metric
(read-time and small-io both score 5 on such a job; see the test's reason).
"""

from __future__ import annotations

import json
import re
import subprocess
import sys
import textwrap
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

import conftest as c  # tests/ is on sys.path (rootdir conftest, prepend import mode)
import pytest

from dftune.core.domain.diagnosis import Bottleneck, Diagnosis
from dftune.core.vocabulary import FS_TYPES
from dftune.tools.diagnose.engine import DataDirError, diagnose, diagnose_analysis
from dftune.tools.trace import analyze

# one xdist worker runs the module: its module fixture (real runs, traced) is then made once,
# not once on each worker that receives one of its tests
pytestmark = [pytest.mark.e2e, pytest.mark.xdist_group("planted")]

TIMEOUT_S = 120

# --------------------------------------------------------------------------- the programs
# Every program prints one JSON line with the numbers the diagnosis must quote.

RANDOM_FILE, RANDOM_BLOCK, RANDOM_READS = 64 << 20, 4096, 20_000
RANDOM_PROG = textwrap.dedent(
    f"""
    import json, os, random, sys
    d = sys.argv[1]
    p = os.path.join(d, "random.bin")
    fd = os.open(p, os.O_CREAT | os.O_WRONLY | os.O_TRUNC, 0o644)
    os.ftruncate(fd, {RANDOM_FILE})  # a sparse file: no write time in the trace
    os.close(fd)
    fd = os.open(p, os.O_RDONLY)
    rng = random.Random(11)
    blocks = {RANDOM_FILE // RANDOM_BLOCK}
    prev_end = 0
    rand = 0
    for i in range({RANDOM_READS}):
        off = rng.randrange(blocks) * {RANDOM_BLOCK}
        rand += i > 0 and off < prev_end
        assert len(os.pread(fd, {RANDOM_BLOCK}, off)) == {RANDOM_BLOCK}
        prev_end = off + {RANDOM_BLOCK}
    os.close(fd)
    print(json.dumps({{"preads": {RANDOM_READS}, "random": rand}}))
    """
)

SMALL_WRITE, SMALL_TOTAL = 8192, 200_000_000
SMALL_WRITES = SMALL_TOTAL // SMALL_WRITE
SMALLWRITE_PROG = textwrap.dedent(
    f"""
    import json, os, sys
    d = sys.argv[1]
    fd = os.open(os.path.join(d, "small.bin"), os.O_CREAT | os.O_WRONLY | os.O_TRUNC, 0o644)
    buf = b"w" * {SMALL_WRITE}
    for _ in range({SMALL_WRITES}):
        assert os.write(fd, buf) == {SMALL_WRITE}
    os.fsync(fd)
    os.close(fd)
    print(json.dumps({{"writes": {SMALL_WRITES}, "bytes": {SMALL_WRITES * SMALL_WRITE}}}))
    """
)

META_FILES, META_ROUNDS = 5_000, 3
METASTORM_PROG = textwrap.dedent(
    f"""
    import json, os, sys
    d = os.path.join(sys.argv[1], "storm")
    os.mkdir(d)
    paths = [os.path.join(d, f"f{{i:05d}}") for i in range({META_FILES})]
    for p in paths:
        os.close(os.open(p, os.O_CREAT | os.O_WRONLY | os.O_TRUNC, 0o644))
    for _ in range({META_ROUNDS}):
        for p in paths:
            os.close(os.open(p, os.O_RDONLY))
    for p in paths:
        os.unlink(p)
    os.rmdir(d)
    ops = {META_FILES} * 2 * (1 + {META_ROUNDS}) + {META_FILES} + 2
    print(json.dumps({{"files": {META_FILES}, "metadata_ops": ops}}))
    """
)

CONTROL_FILE, CONTROL_BLOCK = 256 << 20, 4 << 20
CONTROL_PROG = textwrap.dedent(
    f"""
    import json, os, sys
    d = sys.argv[1]
    p = os.path.join(d, "big.bin")
    buf = b"s" * {CONTROL_BLOCK}
    fd = os.open(p, os.O_CREAT | os.O_WRONLY | os.O_TRUNC, 0o644)
    for _ in range({CONTROL_FILE // CONTROL_BLOCK}):
        assert os.write(fd, buf) == {CONTROL_BLOCK}
    os.close(fd)
    reads = 0
    for _ in range(2):
        fd = os.open(p, os.O_RDONLY)
        while os.read(fd, {CONTROL_BLOCK}):
            reads += 1
        os.close(fd)
    print(json.dumps({{"reads": reads}}))
    """
)

PROGRAMS = {
    "random": RANDOM_PROG,
    "smallwrite": SMALLWRITE_PROG,
    "metastorm": METASTORM_PROG,
    "control": CONTROL_PROG,
}


@dataclass
class Planted:
    name: str
    trace_dir: Path
    data_dir: Path
    facts: dict[str, int] = field(default_factory=dict)
    _diagnosis: Diagnosis | None = None

    @property
    def diagnosis(self) -> Diagnosis:
        if self._diagnosis is None:
            self._diagnosis = diagnose([self.trace_dir], data_dirs=[self.data_dir])
        return self._diagnosis


@pytest.fixture(scope="module")
def planted(tmp_path_factory: pytest.TempPathFactory) -> dict[str, Planted]:
    """Run the four programs concurrently under dftracer (PRELOAD); one trace folder each."""
    lib = c.dftracer_preload_lib()
    if lib is None:
        pytest.skip("dftracer (with libdftracer_preload.so) is not installed")
    root = tmp_path_factory.mktemp("planted")
    jobs: list[tuple[Planted, subprocess.Popen[str]]] = []
    for name, prog in PROGRAMS.items():
        base = root / name
        tdir, ddir = base / "trace", base / "data"
        tdir.mkdir(parents=True)
        ddir.mkdir(parents=True)
        script = base / f"{name}_prog.py"
        script.write_text(prog)
        env = c._clean_env()
        env.update(
            DFTRACER_ENABLE="1",
            DFTRACER_INIT="PRELOAD",
            DFTRACER_INC_METADATA="1",
            DFTRACER_LOG_FILE=str(tdir / "trace"),
            DFTRACER_DATA_DIR="all",
            LD_PRELOAD=str(lib),
        )
        proc = subprocess.Popen(
            [sys.executable, str(script), str(ddir)],
            cwd=str(base),
            env=env,
            stdout=subprocess.PIPE,
            stderr=subprocess.PIPE,
            text=True,
        )
        jobs.append((Planted(name, tdir, ddir), proc))
    stdouts = c.wait_for_traced([(p.name, p.trace_dir, proc) for p, proc in jobs], TIMEOUT_S)
    out: dict[str, Planted] = {}
    for p, _ in jobs:
        p.facts = json.loads(stdouts[p.name].strip().splitlines()[-1])
        for f in p.data_dir.rglob("*.bin"):  # the traces are all we need; free the disk
            f.unlink()
        out[p.name] = p
    return out


# --------------------------------------------------------------------------- helpers


def _numbers(text: str) -> list[float]:
    """Every number quoted in an evidence string ("10,118 of 20,046" -> [10118, 20046])."""
    return [float(n.replace(",", "")) for n in re.findall(r"\d[\d,]*(?:\.\d+)?", text)]


def _kib(evidence: str) -> float:
    """The mean transfer size an evidence string quotes ("mean 4.0 KiB", "of 4.2 KiB")."""
    m = re.search(r"([\d,]+\.\d+) KiB", evidence)
    assert m, evidence
    return float(m.group(1).replace(",", ""))


def _near(actual: float, expected: float, rel: float = 0.05) -> bool:
    return abs(actual - expected) <= rel * expected


def _quotes(evidence: str, expected: float, rel: float = 0.05) -> bool:
    """The evidence quotes a number within ``rel`` of ``expected``."""
    return any(_near(n, expected, rel) for n in _numbers(evidence))


def _top(d: Diagnosis, k: int) -> list[tuple[str, str, int]]:
    return [(b.id, b.category, b.score) for b in d.bottlenecks[:k]]


def _by_id(d: Diagnosis) -> dict[str, Bottleneck]:
    return {b.id: b for b in d.bottlenecks}


def _cli(args: list[str]) -> subprocess.Popen[str]:
    return subprocess.Popen(
        [sys.executable, "-m", "dftune.cli", *args],
        env=c._clean_env(),
        stdout=subprocess.PIPE,
        stderr=subprocess.PIPE,
        text=True,
    )


def _cli_json(proc: subprocess.Popen[str]) -> dict[str, Any]:
    stdout, stderr = proc.communicate(timeout=TIMEOUT_S)
    assert proc.returncode == 0, stderr
    doc: dict[str, Any] = json.loads(stdout)
    return doc


@pytest.fixture(scope="module")
def cli_docs(planted: dict[str, Planted]) -> dict[str, dict[str, Any]]:
    """``dftune diagnose --json --data-dir`` on every planted trace, run concurrently."""
    procs = {
        name: _cli(["diagnose", str(p.trace_dir), "--json", "--data-dir", str(p.data_dir)])
        for name, p in planted.items()
    }
    return {name: _cli_json(proc) for name, proc in procs.items()}


# --------------------------------------------------------------------------- planted problems


@pytest.mark.parametrize("name", list(PROGRAMS))
def test_planted_io_is_worth_tuning(planted: dict[str, Planted], name: str) -> None:
    d = planted[name].diagnosis
    assert d.worth_tuning, d.gate.reason
    assert d.gate.io_fraction >= d.gate.min_io_fraction == 0.05
    assert len(d.checklist) == 12
    assert [e.number for e in d.checklist] == list(range(1, 13))


def test_random_preads_are_diagnosed_as_random(planted: dict[str, Planted]) -> None:
    p = planted["random"]
    d = p.diagnosis
    preads, rand = p.facts["preads"], p.facts["random"]
    # uniform block offsets: about half start before the previous read ended (docs/analyze.md)
    assert 0.4 * preads < rand < 0.6 * preads
    rules = _by_id(d)
    assert "DP11" in rules, _top(d, 10)
    dp11 = rules["DP11"]
    assert dp11.category == "sequentiality"
    # severity = random_time_frac, ~0.5 for uniform offsets: right on the 2|3 score edge
    assert dp11.score >= 2, dp11
    assert _near(_numbers(dp11.evidence)[0], rand), (dp11.evidence, rand)
    if "W02" in rules:  # rand_frac > 0.5: on the edge for uniform offsets
        assert rules["W02"].category == "sequentiality"
        random_count, classified = _numbers(rules["W02"].evidence)[1:3]
        assert _near(random_count, rand) and _near(classified, preads), rules["W02"].evidence
    # 4 KiB reads: small-io, with the read count and the mean size quoted
    assert {"DP05", "W03"} <= rules.keys(), _top(d, 10)
    assert rules["DP05"].category == rules["W03"].category == "small-io"
    assert max(rules["DP05"].score, rules["W03"].score) >= 3
    assert _quotes(rules["DP05"].evidence, preads), rules["DP05"].evidence
    assert 4.0 <= _kib(rules["W03"].evidence) < 4.5, rules["W03"].evidence  # + interpreter start-up reads
    # sequentiality leads once the pure time-share categories (read-time/write-time) are set aside
    shares = ("read-time", "write-time")
    patterns = list(dict.fromkeys(b.category for b in d.bottlenecks if b.category not in shares))
    assert "sequentiality" in patterns[:2], _top(d, 10)
    # the dftracer-io-optimization skill's metric table:
    # small-io/sequentiality -> iops, unless read-time also dominates
    if d.category_scores["read-time"] >= 4:
        assert d.metric.metric == "time"
    else:
        assert d.metric.metric == "iops"


@pytest.mark.xfail(
    strict=True,
    reason="rules as of this test: T01 read-time and DP05/W03 "
    "small-io score 5 on any 4 KiB read-only job, while "
    "random_time_frac is ~0.5 for uniform offsets (score 2-3), so "
    "sequentiality ranks 4th and the dftracer-io-optimization skill's "
    "'multiple >= 4 -> time' picks time, not iops",
)
def test_random_preads_rank_sequentiality_top2_with_iops_metric(planted: dict[str, Planted]) -> None:
    d = planted["random"].diagnosis
    assert "sequentiality" in [b.category for b in d.bottlenecks[:2]], _top(d, 5)
    assert d.metric.metric == "iops"


def test_small_writes_are_diagnosed_as_small_io(planted: dict[str, Planted]) -> None:
    p = planted["smallwrite"]
    d = p.diagnosis
    writes = p.facts["writes"]
    assert d.bottlenecks[0].category in ("small-io", "write-time"), _top(d, 3)
    rules = _by_id(d)
    assert "DP06" in rules, _top(d, 10)
    dp06 = rules["DP06"]
    assert dp06.category == "small-io" and dp06.score >= 3, dp06
    assert _near(_numbers(dp06.evidence)[0], writes), (dp06.evidence, writes)
    assert "100% of all writes" in dp06.evidence
    if "T02" in rules:
        assert _quotes(rules["T02"].evidence, writes), rules["T02"].evidence
        assert 8.0 <= _kib(rules["T02"].evidence) < 8.5, rules["T02"].evidence
    assert not any(b.category == "sequentiality" for b in d.bottlenecks), _top(d, 10)
    assert d.metric.metric in ("iops", "time")


def test_metadata_storm_is_diagnosed_as_metadata(planted: dict[str, Planted]) -> None:
    p = planted["metastorm"]
    d = p.diagnosis
    top = d.bottlenecks[0]
    assert (top.id, top.category) == ("W01", "metadata"), _top(d, 3)
    assert top.score >= 4
    # "... (0.610 s in 45,217 calls)": the call count is the last number
    assert _near(_numbers(top.evidence)[-1], p.facts["metadata_ops"]), (top.evidence, p.facts)
    assert d.metric.metric == "metadata_ops"
    assert d.category_scores["metadata"] == top.score


def test_large_sequential_control_has_no_pattern_bottleneck(planted: dict[str, Planted]) -> None:
    d = planted["control"].diagnosis
    strong = [b.id for b in d.bottlenecks if b.category in ("sequentiality", "small-io") and b.score >= 3]
    assert not strong, _top(d, 10)
    # none of the transfer-size or randomness rules fires at all
    assert not {"DP05", "DP06", "W03", "W04", "W02", "DP11", "DP13"} & _by_id(d).keys(), _top(d, 10)


@pytest.mark.parametrize("name", list(PROGRAMS))
def test_cli_json_agrees_with_api(
    planted: dict[str, Planted], cli_docs: dict[str, dict[str, Any]], name: str
) -> None:
    doc, d = cli_docs[name], planted[name].diagnosis
    assert doc["schema"] == "dftune.diagnosis/1"
    assert doc["bottlenecks"], doc
    top = doc["bottlenecks"][0]
    assert (top["id"], top["category"], top["score"]) == _top(d, 1)[0]
    assert doc["metric"]["metric"] == d.metric.metric
    assert doc["worth_tuning"] == d.worth_tuning
    assert doc["fs_type"] == d.fs_type
    assert len(doc["checklist"]) == 12


# --------------------------------------------------------------------------- recorded traces


def test_cm1_is_metadata_bound_but_not_worth_tuning(shared_traces: Path) -> None:
    path = shared_traces / "cm1-48ranks-legacy"
    if not path.is_dir():
        pytest.skip(f"{path} not found")
    d = diagnose([path])
    assert d.bottlenecks[0].category == "metadata", _top(d, 3)
    assert d.worth_tuning is False and d.gate.worth_tuning is False
    assert d.gate.io_fraction < 0.05, d.gate.reason
    assert d.metric.metric == "metadata_ops"
    assert len(d.checklist) == 12


def test_dlio_unet3d_is_read_and_fetch_bound(shared_traces: Path) -> None:
    path = shared_traces / "dlio-unet3d-8ranks-legacy"
    if not path.is_dir():
        pytest.skip(f"{path} not found")
    d = diagnose([path])
    assert d.bottlenecks[0].category in ("read-time", "fetch-pressure"), _top(d, 3)
    assert any(b.category == "fetch-pressure" for b in d.bottlenecks), _top(d, 10)
    assert d.worth_tuning
    assert len(d.checklist) == 12


# --------------------------------------------------------------------------- filesystem


def test_data_dir_gives_a_known_fs_type_and_none_warns(planted: dict[str, Planted], tmp_path: Path) -> None:
    trace = str(planted["control"].trace_dir)
    with_dir = _cli(["diagnose", trace, "--json", "--data-dir", str(tmp_path)])
    without = _cli(["diagnose", trace, "--json"])
    doc, bare = _cli_json(with_dir), _cli_json(without)
    assert doc["fs_type"] in FS_TYPES
    assert [x["path"] for x in doc["data_dirs"]] == [str(tmp_path)]
    assert doc["data_dirs"][0]["fs_type"] == doc["fs_type"]
    assert not any("no --data-dir" in w for w in doc["warnings"]), doc["warnings"]
    assert bare["fs_type"] == "unknown"
    assert bare["data_dirs"] == []
    assert any("--data-dir" in w and "unknown" in w for w in bare["warnings"]), bare["warnings"]
    # a user's --data-dir that does not exist is refused (a typo is not a filesystem) ...
    with pytest.raises(DataDirError, match="no such file or directory"):
        diagnose([trace], data_dirs=[tmp_path / "not" / "yet"])
    # ... while a run's own data dir, not created before the workload's setup, resolves to its
    # nearest existing parent (the diagnoser agent diagnoses the baseline's analysis this way)
    later = diagnose_analysis(analyze([trace], views=["file", "proc"]), data_dirs=[tmp_path / "not" / "yet"])
    assert later.fs_type == doc["fs_type"]
