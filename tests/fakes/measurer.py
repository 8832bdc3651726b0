"""A scripted measurer: the test says what each replicate of each arm measured.

The graph tier's stand-in for the workload's program behind the measurement seam
(tools/runner/measurer.py). ``bench`` hands it every start of the program; it finds the one arm
of its script the start belongs to and leaves what that arm's replicate measured where ``bench``
reads a real run: the process's result (status, exit code, wall time), its stdout (the metric and
the work counters, printed so that the spec's own patterns read them back), its stderr when it
fails, and, for a traced replicate, a synthetic dftracer 2.x trace of what the program did
(tests/tracegen.py, one file per process). Everything after the start (metric extraction,
statistics, the paired sittings and their extension, trace analysis, the guards) runs for real on
it, and no verdict depends on how busy the machine is.

An arm is a condition of the workload: the knobs' values (every knob it does not name at its
default), the environment the arm adds (an L2 setting), and its source. An arm that says nothing
of its source runs the workload's own source tree only; an iteration's patched copy (dftune makes
it under ``$DFTUNE_HOME``) is matched by an arm that names texts its files hold.

As strict as the real thing: a start no arm covers, or that two arms cover, is an error naming
its condition; so are a traced replicate of an arm that does not say what the program did, a
replicate beyond the values an arm lists, a sampled start of an arm that does not say what
the profiler saw, and a work counter the spec declares that the arm does
not report.
"""

from __future__ import annotations

import math
import re
from collections.abc import Callable, Mapping, Sequence
from dataclasses import dataclass, field

from dftune.core.home import dftune_home
from dftune.core.process import ProcessResult
from dftune.tools.runner.measurer import Invocation
from dftune.tools.runner.spec import WorkloadSpec
from tests.tracegen import Proc, write_trace

#: a replicate's metric value: one per replicate index, or a function of the index
Values = Sequence[float] | Callable[[int], float]
#: what a traced replicate of the program did: its processes' events (tests/tracegen.py)
Program = Callable[[Invocation], Sequence[Proc]]


class ScriptError(AssertionError):
    """The script does not say what this start measured (or says it twice)."""


def steady(median: float, spread_pct: float = 1.0) -> Callable[[int], float]:
    """Replicate ``i`` measures ``median`` moved by a fixed pattern of offsets within
    ``spread_pct`` percent: a little spread for the statistics, the same on every machine."""
    pattern = (0.0, 0.6, -0.6, 1.0, -1.0, 0.3, -0.3, 0.8, -0.8, 0.45, -0.45)
    return lambda i: median * (1 + spread_pct / 100 * pattern[i % len(pattern)])


@dataclass(frozen=True)
class Arm:
    """One condition of the workload and what its replicates measured."""

    #: the knobs' values in this arm; every knob not named is at its default
    settings: Mapping[str, object] = field(default_factory=dict)
    #: the metric value of each replicate (by replicate index)
    values: Values = ()
    #: the environment the arm adds on top of the spec's (exactly)
    env: Mapping[str, str] = field(default_factory=dict)
    #: texts the arm's source files hold (file relative to the source tree -> text); empty: the
    #: workload's own source tree, never a copy dftune patched
    source: Mapping[str, str] = field(default_factory=dict)
    #: the work counters the program reports (every counter the spec declares)
    work: Mapping[str, float] = field(default_factory=dict)
    #: what a traced replicate did (required when the arm is traced)
    trace: Program | None = None
    #: the program fails: exit code 1, this on stderr
    fails: str = ""
    #: what else the program prints on stdout (its environment, a library's report)
    prints: Callable[[Invocation], str] | None = None
    #: each replicate's wall time; None: its metric value (a time), required for other metrics
    wall_s: Values | None = None
    #: what a sampling profiler saw of a sampled start (py-spy's raw collapsed stacks); required
    #: when a start of the arm is sampled (tools/runner/sampling.py)
    stacks: Callable[[Invocation], str] | None = None

    def describe(self) -> str:
        said = [_knobs(self.settings) or "default settings"]
        if self.env:
            said.append(f"env {dict(self.env)}")
        if self.source:
            said.append(f"source holding {dict(self.source)}")
        return ", ".join(said)


def _knobs(settings: Mapping[str, object]) -> str:
    return " ".join(f"{k}={v}" for k, v in sorted(settings.items()))


def _value(values: Values, i: int, what: str) -> float:
    if callable(values):
        return float(values(i))
    if i >= len(values):
        raise ScriptError(f"{what}: replicate r{i} asked, the script lists {len(values)} value(s)")
    return float(values[i])


def _printed(pattern: str, value: float, what: str) -> str:
    """A line that ``pattern`` reads ``value`` from: its first group replaced by the number, the
    pattern's escapes and anchors as the text they match. Checked by reading it back."""
    number = f"{value:.9f}".rstrip("0").rstrip(".") if value != int(value) else str(int(value))
    start = next((m.start() for m in re.finditer(r"(?<!\\)\((?!\?)", pattern)), None)
    if start is None:
        raise ScriptError(f"{what}: the pattern {pattern!r} has no group to print a number into")
    depth, end = 0, start
    for end in range(start, len(pattern)):
        if pattern[end] == "(" and pattern[end - 1] != "\\":
            depth += 1
        elif pattern[end] == ")" and pattern[end - 1] != "\\":
            depth -= 1
            if depth == 0:
                break

    def plain(part: str) -> str:
        part = re.sub(r"\\s[*+]?", " ", part).replace("^", "").replace("$", "")
        return re.sub(r"\\(.)", r"\1", part)

    line = plain(pattern[:start]) + number + plain(pattern[end + 1 :])
    found = re.search(pattern, line, flags=re.MULTILINE)
    read = found.group(1) if found and found.groups() else None
    if read is None or not math.isclose(float(read), value, rel_tol=1e-6):
        raise ScriptError(
            f"{what}: cannot print a line the pattern {pattern!r} reads {value} from "
            f"(tried {line!r}); give the arm a prints= that does"
        )
    return line


class ScriptedMeasurer:
    """The measurer a graph test gives the run's Context: ``arms`` say what each start measured.

    ``setup``: what the spec's setup command does (e.g. write the data set); without one, a setup
    start succeeds and does nothing. ``starts`` records every start, in order."""

    def __init__(self, arms: Sequence[Arm], *, setup: Callable[[Invocation], None] | None = None) -> None:
        self.arms = list(arms)
        self.setup = setup
        self.starts: list[Invocation] = []

    # ----- which arm

    def _own_tree(self, inv: Invocation) -> bool:
        """The workload's own source tree, not a copy dftune made (under $DFTUNE_HOME) and patched."""
        home = dftune_home().resolve()
        return home not in inv.source_dir.resolve().parents

    def _holds(self, arm: Arm, inv: Invocation) -> bool:
        spec = inv.spec
        names = {k.name for k in spec.knobs}
        unknown = sorted(set(arm.settings) - names)
        if unknown:
            raise ScriptError(f"arm ({arm.describe()}): {spec.name} has no knob {', '.join(unknown)}")
        wanted = {k.name: str(arm.settings.get(k.name, k.default)) for k in spec.knobs}
        if wanted != {k: str(v) for k, v in inv.settings.items()}:
            return False
        if dict(arm.env) != inv.env:
            return False
        if not arm.source:
            return self._own_tree(inv)
        for name, text in arm.source.items():
            path = inv.source_dir / name
            if not path.is_file() or text not in path.read_text(encoding="utf-8", errors="replace"):
                return False
        return True

    def condition(self, inv: Invocation) -> str:
        """The start's condition as an error names it."""
        defaults = {k.name: str(k.default) for k in inv.spec.knobs}
        changed = {k: v for k, v in inv.settings.items() if str(v) != defaults.get(k)}
        said = [_knobs(changed) or "default settings"]
        if inv.env:
            said.append(f"env {inv.env}")
        said.append("own source" if self._own_tree(inv) else f"patched source {inv.source_dir}")
        return f"{inv.spec.name} {inv.label} ({', '.join(said)})"

    def arm_of(self, inv: Invocation) -> Arm:
        found = [a for a in self.arms if self._holds(a, inv)]
        if not found:
            raise ScriptError(f"no scripted arm covers {self.condition(inv)}")
        if len(found) > 1:
            both = "; ".join(a.describe() for a in found)
            raise ScriptError(f"{len(found)} scripted arms cover {self.condition(inv)}: {both}")
        return found[0]

    # ----- the start

    def run(self, inv: Invocation) -> ProcessResult:
        self.starts.append(inv)
        inv.log_dir.mkdir(parents=True, exist_ok=True)
        if inv.purpose == "setup":
            if self.setup is not None:
                self.setup(inv)
            return self._ended(inv, "", "", 0, 0.0)
        arm = self.arm_of(inv)
        i = inv.index if inv.index is not None else 0  # the warm-up runs as the first replicate would
        what = self.condition(inv)
        if arm.fails:
            return self._ended(inv, "", arm.fails + "\n", 1, 0.0)
        value = _value(arm.values, i, what)
        spec = inv.spec
        lines = [arm.prints(inv)] if arm.prints else []
        lines += self._metric(spec, value, what)
        for counter in spec.work:
            if counter.name not in arm.work:
                raise ScriptError(f"{what}: the spec counts {counter.name}; the arm reports no such work")
            lines.append(_printed(counter.pattern, float(arm.work[counter.name]), f"{what} {counter.name}"))
        if inv.trace_dir is not None and inv.purpose == "replicate":
            if arm.trace is None:
                raise ScriptError(f"{what} is traced; the arm does not say what the program did")
            write_trace(inv.trace_dir, list(arm.trace(inv)))
        if inv.samples is not None:
            if arm.stacks is None:
                raise ScriptError(f"{what} is sampled; the arm does not say what the profiler saw")
            inv.samples.parent.mkdir(parents=True, exist_ok=True)
            inv.samples.write_text(arm.stacks(inv), encoding="utf-8")
        wall = self._wall(arm, spec, value, i, what)
        return self._ended(inv, "\n".join(lines) + "\n", "", 0, wall)

    def _metric(self, spec: WorkloadSpec, value: float, what: str) -> list[str]:
        m = spec.metric
        if m.kind == "wall_time":
            return []
        if m.kind != "stdout_regex" or m.streams() != ("stdout",) or len(m.regexes()) != 1:
            raise ScriptError(f"{what}: a {m.kind} metric read from {m.streams()}: give the arm its prints=")
        return [_printed(m.regexes()[0], value, what)]

    def _wall(self, arm: Arm, spec: WorkloadSpec, value: float, i: int, what: str) -> float:
        if arm.wall_s is not None:
            return _value(arm.wall_s, i, what)
        if spec.metric.kind == "wall_time" or spec.metric.lower_is_better:
            return value
        raise ScriptError(f"{what}: the metric is not a time; give the arm its wall_s")

    def _ended(self, inv: Invocation, out: str, err: str, code: int, wall: float) -> ProcessResult:
        (inv.log_dir / f"{inv.label}.out").write_text(out, encoding="utf-8")
        (inv.log_dir / f"{inv.label}.err").write_text(err, encoding="utf-8")
        return ProcessResult(
            status="ok" if code == 0 else "failed",
            exit_code=code,
            wall_s=wall,
            stdout_tail=out[-2000:],
            stderr_tail=err[-2000:],
            reason="" if code == 0 else f"exit code {code}",
        )
