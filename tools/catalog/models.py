"""Typed records of the knowledge catalogs: strategies, citations and the 12-category checklist.

Every record is data in ``resources/`` (TOML); these models only validate it. Unknown keys are
an error everywhere (``extra="forbid"``), and every categorical field uses the fixed
vocabularies of :mod:`dftune.core.vocabulary`.
"""

from __future__ import annotations

import datetime as dt
import re
import shlex
from typing import Literal, TypeAlias

from pydantic import (
    BaseModel,
    ConfigDict,
    Field,
    StrictBool,
    StrictFloat,
    StrictInt,
    StrictStr,
    model_validator,
)

from dftune.core.citation import Citation
from dftune.core.vocabulary import CHECKLIST, STRATEGY_ID, Category, FsType, Layer, Privilege

#: A parameter value as TOML spells it. Strict types: TOML ``true`` never becomes ``1``.
Scalar: TypeAlias = StrictBool | StrictInt | StrictFloat | StrictStr
ValidFs: TypeAlias = FsType | Literal["any"]
ApplyKind = Literal["env", "hint_file", "source_patch", "command", "launcher", "stage", "manual"]
RollbackKind = Literal["command", "restore_env", "remove_file", "revert_patch", "manual"]
CitationKind = Literal["paper", "docs", "techreport"]

#: Placeholders an apply/rollback template may use besides the strategy's own parameters and
#: the names its rollback captures. The runner fills them from the workload and the system.
CONTEXT_VARS: frozenset[str] = frozenset(
    {
        "command",  # the workload's argv, for launcher templates
        "data_dir",  # the workload's data directory
        "dev",  # block device behind data_dir (e.g. nvme0n1)
        "dir",  # directory a layout or stage applies to
        "file",  # a file path (per-file layouts)
        "hint_path",  # path of the hint file written for this iteration
        "iter_dir",  # the iteration's own run directory (opt<n>/)
        "num_nodes",  # nodes in the allocation
        "stage_dir",  # where a stage-in copy lives
    }
)
_PLACEHOLDER = re.compile(r"\{([A-Za-z_][A-Za-z0-9_]*)\}")


def placeholders(*texts: str) -> set[str]:
    """Names used as ``{name}`` in the given template strings."""
    return {m for t in texts for m in _PLACEHOLDER.findall(t)}


class _Model(BaseModel):
    model_config = ConfigDict(extra="forbid", frozen=True, str_strip_whitespace=True)


class Parameter(_Model):
    """One tunable value of a strategy: allowed values or a numeric range, defaults."""

    name: str = Field(pattern=r"^[a-z][a-z0-9_]*$")
    description: str = Field(min_length=1)
    values: list[Scalar] | None = None
    min: StrictInt | StrictFloat | None = None
    max: StrictInt | StrictFloat | None = None
    #: The library / OS default when it is known (the value before tuning).
    default: Scalar | None = None
    #: The value the dftracer-io-optimization skill or the cited source suggests; may be an expression such as
    #: ``"cpu_count // 2"`` when it depends on the machine.
    recommended: Scalar | None = None
    unit: str | None = None

    @model_validator(mode="after")
    def _consistent(self) -> Parameter:
        if self.values is not None:
            if not self.values:
                raise ValueError("values must not be empty")
            if self.min is not None or self.max is not None:
                raise ValueError("give either values or a min/max range, not both")
            for label, v in (("default", self.default), ("recommended", self.recommended)):
                if v is not None and v not in self.values:
                    raise ValueError(f"{label} {v!r} is not one of values {self.values!r}")
        if self.min is not None and self.max is not None and self.min > self.max:
            raise ValueError(f"min {self.min} > max {self.max}")
        for label, v in (("default", self.default), ("recommended", self.recommended)):
            if isinstance(v, int | float) and not isinstance(v, bool):
                if self.min is not None and v < self.min:
                    raise ValueError(f"{label} {v} < min {self.min}")
                if self.max is not None and v > self.max:
                    raise ValueError(f"{label} {v} > max {self.max}")
        return self


class Apply(_Model):
    """How a strategy is applied. Templates use ``{name}`` placeholders (parameters/context)."""

    kind: ApplyKind
    #: Environment variables to set (kind ``env`` or ``hint_file``).
    env: dict[str, str] = Field(default_factory=dict)
    #: argv template for kind ``command`` (never run through a shell).
    command: list[str] = Field(default_factory=list)
    #: Text fed to the command's standard input (e.g. a value for ``sudo tee <sysfs file>``).
    stdin: str | None = None
    #: argv prefix put in front of the workload's command (kind ``launcher``).
    launcher: list[str] = Field(default_factory=list)
    #: File name (relative to the iteration directory) and content of a hint file.
    hint_file: str | None = None
    hint_content: str | None = None
    #: What to change in the (copied) source, for kind ``source_patch``.
    patch: str | None = None
    #: Steps a human performs, for kind ``manual`` (admin-only recommendations).
    instructions: str | None = None
    #: kind ``stage``: the tier every replicate copies the data folder to (``shm``: /dev/shm within
    #: the memory bound; ``local``: the spec's ``[staging] local_dir``), see tools/runner/staging.py
    tier: Literal["shm", "local"] | None = None

    @model_validator(mode="after")
    def _fields_for_kind(self) -> Apply:
        need: dict[str, tuple[str, ...]] = {
            "env": ("env",),
            "hint_file": ("hint_file", "hint_content", "env"),
            "source_patch": ("patch",),
            "command": ("command",),
            "launcher": ("launcher",),
            "stage": ("tier",),
            "manual": ("instructions",),
        }
        missing = [f for f in need[self.kind] if not getattr(self, f)]
        if missing:
            raise ValueError(f"apply kind {self.kind!r} needs {', '.join(missing)}")
        if self.stdin is not None and self.kind != "command":
            raise ValueError("stdin is only for kind 'command'")
        if self.patch and self.kind != "source_patch":
            raise ValueError("patch is only for kind 'source_patch'")
        if self.tier is not None and self.kind != "stage":
            raise ValueError("tier is only for kind 'stage'")
        return self

    def templates(self) -> list[str]:
        return [
            *self.env.values(),
            *self.command,
            *self.launcher,
            self.stdin or "",
            self.hint_content or "",
        ]


class Snippet(_Model):
    """The fix as a person would type it (a configuration line, an environment variable, a few
    lines of code), shown under each recommendation the way Drishti prints a code snippet."""

    language: Literal["python", "c", "shell", "ini", "toml", "text"]
    code: str = Field(min_length=1)


class Rollback(_Model):
    """How to undo an applied strategy. ``capture`` records original values before applying:
    each key becomes a placeholder usable in ``command``."""

    kind: RollbackKind
    description: str = Field(min_length=1)
    command: list[str] = Field(default_factory=list)
    stdin: str | None = None
    capture: dict[str, list[str]] = Field(default_factory=dict)

    @model_validator(mode="after")
    def _command_when_needed(self) -> Rollback:
        if self.kind == "command" and not self.command:
            raise ValueError("rollback kind 'command' needs command")
        if self.stdin is not None and not self.command:
            raise ValueError("stdin needs a command")
        for key, argv in self.capture.items():
            if not re.fullmatch(r"[a-z][a-z0-9_]*", key) or not argv:
                raise ValueError(f"capture {key!r} needs a lowercase name and a non-empty argv")
        return self


class Strategy(_Model):
    """One optimization technique (or a forbidden non-technique the guards must recognize)."""

    id: str = Field(pattern=STRATEGY_ID)
    name: str = Field(min_length=1)
    layer: Layer
    checklist: int = Field(ge=1, le=12)
    bottlenecks: list[Category] = Field(default_factory=list)
    valid_fs: list[ValidFs] = Field(min_length=1)
    #: Filesystems on which the strategy is known to hurt; never offered there.
    harmful_on: list[FsType] = Field(default_factory=list)
    harmful_reason: str | None = None
    privilege: Privilege
    #: Software or hardware the strategy presumes (e.g. "mpi-io", "hdf5", "pytorch", "gpu").
    requires: list[str] = Field(default_factory=list)
    #: The I/O it acts on (any of them): it fits only a job whose trace does some of it
    #: (no write buffering for a read-only job); empty: any job.
    io: list[Literal["read", "write"]] = Field(default_factory=list)
    apply: Apply | None = None
    #: How the fix reads in code or configuration; required where ``apply`` is prose (a source
    #: patch, a manual step); derived from ``apply`` for environment variables and commands.
    snippet: Snippet | None = None
    rollback: Rollback | None = None
    parameters: list[Parameter] = Field(default_factory=list)
    citations: list[str] = Field(default_factory=list)
    unsupported_reason: str | None = None
    forbidden: bool = False
    forbidden_reason: str | None = None
    #: which guard rejects it: doing less (fewer bytes/events/epochs/checkpoints) or an
    #: access-pattern / transfer-size change (Rule 5 of the dftracer-optimization-kb skill)
    forbidden_kind: Literal["doing_less", "access_pattern"] | None = None
    description: str = Field(min_length=1)
    notes: list[str] = Field(default_factory=list)
    #: The skill section (or other source) the entry comes from.
    source: str = Field(min_length=1)

    @model_validator(mode="after")
    def _rules(self) -> Strategy:
        prefix = self.id.split(".", 1)[0].upper()
        if prefix != self.layer:
            raise ValueError(f"id prefix {prefix!r} does not match layer {self.layer!r}")
        if len(set(self.bottlenecks)) != len(self.bottlenecks):
            raise ValueError("bottlenecks has duplicates")
        if "any" in self.valid_fs and len(self.valid_fs) > 1:
            raise ValueError("valid_fs 'any' must stand alone")
        if len(set(self.valid_fs)) != len(self.valid_fs):
            raise ValueError("valid_fs has duplicates")
        if self.harmful_on:
            if not self.harmful_reason:
                raise ValueError("harmful_on needs harmful_reason")
            if "any" in self.valid_fs or set(self.harmful_on) & set(self.valid_fs):
                raise ValueError("a filesystem in harmful_on cannot be valid (list valid_fs explicitly)")
        names = [p.name for p in self.parameters]
        if len(set(names)) != len(names):
            raise ValueError("parameter names must be unique")
        if len(set(self.citations)) != len(self.citations):
            raise ValueError("citations has duplicates")
        if self.forbidden:
            if not self.forbidden_reason:
                raise ValueError("a forbidden strategy needs forbidden_reason")
            if self.apply is not None or self.citations:
                raise ValueError("a forbidden strategy has no apply and no citations")
        else:
            if self.forbidden_reason:
                raise ValueError("forbidden_reason given but forbidden is false")
            if self.apply is None:
                raise ValueError("a strategy that is not forbidden needs apply")
            if not self.citations and not self.unsupported_reason:
                raise ValueError(
                    "no citations: give citation ids or set citations = [] with unsupported_reason"
                )
            if self.citations and self.unsupported_reason:
                raise ValueError("unsupported_reason is only for strategies without citations")
            if self.apply.kind in ("source_patch", "manual") and self.snippet is None:
                raise ValueError(
                    f"apply kind {self.apply.kind!r} is prose: give [strategy.snippet] language and code"
                )
            if self.layer in ("L2", "L3") and self.rollback is None:
                raise ValueError(f"{self.layer} strategies need a rollback")
            if self.privilege == "admin-only" and self.apply.kind != "manual":
                raise ValueError("admin-only strategies are manual recommendations (apply.kind = 'manual')")
            known = set(names) | CONTEXT_VARS | set(self.rollback.capture if self.rollback else ())
            used = placeholders(*self.apply.templates())
            if self.rollback:
                used |= placeholders(*self.rollback.command, self.rollback.stdin or "")
                used |= placeholders(*(a for argv in self.rollback.capture.values() for a in argv))
            unknown = used - known
            if unknown:
                raise ValueError(
                    f"unknown placeholders {sorted(unknown)} (not a parameter, capture or context var)"
                )
        if self.forbidden != (self.forbidden_kind is not None):
            raise ValueError(
                "forbidden strategies need forbidden_kind (doing_less | access_pattern), and only they"
            )
        return self

    def fix_snippet(self) -> Snippet | None:
        """The snippet to show: the catalog's, else the environment or command ``apply`` sets, with
        each parameter at its recommended (else default) value; None for a forbidden strategy."""
        if self.snippet is not None or self.apply is None:
            return self.snippet
        values = {p.name: p.recommended if p.recommended is not None else p.default for p in self.parameters}

        def fill(template: str) -> str:
            for name, value in values.items():
                if value is not None:
                    template = template.replace("{" + name + "}", str(value))
            return re.sub(r"\{([a-z_][a-z0-9_]*)\}", r"<\1>", template)  # a value only the run knows

        a = self.apply
        lines = [f"export {k}={shlex.quote(fill(v))}" for k, v in a.env.items()]
        if a.kind == "hint_file" and a.hint_file:
            lines.insert(0, f"# {a.hint_file}\n{fill(a.hint_content or '')}".rstrip())
        if a.command:
            cmd = shlex.join(fill(x) for x in a.command)
            lines.append(f"echo {shlex.quote(fill(a.stdin))} | {cmd}" if a.stdin else cmd)
        if a.launcher:
            lines.append(shlex.join(fill(x) for x in a.launcher) + " <your command>")
        return Snippet(language="shell", code="\n".join(lines)) if lines else None

    def valid_on(self, fs_type: str) -> bool:
        """True when the strategy may be offered on ``fs_type`` (FS_TYPE gating)."""
        if fs_type in self.harmful_on:
            return False
        return "any" in self.valid_fs or fs_type in self.valid_fs


class Claim(_Model):
    """What one citation supports, in our own words, and whether we checked it."""

    #: Strategy id the claim supports; or ``topic`` for a claim about diagnosis/rules.
    strategy: str | None = Field(default=None, pattern=STRATEGY_ID)
    topic: str | None = None
    claim: str = Field(min_length=1)
    verified: bool
    #: Where the claim was checked (e.g. "abstract", "full text, Sec. IV.2").
    evidence: str | None = None
    note: str | None = None

    @model_validator(mode="after")
    def _rules(self) -> Claim:
        if (self.strategy is None) == (self.topic is None):
            raise ValueError("a claim names exactly one of strategy or topic")
        if self.verified and not self.evidence:
            raise ValueError("a verified claim needs evidence (where it was checked)")
        if not self.verified and not self.note:
            raise ValueError("an unverified claim needs a note saying why")
        return self


class CatalogCitation(Citation):
    """A curated paper, technical report or documentation page: a complete, checked citation
    with the claims we verified against its text."""

    model_config = ConfigDict(extra="forbid", frozen=True, str_strip_whitespace=True)

    id: str = Field(pattern=r"^[a-z0-9_]+$")
    kind: CitationKind
    authors: list[str] = Field(min_length=1)
    title: str = Field(min_length=1)
    venue: str = Field(min_length=1)
    #: What the source says, in our own words, as data for the offline literature index (so a
    #: fresh install can find the core literature without a network).
    summary: str | None = Field(default=None, min_length=1)
    #: Publication year; for living documentation, the year the page was consulted.
    year: int = Field(ge=1950, le=2100)
    doi: str | None = Field(default=None, pattern=r"^10\.\d{4,9}/\S+$")
    url: str | None = Field(default=None, pattern=r"^https?://\S+$")
    arxiv: str | None = Field(default=None, pattern=r"^\d{4}\.\d{4,5}$")
    pages: str | None = None
    #: When a documentation page was consulted (required for kind "docs").
    accessed: dt.date | None = None
    notes: list[str] = Field(default_factory=list)
    claims: list[Claim] = Field(default_factory=list)

    @model_validator(mode="after")
    def _rules(self) -> CatalogCitation:
        if not self.doi and not self.url:
            raise ValueError("a citation needs a doi or a url")
        if self.kind == "docs" and self.accessed is None:
            raise ValueError("documentation citations need accessed (the date the page was checked)")
        return self

    def claims_for(self, strategy_id: str) -> list[Claim]:
        return [c for c in self.claims if c.strategy == strategy_id]


class ChecklistCategory(_Model):
    """One of the 12 categories every optimization loop gives a verdict for."""

    number: int = Field(ge=1, le=12)
    name: str
    covers: str = Field(min_length=1)
    examples: list[str] = Field(min_length=1)
    bottlenecks: list[Category] = Field(min_length=1)
    source: str = Field(min_length=1)

    @model_validator(mode="after")
    def _name_matches_vocabulary(self) -> ChecklistCategory:
        expected = CHECKLIST[self.number]
        if self.name != expected:
            raise ValueError(f"category {self.number} must be named {expected!r}, not {self.name!r}")
        return self
