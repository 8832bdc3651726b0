"""Optional parts of dftune and the one line that names the extra to install.

The base install reads dftracer traces, diagnoses and tunes; reading Darshan logs (PyDarshan) and
serving MCP (the MCP SDK) are extras (``pip install 'dftune[darshan]'``, ``'dftune[mcp]'``), so a
user who needs neither does not install them. A missing extra is a user error, not a crash.
"""

from __future__ import annotations

import importlib.util

from dftune.core.errors import DftuneError


class MissingExtra(DftuneError):
    """An optional dependency this command needs is not installed (one line: what to install)."""


def require(module: str, extra: str, needed_for: str) -> None:
    """Raise :class:`MissingExtra` unless ``module`` can be imported."""
    try:
        found = importlib.util.find_spec(module) is not None
    except (ImportError, ValueError):
        found = False
    if not found:
        raise MissingExtra(
            f"{needed_for} needs the optional '{extra}' extra, which is not installed: "
            f"pip install 'dftune[{extra}]' (in a checkout: .venv/bin/pip install -e '.[{extra}]')"
        )
