"""``dftune mcp``: dftune's deterministic tools served to MCP clients (Claude Code, Codex) over stdio.

A front end beside the CLI (its modules: docs/architecture.md); each ``run_*`` drive runs in a
detached ``dftune`` process.

The dftracer I/O pipeline's skills call its tools by these names (``analyze``, ``diagnose``, ``comparator``,
``opt_kb_record``, ...); serving them here lets any MCP client drive dftune without a wrapper.

Each tool is a pydantic input model (the JSON schema clients see, every field described) and
a thin function that calls the existing dftune function and returns a JSON object. The
low-level SDK server is used rather than the decorator API so that every failure, argument
validation included, reaches the client as ONE line (``is_error`` result, the MCP way for
tool errors, so a model can read and correct it); an unknown tool name is a protocol error.

stdout is the transport: nothing here prints, logs go to stderr, and the SDK's stdio transport
moves file descriptor 1 onto stderr while it serves, so a stray write from a library or a
worker process cannot corrupt the protocol.
"""

from dftune.mcp_server.registry import ToolFailure, ToolSpec, iteration_number
from dftune.mcp_server.server import build_server, serve
from dftune.mcp_server.toolset import call, tools
