"""The one error base: a problem the user can fix, told in one line.

Every error a person can act on (a bad trace, spec, catalog, KB file, option, run id)
derives from :class:`DftuneError`. Both front ends (the CLI and the MCP server) catch this
one type and print :func:`one_line` of it, so a message reads the same everywhere.
"""

from __future__ import annotations


class DftuneError(Exception):
    """A user-fixable problem; ``str(exc)`` is the whole message (it names the file or option)."""


def one_line(exc: BaseException, limit: int = 1000) -> str:
    """The message on one line: newlines folded, length capped (a terminal or a JSON-RPC error)."""
    text = " ".join(str(exc).split()) or type(exc).__name__
    return text if len(text) <= limit else text[: limit - 1] + "…"
