"""Which software stack does this run use? One answer, from resources/facts/stacks.toml.

The caller gathers what can be seen of a run (:class:`Evidence`: the program files' text, the
command, the trace's paths, commands, events and layers, the launcher); :func:`detect` matches
it against every stack's signatures and keeps, for each part of the answer, the sentence that
justifies it. The diagnosis (which strategies fit a trace), the plan (which settings a run can
take), the knowledge base's software scope and the literature's context search all read the
same :class:`Stack`.
"""

from __future__ import annotations

import fnmatch
import re
import shutil
from collections.abc import Iterable, Sequence
from dataclasses import dataclass, field
from pathlib import Path

from pydantic import Field

from dftune.core.facts import launcher_facts, stack_facts
from dftune.core.facts.models import StackSignature
from dftune.core.model import StrictModel


@dataclass
class Evidence:
    """What can be seen of a run before (and, when traced, after) it runs."""

    #: (where, lower-case text): "the program reader.py", "the command", "the trace"
    texts: list[tuple[str, str]] = field(default_factory=list)
    #: trace categories (dftracer's cat, Darshan's modules) that carry I/O
    layers: list[str] = field(default_factory=list)
    #: the programs the command and the traced processes run (basenames)
    executables: list[str] = field(default_factory=list)
    #: the spec's launcher kind (local, mpirun, slurm, flux)
    launcher: str = "local"
    #: the trace's processes carry MPI ranks
    ranks: bool = False
    #: the folder of the Python that launches MPI programs
    beside: Path | None = None
    #: STDIO's share of the POSIX + STDIO call time (None: unknown)
    stdio_share: float | None = None


class Stack(StrictModel):
    """The software a run uses (stack ids of stacks.toml), with the evidence for each part."""

    software: list[str] = Field(default_factory=lambda: ["posix"])
    #: an environment convention the program turns into MPI_Info hints (IOR's), or None
    hint_env_prefix: str | None = None
    evidence: list[str] = Field(default_factory=list)

    def has(self, stack_id: str) -> bool:
        return stack_id in self.software

    def because(self, stack_id: str) -> str | None:
        """Why the stack includes ``stack_id`` (its evidence sentence), or None when it does not."""
        line = next((e for e in self.evidence if e.startswith(f"{stack_id}: ")), None)
        return line if line is not None or not self.has(stack_id) else stack_id

    def gap(self, requires: Sequence[str]) -> str | None:
        """Why a strategy whose ``requires`` says this cannot apply here, or None."""
        return presumption_gap(requires, self.software)


_IMPORT = re.compile(
    r"^\s*(?:from\s+([\w.]+)\s+import|import\s+([\w.,\s]+?)(?:\s+as\s+\w+)?\s*(?:#.*)?$)", re.M
)


def python_imports(source: str) -> str:
    """The modules a Python source imports, one ``import X`` line each (lower case), so that the
    signatures ``import zarr`` and ``from zarr`` see ``import numpy as np, zarr`` too. Read with a
    pattern, not a parser: a script that does not parse still shows what it imports."""
    names: list[str] = []
    for m in _IMPORT.finditer(source):
        if m.group(1):
            names.append(m.group(1))
            continue
        for part in m.group(2).split(","):
            name = part.strip().split(" ")[0]
            if name:
                names.append(name)
    top = dict.fromkeys(n.split(".")[0].lower() for n in names if n)
    return "".join(f"import {n}\nfrom {n}\n" for n in top)


def _launcher_names() -> dict[str, str]:
    """Executable pattern -> launcher id, for launchers that start MPI ranks."""
    return {exe: x.id for x in launcher_facts().launcher if x.mpi for exe in x.executables}


def is_launcher(program: str) -> bool:
    """Whether ``program`` (a path or a name) starts a job's processes (launchers.toml)."""
    name = Path(program).name
    return any(fnmatch.fnmatchcase(name, pat) for pat in _launcher_names())


def is_python(program: str) -> bool:
    """Whether ``program`` (a path or a name) is a Python interpreter (processes.toml ``python``)."""
    from dftune.core.facts import process_facts

    name = Path(program).name
    return any(fnmatch.fnmatchcase(name, pat) for pat in process_facts().python)


def _hits(s: StackSignature, ev: Evidence) -> list[str]:
    """The sentences that show stack ``s`` in ``ev`` (empty: not shown)."""
    out: list[str] = []
    named = [e for e in ev.executables if any(fnmatch.fnmatchcase(e, p) for p in s.executables)]
    if named:
        out.append(f"runs {named[0]}")
    if s.launched:
        mpi = _launcher_names()
        exe = next((e for e in ev.executables if any(fnmatch.fnmatchcase(e, p) for p in mpi)), None)
        schedulers = {x.scheduler for x in launcher_facts().launcher if x.mpi and x.scheduler}
        if exe is not None:
            out.append(f"launched by {exe} (MPI ranks)")
        elif ev.launcher in ({"mpirun"} | schedulers):
            out.append(f"launched by {ev.launcher} (MPI ranks)")
    if s.text:
        hit = next(((n, w) for w, text in ev.texts for n in s.text if n in text), None)
        if hit is not None:
            out.append(f"{hit[0]!r} in {hit[1]}")
    if s.layers:
        layer = next((c for c in ev.layers for t in s.layers if t in c.upper()), None)
        if layer is not None:
            out.append(f"the trace's {layer} layer")
    if s.ranks and ev.ranks:
        out.append("the trace's processes carry ranks")
    if ev.beside is not None:
        out += [f"{name} beside {ev.beside}" for name in s.beside if (ev.beside / name).exists()][:1]
    out += [f"{exe} on PATH" for exe in s.on_path if shutil.which(exe)][:1]
    return out


def detect(ev: Evidence) -> Stack:
    """The stack these observations show: signatures first, then what they imply, then the stacks
    assumed with others unless the evidence says otherwise (ROMIO under MPI-IO unless only Open
    MPI shows)."""
    facts = stack_facts()
    found: dict[str, list[str]] = {}
    for s in facts.stack:
        if s.on_path:
            continue  # a tool of this machine, not of the run: presumption_gap asks for it
        hits = _hits(s, ev)
        if s.always or hits:
            found[s.id] = hits
    if ev.stdio_share is not None and ev.stdio_share >= facts.stdio.min_share:
        found["stdio"] = [f"STDIO carries {ev.stdio_share:.0%} of the POSIX + STDIO call time"]
    changed = True
    while changed:  # what a detected stack brings with it
        changed = False
        for s in facts.stack:
            if s.id not in found:
                continue
            brought = list(s.implies) + [x for w, xs in s.implies_with.items() if w in found for x in xs]
            for x in brought:
                if x not in found:
                    found[x] = [f"implied by {s.id}"]
                    changed = True
    for s in facts.stack:
        if not s.assumed_with or s.id in found or not all(a in found for a in s.assumed_with):
            continue
        confirmed = next((c for c in s.confirmed_by if c in found), None)
        refuted = next((u for u in s.unless if u in found), None)
        if confirmed is not None:
            found[s.id] = [f"{confirmed}: {'; '.join(found[confirmed])}"]
        elif refuted is None:
            found[s.id] = [f"assumed with {', '.join(s.assumed_with)} (no sign of {', '.join(s.unless)})"]
    evidence = [f"{sid}: {'; '.join(why)}" for sid, why in found.items() if why]
    for s in facts.stack:  # say why an assumed stack is absent
        refuted = next((u for u in s.unless if u in found), None)
        if s.assumed_with and s.id not in found and refuted and all(a in found for a in s.assumed_with):
            evidence.append(f"not {s.id}: {refuted} shows ({_signature(refuted).reason})")
    prefix = next((s.hint_env_prefix for s in facts.stack if s.hint_env_prefix and s.id in found), None)
    return Stack(software=sorted(found), hint_env_prefix=prefix, evidence=evidence)


def _signature(stack_id: str) -> StackSignature:
    return next(s for s in stack_facts().stack if s.id == stack_id)


def presumption_gap(requires: Sequence[str], have: Iterable[str]) -> str | None:
    """Why something that ``requires`` these (a strategy's free text, e.g. "mpi-io (ROMIO-based)")
    cannot apply to a run with the stacks ``have`` (tools on PATH count too), or None."""
    present = set(have)
    for need in requires:
        text = need.lower()
        p = next((p for p in stack_facts().presumes if p.word in text), None)
        if p is None or present & set(p.any_of):
            continue
        tools = [s for s in stack_facts().stack if s.id in p.any_of and s.on_path and _hits(s, Evidence())]
        if tools:
            continue
        names = " or ".join(x.upper() for x in p.any_of)
        return f"presumes {need}, and the run shows no {names} (detected: {', '.join(sorted(present))})"
    return None


def topics(software: Iterable[str]) -> list[tuple[str, str]]:
    """(stack id, topic words) for the literature's context search of every detected layer."""
    have = set(software)
    return [(s.id, s.topic) for s in stack_facts().stack if s.topic and s.id in have]


def distributions() -> tuple[str, ...]:
    """The Python distributions that carry a software stack (stacks.toml), each once."""
    return tuple(dict.fromkeys(d for s in stack_facts().stack for d in s.distributions))


def rank_marker_texts() -> tuple[str, ...]:
    """Text signatures of the MPI libraries a rank opens (processes.toml's rank_stacks)."""
    from dftune.core.facts import process_facts

    wanted = set(process_facts().roles.rank_stacks)
    return tuple(t for s in stack_facts().stack if s.id in wanted for t in s.text)


def env_hint_prefixes(software: Iterable[str] | None = None) -> tuple[str, ...]:
    """The environment prefixes programs turn into MPI_Info hints (IOR's ``IOR_HINT__MPI__``): of
    the stacks in ``software``, or of every stack that has one."""
    have = None if software is None else set(software)
    return tuple(
        s.hint_env_prefix for s in stack_facts().stack if s.hint_env_prefix and (have is None or s.id in have)
    )


def runs(argv: Sequence[str], stack_id: str) -> bool:
    """Whether the command runs a program of the stack ``stack_id`` (one of its executables, by
    name, or as a Python ``-m`` module: ``python -m dlio_benchmark.main``)."""
    exes = _signature(stack_id).executables
    names = [Path(a).name for a in argv] + [a.split(".")[0] for a in argv]
    return any(fnmatch.fnmatchcase(n, pat) for n in names for pat in exes)
