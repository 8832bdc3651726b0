"""The session layout: where a run keeps its iterations, artifacts and traces, and its ids.

Layout under ``$DFTUNE_HOME/runs/<run_id>/`` (the "session layout" of the dftracer-io-optimization skill)::

    run.json                      run metadata: id, created, workload, status
    baseline/traces/{raw,compact}/
    opt<n>/                       one folder per optimization iteration, n = 1, 2, ...
        source/  patches/  scripts/  traces/raw/  traces/compact/
        optimization_context.json  opt_l1_results.json  opt_l2_results.json  opt_l2_env.sh
        opt_l3_results.json  optimization_papers.json  context_opportunities.json

Run ids are a single path component of safe characters, so no id can reach outside
``$DFTUNE_HOME/runs``.
"""

from __future__ import annotations

import os
import re
import secrets
from datetime import UTC, datetime
from pathlib import Path, PurePosixPath
from typing import Any, Final

from pydantic import BaseModel, ConfigDict, ValidationError

from dftune.core import strictjson
from dftune.core.errors import DftuneError
from dftune.core.fsio import read_regular
from dftune.core.model import StrictModel

RUNS_DIRNAME: Final = "runs"
RUN_META: Final = "run.json"
BASELINE: Final = "baseline"
TRACE_KINDS: Final = ("raw", "compact")
#: Required folders of an iteration, parents before children.
ITERATION_SUBDIRS: Final = ("source", "patches", "scripts", "traces", "traces/raw", "traces/compact")
BASELINE_SUBDIRS: Final = ("traces", "traces/raw", "traces/compact")

#: The skill's per-iteration artifacts (the only names :meth:`Workspace.artifact_path` accepts).
ARTIFACTS: Final = frozenset(
    {
        "optimization_context.json",  # metric, bottlenecks, papers: shared context
        "opt_l1_results.json",  # L1 proposals, status, files modified
        "opt_l2_results.json",  # L2 proposals, env vars applied
        "opt_l2_env.sh",  # sourced before each run to keep L2 settings
        "opt_l3_results.json",  # L3 changes + rollback commands
        "optimization_papers.json",  # full literature search results
        "context_opportunities.json",  # session_search_optimization_context output
    }
)
JSON_ARTIFACTS: Final = frozenset(a for a in ARTIFACTS if a.endswith(".json"))

#: Entries other components may keep at the run root besides run.json, baseline/ and opt<n>/.
#: Anything else there is reported by validate_structure.  Register new names here.
#: the run's bundle: its kept configuration as a folder
RUN_BUNDLE: Final = "bundle"
ALLOWED_ROOT_ENTRIES: Final = frozenset(
    {
        RUN_META,
        BASELINE,
        "workload.toml",  # the spec the run was started with
        "journal.jsonl",  # change journal (apply / rollback)
        "checkpoints.sqlite",  # graph checkpointer
        "checkpoints.sqlite-wal",
        "checkpoints.sqlite-shm",
        "driver.lock",  # held (flock) by the one process driving the run, with its pid
        "processes.json",  # the process groups of the run's programs (killed by the next driver)
        "report.html",
        "report.md",
        "report.json",
        "logs",
        "hints",  # ROMIO hint files of the run's proposals and the hints in effect before any change
        "levers.json",  # the program's own levers the run drafted (tools/runner/levers.py)
        "levers",  # the env-gated copy of the program's source those levers need, and its diff
        RUN_BUNDLE,  # the kept configuration as a folder (tools/bundle.py, docs/bundle.md)
    }
)

MAX_RUN_ID_LEN: Final = 128

RUN_ID_RE = re.compile(r"[A-Za-z0-9][A-Za-z0-9._-]*")
ITER_RE = re.compile(r"opt([1-9][0-9]*)")
ITER_HINT_RE = re.compile(r"opt[_-]?([0-9]+)(?![0-9])", re.IGNORECASE)
TEMP_RE = re.compile(r"\..+\.tmp")

Owner = int | None  # an iteration number, or None for the baseline


# --------------------------------------------------------------------------- errors


class WorkspaceError(DftuneError):
    """Base class of every workspace error."""


class InvalidRunId(WorkspaceError, ValueError):
    """The run id is not a safe single path component."""


class RunNotFound(WorkspaceError, LookupError):
    """No such run under $DFTUNE_HOME/runs."""


class RunExists(WorkspaceError):
    """create_run was given an id that is already taken."""


class UnknownArtifact(WorkspaceError, ValueError):
    """Not one of the skill's artifact names (or the wrong kind for the call)."""


class IterationNotFound(WorkspaceError, LookupError):
    """The run has no such opt<n> folder."""


class RunLocked(WorkspaceError):
    """Another process is driving the run (run, resume, approve or replay): one driver per run."""


# --------------------------------------------------------------------------- run metadata


class RunMeta(StrictModel):
    """``run.json``.  Extra keys written by other components are kept on rewrite."""

    model_config = ConfigDict(extra="allow")

    id: str
    created: datetime
    workload: str
    status: str = "created"
    updated: datetime | None = None
    #: the run a replay forked from, and the saved state (None: a run started anew)
    parent: str | None = None
    parent_checkpoint: str | None = None
    parent_step: int | None = None


#: The most of ``run.json`` read: a few hundred bytes of metadata (with a reason line)
RUN_META_BYTES = 1 << 20


def read_run_meta(run_dir: Path, run_id: str) -> RunMeta:
    """``run.json`` of the run folder; a missing, unreadable (a pipe, a link to a device, larger than
    :data:`RUN_META_BYTES`) or invalid one is a :class:`WorkspaceError` in one line naming it."""
    path = run_dir / RUN_META
    try:
        return RunMeta.model_validate_json(read_regular(path, RUN_META_BYTES, "run metadata"))
    except FileNotFoundError:
        raise WorkspaceError(f"run {run_id!r} has no {RUN_META} ({path})") from None
    except DftuneError as exc:
        raise WorkspaceError(str(exc)) from None
    except ValidationError as exc:
        first = exc.errors()[0]
        where = ".".join(str(x) for x in first["loc"]) or "(the document)"
        raise WorkspaceError(f"{path}: not valid run metadata: {where}: {first['msg']}") from None


class RunInfo(BaseModel):
    """One line of :meth:`Workspace.list_runs`."""

    id: str
    path: str
    created: datetime | None
    workload: str | None
    status: str  # from run.json; "invalid" when run.json is missing or unreadable
    iterations: list[int]
    #: why it failed or stopped, when run.json says
    reason: str = ""
    #: the pid of the process driving it now (None: nobody)
    driver_pid: int | None = None
    #: what to run to continue it (``dftune resume ID``, ``dftune approve ID``), when something is left
    next_step: str | None = None
    #: what a replay forked from, as a person reads it: ``RUN at step N`` (None: started anew)
    parent: str | None = None


# --------------------------------------------------------------------------- helpers


def validate_run_id(run_id: object) -> str:
    """Return ``run_id`` if it is a safe run id, else raise :class:`InvalidRunId`.

    Safe: 1..128 characters from letters, digits, ``-``, ``_`` and ``.``, starting with a
    letter or digit, without ``..``.  Such an id is one path component that can never name
    a parent folder, an absolute path, a hidden file or a command-line option."""
    if not isinstance(run_id, str) or not run_id:
        raise InvalidRunId("run id must be a non-empty string")
    if len(run_id) > MAX_RUN_ID_LEN:
        raise InvalidRunId(f"run id is longer than {MAX_RUN_ID_LEN} characters")
    if not RUN_ID_RE.fullmatch(run_id) or ".." in run_id:
        raise InvalidRunId(
            f"run id {run_id!r} may only use letters, digits, '-', '_' and '.', must start with a "
            "letter or digit and must not contain '..'"
        )
    return run_id


def new_run_id(workload: str = "", *, now: datetime | None = None) -> str:
    """A unique, sortable run id: ``20250102T030405.678Z-<workload slug>-<6 hex>``.

    Lexicographic order is chronological order (to the millisecond); the random suffix
    keeps ids made in the same millisecond apart."""
    t = (now or datetime.now(UTC)).astimezone(UTC)
    stamp = t.strftime("%Y%m%dT%H%M%S") + f".{t.microsecond // 1000:03d}Z"
    slug = re.sub(r"[^a-z0-9]+", "-", workload.lower()).strip("-")[:48].strip("-")
    parts = [stamp, slug, secrets.token_hex(3)] if slug else [stamp, secrets.token_hex(3)]
    return validate_run_id("-".join(parts))


def check_iteration(n: object) -> int:
    if isinstance(n, bool) or not isinstance(n, int) or n < 1:
        raise ValueError(f"iteration number must be an integer >= 1, got {n!r}")
    return n


def _json_default(obj: object) -> Any:
    if isinstance(obj, BaseModel):
        return obj.model_dump(mode="json")
    if isinstance(obj, datetime):
        return obj.isoformat()
    if isinstance(obj, Path | PurePosixPath):
        return str(obj)
    if isinstance(obj, set | frozenset | tuple):
        return sorted(obj) if isinstance(obj, set | frozenset) else list(obj)
    raise TypeError(f"{type(obj).__name__} is not JSON serializable")


def dumps_json(data: Any, where: str | Path = "a run file") -> bytes:
    if isinstance(data, BaseModel):
        data = data.model_dump(mode="json")
    text = strictjson.dumps_checked(data, where, indent=2, ensure_ascii=False, default=_json_default)
    return (text + "\n").encode("utf-8")


def iterations_in(run_dir: Path) -> list[int]:
    """Iteration numbers present in a run folder, ascending (gaps possible)."""
    found = []
    with os.scandir(run_dir) as it:
        for entry in it:
            m = ITER_RE.fullmatch(entry.name)
            if m and entry.is_dir(follow_symlinks=False):
                found.append(int(m.group(1)))
    return sorted(found)
