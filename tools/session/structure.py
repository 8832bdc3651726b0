"""``session_validate_structure`` / ``session_reorganize_structure`` (dftracer-io-optimization skill).

:func:`validate_run` finds what is out of place (nothing is changed); :func:`reorganize_run`
moves it back, never overwriting anything: a move whose target exists is reported as a
``conflict`` and left alone, and ``opt<n>/source/`` (the copy of the user's code) is never
touched.
"""

from __future__ import annotations

import os
from collections.abc import Iterable
from dataclasses import dataclass, field
from datetime import UTC, datetime
from pathlib import Path, PurePosixPath
from typing import Literal

from dftune.core.facts.paths import trace_suffixes
from dftune.core.fsio import PathOutside, UnreadableFile, atomic_write_bytes, confined, read_regular
from dftune.core.model import StrictModel
from dftune.tools.session.layout import (
    ALLOWED_ROOT_ENTRIES,
    ARTIFACTS,
    BASELINE,
    BASELINE_SUBDIRS,
    ITER_HINT_RE,
    ITER_RE,
    ITERATION_SUBDIRS,
    RUN_META,
    RUN_META_BYTES,
    TEMP_RE,
    TRACE_KINDS,
    Owner,
    RunMeta,
    dumps_json,
    iterations_in,
)

ProblemKind = Literal[
    "missing_run_json",
    "invalid_run_json",
    "missing_subdir",
    "not_a_directory",
    "misplaced_artifact",
    "stray_trace",
    "unknown_entry",
]


class Problem(StrictModel):
    """One thing out of place.  ``path`` is relative to the run folder."""

    path: str
    problem: str
    fix: str
    kind: ProblemKind
    fixable: bool  # whether reorganize_structure can fix it on its own


class StructureReport(StrictModel):
    """Result of :meth:`Workspace.validate_structure`."""

    run_id: str
    clean: bool
    iterations: list[int]
    problems: list[Problem]
    notes: list[str]  # allowed but worth knowing (gaps in numbering, extra files, ...)


MoveAction = Literal["write_run_json", "mkdir", "move", "rmdir"]
MoveStatus = Literal["planned", "done", "conflict", "skipped", "failed"]


class Move(StrictModel):
    """One step of :meth:`Workspace.reorganize_structure`; paths relative to the run folder."""

    action: MoveAction
    src: str | None = None  # move: the file moved; rmdir: the folder removed
    dst: str | None = None  # move: where it goes; mkdir / write_run_json: what is created
    status: MoveStatus = "planned"
    reason: str = ""


# --------------------------------------------------------------------------- helpers


def _owner_name(owner: Owner) -> str:
    return BASELINE if owner is None else f"opt{owner}"


def is_trace_name(name: str) -> bool:
    return name.endswith(trace_suffixes())


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


# --------------------------------------------------------------------------- the checker


def validate_run(run: Path, run_id: str) -> StructureReport:
    """Check a run folder against the layout; nothing is changed.

    Problems: a missing or invalid ``run.json``; missing required sub-folders of the
    baseline or an iteration (or a file where a folder belongs); the skill's per-iteration artifacts outside
    their ``opt<n>/`` folder; traces outside ``traces/raw`` or ``traces/compact``;
    unknown entries at the run root.  Each says whether reorganize can fix it.
    Gaps in iteration numbers and unknown files inside an iteration are notes only."""
    return _Structure(run, run_id).analyze()[0]


def reorganize_run(run: Path, run_id: str, dry_run: bool = True) -> list[Move]:
    """Plan (and unless ``dry_run``, perform) the steps that fix :func:`validate_run`'s fixable
    problems.

    Misplaced artifacts go into their iteration (one named in the path, such as ``opt2`` or
    ``opt_2_results``, else the latest iteration, else a new ``opt1``); stray traces go into
    ``traces/raw`` of the iteration or baseline they belong to (named in the path, else the
    latest iteration, else the baseline); missing folders are created; folders left empty by
    the moves are removed."""
    checker = _Structure(run, run_id)
    steps = checker.analyze()[1]
    return steps if dry_run else checker.execute(steps)


class _Structure:
    def __init__(self, run: Path, run_id: str) -> None:
        self.run = run
        self.run_id = run_id

    def analyze(self) -> tuple[StructureReport, list[Move]]:
        run, run_id = self.run, self.run_id
        plan = _Plan(run_dir=run, iterations=iterations_in(run))
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
            meta = RunMeta.model_validate_json(read_regular(entry.path, RUN_META_BYTES, "run metadata"))
        except (OSError, ValueError, UnreadableFile) as exc:  # ValidationError is a ValueError
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
            if (name == BASELINE or ITER_RE.fullmatch(name)) and not entry.is_dir(follow_symlinks=False):
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
            m = ITER_HINT_RE.match(part)
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
        if is_trace_name(name):
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
            if name in ALLOWED_ROOT_ENTRIES or ITER_RE.fullmatch(name):
                return
            if TEMP_RE.fullmatch(name):
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
            if ITER_RE.fullmatch(name):
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
            if name not in protected and not ITER_RE.fullmatch(name) and entry.is_dir(follow_symlinks=False):
                candidates.add(name)
        remove: set[str] = set()
        for c in candidates:
            if removable(c):
                for dirpath, _, _ in os.walk(plan.run_dir / c):
                    remove.add(Path(dirpath).relative_to(plan.run_dir).as_posix())
        for c in sorted(remove, key=lambda p: (-p.count("/"), p)):
            plan.steps.append(Move(action="rmdir", src=c, reason="left empty by the moves"))

    # ..... execution

    def execute(self, steps: list[Move]) -> list[Move]:
        run = self.run
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
                    atomic_write_bytes(run / RUN_META, dumps_json(meta, run / RUN_META), exclusive=True)
                elif step.action == "mkdir":
                    assert step.dst is not None
                    confined(run / step.dst, run, "the run folder")  # no move through a link out of it
                    (run / step.dst).mkdir(parents=True, exist_ok=True)
                elif step.action == "move":
                    assert step.src is not None and step.dst is not None
                    dst = confined(run / step.dst, run, "the run folder")
                    dst.parent.mkdir(parents=True, exist_ok=True)
                    _place_no_clobber(run / step.src, dst)
                else:  # rmdir
                    assert step.src is not None
                    os.rmdir(run / step.src)
                step.status = "done"
            except FileExistsError:
                step.status = "conflict"
                step.reason = f"{step.dst} appeared in the meantime; nothing was overwritten"
            except PathOutside as exc:
                step.status, step.reason = "failed", str(exc)
            except OSError as exc:
                step.status = "skipped" if step.action == "rmdir" else "failed"
                step.reason = f"{exc.strerror or exc}"
            done.append(step)
        return done


# --------------------------------------------------------------------------- module-level API
