"""Trace engine: read dftracer traces (2.x and legacy 1.x) exactly and fast."""

from dftune.tools.trace.engine import analyze
from dftune.tools.trace.errors import TraceError
from dftune.tools.trace.model import SCHEMA, Analysis

__all__ = ["SCHEMA", "Analysis", "TraceError", "analyze"]
