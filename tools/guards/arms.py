"""One measured arm as the guards see it: its trace's data files, summed, and what the program said.

Which files are the application's data is the facts layer's answer for this arm
(:func:`dftune.core.facts.paths.classify` with the arm's data folder, its staged copy and the
files its environment names): the interpreter's libraries, scripts, tools' caches, launchers'
per-job files and configuration are not. Arms of one workload run in their own folders, so a
data file is known by its path relative to the arm's data directory (``<data>/sample_00001.bin``),
or to its staged copy for an arm that ran on one. A program whose data folder holds none of its
files (it reads an input its set-up step made beside it) has every data file as data, each under
the arm's own folder known by its path relative to it (``<workdir>/input/in.dat``), since every
arm has its own.
A program that keeps some files in its data folder may still read an input from elsewhere (an
absolute path): those inputs are summed apart (:attr:`Arm.outside_inputs`), so a change that reads
less of them is still doing less.
"""

from __future__ import annotations

import dataclasses
import os
from collections.abc import Iterable, Mapping
from dataclasses import dataclass, field
from functools import cached_property

from dftune.core.facts.paths import DATA_FOLDER, PathClass, RunPaths, classify
from dftune.tools.guards.logical import spearman
from dftune.tools.trace.model import Analysis, FileAccess, RequestLog


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
    #: the arm's environment: the files it names (a ROMIO_HINTS file dftune wrote for the arm) are
    #: the change's configuration, not the application's data
    env: Mapping[str, str] = field(default_factory=dict)
    #: inputs outside the data folder the access-pattern guard compares as data files: those every
    #: compared arm reads under the same name (:func:`sharing_inputs`)
    compared_inputs: frozenset[str] = frozenset()
    #: why the arm's change cannot reach the program's own code (every variable it sets is read
    #: only as an I/O call's argument, tools/runner/env_gate.py), or "" when that is not shown
    library_only: str = ""
    #: the paths any replicate of the arm read and wrote ("read"/"write" -> paths): a tracer loses
    #: a thread's last events now and then, never invents a program's I/O
    seen_paths: Mapping[str, frozenset[str]] = field(default_factory=dict)

    @property
    def profiled(self) -> bool:
        return self.analysis.profile is not None

    @cached_property
    def run_paths(self) -> RunPaths:
        """What this arm knows of its own paths: its data folder, the staged copy, its config files."""
        return RunPaths.of(self.data_dir, self.staged_dir, env=self.env)

    @cached_property
    def classes(self) -> list[tuple[FileAccess, PathClass]]:
        """Every traced file with its class for this arm (core/facts/paths.py)."""
        profile = self.analysis.profile
        return [(f, classify(f.path, self.run_paths)) for f in profile.files] if profile is not None else []

    @cached_property
    def _roots(self) -> list[str]:
        return [os.path.normpath(d) + os.sep for d in (self.data_dir, self.staged_dir) if d]

    def _data_key(self, path: str) -> str | None:
        """A path in the data folder (or its staged copy) as ``<data>/relative``, else None."""
        root = next((r for r in self._roots if path.startswith(r)), None)
        return f"<data>/{path[len(root) :]}" if root is not None else None

    @cached_property
    def _inside(self) -> dict[str, FileAccess]:
        """The files in the data folder (or its staged copy), by their path relative to it."""
        keyed = ((self._data_key(c.path), f) for f, c in self.classes if c.rule == DATA_FOLDER)
        return {key: f for key, f in keyed if key is not None}

    def _elsewhere(self) -> dict[str, FileAccess]:
        """Every file of the class data, by :meth:`_key`."""
        return {self._key(f.path): f for f, c in self.classes if c.is_data}

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
        """The program's data files outside a data folder that holds some of its files (empty when
        it holds none: then every such file is already one of :attr:`files`)."""
        if not self._inside:
            return {}
        ours = {id(f) for f in self._inside.values()}
        return {key: f for key, f in self._elsewhere().items() if id(f) not in ours}

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

    def seen_keys(self, direction: str) -> set[str]:
        """The keys (as in :attr:`files`) of the files any replicate of the arm touched in
        ``direction`` (empty: only the analyzed replicate is known)."""
        return {
            self._data_key(os.path.normpath(path)) or self._key(path)
            for path in self.seen_paths.get(direction, ())
        }

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
        rank = {n: i for i, (n, _) in enumerate(sorted(read))}
        return spearman([rank[n] for n, _ in read], [t for _, t in read])


def sharing_inputs(*arms: Arm) -> list[Arm]:
    """The arms with the inputs outside their data folder that all of them read under the same
    name among their data files, for a comparison of their access patterns (a name made afresh in
    each run is in one arm only, and stays out)."""
    common = frozenset.intersection(*(frozenset(a.outside_inputs) for a in arms)) if arms else frozenset()
    return [dataclasses.replace(a, compared_inputs=common) if common else a for a in arms]
