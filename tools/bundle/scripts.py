"""The bundle's scripts: ``scripts/<arm>.sh`` runs one arm as the run ran it (its settings, its
environment, its patched copy of the source, its staged data folder, its launcher), and under a
batch scheduler ``scripts/<arm>.<suffix>`` submits it (launchers.toml ``[launch]``)."""

from __future__ import annotations

import re
import shlex
import tempfile
from pathlib import Path

from dftune.core.facts import launcher_facts
from dftune.core.facts.models import LaunchLine
from dftune.tools.bundle.model import Arm
from dftune.tools.runner.spec import SOURCE_COPY_IGNORE, WorkloadSpec, fill_placeholders

SHELL = "#!/bin/sh"
#: stand for the arm's scratch folder, the bundle and the staged data folder while a command is
#: rendered for a script
_WORK, _HERE, _STAGE = "__DFTUNE_WORKDIR__", "__DFTUNE_HERE__", "__DFTUNE_STAGE__"
_SHOWN = {_HERE: '"$HERE"', _WORK: '"$WORKDIR"', _STAGE: '"$STAGE"'}


def launch(spec: WorkloadSpec) -> LaunchLine | None:
    """How the spec's launcher starts a run by hand (None: run the command as it is)."""
    return launcher_facts().launch.get(spec.launcher.kind)


def _values(spec: WorkloadSpec) -> dict[str, str]:
    lc = spec.launcher
    return {
        "nodes": str(lc.nodes),
        "ranks": str(lc.ranks),
        "minutes": str(lc.time_limit_min),
        "partition": lc.partition or "",
    }


def fill(spec: WorkloadSpec, arm: Arm, name: str, out: Path, items: list[str] | None = None) -> list[str]:
    """The arm's command line (or ``items``: its setup) with its settings: its run folder as
    ``$WORKDIR``, a staged data folder as ``$STAGE``, a configuration file a config knob sets as the
    bundle's copy with the arm's values (``$HERE/changes/<arm>-config``, written there)."""
    settings = {
        **spec.settings(),
        **{k: v for k, v in arm.settings.items() if any(k == kn.name for kn in spec.knobs)},
    }
    if arm.stage is not None and "{" not in spec.data_dir:
        spec = spec.model_copy(update={"data_dir": f"/{_STAGE}"})
    with tempfile.TemporaryDirectory(prefix="dftune-bundle-") as scratch:
        work = Path(scratch) / _WORK
        argv = spec.render(
            spec.command if items is None else items, settings, workdir=work, trace_dir=work / "traces"
        )
        rendered = work / "dftune-config"
        configs = out / "changes" / f"{name}-config"
        for f in sorted(rendered.iterdir()) if rendered.is_dir() else []:
            configs.mkdir(parents=True, exist_ok=True)
            (configs / f.name).write_bytes(f.read_bytes())
        return [
            a.replace(str(rendered), f"{_HERE}/changes/{name}-config")
            .replace(str(work), _WORK)
            .replace(f"/{_STAGE}", _STAGE)
            for a in argv
        ]


def _setup_lines(spec: WorkloadSpec, arm: Arm, name: str, out: Path) -> list[str]:
    """The data folder as the run had it before the first replicate: a folder under the run's
    workdir made (and filled by the spec's setup each time); a data set of the user's own prepared
    by the setup only when it is missing (the run reused one its setup had made)."""
    data = fill(spec, arm, name, out, ["{data_dir}"])[0]
    inside = _WORK in data
    lines = [f"mkdir -p {shell_word(data)}"] if inside else []
    if not spec.setup:
        return lines
    setup = " ".join(map(shell_word, fill(spec, arm, name, out, spec.setup)))
    run = [*_run(setup), 'if [ "$RC" -ne 0 ]; then exit "$RC"; fi']
    if inside or arm.stage is not None:
        return [*lines, "# the spec's setup", *run]
    return [
        *lines,
        "# the spec's setup, when the data set is missing",
        f"if [ ! -e {shell_word(data)} ]; then",
        *(f"  {x}" for x in run),
        "fi",
    ]


def shell_word(arg: str) -> str:
    """One argument for sh: its literal parts quoted, the bundle's, the scratch folder's and the
    staged copy's places as ``"$HERE"``, ``"$WORKDIR"`` and ``"$STAGE"``."""
    parts = re.split(f"({_HERE}|{_WORK}|{_STAGE})", arg)
    return "".join(_SHOWN.get(p) or shlex.quote(p) for p in parts if p) or "''"


def command_line(spec: WorkloadSpec, arm: Arm, name: str, out: Path) -> str:
    """The arm's launch line for sh: the launcher's prefix, then the program with its settings."""
    how = launch(spec)
    prefix = [fill_placeholders(w, _values(spec)) for w in how.run] if how else []
    argv = fill(spec, arm, name, out)
    return " ".join([*map(shlex.quote, [*prefix, *spec.launcher.extra_args]), *map(shell_word, argv)])


def arm_script(spec: WorkloadSpec, arm: Arm, name: str, out: Path) -> str:
    how = launch(spec)
    command = command_line(spec, arm, name, out)
    if how is not None and how.submit:
        where = f"inside a {spec.launcher.kind} allocation (scripts/{name}.{how.suffix} submits it)"
    else:
        where = "here"
    lines = [
        SHELL,
        f"# the {name} arm of {spec.name}, as the run ran it, {where}",
        "# WORKDIR: a scratch folder (default: a new one, removed at the end)",
        "set -e",
        "MADE= STAGE=",
        'if [ -z "${WORKDIR:-}" ]; then WORKDIR="$(mktemp -d)"; MADE=1; fi',
        'cleanup() { if [ -n "$STAGE" ]; then rm -rf "$(dirname "$STAGE")"; fi; '
        'if [ -n "$MADE" ]; then rm -rf "$WORKDIR"; fi; }',
        "trap cleanup EXIT",
        *_traps(),
        'HERE="$(cd "$(dirname "$0")/.." && pwd)"',
        f"cd {shlex.quote(str(spec.resolve(spec.cwd)))}",
    ]
    lines += [f"export {k}={shlex.quote(v)}" for k, v in sorted({**spec.env, **arm.env}.items())]
    lines += [f'export {k}="$HERE"/{shlex.quote(rel)}' for k, rel in sorted(arm.env_files.items())]
    lines += [
        f"export {k.name}={shlex.quote(str(arm.settings[k.name]))}"
        for k in spec.knobs
        if k.kind == "env" and k.name in arm.settings
    ]
    if arm.patches:
        src = spec.resolve(spec.source_dir)
        cwd = spec.resolve(spec.cwd)
        inside = cwd.relative_to(src) if cwd.is_relative_to(src) else Path(".")
        skip = [f"--exclude={shlex.quote(x)}" for x in left_out(spec)]
        lines.append('mkdir -p "$WORKDIR/source"')
        lines.append(
            f"(cd {shlex.quote(str(src))} && tar {' '.join(skip)} -cf - .) | "
            '(cd "$WORKDIR/source" && tar -xf -)'
        )
        lines += [
            f'patch -s -d "$WORKDIR/source" -p{p.strip} < "$HERE"/{shlex.quote(p.path)}' for p in arm.patches
        ]
        lines.append(f'cd "$WORKDIR/source/{inside.as_posix()}"')
    staged = arm.stage is not None and "{" not in spec.data_dir
    if not staged:
        lines += _setup_lines(spec, arm, name, out)
        if arm.stage is not None:
            lines.append(f"# the run staged the data folder to {arm.stage.tier} (see README.md)")
        return "\n".join([*lines, *_run(command), 'exit "$RC"']) + "\n"
    assert arm.stage is not None
    data = shlex.quote(str(spec.resolve(spec.data_dir)))
    root = shlex.quote(arm.stage.root)
    lines += _setup_lines(
        spec.model_copy(update={"data_dir": str(spec.resolve(spec.data_dir))}),
        arm.model_copy(update={"stage": None}),
        name,
        out,
    )
    lines += [
        f"# the data folder is copied to {arm.stage.tier} for the run, and what it wrote copied back",
        f'STAGE="$(mktemp -d -p {root} dftune-stage-XXXXXX)/data"',
        f'cp -a --sparse=always {data} "$STAGE"',
        *_run(command),
        f'cp -a -u --sparse=always --remove-destination "$STAGE"/. {data}/',
        'exit "$RC"',
    ]
    return "\n".join(lines) + "\n"


def _run(command: str) -> list[str]:
    """Run a program as a child the script waits for, so that a signal to the script (scancel, a
    time limit, Ctrl-C) reaches the program too (the traps :func:`_traps` set); its exit status is
    ``$RC`` (stdin stays the script's)."""
    return [f"{command} <&3 3<&- &", "CHILD=$!", "set +e", 'wait "$CHILD"', "RC=$?", "set -e", "CHILD="]


def _traps() -> list[str]:
    """HUP, INT and TERM end the running child and the script (128 + the signal), and the EXIT
    trap removes the scratch folders: dash runs no EXIT trap for a signal it has no trap for."""
    kill = 'if [ -n "$CHILD" ]; then kill -{sig} "$CHILD" 2>/dev/null; fi'
    return ["CHILD=", "exec 3<&0"] + [
        f"trap '{kill.format(sig=sig)}; exit {128 + num}' {sig}"
        for sig, num in (("HUP", 1), ("INT", 2), ("TERM", 15))
    ]


def batch_script(spec: WorkloadSpec, name: str) -> tuple[str, str] | None:
    """(file name, text) of the batch script that submits ``scripts/<name>.sh`` under the spec's
    batch scheduler (None: the launcher is not one); submitted from the bundle's folder."""
    how = launch(spec)
    if how is None or not how.submit:
        return None
    values = _values(spec)
    lines = ["#!/bin/bash", *(fill_placeholders(d, values) for d in how.directives)]
    if spec.launcher.partition and how.partition:
        lines.append(fill_placeholders(how.partition, values))
    folder = f"${{{how.submit_dir_var}:-$PWD}}" if how.submit_dir_var else "$PWD"
    lines += [
        f"# submit from the bundle's folder: {how.submit} scripts/{name}.{how.suffix}",
        f'exec sh "{folder}/scripts/{name}.sh"',
    ]
    return f"{name}.{how.suffix}", "\n".join(lines) + "\n"


def left_out(spec: WorkloadSpec) -> list[str]:
    """What a copy of the source leaves out (as the run's copies did): caches, version control, and
    the data folder when it lies inside the source tree (the program reads it where it is)."""
    out = [f"./{x}" for x in SOURCE_COPY_IGNORE if x.isidentifier() or x.startswith(".")]
    src = spec.resolve(spec.source_dir)
    if "{" not in spec.data_dir and spec.resolve(spec.data_dir).is_relative_to(src):
        out.append("./" + spec.resolve(spec.data_dir).relative_to(src).as_posix())
    return out
