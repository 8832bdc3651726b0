"""Talking to a chat model: settings, the pre-flight check, the client, and what a failure means.

dftune owns the retries (the SDKs' own are switched off) so that one judgment never outlasts
its deadline: a request waits at most ``timeout_s`` (less when the deadline is nearer), a
retryable failure (429, 5xx, 529 overloaded, timeouts, lost connections) waits for the server's
``retry-after`` or an exponential backoff, and a failure that will not go away (401, 403, 404)
stops asking that model for the rest of the process.
"""

from __future__ import annotations

import email.utils
import os
import random
import socket
import time
from dataclasses import dataclass
from typing import Any
from urllib.parse import urlsplit

from pydantic import ValidationError

from dftune.agents.reasoner.protocol import ReasonerError
from dftune.core.domain.run import LLMSettings
from dftune.core.network import OFFLINE_ENV, offline_forced
from dftune.core.secrets import redact

PROVIDERS = ("anthropic", "openai")

#: environment variables of the settings, one per LLMSettings field: DFTUNE_LLM_<FIELD> (the CLI shows them)
SETTINGS_ENV = {name: f"DFTUNE_LLM_{name.upper()}" for name in LLMSettings.model_fields}
#: a retry-after longer than this is not waited for (the rules decide instead)
MAX_RETRY_AFTER_S = 120.0
#: backoff between retries without a retry-after grows to at most this
MAX_BACKOFF_S = 30.0
PROBE_TIMEOUT_S = 3.0


def llm_settings(**given: Any) -> LLMSettings:
    """The settings: what the caller gave (None: not given), else the environment, else the defaults."""
    values: dict[str, Any] = {}
    for name, env in SETTINGS_ENV.items():
        value = given.get(name)
        if value is None and os.environ.get(env, "").strip():
            value = os.environ[env].strip()
        if value is not None:
            values[name] = value
    try:
        return LLMSettings.model_validate(values)
    except ValidationError as exc:
        err = exc.errors()[0]
        name = str(err["loc"][0]) if err["loc"] else "?"
        raise ReasonerError(
            f"model setting {name} ({SETTINGS_ENV.get(name, name)}): {err['msg']} (got {values.get(name)!r})"
        ) from None


def parse_model_spec(spec: str) -> tuple[str, str]:
    """``PROVIDER:MODEL`` -> (provider, model), with a one-line error for anything else."""
    provider, _, model = spec.partition(":")
    if not model:
        raise ReasonerError(f"--model {spec!r}: expected rules or PROVIDER:MODEL (anthropic:..., openai:...)")
    if provider not in PROVIDERS:
        raise ReasonerError(f"--model {spec!r}: unknown provider {provider!r} ({', '.join(PROVIDERS)})")
    return provider, model


@dataclass(frozen=True)
class Endpoint:
    """Where a provider's API is and which key it takes (``base_url`` None: the provider's own)."""

    provider: str
    base_url: str | None
    key_env: str
    url_env: str

    @property
    def key(self) -> str:
        return os.environ.get(self.key_env, "").strip()

    @property
    def url(self) -> str:
        default = "https://api.anthropic.com" if self.provider == "anthropic" else "https://api.openai.com/v1"
        return self.base_url or default


_URL_ENV = {
    "anthropic": ("DFTUNE_ANTHROPIC_BASE_URL", "ANTHROPIC_BASE_URL", "ANTHROPIC_API_URL"),
    "openai": ("DFTUNE_OPENAI_BASE_URL", "OPENAI_BASE_URL", "OPENAI_API_BASE"),
}
_KEY_ENV = {"anthropic": "ANTHROPIC_API_KEY", "openai": "OPENAI_API_KEY"}


def endpoint(provider: str) -> Endpoint:
    for name in _URL_ENV[provider]:
        value = os.environ.get(name, "").strip()
        if value:
            return Endpoint(provider, value, _KEY_ENV[provider], name)
    return Endpoint(provider, None, _KEY_ENV[provider], _URL_ENV[provider][0])


def is_loopback(host: str | None) -> bool:
    return (host or "").lower() in ("localhost", "127.0.0.1", "::1", "[::1]") or (host or "").startswith(
        "127."
    )


def probe_endpoint(host: str, port: int, timeout: float = PROBE_TIMEOUT_S) -> str | None:
    """None when ``host:port`` accepts a TCP connection, else why not (one phrase)."""
    try:
        with socket.create_connection((host, port), timeout=timeout):
            return None
    except OSError as exc:
        return exc.strerror or type(exc).__name__


def check_model(spec: str) -> None:
    """Before anything runs: a known provider, its package, its key, and a base URL that answers.

    Raises :class:`ReasonerError` (one line naming what to set) instead of failing hours later."""
    if spec == "rules":
        return
    provider, _model = parse_model_spec(spec)
    package = "langchain_anthropic" if provider == "anthropic" else "langchain_openai"
    try:
        __import__(package)
    except ImportError:
        raise ReasonerError(
            f"--model {spec}: {package} is not installed (pip install 'dftune[llm]')"
        ) from None
    ep = endpoint(provider)
    if not ep.key:
        extra = " (any non-empty value for a server that needs none)" if provider == "openai" else ""
        raise ReasonerError(f"--model {spec}: {ep.key_env} is not set{extra}")
    parts = urlsplit(ep.url)
    if parts.scheme not in ("http", "https") or not parts.hostname:
        raise ReasonerError(f"--model {spec}: {ep.url_env}={ep.url!r} is not an http(s) URL")
    try:
        port = parts.port or (443 if parts.scheme == "https" else 80)
    except ValueError:
        raise ReasonerError(f"--model {spec}: {ep.url_env}={ep.url!r} has an invalid port") from None
    if offline_forced() and not is_loopback(parts.hostname):
        raise ReasonerError(f"--model {spec}: {OFFLINE_ENV}=1 forbids the network, and {ep.url} is not local")
    if any(os.environ.get(v) for v in ("HTTPS_PROXY", "https_proxy", "ALL_PROXY", "all_proxy")):
        return  # the SDK goes through the proxy; a direct connection says nothing
    why = probe_endpoint(parts.hostname, port)
    if why is not None:
        raise ReasonerError(f"--model {spec}: cannot connect to {parts.hostname}:{port} ({ep.url}): {why}")


def build_chat_model(spec: str, settings: LLMSettings | None = None) -> Any:
    """The langchain chat model for ``anthropic:MODEL`` or ``openai:MODEL``, with the SDK's retries off."""
    provider, model = parse_model_spec(spec)
    s = settings or LLMSettings()
    ep = endpoint(provider)
    if not ep.key:  # a resumed run whose key went away: one line, not a failure per request
        raise ReasonerError(f"--model {spec}: {ep.key_env} is not set")
    try:
        if provider == "anthropic":
            from langchain_anthropic import ChatAnthropic

            return ChatAnthropic(
                model=model,
                base_url=ep.url,
                api_key=ep.key,
                timeout=s.timeout_s,
                max_retries=0,
                max_tokens=s.max_output_tokens,
            )
        from langchain_openai import ChatOpenAI

        return ChatOpenAI(
            model=model,
            base_url=ep.url,
            api_key=ep.key,
            timeout=s.timeout_s,
            max_retries=0,
            max_tokens=s.max_output_tokens,
            use_responses_api=False,
        )
    except ImportError as exc:
        raise ReasonerError(
            f"--model {spec}: {exc.name} is not installed (pip install 'dftune[llm]')"
        ) from None
    except Exception as exc:  # the SDKs refuse a missing key or a bad URL with their own types
        raise ReasonerError(f"--model {spec}: {redact(str(exc)).splitlines()[0][:200]}") from None


# --------------------------------------------------------------------------- failures


@dataclass(frozen=True)
class Failure:
    """What a failed request means for the next one."""

    text: str
    retryable: bool
    #: the model cannot work for this run (bad key, no permission, no such model)
    permanent: bool = False
    retry_after_s: float | None = None


def _status(exc: BaseException) -> int | None:
    status = getattr(exc, "status_code", None)
    if isinstance(status, int):
        return status
    response = getattr(exc, "response", None)
    status = getattr(response, "status_code", None)
    return status if isinstance(status, int) else None


def retry_after(exc: BaseException) -> float | None:
    """The server's ``retry-after-ms`` / ``retry-after`` (seconds or an HTTP date), in seconds."""
    headers = getattr(getattr(exc, "response", None), "headers", None)
    if headers is None:
        return None
    try:
        ms = headers.get("retry-after-ms")
        if ms is not None:
            return max(0.0, float(ms) / 1000.0)
        raw = headers.get("retry-after")
    except (TypeError, ValueError, AttributeError):
        return None
    if raw is None:
        return None
    try:
        return max(0.0, float(raw))
    except ValueError:
        pass
    try:
        when = email.utils.parsedate_to_datetime(str(raw))
    except (TypeError, ValueError):
        return None
    return max(0.0, when.timestamp() - time.time())


def _error_text(exc: BaseException, status: int | None) -> str:
    body = getattr(exc, "body", None)
    kind, message = "", ""
    if isinstance(body, dict):
        err = body.get("error", body)
        if isinstance(err, dict):
            kind, message = str(err.get("type") or err.get("code") or ""), str(err.get("message") or "")
    if not message:
        message = str(getattr(exc, "message", "") or exc) or type(exc).__name__
    head = f"HTTP {status}" if status is not None else type(exc).__name__
    return redact(" ".join(f"{head} {kind}: {message}".split()))[:240]


def classify(exc: BaseException) -> Failure:
    """Whether retrying can help, how long the server wants us to wait, and the one-line reason."""
    from langchain_core.exceptions import (
        ModelAuthenticationError,
        ModelError,
        ModelNotFoundError,
        ModelPermissionDeniedError,
    )

    status = _status(exc)
    text = _error_text(exc, status)
    names = {c.__name__ for c in type(exc).__mro__}
    if isinstance(
        exc, ModelAuthenticationError | ModelPermissionDeniedError | ModelNotFoundError
    ) or status in (
        401,
        403,
        404,
    ):
        return Failure(text, retryable=False, permanent=True)
    timeout = bool(
        names & {"APITimeoutError", "TimeoutException", "ReadTimeout", "ConnectTimeout"}
    ) or isinstance(exc, TimeoutError)
    if timeout:
        return Failure(f"timed out ({type(exc).__name__})", retryable=True)
    retryable = (
        (isinstance(exc, ModelError) and exc.is_retryable)
        or status in (408, 409, 429, 529)
        or (status is not None and status >= 500)
        or bool(names & {"APIConnectionError", "ConnectError", "RemoteProtocolError", "ReadError"})
        or isinstance(exc, ConnectionError)
    )
    return Failure(text, retryable=retryable, retry_after_s=retry_after(exc) if retryable else None)


def backoff(attempt: int, base_s: float) -> float:
    """Exponential backoff with jitter (50-100% of ``base * 2**attempt``), capped."""
    return min(MAX_BACKOFF_S, base_s * (2**attempt)) * (0.5 + random.random() / 2)
