"""How to run a program under the real dftracer (per the dftracer documentation).

Two modes, never mixed in one process (that yields a 0-byte trace): PRELOAD traces an
unmodified program through ``LD_PRELOAD``; FUNCTION is for programs that use
``dftracer.python`` themselves.
"""

from __future__ import annotations

import importlib.util
from pathlib import Path

from dftune.core.errors import DftuneError


class TracerUnavailable(DftuneError):
    """dftracer is not installed (or its preload library is missing)."""


def dftracer_root() -> Path:
    spec = importlib.util.find_spec("dftracer")
    if spec is None or not spec.submodule_search_locations:
        raise TracerUnavailable("the dftracer package is not installed: pip install 'dftune[tracer]'")
    return Path(next(iter(spec.submodule_search_locations)))


def preload_library() -> Path:
    """Path of libdftracer_preload.so inside the installed dftracer wheel."""
    root = dftracer_root()
    for sub in ("lib64", "lib"):
        lib = root / sub / "libdftracer_preload.so"
        if lib.exists():
            return lib
    raise TracerUnavailable(f"libdftracer_preload.so not found under {root}")


def trace_env(log_prefix: Path, data_dir: str = "all", mode: str = "preload") -> dict[str, str]:
    """Environment variables that make dftracer write ``<log_prefix>-<hash>-*.pfw.gz``."""
    env = {
        "DFTRACER_ENABLE": "1",
        "DFTRACER_INC_METADATA": "1",
        "DFTRACER_LOG_FILE": str(log_prefix),
        "DFTRACER_DATA_DIR": data_dir,
    }
    if mode == "preload":
        env.update(DFTRACER_INIT="PRELOAD", LD_PRELOAD=str(preload_library()))
    elif mode == "function":
        env["DFTRACER_INIT"] = "FUNCTION"
    else:
        raise ValueError(f"unknown tracing mode {mode!r} (preload | function)")
    return env
