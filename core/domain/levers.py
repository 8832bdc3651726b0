"""The program's own levers a run found for itself: settings it drafted as knobs from the
program's command line, source and configuration when the spec declared none."""

from __future__ import annotations

from typing import Literal

from pydantic import Field

from dftune.core.model import StrictModel

LeverValue = str | int | float | bool


class Lever(StrictModel):
    """One setting of the program the run measures like a declared knob."""

    #: the knob's name (its placeholder in the command, or the environment variable it sets)
    knob: str
    #: how the program receives it: an option (``--threads``, ``++workload.reader.read_threads``),
    #: for ``env`` the variable an env-gated patch of its source reads, for ``config`` the key of
    #: the configuration file ``file`` (a copy of it with the value is passed)
    kind: Literal["arg", "env", "config"] = "arg"
    flag: str
    #: kind config: the file as the command names it
    file: str = ""
    #: where it was found: a call site (``reader.py:31 (ThreadPoolExecutor max_workers=)``), an
    #: option in the program's ``--help``, a key of its configuration file
    origin: str
    #: why it decides how the I/O is served (the drafting rule's reason)
    why: str
    strategy: str | None = None
    values: list[LeverValue] = Field(min_length=1)
    default: LeverValue


class Levers(StrictModel):
    """What the run drafted from its program, kept with the run (``levers.json``)."""

    #: the spec's command with a placeholder for each lever (the program's defaults reproduce it)
    command: list[str]
    found: list[Lever] = Field(default_factory=list)
    #: settings that decide the I/O but that no option passes (a source change would): "name (origin)"
    listed: list[str] = Field(default_factory=list)
    #: why nothing was drafted, or what the drafting could not read (empty when levers were found)
    note: str = ""
    #: the env levers' patch (a unified diff) and the patched copy of the source tree the run uses
    patch: str = ""
    source_copy: str = ""
