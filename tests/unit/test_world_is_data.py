"""Knowledge is data, code is algorithms: no program, library or path name that decides what
something is lives in the Python of agents/, graphs/, tools/, cli/ or mcp_server/, and no guard
threshold lives outside resources/guards.toml.

The names are the facts layer's own (resources/facts/*.toml: launchers' executables and per-job
files, stacks' signatures, path rules, container suffixes, self-tracing programs): a string
literal in the code that is one of them (or holds one of their path fragments) is a second list
of the world. Launching ``mpirun`` or copying to ``/dev/shm`` is an action, not a classification:
such uses are listed below, each with why.
"""

from __future__ import annotations

import ast
import re
from pathlib import Path

from dftune.core import facts

ROOT = Path(__file__).resolve().parents[2]
SCANNED = ("agents", "graphs", "tools", "cli", "mcp_server")
#: (file, literal) -> why a name of the world may appear there: it is an action, not a decision
ACTIONS: dict[tuple[str, str], str] = {
    ("agents/doctor.py", "dftracer"): "a package doctor reports the version of (its report's keys)",
    ("agents/doctor.py", "mpi4py"): "a package doctor reports the version of (its report's keys)",
    ("agents/doctor.py", "h5py"): "a package doctor reports the version of (its report's keys)",
    ("cli/environment.py", "dftracer"): "the key of doctor's report the terminal prints apart",
    ("tools/trace/tracer.py", "DFTRACER_ENABLE"): "the variables dftune sets to trace a program",
    ("tools/trace/tracer.py", "DFTRACER_LOG_FILE"): "the variables dftune sets to trace a program",
    ("tools/catalog/load.py", ".toml"): "dftune's own resource files (the catalog) are TOML",
    ("tools/diagnose/rules.py", ".toml"): "dftune's own resource files (the rules) are TOML",
    ("tools/runner/changes/unidiff.py", "/dev/null"): "a unified diff names a created or deleted file so",
    ("tools/runner/schedulers/jobs.py", "sbatch"): "the Slurm CLI tools dftune runs to submit jobs",
    ("tools/runner/schedulers/slurm.py", "sbatch"): "the Slurm CLI tools dftune runs to submit jobs",
    (
        "tools/runner/spec.py",
        "__pycache__ .git *.pfw.gz",
    ): "what dftune leaves out when it copies a source tree",
    ("tools/bundle/write.py", "dftracer"): "the tracer's version a bundle's provenance records",
    ("tools/bundle/scripts.py", "#!/bin/sh"): "the interpreter line of the shell scripts a bundle holds",
}


def _fragments(pattern: str) -> list[str]:
    """The literal pieces of a shell pattern or prefix long enough to name something (a piece
    between slashes also without them: ``*/site-packages/*`` names ``site-packages``)."""
    pieces = re.split(r"\*|\?|\[[^]]*\]|\{[a-z_]+\}", pattern)
    out = [p for p in pieces if len(p.strip("/.")) >= 3]
    return out + [p.strip("/") for p in out if p.strip("/") != p and _distinctive(p.strip("/"))]


def _distinctive(name: str) -> bool:
    """A name that cannot be an ordinary word: a path, a suffix, or with ``_`` or ``-`` in it."""
    return any(c in name for c in "/._-")


def vocabulary() -> set[str]:
    """dftune's own words, which name a way to run or a stack, not what a path or program is: the
    spec's launcher and metric kinds, and the stack ids."""
    from typing import get_args

    from dftune.tools.runner.spec import Launcher, Metric

    kinds = {
        *get_args(Launcher.model_fields["kind"].annotation),
        *get_args(Metric.model_fields["kind"].annotation),
    }
    return kinds | {s.id for s in facts.stack_facts().stack}


def world_names() -> set[str]:
    names: set[str] = set()
    for launcher in facts.launcher_facts().launcher:
        names |= {x for e in launcher.executables for x in _fragments(e)}
        names |= {x for g in launcher.session_files for x in _fragments(g)}
    for stack in facts.stack_facts().stack:
        for group in (stack.text, stack.executables, stack.beside, stack.on_path):
            names |= {x for t in group for x in _fragments(t)}
    for rule in facts.path_facts().rule:
        for group in (rule.paths, rule.prefixes, rule.globs, rule.names):
            names |= {x for t in group for x in _fragments(t)}
    for fmt in facts.format_facts().format:
        names |= set(fmt.suffixes)
    st = facts.program_facts().self_tracing
    names |= {*st.executables, *st.modules, *st.calls, *st.env}
    return {n for n in names if n} - vocabulary()


#: calls whose string arguments test what something is
_TESTS = {"startswith", "endswith", "fnmatch", "fnmatchcase", "match", "search", "fullmatch"}


def _deciding(node: ast.AST, parent: ast.AST) -> bool:
    """A string constant used to decide what something is: compared, tested as a prefix, suffix or
    pattern, or one of a collection of names (a tuple, list, set or dict of strings)."""
    if isinstance(parent, ast.Compare):
        return True
    if isinstance(parent, ast.Call):
        f = parent.func
        name = f.attr if isinstance(f, ast.Attribute) else f.id if isinstance(f, ast.Name) else ""
        return name in _TESTS
    if isinstance(parent, ast.Tuple | ast.List | ast.Set):
        elts = parent.elts
        return len(elts) >= 2 and all(isinstance(e, ast.Constant) and isinstance(e.value, str) for e in elts)
    if isinstance(parent, ast.Dict):
        return all(isinstance(k, ast.Constant) and isinstance(k.value, str) for k in parent.keys if k)
    return False


def _literals(tree: ast.AST) -> list[tuple[int, str]]:
    """The string constants that decide something (:func:`_deciding`), without prose."""
    out = []
    for parent in ast.walk(tree):
        for node in ast.iter_child_nodes(parent):
            if (
                isinstance(node, ast.Constant)
                and isinstance(node.value, str)
                and not any(c.isspace() for c in node.value)  # prose (messages, reasons) names things
                and _deciding(node, parent)
            ):
                out.append((node.lineno, node.value))
    return out


def _hits(literal: str, names: set[str]) -> list[str]:
    low = literal.lower()
    return sorted(n for n in names if low == n.lower() or (_distinctive(n) and n.lower() in low))


def test_no_name_of_the_world_decides_anything_in_code() -> None:
    names = world_names()
    assert {"mpiexec", "hydra_hwloc_xmlfile_", "/proc/", "site-packages", ".h5", "dlio_benchmark"} <= names
    found = []
    for folder in SCANNED:
        for path in sorted((ROOT / folder).rglob("*.py")):
            rel = str(path.relative_to(ROOT))
            for line, literal in _literals(ast.parse(path.read_text(encoding="utf-8"))):
                for name in _hits(literal, names):
                    if not any(rel == f and name.lower() in a.lower() for (f, a) in ACTIONS):
                        found.append(f"{rel}:{line}: {literal!r} names {name!r}")
    assert not found, "names of the world in code (make them facts, or list the action):\n" + "\n".join(found)


def test_the_scan_finds_a_second_list() -> None:
    code = 'L = ("mpiexec", "srun")\nif p.startswith("/tmp/ompi."): pass\nx = "a message about mpiexec"\n'
    hits = [h for _, lit in _literals(ast.parse(code)) for h in _hits(lit, world_names())]
    assert "mpiexec" in hits and "srun" in hits and any("ompi." in h for h in hits)
    assert len([h for h in hits if h == "mpiexec"]) == 1  # the message is prose


def test_no_guard_threshold_lives_in_code() -> None:
    """Numbers that decide a guard (tolerances, slacks, shares) are resources/guards.toml's: no
    module constant holds a number, and no fraction is written inline (0 and 1 are arithmetic)."""
    found = []
    for path in sorted((ROOT / "tools" / "guards").glob("*.py")):
        tree = ast.parse(path.read_text(encoding="utf-8"))
        for node in tree.body:
            target = node.targets[0] if isinstance(node, ast.Assign) else getattr(node, "target", None)
            value = getattr(node, "value", None)
            numbers = [n for n in ast.walk(value) if isinstance(n, ast.Constant)] if value is not None else []
            if (
                isinstance(target, ast.Name)
                and numbers
                and all(type(n.value) in (int, float) for n in numbers)
            ):
                found.append(f"{path.name}:{node.lineno}: {target.id} = {ast.unparse(value)}")  # type: ignore[arg-type]
        found += [  # (below 1e-6: a numerical guard against a division by zero)
            f"{path.name}:{n.lineno}: {n.value}"
            for n in ast.walk(tree)
            if isinstance(n, ast.Constant)
            and type(n.value) is float
            and n.value not in (0.0, 1.0)
            and abs(n.value) >= 1e-6
        ]
    assert not found, found
