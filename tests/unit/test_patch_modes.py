"""Patches create and delete regular files only: a git symlink (mode 120000), a submodule or a
mode change is refused, by line, before anything is written; a model's draft of one too.

A ``new file mode 120000`` section was once applied as a regular file of mode 000 holding the
link target, and a model's draft of it became a proposal.
"""

from __future__ import annotations

from pathlib import Path

import pytest

from dftune.agents.optimizer.actions import draft_proposal
from dftune.tools.catalog import default_catalog
from dftune.tools.runner.changes import ChangeError, FilePatch, parse_unified_diff, preview_patch


def section(mode: str, *, delete: bool = False) -> str:
    if delete:
        return (
            f"diff --git a/link b/link\ndeleted file mode {mode}\n--- a/link\n+++ /dev/null\n"
            "@@ -1 +0,0 @@\n-/etc/passwd\n\\ No newline at end of file\n"
        )
    return (
        f"diff --git a/link b/link\nnew file mode {mode}\nindex 0000000..1111111\n--- /dev/null\n"
        "+++ b/link\n@@ -0,0 +1 @@\n+/etc/passwd\n\\ No newline at end of file\n"
    )


@pytest.mark.parametrize(
    ("text", "needle"),
    [
        (section("120000"), "patch line 2: symbolic links are not supported"),
        (section("120000", delete=True), "patch line 2: symbolic links are not supported"),
        (section("160000"), "submodules (gitlinks) are not supported"),
        (section("100600"), "file mode 100600 are not supported"),
        (section("777"), "file mode 777 are not supported"),
        (section("banana"), "unreadable file mode"),
        ("diff --git a/f b/f\nold mode 100644\nnew mode 100755\n", "mode changes are not supported"),
    ],
)
def test_links_submodules_and_odd_modes_are_refused(tmp_path: Path, text: str, needle: str) -> None:
    with pytest.raises(ChangeError, match=needle.replace("(", r"\(").replace(")", r"\)")):
        parse_unified_diff(text)
    (tmp_path / "link").write_text("/etc/passwd")
    with pytest.raises(ChangeError):
        preview_patch(FilePatch(id="p", strategy="l1.write_buffering", root=tmp_path, diff=text, strip=1))
    assert sorted(p.name for p in tmp_path.iterdir()) == ["link"] and not (tmp_path / "link").is_symlink()


def test_regular_new_files_still_apply(tmp_path: Path) -> None:
    for mode in ("100644", "100755"):
        (fd,) = parse_unified_diff(section(mode))
        assert fd.create and fd.new_mode == int(mode[-3:], 8)


def test_a_drafted_symlink_never_becomes_a_proposal(tmp_path: Path) -> None:
    s = default_catalog().strategies["l1.write_buffering"]
    with pytest.raises(ValueError, match="symbolic links are not supported"):
        draft_proposal(s, section("120000"), tmp_path, tmp_path / "run", "model")
    assert not (tmp_path / "run").exists() and not (tmp_path / "link").exists()
