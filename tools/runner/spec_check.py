"""Mistakes in a spec that need no run to find: a command whose program or script is not there,
a working folder that does not exist. Checked before a run (or a bench) creates anything, so a
typo costs a second, not the installer's checks and three failed baseline replicates; each
message names the key to fix.

What only a run shows ends the baseline at its first replicate (tools/runner/bench.py
``spec_mistake``): a metric pattern the output never matches, a data folder that is missing when
the program fails (a missing folder alone is no mistake: a writer may create its own).
"""

from __future__ import annotations

import os
import shutil
import tempfile
from pathlib import Path

from dftune.core.facts.stacks import is_launcher, is_python
from dftune.tools.runner.spec import SpecError, WorkloadSpec

#: launchers whose command runs on other machines: their files need not exist on this one
REMOTE = ("slurm", "flux")
#: placeholders of folders a run makes: a path inside one does not exist before it
RUN_MADE = ("workdir", "data_dir", "trace_dir")


def check_runnable(spec: WorkloadSpec) -> None:
    """Raise :class:`SpecError` (one line: the spec, the key, what is wrong, the fix) for a
    command or folder that cannot work; nothing for what only a run can tell."""
    where = spec.spec_path or spec.name
    cwd = spec.resolve(spec.cwd)
    if not cwd.is_dir():
        raise SpecError(f"{where}: cwd: {cwd} is not a folder: set cwd to the folder the command runs in")
    if spec.launcher.kind in REMOTE or spec.setup:
        return  # the batch job's node has its own files; a setup may build or install the program
    with tempfile.TemporaryDirectory(prefix="dftune-check-") as scratch:
        argv = spec.render(spec.command, spec.settings(), workdir=Path(scratch))
    # a path inside a folder the run makes ({workdir}/app) does not exist before it
    made = {i for i, a in enumerate(spec.command) if any(f"{{{p}}}" in a for p in RUN_MADE)}
    _program(argv, made, cwd, spec, where)


def _program(argv: list[str], made: set[int], cwd: Path, spec: WorkloadSpec, where: str) -> None:
    """The program the command starts exists (on PATH, or as a file from ``cwd``), and so does
    the script an interpreter is given (``made``: the arguments not to look for)."""
    exe = argv[0]
    if 0 in made:
        return
    path_var = spec.env.get("PATH", os.environ.get("PATH", ""))
    found = shutil.which(exe, path=path_var) if os.sep not in exe else None
    if os.sep in exe:
        target = Path(exe) if Path(exe).is_absolute() else cwd / exe
        if not target.is_file():
            raise SpecError(f"{where}: command: {exe}: no such file (from cwd {cwd}): fix the path")
        if not os.access(target, os.X_OK):
            raise SpecError(
                f"{where}: command: {exe} is not executable: chmod +x it, or start it with its interpreter"
            )
    elif found is None:
        raise SpecError(
            f"{where}: command: {exe}: not found on PATH: give its path, or install it "
            "(the command runs without a shell, so aliases and shell functions do not count)"
        )
    if is_launcher(exe) or not is_python(exe) or argv[1:2] in (["-m"], ["-c"]):
        return
    i = next((i for i, a in enumerate(argv[1:], 1) if not a.startswith("-")), None)
    if i is None or i in made or not argv[i].endswith(".py"):
        return
    target = Path(argv[i]) if Path(argv[i]).is_absolute() else cwd / argv[i]
    if not target.is_file():
        raise SpecError(f"{where}: command: {argv[i]}: no such script (from cwd {cwd}): fix the path")
