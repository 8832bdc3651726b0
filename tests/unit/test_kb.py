"""The optimization knowledge base: guarded records, verdicts, scope partitioning, rendering."""

from __future__ import annotations

import gzip
import json
import sqlite3
from pathlib import Path
from typing import Any

import pytest

from dftune.core.domain.kb import KbRecordIn
from dftune.tools.catalog import Catalog, default_catalog
from dftune.tools.kb import (
    SCHEMA_VERSION,
    KbError,
    default_db_path,
    opt_kb_get,
    opt_kb_lookup,
    opt_kb_record,
    opt_kb_records,
    opt_kb_render,
)
from dftune.tools.runner.stats import compare
from dftune.tools.trace import Analysis, analyze

BASE = [10.0, 10.1, 9.9, 10.05, 9.95]


def scaled(factor: float) -> list[float]:
    return [v * factor for v in BASE]


def rec(**kw: Any) -> KbRecordIn:
    fields: dict[str, Any] = {
        "run_id": "run-1",
        "iteration": 1,
        "system": "node-a",
        "workload": "reader",
        "software": "posix",
        "strategy": "l1.dataloader_workers",
        "change": {"READERS": 4},
        "metric": "wall_time_s",
    }
    fields.update(kw)
    return KbRecordIn(**fields)


def guard(record: Any, name: str) -> Any:
    return next(d for d in record.guards if d.guard == name)


# --------------------------------------------------------------------------- tiny traces


def _meta(kind: str, name: str, value: str) -> str:
    return json.dumps(
        {
            "name": kind,
            "cat": "dftracer",
            "type": 1,
            "pid": 7,
            "tid": 7,
            "ph": 4,
            "args": {"hhash": "aa", "name": name, "value": value},
        }
    )


def _ev(name: str, ts: int, dur: int, **args: object) -> str:
    return json.dumps(
        {
            "id": ts,
            "name": name,
            "cat": "POSIX",
            "type": 3,
            "pid": 7,
            "tid": 7,
            "ts": ts,
            "dur": dur,
            "ph": 1,
            "args": {"hhash": "aa", **args},
        }
    )


def tiny_trace(folder: Path, reads: int) -> Analysis:
    """One process opening /d/data.bin and reading it in ``reads`` 64 KiB calls."""
    lines = [_meta("FH", "/d/data.bin", "bb"), _ev("open64", 1, 2, fhash="bb", flags=0)]
    lines += [_ev("read", 10 + 10 * i, 5, fhash="bb", ret=65536) for i in range(reads)]
    lines.append(_ev("close", 10 + 10 * reads, 1, fhash="bb"))
    folder.mkdir(parents=True)
    with gzip.open(folder / "trace-app.pfw.gz", "wt") as fh:
        fh.write("\n".join(lines) + "\n")
    return analyze([folder], profile=True)


# --------------------------------------------------------------------------- verdicts


def test_win_needs_5_percent_and_a_winning_comparison() -> None:
    cmp = compare(BASE, scaled(0.9))
    assert cmp.verdict == "win"
    r = opt_kb_record(rec(comparison=cmp, before_ci=(9.9, 10.1), after_ci=(8.9, 9.1)))
    assert r.verdict == "win" and not r.guard_triggered
    assert r.before == pytest.approx(10.0) and r.after == pytest.approx(9.0)
    assert r.change_pct == pytest.approx(10.0)
    assert r.p_value == cmp.p_value and r.ratio_ci95 == cmp.ci95 and r.comparison_verdict == "win"
    assert r.before_ci == (9.9, 10.1) and r.after_ci == (8.9, 9.1)
    assert r.scope == "workload" and r.layer == "L1"
    assert r.citation_id and r.citation_url and r.citation_url.startswith("http") and r.citation
    assert r.change == {"READERS": 4} and r.created.endswith("+00:00")


def test_a_real_4_percent_improvement_is_no_change() -> None:
    cmp = compare(BASE, scaled(0.96))
    assert cmp.verdict == "win"  # statistically real, but below the KB's 5%
    r = opt_kb_record(rec(comparison=cmp))
    assert r.verdict == "no_change" and "5%" in r.verdict_reason
    assert r.change_pct == pytest.approx(4.0)


def test_statistical_no_change_is_never_a_win_even_at_10_percent() -> None:
    r = opt_kb_record(rec(before=10.0, after=9.0, comparison={"verdict": "no_change", "p_value": 0.3}))
    assert r.verdict == "no_change" and "within the noise" in r.verdict_reason


def test_medians_alone_credit_no_win_but_report_a_large_loss() -> None:
    assert opt_kb_record(rec(before=10.0, after=8.0)).verdict == "no_change"
    assert opt_kb_record(rec(before=10.0, after=10.3)).verdict == "regression"
    disjoint = opt_kb_record(rec(before=10.0, after=8.0, before_ci=(9.8, 10.2), after_ci=(7.9, 8.1)))
    assert disjoint.verdict == "win"
    overlap = opt_kb_record(rec(before=10.0, after=9.0, before_ci=(8.5, 10.2), after_ci=(8.9, 9.3)))
    assert overlap.verdict == "no_change"


def test_regression_is_recorded_not_dropped() -> None:
    cmp = compare(BASE, scaled(1.1))
    r = opt_kb_record(rec(comparison=cmp))
    assert r.verdict == "regression" and r.change_pct == pytest.approx(-10.0)
    assert [x.id for x in opt_kb_records()] == [r.id]


def test_comparison_must_agree_with_the_record() -> None:
    cmp = compare(BASE, scaled(0.9))
    with pytest.raises(ValueError, match="not the comparison's candidate median"):
        rec(comparison=cmp, before=10.0, after=5.0)
    with pytest.raises(ValueError, match="lower_is_better"):
        rec(comparison=cmp, lower_is_better=False)
    with pytest.raises(ValueError, match="says win"):
        rec(before=10.0, after=11.0, comparison={"verdict": "win"})
    # the dump of a Comparison is accepted as well as the object
    assert opt_kb_record(rec(comparison=cmp.model_dump(mode="json"))).verdict == "win"


# --------------------------------------------------------------------------- guards


def test_uncited_strategy_is_unsupported_and_still_recorded() -> None:
    r = opt_kb_record(rec(strategy="l1.fallocate", before=10.0, after=8.0, comparison={"verdict": "win"}))
    assert r.verdict == "unsupported" and "must not be applied" in r.verdict_reason
    c = guard(r, "citation")
    assert not c.passed and c.verdict == "unsupported" and c.reason.startswith("UNSUPPORTED")
    assert r.citation is None and r.citation_url is None
    assert opt_kb_get(r.id) == r


def test_access_pattern_strategy_is_rejected() -> None:
    r = opt_kb_record(
        rec(strategy="l1.transfer_size_sweep", before=10.0, after=7.0, comparison={"verdict": "win"})
    )
    # uncited as well: the rejection is the verdict (the stronger reason); both decisions are stored
    assert r.verdict == "rejected" and "access_pattern" in r.verdict_reason
    assert not guard(r, "citation").passed
    a = guard(r, "access_pattern")
    assert not a.passed and a.verdict == "rejected" and "access pattern" in a.reason


def test_access_pattern_rejects_even_a_cited_strategy() -> None:
    cat = default_catalog()
    base = cat.strategies["l1.read_buffering"]
    flipped = base.model_copy(
        update={"forbidden_kind": "access_pattern", "forbidden_reason": "changes xfer size"}
    )
    marked = Catalog({**cat.strategies, base.id: flipped}, cat.citations, cat.checklist)
    r = opt_kb_record(
        rec(strategy=base.id, before=10.0, after=7.0, comparison={"verdict": "win"}), catalog=marked
    )
    assert guard(r, "citation").passed
    assert (
        r.verdict == "rejected"
        and "access_pattern" in r.verdict_reason
        and "changes xfer size" in r.verdict_reason
    )


def test_system_scope_without_app_metric_is_a_value_error() -> None:
    kw = {
        "strategy": "l3.readahead",
        "metric": "agg_bw_mib_s",
        "metric_scope": "system",
        "lower_is_better": False,
        "before": 100.0,
        "after": 150.0,
    }
    with pytest.raises(ValueError, match="paired app metric"):
        rec(**kw)
    with pytest.raises(ValueError, match="paired app metric"):
        opt_kb_record({**rec().model_dump(), **kw})
    # model_construct skips pydantic validation; opt_kb_record re-validates anyway
    with pytest.raises(ValueError, match="paired app metric"):
        opt_kb_record(KbRecordIn.model_construct(**{**rec().model_dump(), **kw}))
    assert opt_kb_records() == []


def test_system_scope_with_an_app_regression_over_2_percent() -> None:
    cmp = compare(
        [100.0, 101.0, 99.0, 100.5, 99.5], [150.0, 151.0, 149.0, 150.5, 149.5], lower_is_better=False
    )
    kw = {
        "strategy": "l3.readahead",
        "metric": "agg_bw_mib_s",
        "metric_scope": "system",
        "lower_is_better": False,
        "comparison": cmp,
        "app_metric": "wall_time_s",
    }
    bad = opt_kb_record(rec(**kw, app_before=100.0, app_after=102.1))
    assert bad.verdict == "regression" and bad.guard_triggered
    nd = guard(bad, "non_degradation")
    assert not nd.passed and nd.guard_triggered and "2.10% worse" in nd.reason
    assert bad.app_change_pct == pytest.approx(-2.1) and bad.change_pct == pytest.approx(50.0)
    ok = opt_kb_record(rec(**kw, app_before=100.0, app_after=102.0))
    assert ok.verdict == "win" and not ok.guard_triggered and ok.scope == "system"


def test_doing_less_detected_from_the_traces_is_rejected_with_the_numbers(tmp_path: Path) -> None:
    baseline = tiny_trace(tmp_path / "base", reads=10)
    less = tiny_trace(tmp_path / "less", reads=5)
    same = tiny_trace(tmp_path / "same", reads=10)
    assert (baseline.read.bytes, less.read.bytes) == (655360, 327680)
    win = {"before": 10.0, "after": 5.0, "comparison": {"verdict": "win", "p_value": 0.008}}
    r = opt_kb_record(rec(**win), baseline_analysis=baseline, experiment_analysis=less)
    assert r.verdict == "rejected" and r.unchecked_guards == []
    d = guard(r, "no_doing_less")
    assert not d.passed and d.verdict == "rejected"
    assert "input bytes read once 655,360 -> 327,680 (-50.0%) vs the baseline" in d.reason
    assert "read calls 10 -> 5" in d.reason
    assert d.details["baseline"]["input_bytes_read_once"] == 655360
    assert d.details["experiment_physical"]["read_bytes"] == 327680
    ok = opt_kb_record(rec(**win, iteration=2), baseline_analysis=baseline, experiment_analysis=same)
    assert ok.verdict == "win" and guard(ok, "no_doing_less").passed and ok.unchecked_guards == []


def test_without_analyses_no_doing_less_is_recorded_as_not_run() -> None:
    r = opt_kb_record(rec(before=10.0, after=9.0, comparison={"verdict": "win"}))
    d = guard(r, "no_doing_less")
    assert not d.passed and d.verdict is None and d.reason.startswith("NOT RUN")
    assert d.details["ran"] is False and r.unchecked_guards == ["no_doing_less"]


def test_a_doing_less_strategy_is_rejected_without_traces() -> None:
    r = opt_kb_record(rec(strategy="l1.fewer_epochs", before=10.0, after=5.0, comparison={"verdict": "win"}))
    assert guard(r, "no_doing_less").verdict == "rejected"
    assert r.verdict == "rejected" and "doing less" in r.verdict_reason  # all four decisions are kept


def test_every_guard_decision_is_stored_with_its_reason(_dftune_home: Path) -> None:
    r = opt_kb_record(rec(before=10.0, after=9.0, comparison={"verdict": "win"}, caveats="warm cache"))
    assert [d.guard for d in r.guards] == ["citation", "access_pattern", "no_doing_less", "non_degradation"]
    assert all(d.reason for d in r.guards)
    with sqlite3.connect(default_db_path()) as conn:
        (raw,) = conn.execute("SELECT guards FROM records WHERE id = ?", (r.id,)).fetchone()
    stored = json.loads(raw)
    assert [d["guard"] for d in stored] == [d.guard for d in r.guards]
    assert [d["reason"] for d in stored] == [d.reason for d in r.guards]
    assert opt_kb_get(r.id) == r and r.caveats == "warm cache"


# --------------------------------------------------------------------------- storage


def test_records_are_immutable_and_resume_does_not_duplicate() -> None:
    first = opt_kb_record(rec(before=10.0, after=9.0, comparison={"verdict": "win"}))
    again = opt_kb_record(rec(before=10.0, after=9.0, comparison={"verdict": "win"}))
    assert again.id == first.id and len(opt_kb_records()) == 1
    other = opt_kb_record(rec(before=10.0, after=9.0, comparison={"verdict": "win"}, run_id=None))
    assert other.id != first.id and other.dedup_key is None
    with sqlite3.connect(default_db_path()) as conn:
        with pytest.raises(sqlite3.DatabaseError, match="immutable"):
            conn.execute("UPDATE records SET verdict = 'win' WHERE id = ?", (first.id,))
        with pytest.raises(sqlite3.DatabaseError, match="immutable"):
            conn.execute("DELETE FROM records")


def test_schema_version_and_a_newer_database(tmp_path: Path) -> None:
    db = tmp_path / "kb.sqlite"
    assert opt_kb_records(db=db) == []
    with sqlite3.connect(db) as conn:
        assert conn.execute("SELECT MAX(version) FROM schema_version").fetchone()[0] == SCHEMA_VERSION
        conn.execute("INSERT INTO schema_version VALUES (?, 'later')", (SCHEMA_VERSION + 1,))
    with pytest.raises(KbError, match="newer"):
        opt_kb_records(db=db)


def test_dftune_home_is_respected(_dftune_home: Path, tmp_path: Path) -> None:
    assert default_db_path() == _dftune_home / "kb" / "opt_kb.sqlite"
    opt_kb_record(rec(before=10.0, after=9.0))
    assert default_db_path().is_file()
    out = opt_kb_render()
    assert out == _dftune_home / "kb" / "opt_kb.md" and out.is_file()
    # an explicit db path keeps the default untouched
    elsewhere = tmp_path / "other.sqlite"
    opt_kb_record(rec(before=10.0, after=9.0, run_id="run-2"), db=elsewhere)
    assert len(opt_kb_records(db=elsewhere)) == 1 and len(opt_kb_records()) == 1


# --------------------------------------------------------------------------- lookup


def _populate() -> dict[str, int]:
    win = {"before": 10.0, "after": 9.0, "comparison": {"verdict": "win"}}
    ids = {}
    ids["l3_a"] = opt_kb_record(rec(**win, strategy="l3.vfs_cache_pressure", system="node-a", iteration=1)).id
    ids["l3_b"] = opt_kb_record(rec(**win, strategy="l3.vfs_cache_pressure", system="node-b", iteration=2)).id
    ids["l2_hdf5"] = opt_kb_record(
        rec(
            **win,
            strategy="l2.hdf5_chunk_cache",
            software="hdf5,lustre",
            system="node-b",
            workload="sim",
            iteration=3,
        )
    ).id
    ids["l2_mpi"] = opt_kb_record(
        rec(**win, strategy="l2.romio_cb", software=["MPI-IO"], system="node-c", workload="cm1", iteration=4)
    ).id
    ids["l1_reader"] = opt_kb_record(rec(**win, iteration=5)).id
    ids["l1_other"] = opt_kb_record(rec(**win, workload="trainer", iteration=6)).id
    ids["l1_reader_new"] = opt_kb_record(rec(**win, iteration=7, system="node-z")).id
    return ids


def test_lookup_partitions_by_scope() -> None:
    ids = _populate()
    got = opt_kb_lookup(system="node-a", workload="reader", software="hdf5, mpi-io")
    assert [r.id for r in got.system_findings] == [ids["l3_a"]]  # node-b's L3 finding stays on node-b
    # software findings travel across systems and workloads; newest first
    assert [r.id for r in got.software_findings] == [ids["l2_mpi"], ids["l2_hdf5"]]
    # workload findings stay with their app, but come from any system; newest first
    assert [r.id for r in got.workload_findings] == [ids["l1_reader_new"], ids["l1_reader"]]
    assert got.software == ["hdf5", "mpi-io"]

    other = opt_kb_lookup(system="node-c", workload="nothing", software="netcdf")
    assert other.system_findings == [] and other.workload_findings == [] and other.software_findings == []
    assert [r.id for r in opt_kb_lookup(software="lustre").software_findings] == [ids["l2_hdf5"]]
    unfiltered = opt_kb_lookup()
    assert unfiltered.system_findings == [] and unfiltered.workload_findings == []
    assert len(unfiltered.software_findings) == 2
    only = opt_kb_lookup(system="node-a", workload="reader", strategy="l3.vfs_cache_pressure")
    assert [r.id for r in only.system_findings] == [ids["l3_a"]] and only.workload_findings == []
    assert opt_kb_lookup(workload="reader", limit=1).workload_findings[0].id == ids["l1_reader_new"]


def test_a_workload_asked_alone_gets_its_records_at_every_layer() -> None:
    """`kb lookup --workload NAME`, the demo's next command: its L3 records (of any machine it ran
    on) and the L2 ones it measured, not an empty system list and every program's L2 records."""
    ids = _populate()
    got = opt_kb_lookup(workload="reader")
    assert [r.id for r in got.system_findings] == [ids["l3_b"], ids["l3_a"]]
    assert got.software_findings == []  # the L2 records are sim's and cm1's
    assert [r.id for r in opt_kb_lookup(workload="sim").software_findings] == [ids["l2_hdf5"]]
    # with a system or software named, the scopes travel as before
    assert [r.id for r in opt_kb_lookup(workload="reader", system="node-a").system_findings] == [ids["l3_a"]]
    assert len(opt_kb_lookup(workload="reader", software="hdf5").software_findings) == 1


def test_l2_records_need_their_software() -> None:
    with pytest.raises(ValueError, match="software"):
        rec(strategy="l2.romio_cb", software="")


def test_lookup_result_is_json_ready() -> None:
    _populate()
    doc = json.loads(opt_kb_lookup(system="node-a", workload="reader").model_dump_json())
    finding = doc["workload_findings"][0]
    for key in ("before", "after", "verdict", "citation", "citation_url", "caveats", "guards"):
        assert key in finding


# --------------------------------------------------------------------------- render


def test_render_has_the_three_sections_and_labels_every_verdict(tmp_path: Path) -> None:
    _populate()
    opt_kb_record(rec(comparison=compare(BASE, scaled(1.1)), iteration=8))
    opt_kb_record(rec(before=10.0, after=9.9, comparison={"verdict": "no_change"}, iteration=9))
    opt_kb_record(rec(strategy="l1.fallocate", iteration=10))
    opt_kb_record(
        rec(
            strategy="l3.readahead",
            metric="agg_bw_mib_s",
            metric_scope="system",
            lower_is_better=False,
            before=100.0,
            after=150.0,
            comparison={"verdict": "win"},
            app_metric="wall_time_s",
            app_before=100.0,
            app_after=103.0,
            iteration=11,
        )
    )
    out = opt_kb_render(tmp_path / "skill" / "opt_kb.md")
    text = out.read_text()
    sections = ["## System-centric (L3)", "## Software-centric (L2)", "## Workload-centric (L1)"]
    positions = [text.index(s) for s in sections]
    assert positions == sorted(positions)
    assert text.startswith("---\nname: dftune-optimization-kb")
    l1 = text[positions[2] :]
    regression_rows = [line for line in l1.splitlines() if "**REGRESSION**" in line]
    assert len(regression_rows) == 1 and "-10.0%" in regression_rows[0] and "10 -> 11" in regression_rows[0]
    assert "no change (no-op)" in l1 and "UNSUPPORTED (not applied)" in l1
    l3 = text[positions[0] : positions[1]]
    guarded = next(line for line in l3.splitlines() if "guard_triggered" in line)
    assert "l3.readahead" in guarded and "app wall_time_s 100 -> 103 (-3.0%)" in guarded
    assert "non_degradation:" in guarded and "https://" in text
    assert "NOT RUN: no_doing_less" in text and "why no_change:" in text
    # deterministic: rendering again gives the same bytes, and no temporary file is left behind
    assert opt_kb_render(out).read_text() == text
    assert sorted(p.name for p in out.parent.iterdir()) == ["opt_kb.md"]


def test_render_of_an_empty_kb(tmp_path: Path) -> None:
    text = opt_kb_render(tmp_path / "kb.md").read_text()
    assert text.count("_No findings recorded yet._") == 3 and "0 records" in text


def test_kb_cli_lookup_and_render(tmp_path: Path) -> None:
    """`dftune kb lookup --json` finds what opt_kb_record stored; `kb render` writes the skill file."""
    from tests.cli_inproc import dftune

    stored = opt_kb_record(rec(before=10.0, after=8.0, comparison=compare(BASE, scaled(0.8))))
    run = dftune("kb", "lookup", "--workload", "reader", "--json")
    assert run.returncode == 0, run.stderr
    doc = json.loads(run.stdout)
    assert [r["id"] for r in doc["workload_findings"]] == [stored.id]
    assert doc["workload_findings"][0]["verdict"] == "win"
    out = tmp_path / "kb.md"
    render = dftune("kb", "render", "--path", str(out), "--json")
    assert render.returncode == 0, render.stderr
    assert json.loads(render.stdout)["path"] == str(out) and "l1.dataloader_workers" in out.read_text()
