"""How much of an experiment's replicates was staging, as the report says it.

A staged arm copies its data folder to a faster tier and its outputs back in every replicate; that
time is inside the metric (tools/runner/staging.py), and the reader should see its share, since a
permanent move of the data would pay it once instead.
"""

from __future__ import annotations

from dftune.core.domain.experiments import Experiment

#: The bench's note on a staged arm starts so (tools/runner/bench.py ``staging_note``).
STAGING_NOTE = "staged "


def staging_notes(e: Experiment) -> list[tuple[str, str]]:
    """(arm, what its staging cost) for each staged arm of an experiment."""
    arms = (("reference", e.reference), ("candidate", e.candidate))
    return [(arm, n) for arm, m in arms if m is not None for n in m.notes if n.startswith(STAGING_NOTE)]
