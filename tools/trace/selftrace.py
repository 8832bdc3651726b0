"""Programs that trace themselves: tell them apart, and collect the traces they write.

dftracer has two ways in (its documentation, and
docs/self-tracing-and-frameworks.md): ``LD_PRELOAD`` of its preload library,
or its Python API (``dftracer.python.dftracer.initialize_log``) called by the program itself,
as DLIO and other dftracer-annotated applications do.  The two must not meet in one process:
the preload trace then stays empty (measured: 0 bytes beside the program's own trace) and
DLIO's replicates die with SIGSEGV at exit.  A self-tracing program is therefore run in
FUNCTION mode, without the preload library, and its own trace files are collected from where
it writes them.
"""

from __future__ import annotations

import functools
import gzip
import re
import shutil
import time
from collections.abc import Iterable, Mapping
from dataclasses import dataclass
from pathlib import Path

from dftune.core.facts import program_facts
from dftune.core.facts.paths import trace_suffixes


@functools.cache
def _self_tracing_source() -> re.Pattern[str]:
    """Source text that means the program initializes dftracer itself: an import of one of the
    modules, a call, or setting one of the variables (resources/facts/programs.toml)."""
    f = program_facts().self_tracing
    modules = "|".join(map(re.escape, f.modules))
    calls = "|".join(map(re.escape, f.calls))
    env = "|".join(map(re.escape, f.env))
    return re.compile(
        rf"^[ \t]*(?:from|import)[ \t]+(?:{modules})\b|\b(?:{calls})\s*\("
        rf"|environ(?:\.setdefault\(|\[)\s*[\"'](?:{env})[\"']",
        re.MULTILINE,
    )


#: A program's own source read for the check, at most this much.
SOURCE_LIMIT = 2 << 20
#: Trace file names dftracer writes (``.pfw`` and its gzip).
#: Searching a folder for the program's new trace files stops after this many entries.
SCAN_LIMIT = 20_000


@dataclass(frozen=True)
class SelfTracing:
    """Why a program counts as self-tracing (empty ``reason``: it does not)."""

    reason: str = ""

    def __bool__(self) -> bool:
        return bool(self.reason)


def _script_of(argv: list[str], cwd: Path) -> Path | None:
    """The Python file the command runs: the first ``*.py`` argument, resolved against ``cwd``."""
    for item in argv:
        if item.endswith(".py"):
            p = Path(item)
            p = p if p.is_absolute() else cwd / p
            return p if p.is_file() else None
    return None


def _module_of(argv: list[str]) -> str | None:
    for i, item in enumerate(argv[:-1]):
        if item == "-m":
            return argv[i + 1]
    return None


def detect(argv: list[str], cwd: Path, env: Mapping[str, str] | None = None) -> SelfTracing:
    """Does this command initialize dftracer on its own?

    Looks at what can be seen before running it: the program's name (DLIO's scripts), a
    ``-m`` module of a dftracer-annotated package, imports of dftracer / pydftracer /
    dlio_benchmark, a call of ``initialize_log`` or a program setting its own ``DFTRACER_*``
    variables (``os.environ["DFTRACER_ENABLE"] = ...``) in the script it runs, and a spec that sets
    ``DFTRACER_INIT=FUNCTION`` itself.  A program that escapes this is caught after its first
    replicate by an empty preload trace (:func:`has_events`).
    """
    known = program_facts().self_tracing
    for item in argv:
        name = Path(item).name
        if name in known.executables:
            return SelfTracing(f"{name} is a dftracer-annotated application (it initializes dftracer itself)")
    module = _module_of(argv)
    if module and module.split(".")[0] in known.modules:
        return SelfTracing(f"python -m {module} initializes dftracer itself")
    if env is not None and env.get("DFTRACER_INIT", "").upper() == "FUNCTION":
        return SelfTracing("the spec sets DFTRACER_INIT=FUNCTION: the program calls dftracer's Python API")
    script = _script_of(argv, cwd)
    if script is not None:
        try:
            with open(script, encoding="utf-8", errors="replace") as fh:
                text = fh.read(SOURCE_LIMIT)
        except OSError:
            return SelfTracing()
        match = _self_tracing_source().search(text)
        if match:
            line = text.count("\n", 0, match.start()) + 1
            return SelfTracing(f"{script.name}:{line} initializes dftracer itself ({match.group(0).strip()})")
    return SelfTracing()


def is_trace_file(path: Path) -> bool:
    return path.name.endswith(trace_suffixes())


def has_events(folder: Path) -> bool:
    """True when a trace file under ``folder`` holds at least one complete event.

    A file of 0 bytes, a gzip that ends early, or only metadata lines (``ph`` 4 / ``M``) is
    not a trace of the program; the preload library of a process that also initialized
    dftracer from Python leaves exactly that.
    """
    complete = re.compile(r'"ph"\s*:\s*(?:1\b|"X")')
    for path in sorted(folder.rglob("*")):
        if not is_trace_file(path) or path.stat().st_size == 0:
            continue
        try:
            opener = gzip.open if path.name.endswith(".gz") else open
            with opener(path, "rt", encoding="utf-8", errors="replace") as fh:
                for line in fh:
                    if complete.search(line):
                        return True
        except (OSError, EOFError):
            continue
    return False


def _new_trace_files(roots: Iterable[Path], since: float, exclude: list[Path]) -> list[Path]:
    found: dict[Path, None] = {}
    seen = 0
    for root in roots:
        if root.is_file():
            candidates: Iterable[Path] = [root]
        elif root.is_dir():
            candidates = root.rglob("*")
        else:
            continue
        for path in candidates:
            seen += 1
            if seen > SCAN_LIMIT:
                return list(found)
            try:
                if not is_trace_file(path) or not path.is_file():
                    continue
                real = path.resolve()
                if any(x == real or x in real.parents for x in exclude):
                    continue
                if path.stat().st_mtime >= since:
                    found[real] = None
            except OSError:
                continue
    return list(found)


def collect(sources: Iterable[Path], dest: Path, since: float, exclude: Iterable[Path] = ()) -> list[Path]:
    """Move the trace files written since ``since`` under ``sources`` into ``dest``.

    ``sources`` are folders (searched recursively) or glob results; ``dest`` and ``exclude``
    (other replicates' trace folders) are never searched.  Names that collide get a numeric
    prefix; nothing is overwritten.
    """
    dest.mkdir(parents=True, exist_ok=True)
    moved: list[Path] = []
    skip = [dest.resolve(), *(p.resolve() for p in exclude)]
    for path in _new_trace_files(sources, since, skip):
        target = dest / path.name
        n = 1
        while target.exists():
            target = dest / f"{n}-{path.name}"
            n += 1
        shutil.move(str(path), target)
        moved.append(target)
    return moved


def expand(patterns: Iterable[str], base: Path) -> list[Path]:
    """A spec's ``[tracing] output`` entries as paths: folders, files or globs, relative to ``base``."""
    out: list[Path] = []
    for pattern in patterns:
        p = Path(pattern).expanduser()
        p = p if p.is_absolute() else base / p
        if any(ch in pattern for ch in "*?["):
            anchor = Path(p.anchor)
            out.extend(anchor.glob(str(p.relative_to(anchor))))
        else:
            out.append(p)
    return out


def now() -> float:
    """A start time for :func:`collect`; one second back (file systems keep coarse mtimes)."""
    return time.time() - 1.0
