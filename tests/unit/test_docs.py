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


# --------------------------------------------------------------------------- the architecture page

#: folders whose children are data files (rules, prompts), described by kind rather than one by one
DATA_FOLDERS = {"resources", "prompts"}
PACKAGES = ("agents", "graphs", "tools", "core", "vectorstore", "cli", "mcp_server")


def _architecture() -> str:
    return re.sub(r"```.*?```", "", (DOCS / "architecture.md").read_text(), flags=re.S)


def _paragraphs() -> dict[str, str]:
    """The page's "one folder a paragraph" bullets: each folder its header names -> the paragraph."""
    out: dict[str, str] = {}
    for m in re.finditer(r"^- \*\*(.+?)\*\*:(.*?)(?=^- \*\*|^$)", _architecture(), re.M | re.S):
        for folder in re.findall(r"`(\w+)/`", m.group(1)):
            out[folder] = m.group(2)
    return out


def _code_folders() -> set[str]:
    """Top-level folders that hold code or the data it loads (a package, or Python files)."""
    return {
        d.name
        for d in REPO.iterdir()
        if d.is_dir()
        and not d.name.startswith(".")
        and ((d / "__init__.py").is_file() or any(d.glob("*.py")))
    }


def _children(folder: Path) -> set[str]:
    """A package's modules (``x.py``) and subpackages (``x/``)."""
    modules = {p.name for p in folder.glob("*.py") if not p.name.startswith("__")}
    return modules | {f"{p.name}/" for p in folder.iterdir() if (p / "__init__.py").is_file()}


def test_architecture_has_a_paragraph_per_folder_naming_every_module_and_package() -> None:
    paragraphs = _paragraphs()
    assert set(PACKAGES) <= _code_folders()
    missing_folders = sorted(_code_folders() - set(paragraphs))
    assert not missing_folders, f"docs/architecture.md has no paragraph for {missing_folders}"
    missing = [
        f"{folder}/{child}"
        for folder in sorted(_code_folders() - DATA_FOLDERS)
        if (REPO / folder / "__init__.py").is_file()
        for child in sorted(_children(REPO / folder))
        if f"`{child}`" not in paragraphs[folder]
    ]
    assert not missing, f"docs/architecture.md does not name {missing} in their folder's paragraph"
    roots = sorted(p.name for p in REPO.glob("*.py") if p.name not in ("__init__.py", "setup.py"))
    assert all(f"`{r}`" in _architecture() for r in roots), roots


def test_every_path_and_module_the_architecture_names_exists() -> None:
    import importlib

    text = _architecture()
    where = _paragraphs()
    wrong = []
    for token in sorted(set(re.findall(r"`([^`\s]+)`", text))):
        if token.startswith(("$", "-", "http")):
            continue
        dotted = re.fullmatch(rf"(?:dftune\.)?((?:{'|'.join(PACKAGES)})(?:\.\w+)*)", token)
        if dotted and "." in token:
            parts = dotted.group(1).split(".")
            for cut in range(len(parts), 0, -1):  # the longest importable prefix, then attributes
                try:
                    obj: object = importlib.import_module("dftune." + ".".join(parts[:cut]))
                except ImportError:
                    continue
                if all((obj := getattr(obj, a, None)) is not None for a in parts[cut:]):
                    break
                wrong.append(token)
                break
            else:
                wrong.append(token)
        elif "/" in token or re.search(r"\.(py|toml|md|json)$", token):
            pattern = re.sub(r"<[^>]+>", "*", token).rstrip("/")
            under = [REPO / f for f, para in where.items() if f"`{token}`" in para]
            if not any(REPO.glob(pattern)) and not any(any(d.rglob(pattern)) for d in under):
                wrong.append(token)
    assert not wrong, f"docs/architecture.md names paths or modules that do not exist: {wrong}"
