"""``dftune compare A B``: two traces or two runs side by side, with the change from A to B.

The comparison itself is pure (analyses and run reports in, rows out); :func:`load_side`
only decides what an argument names (a trace path, or a run id under ``$DFTUNE_HOME``) and
reads it. Percent-valued metrics change in percentage points, everything else relatively.
"""

from __future__ import annotations

from dataclasses import dataclass
from pathlib import Path
from typing import Any, Literal

from dftune.core.domain.run import RunReport
from dftune.core.errors import DftuneError
from dftune.core.labels import Better, Unit, labels
from dftune.tools.trace import Analysis

SCHEMA = "dftune.compare/1"


class CompareError(DftuneError):
    """An argument is neither a trace path nor a finished run, or the two are of different kinds."""


def _get(a: Analysis, key: str) -> float | None:
    obj: Any = a
    for part in key.split("."):
        obj = getattr(obj, part, None)
    return None if obj is None else float(obj)


def row(
    key: str, label: str, unit: Unit, a: float | None, b: float | None, better: Better = None
) -> dict[str, Any]:
    """One compared value: ``delta`` = B - A; ``change_pct`` = relative change (None for pct units or A = 0);
    ``better``: which direction is an improvement (None: the metric has none)."""
    delta = None if a is None or b is None else b - a
    change = None
    if delta is not None and unit != "pct" and a:
        change = 100.0 * delta / abs(a)
    return {
        "key": key,
        "label": label,
        "unit": unit,
        "a": a,
        "b": b,
        "delta": delta,
        "change_pct": change,
        "better": better,
    }


def compare_analyses(a: Analysis, b: Analysis) -> list[dict[str, Any]]:
    """Every compared trace metric (resources/report/labels.toml) of two analyses."""
    return [
        row(m.key, m.label, m.unit, _get(a, m.key), _get(b, m.key), m.better)
        for m in labels().compare.metrics
    ]


def run_summary(r: RunReport) -> dict[str, Any]:
    """What a run found, from its report: medians, overall change, each experiment's verdict."""
    base, inc = r.baseline, r.incumbent
    return {
        "run_id": r.run_id,
        "workload": r.workload,
        "status": r.status,
        "baseline_median": base.median if base else None,
        "baseline_ci95": base.ci95 if base else None,
        "best_median": inc.median if inc else None,
        "best_ci95": inc.ci95 if inc else None,
        "best_settings": {**inc.settings, **inc.env} if inc else {},
        "overall_pct": r.outcome.overall_pct if r.outcome else None,
        "experiments": [
            {
                "iteration": e.iteration,
                "proposal": e.proposal_id,
                "strategy": e.strategy,
                "verdict": e.verdict,
                "change_pct": e.change_pct,
                "kept": e.kept,
            }
            for e in r.experiments
        ],
    }


def compare_runs(
    a: RunReport,
    b: RunReport,
    analyses: dict[str, tuple[Analysis | None, Analysis | None]],
) -> dict[str, Any]:
    """Two runs: outcome rows, their baseline and best-kept traces, and both experiment lists.

    ``analyses`` maps "a"/"b" to (baseline analysis, best-kept analysis), either may be None.
    """
    sa, sb = run_summary(a), run_summary(b)
    direction: Better = "lower" if a.metric.lower_is_better else "higher"
    outcome = [
        row(
            "baseline_median",
            "baseline median",
            "metric",
            sa["baseline_median"],
            sb["baseline_median"],
            direction,
        ),
        row("best_median", "best kept median", "metric", sa["best_median"], sb["best_median"], direction),
        row(
            "overall_pct",
            "overall change (positive = better)",
            "pct",
            sa["overall_pct"],
            sb["overall_pct"],
            "higher",
        ),
        row(
            "experiments",
            "experiments",
            "count",
            float(len(sa["experiments"])),
            float(len(sb["experiments"])),
        ),
        row(
            "wins",
            "wins kept",
            "count",
            float(sum(e["kept"] for e in sa["experiments"])),
            float(sum(e["kept"] for e in sb["experiments"])),
            "higher",
        ),
    ]
    doc: dict[str, Any] = {"schema": SCHEMA, "kind": "runs", "a": sa, "b": sb, "outcome": outcome}
    for name, idx in (("baseline_trace", 0), ("best_trace", 1)):
        xa, xb = analyses["a"][idx], analyses["b"][idx]
        doc[name] = compare_analyses(xa, xb) if xa is not None and xb is not None else None
    return doc


def moved_bytes(a: Analysis) -> int:
    return (a.read.bytes or 0) + (a.write.bytes or 0)


def work_notes(a: Analysis, b: Analysis) -> list[str]:
    """What a reader must not miss: B moved fewer bytes than A (a speed-up there may be doing less)."""
    if (a.events and b.events and 0 < moved_bytes(b) < moved_bytes(a)) or (
        moved_bytes(a) and not moved_bytes(b)
    ):
        return [
            f"B moved fewer bytes than A ({moved_bytes(b):,} < {moved_bytes(a):,}): "
            "a speed-up here may be doing less work"
        ]
    return []


def compare_traces(a: Analysis, b: Analysis, labels: tuple[str, str]) -> dict[str, Any]:
    return {
        "schema": SCHEMA,
        "kind": "traces",
        "a": {"path": labels[0]},
        "b": {"path": labels[1]},
        "trace": compare_analyses(a, b),
        "shape": {"a": a.shape.kind, "b": b.shape.kind},
        "notes": work_notes(a, b) + _kind_notes(a, b),
    }


def _kind_notes(a: Analysis, b: Analysis) -> list[str]:
    """A Darshan log next to a dftracer trace: same schema, not the same instrument."""
    if (a.darshan is None) == (b.darshan is None):
        return []
    return [
        "one side is a Darshan log, the other a dftracer "
        "trace: Darshan's counters and dftracer's events count "
        "calls differently (docs/darshan.md), so compare the shares more than the counts"
    ]


# --------------------------------------------------------------------------- loading


@dataclass
class Side:
    kind: Literal["trace", "run"]
    label: str
    analysis: Analysis | None = None
    report: RunReport | None = None
    best: Analysis | None = None


def kind_of(arg: str) -> Literal["trace", "run"]:
    """An existing path is a trace; anything else must be a run id (checked when it is loaded)."""
    return "trace" if Path(arg).exists() else "run"


def load_side(arg: str) -> Side:
    """A trace file/folder (analyzed now), or the id of a finished run under ``$DFTUNE_HOME``."""
    from dftune.tools.report.loader import load_report
    from dftune.tools.report.plots import load_analysis
    from dftune.tools.session.workspace import Workspace, WorkspaceError
    from dftune.tools.trace import analyze

    if kind_of(arg) == "trace":
        return Side("trace", arg, analysis=analyze([arg]))
    ws = Workspace()
    try:
        known = ws.run_dir(arg).is_dir()
    except WorkspaceError:
        known = False
    if not known:
        raise CompareError(f"{arg!r} is neither a trace file or folder nor a run id under {ws.root}")
    _, r = load_report(arg, ws)
    base = load_analysis(r.baseline.analysis_path if r.baseline else None)
    best = load_analysis(r.incumbent.analysis_path if r.incumbent else None)
    return Side("run", arg, analysis=base, report=r, best=best)


def compare(arg_a: str, arg_b: str) -> dict[str, Any]:
    """Load both sides and compare them (two traces or two runs, not one of each)."""
    ka, kb = kind_of(arg_a), kind_of(arg_b)
    if ka != kb:
        raise CompareError(f"compare two traces or two runs, not a {ka} ({arg_a}) with a {kb} ({arg_b})")
    a, b = load_side(arg_a), load_side(arg_b)
    if a.kind == "trace":
        assert a.analysis is not None and b.analysis is not None
        return compare_traces(a.analysis, b.analysis, (a.label, b.label))
    assert a.report is not None and b.report is not None
    return compare_runs(a.report, b.report, {"a": (a.analysis, a.best), "b": (b.analysis, b.best)})
