"""Filesystem detection for a workload's data directory (``tools/diagnose/fs.py``).

Simulated machines are fake mount tables whose mount points are real directories under
``tmp_path``, so path resolution (missing paths, symlinks) runs for real while the table
says Lustre, GPFS, NFS, VAST, BeeGFS, ... The last tests check the real machine against
``/proc/self/mountinfo``, ``stat -f`` and ``df``.
"""

from __future__ import annotations

import os
import re
import shutil
import subprocess
from collections.abc import Callable
from pathlib import Path

import pytest
from pydantic import ValidationError

from dftune.core.vocabulary import FS_TYPES
from dftune.tools.diagnose import fs
from dftune.tools.diagnose.fs import FsInfo, detect, find_mount, parse_mount_table

# --------------------------------------------------------------------------------------
# building a fake mount table


def _esc(text: str) -> str:
    """Escape a field the way the kernel does in mountinfo."""
    return text.replace("\\", "\\134").replace(" ", "\\040").replace("\t", "\\011").replace("\n", "\\012")


class Table:
    """A fake /proc/self/mountinfo; mount points are created as real directories."""

    def __init__(self, root: Path) -> None:
        self.root = root
        self.lines: list[str] = []
        self.next_id = 100

    def add(
        self,
        rel: str,
        fstype: str,
        source: str,
        super_opts: str = "rw",
        *,
        mnt_opts: str = "rw,relatime",
        parent: int = 1,
        mount_id: int | None = None,
        absolute: str | None = None,
    ) -> Path:
        mount_point = Path(absolute) if absolute is not None else self.root / rel
        if absolute is None:
            mount_point.mkdir(parents=True, exist_ok=True)
        mid = mount_id if mount_id is not None else self.next_id
        self.next_id = max(self.next_id, mid) + 1
        self.lines.append(
            f"{mid} {parent} 0:{mid} / {_esc(str(mount_point))} {mnt_opts} shared:{mid} - "
            f"{fstype} {_esc(source)} {super_opts}"
        )
        return mount_point

    def write(self, name: str = "mountinfo") -> Path:
        path = self.root / name
        path.write_text("\n".join(self.lines) + "\n")
        return path


NFS4_OPTS = (
    "rw,vers=4.2,rsize=1048576,wsize=1048576,namlen=255,hard,proto=tcp,timeo=600,retrans=2,sec=sys,"
    "clientaddr=10.1.1.5,local_lock=none,addr=10.1.1.9"
)


@pytest.fixture
def root(tmp_path: Path) -> Path:
    r = tmp_path.resolve() / "machine"
    r.mkdir()
    return r


@pytest.fixture
def hpc(root: Path) -> tuple[Path, Path]:
    """A simulated HPC node: overlay container root plus every storage type of interest."""
    t = Table(root)
    t.add(
        "",
        "overlay",
        "overlay",
        "rw,lowerdir=/l1:/l2,upperdir=/u,workdir=/w",
        absolute="/",
        mount_id=1,
        parent=0,
    )
    t.add("p/lustre5", "lustre", "172.16.70.5@o2ib100:172.16.70.6@o2ib100:/lustre5", "rw,flock,lazystatfs")
    t.add("gpfs/alpine", "gpfs", "alpine", "rw")
    t.add("mnt/beegfs", "beegfs", "beegfs_nodev", "rw,cfgFile=/etc/beegfs/beegfs-client.conf")
    t.add("mnt/fhgfs", "fhgfs", "fhgfs_nodev", "rw")
    t.add("g/g0", "nfs4", "cz-ws2-nfs-new.llnl.gov:/g/g0", NFS4_OPTS)
    t.add("vast/byname", "nfs", "vast1-vip.llnl.gov:/projects", "rw,vers=3,nconnect=16,proto=tcp")
    t.add(
        "vast/byoption",
        "nfs",
        "172.25.1.1:/",
        "rw,vers=3,nconnect=8,remoteports=172.25.1.1-172.25.1.32,spread_reads,spread_writes",
    )
    t.add("scratch", "xfs", "/dev/nvme0n1", "rw,attr2,inode64,logbufs=8,logbsize=32k,noquota")
    t.add("local", "ext4", "/dev/sda2", "rw,errors=remount-ro")
    t.add("old", "ext3", "/dev/sdb1", "rw")
    t.add("btr", "btrfs", "/dev/sdc1", "rw,space_cache=v2,subvolid=5,subvol=/")
    t.add("tank", "zfs", "tank/data", "rw,xattr,noacl")
    t.add("tmp", "tmpfs", "tmpfs", "rw,size=1048576k")
    t.add("ram", "ramfs", "ramfs", "rw")
    t.add("gcs", "fuse.gcsfuse", "bucket", "rw,user_id=1000,group_id=1000")
    t.add("smb", "cifs", "//winserver/share", "rw,vers=3.1.1")
    return t.write(), root


def _ok(info: FsInfo) -> FsInfo:
    assert info.fs_type in FS_TYPES
    return info


# --------------------------------------------------------------------------------------
# parallel filesystems


def test_lustre(hpc: tuple[Path, Path]) -> None:
    table, root = hpc
    data = root / "p/lustre5/user/fractals"
    data.mkdir(parents=True)
    info = _ok(detect(data, mountinfo=table))
    assert info.fs_type == "lustre"
    assert info.kernel_fstype == "lustre"
    assert info.mount_point == str(root / "p/lustre5")
    assert info.source == "172.16.70.5@o2ib100:172.16.70.6@o2ib100:/lustre5"
    assert info.is_network and info.exists
    assert info.warning is None
    assert "flock" in info.options and "relatime" in info.options
    assert info.path == str(data) and info.resolved == str(data)


def test_gpfs(hpc: tuple[Path, Path]) -> None:
    table, root = hpc
    info = _ok(detect(root / "gpfs/alpine", mountinfo=table))
    assert (info.fs_type, info.kernel_fstype, info.is_network, info.warning) == ("gpfs", "gpfs", True, None)


@pytest.mark.parametrize("rel, kernel", [("mnt/beegfs", "beegfs"), ("mnt/fhgfs", "fhgfs")])
def test_beegfs_and_old_fhgfs_name(hpc: tuple[Path, Path], rel: str, kernel: str) -> None:
    table, root = hpc
    info = _ok(detect(root / rel / "x", mountinfo=table))
    assert (info.fs_type, info.kernel_fstype, info.is_network, info.warning) == ("beegfs", kernel, True, None)


# --------------------------------------------------------------------------------------
# NFS and VAST


def test_nfs4_warns_naming_path_and_mount(hpc: tuple[Path, Path]) -> None:
    table, root = hpc
    data = root / "g/g0/user/scaffold"
    data.mkdir(parents=True)
    info = _ok(detect(str(data), mountinfo=table))
    assert info.fs_type == "nfs"
    assert info.kernel_fstype == "nfs4"
    assert info.is_network
    assert info.source == "cz-ws2-nfs-new.llnl.gov:/g/g0"
    assert "vers=4.2" in info.options and "addr=10.1.1.9" in info.options
    w = info.warning
    assert w is not None and "\n" not in w
    assert w.startswith("NFS warning")
    assert str(data) in w  # the path as given
    assert str(root / "g/g0") in w and "cz-ws2-nfs-new.llnl.gov:/g/g0" in w  # the mount
    assert "Lustre" in w and "node-local" in w and "repoint the data dir" in w


def test_nfs_warning_uses_the_path_as_given(hpc: tuple[Path, Path], monkeypatch: pytest.MonkeyPatch) -> None:
    table, root = hpc
    monkeypatch.chdir(root / "g")
    info = detect("g0/run1/data", mountinfo=table)
    assert info.fs_type == "nfs" and not info.exists
    assert info.warning is not None and "data path g0/run1/data is on NFS" in info.warning


@pytest.mark.parametrize("rel", ["vast/byname", "vast/byoption"])
def test_vast_over_nfs(hpc: tuple[Path, Path], rel: str) -> None:
    table, root = hpc
    info = _ok(detect(root / rel / "ckpt", mountinfo=table))
    assert info.fs_type == "vast"
    assert info.kernel_fstype == "nfs"
    assert info.is_network
    assert info.warning is None
    assert any("vast inferred" in n and "heuristic" in n for n in info.notes)


def test_nfs_with_vast_only_in_export_path_is_plain_nfs(root: Path) -> None:
    t = Table(root)
    t.add("home", "nfs", "10.0.0.4:/export/vastly/home", "rw,vers=3,nconnect=8")
    info = detect(root / "home", mountinfo=t.write())
    assert info.fs_type == "nfs" and info.warning is not None


def test_vast_ipv6_host_name(root: Path) -> None:
    t = Table(root)
    t.add("v6", "nfs4", "[fd00::vast:1]:/data", "rw,vers=4.1")
    assert detect(root / "v6", mountinfo=t.write()).fs_type == "vast"


# --------------------------------------------------------------------------------------
# local, memory and container filesystems


@pytest.mark.parametrize(
    "rel, fs_type, kernel",
    [
        ("scratch", "xfs", "xfs"),
        ("local", "ext4", "ext4"),
        ("old", "local", "ext3"),
        ("btr", "local", "btrfs"),
        ("tank", "local", "zfs"),
    ],
)
def test_local_block_filesystems(hpc: tuple[Path, Path], rel: str, fs_type: str, kernel: str) -> None:
    table, root = hpc
    info = _ok(detect(root / rel, mountinfo=table))
    assert (info.fs_type, info.kernel_fstype, info.is_network, info.warning) == (fs_type, kernel, False, None)
    assert info.mount_point == str(root / rel)


@pytest.mark.parametrize("rel, kernel", [("tmp", "tmpfs"), ("ram", "ramfs")])
def test_tmpfs_and_ramfs_warn_softly(hpc: tuple[Path, Path], rel: str, kernel: str) -> None:
    table, root = hpc
    info = _ok(detect(root / rel / "d", mountinfo=table))
    assert (info.fs_type, info.kernel_fstype, info.is_network) == ("tmpfs", kernel, False)
    assert info.warning is not None and info.warning.startswith("tmpfs warning")
    assert "RAM" in info.warning and str(root / rel / "d") in info.warning


@pytest.mark.skipif(not os.path.isdir("/dev/shm"), reason="no /dev/shm here")
def test_dev_shm(root: Path) -> None:
    t = Table(root)
    t.add("", "ext4", "/dev/vda", absolute="/", mount_id=1, parent=0)
    t.add("", "tmpfs", "tmpfs", "rw,nosuid,nodev", absolute="/dev/shm")
    info = detect("/dev/shm", mountinfo=t.write())
    assert info.fs_type == "tmpfs" and info.mount_point == "/dev/shm"
    assert info.warning is not None and "/dev/shm" in info.warning
    # Whatever the kernel calls it, a mount at /dev/shm is shared memory.
    t2 = Table(root)
    t2.add("", "ext4", "/dev/vda", absolute="/", mount_id=1, parent=0)
    t2.add("", "shm", "none", absolute="/dev/shm")
    assert detect("/dev/shm", mountinfo=t2.write("mountinfo2")).fs_type == "tmpfs"


def test_overlay_container_root(hpc: tuple[Path, Path]) -> None:
    table, root = hpc
    plain = root / "workdir/data"  # not under any of the storage mounts
    plain.mkdir(parents=True)
    info = _ok(detect(plain, mountinfo=table))
    assert info.fs_type == "overlay"
    assert info.mount_point == "/"
    assert info.kernel_fstype == "overlay" and not info.is_network
    assert any("container root" in n for n in info.notes)
    assert info.warning is not None and info.warning.startswith("overlay warning")
    assert "will not reflect the real storage" in info.warning and str(plain) in info.warning


def test_unknown_filesystems(hpc: tuple[Path, Path]) -> None:
    table, root = hpc
    gcs = _ok(detect(root / "gcs", mountinfo=table))
    assert (gcs.fs_type, gcs.kernel_fstype, gcs.is_network, gcs.warning) == (
        "unknown",
        "fuse.gcsfuse",
        True,
        None,
    )
    smb = _ok(detect(root / "smb", mountinfo=table))
    assert smb.fs_type == "unknown" and smb.is_network
    assert smb.warning is not None and "single-server" in smb.warning and "cifs" in smb.warning


# --------------------------------------------------------------------------------------
# mount matching


def test_nested_mounts_longest_path_prefix_wins(root: Path) -> None:
    t = Table(root)
    t.add("", "ext4", "/dev/vda", absolute="/", mount_id=1, parent=0)
    t.add("mnt/data", "nfs4", "filer:/data", "rw,vers=4.2")
    t.add("mnt/data2", "lustre", "10.0.0.1@tcp:/fs2", "rw")
    t.add("mnt/data/fast", "xfs", "/dev/nvme0n1", "rw")
    table = t.write()
    (root / "mnt/data2/x").mkdir()
    (root / "mnt/data/other").mkdir()

    # /mnt/data2 starts with the string /mnt/data but is not under it.
    d2 = detect(root / "mnt/data2/x", mountinfo=table)
    assert (d2.fs_type, d2.mount_point, d2.warning) == ("lustre", str(root / "mnt/data2"), None)
    inner = detect(root / "mnt/data/fast", mountinfo=table)
    assert (inner.fs_type, inner.mount_point) == ("xfs", str(root / "mnt/data/fast"))
    outer = detect(root / "mnt/data/other", mountinfo=table)
    assert (outer.fs_type, outer.mount_point) == ("nfs", str(root / "mnt/data"))
    exact = detect(root / "mnt/data", mountinfo=table)
    assert exact.mount_point == str(root / "mnt/data")
    above = detect(root / "mnt", mountinfo=table)
    assert (above.fs_type, above.mount_point) == ("ext4", "/")


def test_over_mounted_mount_point_uses_the_top_mount(root: Path) -> None:
    t = Table(root)
    t.add("", "ext4", "/dev/vda", absolute="/", mount_id=1, parent=0)
    t.add("data", "lustre", "mds@o2ib:/fs", mount_id=60, parent=1)
    t.add("data", "tmpfs", "tmpfs", mount_id=50, parent=60)  # listed later-id-first on purpose
    lines = t.lines
    lines[1], lines[2] = lines[2], lines[1]  # the top mount is listed before its parent
    assert detect(root / "data", mountinfo=t.write()).fs_type == "tmpfs"


def test_escaped_spaces_and_octal_escapes(root: Path) -> None:
    t = Table(root)
    t.add("", "ext4", "/dev/vda", absolute="/", mount_id=1, parent=0)
    t.add("my data", "gpfs", "fs one", "rw")
    table = t.write()
    assert "my\\040data" in table.read_text()
    (root / "my data/sub dir").mkdir()
    info = detect(root / "my data/sub dir", mountinfo=table)
    assert info.fs_type == "gpfs"
    assert info.mount_point == str(root / "my data")
    assert info.source == "fs one"
    # A sibling whose name only shares the unescaped prefix is not inside it.
    (root / "my datab").mkdir()
    assert detect(root / "my datab", mountinfo=table).fs_type == "ext4"
    (m,) = parse_mount_table("7 1 0:7 / /a\\011b\\012c\\134d rw - xfs /dev/x\\040y rw\n")
    assert m.mount_point == "/a\tb\nc\\d" and m.source == "/dev/x y"


def test_proc_mounts_format(root: Path) -> None:
    (root / "lus").mkdir()
    (root / "nfs").mkdir()
    mounts = root / "mounts"
    mounts.write_text(
        "/dev/vda / ext4 rw,relatime 0 0\n"
        f"10.0.0.1@o2ib:/fs {root}/lus lustre rw,flock 0 0\n"
        f"server:/export {root}/nfs nfs rw,vers=3,addr=10.0.0.2 0 0\n"
    )
    assert detect(root / "lus", mountinfo=mounts).fs_type == "lustre"
    nfs = detect(root / "nfs", mountinfo=mounts)
    assert nfs.fs_type == "nfs" and nfs.source == "server:/export" and "vers=3" in nfs.options
    assert nfs.warning is not None


def test_falls_back_to_proc_mounts(root: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    (root / "lus").mkdir()
    mounts = root / "mounts"
    mounts.write_text(f"/dev/vda / ext4 rw 0 0\nmgs@o2ib:/fs {root}/lus lustre rw 0 0\n")
    monkeypatch.setattr(fs, "PROC_MOUNTINFO", root / "no-such-mountinfo")
    monkeypatch.setattr(fs, "PROC_MOUNTS", mounts)
    info = detect(root / "lus", statfs=lambda p: None)
    assert info.fs_type == "lustre"
    assert any("no-such-mountinfo" in n for n in info.notes)


def test_find_mount_ignores_non_path_prefixes() -> None:
    mounts = parse_mount_table(
        "1 0 0:1 / / rw - ext4 /dev/vda rw\n"
        "2 1 0:2 / /mnt/data rw - nfs srv:/d rw\n"
        "3 1 0:3 / /mnt/data2 rw - lustre m@tcp:/f rw\n"
    )
    found = find_mount("/mnt/data2", mounts)
    assert found is not None and found.fstype == "lustre"
    found = find_mount("/mnt/datax/y", mounts)
    assert found is not None and found.mount_point == "/"
    assert find_mount("/x", []) is None


# --------------------------------------------------------------------------------------
# paths that do not exist, symlinks


def test_missing_path_resolves_to_nearest_existing_ancestor(hpc: tuple[Path, Path]) -> None:
    table, root = hpc
    missing = root / "p/lustre5/user/not/yet/created"
    info = _ok(detect(missing, mountinfo=table))
    assert info.exists is False
    assert info.path == str(missing)
    assert info.resolved == str(root / "p/lustre5")
    assert info.fs_type == "lustre"
    assert any("does not exist yet" in n and str(root / "p/lustre5") in n for n in info.notes)


def test_symlink_into_nfs_is_followed(hpc: tuple[Path, Path]) -> None:
    table, root = hpc
    target = root / "g/g0/dataset"
    target.mkdir(parents=True)
    link = root / "local/dataset"
    link.symlink_to(target)
    info = detect(link, mountinfo=table)
    assert info.fs_type == "nfs" and info.resolved == str(target)
    assert info.warning is not None and str(link) in info.warning
    assert any("resolves to" in n for n in info.notes)


# --------------------------------------------------------------------------------------
# statfs magic numbers


def test_magic_constants() -> None:
    expected = {
        "lustre": 0x0BD00BD0,
        "gpfs": 0x47504653,
        "beegfs": 0x19830326,
        "nfs": 0x6969,
        "xfs": 0x58465342,
        "ext4": 0xEF53,
        "tmpfs": 0x01021994,
        "overlay": 0x794C7630,
    }
    for fs_type, magic in expected.items():
        assert fs.magic_table()[magic].fs_type == fs_type
    assert all(k.fs_type in FS_TYPES for k in fs.magic_table().values())


@pytest.mark.skipif(not Path("/usr/include/linux/magic.h").is_file(), reason="no kernel headers")
def test_in_tree_magic_constants_match_kernel_header() -> None:
    header = Path("/usr/include/linux/magic.h").read_text()
    defines = {m[1]: int(m[2], 16) for m in re.finditer(r"#define\s+(\w+)\s+0x([0-9a-fA-F]+)", header)}
    named = [k for k in fs.magic_table().values() if k.header_name]
    assert len(named) >= 10
    for k in named:
        if k.header_name in defines:
            assert k.magic == defines[k.header_name], k.name


def _fixed(magic: int) -> Callable[[str], int | None]:
    return lambda path: magic


def test_statfs_alone_when_no_mount_entry(root: Path) -> None:
    empty = root / "empty"
    empty.write_text("")
    lustre = detect(root, mountinfo=empty, statfs=_fixed(0x0BD00BD0))
    assert (lustre.fs_type, lustre.kernel_fstype, lustre.is_network) == ("lustre", "lustre", True)
    assert lustre.statfs_magic == 0x0BD00BD0 and lustre.mount_point is None
    nfs = detect(root, mountinfo=empty, statfs=_fixed(0x6969))
    assert nfs.fs_type == "nfs" and nfs.warning is not None and str(root) in nfs.warning
    ext = detect(root, mountinfo=empty, statfs=_fixed(0xEF53))
    assert ext.fs_type == "ext4" and any("assumed ext4" in n for n in ext.notes)
    assert detect(root, mountinfo=empty, statfs=_fixed(0x47504653)).fs_type == "gpfs"
    assert detect(root, mountinfo=empty, statfs=_fixed(0x19830326)).fs_type == "beegfs"
    assert detect(root, mountinfo=empty, statfs=_fixed(0x12345678)).fs_type == "unknown"
    assert detect(root, mountinfo=empty).fs_type == "unknown"


def test_statfs_agreeing_with_table_keeps_table_detail(hpc: tuple[Path, Path]) -> None:
    table, root = hpc
    assert detect(root / "vast/byname", mountinfo=table, statfs=_fixed(0x6969)).fs_type == "vast"
    assert detect(root / "old", mountinfo=table, statfs=_fixed(0xEF53)).fs_type == "local"
    assert detect(root / "local", mountinfo=table, statfs=_fixed(0xEF53)).fs_type == "ext4"
    lus = detect(root / "p/lustre5", mountinfo=table, statfs=_fixed(0x0BD00BD0))
    assert lus.fs_type == "lustre" and lus.statfs_magic == 0x0BD00BD0 and lus.notes == []


def test_statfs_disagreeing_with_table_wins(hpc: tuple[Path, Path]) -> None:
    table, root = hpc
    info = detect(root / "local", mountinfo=table, statfs=_fixed(0x6969))
    assert info.fs_type == "nfs" and info.is_network and info.kernel_fstype == "nfs"
    assert any("trusting statfs" in n for n in info.notes)
    assert info.warning is not None and str(root / "local") in info.warning


def test_statfs_fills_in_an_unrecognised_mount_type(root: Path) -> None:
    t = Table(root)
    t.add("home", "autofs", "systemd-1", "rw,fd=45,pgrp=1,timeout=0")
    info = detect(root / "home", mountinfo=t.write(), statfs=_fixed(0x6969))
    assert info.fs_type == "nfs" and info.warning is not None


def test_statfs_failure_keeps_table_answer(hpc: tuple[Path, Path]) -> None:
    table, root = hpc

    def broken(path: str) -> int | None:
        raise PermissionError(13, "Permission denied")

    info = detect(root / "gpfs/alpine", mountinfo=table, statfs=broken)
    assert info.fs_type == "gpfs" and info.statfs_magic is None
    assert any("statfs" in n and "Permission denied" in n for n in info.notes)


# --------------------------------------------------------------------------------------
# the model


def test_model_forbids_extra_fields_and_round_trips(hpc: tuple[Path, Path]) -> None:
    table, root = hpc
    info = detect(root / "g/g0", mountinfo=table)
    assert FsInfo.model_validate_json(info.model_dump_json()) == info
    with pytest.raises(ValidationError):
        FsInfo.model_validate({**info.model_dump(), "bogus": 1})
    with pytest.raises(ValidationError):
        FsInfo.model_validate({**info.model_dump(), "fs_type": "zfs"})


# --------------------------------------------------------------------------------------
# the real machine


def _real_mountinfo_line(mount_point: str) -> list[str]:
    hits = []
    for line in Path("/proc/self/mountinfo").read_text().splitlines():
        parts = line.split()
        if fs._unescape(parts[4]) == mount_point:
            hits.append(parts)
    assert hits, mount_point
    return hits[-1]


@pytest.mark.skipif(not Path("/proc/self/mountinfo").is_file(), reason="needs Linux /proc")
def test_real_machine(tmp_path: Path) -> None:
    info = detect(tmp_path)
    assert info.fs_type in FS_TYPES and info.fs_type != "unknown"
    assert info.exists and info.resolved == os.path.realpath(tmp_path)
    assert info.mount_point is not None and info.kernel_fstype is not None
    assert fs._is_under(info.resolved, info.mount_point)
    assert info.statfs_magic is not None
    assert not any("trusting statfs" in n for n in info.notes)

    parts = _real_mountinfo_line(info.mount_point)
    sep = parts.index("-", 6)
    assert parts[sep + 1] == info.kernel_fstype
    if info.kernel_fstype not in ("btrfs", "zfs", "overlay"):  # anonymous st_dev there
        major, minor = (int(x) for x in parts[2].split(":"))
        st_dev = os.stat(info.resolved).st_dev
        assert (os.major(st_dev), os.minor(st_dev)) == (major, minor)

    stat = shutil.which("stat")
    if (
        stat
    ):  # `stat -f -c %t` prints f_type in hex, as the dftracer-io-optimization skill's `stat -f` check does
        out = subprocess.run([stat, "-f", "-c", "%t", str(tmp_path)], capture_output=True, text=True)
        if out.returncode == 0:
            assert int(out.stdout.strip(), 16) == info.statfs_magic
    df = shutil.which("df")
    if df:  # `df -T`'s type column and mount point
        out = subprocess.run(
            [df, "-P", "--output=fstype,target", str(tmp_path)], capture_output=True, text=True
        )
        if out.returncode == 0:
            fstype, target = out.stdout.splitlines()[-1].split(maxsplit=1)
            assert (fstype, target) == (info.kernel_fstype, info.mount_point)


@pytest.mark.skipif(not Path("/proc/self/mountinfo").is_file(), reason="needs Linux /proc")
def test_real_machine_missing_path(tmp_path: Path) -> None:
    missing = tmp_path / "will/be/created/by/setup"
    info = detect(missing)
    assert not info.exists and info.resolved == os.path.realpath(tmp_path)
    assert info.fs_type == detect(tmp_path).fs_type
