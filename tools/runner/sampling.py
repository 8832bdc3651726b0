"""One run of the workload under a sampling profiler, for the time it spends inside its libraries.

The worth-tuning gate counts what a trace cannot show as I/O (resources/diagnosis/gate.toml,
``[possibly_io]``). Time inside an I/O library's read path is one such: no POSIX call shows a
zarr codec pipeline decoding or a DataLoader waiting for its workers. This module runs the
program once more, untraced, under py-spy (how it is started is data: ``[possibly_io.
library_time]``), and returns the stacks it sampled; tools/diagnose/library_time.py reads them.
"""

from __future__ import annotations

import functools
import shutil
import sys
from pathlib import Path

from pydantic import Field

from dftune.core import resource
from dftune.core.model import StrictModel


class SamplerSettings(StrictModel):
    """How the program's stacks are sampled (``[possibly_io.library_time]`` of gate.toml)."""

    enabled: bool = True
    command: list[str] = Field(min_length=2)
    rate_hz: int = Field(gt=0, le=1000)
    min_samples: int = Field(ge=1)
    launchers: list[str]
    source: str = Field(min_length=1)


@functools.cache
def sampler_settings() -> SamplerSettings:
    return SamplerSettings.model_validate(resource.toml("diagnosis/gate.toml")["possibly_io"]["library_time"])


def _executable(name: str) -> str | None:
    """The profiler on PATH, or installed beside the Python that runs dftune (its venv's bin)."""
    found = shutil.which(name)
    if found:
        return found
    beside = Path(sys.executable).parent / name
    return str(beside) if beside.is_file() else None


def unavailable(launcher: str, settings: SamplerSettings | None = None) -> str | None:
    """Why the stacks of a run started by ``launcher`` cannot be sampled here, or None."""
    s = settings or sampler_settings()
    if not s.enabled:
        return "stack sampling is turned off (gate.toml, [possibly_io.library_time] enabled)"
    if launcher not in s.launchers:
        return f"a {launcher} job's processes run where the profiler cannot follow them"
    if _executable(s.command[0]) is None:
        return f"{s.command[0]} is not installed (pip install {s.command[0]})"
    return None


def sampler_argv(out: Path, settings: SamplerSettings | None = None) -> list[str]:
    """The profiler's command line that writes the sampled stacks to ``out``, up to the program."""
    s = settings or sampler_settings()
    out.parent.mkdir(parents=True, exist_ok=True)
    exe = _executable(s.command[0]) or s.command[0]
    fill = {"{rate}": str(s.rate_hz), "{out}": str(out)}
    return [exe, *(fill.get(part, part) for part in s.command[1:])]
