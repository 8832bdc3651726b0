"""The layering check: imports point down only, and nothing imports in a circle.

    front ends (cli/, mcp_server/, demo.py) -> graphs -> agents -> tools -> vectorstore
    -> core -> resources, prompts

Read from the source (every ``import``/``from ... import`` of ``dftune``, including the ones
inside functions: a lazy import is still a dependency), never by importing the code. Fails
on an arrow that points up or sideways into a higher layer, on a cycle between the packages
of a layer (``tools.kb`` <-> ``tools.literature``), and on a cycle between modules.

Run by ``make lint`` (``python tests/layers.py``) and by tests/unit/test_architecture.py.
"""

from __future__ import annotations

import ast
import sys
from collections import defaultdict
from pathlib import Path

ROOT = Path(__file__).resolve().parents[1]
#: Top-level folders, highest layer first. Root modules (cli, mcp_server, demo) are front ends.
RANK = {
    "": 60,
    "graphs": 50,
    "agents": 40,
    "tools": 30,
    "vectorstore": 20,
    "core": 10,
    "resources": 0,
    "prompts": 0,
}
SKIP = {".venv", "tests", "benchmarks", "build", ".git"}


def module_name(path: Path, root: Path = ROOT) -> str:
    rel = path.relative_to(root).with_suffix("")
    parts = list(rel.parts)
    if parts[-1] == "__init__":
        parts = parts[:-1]
    return ".".join(["dftune", *parts])


def source_files(root: Path = ROOT) -> list[Path]:
    return sorted(p for p in root.rglob("*.py") if not SKIP & set(p.relative_to(root).parts))


def imports_of(path: Path, modules: set[str], root: Path = ROOT) -> set[str]:
    """The dftune modules ``path`` imports (``from pkg import submodule`` counts as the submodule)."""
    me = module_name(path, root)
    package = me if path.name == "__init__.py" else me.rpartition(".")[0]
    out: set[str] = set()
    for node in ast.walk(ast.parse(path.read_text(encoding="utf-8"), str(path))):
        if isinstance(node, ast.Import):
            out |= {a.name for a in node.names if a.name.startswith("dftune")}
        elif isinstance(node, ast.ImportFrom):
            base = node.module or ""
            if node.level:
                anchor = package.split(".")[: len(package.split(".")) - (node.level - 1)]
                base = ".".join([*anchor, *([base] if base else [])])
            if not base.startswith("dftune"):
                continue
            for alias in node.names:
                sub = f"{base}.{alias.name}"
                out.add(sub if sub in modules else base)
    out.discard(me)
    return out


def layer(module: str) -> str:
    parts = module.split(".")
    return parts[1] if len(parts) > 1 and parts[1] in RANK else ""


def unit(module: str) -> str:
    """What a cycle is counted between: a tools subpackage (``tools.kb``), else the top folder."""
    parts = module.split(".")
    if len(parts) > 2 and parts[1] == "tools":
        return ".".join(parts[:3])
    return ".".join(parts[:2])


def find_cycle(graph: dict[str, set[str]]) -> list[str] | None:
    """One cycle of ``graph`` (as a path that starts and ends at the same node), or None."""
    state: dict[str, int] = {}
    stack: list[str] = []

    def visit(n: str) -> list[str] | None:
        state[n] = 1
        stack.append(n)
        for m in sorted(graph.get(n, ())):
            if state.get(m) == 1:
                return [*stack[stack.index(m) :], m]
            if m not in state and (found := visit(m)) is not None:
                return found
        stack.pop()
        state[n] = 2
        return None

    for n in sorted(graph):
        if n not in state and (found := visit(n)) is not None:
            return found
    return None


def problems(root: Path = ROOT) -> list[str]:
    """Every rule the tree at ``root`` (laid out like the project) breaks, one line each."""
    files = source_files(root)
    # compiled extensions (tools/trace/_fastscan.c) are modules too: leaves that import nothing
    extensions = {
        module_name(c.with_suffix(".py"), root)
        for c in root.rglob("*.c")
        if not SKIP & set(c.relative_to(root).parts)
    }
    modules = {module_name(p, root) for p in files} | extensions
    edges = {module_name(p, root): imports_of(p, modules, root) for p in files}
    out: list[str] = []
    for src, targets in sorted(edges.items()):
        if src == "dftune" and targets:
            out.append(f"dftune/__init__.py imports {sorted(targets)}: the package root must import nothing")
        for dst in sorted(targets):
            a, b = layer(src), layer(dst)
            if a != b and RANK[b] >= RANK[a]:
                out.append(f"{src} -> {dst}: {a or 'front end'} may not import {b or 'a front end'}")
    units: dict[str, set[str]] = defaultdict(set)
    for src, targets in edges.items():
        for dst in targets:
            if unit(src) != unit(dst):
                units[unit(src)].add(unit(dst))
    if cycle := find_cycle(units):
        out.append("package cycle: " + " -> ".join(cycle))
    if cycle := find_cycle(edges):
        out.append("module cycle: " + " -> ".join(cycle))
    return out


if __name__ == "__main__":
    found = problems()
    for line in found:
        print(f"layers: {line}", file=sys.stderr)
    sys.exit(1 if found else 0)
