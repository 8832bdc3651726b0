"""Cheap checks a command makes before it loads its engine.

A typo'd path or run id is refused in a few milliseconds with the same one line the engine
would print, instead of after a second of importing the trace engine, LangGraph or SciPy.
Each function returns the refusal (one line) or ``None``; none imports anything heavy.
"""

from __future__ import annotations

import os
from collections.abc import Iterable
from pathlib import Path

from dftune.core.home import dftune_home

#: Kept equal to the workspace's names (tests/unit/test_cli_start.py checks it).
RUNS_DIRNAME = "runs"
CAMPAIGNS_DIRNAME = "campaigns"
CAMPAIGN_META = "campaign.json"
CHECKPOINT_FILE = "checkpoints.sqlite"


def missing_input(paths: Iterable[str | Path]) -> str | None:
    """The first trace/log path that does not exist (the trace reader's own wording)."""
    for p in paths:
        if not os.path.exists(p):
            return f"{p}: no such file or directory"
    return None


def bad_data_dir(dirs: Iterable[str | Path]) -> str | None:
    """A ``--data-dir`` that is not an existing folder: a typo is not a filesystem."""
    for d in dirs:
        if not os.path.exists(d):
            return f"--data-dir {d}: no such file or directory"
        if not os.path.isdir(d):
            return f"--data-dir {d}: not a directory"
    return None


def missing_spec(paths: Iterable[str | Path]) -> str | None:
    """The first workload spec that is not a file (the spec loader's wording)."""
    for p in paths:
        if not os.path.isfile(p):
            return f"{p}: no such file" if not os.path.exists(p) else f"{p}: not a file"
    return None


def unknown_run(run_id: str, *, campaigns: bool = True, checkpoints: bool = False) -> str | None:
    """A run id with no run folder (nor, when ``campaigns``, a campaign of that id).

    With ``checkpoints`` the run must also hold saved graph states (resume, approve, history,
    replay). Ids that are not a single safe path component are left to the workspace, which
    explains what is wrong with them."""
    if not run_id or "/" in run_id or run_id.startswith(".") or ".." in run_id:
        return None
    home = _home()
    if home is None:
        return None
    if campaigns and (home / CAMPAIGNS_DIRNAME / run_id / CAMPAIGN_META).is_file():
        return None
    runs = home / RUNS_DIRNAME
    run = runs / run_id
    if checkpoints:
        if (run / CHECKPOINT_FILE).is_file():
            return None
        return f"no run {run_id!r} with saved graph states under {runs}"
    if run.is_dir():
        return None
    return f"no run {run_id!r} under {runs}"


def _home() -> Path | None:
    try:
        return dftune_home()
    except OSError:  # an unwritable home: the workspace says so properly
        return None
