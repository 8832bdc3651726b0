"""The remote layer: one place where dftune talks to paper services over HTTP.

Every remote call goes through :class:`Remote`, which gives it an on-disk cache, a per-host
rate limit, a timeout, retries with exponential backoff (honouring ``Retry-After``) and an
offline check that answers at once. The HTTP :class:`Transport` is injectable, so tests
replay recorded responses and never reach the network.

Offline means: ``DFTUNE_OFFLINE=1`` (or ``offline=True``), or the host's name does not
resolve / its port does not answer within a second. A cached answer is still served offline.
"""

from __future__ import annotations

import hashlib
import json
import threading
import time
import urllib.error
import urllib.parse
import urllib.request
from collections.abc import Callable, Mapping
from dataclasses import dataclass, field
from email.utils import parsedate_to_datetime
from pathlib import Path
from typing import Any, Protocol

from dftune.core import strictjson
from dftune.core.errors import DftuneError
from dftune.core.home import dftune_home
from dftune.core.network import OFFLINE_ENV, offline_forced, probe_host

USER_AGENT = "dftune-literature/0.1 (offline-first I/O tuning agent)"
#: Statuses worth another try: rate limited, or the server had a bad moment.
RETRY_STATUSES = frozenset({408, 425, 429, 500, 502, 503, 504})
#: Seconds between two requests to the same host (arXiv asks for one every three seconds).
DEFAULT_MIN_INTERVAL = {"export.arxiv.org": 3.0, "api.semanticscholar.org": 1.1}
CACHE_TTL_S = 7 * 24 * 3600.0


class RemoteError(DftuneError):
    """A remote call failed for good (after retries), or its answer could not be used."""

    def __init__(self, message: str, *, status: int | None = None) -> None:
        super().__init__(message)
        self.status = status


class Offline(RemoteError):
    """No network for this host: the call was skipped at once."""


class TransportError(OSError):
    """The request did not get an HTTP answer (refused, reset, timed out, no such host)."""


@dataclass(frozen=True)
class HttpResponse:
    status: int
    body: bytes
    headers: Mapping[str, str] = field(default_factory=dict)
    url: str = ""

    def json(self) -> Any:
        """The body as JSON; a malformed body is a :class:`RemoteError`, not a crash."""
        try:
            return json.loads(self.body.decode("utf-8"))
        except (UnicodeDecodeError, json.JSONDecodeError) as exc:
            raise RemoteError(f"{self.url}: malformed JSON reply ({exc})") from None

    def header(self, name: str) -> str | None:
        low = name.lower()
        return next((v for k, v in self.headers.items() if k.lower() == low), None)


class Transport(Protocol):
    def get(self, url: str, *, headers: Mapping[str, str], timeout: float) -> HttpResponse: ...


class UrllibTransport:
    """The real transport: ``urllib`` with a hard timeout; HTTP errors become responses."""

    def get(self, url: str, *, headers: Mapping[str, str], timeout: float) -> HttpResponse:
        req = urllib.request.Request(url, headers=dict(headers), method="GET")
        try:
            with urllib.request.urlopen(req, timeout=timeout) as resp:
                return HttpResponse(resp.status, resp.read(), dict(resp.headers.items()), url)
        except urllib.error.HTTPError as exc:
            body = exc.read() if exc.fp is not None else b""
            return HttpResponse(exc.code, body, dict(exc.headers.items()) if exc.headers else {}, url)
        except (urllib.error.URLError, TimeoutError, OSError) as exc:
            reason = getattr(exc, "reason", exc)
            raise TransportError(f"{url}: {reason}") from None


class RateLimiter:
    """Keeps at least ``min_interval`` seconds between requests to the same host."""

    def __init__(
        self,
        min_interval: Mapping[str, float] | None = None,
        *,
        default: float = 0.5,
        clock: Callable[[], float] = time.monotonic,
        sleep: Callable[[float], None] = time.sleep,
    ) -> None:
        self._interval = dict(DEFAULT_MIN_INTERVAL if min_interval is None else min_interval)
        self._default = default
        self._clock, self._sleep = clock, sleep
        self._last: dict[str, float] = {}
        self._lock = threading.Lock()

    def wait(self, host: str) -> float:
        """Sleep until ``host`` may be called again; returns the seconds slept."""
        with self._lock:
            gap = self._interval.get(host, self._default)
            last = self._last.get(host)
            now = self._clock()
            delay = 0.0 if last is None else max(0.0, last + gap - now)
            self._last[host] = now + delay
        if delay > 0:
            self._sleep(delay)
        return delay


class Remote:
    """Cached, rate-limited, retrying GETs with a fast offline path."""

    def __init__(
        self,
        transport: Transport | None = None,
        *,
        offline: bool | None = None,
        probe: Callable[[str], bool] | None = None,
        cache_dir: Path | None = None,
        cache_ttl_s: float = CACHE_TTL_S,
        timeout_s: float = 10.0,
        retries: int = 3,
        backoff_s: float = 1.0,
        max_backoff_s: float = 20.0,
        limiter: RateLimiter | None = None,
        sleep: Callable[[float], None] = time.sleep,
    ) -> None:
        self.transport: Transport = transport or UrllibTransport()
        self._offline = offline
        self._probe = probe or probe_host
        self._cache_dir = cache_dir
        self.cache_ttl_s = cache_ttl_s
        self.timeout_s, self.retries = timeout_s, retries
        self.backoff_s, self.max_backoff_s = backoff_s, max_backoff_s
        self._sleep = sleep
        self.limiter = limiter or RateLimiter(sleep=sleep)
        #: Every request actually sent (url, status or error): the audit trail of a search.
        self.log: list[dict[str, Any]] = []

    @property
    def cache_dir(self) -> Path:
        return self._cache_dir or (dftune_home() / "cache" / "literature")

    def online(self, host: str) -> bool:
        forced = offline_forced() if self._offline is None else self._offline
        return not forced and self._probe(host)

    # ----- cache

    def _cache_path(self, url: str) -> Path:
        return self.cache_dir / f"{hashlib.sha256(url.encode()).hexdigest()[:32]}.json"

    def _cached(self, url: str) -> HttpResponse | None:
        path = self._cache_path(url)
        try:
            doc = strictjson.loads(path.read_text(encoding="utf-8"))
            if time.time() - float(doc["stored"]) > self.cache_ttl_s:
                return None
            return HttpResponse(int(doc["status"]), doc["body"].encode("utf-8"), {}, url)
        except (OSError, ValueError, KeyError, TypeError):
            return None

    def _store(self, url: str, resp: HttpResponse) -> None:
        try:
            body = resp.body.decode("utf-8")
        except UnicodeDecodeError:
            return  # only text replies (JSON, Atom) are cached
        path = self._cache_path(url)
        path.parent.mkdir(parents=True, exist_ok=True)
        doc = {"url": url, "stored": time.time(), "status": resp.status, "body": body}
        strictjson.write_file(path, doc)

    # ----- requests

    def get(
        self,
        url: str,
        params: Mapping[str, Any] | None = None,
        *,
        headers: Mapping[str, str] | None = None,
        use_cache: bool = True,
    ) -> HttpResponse:
        """GET ``url`` (with query ``params``); a 200 reply or :class:`RemoteError`/:class:`Offline`."""
        if params:
            url = f"{url}{'&' if '?' in url else '?'}{urllib.parse.urlencode(params, doseq=True)}"
        if use_cache and (hit := self._cached(url)) is not None:
            return hit
        host = urllib.parse.urlsplit(url).hostname or ""
        if not self.online(host):
            raise Offline(f"offline: {host} not reachable (or {OFFLINE_ENV}=1); skipped")
        hdrs = {"User-Agent": USER_AGENT, "Accept": "application/json, application/atom+xml;q=0.9, */*;q=0.5"}
        hdrs.update(headers or {})
        last = "no attempt"
        status: int | None = None
        for attempt in range(self.retries + 1):
            self.limiter.wait(host)
            try:
                resp = self.transport.get(url, headers=hdrs, timeout=self.timeout_s)
            except TransportError as exc:
                last, status = str(exc), None
                self.log.append({"url": url, "error": last})
                delay = self.backoff_s * 2**attempt
            else:
                self.log.append({"url": url, "status": resp.status})
                if resp.status == 200:
                    if use_cache:
                        self._store(url, resp)
                    return resp
                status = resp.status
                last = f"HTTP {resp.status}"
                if resp.status not in RETRY_STATUSES:
                    raise RemoteError(f"{url}: {last}", status=status)
                delay = _retry_after(resp) or self.backoff_s * 2**attempt
            if attempt < self.retries:
                self._sleep(min(delay, self.max_backoff_s))
        raise RemoteError(f"{url}: gave up after {self.retries + 1} tries ({last})", status=status)


def _retry_after(resp: HttpResponse) -> float | None:
    """Seconds from a ``Retry-After`` header (delta or HTTP date), when present and sane."""
    raw = resp.header("Retry-After")
    if not raw:
        return None
    try:
        return max(0.0, float(raw))
    except ValueError:
        pass
    try:
        when = parsedate_to_datetime(raw)
    except (TypeError, ValueError):
        return None
    return max(0.0, when.timestamp() - time.time())
