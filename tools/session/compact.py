"""Trace compaction: ``traces/raw`` -> ``traces/compact``.

Each raw trace (``*.pfw`` or ``*.pfw.gz``, single- or multi-member gzip) is copied into the
compact folder as a *single-member* gzip holding only its well-formed, non-empty records,
one JSON object a line.  Legacy JSON-array punctuation (``[`` / ``]``), blank lines and
lines that are not valid dftracer records (the same test ``dftune analyze`` applies, see
:func:`dftune.tools.trace.linescan.check_event`) are dropped; a legacy trailing comma is
removed; every kept record is written byte for byte otherwise.  The number of records is
preserved exactly: ``events`` counts what was read *and* written.

Files are streamed line by line (nothing is read whole into memory), written to a temporary
file and renamed into place, and the raw folder is only ever opened for reading.  0-byte
files (dftracer leaves them when a process never flushed) are skipped and listed.
"""

from __future__ import annotations

import gzip
import json
import zlib
from collections.abc import Iterator
from pathlib import Path
from typing import IO, cast

from dftune.core.facts.paths import trace_suffixes
from dftune.core.fsio import atomic_file
from dftune.core.model import StrictModel
from dftune.tools.trace.linescan import COMPLETE_PH, STRUCTURAL_LINES, check_event

_decode = json.JSONDecoder().decode
_STRUCTURAL = frozenset(s.encode() for s in STRUCTURAL_LINES)
_GZIP_MAGIC = b"\x1f\x8b"
_COMPRESSLEVEL = 6
_CHUNK = 1 << 20  # bytes of records buffered before compressing (bounds memory)


class CompactFile(StrictModel):
    """One raw trace and its compact copy."""

    source: str  # path relative to raw_dir
    output: str  # path relative to compact_dir
    bytes_before: int  # size of the raw file on disk
    bytes_after: int  # size of the compact file on disk
    events: int  # records kept (= records read that are well-formed)
    complete_events: int  # of which complete events (ph X / 1)
    dropped_structural: int  # "[" / "]" lines of legacy traces
    dropped_blank: int
    dropped_bad: int  # non-empty lines that are not a well-formed record
    truncated: bool = False  # the gzip stream ended early; the records before it are kept
    truncated_reason: str = ""


class CompactReport(StrictModel):
    """What :func:`compact_traces` did."""

    raw_dir: str
    compact_dir: str
    files: list[CompactFile]
    skipped_empty: list[str]  # 0-byte raw files (relative to raw_dir)
    errors: list[str]  # files that could not be compacted, with the reason
    bytes_before: int
    bytes_after: int
    events: int


def _is_trace(path: Path) -> bool:
    return any(path.name.endswith(sfx) for sfx in trace_suffixes())


def _output_name(rel: Path) -> Path:
    return rel if rel.name.endswith(".gz") else rel.with_name(rel.name + ".gz")


def _is_gzip(path: Path) -> bool:
    with open(path, "rb") as fh:
        return fh.read(2) == _GZIP_MAGIC


def _open_raw(path: Path) -> IO[bytes]:
    """Binary line source; gzip.open reads every member of a multi-member file."""
    if _is_gzip(path):
        return cast(IO[bytes], gzip.open(path, "rb"))
    return open(path, "rb")


def _records(fh: IO[bytes], stats: CompactFile) -> Iterator[bytes]:
    """Yield each well-formed record (stripped, without a trailing comma); count the rest."""
    for raw in fh:
        text = raw.strip()
        if not text:
            stats.dropped_blank += 1
            continue
        if text in _STRUCTURAL:
            stats.dropped_structural += 1
            continue
        if text.endswith(b","):
            text = text[:-1].rstrip()
        try:
            obj = _decode(text.decode("utf-8"))
        except (json.JSONDecodeError, UnicodeDecodeError):
            stats.dropped_bad += 1
            continue
        try:
            bad = check_event(obj) is not None
            complete = not bad and obj["ph"] in COMPLETE_PH
        except TypeError:  # an unhashable "ph" (object or array)
            bad, complete = True, False
        if bad:
            stats.dropped_bad += 1
            continue
        stats.events += 1
        stats.complete_events += complete
        yield text


def _compact_one(src: Path, dst: Path, rel: Path, out_rel: Path) -> CompactFile:
    stats = CompactFile(
        source=rel.as_posix(),
        output=out_rel.as_posix(),
        bytes_before=src.stat().st_size,
        bytes_after=0,
        events=0,
        complete_events=0,
        dropped_structural=0,
        dropped_blank=0,
        dropped_bad=0,
    )
    dst.parent.mkdir(parents=True, exist_ok=True)
    # One GzipFile = one gzip member; mtime=0 and no file name keep output reproducible.
    with (
        atomic_file(dst) as sink,
        gzip.GzipFile(filename="", mode="wb", fileobj=sink, compresslevel=_COMPRESSLEVEL, mtime=0) as gz,
        _open_raw(src) as fh,
    ):
        buf: list[bytes] = []
        size = 0
        try:
            for record in _records(fh, stats):
                buf.append(record)
                size += len(record) + 1
                if size >= _CHUNK:  # hand the compressor ~1 MiB at a time
                    gz.write(b"\n".join(buf) + b"\n")
                    buf, size = [], 0
        except (EOFError, zlib.error, gzip.BadGzipFile) as exc:
            stats.truncated = True
            stats.truncated_reason = f"truncated or corrupt gzip stream ({exc})"
        if buf:
            gz.write(b"\n".join(buf) + b"\n")
    stats.bytes_after = dst.stat().st_size
    return stats


def compact_traces(raw_dir: str | Path, compact_dir: str | Path) -> CompactReport:
    """Compact every trace under ``raw_dir`` (recursively) into ``compact_dir``.

    ``x.pfw`` becomes ``x.pfw.gz`` and ``x.pfw.gz`` keeps its name; sub-folders are kept.
    An existing compact file is replaced (it is derived data).  Two raw files that would
    produce the same output name (``x.pfw`` next to ``x.pfw.gz``) are an error for the
    second one, never a silent overwrite."""
    raw = Path(raw_dir)
    out = Path(compact_dir)
    if not raw.is_dir():
        raise FileNotFoundError(f"raw trace folder not found: {raw}")
    raw_res, out_res = raw.resolve(), out.resolve()
    if out_res == raw_res or out_res.is_relative_to(raw_res) or raw_res.is_relative_to(out_res):
        raise ValueError(f"compact folder {out} must not be the raw folder {raw}, inside it, or contain it")
    out.mkdir(parents=True, exist_ok=True)

    files: list[CompactFile] = []
    skipped: list[str] = []
    errors: list[str] = []
    taken: dict[Path, Path] = {}
    for src in sorted(p for p in raw.rglob("*") if p.is_file() and not p.is_symlink() and _is_trace(p)):
        rel = src.relative_to(raw)
        if src.stat().st_size == 0:
            skipped.append(rel.as_posix())
            continue
        out_rel = _output_name(rel)
        if out_rel in taken:
            errors.append(
                f"{rel.as_posix()}: its compact name {out_rel.as_posix()} "
                f"is already taken by {taken[out_rel].as_posix()}"
            )
            continue
        taken[out_rel] = rel
        try:
            files.append(_compact_one(src, out / out_rel, rel, out_rel))
        except OSError as exc:
            errors.append(f"{rel.as_posix()}: {exc}")
    return CompactReport(
        raw_dir=str(raw),
        compact_dir=str(out),
        files=files,
        skipped_empty=skipped,
        errors=errors,
        bytes_before=sum(f.bytes_before for f in files),
        bytes_after=sum(f.bytes_after for f in files),
        events=sum(f.events for f in files),
    )
