"""The one error base: a problem the user can fix, told in one line.

Every error a person can act on (a bad trace, spec, catalog, KB file, option, run id)
derives from :class:`DftuneError`. Both front ends (the CLI and the MCP server) catch this
one type and print :func:`one_line` of it, so a message reads the same everywhere.
"""

from __future__ import annotations

import errno
import sqlite3
from pathlib import Path


class DftuneError(Exception):
    """A user-fixable problem; ``str(exc)`` is the whole message (it names the file or option)."""


def one_line(exc: BaseException, limit: int = 1000) -> str:
    """The message on one line: newlines folded, length capped (a terminal or a JSON-RPC error)."""
    text = " ".join(str(exc).split()) or type(exc).__name__
    return text if len(text) <= limit else text[: limit - 1] + "…"


def os_error_line(exc: OSError, limit: int = 300) -> str:
    """An OS error as a short line: a tree copy's error (``shutil.Error``, a list of every file that
    failed, a thousand characters when a tier fills up) as its first failure and how many more."""
    import shutil

    failures = exc.args[0] if isinstance(exc, shutil.Error) and exc.args else None
    if isinstance(failures, list) and failures and isinstance(failures[0], tuple) and len(failures[0]) == 3:
        src, _dst, why = failures[0]
        more = f" (and {len(failures) - 1} more file(s))" if len(failures) > 1 else ""
        # a path past PATH_MAX is 4 KiB: its middle goes, so what went wrong still shows
        return one_line(Exception(f"{_elide(str(src), 100)}: {_elide(str(why), 150)}{more}"), limit)
    return one_line(exc, limit)


def _elide(text: str, limit: int) -> str:
    """``text`` with its middle cut to ``limit`` characters (a path's start and its file name stay)."""
    if len(text) <= limit:
        return text
    half = (limit - 1) // 2
    return text[:half] + "…" + text[-half:]


def os_error_message(exc: OSError) -> str:
    """What a front end says of an OS error no layer named: the file and what the system said,
    or a tree copy's error as its first failure and a count (never the list it carries)."""
    import shutil

    if isinstance(exc, shutil.Error):
        return os_error_line(exc)
    where = _elide(str(getattr(exc, "filename", None) or "input"), 300)  # never a 20 MB path echoed
    return f"{where}: {exc.strerror or os_error_line(exc)}"


class StorageError(DftuneError):
    """A file or database dftune keeps could not be written (full disk, read-only folder, I/O
    error). Nothing half-done is kept: free space or make the folder writable, then resume."""


#: errno values that mean "the storage refused", not "the input is wrong".
STORAGE_ERRNOS = frozenset({errno.ENOSPC, errno.EROFS, errno.EDQUOT, errno.EIO, errno.EACCES, errno.EPERM})
_SQLITE_STORAGE = (
    "disk is full",
    "readonly database",
    "disk i/o error",
    "unable to open database",
    "attempt to write a readonly",
)


def is_storage_error(exc: BaseException) -> bool:
    """A full disk, a read-only or unwritable folder, or an I/O error (as OSError or from SQLite)."""
    if isinstance(exc, StorageError):
        return True
    if isinstance(exc, OSError):
        return exc.errno in STORAGE_ERRNOS
    if isinstance(exc, sqlite3.OperationalError):
        return any(m in str(exc).lower() for m in _SQLITE_STORAGE)
    return False


def storage_error(exc: BaseException, path: str | Path | None = None) -> StorageError:
    """One line naming the path and what the storage said (``[Errno 28] No space left ...``)."""
    where = str(path or getattr(exc, "filename", None) or "?")
    what = (exc.strerror if isinstance(exc, OSError) else None) or str(exc) or type(exc).__name__
    return StorageError(f"cannot write {where}: {what}")
