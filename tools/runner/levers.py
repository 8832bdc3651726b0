"""The program's own levers, found by the run when its spec declares no knob.

A bare spec (a command and a metric) of a program nobody tuned still has the program's own
settings: the thread pool's size behind ``--threads``, a DataLoader's ``num_workers``, DLIO's
``reader.read_threads``. The run drafts them the way ``dftune spec init`` does
(:mod:`dftune.tools.runner.draft`: the program's source, its ``--help``, its workload config,
classified by resources/drafting/), and measures each one like a declared knob, under the same
guards. An I/O call's argument no option passes (``DataLoader(ds, num_workers=2)``) becomes an
environment knob through an env-gated patch of a copy of the source
(:mod:`dftune.tools.runner.env_gate`). The draft is saved with the run (``levers.json``, and the
patched copy and its diff under ``levers/``), so a resumed or replayed run works from the same
knobs.
"""

from __future__ import annotations

import shutil
import sys
import tempfile
from collections.abc import Callable
from pathlib import Path

from dftune.core import strictjson
from dftune.core.domain.levers import Lever, Levers
from dftune.core.errors import DftuneError
from dftune.core.facts import stack_facts
from dftune.core.facts.stacks import Evidence, detect, python_imports, runs
from dftune.core.fsio import atomic_write_bytes
from dftune.core.home import dftune_home
from dftune.tools.catalog import default_catalog
from dftune.tools.runner import env_gate
from dftune.tools.runner.draft import (
    Draft,
    Rule,
    Setting,
    _script,
    classify,
    dlio_settings,
    load_rules,
    program_settings,
    read_source,
    with_knobs,
)
from dftune.tools.runner.spec import SOURCE_COPY_IGNORE, Knob, SpecError, WorkloadSpec

LEVERS_FILE = "levers.json"
#: the patched copy of the source tree and its diff, beside levers.json
LEVERS_DIR = "levers"
#: a run asks the program for ``--help`` with a shorter leash than ``spec init`` (it runs unattended)
HELP_TIMEOUT_S = 5.0
#: what a person adds when nothing was found (the morning view prints it)
DECLARE_HINT = 'add a knob: [[knobs]] name = "X" kind = "arg" values = [...] with {X} in the command'
_COPY_IGNORE = shutil.ignore_patterns(*SOURCE_COPY_IGNORE)


def draft_levers(spec: WorkloadSpec, run_dir: Path | None = None) -> Levers:
    """The tunable settings of the spec's program as knobs, its command with their placeholders;
    with ``run_dir``, also the env-gated arguments of its I/O calls (their copy written there)."""
    command = list(spec.command)
    cwd = spec.resolve(spec.cwd)
    readable = [_filled(a, spec) for a in command]
    rules = load_rules()
    try:
        source = ""  # the script's text (DLIO is configured by its YAML, never patched)
        if runs(readable, "dlio"):
            settings = dlio_settings(readable, cwd, rules)[0]
        else:
            with tempfile.TemporaryDirectory(prefix="dftune-help-") as scratch:
                settings, _, _, source = program_settings(
                    readable, cwd, rules, help_timeout_s=HELP_TIMEOUT_S, help_scratch=Path(scratch)
                )
    except DftuneError as exc:
        return Levers(command=command, note=f"the program's settings could not be read: {exc}")
    declared = {k.name for k in spec.knobs}
    set_keys = {(k.file, k.key) for k in spec.knobs if k.kind == "config"}
    usable = [
        s
        for s in settings
        if s.role == "tunable"
        and s.flag
        and s.values
        and s.knob_name not in declared
        and not (s.config and (s.config, s.name) in set_keys)
        and not (not s.config and _placeholder_follows(command, s.flag))
    ]
    drafted = with_knobs(command, usable)
    found = [
        Lever(
            knob=s.knob_name,
            kind="config" if s.config else "arg",
            flag=s.flag,
            file=s.config,
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
    listed = [s for s in settings if s.role == "tunable" and s not in usable and s.name not in passed]
    gated: list[Lever] = []
    patch = copy = ""
    covered: set[str] = set()
    if run_dir is not None and source:
        gated, patch, copy, covered = _env_levers(spec, readable, source, run_dir, rules)
    lines = [f"{s.name} ({s.source})" for s in listed if not s.call or s.call not in covered]
    found += gated
    note = "" if found else f"no option of the program decides how its I/O is served: {DECLARE_HINT}"
    return Levers(
        command=drafted if usable else command,
        found=found,
        listed=lines,
        note=note,
        patch=patch,
        source_copy=copy,
    )


def foreseen(draft: Draft, cwd: Path) -> list[str]:
    """What a run of the drafted spec finds for itself beyond its knobs, one line each, for the
    spec's reader: for a spec without knobs, the env-gated arguments of its script's I/O calls
    (patched in a copy when the run starts); and the settings the libraries the script imports
    document (resources/facts/stacks.toml ``settings``), proposed whatever the diagnosis ranks."""
    script = _script(draft.source, cwd)
    if script is None:
        return []
    source = read_source(script)
    if source is None:
        return []
    out: list[str] = []
    if not any(s.values and s.flag for s in draft.tunables):  # the run drafts levers of its own
        rules, seen = load_rules(), set()
        for g in env_gate.gates(source, script.name):
            s = classify(Setting(name=g.site.keyword, source=script.name, default=g.default), rules)
            if s.role == "tunable" and s.values and g.variable not in seen:
                seen.add(g.variable)
                out.append(f"  {g.variable} ({script.name}:{g.origin}): read from the environment in a copy")
    text = (source + "\n" + python_imports(source)).lower()
    stack = detect(Evidence(texts=[(f"the program {script.name}", text)]))
    catalog = default_catalog()
    for lib in stack_facts().stack:
        for sid in lib.settings if stack.has(lib.id) else ():
            if (st := catalog.strategies.get(sid)) is None:
                continue
            how = ", ".join(st.apply.env) if st.apply is not None and st.apply.kind == "env" else "by hand"
            out.append(f"  {sid} ({how}): {st.name}, a setting {lib.id} documents")
    return out


def _env_levers(
    spec: WorkloadSpec, argv: list[str], source: str, run_dir: Path, rules: list[Rule]
) -> tuple[list[Lever], str, str, set[str]]:
    """The literal or left-out arguments of the script's I/O calls as environment knobs, the patch
    and patched copy of the source tree that read them (the original is never touched), and the
    calls they cover (``keyword:line``)."""
    cwd = spec.resolve(spec.cwd)
    script = _script(argv, cwd)
    root = spec.resolve(spec.source_dir)
    named = next((a for a in spec.command if a.endswith(".py")), "")
    if script is None or Path(named).is_absolute():
        return [], "", "", set()  # named by an absolute path: a copy of the tree would not be run
    try:
        rel = script.resolve().relative_to(root)
        cwd.resolve().relative_to(root)  # the command runs inside the tree a copy can move
    except ValueError:
        return [], "", "", set()
    levers: list[Lever] = []
    chosen: list[env_gate.Gate] = []
    for g in env_gate.gates(source, script.name):
        s = classify(
            Setting(name=g.site.keyword, source=str(rel), default=g.default, minimum=g.site.min), rules
        )
        if s.role != "tunable" or not s.values or g.default not in s.values:
            continue
        chosen.append(g)
        if any(lv.knob == g.variable for lv in levers):  # another call reads the same variable
            continue
        levers.append(
            Lever(
                knob=g.variable,
                kind="env",
                flag=g.variable,
                origin=f"{rel}:{g.origin}",
                why=s.why,
                strategy=s.strategy,
                values=s.values,
                default=g.default,
            )
        )
    if not chosen:
        return [], "", "", set()
    where = run_dir / LEVERS_DIR
    copy = where / "source"
    if copy.exists():
        shutil.rmtree(copy)
    shutil.copytree(root, copy, symlinks=True, ignore=_outside(spec, run_dir))
    patched = env_gate.gated(source, chosen)
    target = copy / rel
    target.unlink()  # a link in the copy is replaced by the patched file, never written through
    target.write_text(patched, encoding="utf-8")
    diff = where / "levers.diff"
    diff.write_text(env_gate.unified_diff(source, patched, rel.as_posix()), encoding="utf-8")
    return levers, str(diff), str(copy), {f"{g.site.keyword}:{g.line}" for g in chosen}


def _outside(spec: WorkloadSpec, run_dir: Path) -> Callable[[str, list[str]], set[str]]:
    """What the copy of the source tree leaves out: caches and traces, dftune's own home (a run
    folder inside the tree would copy into itself) and the data folder (the program reads it
    where it is)."""
    skip = {dftune_home().resolve(), run_dir.resolve()}
    data = spec.data_dir
    if "{" not in data:
        skip.add(spec.resolve(data))

    def ignore(folder: str, names: list[str]) -> set[str]:
        out = set(_COPY_IGNORE(folder, names))
        here = Path(folder).resolve()
        return out | {n for n in names if here / n in skip}

    return ignore


def with_levers(spec: WorkloadSpec, levers: Levers | None) -> WorkloadSpec:
    """The spec with the drafted levers as knobs (validated like a declared spec), run from the
    env-gated copy of its source when the levers need one."""
    if levers is None or not levers.found:
        return spec
    knobs = [
        Knob(
            name=lv.knob,
            kind=lv.kind,
            values=lv.values,
            default=lv.default,
            strategy=lv.strategy,
            **({"file": lv.file, "key": lv.flag} if lv.kind == "config" else {}),
        )
        for lv in levers.found
    ]
    data = {**spec.model_dump(exclude_unset=True), "command": levers.command, "knobs": [*spec.knobs, *knobs]}
    try:
        out = WorkloadSpec.model_validate(data)
    except ValueError as exc:
        raise SpecError(f"{spec.spec_path}: the drafted levers do not fit the spec: {exc}") from None
    if levers.source_copy:
        if not Path(levers.source_copy).is_dir():
            raise SpecError(f"{levers.source_copy}: the levers' patched source is gone")
        out = out.relocated(Path(levers.source_copy))
    return out


def save(run_dir: Path, levers: Levers) -> None:
    doc = strictjson.dumps(levers.model_dump(mode="json"), indent=1)
    atomic_write_bytes(run_dir / LEVERS_FILE, doc.encode())


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
