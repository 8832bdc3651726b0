"""Run reports: the HTML page (structure, escaping, sections,
embedded plots), Markdown, dftune report/compare."""

from __future__ import annotations

import base64
import gzip
import json
import re
from html.parser import HTMLParser
from pathlib import Path
from typing import Any

import pytest

from dftune.agents.optimizer import proposal_table
from dftune.core.citation import Citation, CitedClaim
from dftune.core.domain.diagnosis import Bottleneck, Diagnosis, Gate, MetricChoice
from dftune.core.domain.experiments import Approval, ChecklistVerdict, Experiment, GuardRecord
from dftune.core.domain.measurements import Coverage, Measurement
from dftune.core.domain.proposals import Change, Proposal
from dftune.core.domain.run import STATE_VERSION, MetricInfo, Pitfall, RunReport, TuningState
from dftune.core.domain.verdicts import GuardDecision
from dftune.graphs.finalize import outcome
from dftune.tools.report.compare import CompareError, compare, compare_analyses, row
from dftune.tools.report.html import SECTIONS, render_run_html
from dftune.tools.report.loader import ReportError
from dftune.tools.report.markdown import render_run_markdown
from dftune.tools.report.plots import build_plots, experiments_plot
from dftune.tools.report.writer import write_reports
from dftune.tools.runner.stats import compare as compare_arms
from dftune.tools.session.workspace import Workspace
from dftune.tools.trace import analyze
from tests.cli_inproc import dftune

TOY = Path(__file__).resolve().parents[1] / "graph" / "toy" / "workload.toml"
HOSTILE = '<script>alert("pwned")</script>'


def _trace(d: Path, pid: int, start: int, reads: int, size: int) -> None:
    """A small dftracer 2.x trace of one process: open, ``reads`` sequential reads, close."""
    hh = {
        "name": "HH",
        "cat": "dftracer",
        "type": 1,
        "pid": pid,
        "tid": pid,
        "ph": 4,
        "args": {"hhash": "aa", "name": "node1", "value": "aa"},
    }
    fh = {
        "name": "FH",
        "cat": "dftracer",
        "type": 1,
        "pid": pid,
        "tid": pid,
        "ph": 4,
        "args": {"hhash": "aa", "name": f"/data/f{pid}", "value": "bb"},
    }

    def ev(i: int, name: str, ts: int, dur: int, **args: object) -> dict[str, Any]:
        return {
            "id": i,
            "name": name,
            "cat": "POSIX",
            "type": 3,
            "pid": pid,
            "tid": pid,
            "ts": ts,
            "dur": dur,
            "ph": 1,
            "args": {"hhash": "aa", "fhash": "bb", **args},
        }

    lines = [hh, fh, ev(0, "open64", start, 50, flags=0)]
    for i in range(reads):
        lines.append(ev(i + 1, "read", start + 100 + i * 400, 200, ret=size, count=size))
    lines.append(ev(reads + 1, "close", start + 200 + reads * 400, 5, ret=0))
    with gzip.open(d / f"trace-{pid}-preload.pfw.gz", "wt") as out:
        out.write("\n".join(json.dumps(x) for x in lines) + "\n")


def _measurement(workdir: Path, values: list[float], analysis_path: Path | None, **kw: Any) -> Measurement:
    s = sorted(values)
    return Measurement(
        settings=kw.pop("settings", {"WORKERS": 1}),
        values=values,
        median=s[len(s) // 2],
        ci95=[s[0], s[-1]],
        ok=len(values),
        replicates=kw.pop("replicates", len(values)),
        traced=analysis_path is not None,
        workdir=str(workdir),
        analysis_path=str(analysis_path) if analysis_path else None,
        **kw,
    )


def make_report(run_dir: Path, *, traced: bool = True) -> RunReport:
    """A finished run's report (its report.json written into ``run_dir``) with one of everything, some of
    it hostile."""
    analysis_path = None
    if traced:
        tdir = run_dir / "baseline" / "traces" / "raw" / "r0"
        tdir.mkdir(parents=True)
        _trace(tdir, 7, 1_000_000, 40, 4096)
        _trace(tdir, 8, 1_004_000, 25, 65536)
        analysis_path = run_dir / "baseline" / "analysis.json"
        analysis_path.write_text(json.dumps(analyze([tdir], views=["file", "proc"]).to_json_dict()))
    paper = Citation(
        id="drishti",
        authors=["Jean Luca Bez", "Hammad Ather", "Suren Byna"],
        title="Drishti <b>guide</b>",
        venue="PDSW",
        year=2022,
        url="https://doi.org/10.1109/PDSW56643.2022.00006",
    )
    good = CitedClaim(citation=paper, claim="buffer small reads", evidence="Section III")
    # a tampered record: validation would refuse the URL, so it is forced in past it
    tampered = {"id": "evil", "url": "javascript:alert(1)", "title": f"Evil {HOSTILE}"}
    evil = CitedClaim.model_construct(
        **{**good.__dict__, "citation": Citation.model_construct(**{**paper.__dict__, **tampered})}
    )
    base = _measurement(run_dir / "baseline", [1.0, 1.2, 0.9], analysis_path, replicates=4)
    cand = _measurement(run_dir / "opt1", [0.6, 0.7, 0.65], None, settings={"WORKERS": 4})
    knob = Change(kind="knob", settings={"WORKERS": "4"})
    proposals = [
        Proposal(
            id="WORKERS=4 $x$",
            strategy="l1.dataloader_workers",
            strategy_name="workers",
            layer="L1",
            checklist=6,
            description=f"More workers {HOSTILE}",
            change=knob,
            app_impact_pct=35.0,
            app_impact_source="measured",
            system_impact_pct=10.0,
            system_impact_source="measured",
            citation=good,
            status="measured",
            iteration=1,
        ),
        Proposal(
            id="l2.readahead_env",
            strategy="l2.readahead_env",
            strategy_name="readahead",
            layer="L2",
            checklist=3,
            description="Read ahead more",
            change=Change(kind="env", env={"X": "1"}),
            app_impact_pct=12.0,
            impact_reason="unoverlapped I/O share x efficacy",
            citation=evil,
        ),
        Proposal(
            id="EPOCHS=1",
            strategy="l1.fewer_epochs",
            strategy_name="fewer epochs",
            layer="L1",
            checklist=1,
            description="Fewer epochs",
            change=knob,
            status="rejected",
            reason="no_doing_less: doing less",
        ),
    ]
    cmp = compare_arms(base.values, cand.values).model_copy(
        update={
            "p_value": 0.01,
            "ci95": (0.5, 0.8),
            "verdict": "win",
            "reason": "win: candidate median 0.65 vs baseline 1.0",
        }
    )
    state = TuningState(
        run_id=run_dir.name,
        spec_path=str(TOY),
        state_version=STATE_VERSION,
        workload=f"toy {HOSTILE}",
        system="vm",
        fs_type="ext4",
        status="completed",
        baseline=base,
        incumbent=cand,
        coverage=Coverage(
            units_total=4,
            units_included=["replicate r0", "replicate r1", "replicate r2"],
            units_failed=["replicate r3 (timeout)"],
        ),
        diagnosis=Diagnosis(
            trace_files=1,
            events=100,
            bottlenecks=[
                Bottleneck(
                    id="S01",
                    name="small-reads",
                    category="small-io",
                    score=4,
                    severity_value=0.8,
                    view="summary",
                    evidence=f"reads of {HOSTILE}",
                    rule_source="dftune",
                    provenance="test",
                )
            ],
            category_scores={"small-io": 4},
            metric=MetricChoice(metric="time", rationale="read time dominates"),
            fs_type="ext4",
            io_fraction=0.5,
            shape="io-bound",
            shape_reason="half the time is I/O",
            worth_tuning=True,
            gate=Gate(
                worth_tuning=True,
                io_fraction=0.5,
                min_io_fraction=0.05,
                shape="io-bound",
                allowed_layers=["L1", "L2", "L3"],
                reason="I/O is half of the time",
            ),
            checklist=[],
        ),
        pitfalls=[
            Pitfall(id="untraced:stat", message="stat is not traced here", detail="absence is not evidence")
        ],
        citations=[good, evil],
        proposals=proposals,
        checklist=[
            ChecklistVerdict(number=i, category=f"category {i}", verdict="not_applicable", reason=f"why {i}")
            for i in range(1, 13)
        ],
        experiments=[
            Experiment(
                iteration=1,
                proposal_id="WORKERS=4 $x$",
                strategy="l1.dataloader_workers",
                reference=base,
                candidate=cand,
                comparison=cmp,
                verdict="win",
                kept=True,
                verdict_reason="improved beyond the noise",
            )
        ],
        guard_decisions=[
            GuardRecord(
                proposal_id="EPOCHS=1",
                decision=GuardDecision(
                    guard="no_doing_less", passed=False, reason="doing less by definition"
                ),
            ),
            GuardRecord(
                proposal_id="WORKERS=4 $x$",
                iteration=1,
                decision=GuardDecision(guard="non_degradation", passed=True, reason="app metric -35%"),
            ),
        ],
        approvals=[Approval(proposal_id="WORKERS=4 $x$", approved=True, by="policy", reason="no-sudo L1")],
    )
    report = RunReport(
        **dict(state),
        proposal_table=proposal_table(state.proposals),
        summary="one win",
        outcome=outcome(state, lower_is_better=True),
    )
    # on disk the tampered URL is a valid one: a report.json with a javascript: URL is not read at all
    text = report.model_dump_json(by_alias=True).replace("javascript:alert(1)", "https://evil.example/")
    (run_dir / "report.json").write_text(text)
    return report


class Page(HTMLParser):
    """Collects tags, ids, image sources, links and text of a page."""

    def __init__(self) -> None:
        super().__init__()
        self.tags: list[str] = []
        self.ids: set[str] = set()
        self.imgs: list[str] = []
        self.hrefs: list[str] = []
        self.text: list[str] = []

    def handle_starttag(self, tag: str, attrs: list[tuple[str, str | None]]) -> None:
        a = dict(attrs)
        self.tags.append(tag)
        if a.get("id"):
            self.ids.add(str(a["id"]))
        if tag == "img":
            self.imgs.append(str(a.get("src")))
        if tag == "a" and a.get("href"):
            self.hrefs.append(str(a["href"]))

    def handle_data(self, data: str) -> None:
        self.text.append(data)


@pytest.fixture
def run_dir() -> Path:
    ws = Workspace()
    rid = ws.create_run(None, "toy").id
    return ws.run_dir(rid)


def test_html_has_every_section_escapes_run_data_and_embeds_every_plot(run_dir: Path) -> None:
    doc = make_report(run_dir)
    plots = build_plots(doc)
    page_html = render_run_html(doc, plots)
    page = Page()
    page.feed(page_html)
    # data from the run never becomes markup: the hostile strings are text
    assert "script" not in page.tags and "<script" not in page_html
    text = "".join(page.text)
    assert HOSTILE in text and f"More workers {HOSTILE}" in text and "Drishti <b>guide</b>" in text
    assert "javascript:" not in " ".join(page.hrefs)  # a non-http URL is shown, not linked
    assert "https://doi.org/10.1109/PDSW56643.2022.00006" in page.hrefs
    # self-contained: no external resource of any kind
    assert not re.search(r"""(src|href)="(?!data:|#|https://doi\.org/)""", page_html)
    assert "<link" not in page_html and "@import" not in page_html
    assert {k for k, _ in SECTIONS} <= page.ids
    # all five plots drawn and embedded as SVG data URIs
    assert [p.key for p in plots if p.svg] == ["heatmap", "timeline", "xfer", "families", "experiments"]
    assert len(page.imgs) == 5
    for src in page.imgs:
        assert src.startswith("data:image/svg+xml;base64,")
        svg = base64.b64decode(src.split(",", 1)[1]).decode()
        assert "<svg" in svg and "<script" not in svg
    # the timeline has one series per process of the baseline trace
    assert "pid 7@node1" in base64.b64decode(page.imgs[1].split(",", 1)[1]).decode()
    # what the skill page asks of a report: partial coverage, both
    # kinds of finding, the proposal columns, 12 checklist rows
    assert "Partial coverage" in text and "replicate r3 (timeout)" in text
    assert (
        "Measured (this run)" in text and "Estimated, or measured before (not measured in this run)" in text
    )
    for col in (
        "#",
        "Strategy",
        "Description of Optimization",
        "App Impact",
        "System Impact",
        "Weighted Score",
    ):
        assert f"<th>{col}</th>" in page_html
    checklist = page_html.split('id="checklist"')[1].split("</section>")[0]
    assert checklist.count("<tr>") == 13  # header + 12 categories
    assert "Mann-Whitney p = 0.01" in text and "[0.6, 0.7]" in text and "0.6, 0.7, 0.65" in text
    assert "doing less by definition" in text and "app metric -35%" in text
    assert "stat is not traced here" in text
    assert "Jean Luca Bez, Hammad Ather, Suren Byna" in text


def test_proposal_table_is_sorted_and_every_row_is_cited(run_dir: Path) -> None:
    doc = make_report(run_dir, traced=False)
    section = render_run_html(doc, []).split('id="proposals"')[1].split("<h3>")[0]
    rows = section.split("<tbody>")[1].split("</tr>")[:-1]
    assert len(rows) == 2 and "More workers" in rows[0] and "Read ahead more" in rows[1]  # 22.5 before 6.0
    assert all("UNSUPPORTED" not in r for r in rows)
    assert "Evil &lt;script&gt;" in rows[1]


def test_every_view_shows_the_proposal_table_in_its_own_order(run_dir: Path) -> None:
    """A measured row with the lower score is row 1 of the table (--table shows it first): the
    HTML and Markdown reports keep that order instead of sorting by score again."""
    doc = make_report(run_dir, traced=False)
    first, second = doc.proposal_table
    measured = [
        second.model_copy(update={"number": 1, "app_impact_source": "measured"}),
        first.model_copy(update={"number": 2}),
    ]
    doc = doc.model_copy(update={"proposal_table": measured})
    section = render_run_html(doc, []).split('id="proposals"')[1].split("<h3>")[0]
    rows = section.split("<tbody>")[1].split("</tr>")[:-1]
    assert "Read ahead more" in rows[0] and "More workers" in rows[1]
    md = render_run_markdown(doc)
    assert md.index("Read ahead more") < md.index("More workers")


def test_missing_traces_leave_a_note_instead_of_a_plot(run_dir: Path) -> None:
    doc = make_report(run_dir, traced=False)
    plots = {p.key: p for p in build_plots(doc)}
    assert plots["timeline"].svg is None and plots["timeline"].note
    assert plots["xfer"].svg is None and "not traced" in plots["xfer"].note
    assert plots["experiments"].svg is not None  # from report.json alone
    assert "Not drawn:" in render_run_html(doc, list(plots.values()))


def test_experiment_plot_survives_math_characters_in_names(tmp_path: Path) -> None:
    m = _measurement(tmp_path, [1.0, 2.0], None)
    plot = experiments_plot(
        [
            Experiment(
                iteration=1, proposal_id="A=$1$ {x}_", strategy="s", verdict="win", reference=m, candidate=m
            )
        ],
        MetricInfo(name="epoch_time_s", unit="s", lower_is_better=True),
    )
    assert plot.svg and "$1$" in plot.svg
    assert "epoch_time_s (s), lower is better" in plot.svg  # the axis names the metric and its unit


def test_markdown_states_partial_coverage_and_labels_estimates(run_dir: Path) -> None:
    md = render_run_markdown(make_report(run_dir, traced=False))
    assert "**Partial coverage" in md
    assert "| estimate | l2.readahead_env" in md
    assert "| measured | small-io |" in md
    assert "Guard decisions before anything was applied" in md


def test_write_reports_and_cli(run_dir: Path) -> None:
    make_report(run_dir)
    paths = write_reports(run_dir.name, html=True)
    assert Path(paths["html"]).read_text().startswith("<!DOCTYPE html>")
    out = dftune("report", run_dir.name, "--html", "--json")
    assert out.returncode == 0, out.stderr
    assert json.loads(out.stdout) == {
        "schema": "dftune.report/1",
        "run_id": run_dir.name,
        "kind": "run",
        **paths,
    }


def test_report_of_an_unfinished_run_says_how_to_continue() -> None:
    ws = Workspace()
    rid = ws.create_run(None, "toy").id
    with pytest.raises(ReportError, match=f"has not finished .*dftune resume {rid}"):
        write_reports(rid)
    ws.set_status(rid, "awaiting_approval")
    with pytest.raises(ReportError, match=f"dftune approve {rid}"):
        write_reports(rid)
    out = dftune("report", "no-such-run")
    assert out.returncode == 2 and out.stderr.count("\n") == 1 and "no run 'no-such-run'" in out.stderr


def test_a_report_json_of_an_older_or_hand_edited_shape_is_refused_in_one_line(run_dir: Path) -> None:
    """Nothing is rendered from a report.json this dftune does not read: one line names the file,
    the first field that does not fit and who wrote it; ``dftune runs`` says it cannot read it."""
    from dftune.tools.report.run_glance import run_result

    make_report(run_dir, traced=False)
    path = run_dir / "report.json"
    good = json.loads(path.read_text())
    older = {**good, "state_version": 1}  # impacts had no source yet
    older["proposal_table"] = [
        {k: v for k, v in r.items() if k != "app_impact_source"} for r in good["proposal_table"]
    ]
    path.write_text(json.dumps(older))
    out = dftune("report", run_dir.name)
    assert out.returncode == 2 and out.stderr.count("\n") == 1, out.stderr
    assert (
        str(path) in out.stderr
        and "written by an older dftune (state version 1, this one reads" in out.stderr
    )
    assert "proposal_table.0.app_impact_source: Field required" in out.stderr
    assert not (run_dir / "report.md").exists()  # nothing rendered from it
    assert run_result(run_dir) == "report.json unreadable (see dftune report)"
    edited = {**good, "outcome": {**good["outcome"], "wins_kept": 1}}
    edited["citations"][1]["citation"]["url"] = "javascript:alert(1)"
    path.write_text(json.dumps(edited))
    with pytest.raises(ReportError, match=r"report\.json: not a run report .*edited by hand\): citations\.1"):
        write_reports(run_dir.name)
    assert dftune("compare", run_dir.name, run_dir.name).stderr.count(str(path)) == 1


# --------------------------------------------------------------------------- compare


def test_compare_rows_use_points_for_shares_and_relative_change_otherwise() -> None:
    assert row("x", "x", "s", 2.0, 1.0)["change_pct"] == -50.0
    share = row("p", "p", "pct", 40.0, 55.0)
    assert share["delta"] == 15.0 and share["change_pct"] is None
    assert row("c", "c", "count", 0.0, 3.0)["change_pct"] is None
    assert row("c", "c", "count", None, 3.0)["delta"] is None


def test_compare_two_traces(tmp_path: Path) -> None:
    a, b = tmp_path / "a", tmp_path / "b"
    a.mkdir()
    b.mkdir()
    _trace(a, 7, 1_000_000, 10, 4096)
    _trace(b, 7, 1_000_000, 10, 4096)
    _trace(b, 8, 1_000_000, 10, 4096)
    doc = compare(str(a), str(b))
    rows = {r["key"]: r for r in doc["trace"]}
    assert doc["kind"] == "traces" and rows["processes"]["a"] == 1 and rows["processes"]["b"] == 2
    assert rows["read.bytes"]["change_pct"] == 100.0 and rows["read.count"]["delta"] == 10
    assert rows["small_io_pct"]["delta"] == 0 and rows["small_io_pct"]["change_pct"] is None
    assert compare_analyses(analyze([a]), analyze([a]))[0]["delta"] == 0


def test_compare_two_runs_and_refuse_mixes(run_dir: Path, tmp_path: Path) -> None:
    make_report(run_dir)
    ws = Workspace()
    other = ws.run_dir(ws.create_run(None, "toy").id)
    make_report(other, traced=False)
    doc = compare(run_dir.name, other.name)
    out = {r["key"]: r for r in doc["outcome"]}
    assert doc["kind"] == "runs" and out["baseline_median"]["a"] == 1.0 and out["best_median"]["b"] == 0.65
    assert doc["a"]["experiments"][0]["verdict"] == "win"
    assert doc["baseline_trace"] is None  # B was not traced
    with pytest.raises(CompareError, match="not a run"):
        compare(run_dir.name, str(tmp_path))
    with pytest.raises(CompareError, match="neither a trace"):
        compare("no-such-run", "no-such-run-either")
    res = dftune("compare", run_dir.name, other.name)
    assert res.returncode == 0, res.stderr
    assert "Outcome" in res.stdout and "WORKERS=4 $x$" in res.stdout


def test_timeline_keeps_the_largest_traces_when_there_are_many(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    import dftune.tools.report.plots as plots

    _trace(tmp_path, 7, 1_000_000, 5, 4096)
    _trace(tmp_path, 8, 1_000_000, 60, 4096)
    monkeypatch.setattr(plots, "MAX_PROCESSES", 1)
    series, note = plots.process_series([str(p) for p in sorted(tmp_path.glob("*.pfw.gz"))])
    assert [s.label for s in series] == ["pid 8@node1"] and "largest of 2" in note
    # at most TIME_WINDOWS windows on the power-of-two grid, at least about half as many
    assert (
        plots.TIME_WINDOWS // 2 - 1 <= len(series[0].starts) <= plots.TIME_WINDOWS
        and max(series[0].mib_s) > 0
    )


def test_a_verdict_the_guards_gave_is_told_apart_from_what_the_statistics_said(run_dir: Path) -> None:
    """The non-degradation guard made a no-change a regression: the report says which said what."""
    doc = make_report(run_dir)
    (exp,) = doc.experiments
    assert exp.comparison is not None
    said = exp.model_copy(update={"comparison": exp.comparison.model_copy(update={"verdict": "no_change"})})
    why = "the application got 6.2% worse, over the 2% limit"
    doc.experiments = [said.model_copy(update={"verdict": "regression", "verdict_reason": why})]
    md = render_run_markdown(doc)
    assert "Comparison (the statistics alone said no_change; the verdict is the guards' below)" in md
    page = render_run_html(doc, [])
    assert "Comparison (the statistics alone said no_change; the verdict is below)" in page
    doc.experiments = [said.model_copy(update={"verdict": "no_change", "verdict_reason": why})]  # they agree
    assert "Comparison: " in render_run_markdown(doc) and "alone said" not in render_run_markdown(doc)


def test_the_best_kept_configuration_lists_every_kept_change_and_each_gain_its_reference(
    run_dir: Path,
) -> None:
    """A kept staging change (L3) is part of the best kept configuration in the outcome table of
    both reports and in the headline; the best change says what it was measured beside."""
    from dftune.core.domain.measurements import StagePlan

    r = make_report(run_dir)
    staged = r.incumbent.model_copy(update={"stage": StagePlan(tier="shm"), "workdir": str(run_dir / "opt2")})
    stage = Proposal(
        id="l3.stage_shm",
        strategy="l3.stage_shm",
        strategy_name="stage the data in memory",
        layer="L3",
        checklist=11,
        description="copy the data set to /dev/shm",
        change=Change(kind="stage", stage=StagePlan(tier="shm")),
    )
    kept = Experiment(
        iteration=2,
        proposal_id="l3.stage_shm",
        strategy="l3.stage_shm",
        reference=r.incumbent,
        candidate=staged,
        comparison=r.experiments[0].comparison,
        verdict="win",
        kept=True,
        verdict_reason="beyond the noise",
    )
    r = r.model_copy(
        update={
            "proposals": [*r.proposals, stage],
            "experiments": [*r.experiments, kept],
            "incumbent": staged,
        }
    )
    md = render_run_markdown(r)
    best_row = next(line for line in md.splitlines() if line.startswith("| best kept |"))
    assert "WORKERS=4" in best_row and "data staged in shm" in best_row
    overall = next(line for line in md.splitlines() if line.startswith("- **Overall:**"))
    assert (
        "at the baseline -\\> 0.65" in overall
        and "with every kept change (WORKERS=4, data staged in shm)" in overall
    )
    best = next(line for line in md.splitlines() if line.startswith("- **Best change:**"))
    assert "measured beside the configuration kept before it" in best
    page = render_run_html(r, [])
    assert "data staged in shm" in page


def test_file_hotspots_put_the_programs_data_before_start_up_reads(tmp_path: Path) -> None:
    """Python's byte-code read at start-up moves more bytes than 16 KiB data files: the data still
    comes first in 'Files by bytes moved' and 'Files by I/O time'."""
    from dftune.core.facts.paths import RunPaths
    from dftune.tools.report.sections import hotspots
    from tests.tracegen import Proc, write_trace

    p = Proc(pid=1)
    pyc = "/usr/lib/python3.11/__pycache__/os.cpython-311.pyc"
    p.open(pyc)
    p.read(pyc, 4 << 20, dur=900)
    p.close(pyc)
    for i in range(3):
        path = f"/data/set/f{i}.bin"
        p.open(path)
        p.read(path, 16 << 10, dur=50)
        p.close(path)
    a = analyze([write_trace(tmp_path / "t", [p])], views=["file", "proc"])
    hot = hotspots(a, paths=RunPaths.of("/data/set"))
    names = [h["name"] for h in hot["file_by_time"]]  # (by bytes: the same files, so not repeated)
    assert len(names) == 4 and names[-1].endswith(".pyc") and all(n.endswith(".bin") for n in names[:-1])
