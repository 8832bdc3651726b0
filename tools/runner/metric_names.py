"""The name and unit of the metric a spec measures, whatever its kind, for the KB, guards and reports.

A record saying "stdout_metric improved 12%" cannot be compared with another run; the name is
what the program (or the benchmark: IOR's "Max Write" in MiB/s, DLIO's training throughput in
samples/s) calls the number, and the unit comes from the benchmark's own output or from the name.
"""

from __future__ import annotations

import re

from dftune.tools.runner.spec import Metric

#: IOR's fields as named in a record, with the unit IOR prints them in.
IOR_NAMES = {
    "max_write": ("max_write_MiBps", "MiB/s"),
    "max_read": ("max_read_MiBps", "MiB/s"),
    "write_time": ("write_time_s", "s"),
    "read_time": ("read_time_s", "s"),
}
#: DLIO's fields (named as in its config and summary) with the unit of its [METRIC] lines.
DLIO_UNITS = {
    "train_au": "%",
    "train_throughput": "samples/s",
    "train_io": "MB/s",
    "eval_au": "%",
    "eval_throughput": "samples/s",
}
#: Name suffixes that say a unit (checked case-insensitively, longest first).
_SUFFIX_UNITS = (
    ("_samples_per_second", "samples/s"),
    ("_mb_per_second", "MB/s"),
    ("_percentage", "%"),
    ("_bytes_per_s", "B/s"),
    ("_mibps", "MiB/s"),
    ("_mib_s", "MiB/s"),
    ("_gib_s", "GiB/s"),
    ("_mb_s", "MB/s"),
    ("_ms", "ms"),
    ("_us", "µs"),
    ("_s", "s"),
    ("_sec", "s"),
    ("_seconds", "s"),
    ("_bytes", "B"),
    ("_ops", "ops"),
    ("_pct", "%"),
)
_REGEX_META = re.compile(r"[\\()\[\].*+?{|$]")


def unit_of_name(name: str) -> str:
    """The unit a metric name says it has (``epoch_time_s`` -> s), or '' when it does not say."""
    low = name.lower()
    for suffix, unit in sorted(_SUFFIX_UNITS, key=lambda su: -len(su[0])):
        if low.endswith(suffix):
            return unit
    return ""


def pattern_name(pattern: str) -> str | None:
    """The literal words a regex starts with (``epoch time: ([0-9.]+)`` -> ``epoch_time``), or None."""
    literal = _REGEX_META.split(pattern.lstrip("^"), maxsplit=1)[0]
    words = re.findall(r"[A-Za-z0-9_]+", literal)
    name = "_".join(words).strip("_")
    return name if name and not name[0].isdigit() else None


def _joined(names: list[str], how: str) -> str:
    if len(names) == 1:
        return names[0]
    return "+".join(names) if how == "sum" else f"{how}({','.join(names)})"


def _common_unit(units: list[str]) -> str:
    return units[0] if units and all(u == units[0] for u in units) else ""


def metric_label(metric: Metric) -> tuple[str, str]:
    """(name, unit) of what ``metric`` reads: IOR ``max_write`` -> (``max_write_MiBps``, MiB/s)."""
    kind = metric.kind
    if kind == "wall_time":
        return "wall_time_s", "s"
    if kind == "ior":
        pairs = [IOR_NAMES[f] for f in metric.names("field")]
        return _joined([n for n, _ in pairs], metric.combine), _common_unit([u for _, u in pairs])
    if kind == "dlio":
        fields = metric.names("field")
        return _joined(fields, metric.combine), _common_unit([DLIO_UNITS[f] for f in fields])
    if kind == "file":
        keys = metric.names("key")
        # a dotted JSON path is named by its last word (list indexes say nothing)
        names = [next((p for p in reversed(k.split(".")) if not p.lstrip("-").isdigit()), k) for k in keys]
        names = names or metric.names("column")
    else:
        found = [pattern_name(p) for p in metric.regexes()]
        if not all(found):
            stream = metric.stream or ("stdout" if kind == "stdout_regex" else "output")
            return f"{stream}_metric", ""
        names = [n for n in found if n]
    return _joined(names, metric.combine), _common_unit([unit_of_name(n) for n in names])
