"""The stdio MCP server over the registry (the low-level SDK server, so every failure is one line)."""

from __future__ import annotations

import json
import logging
import sys
from pathlib import Path
from typing import Any

from dftune.core import strictjson
from dftune.core.errors import one_line
from dftune.core.extras import require
from dftune.mcp_server.registry import ToolFailure
from dftune.mcp_server.toolset import call, tools

log = logging.getLogger("dftune.mcp")
SERVER_NAME = "dftune"


#: the longest error line a client gets (an argument echoed in it is cut)
MAX_ERROR_CHARS = 2000


def build_server() -> Any:
    """The low-level SDK server with every tool of :func:`registry.tools`."""
    require("mcp", "mcp", "dftune mcp (the MCP server)")
    import anyio.to_thread
    import mcp.types as types
    from mcp.server import Server
    from mcp.shared.exceptions import MCPError

    async def list_tools(_ctx: Any, _params: Any) -> types.ListToolsResult:
        return types.ListToolsResult(
            tools=[
                types.Tool(
                    name=s.name,
                    description=s.description,
                    input_schema=s.params.model_json_schema(),
                    annotations=types.ToolAnnotations(read_only_hint=s.read_only),
                )
                for s in tools().values()
            ]
        )

    async def call_tool(_ctx: Any, params: types.CallToolRequestParams) -> types.CallToolResult:
        if params.name not in tools():
            raise MCPError(code=types.INVALID_PARAMS, message=f"unknown tool {params.name!r}")
        try:
            doc = await anyio.to_thread.run_sync(call, params.name, dict(params.arguments or {}))
        except ToolFailure as exc:
            log.info("%s failed: %s", params.name, exc)
            return _error_result(str(exc))
        except Exception as exc:  # a bug, not the caller's input: one line to the client, traceback to stderr
            log.exception("%s raised", params.name)
            return _error_result(f"{params.name}: internal error: {type(exc).__name__}: {one_line(exc)}")
        text = strictjson.dumps(doc, default=str)
        return types.CallToolResult(
            content=[types.TextContent(type="text", text=text)], structured_content=json.loads(text)
        )

    def _error_result(message: str) -> types.CallToolResult:
        # one line of bounded length, whatever a caller's argument held
        text = one_line(Exception(message), MAX_ERROR_CHARS)
        return types.CallToolResult(content=[types.TextContent(type="text", text=text)], is_error=True)

    from importlib.metadata import PackageNotFoundError, version

    try:
        ver = version("dftune")
    except PackageNotFoundError:  # pragma: no cover - running from a bare checkout
        ver = "0"
    return Server(
        SERVER_NAME,
        version=ver,
        on_list_tools=list_tools,
        on_call_tool=call_tool,
        instructions="dftune: analyze and diagnose dftracer traces, search cited optimizations, "
        "record guarded results in the knowledge base, and drive tuning runs (run_start "
        "with a budget, run_show, run_answer, run_report).",
    )


def serve(allow: list[Path] | None = None) -> None:
    """Serve over stdio until the client closes stdin; ``allow``: the folders whose specs
    ``run_start`` may run (default: the current folder)."""
    from dftune.mcp_server import run_tools

    run_tools.allow_specs_from(allow or [Path.cwd()])
    require("mcp", "mcp", "dftune mcp (the MCP server)")
    import anyio
    from mcp.server.stdio import stdio_server

    logging.basicConfig(
        level=logging.WARNING, stream=sys.stderr, format="dftune-mcp: %(levelname)s %(message)s"
    )
    server = build_server()

    async def main() -> None:
        async with stdio_server() as (read, write):
            answered = AnsweringReader(read, write)
            await server.run(answered, write, server.create_initialization_options())

    anyio.run(main)


class AnsweringReader:
    """The transport's read stream, answering what it could not read.

    The SDK's stdio transport hands a line it cannot parse or validate (not JSON, nested past the
    parser's depth, a lone surrogate) to the server as an exception, which drops it: the client
    then waits forever for an answer. JSON-RPC 2.0 says such a request gets an error: a parse error
    (-32700) or an invalid request (-32600), with the request's id when one can be read, else null.
    """

    def __init__(self, inner: Any, write: Any) -> None:
        self._inner = inner
        self._write = write

    @property
    def last_context(self) -> Any:  # the dispatcher reads the sender's context here
        return getattr(self._inner, "last_context", None)

    async def receive(self) -> Any:
        while True:
            item = await self._inner.receive()
            if not isinstance(item, Exception):
                return item
            await self._answer(item)

    async def _answer(self, exc: Exception) -> None:
        import mcp_types as types
        from mcp.shared.message import SessionMessage

        request_id, code, why = _unread_line(exc)
        message = "parse error" if code == types.PARSE_ERROR else "invalid request"
        log.info("%s: %s", message, why)
        error = types.JSONRPCError(
            jsonrpc="2.0", id=request_id, error=types.ErrorData(code=code, message=f"{message}: {why}")
        )
        await self._write.send(SessionMessage(error))

    def close(self) -> None:
        self._inner.close()

    async def aclose(self) -> None:
        await self._inner.aclose()

    def __aiter__(self) -> AnsweringReader:
        return self

    async def __anext__(self) -> Any:
        import anyio

        try:
            return await self.receive()
        except anyio.EndOfStream:
            raise StopAsyncIteration from None

    async def __aenter__(self) -> AnsweringReader:
        return self

    async def __aexit__(self, *exc: object) -> None:
        await self.aclose()


def _unread_line(exc: Exception) -> tuple[int | str | None, int, str]:
    """(the request's id when it can be read, the JSON-RPC error code, why) of a line the transport
    could not read: -32700 when it is no JSON at all, -32600 when it is JSON but no valid message
    (its id kept, so the client's waiting call ends)."""
    import mcp_types as types

    errors = exc.errors() if hasattr(exc, "errors") else []
    why = one_line(Exception(errors[0].get("msg", "")), 300) if errors else one_line(exc, 300)
    line = next((e.get("input") for e in errors if isinstance(e.get("input"), str)), "")
    try:
        doc = json.loads(line) if line else None
    except (ValueError, RecursionError):
        return None, types.PARSE_ERROR, why
    if not isinstance(doc, dict):
        return None, types.PARSE_ERROR if doc is None else types.INVALID_REQUEST, why
    rid = doc.get("id")
    ok = (isinstance(rid, int) and not isinstance(rid, bool)) or (isinstance(rid, str) and rid.isprintable())
    return rid if ok else None, types.INVALID_REQUEST, why
