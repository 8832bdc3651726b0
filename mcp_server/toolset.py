"""Every MCP tool dftune serves, by name, and calling one of them by name."""

from __future__ import annotations

import functools
from typing import Any

from dftune.mcp_server import (
    bundle_tools,
    kb_tools,
    literature_tools,
    run_tools,
    session_tools,
    table_tools,
    trace_tools,
)
from dftune.mcp_server.registry import ToolFailure, ToolSpec, run_tool


@functools.cache
def tools() -> dict[str, ToolSpec]:
    """Every tool, by name (assembled on first use from the tool modules, in a stable order)."""
    boxes = (
        trace_tools.box,
        session_tools.box,
        kb_tools.box,
        table_tools.box,
        literature_tools.box,
        run_tools.box,
        bundle_tools.box,
    )
    out: dict[str, ToolSpec] = {}
    for spec in (s for b in boxes for s in b.specs):
        if spec.name in out:
            raise RuntimeError(f"MCP tool {spec.name!r} is defined twice")
        out[spec.name] = spec
    return out


def call(name: str, arguments: dict[str, Any] | None = None) -> dict[str, Any]:
    """Validate the arguments and run one tool in-process (what the server does per request)."""
    spec = tools().get(name)
    if spec is None:
        raise ToolFailure(f"unknown tool {name!r}")
    return run_tool(spec, arguments)
