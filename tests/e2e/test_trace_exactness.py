"""The trace engine's counts, bytes and shares agree exactly with an independent oracle.

Every trace set (the recorded legacy traces in ../shared/traces and real dftracer 2.x
traces generated in this session) is analysed twice: by ``dftune.tools.trace.analyze`` and
by ``tests/reference.py``, a plain per-line implementation of the I/O semantics of docs/analyze.md. On top
of that, the generated programs do known I/O, so the engine's per-file numbers are checked
against ground truth (bytes the program wrote and read).
"""

from __future__ import annotations

import functools
import gzip
import json
import math
import random
import shutil
from pathlib import Path
from typing import Any

import conftest as c  # tests/ is on sys.path: it holds the rootdir conftest (prepend import mode)
import pytest
from reference import HIST_LABELS, Reference, reference

from dftune.tools.trace import analyze

# one worker: each trace set is analysed once per reader and read once by the oracle (the caches
# below are per process; the 48-rank trace costs ~10 s through DuckDB and ~4 s through the oracle)
pytestmark = [
    pytest.mark.e2e,
    pytest.mark.usefixtures("read_path"),
    pytest.mark.xdist_group("trace_exactness"),
]

TRACE_SETS = [pytest.param(("shared", n), id=n) for n in c.SHARED_TRACE_SETS] + [
    pytest.param(("generated", n), id=f"gen-{n}") for n in c.GENERATED_SETS
]

_CACHE: dict[tuple[str, str, str], tuple[dict[str, Any], Reference]] = {}


@functools.cache
def _reference(path: Path) -> Reference:
    """The oracle's reading of one trace set: the same for both readers (cm1's takes seconds)."""
    return reference([path])


def _trace_dir(request: pytest.FixtureRequest, kind: str, name: str) -> Path:
    if kind == "shared":
        root: Path = request.getfixturevalue("shared_traces")
        path = root / name
        if not path.is_dir():
            pytest.skip(f"trace set {name} not found in {root}")
        return path
    gen: dict[str, c.GeneratedTrace] = request.getfixturevalue("generated_traces")
    return gen[name].trace_dir


@pytest.fixture
def pair(request: pytest.FixtureRequest, read_path: str) -> tuple[dict[str, Any], Reference]:
    """(engine JSON document, reference result) for one trace set and reader, computed once."""
    kind, name = request.param
    key = (kind, name, read_path)
    if key not in _CACHE:
        path = _trace_dir(request, kind, name)
        # one set, counted as a whole (dlio-legacy-strings holds two runs: merged on purpose here)
        _CACHE[key] = (analyze([path], merge_runs=True).to_json_dict(), _reference(path))
    return _CACHE[key]


def _file_row(rows: list[dict[str, Any]], suffix: str) -> dict[str, Any]:
    hits = [r for r in rows if str(r.get("path", "")).endswith(suffix)]
    assert len(hits) == 1, f"expected one file-view row ending in {suffix!r}, got {hits!r}"
    return hits[0]


def _file_view(path: Path) -> list[dict[str, Any]]:
    a = analyze([path], views=["file"])
    view = a.views["file"]
    rows: list[dict[str, Any]] = view["rows"]
    return rows


# --------------------------------------------------------------------------- engine == oracle


@pytest.mark.parametrize("pair", TRACE_SETS, indirect=True)
def test_line_and_process_counts(pair: tuple[dict[str, Any], Reference]) -> None:
    eng, ref = pair
    exp = ref.summary()
    for key in ("files", "events", "skipped_lines", "metadata_lines", "aggregated_events", "processes"):
        assert eng[key] == exp[key], key
    assert ref.events > 0


@pytest.mark.parametrize("pair", TRACE_SETS, indirect=True)
def test_family_counts(pair: tuple[dict[str, Any], Reference]) -> None:
    eng, ref = pair
    exp = ref.summary()
    got = {fam: eng[fam]["count"] for fam in ("read", "write", "metadata", "sync")}
    want = {fam: exp[fam]["count"] for fam in ("read", "write", "metadata", "sync")}
    assert got == want


@pytest.mark.parametrize("pair", TRACE_SETS, indirect=True)
def test_bytes(pair: tuple[dict[str, Any], Reference]) -> None:
    eng, ref = pair
    exp = ref.summary()
    for fam in ("read", "write"):
        assert eng[fam]["bytes"] == exp[fam]["bytes"], fam
        assert eng[fam]["sized"] == exp[fam]["sized"], fam
    # metadata and sync move no data: the engine reports null or 0
    for fam in ("metadata", "sync"):
        assert eng[fam].get("bytes") in (None, 0), fam


@pytest.mark.parametrize("pair", TRACE_SETS, indirect=True)
def test_times(pair: tuple[dict[str, Any], Reference]) -> None:
    eng, ref = pair
    exp = ref.summary()
    assert eng["job_time_s"] == pytest.approx(exp["job_time_s"], abs=1e-6)
    for fam in ("read", "write", "metadata", "sync"):
        assert eng[fam]["time_s"] == pytest.approx(exp[fam]["time_s"], abs=1e-6), fam
    for key in ("read_time_pct", "write_time_pct", "metadata_time_pct"):
        assert eng[key] == pytest.approx(exp[key], abs=1e-3), key


@pytest.mark.parametrize("pair", TRACE_SETS, indirect=True)
def test_small_io(pair: tuple[dict[str, Any], Reference]) -> None:
    eng, ref = pair
    exp = ref.summary()
    for key in ("small_io_pct", "small_read_pct", "small_write_pct"):
        assert eng[key] == pytest.approx(exp[key], abs=1e-3), key


@pytest.mark.parametrize("pair", TRACE_SETS, indirect=True)
def test_sequentiality(pair: tuple[dict[str, Any], Reference]) -> None:
    eng, ref = pair
    exp = ref.summary()
    assert eng["classified_accesses"] == exp["classified_accesses"]
    for key in ("seq_pct", "consecutive_pct", "rand_pct"):
        assert eng[key] == pytest.approx(exp[key], abs=1e-3), key


@pytest.mark.parametrize("pair", TRACE_SETS, indirect=True)
def test_xfer_size_histogram(pair: tuple[dict[str, Any], Reference]) -> None:
    eng, ref = pair
    exp = ref.summary()["xfer_size_hist"]
    hist = eng["xfer_size_hist"]
    assert set(hist) == {"read", "write"}
    for fam in ("read", "write"):
        assert list(hist[fam]) == list(HIST_LABELS), fam
        assert hist[fam] == exp[fam], fam
        assert sum(hist[fam].values()) == eng[fam]["sized"], fam


@pytest.mark.parametrize("pair", TRACE_SETS, indirect=True)
def test_process_accounting(pair: tuple[dict[str, Any], Reference]) -> None:
    """Helpers, application processes and the I/O fraction over their lifetimes, as the oracle has them."""
    eng, ref = pair
    exp = ref.process_accounting()
    assert eng["app_processes"] == exp["app_processes"]
    assert len(eng["helper_processes"]) == exp["helper_processes"]
    assert eng["io_fraction_of_job"] == pytest.approx(exp["io_fraction_of_job"], abs=2e-6)


@pytest.mark.parametrize("windows", [1, 7, 20])
@pytest.mark.parametrize("trace_set", TRACE_SETS)
def test_time_view_windows(
    request: pytest.FixtureRequest, read_path: str, trace_set: tuple[str, str], windows: int
) -> None:
    """The one-pass time view (fine per-file bins, coarsened at merge) equals the oracle's windows."""
    path = _trace_dir(request, *trace_set)
    ref = _reference(path).time_view(windows)
    view = analyze([path], views=["time"], time_windows=windows, merge_runs=True).views["time"]
    assert view["windows"] == ref["windows"] <= windows
    assert view["window_s"] == pytest.approx(ref["window_s"])
    assert [(r["start_s"], r["end_s"]) for r in view["rows"]] == [
        (pytest.approx(r["start_s"], abs=1e-6), pytest.approx(r["end_s"], abs=1e-6)) for r in ref["rows"]
    ]
    for got, want in zip(view["rows"], ref["rows"], strict=True):
        for fam in ("read", "write", "metadata"):
            assert (got[f"{fam}_count"] or 0) == want.get(f"{fam}_count", 0), fam
            assert got[f"{fam}_time_s"] == pytest.approx(want.get(f"{fam}_time_us", 0) / 1e6, abs=1e-6), fam
        for fam in ("read", "write"):
            assert (got[f"{fam}_bytes"] or 0) == want.get(f"{fam}_bytes", 0), fam


@pytest.mark.parametrize("pair", TRACE_SETS, indirect=True)
def test_formats(pair: tuple[dict[str, Any], Reference], request: pytest.FixtureRequest) -> None:
    eng, ref = pair
    kind, _ = request.node.callspec.params["pair"]
    want = "dftracer-2.x" if kind == "generated" else "dftracer-1.x"
    assert set(eng["formats"]) == {want}
    # every parsed line is attributed to a format
    assert sum(eng["formats"].values()) == ref.lines - ref.skipped_lines


# --------------------------------------------------------------------------- ground truth


def _seq_expectation(accesses: list[tuple[int | None, int]]) -> tuple[int, int]:
    """(sequential, random) for a list of (start, nbytes) with None = unknown start."""
    prev: int | None = None
    seq = rnd = 0
    for start, nbytes in accesses:
        assert start is not None
        if prev is not None:
            if start >= prev:
                seq += 1
            else:
                rnd += 1
        prev = start + nbytes
    return seq, rnd


def test_preload_known_io(generated_traces: dict[str, c.GeneratedTrace]) -> None:
    gen = generated_traces["preload"]
    rows = _file_view(gen.trace_dir)
    data = _file_row(rows, "/data/data.bin")
    full_reads = c.DATA_SIZE // c.SEQ_CHUNK
    tail = c.DATA_SIZE - full_reads * c.SEQ_CHUNK
    seq_reads = full_reads + (1 if tail else 0) + 1  # + the read that returns 0 at EOF
    assert data["write_count"] == len(c.DATA_CHUNKS)
    assert data["write_bytes"] == c.DATA_SIZE
    assert data["read_count"] == seq_reads + 1 + c.PREADS
    assert data["read_bytes"] == c.DATA_SIZE + c.SEEK_READ + c.PREADS * c.PREAD_SIZE
    assert data["sync_count"] == 1
    assert data["processes"] == 1

    # Sequentiality of data.bin from the program's own access list (DESIGN: position per
    # (process, file); open puts it at 0; random = starts before the previous access end).
    acc: list[tuple[int | None, int]] = []
    off = 0
    for n in c.DATA_CHUNKS:
        acc.append((off, n))
        off += n
    for i in range(seq_reads):
        n = min(c.SEQ_CHUNK, max(0, c.DATA_SIZE - i * c.SEQ_CHUNK))
        acc.append((i * c.SEQ_CHUNK, n))
    acc.append((c.SEEK_TO, c.SEEK_READ))
    rng = random.Random(7)
    for _ in range(c.PREADS):
        acc.append((rng.randrange(0, c.DATA_SIZE - c.PREAD_SIZE), c.PREAD_SIZE))
    seq, rnd = _seq_expectation(acc)
    assert data["seq_pct"] == pytest.approx(100.0 * seq / (seq + rnd), abs=0.01)
    assert data["rand_pct"] == pytest.approx(100.0 * rnd / (seq + rnd), abs=0.01)

    stdio = _file_row(rows, "/data/stdio.bin")
    assert stdio["write_count"] == 1
    assert stdio["write_bytes"] == c.FWRITE_SIZE * c.FWRITE_ITEMS
    assert stdio["read_count"] == 1
    assert stdio["read_bytes"] == c.FREAD_SIZE * c.FREAD_ITEMS


def test_multiproc_known_io(generated_traces: dict[str, c.GeneratedTrace]) -> None:
    gen = generated_traces["multiproc"]
    a = analyze([gen.trace_dir], views=["file"])
    doc = a.to_json_dict()
    assert doc["processes"] == c.CHILDREN + 1
    rows = a.views["file"]["rows"]
    for i, n in enumerate(c.CHILD_BYTES):
        row = _file_row(rows, f"/data/part-{i}.bin")
        assert (row["write_count"], row["write_bytes"]) == (1, n)
        assert (row["read_count"], row["read_bytes"]) == (1, n)
        assert row["processes"] == 1


def test_function_mode_known_io(generated_traces: dict[str, c.GeneratedTrace]) -> None:
    gen = generated_traces["function"]
    assert any(p.name.endswith("-app.pfw.gz") for p in gen.trace_dir.iterdir())
    row = _file_row(_file_view(gen.trace_dir), "/data/func.bin")
    assert (row["write_count"], row["write_bytes"]) == (len(c.FUNC_WRITES), sum(c.FUNC_WRITES))
    assert (row["read_count"], row["read_bytes"]) == (
        len(c.FUNC_PREADS),
        sum(size for size, _ in c.FUNC_PREADS),
    )
    # the dft_fn regions are complete events of their own category
    names = set()
    for f in gen.trace_dir.glob("*.pfw.gz"):
        with gzip.open(f, "rt") as fh:
            for line in fh:
                line = line.strip()
                if line.startswith("{") and '"cat":"app"' in line:
                    names.add(json.loads(line)["name"])
    assert {"produce", "consume", "region"} <= names


def test_aggregated_known_io(generated_traces: dict[str, c.GeneratedTrace]) -> None:
    gen = generated_traces["aggregated"]
    n = int(gen.stdout.split()[-1])
    assert n > 0
    ref = reference([gen.trace_dir])
    # the oracle itself sees every pread the program made, with its bytes
    assert ref.by_name["pread64"].count == n
    assert ref.by_name["pread64"].bytes == n * c.AGG_PREAD
    doc = analyze([gen.trace_dir]).to_json_dict()
    assert doc["aggregated_events"] > 0
    assert doc["read"]["aggregated_ops"] >= n
    assert doc["read"]["bytes"] >= n * c.AGG_PREAD
    # the 1 MiB os.write of agg.bin is alone in its interval: dftracer writes that record
    # with dft_cnt 1 and plain `dur`/`ret` fields instead of `dur_sum`/`ret_sum`
    assert doc["write"]["bytes"] >= 1 << 20
    assert doc["write"]["time_s"] > 0


def test_aggregated_single_op_record() -> None:
    """Minimal synthetic repro of dftracer 2.2's dft_cnt == 1 aggregated record."""
    import tempfile

    lines = [
        {
            "id": 1,
            "name": "start",
            "cat": "dftracer",
            "type": 1,
            "pid": 1,
            "tid": 1,
            "ts": 1_000_000,
            "dur": 0,
            "ph": 1,
            "args": {"hhash": "aa"},
        },
        {
            "name": "write",
            "cat": "POSIX",
            "type": 3,
            "ts": 1_000_000,
            "ph": 3,
            "pid": 1,
            "tid": 1,
            "args": {"hhash": "aa", "dur": 795, "ret": 1048576, "count": 1048576, "dft_cnt": 1},
        },
        {
            "name": "write",
            "cat": "POSIX",
            "type": 3,
            "ts": 2_000_000,
            "ph": 3,
            "pid": 1,
            "tid": 1,
            "args": {
                "hhash": "aa",
                "dur_sum": 30,
                "ret_sum": 8192,
                "ret_min": 4096,
                "ret_max": 4096,
                "dur_min": 10,
                "dur_max": 20,
                "dft_cnt": 2,
            },
        },
        {
            "name": "close",
            "cat": "POSIX",
            "type": 3,
            "ts": 2_000_000,
            "ph": 3,
            "pid": 1,
            "tid": 1,
            "args": {"hhash": "aa", "dur": 10, "ret": 0, "dft_cnt": 1},
        },
    ]
    with tempfile.TemporaryDirectory() as tmp:
        p = Path(tmp) / "t-1-preload.pfw.gz"
        with gzip.open(p, "wt") as fh:
            fh.write("".join(json.dumps(x, separators=(",", ":")) + "\n" for x in lines))
        ref = reference([p]).summary()
        doc = analyze([p]).to_json_dict()
    assert ref["write"]["count"] == 3 and ref["write"]["bytes"] == 1048576 + 8192
    assert ref["write"]["time_s"] == pytest.approx(825e-6)
    assert ref["metadata"]["time_s"] == pytest.approx(10e-6)
    assert doc["write"]["count"] == 3
    assert doc["write"]["bytes"] == 1048576 + 8192
    assert doc["write"]["time_s"] == pytest.approx(825e-6, abs=1e-9)
    assert doc["metadata"]["time_s"] == pytest.approx(10e-6, abs=1e-9)


# --------------------------------------------------------------------------- gzip members


def _any_traces(request: pytest.FixtureRequest) -> list[Path]:
    gen: dict[str, c.GeneratedTrace] = request.getfixturevalue("generated_traces")
    files = sorted(
        p
        for name in ("preload", "function")
        for p in gen[name].trace_dir.glob("*.pfw.gz")
        if p.stat().st_size > 0
    )
    assert len(files) >= 2
    return files


def test_multi_member_gzip_concatenated_files(request: pytest.FixtureRequest, tmp_path: Path) -> None:
    a, b = _any_traces(request)[:2]
    single_a = analyze([a]).to_json_dict()
    single_b = analyze([b]).to_json_dict()
    combined = tmp_path / "combined.pfw.gz"
    combined.write_bytes(a.read_bytes() + b.read_bytes())
    doc = analyze([combined]).to_json_dict()
    ref = reference([combined])
    assert doc["files"] == 1
    assert doc["events"] == single_a["events"] + single_b["events"] == ref.events
    assert doc["metadata_lines"] == single_a["metadata_lines"] + single_b["metadata_lines"]
    for fam in ("read", "write"):
        assert doc[fam]["count"] == single_a[fam]["count"] + single_b[fam]["count"] == ref.fam[fam].count
        assert doc[fam]["bytes"] == single_a[fam]["bytes"] + single_b[fam]["bytes"] == ref.fam[fam].bytes


def test_multi_member_gzip_split_mid_file(request: pytest.FixtureRequest, tmp_path: Path) -> None:
    src = _any_traces(request)[0]
    with gzip.open(src, "rb") as fh:
        text = fh.read()
    lines = text.splitlines(keepends=True)
    assert len(lines) > 10
    cut = len(lines) // 2
    parts = [b"".join(lines[:cut]), b"".join(lines[cut:])]
    split = tmp_path / "split.pfw.gz"
    split.write_bytes(b"".join(gzip.compress(p) for p in parts))
    plain = tmp_path / "plain.pfw"
    plain.write_bytes(text)
    want = analyze([src]).to_json_dict()
    for path in (split, plain):
        got = analyze([path]).to_json_dict()
        for key in ("events", "metadata_lines", "processes", "job_time_s"):
            assert got[key] == want[key], (path.name, key)
        for fam in ("read", "write", "metadata", "sync"):
            assert got[fam]["count"] == want[fam]["count"], (path.name, fam)
            assert got[fam]["bytes"] == want[fam]["bytes"], (path.name, fam)
    assert reference([split]).events == want["events"]


def test_empty_fork_files_are_harmless(request: pytest.FixtureRequest, tmp_path: Path) -> None:
    """dftracer sometimes leaves 0-byte *-fork.pfw.gz files; they add nothing."""
    src = _any_traces(request)[0]
    d = tmp_path / "with_fork"
    d.mkdir()
    shutil.copy(src, d / src.name)
    (d / "trace-0000000000000000-fork.pfw.gz").write_bytes(b"")
    want = analyze([src]).to_json_dict()
    got = analyze([d]).to_json_dict()
    for key in ("events", "processes", "job_time_s", "skipped_lines"):
        assert got[key] == want[key], key
    for fam in ("read", "write"):
        assert got[fam]["bytes"] == want[fam]["bytes"]
    assert not math.isnan(got["job_time_s"])


# --------------------------------------------------------------------------- hand-made trace


def _legacy_event(name: str, pid: int, ts: int, dur: int, cat: str = "POSIX", **args: Any) -> dict[str, Any]:
    # legacy 1.x style: ph "X", numbers sometimes written as strings
    return {
        "id": str(ts),
        "name": name,
        "cat": cat,
        "pid": str(pid),
        "tid": pid,
        "ts": str(ts),
        "dur": dur,
        "ph": "X",
        "args": {"hostname": "h1", **args},
    }


HAND_EVENTS = [
    # stream A: pid 10, /a
    _legacy_event("open", 10, 100, 5, fname="/a", ret=3),
    _legacy_event("read", 10, 110, 5, fname="/a", ret=100, count=100),  # first access: unclassified
    _legacy_event("read", 10, 120, 5, fname="/a", ret="50", count=100),  # 100 -> consecutive
    _legacy_event("lseek", 10, 130, 1, fname="/a", ret="500", offset=500, whence=0),
    _legacy_event("read", 10, 140, 5, fname="/a", ret=100, count=100),  # 500 > 150: sequential
    _legacy_event("pread", 10, 150, 5, fname="/a", ret=10, offset="0", count=10),  # 0 < 600: random
    _legacy_event("read", 10, 160, 5, fname="/a", ret=100, count=100),  # 600 > 10: sequential
    _legacy_event("fsync", 10, 170, 50, fname="/a", ret=0),
    _legacy_event("__xstat", 10, 180, 2, fname="/a"),
    # stream B: pid 11, /a (another process: its own position)
    _legacy_event("fopen", 11, 105, 3, cat="STDIO", fname="/a", mode="r"),
    _legacy_event("fread", 11, 115, 4, cat="STDIO", fname="/a", ret="3", size="1000", count=3),
    _legacy_event("fread", 11, 125, 4, cat="STDIO", fname="/a", ret=2, size=1000, count=5),  # consecutive
    _legacy_event(
        "fwrite", 11, 135, 900, cat="STDIO", fname="/a", ret=1, size=2097152, count=1
    ),  # consecutive
    # stream C: pid 10, a file known only by its hash
    _legacy_event("pread64", 10, 200, 7, fhash=42, ret="4096", offset="4096", count=4096),
    _legacy_event("pwrite64", 10, 210, 7, fhash=42, ret=4096, offset=0, count=4096),  # random
    # not I/O
    _legacy_event("TorchFramework.__init__", 10, 90, 1000, cat="ai_framework"),
]


def _write_hand_trace(path: Path, order: list[int]) -> None:
    meta = {
        "id": 1,
        "name": "HH",
        "cat": "dftracer",
        "pid": 10,
        "tid": 10,
        "ph": "M",
        "args": {"name": "h1", "value": 5692},
    }
    body = [json.dumps(HAND_EVENTS[i], separators=(",", ":")) for i in order]
    text = "[\n" + json.dumps(meta) + "\n\n" + "\n".join(body) + "\n]\n"
    with gzip.open(path, "wt") as fh:
        fh.write(text)


@pytest.mark.parametrize("shuffled", [False, True], ids=["ts-order", "shuffled-lines"])
def test_hand_made_legacy_trace(tmp_path: Path, shuffled: bool) -> None:
    order = list(range(len(HAND_EVENTS)))
    if shuffled:  # lines are written at event end, so file order need not be ts order
        random.Random(5).shuffle(order)
    p = tmp_path / "hand.pfw.gz"
    _write_hand_trace(p, order)
    ref = reference([p]).summary()
    doc = analyze([p]).to_json_dict()
    want: dict[str, Any] = {
        "events": 16,
        "metadata_lines": 1,
        "processes": 2,
        "job_time_s": (1090 - 90) / 1e6,  # the ai_framework event spans 90..1090
        "read": {"count": 8, "bytes": 100 + 50 + 100 + 10 + 100 + 3000 + 2000 + 4096},
        "write": {"count": 2, "bytes": 2097152 + 4096},
        "sync": {"count": 1},
        "metadata": {"count": 4},
        "small_io_pct": 90.0,
        "classified_accesses": 7,
        "seq_pct": 100 * 5 / 7,
        "consecutive_pct": 100 * 3 / 7,
        "rand_pct": 100 * 2 / 7,
    }
    hist_read = dict.fromkeys(HIST_LABELS, 0) | {"<4K": 7, "4-16K": 1}
    hist_write = dict.fromkeys(HIST_LABELS, 0) | {"4-16K": 1, "1-4M": 1}
    for name, got in (("reference", ref), ("engine", doc)):
        for key, value in want.items():
            if isinstance(value, dict):
                for sub, v in value.items():
                    assert got[key][sub] == v, (name, key, sub)
            elif key == "job_time_s":
                assert got[key] == pytest.approx(value, abs=1e-9), (name, key)
            elif isinstance(value, float):
                assert got[key] == pytest.approx(value, abs=1e-3), (name, key)
            else:
                assert got[key] == value, (name, key)
        assert got["xfer_size_hist"] == {"read": hist_read, "write": hist_write}, name
