"""Publish the optimization KB as a markdown skill file (``opt_kb_render``, dftracer-io-optimization skill).

One section per scope (System-centric L3, Software-centric L2, Workload-centric L1), one table
row per record: wins, no-ops, regressions, rejected and unsupported changes alike, each
labeled. The output depends only on the records (sorted, no wall-clock timestamp) and is
written atomically (temporary file in the same folder, fsync, rename).
"""

from __future__ import annotations

from collections import Counter
from collections.abc import Sequence
from pathlib import Path

from dftune.core.domain.kb import KbRecord
from dftune.core.fsio import atomic_write_bytes
from dftune.core.home import dftune_home
from dftune.core.labels import labels
from dftune.tools.kb.store import opt_kb_records
from dftune.tools.kb.verdict import WIN_THRESHOLD_PCT


def default_render_path() -> Path:
    """``$DFTUNE_HOME/kb/opt_kb.md``."""
    return dftune_home() / "kb" / "opt_kb.md"


def _cell(text: str) -> str:
    return " ".join(text.split()).replace("|", "\\|") or "-"


def _num(x: float | None) -> str:
    return "?" if x is None else f"{x:.4g}"


def _ci(ci: tuple[float, float] | None) -> str:
    return "" if ci is None else f" [{ci[0]:.4g}, {ci[1]:.4g}]"


def _where(r: KbRecord) -> str:
    fs = f", fs {r.fs_type}" if r.fs_type else ""
    run = f"; run {r.run_id}" + (f" opt{r.iteration}" if r.iteration is not None else "") if r.run_id else ""
    if r.scope == "system":
        return f"system {r.system}{fs} (workload {r.workload}){run}"
    if r.scope == "software":
        return f"software {', '.join(r.software)} (system {r.system}, workload {r.workload}{fs}){run}"
    return f"workload {r.workload} (system {r.system}{fs}){run}"


def _metric(r: KbRecord) -> str:
    sense = "lower is better" if r.lower_is_better else "higher is better"
    head = f"{r.metric} ({r.metric_scope}, {sense}): "
    if r.before is None or r.after is None:
        return head + "not measured"
    return head + f"{_num(r.before)}{_ci(r.before_ci)} -> {_num(r.after)}{_ci(r.after_ci)}"


def _change(r: KbRecord) -> str:
    parts: list[str] = []
    if r.change_pct is not None:
        bits = []
        if r.ratio_ci95 is not None:
            bits.append(f"ratio CI{_ci(r.ratio_ci95)}")
        if r.p_value is not None:
            bits.append(f"p={r.p_value:.3g}")
        if not bits and r.before_ci is not None and r.after_ci is not None:
            bits.append("arm CIs shown left")
        parts.append(f"{r.change_pct:+.1f}%" + (f" ({', '.join(bits)})" if bits else " (no CI)"))
    if r.app_metric is not None and r.app_before is not None and r.app_after is not None:
        app = f"app {r.app_metric} {_num(r.app_before)} -> {_num(r.app_after)}"
        if r.app_change_pct is not None:
            app += f" ({r.app_change_pct:+.1f}%)"
        parts.append(app)
    return "; ".join(parts) or "-"


def _verdict(r: KbRecord) -> str:
    label = labels().kb.verdict[r.verdict]
    if r.superseded_by is not None:
        label += f" (settled by #{r.superseded_by})"
    elif r.supersedes is not None:
        label += f" (settles #{r.supersedes})"
    if r.guard_triggered:
        label += ", guard_triggered (revert)"
    return label


def _guards(r: KbRecord) -> str:
    """Failed guards with their reasons, guards that could not run, and why a kept result is a no-op."""
    notes = [f"{d.guard}: {d.reason}" for d in r.guards if not d.passed and d.details.get("ran") is not False]
    for d in r.guards:
        if d.details.get("ran") is False:
            why = "no trace analyses, work done not compared" if d.guard == "no_doing_less" else d.reason
            notes.append(f"NOT RUN: {d.guard} ({why.removeprefix('NOT RUN: ')})")
    passed = [d.guard for d in r.guards if d.passed]
    if passed:
        notes.append(f"passed: {', '.join(passed)}")
    if r.verdict == "no_change":
        notes.append(f"why no_change: {r.verdict_reason}")
    return "; ".join(notes)


def _citation(r: KbRecord) -> str:
    if r.citation is None:
        return "none (no verifiable citation)"
    url = f" <{r.citation_url}>" if r.citation_url else ""
    return f"{r.citation}{url}"


def _row(r: KbRecord, same: Sequence[KbRecord] = ()) -> str:
    """One table row; ``same`` are later records of the same refusal, listed in this row (never repeated)."""
    strategy = f"`{r.strategy}`" + (f" {r.strategy_name}" if r.strategy_name else "")
    ids = ", ".join(str(x.id) for x in (r, *same))
    where = _where(r)
    if same:
        runs = sorted({x.run_id for x in (r, *same) if x.run_id})
        where = (
            f"workload {r.workload} (system {r.system}); refused "
            f"the same way in {len(runs) or len(same) + 1} "
            f"run(s): {', '.join(runs)}"
        )
    cells = (ids, strategy, where, _metric(r), _change(r), _verdict(r), _guards(r), _citation(r), r.caveats)
    return "| " + " | ".join(_cell(c) for c in cells) + " |"


def _refusal_key(r: KbRecord) -> tuple[str, ...] | None:
    """Refusals (nothing measured) of the same strategy, for the same reason, on the same workload and
    system are one finding: every run that meets the strategy refuses it again."""
    if r.verdict not in ("rejected", "unsupported") or r.before is not None or r.after is not None:
        return None
    return (r.scope, r.strategy, r.system, r.workload, r.verdict, r.verdict_reason)


def _rows(records: Sequence[KbRecord]) -> list[str]:
    groups: dict[tuple[str, ...], list[KbRecord]] = {}
    out: list[tuple[KbRecord, list[KbRecord]]] = []
    for r in records:
        key = _refusal_key(r)
        if key is None:
            out.append((r, []))
        elif key in groups:
            groups[key].append(r)
        else:
            groups[key] = []
            out.append((r, groups[key]))
    return [_row(r, same) for r, same in out]


def render_markdown(records: Sequence[KbRecord]) -> str:
    """The skill file's text for these records (deterministic: sorted, no wall-clock time)."""
    counts: Counter[str] = Counter(r.verdict for r in records)
    newest = max((r.created for r in records), default=None)
    lines = [
        "---",
        "name: dftune-optimization-kb",
        "description: Measured cross-session optimization results (wins, no-ops, regressions, "
        "rejected and unsupported changes) recorded by dftune's guarded opt_kb_record, by scope",
        "---",
        "",
        "# Optimization knowledge base",
        "",
        f"{len(records)} records"
        + (f" (newest recorded {newest})" if newest else "")
        + ": "
        + ", ".join(f"{counts.get(v, 0)} {v}" for v in labels().kb.verdict)
        + ".",
        "",
        "Every record went through the four guards (citation, access pattern, no-doing-less, "
        "non-degradation); each row lists the guards that failed or could not run, with their "
        f"reasons. A win is an improvement of at least {WIN_THRESHOLD_PCT:g}% beyond the noise. "
        "Change is signed so that positive is better; CIs are 95%. Treat `guard_triggered` like a "
        "regression: the change was reverted. Scope decides transferability: a system finding "
        "does not leave its machine, a workload finding does not leave its app, software findings "
        "travel across both.",
        "",
    ]
    for sec in labels().kb.section:
        rows = sorted(
            (r for r in records if r.scope == sec.scope),
            key=lambda r: (r.strategy, r.system, r.workload, r.id),
        )
        lines += [f"## {sec.title}", "", sec.blurb, ""]
        if not rows:
            lines += ["_No findings recorded yet._", ""]
            continue
        lines.append("| " + " | ".join(labels().kb.columns) + " |")
        lines.append("|" + "|".join("---" for _ in labels().kb.columns) + "|")
        lines += _rows(rows)
        lines.append("")
    return "\n".join(lines)


def opt_kb_render(path: Path | str | None = None, *, db: Path | str | None = None) -> Path:
    """Write the KB as a markdown skill file (default ``$DFTUNE_HOME/kb/opt_kb.md``); returns its path."""
    out = Path(path) if path is not None else default_render_path()
    out.parent.mkdir(parents=True, exist_ok=True)
    atomic_write_bytes(out, render_markdown(opt_kb_records(db=db)).encode("utf-8"))
    return out
