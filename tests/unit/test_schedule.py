"""The order the test runs hand out work in: longest work unit first, a group's tests together."""

from __future__ import annotations

import json
from dataclasses import dataclass, field
from pathlib import Path

from tests.schedule import DEFAULT_S, base_nodeid, durations_from, load_durations, longest_first, work_unit


@dataclass
class _Mark:
    args: tuple[str, ...]


@dataclass
class _Item:
    nodeid: str
    group: str | None = None
    marks: dict[str, _Mark] = field(default_factory=dict)

    def __post_init__(self) -> None:
        if self.group:  # as pytest-xdist names a grouped test under --dist loadgroup
            self.nodeid = f"{self.nodeid}@{self.group}"
            self.marks["xdist_group"] = _Mark((self.group,))

    def get_closest_marker(self, name: str) -> _Mark | None:
        return self.marks.get(name)


def test_the_longest_unit_goes_first_and_a_group_counts_as_its_sum() -> None:
    items = [
        _Item("t/a.py::quick"),
        _Item("t/b.py::one", group="slurm"),
        _Item("t/c.py::long"),
        _Item("t/b.py::two", group="slurm"),
        _Item("t/d.py::unknown"),
    ]
    durations = {"t/a.py::quick": 1.0, "t/b.py::one": 60.0, "t/b.py::two": 50.0, "t/c.py::long": 100.0}
    order = [i.nodeid for i in longest_first(items, durations)]
    # the group (110 s) before the single long test (100 s); its tests together, in file order
    assert order == [
        "t/b.py::one@slurm",
        "t/b.py::two@slurm",
        "t/c.py::long",
        "t/a.py::quick",
        "t/d.py::unknown",
    ]


def test_ties_and_unmeasured_tests_keep_the_collection_order() -> None:
    items = [_Item(f"t/x.py::t{i}") for i in range(5)]
    assert longest_first(items, {}) == items
    assert longest_first(items, {"t/x.py::t3": DEFAULT_S}) == items


def test_a_group_suffix_is_dropped_but_a_parameter_with_an_at_sign_is_kept() -> None:
    assert base_nodeid("t/b.py::one@slurm") == "t/b.py::one"
    assert base_nodeid("t/b.py::one[x@y]") == "t/b.py::one[x@y]"
    assert base_nodeid("t/b.py::one[x@y]@grp") == "t/b.py::one[x@y]"
    assert work_unit(_Item("t/b.py::one[x@y]")) == "t/b.py::one[x@y]"
    assert work_unit(_Item("t/b.py::one", group="g")) == "@g"


def test_the_durations_file_lists_only_tests_worth_ordering(tmp_path: Path) -> None:
    table = durations_from([("t/a.py::slow@grp", 12.345), ("t/a.py::fast", 0.2)])
    assert table == {"t/a.py::slow": 12.3}
    path = tmp_path / "durations.json"
    path.write_text(json.dumps({"tests": table}))
    assert load_durations(path) == table
    assert load_durations(tmp_path / "missing.json") == {}
    path.write_text("{not json")
    assert load_durations(path) == {}  # a broken file only loses the order, never the run
