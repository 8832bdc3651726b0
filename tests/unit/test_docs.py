"""The docs say what the code does: the graph drawn in docs/architecture.md is the compiled
graph's, every relative link in README.md and docs/ points at a file that exists, and the README
stays the front door (a few hundred lines)."""

from __future__ import annotations

import json
import re
from pathlib import Path

from dftune.graphs.pipeline import graph

REPO = Path(__file__).resolve().parents[2]
DOCS = REPO / "docs"


def _mermaid_block(text: str) -> str:
    m = re.search(r"```mermaid\n(.*?)```", text, re.S)
    assert m, "docs/architecture.md has no ```mermaid block"
    return m.group(1)


def test_architecture_graph_is_the_compiled_graph() -> None:
    drawn = _mermaid_block((DOCS / "architecture.md").read_text())
    actual = graph.get_graph().draw_mermaid()
    assert drawn.strip() == actual.strip(), (
        "docs/architecture.md draws another graph than graphs/pipeline.py builds: "
        "regenerate it with `.venv/bin/python -m dftune.graphs.pipeline`"
    )


def _links(md: Path) -> list[str]:
    text = re.sub(r"```.*?```", "", md.read_text(), flags=re.S)
    return re.findall(r"\]\(([^)#\s]+)(?:#[^)]*)?\)", text)


def test_relative_links_resolve() -> None:
    broken = []
    for md in [REPO / "README.md", *sorted(DOCS.glob("*.md"))]:
        for target in _links(md):
            if re.match(r"[a-z]+://|mailto:", target):
                continue
            if not (md.parent / target).exists():
                broken.append(f"{md.relative_to(REPO)} -> {target}")
    assert not broken, broken


def test_readme_is_the_front_door() -> None:
    lines = (REPO / "README.md").read_text().splitlines()
    assert len(lines) < 300, f"README.md has {len(lines)} lines: move the detail to docs/"
    for must in ("make demo", "make test", "docs/architecture.md"):
        assert any(must in line for line in lines), must


def test_every_docs_page_is_reachable_from_the_readme_or_docs() -> None:
    linked = {Path(t).name for md in [REPO / "README.md", *DOCS.glob("*.md")] for t in _links(md)}
    orphans = [p.name for p in DOCS.glob("*.md") if p.name not in linked]
    assert not orphans, f"docs pages no page links to: {orphans}"


# --------------------------------------------------------------------------- the MCP page


def _mcp_rows() -> dict[str, tuple[str, str]]:
    """docs/mcp.md's tool tables: tool name -> (its parameters cell, its writes cell)."""
    rows: dict[str, tuple[str, str]] = {}
    for line in (DOCS / "mcp.md").read_text().splitlines():
        cells = [c.strip() for c in re.split(r"(?<!\\)\|", line)[1:-1]]
        if len(cells) == 4 and (m := re.fullmatch(r"`(\w+)`", cells[0])):
            assert m.group(1) not in rows, f"docs/mcp.md lists {m.group(1)} twice"
            rows[m.group(1)] = (cells[1], cells[2])
    return rows


def test_the_mcp_page_lists_every_tool_the_server_registers() -> None:
    from dftune.mcp_server import tools

    served, listed = set(tools()), set(_mcp_rows())
    assert listed == served, (
        f"docs/mcp.md misses {sorted(served - listed)} and lists tools the server does not have: "
        f"{sorted(listed - served)}"
    )
    named = {
        m
        for md in [REPO / "README.md", *DOCS.glob("*.md")]
        for m in re.findall(r"mcp__\w+?__(\w+)", md.read_text())
    }
    assert named <= served, f"docs name MCP tools that do not exist: {sorted(named - served)}"


def test_the_mcp_page_gives_each_tools_parameters_and_defaults() -> None:
    """**`name`** is required, `name=default` optional with that default, `name` optional and unset."""
    from dftune.mcp_server import tools

    served = tools()
    for tool, (params, writes) in _mcp_rows().items():
        fields = served[tool].params.model_fields
        written = re.findall(r"(\*\*)?`(\w+)(?:=([^`]*))?`", params)
        names = [name for _, name, _ in written]
        assert sorted(names) == sorted(fields), (
            f"{tool}: the page says {names}, the tool takes {list(fields)}"
        )
        for bold, name, value in written:
            field = fields[name]
            assert bool(bold) == field.is_required(), f"{tool}.{name}: required is {field.is_required()}"
            if field.is_required():
                continue
            default = field.get_default(call_default_factory=True)
            shown = json.loads(value) if value else None
            assert shown == default, (
                f"{tool}.{name}: the page says {value or 'unset'}, the default is {default!r}"
            )
        assert (writes == "yes") == (not served[tool].read_only), (
            f"{tool}: writes is {not served[tool].read_only}"
        )


def test_the_mcp_page_names_the_server_as_it_reports_itself() -> None:
    from dftune.mcp_server.server import SERVER_NAME

    text = (DOCS / "mcp.md").read_text()
    assert f"reports `{SERVER_NAME}` as its name" in text
