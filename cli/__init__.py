"""The ``dftune`` command line.  Thin: parse options, call tools, hand results to renderers.

One module per command group (``analysis``, ``tuning``, ``environment``, ``kb``, ``papers``), all on
the one Typer app of ``common``; importing this package registers every command. Heavy engines
are imported inside each command, after its arguments are checked, so a refusal or ``--help`` is
fast.
"""

from __future__ import annotations

import sys

from dftune.cli import analysis, environment, kb, papers, tuning
from dftune.cli.common import EXIT_BAD_INPUT, EXIT_RUN_FAILED, app


def main() -> None:  # pragma: no cover - console entry point
    """Console entry: any unexpected failure is still one line on stderr (traceback with DFTUNE_DEBUG=1)."""
    import os

    try:
        app()
    except Exception as exc:
        if os.environ.get("DFTUNE_DEBUG"):
            raise
        from dftune.core.safetext import one_line_text

        sys.stderr.write(
            f"dftune: internal error: {type(exc).__name__}: "
            f"{one_line_text(exc)} (set DFTUNE_DEBUG=1 for a traceback)\n"
        )
        raise SystemExit(1) from None
