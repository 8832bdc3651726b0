"""Journaled, reversible changes (``tools/runner/changes.py``).

Everything here runs for real on temporary folders: env files are sourced by ``sh``,
patches come from ``git diff --no-index`` as well as by hand, L3 commands are real
``python -c`` programs, and crashes are simulated both in-process (an exception that is
not an ``Exception``, so nothing gets a chance to record it) and with ``os._exit`` in a
child process. Reverting is checked byte for byte over whole trees (content, mode, type).
"""

from __future__ import annotations

import hashlib
import json
import os
import shutil
import stat
import subprocess
import sys
import textwrap
from dataclasses import replace
from pathlib import Path
from typing import Any

import pytest
from pydantic import ValidationError

from dftune.tools.runner import changes
from dftune.tools.runner.changes import (
    ApprovalRequired,
    ChangeError,
    CommandChange,
    ConflictError,
    DuplicateChange,
    EnvChange,
    FilePatch,
    Journal,
    JournalError,
    PatchError,
    UnsafePathError,
    parse_unified_diff,
    read_env_file,
    render_env_file,
)
from dftune.tools.runner.changes import patch as patch_effect
from dftune.tools.runner.changes.journal import EFFECTS
from dftune.tools.runner.changes.models import CommandUndo, EnvUndo

PY = sys.executable


class Crash(BaseException):
    """Stands for the process dying: not an Exception, so no handler records anything."""


# --------------------------------------------------------------------------- helpers


def tree_digest(root: Path) -> dict[str, tuple[str, int, str]]:
    """Every entry under root: (type, permission bits, sha256 of bytes or link target)."""
    out: dict[str, tuple[str, int, str]] = {}
    for dirpath, dirnames, filenames in os.walk(root):
        for name in sorted(dirnames + filenames):
            p = Path(dirpath) / name
            rel = str(p.relative_to(root))
            st = os.lstat(p)
            if stat.S_ISLNK(st.st_mode):
                out[rel] = ("link", 0, os.readlink(p))
            elif stat.S_ISDIR(st.st_mode):
                out[rel] = ("dir", stat.S_IMODE(st.st_mode), "")
            else:
                out[rel] = ("file", stat.S_IMODE(st.st_mode), hashlib.sha256(p.read_bytes()).hexdigest())
    return out


APP = "".join(f"line {i}\n" for i in range(1, 31))
IO_PY = "import os\n\n\ndef read(path):\n    with open(path, 'rb') as fh:\n        return fh.read()\n"


def make_source(base: Path) -> Path:
    src = base / "user_source"
    (src / "pkg").mkdir(parents=True)
    (src / "app.py").write_text(APP)
    (src / "pkg" / "io.py").write_text(IO_PY)
    (src / "run.sh").write_text("#!/bin/sh\necho run\n")
    (src / "run.sh").chmod(0o755)
    (src / "notes.txt").write_bytes(b"first\nsecond\nno newline at the end")
    (src / "crlf.txt").write_bytes(b"alpha\r\nbeta\r\ngamma\r\n")
    (src / "data.bin").write_bytes(bytes(range(256)) * 4)
    (src / "secret.cfg").write_text("keep=1\n")
    (src / "secret.cfg").chmod(0o600)
    return src


@pytest.fixture
def trees(tmp_path: Path) -> tuple[Path, Path]:
    """(user's original source, its copy in opt1/source) — patches go to the copy only."""
    src = make_source(tmp_path)
    copy = tmp_path / "run" / "opt1" / "source"
    shutil.copytree(src, copy, symlinks=True)
    return src, copy


@pytest.fixture
def journal(tmp_path: Path) -> Journal:
    return Journal(tmp_path / "run" / "opt1" / "changes.journal.jsonl")


def git_diff(old: Path, new: Path) -> str:
    """A real ``git diff --no-index`` between two folders (paths a/<old>/..., b/<new>/...)."""
    if shutil.which("git") is None:
        pytest.skip("git is not installed")
    env = {**os.environ, "GIT_CONFIG_NOSYSTEM": "1", "HOME": str(old.parent), "LC_ALL": "C"}
    proc = subprocess.run(
        ["git", "diff", "--no-index", "--no-color", "--no-ext-diff", "--no-renames", old.name, new.name],
        cwd=old.parent,
        env=env,
        capture_output=True,
        timeout=60,
        check=False,
    )
    assert proc.returncode == 1, proc.stderr  # 1: differences found
    return proc.stdout.decode("utf-8")  # bytes: keep the \r of CRLF lines


def states(j: Journal, change_id: str) -> list[str]:
    return [r.state for r in j.history(change_id)]


def source_env(path: Path) -> dict[str, str]:
    """The environment after ``. path`` in a clean POSIX sh, sourced twice (idempotence)."""
    proc = subprocess.run(
        ["sh", "-c", '. "$1" && . "$1" && env -0', "sh", str(path)],
        env={"PATH": os.environ["PATH"]},
        capture_output=True,
        timeout=30,
        check=True,
    )
    pairs = [item.split("=", 1) for item in proc.stdout.decode().split("\0") if item]
    return {k: v for k, v in pairs}


# --------------------------------------------------------------------------- L2 env


TRICKY = {
    "ROMIO_HINTS": "/ws/romio_hints.txt",
    "QUOTES": "it's \"quoted\" and 'again'",
    "SHELLY": "$HOME `id` $(id) \\n \\ ; & | * ~",
    "SPACES": "  leading and trailing  ",
    "EMPTY": "",
    "UNICODE": "débit → 2 GiB/s",
}


def test_env_change_file_absent_before(tmp_path: Path, journal: Journal) -> None:
    env_file = tmp_path / "run" / "opt1" / "opt_l2_env.sh"
    change = EnvChange(id="l2-001", env_file=env_file, variables=TRICKY)
    rec = journal.apply(change)
    assert rec.state == "applied"
    assert states(journal, "l2-001") == ["intent", "applied"]
    intent = journal.history("l2-001")[0]
    assert isinstance(intent.undo, EnvUndo) and intent.undo.before_b64 is None

    sourced = source_env(env_file)
    for name, value in TRICKY.items():
        assert sourced[name] == value, name
    assert read_env_file(env_file) == TRICKY
    assert journal.env_overlay() == TRICKY == change.env_overlay()
    text = env_file.read_text()
    assert "export ROMIO_HINTS='/ws/romio_hints.txt'\n" in text
    assert render_env_file(env_file.read_bytes(), TRICKY) == env_file.read_bytes()  # idempotent

    rec = journal.revert("l2-001")
    assert rec.state == "reverted"
    assert not env_file.exists()
    assert states(journal, "l2-001") == ["intent", "applied", "reverting", "reverted"]
    assert journal.applied_changes() == [] and journal.env_overlay() == {}


def test_env_change_file_present_before_restored_byte_for_byte(tmp_path: Path, journal: Journal) -> None:
    env_file = tmp_path / "opt_l2_env.sh"
    original = b'# hand-written\nexport A="old"\nB=1\n\n# trailing comment\nexport A=dup\nexport Z=last'
    env_file.write_bytes(original)
    env_file.chmod(0o640)

    first = EnvChange(id="l2-a", env_file=env_file, variables={"A": "new", "C": "c value"})
    second = EnvChange(id="l2-b", env_file=env_file, variables={"A": "newer", "B": "2"})
    assert journal.apply(first).state == "applied"
    assert journal.apply(second).state == "applied"
    text = env_file.read_text()
    assert text.count("A=") == 1 and "export A='newer'\n" in text and "# hand-written\n" in text
    assert source_env(env_file)["A"] == "newer" and source_env(env_file)["Z"] == "last"
    assert journal.env_overlay() == {"A": "newer", "C": "c value", "B": "2"}
    assert stat.S_IMODE(env_file.stat().st_mode) == 0o640

    with pytest.raises(ConflictError, match="l2-b"):
        journal.revert("l2-a")  # l2-b, applied later, wrote the same file

    recs = journal.revert_all()
    assert [(r.id, r.state) for r in recs] == [("l2-b", "reverted"), ("l2-a", "reverted")]
    assert env_file.read_bytes() == original
    assert stat.S_IMODE(env_file.stat().st_mode) == 0o640


def test_env_revert_refuses_a_file_changed_since_unless_forced(tmp_path: Path, journal: Journal) -> None:
    env_file = tmp_path / "opt_l2_env.sh"
    journal.apply(EnvChange(id="e1", env_file=env_file, variables={"OMP_NUM_THREADS": "4"}))
    env_file.write_text(env_file.read_text() + "export EDITED='by hand'\n")
    with pytest.raises(ConflictError, match="changed since"):
        journal.revert("e1")
    assert journal.state("e1") == "applied"
    assert journal.revert("e1", force=True).state == "reverted"
    assert not env_file.exists()


@pytest.mark.parametrize(
    "variables",
    [
        {"1BAD": "x"},
        {"A-B": "x"},
        {"A": "two\nlines"},
        {"A": "nul\x00"},
        {"LD_PRELOAD": "x"},
        {"DFTRACER_ENABLE": "0"},
        {},
    ],
)
def test_env_change_rejects_bad_variables(tmp_path: Path, variables: dict[str, str]) -> None:
    with pytest.raises(ValidationError):
        EnvChange(id="bad", env_file=tmp_path / "opt_l2_env.sh", variables=variables)


def test_env_change_refuses_symlinked_env_file(tmp_path: Path, journal: Journal) -> None:
    real = tmp_path / "elsewhere.sh"
    real.write_text("export X='1'\n")
    (tmp_path / "opt_l2_env.sh").symlink_to(real)
    with pytest.raises(ChangeError, match="symlink"):
        journal.apply(EnvChange(id="e", env_file=tmp_path / "opt_l2_env.sh", variables={"X": "2"}))
    assert real.read_text() == "export X='1'\n" and journal.records() == []


def test_models_forbid_unknown_keys(tmp_path: Path) -> None:
    with pytest.raises(ValidationError):
        EnvChange.model_validate({"id": "x", "env_file": str(tmp_path), "variables": {"A": "1"}, "oops": 1})
    with pytest.raises(ValidationError):
        FilePatch(id="has space", root=tmp_path, diff="x")


# --------------------------------------------------------------------------- L1 patches


def edit_tree(tree: Path) -> None:
    """Modify, create (in new folders, one executable) and delete files, the way an L1 change would."""
    app = (tree / "app.py").read_text().splitlines(keepends=True)
    app[1] = "line 2 buffered\n"
    app.insert(20, "inserted after 20\n")
    del app[28]
    (tree / "app.py").write_text("".join(app))
    (tree / "notes.txt").write_bytes(b"first\nsecond changed\nno newline at the end, still")
    (tree / "crlf.txt").write_bytes(b"alpha\r\nBETA\r\ngamma\r\n")
    (tree / "extra" / "deep").mkdir(parents=True)
    (tree / "extra" / "deep" / "prefetch.py").write_text("PREFETCH = 4\n")
    (tree / "tool.sh").write_text("#!/bin/sh\nexit 0\n")
    (tree / "tool.sh").chmod(0o755)
    (tree / "run.sh").unlink()
    (tree / "pkg" / "io.py").unlink()


def test_git_patch_applies_to_the_copy_and_reverts_every_byte(
    tmp_path: Path, trees: tuple[Path, Path]
) -> None:
    src, copy = trees
    work = tmp_path / "diffwork"
    work.mkdir()
    shutil.copytree(src, work / "old")
    shutil.copytree(src, work / "new")
    edit_tree(work / "new")
    diff = git_diff(work / "old", work / "new")
    assert "deleted file mode 100755" in diff and "new file mode 100755" in diff
    assert "\\ No newline at end of file" in diff

    src_before, copy_before = tree_digest(src), tree_digest(copy)
    j = Journal(tmp_path / "journal.jsonl")
    rec = j.apply(FilePatch(id="l1-001", root=copy, diff=diff, strip=2))
    assert rec.state == "applied", rec.error
    assert sorted(rec.detail["created"]) == ["extra/deep/prefetch.py", "tool.sh"]
    assert sorted(rec.detail["deleted"]) == ["pkg/io.py", "run.sh"]
    assert tree_digest(copy) == tree_digest(work / "new")  # exactly what git says, modes included
    assert tree_digest(src) == src_before  # the user's original is never touched

    assert j.revert("l1-001").state == "reverted"
    assert tree_digest(copy) == copy_before  # every byte, mode, file and folder
    assert stat.S_IMODE((copy / "run.sh").stat().st_mode) == 0o755
    assert not (copy / "extra").exists()


def test_handwritten_creation_and_deletion_hunks(trees: tuple[Path, Path], journal: Journal) -> None:
    _, copy = trees
    before = tree_digest(copy)
    deletion = "".join("-" + line for line in IO_PY.splitlines(keepends=True))
    diff = (
        "--- /dev/null\n+++ b/docs/README.md\n@@ -0,0 +1,2 @@\n+# notes\n+created by a patch\n"
        f"--- a/pkg/io.py\n+++ /dev/null\n@@ -1,{len(IO_PY.splitlines())} +0,0 @@\n{deletion}"
        "--- a/app.py\n+++ b/app.py\n@@ -5,0 +6,1 @@\n+inserted after line 5\n"
    )
    rec = journal.apply(FilePatch(id="l1-create-delete", root=copy, diff=diff))
    assert rec.state == "applied", rec.error
    assert (copy / "docs" / "README.md").read_text() == "# notes\ncreated by a patch\n"
    assert stat.S_IMODE((copy / "docs" / "README.md").stat().st_mode) == 0o644
    assert not (copy / "pkg" / "io.py").exists()
    assert (copy / "app.py").read_text().splitlines()[5] == "inserted after line 5"
    journal.revert("l1-create-delete")
    assert tree_digest(copy) == before


def test_context_mismatch_refused_without_touching_anything(
    trees: tuple[Path, Path], journal: Journal
) -> None:
    _, copy = trees
    before = tree_digest(copy)
    diff = (
        "--- a/crlf.txt\n+++ b/crlf.txt\n@@ -1,2 +1,2 @@\n alpha\r\n-beta\r\n+BETA\r\n"  # fine
        "--- a/app.py\n+++ b/app.py\n@@ -3,3 +3,3 @@\n"
        " line 3\n-line 4 (not what the file says)\n+line four\n line 5\n"
    )
    with pytest.raises(
        PatchError, match=r"app\.py hunk #1 \(@@ -3,3 \+3,3 @@\): context does not match at line 4"
    ):
        journal.apply(FilePatch(id="l1-bad", root=copy, diff=diff))
    assert tree_digest(copy) == before  # not even crlf.txt, whose hunk matched
    assert journal.records() == [] and journal.state("l1-bad") is None


def test_a_hunk_whose_lines_stand_elsewhere_applies_at_the_nearest_place(
    trees: tuple[Path, Path], journal: Journal
) -> None:
    """As git apply does: a diff drafted against the original still applies after an earlier patch
    moved its lines (exact lines only, never fuzz)."""
    _, copy = trees
    diff = "--- a/app.py\n+++ b/app.py\n@@ -10,2 +10,2 @@\n line 4\n-line 5\n+line five\n"
    journal.apply(FilePatch(id="l1-offset", root=copy, diff=diff))
    lines = (copy / "app.py").read_text().splitlines()
    assert lines[3:5] == ["line 4", "line five"]


def test_a_hunk_whose_lines_stand_nowhere_or_are_too_few_to_place_is_refused(
    trees: tuple[Path, Path], journal: Journal
) -> None:
    _, copy = trees
    before = tree_digest(copy)
    nowhere = "--- a/app.py\n+++ b/app.py\n@@ -10,2 +10,2 @@\n line 4\n-line 55\n+line five\n"
    with pytest.raises(PatchError, match="context does not match at line 10"):
        journal.apply(FilePatch(id="l1-nowhere", root=copy, diff=nowhere))
    one_line = "--- a/app.py\n+++ b/app.py\n@@ -10 +10 @@\n-line 5\n+line five\n"
    with pytest.raises(PatchError, match="hunk #1"):
        journal.apply(FilePatch(id="l1-one-line", root=copy, diff=one_line))
    assert tree_digest(copy) == before


@pytest.mark.parametrize(
    ("diff", "match"),
    [
        ("--- a/app.py\n+++ b/app.py\n@@ -1,2 +1,2 @@\n-line 1\n+line one\n", "ends inside the hunk"),
        ("--- a/app.py\n+++ b/app.py\n@@ -1 +1 @@\n-line 1\n+line one\n+extra\n", "more lines than"),
        ("--- a/app.py\n+++ b/app.py\n@@ -1 +1 @@\n*line 1\n+line one\n", "does not fit"),
        ("@@ -1 +1 @@\n-line 1\n+line one\n", "without a ---/\\+\\+\\+ file header"),
        ("--- a/app.py\n+++ b/other.py\n@@ -1 +1 @@\n-line 1\n+x\n", "renames are not supported"),
        ("--- /dev/null\n+++ b/app.py\n@@ -0,0 +1 @@\n+x\n", "already exists"),
        ("--- a/missing.py\n+++ b/missing.py\n@@ -1 +1 @@\n-a\n+b\n", "does not exist"),
        (
            "--- a/app.py\n+++ /dev/null\n@@ -1,2 +0,0 @@\n-line 1\n-line 2\n",
            "does not remove the whole file",
        ),
        ("--- a/data.bin\n+++ b/data.bin\nBinary files a/data.bin and b/data.bin differ\n", "has no hunks"),
        ("just some text\n", "no file sections"),
        ("diff --git a/app.py b/app.py\nold mode 100644\nnew mode 100755\n", "mode changes"),
    ],
)
def test_malformed_or_inapplicable_patches_are_refused(
    trees: tuple[Path, Path], journal: Journal, diff: str, match: str
) -> None:
    _, copy = trees
    before = tree_digest(copy)
    with pytest.raises(PatchError, match=match):
        journal.apply(FilePatch(id="l1-x", root=copy, diff=diff))
    assert tree_digest(copy) == before and journal.records() == []


def test_unsafe_targets_are_refused(tmp_path: Path, trees: tuple[Path, Path], journal: Journal) -> None:
    _, copy = trees
    outside = tmp_path / "run" / "opt1" / "outside.txt"
    (copy / "pkg_link").symlink_to(copy / "pkg")  # a symlink pointing *inside* the tree
    (copy / "alias.py").symlink_to(copy / "app.py")
    before = tree_digest(copy)
    cases = {
        "dotdot": ("--- /dev/null\n+++ b/../outside.txt\n@@ -0,0 +1 @@\n+x\n", "'..' component"),
        "dotdot-hidden-by-strip": (
            "--- /dev/null\n+++ ../outside.txt\n@@ -0,0 +1 @@\n+x\n",
            "'..' component",
        ),
        "absolute": ("--- /dev/null\n+++ /tmp/dftune-evil.txt\n@@ -0,0 +1 @@\n+x\n", "absolute path"),
        "absolute-old": ("--- /etc/hostname\n+++ b/etc/hostname\n@@ -1 +1 @@\n-a\n+b\n", "absolute path"),
        "symlink-dir": (
            "--- a/pkg_link/io.py\n+++ b/pkg_link/io.py\n@@ -1 +1 @@\n-import os\n+import io\n",
            "component 'pkg_link' is a symlink",
        ),
        "symlink-dir-create": ("--- /dev/null\n+++ b/pkg_link/new.py\n@@ -0,0 +1 @@\n+x\n", "is a symlink"),
        "symlink-target": (
            "--- a/alias.py\n+++ b/alias.py\n@@ -1 +1 @@\n-line 1\n+line one\n",
            "the target is a symlink",
        ),
    }
    for name, (diff, match) in cases.items():
        with pytest.raises(UnsafePathError, match=match):
            journal.apply(FilePatch(id=f"l1-{name}", root=copy, diff=diff))
    assert tree_digest(copy) == before
    assert not outside.exists() and not Path("/tmp/dftune-evil.txt").exists()
    assert journal.records() == []


def test_parse_reports_no_newline_and_modes() -> None:
    diff = (
        "diff --git a/x.sh b/x.sh\nnew file mode 100755\nindex 0000000..1111111\n"
        "--- /dev/null\n+++ b/x.sh\n@@ -0,0 +1 @@\n+echo hi\n\\ No newline at end of file\n"
        "diff --git a/empty b/empty\nnew file mode 100644\nindex 0000000..e69de29\n"
    )
    files = parse_unified_diff(diff)
    assert [f.path for f in files] == ["x.sh", "empty"]
    assert files[0].create and files[0].new_mode == 0o755
    assert files[0].hunks[0].new_block() == [b"echo hi"]
    assert files[1].create and files[1].hunks == []


def test_preview_touches_nothing(trees: tuple[Path, Path]) -> None:
    _, copy = trees
    before = tree_digest(copy)
    diff = "--- a/app.py\n+++ b/app.py\n@@ -1 +1 @@\n-line 1\n+line one\n"
    plan = changes.preview_patch(FilePatch(id="p", root=copy, diff=diff))
    assert plan["app.py"] == APP.replace("line 1\n", "line one\n", 1).encode()
    assert tree_digest(copy) == before


# --------------------------------------------------------------------------- crashes


APP_DIFF = "--- a/app.py\n+++ b/app.py\n@@ -1,3 +1,3 @@\n line 1\n-line 2\n+line 2 patched\n line 3\n"
TWO_FILE_DIFF = APP_DIFF + "--- a/pkg/io.py\n+++ b/pkg/io.py\n@@ -1 +1 @@\n-import os\n+import io, os\n"


def test_crash_after_intent_recovers_as_aborted(
    monkeypatch: pytest.MonkeyPatch, trees: tuple[Path, Path], journal: Journal
) -> None:
    _, copy = trees
    before = tree_digest(copy)

    def crash(*_: Any) -> dict[str, Any]:
        raise Crash

    with monkeypatch.context() as m, pytest.raises(Crash):
        m.setitem(EFFECTS, "patch", replace(EFFECTS["patch"], execute=crash))
        journal.apply(FilePatch(id="l1-crash", root=copy, diff=APP_DIFF))

    reopened = Journal(journal.path)
    assert reopened.pending() == ["l1-crash"]
    with pytest.raises(JournalError, match="recover"):
        reopened.apply(EnvChange(id="other", env_file=copy.parent / "opt_l2_env.sh", variables={"A": "1"}))
    recs = reopened.recover()
    assert [(r.id, r.state) for r in recs] == [("l1-crash", "aborted")]
    assert tree_digest(copy) == before
    assert reopened.applied_changes() == [] and reopened.pending() == []
    assert reopened.recover() == []  # nothing left to do
    # aborted is not done; the same change is applied again from the restored bytes
    assert reopened.apply(FilePatch(id="l1-crash", root=copy, diff=APP_DIFF)).state == "applied"
    assert "line 2 patched" in (copy / "app.py").read_text()
    assert [r.state for r in reopened.history("l1-crash")] == ["intent", "aborted", "intent", "applied"]
    assert [c.id for c in Journal(journal.path).applied_changes()] == ["l1-crash"]
    with pytest.raises(DuplicateChange):  # applied: never a second time
        reopened.apply(FilePatch(id="l1-crash", root=copy, diff=APP_DIFF))
    assert reopened.revert("l1-crash").state == "reverted" and tree_digest(copy) == before


def test_crash_after_effect_before_applied_record_is_never_applied_twice(
    monkeypatch: pytest.MonkeyPatch, trees: tuple[Path, Path], journal: Journal
) -> None:
    _, copy = trees
    original = tree_digest(copy)
    real_append = Journal._append

    def append(self: Journal, loaded: Any, change_id: str, state: str, **kw: Any) -> Any:
        if state == "applied":
            raise Crash
        return real_append(self, loaded, change_id, state, **kw)

    change = FilePatch(id="l1-done", root=copy, diff=TWO_FILE_DIFF)
    with monkeypatch.context() as m, pytest.raises(Crash):
        m.setattr(Journal, "_append", append)
        journal.apply(change)
    patched = tree_digest(copy)
    assert patched != original

    reopened = Journal(journal.path)
    recs = reopened.recover()
    assert [(r.id, r.state) for r in recs] == [("l1-done", "applied")]
    assert "not applied again" in recs[0].detail["note"]
    assert [c.id for c in reopened.applied_changes()] == ["l1-done"]
    with pytest.raises(DuplicateChange, match="never applied twice"):
        reopened.apply(change)
    assert tree_digest(copy) == patched
    assert reopened.revert("l1-done").state == "reverted"
    assert tree_digest(copy) == original


def fail_second_write(m: pytest.MonkeyPatch, error: BaseException) -> None:
    """Make the second file write of a patch raise ``error`` (the first one lands)."""
    real_write = patch_effect.write_file
    calls: list[Path] = []

    def write(path: Path, data: bytes, mode: int) -> None:
        calls.append(path)
        if len(calls) == 2:
            raise error
        real_write(path, data, mode)

    m.setattr(patch_effect, "write_file", write)


def test_crash_half_way_through_a_patch_restores_the_previous_bytes(
    monkeypatch: pytest.MonkeyPatch, trees: tuple[Path, Path], journal: Journal
) -> None:
    _, copy = trees
    original = tree_digest(copy)
    with monkeypatch.context() as m, pytest.raises(Crash):
        fail_second_write(m, Crash())
        journal.apply(FilePatch(id="l1-half", root=copy, diff=TWO_FILE_DIFF))
    assert tree_digest(copy) != original  # app.py written, pkg/io.py not

    recs = Journal(journal.path).recover()
    assert recs[0].state == "aborted" and recs[0].detail["world"] == "partial"
    assert tree_digest(copy) == original


def test_error_half_way_through_a_patch_is_rolled_back_and_recorded(
    monkeypatch: pytest.MonkeyPatch, trees: tuple[Path, Path], journal: Journal
) -> None:
    _, copy = trees
    original = tree_digest(copy)
    with monkeypatch.context() as m:
        fail_second_write(m, OSError(28, "No space left on device"))
        rec = journal.apply(FilePatch(id="l1-enospc", root=copy, diff=TWO_FILE_DIFF))
    assert rec.state == "failed" and "No space left" in (rec.error or "")
    assert "previous state restored" in (rec.error or "")
    assert tree_digest(copy) == original and journal.applied_changes() == []


def test_crash_during_revert_recovers_to_still_applied(
    monkeypatch: pytest.MonkeyPatch, tmp_path: Path, journal: Journal
) -> None:
    env_file = tmp_path / "opt_l2_env.sh"
    journal.apply(EnvChange(id="e1", env_file=env_file, variables={"A": "1"}))
    applied = env_file.read_bytes()

    def crash(*_: Any) -> dict[str, Any]:
        raise Crash

    with monkeypatch.context() as m, pytest.raises(Crash):
        m.setitem(EFFECTS, "env", replace(EFFECTS["env"], restore=crash))
        journal.revert("e1")
    reopened = Journal(journal.path)
    assert reopened.pending() == ["e1"]
    assert [r.state for r in reopened.recover()] == ["applied"]
    assert env_file.read_bytes() == applied
    assert reopened.revert("e1").state == "reverted" and not env_file.exists()


def test_torn_last_line_is_cut_off_by_recover(tmp_path: Path, journal: Journal) -> None:
    journal.apply(EnvChange(id="e1", env_file=tmp_path / "opt_l2_env.sh", variables={"A": "1"}))
    good = journal.path.read_bytes()
    with open(journal.path, "ab") as fh:
        fh.write(b'{"format": "dftune.changes/1", "seq": 3, "id": "e2", "sta')  # died mid-write
    reopened = Journal(journal.path)
    with pytest.raises(JournalError, match="torn"):
        reopened.apply(EnvChange(id="e2", env_file=tmp_path / "opt_l2_env.sh", variables={"B": "1"}))
    assert reopened.recover() == []
    assert journal.path.read_bytes() == good
    assert reopened.apply(
        EnvChange(id="e2", env_file=tmp_path / "opt_l2_env.sh", variables={"B": "1"})
    ).state == ("applied")


def test_corrupt_record_in_the_middle_is_an_error(tmp_path: Path) -> None:
    path = tmp_path / "j.jsonl"
    path.write_text('not json\n{"also": "bad"}\n')
    with pytest.raises(JournalError, match=":1: corrupt"):
        Journal(path)


def test_every_record_is_fsynced(monkeypatch: pytest.MonkeyPatch, tmp_path: Path, journal: Journal) -> None:
    synced: list[str] = []
    real_fsync = os.fsync

    def fsync(fd: int) -> None:
        with_path = os.readlink(f"/proc/self/fd/{fd}")
        synced.append(with_path)
        real_fsync(fd)

    monkeypatch.setattr(os, "fsync", fsync)
    journal.apply(EnvChange(id="e1", env_file=tmp_path / "opt_l2_env.sh", variables={"A": "1"}))
    journal.revert("e1")
    assert synced.count(str(journal.path)) == len(journal.records()) == 4


CRASH_CHILD = textwrap.dedent(
    """
    import json, os, sys
    from dftune.tools.runner import changes
    journal_path, change_json = sys.argv[1], sys.argv[2]
    real = changes.Journal._append
    def append(self, loaded, change_id, state, **kw):
        if state == "applied":
            os._exit(9)  # the process dies after the effect, before the record
        return real(self, loaded, change_id, state, **kw)
    changes.Journal._append = append
    change = changes.CommandChange.model_validate(json.loads(change_json))
    changes.Journal(journal_path).apply(change, approved=True)
    """
)


def command_change(tmp_path: Path, change_id: str = "l3-001", **kw: Any) -> CommandChange:
    """An L3 change on a harmless 'setting' kept in tmp: value.txt; log.txt counts runs."""
    value, log = tmp_path / "value.txt", tmp_path / "log.txt"
    setter = "import sys; open(sys.argv[1], 'w').write(sys.argv[2])"
    args: dict[str, Any] = {
        "id": change_id,
        "privilege": "no-sudo",
        "argv": [
            PY,
            "-c",
            "import sys; open(sys.argv[1], 'a').write('ran\\n'); open(sys.argv[2], 'w').write('256')",
            str(log),
            str(value),
        ],
        "read_current": [PY, "-c", "import sys; print(open(sys.argv[1]).read())", str(value)],
        "rollback": [PY, "-c", setter, str(value), "{current}"],
        "expect_after": "256",
        "timeout_s": 30,
        "description": "readahead 128 -> 256 KiB (stand-in)",
    }
    args.update(kw)
    return CommandChange(**args)


def test_real_process_death_after_a_command_ran(tmp_path: Path) -> None:
    (tmp_path / "value.txt").write_text("128 kB")
    change = command_change(tmp_path)
    jpath = tmp_path / "changes.journal.jsonl"
    proc = subprocess.run(
        [PY, "-c", CRASH_CHILD, str(jpath), change.model_dump_json()],
        capture_output=True,
        text=True,
        timeout=120,
        check=False,
    )
    assert proc.returncode == 9, proc.stderr
    assert [json.loads(line)["state"] for line in jpath.read_text().splitlines()] == ["intent"]
    assert (tmp_path / "log.txt").read_text() == "ran\n"

    j = Journal(jpath)
    recs = j.recover()
    assert [(r.id, r.state) for r in recs] == [("l3-001", "applied")]
    assert recs[0].detail["value"] == "256"
    with pytest.raises(DuplicateChange):
        j.apply(change, approved=True)
    assert (tmp_path / "log.txt").read_text() == "ran\n"  # ran once, never twice
    assert j.revert("l3-001").state == "reverted"
    assert (tmp_path / "value.txt").read_text() == "128 kB"


# --------------------------------------------------------------------------- L3 commands


def test_command_needs_approval(tmp_path: Path, journal: Journal) -> None:
    (tmp_path / "value.txt").write_text("128")
    with pytest.raises(ApprovalRequired, match="approved=True"):
        journal.apply(command_change(tmp_path))
    assert not (tmp_path / "log.txt").exists()
    assert (tmp_path / "value.txt").read_text() == "128"
    assert journal.records() == []


def test_command_records_previous_value_and_rolls_back(tmp_path: Path, journal: Journal) -> None:
    (tmp_path / "value.txt").write_text("128 'quoted' value\n")
    rec = journal.apply(command_change(tmp_path), approved=True)
    assert rec.state == "applied", rec.error
    assert rec.detail["command"]["exit_code"] == 0 and rec.detail["value_after"] == "256"
    intent = journal.history("l3-001")[0]
    assert isinstance(intent.undo, CommandUndo)
    assert intent.undo.previous == "128 'quoted' value"
    assert intent.undo.rollback_argv[-1] == "128 'quoted' value"  # the exact rollback command
    assert (tmp_path / "value.txt").read_text() == "256"

    rec = journal.revert("l3-001")
    assert rec.state == "reverted" and rec.detail["value_after"] == "128 'quoted' value"
    assert (tmp_path / "value.txt").read_text() == "128 'quoted' value"  # stripped value written back


def test_admin_only_is_never_executed(tmp_path: Path, journal: Journal) -> None:
    (tmp_path / "value.txt").write_text("128")
    change = command_change(tmp_path, privilege="admin-only")
    rec = journal.apply(change, approved=True)
    assert rec.state == "manual" and "never executed" in rec.detail["note"]
    assert rec.detail["rollback"] == change.rollback
    assert not (tmp_path / "log.txt").exists()
    assert journal.applied_changes() == []
    with pytest.raises(ChangeError, match="not in effect"):
        journal.revert(change.id)


def test_failed_command_is_recorded_with_its_output(tmp_path: Path, journal: Journal) -> None:
    (tmp_path / "value.txt").write_text("128")
    change = command_change(
        tmp_path, argv=[PY, "-c", "import sys; sys.stderr.write('boom: denied'); sys.exit(3)"]
    )
    rec = journal.apply(change, approved=True)
    assert rec.state == "failed"
    assert rec.detail["command"]["exit_code"] == 3
    assert "boom: denied" in rec.detail["command"]["stderr_tail"] and "boom" in (rec.error or "")
    assert journal.applied_changes() == []


def test_failed_command_that_changed_the_value_is_rolled_back(tmp_path: Path, journal: Journal) -> None:
    (tmp_path / "value.txt").write_text("128")
    half = "import sys; open(sys.argv[1], 'w').write('999'); sys.exit(1)"
    rec = journal.apply(
        command_change(tmp_path, argv=[PY, "-c", half, str(tmp_path / "value.txt")]), approved=True
    )
    assert rec.state == "failed" and "previous state restored" in (rec.error or "")
    assert (tmp_path / "value.txt").read_text() == "128"


def test_command_timeout_kills_and_records(tmp_path: Path, journal: Journal) -> None:
    (tmp_path / "value.txt").write_text("128")
    change = command_change(tmp_path, argv=[PY, "-c", "import time; time.sleep(60)"], timeout_s=1)
    rec = journal.apply(change, approved=True)
    assert rec.state == "failed" and rec.detail["command"]["timed_out"] is True


def test_unreadable_current_value_refuses_before_anything(tmp_path: Path, journal: Journal) -> None:
    change = command_change(tmp_path)  # value.txt does not exist: read_current fails
    with pytest.raises(ChangeError, match="read_current failed"):
        journal.apply(change, approved=True)
    assert not (tmp_path / "log.txt").exists() and journal.records() == []


def test_command_argv_must_be_a_list_not_a_shell_string(tmp_path: Path) -> None:
    with pytest.raises(ValidationError, match="not a shell string"):
        command_change(tmp_path, argv=["sysctl -w vm.dirty_ratio=10"])
    with pytest.raises(ValidationError):
        command_change(tmp_path, argv="sysctl -w vm.dirty_ratio=10")
    with pytest.raises(ValidationError):
        command_change(tmp_path, privilege="root")


# --------------------------------------------------------------------------- all together


def test_revert_all_goes_in_reverse_order_and_restores_everything(
    tmp_path: Path, trees: tuple[Path, Path], journal: Journal
) -> None:
    _, copy = trees
    (tmp_path / "value.txt").write_text("128")
    env_file = copy.parent / "opt_l2_env.sh"
    tree_before = tree_digest(copy)
    journal.apply(EnvChange(id="l2", env_file=env_file, variables={"MALLOC_ARENA_MAX": "2"}))
    journal.apply(FilePatch(id="l1", root=copy, diff=APP_DIFF))
    journal.apply(command_change(tmp_path, change_id="l3"), approved=True)
    journal.apply(command_change(tmp_path, change_id="l3-admin", privilege="admin-only"))
    assert [c.id for c in journal.applied_changes()] == ["l2", "l1", "l3"]
    assert journal.env_overlay() == {"MALLOC_ARENA_MAX": "2"}

    recs = journal.revert_all()
    assert [(r.id, r.state) for r in recs] == [("l3", "reverted"), ("l1", "reverted"), ("l2", "reverted")]
    assert tree_digest(copy) == tree_before
    assert not env_file.exists()
    assert (tmp_path / "value.txt").read_text() == "128"
    assert journal.applied_changes() == [] and journal.revert_all() == []
    for rec in journal.records():  # every line is a self-contained, valid record
        assert rec.format == changes.JOURNAL_FORMAT


def test_hunks_beyond_the_end_of_the_file_are_refused(trees: tuple[Path, Path], journal: Journal) -> None:
    _, copy = trees
    for diff, match in (
        (
            "--- a/app.py\n+++ b/app.py\n@@ -40,0 +41 @@\n+x\n",
            "insert after line 40 but the file has 30 lines",
        ),
        (
            "--- a/app.py\n+++ b/app.py\n@@ -30,2 +30,1 @@\n line 30\n-line 31\n",
            "lines 30-31 but the file has 30",
        ),
    ):
        with pytest.raises(PatchError, match=match):
            journal.apply(FilePatch(id="l1-eof", root=copy, diff=diff))
    diff = "--- a/app.py\n+++ b/app.py\n@@ -30,0 +31 @@\n+line 31\n"  # appending at the very end is fine
    assert journal.apply(FilePatch(id="l1-append", root=copy, diff=diff)).state == "applied"
    assert (copy / "app.py").read_text().endswith("line 30\nline 31\n")
