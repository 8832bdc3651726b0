"""One knowledge-base finding as a line a person can act on: the exact change (knob values
as written, commas kept), against what it was measured, and the numbers behind the verdict."""

from __future__ import annotations

import shlex
from typing import Any

from dftune.tools.report.sections import gain_text


def change_text(change: dict[str, Any]) -> str:
    """``WORKERS=4`` / ``env OMP_NUM_THREADS=4`` / ``runs: sudo -n ...``: what was applied, exactly."""
    parts = [f"{k}={v}" for k, v in (change.get("settings") or {}).items()]
    parts += [f"env {k}={v}" for k, v in (change.get("env") or {}).items()]
    if change.get("patch_file"):
        parts.append(f"patch {change['patch_file']}")
    if change.get("argv"):
        parts.append(f"runs: {shlex.join(change['argv'])}")
    return ", ".join(parts) or str(change.get("proposal") or "no recorded change")


def _against(change: dict[str, Any]) -> str:
    """The incumbent's values of the knobs the change set (what it was measured against)."""
    inc = change.get("incumbent") or {}
    before = {**(inc.get("settings") or {}), **(inc.get("env") or {})}
    changed = {**(change.get("settings") or {}), **(change.get("env") or {})}
    was = [f"{k}={before[k]}" for k in changed if k in before]
    return f" (was {', '.join(was)})" if was else ""


def _num(v: float | None, metric: str = "") -> str:
    if v is None:
        return "-"
    if metric.endswith("bytes_per_s"):  # a bandwidth reads in MiB/s, not as a raw byte count
        return f"{v / 2**20:,.1f} MiB/s"
    return f"{v:.4g}"


def finding_line(r: Any) -> str:
    """``l1.dataloader_workers WORKERS=4 (was WORKERS=2) on w@host:
    win, epoch_time_s 0.8476 -> 0.4495 (+47.0% better)``."""
    change = dict(r.change or {})
    head = f"{r.strategy} {change_text(change)}{_against(change)} on {r.workload}@{r.system}: {r.verdict}"
    if r.change_pct is None:
        return head
    return (
        f"{head}, {r.metric} {_num(r.before, r.metric)} -> "
        f"{_num(r.after, r.metric)} ({gain_text(r.change_pct)})"
    )
