"""Reading a sampling profiler's stacks for the time a program spends inside its I/O libraries."""

from __future__ import annotations

from pathlib import Path

import pytest

from dftune.core.facts import stack_facts
from dftune.tools.catalog import default_catalog
from dftune.tools.diagnose import engine
from dftune.tools.diagnose.library_time import library_time, possibly_io, read_samples
from dftune.tools.runner import sampling
from tests.unit.test_rules import empty_analysis

SITE = "/v/lib/python3.11/site-packages"
LIBS = {"zarr": ("packages/zarr/", "packages/numcodecs/"), "pytorch": ("packages/torch/utils/data/",)}


def _line(pid: int, tid: str, name: str, frames: list[str], n: int) -> str:
    return f'process {pid}:"python run.py --x a;b";thread ({tid}): {name};' + ";".join(frames) + f" {n}"


def test_the_main_thread_of_the_longest_lived_process_is_the_program() -> None:
    text = "\n".join(
        [
            # a wrapper's short-lived Python helper, entirely inside zarr: not the program
            _line(7, "7", "MainThread", [f"open ({SITE}/zarr/api.py:1)"], 30),
            _line(9, "9", "MainThread", ["<module> (/w/run.py:3)", f"get ({SITE}/zarr/core/array.py:9)"], 60),
            _line(9, "9", "MainThread", ["<module> (/w/run.py:3)", f"dec ({SITE}/numcodecs/zstd.py:2)"], 15),
            _line(9, "9", "MainThread", ["<module> (/w/run.py:5)"], 25),
            # the library's own thread, idle: never the program's time
            _line(9, "0x7f00", "zarr_io", [f"run ({SITE}/zarr/core/sync.py:1)"], 100),
            "garbage line",
            "",
        ]
    )
    samples = read_samples(text)
    assert len(samples) == 5 and samples[0].command == "python run.py --x a;b"
    got = library_time(samples, LIBS)
    assert got is not None
    assert (got.samples, got.inside, got.by_library) == (100, 75, {"zarr": 75})
    assert got.share == 0.75


def test_a_user_folder_named_after_a_library_is_not_the_library() -> None:
    """Frames match where a library is installed (…packages/zarr/), not any folder called zarr."""
    text = _line(3, "3", "MainThread", ["<module> (/home/me/zarr/epoch.py:4)"], 50)
    got = library_time(read_samples(text), LIBS)
    assert got is not None and got.inside == 0


def test_without_threads_or_processes_every_sample_is_the_program() -> None:
    text = (
        f"<module> (/w/x.py:1);__next__ ({SITE}/torch/utils/data/dataloader.py:1) 40\n<module> (/w/x.py:2) 10"
    )
    got = library_time(read_samples(text), LIBS)
    assert got is not None and got.by_library == {"pytorch": 40} and got.samples == 50


def test_no_main_thread_sampled_says_nothing() -> None:
    assert library_time(read_samples(_line(3, "0x1", "worker", ["f (/a.py:1)"], 9)), LIBS) is None
    assert library_time([], LIBS) is None


def test_the_gate_reads_the_share_and_too_few_samples_say_nothing() -> None:
    text = (
        _line(3, "3", "MainThread", [f"g ({SITE}/zarr/a.py:1)"], 30)
        + "\n"
        + _line(3, "3", "MainThread", [], 70)
    )
    got = library_time(read_samples(text), LIBS)
    assert possibly_io(got, 4.0, min_samples=101, rate_hz=100) is None
    seen = possibly_io(got, 4.0, min_samples=20, rate_hz=100)
    assert seen is not None and seen.source == "library-time"
    assert (seen.fraction, seen.time_s) == (0.3, 1.2)
    assert "100 samples" in seen.evidence and "zarr 30%" in seen.evidence
    quiet = empty_analysis(io_fraction_of_job=0.01)
    g = engine.gate(quiet, possibly=[seen])
    assert g.worth_tuning and "(library-time)" in g.reason


def test_the_sampler_is_data_and_says_why_it_cannot_run(monkeypatch: pytest.MonkeyPatch) -> None:
    s = sampling.sampler_settings()
    argv = sampling.sampler_argv(Path("/tmp/x/r3.txt"), s)
    assert argv[-1] == "--" and "/tmp/x/r3.txt" in argv and str(s.rate_hz) in argv
    assert (
        sampling.unavailable("slurm") == "a slurm job's processes run where the profiler cannot follow them"
    )
    off = s.model_copy(update={"enabled": False})
    assert "turned off" in (sampling.unavailable("local", off) or "")
    monkeypatch.setattr(sampling, "_executable", lambda name: None)
    assert sampling.unavailable("local") == "py-spy is not installed (pip install py-spy)"


def test_every_library_setting_names_a_cataloged_strategy_that_requires_it() -> None:
    catalog = default_catalog()
    with_settings = [s for s in stack_facts().stack if s.settings]
    assert {s.id for s in with_settings} >= {"zarr", "hdf5"}
    for lib in with_settings:
        for sid in lib.settings:
            assert sid in catalog.strategies, (lib.id, sid)
            assert any(lib.id in r for r in catalog.strategies[sid].requires), (lib.id, sid)
    for lib in stack_facts().stack:
        assert all("packages/" in f for f in lib.frames), lib.id


def test_a_launchers_chain_leads_to_the_rank_it_started() -> None:
    """Under mpirun, py-spy writes the chain of processes from the launcher down to each rank;
    the rank is the sampled process (its unnamed thread whose id is its pid is the main one)."""
    chain = 'process 10:"";process 11:"hydra_pmi_proxy --control-port vm:1";'
    rank = chain + 'process 12:"python r.py";thread (12);<module> (/w/r.py:9)'
    text = "\n".join(
        [
            f"{rank};load ({SITE}/zarr/api.py:454) 60",
            f"{rank} 20",
            chain + 'process 13:"python r.py";thread (13);<module> (/w/r.py:9) 10',
        ]
    )
    samples = read_samples(text)
    assert {s.pid for s in samples} == {12, 13} and samples[0].command == "python r.py"
    got = library_time(samples, LIBS)
    assert got is not None and (got.samples, got.inside) == (80, 60)
