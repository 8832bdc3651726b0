"""Errors raised by trace reading: one line each, naming the file (and line) at fault."""

from __future__ import annotations

from dftune.core.errors import DftuneError


class TraceError(DftuneError):
    """A trace input problem the user must see; ``str()`` is the one-line message."""

    def __init__(self, path: str, reason: str, line: int | None = None) -> None:
        self.path = path
        self.line = line
        self.reason = reason
        where = f"{path}:{line}" if line is not None else path
        super().__init__(f"{where}: {reason}")


class MultipleRunsError(DftuneError):
    """The traces hold several separate runs: never merged silently (analyze them per run)."""

    def __init__(self, message: str, runs: int) -> None:
        self.runs = runs
        super().__init__(message)
