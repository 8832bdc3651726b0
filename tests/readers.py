"""Run the trace engine with one reader forced: the native scanner or the DuckDB path."""

from __future__ import annotations

import os
from pathlib import Path
from typing import Any

from dftune.tools.trace import analyze, native


def analyze_with(paths: list[Path], mode: str, **kw: Any) -> dict[str, Any]:
    """``analyze(paths, **kw)`` as JSON with ``mode`` ("native" | "duckdb") forced, the env restored after."""
    old = os.environ.get(native.ENV)
    os.environ[native.ENV] = "1" if mode == "native" else "0"
    try:
        doc: dict[str, Any] = analyze(paths, **kw).to_json_dict()
        return doc
    finally:
        if old is None:
            del os.environ[native.ENV]
        else:
            os.environ[native.ENV] = old
