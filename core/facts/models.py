"""The schemas of the facts files (resources/facts/*.toml): every entry validated once, with its
reason and its source, so a typo in a fact is an error naming the file, never a silent miss."""

from __future__ import annotations

import re
from typing import Literal

from pydantic import BaseModel, ConfigDict, Field, model_validator

from dftune.core.vocabulary import FsType

PathClassName = Literal["data", "system", "runtime", "launcher", "tool_cache", "config"]
#: The run's placeholders a path rule may use (see paths.toml).
PLACEHOLDERS = ("{data_dir}", "{config_file}", "{python_prefix}")


class _Fact(BaseModel):
    model_config = ConfigDict(extra="forbid", frozen=True)


class Sourced(_Fact):
    """Every fact says why it holds and where that is written down."""

    reason: str = Field(min_length=1)
    source: str = Field(min_length=1)


class PathClassInfo(_Fact):
    why: str = Field(min_length=1)
    #: never: judged as data; always: left out of the diagnosis unless asked for; with_data: left
    #: out when the program does data I/O of its own
    set_apart: Literal["never", "always", "with_data"]


class PathRule(Sourced):
    """One rule of paths.toml: a class for the paths its prefixes, globs or names match."""

    id: str = Field(pattern=r"^[a-z0-9-]+$")
    class_: PathClassName = Field(alias="class")
    #: exact paths
    paths: tuple[str, ...] = ()
    prefixes: tuple[str, ...] = ()
    globs: tuple[str, ...] = ()
    #: shell patterns over the last path component
    names: tuple[str, ...] = ()

    @model_validator(mode="after")
    def _matches_something(self) -> PathRule:
        if not (self.paths or self.prefixes or self.globs or self.names):
            raise ValueError(f"rule {self.id} matches nothing (give paths, prefixes, globs or names)")
        for text in (*self.paths, *self.prefixes, *self.globs, *self.names):
            for hole in (p for p in text.split("{")[1:]):
                if "{" + hole.split("}")[0] + "}" not in PLACEHOLDERS:
                    raise ValueError(f"rule {self.id}: unknown placeholder in {text!r}")
        return self


class PathFacts(_Fact):
    class_: dict[PathClassName, PathClassInfo] = Field(alias="class")
    #: the launchers' per-job files (launchers.toml) are tried right after this rule
    launchers_after: str
    rule: tuple[PathRule, ...]

    @model_validator(mode="after")
    def _every_class(self) -> PathFacts:
        missing = set(PathClassName.__args__) - set(self.class_)  # type: ignore[attr-defined]
        if missing:
            raise ValueError(f"no [class.X] entry for {', '.join(sorted(missing))}")
        if self.launchers_after not in {r.id for r in self.rule}:
            raise ValueError(f"launchers_after names no rule: {self.launchers_after}")
        return self


class Launcher(Sourced):
    id: str
    executables: tuple[str, ...]
    #: it starts MPI ranks
    mpi: bool = False
    #: the scheduler whose jobs it starts (spec launcher kinds), if any
    scheduler: str | None = None
    session_files: tuple[str, ...] = ()


class JobStates(Sourced):
    """A scheduler's job states: which end the wait for a job, which mean it has not started, and
    the pending reasons under which it never will."""

    #: states after which a job is over (or, where the scheduler lists the others, ``active``)
    over: frozenset[str] = frozenset()
    active: frozenset[str] = frozenset()
    waiting: frozenset[str]
    never: dict[str, str] = {}
    never_pattern: str = "(?!)"
    never_pattern_reason: str = ""

    def is_over(self, state: str) -> bool:
        return state in self.over if self.over else state not in self.active

    def never_starts(self, reason: str) -> str:
        """Why a job pending for ``reason`` can never start, or "" if it may yet."""
        if reason in self.never:
            return self.never[reason]
        return self.never_pattern_reason if re.match(self.never_pattern, reason) else ""


class LaunchLine(Sourced):
    """How a person starts one run of a program under a spec's launcher kind (a bundle's scripts):
    the launch line's prefix (``{nodes}``, ``{ranks}``), and for a batch scheduler the batch
    script's directives (``{minutes}``, ``{partition}``), its suffix, its submit command and the
    variable that holds the folder the job was submitted from."""

    run: tuple[str, ...] = ()
    directives: tuple[str, ...] = ()
    partition: str = ""
    suffix: str = ""
    submit: str = ""
    submit_dir_var: str = ""


class LauncherFacts(_Fact):
    launcher: tuple[Launcher, ...]
    scheduler: dict[str, JobStates]
    launch: dict[str, LaunchLine] = {}


class Format(Sourced):
    id: str
    suffixes: tuple[str, ...]
    #: signatures, as latin-1 text (TOML escapes for bytes), found at one of ``magic_at``
    magic: tuple[str, ...] = ()
    magic_at: tuple[int, ...] = ()


class FormatFacts(_Fact):
    format: tuple[Format, ...]


class StackSignature(_Fact):
    id: str
    always: bool = False
    text: tuple[str, ...] = ()
    layers: tuple[str, ...] = ()
    executables: tuple[str, ...] = ()
    launched: bool = False
    ranks: bool = False
    beside: tuple[str, ...] = ()
    on_path: tuple[str, ...] = ()
    implies: tuple[str, ...] = ()
    implies_with: dict[str, tuple[str, ...]] = Field(default_factory=dict)
    assumed_with: tuple[str, ...] = ()
    confirmed_by: tuple[str, ...] = ()
    unless: tuple[str, ...] = ()
    hint_env_prefix: str | None = None
    #: environment variables whose value names a configuration file the library reads
    config_env: tuple[str, ...] = ()
    #: the Python distributions (PyPI names) that carry the stack: a bundle's provenance records
    #: their versions
    distributions: tuple[str, ...] = ()
    #: where the library's own Python source lies ("packages/zarr/"): a sampled stack with a
    #: frame there is time the program spends inside the library (tools/diagnose/library_time.py)
    frames: tuple[str, ...] = ()
    #: the catalog's strategies for the settings the library documents for concurrency, caching and
    #: buffering: proposed whenever the stack shows the library, whatever the bottleneck ranked
    #: first (agents/optimizer/plan.py), as ROMIO hints are for MPI-IO
    settings: tuple[str, ...] = ()
    #: words for the literature's context search of this layer
    topic: str = ""
    reason: str = Field(min_length=1)
    source: str = Field(min_length=1)


class Presumption(_Fact):
    word: str
    any_of: tuple[str, ...]


class StdioShare(Sourced):
    min_share: float = Field(gt=0, lt=1)


class NotEvidence(Sourced):
    """Traced paths that show no stack: files every program may read whatever it uses."""

    globs: tuple[str, ...]


class StackFacts(_Fact):
    stack: tuple[StackSignature, ...]
    stdio: StdioShare
    presumes: tuple[Presumption, ...]
    not_evidence: NotEvidence

    @model_validator(mode="after")
    def _known_ids(self) -> StackFacts:
        ids = {s.id for s in self.stack} | {"stdio"}
        for s in self.stack:
            named = (*s.implies, *s.assumed_with, *s.confirmed_by, *s.unless, *s.implies_with)
            named += tuple(x for v in s.implies_with.values() for x in v)
            bad = [n for n in named if n not in ids]
            if bad:
                raise ValueError(f"stack {s.id} names unknown stacks: {', '.join(bad)}")
        for p in self.presumes:
            if bad := [n for n in p.any_of if n not in ids]:
                raise ValueError(f"presumes {p.word!r} names unknown stacks: {', '.join(bad)}")
        return self


class Helpers(_Fact):
    max_data_share: float = Field(gt=0, le=1)
    max_events: int = Field(ge=0)
    max_lifetime_share: float = Field(gt=0, le=1)
    commands: tuple[str, ...]
    interpreters: tuple[str, ...]


class RunSplit(_Fact):
    min_gap_s: float = Field(gt=0)
    far_gap_ratio: float = Field(gt=0)


class Roles(_Fact):
    worker_min_start_delay_s: float = Field(ge=0)
    rank_stacks: tuple[str, ...]


class ProcessFacts(_Fact):
    #: the Python interpreters' executable names (shell patterns)
    python: tuple[str, ...]
    helpers: Helpers
    runs: RunSplit
    roles: Roles
    source: str = Field(min_length=1)


class SelfTracing(Sourced):
    executables: tuple[str, ...]
    modules: tuple[str, ...]
    calls: tuple[str, ...]
    env: tuple[str, ...]


class Waits(Sourced):
    events: tuple[str, ...]


class ProgramFacts(_Fact):
    self_tracing: SelfTracing
    waits: Waits


class Filesystem(Sourced):
    id: str
    #: words for the literature's context search
    topic: str


class KernelFs(_Fact):
    """A kernel filesystem type and what dftune calls it."""

    name: str
    fs_type: FsType
    network: bool = False
    single_server: bool = False
    magic: int | None = None
    magic_name: str | None = None
    compatible: tuple[FsType, ...] = ()
    #: its name in the kernel's linux/magic.h, when it is defined there
    header_name: str | None = None


class FilesystemFacts(_Fact):
    tmpfs_mounts: tuple[str, ...]
    tmpfs_source: str = Field(min_length=1)
    filesystem: tuple[Filesystem, ...]
    kernel_source: str = Field(min_length=1)
    vast_nfs_options: tuple[str, ...]
    vast_source: str = Field(min_length=1)
    kernel: tuple[KernelFs, ...]

    @model_validator(mode="after")
    def _known_types(self) -> FilesystemFacts:
        from dftune.core.vocabulary import FS_TYPES

        if bad := [k.name for k in self.kernel if k.fs_type not in FS_TYPES]:
            raise ValueError(f"kernel types mapped outside the vocabulary: {', '.join(bad)}")
        return self


class DarshanLayer(_Fact):
    ops: tuple[str, ...]
    time: tuple[str, ...]


class DarshanFacts(Sourced):
    """The counters dftune reads from a Darshan log, by module (see darshan.toml)."""

    size_bins: tuple[str, ...]
    size_labels: tuple[str, ...]
    small_bins: int = Field(ge=1)
    #: dftune column -> (POSIX counter, STDIO counter); "" none, "f:" floating point
    columns: dict[str, tuple[str, str]]
    layer: dict[str, DarshanLayer]

    @model_validator(mode="after")
    def _labelled(self) -> DarshanFacts:
        if len(self.size_labels) != len(self.size_bins) or self.small_bins > len(self.size_bins):
            raise ValueError("size_labels must name each of size_bins, small_bins count some of them")
        return self


class CredentialRule(Sourced):
    """A regular expression (case-insensitive, searched) over a variable's name or its value."""

    id: str = Field(pattern=r"^[a-z0-9-]+$")
    pattern: str = Field(min_length=1)

    @model_validator(mode="after")
    def _compiles(self) -> CredentialRule:
        try:
            re.compile(self.pattern, re.IGNORECASE)
        except re.error as exc:
            raise ValueError(f"rule {self.id}: not a regular expression: {exc}") from None
        return self


class CredentialFacts(_Fact):
    """Which environment variables hold credentials (see credentials.toml): by name or by value."""

    name: tuple[CredentialRule, ...] = Field(min_length=1)
    value: tuple[CredentialRule, ...] = ()
