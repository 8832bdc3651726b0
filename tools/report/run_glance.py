"""The run at a glance: the few lines ``dftune run`` and ``make demo`` end with.

A job summary in the spirit of Darshan's: the metric with its unit, baseline -> best, what was
kept, refused and is waiting, then the commands to look further, each one that works when
pasted (the ``dftune`` of this interpreter's venv when ``dftune`` is not on PATH). The full
proposal table stays in report.md / report.html and behind ``--table``.
Pure text: the renderers print it.
"""

from __future__ import annotations

import shlex
import shutil
import sys
from collections import Counter
from pathlib import Path

from dftune.core.domain.proposals import Change
from dftune.core.domain.run import ApprovalRequest, MetricInfo, PendingItem, RefusedRow, RunResult
from dftune.core.domain.stats import pct_change
from dftune.tools.report.sections import gain_text, levers_line, with_unit

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


def metric_line(m: MetricInfo | None) -> str:
    """``wall_time_s (s, lower is better)``."""
    m = m or MetricInfo()
    better = "lower" if m.lower_is_better else "higher"
    return f"{m.name or 'metric'} ({m.unit or 'no unit'}, {better} is better)"


def _refusal(x: RefusedRow) -> str:
    guard = next((g for g in _GUARD_NAMES if x.reason.startswith(g)), None)
    return f"{x.proposal} ({guard.replace('_', '-') if guard else x.status})"


def _asking(p: PendingItem) -> str:
    """What kind of answer a pending item waits for: an approval's privilege, else the question's kind."""
    return p.privilege if isinstance(p, ApprovalRequest) else p.kind


def glance_rows(r: RunResult) -> list[tuple[str, str]]:
    """(label, answer) pairs: metric, result, kept, tried, refused, waiting, levers."""
    metric = r.metric or MetricInfo()
    unit = metric.unit
    rows = [("metric", metric_line(metric))]
    kept = [v for v in r.verdicts if v.kept]
    base, best = r.baseline_median, r.best_median
    if base is None:
        rows.append(("result", "no baseline was measured"))
    elif kept and best is not None:
        rows.append(
            (
                "result",
                f"{with_unit(base, unit)} -> {with_unit(best, unit)} "
                f"({gain_text(pct_change(base, best, lower_is_better=metric.lower_is_better))}), "
                "baseline -> best kept",
            )
        )
    else:
        rows.append(("result", f"{with_unit(base, unit)} at the baseline; no change kept"))
    # each kept change is measured against the incumbent before it: a chain, not a sum
    rows.append(
        (
            "kept",
            ", then ".join(f"{v.proposal} (opt{v.iteration}, {gain_text(v.change_pct)})" for v in kept)
            or "nothing",
        )
    )
    if r.verdicts:
        counts = Counter(str(v.verdict) for v in r.verdicts)
        rows.append(
            (
                "tried",
                f"{len(r.verdicts)} experiment(s): "
                + ", ".join(f"{n} {k.replace('_', ' ')}" for k, n in counts.items()),
            )
        )
    if r.refused:
        names = ", ".join(_refusal(x) for x in r.refused[:3]) + (", ..." if len(r.refused) > 3 else "")
        rows.append(("refused", f"{len(r.refused)} by the guards: {names}"))
    else:
        rows.append(("refused", "none"))
    if r.pending:  # approvals first, then changes kept on trial
        p = r.pending[0]
        more = f" (and {len(r.pending) - 1} more)" if len(r.pending) > 1 else ""
        rows.append(("waiting", f"{p.proposal_id} ({_asking(p)}) needs your answer{more}"))
    else:
        rows.append(("waiting", "nothing"))
    if r.levers is not None:
        rows.append(("levers", levers_line(r.levers)))
    if r.bundle:
        rows.append(("bundle", f"{r.bundle} (the kept configuration; dftune verify checks it anywhere)"))
        if r.bundle_check:
            rows.append(("checked", f"from a copy at the run's end: {r.bundle_check}"))
    return rows


def next_commands(r: RunResult, dftune: str | None = None) -> list[tuple[str, str]]:
    """(what, command) pairs, each command complete and pasteable."""
    cmd = dftune or dftune_command()
    out: list[tuple[str, str]] = []
    if r.pending:
        out.append(("answer the waiting change", f"{cmd} approve {r.run_id}"))
        out.append(("or refuse it", f"{cmd} approve {r.run_id} --reject --reason '...'"))
    elif r.status == "failed" and r.baseline_median is None and r.spec_path:
        # the run keeps its archived spec: a fixed spec is a new run, never a resume
        spec = shlex.quote(r.spec_path)
        out.append(("after fixing the spec, check it", f"{cmd} bench {spec} --replicates 1 --no-trace"))
        out.append(("then start again", f"{cmd} run {spec}"))
    elif r.status in ("interrupted", "failed"):
        out.append(("continue it", f"{cmd} resume {r.run_id}"))
    if r.status == "completed":
        out.append(("the full proposal table", f"{cmd} report {r.run_id} --table"))
    out.append(("every saved step (replay from any)", f"{cmd} history {r.run_id}"))
    if r.workload:
        out.append(("what the knowledge base learned", f"{cmd} kb lookup --workload {r.workload}"))
    return out


def change_lines(c: Change | None) -> list[str]:
    """Exactly what approving a change does, and how it is undone, before anyone says yes."""
    if c is None:
        return []
    out = []
    if c.settings:
        out.append("sets: " + ", ".join(f"{k}={v}" for k, v in c.settings.items()))
    if c.env:
        out.append("environment: " + ", ".join(f"{k}={v}" for k, v in c.env.items()))
    if c.patch_file:
        out.append(f"applies the patch {c.patch_file} (-p{c.strip}) to a copy of the source")
    if c.read_argv:
        out.append(f"reads the value now (kept for the rollback): {shlex.join(c.read_argv)}")
    if c.argv:
        out.append(f"runs: {shlex.join(c.argv)}")
    if c.rollback_argv:
        out.append(f"rollback: {shlex.join(c.rollback_argv)}  ({{current}} = the value read before)")
    elif c.argv:
        out.append("rollback: none recorded")
    elif c.settings or c.env or c.patch_file:
        out.append(
            "rollback: the next experiment starts from the kept settings (nothing on the system changes)"
        )
    if c.instructions:
        out.append(f"by hand: {c.instructions}")
    return out


def run_result(run_dir: str | Path) -> str:
    """A finished run's result in one phrase (``dftune runs``): baseline -> best kept, from its
    report.json ("-" without one; why, in a few words, when it cannot be read)."""
    from dftune.tools.report.loader import ReportError, read_run_report

    path = Path(run_dir) / "report.json"
    if not path.is_file():
        return "-"
    try:
        r = read_run_report(path)
    except ReportError:
        return "report.json unreadable (see dftune report)"
    out, metric = r.outcome, r.metric
    if out is None or out.baseline_median is None:
        return "no baseline measured"
    base, best, n, unit = out.baseline_median, out.best_median, out.experiments, metric.unit
    if out.wins and best is not None:
        return (
            f"{metric.name} {with_unit(base, unit)} -> {with_unit(best, unit)} "
            f"({gain_text(out.overall_pct)}), {len(out.wins)} of {n} kept"
        )
    return f"{metric.name} {with_unit(base, unit)}, none of {n} experiment(s) kept"
