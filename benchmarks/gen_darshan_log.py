"""Build a large, real-format Darshan log with libdarshan-util's own writer (the darshan-convert path).

No Darshan runtime is installable here (darshan-runtime is not packaged for Debian and needs an
MPI build), so this takes the POSIX records of a real log PyDarshan ships (sample-badost: 2048
ranks, one file each, real counters from a Lustre run) and writes them again, re-keyed, as
RANKS x FILES per-rank records (as a log written with DARSHAN_DISABLE_SHARED_REDUCTION, or by a
job whose every rank opens its own files), through darshan_log_create / put_job / put_mod.  The
counters are real, their combination is synthetic: the log measures reading and mapping speed at
scale, not a workload.  It has no name records (their hash table cannot be built from Python),
so files are named record:<id>.

    python benchmarks/gen_darshan_log.py OUT.darshan [--ranks 512] [--files 1000]

``--shared`` writes each file once as a reduced record (rank -1, every rank opened it), as
Darshan's shared-file reduction does; ``--meta-time S`` sets each record's POSIX_F_META_TIME.
"""

from __future__ import annotations

import argparse
import contextlib
import os
import time
from pathlib import Path

import darshan
import numpy as np
from darshan.backend import cffi_backend as B

DECLS = """
void* darshan_log_create(char *name, int comp_type, int partial_flag);
int darshan_log_put_job(void* fd, struct darshan_job *job);
int darshan_log_put_exe(void* fd, char *buf);
int darshan_log_put_mounts(void* fd, struct darshan_mnt_info *mnt_data_array, int count);
int darshan_log_put_namehash(void* fd, void *hash);
int darshan_log_put_mod(void* fd, int mod_id, void *mod_buf, int mod_buf_sz, int ver);
"""
ZLIB = 0


def _declare() -> None:
    with contextlib.suppress(Exception):  # already declared in this process
        B.ffi.cdef(DECLS)


def build(
    out: Path, ranks: int, files: int, *, shared: bool = False, meta_time_s: float | None = None
) -> dict[str, float]:
    """Write the log; returns what was written.  ``shared``: FILES reduced records (rank -1)
    instead of RANKS x FILES per-rank ones; ``meta_time_s``: every record's metadata seconds."""
    from dftune.tools.trace.darshan.reader import read_log

    _declare()
    source = Path(darshan.__file__).parent / "examples" / "example_logs" / "sample-badost.darshan"
    src = read_log(source)
    posix = src.tables["POSIX"]
    struct = "struct darshan_posix_file"
    n = files if shared else ranks * files
    take = np.arange(n) % len(posix)
    size = B.ffi.sizeof(struct)
    rec = np.zeros(
        n,
        dtype=np.dtype(
            [
                ("id", "<u8"),
                ("rank", "<i8"),
                ("c", "<i8", (posix.counters.shape[1],)),
                ("f", "<f8", (posix.fcounters.shape[1],)),
            ]
        ),
    )
    assert rec.dtype.itemsize == size, (rec.dtype.itemsize, size)
    rec["id"] = np.arange(1, n + 1, dtype=np.uint64) * np.uint64(
        0x9E3779B97F4A7C15
    )  # distinct, hash-like ids
    rec["rank"] = -1 if shared else np.repeat(np.arange(ranks), files)
    rec["c"] = posix.counters[take]
    rec["f"] = posix.fcounters[take]
    if meta_time_s is not None:
        rec["f"][:, posix.fnames.index("POSIX_F_META_TIME")] = meta_time_s
    if out.exists():
        out.unlink()
    lib = B.libdutil
    fd = lib.darshan_log_create(str(out).encode(), ZLIB, 0)
    if fd == B.ffi.NULL:
        raise SystemExit(f"darshan_log_create failed for {out}")
    job = B.ffi.new("struct darshan_job *")
    job.uid, job.nprocs, job.jobid = os.getuid(), ranks, 4242
    job.start_time_sec, job.end_time_sec = 1_700_000_000, 1_700_000_000 + 780
    meta = b"lib_ver=3.4.4\nh=romio_no_indep_rw=true;cb_nodes=4\n"
    B.ffi.memmove(job.metadata, meta, len(meta))
    assert lib.darshan_log_put_job(fd, job) == 0
    assert lib.darshan_log_put_exe(fd, B.ffi.new("char[]", b"/bin/generated-by-dftune-benchmark")) == 0
    assert lib.darshan_log_put_mounts(fd, B.ffi.NULL, 0) == 0
    assert lib.darshan_log_put_namehash(fd, B.ffi.NULL) == 0
    # the records are in libdarshan-util's current layout (it up-converted sample-badost's v3 ones when
    # reading): write them with the current module version, as a recent log carries it
    current = read_log(source.parent / "ior_hdf5_example.darshan")
    ver = int(current.modules["POSIX"]["ver"])
    data = rec.tobytes()
    buf = B.ffi.from_buffer(data)
    chunk = size * 4096  # libdarshan-util compresses in pieces; keep each call moderate
    for start in range(0, len(data), chunk):
        piece = min(chunk, len(data) - start)
        assert lib.darshan_log_put_mod(fd, B.mod_name_to_idx("POSIX"), buf + start, piece, ver) == 0
    lib.darshan_log_close(fd)
    return {"records": n, "ranks": ranks, "files": n, "bytes": out.stat().st_size}


def main() -> None:
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("out", type=Path)
    ap.add_argument("--ranks", type=int, default=512)
    ap.add_argument("--files", type=int, default=1000, help="files per rank")
    ap.add_argument("--shared", action="store_true", help="one reduced record per file, shared by all ranks")
    ap.add_argument("--meta-time", type=float, default=None, help="POSIX_F_META_TIME of every record (s)")
    args = ap.parse_args()
    t = time.perf_counter()
    info = build(args.out, args.ranks, args.files, shared=args.shared, meta_time_s=args.meta_time)
    print(
        f"{args.out}: {info['records']:,} POSIX records, "
        f"{args.ranks} ranks, {info['bytes'] / 2**20:.1f} MiB, "
        f"written in {time.perf_counter() - t:.1f} s"
    )


if __name__ == "__main__":
    main()
