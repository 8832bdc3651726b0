"""Local HTTP servers that speak the Anthropic Messages API and the OpenAI Chat Completions API.

The official SDKs (under langchain-anthropic / langchain-openai) talk to them over real HTTP on
127.0.0.1. Each server checks a request the way the real API does before it looks at its script:
the API key (401 with the real error body), the required fields, and the message-ordering rules
(Anthropic: every ``tool_use`` answered by a ``tool_result`` in the next user message, no
``tool_result`` without its ``tool_use``; OpenAI: an assistant message with ``tool_calls``
followed by a tool message for each id, no tool message without its call). A request that
breaks a rule gets the real 400 and is recorded in ``violations``; leaving the ``with`` block
with a violation fails the test unless it said ``expect_violations=True``.

Replies are scripted per test, one per request, in order: :func:`tool_call`, :func:`text`,
:func:`http_error` (401, 429 with ``retry-after``, 500, 529 overloaded, ...), :func:`hang` (no
answer until the client gives up), ``usage=False`` for a server that sends no usage, and
``.always()`` for a reply the server gives to every later request.
"""

from __future__ import annotations

import json
import threading
import time
import uuid
from dataclasses import dataclass, field
from http.server import BaseHTTPRequestHandler, ThreadingHTTPServer
from typing import Any

KEY = "sk-test-local-0123456789abcdef"


@dataclass
class Reply:
    kind: str  # tool | text | error | hang
    name: str = ""
    args: Any = None  # a dict, or a raw string (malformed JSON arguments)
    content: str = ""
    status: int = 200
    headers: dict[str, str] = field(default_factory=dict)
    body: dict[str, Any] | None = None
    usage: bool = True
    tokens: tuple[int, int] = (120, 30)
    seconds: float = 600.0
    #: answer every later request the same way (a server that keeps failing)
    forever: bool = False
    #: kind "route": the replies per forced tool name, in order (a reply, or a function of the request's text)
    routes: dict[str, list[Any]] = field(default_factory=dict)

    def always(self) -> Reply:
        self.forever = True
        return self


def tool_call(name: str, args: Any, *, usage: bool = True, tokens: tuple[int, int] = (120, 30)) -> Reply:
    return Reply("tool", name=name, args=args, usage=usage, tokens=tokens)


def text(content: str, *, usage: bool = True) -> Reply:
    return Reply("text", content=content, usage=usage)


def http_error(status: int, *, retry_after: float | None = None, body: dict[str, Any] | None = None) -> Reply:
    headers = {"retry-after": f"{retry_after:g}"} if retry_after is not None else {}
    return Reply("error", status=status, headers=headers, body=body)


def by_tool(routes: dict[str, list[Any]]) -> Reply:
    """Answer every request by the tool it forces: the next reply queued for that tool (a :class:`Reply`,
    or a function of the request's JSON text returning one). A tool with nothing left is a violation."""
    return Reply("route", routes={k: list(v) for k, v in routes.items()}, forever=True)


def hang(seconds: float = 600.0) -> Reply:
    """No answer (the connection stays open) until the client times out or the server stops."""
    return Reply("hang", seconds=seconds)


class _Invalid(Exception):
    def __init__(self, message: str, param: str | None = None) -> None:
        super().__init__(message)
        self.param = param


@dataclass
class Seen:
    """One request as the server received it."""

    path: str
    headers: dict[str, str]
    body: dict[str, Any]
    at: float


class _Server:
    """The machinery both APIs share: a threaded HTTP server on loopback, the script, the record."""

    provider = ""

    def __init__(
        self, script: list[Reply] | None = None, *, key: str = KEY, expect_violations: bool = False
    ) -> None:
        self.script = list(script or [])
        self.key = key
        self.expect_violations = expect_violations
        self.requests: list[Seen] = []
        self.violations: list[str] = []
        self._stop = threading.Event()
        self._lock = threading.Lock()
        self._httpd: ThreadingHTTPServer | None = None
        self._thread: threading.Thread | None = None

    # ------------------------------------------------------------------ lifecycle
    def __enter__(self) -> _Server:
        server = self

        class Handler(BaseHTTPRequestHandler):
            protocol_version = "HTTP/1.1"

            def log_message(self, format: str, *args: Any) -> None:  # quiet
                return None

            def do_POST(self) -> None:
                server._handle(self)

        self._httpd = ThreadingHTTPServer(("127.0.0.1", 0), Handler)
        self._httpd.daemon_threads = True
        self._httpd.block_on_close = False
        self._thread = threading.Thread(
            target=self._httpd.serve_forever, kwargs={"poll_interval": 0.05}, daemon=True
        )
        self._thread.start()
        return self

    def __exit__(self, *exc: object) -> None:
        self._stop.set()
        if self._httpd is not None:
            self._httpd.shutdown()
            self._httpd.server_close()
        if self._thread is not None:
            self._thread.join(timeout=5)
        if exc[0] is None and self.violations and not self.expect_violations:
            raise AssertionError(f"{self.provider} API rules broken: {self.violations}")

    @property
    def port(self) -> int:
        assert self._httpd is not None
        return int(self._httpd.server_address[1])

    @property
    def url(self) -> str:
        raise NotImplementedError

    def env(self) -> dict[str, str]:
        """The environment that points dftune at this server."""
        raise NotImplementedError

    # ------------------------------------------------------------------ one request
    def _handle(self, h: BaseHTTPRequestHandler) -> None:
        length = int(h.headers.get("content-length") or 0)
        raw = h.rfile.read(length)
        try:
            body = json.loads(raw or b"{}")
        except ValueError:
            body = {}
        headers = {k.lower(): v for k, v in h.headers.items()}
        with self._lock:
            self.requests.append(Seen(h.path, headers, body, time.monotonic()))
        status, payload, extra = self._respond(h.path, headers, body)
        if status == 0:  # hang: hold the connection, answer nothing
            return
        data = json.dumps(payload).encode()
        try:
            h.send_response(status)
            h.send_header("content-type", "application/json")
            h.send_header("content-length", str(len(data)))
            for k, v in {**self._id_header(), **extra}.items():
                h.send_header(k, v)
            h.end_headers()
            h.wfile.write(data)
        except OSError:
            pass  # the client went away (it timed out)

    def _respond(
        self, path: str, headers: dict[str, str], body: dict[str, Any]
    ) -> tuple[int, Any, dict[str, str]]:
        auth = self._auth(headers)
        if auth is not None:
            return auth
        try:
            self._validate(path, headers, body)
        except _Invalid as exc:
            with self._lock:
                self.violations.append(str(exc))
            return 400, self._error_body(400, str(exc), exc.param), {}
        with self._lock:
            if not self.script:
                self.violations.append("script exhausted: the test did not expect this request")
                return 500, self._error_body(500, "script exhausted"), {}
            reply = self.script[0] if self.script[0].forever else self.script.pop(0)
            if reply.kind == "route":
                tool = self._forced_tool(body)
                queue = reply.routes.get(tool) or []
                if not queue:
                    self.violations.append(f"no scripted reply left for tool {tool!r}")
                    return 500, self._error_body(500, "script exhausted"), {}
                nxt = queue.pop(0)
                reply = nxt(json.dumps(body)) if callable(nxt) else nxt
        if reply.kind == "hang":
            self._stop.wait(reply.seconds)
            return 0, None, {}
        if reply.kind == "error":
            return reply.status, reply.body or self._error_body(reply.status), reply.headers
        return 200, self._message(reply, body), {}

    # ------------------------------------------------------------------ per API
    def _forced_tool(self, body: dict[str, Any]) -> str:
        choice = body.get("tool_choice") or {}
        if isinstance(choice, dict):
            return str(choice.get("name") or (choice.get("function") or {}).get("name") or "")
        return ""

    def _auth(self, headers: dict[str, str]) -> tuple[int, Any, dict[str, str]] | None:
        raise NotImplementedError

    def _validate(self, path: str, headers: dict[str, str], body: dict[str, Any]) -> None:
        raise NotImplementedError

    def _error_body(
        self, status: int, message: str | None = None, param: str | None = None
    ) -> dict[str, Any]:
        raise NotImplementedError

    def _message(self, reply: Reply, request: dict[str, Any]) -> dict[str, Any]:
        raise NotImplementedError

    def _id_header(self) -> dict[str, str]:
        return {}


# --------------------------------------------------------------------------- Anthropic


_ANTHROPIC_ERRORS = {
    400: ("invalid_request_error", "Invalid request"),
    401: ("authentication_error", "invalid x-api-key"),
    403: ("permission_error", "Your API key does not have permission to use the specified resource."),
    404: ("not_found_error", "model: not found"),
    413: ("request_too_large", "Request exceeds the maximum allowed number of bytes."),
    429: (
        "rate_limit_error",
        "This request would exceed the rate limit for your organization of 50 requests "
        "per minute. For details, refer to: https://docs.claude.com/en/api/rate-limits.",
    ),
    500: ("api_error", "Internal server error"),
    529: ("overloaded_error", "Overloaded"),
}


class AnthropicAPI(_Server):
    """``POST /v1/messages`` as the Anthropic API answers it."""

    provider = "anthropic"

    @property
    def url(self) -> str:
        return f"http://127.0.0.1:{self.port}"

    def env(self) -> dict[str, str]:
        return {"ANTHROPIC_API_KEY": self.key, "DFTUNE_ANTHROPIC_BASE_URL": self.url}

    def _id_header(self) -> dict[str, str]:
        return {"request-id": f"req_{uuid.uuid4().hex[:24]}"}

    def _auth(self, headers: dict[str, str]) -> tuple[int, Any, dict[str, str]] | None:
        # the SDK sends the key as x-api-key or (anthropic 2.x) as a Bearer token; the API takes both
        given = headers.get("x-api-key") or headers.get("authorization", "").removeprefix("Bearer ").strip()
        if given != self.key:
            return 401, self._error_body(401), {}
        return None

    def _error_body(
        self, status: int, message: str | None = None, param: str | None = None
    ) -> dict[str, Any]:
        kind, default = _ANTHROPIC_ERRORS.get(status, ("api_error", "Internal server error"))
        return {
            "type": "error",
            "error": {"type": kind, "message": message or default},
            "request_id": f"req_{uuid.uuid4().hex[:24]}",
        }

    def _validate(self, path: str, headers: dict[str, str], body: dict[str, Any]) -> None:
        if path.rstrip("/") != "/v1/messages":
            raise _Invalid(f"Not Found: {path}")
        if not headers.get("anthropic-version"):
            raise _Invalid("anthropic-version: header is required")
        for name in ("model", "max_tokens", "messages"):
            if name not in body:
                raise _Invalid(f"{name}: Field required")
        if not isinstance(body["max_tokens"], int) or body["max_tokens"] < 1:
            raise _Invalid("max_tokens: Input should be greater than or equal to 1")
        tools = {t.get("name") for t in body.get("tools") or []}
        choice = body.get("tool_choice")
        if choice is not None:
            if not tools:
                raise _Invalid("tool_choice may only be specified while providing tools.")
            if choice.get("type") == "tool" and choice.get("name") not in tools:
                raise _Invalid(f"tool_choice.name: tool {choice.get('name')!r} not found in tools")
        msgs = body["messages"]
        if not isinstance(msgs, list) or not msgs:
            raise _Invalid("messages: at least one message is required")
        if body.get("system") is not None and not isinstance(body["system"], str | list):
            raise _Invalid("system: Input should be a valid string or list of text blocks")
        if msgs[0].get("role") != "user":
            raise _Invalid('messages: first message must use the "user" role')
        for i, m in enumerate(msgs):
            role = m.get("role")
            if role not in ("user", "assistant"):
                raise _Invalid(f"messages.{i}.role: Input should be 'user' or 'assistant'")
            content = m.get("content")
            empty = content in (None, "", []) or (isinstance(content, str) and not content.strip())
            if empty and not (role == "assistant" and i == len(msgs) - 1):
                raise _Invalid(
                    f"messages.{i}: all messages must have non-empty content except for the optional "
                    "final assistant message"
                )
        for i, m in enumerate(msgs):
            blocks = m["content"] if isinstance(m["content"], list) else []
            uses = [b.get("id") for b in blocks if isinstance(b, dict) and b.get("type") == "tool_use"]
            if m["role"] == "assistant" and uses:
                nxt = msgs[i + 1] if i + 1 < len(msgs) else None
                nblocks = (
                    nxt["content"]
                    if nxt and nxt["role"] == "user" and isinstance(nxt["content"], list)
                    else []
                )
                leading = []
                for b in nblocks:  # tool_result blocks must come first in that user message
                    if not (isinstance(b, dict) and b.get("type") == "tool_result"):
                        break
                    leading.append(b.get("tool_use_id"))
                missing = [u for u in uses if u not in leading]
                if missing:
                    raise _Invalid(
                        f"messages.{i}: `tool_use` ids were found without `tool_result` blocks immediately "
                        f"after: {', '.join(missing)}. Each `tool_use` block must have a corresponding "
                        "`tool_result` block in the next message."
                    )
            if m["role"] == "user":
                prev = msgs[i - 1] if i > 0 else None
                pblocks = prev["content"] if prev and isinstance(prev["content"], list) else []
                known = {b.get("id") for b in pblocks if isinstance(b, dict) and b.get("type") == "tool_use"}
                for j, b in enumerate(blocks):
                    if (
                        isinstance(b, dict)
                        and b.get("type") == "tool_result"
                        and b.get("tool_use_id") not in known
                    ):
                        raise _Invalid(
                            f"messages.{i}.content.{j}: unexpected `tool_use_id` found in `tool_result` "
                            f"blocks: {b.get('tool_use_id')}. Each `tool_result` block must have a "
                            "corresponding `tool_use` block in the previous message."
                        )

    def _message(self, reply: Reply, request: dict[str, Any]) -> dict[str, Any]:
        if reply.kind == "tool":
            content: list[dict[str, Any]] = [
                {
                    "type": "tool_use",
                    "id": f"toolu_{uuid.uuid4().hex[:24]}",
                    "name": reply.name,
                    "input": reply.args,
                }
            ]
            stop = "tool_use"
        else:
            content, stop = [{"type": "text", "text": reply.content}], "end_turn"
        out: dict[str, Any] = {
            "id": f"msg_{uuid.uuid4().hex[:24]}",
            "type": "message",
            "role": "assistant",
            "model": request.get("model"),
            "content": content,
            "stop_reason": stop,
            "stop_sequence": None,
        }
        if reply.usage:
            out["usage"] = {"input_tokens": reply.tokens[0], "output_tokens": reply.tokens[1]}
        return out


# --------------------------------------------------------------------------- OpenAI


class OpenAIAPI(_Server):
    """``POST /v1/chat/completions`` as the OpenAI API answers it."""

    provider = "openai"

    @property
    def url(self) -> str:
        return f"http://127.0.0.1:{self.port}/v1"

    def env(self) -> dict[str, str]:
        return {"OPENAI_API_KEY": self.key, "DFTUNE_OPENAI_BASE_URL": self.url}

    def _id_header(self) -> dict[str, str]:
        return {"x-request-id": f"req_{uuid.uuid4().hex}"}

    def _auth(self, headers: dict[str, str]) -> tuple[int, Any, dict[str, str]] | None:
        given = headers.get("authorization", "").removeprefix("Bearer ").strip()
        if given != self.key:
            masked = f"{given[:3]}{'*' * 10}{given[-4:]}" if len(given) > 8 else "***"
            return (
                401,
                {
                    "error": {
                        "message": f"Incorrect API key provided: {masked}. You can find your API key at "
                        "https://platform.openai.com/account/api-keys.",
                        "type": "invalid_request_error",
                        "param": None,
                        "code": "invalid_api_key",
                    }
                },
                {},
            )
        return None

    def _error_body(
        self, status: int, message: str | None = None, param: str | None = None
    ) -> dict[str, Any]:
        if status == 429:
            return {
                "error": {
                    "message": message
                    or "Rate limit reached for gpt-test in organization org-test on "
                    "requests per min (RPM): Limit 3, Used 3, Requested 1. Please try again in 20s.",
                    "type": "requests",
                    "param": None,
                    "code": "rate_limit_exceeded",
                }
            }
        if status >= 500:
            return {
                "error": {
                    "message": message
                    or "The server had an error while processing your request. Sorry about that!",
                    "type": "server_error",
                    "param": None,
                    "code": None,
                }
            }
        return {
            "error": {
                "message": message or "Invalid request",
                "type": "invalid_request_error",
                "param": param,
                "code": None,
            }
        }

    def _validate(self, path: str, headers: dict[str, str], body: dict[str, Any]) -> None:
        if path.rstrip("/") != "/v1/chat/completions":
            raise _Invalid(f"Invalid URL (POST {path})")
        if "model" not in body:
            raise _Invalid("you must provide a model parameter")
        msgs = body.get("messages")
        if not isinstance(msgs, list) or not msgs:
            raise _Invalid(
                "Invalid 'messages': empty array. Expected an array with minimum length 1.", "messages"
            )
        tools = {(t.get("function") or {}).get("name") for t in body.get("tools") or []}
        choice = body.get("tool_choice")
        if isinstance(choice, dict):
            if not tools:
                raise _Invalid(
                    "Invalid value for 'tool_choice': 'tool_choice' is only allowed when 'tools' are "
                    "specified.",
                    "tool_choice",
                )
            if (choice.get("function") or {}).get("name") not in tools:
                raise _Invalid(
                    f"Tool choice '{(choice.get('function') or {}).get('name')}' not found in 'tools'.",
                    "tool_choice",
                )
        pending: list[str] = []  # tool_call ids still to be answered
        open_ids: set[str] = set()  # ids of the latest assistant tool_calls message
        for i, m in enumerate(msgs):
            role = m.get("role")
            if role not in ("system", "developer", "user", "assistant", "tool"):
                raise _Invalid(
                    f"Invalid value: '{role}'. Supported values are: 'system', 'assistant', 'user', "
                    "'tool', and 'developer'.",
                    f"messages.[{i}].role",
                )
            if pending and role != "tool":
                raise _Invalid(
                    "An assistant message with 'tool_calls' must be followed by tool messages responding "
                    f"to each 'tool_call_id'. The following tool_call_ids did not have response "
                    f"messages: {', '.join(pending)}",
                    f"messages.[{i}].role",
                )
            if role == "tool":
                tid = m.get("tool_call_id")
                if tid not in open_ids:
                    raise _Invalid(
                        "Invalid parameter: messages with role 'tool' must be a response to a preceeding "
                        "message with 'tool_calls'.",
                        f"messages.[{i}].role",
                    )
                if tid in pending:
                    pending.remove(tid)
                continue
            open_ids = set()
            if role == "assistant" and m.get("tool_calls"):
                ids = [c.get("id") for c in m["tool_calls"]]
                pending, open_ids = list(ids), set(ids)
            elif role in ("user", "system", "developer") and m.get("content") is None:
                raise _Invalid(
                    "Invalid value for 'content': expected a string, got null.", f"messages.[{i}].content"
                )
        if pending:
            raise _Invalid(
                "An assistant message with 'tool_calls' must be followed by tool messages responding to "
                f"each 'tool_call_id'. The following tool_call_ids did not have response messages: "
                f"{', '.join(pending)}",
                f"messages.[{len(msgs)}].role",
            )

    def _message(self, reply: Reply, request: dict[str, Any]) -> dict[str, Any]:
        if reply.kind == "tool":
            args = reply.args if isinstance(reply.args, str) else json.dumps(reply.args)
            message: dict[str, Any] = {
                "role": "assistant",
                "content": None,
                "refusal": None,
                "tool_calls": [
                    {
                        "id": f"call_{uuid.uuid4().hex[:24]}",
                        "type": "function",
                        "function": {"name": reply.name, "arguments": args},
                    }
                ],
            }
            finish = "tool_calls"
        else:
            message, finish = {"role": "assistant", "content": reply.content, "refusal": None}, "stop"
        out: dict[str, Any] = {
            "id": f"chatcmpl-{uuid.uuid4().hex[:24]}",
            "object": "chat.completion",
            "created": int(time.time()),
            "model": request.get("model"),
            "choices": [{"index": 0, "message": message, "logprobs": None, "finish_reason": finish}],
            "system_fingerprint": None,
        }
        if reply.usage:
            out["usage"] = {
                "prompt_tokens": reply.tokens[0],
                "completion_tokens": reply.tokens[1],
                "total_tokens": sum(reply.tokens),
            }
        return out


SERVERS: dict[str, type[_Server]] = {"anthropic": AnthropicAPI, "openai": OpenAIAPI}
MODELS = {"anthropic": "anthropic:claude-test", "openai": "openai:gpt-test"}
