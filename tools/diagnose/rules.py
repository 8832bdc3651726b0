"""Bottleneck rules as data: load them from resources/rules/*.toml and evaluate them.

A rule names a stable id, a category from the fixed vocabulary, the view it reads, a
conjunction of threshold conditions over metric names (:mod:`metrics`), the metric whose
value sets its severity, a message template that states the evidence, and where its
thresholds come from.  This module only evaluates; every threshold lives in the data.
"""

from __future__ import annotations

import functools
import math
import operator
import string
import tomllib
from collections.abc import Callable, Iterable
from importlib import resources
from pathlib import Path
from typing import Any, Literal

from pydantic import Field

from dftune.core import resource
from dftune.core.domain.diagnosis import Finding
from dftune.core.errors import DftuneError
from dftune.core.model import StrictModel
from dftune.core.vocabulary import Category
from dftune.tools.trace.render import human_bytes


@functools.cache
def time_categories() -> frozenset[str]:
    """Categories that say where the time goes; they lead
    at equal score (resources/diagnosis/ranking.toml)."""
    return frozenset(resource.toml("diagnosis/ranking.toml")["where_the_time_goes"])


#: dfanalyzer's percentage bins: a severity value at or above each edge adds one point,
#: on top of 1 for a rule that fired (0.1 -> 1, 0.3 -> 2, 0.6 -> 3, 0.8 -> 4, 0.95 -> 5).
SCORE_EDGES = (0.25, 0.5, 0.75, 0.9)

Op = Literal[">", ">=", "<", "<=", "==", "!="]
_OPS: dict[str, Callable[[Any, Any], bool]] = {
    ">": operator.gt,
    ">=": operator.ge,
    "<": operator.lt,
    "<=": operator.le,
    "==": operator.eq,
    "!=": operator.ne,
}


class RuleError(DftuneError, ValueError):
    """A rule file is malformed; the message names the file and the rule."""


class Condition(StrictModel):
    metric: str
    op: Op
    value: float | str | bool


class Rule(StrictModel):
    id: str = Field(pattern=r"^[A-Z]{1,4}\d{2,3}$")
    name: str
    category: Category
    #: summary: the whole job; file / proc: each accessed file / each process is a row
    view: Literal["summary", "file", "proc", "layer", "time"] = "summary"
    when: list[Condition]
    severity: str
    message: str
    provenance: str
    #: file view only: how many offending rows the evidence lists
    top: int = 5


class RuleSet(StrictModel):
    source: str
    citation: str | None = None
    description: str = ""
    rules: list[Rule]
    #: filled by the loader: which file the rules came from
    path: str = ""


def score(value: float) -> int:
    """1..5 for a fired rule from its severity value (dfanalyzer's bins)."""
    if value is None or (isinstance(value, float) and math.isnan(value)):
        return 1
    return 1 + sum(1 for edge in SCORE_EDGES if value >= edge)


def load_rulesets(directory: Path | None = None) -> list[RuleSet]:
    """All rule files, in name order; a bad file raises :class:`RuleError` naming it."""
    files: list[Any]  # Traversable (package data) or Path
    if directory is None:
        root = resources.files("dftune.resources") / "rules"
        files = sorted((f for f in root.iterdir() if f.name.endswith(".toml")), key=lambda f: f.name)
    else:
        files = sorted(Path(directory).glob("*.toml"))
    sets: list[RuleSet] = []
    seen: dict[str, str] = {}
    for f in files:
        name = getattr(f, "name", str(f))
        try:
            data = tomllib.loads(f.read_text(encoding="utf-8"))
        except tomllib.TOMLDecodeError as exc:
            raise RuleError(f"{name}: not valid TOML: {exc}") from None
        rs = resource.validated(name, {**data, "path": str(f)}, RuleSet, RuleError)
        for rule in rs.rules:
            if rule.id in seen:
                raise RuleError(f"{name}: rule id {rule.id} already defined in {seen[rule.id]}")
            seen[rule.id] = name
        sets.append(rs)
    return sets


def _holds(cond: Condition, metrics: dict[str, Any], where: str) -> bool:
    if cond.metric not in metrics:
        raise RuleError(f"{where}: unknown metric {cond.metric!r}")
    value = metrics[cond.metric]
    try:
        return bool(_OPS[cond.op](value, cond.value))
    except TypeError:
        return False


class _SafeFormatter(string.Formatter):
    """Formats ``{metric:spec}`` fields only: no attribute or index access in templates.

    ``{x_bytes:size}`` prints a byte count as people read it (binary units, as Darshan's job summary
    does): 16287.2 KiB reads ``15.9 MiB``."""

    def format_field(self, value: Any, format_spec: str) -> Any:
        if format_spec == "size" and isinstance(value, int | float):
            return human_bytes(value)
        return super().format_field(value, format_spec)

    def get_field(self, field_name: str, args: Any, kwargs: Any) -> Any:
        if not field_name.isidentifier():
            raise RuleError(f"message field {field_name!r} is not a plain metric name")
        return super().get_field(field_name, args, kwargs)


def render_message(template: str, metrics: dict[str, Any]) -> str:
    try:
        return _SafeFormatter().format(template, **metrics)
    except (KeyError, ValueError) as exc:
        raise RuleError(f"message {template!r}: {exc}") from None


#: Columns of the offending rows kept as evidence, per row view.
_ROW_EVIDENCE = {
    "file": ("path", "io_time_s", "metadata_time_frac", "ops"),
    "proc": ("process", "rank", "io_time_s", "metadata_time_s", "ops"),
    "layer": ("cat", "count", "time_s", "share_of_process_time"),
    "time": ("window", "io_time_s", "metadata_time_frac", "io_time_share"),
}


def evaluate(
    rulesets: Iterable[RuleSet], summary: dict[str, Any], rows: dict[str, list[dict[str, Any]]] | None = None
) -> list[Finding]:
    """Every rule that fires, most severe first (score, then severity value).

    Row views (``file``, ``proc``) fire when any row meets the conditions; the severity is
    the sum of the rows' severity metric, and the evidence names the rows.
    """
    findings: list[Finding] = []
    for rs in rulesets:
        for rule in rs.rules:
            where = f"{Path(rs.path).name}:{rule.id}"
            if rule.view == "summary":
                if all(_holds(c, summary, where) for c in rule.when):
                    if rule.severity not in summary:
                        raise RuleError(f"{where}: unknown severity metric {rule.severity!r}")
                    value = float(summary[rule.severity])
                    findings.append(_finding(rs, rule, value, render_message(rule.message, summary)))
            elif rows is not None and rule.view in rows:
                hits = [r for r in rows[rule.view] if all(_holds(c, r, where) for c in rule.when)]
                if hits:
                    findings.append(_row_finding(rs, rule, summary, hits))
    findings.sort(key=lambda f: (f.score, f.category in time_categories(), f.severity_value), reverse=True)
    return findings


def _row_finding(rs: RuleSet, rule: Rule, summary: dict[str, Any], hits: list[dict[str, Any]]) -> Finding:
    value = sum(float(r.get(rule.severity, 0.0)) for r in hits)
    hits = sorted(hits, key=lambda r: float(r.get("io_time_s") or r.get("time_s") or 0.0), reverse=True)
    label = {"file": "path", "proc": "process", "layer": "cat", "time": "window"}[rule.view]
    ctx = {**summary, "hit_rows": len(hits), "hit_share": value, "top_row": hits[0].get(label)}
    f = _finding(rs, rule, value, render_message(rule.message, ctx))
    f.rows = [{k: r.get(k) for k in _ROW_EVIDENCE[rule.view]} for r in hits[: rule.top]]
    return f


def _finding(rs: RuleSet, rule: Rule, value: float, evidence: str) -> Finding:
    return Finding(
        id=rule.id,
        name=rule.name,
        category=rule.category,
        score=score(value),
        severity_value=round(value, 6),
        view=rule.view,
        evidence=evidence,
        rule_source=rs.source,
        provenance=rule.provenance,
        citation=rs.citation,
    )
