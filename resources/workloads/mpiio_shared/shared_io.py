"""Example workload: MPI ranks overwrite, then read back, one shared restart file in small records.

The pattern (an "N-1 strided" checkpoint, as particle and mesh codes write it): every rank owns
``--records`` records of ``--record-bytes`` bytes, and record ``k`` of rank ``r`` lives at file
offset ``(k * nranks + r) * record_bytes``, so the ranks' records interleave all through the
file.  Each rank describes its records once with a strided file view (an MPI vector type),
overwrites the previous checkpoint in place with one MPI-IO call, then reads its records
back the same way and checks every byte.  ``--setup-only`` creates that previous checkpoint.

What is wrong with it: the accesses are independent calls (``MPI_File_write`` /
``MPI_File_read``) and the job passes ``romio_ds_write=disable`` (a hint recommended for
Lustre, carried over to a file system where it hurts), so ROMIO issues one ``pwrite`` per
1 KiB record; the ranks' records share file pages, so the ranks contend for the same pages
(and, with a cold page cache, every partial-page write first reads its page).  Knobs that fix
it without doing less or changing the access pattern: ``--ds-write automatic|enable`` (ROMIO
data sieving: each rank writes 512 KiB blocks under a file lock, in turns) and
``--collective 1`` (the same view and bytes through ``MPI_File_write_all`` /
``MPI_File_read_all``: ROMIO's two-phase collective buffering lets aggregators write large
contiguous pieces).  ``--cb-write``/``--cb-read``/``--cb-nodes``/``--cb-config-list``/
``--cb-buffer-size``/``--ds-read`` set the other ROMIO hints (on one host ROMIO's default
``cb_config_list`` of ``*:1`` caps ``cb_nodes`` at one
aggregator).  Every hint goes to ``MPI_File_open`` in an
``MPI_Info``; "default" leaves it unset.

The hints in effect (``MPI_File_get_info``) are written to ``<data>/hints-in-effect.json``, so
a run can show that a hint took effect.  Rank 0 prints the I/O volume and, as the metric,
``io_time_s`` (the slowest rank's write + read time).
"""

from __future__ import annotations

import argparse
import json
import os

import numpy as np
from mpi4py import MPI

#: command-line option -> ROMIO hint name
HINTS = {
    "cb_write": "romio_cb_write",
    "cb_read": "romio_cb_read",
    "cb_nodes": "cb_nodes",
    "cb_config_list": "cb_config_list",
    "cb_buffer_size": "cb_buffer_size",
    "ds_write": "romio_ds_write",
    "ds_read": "romio_ds_read",
}
UNSET = "default"


def record_bytes(rank: int, records: int, size: int) -> np.ndarray:
    """The rank's records, distinct per rank and record so a misplaced byte is caught."""
    base = np.arange(records * size, dtype=np.uint64).reshape(records, size)
    return ((base * 2654435761 + rank * 40503) % 251).astype(np.uint8)


def main() -> None:
    ap = argparse.ArgumentParser(description=__doc__)
    ap.add_argument("--data", required=True)
    ap.add_argument("--ranks", type=int, default=0, help="expected MPI ranks (0: any)")
    ap.add_argument("--records", type=int, default=8192)
    ap.add_argument("--record-bytes", type=int, default=1024)
    ap.add_argument("--collective", type=int, choices=(0, 1), default=0)
    ap.add_argument("--setup-only", action="store_true", help="only create the previous checkpoint")
    for opt in HINTS:
        ap.add_argument("--" + opt.replace("_", "-"), default=UNSET)
    args = ap.parse_args()

    comm = MPI.COMM_WORLD
    rank, nranks = comm.Get_rank(), comm.Get_size()
    if args.ranks and nranks != args.ranks:
        # e.g. an mpirun of another MPI than the one mpi4py loaded: every process is a singleton
        raise SystemExit(f"expected {args.ranks} MPI ranks, this communicator has {nranks}")
    path = os.path.join(args.data, "restart.dat")
    nbytes = nranks * args.records * args.record_bytes
    if args.setup_only:  # the previous checkpoint, which every run overwrites in place
        if rank == 0:
            os.makedirs(args.data, exist_ok=True)
            if not os.path.exists(path) or os.path.getsize(path) != nbytes:
                with open(path + ".tmp", "wb") as blank:
                    blank.write(bytes(nbytes))
                os.replace(path + ".tmp", path)
        comm.Barrier()
        return

    info = MPI.Info.Create()
    for opt, hint in HINTS.items():
        value = str(getattr(args, opt))
        if value != UNSET:
            info.Set(hint, value)

    rec = args.record_bytes
    mine = record_bytes(rank, args.records, rec)
    filetype = MPI.BYTE.Create_vector(args.records, rec, nranks * rec)
    filetype.Commit()

    def open_view(mode: int) -> MPI.File:
        fh = MPI.File.Open(comm, path, mode, info)
        fh.Set_view(rank * rec, MPI.BYTE, filetype)
        return fh

    # write phase
    comm.Barrier()
    t0 = MPI.Wtime()
    fh = open_view(MPI.MODE_CREATE | MPI.MODE_WRONLY)
    if args.collective:
        fh.Write_all(mine)
    else:
        fh.Write(mine)
    fh.Sync()
    in_effect = fh.Get_info()
    fh.Close()
    write_s = MPI.Wtime() - t0

    # read phase: the same view, every byte checked
    back = np.empty_like(mine)
    comm.Barrier()
    t0 = MPI.Wtime()
    fh = open_view(MPI.MODE_RDONLY)
    if args.collective:
        fh.Read_all(back)
    else:
        fh.Read(back)
    fh.Close()
    read_s = MPI.Wtime() - t0
    filetype.Free()

    bad = int(np.count_nonzero(back != mine))
    bad = comm.allreduce(bad, op=MPI.SUM)
    write_s = comm.allreduce(write_s, op=MPI.MAX)
    read_s = comm.allreduce(read_s, op=MPI.MAX)
    if rank == 0:
        hints = dict(in_effect.items())
        with open(os.path.join(args.data, "hints-in-effect.json"), "w", encoding="utf-8") as out:
            json.dump(
                {
                    "ranks": nranks,
                    "collective": args.collective,
                    "requested": dict(info.items()),
                    "in_effect": hints,
                },
                out,
                indent=1,
                sort_keys=True,
            )
        print(
            f"ranks {nranks} records {args.records} record_bytes "
            f"{rec} bytes_written {nbytes} bytes_read {nbytes}"
        )
        print(f"mismatched_bytes {bad}")
        print(f"write_time_s {write_s:.6f}")
        print(f"read_time_s {read_s:.6f}")
        print(f"io_time_s {write_s + read_s:.6f}")
    in_effect.Free()
    info.Free()
    if bad:
        comm.Abort(3)


if __name__ == "__main__":
    main()
