"""Where the knowledge base lives and how it fails; its records are in :mod:`dftune.core.domain.kb`."""

from __future__ import annotations

from pathlib import Path

from dftune.core.errors import DftuneError
from dftune.core.home import dftune_home


class KbError(DftuneError):
    """The knowledge-base file cannot be used (e.g. it was written by a newer dftune)."""


def default_db_path() -> Path:
    """``$DFTUNE_HOME/kb/opt_kb.sqlite``."""
    return dftune_home() / "kb" / "opt_kb.sqlite"
