"""Optional parts of dftune and the one line that names the extra to install.

The base install reads dftracer traces, diagnoses and tunes; reading Darshan logs (PyDarshan),
serving MCP (the MCP SDK) and drawing the reports' plots (matplotlib) are extras
(``pip install 'dftune[darshan]'``, ``'dftune[mcp]'``, ``'dftune[plots]'``), so a user who needs
none of them does not install them. A missing extra is a user error, not a crash; a report whose
plots cannot be drawn still renders, with that same line in place of the plots.
"""

from __future__ import annotations

import importlib.util

from dftune.core.errors import DftuneError


class MissingExtra(DftuneError):
    """An optional dependency this command needs is not installed (one line: what to install)."""


def missing(module: str, extra: str, needed_for: str) -> str | None:
    """The one line naming the extra to install when ``module`` cannot be imported (None when it can)."""
    try:
        found = importlib.util.find_spec(module) is not None
    except (ImportError, ValueError):
        found = False
    if found:
        return None
    return (
        f"{needed_for} needs the optional '{extra}' extra, which is not installed: "
        f"pip install 'dftune[{extra}]' (in a checkout: .venv/bin/pip install -e '.[{extra}]')"
    )


def require(module: str, extra: str, needed_for: str) -> None:
    """Raise :class:`MissingExtra` unless ``module`` can be imported."""
    why = missing(module, extra, needed_for)
    if why:
        raise MissingExtra(why)
