"""The logical access pattern on exact synthetic traces: threads and coalescing of the same
requests are not a new pattern; a removed shuffle, another request size, fewer samples are."""

from __future__ import annotations

import random
from collections.abc import Callable
from pathlib import Path

from dftune.tools.catalog import default_catalog
from dftune.tools.guards import Arm, access_pattern_guard, no_doing_less_guard
from dftune.tools.trace import analyze
from tests.tracegen import Proc, write_trace

CAT = default_catalog()
KIB = 1024
DATA = "/data/run"
BIG = f"{DATA}/samples.bin"
N = 128  # samples of 16 KiB in one file
SAMPLE = 16 * KIB
ORDER = random.Random(3).sample(range(N), N)


def _arm(tmp: Path, name: str, build: Callable[[], list[Proc]], **work: float) -> Arm:
    folder = write_trace(tmp / name, build())
    return Arm(analysis=analyze([folder], profile=True), data_dir=DATA, work=work, label=name)


def _threads(order: list[int], threads: int, size: int = SAMPLE, batch: int = 8) -> list[Proc]:
    """Each batch's samples spread over ``threads`` threads of one process (pread at the sample's
    offset), the threads' calls interleaved in time."""
    ps = [Proc(pid=10, tid=10 + t) for t in range(threads)]
    clock = 1_000
    for b in range(0, len(order), batch):
        for k, sample in enumerate(order[b : b + batch]):
            p = ps[k % threads]
            p.ts = clock
            p.read(BIG, size, offset=sample * size)
            clock += 3
    return ps


def _chunked(order: list[int], chunk: int = 64 * KIB) -> list[Proc]:
    """The same samples served from aligned chunks: a chunk is read when a sample needs it and is
    not the chunk read last."""
    p = Proc(pid=10)
    last = None
    for sample in order:
        c = sample * SAMPLE // chunk
        if c != last:
            p.read(BIG, chunk, offset=c * chunk)
            last = c
    return [p]


def test_two_threads_serving_each_batch_keep_the_pattern(tmp_path: Path) -> None:
    one = _arm(tmp_path, "one", lambda: _threads(ORDER, 1))
    two = _arm(tmp_path, "two", lambda: _threads(ORDER, 2))
    d = access_pattern_guard(CAT.strategies["l1.dataloader_workers"], one, two)
    assert d.passed, d.reason
    logical = d.details["logical"]["read"]  # type: ignore[index]
    assert logical["streams"] == [1, 2]


def test_workers_given_contiguous_ranges_in_file_order_remove_the_shuffle(tmp_path: Path) -> None:
    shuffled = _arm(tmp_path, "shuffled", lambda: _threads(ORDER, 4))
    # four workers, each a contiguous quarter of the file in file order, interleaved in time
    quarters = [q * (N // 4) + i for i in range(N // 4) for q in range(4)]
    ranged = _arm(tmp_path, "ranged", lambda: _threads(quarters, 4, batch=4))
    d = access_pattern_guard(CAT.strategies["l1.dataloader_workers"], shuffled, ranged)
    assert not d.passed and d.verdict == "rejected", d.reason
    assert "visited in another order" in d.reason and "-> 0%" in d.reason


def test_aligned_chunks_serving_the_same_shuffled_samples_are_coalescing(tmp_path: Path) -> None:
    samples = _arm(tmp_path, "samples", lambda: _threads(ORDER, 1))
    chunks = _arm(tmp_path, "chunks", lambda: _chunked(ORDER))
    d = access_pattern_guard(CAT.strategies["l1.read_chunk_size"], samples, chunks)
    assert d.passed, d.reason
    assert "shuffled order of the smaller requests" in d.reason


def test_larger_shuffled_records_are_not_taken_for_coalescing(tmp_path: Path) -> None:
    samples = _arm(tmp_path, "samples", lambda: _threads(ORDER, 1))
    records = random.Random(99).sample(range(N // 4), N // 4)  # 64 KiB records, a sequence of their own
    larger = _arm(tmp_path, "larger", lambda: _threads(records, 1, size=64 * KIB))
    d = access_pattern_guard(CAT.strategies["l1.read_chunk_size"], samples, larger)
    assert not d.passed and d.verdict == "inconclusive", d.reason
    assert "order of their own" in d.reason
    assert "records of 16.0 KiB" in str(d.details["question"])


def test_smaller_shuffled_records_change_the_pattern(tmp_path: Path) -> None:
    samples = _arm(tmp_path, "samples", lambda: _threads(ORDER, 1))
    small = random.Random(5).sample(range(N * 4), N * 4)  # 4 KiB records, reshuffled
    smaller = _arm(tmp_path, "smaller", lambda: _threads(small, 1, size=4 * KIB))
    d = access_pattern_guard(CAT.strategies["l1.read_chunk_size"], samples, smaller)
    assert not d.passed and d.verdict == "rejected" and "smaller" in d.reason


def test_splitting_each_shuffled_sample_into_smaller_calls_is_the_same_request(tmp_path: Path) -> None:
    samples = _arm(tmp_path, "samples", lambda: _threads(ORDER, 1))
    split = [4 * s + k for s in ORDER for k in range(4)]  # each sample as four 4 KiB calls
    calls = _arm(tmp_path, "split", lambda: _threads(split, 1, size=4 * KIB))
    assert access_pattern_guard(CAT.strategies["l1.read_chunk_size"], samples, calls).passed


def test_skipping_samples_is_doing_less_not_a_pattern(tmp_path: Path) -> None:
    inc = _arm(tmp_path, "all", lambda: _threads(ORDER, 1))
    fewer = _arm(tmp_path, "fewer", lambda: _threads(ORDER[: N // 2], 2))
    d = no_doing_less_guard(inc, fewer, strategy=CAT.strategies["l1.dataloader_workers"])
    assert not d.passed and "input bytes read once" in d.reason


def _writer(record: int, buffer: int, total: int = 512 * KIB) -> list[Proc]:
    """Records of ``record`` bytes staged in a ``buffer``-byte buffer (a write per full buffer)."""
    p = Proc(pid=1)
    path = f"{DATA}/rows.bin"
    p.open(path)
    per = max(buffer, record)
    for _ in range(total // per):
        p.write(path, per)
    p.close(path)
    return [p]


def test_a_write_buffer_without_application_evidence_asks_one_precise_question(tmp_path: Path) -> None:
    rows = _arm(tmp_path, "rows", lambda: _writer(8 * KIB, 0))
    staged = _arm(tmp_path, "staged", lambda: _writer(8 * KIB, 256 * KIB))
    d = access_pattern_guard(CAT.strategies["l1.write_buffering"], rows, staged)
    assert not d.passed and d.verdict == "inconclusive"
    question = str(d.details["question"])
    assert "writes 8.0 KiB -> 256.0 KiB" in question and "records of 8.0 KiB" in question
    assert question in d.reason


def test_the_application_layer_decides_the_request_size(tmp_path: Path) -> None:
    """fwrite of 8 KiB records (STDIO) over POSIX writes of whatever the C library buffers."""

    def stdio(buffer: int) -> list[Proc]:
        p = Proc(pid=1)
        path = f"{DATA}/rows.bin"
        p.open(path)
        fh = p._fhash(path)
        for i in range(64):
            p.event("fwrite", cat="STDIO", fhash=fh, ret=1, size=8 * KIB)
            if (i + 1) * 8 * KIB % buffer == 0:
                p.write(path, buffer)
        return [p]

    small = _arm(tmp_path, "small", lambda: stdio(8 * KIB))
    large = _arm(tmp_path, "large", lambda: stdio(128 * KIB))
    d = access_pattern_guard(CAT.strategies["l1.write_buffering"], small, large)
    assert d.passed, d.reason
    assert small.request_log is not None and small.request_log.stdio_files == 1


def test_after_a_kept_coalescing_the_baselines_requests_still_decide(tmp_path: Path) -> None:
    """The incumbent reads 64 KiB chunks (kept: they follow the baseline's shuffled 16 KiB samples);
    an experiment reading 64 KiB records in a sequence of their own looks the same size as the
    incumbent, but no longer serves the baseline's requests."""
    base = _arm(tmp_path, "base", lambda: _threads(ORDER, 1))
    chunks = _arm(tmp_path, "chunks", lambda: _chunked(ORDER))
    records = random.Random(99).sample(range(N // 4), N // 4)
    larger = _arm(tmp_path, "larger", lambda: _threads(records, 1, size=64 * KIB))
    strategy = CAT.strategies["l1.read_chunk_size"]
    assert access_pattern_guard(strategy, chunks, larger).passed  # the incumbent alone cannot tell
    d = access_pattern_guard(strategy, chunks, larger, baseline=base)
    assert not d.passed and d.verdict == "inconclusive", d.reason
    assert "records of 16.0 KiB" in str(d.details["question"])
    again = _arm(tmp_path, "again", lambda: _chunked(ORDER))
    assert access_pattern_guard(strategy, chunks, again, baseline=base).passed


def _page_aligned(order: list[int], record: int = 10_000, page: int = 4096) -> list[Proc]:
    """Records of ``record`` bytes packed in one file, each read through page-aligned direct I/O:
    neighbouring records' windows share a page, so every range overlaps the next one a little."""
    p = Proc(pid=10)
    for r in order:
        lo = r * record // page * page
        hi = -(-(r + 1) * record // page) * page
        p.read(BIG, hi - lo, offset=lo)
    return [p]


def test_page_aligned_windows_of_neighbouring_records_keep_the_shuffle_visible(tmp_path: Path) -> None:
    """The windows' shared pages do not chain the file into one block: a reader that dropped its
    shuffle (the same windows in file order) is a new pattern, however the pages overlap."""
    shuffled = _arm(tmp_path, "shuffled", lambda: _page_aligned(ORDER))
    in_order = _arm(tmp_path, "in_order", lambda: _page_aligned(list(range(N))))
    d = access_pattern_guard(CAT.strategies["l1.dataloader_workers"], shuffled, in_order)
    assert not d.passed and d.verdict == "rejected", d.reason
    again = _arm(tmp_path, "again", lambda: _page_aligned(ORDER))
    assert access_pattern_guard(CAT.strategies["l1.dataloader_workers"], shuffled, again).passed
