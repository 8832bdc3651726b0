"""The remote paper services against recorded replies: parsing, retries, 429s, timeouts,
malformed replies, the cache, the rate limit and the offline path. No test reaches the network."""

from __future__ import annotations

import time
from collections.abc import Callable, Mapping
from pathlib import Path

import pytest

from dftune.core.network import OFFLINE_ENV
from dftune.tools.literature import net
from dftune.tools.literature.net import (
    HttpResponse,
    Offline,
    RateLimiter,
    Remote,
    RemoteError,
    TransportError,
)
from dftune.tools.literature.remote import (
    get_arxiv_paper,
    search_arxiv,
    search_crossref,
    search_openalex,
    search_papers_combined,
    search_semantic_scholar,
)

RECORDED = Path(__file__).parent / "recorded"

Reply = HttpResponse | Exception


class FakeTransport:
    """Replays scripted replies per host; records every URL asked for."""

    def __init__(self, routes: Mapping[str, list[Reply] | Callable[[str], Reply]]) -> None:
        self.routes = {k: (list(v) if isinstance(v, list) else v) for k, v in routes.items()}
        self.calls: list[str] = []

    def get(self, url: str, *, headers: Mapping[str, str], timeout: float) -> HttpResponse:
        assert timeout > 0 and "User-Agent" in headers
        self.calls.append(url)
        for host, script in self.routes.items():
            if host in url:
                reply = script(url) if callable(script) else (script.pop(0) if len(script) > 1 else script[0])
                if isinstance(reply, Exception):
                    raise reply
                return HttpResponse(reply.status, reply.body, reply.headers, url)
        return HttpResponse(404, b"not found", {}, url)


def ok(name: str) -> HttpResponse:
    return HttpResponse(200, (RECORDED / name).read_bytes())


def make_remote(transport: FakeTransport, tmp_path: Path, **kw: object) -> tuple[Remote, list[float]]:
    slept: list[float] = []
    rem = Remote(
        transport,
        offline=False,
        probe=lambda _h: True,
        cache_dir=tmp_path / "cache",
        sleep=slept.append,
        limiter=RateLimiter({}, default=0.0, sleep=slept.append),
        **kw,
    )  # type: ignore[arg-type]
    return rem, slept


def test_search_arxiv_parses_a_recorded_feed_through_the_arxiv_package(tmp_path: Path) -> None:
    t = FakeTransport({"export.arxiv.org": [ok("arxiv_search.xml")]})
    rem, _ = make_remote(t, tmp_path)
    res = search_arxiv("collective buffering small writes", 5, "cs.DC", remote=rem)
    assert not res.errors and not res.skipped
    p = res.papers[0]
    assert p.title == "Tuning Collective Buffering for Small Writes on Parallel File Systems"
    assert p.authors == ["Test Author One", "Test Author Two"] and p.year == 2023
    assert (
        p.arxiv == "2301.01234" and p.link() == "https://doi.org/10.1234/test.2023.001"
    )  # the version of record
    assert p.venue == "Proc. Test Workshop 2023" and p.doi == "10.1234/test.2023.001"
    assert "12 GB/s" in (p.passage or "") and p.passage_kind == "abstract" and p.complete
    # no journal ref: the venue is the arXiv preprint itself, never invented
    assert res.papers[1].venue == "arXiv preprint arXiv:2302.05678"
    assert "cat%3Acs.DC" in t.calls[0] and "all%3Acollective" in t.calls[0]


def test_get_arxiv_paper_accepts_ids_and_urls(tmp_path: Path) -> None:
    t = FakeTransport({"export.arxiv.org": [ok("arxiv_search.xml")]})
    rem, _ = make_remote(t, tmp_path)
    res = get_arxiv_paper("https://arxiv.org/abs/2301.01234v2", remote=rem)
    assert len(res.papers) == 1 and "id_list=2301.01234v2" in t.calls[0]
    bad = get_arxiv_paper("not an id", remote=rem)
    assert bad.errors and not bad.papers and len(t.calls) == 1


def test_semantic_scholar_openalex_crossref_normalize(tmp_path: Path) -> None:
    t = FakeTransport(
        {
            "api.semanticscholar.org": [ok("s2_search.json")],
            "api.openalex.org": [ok("openalex_search.json")],
            "api.crossref.org": [
                HttpResponse(
                    200,
                    b'{"message": {"items": ['
                    + (RECORDED / "crossref_work.json")
                    .read_bytes()
                    .split(b'"message": ', 1)[1]
                    .rsplit(b"}", 1)[0]
                    + b"]}}",
                )
            ],
        }
    )
    rem, _ = make_remote(t, tmp_path)
    s2 = search_semantic_scholar("metadata caching", 5, remote=rem).papers
    assert s2[0].doi == "10.1234/test.2023.001" and s2[0].link() == "https://doi.org/10.1234/test.2023.001"
    assert s2[0].venue == "Test Workshop" and s2[0].abstract is None
    assert s2[1].venue == "Test Symposium" and s2[1].passage and s2[1].pdf_url
    oa = search_openalex("readahead", 5, remote=rem).papers[0]
    assert oa.abstract == "Larger readahead windows raise sequential read bandwidth."
    assert oa.doi == "10.1234/test.2021.042" and oa.venue == "Journal of Test I/O" and oa.year == 2021
    cr = search_crossref("collective buffering", 5, remote=rem).papers[0]
    assert cr.authors == ["Test Author One", "Test Author Two"] and cr.year == 2023
    assert cr.venue == "Proceedings of the Test Workshop"


def test_combined_search_merges_duplicates_and_keeps_the_abstract(tmp_path: Path) -> None:
    t = FakeTransport(
        {
            "export.arxiv.org": [ok("arxiv_search.xml")],
            "api.semanticscholar.org": [ok("s2_search.json")],
            "api.openalex.org": [ok("openalex_search.json")],
            "api.crossref.org": [HttpResponse(500, b"")],
        }
    )
    rem, _ = make_remote(t, tmp_path, retries=1)
    res = search_papers_combined("collective buffering", 5, remote=rem)
    keys = [p.key() for p in res.papers]
    assert len(keys) == len(set(keys)) == 4  # the arXiv and S2 records of one paper merged
    merged = next(p for p in res.papers if p.doi == "10.1234/test.2023.001")
    assert merged.abstract and "aggregator" in merged.abstract
    assert any(e.startswith("crossref:") and "HTTP 500" in e for e in res.errors)
    assert not res.skipped


def test_429_is_retried_after_the_servers_delay(tmp_path: Path) -> None:
    t = FakeTransport(
        {
            "api.semanticscholar.org": [
                HttpResponse(429, b"slow down", {"Retry-After": "7"}),
                ok("s2_search.json"),
            ]
        }
    )
    rem, slept = make_remote(t, tmp_path)
    res = search_semantic_scholar("x", remote=rem)
    assert len(res.papers) == 2 and len(t.calls) == 2
    assert 7.0 in slept


def test_server_errors_back_off_exponentially_then_give_up(tmp_path: Path) -> None:
    t = FakeTransport({"api.openalex.org": [HttpResponse(503, b"")]})
    rem, slept = make_remote(t, tmp_path, retries=3, backoff_s=0.5)
    res = search_openalex("x", remote=rem)
    assert not res.papers and res.errors and "gave up after 4 tries (HTTP 503)" in res.errors[0]
    assert slept == [0.5, 1.0, 2.0] and len(t.calls) == 4


def test_timeouts_are_retried_and_reported(tmp_path: Path) -> None:
    t = FakeTransport(
        {
            "api.crossref.org": [
                TransportError("timed out"),
                TransportError("timed out"),
                ok("crossref_work.json"),
            ]
        }
    )
    rem, _ = make_remote(t, tmp_path, retries=2)
    assert rem.get("https://api.crossref.org/works/10.1234/test.2023.001").json()["message"]["DOI"]
    t2 = FakeTransport({"api.crossref.org": [TransportError("timed out")]})
    rem2, _ = make_remote(t2, tmp_path / "b", retries=1)
    res = search_crossref("x", remote=rem2)
    assert res.errors and "timed out" in res.errors[0] and len(t2.calls) == 2


def test_a_client_error_is_not_retried(tmp_path: Path) -> None:
    t = FakeTransport({"api.openalex.org": [HttpResponse(400, b"bad query")]})
    rem, slept = make_remote(t, tmp_path)
    with pytest.raises(RemoteError) as err:
        rem.get("https://api.openalex.org/works?search=x")
    assert err.value.status == 400 and len(t.calls) == 1 and not slept


@pytest.mark.parametrize("body", [b"{not json", b"[1, 2, 3]", b'{"data": "nope"}', b"\xff\xfe"])
def test_malformed_json_replies_are_errors_not_crashes(tmp_path: Path, body: bytes) -> None:
    t = FakeTransport({"api.semanticscholar.org": [HttpResponse(200, body)]})
    rem, _ = make_remote(t, tmp_path)
    res = search_semantic_scholar("x", remote=rem)
    assert not res.papers and res.errors


def test_malformed_atom_feed_yields_no_papers(tmp_path: Path) -> None:
    t = FakeTransport({"export.arxiv.org": [HttpResponse(200, b"<feed><entry><id>x</id></entry")]})
    rem, _ = make_remote(t, tmp_path)
    res = search_arxiv("x", remote=rem)
    assert not res.papers


def test_arxiv_http_error_is_reported(tmp_path: Path) -> None:
    t = FakeTransport({"export.arxiv.org": [HttpResponse(429, b"", {"Retry-After": "1"})]})
    rem, _ = make_remote(t, tmp_path, retries=2)
    res = search_arxiv("x", remote=rem)
    assert res.errors and not res.papers and len(t.calls) == 3


def test_replies_are_cached_on_disk_and_served_offline(tmp_path: Path) -> None:
    t = FakeTransport({"api.openalex.org": [ok("openalex_search.json")]})
    rem, _ = make_remote(t, tmp_path)
    first = search_openalex("readahead", remote=rem)
    assert len(t.calls) == 1 and list((tmp_path / "cache").glob("*.json"))
    offline = Remote(t, offline=True, cache_dir=tmp_path / "cache")
    again = search_openalex("readahead", remote=offline)
    assert again.papers == first.papers and len(t.calls) == 1
    expired = Remote(t, offline=True, cache_dir=tmp_path / "cache", cache_ttl_s=0.0)
    assert search_openalex("readahead", remote=expired).skipped


def test_offline_is_skipped_at_once_without_touching_the_transport(tmp_path: Path) -> None:
    t = FakeTransport({})
    rem = Remote(t, cache_dir=tmp_path)  # DFTUNE_OFFLINE=1 from the autouse fixture
    start = time.monotonic()
    for res in (
        search_arxiv("x", remote=rem),
        search_semantic_scholar("x", remote=rem),
        search_papers_combined("x", remote=rem),
    ):
        assert res.skipped and not res.papers and any("offline" in n for n in res.notes)
    assert time.monotonic() - start < 1.0 and not t.calls
    with pytest.raises(Offline):
        rem.get("https://api.openalex.org/works")


def test_unreachable_host_is_offline_after_a_quick_probe(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    monkeypatch.delenv(OFFLINE_ENV)
    probed: list[str] = []
    rem = Remote(FakeTransport({}), cache_dir=tmp_path, probe=lambda h: probed.append(h) or False)
    assert search_crossref("x", remote=rem).skipped and probed == ["api.crossref.org"]


def test_rate_limiter_spaces_requests_per_host() -> None:
    now = [100.0]
    slept: list[float] = []

    def sleep(s: float) -> None:
        slept.append(s)
        now[0] += s

    lim = RateLimiter({"export.arxiv.org": 3.0}, default=0.0, clock=lambda: now[0], sleep=sleep)
    assert lim.wait("export.arxiv.org") == 0.0
    now[0] += 1.0
    assert lim.wait("export.arxiv.org") == pytest.approx(2.0)
    assert lim.wait("export.arxiv.org") == pytest.approx(3.0)
    assert lim.wait("api.openalex.org") == 0.0
    assert slept == [pytest.approx(2.0), pytest.approx(3.0)]


def test_the_real_transport_is_guarded_in_tests() -> None:
    with pytest.raises(AssertionError, match="network"):
        net.UrllibTransport().get("https://example.org", headers={}, timeout=1.0)
