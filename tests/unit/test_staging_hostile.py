"""Staging against a hostile data folder and a hostile program (the fifth hostile round's attacks,
each as a test): a FIFO, a socket or a path longer than the system takes in the data folder is
never a hang or a raw error list; a program that replaces its staged data folder with a link
gets nothing copied back from the link's target, and the replicate fails saying so."""

from __future__ import annotations

import os
import shutil
import socket
import sys
import threading
from pathlib import Path

import pytest

from dftune.tools.runner import copy_back as cb
from dftune.tools.runner.staging import KEPT_PREFIX, StagingError, snapshot, staged_replicate
from tests.unit.test_copy_back import SHM, _data


def _shm_or_skip(data: Path) -> None:
    shm = Path("/dev/shm")
    if not (shm.is_dir() and os.access(shm, os.W_OK)) or os.stat(shm).st_dev == os.stat(data).st_dev:
        pytest.skip("no writable /dev/shm on another filesystem than the test's folder")


def _kept_in(message: str) -> Path:
    return Path(message.split("the staged copy is kept in ")[1].split(":")[0])


# --------------------------------------------------------------------------- copy-in


def test_a_fifo_and_a_socket_in_the_data_folder_are_skipped_never_opened(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    data = _data(tmp_path)
    _shm_or_skip(data)
    os.mkfifo(data / "infifo")
    monkeypatch.chdir(data)  # a socket's path is short (108 bytes): bound relative to the folder
    sock = socket.socket(socket.AF_UNIX)
    sock.bind("insock")
    seen: list[object] = []

    def stage() -> None:
        try:
            with staged_replicate(data, SHM, "arm-fifo-in") as staged:
                seen.append(sorted(p.name for p in staged.path.iterdir()))
            seen.append(staged)
        except BaseException as exc:  # handed to the test thread
            seen.append(exc)

    worker = threading.Thread(target=stage, daemon=True)
    worker.start()
    worker.join(20)
    if worker.is_alive():  # the copy opened the FIFO and waits for a writer: release it, then fail
        fd = os.open(data / "infifo", os.O_WRONLY | os.O_NONBLOCK)
        os.close(fd)
        worker.join(5)
        pytest.fail("staging blocked on a FIFO in the data folder")
    sock.close()
    assert len(seen) == 2 and not isinstance(seen[-1], BaseException), seen
    assert seen[0] == ["input.bin"]  # the data staged, the special files not
    notes = seen[1].notes  # type: ignore[attr-defined]
    assert any("in " + str(data) in n and "more special file(s)): not staged" in n for n in notes), notes


def test_sparse_copy_refuses_a_special_file_without_opening_it(tmp_path: Path) -> None:
    os.mkfifo(tmp_path / "pipe")
    with pytest.raises(cb.SpecialFile, match="a named pipe"):
        cb.sparse_copy(tmp_path / "pipe", tmp_path / "out")
    (tmp_path / "real").write_text("real\n")
    (tmp_path / "link").symlink_to("real")
    with pytest.raises(cb.SpecialFile, match="a link"):
        cb.sparse_copy(tmp_path / "link", tmp_path / "out")  # a link is never read through
    assert not (tmp_path / "out").exists()


def _deep(root: Path, total: int = 4200) -> None:
    """Folders nested past PATH_MAX (4096), made one at a time relative to the last."""
    fd = os.open(root, os.O_RDONLY)
    try:
        made = len(str(root))
        while made < total:
            os.mkdir("d" * 200, dir_fd=fd)
            inner = os.open("d" * 200, os.O_RDONLY, dir_fd=fd)
            os.close(fd)
            fd = inner
            made += 201
        os.close(os.open("leaf.bin", os.O_WRONLY | os.O_CREAT, 0o600, dir_fd=fd))
    finally:
        os.close(fd)


def test_a_path_longer_than_the_system_takes_is_one_short_line(tmp_path: Path) -> None:
    data = _data(tmp_path)
    _shm_or_skip(data)
    _deep(data)
    with pytest.raises(StagingError) as err, staged_replicate(data, SHM, "arm-deep"):
        pytest.fail("a copy that failed must not run the program")
    line = str(err.value)
    assert "\n" not in line and "[(" not in line and len(line) < 700, line
    assert line.startswith(f"cannot stage {data} in ") and "File name too long" in line


def test_many_failed_copies_are_the_first_and_a_count(tmp_path: Path) -> None:
    data = _data(tmp_path)
    _shm_or_skip(data)
    for i in range(300):
        (data / f"f{i:03d}.bin").write_bytes(b"y")

    def refuse(src: str | os.PathLike[str], dst: str | os.PathLike[str]) -> None:
        raise OSError(6, "No such device or address", str(src))

    with pytest.raises(StagingError) as err, staged_replicate(data, SHM, "arm-many", copier=refuse):
        pytest.fail("a copy that failed must not run the program")
    line = str(err.value)
    assert "[(" not in line and len(line) < 700 and "(and 300 more file(s))" in line, line


def test_the_cli_never_prints_a_tree_copys_error_list(capsys: pytest.CaptureFixture[str]) -> None:
    import typer

    from dftune.cli.common import user_errors

    failures = [(f"/src/f{i}", f"/dst/f{i}", "[Errno 6] No such device or address") for i in range(500)]
    with pytest.raises(typer.Exit), user_errors():
        raise shutil.Error(failures)
    err = capsys.readouterr().err
    assert err.count("\n") == 1 and "[(" not in err and len(err) < 400, err
    assert "/src/f0: [Errno 6] No such device or address (and 499 more file(s))" in err


# --------------------------------------------------------------------------- copy-back


def test_a_data_folder_replaced_by_a_link_gives_nothing_back_and_keeps_the_copy(tmp_path: Path) -> None:
    data = _data(tmp_path)
    _shm_or_skip(data)
    victim = tmp_path / "victim"
    (victim / "deep").mkdir(parents=True)
    (victim / "secret.txt").write_text("secret\n")
    (victim / "deep" / "key.pem").write_text("key\n")
    with pytest.raises(StagingError) as err, staged_replicate(data, SHM, "arm-swap") as staged:
        d = str(staged.path)
        os.rename(d, d + ".mine")
        (Path(d + ".mine") / "result.txt").write_text("the real output\n")
        os.symlink(victim, d)
    line = str(err.value)
    assert "\n" not in line and f"the program replaced its data folder {staged.path} with a link" in line
    assert sorted(p.name for p in data.iterdir()) == ["input.bin"]  # nothing of the victim came in
    assert (victim / "secret.txt").read_text() == "secret\n" and (victim / "deep" / "key.pem").is_file()
    kept = _kept_in(line)
    try:
        assert kept.name.startswith(KEPT_PREFIX)
        assert (kept / "data.mine" / "result.txt").read_text() == "the real output\n"
        assert f"cp -a --sparse=always {kept}/" in line
        assert not staged.home.exists()
    finally:
        shutil.rmtree(kept)


def test_the_folder_holding_the_copy_replaced_by_a_link_gives_nothing_back(tmp_path: Path) -> None:
    data = _data(tmp_path)
    _shm_or_skip(data)
    victim = tmp_path / "victim"
    (victim / "data").mkdir(parents=True)
    (victim / "data" / "secret.txt").write_text("secret\n")
    moved = None
    try:
        with pytest.raises(StagingError) as err, staged_replicate(data, SHM, "arm-home") as staged:
            moved = Path(str(staged.home) + ".moved")
            os.rename(staged.home, moved)
            os.symlink(victim, staged.home)
        assert "replaced the folder of its staged data" in str(err.value) and "with a link" in str(err.value)
        assert sorted(p.name for p in data.iterdir()) == ["input.bin"]
        assert (victim / "data" / "secret.txt").read_text() == "secret\n"
        assert not os.path.lexists(staged.home)  # the program's link removed, its target untouched
    finally:
        if moved is not None:
            shutil.rmtree(moved, ignore_errors=True)


def test_the_snapshot_never_follows_a_link_at_the_root_or_below(tmp_path: Path) -> None:
    target = tmp_path / "target"
    (target / "inner").mkdir(parents=True)
    (target / "inner" / "f.txt").write_text("f")
    (tmp_path / "root").symlink_to(target)
    assert snapshot(tmp_path / "root") == {}
    real = tmp_path / "real"
    real.mkdir()
    (real / "own.txt").write_text("own")
    (real / "sub").symlink_to(target)
    (real / "file_link").symlink_to(target / "inner" / "f.txt")
    assert list(snapshot(real)) == ["own.txt"]


def test_copy_back_never_reads_through_a_link_in_the_copy(tmp_path: Path) -> None:
    victim = tmp_path / "victim"
    victim.mkdir()
    (victim / "f.txt").write_text("secret\n")
    copy, origin = tmp_path / "copy", tmp_path / "origin"
    copy.mkdir()
    origin.mkdir()
    (copy / "sub").symlink_to(victim)  # swapped in after the snapshot listed sub/f.txt
    result = cb.copy_back(copy, origin, ["sub/f.txt"])
    assert not result.copied and result.failed == [
        ("sub/f.txt", "a folder on its way in the staged copy is a link (not followed)")
    ]
    assert list(origin.iterdir()) == []
    linked_root = tmp_path / "linked"
    linked_root.symlink_to(copy)
    (copy / "plain.txt").write_text("p")
    assert cb.copy_back(linked_root, origin, ["plain.txt"]).failed  # a link at the root: not followed


@pytest.mark.skipif(sys.platform != "linux", reason="the staged program is a Linux process")
def test_a_bench_replicate_whose_program_swapped_its_folder_fails_with_that_reason(tmp_path: Path) -> None:
    from dftune.tools.runner.bench import bench
    from dftune.tools.runner.spec import load_spec

    data = _data(tmp_path)
    _shm_or_skip(data)
    victim = tmp_path / "victim"
    victim.mkdir()
    (victim / "secret.txt").write_text("secret\n")
    (tmp_path / "swap.py").write_text(
        "import os, sys\n"
        "d = sys.argv[1]\n"
        "os.rename(d, d + '.mine')\n"
        "open(os.path.join(d + '.mine', 'out.txt'), 'w').write('mine')\n"
        f"os.symlink({str(victim)!r}, d)\n"
        "print('elapsed 1.0')\n"
    )
    spec = tmp_path / "swap.toml"
    spec.write_text(
        'name = "swap"\ncommand = ["{python}", "swap.py", "{data_dir}"]\n'
        f'data_dir = "{data}"\nreplicates = 1\ntimeout_s = 60\npage_cache = "warm"\n'
        '[metric]\nkind = "stdout_regex"\npattern = \'elapsed ([0-9.]+)\'\n[tracing]\nmode = "off"\n'
    )
    result = bench(load_spec(spec), workdir=tmp_path / "w", stage=SHM, prepare=False)
    rep = result.replicates[0]
    assert rep.status == "failed" and "the program replaced its data folder" in rep.reason, rep.reason
    assert "\n" not in rep.reason
    assert sorted(p.name for p in data.iterdir()) == ["input.bin"]
    shutil.rmtree(_kept_in(rep.reason))


def test_every_replicate_that_keeps_its_copy_keeps_its_own(tmp_path: Path) -> None:
    data = _data(tmp_path)
    _shm_or_skip(data)
    kept: list[Path] = []
    try:
        for attempt in range(2):  # two replicates of one arm: the same staging folder each time
            with pytest.raises(StagingError) as err, staged_replicate(data, SHM, "arm-twice") as staged:
                d = str(staged.path)
                os.rename(d, d + ".mine")
                (Path(d + ".mine") / "out.txt").write_text(f"run {attempt}\n")
                os.symlink(tmp_path, d)
            kept.append(_kept_in(str(err.value)))
        assert kept[0] != kept[1] and kept[1].name == kept[0].name + "-2"
        assert [(k / "data.mine" / "out.txt").read_text() for k in kept] == ["run 0\n", "run 1\n"]
    finally:
        for k in kept:
            shutil.rmtree(k, ignore_errors=True)
