"""The run at a glance: the few lines ``dftune run`` and ``make demo`` end with.

A job summary in the spirit of Darshan's: the metric with its unit, baseline -> best, what was
kept, refused and is waiting, then the commands to look further, each one that works when
pasted (the ``dftune`` of this interpreter's venv when ``dftune`` is not on PATH). The full
proposal table stays in report.md / report.html and behind ``--table``.
Pure text: the renderers print it.
"""

from __future__ import annotations

import shutil
import sys
from pathlib import Path
from typing import Any

from dftune.core import strictjson
from dftune.tools.report.sections import gain_text, with_unit

#: the refusal reasons' first word, as the guards write them ("no_doing_less: ...")
_GUARD_NAMES = ("no_doing_less", "access_pattern", "citation", "non_degradation")


def dftune_command(cwd: Path | None = None) -> str:
    """How to type ``dftune`` here: bare when PATH finds this very program, else its path
    (relative to ``cwd`` when under it, e.g. ``.venv/bin/dftune``)."""
    exe = Path(sys.executable).parent / "dftune"
    found = shutil.which("dftune")
    if found and exe.exists() and Path(found).resolve() == exe.resolve():
        return "dftune"
    if not exe.exists():
        return "dftune"
    here = (cwd or Path.cwd()).resolve()
    try:
        return str(Path(exe.parent.resolve().relative_to(here)) / "dftune")
    except ValueError:
        return str(exe)


def metric_line(metric: dict[str, Any] | None) -> str:
    """``wall_time_s (s, lower is better)``."""
    m = metric or {}
    name = m.get("name") or "metric"
    unit = m.get("unit") or "no unit"
    better = "lower" if m.get("lower_is_better", True) else "higher"
    return f"{name} ({unit}, {better} is better)"


def _pct(before: float | None, after: float | None, lower_is_better: bool) -> float | None:
    if before in (None, 0) or after is None:
        return None
    assert before is not None
    change = (before - after) / before if lower_is_better else (after - before) / before
    return 100.0 * change


def _refusal(x: dict[str, Any]) -> str:
    reason = str(x.get("reason") or "")
    guard = next((g for g in _GUARD_NAMES if reason.startswith(g)), None)
    why = guard.replace("_", "-") if guard else str(x.get("status") or "refused")
    return f"{x.get('proposal')} ({why})"


def glance_rows(r: dict[str, Any]) -> list[tuple[str, str]]:
    """(label, answer) pairs: metric, result, kept, tried, refused, waiting."""
    metric = r.get("metric") or {}
    unit = metric.get("unit") or ""
    lib = bool(metric.get("lower_is_better", True))
    rows = [("metric", metric_line(metric))]
    verdicts = r.get("verdicts") or []
    kept = [v for v in verdicts if v.get("kept")]
    base, best = r.get("baseline_median"), r.get("best_median")
    if base is None:
        rows.append(("result", "no baseline was measured"))
    elif kept and best is not None:
        rows.append(
            (
                "result",
                f"{with_unit(base, unit)} -> {with_unit(best, unit)} "
                f"({gain_text(_pct(base, best, lib))}), baseline -> best kept",
            )
        )
    else:
        rows.append(("result", f"{with_unit(base, unit)} at the baseline; no change kept"))
    # each kept change is measured against the incumbent before it: a chain, not a sum
    rows.append(
        (
            "kept",
            ", then ".join(
                f"{v['proposal']} (opt{v['iteration']}, {gain_text(v.get('change_pct'))})" for v in kept
            )
            or "nothing",
        )
    )
    if verdicts:
        counts: dict[str, int] = {}
        for v in verdicts:
            counts[str(v.get("verdict"))] = counts.get(str(v.get("verdict")), 0) + 1
        rows.append(
            (
                "tried",
                f"{len(verdicts)} experiment(s): "
                + ", ".join(f"{n} {k.replace('_', ' ')}" for k, n in counts.items()),
            )
        )
    refused = r.get("refused") or []
    if refused:
        names = ", ".join(_refusal(x) for x in refused[:3]) + (", ..." if len(refused) > 3 else "")
        rows.append(("refused", f"{len(refused)} by the guards: {names}"))
    else:
        rows.append(("refused", "none"))
    waiting = r.get("pending") or []  # approvals first, then changes kept on trial
    if waiting:
        p = waiting[0]
        more = f" (and {len(waiting) - 1} more)" if len(waiting) > 1 else ""
        rows.append(
            (
                "waiting",
                f"{p.get('proposal_id')} ({p.get('privilege') or p.get('kind') or 'a question'}) "
                f"needs your answer{more}",
            )
        )
    else:
        rows.append(("waiting", "nothing"))
    return rows


def next_commands(r: dict[str, Any], dftune: str | None = None) -> list[tuple[str, str]]:
    """(what, command) pairs, each command complete and pasteable."""
    cmd = dftune or dftune_command()
    run_id = r.get("run_id", "RUN_ID")
    out: list[tuple[str, str]] = []
    if r.get("pending"):
        out.append(("answer the waiting change", f"{cmd} approve {run_id}"))
        out.append(("or refuse it", f"{cmd} approve {run_id} --reject --reason '...'"))
    elif r.get("status") in ("interrupted", "failed") and r.get("status") != "completed":
        out.append(("continue it", f"{cmd} resume {run_id}"))
    if r.get("status") == "completed":
        out.append(("the full proposal table", f"{cmd} report {run_id} --table"))
    out.append(("every saved step (replay from any)", f"{cmd} history {run_id}"))
    if r.get("workload"):
        out.append(("what the knowledge base learned", f"{cmd} kb lookup --workload {r['workload']}"))
    return out


def change_lines(change: dict[str, Any] | None) -> list[str]:
    """Exactly what approving a change does, and how it is undone, before anyone says yes."""
    import shlex

    c = change or {}
    out = []
    if c.get("settings"):
        out.append("sets: " + ", ".join(f"{k}={v}" for k, v in c["settings"].items()))
    if c.get("env"):
        out.append("environment: " + ", ".join(f"{k}={v}" for k, v in c["env"].items()))
    if c.get("patch_file"):
        out.append(f"applies the patch {c['patch_file']} (-p{c.get('strip', 1)}) to a copy of the source")
    if c.get("read_argv"):
        out.append(f"reads the value now (kept for the rollback): {shlex.join(c['read_argv'])}")
    if c.get("argv"):
        out.append(f"runs: {shlex.join(c['argv'])}")
    if c.get("rollback_argv"):
        out.append(f"rollback: {shlex.join(c['rollback_argv'])}  ({{current}} = the value read before)")
    elif c.get("argv"):
        out.append("rollback: none recorded")
    elif c.get("settings") or c.get("env") or c.get("patch_file"):
        out.append(
            "rollback: the next experiment starts from the kept settings (nothing on the system changes)"
        )
    if c.get("instructions"):
        out.append(f"by hand: {c['instructions']}")
    return out


def run_result(run_dir: str | Path) -> str:
    """A finished run's result in one phrase (``dftune
    runs``): baseline -> best kept, from its report.json."""

    path = Path(run_dir) / "report.json"
    try:
        doc = strictjson.loads(path.read_bytes())
        out, metric = doc.get("outcome") or {}, doc.get("metric") or {}
    except (OSError, ValueError, AttributeError):
        return "-"
    unit = metric.get("unit") or ""
    base, best = out.get("baseline_median"), out.get("best_median")
    if base is None:
        return "no baseline measured"
    n = out.get("experiments", 0)
    if out.get("wins") and best is not None:
        return (
            f"{metric.get('name', 'metric')} {with_unit(base, unit)} -> {with_unit(best, unit)} "
            f"({gain_text(out.get('overall_pct'))}), {len(out['wins'])} of {n} kept"
        )
    return f"{metric.get('name', 'metric')} {with_unit(base, unit)}, none of {n} experiment(s) kept"
