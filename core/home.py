"""Where dftune keeps its state: ``$DFTUNE_HOME`` or ``~/.local/share/dftune``."""

from __future__ import annotations

import os
from pathlib import Path


def dftune_home() -> Path:
    """Root of every piece of dftune state (runs, KB, vector store, caches)."""
    env = os.environ.get("DFTUNE_HOME")
    root = Path(env).expanduser() if env else Path.home() / ".local" / "share" / "dftune"
    root.mkdir(parents=True, exist_ok=True)
    return root
