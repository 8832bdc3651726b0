"""The MCP tools' registry and the one way a tool is called: validate, run, fail in one line."""

from __future__ import annotations

import re
from collections.abc import Callable
from dataclasses import dataclass
from pathlib import Path
from typing import Any, Literal

from pydantic import BaseModel, Field, ValidationError

from dftune.core.errors import DftuneError, one_line, os_error_message
from dftune.core.model import StrictModel
from dftune.core.vocabulary import CATEGORIES

View = Literal["summary", "file", "proc", "time", "layer"]
Bottleneck = Literal[CATEGORIES]  # type: ignore[valid-type]
#: View rows returned per view unless the caller asks for more (file views of ML datasets are huge).
DEFAULT_MAX_ROWS = 50


class ToolFailure(DftuneError):
    """An anticipated failure; :func:`call` prefixes the tool's name to make the line the client sees."""


class _In(StrictModel):
    """A tool's arguments: a field the tool does not have is an error the client sees."""


Paths = Field(
    min_length=1,
    description="dftracer traces (.pfw, .pfw.gz), Darshan logs (.darshan, recognised by "
    "content) or directories searched recursively; one kind per call.",
)
SkipBad = Field(False, description="Analyze around bad lines/files and report them instead of failing.")
RunId = Field(min_length=1, description="Run id, a folder under $DFTUNE_HOME/runs (see `dftune runs`).")
Iteration = Field(
    "baseline",
    description="Which traces of the run: 'baseline', 'latest' (highest opt<n>), 'opt<n>' or just n.",
)
MaxRows = Field(
    DEFAULT_MAX_ROWS, ge=1, le=100_000, description="Rows kept per view (the rest are counted, not listed)."
)


@dataclass(frozen=True)
class ToolSpec:
    name: str
    description: str
    params: type[BaseModel]
    run: Callable[[Any], dict[str, Any]]
    read_only: bool = True


class Toolbox:
    """The tools of one module: one place lists name, schema and description, so list_tools cannot drift."""

    def __init__(self) -> None:
        self.specs: list[ToolSpec] = []

    def tool(
        self, name: str, params: type[BaseModel], description: str, *, read_only: bool = True
    ) -> Callable[[Callable[[Any], dict[str, Any]]], Callable[[Any], dict[str, Any]]]:
        def register(fn: Callable[[Any], dict[str, Any]]) -> Callable[[Any], dict[str, Any]]:
            self.specs.append(ToolSpec(name, " ".join(description.split()), params, fn, read_only))
            return fn

        return register


def run_tool(spec: ToolSpec, arguments: dict[str, Any] | None) -> dict[str, Any]:
    """Validate the arguments and run the tool; every anticipated failure is one ToolFailure line."""
    name = spec.name
    try:
        args = spec.params.model_validate(arguments or {})
    except ValidationError as exc:
        raise ToolFailure(f"{name}: invalid arguments: {_validation_line(exc)}") from None
    try:
        return spec.run(args)
    except ValidationError as exc:  # a record validated inside the wrapped function
        raise ToolFailure(f"{name}: {_validation_line(exc)}") from None
    except ToolFailure as exc:
        raise ToolFailure(f"{name}: {one_line(exc)}") from None
    except _user_errors() as exc:
        raise ToolFailure(f"{name}: {one_line(exc)}") from None
    except OSError as exc:
        raise ToolFailure(f"{name}: {os_error_message(exc)}") from None  # a huge path is cut


def _user_errors() -> tuple[type[BaseException], ...]:
    """The errors a caller can fix (bad traces, ids, records); anything else is an internal error."""
    return (DftuneError, ValueError)


def _validation_line(exc: ValidationError) -> str:
    parts = []
    for err in exc.errors():
        loc = ".".join(str(x) for x in err["loc"])
        msg = str(err["msg"]).removeprefix("Value error, ")
        parts.append(f"{loc}: {msg}" if loc else msg)
    return " ".join("; ".join(parts).split())


# --------------------------------------------------------------------------- shared helpers


def summary_only() -> list[View]:
    return ["summary"]


def trim_views(doc: dict[str, Any], max_rows: int) -> dict[str, Any]:
    """Cut long view tables so a client's context is not flooded; say how many rows there were."""
    for view in doc.get("views", {}).values():
        rows = view.get("rows") if isinstance(view, dict) else None
        if isinstance(rows, list) and len(rows) > max_rows:
            view["rows_total"] = len(rows)
            view["rows"] = rows[:max_rows]
        heat = view.get("heatmap") if isinstance(view, dict) else None
        if isinstance(heat, dict) and len(heat.get("ranks") or []) > max_rows:  # a row per process
            for key in ("ranks", "read_bytes", "write_bytes", "io_time_s"):
                if isinstance(heat.get(key), list):
                    heat[key] = heat[key][:max_rows]
            heat["ranks_shown"] = max_rows
    return doc


def iteration_number(run_id: str, iteration: str) -> int | None:
    """'baseline' -> None; 'latest' -> highest opt<n> (baseline when none); 'opt<n>'/'n' -> n (must exist)."""
    from dftune.tools.session.workspace import IterationNotFound, Workspace

    its = Workspace().iterations(run_id)  # RunNotFound for an unknown id
    text = iteration.strip().lower()
    if text == "baseline":
        return None
    if text == "latest":
        return its[-1] if its else None
    m = re.fullmatch(r"(?:opt)?([1-9][0-9]*)", text)
    if not m:
        raise ToolFailure(f"iteration {iteration!r}: expected 'baseline', 'latest', 'opt<n>' or n")
    n = int(m.group(1))
    if n not in its:
        have = ", ".join(f"opt{i}" for i in its) or "none"
        raise IterationNotFound(f"run {run_id!r} has no opt{n} (iterations: {have})")
    return n


def run_traces(run_id: str, iteration: str, kind: Literal["raw", "compact"] = "raw") -> tuple[Path, str]:
    """The trace folder of a run's baseline or opt<n>, and its label."""
    from dftune.tools.session.workspace import Workspace

    n = iteration_number(run_id, iteration)
    path = Workspace().traces_dir(run_id, n, kind)
    return path, "baseline" if n is None else f"opt{n}"
