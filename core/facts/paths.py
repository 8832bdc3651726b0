"""What is this path, for this run? One answer for the diagnosis, the guards, staging, start-up
reads, drafting and the reports, from the rules of resources/facts/paths.toml (and the launchers'
per-job files of launchers.toml).

A run knows a few paths of its own (:class:`RunPaths`): its data folder and a staged copy of it
(data, whatever their names), the files its own environment names (configuration), and the
interpreter it runs (runtime). The rules are compiled once per run: one regular expression per
rule, so classifying the thousands of files of a trace costs one match per rule, and the same
rules become a SQL ``CASE`` for DuckDB (:func:`class_sql`) that agrees with Python's answer.
"""

from __future__ import annotations

import fnmatch
import functools
import os
import re
import sys
from collections.abc import Mapping
from dataclasses import dataclass, field

from dftune.core.facts import format_facts, launcher_facts, path_facts, stack_facts
from dftune.core.facts.models import PathClassName

DATA: PathClassName = "data"
#: the rule of the run's own data folder (and its staged copy)
DATA_FOLDER = "data-folder"
#: the rule of a path no rule matches
DEFAULT_RULE = "default"


def _interpreter_prefixes() -> tuple[str, ...]:
    seen = {os.path.realpath(p) for p in (sys.prefix, sys.base_prefix, sys.exec_prefix)}
    return tuple(sorted(seen))


@dataclass(frozen=True)
class RunPaths:
    """The paths a run knows of its own (empty: a trace read without its run)."""

    #: the data folder and its staged copy: data whatever the files are called
    data_dirs: tuple[str, ...] = ()
    #: files the arm's own environment names (a ROMIO hints file dftune wrote)
    config_files: tuple[str, ...] = ()
    #: the interpreter's installation (this one's unless the run says otherwise)
    python_prefixes: tuple[str, ...] = field(default_factory=_interpreter_prefixes)

    @classmethod
    def of(cls, *data_dirs: str | None, env: Mapping[str, str] | None = None) -> RunPaths:
        """A run's paths: its data folders, and the configuration files its environment names
        (variables stacks.toml lists as ``config_env``, e.g. ROMIO_HINTS; a relative value is a
        knob of the program, not a file dftune wrote)."""
        names = {v for s in stack_facts().stack for v in s.config_env}
        files = sorted(os.path.normpath(v) for k, v in (env or {}).items() if k in names and os.path.isabs(v))
        dirs = tuple(dict.fromkeys(os.path.normpath(d) for d in data_dirs if d))
        return cls(data_dirs=dirs, config_files=tuple(files))


#: A trace read without its run: no data folder, this interpreter.
NO_RUN = RunPaths()


@dataclass(frozen=True)
class PathClass:
    """A path's class, the rule that decided it, and that rule's reason and source."""

    path: str
    class_: PathClassName
    rule: str
    reason: str
    source: str

    @property
    def is_data(self) -> bool:
        return self.class_ == DATA


@dataclass(frozen=True)
class _Rule:
    id: str
    class_: PathClassName
    reason: str
    source: str
    paths: tuple[str, ...]
    prefixes: tuple[str, ...]
    globs: tuple[str, ...]
    names: tuple[str, ...]
    regex: re.Pattern[str] | None

    def matches(self, path: str) -> bool:
        return (
            path in self.paths
            or path.startswith(self.prefixes)
            or (self.regex is not None and self.regex.match(path) is not None)
        )


def _expand(texts: tuple[str, ...], run: RunPaths) -> tuple[str, ...]:
    values = {
        "{data_dir}": run.data_dirs,
        "{config_file}": run.config_files,
        "{python_prefix}": run.python_prefixes,
    }
    out: list[str] = []
    for text in texts:
        hole = next((h for h in values if h in text), None)
        out += [text.replace(hole, v) for v in values[hole]] if hole else [text]
    return tuple(out)


@functools.lru_cache(maxsize=64)
def rules(run: RunPaths = NO_RUN) -> tuple[_Rule, ...]:
    """The rules in the order they are tried, with the run's placeholders filled in (a rule whose
    placeholder the run does not know matches nothing and is left out)."""
    facts = path_facts()
    out: list[_Rule] = []
    for r in facts.rule:
        paths, prefixes = _expand(r.paths, run), _expand(r.prefixes, run)
        globs, names = _expand(r.globs, run), _expand(r.names, run)
        if paths or prefixes or globs or names:
            out.append(_compiled(r.id, r.class_, r.reason, r.source, paths, prefixes, globs, names))
        if r.id == facts.launchers_after:
            out += [
                _compiled(f"launcher:{x.id}", "launcher", x.reason, x.source, (), (), x.session_files, ())
                for x in launcher_facts().launcher
                if x.session_files
            ]
    return tuple(out)


def _compiled(
    rid: str,
    cls: PathClassName,
    reason: str,
    source: str,
    paths: tuple[str, ...],
    prefixes: tuple[str, ...],
    globs: tuple[str, ...],
    names: tuple[str, ...],
) -> _Rule:
    patterns = [fnmatch.translate(g) for g in globs] + [f"(?:.*/)?{fnmatch.translate(n)}" for n in names]
    regex = re.compile("|".join(f"(?:{p})" for p in patterns), re.DOTALL) if patterns else None
    return _Rule(rid, cls, reason, source, paths, prefixes, globs, names, regex)


def classify(path: str, run: RunPaths = NO_RUN) -> PathClass:
    """The class of one accessed path for this run (an unnamed file hash is data)."""
    norm = os.path.normpath(path) if path.startswith("/") else path
    for r in rules(run):
        if r.matches(norm):
            return PathClass(norm, r.class_, r.id, r.reason, r.source)
    return PathClass(norm, DATA, DEFAULT_RULE, path_facts().class_[DATA].why, "resources/facts/paths.toml")


def class_sql(column: str, run: RunPaths = NO_RUN) -> str:
    """:func:`classify` as a SQL ``CASE`` over ``column`` (DuckDB: ``starts_with`` and ``GLOB``)."""
    whens = []
    for r in rules(run):
        tests = [f"{column} = {_quote(p)}" for p in r.paths]
        tests += [f"starts_with({column}, {_quote(p)})" for p in r.prefixes]
        tests += [f"{column} GLOB {_quote(g)}" for g in r.globs]
        tests += [f"({column} GLOB {_quote('*/' + n)} OR {column} GLOB {_quote(n)})" for n in r.names]
        whens.append(f"WHEN {' OR '.join(tests)} THEN {_quote(r.class_)}")
    return f"(CASE {' '.join(whens)} ELSE {_quote(DATA)} END)"


def _quote(text: str) -> str:
    return "'" + text.replace("'", "''") + "'"


def set_apart_when(cls: str) -> str:
    """When the diagnosis leaves a class out: ``never``, ``always`` or ``with_data``."""
    info = path_facts().class_.get(cls)  # type: ignore[call-overload]
    return info.set_apart if info is not None else "never"


def class_why(cls: str) -> str:
    """What a class is, for a person (``dftune doctor --path``, the diagnosis's set-apart notes)."""
    info = path_facts().class_.get(cls)  # type: ignore[call-overload]
    return info.why if info is not None else cls


def container_format(path: str) -> str | None:
    """The container format an I/O library lays out itself (HDF5, netCDF, ADIOS), known by the
    file's suffix or, when the file is still there, by its signature; None for a plain file,
    whose offsets are the application's."""
    lower = path.lower()
    for f in format_facts().format:
        if lower.endswith(f.suffixes):
            return f.id
    try:
        with open(path, "rb") as fh:
            for f in format_facts().format:
                for at in f.magic_at:
                    fh.seek(at)
                    head = fh.read(max((len(m) for m in f.magic), default=0))
                    if any(head.startswith(m.encode("latin-1")) for m in f.magic):
                        return f.id
    except OSError:
        return None
    return None


@functools.cache
def trace_suffixes() -> tuple[str, ...]:
    """The endings of dftracer's trace file names (paths.toml's tracer-output rule)."""
    rule = next(r for r in path_facts().rule if r.id == "tracer-output")
    return tuple(n.lstrip("*") for n in rule.names)
