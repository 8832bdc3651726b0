"""The session workspace: runs under ``$DFTUNE_HOME/runs``, their iterations and artifacts.

The layout and ids are in :mod:`layout`, the structure check in :mod:`structure`.
Artifacts are created on demand, but only the names in ``layout.ARTIFACTS`` are accepted,
and they live directly in their iteration's folder. New iterations are numbered with
``os.mkdir`` exclusivity, so two concurrent callers never get the same ``n``; JSON artifacts
are written atomically, so a reader never sees half a file.
"""

from __future__ import annotations

import fcntl
import hashlib
import os
import stat
import time
from collections.abc import Iterator
from contextlib import contextmanager, suppress
from datetime import UTC, datetime
from pathlib import Path
from typing import Any, Literal

from dftune.core import strictjson
from dftune.core.errors import DftuneError, is_storage_error, one_line, storage_error
from dftune.core.fsio import atomic_write_bytes, confined, read_regular
from dftune.core.home import dftune_home
from dftune.tools.session.compact import CompactReport, compact_traces
from dftune.tools.session.layout import (
    ARTIFACTS,
    BASELINE,
    BASELINE_SUBDIRS,
    ITERATION_SUBDIRS,
    JSON_ARTIFACTS,
    RUN_META,
    RUNS_DIRNAME,
    TRACE_KINDS,
    InvalidRunId,
    IterationNotFound,
    RunExists,
    RunInfo,
    RunLocked,
    RunMeta,
    RunNotFound,
    UnknownArtifact,
    WorkspaceError,
    check_iteration,
    dumps_json,
    iterations_in,
    new_run_id,
    read_run_meta,
    validate_run_id,
)
from dftune.tools.session.structure import Move, StructureReport, reorganize_run, validate_run

DRIVER_LOCK = "driver.lock"
#: How long a second driver retries before it refuses (a ``dftune runs`` probe holds the lock
#: for microseconds; a real driver holds it for the whole drive).
LOCK_RETRY_S = 0.5
#: The status that means "a process is working on it"; without a live driver it is shown as
#: interrupted, never as running.
ACTIVE_STATUSES = frozenset({"running"})
#: The most of a lock file read: a pid and a newline
LOCK_BYTES = 64


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
        root = self.root
        path = root / validate_run_id(run_id)
        if path.is_symlink():
            raise InvalidRunId(f"run folder {path} is a symbolic link; refusing to follow it")
        confined(path, root, "the runs folder")
        return path

    def process_owner(self, run_id: str) -> str:
        """The owner tag of the run's programs: the run id and a key of this home, so a driver that
        cleans up what a dead driver of ``run_id`` left never touches another home's run of that id
        (two users' ``nightly`` on one machine)."""
        key = hashlib.sha1(str(self.root.resolve()).encode("utf-8")).hexdigest()[:8]
        return f"{validate_run_id(run_id)}@{key}"

    def _require_run(self, run_id: str) -> Path:
        path = self.run_dir(run_id)
        if not path.is_dir():
            raise RunNotFound(f"no run {run_id!r} under {self.root}")
        return path

    def baseline_dir(self, run_id: str) -> Path:
        return self.run_dir(run_id) / BASELINE

    def iteration_dir(self, run_id: str, n: int) -> Path:
        """``opt<n>`` of the run (the folder need not exist)."""
        return self.run_dir(run_id) / f"opt{check_iteration(n)}"

    def traces_dir(self, run_id: str, iteration: int | None, kind: Literal["raw", "compact"] = "raw") -> Path:
        """``<opt<n>|baseline>/traces/<kind>``; ``iteration=None`` is the baseline."""
        if kind not in TRACE_KINDS:
            raise ValueError(f"trace folder kind must be one of {TRACE_KINDS}, got {kind!r}")
        base = self.baseline_dir(run_id) if iteration is None else self.iteration_dir(run_id, iteration)
        return base / "traces" / kind

    def artifact_path(self, run_id: str, n: int, name: str) -> Path:
        """Where artifact ``name`` of iteration ``n`` lives; only the skill's artifact names pass."""
        if name not in ARTIFACTS:
            raise UnknownArtifact(f"unknown artifact {name!r}; known: {', '.join(sorted(ARTIFACTS))}")
        return self.iteration_dir(run_id, n) / name

    # ----- runs

    def create_run(
        self, run_id: str | None, workload: str, parent: tuple[str, str, int | None] | None = None
    ) -> RunMeta:
        """Create the run folder, ``run.json`` and ``baseline/``; a new id when ``run_id`` is None;
        ``parent``: the run, checkpoint and step a replay forks from."""
        rid = new_run_id(workload) if run_id is None else validate_run_id(run_id)
        path = self.run_dir(rid)
        try:
            os.mkdir(path)
        except FileExistsError:
            raise RunExists(f"run {rid!r} already exists at {path}") from None
        meta = RunMeta(id=rid, created=datetime.now(UTC), workload=workload, status="created")
        if parent is not None:
            meta.parent, meta.parent_checkpoint, meta.parent_step = parent
        atomic_write_bytes(path / RUN_META, dumps_json(meta, path / RUN_META))
        for sub in BASELINE_SUBDIRS:
            (path / BASELINE / sub).mkdir(parents=True, exist_ok=True)
        return meta

    def read_meta(self, run_id: str) -> RunMeta:
        return read_run_meta(self._require_run(run_id), run_id)

    def set_status(self, run_id: str, status: str, reason: str = "", next_step: str | None = None) -> RunMeta:
        """Rewrite ``run.json`` (atomically) with a new status, why, and what continues it."""
        if not status:
            raise ValueError("status must be a non-empty string")
        meta = self.read_meta(run_id)
        meta.status = status
        setattr(meta, "reason", reason)  # noqa: B010 - extra keys of run.json
        setattr(meta, "next_step", next_step)  # noqa: B010
        meta.updated = datetime.now(UTC)
        atomic_write_bytes(self.run_dir(run_id) / RUN_META, dumps_json(meta, self.run_dir(run_id) / RUN_META))
        return meta

    # ----- the one driver of a run

    @contextmanager
    def driving(self, run_id: str) -> Iterator[None]:
        """Hold the run's driver lock (``flock`` on ``driver.lock``, with this pid in it) for the block.

        One process drives a run at a time (run, resume, approve, replay); a second one gets
        :class:`RunLocked` naming the holder's pid. The kernel drops the lock when the holder
        dies, even by SIGKILL, so a dead driver never blocks the next one."""
        path = self._require_run(run_id) / DRIVER_LOCK
        try:  # non-blocking: a named pipe planted at the name must not hang the open
            fd = os.open(path, os.O_RDWR | os.O_CREAT | os.O_NOFOLLOW | os.O_CLOEXEC | os.O_NONBLOCK, 0o644)
        except OSError as exc:  # a read-only or full DFTUNE_HOME: nothing can be driven until it is fixed
            raise storage_error(exc, path) if is_storage_error(exc) else exc from None
        try:
            if not stat.S_ISREG(os.fstat(fd).st_mode):
                raise WorkspaceError(
                    f"{path}: the run's lock is not a regular file (a pipe or a device): remove it, retry"
                )
            deadline = time.monotonic() + LOCK_RETRY_S
            while True:
                try:
                    fcntl.flock(fd, fcntl.LOCK_EX | fcntl.LOCK_NB)
                    break
                except BlockingIOError:
                    if time.monotonic() >= deadline:
                        holder = _lock_pid(path)
                        who = f"pid {holder}" if holder else "another process"
                        raise RunLocked(
                            f"run {run_id} is being driven by {who} (lock {path}): one driver "
                            "per run; wait for it to end or stop it"
                        ) from None
                    time.sleep(0.02)
            with suppress(OSError):  # the pid is for the message of a refused driver; the lock holds anyway
                os.ftruncate(fd, 0)
                os.pwrite(fd, f"{os.getpid()}\n".encode(), 0)
            yield
        finally:
            os.close(fd)

    def driver_pid(self, run_id: str) -> int | None:
        """The pid of the process driving the run now, None when nobody does."""
        path = self.run_dir(run_id) / DRIVER_LOCK
        try:  # non-blocking: opening a named pipe planted at the name would wait for a writer
            fd = os.open(path, os.O_RDONLY | os.O_NOFOLLOW | os.O_CLOEXEC | os.O_NONBLOCK)
        except OSError:
            return None
        try:
            if not stat.S_ISREG(os.fstat(fd).st_mode):  # no driver can hold such a lock
                return None
            fcntl.flock(fd, fcntl.LOCK_SH | fcntl.LOCK_NB)
        except BlockingIOError:
            return _lock_pid(path) or -1
        finally:
            os.close(fd)
        return None

    def iterations(self, run_id: str) -> list[int]:
        """Existing iteration numbers, ascending (gaps possible)."""
        return self._iterations(self._require_run(run_id))

    @staticmethod
    def _iterations(run_dir: Path) -> list[int]:
        return iterations_in(run_dir)

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
            status, reason, next_step, parent = "invalid", "", None, None
            try:
                meta = read_run_meta(path, entry.name)
                created, workload, status = meta.created, meta.workload, meta.status
                if meta.parent:
                    at = f" at step {meta.parent_step}" if meta.parent_step is not None else ""
                    parent = f"{meta.parent}{at}"
                reason = str(getattr(meta, "reason", "") or "")
                next_step = getattr(meta, "next_step", None) or None
            except (OSError, DftuneError) as exc:  # listed, with why it cannot be read
                reason = one_line(exc, 300)
            driver = self.driver_pid(entry.name)
            if driver is None and status in ACTIVE_STATUSES:  # its driver is gone: never "running"
                status, next_step = "interrupted", f"dftune resume {entry.name}"
                reason = reason or "the process driving it ended without finishing it"
            elif driver is not None:
                next_step = None
            out.append(
                RunInfo(
                    id=entry.name,
                    path=str(path),
                    created=created,
                    workload=workload,
                    status=status,
                    iterations=self._iterations(path),
                    reason=reason,
                    driver_pid=driver if driver and driver > 0 else None,
                    next_step=next_step,
                    parent=parent,
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
        run = self._require_run(run_id)
        if not path.parent.is_dir() or path.parent.is_symlink():
            raise IterationNotFound(f"run {run_id!r} has no iteration opt{n}")
        confined(path, run, f"run {run_id}")
        return path

    def write_json_artifact(self, run_id: str, n: int, name: str, data: Any) -> Path:
        """Write a JSON artifact atomically (temporary file, fsync, ``os.replace``)."""
        if name not in JSON_ARTIFACTS:
            raise UnknownArtifact(
                f"{name!r} is not a JSON artifact; known: {', '.join(sorted(JSON_ARTIFACTS))}"
            )
        path = self._existing_artifact_path(run_id, n, name)
        atomic_write_bytes(path, dumps_json(data, path))
        return path

    def read_json_artifact(self, run_id: str, n: int, name: str) -> Any:
        if name not in JSON_ARTIFACTS:
            raise UnknownArtifact(f"{name!r} is not a JSON artifact")
        return strictjson.read_file(self.artifact_path(run_id, n, name))

    def compact(self, run_id: str, iteration: int | None) -> CompactReport:
        """Compact ``traces/raw`` into ``traces/compact`` for an iteration (None: baseline)."""
        self._require_run(run_id)
        return compact_traces(
            self.traces_dir(run_id, iteration, "raw"), self.traces_dir(run_id, iteration, "compact")
        )

    # ----- structure

    def validate_structure(self, run_id: str) -> StructureReport:
        """``session_validate_structure`` (dftracer-io-optimization
        skill; see :func:`structure.validate_run`)."""
        return validate_run(self._require_run(run_id), run_id)

    def reorganize_structure(self, run_id: str, dry_run: bool = True) -> list[Move]:
        """The skill's ``session_reorganize_structure`` (see :func:`structure.reorganize_run`)."""
        return reorganize_run(self._require_run(run_id), run_id, dry_run)


def _lock_pid(path: Path) -> int | None:
    """The pid a lock file names, None when it names none (or is not a small regular file)."""
    try:
        text = read_regular(path, LOCK_BYTES, "lock").decode("ascii", errors="replace").strip()
    except (OSError, DftuneError):
        return None
    return int(text) if text.isdigit() else None


def validate_structure(run_id: str) -> StructureReport:
    """``session_validate_structure``: check a run under ``$DFTUNE_HOME``."""
    return Workspace().validate_structure(run_id)


def reorganize_structure(run_id: str, dry_run: bool = True) -> list[Move]:
    """``session_reorganize_structure``: plan (or with ``dry_run=False`` apply) the fixes."""
    return Workspace().reorganize_structure(run_id, dry_run=dry_run)
