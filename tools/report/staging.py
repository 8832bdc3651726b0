"""How much of an experiment's replicates was staging, as the report says it.

A staged arm copies its data folder to a faster tier and its outputs back in every replicate; that
time is inside the metric (tools/runner/staging.py), and the reader should see its share, since a
permanent move of the data would pay it once instead.
"""

from __future__ import annotations

from typing import Any

#: The bench's note on a staged arm starts so (tools/runner/bench.py ``staging_note``).
STAGING_NOTE = "staged "


def staging_notes(experiment: dict[str, Any]) -> list[tuple[str, str]]:
    """(arm, what its staging cost) for each staged arm of an experiment record."""
    out = []
    for arm in ("reference", "candidate"):
        notes = (experiment.get(arm) or {}).get("notes") or []
        out += [(arm, str(n)) for n in notes if str(n).startswith(STAGING_NOTE)]
    return out
