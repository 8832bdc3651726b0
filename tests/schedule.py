"""Longest work first: the order in which pytest-xdist hands out the suite's work units.

Under ``--dist loadgroup`` a work unit is one test, or every test of one ``xdist_group``; each
worker takes the next unit when it is free. Handed out in file order, a two-minute test that
comes last keeps one worker busy while the other sits idle: the tier ends when its slowest
tail does. Handing out the longest units first (Graham's LPT rule for scheduling on identical
machines) lets the short tests fill in at the end, so the workers finish close together.

The expected times come from ``tests/durations.json``, which ``make bench-suite`` writes from a
measured run (``benchmarks/bench_suite.py --write-durations``). A test missing from it (new, or
under ``DEFAULT_S`` when measured) counts as ``DEFAULT_S``: a stale file only makes the order
less good, never a test wrong. ``make`` passes ``--no-loadscope-reorder`` so xdist keeps this
order instead of its own (largest group first).
"""

from __future__ import annotations

import json
from collections.abc import Iterable, Sequence
from pathlib import Path
from typing import Protocol, TypeVar

DURATIONS = Path(__file__).resolve().parent / "durations.json"
#: the time a test not in the durations file is expected to take (most tests take less)
DEFAULT_S = 0.5


class _Item(Protocol):
    nodeid: str

    def get_closest_marker(self, name: str) -> object: ...


ItemT = TypeVar("ItemT", bound=_Item)


def load_durations(path: Path = DURATIONS) -> dict[str, float]:
    """Test node id (without any ``@group`` suffix) -> seconds; empty when there is no file."""
    try:
        data = json.loads(path.read_text())
    except (OSError, ValueError):
        return {}
    return {str(k): float(v) for k, v in data.get("tests", {}).items()}


def base_nodeid(nodeid: str) -> str:
    """The node id without the ``@group`` suffix pytest-xdist adds to a grouped test."""
    head, sep, tail = nodeid.rpartition("@")
    return head if sep and tail and not any(c in tail for c in "[]:/") else nodeid


def work_unit(item: _Item) -> str:
    """What xdist's loadgroup hands out as one piece: the test's group (the ``@`` suffix xdist put
    on its node id, several groups joined), or the test itself."""
    if item.get_closest_marker("xdist_group") is None:
        return item.nodeid
    return "@" + item.nodeid.rpartition("@")[2]


def longest_first(items: Sequence[ItemT], durations: dict[str, float]) -> list[ItemT]:
    """``items`` with each work unit's tests together, the units ordered by expected time
    (longest first; ties keep the collection order)."""
    units = [work_unit(item) for item in items]
    totals: dict[str, float] = {}  # in the order each unit is first collected
    for unit, item in zip(units, items, strict=True):
        totals[unit] = totals.get(unit, 0.0) + durations.get(base_nodeid(item.nodeid), DEFAULT_S)
    rank = {u: n for n, u in enumerate(sorted(totals, key=lambda u: -totals[u]))}  # stable: ties keep it
    return [item for _, item in sorted(zip(units, items, strict=True), key=lambda p: rank[p[0]])]


def durations_from(cases: Iterable[tuple[str, float]], floor_s: float = DEFAULT_S) -> dict[str, float]:
    """The durations file's ``tests`` table from measured (node id, seconds): only tests that
    take longer than ``floor_s`` (the others are expected at ``DEFAULT_S``)."""
    return {base_nodeid(n): round(t, 1) for n, t in sorted(cases) if t > floor_s}
