"""Diagnosis rules: every threshold at its edge, scoring bins, metric choice, gate, loading errors."""

from __future__ import annotations

from pathlib import Path
from typing import Any

import pytest

from dftune.core.vocabulary import CATEGORIES
from dftune.tools.diagnose import engine
from dftune.tools.diagnose.metrics import summary_metrics
from dftune.tools.diagnose.rules import Condition, Rule, RuleError, RuleSet, evaluate, load_rulesets, score
from dftune.tools.trace.model import Analysis, FamilyStats, Imbalance, Shape

RULESETS = load_rulesets()
SUMMARY_RULES = [(rs, r) for rs in RULESETS for r in rs.rules if r.view == "summary"]


def empty_analysis(**changes: Any) -> Analysis:
    base: dict[str, Any] = dict(
        files=1,
        trace_files=["t"],
        events=0,
        skipped_lines=0,
        metadata_lines=0,
        counter_events=0,
        aggregated_events=0,
        formats={},
        processes=1,
        hosts=[],
        job_time_s=1.0,
        read=FamilyStats(),
        write=FamilyStats(),
        metadata=FamilyStats(),
        sync=FamilyStats(),
        io_time_s=0.0,
        read_time_pct=0.0,
        write_time_pct=0.0,
        metadata_time_pct=0.0,
        small_io_pct=0.0,
        small_read_pct=0.0,
        small_write_pct=0.0,
        seq_pct=0.0,
        consecutive_pct=0.0,
        rand_pct=0.0,
        classified_accesses=0,
        xfer_size_hist={},
        unoverlapped_io_time_s=0.0,
        io_wall_time_s=0.0,
        io_fraction_of_job=0.0,
        unoverlapped_io_fraction=0.0,
        bw_job_mib_s=None,
        files_accessed=0,
        imbalance=Imbalance(),
        shape=Shape(),
        layers=[],
    )
    base.update(changes)
    return Analysis(**base)


BASE = summary_metrics(empty_analysis())


def satisfying(cond: Condition) -> Any:
    """A value that comfortably satisfies the condition."""
    v = cond.value
    if isinstance(v, bool | str):
        return v
    return {">": v * 2 + 1, ">=": v * 2 + 1, "<": v / 2 - 1, "<=": v / 2 - 1, "==": v, "!=": v + 1}[cond.op]


def metrics_where_all_hold(rule: Rule) -> dict[str, Any]:
    m = dict(BASE)
    for c in rule.when:
        m[c.metric] = satisfying(c)
    return m


def fired(rs: RuleSet, rule: Rule, metrics: dict[str, Any]) -> bool:
    one = RuleSet(source=rs.source, citation=rs.citation, rules=[rule], path=rs.path)
    return bool(evaluate([one], metrics))


@pytest.mark.parametrize(("rs", "rule"), SUMMARY_RULES, ids=[r.id for _, r in SUMMARY_RULES])
def test_every_rule_fires_when_all_conditions_hold(rs: RuleSet, rule: Rule) -> None:
    assert fired(rs, rule, metrics_where_all_hold(rule))


EDGE_CASES = [
    (rs, rule, i)
    for rs, rule in SUMMARY_RULES
    for i, c in enumerate(rule.when)
    if not isinstance(c.value, bool | str) and c.op in (">", ">=", "<", "<=")
]


@pytest.mark.parametrize(
    ("rs", "rule", "i"), EDGE_CASES, ids=[f"{r.id}-{r.when[i].metric}" for _, r, i in EDGE_CASES]
)
def test_thresholds_at_their_edges(rs: RuleSet, rule: Rule, i: int) -> None:
    """Exactly at the threshold: fires for >= and <=, not for > and <; just past it: fires."""
    cond = rule.when[i]
    assert isinstance(cond.value, int | float)
    m = metrics_where_all_hold(rule)
    m[cond.metric] = cond.value
    assert fired(rs, rule, m) is (cond.op in (">=", "<="))
    eps = max(abs(cond.value) * 1e-6, 1e-9)
    m[cond.metric] = cond.value + eps if cond.op in (">", ">=") else cond.value - eps
    assert fired(rs, rule, m)
    m[cond.metric] = cond.value - eps if cond.op in (">", ">=") else cond.value + eps
    assert not fired(rs, rule, m)


def test_published_thresholds_are_the_ones_in_the_data() -> None:
    rules = {r.id: r for rs in RULESETS for r in rs.rules}
    cond = {rid: {c.metric: (c.op, c.value) for c in r.when} for rid, r in rules.items()}
    # WisIO/dfanalyzer
    assert cond["W01"]["metadata_time_frac"] == (">=", 0.5)
    assert cond["W02"]["rand_frac"] == (">", 0.5)
    assert cond["W03"]["read_time_frac"] == (">", 0.5) and cond["W03"]["read_mean_xfer"] == ("<", 1048576)
    assert cond["W04"]["write_time_frac"] == (">", 0.5) and cond["W04"]["write_mean_xfer"] == ("<", 1048576)
    assert cond["W05"]["ops_imbalance"] == (">", 0.1)
    assert cond["W06"]["bytes_imbalance"] == (">", 0.1)
    assert cond["W07"]["unoverlapped_frac"] == (">", 0.5)
    # Drishti
    assert cond["DP05"] == {"small_read_frac": (">", 0.1), "small_read_count": (">", 1000)}
    assert cond["DP06"] == {"small_write_frac": (">", 0.1), "small_write_count": (">", 1000)}
    assert cond["DP11"] == {"random_read_frac": (">", 0.2), "random_read_count": (">", 1000)}
    assert cond["DP13"] == {"random_write_frac": (">", 0.2), "random_write_count": (">", 1000)}
    assert cond["DP18"]["bytes_imbalance_max_min"] == (">", 0.15)
    assert cond["DS01"]["stdio_bytes_frac"] == (">", 0.1)
    assert cond["DP21"]["bytes_imbalance_max_min"] == (">", 0.3)
    assert cond["DP07"]["misaligned_frac"] == (">", 0.1)
    assert cond["DP07"]["misaligned_count"] == (">", 1000)


def test_at_equal_score_where_the_time_goes_leads() -> None:
    m = dict(
        BASE,
        read_time_frac=0.95,
        read_count=10,
        misaligned_frac=0.99,
        misaligned_count=5000,
        misaligned_time_frac=0.97,
    )
    found = evaluate(RULESETS, m)
    assert [f.id for f in found[:2]] == ["T01", "DP07"]  # both score 5; DP07's severity is higher


def test_rules_are_data_with_sources() -> None:
    from dftune.tools.catalog import load_citations

    citations = load_citations()
    ids = [r.id for rs in RULESETS for r in rs.rules]
    assert len(ids) == len(set(ids))
    for rs in RULESETS:
        assert rs.source
        assert rs.citation is None or rs.citation in citations, rs.citation
        for r in rs.rules:
            assert r.category in CATEGORIES and r.provenance and r.message


@pytest.mark.parametrize(
    ("value", "expected"),
    [
        (0.0, 1),
        (0.2499, 1),
        (0.25, 2),
        (0.4999, 2),
        (0.5, 3),
        (0.7499, 3),
        (0.75, 4),
        (0.8999, 4),
        (0.9, 5),
        (1.0, 5),
    ],
)
def test_score_bins(value: float, expected: int) -> None:
    assert score(value) == expected


def test_findings_are_sorted_most_severe_first() -> None:
    a = empty_analysis(
        read=FamilyStats(count=10, time_s=8.0, sized=10, bytes=10 << 20, mean_xfer_bytes=1 << 20),
        metadata=FamilyStats(count=1000, time_s=2.0),
    )
    found = evaluate(RULESETS, summary_metrics(a))
    assert [f.id for f in found][:1] == ["T01"]
    assert found[0].score == 4  # 0.8 of I/O time
    assert "80%" in found[0].evidence


@pytest.mark.parametrize(
    ("scores", "metric"),
    [
        ({"read-time": 5}, "time"),
        ({"write-time": 4, "read-time": 2}, "time"),
        ({"small-io": 4}, "iops"),
        ({"sequentiality": 5}, "iops"),
        ({"metadata": 4}, "metadata_ops"),
        ({"metadata": 4, "small-io": 5}, "time"),  # several dominant -> time
        ({"metadata": 3}, "time"),  # nothing dominant -> default
        ({}, "time"),
    ],
)
def test_metric_choice_follows_the_seed_table(scores: dict[str, int], metric: str) -> None:
    full = {c: 0 for c in CATEGORIES} | scores
    assert engine.choose_metric(full).metric == metric


def test_gate_vpic_lesson_and_shapes() -> None:
    vpic = empty_analysis(io_fraction_of_job=0.0079, shape=Shape(kind="op-count-bound"))
    g = engine.gate(vpic)
    assert not g.worth_tuning and g.allowed_layers == ["L1"]
    assert "0.79%" in g.reason and "coalescing" in g.reason
    busy = empty_analysis(io_fraction_of_job=0.28, shape=Shape(kind="bandwidth-bound"))
    g = engine.gate(busy)
    assert g.worth_tuning and g.allowed_layers == ["L1", "L2", "L3"]
    edge = empty_analysis(io_fraction_of_job=0.05)
    assert engine.gate(edge).worth_tuning


def test_checklist_has_twelve_categories_and_never_rules_out_before_literature() -> None:
    d = engine.diagnose_analysis(empty_analysis())
    assert [e.number for e in d.checklist] == list(range(1, 13))
    assert {e.verdict for e in d.checklist} == {"applicable_not_measured"}


@pytest.mark.parametrize(
    ("text", "needle"),
    [
        ("source = 'x'\nrules = [", "not valid TOML"),
        (
            "source='x'\n[[rules]]\nid='W99'\nname='n'\ncategory='nope'\nwhen=[]\nseverity='a'\nmessage='m'\nprovenance='p'",
            "category",
        ),
        (
            "source='x'\n[[rules]]\nid='W99'\nname='n'\ncategory='metadata'\nwhen=[]\nseverity='a'\nmessage='m'\n"
            "provenance='p'\nextra=1",
            "extra",
        ),
    ],
)
def test_bad_rule_files_name_the_file(tmp_path: Path, text: str, needle: str) -> None:
    (tmp_path / "broken.toml").write_text(text)
    with pytest.raises(RuleError) as info:
        load_rulesets(tmp_path)
    assert "broken.toml" in str(info.value) and needle in str(info.value)


def test_duplicate_ids_and_unknown_metrics_are_errors(tmp_path: Path) -> None:
    rule = (
        "[[rules]]\nid='W01'\nname='n'\ncategory='metadata'\nwhen=[{metric='nope', op='>', value=1}]\n"
        "severity='nope'\nmessage='m'\nprovenance='p'\n"
    )
    (tmp_path / "a.toml").write_text("source='a'\n" + rule)
    (tmp_path / "b.toml").write_text("source='b'\n" + rule)
    with pytest.raises(RuleError, match="already defined"):
        load_rulesets(tmp_path)
    (tmp_path / "b.toml").unlink()
    with pytest.raises(RuleError, match="unknown metric 'nope'"):
        evaluate(load_rulesets(tmp_path), BASE)


def test_message_templates_cannot_reach_attributes() -> None:
    rs = RuleSet(
        source="x",
        rules=[
            Rule(
                id="X01",
                name="n",
                category="metadata",
                when=[],
                severity="io_time_s",
                message="{io_time_s.__class__}",
                provenance="p",
            )
        ],
    )
    with pytest.raises(RuleError):
        evaluate([rs], BASE)


@pytest.mark.parametrize(("seconds", "fires"), [(30.0, False), (30.001, True), (5.0, False)])
def test_proc_view_rule_dp17_at_its_edge(seconds: float, fires: bool) -> None:
    from dftune.tools.diagnose.metrics import proc_metrics

    rows = [
        proc_metrics(
            {"host": "n1", "pid": 1, "rank": 0, "metadata_time_s": seconds, "io_time_s": 40.0}, 100.0
        ),
        proc_metrics({"host": "n1", "pid": 2, "rank": 1, "metadata_time_s": 1.0, "io_time_s": 2.0}, 100.0),
    ]
    found = {f.id: f for f in evaluate(RULESETS, BASE, {"proc": rows})}
    assert ("DP17" in found) is fires
    if fires:
        assert found["DP17"].view == "proc" and "n1:1 (rank 0)" in found["DP17"].evidence
        assert found["DP17"].rows[0]["process"] == "n1:1 (rank 0)"
        assert found["DP17"].score == 2  # 30 s of 100 s of I/O time


def test_file_view_rule_f01_names_the_files() -> None:
    from dftune.tools.diagnose.metrics import file_metrics

    rows = [
        file_metrics({"path": "/d/a", "io_time_s": 10.0, "metadata_time_s": 9.0}, 20.0),
        file_metrics({"path": "/d/b", "io_time_s": 10.0, "metadata_time_s": 1.0}, 20.0),
    ]
    found = {f.id: f for f in evaluate(RULESETS, BASE, {"file": rows})}
    assert "F01" in found and "/d/a" in found["F01"].evidence and "50%" in found["F01"].evidence


@pytest.mark.parametrize(
    ("processes", "share", "fires"), [(1, 0.5, False), (2, 0.5, True), (2, 0.0099, False), (2, 0.01, True)]
)
def test_shared_file_rule_f02_at_its_edges(processes: int, share: float, fires: bool) -> None:
    from dftune.tools.diagnose.metrics import file_metrics

    rows = [file_metrics({"path": "/d/shared.h5", "io_time_s": share * 100.0, "processes": processes}, 100.0)]
    found = {f.id: f for f in evaluate(RULESETS, BASE, {"file": rows})}
    assert ("F02" in found) is fires
    if fires:
        assert found["F02"].category == "shared-file" and "/d/shared.h5" in found["F02"].evidence


@pytest.mark.parametrize(
    ("cat", "pct", "fires"), [("checkpoint", 5.0, True), ("checkpoint", 4.99, False), ("reader", 50.0, False)]
)
def test_checkpoint_layer_rule_l04_at_its_edge(cat: str, pct: float, fires: bool) -> None:
    from dftune.tools.diagnose.metrics import layer_metrics

    rows = [
        layer_metrics({"cat": cat, "count": 3, "time_s": 9.0, "mean_ms": 3000.0, "share_of_job_pct": pct})
    ]
    found = {f.id: f for f in evaluate(RULESETS, BASE, {"layer": rows})}
    assert ("L04" in found) is fires
    if fires:
        assert found["L04"].view == "layer" and found["L04"].category == "write-time"


@pytest.mark.parametrize(("meta", "io", "fires"), [(5.0, 10.0, True), (4.99, 10.0, False), (9.0, 4.9, False)])
def test_time_view_rule_wt01_at_its_edges(meta: float, io: float, fires: bool) -> None:
    from dftune.tools.diagnose.metrics import time_metrics

    rows = [
        time_metrics({"start_s": 0.0, "end_s": 1.0, "io_time_s": io, "metadata_time_s": min(meta, io)}, 100.0)
    ]
    found = {f.id: f for f in evaluate(RULESETS, BASE, {"time": rows})}
    assert ("WT01" in found) is fires
    if fires:
        assert found["WT01"].view == "time" and "0.000-1.000 s" in found["WT01"].evidence
        assert found["WT01"].severity_value == pytest.approx(meta / 100.0)
