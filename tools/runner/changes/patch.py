"""L1: a unified diff applied to a copy of the source tree (``opt<n>/source``), and undone.

Every target is checked right before it is written: no component may be a symlink or leave
the tree, whatever the diff says.
"""

from __future__ import annotations

import os
import stat
from pathlib import Path, PurePosixPath
from typing import Any

from dftune.core.failpoint import failpoint
from dftune.core.fsio import fsync_dir
from dftune.tools.runner.changes.effect import (
    Effect,
    Prepared,
    b64,
    mode_or_default,
    read_regular,
    sha,
    unb64,
    unlink,
    write_file,
)
from dftune.tools.runner.changes.models import (
    ChangeError,
    FilePatch,
    FileUndo,
    PatchError,
    PatchUndo,
    UnsafePathError,
)
from dftune.tools.runner.changes.unidiff import FileDiff, apply_hunks, check_raw_path, parse_unified_diff


def _safe_target(root: Path, rel: str) -> Path:
    """``root/rel`` after checking that no component is a symlink or leaves the tree."""
    where = f"{rel}"
    check_raw_path(rel, where)
    parts = PurePosixPath(rel).parts
    cur = root
    for k, part in enumerate(parts):
        cur = cur / part
        try:
            st = os.lstat(cur)
        except FileNotFoundError:
            break
        if stat.S_ISLNK(st.st_mode):
            what = "the target" if k == len(parts) - 1 else f"component {'/'.join(parts[: k + 1])!r}"
            raise UnsafePathError(f"{rel}: {what} is a symlink (refused, even if it points inside the tree)")
        if k < len(parts) - 1 and not stat.S_ISDIR(st.st_mode):
            raise PatchError(f"{rel}: {'/'.join(parts[: k + 1])!r} is not a directory")
    target = root / Path(*parts)
    real = os.path.realpath(target)
    if os.path.commonpath([real, str(root)]) != str(root):
        raise UnsafePathError(f"{rel}: resolves to {real}, outside {root}")
    return target


def _patch_root(change: FilePatch) -> Path:
    try:
        root = change.root.resolve(strict=True)
    except OSError as exc:
        raise ChangeError(f"patch root {change.root} does not exist") from exc
    if not root.is_dir():
        raise ChangeError(f"patch root {root} is not a directory")
    return root


def preview_patch(change: FilePatch) -> dict[str, bytes | None]:
    """What the patch would write, per relative path (None: deleted); touches nothing.

    Raises :class:`PatchError` / :class:`UnsafePathError` with the file and hunk named."""
    return _plan_patch(change)[1]


def _plan_patch(change: FilePatch) -> tuple[Path, dict[str, bytes | None], list[FileDiff]]:
    root = _patch_root(change)
    diffs = parse_unified_diff(change.diff, change.strip)
    plan: dict[str, bytes | None] = {}
    for fd in diffs:
        target = _safe_target(root, fd.path)
        try:
            before, _mode = read_regular(target)
        except ChangeError as exc:
            raise PatchError(f"{fd.path}: {exc}") from exc
        if fd.create:
            if before is not None or os.path.lexists(target):
                raise PatchError(f"{fd.path}: the patch creates it but it already exists")
            plan[fd.path] = apply_hunks(b"", fd)
        else:
            if before is None:
                raise PatchError(f"{fd.path}: the patch modifies or deletes it but it does not exist")
            after = apply_hunks(before, fd)
            if fd.delete:
                if after:
                    raise PatchError(
                        f"{fd.path}: the deletion does not remove the "
                        f"whole file ({len(after)} bytes would remain)"
                    )
                plan[fd.path] = None
            else:
                plan[fd.path] = after
    return root, plan, diffs


def _prepare_patch(change: FilePatch) -> Prepared:
    root, plan, diffs = _plan_patch(change)
    modes = {fd.path: fd.new_mode for fd in diffs}
    files: list[FileUndo] = []
    created: list[str] = []
    for rel, after in plan.items():
        before, mode = read_regular(root / rel)
        after_mode = None if after is None else mode_or_default(mode if mode is not None else modes[rel])
        files.append(
            FileUndo(
                path=rel,
                before_b64=None if before is None else b64(before),
                before_mode=mode,
                after_sha256=None if after is None else sha(after),
                after_mode=after_mode,
            )
        )
        parts = PurePosixPath(rel).parts[:-1]
        for k in range(1, len(parts) + 1):
            d = "/".join(parts[:k])
            if d not in created and not os.path.lexists(root / d):
                created.append(d)
    return Prepared(PatchUndo(root=str(root), files=files, created_dirs=created), dict(plan))


def _execute_patch(change: FilePatch, prep: Prepared) -> dict[str, Any]:
    undo = prep.undo
    assert isinstance(undo, PatchUndo)
    root = Path(undo.root)
    for d in undo.created_dirs:
        path = _safe_target(root, d)
        if not path.is_dir():
            os.mkdir(path, 0o755)
            fsync_dir(path.parent, strict=True)
    for k, fu in enumerate(undo.files):
        if k == 1:
            failpoint("patch.mid")
        target = _safe_target(root, fu.path)  # checked again right before writing
        after = prep.contents[fu.path]
        if after is None:
            unlink(target)
        else:
            assert fu.after_mode is not None
            write_file(target, after, fu.after_mode)
    return {
        "root": undo.root,
        "modified": [f.path for f in undo.files if f.before_b64 is not None and f.after_sha256 is not None],
        "created": [f.path for f in undo.files if f.before_b64 is None],
        "deleted": [f.path for f in undo.files if f.after_sha256 is None],
    }


def _file_status(root: Path, fu: FileUndo) -> str:
    path = root / fu.path
    if path.is_symlink():
        return "other"
    try:
        now, _ = read_regular(path)
    except ChangeError:
        return "other"
    if (now is None and fu.after_sha256 is None) or (now is not None and sha(now) == fu.after_sha256):
        return "after"
    before = None if fu.before_b64 is None else unb64(fu.before_b64)
    return "before" if now == before else "other"


def _probe_patch(undo: PatchUndo) -> tuple[str, dict[str, Any]]:
    root = Path(undo.root)
    status = {fu.path: _file_status(root, fu) for fu in undo.files}
    values = set(status.values())
    if values == {"after"}:
        return "after", {}
    if values == {"before"}:
        return "before", {}
    if "other" in values:
        return "conflict", {"conflicts": sorted(p for p, s in status.items() if s == "other")}
    return "partial", {"written": sorted(p for p, s in status.items() if s == "after")}


def _restore_patch(undo: PatchUndo) -> dict[str, Any]:
    root = Path(undo.root)
    for fu in reversed(undo.files):
        target = _safe_target(root, fu.path)
        if fu.before_b64 is None:
            unlink(target)
        else:
            parent = target.parent
            if not parent.is_dir():  # a folder removed since; re-create it (inside root, checked above)
                parent.mkdir(parents=True, mode=0o755)
            write_file(target, unb64(fu.before_b64), mode_or_default(fu.before_mode))
    kept: list[str] = []
    for d in reversed(undo.created_dirs):
        path = root / d
        if path.is_symlink() or not path.is_dir():
            continue
        try:
            os.rmdir(path)
            fsync_dir(path.parent, strict=True)
        except OSError:
            kept.append(d)  # not empty: something else put files there; leave it
    detail: dict[str, Any] = {"root": undo.root, "restored": [f.path for f in undo.files]}
    if kept:
        detail["kept_dirs"] = kept
    return detail


def _resources_patch(change: FilePatch, undo: PatchUndo) -> set[str]:
    return {f"file:{Path(undo.root) / f.path}" for f in undo.files}


PATCH_EFFECT = Effect(
    prepare=_prepare_patch,
    execute=_execute_patch,
    probe=lambda change, undo: _probe_patch(undo),
    restore=lambda change, undo: _restore_patch(undo),
    resources=_resources_patch,
)
