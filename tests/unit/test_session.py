"""Session workspace (``tools/session/workspace.py``) and trace compaction (``compact.py``).

Every test runs in its own ``$DFTUNE_HOME`` (autouse fixture in tests/conftest.py)."""

from __future__ import annotations

import gzip
import hashlib
import json
import os
import threading
import zlib
from datetime import UTC, datetime
from pathlib import Path

import pytest

from dftune.tools.session import workspace as ws_mod
from dftune.tools.session.compact import compact_traces
from dftune.tools.session.workspace import (
    ARTIFACTS,
    ITERATION_SUBDIRS,
    InvalidRunId,
    IterationNotFound,
    RunExists,
    RunNotFound,
    UnknownArtifact,
    Workspace,
    new_run_id,
    reorganize_structure,
    validate_run_id,
    validate_structure,
)
from dftune.tools.trace.linescan import scan

# --------------------------------------------------------------------------- helpers


def _tree(root: Path) -> dict[str, str]:
    """Every path under root -> content hash ('dir' for folders, 'link' for links)."""
    out: dict[str, str] = {}
    for p in sorted(root.rglob("*")):
        rel = p.relative_to(root).as_posix()
        if p.is_symlink():
            out[rel] = "link:" + os.readlink(p)
        elif p.is_dir():
            out[rel] = "dir"
        else:
            out[rel] = hashlib.sha256(p.read_bytes()).hexdigest()
    return out


def _event(i: int, pid: int = 7) -> dict[str, object]:
    return {
        "id": i,
        "name": "read",
        "cat": "POSIX",
        "pid": pid,
        "tid": pid,
        "ts": 1000 + 10 * i,
        "dur": 5,
        "ph": "X",
        "args": {"ret": 4096},
    }


def _meta_line(pid: int = 7) -> dict[str, object]:
    return {"id": 0, "name": "HH", "cat": "dftracer", "pid": pid, "tid": pid, "ph": "M", "args": {"value": 1}}


def _legacy_text(n_events: int) -> str:
    """A legacy 1.x trace: '[' line, trailing commas, an indented line, blanks, a ']' line."""
    lines = ["[", json.dumps(_meta_line()) + ","]
    for i in range(n_events):
        text = json.dumps(_event(i))
        lines.append(("  " + text) if i == 0 else text + ("," if i % 2 else ""))
        if i == 3:
            lines.append("")
    lines.append("]")
    return "\n".join(lines) + "\n"


def _gzip_members(path: Path) -> int:
    data = path.read_bytes()
    members = 0
    while data:
        d = zlib.decompressobj(31)
        d.decompress(data)
        assert d.eof, "truncated gzip member"
        members += 1
        data = d.unused_data
    return members


def _gz_lines(path: Path) -> list[bytes]:
    with gzip.open(path, "rb") as fh:
        return fh.read().splitlines()


@pytest.fixture
def ws() -> Workspace:
    return Workspace()


@pytest.fixture
def run(ws: Workspace) -> str:
    ws.create_run("r1", "reader")
    return "r1"


# --------------------------------------------------------------------------- layout and ids


def test_layout_creation(ws: Workspace, run: str) -> None:
    rd = ws.run_dir(run)
    meta = json.loads((rd / "run.json").read_text())
    assert meta["id"] == run and meta["workload"] == "reader" and meta["status"] == "created"
    datetime.fromisoformat(meta["created"])
    assert (rd / "baseline" / "traces" / "raw").is_dir()
    assert (rd / "baseline" / "traces" / "compact").is_dir()

    n, path = ws.new_iteration(run)
    assert (n, path) == (1, rd / "opt1")
    for sub in ITERATION_SUBDIRS:
        assert (path / sub).is_dir(), sub
    # artifacts are created on demand, not up front
    assert not any((path / a).exists() for a in ARTIFACTS)
    assert ws.iteration_dir(run, 1) == path
    assert ws.traces_dir(run, 1, "compact") == path / "traces" / "compact"
    assert ws.traces_dir(run, None) == rd / "baseline" / "traces" / "raw"
    assert ws.artifact_path(run, 1, "opt_l2_env.sh") == path / "opt_l2_env.sh"
    assert ws.new_iteration(run)[0] == 2
    assert ws.iterations(run) == [1, 2]

    report = ws.validate_structure(run)
    assert report.clean and report.problems == [] and report.iterations == [1, 2]

    with pytest.raises(RunExists):
        ws.create_run(run, "again")
    with pytest.raises(RunNotFound):
        ws.new_iteration("nope")


def test_new_run_id_sortable_unique_and_used_when_none(ws: Workspace) -> None:
    t1 = datetime(2025, 1, 2, 3, 4, 5, 678000, tzinfo=UTC)
    t2 = datetime(2025, 1, 2, 3, 4, 6, 0, tzinfo=UTC)
    a, b = new_run_id("My Workload/../x", now=t1), new_run_id("My Workload/../x", now=t2)
    assert a.startswith("20250102T030405.678Z-my-workload-x-")
    assert a < b
    assert validate_run_id(a) == a
    ids = {new_run_id("w") for _ in range(200)}
    assert len(ids) == 200
    meta = ws.create_run(None, "small files")
    assert "small-files" in meta.id and ws.run_dir(meta.id).is_dir()
    assert new_run_id("")  # no slug is fine


@pytest.mark.parametrize(
    "bad",
    [
        "",
        "..",
        "../x",
        "a/../b",
        "x/..",
        "/abs",
        "/etc/passwd",
        "a/b",
        "a\\b",
        ".hidden",
        "-rf",
        "a..b",
        "a" * 129,
        "sp ace",
        "nul\x00",
        "tab\t",
        "é",
    ],
)
def test_run_id_safety(ws: Workspace, bad: str) -> None:
    before = _tree(ws.root.parent)
    with pytest.raises(InvalidRunId):
        validate_run_id(bad)
    with pytest.raises(InvalidRunId):
        ws.run_dir(bad)
    with pytest.raises(InvalidRunId):
        ws.create_run(bad, "w")
    with pytest.raises(InvalidRunId):
        ws.validate_structure(bad)
    with pytest.raises(InvalidRunId):
        ws.new_iteration(bad)
    assert _tree(ws.root.parent) == before


def test_run_id_limits_and_types(ws: Workspace) -> None:
    assert validate_run_id("a" * 128) == "a" * 128
    assert validate_run_id("run-1_x.y") == "run-1_x.y"
    for bad in (None, 3, b"abc"):
        with pytest.raises(InvalidRunId):
            validate_run_id(bad)


def test_process_owner_is_the_run_in_this_home(tmp_path: Path) -> None:
    """Two homes with a run of the same id never share an owner tag: a driver that kills what a dead
    driver of its run left must not touch the other home's programs."""
    a, b = Workspace(tmp_path / "a"), Workspace(tmp_path / "b")
    assert a.process_owner("nightly") == Workspace(tmp_path / "a").process_owner("nightly")
    assert a.process_owner("nightly") != b.process_owner("nightly")
    assert a.process_owner("nightly").startswith("nightly@")
    assert "/" not in a.process_owner("nightly")  # the tag is <owner>/<pid>.<n>
    with pytest.raises(InvalidRunId):
        a.process_owner("../x")


def test_symlinked_run_dir_refused(ws: Workspace, tmp_path: Path) -> None:
    outside = tmp_path / "elsewhere"
    outside.mkdir()
    (ws.root / "linked").symlink_to(outside, target_is_directory=True)
    with pytest.raises(InvalidRunId):
        ws.run_dir("linked")
    assert [r.id for r in ws.list_runs()] == []


def test_dftune_home_respected(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    home = Path(os.environ["DFTUNE_HOME"])
    ws = Workspace()
    assert ws.root == home / "runs"
    ws.create_run("r", "w")
    assert (home / "runs" / "r" / "run.json").is_file()
    assert validate_structure("r").clean
    other = tmp_path / "other_home"
    monkeypatch.setenv("DFTUNE_HOME", str(other))
    assert ws.root == other / "runs"  # resolved at each call
    with pytest.raises(RunNotFound):
        validate_structure("r")
    explicit = Workspace(home)
    assert explicit.root == home / "runs" and explicit.validate_structure("r").clean


def test_concurrent_new_iteration_distinct(ws: Workspace, run: str) -> None:
    results: list[int] = []
    errors: list[BaseException] = []
    lock = threading.Lock()
    barrier = threading.Barrier(16)

    def worker() -> None:
        try:
            barrier.wait()
            for _ in range(4):
                n, path = ws.new_iteration(run)
                assert path.is_dir()
                with lock:
                    results.append(n)
        except BaseException as exc:
            errors.append(exc)

    threads = [threading.Thread(target=worker) for _ in range(16)]
    for t in threads:
        t.start()
    for t in threads:
        t.join()
    assert not errors
    assert sorted(results) == list(range(1, 65))
    assert ws.iterations(run) == list(range(1, 65))


def test_new_iteration_never_reuses_numbers(ws: Workspace, run: str) -> None:
    rd = ws.run_dir(run)
    ws.new_iteration(run)
    ws.new_iteration(run)
    (rd / "opt3").write_text("a file in the way")
    assert ws.new_iteration(run)[0] == 4
    (rd / "opt2").rename(rd / "opt2-old")
    assert ws.new_iteration(run)[0] == 5


# --------------------------------------------------------------------------- artifacts


def test_json_artifact_atomic_write(ws: Workspace, run: str, monkeypatch: pytest.MonkeyPatch) -> None:
    ws.new_iteration(run)
    path = ws.write_json_artifact(run, 1, "opt_l1_results.json", {"proposals": [1, 2], "status": "ok"})
    assert path == ws.run_dir(run) / "opt1" / "opt_l1_results.json"
    assert ws.read_json_artifact(run, 1, "opt_l1_results.json") == {"proposals": [1, 2], "status": "ok"}
    before = path.read_bytes()

    def failing_replace(src: str | os.PathLike[str], dst: str | os.PathLike[str]) -> None:
        raise OSError(28, "No space left on device")

    with monkeypatch.context() as m:
        m.setattr(ws_mod.os, "replace", failing_replace)
        with pytest.raises(OSError):
            ws.write_json_artifact(run, 1, "opt_l1_results.json", {"proposals": "new"})
    assert path.read_bytes() == before  # the old version is intact
    assert sorted(p.name for p in path.parent.iterdir() if p.is_file()) == ["opt_l1_results.json"]

    # an unserializable value fails before anything is written
    with pytest.raises(TypeError):
        ws.write_json_artifact(run, 1, "opt_l1_results.json", {"x": object()})
    assert path.read_bytes() == before


def test_json_artifact_readers_never_see_partial(ws: Workspace, run: str) -> None:
    ws.new_iteration(run)
    name = "optimization_papers.json"
    ws.write_json_artifact(run, 1, name, {"v": 0, "pad": "x" * 100_000})
    path = ws.artifact_path(run, 1, name)
    stop = threading.Event()
    bad: list[str] = []

    def reader() -> None:
        while not stop.is_set():
            try:
                json.loads(path.read_bytes())
            except json.JSONDecodeError as exc:
                bad.append(str(exc))

    t = threading.Thread(target=reader)
    t.start()
    for v in range(1, 60):
        ws.write_json_artifact(run, 1, name, {"v": v, "pad": "y" * (100_000 + v)})
    stop.set()
    t.join()
    assert not bad
    assert ws.read_json_artifact(run, 1, name)["v"] == 59


def test_text_artifact_and_models(ws: Workspace, run: str) -> None:
    ws.new_iteration(run)
    meta = ws.read_meta(run)
    ws.write_json_artifact(run, 1, "optimization_context.json", meta)  # pydantic models serialize
    assert ws.read_json_artifact(run, 1, "optimization_context.json")["id"] == run


@pytest.mark.parametrize(
    "name", ["foo.json", "../opt_l1_results.json", "opt1/opt_l1_results.json", "", "run.json"]
)
def test_unknown_artifact_rejected(ws: Workspace, run: str, name: str) -> None:
    ws.new_iteration(run)
    with pytest.raises(UnknownArtifact):
        ws.artifact_path(run, 1, name)
    with pytest.raises(UnknownArtifact):
        ws.write_json_artifact(run, 1, name, {})


def test_artifact_call_checks(ws: Workspace, run: str) -> None:
    with pytest.raises(UnknownArtifact):  # not JSON
        ws.write_json_artifact(run, 1, "opt_l2_env.sh", {})
    with pytest.raises(IterationNotFound):  # artifacts only go into existing iterations
        ws.write_json_artifact(run, 1, "opt_l1_results.json", {})
    for n in (0, -1, True, "1"):
        with pytest.raises(ValueError):
            ws.artifact_path(run, n, "opt_l1_results.json")


def test_list_runs_and_status(ws: Workspace) -> None:
    ws.create_run("a-run", "w1")
    ws.create_run("b-run", "w2")
    ws.new_iteration("b-run")
    ws.set_status("b-run", "done")
    (ws.root / "c-broken").mkdir()  # no run.json
    runs = {r.id: r for r in ws.list_runs()}
    assert list(runs) == ["a-run", "b-run", "c-broken"]
    assert runs["a-run"].status == "created" and runs["a-run"].workload == "w1"
    assert runs["b-run"].status == "done" and runs["b-run"].iterations == [1]
    assert runs["c-broken"].status == "invalid" and runs["c-broken"].workload is None
    assert ws.read_meta("b-run").updated is not None


# --------------------------------------------------------------------------- validate / reorganize


def _messy_run(ws: Workspace, run: str) -> Path:
    """A run with a hand-built ws/opt_results/, stray traces and a missing folder."""
    ws.new_iteration(run)
    ws.new_iteration(run)
    rd = ws.run_dir(run)
    (rd / "ws" / "opt_results").mkdir(parents=True)
    (rd / "ws" / "opt_results" / "opt_l1_results.json").write_text('{"from": "ws"}')
    (rd / "ws" / "opt_results" / "opt_l2_env.sh").write_text("export A=1\n")
    (rd / "opt1_results").mkdir()
    (rd / "opt1_results" / "optimization_context.json").write_text('{"from": "hint"}')
    (rd / "stray-123-preload.pfw.gz").write_bytes(gzip.compress(b'{"ph":"X"}\n'))
    (rd / "opt1" / "traces" / "loose.pfw").write_text("{}\n")
    (rd / "opt2" / "scripts" / "opt_l3_results.json").write_text("[]")
    (rd / "baseline" / "base-trace.pfw.gz").write_bytes(b"")
    (rd / "old_traces" / "baseline").mkdir(parents=True)
    (rd / "old_traces" / "baseline" / "b2.pfw.gz").write_bytes(b"x")
    (rd / "opt2" / "patches").rmdir()
    return rd


def test_validate_finds_misplaced_artifact_and_stray_trace(ws: Workspace, run: str) -> None:
    rd = _messy_run(ws, run)
    before = _tree(rd)
    report = ws.validate_structure(run)
    assert _tree(rd) == before  # validation changes nothing
    assert not report.clean
    by_path = {p.path: p for p in report.problems}
    art = by_path["ws/opt_results/opt_l1_results.json"]
    assert art.kind == "misplaced_artifact" and art.fixable and "opt2/opt_l1_results.json" in art.fix
    assert (
        by_path["opt1_results/optimization_context.json"].fix == "move it to opt1/optimization_context.json"
    )
    assert by_path["opt2/scripts/opt_l3_results.json"].fix == "move it to opt2/opt_l3_results.json"
    stray = by_path["stray-123-preload.pfw.gz"]
    assert stray.kind == "stray_trace" and "opt2/traces/raw/stray-123-preload.pfw.gz" in stray.fix
    assert "opt1/traces/raw/loose.pfw" in by_path["opt1/traces/loose.pfw"].fix
    assert "baseline/traces/raw/base-trace.pfw.gz" in by_path["baseline/base-trace.pfw.gz"].fix
    assert "baseline/traces/raw/b2.pfw.gz" in by_path["old_traces/baseline/b2.pfw.gz"].fix
    assert by_path["opt2/patches"].kind == "missing_subdir"
    assert by_path["ws/"].kind == "unknown_entry" and by_path["ws/"].fixable
    # the module-level function (the dftracer-io-optimization skill's session_validate_structure) agrees
    assert validate_structure(run) == report
    # pydantic, extra="forbid"
    with pytest.raises(ValueError):
        type(report).model_validate({**report.model_dump(), "surprise": 1})


def test_reorganize_dry_run_changes_nothing(ws: Workspace, run: str) -> None:
    rd = _messy_run(ws, run)
    before = _tree(rd)
    moves = ws.reorganize_structure(run, dry_run=True)
    assert _tree(rd) == before
    assert moves and all(m.status == "planned" for m in moves)
    assert moves == reorganize_structure(run)  # dry_run is the default
    actions = {(m.action, m.src, m.dst) for m in moves}
    assert ("move", "ws/opt_results/opt_l1_results.json", "opt2/opt_l1_results.json") in actions
    assert ("mkdir", None, "opt2/patches") in actions
    assert ("rmdir", "ws/opt_results", None) in actions and ("rmdir", "ws", None) in actions
    order = [m.action for m in moves]
    assert order == sorted(order, key=["write_run_json", "mkdir", "move", "rmdir"].index)


def test_reorganize_fixes_and_validate_becomes_clean(ws: Workspace, run: str) -> None:
    rd = _messy_run(ws, run)
    content = {
        "ws/opt_results/opt_l1_results.json": "opt2/opt_l1_results.json",
        "ws/opt_results/opt_l2_env.sh": "opt2/opt_l2_env.sh",
        "opt1_results/optimization_context.json": "opt1/optimization_context.json",
        "stray-123-preload.pfw.gz": "opt2/traces/raw/stray-123-preload.pfw.gz",
        "opt1/traces/loose.pfw": "opt1/traces/raw/loose.pfw",
        "opt2/scripts/opt_l3_results.json": "opt2/opt_l3_results.json",
        "baseline/base-trace.pfw.gz": "baseline/traces/raw/base-trace.pfw.gz",
        "old_traces/baseline/b2.pfw.gz": "baseline/traces/raw/b2.pfw.gz",
    }
    hashes = {src: hashlib.sha256((rd / src).read_bytes()).hexdigest() for src in content}
    moves = ws.reorganize_structure(run, dry_run=False)
    assert all(m.status == "done" for m in moves), [m for m in moves if m.status != "done"]
    for src, dst in content.items():
        assert not (rd / src).exists()
        assert hashlib.sha256((rd / dst).read_bytes()).hexdigest() == hashes[src]
    assert (
        not (rd / "ws").exists() and not (rd / "opt1_results").exists() and not (rd / "old_traces").exists()
    )
    assert (rd / "opt2" / "patches").is_dir()
    report = ws.validate_structure(run)
    assert report.clean, report.problems
    assert ws.reorganize_structure(run, dry_run=False) == []  # idempotent


def test_reorganize_without_iterations_and_missing_meta(ws: Workspace) -> None:
    rd = ws.root / "bare"
    (rd / "results").mkdir(parents=True)
    (rd / "results" / "opt_l2_results.json").write_text("{}")
    (rd / "trace-1.pfw.gz").write_bytes(b"\x1f\x8b")
    report = ws.validate_structure("bare")
    kinds = {p.kind for p in report.problems}
    assert {"missing_run_json", "missing_subdir", "misplaced_artifact", "stray_trace"} <= kinds
    assert all(p.fixable for p in report.problems)
    moves = ws.reorganize_structure("bare", dry_run=False)
    assert all(m.status == "done" for m in moves)
    assert (rd / "opt1" / "opt_l2_results.json").is_file()  # a new opt1 receives the artifact
    assert (rd / "baseline" / "traces" / "raw" / "trace-1.pfw.gz").is_file()  # traces: the baseline
    meta = ws.read_meta("bare")
    assert meta.id == "bare" and meta.status == "unknown"
    assert ws.validate_structure("bare").clean


def test_conflict_not_clobbered(ws: Workspace, run: str) -> None:
    ws.new_iteration(run)
    rd = ws.run_dir(run)
    ws.write_json_artifact(run, 1, "opt_l1_results.json", {"keep": "me"})
    (rd / "ws").mkdir()
    (rd / "ws" / "opt_l1_results.json").write_text('{"other": 1}')
    (rd / "opt1" / "traces" / "raw" / "t.pfw").write_text("raw\n")
    (rd / "opt1" / "scripts" / "t.pfw").write_text("different\n")
    kept = (rd / "opt1" / "opt_l1_results.json").read_bytes()

    report = ws.validate_structure(run)
    by_path = {p.path: p for p in report.problems}
    assert not by_path["ws/opt_l1_results.json"].fixable
    assert not by_path["opt1/scripts/t.pfw"].fixable
    assert not by_path["ws/"].fixable  # it still holds the conflicting file

    moves = ws.reorganize_structure(run, dry_run=False)
    conflicts = {m.src for m in moves if m.status == "conflict"}
    assert conflicts == {"ws/opt_l1_results.json", "opt1/scripts/t.pfw"}
    assert (rd / "opt1" / "opt_l1_results.json").read_bytes() == kept
    assert (rd / "ws" / "opt_l1_results.json").read_text() == '{"other": 1}'
    assert (rd / "opt1" / "traces" / "raw" / "t.pfw").read_text() == "raw\n"
    assert (rd / "opt1" / "scripts" / "t.pfw").read_text() == "different\n"
    after = ws.validate_structure(run)
    assert not after.clean and all(not p.fixable for p in after.problems)


def test_conflict_between_two_misplaced_files(ws: Workspace, run: str) -> None:
    ws.new_iteration(run)
    rd = ws.run_dir(run)
    for d in ("a", "b"):
        (rd / d).mkdir()
        (rd / d / "opt_l3_results.json").write_text(d)
    moves = ws.reorganize_structure(run, dry_run=False)
    statuses = {m.src: m.status for m in moves if m.action == "move"}
    assert statuses == {"a/opt_l3_results.json": "done", "b/opt_l3_results.json": "conflict"}
    assert (rd / "opt1" / "opt_l3_results.json").read_text() == "a"
    assert (rd / "b" / "opt_l3_results.json").read_text() == "b"


def test_unfixable_and_notes(ws: Workspace, run: str) -> None:
    ws.new_iteration(run)
    ws.new_iteration(run)
    ws.new_iteration(run)
    rd = ws.run_dir(run)
    (rd / "opt2").rename(rd / "opt2-removed")
    (rd / "opt2-removed" / "scripts" / "run.sh").write_text("echo\n")
    (rd / "notes.txt").write_text("by hand")
    (rd / "workload.toml").write_text("name = 'x'")  # allowed at the root
    (rd / "opt1" / "romio_hints.txt").write_text("cb_buffer_size 1")
    (rd / "opt1" / "source" / "opt_l1_results.json").write_text("user code, not ours")
    (rd / "opt1" / "source" / "data.pfw").write_text("{}")
    report = ws.validate_structure(run)
    by_path = {p.path: p for p in report.problems}
    assert set(by_path) == {"notes.txt", "opt2-removed/"}
    assert not by_path["notes.txt"].fixable and by_path["notes.txt"].kind == "unknown_entry"
    assert any("gaps" in n and "opt2" in n for n in report.notes)
    assert any("romio_hints.txt" in n for n in report.notes)
    before = _tree(rd)
    ws.reorganize_structure(run, dry_run=False)
    assert _tree(rd) == before  # nothing fixable, nothing touched (source/ included)


def test_not_a_directory_blocks(ws: Workspace, run: str) -> None:
    ws.new_iteration(run)
    rd = ws.run_dir(run)
    (rd / "opt1" / "traces" / "raw").rmdir()
    (rd / "opt1" / "traces" / "raw").write_text("oops")
    (rd / "x.pfw").write_text("{}")
    report = ws.validate_structure(run)
    by_path = {p.path: p for p in report.problems}
    assert by_path["opt1/traces/raw"].kind == "not_a_directory" and not by_path["opt1/traces/raw"].fixable
    assert not by_path["x.pfw"].fixable
    moves = ws.reorganize_structure(run, dry_run=False)
    assert [m.status for m in moves if m.action == "move"] == ["conflict"]
    assert (rd / "x.pfw").is_file() and (rd / "opt1" / "traces" / "raw").read_text() == "oops"


def test_validate_unknown_run(ws: Workspace) -> None:
    with pytest.raises(RunNotFound):
        ws.validate_structure("missing")
    with pytest.raises(RunNotFound):
        ws.reorganize_structure("missing", dry_run=False)


# --------------------------------------------------------------------------- compaction


def test_compaction_pfw_and_gz(tmp_path: Path) -> None:
    raw, out = tmp_path / "raw", tmp_path / "compact"
    raw.mkdir()
    (raw / "a-1-preload.pfw").write_text(_legacy_text(10))
    # multi-member gzip (dftracer 2.x writes one member per flush) with a bad line
    part1 = "[\n" + "\n".join(json.dumps(_event(i, 8)) for i in range(5)) + "\n"
    part2 = (
        "not json\n" + '{"no_ph": 1}\n' + "\n".join(json.dumps(_event(i, 8)) for i in range(5, 12)) + "\n]\n"
    )
    (raw / "b-2-preload.pfw.gz").write_bytes(gzip.compress(part1.encode()) + gzip.compress(part2.encode()))
    (raw / "empty-3-preload.pfw.gz").write_bytes(b"")
    (raw / "sub").mkdir()
    (raw / "sub" / "c.pfw.gz").write_bytes(
        gzip.compress(b"".join(json.dumps(_event(i)).encode() + b"\n" for i in range(3)))
    )
    (raw / "readme.txt").write_text("not a trace")
    raw_before = _tree(raw)

    report = compact_traces(raw, out)
    assert _tree(raw) == raw_before  # raw/ is never modified
    files = {f.source: f for f in report.files}
    assert set(files) == {"a-1-preload.pfw", "b-2-preload.pfw.gz", "sub/c.pfw.gz"}
    assert report.skipped_empty == ["empty-3-preload.pfw.gz"] and report.errors == []

    a = files["a-1-preload.pfw"]
    assert a.output == "a-1-preload.pfw.gz"
    assert (a.events, a.complete_events, a.dropped_structural, a.dropped_bad) == (11, 10, 2, 0)
    b = files["b-2-preload.pfw.gz"]
    assert (b.events, b.complete_events, b.dropped_structural, b.dropped_bad) == (12, 12, 2, 2)
    assert files["sub/c.pfw.gz"].events == 3
    for f in report.files:
        src, dst = raw / f.source, out / f.output
        assert f.bytes_before == src.stat().st_size and f.bytes_after == dst.stat().st_size
        assert _gzip_members(dst) == 1
        lines = _gz_lines(dst)
        assert len(lines) == f.events == scan(src).good_lines  # event count preserved exactly
        assert all(line.startswith(b"{") and line.endswith(b"}") for line in lines)
        assert scan(dst).good_lines == f.events and scan(dst).bad_count == 0
    assert report.events == 26
    assert report.bytes_before == sum(f.bytes_before for f in report.files)
    # records are kept byte for byte (only whitespace and a trailing comma are trimmed)
    assert _gz_lines(out / "a-1-preload.pfw.gz")[1] == json.dumps(_event(0)).encode()
    assert not (out / "empty-3-preload.pfw.gz").exists()
    assert not list(out.rglob("*.tmp"))

    again = compact_traces(raw, out)  # re-running replaces the derived files
    assert [f.events for f in again.files] == [f.events for f in report.files]


def test_compaction_truncated_and_name_clash(tmp_path: Path) -> None:
    raw, out = tmp_path / "raw", tmp_path / "compact"
    raw.mkdir()
    body = "".join(json.dumps(_event(i)) + "\n" for i in range(2000)).encode()
    (raw / "t.pfw.gz").write_bytes(gzip.compress(body)[:-200])
    (raw / "x.pfw").write_text(json.dumps(_event(1)) + "\n")
    (raw / "x.pfw.gz").write_bytes(gzip.compress(json.dumps(_event(2)).encode() + b"\n"))
    report = compact_traces(raw, out)
    t = next(f for f in report.files if f.source == "t.pfw.gz")
    assert t.truncated and 0 < t.events < 2000
    assert len(_gz_lines(out / "t.pfw.gz")) == t.events
    assert len(report.errors) == 1 and "x.pfw.gz" in report.errors[0]


def test_compaction_refuses_overlapping_dirs(tmp_path: Path) -> None:
    raw = tmp_path / "raw"
    raw.mkdir()
    with pytest.raises(ValueError):
        compact_traces(raw, raw)
    with pytest.raises(ValueError):
        compact_traces(raw, raw / "compact")
    with pytest.raises(FileNotFoundError):
        compact_traces(tmp_path / "missing", tmp_path / "c")


def test_workspace_compact_iteration(ws: Workspace, run: str) -> None:
    ws.new_iteration(run)
    raw = ws.traces_dir(run, 1, "raw")
    (raw / "p-1-preload.pfw.gz").write_bytes(gzip.compress(_legacy_text(5).encode()))
    report = ws.compact(run, 1)
    assert report.events == 6
    assert (ws.traces_dir(run, 1, "compact") / "p-1-preload.pfw.gz").is_file()
    assert ws.validate_structure(run).clean


def test_compaction_shared_legacy_trace(shared_traces: Path, tmp_path: Path) -> None:
    src = sorted((shared_traces / "cm1-48ranks-legacy").glob("*.pfw.gz"))[0]
    raw = tmp_path / "raw"
    raw.mkdir()
    (raw / src.name).symlink_to(src)  # links are not followed: nothing to compact
    assert compact_traces(raw, tmp_path / "c0").files == []
    (raw / src.name).unlink()
    (raw / src.name).write_bytes(src.read_bytes())
    report = compact_traces(raw, tmp_path / "c")
    (f,) = report.files
    expected = scan(src)
    assert f.events == expected.good_lines and f.dropped_structural == expected.structural_lines
    assert len(_gz_lines(tmp_path / "c" / src.name)) == f.events


def test_emptied_folders_inside_iteration_removed(ws: Workspace, run: str) -> None:
    ws.new_iteration(run)
    rd = ws.run_dir(run)
    (rd / "opt1" / "ws" / "opt_results").mkdir(parents=True)
    (rd / "opt1" / "ws" / "empty").mkdir()
    (rd / "opt1" / "ws" / "opt_results" / "context_opportunities.json").write_text("{}")
    (rd / "junk" / "deeper").mkdir(parents=True)  # an empty unknown root folder
    moves = ws.reorganize_structure(run, dry_run=False)
    assert all(m.status == "done" for m in moves), moves
    assert (rd / "opt1" / "context_opportunities.json").is_file()
    assert not (rd / "opt1" / "ws").exists() and not (rd / "junk").exists()
    assert (rd / "opt1" / "traces" / "raw").is_dir()  # layout folders stay, even when empty
    assert ws.validate_structure(run).clean
