"""Staging is neither an access-pattern change nor doing less when it copies the whole data set, and
a disguised staging that copies half of it (so the program reads fewer files) is caught."""

from __future__ import annotations

from collections.abc import Callable
from pathlib import Path

from dftune.tools.catalog import default_catalog
from dftune.tools.guards import Arm, access_pattern_guard, no_doing_less_guard
from dftune.tools.trace import analyze
from tests.tracegen import Proc, write_trace

CAT = default_catalog()
STAGE = CAT.strategies["l3.stage_shm"]
KIB = 1024
DATA = "/scratch/u/data"
STAGED = "/dev/shm/dftune-stage-4242-0123456789ab/data"
NAMES = [f"train/sample_{i:03d}.bin" for i in range(40)]


def reader(root: str, names: list[str], size: int = 16 * KIB, chunk: int = 4 * KIB) -> list[Proc]:
    """Every sample listed in the folder read whole, front to back, in name order."""
    p = Proc(pid=10)
    for name in names:
        path = f"{root}/{name}"
        p.open(path)
        for _ in range(size // chunk):
            p.read(path, chunk)
        p.close(path)
    return [p]


def arm(tmp: Path, label: str, build: Callable[[], list[Proc]], staged_dir: str | None = None) -> Arm:
    folder = write_trace(tmp / label, build())
    return Arm(analysis=analyze([folder], profile=True), data_dir=DATA, label=label, staged_dir=staged_dir)


def test_a_whole_staged_copy_passes_both_guards(tmp_path: Path) -> None:
    base = arm(tmp_path, "baseline", lambda: reader(DATA, NAMES))
    staged = arm(tmp_path, "experiment", lambda: reader(STAGED, NAMES), staged_dir=STAGED)
    less = no_doing_less_guard(base, staged, strategy=STAGE)
    assert less.passed, less.reason
    pattern = access_pattern_guard(STAGE, base, staged)
    assert pattern.passed, pattern.reason


def test_without_the_mapping_the_staged_files_look_like_other_files(tmp_path: Path) -> None:
    """Why the arm carries the staged folder: unmapped, the copy's paths are not the data folder's."""
    base = arm(tmp_path, "baseline", lambda: reader(DATA, NAMES))
    unmapped = arm(tmp_path, "experiment", lambda: reader(STAGED, NAMES))
    assert set(base.files).isdisjoint(unmapped.files)
    assert not access_pattern_guard(STAGE, base, unmapped).passed


def test_a_disguised_staging_that_copies_half_of_the_files_is_caught(tmp_path: Path) -> None:
    """The program lists its staged folder and reads what is there: half of the samples."""
    base = arm(tmp_path, "baseline", lambda: reader(DATA, NAMES))
    half = arm(tmp_path, "experiment", lambda: reader(STAGED, NAMES[::2]), staged_dir=STAGED)
    less = no_doing_less_guard(base, half, strategy=STAGE)
    pattern = access_pattern_guard(STAGE, base, half)
    assert not less.passed and less.verdict == "rejected"
    assert "-50.0%" in less.reason
    assert not pattern.passed and "no longer reads 20 of the 40 data files" in pattern.reason
