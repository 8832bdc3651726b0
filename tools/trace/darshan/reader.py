"""Read one Darshan log through libdarshan-util (PyDarshan's bundled C library) into columns.

PyDarshan's own record readers build a dict (and, for DXT, one dict per operation) for every
record; on logs with 10^5-10^6 records that per-record Python dominates.  Here the C library
still decodes every record (version up-conversion, decompression, byte swapping are all
libdarshan-util's), but each fixed-size record is copied as raw bytes and the whole module
becomes one numpy structured array: the only Python per record is the library call itself.
DXT segments are copied as one block per record.  Header, mounts, modules and names come
from PyDarshan's backend functions unchanged.
"""

from __future__ import annotations

import contextlib
import os
import tempfile
from collections.abc import Iterator
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

import numpy as np

from dftune.core.extras import require
from dftune.tools.trace.errors import TraceError

#: modules whose records are fixed-size structs of (id, rank, [file_rec_id,] counters, fcounters)
GENERIC_STRUCTS = {
    "POSIX": "struct darshan_posix_file",
    "MPI-IO": "struct darshan_mpiio_file",
    "STDIO": "struct darshan_stdio_file",
    "H5F": "struct darshan_hdf5_file",
    "H5D": "struct darshan_hdf5_dataset",
    "PNETCDF_FILE": "struct darshan_pnetcdf_file",
    "PNETCDF_VAR": "struct darshan_pnetcdf_var",
}
DXT_MODULES = ("DXT_POSIX", "DXT_MPIIO")
#: a segment_info: offset, length (int64), start_time, end_time (double, seconds since job start)
SEGMENT = np.dtype([("offset", "<i8"), ("length", "<i8"), ("start", "<f8"), ("end", "<f8")])


@dataclass
class ModuleTable:
    """All records of one module: ``counters[i, j]`` is counter ``names[j]`` of record ``i``."""

    name: str
    ids: np.ndarray
    ranks: np.ndarray
    counters: np.ndarray
    fcounters: np.ndarray
    names: list[str]
    fnames: list[str]
    #: H5D / PNETCDF_VAR: the file record each dataset/variable belongs to
    file_ids: np.ndarray | None = None

    def __len__(self) -> int:
        return len(self.ids)

    def c(self, name: str) -> np.ndarray:
        """One integer counter over all records (int64)."""
        return self.counters[:, self.names.index(name)]

    def f(self, name: str) -> np.ndarray:
        """One floating-point counter over all records (float64)."""
        return self.fcounters[:, self.fnames.index(name)]


@dataclass
class DxtTable:
    """DXT: one row per traced operation, in record order (each record = one rank x file)."""

    name: str
    record: np.ndarray  # index into rec_ids / rec_ranks / rec_hosts
    is_write: np.ndarray
    segments: np.ndarray  # SEGMENT dtype
    rec_ids: np.ndarray
    rec_ranks: np.ndarray
    rec_hosts: list[str]


@dataclass
class LustreTable:
    """Lustre layout per file record: first component's stripe size/count and the OSTs used."""

    ids: np.ndarray
    ranks: np.ndarray
    stripe_size: np.ndarray
    stripe_count: np.ndarray
    components: np.ndarray
    osts: list[np.ndarray]


@dataclass
class HeatmapTable:
    """Darshan's runtime HEATMAP module: bytes per fixed-width time bin, per rank and interface."""

    module: list[str]
    ranks: np.ndarray
    bin_width_s: np.ndarray
    read_bins: list[np.ndarray]
    write_bins: list[np.ndarray]


@dataclass
class DarshanLog:
    """Everything dftune uses from one log file."""

    path: str
    job: dict[str, Any]
    exe: str
    mounts: list[tuple[str, str]]
    modules: dict[str, dict[str, Any]]
    names: dict[int, str]
    tables: dict[str, ModuleTable] = field(default_factory=dict)
    dxt: dict[str, DxtTable] = field(default_factory=dict)
    lustre: LustreTable | None = None
    heatmap: HeatmapTable | None = None
    #: modules present in the log but not mapped (DFS, DAOS, APMPI, ...)
    unmapped: list[str] = field(default_factory=list)


def _backend() -> Any:
    require("darshan", "darshan", "reading Darshan logs (PyDarshan)")
    from darshan.backend import cffi_backend

    return cffi_backend


class _CStderr:
    """libdarshan-util reports problems with fprintf(stderr): send them to a file we can read."""

    def __init__(self, tmp: Any) -> None:
        self.tmp = tmp

    def lines(self) -> list[str]:
        self.tmp.flush()
        self.tmp.seek(0)
        text = self.tmp.read().decode("utf-8", "replace")
        return [line.strip() for line in text.splitlines() if line.strip()]

    def check(self, what: str) -> None:
        """Stop before reading on: after an error the library may read past the end of the file."""
        errors = [ln for ln in self.lines() if "rror" in ln]
        if errors:
            raise _LogProblem(f"{what} is unreadable: the log is truncated or corrupt")


@contextlib.contextmanager
def _c_stderr() -> Iterator[_CStderr]:
    with tempfile.TemporaryFile(mode="w+b") as tmp:
        saved = os.dup(2)
        os.dup2(tmp.fileno(), 2)
        try:
            yield _CStderr(tmp)
        finally:
            os.dup2(saved, 2)
            os.close(saved)


def _first_error(lines: list[str]) -> str:
    useful = [ln for ln in lines if "rror" in ln] or lines
    return f"; libdarshan-util: {useful[0].removeprefix('Error: ')}" if useful else ""


def read_log(path: str | Path) -> DarshanLog:
    """Read a log completely; a log libdarshan-util cannot decode raises a one-line TraceError."""
    B = _backend()
    name = str(path)
    size = os.path.getsize(name)
    if size == 0:
        raise TraceError(name, "empty file (0 bytes), not a Darshan log")
    with _c_stderr() as err:
        try:
            return _read(B, name, size, err)
        except _LogProblem as exc:
            problem, messages = exc, err.lines()
    raise TraceError(name, f"{problem.reason}{_first_error(messages)}")


class _LogProblem(Exception):
    def __init__(self, reason: str) -> None:
        super().__init__(reason)
        self.reason = reason


def _read(B: Any, path: str, size: int, err: _CStderr) -> DarshanLog:
    log = B.log_open(path)
    if not log["handle"]:
        raise _LogProblem("not a Darshan log")
    try:
        job = B.log_get_job(log)
        exe, mounts, modules = B.log_get_exe(log), B.log_get_mounts(log), B.log_get_modules(log)
        err.check("the job header")
        regions = sum(int(m["len"]) for m in modules.values())
        if regions > size:
            raise _LogProblem(f"truncated: its module regions need {regions:,} bytes, the file has {size:,}")
        names = B.log_get_name_records(log)
        err.check("the file-name records")
        out = DarshanLog(path=path, job=job, exe=exe, mounts=mounts, modules=modules, names=names)
        for mod in out.modules:
            if mod in GENERIC_STRUCTS:
                out.tables[mod] = _generic(B, log, mod)
            elif mod in DXT_MODULES:
                out.dxt[mod] = _dxt(B, log, mod)
            elif mod == "LUSTRE":
                out.lustre = _lustre(B, log)
            elif mod == "HEATMAP":
                out.heatmap = _heatmap(B, log)
            else:
                out.unmapped.append(mod)
        return out
    finally:
        B.log_close(log)


def _record_dtype(B: Any, struct: str) -> np.dtype:
    """The numpy layout of a C record struct, with offsets taken from cffi (no layout guessed)."""
    ffi = B.ffi
    fields: dict[str, tuple[Any, int]] = {"id": (np.dtype("<u8"), 0), "rank": (np.dtype("<i8"), 8)}
    ctype = ffi.typeof(struct)
    for fname, f in ctype.fields:
        if fname in ("counters", "fcounters"):
            base = "<i8" if fname == "counters" else "<f8"
            fields[fname] = (np.dtype((base, (f.type.length,))), f.offset)
        elif fname == "file_rec_id":
            fields[fname] = (np.dtype("<u8"), f.offset)
    return np.dtype(
        {
            "names": list(fields),
            "formats": [v[0] for v in fields.values()],
            "offsets": [v[1] for v in fields.values()],
            "itemsize": ffi.sizeof(struct),
        }
    )


def _generic(B: Any, log: dict[str, Any], mod: str) -> ModuleTable:
    ffi, lib = B.ffi, B.libdutil
    struct = GENERIC_STRUCTS[mod]
    size = ffi.sizeof(struct)
    idx = log["modules"][mod]["idx"]
    handle = log["handle"]
    buf = ffi.new("void **")  # NULL: the library allocates one record, then reuses it
    store = bytearray(size * 1024)
    n = 0
    get, move = lib.darshan_log_get_record, ffi.memmove
    dest = ffi.from_buffer(store)
    try:
        while (r := get(handle, idx, buf)) > 0:
            if (n + 1) * size > len(store):
                del dest
                store.extend(bytes(len(store)))  # double; records are copied once, never joined
                dest = ffi.from_buffer(store)
            move(dest + n * size, buf[0], size)
            n += 1
    finally:
        if buf[0] != ffi.NULL:
            lib.darshan_free(buf[0])
    if r < 0:
        raise _LogProblem(f"corrupt or truncated {mod} records after {n} record(s)")
    del dest
    dtype = _record_dtype(B, struct)
    arr = np.frombuffer(memoryview(store)[: n * size], dtype=dtype)
    names, fnames = list(B.counter_names(mod)), list(B.fcounter_names(mod))
    return ModuleTable(
        name=mod,
        ids=arr["id"].copy(),
        ranks=arr["rank"].copy(),
        counters=arr["counters"].reshape(len(arr), len(names)),  # strided views of the records: no copy
        fcounters=arr["fcounters"].reshape(len(arr), len(fnames)),
        names=names,
        fnames=fnames,
        file_ids=arr["file_rec_id"].copy() if "file_rec_id" in (dtype.names or ()) else None,
    )


def _dxt(B: Any, log: dict[str, Any], mod: str) -> DxtTable:
    ffi, lib = B.ffi, B.libdutil
    head = ffi.sizeof("struct dxt_file_record")
    idx = log["modules"][mod]["idx"]
    ids: list[int] = []
    ranks: list[int] = []
    hosts: list[str] = []
    counts: list[tuple[int, int]] = []
    blocks: list[bytes] = []
    while True:
        buf = ffi.new("void **")
        r = lib.darshan_log_get_record(log["handle"], idx, buf)
        if r < 0:
            raise _LogProblem(f"corrupt or truncated {mod} records after {len(ids)} record(s)")
        if r == 0:
            break
        rec = ffi.cast("struct dxt_file_record *", buf[0])
        w, n = int(rec.write_count), int(rec.write_count + rec.read_count)
        ids.append(int(rec.base_rec.id))
        ranks.append(int(rec.base_rec.rank))
        hosts.append(ffi.string(rec.hostname).decode("utf-8", "replace"))
        counts.append((w, n - w))
        blocks.append(ffi.buffer(ffi.cast("char *", buf[0]) + head, n * SEGMENT.itemsize)[:])
        lib.darshan_free(buf[0])
    segs = np.frombuffer(b"".join(blocks), dtype=SEGMENT) if blocks else np.zeros(0, dtype=SEGMENT)
    per = np.array([w + rd for w, rd in counts], dtype=np.int64)
    record = np.repeat(np.arange(len(ids), dtype=np.int64), per)
    # within a record the writes come first, then the reads
    is_write = (
        np.concatenate([np.r_[np.ones(w, bool), np.zeros(rd, bool)] for w, rd in counts])
        if counts
        else np.zeros(0, bool)
    )
    return DxtTable(
        name=mod,
        record=record,
        is_write=is_write,
        segments=segs,
        rec_ids=np.array(ids, dtype=np.uint64),
        rec_ranks=np.array(ranks, dtype=np.int64),
        rec_hosts=hosts,
    )


def _lustre(B: Any, log: dict[str, Any]) -> LustreTable:
    ids, ranks, size, count, comps, osts = [], [], [], [], [], []
    names = list(B.counter_names("LUSTRE_COMP"))
    i_size, i_count = names.index("LUSTRE_COMP_STRIPE_SIZE"), names.index("LUSTRE_COMP_STRIPE_COUNT")
    while (rec := B._log_get_lustre_record(log, dtype="numpy")) is not None:
        parts = rec["components"]
        ids.append(int(rec["id"]))
        ranks.append(int(rec["rank"]))
        comps.append(len(parts))
        size.append(int(parts[0]["counters"][i_size]) if parts else -1)
        count.append(int(parts[0]["counters"][i_count]) if parts else -1)
        osts.append(
            np.unique(np.concatenate([p["ost_ids"] for p in parts])) if parts else np.zeros(0, np.int64)
        )
    return LustreTable(
        ids=np.array(ids, dtype=np.uint64),
        ranks=np.array(ranks, dtype=np.int64),
        stripe_size=np.array(size, dtype=np.int64),
        stripe_count=np.array(count, dtype=np.int64),
        components=np.array(comps, dtype=np.int64),
        osts=osts,
    )


#: HEATMAP record ids are name hashes of "heatmap:<module>" (PyDarshan's table)
HEATMAP_NAMES = {
    16592106915301738621: "POSIX",
    3989511027826779520: "STDIO",
    3668870418325792824: "MPIIO",
    1597927878319380788: "DFS",
    4131494093108637317: "DAOS",
}


def _heatmap(B: Any, log: dict[str, Any]) -> HeatmapTable:
    mods, ranks, widths, reads, writes = [], [], [], [], []
    while (rec := B._log_get_heatmap_record(log)) is not None:
        mods.append(HEATMAP_NAMES.get(int(rec["id"]), str(rec["id"])))
        ranks.append(int(rec["rank"]))
        widths.append(float(rec["bin_width_seconds"]))
        reads.append(np.asarray(rec["read_bins"], dtype=np.int64))
        writes.append(np.asarray(rec["write_bins"], dtype=np.int64))
    return HeatmapTable(
        module=mods,
        ranks=np.array(ranks, dtype=np.int64),
        bin_width_s=np.array(widths, dtype=np.float64),
        read_bins=reads,
        write_bins=writes,
    )
