"""What the knowledge base already knows here, and what it means for each proposal.

The dftracer-io-optimization skill looks the KB up first. A change measured on this workload before (the
same strategy and the same settings) takes its measured number instead of an estimate: a
known win is confirmed first; a known no-gain (no_change, regression, rejected, inconclusive)
is not tried again against the same incumbent unless the run says ``--retry-known``; a change
the program refused or crashed under (``failed``) is not tried again beside the same incumbent.
"""

from __future__ import annotations

from pathlib import Path
from typing import Any

from dftune.core.domain.measurements import Measurement
from dftune.core.domain.proposals import Proposal
from dftune.core.domain.run import KbPrior, PriorResult
from dftune.tools.kb import opt_kb_lookup

#: verdicts that mean "measured here, no gain"
NO_GAIN = ("no_change", "regression", "rejected", "inconclusive")


def kb_prior(system: str, workload: str, software: list[str], db: Path | None) -> KbPrior:
    """Measured results of earlier runs that apply here, newest first."""
    found = opt_kb_lookup(system=system, workload=workload, software=software, db=db)
    per_strategy: dict[str, float] = {}
    listing = []
    for rec in [*found.workload_findings, *found.software_findings, *found.system_findings]:
        listing.append(
            PriorResult(
                id=rec.id,
                strategy=rec.strategy,
                verdict=rec.verdict,
                scope=rec.scope,
                change_pct=rec.change_pct,
                run_id=rec.run_id,
                change=dict(rec.change),
                reason=rec.verdict_reason,
                metric_scope=rec.metric_scope,
            )
        )
        if (
            rec.metric_scope == "app"
            and rec.verdict in ("win", "no_change")
            and rec.change_pct is not None
            and rec.strategy not in per_strategy
        ):
            per_strategy[rec.strategy] = rec.change_pct
    return KbPrior(measured_pct=per_strategy, records=listing[:200])


def _same_change(p: Proposal, change: dict[str, Any]) -> bool:
    return (
        {k: str(v) for k, v in (change.get("settings") or {}).items()} == dict(p.change.settings)
        and dict(change.get("env") or {}) == dict(p.change.env)
        and list(change.get("argv") or []) == list(p.change.argv)
    )


def _same_incumbent(change: dict[str, Any], incumbent: Measurement | None, defaults: dict[str, str]) -> bool:
    """Was the record measured against the incumbent the run has now? (No record of it: the baseline.)
    Settings a side does not name are the knobs' defaults. What the change sets itself is left out:
    it overrides the incumbent's value, so the arm it ran is the arm it would run now (THREADS=0
    beside THREADS=1 or beside a kept THREADS=4 is the same program)."""
    inc = change.get("incumbent") or {"settings": {}, "env": {}}
    own, own_env = set(change.get("settings") or {}), set(change.get("env") or {})

    def outside(values: dict[str, Any], mine: set[str]) -> dict[str, str]:
        return {k: str(v) for k, v in values.items() if k not in mine}

    now = outside({**defaults, **(incumbent.settings if incumbent else {})}, own)
    then = outside({**defaults, **(inc.get("settings") or {})}, own)
    now_env = outside(dict(incumbent.env) if incumbent else {}, own_env)
    return now == then and outside(dict(inc.get("env") or {}), own_env) == now_env


def _said(rec: PriorResult) -> str:
    """What the program said when it refused a change (the record's reason, one short line)."""
    text = " ".join(rec.reason.split()).removeprefix("the program failed under this change: ")
    return text if len(text) <= 160 else "..." + text[-157:]  # the program's own words come last


def apply_prior(
    p: Proposal,
    prior: KbPrior,
    incumbent: Measurement | None,
    *,
    retry_known: bool,
    defaults: dict[str, str] | None = None,
) -> Proposal:
    """The proposal with the KB's measurement of the same change on this workload, if there is one."""
    # the application's metric decides: a system record (the bandwidth beside a win) never does
    same = [
        r
        for r in prior.records
        if r.metric_scope == "app" and r.strategy == p.strategy and _same_change(p, r.change)
    ]
    if not same or p.status not in ("proposed",):
        return p
    rec = same[0]  # newest first
    where = f"KB record #{rec.id}" + (f" (run {rec.run_id})" if rec.run_id else "")
    if rec.verdict == "win" and rec.change_pct is not None:
        return p.model_copy(
            update={
                "app_impact_pct": round(rec.change_pct, 2),
                "app_impact_source": "kb",
                "impact_reason": f"measured {rec.change_pct:+.1f}% on this workload before ({where}): "
                "confirmed first",
            }
        )
    same_incumbent = _same_incumbent(rec.change, incumbent, defaults or {})
    # refused beside this incumbent; beside another, a setting that acts with a kept one may run
    # (DataLoader's prefetch_factor needs worker processes)
    if rec.verdict == "failed" and same_incumbent and not retry_known:
        return p.model_copy(
            update={
                "status": "known",
                "app_impact_pct": 0.0,
                "app_impact_source": "kb",
                "reason": f"the program refused this change before ({where}: {_said(rec)}); "
                "--retry-known tries it again",
            }
        )
    if rec.verdict in NO_GAIN and same_incumbent and not retry_known:
        moved = f" ({rec.change_pct:+.1f}%)" if rec.change_pct is not None else ""
        return p.model_copy(
            update={
                "status": "known",
                "app_impact_pct": rec.change_pct or 0.0,
                "app_impact_source": "kb",
                "reason": f"the knowledge base measured {rec.verdict}{moved} for this change "
                f"against the same incumbent ({where}); --retry-known measures it again",
            }
        )
    return p.model_copy(
        update={
            "impact_reason": f"{p.impact_reason}; the KB measured {rec.verdict} for it against "
            f"another incumbent ({where})".lstrip("; ")
        }
    )
