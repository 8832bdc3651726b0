"""A bench's trace folder is replicates of one condition: analyze and diagnose read its fullest
replicate (and say so), never N replicates as one job or as separate runs."""

from __future__ import annotations

from pathlib import Path

from dftune.tools.trace.replicates import one_replicate, replicate_folders


def _bench(root: Path, sizes: dict[str, int]) -> Path:
    raw = root / "traces" / "raw"
    for name, size in sizes.items():
        (raw / name).mkdir(parents=True)
        (raw / name / "trace-1.pfw.gz").write_bytes(b"x" * size)
    return raw


def test_the_fullest_replicate_is_read_and_the_note_says_which(tmp_path: Path) -> None:
    raw = _bench(tmp_path, {"r0": 900, "r1": 1200, "r2": 1000, "r10": 1100})
    assert [p.name for p in replicate_folders(raw)] == ["r0", "r1", "r2", "r10"]
    chosen = one_replicate([raw], "diagnosing")
    assert chosen.paths == [raw / "r1"]
    assert "holds 4 replicates of one bench, not one job: diagnosing r1" in chosen.note
    assert f"pass {raw / 'r0'} for another" in chosen.note


def test_anything_else_is_read_as_given(tmp_path: Path) -> None:
    raw = _bench(tmp_path, {"r0": 10, "r1": 20})
    (raw / "extra.pfw").write_bytes(b"x")  # trace files of its own: not a bench's folder
    assert one_replicate([raw]).paths == [raw] and not one_replicate([raw]).note
    one = _bench(tmp_path / "b", {"r0": 10})  # one replicate is one job
    assert one_replicate([one]).paths == [one]
    two = [tmp_path / "x", tmp_path / "y"]  # several paths: the user chose
    assert one_replicate(two).paths == two
    assert one_replicate([tmp_path / "trace.pfw"]).paths == [tmp_path / "trace.pfw"]
