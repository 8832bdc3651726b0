"""Trace engine: read dftracer traces (2.x and legacy 1.x) exactly and fast."""

from dftune.tools.trace.engine import analyze, analyze_runs
from dftune.tools.trace.errors import MultipleRunsError, TraceError
from dftune.tools.trace.model import SCHEMA, Analysis
