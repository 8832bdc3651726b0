"""The measuring guards on real (synthetic, exact) traces: a disguised knob is stopped by what the
trace shows, whatever strategy id it is declared under; a legitimate change passes."""

from __future__ import annotations

import random
from collections.abc import Callable
from dataclasses import replace
from pathlib import Path

import pytest

from dftune.tools.catalog import default_catalog
from dftune.tools.guards import Arm, access_pattern_guard, no_doing_less_guard
from dftune.tools.trace import analyze
from tests.tracegen import Proc, write_trace

CAT = default_catalog()
KIB = 1024
DATA = "/data/run"
FILES = [f"{DATA}/sample_{i:03d}.bin" for i in range(40)]


def _arm(tmp: Path, name: str, build: Callable[[], list[Proc]], **work: float) -> Arm:
    folder = write_trace(tmp / name, build())
    return Arm(analysis=analyze([folder], profile=True), data_dir=DATA, work=work, label=name)


def _reader(
    order: list[str], *, chunk: int = 4 * KIB, size: int = 16 * KIB, twice: bool = False, procs: int = 1
) -> list[Proc]:
    """Samples read whole, front to back, ``procs`` readers taking files round-robin."""
    ps = [Proc(pid=10 + i) for i in range(procs)]
    for n, path in enumerate(order):
        p = ps[n % procs]
        for _ in range(2 if twice else 1):
            p.open(path)
            for _ in range(size // chunk):
                p.read(path, chunk)
            p.close(path)
    return ps


def _writer(record: int, total: int = 256 * KIB) -> list[Proc]:
    p = Proc(pid=1)
    p.open(f"{DATA}/ckpt.bin")
    for _ in range(total // record):
        p.write(f"{DATA}/ckpt.bin", record)
    p.close(f"{DATA}/ckpt.bin")
    return [p]


def test_data_echoing_declared_as_a_cache_is_doing_less(tmp_path: Path) -> None:
    """Each sample served twice from half of them: the reads look like a cache's, the data is halved."""
    base = _arm(tmp_path, "base", lambda: _reader(FILES))
    echo = _arm(tmp_path, "echo", lambda: _reader(FILES[:20]))
    d = no_doing_less_guard(base, echo, strategy=CAT.strategies["l1.dataset_cache"])
    assert not d.passed and d.verdict == "rejected"
    assert "input bytes read once 655,360 -> 327,680 (-50.0%) vs the baseline" in d.reason


def test_a_cache_may_skip_only_what_the_incumbent_reads_twice(tmp_path: Path) -> None:
    base = _arm(tmp_path, "base", lambda: _reader(FILES, twice=True), samples=80)
    once = _arm(tmp_path, "once", lambda: _reader(FILES), samples=80)
    cache = no_doing_less_guard(base, once, strategy=CAT.strategies["l1.dataset_cache"])
    assert cache.passed and "reads more than once" in cache.reason
    assert "its work counters are kept (samples)" in cache.reason
    workers = no_doing_less_guard(base, once, strategy=CAT.strategies["l1.dataloader_workers"])
    assert not workers.passed and "read bytes 1,310,720 -> 655,360" in workers.reason


def _epochs(epochs: int, *, cached: bool = False, events: bool = False) -> list[Proc]:
    """``epochs`` passes over the samples; ``cached``: the passes after the first are served from
    memory (no reads); ``events``: the program logs one application event per sample."""
    p = Proc(pid=50)
    for epoch in range(epochs):
        for path in FILES[:16]:
            if epoch == 0 or not cached:
                p.open(path)
                p.read(path, 16 * KIB)
                p.close(path)
            if events:
                p.app("sample")
    return [p]


def test_a_cache_and_fewer_epochs_look_alike_and_only_the_programs_account_tells_them_apart(
    tmp_path: Path,
) -> None:
    """Dropped re-reads under a cache's id: a real cache and a program that stopped after its
    first epoch leave the same trace, so without the program's account it is a person's question;
    with one, the cache passes and the lost epoch does not."""
    cache = CAT.strategies["l1.dataset_cache"]
    base = _arm(tmp_path, "base", lambda: _epochs(2))
    one = _arm(tmp_path, "one", lambda: _epochs(1))
    d = no_doing_less_guard(base, one, strategy=cache)
    assert not d.passed and d.verdict == "inconclusive", d.reason
    assert "cannot tell a cache serving them from memory" in d.reason
    assert "Does the program still make as many passes over its data as the base?" in d.reason
    # the same traces, with the program's own count of the samples it went through
    base_n = _arm(tmp_path, "base_n", lambda: _epochs(2), samples=32)
    assert no_doing_less_guard(
        base_n, _arm(tmp_path, "cached_n", lambda: _epochs(1), samples=32), strategy=cache
    ).passed
    fewer = no_doing_less_guard(
        base_n, _arm(tmp_path, "one_n", lambda: _epochs(1), samples=16), strategy=cache
    )
    assert (
        not fewer.passed and fewer.verdict == "rejected" and "work counter samples 32 -> 16" in fewer.reason
    )
    # or with an application event per sample in the trace
    base_e = _arm(tmp_path, "base_e", lambda: _epochs(2, events=True))
    cached = no_doing_less_guard(
        base_e, _arm(tmp_path, "cached_e", lambda: _epochs(2, cached=True, events=True)), strategy=cache
    )
    assert cached.passed and "most frequent application event is kept (sample: 32 -> 32)" in cached.reason
    stopped = no_doing_less_guard(
        base_e, _arm(tmp_path, "one_e", lambda: _epochs(1, events=True)), strategy=cache
    )
    assert not stopped.passed and stopped.verdict == "inconclusive", stopped.reason


def test_a_change_only_an_io_calls_argument_reads_keeps_the_passes(tmp_path: Path) -> None:
    """The same dropped re-reads, from a variable the program's code never reads (dftune's
    env-gated patch passes it only to the library's cache argument): its passes cannot depend on
    it, so the cache passes; every other signal is still judged."""
    cache = CAT.strategies["l2.hdf5_chunk_cache"]
    base = _arm(tmp_path, "base", lambda: _epochs(2))
    why = "the change reaches the program only through the I/O calls' arguments (...)"
    one = _arm(tmp_path, "one", lambda: _epochs(2, cached=True))
    d = no_doing_less_guard(base, replace(one, library_only=why), strategy=cache)
    assert d.passed, d.reason
    assert why in d.reason
    # a sample left out is still less data, whatever reads the variable
    fewer = _arm(tmp_path, "fewer", lambda: _reader(FILES[:20]))
    d = no_doing_less_guard(_arm(tmp_path, "all", lambda: _reader(FILES)), replace(fewer, library_only=why))
    assert not d.passed and d.verdict == "rejected"


def test_physical_work_is_compared_with_the_incumbent_not_the_baseline(tmp_path: Path) -> None:
    """After a kept coalescing change, the next experiment is not blamed for the calls it already saved."""
    base = _arm(tmp_path, "base", lambda: _reader(FILES))
    coalesced = _arm(tmp_path, "coalesced", lambda: _reader(FILES, chunk=16 * KIB))
    async_ = _arm(tmp_path, "async", lambda: _reader(FILES, chunk=16 * KIB))
    strategy = CAT.strategies["l1.dataloader_prefetch"]
    assert not no_doing_less_guard(
        base, async_, strategy=strategy
    ).passed  # against the baseline: fewer calls
    assert no_doing_less_guard(base, async_, incumbent=coalesced, strategy=strategy).passed


def test_removing_the_shuffle_changes_the_pattern_whatever_the_id(tmp_path: Path) -> None:
    shuffled = FILES[:]
    random.Random(7).shuffle(shuffled)
    inc = _arm(tmp_path, "shuffled", lambda: _reader(shuffled))
    exp = _arm(tmp_path, "sorted", lambda: _reader(FILES))
    d = access_pattern_guard(CAT.strategies["l1.dataloader_workers"], inc, exp)
    assert not d.passed and d.verdict == "rejected" and "visited in another order" in d.reason


@pytest.mark.parametrize("sid", ["l1.dataset_cache", "l2.hdf5_chunk_cache", "l2.hdf5_chunked_layout"])
def test_a_cache_that_serves_no_rereads_cannot_explain_a_lost_shuffle(tmp_path: Path, sid: str) -> None:
    """Fewer backward steps are a cache's only when it served re-reads; the same reads in file
    order, under a caching or library-layout id, are a removed shuffle."""
    shuffled = FILES[:]
    random.Random(7).shuffle(shuffled)
    inc = _arm(tmp_path, "shuffled", lambda: _reader(shuffled))
    exp = _arm(tmp_path, "sorted", lambda: _reader(FILES))
    d = access_pattern_guard(CAT.strategies[sid], inc, exp)
    assert not d.passed and d.verdict == "rejected" and "visited in another order" in d.reason


def test_parallel_readers_keep_the_pattern(tmp_path: Path) -> None:
    shuffled = FILES[:]
    random.Random(7).shuffle(shuffled)
    inc = _arm(tmp_path, "one", lambda: _reader(shuffled))
    exp = _arm(tmp_path, "four", lambda: _reader(shuffled, procs=4))
    d = access_pattern_guard(CAT.strategies["l1.dataloader_workers"], inc, exp)
    assert d.passed, d.reason
    assert no_doing_less_guard(inc, exp, strategy=CAT.strategies["l1.dataloader_workers"]).passed


def test_whole_files_read_in_larger_calls_are_read_buffering(tmp_path: Path) -> None:
    inc = _arm(tmp_path, "4k", lambda: _reader(FILES))
    exp = _arm(tmp_path, "16k", lambda: _reader(FILES, chunk=16 * KIB))
    d = access_pattern_guard(CAT.strategies["l1.read_buffering"], inc, exp)
    assert d.passed and "read whole" in d.reason
    # the same change declared as something that does not merge requests is a transfer-size change
    other = access_pattern_guard(CAT.strategies["l1.dataloader_workers"], inc, exp)
    assert not other.passed and "transfer-size change" in other.reason


def test_larger_writes_without_evidence_are_inconclusive(tmp_path: Path) -> None:
    inc = _arm(tmp_path, "1k", lambda: _writer(KIB))
    exp = _arm(tmp_path, "64k", lambda: _writer(64 * KIB))
    d = access_pattern_guard(CAT.strategies["l1.write_buffering"], inc, exp)
    assert not d.passed and d.verdict == "inconclusive" and "larger application record" in d.reason


def test_a_change_behind_a_kept_buffer_is_as_unsettled_as_the_buffer_was(tmp_path: Path) -> None:
    """1 KiB records through a kept 64 KiB buffer look the same as 4 KiB records through it: the
    experiment's calls match the incumbent's, but what the program writes behind them is unseen."""
    base = _arm(tmp_path, "base", lambda: _writer(KIB))
    inc = _arm(tmp_path, "inc", lambda: _writer(64 * KIB))  # the buffer a person confirmed
    packed = _arm(tmp_path, "packed", lambda: _writer(64 * KIB))
    strategy = CAT.strategies["l1.async_io"]
    assert access_pattern_guard(strategy, inc, packed).passed  # alone, the incumbent says nothing
    d = access_pattern_guard(strategy, inc, packed, baseline=base)
    assert not d.passed and d.verdict == "inconclusive"
    assert "whose kept change serves the application's requests with larger calls" in d.reason
    assert "records of 1.0 KiB" in d.details["question"]


def test_a_change_behind_a_kept_buffer_is_settled_by_the_same_counters(tmp_path: Path) -> None:
    base = _arm(tmp_path, "base", lambda: _writer(KIB), records=256)
    inc = _arm(tmp_path, "inc", lambda: _writer(64 * KIB), records=256)
    same = _arm(tmp_path, "same", lambda: _writer(64 * KIB), records=256)
    strategy = CAT.strategies["l1.async_io"]
    assert access_pattern_guard(strategy, inc, same, baseline=base).passed
    nothing_kept = access_pattern_guard(
        strategy, base, _arm(tmp_path, "b2", lambda: _writer(KIB)), baseline=base
    )
    assert nothing_kept.passed


def test_the_programs_work_counters_settle_coalescing_either_way(tmp_path: Path) -> None:
    inc = _arm(tmp_path, "1k", lambda: _writer(KIB), records=256, record_bytes=1024)
    buffered = _arm(tmp_path, "buf", lambda: _writer(64 * KIB), records=256, record_bytes=1024)
    bigger = _arm(tmp_path, "rec", lambda: _writer(4 * KIB), records=64, record_bytes=4096)
    strategy = CAT.strategies["l1.write_buffering"]
    assert access_pattern_guard(strategy, inc, buffered).passed
    d = access_pattern_guard(strategy, inc, bigger)
    assert not d.passed and d.verdict == "rejected" and "record_bytes 1024 -> 4096" in d.reason


def test_application_events_with_sizes_are_evidence_too(tmp_path: Path) -> None:
    def writer(record: int, events: int) -> list[Proc]:
        (p,) = _writer(record)
        for _ in range(events):
            p.app("write_record", size=(256 * KIB) // events)
        return [p]

    inc = _arm(tmp_path, "inc", lambda: writer(KIB, 256))
    same = _arm(tmp_path, "same", lambda: writer(64 * KIB, 256))
    fewer = _arm(tmp_path, "fewer", lambda: writer(64 * KIB, 4))
    strategy = CAT.strategies["l1.write_buffering"]
    assert access_pattern_guard(strategy, inc, same).passed
    d = access_pattern_guard(strategy, inc, fewer)
    assert not d.passed and "write_record 256 events" in d.reason


def test_smaller_calls_and_other_ranges_change_the_pattern(tmp_path: Path) -> None:
    inc = _arm(tmp_path, "16k", lambda: _reader(FILES, chunk=16 * KIB))
    smaller = _arm(tmp_path, "4k", lambda: _reader(FILES, chunk=4 * KIB))
    d = access_pattern_guard(CAT.strategies["l1.read_buffering"], inc, smaller)
    assert not d.passed and "smaller" in d.reason

    def partial() -> list[Proc]:
        p = Proc(pid=1)
        for path in FILES:
            p.read(path, 8 * KIB, offset=8 * KIB)  # the second half of each sample instead of all of it
        return [p]

    moved = _arm(tmp_path, "half", partial)
    d = access_pattern_guard(CAT.strategies["l1.read_buffering"], inc, moved)
    assert not d.passed and "different byte ranges of 40 of 40 data files" in d.reason


@pytest.mark.parametrize("sid", ["l1.fewer_epochs", "l1.access_pattern_flip"])
def test_forbidden_strategies_are_refused_by_definition(tmp_path: Path, sid: str) -> None:
    arm = _arm(tmp_path, "a", lambda: _reader(FILES))
    s = CAT.strategies[sid]
    refused = (
        access_pattern_guard(s, arm, arm)
        if s.forbidden_kind == "access_pattern"
        else no_doing_less_guard(arm, arm, strategy=s)
    )
    assert (
        not refused.passed and "by definition" in refused.reason
    ) or "changes the access pattern" in refused.reason


def test_a_call_or_two_fewer_is_noise_a_few_more_is_doing_less(tmp_path: Path) -> None:
    """Two metadata calls fewer (a trace event lost at exit, one open fewer) is not less work;
    six fewer is, under a category that may not drop metadata calls."""

    def writer(reopens: int) -> list[Proc]:
        (p,) = _writer(KIB)
        for _ in range(reopens):
            p.open(f"{DATA}/ckpt.bin")
            p.close(f"{DATA}/ckpt.bin")
        return [p]

    inc = _arm(tmp_path, "inc", lambda: writer(3))  # 2 + 6 metadata calls
    strategy = CAT.strategies["l1.dataloader_workers"]
    noise = _arm(tmp_path, "noise", lambda: writer(2))  # 2 calls fewer
    assert no_doing_less_guard(inc, noise, strategy=strategy).passed
    fewer = _arm(tmp_path, "fewer", lambda: writer(0))  # 6 calls fewer
    d = no_doing_less_guard(inc, fewer, strategy=strategy)
    assert not d.passed and "metadata calls 8 -> 2" in d.reason, d.reason


def _arm_in(tmp: Path, name: str, workdir: str, *, hints: str | None = None) -> Arm:
    """An MPI program reading an input its set-up made in the arm's own folder; its data folder holds
    nothing. Each run's launcher files have fresh names; ``hints`` is a file its environment names."""
    p = Proc(pid=30)
    for path in (
        f"{workdir}/input/in.dat",
        f"/tmp/hydra_hwloc_xmlfile_{name}",
        f"/tmp/ompi.node1.0/jf.{name}/contact.txt",
        f"/var/spool/slurmd/job{name}/slurm_script",
        hints,
    ):
        if path is None:
            continue
        p.open(path)
        p.read(path, 64 * KIB if path.endswith("in.dat") else 512)
        p.close(path)
    folder = write_trace(tmp / name, [p])
    return Arm(
        analysis=analyze([folder], profile=True),
        data_dir=f"{workdir}/data",
        label=name,
        workdir=workdir,
        env={"ROMIO_HINTS": hints} if hints else {},
    )


def test_each_arm_own_folder_is_the_same_data_and_its_configuration_is_not(tmp_path: Path) -> None:
    """Arms run in their own folders: a set-up's input is known relative to it; a launcher's
    fresh-named file and the hint file the experiment's environment names are not data."""
    inc = _arm_in(tmp_path, "inc", "/runs/r1/opt1/incumbent")
    exp = _arm_in(tmp_path, "exp", "/runs/r1/opt1/candidate", hints="/runs/r1/hints/romio-x.txt")
    assert list(inc.files) == list(exp.files) == ["<workdir>/input/in.dat"]
    d = access_pattern_guard(CAT.strategies["l2.romio_ds"], inc, exp)
    assert d.passed, d.reason
    assert no_doing_less_guard(inc, exp, strategy=CAT.strategies["l2.romio_ds"]).passed


def _reads_outside(inputs: dict[str, int], *, extra: tuple[str, ...] = ()) -> list[Proc]:
    """A program that reads ``inputs`` (path -> bytes) from wherever the user keeps them and writes
    its results to the data folder; ``extra`` paths it writes (logs) beside them."""
    p = Proc(pid=40)
    for path, nbytes in inputs.items():
        p.open(path)
        for _ in range(nbytes // (4 * KIB)):
            p.read(path, 4 * KIB)
        p.close(path)
    for path in (f"{DATA}/result.bin", *extra):
        p.open(path)
        p.write(path, 64 * KIB)
        p.close(path)
    return [p]


def test_reading_less_of_an_input_outside_the_data_folder_is_doing_less(tmp_path: Path) -> None:
    """The data folder holds the outputs; the input is named by an absolute path elsewhere. A
    'prefetch' that reads half of it is doing less all the same."""
    whole = {"/scratch/user/train.bin": 1024 * KIB}
    base = _arm(tmp_path, "base", lambda: _reads_outside(whole))
    assert list(base.files) == ["<data>/result.bin"]
    assert list(base.outside_inputs) == ["/scratch/user/train.bin"]
    half = _arm(tmp_path, "half", lambda: _reads_outside({"/scratch/user/train.bin": 512 * KIB}))
    d = no_doing_less_guard(base, half, strategy=CAT.strategies["l1.dataloader_prefetch"])
    assert not d.passed and d.verdict == "rejected", d.reason
    assert "outside input bytes read once 1,048,576 -> 524,288 (-50.0%)" in d.reason
    # the same input read in larger calls is the same work
    same = _arm(tmp_path, "same", lambda: _reads_outside(whole))
    assert no_doing_less_guard(base, same, strategy=CAT.strategies["l1.dataloader_prefetch"]).passed


def test_what_is_outside_the_data_folder_and_not_an_input_is_not_judged(tmp_path: Path) -> None:
    """Names made afresh in every run cancel out of the sum; logs the program writes, tools' caches
    and a configuration file (core/facts/paths.py: class config) are not the application's data."""
    base = _arm(
        tmp_path,
        "base",
        lambda: _reads_outside(
            {
                "/tmp/run-a1b2/input.bin": 256 * KIB,
                "/home/u/.cache/lib/index": 64 * KIB,
                "/home/u/x.cfg": 8 * KIB,
            },
            extra=("/home/u/logs/run-a1b2.log",),
        ),
    )
    other = _arm(
        tmp_path,
        "other",
        lambda: _reads_outside({"/tmp/run-c3d4/input.bin": 256 * KIB}, extra=("/home/u/logs/run-c3d4.log",)),
    )
    assert sorted(base.outside_inputs) == ["/tmp/run-a1b2/input.bin"]
    d = no_doing_less_guard(base, other, strategy=CAT.strategies["l1.dataloader_prefetch"])
    assert d.passed, d.reason


def test_behind_a_kept_cache_a_lost_epoch_reads_what_the_cache_read(tmp_path: Path) -> None:
    """With the cache kept, one epoch of two reads exactly what the incumbent reads: against the
    baseline, the passes are as open as the cache's were, whatever the new change's id."""
    workers = CAT.strategies["l1.dataloader_workers"]
    base = _arm(tmp_path, "base", lambda: _epochs(2))
    inc = _arm(tmp_path, "inc", lambda: _epochs(2, cached=True))
    one = _arm(tmp_path, "one", lambda: _epochs(1))
    assert no_doing_less_guard(inc, one, strategy=workers).passed  # alone, the two look the same
    d = no_doing_less_guard(base, one, incumbent=inc, strategy=workers)
    assert not d.passed and d.verdict == "inconclusive", d.reason
    assert "the inc's kept change no longer re-reads them" in d.reason
    # an application event per sample shows the passes: kept, or not
    base_e = _arm(tmp_path, "base_e", lambda: _epochs(2, events=True))
    inc_e = _arm(tmp_path, "inc_e", lambda: _epochs(2, cached=True, events=True))
    same = _arm(tmp_path, "same_e", lambda: _epochs(2, cached=True, events=True))
    assert no_doing_less_guard(base_e, same, incumbent=inc_e, strategy=workers).passed
    one_e = _arm(tmp_path, "one_e", lambda: _epochs(1, events=True))
    assert no_doing_less_guard(base_e, one_e, incumbent=inc_e, strategy=workers).verdict == "inconclusive"


def test_read_backs_of_what_the_program_writes_are_not_passes_over_its_data(tmp_path: Path) -> None:
    """A program that writes a file and reads it back: fewer re-reads of it under a cache's id are
    its read-backs served from memory (or its I/O library's), not a lost pass over a dataset."""

    def write_then_read(times: int) -> list[Proc]:
        p = Proc(pid=60)
        out = f"{DATA}/sim.bin"
        p.open(out)
        p.write(out, 256 * KIB, offset=0)
        for _ in range(times):
            for k in range(16):
                p.read(out, 16 * KIB, offset=16 * KIB * k)
        p.close(out)
        return [p]

    base = _arm(tmp_path, "base", lambda: write_then_read(4))
    once = _arm(tmp_path, "once", lambda: write_then_read(1))
    d = no_doing_less_guard(base, once, strategy=CAT.strategies["l2.hdf5_chunk_cache"])
    assert d.passed and "reads more than once" in d.reason, d.reason


def test_the_order_of_an_outside_dataset_is_the_applications_too(tmp_path: Path) -> None:
    """Samples read from a dataset at an absolute path, results written to the data folder: a
    'worker' knob that reads them in name order instead of shuffled changes the access pattern;
    an input named afresh in each run (in one arm only) is not compared."""
    names = [f"/datasets/imgs/s{i:03d}.bin" for i in range(40)]
    shuffled = names[:]
    random.Random(7).shuffle(shuffled)

    def program(order: list[str], run: str) -> list[Proc]:
        ps = _reader(order)
        p = ps[0]
        for path, nbytes in ((f"/tmp/session-{run}/plan.bin", 8 * KIB), (f"{DATA}/result.bin", 0)):
            p.open(path)
            if nbytes:
                p.read(path, nbytes)
            else:
                p.write(path, 64 * KIB)
            p.close(path)
        return ps

    workers = CAT.strategies["l1.dataloader_workers"]
    base = _arm(tmp_path, "base", lambda: program(shuffled, "a"))
    again = _arm(tmp_path, "again", lambda: program(shuffled, "b"))
    assert access_pattern_guard(workers, base, again).passed
    ordered = _arm(tmp_path, "ordered", lambda: program(names, "c"))
    d = access_pattern_guard(workers, base, ordered)
    assert not d.passed and d.verdict == "rejected" and "order" in d.reason, d.reason


def test_fewer_checkpoints_to_a_folder_of_their_own_are_doing_less(tmp_path: Path) -> None:
    """Checkpoints go to a folder outside the data folder (which holds the dataset): one of every
    two under an asynchronous checkpointing id is doing less; a log named afresh in each run and a
    compiler's cache only the first run writes are not the application's output."""

    def trainer(every: int, run: str, first: bool = False) -> list[Proc]:
        ps = _reader(FILES[:8])
        p = ps[0]
        writes = [f"/scratch/ckpt/ckpt_{i}.bin" for i in range(0, 4, every)]
        writes.append(f"/tmp/run-{run}.log")
        if first:
            writes.append("/tmp/torchinductor_root/fx/kernel.bin")
        for path in writes:
            p.open(path)
            for _ in range(8 if path.endswith(".log") else 128):
                p.write(path, 4 * KIB if not path.endswith(".log") else 256)
            p.close(path)
        return ps

    async_id = CAT.strategies["l1.async_checkpoint"]
    base = _arm(tmp_path, "base", lambda: trainer(1, "a", first=True))
    assert sorted(base.outside_outputs) == [f"/scratch/ckpt/ckpt_{i}.bin" for i in range(4)] + [
        "/tmp/run-a.log"
    ]
    same = _arm(tmp_path, "same", lambda: trainer(1, "b"))
    assert no_doing_less_guard(base, same, strategy=async_id).passed
    half = _arm(tmp_path, "half", lambda: trainer(2, "c"))
    d = no_doing_less_guard(base, half, strategy=async_id)
    assert not d.passed and d.verdict == "rejected", d.reason
    assert "outside output bytes written once 2,099,200 -> 1,050,624 (-50.0%)" in d.reason, d.reason
