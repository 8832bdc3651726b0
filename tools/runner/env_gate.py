"""Env-gated source patches: a literal argument of an I/O call made an environment knob.

``DataLoader(ds, num_workers=2)`` or ``h5py.File(path, "r")`` decide how the I/O is served, but
no option passes them. The patch rewrites the argument to read an environment variable with the
original value as its default, ``num_workers=(int(os.environ["DFTUNE_NUM_WORKERS"]) if
"DFTUNE_NUM_WORKERS" in os.environ else 2)``: the program is unchanged unless the variable is
set, and the variable is a knob. An argument the call leaves out is added the same way around
the value the library documents as its default (resources/drafting/call_sites.toml). The
patch is applied to a copy of the source, never in place.
"""

from __future__ import annotations

import ast
import difflib
import re
from dataclasses import dataclass
from pathlib import Path

from dftune.tools.runner.draft import CallSite, DraftError, _argument, _call_name, call_sites, parse_python

PREFIX = "DFTUNE_"
_ENV = '__import__("os").environ'


@dataclass(frozen=True)
class Gate:
    """One argument the patch reads from the environment."""

    site: CallSite
    line: int
    variable: str
    #: the value the program uses today (the literal, or the library's documented default)
    default: int | float | bool
    #: where the argument's text starts and ends in the source (equal: the argument is added)
    start: int
    end: int
    #: the argument as written ("" when the call leaves it out)
    original: str

    @property
    def origin(self) -> str:
        how = "written" if self.original else "left out, the library's default"
        return f"line {self.line} ({self.site.function} {self.site.keyword}=, {how})"


def gates(source: str, filename: str) -> list[Gate]:
    """The literal or left-out arguments of the known I/O calls in ``source``."""
    try:
        tree = parse_python(source, filename)
    except DraftError:  # not valid Python, too deep, too large: no call is read
        return []
    offsets = _line_offsets(source)
    by_function: dict[str, list[CallSite]] = {}
    for site in call_sites():
        by_function.setdefault(site.function, []).append(site)
    out: list[Gate] = []
    taken: set[str] = set()
    shared: dict[tuple[str, object], str] = {}
    calls = sorted(
        (n for n in ast.walk(tree) if isinstance(n, ast.Call) and _call_name(n) in by_function),
        key=lambda n: (n.lineno, n.col_offset),
    )
    for node in calls:
        if any(k.arg is None for k in node.keywords) or any(isinstance(a, ast.Starred) for a in node.args):
            continue  # **kwargs or *args: which arguments it passes is not in the text
        for site in by_function[_call_name(node)]:
            expr = _argument(node, site)
            value: object
            if expr is None:
                if site.default is None or node.end_lineno is None or node.end_col_offset is None:
                    continue
                value, original = site.default, ""
                start = end = offsets[node.end_lineno - 1] + node.end_col_offset - 1  # before ")"
            elif isinstance(expr, ast.Constant) and expr.end_lineno and expr.end_col_offset is not None:
                value, original = expr.value, ast.get_source_segment(source, expr) or ""
                start = offsets[expr.lineno - 1] + expr.col_offset
                end = offsets[expr.end_lineno - 1] + expr.end_col_offset
            else:
                continue
            if not isinstance(value, int | float):  # bools are ints; text and None are not gated
                continue
            key = (site.keyword, value)
            if key not in shared:  # one variable for every call with the same argument and value
                shared[key] = _unique(PREFIX + re.sub(r"\W", "_", site.keyword).upper(), taken)
            out.append(Gate(site, node.lineno, shared[key], value, start, end, original))
    return out


def gated(source: str, found: list[Gate]) -> str:
    """``source`` with every gate's argument read from its variable (the original by default)."""
    out = source.encode("utf-8")  # ast's columns count UTF-8 bytes
    edits: dict[tuple[int, int], list[Gate]] = {}
    for g in found:
        edits.setdefault((g.start, g.end), []).append(g)
    for (start, end), group in sorted(edits.items(), reverse=True):
        if group[0].original:  # an argument as written: replaced in place
            out = out[:start] + _gate(group[0]).encode() + out[end:]
            continue
        added = ", ".join(f"{g.site.keyword}={_gate(g)}" for g in group)  # left out: added
        sep = "" if out[:start].rstrip().endswith((b"(", b",")) else ", "
        out = out[:start] + f"{sep}{added}".encode() + out[start:]
    return out.decode("utf-8")


def _gate(g: Gate) -> str:
    return f"({_read(g)} if {g.variable!r} in {_ENV} else {g.original or repr(g.default)})"


def unified_diff(before: str, after: str, name: str) -> str:
    return "".join(
        difflib.unified_diff(
            before.splitlines(keepends=True), after.splitlines(keepends=True), f"a/{name}", f"b/{name}"
        )
    )


#: the most Python files (and bytes) of a patched tree read to show where a variable is used
SCAN_FILES, SCAN_BYTES = 2000, 32 << 20


def read_only_by_calls(tree: Path, variables: list[str]) -> str | None:
    """Why setting ``variables`` can change nothing but how the program's I/O calls are served,
    or None when that cannot be shown.

    Shown from the patched tree itself: every mention of each variable in its Python files is
    inside an argument of a known I/O call (call_sites.toml), as the patch wrote it; the
    program's own code never reads it, so its passes over the data, the data it asks for and
    its results cannot depend on it. A mention anywhere else (the program reads it itself), a
    file that does not parse, or a tree too large to read says nothing."""
    wanted = set(variables)
    sites = {s.function: s for s in call_sites()}
    where: dict[str, list[str]] = {v: [] for v in variables}
    files = sorted(tree.rglob("*.py"))
    if len(files) > SCAN_FILES or not wanted:
        return None
    read = 0
    for f in files:
        try:
            text = f.read_text(encoding="utf-8")
        except (OSError, UnicodeDecodeError):
            continue
        read += len(text)
        if read > SCAN_BYTES:
            return None
        if not any(v in text for v in wanted):
            continue
        try:
            module = parse_python(text, str(f))
        except DraftError:
            return None
        allowed: set[int] = set()  # the ids of the nodes inside a known call's keyword arguments
        for node in ast.walk(module):
            if isinstance(node, ast.Call) and _call_name(node) in sites:
                for kw in node.keywords:
                    allowed |= {id(n) for n in ast.walk(kw.value)}
        for node in ast.walk(module):
            if isinstance(node, ast.Constant) and node.value in wanted:
                if id(node) not in allowed:
                    return None
                where[str(node.value)].append(f"{f.relative_to(tree)}:{node.lineno}")
        if any(re.search(rf"\b{v}\b", text.replace(repr(v), "")) for v in wanted):
            return None  # named outside a string constant of its own (a comment, a longer text)
    if not all(where.values()):
        return None
    said = "; ".join(f"{v} at {', '.join(sorted(set(w)))}" for v, w in where.items())
    return (
        f"the change reaches the program only through the I/O calls' arguments dftune's env-gated "
        f"patch reads it into ({said}): the program's own code never reads it, so the passes it "
        "makes and the data it asks for cannot depend on it"
    )


def _read(g: Gate) -> str:
    raw = f"{_ENV}[{g.variable!r}]"
    if isinstance(g.default, bool):
        return f"({raw} not in ('0', '', 'false', 'False'))"
    return f"{type(g.default).__name__}({raw})"


def _unique(name: str, taken: set[str]) -> str:
    n, out = 2, name
    while out in taken:
        out, n = f"{name}_{n}", n + 1
    taken.add(out)
    return out


def _line_offsets(source: str) -> list[int]:
    """The UTF-8 byte offset at which each line starts (ast's columns count bytes)."""
    out, pos = [], 0
    for line in source.encode("utf-8").splitlines(keepends=True):
        out.append(pos)
        pos += len(line)
    return out
