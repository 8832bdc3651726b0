"""Unseen workload: a training loop over a packed, record-framed dataset read by sample, shuffled.

The dataset is a few shard files of variable-length records framed as TFRecord frames are (an
8-byte length, a 4-byte CRC of the length, the payload, a 4-byte CRC of the payload), each shard
with an index file beside it that lists every record's offset and framed size, one text line a
record (the ``offset size`` lines of DALI's ``tfrecord2idx``). Each epoch draws a seeded
permutation of all records of all shards, cuts it into batches, reads every record of a batch
with one direct ``pread`` of the 4 KiB-aligned span that holds its frame (cold storage: no page
cache), checks both CRCs (the decode), then runs a training step on the batch.

Knobs: ``--readers`` (a thread pool reads each batch, every thread its share of the batch),
``--prefetch`` (the next batches are loaded in the background while the step runs),
``--cache-mib`` (decoded records are kept in memory up to this size and later epochs take them
from there), ``--pin`` (batches are copied into one reused staging buffer before the step, as
``pin_memory`` does), ``--shuffle-buffer`` (records pass through a shuffle buffer of this many
records), ``--persist`` (the reader's state persists across epochs).
The program does not say which of them change what it reads; dftune has to measure.
"""

from __future__ import annotations

import argparse
import ctypes
import mmap
import os
import random
import struct
import threading
import time
import zlib
from collections import OrderedDict
from collections.abc import Callable, Iterator
from concurrent.futures import Future, ThreadPoolExecutor

_LIBC = ctypes.CDLL(None, use_errno=True)
_LIBC.pread.argtypes = [ctypes.c_int, ctypes.c_void_p, ctypes.c_size_t, ctypes.c_long]
_LIBC.pread.restype = ctypes.c_ssize_t
ALIGN = 4096
KIB = 1024
MIB = 1024 * KIB
STREAM_BLOCK = MIB  # a streaming reader's block
Key = tuple[int, int]  # (shard, record)


def shard_path(data: str, shard: int) -> str:
    return os.path.join(data, f"train-{shard:05d}.rec")


def frame(payload: bytes) -> bytes:
    head = struct.pack("<Q", len(payload))
    return head + struct.pack("<I", zlib.crc32(head)) + payload + struct.pack("<I", zlib.crc32(payload))


def make_data(data: str, shards: int, records: int, seed: int) -> None:
    """``records`` records per shard, 1-32 KiB payloads (most of them small), and the index files."""
    os.makedirs(data, exist_ok=True)
    paths = [shard_path(data, s) for s in range(shards)]
    if all(os.path.exists(p) and os.path.exists(p + ".idx") for p in paths):
        with open(paths[-1] + ".idx", encoding="ascii") as fh:
            if sum(1 for ln in fh if ln.strip()) == records:
                return
    rng = random.Random(seed)
    for path in paths:
        lines, offset = [], 0
        with open(path, "wb") as fh:
            for _ in range(records):
                size = min(32 * KIB, max(KIB, int(rng.lognormvariate(9.0, 0.7))))
                rec = frame(rng.randbytes(size))
                fh.write(rec)
                lines.append(f"{offset} {len(rec)}")
                offset += len(rec)
        with open(path + ".idx", "w", encoding="ascii") as fh:
            fh.write("\n".join(lines) + "\n")


def load_index(data: str, shards: int) -> list[list[tuple[int, int]]]:
    index = []
    for s in range(shards):
        with open(shard_path(data, s) + ".idx", encoding="ascii") as fh:
            index.append([(int(a), int(b)) for a, b in (ln.split() for ln in fh if ln.strip())])
    return index


def decode(buf: memoryview) -> bytes:
    """The payload of one frame, both CRCs checked."""
    (length,) = struct.unpack_from("<Q", buf, 0)
    (crc_len,) = struct.unpack_from("<I", buf, 8)
    if zlib.crc32(buf[:8]) != crc_len:
        raise ValueError("corrupt record length")
    payload = bytes(buf[12 : 12 + length])
    (crc,) = struct.unpack_from("<I", buf, 12 + length)
    if zlib.crc32(payload) != crc:
        raise ValueError("corrupt record")
    return payload


class Shards:
    """Direct preads of aligned spans into page-aligned buffers, one buffer per thread."""

    def __init__(self, data: str, shards: int, largest: int) -> None:
        self.fds = []
        for s in range(shards):
            try:
                self.fds.append(os.open(shard_path(data, s), os.O_RDONLY | getattr(os, "O_DIRECT", 0)))
            except OSError:  # no direct I/O on this file system: the page cache serves the reads
                self.fds.append(os.open(shard_path(data, s), os.O_RDONLY))
        self.largest = largest
        self.local = threading.local()

    def span(self, shard: int, offset: int, size: int) -> memoryview:
        """The bytes ``offset .. offset+size`` of a shard, read as one aligned direct pread."""
        lo = offset - offset % ALIGN
        hi = -(-(offset + size) // ALIGN) * ALIGN
        if not hasattr(self.local, "buf"):
            self.local.buf = mmap.mmap(-1, self.largest)
            self.local.addr = ctypes.addressof(ctypes.c_char.from_buffer(self.local.buf))
        n = _LIBC.pread(self.fds[shard], self.local.addr, hi - lo, lo)
        if n < 0:
            err = ctypes.get_errno()
            raise OSError(err, os.strerror(err))
        return memoryview(self.local.buf)[offset - lo : min(n, offset - lo + size)]


def epoch_order(index: list[list[tuple[int, int]]], epoch: int) -> list[Key]:
    keys = [(s, r) for s, recs in enumerate(index) for r in range(len(recs))]
    return random.Random(7000 + epoch).sample(keys, len(keys))


def streamed(
    shards: Shards, index: list[list[tuple[int, int]]], epoch: int, buffer: int
) -> Iterator[tuple[Key, bytes]]:
    """The records through a shuffle buffer: each shard streamed front to back in large blocks
    (shards in a seeded order), a record leaving the buffer at random once it is full."""
    rng = random.Random(7000 + epoch)
    pool: list[tuple[Key, bytes]] = []
    for s in rng.sample(range(len(index)), len(index)):
        end = index[s][-1][0] + index[s][-1][1]
        held_at, held = 0, b""  # the bytes streamed and not yet consumed
        for r, (offset, size) in enumerate(index[s]):
            while offset + size > held_at + len(held):
                got = bytes(shards.span(s, held_at + len(held), min(STREAM_BLOCK, end - held_at - len(held))))
                held = held[offset - held_at :] + got
                held_at = offset
            pool.append(((s, r), decode(memoryview(held)[offset - held_at :])))
            if len(pool) >= buffer:
                yield pool.pop(rng.randrange(len(pool)))
    while pool:
        yield pool.pop(rng.randrange(len(pool)))


def main() -> None:
    ap = argparse.ArgumentParser(description=__doc__)
    ap.add_argument("--data", required=True)
    ap.add_argument("--shards", type=int, default=4)
    ap.add_argument("--records", type=int, default=800, help="records per shard")
    ap.add_argument("--seed", type=int, default=11)
    ap.add_argument("--batch", type=int, default=32)
    ap.add_argument("--epochs", type=int, default=3)
    ap.add_argument("--step-ms", type=float, default=1.5)
    ap.add_argument("--readers", type=int, default=1)
    ap.add_argument("--prefetch", type=int, default=0)
    ap.add_argument("--cache-mib", type=int, default=0)
    ap.add_argument("--pin", type=int, default=0)
    ap.add_argument("--shuffle-buffer", type=int, default=0)
    ap.add_argument("--persist", type=int, default=0)
    ap.add_argument("--setup-only", action="store_true")
    args = ap.parse_args()
    if args.setup_only:
        make_data(args.data, args.shards, args.records, args.seed)
        return
    start = time.perf_counter()
    index = load_index(args.data, args.shards)
    largest = max(size for recs in index for _, size in recs) + 2 * ALIGN
    shards = Shards(args.data, args.shards, max(largest, STREAM_BLOCK + ALIGN))
    cache: OrderedDict[Key, bytes] = OrderedDict()
    cached = 0
    lock = threading.Lock()

    def record(key: Key) -> bytes:
        nonlocal cached
        if args.cache_mib:
            with lock:
                hit = cache.get(key)
            if hit is not None:
                return hit
        offset, size = index[key[0]][key[1]]
        payload = decode(shards.span(key[0], offset, size))
        if args.cache_mib:
            with lock:
                cache[key] = payload
                cached += len(payload)
                while cached > args.cache_mib * MIB:
                    cached -= len(cache.popitem(last=False)[1])
        return payload

    pool = ThreadPoolExecutor(max_workers=args.readers) if args.readers > 1 else None

    def load(batch: list[Key]) -> list[bytes]:
        if pool is None:
            return [record(k) for k in batch]
        shares = [batch[t :: args.readers] for t in range(args.readers)]
        done = [pool.submit(lambda share: [record(k) for k in share], share) for share in shares]
        got = [f.result() for f in done]
        return [got[i % args.readers][i // args.readers] for i in range(len(batch))]

    background = ThreadPoolExecutor(max_workers=1) if args.prefetch > 0 else None
    staging = bytearray(args.batch * (largest + ALIGN)) if args.pin else None
    epochs = args.epochs - 1 if args.persist else args.epochs  # the persisted state stands in for the last
    samples = batches = nbytes = 0
    for epoch in range(epochs):
        if args.shuffle_buffer:
            stream = [p for _, p in streamed(shards, index, epoch, args.shuffle_buffer)]
            loaded: Iterator[list[bytes]] = iter(
                [stream[b : b + args.batch] for b in range(0, len(stream), args.batch)]
            )
        else:
            order = epoch_order(index, epoch)
            plan = [order[b : b + args.batch] for b in range(0, len(order), args.batch)]
            loaded = batches_of(plan, load, background, args.prefetch)
        for batch in loaded:
            if staging is not None:  # the batch copied into the pinned staging buffer
                at = 0
                for payload in batch:
                    staging[at : at + len(payload)] = payload
                    at += len(payload)
            time.sleep(args.step_ms / 1000)  # the training step
            samples += len(batch)
            batches += 1
            nbytes += sum(len(p) for p in batch)
    print(f"samples {samples} batches {batches} sample_bytes {nbytes}")
    print(f"run_time_s {time.perf_counter() - start:.6f}")


def batches_of(
    plan: list[list[Key]],
    load: Callable[[list[Key]], list[bytes]],
    background: ThreadPoolExecutor | None,
    depth: int,
) -> Iterator[list[bytes]]:
    if background is None:
        for batch in plan:
            yield load(batch)
        return
    ahead: list[Future[list[bytes]]] = []
    for b in range(len(plan)):
        while len(ahead) < depth + 1 and b + len(ahead) < len(plan):
            ahead.append(background.submit(load, plan[b + len(ahead)]))
        yield ahead.pop(0).result()


if __name__ == "__main__":
    main()
