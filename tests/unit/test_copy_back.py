"""Staging copies a replicate's outputs back with the rules the program's own writes would have
had in place: never through a link the data folder holds, never outside it, every output back
(or the copy kept and named), special files skipped, sparse files sparse (the fourth hostile
round's attacks, each as a test)."""

from __future__ import annotations

import os
from pathlib import Path

import pytest

from dftune.core.domain.measurements import StagePlan
from dftune.tools.runner import copy_back as cb
from dftune.tools.runner.staging import KEPT_PREFIX, StagingError, staged_replicate

SHM = StagePlan(tier="shm")


def _data(tmp_path: Path) -> Path:
    data = tmp_path / "data"
    data.mkdir()
    (data / "input.bin").write_bytes(b"x" * 4096)
    return data


def test_an_output_that_replaced_a_link_replaces_the_link_never_its_target(tmp_path: Path) -> None:
    data = _data(tmp_path)
    (tmp_path / "victim").write_text("precious\n")
    (tmp_path / "victimdir").mkdir()
    (data / "out.txt").symlink_to("../victim")
    (data / "sub").symlink_to("../victimdir")
    with staged_replicate(data, SHM, "arm-links") as staged:
        # the program replaces both links in its copy, as it would in place (write a new file)
        (staged.path / "out.txt").unlink()
        (staged.path / "out.txt").write_text("result\n")
        (staged.path / "sub").unlink()
        (staged.path / "sub").mkdir()
        (staged.path / "sub" / "planted.txt").write_text("planted\n")
    assert (tmp_path / "victim").read_text() == "precious\n"
    assert list((tmp_path / "victimdir").iterdir()) == []
    assert not (data / "out.txt").is_symlink() and (data / "out.txt").read_text() == "result\n"
    assert (data / "sub").is_dir() and not (data / "sub").is_symlink()
    assert (data / "sub" / "planted.txt").read_text() == "planted\n"
    assert any("out.txt was a link" in n for n in staged.notes)


def test_a_fifo_or_a_file_turned_folder_stops_no_other_output(tmp_path: Path) -> None:
    data = _data(tmp_path)
    (data / "a").write_text("a file first\n")
    with staged_replicate(data, SHM, "arm-fifo") as staged:
        os.mkfifo(staged.path / "a.fifo")
        (staged.path / "a").unlink()
        (staged.path / "a").mkdir()
        (staged.path / "a" / "inner.txt").write_text("inside\n")
        (staged.path / "z_result.txt").write_text("last\n")
    assert (data / "z_result.txt").read_text() == "last\n"
    assert (data / "a" / "inner.txt").read_text() == "inside\n"
    assert not (data / "a.fifo").exists()
    assert any("a.fifo in the staged copy is a named pipe" in n for n in staged.notes)


def test_a_sparse_output_comes_back_sparse(tmp_path: Path) -> None:
    data = _data(tmp_path)
    with staged_replicate(data, SHM, "arm-sparse") as staged:
        fh = open(staged.path / "big.sparse", "wb")  # noqa: SIM115 - closed before the copy-back
        fh.truncate(64 << 20)
        fh.write(b"head")
        fh.close()
    st = os.stat(data / "big.sparse")
    assert st.st_size == 64 << 20
    assert st.st_blocks * 512 < 1 << 20  # 64 MiB long, almost nothing allocated
    with open(data / "big.sparse", "rb") as fh:
        assert fh.read(4) == b"head"


def test_an_output_that_cannot_be_copied_keeps_the_copy_and_names_the_command(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    data = _data(tmp_path)
    real = cb.copy_open

    def flaky(fin: int, dst: str | os.PathLike[str]) -> None:
        if Path(dst).name == "b.txt":
            raise OSError(28, "No space left on device")
        real(fin, dst)

    monkeypatch.setattr(cb, "copy_open", flaky)
    with pytest.raises(StagingError) as err, staged_replicate(data, SHM, "arm-full") as staged:
        for name in ("a.txt", "b.txt", "c.txt"):
            (staged.path / name).write_text(name)
    assert (data / "a.txt").read_text() == "a.txt" and (data / "c.txt").read_text() == "c.txt"
    message = str(err.value)
    assert "1 output(s) could not be copied back" in message and "b.txt: No space left on device" in message
    kept = Path(message.split("the staged copy is kept in ")[1].split(":")[0])
    assert kept.parent.name.startswith(KEPT_PREFIX) and (kept / "b.txt").read_text() == "b.txt"
    assert f"cp -a --sparse=always {kept}/b.txt {data}/b.txt" in message
    import shutil

    shutil.rmtree(kept.parent)


def test_a_path_that_leaves_the_folder_is_never_written(tmp_path: Path) -> None:
    data = _data(tmp_path)
    outside = str(tmp_path / "victim.txt")
    result = cb.copy_back(data, tmp_path / "other", ["../escape.txt", outside, ""])
    assert [r for r, _ in result.failed] == ["../escape.txt", outside, ""] and not result.copied
