"""The I/O semantics every dftune number rests on (docs/analyze.md, "What each number means").

Kept as plain data so the SQL that implements them is generated from one place and the
docs/analyze.md can quote them.  Changing anything here changes what users' numbers mean.
"""

from __future__ import annotations

from typing import Final

#: Event categories that are I/O calls (compared case-insensitively).
IO_CATEGORIES: Final = ("POSIX", "STDIO")

READ_CALLS: Final = ("read", "pread", "pread64", "readv", "preadv", "preadv2", "fread")
WRITE_CALLS: Final = ("write", "pwrite", "pwrite64", "writev", "pwritev", "pwritev2", "fwrite")
SYNC_CALLS: Final = ("fsync", "fdatasync", "sync", "msync")
#: Every other POSIX/STDIO call is metadata.
FAMILIES: Final = ("read", "write", "metadata", "sync")

#: Calls whose bytes are ``ret * size`` (items times item size) rather than ``ret``.
ITEM_CALLS: Final = ("fread", "fwrite")

#: Calls that carry their own ``offset`` and leave the file position untouched.
POSITIONAL_CALLS: Final = (
    "pread",
    "pread64",
    "preadv",
    "preadv2",
    "pwrite",
    "pwrite64",
    "pwritev",
    "pwritev2",
)
#: Calls that advance the file position by the bytes they moved.
STREAM_CALLS: Final = ("read", "readv", "fread", "write", "writev", "fwrite")
#: Calls that (re)start a stream at offset 0 (append mode makes the position unknown).
OPEN_CALLS: Final = (
    "open",
    "open64",
    "openat",
    "openat64",
    "creat",
    "creat64",
    "fopen",
    "fopen64",
    "freopen",
    "freopen64",
    "fdopen",
)
#: lseek-style calls: ``ret`` is the resulting offset.
LSEEK_CALLS: Final = ("lseek", "lseek64", "llseek", "_llseek")
#: fseek-style calls: ``ret`` is a status, so only SEEK_SET offsets are known.
FSEEK_CALLS: Final = ("fseek", "fseeko", "fseeko64", "fsetpos", "fsetpos64")
REWIND_CALLS: Final = ("rewind",)
#: O_APPEND on Linux; writes then land at end of file, an offset the trace does not show.
O_APPEND: Final = 0o2000
SEEK_SET: Final = 0

#: An access whose start offset is not a multiple of this is misaligned (Drishti's
#: alignment check, with the common 4 KiB filesystem block; stripe sizes are multiples).
ALIGNMENT_BYTES: Final = 4096

#: A transfer smaller than this is "small".
SMALL_IO_BYTES: Final = 1 << 20

KIB: Final = 1 << 10
MIB: Final = 1 << 20
#: Transfer-size histogram bins: (label, lower bound inclusive).  Upper bound is the next lower bound.
SIZE_BINS: Final = (
    ("<4K", 0),
    ("4-16K", 4 * KIB),
    ("16-64K", 16 * KIB),
    ("64-256K", 64 * KIB),
    ("256K-1M", 256 * KIB),
    ("1-4M", 1 * MIB),
    ("4-16M", 4 * MIB),
    ("16-64M", 16 * MIB),
    (">=64M", 64 * MIB),
)

#: Mean transfer size below which a workload's I/O is op-count-bound (many tiny ops:
#: only coalescing helps, striping/ROMIO do nothing); at or above BANDWIDTH_BOUND_BYTES it
#: is bandwidth-bound.  In between it is "mixed".
OP_COUNT_BOUND_BYTES: Final = 64 * KIB
BANDWIDTH_BOUND_BYTES: Final = 1 * MIB

#: Application-level event names/categories treated as compute when measuring how much
#: I/O is hidden behind computation (dfanalyzer's unoverlapped ``u_*`` time).
COMPUTE_NAME_PATTERN: Final = "%compute%"
COMPUTE_CATEGORIES: Final = ("compute",)


def sql_list(items: tuple[str, ...]) -> str:
    """Render a tuple of names as a SQL ``IN`` list."""
    return "(" + ", ".join(f"'{i}'" for i in items) + ")"


def family_sql(name_col: str = "name") -> str:
    """SQL CASE mapping an I/O call name to its family."""
    return (
        f"CASE WHEN {name_col} IN {sql_list(READ_CALLS)} THEN 'read' "
        f"WHEN {name_col} IN {sql_list(WRITE_CALLS)} THEN 'write' "
        f"WHEN {name_col} IN {sql_list(SYNC_CALLS)} THEN 'sync' ELSE 'metadata' END"
    )


def size_bin_sql(bytes_col: str = "nbytes") -> str:
    """SQL CASE giving the index of the size bin of a transfer (NULL when unknown)."""
    parts = [f"WHEN {bytes_col} IS NULL THEN NULL"]
    for idx in range(len(SIZE_BINS) - 1, 0, -1):
        parts.append(f"WHEN {bytes_col} >= {SIZE_BINS[idx][1]} THEN {idx}")
    return "CASE " + " ".join(parts) + " ELSE 0 END"
