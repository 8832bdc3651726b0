"""Every citation link in a run's report.md is a well-formed http(s) URL (scheme, ``//``, a host)."""

from __future__ import annotations

import json
import re
from pathlib import Path
from urllib.parse import urlsplit

from dftune.core.domain.run import RunReport, RunResult
from dftune.core.safetext import md_link, safe_url
from dftune.tools.report.markdown import render_run_markdown

RECORDED = Path(__file__).parent / "recorded" / "run_small_reads.json"
#: Anything that starts like a URL, up to where Markdown ends it (space, ``>``, ``)``, ``|``).
_URLISH = re.compile(r"https?:[^\s<>)|]*", re.I)


def _well_formed(url: str) -> bool:
    parts = urlsplit(url)
    return (
        url.lower().startswith(("https://", "http://"))
        and parts.scheme in ("http", "https")
        and "." in parts.netloc
    )


def recorded_report() -> RunReport:
    """The report of the recorded run as far as its result tells it: its proposal table, cited."""
    run = RunResult.model_validate(json.loads(RECORDED.read_text())["run"])
    return RunReport(
        run_id=run.run_id,
        spec_path="resources/workloads/small_reads/workload.toml",
        workload=run.workload,
        status=run.status,
        proposal_table=run.proposal_table,
    )


def test_every_link_in_a_recorded_runs_report_is_a_valid_url() -> None:
    md = render_run_markdown(recorded_report())
    urls = _URLISH.findall(md)
    assert urls, "the recorded run cites sources: its report must link them"
    bad = [u for u in urls if not _well_formed(u)]
    assert not bad, bad
    assert any("docs.pytorch.org" in u for u in urls) or any("doi.org" in u for u in urls)


def test_md_link_keeps_both_slashes_of_the_scheme() -> None:
    url = "https://docs.pytorch.org/docs/stable/data.html#memory-pinning"
    assert md_link(url) == f"<{url}>"
    assert md_link(url, "torch") == f"[torch]({url})"
    assert safe_url("https:/docs.pytorch.org") is None  # one slash is not a URL, so never a link
