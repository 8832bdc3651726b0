"""Every metric kind has a name and a unit a reader (and a later run) can compare: IOR's Max Write
in MiB/s, DLIO's throughput in samples/s, a JSON key or CSV column, the words a regex starts with."""

from __future__ import annotations

import pytest

from dftune.graphs.guard_nodes import _metric_name
from dftune.tools.report.sections import metric_info
from dftune.tools.runner.metric_names import DLIO_UNITS, IOR_NAMES, metric_label, pattern_name, unit_of_name
from dftune.tools.runner.metrics import DLIO_FIELDS, IOR_FIELDS
from dftune.tools.runner.spec import Metric, WorkloadSpec


@pytest.mark.parametrize(
    ("metric", "name", "unit"),
    [
        ({}, "wall_time_s", "s"),
        ({"kind": "stdout_regex", "pattern": r"epoch_time_s=([0-9.]+)"}, "epoch_time_s", "s"),
        ({"kind": "stdout_regex", "pattern": r"^epoch time: ([0-9.]+)"}, "epoch_time", ""),
        ({"kind": "regex", "pattern": r"([0-9.]+) MiB/s", "stream": "stderr"}, "stderr_metric", ""),
        ({"kind": "stdout_regex", "pattern": r"(\d+)"}, "stdout_metric", ""),
        ({"kind": "regex", "patterns": [r"write_s=(\S+)", r"read_s=(\S+)"]}, "write_s+read_s", "s"),
        ({"kind": "regex", "patterns": [r"a_ms=(\S+)", r"b_s=(\S+)"], "combine": "max"}, "max(a_ms,b_s)", ""),
        (
            {"kind": "file", "path": "m.json", "key": "metric.train_io_mean_MB_per_second"},
            "train_io_mean_MB_per_second",
            "MB/s",
        ),
        ({"kind": "file", "path": "m.json", "key": "epochs.-1.time_s"}, "time_s", "s"),
        ({"kind": "file", "path": "m.csv", "column": "bw_mib_s"}, "bw_mib_s", "MiB/s"),
        ({"kind": "ior", "field": "max_write"}, "max_write_MiBps", "MiB/s"),
        ({"kind": "ior", "field": ["write_time", "read_time"]}, "write_time_s+read_time_s", "s"),
        ({"kind": "dlio", "field": "train_throughput"}, "train_throughput", "samples/s"),
        ({"kind": "dlio", "field": "train_au"}, "train_au", "%"),
        (
            {"kind": "dlio", "field": ["train_io", "eval_throughput"], "combine": "mean"},
            "mean(train_io,eval_throughput)",
            "",
        ),
    ],
)
def test_every_kind_has_a_name_and_unit(metric: dict, name: str, unit: str) -> None:
    assert metric_label(Metric(**metric)) == (name, unit)


def test_the_report_and_the_kb_use_the_same_name() -> None:
    spec = WorkloadSpec(name="ior", command=["ior", "-w"], metric=Metric(kind="ior", field="max_read"))
    info = metric_info(spec)
    assert info.model_dump() == {
        "name": "max_read_MiBps",
        "unit": "MiB/s",
        "lower_is_better": False,
        "kind": "ior",
    }
    assert _metric_name(spec) == "max_read_MiBps"


def test_every_benchmark_field_is_named() -> None:
    assert set(IOR_NAMES) == set(IOR_FIELDS)
    assert set(DLIO_UNITS) == set(DLIO_FIELDS)


def test_names_and_units_from_text() -> None:
    assert pattern_name(r"Max Write:\s+([0-9.]+)") == "Max_Write"
    assert pattern_name(r"^\s*(\d+)") is None
    assert pattern_name(r"9lives=(\d+)") is None
    assert unit_of_name("agg_bw_mib_s") == "MiB/s"
    assert unit_of_name("train_throughput_mean_samples_per_second") == "samples/s"
    assert unit_of_name("records") == ""
