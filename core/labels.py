"""What the renderers call things (resources/report/labels.toml): trace-view columns, the trace
metrics two runs are compared on, the knowledge base's sections and verdict labels."""

from __future__ import annotations

import functools
from typing import Literal

from dftune.core import resource
from dftune.core.domain.kb import Scope
from dftune.core.domain.verdicts import Verdict
from dftune.core.model import StrictModel

Unit = Literal["count", "bytes", "s", "pct", "mib_s", "metric"]
Better = Literal["lower", "higher"] | None


class TraceMetric(StrictModel):
    #: a path into the analysis ("read.bytes" = analysis.read.bytes)
    key: str
    label: str
    unit: Unit
    better: Better = None


class Compared(StrictModel):
    metrics: tuple[TraceMetric, ...]


class KbSection(StrictModel):
    scope: Scope
    title: str
    blurb: str


class KbLabels(StrictModel):
    columns: tuple[str, ...]
    section: tuple[KbSection, ...]
    verdict: dict[Verdict, str]


class Labels(StrictModel):
    #: per trace view, the columns shown in the terminal: (key, header)
    view: dict[str, tuple[tuple[str, str], ...]]
    compare: Compared
    kb: KbLabels


@functools.cache
def labels() -> Labels:
    return resource.load("report/labels.toml", Labels)
