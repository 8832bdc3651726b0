"""The change journal: an append-only JSON-lines file, fsync'd after every record.

A change is written as ``intent`` (with everything needed to undo it: previous bytes or
"absent", previous mode, the captured value and the rendered rollback) *before* anything is
touched, then ``applied`` or ``failed``. Reverting writes ``reverting`` then ``reverted`` (or
``revert_failed``). After a crash, :meth:`Journal.recover` looks at the world for every change
left in ``intent`` or ``reverting`` and records what is true: ``applied`` if the effect is
there (it is never applied a second time), ``aborted`` if it is not; a half-written patch is
first put back to its previous bytes. Only ``applied`` means done: a change id whose last attempt
ended ``aborted`` or ``failed`` (nothing of it in effect) may be applied again, with a new intent
record; any other id already in the journal is refused, so nothing is ever in effect twice.

States: ``intent`` -> ``applied`` | ``failed`` | ``aborted``; ``applied`` -> ``reverting`` ->
``reverted`` | ``revert_failed`` (still in effect, revert can be retried); ``manual`` for
admin-only recommendations. A failed apply restores the previous state before it is recorded
as ``failed``; if even that fails the change is left ``revert_failed``.
"""

from __future__ import annotations

import fcntl
import os
import shlex
from collections.abc import Iterator
from contextlib import contextmanager
from dataclasses import dataclass
from pathlib import Path
from typing import Any

from dftune.core import strictjson
from dftune.core.failpoint import failpoint
from dftune.core.fsio import fsync_dir
from dftune.tools.runner.changes.command import COMMAND_EFFECT
from dftune.tools.runner.changes.effect import Effect, error_detail, now
from dftune.tools.runner.changes.envfile import ENV_EFFECT
from dftune.tools.runner.changes.models import (
    IN_EFFECT,
    PENDING,
    RETRYABLE,
    ApprovalRequired,
    ChangeError,
    CommandChange,
    ConflictError,
    DuplicateChange,
    EnvChange,
    FilePatch,
    JournalError,
    JournalRecord,
    State,
)
from dftune.tools.runner.changes.patch import PATCH_EFFECT

#: What each kind of change does (one table per kind, instead of a type switch in every step).
EFFECTS: dict[str, Effect] = {"env": ENV_EFFECT, "patch": PATCH_EFFECT, "command": COMMAND_EFFECT}


def _effect(change: EnvChange | FilePatch | CommandChange) -> Effect:
    return EFFECTS[change.kind]


def _probe(change: EnvChange | FilePatch | CommandChange, undo: Any) -> tuple[str, dict[str, Any]]:
    """Where the world is: 'before', 'after', 'partial' (some files written) or 'conflict'."""
    try:
        return _effect(change).probe(change, undo)
    except (OSError, ChangeError) as exc:
        return "conflict", {"error": str(exc)}


@dataclass
class _Entry:
    id: str
    change: EnvChange | FilePatch | CommandChange
    undo: Any
    seq: int  # of the intent (or manual) record: the order of application
    state: str
    records: list[JournalRecord]


@dataclass
class _Loaded:
    records: list[JournalRecord]
    entries: dict[str, _Entry]
    torn_at: int | None  # byte offset of an incomplete last line (a crash mid-write)
    needs_newline: bool  # the last record is complete but its newline is missing


class Journal:
    """Append-only JSON-lines journal of changes; see the module docstring.

    Every operation takes an exclusive ``flock`` on the journal file and re-reads it, so
    several processes may share one journal. Nothing happens at construction beyond
    creating an empty file; call :meth:`recover` after a crash (apply and revert refuse
    to run while changes are pending)."""

    def __init__(self, path: str | Path) -> None:
        self.path = Path(path)
        self._lock_fd: int | None = None
        self._depth = 0
        self.path.parent.mkdir(parents=True, exist_ok=True)
        if not self.path.exists():
            fd = os.open(self.path, os.O_WRONLY | os.O_CREAT | os.O_APPEND, 0o644)
            os.close(fd)
            fsync_dir(self.path.parent)
        self._load()  # fail early on a corrupt journal

    # ----------------------------------------------------------------- reading

    @contextmanager
    def _locked(self) -> Iterator[None]:
        if self._depth == 0:
            fd = os.open(self.path, os.O_RDWR | os.O_APPEND | os.O_CREAT, 0o644)
            fcntl.flock(fd, fcntl.LOCK_EX)
            self._lock_fd = fd
        self._depth += 1
        try:
            yield
        finally:
            self._depth -= 1
            if self._depth == 0 and self._lock_fd is not None:
                fcntl.flock(self._lock_fd, fcntl.LOCK_UN)
                os.close(self._lock_fd)
                self._lock_fd = None

    def _load(self) -> _Loaded:
        data = self.path.read_bytes()
        records: list[JournalRecord] = []
        entries: dict[str, _Entry] = {}
        torn_at: int | None = None
        offset = 0
        raw_lines = data.split(b"\n")
        for lineno, raw in enumerate(raw_lines, 1):
            last = lineno == len(raw_lines)
            start = offset
            offset += len(raw) + 1
            if not raw.strip():
                continue
            try:
                rec = JournalRecord.model_validate(strictjson.loads(raw))
            except ValueError as exc:
                if last:  # no newline after it: the write was cut short by a crash
                    torn_at = start
                    break
                raise JournalError(f"{self.path}:{lineno}: corrupt journal record ({exc})") from exc
            records.append(rec)
            entry = entries.get(rec.id)
            if entry is None:
                if rec.change is None or (rec.state == "intent" and rec.undo is None):
                    raise JournalError(f"{self.path}:{lineno}: first record of {rec.id} lacks the change")
                entry = _Entry(rec.id, rec.change, rec.undo, rec.seq, rec.state, [])
                entries[rec.id] = entry
            elif rec.state == "intent" and rec.change is not None:  # a new attempt after aborted/failed
                entry.change, entry.undo, entry.seq = rec.change, rec.undo, rec.seq
            entry.state = rec.state
            entry.records.append(rec)
        needs_newline = torn_at is None and bool(data) and not data.endswith(b"\n")
        return _Loaded(records, entries, torn_at, needs_newline)

    def _checked(self) -> _Loaded:
        loaded = self._load()
        pending = [e.id for e in loaded.entries.values() if e.state in PENDING]
        if loaded.torn_at is not None or pending:
            what = f"changes {', '.join(pending)} were interrupted" if pending else "its last line is torn"
            raise JournalError(f"{self.path}: {what}; call recover() first")
        return loaded

    def records(self) -> list[JournalRecord]:
        """Every record, in order."""
        with self._locked():
            return self._load().records

    def state(self, change_id: str) -> str | None:
        """The last state of a change, None if it is not in the journal."""
        with self._locked():
            entry = self._load().entries.get(change_id)
        return None if entry is None else entry.state

    def change(self, change_id: str) -> EnvChange | FilePatch | CommandChange:
        with self._locked():
            entry = self._load().entries.get(change_id)
        if entry is None:
            raise ChangeError(f"no change {change_id} in {self.path}")
        return entry.change

    def history(self, change_id: str) -> list[JournalRecord]:
        with self._locked():
            entry = self._load().entries.get(change_id)
        return [] if entry is None else list(entry.records)

    def pending(self) -> list[str]:
        """Ids of changes a crash left in ``intent`` or ``reverting``."""
        with self._locked():
            return [e.id for e in self._load().entries.values() if e.state in PENDING]

    def applied_changes(self) -> list[EnvChange | FilePatch | CommandChange]:
        """Changes currently in effect, in the order they were applied."""
        with self._locked():
            entries = self._load().entries.values()
        return [e.change for e in sorted(entries, key=lambda e: e.seq) if e.state in IN_EFFECT]

    def env_overlay(self) -> dict[str, str]:
        """The variables of every L2 change in effect (later changes win)."""
        out: dict[str, str] = {}
        for change in self.applied_changes():
            if isinstance(change, EnvChange):
                out.update(change.variables)
        return out

    # ----------------------------------------------------------------- writing

    def _append(
        self,
        loaded: _Loaded,
        change_id: str,
        state: State,
        *,
        change: EnvChange | FilePatch | CommandChange | None = None,
        undo: Any = None,
        detail: dict[str, Any] | None = None,
        error: str | None = None,
    ) -> JournalRecord:
        rec = JournalRecord(
            seq=len(loaded.records) + 1,
            ts=now(),
            id=change_id,
            state=state,
            change=change,
            undo=undo,
            detail=detail or {},
            error=error,
        )
        line = strictjson.dumps_checked(rec.model_dump(mode="json"), self.path, ensure_ascii=True) + "\n"
        assert self._lock_fd is not None, "journal writes happen under the lock"
        if loaded.needs_newline:
            line = "\n" + line
            loaded.needs_newline = False
        os.write(self._lock_fd, line.encode("ascii"))
        os.fsync(self._lock_fd)
        loaded.records.append(rec)
        entry = loaded.entries.get(change_id)
        if entry is None:
            assert change is not None
            entry = _Entry(change_id, change, undo, rec.seq, state, [])
            loaded.entries[change_id] = entry
        elif state == "intent" and change is not None:
            entry.change, entry.undo, entry.seq = change, undo, rec.seq
        entry.state = state
        entry.records.append(rec)
        return rec

    def apply(
        self, change: EnvChange | FilePatch | CommandChange, *, approved: bool = False
    ) -> JournalRecord:
        """Journal ``change`` as intent, carry it out, journal the outcome; return the last record.

        Refusals (bad patch, unsafe path, missing approval, an id already applied or in
        effect, pending recovery) raise before anything is touched or recorded; an id whose
        last attempt was ``aborted`` or ``failed`` is attempted again. A failure while carrying
        it out is recorded (``failed``, with the error; the previous state restored first)
        and returned."""
        with self._locked():
            loaded = self._checked()
            earlier = loaded.entries.get(change.id)
            if earlier is not None and earlier.state not in RETRYABLE:
                raise DuplicateChange(
                    f"change {change.id} is already in the journal (state {earlier.state}); "
                    "a change is never applied twice"
                )
            if isinstance(change, CommandChange):
                if change.privilege == "admin-only":
                    return self._append(
                        loaded,
                        change.id,
                        "manual",
                        change=change,
                        detail={
                            "note": "admin-only: never executed by dftune; recommended to the administrator",
                            "argv": change.argv,
                            "rollback": change.rollback,
                        },
                    )
                if not approved:
                    raise ApprovalRequired(
                        f"change {change.id} ({change.privilege} L3 command {shlex.join(change.argv)}) "
                        "needs approval; pass approved=True once it is approved"
                    )
            prep = _effect(change).prepare(change)
            self._append(loaded, change.id, "intent", change=change, undo=prep.undo)
            failpoint("journal.intent")
            try:
                detail = _effect(change).execute(change, prep)
            except Exception as exc:
                return self._failed_apply(loaded, change, prep.undo, exc)
            return self._append(loaded, change.id, "applied", detail=detail)

    def _failed_apply(
        self, loaded: _Loaded, change: EnvChange | FilePatch | CommandChange, undo: Any, exc: Exception
    ) -> JournalRecord:
        detail = error_detail(exc)
        where, info = _probe(change, undo)
        detail["world"] = where
        if where == "before":
            return self._append(loaded, change.id, "failed", detail=detail, error=str(exc))
        try:
            detail["restore"] = _effect(change).restore(change, undo)
        except Exception as exc2:
            detail["restore_error"] = str(exc2)
            detail.update(error_detail(exc2))
            return self._append(
                loaded,
                change.id,
                "revert_failed",
                detail=detail,
                error=f"{exc}; restoring the previous state failed too: {exc2}",
            )
        detail.update(info)
        return self._append(
            loaded, change.id, "failed", detail=detail, error=f"{exc} (previous state restored)"
        )

    def revert(self, change_id: str, *, force: bool = False) -> JournalRecord:
        """Undo a change in effect; return the ``reverted`` or ``revert_failed`` record.

        Refused while a later change in effect touches the same file or setting (revert
        that first), and, unless ``force``, when the target changed since it was applied."""
        with self._locked():
            loaded = self._checked()
            entry = loaded.entries.get(change_id)
            if entry is None:
                raise ChangeError(f"no change {change_id} in {self.path}")
            if entry.state not in IN_EFFECT:
                raise ChangeError(f"change {change_id} is {entry.state}, not in effect; nothing to revert")
            mine = _effect(entry.change).resources(entry.change, entry.undo)
            later = [
                e.id
                for e in loaded.entries.values()
                if e.seq > entry.seq
                and e.state in IN_EFFECT
                and mine & _effect(e.change).resources(e.change, e.undo)
            ]
            if later:
                raise ConflictError(
                    f"change {change_id} cannot be reverted before {', '.join(later)}, "
                    "applied later to the same target"
                )
            if not force and not isinstance(entry.change, CommandChange):
                where, info = _probe(entry.change, entry.undo)
                if where != "after":
                    raise ConflictError(
                        f"change {change_id}: the target changed since it was applied ({where}: {info}); "
                        "revert(force=True) restores the recorded previous state anyway"
                    )
            return self._revert_locked(loaded, entry)

    def _revert_locked(self, loaded: _Loaded, entry: _Entry) -> JournalRecord:
        self._append(loaded, entry.id, "reverting")
        try:
            detail = _effect(entry.change).restore(entry.change, entry.undo)
        except Exception as exc:
            return self._append(loaded, entry.id, "revert_failed", detail=error_detail(exc), error=str(exc))
        return self._append(loaded, entry.id, "reverted", detail=detail)

    def revert_all(self, *, force: bool = False) -> list[JournalRecord]:
        """Revert every change in effect, last applied first; stop at the first failure."""
        out: list[JournalRecord] = []
        with self._locked():
            for change in reversed(self.applied_changes()):
                rec = self.revert(change.id, force=force)
                out.append(rec)
                if rec.state != "reverted":
                    break
        return out

    def recover(self) -> list[JournalRecord]:
        """Resolve changes a crash left in ``intent`` or ``reverting``; return the new records.

        intent: effect present → ``applied`` (not applied again); absent → ``aborted``;
        half-written patch → previous bytes restored, ``aborted``. reverting: previous
        state present → ``reverted``; effect untouched → ``applied``; half-reverted patch →
        revert completed. A torn last line (crash mid-write) is cut off first."""
        out: list[JournalRecord] = []
        with self._locked():
            loaded = self._load()
            if loaded.torn_at is not None:
                assert self._lock_fd is not None
                os.ftruncate(self._lock_fd, loaded.torn_at)
                os.fsync(self._lock_fd)
                loaded.torn_at = None
            for entry in sorted(loaded.entries.values(), key=lambda e: e.seq):
                if entry.state in PENDING:
                    out.append(self._recover_one(loaded, entry))
        return out

    def _restored(
        self, loaded: _Loaded, entry: _Entry, detail: dict[str, Any], state: State, note: str
    ) -> JournalRecord:
        """A half-done change put back to its previous bytes, recorded as ``state``."""
        try:
            detail["restore"] = _effect(entry.change).restore(entry.change, entry.undo)
        except Exception as exc:
            return self._append(loaded, entry.id, "revert_failed", detail=detail, error=str(exc))
        return self._append(loaded, entry.id, state, detail={**detail, "note": note})

    def _recover_one(self, loaded: _Loaded, entry: _Entry) -> JournalRecord:
        where, info = _probe(entry.change, entry.undo)
        detail: dict[str, Any] = {"recovered": True, "world": where, **info}
        if entry.state == "intent":
            if where == "after":
                detail["note"] = "the effect is present: recorded as applied, not applied again"
                return self._append(loaded, entry.id, "applied", detail=detail)
            if where == "before":
                return self._append(loaded, entry.id, "aborted", detail=detail)
            if where == "partial":
                return self._restored(
                    loaded, entry, detail, "aborted", "half-applied: the previous bytes were restored"
                )
            detail["note"] = (
                "the target matches neither the previous nor the intended state; kept as in effect "
                "so its rollback stays on record (revert(force=True) restores the previous state)"
            )
            return self._append(loaded, entry.id, "applied", detail=detail)
        # reverting
        if where == "before":
            return self._append(loaded, entry.id, "reverted", detail=detail)
        if where == "after":
            detail["note"] = "the revert was interrupted before it changed anything; still in effect"
            return self._append(loaded, entry.id, "applied", detail=detail)
        if where == "partial":
            return self._restored(
                loaded, entry, detail, "reverted", "half-reverted: the revert was completed"
            )
        return self._append(
            loaded,
            entry.id,
            "revert_failed",
            detail=detail,
            error="interrupted revert: the target matches neither the previous nor the applied state",
        )
