"""Which filesystem does a workload's data directory live on?

The "Step 8-PRE" check of the dftracer-pipeline skill, done the way an HPC engineer would by hand with
``stat -f DIR`` and ``df -T DIR``, but without a subprocess:

1. Make the path absolute and, if it does not exist yet (a data dir the setup step will
   create), walk up to the nearest existing ancestor and say so in ``notes``. Existence is
   checked *before* the mount table is read so that an autofs path gets mounted first.
   The existing path is resolved with ``realpath`` so symlinks into another filesystem
   are followed.
2. Find the mount whose mount point is the longest *path* prefix of the resolved path in
   ``/proc/self/mountinfo`` (preferred: it carries fstype, source and both option lists)
   or ``/proc/mounts`` (fallback). Octal escapes (``\\040`` space, ``\\011`` tab,
   ``\\012`` newline, ``\\134`` backslash) are decoded. When several mounts sit on the same
   mount point (over-mounting), the one on top is used.
3. Ask the kernel directly with ``statfs(2)`` for ``f_type`` (what ``stat -f`` prints as
   "Type:"). The mount table wins when both agree on the family (it can tell ext4 from
   ext3 and VAST from plain NFS); when they disagree, or no mount entry is found, the
   statfs answer is used and the disagreement is noted.

The kernel's filesystem names and statfs magic numbers map onto
:data:`~dftune.core.vocabulary.FS_TYPES` through resources/facts/filesystems.toml (with their
sources). VAST is mounted over NFS, so it is told apart by its server's name or a mount option
only the VAST client adds; one mounted by IP address with stock options is reported as ``nfs``,
a false alarm that errs on the safe side. ``warning`` is one line (the path, the mount, what to
do) for NFS (the dftracer-io-optimization skill forbids analysing an NFS-resident dataset) and,
more softly, for single-server network filesystems, overlay (the container layer) and tmpfs (RAM).

Everything here is pure: no printing, no side effects at import time. ``detect`` takes an
injectable mount table file and statfs function so tests can simulate machines that have
Lustre, GPFS, NFS, VAST or BeeGFS mounts.
"""

from __future__ import annotations

import ctypes
import functools
import os
import platform
import re
import sys
from collections.abc import Callable, Iterable
from dataclasses import dataclass
from pathlib import Path

from pydantic import Field

from dftune.core.facts import filesystem_facts
from dftune.core.facts.models import KernelFs
from dftune.core.model import StrictModel
from dftune.core.vocabulary import FsType

#: ``statfs(path) -> f_type`` (None when unavailable).
StatfsFn = Callable[[str], int | None]

PROC_MOUNTINFO = Path("/proc/self/mountinfo")
PROC_MOUNTS = Path("/proc/mounts")

# --------------------------------------------------------------------------------------
# what the kernel calls a filesystem -> the vocabulary (resources/facts/filesystems.toml)


@functools.cache
def _kernel() -> dict[str, KernelFs]:
    return {k.name: k for k in filesystem_facts().kernel}


@functools.cache
def magic_table() -> dict[int, KernelFs]:
    """statfs ``f_type`` -> the kernel filesystem it names."""
    return {k.magic: k for k in filesystem_facts().kernel if k.magic is not None}


# --------------------------------------------------------------------------------------
# the result


class FsInfo(StrictModel):
    """Where a path lives: filesystem type (vocabulary value), mount and warnings."""

    path: str = Field(description="the path as given")
    resolved: str = Field(description="the existing path actually examined (realpath)")
    exists: bool = Field(description="whether `path` itself exists")
    fs_type: FsType = Field(description="vocabulary value (see vocabulary.FS_TYPES)")
    kernel_fstype: str | None = Field(
        description="raw kernel fstype from the mount table (statfs name if it had none or disagreed)"
    )
    mount_point: str | None
    source: str | None = Field(description="mount source: device, server:/export, ...")
    options: list[str] = Field(default_factory=list, description="mount options then super options")
    is_network: bool
    warning: str | None = Field(default=None, description="one-line warning, if any")
    statfs_magic: int | None = Field(default=None, description="statfs(2) f_type, if read")
    notes: list[str] = Field(default_factory=list, description="how the answer was reached")


@dataclass(frozen=True)
class Mount:
    """One mount table entry (decoded)."""

    mount_point: str
    fstype: str
    source: str
    options: tuple[str, ...] = ()
    mount_id: int | None = None
    parent_id: int | None = None
    root: str | None = None
    order: int = 0


# --------------------------------------------------------------------------------------
# mount table parsing

_OCTAL = re.compile(r"\\([0-7]{3})")


def _unescape(field_: str) -> str:
    r"""Decode the kernel's octal escapes (``\040`` space, ``\011`` tab, ``\012``, ``\134``)."""
    return _OCTAL.sub(lambda m: chr(int(m.group(1), 8)), field_)


def _split_options(*option_fields: str) -> tuple[str, ...]:
    seen: dict[str, None] = {}
    for text in option_fields:
        for opt in text.split(","):
            if opt:
                seen.setdefault(_unescape(opt), None)
    return tuple(seen)


def _parse_mountinfo_line(line: str, order: int) -> Mount | None:
    # 36 35 98:0 /mnt1 /mnt2 rw,noatime master:1 - ext3 /dev/root rw,errors=continue
    parts = line.split()
    try:
        sep = parts.index("-", 6)
    except ValueError:
        return None
    if len(parts) < sep + 3 or not parts[0].isdigit() or not parts[1].isdigit():
        return None
    return Mount(
        mount_point=_unescape(parts[4]),
        fstype=_unescape(parts[sep + 1]),
        source=_unescape(parts[sep + 2]),
        options=_split_options(parts[5], parts[sep + 3] if len(parts) > sep + 3 else ""),
        mount_id=int(parts[0]),
        parent_id=int(parts[1]),
        root=_unescape(parts[3]),
        order=order,
    )


def _parse_mounts_line(line: str, order: int) -> Mount | None:
    # /dev/vda / ext4 rw,relatime 0 0
    parts = line.split()
    if len(parts) < 4:
        return None
    return Mount(
        mount_point=_unescape(parts[1]),
        fstype=_unescape(parts[2]),
        source=_unescape(parts[0]),
        options=_split_options(parts[3]),
        order=order,
    )


def parse_mount_table(text: str) -> list[Mount]:
    """Parse ``/proc/self/mountinfo`` or ``/proc/mounts`` text (format detected per line)."""
    mounts: list[Mount] = []
    for order, raw in enumerate(text.splitlines()):
        line = raw.strip()
        if not line or line.startswith("#"):
            continue
        parts = line.split()
        is_mountinfo = len(parts) >= 10 and parts[0].isdigit() and parts[1].isdigit() and "-" in parts[6:]
        entry = _parse_mountinfo_line(line, order) if is_mountinfo else _parse_mounts_line(line, order)
        if entry is not None:
            mounts.append(entry)
    return mounts


def _read_mount_table(mountinfo: str | Path | None) -> tuple[list[Mount], str | None, list[str]]:
    """Mounts, the file they came from, and notes about what could not be read."""
    notes: list[str] = []
    candidates = [Path(mountinfo)] if mountinfo is not None else [PROC_MOUNTINFO, PROC_MOUNTS]
    for candidate in candidates:
        try:
            text = candidate.read_text(encoding="utf-8", errors="surrogateescape")
        except OSError as exc:
            notes.append(f"cannot read mount table {candidate}: {exc.strerror or exc}")
            continue
        mounts = parse_mount_table(text)
        if mounts:
            return mounts, str(candidate), notes
        notes.append(f"mount table {candidate} has no usable entries")
    return [], None, notes


def _is_under(path: str, mount_point: str) -> bool:
    if mount_point == "/":
        return path.startswith("/")
    mp = mount_point.rstrip("/")
    return path == mp or path.startswith(mp + "/")


def find_mount(path: str, mounts: Iterable[Mount]) -> Mount | None:
    """The mount holding absolute ``path``: longest mount point that is a *path* prefix.

    ``/mnt/data2/x`` is not under ``/mnt/data``. Among mounts stacked on the same mount
    point, the one on top wins: the entry that no other entry there names as its parent,
    else the last one listed.
    """
    best_len = -1
    stacked: list[Mount] = []
    for m in mounts:
        if not _is_under(path, m.mount_point):
            continue
        length = len(m.mount_point.rstrip("/")) if m.mount_point != "/" else 0
        if length > best_len:
            best_len, stacked = length, [m]
        elif length == best_len:
            stacked.append(m)
    if not stacked:
        return None
    parents = {m.parent_id for m in stacked if m.parent_id is not None}
    on_top = [m for m in stacked if m.mount_id is None or m.mount_id not in parents]
    return max(on_top or stacked, key=lambda m: m.order)


# --------------------------------------------------------------------------------------
# statfs(2)


class _StatfsBuf(ctypes.Structure):
    # Only f_type is read; the buffer is generously sized for every ABI's struct statfs.
    _fields_ = [("raw", ctypes.c_ubyte * 512)]


@functools.cache
def _libc_statfs() -> Callable[..., int] | None:
    if not sys.platform.startswith("linux"):
        return None
    try:
        fn = ctypes.CDLL(None, use_errno=True).statfs  # the process's own libc, no lookup
    except (OSError, AttributeError):
        return None
    fn.argtypes = [ctypes.c_char_p, ctypes.c_void_p]
    fn.restype = ctypes.c_int
    return fn


def real_statfs(path: str) -> int | None:
    """``statfs(2)`` ``f_type`` of ``path`` via libc, or None where that is not possible."""
    fn = _libc_statfs()
    if fn is None:
        return None
    buf = _StatfsBuf()
    if fn(os.fsencode(path), ctypes.byref(buf)) != 0:
        return None
    # f_type is the first member: __fsword_t (a long) on every Linux ABI but s390x,
    # where it is an unsigned int. Magic numbers are 32-bit; mask off sign extension.
    ctype = ctypes.c_uint if platform.machine() == "s390x" else ctypes.c_long
    return int(ctype.from_buffer(buf).value) & 0xFFFFFFFF


# --------------------------------------------------------------------------------------
# classification


def _looks_like_vast(source: str, options: Iterable[str]) -> bool:
    host = ""
    if source.startswith("["):  # [ipv6]:/export
        host = source[1 : source.find("]")] if "]" in source else ""
    elif ":" in source:
        host = source.split(":", 1)[0]
    if "vast" in host.lower():
        return True
    return any(opt.split("=", 1)[0].lower() in filesystem_facts().vast_nfs_options for opt in options)


def _classify_mount(m: Mount) -> FsType:
    known = _kernel().get(m.fstype.lower())
    if known is not None and known.fs_type == "nfs":
        return "vast" if _looks_like_vast(m.source, m.options) else "nfs"
    if known is not None and known.fs_type != "unknown":
        return known.fs_type
    if any(_is_under(m.mount_point, shm) for shm in filesystem_facts().tmpfs_mounts):
        return "tmpfs"
    return "unknown"


def _warning(given: str, fs_type: str, kernel: str | None, where: str) -> str | None:
    if fs_type == "nfs":
        return (
            f"NFS warning: data path {given} is on NFS ({where}); NFS is a single-server "
            "filesystem that hard-caps aggregate bandwidth/IOPS regardless of application tuning, "
            "so copy the dataset to Lustre or another parallel filesystem (or node-local storage) "
            "and repoint the data dir before any performance analysis."
        )
    if kernel is not None and (k := _kernel().get(kernel.lower())) is not None and k.single_server:
        return (
            f"network filesystem warning: data path {given} is on {kernel} ({where}), a "
            "single-server network filesystem that caps bandwidth/IOPS like NFS; copy the dataset "
            "to a parallel filesystem or node-local storage and repoint the data dir."
        )
    if fs_type == "overlay":
        return (
            f"overlay warning: data path {given} is on an overlay filesystem ({where}), a "
            "container copy-on-write layer; I/O results will not reflect the real storage, so "
            "bind-mount the real data directory into the container and point the data dir there."
        )
    if fs_type == "tmpfs":
        return (
            f"tmpfs warning: data path {given} is on memory-backed tmpfs ({where}); I/O numbers "
            "reflect RAM, not storage, so point the data dir at the storage you want to tune."
        )
    return None


def _touch(path: str | os.PathLike[str]) -> None:
    """stat the path and its ancestors up to the first existing one (triggers autofs)."""
    _nearest_existing(os.path.abspath(os.path.expanduser(os.fspath(path))))


def _nearest_existing(path: str) -> str:
    current = path
    while not os.path.exists(current):
        parent = os.path.dirname(current)
        if parent == current:
            break
        current = parent
    return current


@dataclass
class _Table:
    mounts: list[Mount]
    origin: str | None
    notes: list[str]
    injected: bool


def _load(mountinfo: str | Path | None) -> _Table:
    mounts, origin, notes = _read_mount_table(mountinfo)
    return _Table(mounts, origin, notes, mountinfo is not None)


def _detect(path: str | os.PathLike[str], table: _Table, statfs: StatfsFn | None) -> FsInfo:
    given = os.fspath(path)
    absolute = os.path.abspath(os.path.expanduser(given))
    exists = os.path.exists(absolute)
    notes = list(table.notes)
    existing = absolute if exists else _nearest_existing(absolute)
    resolved = os.path.realpath(existing)
    if not exists:
        notes.append(
            f"{given} does not exist yet; detected the filesystem of its nearest existing ancestor {existing}"
        )
    elif resolved != absolute:
        notes.append(f"{given} resolves to {resolved}")

    mount = find_mount(resolved, table.mounts)
    fs_type: FsType = "unknown"
    kernel: str | None = None
    is_network = False
    if mount is not None:
        kernel = mount.fstype
        fs_type = _classify_mount(mount)
        is_network = (k := _kernel().get(kernel.lower())) is not None and k.network
        if fs_type == "vast":
            notes.append(
                f"vast inferred from NFS mount {mount.source} (host name or VAST client options); "
                "heuristic, VAST is NFS-mounted"
            )
        if fs_type == "overlay" and mount.mount_point == "/":
            notes.append("the root filesystem is an overlay: this looks like a container root")
    elif table.origin is not None:
        notes.append(f"no mount in {table.origin} holds {resolved}")

    where = f"{mount.source} mounted at {mount.mount_point}" if mount else "mount not found"

    # statfs(2): the kernel's own answer for this exact path. With an injected (simulated)
    # mount table the real statfs would describe a different machine, so it is only used
    # when given explicitly.
    statfs_fn = statfs if statfs is not None else (None if table.injected else real_statfs)
    magic: int | None = None
    if statfs_fn is not None:
        try:
            magic = statfs_fn(resolved)
        except OSError as exc:
            notes.append(f"statfs({resolved}) failed: {exc.strerror or exc}")
    known = magic_table().get(magic) if magic is not None else None
    if magic is not None and known is None and mount is None:
        notes.append(f"statfs f_type 0x{magic:08X} is not a filesystem dftune recognises")
    if magic is not None and known is not None:
        magic_name, magic_type, magic_network = known.magic_name or known.name, known.fs_type, known.network
        compatible = set(known.compatible or [magic_type])
        if mount is None:
            notes.append(f"filesystem type from statfs f_type 0x{magic:08X} ({magic_name})")
            if known.magic_name:  # a magic several filesystems share (ext2/ext3/ext4)
                notes.append(f"{magic_name} share one statfs magic number; assumed {magic_type}")
            fs_type, kernel, is_network = magic_type, magic_name, magic_network
            where = f"statfs type {magic_name}, no mount table entry"
        elif fs_type == "unknown" and magic_type != "unknown":
            notes.append(
                f"mount type {kernel!r} is not in the vocabulary; statfs f_type 0x{magic:08X} "
                f"says {magic_name}"
            )
            fs_type, is_network = magic_type, is_network or magic_network
        elif fs_type not in compatible and magic_type != "unknown":
            notes.append(
                f"mount table says {kernel} ({where}) but statfs f_type 0x{magic:08X} says "
                f"{magic_name}; trusting statfs"
            )
            fs_type, kernel, is_network = magic_type, magic_name, magic_network
            where = f"statfs type {magic_name}; mount table entry {mount.mount_point} disagrees"

    return FsInfo(
        path=given,
        resolved=resolved,
        exists=exists,
        fs_type=fs_type,
        kernel_fstype=kernel,
        mount_point=mount.mount_point if mount else None,
        source=mount.source if mount else None,
        options=list(mount.options) if mount else [],
        is_network=is_network,
        warning=_warning(given, fs_type, kernel, where),
        statfs_magic=magic,
        notes=notes,
    )


def detect(
    path: str | os.PathLike[str],
    *,
    mountinfo: str | Path | None = None,
    statfs: StatfsFn | None = None,
) -> FsInfo:
    """Detect the filesystem holding ``path`` (which may not exist yet).

    ``mountinfo``: a mount table file to use instead of ``/proc/self/mountinfo`` (either
    mountinfo or ``/proc/mounts`` format). ``statfs``: a ``path -> f_type`` function to use
    instead of the real ``statfs(2)``; when a ``mountinfo`` file is given and ``statfs`` is
    not, statfs is not consulted (the simulated table describes another machine).
    """
    _touch(path)  # existence first: an autofs path is mounted before the table is read
    return _detect(path, _load(mountinfo), statfs)
