"""Whether a program's MPI-IO calls are collective: ROMIO's collective buffering serves nothing else.

ROMIO aggregates only collective calls (``MPI_File_write_all``, ``read_all``, ...): for
independent calls, ``romio_cb_read``/``romio_cb_write``, ``cb_buffer_size``, ``cb_nodes`` and
``cb_config_list`` change nothing (ROMIO Users Guide, the collective-buffering hints; the
catalog's entries require "collective MPI-IO calls"). Two-phase I/O gives each aggregator its
own contiguous file domain (:mod:`dftune.tools.guards.library`). So when the processes sharing a
file each access pieces that lie among the other processes' pieces, while ``romio_cb_<direction>``
in effect is ``automatic`` (ROMIO then aggregates exactly such interleaved accesses) or
``enable``, the program's calls were independent. A collective-buffering change is then estimated
at nothing until a kept change, such as switching to collective calls, shows otherwise; it stays
proposed, and is measured when nothing better is left.
"""

from __future__ import annotations

from collections.abc import Mapping, Sequence

from dftune.tools.guards.arms import Arm
from dftune.tools.guards.library import sharing

#: the hint that turns collective buffering on or off for each direction
CB_HINT = {"read": "romio_cb_read", "write": "romio_cb_write"}
#: values under which ROMIO aggregates interleaved collective accesses
AGGREGATING = ("automatic", "enable")
#: share of a direction's calls on shared files that must lie among other processes' pieces
INTERLEAVED_SHARE = 0.5
#: what a strategy's catalog entry says when it acts on collective calls only
REQUIREMENT = "collective mpi-io calls"


def needs_collective_calls(requires: Sequence[str]) -> bool:
    return any(REQUIREMENT in need.lower() for need in requires)


def collective_gap(arm: Arm, in_effect: Sequence[Mapping[str, str]]) -> str | None:
    """Why a collective-buffering change acts on nothing in this configuration, or None: in every
    direction with calls on shared files, they lie among the other processes' pieces while the hint
    in effect would have aggregated collective calls (see the module docstring).

    ``in_effect``: the hint blocks ROMIO printed for this configuration; without them nothing is
    inferred (with ``romio_cb_<direction>=disable`` collective calls are served independently too,
    and a hint turning it back on may well matter)."""
    evidence = []
    for direction, hint in CB_HINT.items():
        seen = sharing(arm, direction)
        if seen is None or seen.share is None:
            continue
        values = {b[hint] for b in in_effect if hint in b}
        if not values or not values <= set(AGGREGATING) or seen.share < INTERLEAVED_SHARE:
            return None
        evidence.append(
            f"{seen.share:.0%} of the {seen.calls:,} {direction} calls on shared files (the most on "
            f"{seen.busiest}) lie among another process's pieces, with {hint}={'|'.join(sorted(values))} "
            "in effect"
        )
    if not evidence:
        return None
    return (
        "the program's MPI-IO calls are independent: "
        + "; ".join(evidence)
        + " (two-phase I/O gives each aggregator its own contiguous file domain), and ROMIO's "
        "collective buffering serves collective calls only (ROMIO Users Guide)"
    )
