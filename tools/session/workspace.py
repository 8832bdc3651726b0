"""The session workspace: where a run keeps its iterations, artifacts and traces.

Layout under ``$DFTUNE_HOME/runs/<run_id>/`` (the seed's "session layout")::

    run.json                      run metadata: id, created, workload, status
    baseline/traces/{raw,compact}/
    opt<n>/                       one folder per optimization iteration, n = 1, 2, ...
        source/  patches/  scripts/  traces/raw/  traces/compact/
        optimization_context.json  opt_l1_results.json  opt_l2_results.json  opt_l2_env.sh
        opt_l3_results.json  optimization_papers.json  context_opportunities.json

Artifacts are created on demand, but only the names in :data:`ARTIFACTS` are accepted, and
they live directly in their iteration's folder, never in a hand-built path such as
``ws/opt_results/``.  :meth:`Workspace.validate_structure` finds what is out of place and
:meth:`Workspace.reorganize_structure` moves it back (never overwriting anything) -- the
seed's ``session_validate_structure`` / ``session_reorganize_structure``.

Run ids are a single path component of safe characters, so no id can reach outside
``$DFTUNE_HOME/runs``.  New iterations are numbered with ``os.mkdir`` exclusivity, so two
concurrent callers never get the same ``n``; JSON artifacts are written to a temporary file
and renamed into place, so a reader never sees half a file.
"""

from __future__ import annotations

import json
import os
import re
import secrets
from collections.abc import Iterable
from dataclasses import dataclass, field
from datetime import UTC, datetime
from pathlib import Path, PurePosixPath
from typing import Any, Final, Literal

from pydantic import BaseModel, ConfigDict, ValidationError

from dftune.core.errors import DftuneError
from dftune.core.fsio import atomic_write_bytes
from dftune.core.home import dftune_home
from dftune.tools.session.compact import CompactReport, compact_traces

# --------------------------------------------------------------------------- layout constants

RUNS_DIRNAME: Final = "runs"
RUN_META: Final = "run.json"
BASELINE: Final = "baseline"
TRACE_KINDS: Final = ("raw", "compact")
#: Required folders of an iteration, parents before children.
ITERATION_SUBDIRS: Final = ("source", "patches", "scripts", "traces", "traces/raw", "traces/compact")
BASELINE_SUBDIRS: Final = ("traces", "traces/raw", "traces/compact")

#: The seed's per-iteration artifacts (the only names :meth:`Workspace.artifact_path` accepts).
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
ALLOWED_ROOT_ENTRIES: Final = frozenset(
    {
        RUN_META,
        BASELINE,
        "workload.toml",  # the spec the run was started with
        "journal.jsonl",  # change journal (apply / rollback)
        "checkpoints.sqlite",  # graph checkpointer
        "checkpoints.sqlite-wal",
        "checkpoints.sqlite-shm",
        "report.html",
        "report.md",
        "report.json",
        "logs",
    }
)

TRACE_SUFFIXES: Final = (".pfw", ".pfw.gz")
MAX_RUN_ID_LEN: Final = 128

_RUN_ID_RE = re.compile(r"[A-Za-z0-9][A-Za-z0-9._-]*")
_ITER_RE = re.compile(r"opt([1-9][0-9]*)")
_ITER_HINT_RE = re.compile(r"opt[_-]?([0-9]+)(?![0-9])", re.IGNORECASE)
_TEMP_RE = re.compile(r"\..+\.tmp")

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
    """Not one of the seed's artifact names (or the wrong kind for the call)."""


class IterationNotFound(WorkspaceError, LookupError):
    """The run has no such opt<n> folder."""


# --------------------------------------------------------------------------- models


class RunMeta(BaseModel):
    """``run.json``.  Extra keys written by other components are kept on rewrite."""

    model_config = ConfigDict(extra="allow")

    id: str
    created: datetime
    workload: str
    status: str = "created"
    updated: datetime | None = None


class RunInfo(BaseModel):
    """One line of :meth:`Workspace.list_runs`."""

    model_config = ConfigDict(extra="forbid")

    id: str
    path: str
    created: datetime | None
    workload: str | None
    status: str  # from run.json; "invalid" when run.json is missing or unreadable
    iterations: list[int]


ProblemKind = Literal[
    "missing_run_json",
    "invalid_run_json",
    "missing_subdir",
    "not_a_directory",
    "misplaced_artifact",
    "stray_trace",
    "unknown_entry",
]


class Problem(BaseModel):
    """One thing out of place.  ``path`` is relative to the run folder."""

    model_config = ConfigDict(extra="forbid")

    path: str
    problem: str
    fix: str
    kind: ProblemKind
    fixable: bool  # whether reorganize_structure can fix it on its own


class StructureReport(BaseModel):
    """Result of :meth:`Workspace.validate_structure`."""

    model_config = ConfigDict(extra="forbid")

    run_id: str
    clean: bool
    iterations: list[int]
    problems: list[Problem]
    notes: list[str]  # allowed but worth knowing (gaps in numbering, extra files, ...)


MoveAction = Literal["write_run_json", "mkdir", "move", "rmdir"]
MoveStatus = Literal["planned", "done", "conflict", "skipped", "failed"]


class Move(BaseModel):
    """One step of :meth:`Workspace.reorganize_structure`; paths relative to the run folder."""

    model_config = ConfigDict(extra="forbid")

    action: MoveAction
    src: str | None = None  # move: the file moved; rmdir: the folder removed
    dst: str | None = None  # move: where it goes; mkdir / write_run_json: what is created
    status: MoveStatus = "planned"
    reason: str = ""


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
    if not _RUN_ID_RE.fullmatch(run_id) or ".." in run_id:
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


def _check_iteration(n: object) -> int:
    if isinstance(n, bool) or not isinstance(n, int) or n < 1:
        raise ValueError(f"iteration number must be an integer >= 1, got {n!r}")
    return n


def _owner_name(owner: Owner) -> str:
    return BASELINE if owner is None else f"opt{owner}"


def _is_trace_name(name: str) -> bool:
    return name.endswith(TRACE_SUFFIXES)


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


def _place_no_clobber(src: Path, dst: Path) -> None:
    """Move ``src`` to ``dst``; raise FileExistsError instead of replacing anything.

    A hard link is created first (``link`` fails when ``dst`` exists, atomically) and the
    old name removed.  Where hard links are not supported the move falls back to a rename
    after an existence check."""
    try:
        os.link(src, dst, follow_symlinks=False)
    except FileExistsError:
        raise
    except OSError:
        if os.path.lexists(dst):
            raise FileExistsError(str(dst)) from None
        os.rename(src, dst)
        return
    os.unlink(src)


def _dumps(data: Any) -> bytes:
    if isinstance(data, BaseModel):
        data = data.model_dump(mode="json")
    text = json.dumps(data, indent=2, ensure_ascii=False, allow_nan=False, default=_json_default)
    return (text + "\n").encode("utf-8")


# --------------------------------------------------------------------------- planning state


@dataclass
class _Plan:
    run_dir: Path
    iterations: list[int]
    problems: list[Problem] = field(default_factory=list)
    notes: list[str] = field(default_factory=list)
    steps: list[Move] = field(default_factory=list)
    mkdirs: set[str] = field(default_factory=set)
    blocked: set[str] = field(default_factory=set)  # layout paths taken by a non-directory
    claimed: set[str] = field(default_factory=set)  # destinations of planned moves
    moved: set[str] = field(default_factory=set)  # sources of planned moves
    new_owners: set[Owner] = field(default_factory=set)

    def problem(self, path: str, kind: ProblemKind, problem: str, fix: str, fixable: bool) -> None:
        self.problems.append(Problem(path=path, problem=problem, fix=fix, kind=kind, fixable=fixable))

    def mkdir(self, rel: str) -> None:
        if rel not in self.mkdirs:
            self.mkdirs.add(rel)
            self.steps.append(Move(action="mkdir", dst=rel))


# --------------------------------------------------------------------------- workspace


class Workspace:
    """Runs under ``<home>/runs``; ``home`` defaults to :func:`dftune_home` at each call."""

    def __init__(self, home: str | Path | None = None) -> None:
        self._home = Path(home) if home is not None else None

    # ----- paths

    @property
    def root(self) -> Path:
        """``<home>/runs`` (created on first use)."""
        root = (self._home if self._home is not None else dftune_home()) / RUNS_DIRNAME
        root.mkdir(parents=True, exist_ok=True)
        return root

    def run_dir(self, run_id: str) -> Path:
        """The run's folder (validated id; the folder need not exist)."""
        path = self.root / validate_run_id(run_id)
        if path.is_symlink():
            raise InvalidRunId(f"run folder {path} is a symbolic link; refusing to follow it")
        return path

    def _require_run(self, run_id: str) -> Path:
        path = self.run_dir(run_id)
        if not path.is_dir():
            raise RunNotFound(f"no run {run_id!r} under {self.root}")
        return path

    def baseline_dir(self, run_id: str) -> Path:
        return self.run_dir(run_id) / BASELINE

    def iteration_dir(self, run_id: str, n: int) -> Path:
        """``opt<n>`` of the run (the folder need not exist)."""
        return self.run_dir(run_id) / f"opt{_check_iteration(n)}"

    def traces_dir(self, run_id: str, iteration: int | None, kind: Literal["raw", "compact"] = "raw") -> Path:
        """``<opt<n>|baseline>/traces/<kind>``; ``iteration=None`` is the baseline."""
        if kind not in TRACE_KINDS:
            raise ValueError(f"trace folder kind must be one of {TRACE_KINDS}, got {kind!r}")
        base = self.baseline_dir(run_id) if iteration is None else self.iteration_dir(run_id, iteration)
        return base / "traces" / kind

    def artifact_path(self, run_id: str, n: int, name: str) -> Path:
        """Where artifact ``name`` of iteration ``n`` lives; only the seed's names are accepted."""
        if name not in ARTIFACTS:
            raise UnknownArtifact(f"unknown artifact {name!r}; known: {', '.join(sorted(ARTIFACTS))}")
        return self.iteration_dir(run_id, n) / name

    # ----- runs

    def create_run(self, run_id: str | None, workload: str) -> RunMeta:
        """Create the run folder, ``run.json`` and ``baseline/``; a new id when ``run_id`` is None."""
        rid = new_run_id(workload) if run_id is None else validate_run_id(run_id)
        path = self.run_dir(rid)
        try:
            os.mkdir(path)
        except FileExistsError:
            raise RunExists(f"run {rid!r} already exists at {path}") from None
        meta = RunMeta(id=rid, created=datetime.now(UTC), workload=workload, status="created")
        atomic_write_bytes(path / RUN_META, _dumps(meta))
        for sub in BASELINE_SUBDIRS:
            (path / BASELINE / sub).mkdir(parents=True, exist_ok=True)
        return meta

    def read_meta(self, run_id: str) -> RunMeta:
        path = self._require_run(run_id) / RUN_META
        try:
            return RunMeta.model_validate_json(path.read_bytes())
        except FileNotFoundError:
            raise WorkspaceError(f"run {run_id!r} has no {RUN_META}") from None
        except ValidationError as exc:
            raise WorkspaceError(f"{path} is not valid run metadata: {exc}") from None

    def set_status(self, run_id: str, status: str) -> RunMeta:
        """Rewrite ``run.json`` (atomically) with a new status."""
        if not status:
            raise ValueError("status must be a non-empty string")
        meta = self.read_meta(run_id)
        meta.status = status
        meta.updated = datetime.now(UTC)
        atomic_write_bytes(self.run_dir(run_id) / RUN_META, _dumps(meta))
        return meta

    def iterations(self, run_id: str) -> list[int]:
        """Existing iteration numbers, ascending (gaps possible)."""
        return self._iterations(self._require_run(run_id))

    @staticmethod
    def _iterations(run_dir: Path) -> list[int]:
        found = []
        with os.scandir(run_dir) as it:
            for entry in it:
                m = _ITER_RE.fullmatch(entry.name)
                if m and entry.is_dir(follow_symlinks=False):
                    found.append(int(m.group(1)))
        return sorted(found)

    def list_runs(self) -> list[RunInfo]:
        """Every run under the root, sorted by id (so by creation time for generated ids)."""
        out: list[RunInfo] = []
        for entry in sorted(os.scandir(self.root), key=lambda e: e.name):
            if not entry.is_dir(follow_symlinks=False):
                continue
            try:
                validate_run_id(entry.name)
            except InvalidRunId:
                continue
            path = Path(entry.path)
            created: datetime | None = None
            workload: str | None = None
            status = "invalid"
            try:
                meta = RunMeta.model_validate_json((path / RUN_META).read_bytes())
                created, workload, status = meta.created, meta.workload, meta.status
            except (OSError, ValidationError):
                pass
            out.append(
                RunInfo(
                    id=entry.name,
                    path=str(path),
                    created=created,
                    workload=workload,
                    status=status,
                    iterations=self._iterations(path),
                )
            )
        return out

    # ----- iterations and artifacts

    def new_iteration(self, run_id: str) -> tuple[int, Path]:
        """Create the next ``opt<n>`` with its sub-folders; safe against concurrent callers.

        ``os.mkdir`` either creates the folder or fails, so of two callers racing for the
        same ``n`` exactly one wins and the other moves on to ``n + 1``.  Numbers are never
        reused, even when an earlier iteration was removed."""
        run = self._require_run(run_id)
        n = max(self._iterations(run), default=0) + 1
        while True:
            path = run / f"opt{n}"
            try:
                os.mkdir(path)
            except FileExistsError:
                n += 1
                continue
            break
        for sub in ITERATION_SUBDIRS:
            (path / sub).mkdir(parents=True, exist_ok=True)
        return n, path

    def _existing_artifact_path(self, run_id: str, n: int, name: str) -> Path:
        path = self.artifact_path(run_id, n, name)
        self._require_run(run_id)
        if not path.parent.is_dir() or path.parent.is_symlink():
            raise IterationNotFound(f"run {run_id!r} has no iteration opt{n}")
        return path

    def write_json_artifact(self, run_id: str, n: int, name: str, data: Any) -> Path:
        """Write a JSON artifact atomically (temporary file, fsync, ``os.replace``)."""
        if name not in JSON_ARTIFACTS:
            raise UnknownArtifact(
                f"{name!r} is not a JSON artifact; known: {', '.join(sorted(JSON_ARTIFACTS))}"
            )
        path = self._existing_artifact_path(run_id, n, name)
        atomic_write_bytes(path, _dumps(data))
        return path

    def write_text_artifact(self, run_id: str, n: int, name: str, text: str) -> Path:
        """Write any artifact (e.g. ``opt_l2_env.sh``) atomically."""
        path = self._existing_artifact_path(run_id, n, name)
        atomic_write_bytes(path, text.encode("utf-8"))
        return path

    def read_json_artifact(self, run_id: str, n: int, name: str) -> Any:
        if name not in JSON_ARTIFACTS:
            raise UnknownArtifact(f"{name!r} is not a JSON artifact")
        return json.loads(self.artifact_path(run_id, n, name).read_text(encoding="utf-8"))

    def compact(self, run_id: str, iteration: int | None) -> CompactReport:
        """Compact ``traces/raw`` into ``traces/compact`` for an iteration (None: baseline)."""
        self._require_run(run_id)
        return compact_traces(
            self.traces_dir(run_id, iteration, "raw"), self.traces_dir(run_id, iteration, "compact")
        )

    # ----- structure

    def validate_structure(self, run_id: str) -> StructureReport:
        """Check the run against the layout; nothing is changed.

        Problems: a missing or invalid ``run.json``; missing required sub-folders of the
        baseline or an iteration (or a file where a folder belongs); seed artifacts outside
        their ``opt<n>/`` folder; traces outside ``traces/raw`` or ``traces/compact``;
        unknown entries at the run root.  Each says whether reorganize_structure can fix it.
        Gaps in iteration numbers and unknown files inside an iteration are notes only."""
        return self._analyze(run_id)[0]

    def reorganize_structure(self, run_id: str, dry_run: bool = True) -> list[Move]:
        """Plan (and unless ``dry_run``, perform) the steps that fix validate_structure's
        fixable problems.

        Misplaced artifacts go into their iteration (one named in the path, such as
        ``opt2`` or ``opt_2_results``, else the latest iteration, else a new ``opt1``);
        stray traces go into ``traces/raw`` of the iteration or baseline they belong to
        (named in the path, else the latest iteration, else the baseline); missing folders
        are created; folders left empty by the moves are removed.  Nothing is ever
        overwritten: a move whose target exists is reported as ``conflict`` and left alone.
        ``opt<n>/source/`` (the copy of the user's code) is never touched."""
        steps = self._analyze(run_id)[1]
        if dry_run:
            return steps
        return self._execute(self._require_run(run_id), steps)

    # ..... analysis

    def _analyze(self, run_id: str) -> tuple[StructureReport, list[Move]]:
        run = self._require_run(run_id)
        plan = _Plan(run_dir=run, iterations=self._iterations(run))
        iter_names = {f"opt{n}" for n in plan.iterations}
        with os.scandir(run) as it:
            root_entries = {e.name: e for e in it}

        self._check_meta(run_id, plan, root_entries)
        self._check_layout(plan, root_entries)

        # Walk everything (without following links), skipping the copies of user code.
        for dirpath, dirnames, filenames in os.walk(run):
            rel_dir = Path(dirpath).relative_to(run).parts
            dirnames.sort()
            if len(rel_dir) == 1 and rel_dir[0] in iter_names:
                dirnames[:] = [d for d in dirnames if d != "source"]
            for fn in sorted(filenames):
                self._check_file(plan, (*rel_dir, fn), iter_names)
            if len(rel_dir) == 1 and rel_dir[0] in iter_names:
                for d in dirnames:
                    if d not in {"patches", "scripts", "traces"}:
                        plan.notes.append(f"{rel_dir[0]}/{d}/ is not part of the iteration layout")

        self._check_root_dirs(plan, root_entries, iter_names)
        self._plan_rmdirs(plan, root_entries, iter_names)

        gaps = [n for n in range(1, max(plan.iterations, default=0)) if n not in plan.iterations]
        if gaps:
            plan.notes.append(
                "iteration numbers have gaps (allowed): no " + ", ".join(f"opt{n}" for n in gaps)
            )
        for owner in sorted(plan.new_owners - {None}, key=lambda o: o or 0):
            plan.notes.append(f"reorganize creates {_owner_name(owner)}/ to receive misplaced files")

        order = {"write_run_json": 0, "mkdir": 1, "move": 2, "rmdir": 3}
        plan.steps.sort(key=lambda m: order[m.action])
        report = StructureReport(
            run_id=run_id,
            clean=not plan.problems,
            iterations=plan.iterations,
            problems=plan.problems,
            notes=plan.notes,
        )
        return report, plan.steps

    def _check_meta(self, run_id: str, plan: _Plan, root_entries: dict[str, os.DirEntry[str]]) -> None:
        entry = root_entries.get(RUN_META)
        if entry is None:
            plan.problem(
                RUN_META,
                "missing_run_json",
                "the run has no run.json",
                "reorganize writes a minimal run.json (workload and status 'unknown')",
                True,
            )
            plan.steps.append(Move(action="write_run_json", dst=RUN_META))
            return
        try:
            if not entry.is_file(follow_symlinks=False):
                raise ValueError("not a regular file")
            meta = RunMeta.model_validate_json(Path(entry.path).read_bytes())
        except (OSError, ValueError) as exc:  # ValidationError is a ValueError
            plan.problem(
                RUN_META,
                "invalid_run_json",
                f"run.json is unreadable or invalid ({str(exc).splitlines()[0]})",
                "repair run.json by hand (id, created, workload, status)",
                False,
            )
            return
        if meta.id != run_id:
            plan.problem(
                RUN_META,
                "invalid_run_json",
                f"run.json names run {meta.id!r}, not {run_id!r}",
                f"set its id to {run_id!r} by hand",
                False,
            )

    def _check_layout(self, plan: _Plan, root_entries: dict[str, os.DirEntry[str]]) -> None:
        for name, entry in sorted(root_entries.items()):
            if (name == BASELINE or _ITER_RE.fullmatch(name)) and not entry.is_dir(follow_symlinks=False):
                what = "a symbolic link" if entry.is_symlink() else "not a folder"
                plan.problem(
                    name,
                    "not_a_directory",
                    f"{name} is {what}",
                    f"move it aside by hand so {name}/ can be a real folder",
                    False,
                )
                plan.blocked.add(name)
        if BASELINE not in root_entries:
            plan.problem(
                BASELINE,
                "missing_subdir",
                "the run has no baseline/ folder",
                "reorganize creates baseline/traces/{raw,compact}",
                True,
            )
            for sub in BASELINE_SUBDIRS:
                plan.mkdir(f"{BASELINE}/{sub}")
        elif BASELINE not in plan.blocked:
            self._check_subdirs(plan, None)
        for n in plan.iterations:
            self._check_subdirs(plan, n)

    def _check_subdirs(self, plan: _Plan, owner: Owner) -> None:
        base = _owner_name(owner)
        for sub in BASELINE_SUBDIRS if owner is None else ITERATION_SUBDIRS:
            rel = f"{base}/{sub}"
            if any(rel.startswith(b + "/") for b in plan.blocked):
                continue
            path = plan.run_dir / rel
            if path.is_dir() and not path.is_symlink():
                continue
            if os.path.lexists(path):
                plan.problem(
                    rel,
                    "not_a_directory",
                    f"{rel} should be a folder but is a file or link",
                    f"move it aside by hand so {rel}/ can be created",
                    False,
                )
                plan.blocked.add(rel)
            else:
                plan.problem(
                    rel, "missing_subdir", f"required folder {rel}/ is missing", f"create {rel}/", True
                )
                plan.mkdir(rel)

    def _ensure_owner(self, plan: _Plan, owner: Owner) -> None:
        """Make sure the receiving iteration (or baseline) will exist with its folders."""
        name = _owner_name(owner)
        if name in plan.blocked:
            return
        exists = (plan.run_dir / name).is_dir()
        if not exists and owner not in plan.new_owners:
            plan.new_owners.add(owner)
        if not exists:
            for sub in BASELINE_SUBDIRS if owner is None else ITERATION_SUBDIRS:
                plan.mkdir(f"{name}/{sub}")

    @staticmethod
    def _hint(dir_parts: Iterable[str]) -> int | Literal["baseline", "none"]:
        """The iteration (or baseline) a hand-built path names, deepest folder first."""
        for part in reversed(list(dir_parts)):
            m = _ITER_HINT_RE.match(part)
            if m and int(m.group(1)) >= 1:
                return int(m.group(1))
            if part.lower().startswith(BASELINE):
                return "baseline"
        return "none"

    def _check_file(self, plan: _Plan, parts: tuple[str, ...], iter_names: set[str]) -> None:
        name = parts[-1]
        rel = "/".join(parts)
        top = parts[0] if len(parts) > 1 else ""
        top_iter: int | None = int(top[3:]) if top in iter_names else None
        latest = max(plan.iterations, default=None)
        hint = self._hint(parts[:-1])
        owner: Owner
        if name in ARTIFACTS:
            if len(parts) == 2 and top_iter is not None:
                return
            fallback = hint if isinstance(hint, int) else (latest or 1)
            owner = top_iter if top_iter is not None else fallback
            self._plan_move(plan, rel, f"opt{owner}/{name}", owner, "misplaced_artifact")
            return
        if _is_trace_name(name):
            if (
                len(parts) >= 4
                and (top_iter is not None or top == BASELINE)
                and parts[1] == "traces"
                and parts[2] in TRACE_KINDS
            ):
                return
            if top_iter is not None:
                owner = top_iter
            elif top == BASELINE:
                owner = None
            else:
                owner = hint if isinstance(hint, int) else (None if hint == "baseline" else latest)
            self._plan_move(plan, rel, f"{_owner_name(owner)}/traces/raw/{name}", owner, "stray_trace")
            return
        if len(parts) == 1:
            if name in ALLOWED_ROOT_ENTRIES or _ITER_RE.fullmatch(name):
                return
            if _TEMP_RE.fullmatch(name):
                plan.notes.append(f"{rel} looks like a leftover temporary file from an interrupted write")
                return
            plan.problem(
                rel,
                "unknown_entry",
                f"unknown file {rel} at the run root",
                "move it into an iteration's scripts/ folder or remove it by hand",
                False,
            )
        elif len(parts) == 2 and top in iter_names:
            plan.notes.append(f"{rel} is not a known artifact of the iteration")

    def _plan_move(self, plan: _Plan, src: str, dst: str, owner: Owner, kind: ProblemKind) -> None:
        what = "artifact" if kind == "misplaced_artifact" else "trace"
        where = (
            "outside its iteration folder" if kind == "misplaced_artifact" else "outside traces/raw|compact"
        )
        text = f"{what} {src} is {where}"
        dst_parent = str(PurePosixPath(dst).parent)
        blocked = [b for b in plan.blocked if dst_parent == b or dst_parent.startswith(b + "/")]
        if blocked:
            reason = f"{blocked[0]} is not a folder"
        elif dst in plan.claimed:
            reason = f"another misplaced file is already moved to {dst}"
        elif os.path.lexists(plan.run_dir / dst):
            reason = f"{dst} already exists"
        else:
            self._ensure_owner(plan, owner)
            plan.claimed.add(dst)
            plan.moved.add(src)
            plan.steps.append(Move(action="move", src=src, dst=dst))
            plan.problem(src, kind, text, f"move it to {dst}", True)
            return
        plan.steps.append(Move(action="move", src=src, dst=dst, status="conflict", reason=reason))
        plan.problem(
            src,
            kind,
            f"{text}; it cannot be moved to {dst}: {reason}",
            "compare it with the file already there and keep one by hand (nothing is overwritten)",
            False,
        )

    def _check_root_dirs(
        self, plan: _Plan, root_entries: dict[str, os.DirEntry[str]], iter_names: set[str]
    ) -> None:
        for name, entry in sorted(root_entries.items()):
            if name in iter_names or name == BASELINE or name in ALLOWED_ROOT_ENTRIES:
                continue
            if _ITER_RE.fullmatch(name):
                continue  # reported as not_a_directory
            if entry.is_symlink():
                if not entry.is_dir():
                    continue  # a link to a file: reported by _check_file
                plan.problem(
                    name,
                    "unknown_entry",
                    f"unknown symbolic link {name} at the run root",
                    "remove it by hand (links are never followed)",
                    False,
                )
            elif entry.is_dir(follow_symlinks=False):
                leftovers = self._leftovers(plan, name)
                if leftovers:
                    shown = ", ".join(leftovers[:3]) + (" ..." if len(leftovers) > 3 else "")
                    plan.problem(
                        name + "/",
                        "unknown_entry",
                        f"unknown folder {name}/ at the run root (holds {shown})",
                        "move what it holds into the right opt<n>/ folder or remove it by hand",
                        False,
                    )
                else:
                    plan.problem(
                        name + "/",
                        "unknown_entry",
                        f"unknown folder {name}/ at the run root",
                        "reorganize moves the artifacts and traces out of it and removes it",
                        True,
                    )
            # unknown root files are reported by _check_file

    def _leftovers(self, plan: _Plan, rel_dir: str) -> list[str]:
        """Entries under ``rel_dir`` that no planned move takes away (links count as entries)."""
        left: list[str] = []
        for dirpath, dirnames, filenames in os.walk(plan.run_dir / rel_dir):
            base = Path(dirpath).relative_to(plan.run_dir)
            for d in dirnames:
                if (Path(dirpath) / d).is_symlink():
                    left.append((base / d).as_posix())
            for f in filenames:
                rel = (base / f).as_posix()
                if rel not in plan.moved:
                    left.append(rel)
        return sorted(left)

    def _plan_rmdirs(
        self, plan: _Plan, root_entries: dict[str, os.DirEntry[str]], iter_names: set[str]
    ) -> None:
        """Folders the planned moves leave empty, and unknown root folders that hold nothing
        else (empty sub-folders included).  Layout folders, allowed root entries and
        ``opt<n>/source/`` are never removed."""
        protected = {*ALLOWED_ROOT_ENTRIES, *iter_names}
        for owner_name in (BASELINE, *iter_names):
            protected.update(f"{owner_name}/{sub}" for sub in ITERATION_SUBDIRS)
        memo: dict[str, bool] = {}

        def removable(rel: str) -> bool:
            if rel not in memo:
                ok = rel not in protected and not any(
                    rel == f"{it}/source" or rel.startswith(f"{it}/source/") for it in iter_names
                )
                if ok:
                    with os.scandir(plan.run_dir / rel) as it:
                        for entry in it:
                            child = f"{rel}/{entry.name}"
                            if entry.is_dir(follow_symlinks=False):
                                ok = removable(child)
                            else:
                                ok = child in plan.moved
                            if not ok:
                                break
                memo[rel] = ok
            return memo[rel]

        candidates: set[str] = set()
        for src in plan.moved:
            parent = PurePosixPath(src).parent
            while str(parent) != ".":
                candidates.add(str(parent))
                parent = parent.parent
        for name, entry in root_entries.items():
            if name not in protected and not _ITER_RE.fullmatch(name) and entry.is_dir(follow_symlinks=False):
                candidates.add(name)
        remove: set[str] = set()
        for c in candidates:
            if removable(c):
                for dirpath, _, _ in os.walk(plan.run_dir / c):
                    remove.add(Path(dirpath).relative_to(plan.run_dir).as_posix())
        for c in sorted(remove, key=lambda p: (-p.count("/"), p)):
            plan.steps.append(Move(action="rmdir", src=c, reason="left empty by the moves"))

    # ..... execution

    def _execute(self, run: Path, steps: list[Move]) -> list[Move]:
        done: list[Move] = []
        for step in steps:
            step = step.model_copy()
            if step.status != "planned":
                done.append(step)
                continue
            try:
                if step.action == "write_run_json":
                    meta = RunMeta(
                        id=run.name, created=datetime.now(UTC), workload="unknown", status="unknown"
                    )
                    atomic_write_bytes(run / RUN_META, _dumps(meta), exclusive=True)
                elif step.action == "mkdir":
                    assert step.dst is not None
                    (run / step.dst).mkdir(parents=True, exist_ok=True)
                elif step.action == "move":
                    assert step.src is not None and step.dst is not None
                    dst = run / step.dst
                    dst.parent.mkdir(parents=True, exist_ok=True)
                    _place_no_clobber(run / step.src, dst)
                else:  # rmdir
                    assert step.src is not None
                    os.rmdir(run / step.src)
                step.status = "done"
            except FileExistsError:
                step.status = "conflict"
                step.reason = f"{step.dst} appeared in the meantime; nothing was overwritten"
            except OSError as exc:
                step.status = "skipped" if step.action == "rmdir" else "failed"
                step.reason = f"{exc.strerror or exc}"
            done.append(step)
        return done


# --------------------------------------------------------------------------- module-level API


def validate_structure(run_id: str) -> StructureReport:
    """``session_validate_structure``: check a run under ``$DFTUNE_HOME``."""
    return Workspace().validate_structure(run_id)


def reorganize_structure(run_id: str, dry_run: bool = True) -> list[Move]:
    """``session_reorganize_structure``: plan (or with ``dry_run=False`` apply) the fixes."""
    return Workspace().reorganize_structure(run_id, dry_run=dry_run)


__all__ = [
    "ALLOWED_ROOT_ENTRIES",
    "ARTIFACTS",
    "BASELINE_SUBDIRS",
    "ITERATION_SUBDIRS",
    "JSON_ARTIFACTS",
    "InvalidRunId",
    "IterationNotFound",
    "Move",
    "Problem",
    "RunExists",
    "RunInfo",
    "RunMeta",
    "RunNotFound",
    "StructureReport",
    "UnknownArtifact",
    "Workspace",
    "WorkspaceError",
    "new_run_id",
    "reorganize_structure",
    "validate_run_id",
    "validate_structure",
]
