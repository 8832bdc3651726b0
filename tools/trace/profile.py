"""Merge the per-file access-profile tables into an :class:`AccessProfile`.

A file is usually touched by several processes, whose events sit in different trace files,
so byte ranges are merged exactly here: each partial holds its disjoint segments per (file,
direction); the union over all partials gives the bytes covered and, with the bytes moved,
the bytes read more than once. Everything is keyed by the traced path (hashes resolved
with every trace file's metadata), so two arms of one workload compare file by file.
"""

from __future__ import annotations

import hashlib
from collections import defaultdict
from typing import Any

import duckdb
import numpy as np

from dftune.tools.trace import semantics as S
from dftune.tools.trace import vectorized as V
from dftune.tools.trace.merge import concat_partials, query_rows
from dftune.tools.trace.model import AccessProfile, AppEvent, FileAccess, RequestLog, RequestStream
from dftune.tools.trace.reader import FilePartial

_DIRECTIONS = ("read", "write")
#: requests kept in the request log (the earliest ones; tuning traces hold far fewer)
MAX_LOGGED_REQUESTS = 500_000
_PER_BIN = ("sizes", "size_bytes", "size_time_s")


def build_profile(partials: list[FilePartial]) -> AccessProfile:
    """The profile of every file the traces touch, and the application's own events."""
    con = duckdb.connect(config={"threads": 1})
    try:
        return _build(con, partials)
    finally:
        con.close()


def _fh(con: duckdb.DuckDBPyConnection, partials: list[FilePartial]) -> dict[str, str]:
    """Names of file hashes a trace file defines but never accesses (the file view's ``fh``
    tables); the hashes it accesses are named in its own rows (``pfk``)."""
    return {
        str(h): str(v)
        for h, v in query_rows(con, concat_partials(partials, "fh"), "SELECT h, v FROM t")[1]
        if v
    }


def _paths(con: duckdb.DuckDBPyConnection, partials: list[FilePartial]) -> dict[int, str]:
    """File key -> path; a hash another trace file's metadata names is resolved with it."""
    fh = _fh(con, partials)
    out: dict[int, str] = {}
    for fk, path in query_rows(con, concat_partials(partials, "pfk"), "SELECT fk, path FROM t")[1]:
        text = str(path)
        if text.startswith("fhash:"):
            text = fh.get(text[6:], text)
        if int(fk) not in out or out[int(fk)].startswith("fhash:"):
            out[int(fk)] = text
    return out


def _build(con: duckdb.DuckDBPyConnection, partials: list[FilePartial]) -> AccessProfile:
    paths = _paths(con, partials)
    files: dict[str, dict[str, Any]] = defaultdict(
        lambda: {
            "sizes": {"read": {}, "write": {}},
            "size_bytes": {"read": {}, "write": {}},
            "size_time_s": {"read": {}, "write": {}},
        }
    )

    def entry(fk: Any) -> dict[str, Any]:
        return files[paths.get(int(fk), f"fk:{int(fk)}")]

    _, acc = query_rows(
        con,
        concat_partials(partials, "pacc"),
        """
        SELECT fk, is_write, sum(calls), sum(bytes), sum(ranged), min(first_ts) FROM t GROUP BY ALL""",
    )
    for fk, is_write, calls, nbytes, ranged, first in acc:
        f, d = entry(fk), _DIRECTIONS[int(bool(is_write))]
        f[f"{d}_calls"] = f.get(f"{d}_calls", 0) + int(calls or 0)
        f[f"{d}_bytes"] = f.get(f"{d}_bytes", 0) + int(nbytes or 0)
        f["positioned"] = f.get("positioned", 0) + int(ranged or 0)
        f["unpositioned"] = f.get("unpositioned", 0) + int(calls or 0) - int(ranged or 0)
        if first is not None:
            f["first_ts"] = min(int(first), f.get("first_ts", int(first)))
    for fk, is_write, sbin, count, nbytes, time_us in query_rows(
        con,
        concat_partials(partials, "psize"),
        """
            SELECT fk, is_write, sbin, sum(count), sum(bytes), sum(time_us) FROM t GROUP BY ALL""",
    )[1]:
        f, d, label = entry(fk), _DIRECTIONS[int(bool(is_write))], S.SIZE_BINS[int(sbin)][0]
        for key, value in (
            ("sizes", int(count)),
            ("size_bytes", int(nbytes or 0)),
            ("size_time_s", float(time_us or 0) / 1e6),
        ):
            f[key][d][label] = f[key][d].get(label, 0) + value
    _ranges(con, partials, paths, files)
    _path_counts(con, partials, paths, files)
    out = [
        FileAccess(
            path=path,
            **{k: v for k, v in f.items() if k not in _PER_BIN},
            **{k: {d: dict(sorted(s.items())) for d, s in f[k].items() if s} for k in _PER_BIN},
        )
        for path, f in sorted(files.items())
    ]
    return AccessProfile(
        files=out, app_events=_app_events(con, partials), requests=_requests(con, partials, paths)
    )


def _ranges(
    con: duckdb.DuckDBPyConnection,
    partials: list[FilePartial],
    paths: dict[int, str],
    files: dict[str, dict[str, Any]],
) -> None:
    """Union of the byte segments per (path, direction): unique bytes, segments, digest."""
    _, rows = query_rows(con, concat_partials(partials, "pseg"), "SELECT fk, is_write, lo, hi FROM t")
    if not rows:
        return
    keys = [(paths.get(int(fk), f"fk:{int(fk)}"), bool(w)) for fk, w, _, _ in rows]
    index: dict[tuple[str, bool], int] = {}
    group = np.array([index.setdefault(k, len(index)) for k in keys], dtype=np.uint64)
    lo = np.array([int(r[2]) for r in rows], dtype=np.int64)
    hi = np.array([int(r[3]) for r in rows], dtype=np.int64)
    g, s, e = V.interval_union(group, lo, hi)
    names = {v: k for k, v in index.items()}
    bounds = np.flatnonzero(np.r_[True, g[1:] != g[:-1]]) if len(g) else np.zeros(0, np.int64)
    for a, b in zip(bounds, [*bounds[1:], len(g)], strict=True):
        path, is_write = names[int(g[a])]
        d = _DIRECTIONS[int(is_write)]
        seg_lo, seg_hi = s[a:b], e[a:b]
        f = files[path]
        f[f"{d}_unique_bytes"] = int((seg_hi - seg_lo).sum())
        f[f"{d}_segments"] = int(b - a)
        f[f"{d}_ranges"] = hashlib.sha256(np.stack([seg_lo, seg_hi], axis=1).tobytes()).hexdigest()[:16]
        f[f"{d}_start"] = int(seg_lo.min())


def _path_counts(
    con: duckdb.DuckDBPyConnection,
    partials: list[FilePartial],
    paths: dict[int, str],
    files: dict[str, dict[str, Any]],
) -> None:
    """Processes, metadata calls and order classes per path, from the file view's table (its
    ``pkey`` is the hash of the file key, the ``fk`` of ``paths``)."""
    _, rows = query_rows(
        con,
        concat_partials(partials, "path"),
        """
        SELECT pkey, any_value(path), sum(processes), sum(metadata_count), sum(consecutive), sum(sequential),
               sum(random)
        FROM t GROUP BY pkey""",
    )
    for pkey, path, procs, meta, consec, sequ, rand in rows:
        f = files[paths.get(int(pkey), str(path))]
        f["processes"] = f.get("processes", 0) + int(procs or 0)
        f["metadata_calls"] = f.get("metadata_calls", 0) + int(meta or 0)
        f["consecutive"] = f.get("consecutive", 0) + int(consec or 0)
        f["sequential"] = f.get("sequential", 0) + int(sequ or 0)
        f["random"] = f.get("random", 0) + int(rand or 0)


def _app_events(con: duckdb.DuckDBPyConnection, partials: list[FilePartial]) -> list[AppEvent]:
    _, rows = query_rows(
        con,
        concat_partials(partials, "papp"),
        """
        SELECT cat, name, sum(count), sum(size_sum), sum(sized)
        FROM t GROUP BY cat, name ORDER BY cat, name""",
    )
    return [
        AppEvent(cat=str(c), name=str(n), count=int(k or 0), size_sum=int(sz) if sized else None)
        for c, n, k, sz, sized in rows
    ]


def _requests(
    con: duckdb.DuckDBPyConnection, partials: list[FilePartial], paths: dict[int, str]
) -> RequestLog:
    """Each stream's requests as runs of equal, back-to-back requests (see :class:`RequestLog`).

    A file with STDIO requests is logged from them alone: the POSIX calls beneath a ``fread`` are
    the C library's buffering, not what the application asked for.
    """
    table = concat_partials(partials, "preq")
    if table is None:
        return RequestLog()
    cols = {name: table[name].to_numpy(zero_copy_only=False) for name in table.column_names}
    fk = cols["fk"].astype(np.uint64)
    stdio = cols["stdio"].astype(bool)
    stdio_fks = np.unique(fk[stdio])
    keep = stdio | ~np.isin(fk, stdio_fks)
    truncated = False
    if int(keep.sum()) > MAX_LOGGED_REQUESTS:
        cutoff = np.sort(cols["ts"][keep])[MAX_LOGGED_REQUESTS - 1]
        keep &= cols["ts"] <= cutoff
        truncated = True
    stream = cols["stream"].astype(np.uint64)[keep]
    ts = cols["ts"].astype(np.int64)[keep]
    order = np.lexsort((ts, stream))
    stream, ts = stream[order], ts[order]
    fk = fk[keep][order]
    is_write = cols["is_write"].astype(bool)[keep][order]
    start = cols["start"].astype(np.int64)[keep][order]
    size = cols["nbytes"].astype(np.int64)[keep][order]
    names = sorted({paths.get(int(k), f"fk:{int(k)}") for k in np.unique(fk)})
    index = {n: i for i, n in enumerate(names)}
    file_ix = np.array([index[paths.get(int(k), f"fk:{int(k)}")] for k in fk], dtype=np.int64)
    new = np.ones(len(fk), dtype=bool)
    if len(fk) > 1:
        new[1:] = (
            (stream[1:] != stream[:-1])
            | (file_ix[1:] != file_ix[:-1])
            | (is_write[1:] != is_write[:-1])
            | (size[1:] != size[:-1])
            | (start[1:] < 0)
            | (start[1:] != start[:-1] + size[:-1])
        )
    heads = np.flatnonzero(new)
    calls = np.diff(np.r_[heads, len(fk)])
    streams: list[RequestStream] = []
    for h, n in zip(heads.tolist(), calls.tolist(), strict=True):
        sid = f"{int(stream[h]):x}"
        if not streams or streams[-1].stream != sid:
            streams.append(RequestStream(stream=sid))
        streams[-1].runs.append(
            (int(file_ix[h]), int(is_write[h]), int(start[h]), int(size[h]), int(n), int(ts[h]))
        )
    return RequestLog(
        paths=names, streams=streams, requests=len(fk), truncated=truncated, stdio_files=len(stdio_fks)
    )
