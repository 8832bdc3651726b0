"""The docs say what the code does: the graph drawn in docs/architecture.md is the compiled
graph's, every relative link in README.md and docs/ points at a file that exists, and the README
stays the front door (a few hundred lines)."""

from __future__ import annotations

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
