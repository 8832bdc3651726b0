"""Where the test suite's Darshan logs are: those PyDarshan ships in its wheel, and the
darshan-hpc/darshan-logs collection copied into tests/data/darshan_logs (see its README)."""

from __future__ import annotations

import warnings
from pathlib import Path
from typing import Any

import darshan

PYDARSHAN = Path(darshan.__file__).parent
COLLECTION = Path(__file__).parent / "data" / "darshan_logs"


def shipped_logs() -> list[Path]:
    """Every log inside the installed PyDarshan (tests/input
    and examples/example_logs), deduplicated by name."""
    found: dict[str, Path] = {}
    for folder in ("tests/input", "examples/example_logs"):
        for f in sorted((PYDARSHAN / folder).glob("*.darshan")):
            found.setdefault(f.name, f)
    return list(found.values())


def shipped(name: str) -> Path:
    for f in shipped_logs():
        if f.name == name:
            return f
    raise FileNotFoundError(name)


def collection(relative: str) -> Path:
    path = COLLECTION / relative
    if not path.exists():
        raise FileNotFoundError(path)
    return path


def all_single_logs() -> list[Path]:
    """Shipped logs plus every single-job log of the collection (DLIO's per-process logs excluded)."""
    extra = sorted(f for f in COLLECTION.rglob("*.darshan") if "dlio_logs" not in f.parts)
    return shipped_logs() + extra


def pydarshan_report(path: Path) -> Any:
    """PyDarshan's own reading of ``path`` (every record loaded), its log handle already closed.

    A report left open is closed by its ``__del__`` whenever the garbage collector runs, and that
    can be inside cffi's type parser, which holds the lock that closing needs: the test process
    then hangs for good (seen under ``make test``). Closing it here keeps the records in memory."""
    with warnings.catch_warnings():
        warnings.simplefilter("ignore")
        with darshan.DarshanReport(str(path), read_all=True) as r:
            return r
