"""Search-found citations: how they enter a proposal, the guards and the KB; requirement gating."""

from __future__ import annotations

from typing import Any

from dftune.agents.literature import paper_citation
from dftune.agents.optimizer import requirement_gap
from dftune.core.citation import CitedClaim
from dftune.tools.catalog import default_catalog
from dftune.tools.guards import reference_guard
from dftune.tools.kb import opt_kb_record
from dftune.tools.literature import Paper

CITATION: dict[str, Any] = {
    "id": "doi:10.1000/xyz",
    "authors": ["A. Author", "B. Author"],
    "title": "Random reads via mmap",
    "venue": "PDSW",
    "year": 2023,
    "url": "https://doi.org/10.1000/xyz",
}
FOUND: dict[str, Any] = {
    "citation": CITATION,
    "claim": "mapping the file with mmap served random 4 KiB reads 2x faster than pread",
    "evidence": "page 3",
    "source": "search:arxiv",
    "verified_by": "arxiv",
}


def _record(**kw: Any) -> dict[str, Any]:
    return {
        "system": "host",
        "workload": "w",
        "strategy": "l1.mmap_random",
        "metric": "t",
        "before": 10.0,
        "after": 8.0,
        "comparison": {"verdict": "win", "ci95": (0.7, 0.9)},
        **kw,
    }


def test_a_complete_found_citation_supports_an_uncited_catalog_strategy_in_the_kb() -> None:
    assert not default_catalog().is_supported("l1.mmap_random")
    assert opt_kb_record(_record()).verdict == "unsupported"
    r = opt_kb_record(_record(found_citation=FOUND))
    assert (
        r.verdict == "win"
        and r.citation_url == CITATION["url"]
        and "Random reads via mmap" in (r.citation or "")
    )
    cit = next(g for g in r.guards if g.guard == "citation")
    assert cit.passed and "passage" in cit.reason


def test_a_found_citation_without_its_passage_or_venue_is_unsupported() -> None:
    for broken in ({**FOUND, "claim": ""}, {**FOUND, "citation": {**CITATION, "venue": None}}):
        d = reference_guard(CitedClaim.model_validate(broken))
        assert not d.passed and d.verdict == "unsupported"
    assert opt_kb_record(_record(found_citation={**FOUND, "claim": ""})).verdict == "unsupported"


def test_a_found_citation_needs_a_fetched_record_and_a_passage_naming_the_technique() -> None:
    """a sidecar or PDF metadata alone (no fetched record) never supports a strategy."""
    unverified = CitedClaim.model_validate({**FOUND, "verified_by": ""})
    d = reference_guard(unverified, "l1.mmap_random")
    assert not d.passed and "sidecar/PDF metadata" in d.reason
    assert opt_kb_record(_record(found_citation={**FOUND, "verified_by": ""})).verdict == "unsupported"
    off_topic = CitedClaim.model_validate({**FOUND, "claim": "random reads are slow on Lustre"})
    d = reference_guard(off_topic, "l1.mmap_random")
    assert not d.passed and "does not name the technique" in d.reason
    assert reference_guard(CitedClaim.model_validate(FOUND), "l1.mmap_random").passed


def test_search_hits_become_citations_only_when_complete() -> None:
    paper = Paper(
        title="T",
        authors=["X"],
        year=2020,
        venue="SC",
        doi="10.1/abc",
        source="arxiv",
        passage="it helps",
        passage_kind="abstract",
    )
    ref = paper_citation(paper)
    assert ref is not None and CitedClaim.model_validate(ref).url == "https://doi.org/10.1/abc"
    assert paper_citation(paper.model_copy(update={"venue": None})) is None
    assert paper_citation(paper.model_copy(update={"passage": None})) is None


def test_strategies_that_presume_missing_software_are_not_applicable() -> None:
    cat = default_catalog()
    torch_home = cat.strategies["l2.torch_home_local"]
    assert requirement_gap(torch_home, ["posix", "hdf5"]) is not None
    assert requirement_gap(torch_home, ["posix", "pytorch"]) is None
    assert requirement_gap(cat.strategies["l2.malloc_arena"], ["posix"]) is None
    assert requirement_gap(cat.strategies["l2.hdf5_chunk_cache"], ["hdf5"]) is None


def test_a_passage_supports_a_strategy_only_when_it_names_the_technique() -> None:
    from dftune.agents.literature import mentions_technique

    assert mentions_technique("l1.mmap_random", "Map the file with mmap() for random reads")
    assert mentions_technique("l1.odirect", "opening with O_DIRECT bypasses the page cache")
    assert not mentions_technique("l1.mmap_random", "Drishti flags random access patterns and suggests fixes")


def test_catalog_citations_carry_the_source_passage_or_say_they_are_catalog_backed() -> None:
    from dftune.agents.context import Context
    from dftune.agents.literature import catalog_citation, with_passage
    from dftune.core.domain.run import RunReport
    from dftune.tools.report.markdown import render_run_markdown

    ref = catalog_citation("l1.dataloader_workers", default_catalog())
    assert ref is not None
    page = {
        "passage": "With num_workers > 0, data loading runs in worker processes.",
        "page": 4,
        "catalog_backed": False,
    }
    own = with_passage(ref, "l1.dataloader_workers", Context(evidence=lambda s, c: page))
    assert own.passage.startswith("With num_workers") and own.page == 4 and not own.catalog_backed
    curated = with_passage(ref, "l1.dataloader_workers", Context(evidence=lambda s, c: None))
    assert curated.catalog_backed and not curated.passage
    other = curated.model_copy(update={"citation": curated.citation.model_copy(update={"id": "other"})})
    doc = RunReport(run_id="r", workload="w", spec_path="x", status="completed", citations=[own, other])
    md = render_run_markdown(doc)
    assert (
        "> With num_workers \\> 0" in md and "page 4" in md and "catalog-backed claim" in md
    )  # escaped Markdown


def test_a_command_strategy_renders_its_change_read_back_and_rollback_as_argv_lists() -> None:
    from dftune.agents.optimizer import catalog_proposal

    p = catalog_proposal(default_catalog().strategies["l3.vfs_cache_pressure"], {})
    assert p.status == "proposed" and p.privilege == "sudo" and p.change.kind == "command"
    assert p.change.argv == ["sudo", "sysctl", "-w", "vm.vfs_cache_pressure=50"]
    assert p.change.read_argv == ["sysctl", "-n", "vm.vfs_cache_pressure"]
    assert p.change.rollback_argv == ["sudo", "sysctl", "-w", "vm.vfs_cache_pressure={current}"]


def test_a_hit_the_caller_refuses_does_not_end_the_search() -> None:
    from dftune.tools.literature import LiteratureSearch

    search = LiteratureSearch(online=False)
    every = search.find_support("small-io", strategy_id="l1.read_buffering", strategy_name="read buffering")
    assert every.status == "supported" and len(every.attempts) >= 1
    refused = LiteratureSearch(online=False).find_support(
        "small-io", strategy_id="l1.read_buffering", strategy_name="read buffering", accept=lambda p: False
    )
    assert refused.status == "unsupported"
    assert len(refused.attempts) > len(every.attempts)  # it went on to the next queries
    assert all(a.found == 0 for a in refused.attempts)


def test_a_doi_is_enough_to_open_a_paper() -> None:
    paper = Paper(title="T", authors=["X"], year=2020, venue="SC", doi="10.1/abc", source="arxiv")
    assert paper.link() == "https://doi.org/10.1/abc" and paper.complete
    assert Paper(title="T", authors=["X"], year=2020, venue="SC", source="arxiv").missing == ["url"]
