"""A campaign's member pages: written while the deadline leaves time for their plots, never twice,
and a missing one says which command writes it."""

from __future__ import annotations

import os
import time
from datetime import UTC, datetime
from pathlib import Path

from dftune.tools.report.campaign import MEMBER_HTML_S, write_campaign_reports, write_member_html
from dftune.tools.report.writer import write_reports
from dftune.tools.session.campaigns import CampaignMeta, Member
from dftune.tools.session.workspace import Workspace
from tests.unit.test_report import make_report


def _member_run(ws: Workspace, name: str) -> Member:
    rid = ws.create_run(None, name).id
    make_report(ws.run_dir(rid), traced=False)
    write_reports(rid, workspace=ws)  # its report.md, as every run writes at its end
    return Member(spec_path=f"/specs/{name}.toml", workload=name, run_id=rid, status="completed")


def _meta(members: list[Member], deadline: float | None) -> CampaignMeta:
    now = datetime.now(UTC)
    return CampaignMeta(
        id="night-1", name="night", created=now, ended=now, deadline=deadline, members=members
    )


def test_a_page_is_written_when_the_deadline_leaves_time_and_not_again() -> None:
    ws = Workspace()
    m = _member_run(ws, "toy")
    page = ws.run_dir(m.run_id) / "report.html"
    assert write_member_html(m.run_id, ws, time.time() + MEMBER_HTML_S + 5)
    assert page.read_text().startswith("<!DOCTYPE html>")
    os.utime(page, (1, time.time() + 60))  # newer than its report.json: left alone
    before = page.stat().st_mtime_ns
    assert write_member_html(m.run_id, ws, None) and page.stat().st_mtime_ns == before


def test_a_close_deadline_skips_the_page_and_a_changed_run_gets_a_new_one() -> None:
    ws = Workspace()
    m = _member_run(ws, "toy")
    page = ws.run_dir(m.run_id) / "report.html"
    assert not write_member_html(m.run_id, ws, time.time() + MEMBER_HTML_S - 1) and not page.exists()
    assert write_member_html(m.run_id, ws, None) and page.is_file()
    os.utime(page, (1, 1))  # older than its report.json (an approval rewrote the run's report)
    assert write_member_html(m.run_id, ws, None) and page.stat().st_mtime > 1


def test_a_run_without_a_report_gets_no_page() -> None:
    ws = Workspace()
    rid = ws.create_run(None, "unstarted").id
    assert not write_member_html(rid, ws, None)
    assert not (ws.run_dir(rid) / "report.html").exists()


def test_the_combined_report_names_the_command_for_a_missing_page(tmp_path: Path) -> None:
    ws = Workspace()
    done, late = _member_run(ws, "early"), _member_run(ws, "late")
    assert write_member_html(done.run_id, ws, None)
    meta = _meta([done, late], deadline=time.time() + 3)  # too close for the late one's plots
    paths = write_campaign_reports(meta, ws, tmp_path, until=meta.deadline)
    md, html = Path(paths["markdown"]).read_text(), Path(paths["html"]).read_text()
    assert not (ws.run_dir(late.run_id) / "report.html").exists()
    hint = "no HTML page yet: dftune report night-1 --html"
    assert md.count(hint) == 1 and html.count(hint) == 1
    late_section = md[md.index("## late") :]
    assert hint in late_section and "report.html" not in late_section
    assert str(ws.run_dir(done.run_id) / "report.html") in md

    # the morning after, the command it names writes the page: the night's deadline no longer applies
    meta.deadline = time.time() - 3600
    paths = write_campaign_reports(meta, ws, tmp_path)
    assert (ws.run_dir(late.run_id) / "report.html").is_file()
    assert "no HTML page yet" not in Path(paths["markdown"]).read_text()


def test_a_member_whose_report_json_this_dftune_cannot_read_says_so_in_the_combined_report(
    tmp_path: Path,
) -> None:
    ws = Workspace()
    good, edited = _member_run(ws, "good"), _member_run(ws, "edited")
    path = ws.run_dir(edited.run_id) / "report.json"
    path.write_text(path.read_text().replace('"status":"completed"', '"status":"finished"', 1))
    paths = write_campaign_reports(_meta([good, edited], deadline=None), ws, tmp_path, html=False)
    md = Path(paths["markdown"]).read_text()
    section = md[md.index("## edited") :]
    assert f"**Report:** {path}: not a run report this dftune reads" in section.replace("\\", "")
    assert "status: Input should be" in section and "Best change" not in section  # nothing rendered from it
    assert "Best change" in md[md.index("## good") : md.index("## edited")]
