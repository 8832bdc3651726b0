"""The access profile: byte ranges merged across processes, re-read bytes, sizes, app events."""

from __future__ import annotations

from pathlib import Path

from dftune.tools.trace import analyze
from tests.tracegen import Proc, write_trace

KIB = 1024


def _profile(folder: Path) -> dict[str, object]:
    prof = analyze([folder], profile=True).profile
    assert prof is not None
    return {f.path: f for f in prof.files}


def test_ranges_merge_across_processes_and_rereads_are_counted(tmp_path: Path) -> None:
    a, b = Proc(pid=1), Proc(pid=2)
    for i in range(4):  # process 1 reads the first 16 KiB, twice over the first 4 KiB
        a.read("/d/x.bin", 4 * KIB, offset=4 * KIB * i)
    a.read("/d/x.bin", 4 * KIB, offset=0)
    for i in range(4, 8):  # process 2 reads the next 16 KiB
        b.read("/d/x.bin", 4 * KIB, offset=4 * KIB * i)
    f = _profile(write_trace(tmp_path / "t", [a, b]))["/d/x.bin"]
    assert f.read_calls == 9 and f.read_bytes == 36 * KIB
    assert f.read_unique_bytes == 32 * KIB and f.read_segments == 1 and f.reread_bytes == 4 * KIB
    assert f.processes == 2 and f.sizes == {"read": {"4-16K": 9}}


def test_coalesced_calls_cover_the_same_ranges_with_the_same_digest(tmp_path: Path) -> None:
    small, large = Proc(pid=1), Proc(pid=1)
    small.open("/d/out.bin")
    large.open("/d/out.bin")
    for _ in range(64):
        small.write("/d/out.bin", KIB)
    large.write("/d/out.bin", 64 * KIB)
    s = _profile(write_trace(tmp_path / "s", [small]))["/d/out.bin"]
    g = _profile(write_trace(tmp_path / "g", [large]))["/d/out.bin"]
    assert s.write_ranges == g.write_ranges and s.write_unique_bytes == g.write_unique_bytes == 64 * KIB
    assert s.write_calls == 64 and g.write_calls == 1
    assert s.sizes["write"] == {"<4K": 64} and g.sizes["write"] == {"64-256K": 1}


def test_different_ranges_give_a_different_digest_and_gaps_count_as_segments(tmp_path: Path) -> None:
    p, q = Proc(pid=1), Proc(pid=1)
    for off in (0, 8 * KIB, 16 * KIB):
        p.read("/d/y.bin", 4 * KIB, offset=off)
    for off in (0, 4 * KIB, 8 * KIB):
        q.read("/d/y.bin", 4 * KIB, offset=off)
    fp = _profile(write_trace(tmp_path / "p", [p]))["/d/y.bin"]
    fq = _profile(write_trace(tmp_path / "q", [q]))["/d/y.bin"]
    assert fp.read_segments == 3 and fq.read_segments == 1
    assert fp.read_unique_bytes == fq.read_unique_bytes == 12 * KIB and fp.read_ranges != fq.read_ranges


def test_application_events_and_their_logged_sizes(tmp_path: Path) -> None:
    p = Proc(pid=1)
    for _ in range(3):
        p.app("write_record", size=1024)
    p.app("epoch")
    prof = analyze([write_trace(tmp_path / "a", [p])], profile=True).profile
    assert prof is not None
    events = {(e.cat, e.name): e for e in prof.app_events}
    assert events[("APP", "write_record")].count == 3 and events[("APP", "write_record")].size_sum == 3072
    assert events[("APP", "epoch")].size_sum is None


def test_the_first_access_orders_the_files(tmp_path: Path) -> None:
    p = Proc(pid=1)
    for name in ("c", "a", "b"):
        p.read(f"/d/{name}.bin", KIB, offset=0)
    files = _profile(write_trace(tmp_path / "o", [p]))
    order = sorted(files, key=lambda k: files[k].first_ts)
    assert order == ["/d/c.bin", "/d/a.bin", "/d/b.bin"]
