"""One measured arm as the guards see it: its trace's data files, summed, and what the program said.

Arms of one workload run in their own folders, so a data file is known by its path relative
to the arm's data directory (``<data>/sample_00001.bin``), or to its staged copy for an arm that
ran on one; files outside it (the interpreter's own libraries, scripts) are not the application's
data and are left out. A program whose data folder holds none of its files (it reads an input
its set-up step made beside it) has every non-runtime file as data, each under the arm's own
folder known by its path relative to it (``<workdir>/input/in.dat``), since every arm has its own.
A program that keeps some files in its data folder may still read an input from elsewhere (an
absolute path): those inputs are summed apart (:attr:`Arm.outside_inputs`), so a change that reads
less of them is still doing less.
"""

from __future__ import annotations

import dataclasses
import os
import sys
from collections.abc import Iterable, Mapping
from dataclasses import dataclass, field
from functools import cached_property

import numpy as np

from dftune.tools.trace import semantics as S
from dftune.tools.trace.model import Analysis, FileAccess, RequestLog

#: Paths that are never an application's data (the runtime's own files).
_SYSTEM_PREFIXES = tuple(
    {os.path.realpath(p) + os.sep for p in (sys.prefix, sys.base_prefix, sys.exec_prefix)}
    | {"/usr/", "/lib/", "/lib64/", "/etc/", "/proc/", "/sys/", "/dev/", "/opt/conda/", "/tmp/pip-"}
    | {"/run/", "/var/run/", "/var/spool/"}  # daemons' runtime state (slurmd's job folders)
)
#: Files an MPI launcher writes and its ranks read at start-up, under a fresh random name each run
#: (MPICH's Hydra passes the node's hwloc topology in /tmp/hydra_hwloc_xmlfile_XXXXXX)
_LAUNCHER_NAMES = ("hydra_hwloc_xmlfile_",)
#: Session folders a launcher or resource manager makes in /tmp for each job (Open MPI's
#: ompi.<host>.<uid>, PRRTE's prte.<host>.<uid>, PMIx's pmix-<pid>, a Flux broker's flux-XXXXXX)
_SESSION_DIRS = ("ompi.", "prte.", "pmix-", "pmix.", "flux-")
#: Compilers' caches a program reads when an earlier run left them (PyTorch Inductor's default
#: folder): whether they are there depends on the runs before, not on the change
_COMPILER_CACHES = ("/tmp/torchinductor_",)
_CODE_SUFFIXES = (".py", ".pyc", ".so", ".pth", ".json.gz", ".pfw", ".pfw.gz")
_BIN_LO = {label: lo for label, lo in S.SIZE_BINS}
#: Self-describing container formats whose library lays the file out (names it by suffix)
CONTAINER_SUFFIXES = (".h5", ".hdf5", ".he5", ".hdf", ".nc", ".nc4", ".cdf", ".bp", ".bp4", ".bp5")
#: Their signatures: HDF5's superblock (at 0 or a power of two from 512 on: a user block may
#: precede it), netCDF classic and 64-bit offset/data
_HDF5_MAGIC = b"\x89HDF\r\n\x1a\n"
_NETCDF_MAGIC = (b"CDF\x01", b"CDF\x02", b"CDF\x05")


@dataclass(frozen=True)
class Totals:
    """What the application did to its data files, summed. ``input_*``: the files it only reads
    (reads of files it also writes may be the I/O library's read-modify-write)."""

    input_files: int
    input_unique_bytes: int
    #: bytes read of the inputs, and of those read more than once (a cache's or a later pass's)
    input_read_bytes: int
    input_reread_bytes: int
    files_read: int
    files_written: int
    read_calls: int
    write_calls: int
    metadata_calls: int
    read_bytes: int
    write_bytes: int
    read_unique_bytes: int
    write_unique_bytes: int
    reread_bytes: int
    sequential: int
    random: int

    @property
    def random_share(self) -> float | None:
        classified = self.sequential + self.random
        return self.random / classified if classified else None

    def mean_call_bytes(self, direction: str) -> float | None:
        calls = getattr(self, f"{direction}_calls")
        return getattr(self, f"{direction}_bytes") / calls if calls else None

    @classmethod
    def of(cls, files: Iterable[FileAccess]) -> Totals:
        """The sums over ``files`` (an arm's data files, or a subset of them)."""
        fs = list(files)
        inputs = [f for f in fs if f.read_bytes > 0 and f.write_bytes == 0]
        return cls(
            input_files=len(inputs),
            input_unique_bytes=sum(f.read_unique_bytes for f in inputs),
            input_read_bytes=sum(f.read_bytes for f in inputs),
            input_reread_bytes=sum(f.reread_bytes for f in inputs),
            files_read=sum(1 for f in fs if f.read_bytes > 0),
            files_written=sum(1 for f in fs if f.write_bytes > 0),
            read_calls=sum(f.read_calls for f in fs),
            write_calls=sum(f.write_calls for f in fs),
            metadata_calls=sum(f.metadata_calls for f in fs),
            read_bytes=sum(f.read_bytes for f in fs),
            write_bytes=sum(f.write_bytes for f in fs),
            read_unique_bytes=sum(f.read_unique_bytes for f in fs),
            write_unique_bytes=sum(f.write_unique_bytes for f in fs),
            reread_bytes=sum(f.reread_bytes for f in fs),
            sequential=sum(f.sequential for f in fs),
            random=sum(f.random for f in fs),
        )


@dataclass(frozen=True)
class Arm:
    """A measured condition: its trace analysis (with the access profile), data folder, work counters."""

    analysis: Analysis
    data_dir: str | None = None
    work: Mapping[str, float] = field(default_factory=dict)
    label: str = "arm"
    #: a staged arm's copy of the data folder (tools/runner/staging.py): its files are the data
    #: folder's, under the same names, since staging serves the same requests from another tier
    staged_dir: str | None = None
    #: the folder the arm ran in (its set-up's files are there, under the same names in every arm)
    workdir: str | None = None
    #: files the arm's own environment names (a ROMIO_HINTS file): the change's configuration,
    #: written by dftune for this arm, not the application's data
    config_files: frozenset[str] = frozenset()
    #: inputs outside the data folder the access-pattern guard compares as data files: those every
    #: compared arm reads under the same name (:func:`sharing_inputs`)
    compared_inputs: frozenset[str] = frozenset()

    @property
    def profiled(self) -> bool:
        return self.analysis.profile is not None

    @cached_property
    def _inside(self) -> dict[str, FileAccess]:
        """The files in the data folder (or its staged copy), by their path relative to it."""
        profile = self.analysis.profile
        if profile is None:
            return {}
        roots = [os.path.normpath(d) + os.sep for d in (self.data_dir, self.staged_dir) if d]
        return {
            f"<data>/{os.path.normpath(f.path)[len(root) :]}": f
            for f in profile.files
            for root in roots
            if os.path.normpath(f.path).startswith(root)
        }

    def _elsewhere(self) -> dict[str, FileAccess]:
        """Every non-runtime file that is not the arm's configuration, by :meth:`_key`."""
        profile = self.analysis.profile
        if profile is None:
            return {}
        config = {os.path.normpath(p) for p in self.config_files}
        return {
            self._key(f.path): f
            for f in profile.files
            if _looks_like_data(f.path) and os.path.normpath(f.path) not in config
        }

    @cached_property
    def files(self) -> dict[str, FileAccess]:
        """The data files by their path relative to the data folder (all non-runtime files when the
        folder is unknown or holds none of them, those in the arm's folder relative to it)."""
        if not self._inside:
            return self._elsewhere()
        if not self.compared_inputs:
            return self._inside
        shared = {k: f for k, f in self.outside_inputs.items() if k in self.compared_inputs}
        return {**self._inside, **shared}

    @cached_property
    def _outside(self) -> dict[str, FileAccess]:
        """The program's files outside a data folder that holds some of its files (empty when it
        holds none: then every such file is already one of :attr:`files`). Dot folders
        (``~/.cache``, ``~/.config``), compilers' caches and ``__pycache__`` are tools' state, whose
        presence depends on the runs before, not on the change."""
        if not self._inside:
            return {}
        ours = {id(f) for f in self._inside.values()}
        return {
            key: f
            for key, f in self._elsewhere().items()
            if id(f) not in ours
            and "/." not in (real := os.path.normpath(f.path))
            and "/__pycache__/" not in real
            and not real.startswith(_COMPILER_CACHES)
        }

    @cached_property
    def outside_inputs(self) -> dict[str, FileAccess]:
        """Files the arm only reads from outside its data folder (a dataset named by an absolute
        path while the outputs go to the data folder): their bytes read at least once, summed, are
        judged by the no-doing-less guard, where a name made afresh in every run cancels out; those
        every compared arm reads under the same name, by the access-pattern guard too."""
        return {k: f for k, f in self._outside.items() if f.read_bytes > 0 and f.write_bytes == 0}

    @cached_property
    def outside_outputs(self) -> dict[str, FileAccess]:
        """Files the arm writes outside its data folder (checkpoints sent to a folder of their own,
        logs): their bytes written at least once, summed, are judged by the no-doing-less guard."""
        return {k: f for k, f in self._outside.items() if f.write_bytes > 0}

    def _key(self, path: str) -> str:
        """A non-runtime file's key: relative to the arm's folder when inside it, else its path."""
        if self.workdir:
            root, real = os.path.normpath(self.workdir) + os.sep, os.path.normpath(path)
            if real.startswith(root):
                return f"<workdir>/{real[len(root) :]}"
        return path

    @cached_property
    def data_keys(self) -> dict[str, str]:
        """Traced path -> the data file's key in :attr:`files` (paths not listed are not data)."""
        return {f.path: key for key, f in self.files.items()}

    @property
    def request_log(self) -> RequestLog | None:
        """Each stream's requests (None: an analysis made before the log existed)."""
        profile = self.analysis.profile
        return profile.requests if profile is not None else None

    @cached_property
    def totals(self) -> Totals:
        return Totals.of(self.files.values())

    @cached_property
    def data_bytes(self) -> int:
        """Bytes moved to and from the data files (the scale a difference is judged against)."""
        return self.totals.read_bytes + self.totals.write_bytes

    def mean_call_bytes(self, direction: str) -> float | None:
        return self.totals.mean_call_bytes(direction)

    def size_calls(self, direction: str) -> dict[str, int]:
        """Calls per transfer-size bin over the data files."""
        out: dict[str, int] = {}
        for f in self.files.values():
            for label, n in f.sizes.get(direction, {}).items():
                out[label] = out.get(label, 0) + n
        return out

    def median_size_bin(self, direction: str) -> str | None:
        bins = sorted(self.size_calls(direction).items(), key=lambda kv: _BIN_LO[kv[0]])
        total = sum(n for _, n in bins)
        seen = 0
        for label, n in bins:
            seen += n
            if 2 * seen >= total:
                return label
        return None

    def visit_order(self, min_files: int) -> float | None:
        """Rank correlation (Spearman) between the order files are first read in and their name
        order: about 0 for a shuffled dataset, about 1 for a walk in name order."""
        read = [
            (name, f.first_ts)
            for name, f in self.files.items()
            if f.read_bytes > 0 and f.first_ts is not None
        ]
        if len(read) < min_files:
            return None
        names = np.argsort(np.argsort([n for n, _ in read], kind="stable"))
        times = np.argsort(np.argsort([t for _, t in read], kind="stable"))
        n = len(read)
        d = (names - times).astype(np.float64)
        return float(1.0 - 6.0 * float((d * d).sum()) / (n * (n * n - 1)))


def sharing_inputs(*arms: Arm) -> list[Arm]:
    """The arms with the inputs outside their data folder that all of them read under the same
    name among their data files, for a comparison of their access patterns (a name made afresh in
    each run is in one arm only, and stays out)."""
    common = frozenset.intersection(*(frozenset(a.outside_inputs) for a in arms)) if arms else frozenset()
    return [dataclasses.replace(a, compared_inputs=common) if common else a for a in arms]


def _looks_like_data(path: str) -> bool:
    real = os.path.normpath(path)
    return (
        not real.startswith(_SYSTEM_PREFIXES)
        and not real.endswith(_CODE_SUFFIXES)
        and "site-packages" not in real
        and not os.path.basename(real).startswith(_LAUNCHER_NAMES)
        and not (real.startswith("/tmp/") and real[5:].startswith(_SESSION_DIRS))
    )


def library_container(path: str) -> bool:
    """A file an I/O library lays out itself (HDF5, netCDF, ADIOS): known by its suffix, or by its
    signature when the file is still there. A plain binary file's offsets are the application's."""
    if path.lower().endswith(CONTAINER_SUFFIXES):
        return True
    try:
        with open(path, "rb") as fh:
            head = fh.read(8)
            if head == _HDF5_MAGIC or head[:4] in _NETCDF_MAGIC:
                return True
            for at in (512, 1024, 2048, 4096):
                fh.seek(at)
                if fh.read(8) == _HDF5_MAGIC:
                    return True
    except OSError:
        return False
    return False
