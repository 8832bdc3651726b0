"""A search that learns within the run: which open proposals may be tried now, and which come back.

The rules, all from what this run measured (never from a proposal's name):

- A knob's values are walked nearest-first from the value the incumbent runs with, in each
  direction; the next value in a direction opens only once the nearer one was measured. A
  direction closes when its latest value, measured against the current incumbent, regressed or
  was refused by a guard: going further that way is not expected to help. A value the traces
  could not settle (``inconclusive``) closes it only when its numbers were worse beyond the
  noise: a guard's doubt says nothing about what the next value does to the metric (HDF5's
  chunk sizes, a buffer's size), and a next value that wins with the same doubt is held as a
  question for a person, never kept on its own.
- After a change is kept, earlier proposals that measured no gain against the older incumbent
  and whose category may interact with the kept one (``resources/reasoning/interactions.toml``)
  get one more experiment against the new incumbent (a new proposal, ``retry_of`` the old).
- When nothing else is open and the budget is not spent, every other proposal that measured no
  gain against an older incumbent gets that experiment too (``spare_retries``): the table says
  which changes are known to interact, not that the others cannot, and spare experiments measure
  what it does not list.
- Breadth before depth: a further value of a knob this run measured already waits while a knob
  not measured yet offers an option estimated at least as high (``breadth_first``).
- The workload's own settings before the system's: a system (L3) change waits while an
  application or library change is estimated at more than half of its application gain
  (``cheaper_layers_first``).
"""

from __future__ import annotations

import functools
from collections.abc import Collection, Sequence

from pydantic import BaseModel, ConfigDict, Field

from dftune.core import resource
from dftune.core.domain.experiments import Experiment
from dftune.core.domain.proposals import Proposal
from dftune.core.domain.run import TuningState
from dftune.tools.runner.spec import Knob, WorkloadSpec

#: a measured value that closes its direction (the search does not go further that way)
CLOSING = ("regression", "rejected", "failed")
#: how much higher a system change's estimate must be to go before the best workload or library change
L3_LEAD = 2.0


class Interaction(BaseModel):
    model_config = ConfigDict(extra="forbid", frozen=True)
    categories: tuple[int, int]
    reason: str = Field(min_length=1)


class Interactions(BaseModel):
    model_config = ConfigDict(extra="forbid", frozen=True)
    pair: tuple[Interaction, ...]

    def partners(self, category: int) -> dict[int, str]:
        """The categories that may interact with ``category``, with why."""
        out: dict[int, str] = {}
        for p in self.pair:
            a, b = p.categories
            if category in (a, b):
                out[b if a == category else a] = p.reason
        return out


@functools.cache
def interactions() -> Interactions:
    return resource.load("reasoning/interactions.toml", Interactions)


def _number(text: object) -> float | None:
    try:
        return float(str(text))
    except ValueError:
        return None


def _since_last_kept(experiments: Sequence[Experiment]) -> list[Experiment]:
    """The experiments measured against the current incumbent (those voided by a person's refusal of
    the change they stood on measured against another one, and say nothing about this one)."""
    kept = [i for i, e in enumerate(experiments) if e.kept]
    since = experiments[kept[-1] + 1 :] if kept else experiments
    return [e for e in since if e.voided_by is None]


def _knob_of(p: Proposal) -> str | None:
    if p.change.kind != "knob" or len(p.change.settings) != 1:
        return None
    return next(iter(p.change.settings))


def _frontier_of(knob: Knob, props: list[Proposal], current: float, closing: Collection[str]) -> set[str]:
    """Ids of the knob's proposals the search may try now (one value per direction)."""
    by_value: dict[float, list[Proposal]] = {}
    for p in props:
        v = _number(p.change.settings[knob.name])
        if v is not None:
            by_value.setdefault(v, []).append(p)
    allowed: set[str] = set()
    for direction in (1, -1):
        values = sorted(
            (v for v in by_value if (v - current) * direction > 0), key=lambda v: abs(v - current)
        )
        for v in values:
            group = by_value[v]
            open_ = [p.id for p in group if p.status == "proposed"]
            if open_:
                allowed.update(open_)
                break
            if any(p.id in closing for p in group):
                break
    return allowed


def _closes(e: Experiment) -> bool:
    """The measured value closes its direction (see the module's rules)."""
    if e.verdict == "inconclusive":
        return e.comparison is not None and e.comparison.verdict == "regression"
    return e.verdict in CLOSING


def searchable(open_: Sequence[Proposal], state: TuningState, spec: WorkloadSpec) -> list[Proposal]:
    """The open proposals the search may try now: every value of a knob beyond its frontier waits,
    unless the knowledge base measured a win for it here (a later run starts where the first one
    stopped: THREADS=8, kept by an earlier run, before THREADS=2 again)."""
    closing = {e.proposal_id for e in _since_last_kept(state.experiments) if _closes(e)}
    incumbent = state.incumbent.settings if state.incumbent else {}
    allowed: set[str] = set()
    gated: set[str] = set()
    for knob in spec.knobs:
        props = [p for p in state.proposals if _knob_of(p) == knob.name]
        current = _number(incumbent.get(knob.name, knob.default))
        values = [_number(p.change.settings[knob.name]) for p in props]
        if current is None or not props or any(v is None for v in values):
            continue  # not an ordered knob: every value may be tried
        # a model's value is its bet, tried when chosen (the experiment budget bounds it); the listed
        # values keep the nearest-first walk
        gated.update(p.id for p in props if p.proposed_by == "plan")
        allowed |= _frontier_of(knob, props, current, closing)
    # a value the knowledge base measured a win for is no blind step: it need not wait its turn
    return [p for p in open_ if p.id not in gated or p.id in allowed or _known_win(p)]


def _known_win(p: Proposal) -> bool:
    return p.app_impact_source == "kb" and p.app_impact_pct > 0


def reopened(state: TuningState) -> list[Proposal]:
    """After the latest experiment was kept: interacting no-gain proposals, as new proposals."""
    if not state.experiments or not state.experiments[-1].kept:
        return []
    last = state.experiments[-1]
    won = state.proposal(last.proposal_id)
    partners = interactions().partners(won.checklist)
    ids = {p.id for p in state.proposals}
    retried = {p.retry_of for p in state.proposals if p.retry_of and p.status == "proposed"}
    out: list[Proposal] = []
    for e in state.experiments[:-1]:
        p = state.proposal(e.proposal_id)
        origin = p.retry_of or p.id
        new_id = f"{origin}@opt{last.iteration}"  # as spare_retries names it: one id per kept change
        if (
            e.verdict != "no_change"
            or p.checklist not in partners
            or new_id in ids
            or origin in retried
            or set(p.change.settings) & set(won.change.settings)
        ):
            continue
        retried.add(origin)
        reason = (
            f"measured no gain in opt{e.iteration} against the older incumbent; {won.id} was kept "
            f"since, and {partners[p.checklist]}"
        )
        out.append(_retry(p, origin, new_id, reason))
    return out


def _retry(p: Proposal, origin: str, new_id: str, reason: str) -> Proposal:
    return p.model_copy(
        update={
            "id": new_id,
            "status": "proposed",
            "retry_of": origin,
            "app_impact_source": "trace model",
            "reason": reason,
        }
    )


def spare_retries(state: TuningState) -> list[Proposal]:
    """With nothing else open: each proposal whose latest measurement found no gain against an older
    incumbent, as a new proposal measured against the current one (once per kept change).

    Its knob must not have moved since (a kept change of the same setting measured what its value
    does now). A proposal waiting, or measured since the last kept change, is not offered again."""
    live = [(i, e) for i, e in enumerate(state.experiments) if e.voided_by is None]
    kept = [i for i, e in live if e.kept]
    if not kept:
        return []
    last = state.experiments[kept[-1]]
    ids = {p.id for p in state.proposals}
    waiting = {p.retry_of or p.id for p in state.proposals if p.status == "proposed"}
    latest: dict[str, tuple[int, Experiment]] = {}
    for i, e in live:
        p = state.proposal(e.proposal_id)
        latest[p.retry_of or p.id] = (i, e)
    out: list[Proposal] = []
    for origin, (i, e) in latest.items():
        p = state.proposal(e.proposal_id)
        new_id = f"{origin}@opt{last.iteration}"
        if e.verdict != "no_change" or i > kept[-1] or origin in waiting or new_id in ids:
            continue
        moved = {
            k for j in kept if j > i for k in state.proposal(state.experiments[j].proposal_id).change.settings
        }
        if set(p.change.settings) & moved:
            continue
        out.append(
            _retry(
                p,
                origin,
                new_id,
                f"measured no gain in opt{e.iteration} against an older incumbent; {last.proposal_id} "
                "was kept since, and with experiments to spare it is measured on top of it (no known "
                "interaction is listed, and none is assumed away)",
            )
        )
    return out


def _responses(state: TuningState) -> tuple[set[str], set[str]]:
    """The knobs this run measured (an experiment voided by a person's refusal says nothing of
    its knob), and those of them a kept change won with."""
    measured: set[str] = set()
    won: set[str] = set()
    for e in state.experiments:
        knob = _knob_of(state.proposal(e.proposal_id)) if e.voided_by is None else None
        if knob is not None:
            measured.add(knob)
            if e.kept:
                won.add(knob)
    return measured, won


def breadth_first(options: Sequence[Proposal], state: TuningState) -> list[Proposal]:
    """The options without a further value of a knob this run measured already, while a knob not
    measured yet offers one: within a budget of a few experiments, the first step of an untried
    lever says more than another step of one whose response was just seen (a design-of-experiments
    screening order). A further value of a knob that won still goes first when its estimate is
    strictly higher; one of a knob whose measured values were flat or worse waits whatever the
    trace model estimates (a measured response outweighs an estimate: three buffer sizes after the
    first did nothing, before a thread pool never tried). A waiting value is only put back: it
    comes again at the next choice."""
    measured, won = _responses(state)
    deeper = {p.id for p in options if _knob_of(p) in measured}
    untried = [p.weighted_score for p in options if p.id not in deeper]
    if not deeper or not untried:
        return list(options)
    best = max(untried)
    return [p for p in options if p.id not in deeper or (_knob_of(p) in won and p.weighted_score > best)]


def winning_levers_first(options: Sequence[Proposal], state: TuningState) -> list[Proposal]:
    """The options without a further value of a knob whose every measured value lost in this run,
    while a knob that won offers one: a coordinate search goes on along the coordinate that paid
    (THREADS=4 after a kept THREADS=2) before it spends a small budget on another step of one
    whose response was flat or worse (a second buffer size after the first regressed), whatever
    the trace model estimates for it. A value only waits: it comes again at the next choice."""
    measured, won = _responses(state)
    losing = {p.id for p in options if _knob_of(p) in measured - won}
    if not losing or not any(_knob_of(p) in won for p in options):
        return list(options)
    return [p for p in options if p.id not in losing]


def cheaper_layers_first(options: Sequence[Proposal]) -> list[Proposal]:
    """The options without the system (L3) changes while an application or library (L1/L2) change
    is estimated at more than half of the best of them. Why: WisIO's and Drishti's bottleneck
    tables list each fix from L1 to L3, and for data loaders the workload's own settings (workers,
    prefetching) are "cheapest, usually the biggest win" (Mohan et al., VLDB 2021); a system change
    such as staging is paid on every run, on this system only, and once kept it changes what the
    application's levers are worth (data already in memory leaves readers nothing to overlap). The
    trace models are rough (a stated tier speed-up, an 80% efficiency), so an L3 change goes first
    only when its estimated gain of the application metric is more than twice the best L1/L2 one
    (the system metric's estimate is not compared: a faster tier always multiplies bandwidth); a
    measured or KB number is not an estimate and is never held back."""
    cheap = [p.app_impact_pct for p in options if p.layer != "L3"]
    if not cheap:
        return list(options)
    bar = L3_LEAD * max(cheap)
    return [
        p
        for p in options
        if p.layer != "L3" or p.app_impact_source in ("measured", "kb") or p.app_impact_pct > bar
    ]
