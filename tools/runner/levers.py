"""The program's own levers, found by the run when its spec declares no knob.

A bare spec (a command and a metric) of a program nobody tuned still has the program's own
settings: the thread pool's size behind ``--threads``, a DataLoader's ``num_workers``, DLIO's
``reader.read_threads``. The run drafts them the way ``dftune spec init`` does
(:mod:`dftune.tools.runner.draft`: the program's source, its ``--help``, its workload config,
classified by resources/drafting/), and measures each one like a declared knob, under the same
guards. The draft is saved with the run (``levers.json``), so a resumed or replayed run works
from the same knobs.
"""

from __future__ import annotations

import sys
from pathlib import Path

from dftune.core import strictjson
from dftune.core.domain.levers import Lever, Levers
from dftune.core.errors import DftuneError
from dftune.core.facts.stacks import runs
from dftune.core.fsio import atomic_write_bytes
from dftune.tools.runner.draft import dlio_settings, load_rules, program_settings, with_knobs
from dftune.tools.runner.spec import Knob, SpecError, WorkloadSpec

LEVERS_FILE = "levers.json"
#: a run asks the program for ``--help`` with a shorter leash than ``spec init`` (it runs unattended)
HELP_TIMEOUT_S = 5.0
#: what a person adds when nothing was found (the morning view prints it)
DECLARE_HINT = 'add a knob: [[knobs]] name = "X" kind = "arg" values = [...] with {X} in the command'


def draft_levers(spec: WorkloadSpec) -> Levers:
    """The tunable settings of the spec's program as knobs, its command with their placeholders."""
    command = list(spec.command)
    cwd = spec.resolve(spec.cwd)
    readable = [_filled(a, spec) for a in command]
    try:
        if runs(readable, "dlio"):
            settings = dlio_settings(readable, cwd, load_rules())[0]
        else:
            settings = program_settings(readable, cwd, load_rules(), help_timeout_s=HELP_TIMEOUT_S)[0]
    except DftuneError as exc:
        return Levers(command=command, note=f"the program's settings could not be read: {exc}")
    declared = {k.name for k in spec.knobs}
    usable = [
        s
        for s in settings
        if s.role == "tunable"
        and s.flag
        and s.values
        and s.knob_name not in declared
        and not _placeholder_follows(command, s.flag)
    ]
    drafted = with_knobs(command, usable)
    found = [
        Lever(
            knob=s.knob_name,
            flag=s.flag,
            origin=s.source,
            why=s.why,
            strategy=s.strategy,
            values=s.values,
            default=s.values[0],
        )
        for s in usable
        if s.values  # with_knobs clears a second setting passed by the same option
    ]
    passed = {s.name for s in usable}
    listed = [
        f"{s.name} ({s.source})"
        for s in settings
        if s.role == "tunable" and s not in usable and s.name not in passed
    ]
    note = "" if found else f"no option of the program decides how its I/O is served: {DECLARE_HINT}"
    return Levers(command=drafted if found else command, found=found, listed=listed, note=note)


def with_levers(spec: WorkloadSpec, levers: Levers | None) -> WorkloadSpec:
    """The spec with the drafted levers as knobs (validated like a declared spec)."""
    if levers is None or not levers.found:
        return spec
    knobs = [
        Knob(name=lv.knob, kind="arg", values=lv.values, default=lv.default, strategy=lv.strategy)
        for lv in levers.found
    ]
    data = {**spec.model_dump(exclude_unset=True), "command": levers.command, "knobs": [*spec.knobs, *knobs]}
    try:
        return WorkloadSpec.model_validate(data)
    except ValueError as exc:
        raise SpecError(f"{spec.spec_path}: the drafted levers do not fit the spec: {exc}") from None


def save(run_dir: Path, levers: Levers) -> None:
    atomic_write_bytes(
        run_dir / LEVERS_FILE, strictjson.dumps(levers.model_dump(mode="json"), indent=1).encode()
    )


def saved(run_dir: Path) -> Levers | None:
    """The levers a run drafted when it started (None: it drafted none or predates drafting)."""
    path = run_dir / LEVERS_FILE
    if not path.is_file():
        return None
    try:
        return Levers.model_validate_json(path.read_bytes())
    except ValueError as exc:
        raise SpecError(f"{path}: not the levers this run drafted: {str(exc).splitlines()[0]}") from None


def _filled(arg: str, spec: WorkloadSpec) -> str:
    """An argument with the placeholders that name the program's files filled in (for reading it)."""
    return (
        arg.replace("{python}", sys.executable)
        .replace("{app_python}", spec.app_python or sys.executable)
        .replace("{source_dir}", str(spec.resolve(spec.source_dir)))
    )


def _placeholder_follows(command: list[str], flag: str) -> bool:
    for i, a in enumerate(command):
        if a == flag and i + 1 < len(command) and "{" in command[i + 1]:
            return True
        if a.startswith(flag + "=") and "{" in a:
            return True
    return False
