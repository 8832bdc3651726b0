"""An OS error of a tree copy is one short line: the first failure and how many more."""

from __future__ import annotations

import shutil

from dftune.core.errors import os_error_line


def test_a_full_tier_copy_error_is_its_first_failure_and_a_count() -> None:
    failures = [
        (f"/data/set/file-{i:04d}.bin", f"/dev/shm/x/file-{i:04d}.bin", "[Errno 28] No space left on device")
        for i in range(40)
    ]
    line = os_error_line(shutil.Error(failures))
    assert line == "/data/set/file-0000.bin: [Errno 28] No space left on device (and 39 more file(s))"
    assert len(os_error_line(OSError(28, "No space left on device", "/x" * 400))) <= 300
    assert os_error_line(shutil.Error([("a", "b", "denied")])) == "a: denied"
