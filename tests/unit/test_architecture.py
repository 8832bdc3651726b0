"""The layering of the package (tests/layers.py) holds, and the check itself catches breaks."""

from __future__ import annotations

import sys
from pathlib import Path

import pytest

sys.path.insert(0, str(Path(__file__).resolve().parents[1]))
import layers


def test_the_project_has_no_backward_arrow_and_no_cycle() -> None:
    assert layers.problems() == []


def _tree(root: Path, files: dict[str, str]) -> Path:
    for rel, text in files.items():
        path = root / rel
        path.parent.mkdir(parents=True, exist_ok=True)
        path.write_text(text)
    return root


@pytest.mark.parametrize(
    ("files", "expected"),
    [
        (
            {
                "tools/__init__.py": "",
                "tools/x.py": "from dftune.agents.state import S\n",
                "agents/__init__.py": "",
                "agents/state.py": "",
            },
            "tools may not import agents",
        ),
        (
            {
                "vectorstore/__init__.py": "",
                "vectorstore/s.py": "def f():\n    from dftune.tools.c import C\n",
                "tools/__init__.py": "",
                "tools/c.py": "",
            },
            "vectorstore may not import tools",
        ),
        (
            {
                "tools/__init__.py": "",
                "tools/a/__init__.py": "",
                "tools/a/m.py": "from dftune.tools.b import n\n",
                "tools/b/__init__.py": "",
                "tools/b/n.py": "from dftune.tools.a.m import x\n",
            },
            "cycle",
        ),
        (
            {
                "tools/__init__.py": "",
                "tools/t/__init__.py": "from dftune.tools.t.e import run\n",
                "tools/t/e.py": "from dftune.tools.t.r import read\n",
                "tools/t/r.py": "from dftune.tools.t import run\n",
            },
            "module cycle",
        ),
        ({"__init__.py": "import dftune.cli\n", "cli.py": ""}, "package root must import nothing"),
    ],
)
def test_the_check_catches_each_kind_of_break(tmp_path: Path, files: dict[str, str], expected: str) -> None:
    found = layers.problems(_tree(tmp_path, files))
    assert any(expected in line for line in found), found


def test_a_clean_tree_passes(tmp_path: Path) -> None:
    files = {
        "cli.py": "from dftune.graphs.p import g\n",
        "graphs/__init__.py": "",
        "graphs/p.py": "",
        "core/__init__.py": "",
        "core/e.py": "",
    }
    assert layers.problems(_tree(tmp_path, files)) == []
