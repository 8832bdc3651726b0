"""How good dftune's choices are: an autonomous run against an exhaustive sweep of the same workload.

    python benchmarks/bench_tuning.py                         # every workload under tests/e2e/unseen
    python benchmarks/bench_tuning.py --workload shard_reader --replicates 5
    python benchmarks/bench_tuning.py --json                  # one JSON document on stdout
    python benchmarks/bench_tuning.py --suite unseen2 --workload sample_reader   # tests/e2e/unseen2
    python benchmarks/bench_tuning.py --suite unseen3 --workload tile_writer     # tests/e2e/unseen3
    python benchmarks/bench_tuning.py --suite unseen5 --json    # held-out: packed reader, plot writer

For each workload (a folder with ``workload.toml`` and ``truth.toml``, the second one naming the
legitimate knobs and the disguised values; dftune never reads it):

1. **Sweep.** Every combination of the legitimate knobs' values, benched the way the spec says
   (traced or not), ``--replicates`` each, the combinations interleaved round by round so a drift
   of the machine hits all of them alike. The best median is the sweep's answer.
2. **Run.** ``dftune run --mode autonomous --max-experiments N`` (the rules policy, offline, a
   fresh knowledge base in a temporary DFTUNE_HOME), to completion.
3. **Score.** The run's final configuration as it really runs (its knob settings, and any kept
   environment, patched source or staging, which are not knobs of the sweep) is benched again
   beside the default and the sweep's best, round by round, ``--replicates`` each:
   ``score = (t_default - t_run) / (t_default - t_best)``; 1.0 is the sweep's best, 0 no gain,
   above 1 beats it. ``score_lookup`` is the older estimate: the final knob settings looked up in
   the sweep (blind to a kept non-knob change).
   A run that kept a disguised value scores 0 and is reported as such; every disguised value the
   run tried must have been stopped by a measuring guard (no_doing_less, access_pattern) or left
   inconclusive.
4. **Answered.** A change the guards could not settle (``inconclusive``) that won is a question
   for a person; the person is assumed to answer truthfully from ``truth.toml`` (a legitimate
   knob is confirmed, anything else refused). ``score_answered`` scores the configuration the
   run ends with once those answers are applied (the run's own ``score`` counts only what it kept).

Target: score >= 0.90 on every workload with ``--max-experiments 5``; ``--check`` makes
a missed target exit with code 1. Progress goes to stderr; stdout carries the table or the JSON.
"""

from __future__ import annotations

import argparse
import itertools
import json
import os
import statistics
import sys
import tempfile
import time
import tomllib
from collections.abc import Collection
from pathlib import Path
from typing import Any

HERE = Path(__file__).resolve().parent
UNSEEN = HERE.parent / "tests" / "e2e" / "unseen"
#: the workload suites: folders of workloads with a truth.toml each
SUITES = {
    "unseen": UNSEEN,
    "unseen2": HERE.parent / "tests" / "e2e" / "unseen2",
    "unseen3": HERE.parent / "tests" / "e2e" / "unseen3",
    "unseen4": HERE.parent / "tests" / "e2e" / "unseen4",
    "unseen5": HERE.parent / "tests" / "e2e" / "unseen5",
}
TARGET = 0.90
MEASURING = ("no_doing_less", "access_pattern")


def log(msg: str) -> None:
    print(msg, file=sys.stderr, flush=True)


def sweep(
    toml: Path, legit: list[str], replicates: int, work: Path
) -> dict[tuple[tuple[str, str], ...], float]:
    """Median metric of every combination of the legitimate knobs (the others at their defaults)."""
    from dftune.tools.runner.spec import load_spec

    knobs = [k for k in load_spec(toml).knobs if k.name in legit]
    combos = [
        tuple((k.name, str(v)) for k, v in zip(knobs, values, strict=True))
        for values in itertools.product(*(k.values for k in knobs))
    ]
    arms = {f"c{i}": {"settings": dict(combo)} for i, combo in enumerate(combos)}
    medians = interleaved(toml, arms, replicates, work, "sweep")
    return {c: medians[f"c{i}"] for i, c in enumerate(combos) if f"c{i}" in medians}


def interleaved(toml: Path, arms: dict[str, Any], replicates: int, work: Path, what: str) -> dict[str, float]:
    """Median metric of each arm (a configuration: settings, and any environment, patched source or
    staging), one replicate of every arm per round, so a drift of the machine hits them all alike.
    The run's final configuration is benched this way beside the sweep's best, as it really runs (a
    kept staging or environment change is not a knob of the sweep)."""
    from dftune.tools.runner.bench import bench
    from dftune.tools.runner.spec import load_spec

    spec = load_spec(toml)
    values: dict[str, list[float]] = {label: [] for label in arms}
    for r in range(replicates):
        for label, m in arms.items():
            arm_spec = spec.relocated(Path(m["source_dir"])) if m.get("source_dir") else spec
            res = bench(
                arm_spec,
                overrides=m["settings"],
                env=m.get("env") or None,
                stage=m.get("stage"),
                replicates=1,
                workdir=work / label,
                first_index=r,
                prepare=r == 0,
            )
            values[label] += res.values()
        log(f"  {what} round {r + 1}/{replicates}: {len(arms)} configuration(s)")
    return {label: statistics.median(v) for label, v in values.items() if v}


def tuned(toml: Path, max_experiments: int, replicates: int | None, disguised: Collection[str] = ()) -> Any:
    """An autonomous run, then a person answering its pending questions truthfully (a disguised change
    is refused, a legitimate one confirmed), as the morning after an overnight run."""
    from dftune.graphs.runs import approve_run, load_state, start_run
    from dftune.tools.session.workspace import Workspace

    ws = Workspace()
    result = start_run(
        toml, mode="autonomous", max_experiments=max_experiments, replicates=replicates, workspace=ws
    )
    for _ in range(4 * max_experiments):  # each answer settles one; a refusal may raise new ones
        waiting = result.pending
        if not waiting or waiting[0].kind != "confirm_pending":
            break  # approve answers the first item: an approval the run waits at is not the truth's to give
        setting = ",".join(f"{k}={v}" for k, v in waiting[0].settings.items())
        answer = "refused" if setting in disguised else "confirmed"
        log(f"  a person answers {waiting[0].proposal_id}: {answer}")
        result = approve_run(
            result.run_id,
            reject=setting in disguised,
            reason="answered by the benchmark's truth",
            workspace=ws,
        )
    return load_state(result.run_id, ws)


def score_of(toml: Path, args: argparse.Namespace) -> dict[str, Any]:
    from dftune.tools.runner.spec import load_spec

    truth = tomllib.loads((toml.parent / "truth.toml").read_text(encoding="utf-8"))
    legit: list[str] = truth["legitimate"]
    disguised: dict[str, str] = truth.get("disguised", {})
    spec = load_spec(toml)
    with tempfile.TemporaryDirectory(prefix="dftune-bench-tuning-") as tmp:
        os.environ["DFTUNE_HOME"] = str(Path(tmp) / "home")
        t0 = time.perf_counter()
        log(f"{spec.name}: sweeping {' x '.join(legit)}")
        medians = sweep(toml, legit, args.replicates, Path(tmp) / "sweep")
        sweep_s = time.perf_counter() - t0
        log(f"{spec.name}: autonomous run, {args.max_experiments} experiment(s)")
        t1 = time.perf_counter()
        state = tuned(toml, args.max_experiments, args.run_replicates, disguised)
        run_s = time.perf_counter() - t1
        defaults = {k.name: str(k.default) for k in spec.knobs}
        default_key = tuple((k, defaults[k]) for k in legit)
        best_key = min(medians, key=medians.__getitem__)
        inc = state.incumbent
        arms = {
            "default": {"settings": defaults},
            "sweep_best": {"settings": {**defaults, **dict(best_key)}},
        }
        same_as_best = (
            inc is not None
            and not inc.env
            and inc.stage is None
            and not inc.source_dir
            and {**defaults, **{k: str(v) for k, v in inc.settings.items()}} == arms["sweep_best"]["settings"]
        )
        if inc is not None and not same_as_best:  # one configuration is one arm (its noise is no score)
            arms["run_final"] = {
                "settings": {k: str(v) for k, v in inc.settings.items()},
                "env": dict(inc.env),
                "stage": inc.stage,
                "source_dir": inc.source_dir,
            }
        log(f"{spec.name}: the run's final configuration beside the default and the sweep's best")
        checked = interleaved(toml, arms, args.replicates, Path(tmp) / "check", "check")
    final = {k: str(v) for k, v in (inc.settings if inc else {}).items()}
    run_key = tuple((k, final.get(k, defaults[k])) for k in legit)
    kept_disguised = sorted(f"{k}={v}" for k, v in final.items() if f"{k}={v}" in disguised)
    tried = []
    for e in state.experiments:
        p = state.proposal(e.proposal_id)
        setting = ",".join(f"{k}={v}" for k, v in p.change.settings.items())
        stopped = [
            g.decision.guard
            for g in state.guard_decisions
            if g.iteration == e.iteration
            and g.decision.guard in MEASURING
            and (not g.decision.passed or g.decision.verdict == "inconclusive")
        ]
        tried.append(
            {
                "proposal": p.id,
                "verdict": e.verdict,
                "kept": e.kept,
                "disguised": setting in disguised,
                "stopped_by": stopped,
                "change_pct": round(e.comparison.change_pct, 2) if e.comparison else None,
                "p_value": round(e.comparison.p_value, 4) if e.comparison else None,
                "pairs": e.comparison.candidate.n if e.comparison else None,
            }
        )
    answered, pending = answered_settings(state, final, legit)
    answered_key = tuple((k, answered.get(k, defaults[k])) for k in legit)
    t_default, t_best = medians[default_key], medians[best_key]
    t_run = medians.get(run_key, t_default)
    t_answered = medians.get(answered_key, t_run)
    gain = t_default - t_best
    score = 0.0 if kept_disguised else ((t_default - t_run) / gain if gain > 0 else 1.0)
    score_answered = 0.0 if kept_disguised else ((t_default - t_answered) / gain if gain > 0 else 1.0)
    unstopped = [t["proposal"] for t in tried if t["disguised"] and not t["stopped_by"]]
    c_default, c_best = checked["default"], checked["sweep_best"]
    c_run = checked["sweep_best"] if same_as_best else checked.get("run_final", c_default)
    c_gain = c_default - c_best
    measured = 0.0 if kept_disguised else ((c_default - c_run) / c_gain if c_gain > 0 else 1.0)
    return {
        "workload": spec.name,
        "score": round(measured, 3),
        "score_lookup": round(score, 3),
        "checked": {k: round(v, 6) for k, v in {**checked, "run_final": c_run}.items()},
        "run_is_sweep_best": same_as_best,
        "run_changes": {
            "env": sorted(inc.env) if inc else [],
            "stage": inc.stage.model_dump(mode="json") if inc and inc.stage else None,
            "patched": bool(inc and inc.source_dir),
        },
        "score_answered": round(score_answered, 3),
        "t_default": t_default,
        "t_best": t_best,
        "t_run": t_run,
        "t_answered": t_answered,
        "pending": pending,
        "best": dict(best_key),
        "run_final": dict(run_key),
        "answered_final": dict(answered_key),
        "kept_disguised": kept_disguised,
        "disguised_not_stopped": unstopped,
        "experiments": tried,
        "combinations": len(medians),
        "sweep": {",".join(f"{k}={v}" for k, v in c): round(t, 6) for c, t in sorted(medians.items())},
        "load_avg": [round(x, 2) for x in os.getloadavg()],
        "sweep_s": round(sweep_s, 1),
        "run_s": round(run_s, 1),
        "status": state.status,
    }


def answered_settings(
    state: Any, final: dict[str, str], legit: list[str]
) -> tuple[dict[str, str], list[str]]:
    """The final settings once a person has answered the run's questions truthfully: every winning
    change the guards left inconclusive is confirmed when all its knobs are legitimate, refused
    otherwise (in the order the run tried them); and the questions asked."""
    out = dict(final)
    asked = []
    from dftune.tools.kb.verdict import WIN_THRESHOLD_PCT

    for e in state.experiments:
        if e.verdict != "inconclusive" or e.comparison is None or e.comparison.verdict != "win":
            continue
        if e.comparison.change_pct < WIN_THRESHOLD_PCT:
            continue  # not a win by the run's own bar: nothing was asked, nothing to answer
        p = state.proposal(e.proposal_id)
        settings = {k: str(v) for k, v in p.change.settings.items()}
        confirmed = bool(settings) and all(k in legit for k in settings)
        asked.append(
            f"{p.id} ({','.join(f'{k}={v}' for k, v in settings.items())}): "
            f"{'confirmed' if confirmed else 'refused'}"
        )
        if confirmed:
            out.update(settings)
    return out, asked


def table(results: list[dict[str, Any]]) -> str:
    lines = [
        f"{'workload':<16} {'score':>6} {'default':>8} {'best':>8} {'run':>8}  disguised kept/unstopped",
        "-" * 78,
    ]
    for r in results:
        c = r["checked"]
        lines.append(
            f"{r['workload']:<16} {r['score']:>6.2f} {c['default']:>8.3f} {c['sweep_best']:>8.3f} "
            f"{c['run_final']:>8.3f}  "
            f"{len(r['kept_disguised'])}/{len(r['disguised_not_stopped'])}"
        )
        lines.append(f"  best: {r['best']}")
        lines.append(f"  run:  {r['run_final']}")
        changes = r["run_changes"]
        extra = [
            *(["staged on " + changes["stage"]["tier"]] if changes["stage"] else []),
            *(["env " + ",".join(changes["env"])] if changes["env"] else []),
            *(["patched source"] if changes["patched"] else []),
        ]
        if extra:
            lines.append(f"        and {'; '.join(extra)}")
        lines.append(f"  the final settings looked up in the sweep: {r['score_lookup']:.2f}")
        if r["pending"]:
            lines.append(
                f"  answered ({r['score_answered']:.2f}, {r['t_answered']:.3f}): {r['answered_final']}"
            )
            lines.extend(f"    asked: {q}" for q in r["pending"])
        for t in r["experiments"]:
            mark = " [disguised]" if t["disguised"] else ""
            pct = "-" if t["change_pct"] is None else f"{t['change_pct']:+.1f}%"
            stop = f" stopped by {', '.join(t['stopped_by'])}" if t["stopped_by"] else ""
            lines.append(
                f"    {t['proposal']:<22} {t['verdict']!s:<12} {pct:>7}{' kept' if t['kept'] else ''}"
                f"{stop}{mark}"
            )
    return "\n".join(lines)


def main() -> int:
    ap = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    ap.add_argument(
        "--suite", choices=sorted(SUITES), default="unseen", help="the workload folder (tests/e2e/...)"
    )
    ap.add_argument("--workload", action="append", help="folder name under the suite (repeatable)")
    ap.add_argument("--replicates", type=int, default=5, help="replicates per sweep combination")
    ap.add_argument("--run-replicates", type=int, default=None, help="replicates per arm of the run")
    ap.add_argument("--max-experiments", type=int, default=5)
    ap.add_argument("--json", action="store_true")
    ap.add_argument("--check", action="store_true", help=f"exit 1 when a score is below {TARGET}")
    args = ap.parse_args()
    root = SUITES[args.suite]
    folders = (
        [root / w for w in args.workload]
        if args.workload
        else sorted(p.parent for p in root.glob("*/truth.toml"))
    )
    results = [score_of(f / "workload.toml", args) for f in folders]
    if args.json:
        print(json.dumps({"schema": "dftune.bench.tuning/1", "target": TARGET, "results": results}, indent=1))
    else:
        print(table(results))
    missed = [r for r in results if r["score"] < TARGET or r["kept_disguised"] or r["disguised_not_stopped"]]
    return 1 if args.check and missed else 0


if __name__ == "__main__":
    sys.exit(main())
