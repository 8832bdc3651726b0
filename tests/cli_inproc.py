"""The `dftune` command line, run in-process through typer's runner.

The unit tier checks what the command line prints and returns without starting a Python process
per call (a subprocess costs a second of CPU here, several under load). ``dftune(*args)`` returns
what ``subprocess.run`` would (``returncode``, ``stdout``, ``stderr``), including the one line an
unexpected exception becomes in ``dftune.cli.main``. The end-to-end tier still starts the real
executable.
"""

from __future__ import annotations

import contextlib
import os
import subprocess
from collections.abc import Mapping
from pathlib import Path

from typer.testing import CliRunner


def dftune(
    *args: str, cwd: Path | str | None = None, env: Mapping[str, str] | None = None
) -> subprocess.CompletedProcess[str]:
    """Run ``dftune ARGS...`` in this process; ``env`` adds variables for the call only."""
    from dftune.cli import app
    from dftune.core.safetext import one_line_text

    runner = CliRunner()
    with contextlib.chdir(cwd) if cwd is not None else contextlib.nullcontext():
        result = runner.invoke(app, list(args), env=dict(env or {}), catch_exceptions=True)
    stderr = result.stderr
    code = result.exit_code
    exc = result.exception
    if exc is not None and not isinstance(exc, SystemExit):
        if os.environ.get("DFTUNE_DEBUG"):
            raise exc
        stderr += (
            f"dftune: internal error: {type(exc).__name__}: {one_line_text(exc)} "
            "(set DFTUNE_DEBUG=1 for a traceback)\n"
        )
        code = 1
    return subprocess.CompletedProcess(["dftune", *args], code, result.stdout, stderr)
