"""Workload specs: the TOML a user writes to point dftune at an application (docs/specs.md).

Validated strictly: an unknown key, a wrong type, a placeholder nobody defines or a knob
strategy missing from the catalog is a one-line error naming the file and the key.
"""

from __future__ import annotations

import difflib
import math
import os
import re
import stat
import string
import sys
import tomllib
import typing
from pathlib import Path
from typing import Any, Literal

from pydantic import BaseModel, ConfigDict, Field, ValidationError, field_validator, model_validator

from dftune.core.errors import DftuneError
from dftune.tools.runner.config_files import (
    ConfigFileError,
    config_format,
    names_file,
    pass_copy,
    read_tree,
    with_values,
    write_copies,
)
from dftune.tools.runner.metrics import DLIO_FIELDS, IOR_FIELDS, higher_is_better

#: Placeholders every command may use besides the knob names.
#: What a copy of the source tree leaves out (an iteration's opt<n>/source, the levers'
#: env-gated copy; :meth:`WorkloadSpec.relocated` runs the workload from it): caches, version
#: control, earlier iterations and traces.
SOURCE_COPY_IGNORE = ("__pycache__", ".git", "opt[0-9]*", "*.pfw", "*.pfw.gz")
BUILTIN_PLACEHOLDERS = ("data_dir", "workdir", "source_dir", "ranks", "python", "trace_dir", "app_python")
KnobValue = str | int | float | bool
#: the longest a replicate, a batch job or a queue wait may be given: 30 days
MAX_SECONDS = 30 * 24 * 3600
#: a knob's integer values fit the 64 bits a checkpoint stores a number in
KNOB_INT_LIMIT = 2**63 - 1


class SpecError(DftuneError, ValueError):
    """A workload spec is invalid; ``str()`` is one line naming the file and the key."""


class _Strict(BaseModel):
    model_config = ConfigDict(extra="forbid")


class Metric(_Strict):
    """What is measured: wall time, or a number the program reports (see tools/runner/metrics.py).

    - ``stdout_regex`` / ``regex``: the last match of ``pattern`` (or of each of ``patterns``,
      combined) in ``stream`` (stdout by default for ``stdout_regex``, both streams for ``regex``);
    - ``file``: a JSON ``key`` path or a CSV ``column`` (or several) of the file at ``path``,
      which the program writes during the replicate (removed before each one);
    - ``ior``: IOR's summary (``field`` = max_write, max_read, write_time, read_time);
    - ``dlio``: DLIO's ``[METRIC]`` lines, or its summary.json when ``path`` names it
      (``field`` = train_throughput, train_io, train_au, eval_throughput, eval_au).
    """

    kind: Literal["wall_time", "stdout_regex", "regex", "file", "ior", "dlio"] = "wall_time"
    #: for stdout_regex / regex: the first capture group (or the whole match) must parse as a float
    pattern: str | None = None
    #: several patterns whose numbers are combined (``combine``)
    patterns: list[str] = []
    stream: Literal["stdout", "stderr", "both"] | None = None
    #: kind file (and dlio's summary.json): relative to the run's cwd; placeholders such as {data_dir} allowed
    path: str | None = None
    key: str | list[str] | None = None
    column: str | list[str] | None = None
    field: str | list[str] | None = None
    combine: Literal["sum", "mean", "max", "min"] = "sum"
    lower_is_better: bool = True

    @model_validator(mode="before")
    @classmethod
    def _direction(cls, data: Any) -> Any:
        """A benchmark field says its direction (IOR's MiB/s, DLIO's samples/s: higher is better)."""
        if isinstance(data, dict) and "lower_is_better" not in data and data.get("kind") in ("ior", "dlio"):
            fields = data.get("field")
            names = [fields] if isinstance(fields, str) else fields if isinstance(fields, list) else []
            higher = higher_is_better(str(data["kind"]), [str(f) for f in names])
            if higher is not None:
                data = {**data, "lower_is_better": not higher}
        return data

    @model_validator(mode="after")
    def _pattern(self) -> Metric:
        k = self.kind
        regexes = self.regexes()
        for p in regexes:
            try:
                re.compile(p)
            except re.error as exc:
                raise ValueError(f"pattern is not a valid regular expression: {exc}") from None
        if k in ("stdout_regex", "regex") and not regexes:
            raise ValueError(f"kind = '{k}' needs a pattern (or patterns)")
        if regexes and k not in ("stdout_regex", "regex"):
            raise ValueError("pattern/patterns are only used with kind = 'stdout_regex' or 'regex'")
        if self.pattern and self.patterns:
            raise ValueError("give pattern or patterns, not both")
        if k == "stdout_regex" and self.stream not in (None, "stdout"):
            raise ValueError(
                f"kind = 'stdout_regex' reads stdout; use kind = 'regex' with stream = '{self.stream}'"
            )
        if self.stream is not None and k not in ("stdout_regex", "regex", "ior", "dlio"):
            raise ValueError(f"stream is not used with kind = '{k}'")
        if k == "file":
            if not self.path:
                raise ValueError("kind = 'file' needs a path (the file the program writes)")
            if bool(self.names("key")) == bool(self.names("column")):
                raise ValueError("kind = 'file' needs a key (JSON) or a column (CSV), not both")
        elif self.key is not None or self.column is not None:
            raise ValueError("key/column are only used with kind = 'file'")
        if self.path is not None and k not in ("file", "dlio"):
            raise ValueError("path is only used with kind = 'file' or 'dlio'")
        if k in ("ior", "dlio"):
            known = IOR_FIELDS if k == "ior" else DLIO_FIELDS
            fields = self.names("field")
            if not fields:
                raise ValueError(f"kind = '{k}' needs a field: one of {', '.join(known)}")
            bad = [f for f in fields if f not in known]
            if bad:
                raise ValueError(f"field {bad[0]!r} is not one of {', '.join(known)}")
            if k == "ior" and higher_is_better(k, fields) is None:
                raise ValueError("fields mix MiB/s and seconds: combine only times or only bandwidths")
        elif self.field is not None:
            raise ValueError("field is only used with kind = 'ior' or 'dlio'")
        return self

    def regexes(self) -> list[str]:
        return [self.pattern] if self.pattern else list(self.patterns)

    def names(self, attr: Literal["key", "column", "field"]) -> list[str]:
        value = getattr(self, attr)
        return [] if value is None else [value] if isinstance(value, str) else list(value)

    def streams(self) -> tuple[str, ...]:
        """Which of the replicate's streams hold the metric (DLIO logs to stderr, IOR to stdout)."""
        default = "stdout" if self.kind in ("stdout_regex", "ior") else "both"
        s = self.stream or default
        return ("stdout", "stderr") if s == "both" else (s,)


class WorkCounter(_Strict):
    """A number the program prints about the work it did (records written, samples read, their size).

    Not a declaration of intent: the value is read from every replicate's output, and the
    guards require it to be the same in every arm (fewer records is doing less; a different
    record size changes what the application does). It is also the evidence that tells
    coalescing (the same records in fewer, larger calls) from a larger application record.
    """

    name: str = Field(pattern=r"^[A-Za-z_][A-Za-z0-9_]*$")
    #: the first capture group (or the whole match) of the last match must parse as a number
    pattern: str

    @field_validator("pattern")
    @classmethod
    def _regex(cls, value: str) -> str:
        try:
            re.compile(value)
        except re.error as exc:
            raise ValueError(f"not a valid regular expression: {exc}") from None
        return value


class Tracing(_Strict):
    mode: Literal["preload", "function", "off"] = "preload"
    #: DFTRACER_DATA_DIR: "all", or a path prefix to trace only the dataset
    data_dir: str = "all"
    #: where a program that traces itself (DLIO, dftracer-annotated apps) writes its trace files:
    #: folders, files or globs, relative to the TOML file; placeholders as in the command
    output: list[str] = []

    @field_validator("output", mode="before")
    @classmethod
    def _one_or_many(cls, value: object) -> object:
        return [value] if isinstance(value, str) else value


class Staging(_Strict):
    """Where a staging change may copy the data folder (see tools/runner/staging.py)."""

    #: a faster filesystem for the data set (node-local disk, a parallel filesystem for an NFS
    #: data set), relative to the TOML file; the ``local`` tier needs it
    local_dir: str | None = None


class Knob(_Strict):
    """One tunable: an environment variable, a command-line argument, or a key of a
    configuration file the command names (tools/runner/config_files.py)."""

    name: str = Field(pattern=r"^[A-Za-z_][A-Za-z0-9_]*$")
    kind: Literal["env", "arg", "config"]
    #: kind config: the YAML, TOML or JSON file as the command names it (read relative to the
    #: command's cwd), and the dotted key the value sets (``loader.num_workers``)
    file: str | None = None
    key: str | None = Field(default=None, pattern=r"^[^.\s][^\s]*$")
    values: list[KnobValue] = Field(min_length=1)
    default: KnobValue
    #: id in resources/strategies: which optimization this knob implements
    strategy: str | None = None
    #: the declared range of a numeric knob: values outside ``values`` but inside it may be proposed
    #: (by a model) and measured; without a range only the listed values are ever run
    min: int | float | None = None
    max: int | float | None = None

    @field_validator("values", "default", "min", "max")
    @classmethod
    def _fits(cls, value: Any) -> Any:
        for v in value if isinstance(value, list) else [value]:
            if isinstance(v, int) and not isinstance(v, bool) and abs(v) > KNOB_INT_LIMIT:
                raise ValueError(f"{v} is outside the 64-bit integers a knob's value can be")
            if isinstance(v, float) and not math.isfinite(v):
                raise ValueError(f"{v} is not a finite number")
        return value

    @model_validator(mode="after")
    def _default_in_values(self) -> Knob:
        if self.kind == "config" and not (self.file and self.key):
            raise ValueError('a config knob names its file and key (file = "conf.yaml", key = "a.b")')
        if self.kind != "config" and (self.file or self.key):
            raise ValueError(f"file and key belong to config knobs, not to kind {self.kind!r}")
        if self.file and config_format(self.file) is None:
            raise ValueError(f"file {self.file!r}: a config knob's file is YAML, TOML or JSON (its suffix)")
        if self.default not in self.values:
            raise ValueError(f"default {self.default!r} is not one of values {self.values!r}")
        if (self.min is not None or self.max is not None) and self.value_type() not in (int, float):
            raise ValueError("min/max need numeric values (ints or floats, not booleans or text)")
        if self.min is not None and self.max is not None and self.min > self.max:
            raise ValueError(f"min {self.min} > max {self.max}")
        outside = [v for v in self.values if not self.in_range(v)]
        if outside:
            raise ValueError(f"values {outside!r} lie outside the declared range [{self.min}, {self.max}]")
        return self

    def value_type(self) -> type:
        """The declared type: int when every value is an int, float when they are numbers, else str/bool."""
        kinds = {type(v) for v in self.values}
        if kinds == {int}:
            return int
        if kinds <= {int, float}:
            return float
        return bool if kinds == {bool} else str

    @property
    def ranged(self) -> bool:
        return self.min is not None and self.max is not None

    def in_range(self, value: KnobValue) -> bool:
        if isinstance(value, bool) or not isinstance(value, int | float):
            return self.min is None and self.max is None
        return (self.min is None or value >= self.min) and (self.max is None or value <= self.max)

    def allows(self, value: KnobValue) -> bool:
        """A listed value, or (for a ranged knob) a value of the declared type inside the range."""
        if value in self.values:
            return True
        if not self.ranged or isinstance(value, bool):
            return False
        kind = self.value_type()
        return isinstance(value, int if kind is int else int | float) and self.in_range(value)

    def parse(self, raw: str) -> KnobValue:
        """Text as this knob's value: a listed value by its spelling, else a number of the declared type."""
        v = _coerce(raw, self)
        if v is raw and self.ranged:
            try:
                return int(raw) if self.value_type() is int else float(raw)
            except ValueError:
                return raw
        return v


class Patch(_Strict):
    """An L1 source change the user offers: a unified diff applied to a copy of ``source_dir``."""

    name: str = Field(pattern=r"^[A-Za-z0-9][A-Za-z0-9_.-]{0,63}$")
    #: the diff, relative to the TOML file
    file: str
    #: id in resources/strategies: which optimization the patch implements
    strategy: str
    #: leading path components to strip, like ``patch -p``
    strip: int = Field(default=1, ge=0, le=32)
    description: str = ""


class Launcher(_Strict):
    kind: Literal["local", "mpirun", "slurm", "flux"] = "local"
    ranks: int = Field(default=1, ge=1, le=100_000)
    nodes: int = Field(default=1, ge=1, le=10_000)
    #: Slurm partition / Flux queue
    partition: str | None = None
    time_limit_min: int = Field(default=30, ge=1, le=MAX_SECONDS // 60)
    #: extra arguments for mpirun / sbatch / flux submit
    extra_args: list[str] = []
    poll_s: float = Field(default=2.0, gt=0, le=3600)
    #: Slurm and Flux: how long a job may wait in the queue before dftune cancels it; the spec's
    #: ``timeout_s`` then counts the job's run only, as a batch system's time limit does.  None: one
    #: clock from submission, ``timeout_s`` covers the wait and the run together (what a deadline
    #: near its end uses, so that nothing runs past it)
    queue_timeout_s: float | None = Field(default=3600.0, gt=0, le=MAX_SECONDS)
    #: baseline replicates of this workload that may run at once on this machine (local, mpirun);
    #: Slurm and Flux replicates are separate jobs and run as the cluster schedules them
    parallel: int = Field(default=1, ge=1, le=64)


class WorkloadSpec(_Strict):
    """A workload as its spec TOML describes it (paths resolved relative to the file)."""

    name: str = Field(pattern=r"^[A-Za-z0-9][A-Za-z0-9_.-]{0,63}$")
    command: list[str] = Field(min_length=1)
    setup: list[str] | None = None
    #: a data_dir outside the workdir is prepared once and reused by later experiments (and runs)
    #: while the setup command stays the same; false: the workload changes its data set, so every
    #: experiment's arms prepare it again (a data_dir inside {workdir} is each call's own anyway)
    setup_reuse: bool = True
    cwd: str = "."
    source_dir: str = "."
    data_dir: str = "{workdir}/data"
    replicates: int = Field(default=5, ge=1, le=1000)
    timeout_s: float = Field(default=300.0, gt=0, le=MAX_SECONDS)
    #: the page cache each replicate starts from: "cold" drops it before every replicate where the
    #: kernel permits (root), else one warm-up run comes first; "warm" never drops it (one warm-up
    #: run), for programs whose data is cache-resident in production or nodes others share
    page_cache: Literal["cold", "warm"] = "cold"
    metric: Metric = Metric()
    #: what the program reports about the work it did (see :class:`WorkCounter`)
    work: list[WorkCounter] = []
    tracing: Tracing = Tracing()
    staging: Staging = Staging()
    knobs: list[Knob] = []
    patches: list[Patch] = []
    launcher: Launcher = Launcher()
    #: extra environment for every run of this workload
    env: dict[str, str] = {}
    #: credential variables of dftune's environment this workload may see (by exact name); every other
    #: *_API_KEY, *_TOKEN, *SECRET*, password or credential variable is withheld from it
    pass_env: list[str] = []
    description: str = ""
    #: the interpreter ``{app_python}`` stands for: a program installed in another environment
    #: (a venv's folder or its python); default: the interpreter running dftune, like ``{python}``
    app_python: str | None = None
    #: filled by :func:`load_spec`: the TOML file this came from
    spec_path: str = ""

    @property
    def metric_is_default(self) -> bool:
        """The spec has no ``[metric]`` table: each run's wall time is what is measured."""
        return "metric" not in self.model_fields_set

    def metric_label(self) -> str:
        """What is measured, with its unit, as a person reads it."""
        if self.metric.kind == "wall_time":
            default = " (the spec has no [metric] table)" if self.metric_is_default else ""
            return f"wall time in seconds, lower is better{default}"
        better = "lower" if self.metric.lower_is_better else "higher"
        word = (self.metric.pattern or "").split(" ", 1)[0].strip("^'\"")
        what = word if word.replace("_", "").isalnum() else "the number"
        return f"{what} as the program prints it, {better} is better"

    @field_validator("knobs")
    @classmethod
    def _unique_knobs(cls, knobs: list[Knob]) -> list[Knob]:
        names = [k.name for k in knobs]
        dup = {n for n in names if names.count(n) > 1}
        if dup:
            raise ValueError(f"knob names must be unique: {sorted(dup)}")
        clash = set(names) & set(BUILTIN_PLACEHOLDERS)
        if clash:
            raise ValueError(f"knob names clash with built-in placeholders: {sorted(clash)}")
        return knobs

    @field_validator("pass_env")
    @classmethod
    def _env_names(cls, names: list[str]) -> list[str]:
        bad = [n for n in names if not re.fullmatch(r"[A-Za-z_][A-Za-z0-9_]*", n)]
        if bad:
            raise ValueError(f"not an environment variable name (no patterns, exact names only): {bad[0]!r}")
        if len(set(names)) != len(names):
            raise ValueError("names must be unique")
        return names

    @model_validator(mode="after")
    def _placeholders(self) -> WorkloadSpec:
        known = {*BUILTIN_PLACEHOLDERS, *(k.name for k in self.knobs)}
        for field, items in (
            ("command", self.command),
            ("setup", self.setup or []),
            ("data_dir", [self.data_dir]),
            ("tracing.output", self.tracing.output),
            ("metric.path", [self.metric.path] if self.metric.path else []),
        ):
            for item in items:
                if (why := placeholder_problem(item)) is not None:
                    raise ValueError(f"{field}: {item!r}: {why}")
                for name in _placeholders_in(item):
                    if name not in known:
                        raise ValueError(
                            f"{field}: placeholder {{{name}}} is neither "
                            f"a knob nor one of {BUILTIN_PLACEHOLDERS}"
                        )
        for knob in self.knobs:
            if knob.kind == "arg" and not any(knob.name in _placeholders_in(i) for i in self.command):
                raise ValueError(f"knob {knob.name} is kind 'arg' but the command has no {{{knob.name}}}")
            if knob.file and not any(names_file(i, knob.file) for i in self.command):
                raise ValueError(
                    f"knob {knob.name}: the command does not name {knob.file!r} "
                    "(as an argument of its own or after '=')"
                )
        keys = [(k.file, k.key) for k in self.knobs if k.kind == "config"]
        if len(set(keys)) != len(keys):
            raise ValueError("two config knobs set the same key of the same file")
        return self

    # ----------------------------------------------------------------------------------
    @property
    def base_dir(self) -> Path:
        return Path(self.spec_path).parent if self.spec_path else Path.cwd()

    def resolve(self, relative: str) -> Path:
        """A path from the spec, relative to the TOML file."""
        p = Path(relative).expanduser()
        return p if p.is_absolute() else (self.base_dir / p).resolve()

    def relocated(self, source_copy: Path) -> WorkloadSpec:
        """The same workload run from a copy of its source tree (an iteration's ``opt<n>/source``)."""
        src, cwd = self.resolve(self.source_dir), self.resolve(self.cwd)
        try:
            new_cwd = source_copy / cwd.relative_to(src)
        except ValueError:
            new_cwd = cwd  # the command runs outside the source tree; only {source_dir} moves
        return self.model_copy(update={"source_dir": str(source_copy), "cwd": str(new_cwd)})

    def knob(self, name: str) -> Knob:
        for k in self.knobs:
            if k.name == name:
                return k
        raise SpecError(
            f"{self.spec_path or self.name}: no knob named {name!r} (knobs: {[k.name for k in self.knobs]})"
        )

    def settings(self, overrides: dict[str, str] | None = None) -> dict[str, KnobValue]:
        """Every knob's value: its default unless overridden (values must be allowed ones)."""
        out: dict[str, KnobValue] = {k.name: k.default for k in self.knobs}
        for name, raw in (overrides or {}).items():
            knob = self.knob(name)
            value = knob.parse(raw)
            if not knob.allows(value):
                where = f" nor inside its range [{knob.min}, {knob.max}]" if knob.ranged else ""
                raise SpecError(
                    f"{self.spec_path or self.name}: {name}={raw!r} is not one of {knob.values!r}{where}"
                )
            out[name] = value
        return out

    def render(
        self,
        items: list[str],
        settings: dict[str, KnobValue],
        *,
        workdir: Path,
        trace_dir: Path | None = None,
    ) -> list[str]:
        """Fill placeholders in an argv list (``{trace_dir}``: this replicate's trace folder); a
        configuration file a config knob reads is passed as a copy with the knobs' values, written
        under ``workdir``."""
        values = self.placeholder_values(settings, workdir=workdir, trace_dir=trace_dir)
        out = [fill_placeholders(i, values) for i in items]
        filled = {fill_placeholders(f, values): v for f, v in self.config_values(settings).items()}
        configs = {f: v for f, v in filled.items() if any(names_file(i, f) for i in out)}
        if not configs:
            return out
        try:
            copies = write_copies(configs, cwd=self.resolve(self.cwd), workdir=workdir)
        except ConfigFileError as exc:
            raise SpecError(f"{self.spec_path or self.name}: {exc}") from None
        for file, copy_path in copies.items():
            out = [pass_copy(i, file, copy_path) for i in out]
        return out

    def config_values(self, settings: dict[str, KnobValue]) -> dict[str, dict[str, KnobValue]]:
        """The values config knobs set, by file (as the command names it) and key."""
        out: dict[str, dict[str, KnobValue]] = {}
        for k in self.knobs:
            if k.kind == "config" and k.file and k.key:
                out.setdefault(k.file, {})[k.key] = settings.get(k.name, k.default)
        return out

    def app_interpreter(self) -> str:
        """What ``{app_python}`` stands for: the spec's other environment, else this interpreter."""
        if not self.app_python:
            return sys.executable
        p = self.resolve(self.app_python)
        return str(p / "bin" / "python") if p.is_dir() else str(p)

    def placeholder_values(
        self, settings: dict[str, KnobValue], *, workdir: Path, trace_dir: Path | None = None
    ) -> dict[str, Any]:
        base: dict[str, Any] = {
            "workdir": str(workdir),
            "source_dir": str(self.resolve(self.source_dir)),
            "ranks": self.launcher.ranks,
            "python": sys.executable,
            "app_python": self.app_interpreter(),
            "trace_dir": str(trace_dir if trace_dir is not None else workdir / "traces"),
            **{k: _text(v) for k, v in settings.items()},
        }
        data = fill_placeholders(self.data_dir, base)
        base["data_dir"] = str(self.resolve(data)) if not Path(data).is_absolute() else data
        return base

    def knob_env(self, settings: dict[str, KnobValue]) -> dict[str, str]:
        """Environment variables set by env-kind knobs."""
        return {k.name: _text(settings[k.name]) for k in self.knobs if k.kind == "env"}


def placeholder_problem(text: str) -> str | None:
    """Why ``text`` holds something other than plain ``{name}`` placeholders, or None.

    Only a plain name is filled in: an empty ``{}`` has no value to name, a format spec
    (``{ranks:0300000000d}``) can ask for a gigabyte of padding, a conversion (``{data_dir!r}``)
    or an attribute or index (``{python.__class__}``) hands the program a Python repr or object.
    ``{{`` and ``}}`` stay literal braces."""
    try:
        parts = list(string.Formatter().parse(text))
    except ValueError as exc:
        return f"not a valid placeholder template ({exc}); write {{{{ and }}}} for literal braces"
    for _, name, spec, conversion in parts:
        if name is None:
            continue
        shown = "{" + name + (f"!{conversion}" if conversion else "") + (f":{spec}" if spec else "") + "}"
        if not name:
            return f"empty placeholder {shown}: only plain {{name}} placeholders are valid"
        if conversion or spec or not _PLAIN_NAME.fullmatch(name):
            return (
                f"placeholder {shown} is not a plain {{name}}: conversions, "
                "format specs, attributes and indexes are refused"
            )
    return None


_PLAIN_NAME = re.compile(r"(?!\d+$)[A-Za-z0-9_][A-Za-z0-9_-]*")


def fill_placeholders(text: str, values: dict[str, Any]) -> str:
    """``text`` with each plain ``{name}`` replaced by ``str(values[name])`` (no format mini-language)."""
    out = []
    for literal, name, _, _ in string.Formatter().parse(text):
        out.append(literal)
        if name is not None:
            out.append(str(values[name]))
    return "".join(out)


def _placeholders_in(text: str) -> list[str]:
    return [name for _, name, _, _ in string.Formatter().parse(text) if name]


def _text(value: KnobValue) -> str:
    if isinstance(value, bool):
        return "1" if value else "0"
    return str(value)


def _coerce(raw: str, knob: Knob) -> KnobValue:
    """Turn ``--set NAME=VALUE`` text into the knob's value type."""
    for v in knob.values:
        if _text(v) == raw or str(v) == raw:
            return v
    return raw


def load_spec(path: str | Path, *, located_at: str | Path | None = None) -> WorkloadSpec:
    """Read and validate a workload TOML; errors name the file and the offending key.

    ``located_at``: read the text of ``path`` (a run's archived copy) as if it were the file
    at ``located_at`` (the original), so its relative paths resolve where the user wrote them."""
    p = Path(path)
    where = Path(located_at) if located_at is not None else p
    try:
        data = tomllib.loads(_read_spec_text(p))
    except FileNotFoundError:
        raise SpecError(f"{p}: no such file") from None
    except UnicodeDecodeError as exc:
        raise SpecError(
            f"{p}: not UTF-8 text (byte {exc.start}): a workload spec is a UTF-8 TOML file"
        ) from None
    except IsADirectoryError:
        raise SpecError(f"{p}: is a directory, not a workload TOML file") from None
    except tomllib.TOMLDecodeError as exc:
        raise SpecError(f"{p}: not valid TOML: {exc}") from None
    if "spec_path" in data:
        raise SpecError(f"{p}: unknown key 'spec_path'")
    try:
        spec = WorkloadSpec.model_validate({**data, "spec_path": str(where.resolve())})
    except ValidationError as exc:
        raise SpecError(f"{p}: {_describe(exc)}") from None
    _check_strategies(spec, p)
    _check_configs(spec, p)
    return spec


def _check_configs(spec: WorkloadSpec, path: Path) -> None:
    """Each config knob's file is one the knob can set: readable, its key's sections mappings.
    A file a run makes (under ``{workdir}``, ``{data_dir}``, ``{trace_dir}``) is read when used."""
    for file, values in spec.config_values(spec.settings()).items():
        if any(f"{{{p}}}" in file for p in ("workdir", "data_dir", "trace_dir")):
            continue
        named = fill_placeholders(file, spec.placeholder_values({}, workdir=Path("/nonexistent")))
        target = Path(named) if Path(named).is_absolute() else spec.resolve(spec.cwd) / named
        try:
            with_values(read_tree(target), values)
        except ConfigFileError as exc:
            knob = next(k.name for k in spec.knobs if k.file == file)
            raise SpecError(f"{path}: knobs.{knob}.file: {exc}") from None


#: the most of a spec read: a hand-written workload TOML is a few KiB
SPEC_BYTES = 1 << 20


def _read_spec_text(p: Path) -> str:
    """A spec's text: a regular file (a device, a pipe or a folder is refused before it is opened,
    and it is opened without waiting for a writer), at most :data:`SPEC_BYTES`."""
    st = os.stat(p)  # FileNotFoundError: said by the caller
    if stat.S_ISDIR(st.st_mode):
        raise IsADirectoryError(str(p))
    if not stat.S_ISREG(st.st_mode):
        raise SpecError(
            f"{p}: not a regular file (a device, a pipe or a socket): a workload spec is a TOML file"
        )
    if st.st_size > SPEC_BYTES:
        raise SpecError(f"{p}: {st.st_size:,} bytes, more than a workload spec's {SPEC_BYTES >> 20} MiB")
    fd = os.open(p, os.O_RDONLY | os.O_NONBLOCK)
    with os.fdopen(fd, "rb") as fh:
        raw = fh.read(SPEC_BYTES + 1)
    if len(raw) > SPEC_BYTES:
        raise SpecError(f"{p}: more than a workload spec's {SPEC_BYTES >> 20} MiB")
    return raw.decode("utf-8")


def _describe(exc: ValidationError) -> str:
    errors = exc.errors()
    # a misspelt key is also a missing one: name the typo, the cause
    err = next((e for e in errors if e["type"] == "extra_forbidden"), errors[0])
    where = ".".join(str(x) for x in err["loc"])
    if err["type"] == "extra_forbidden":
        return f"unknown key '{where}'{_did_you_mean(err['loc'])}"
    msg = str(err["msg"]).removeprefix("Value error, ")
    return f"{where}: {msg}" if where else msg


def _did_you_mean(loc: tuple[int | str, ...]) -> str:
    """`` (did you mean 'metric'?)`` for a misspelt key: the nearest key the table accepts."""
    model: Any = WorkloadSpec
    for part in loc[:-1]:
        if isinstance(part, int):
            continue
        field = model.model_fields.get(part)
        model = _model_of(field.annotation) if field is not None else None
        if model is None:
            return ""
    known = [name for name in model.model_fields if name != "spec_path"]
    near = difflib.get_close_matches(str(loc[-1]), known, n=1, cutoff=0.6)
    return f" (did you mean '{near[0]}'?)" if near else ""


def _model_of(annotation: Any) -> Any:
    """The table model inside ``Model``, ``list[Model]`` or ``Model | None``."""
    if isinstance(annotation, type) and issubclass(annotation, BaseModel):
        return annotation
    for arg in typing.get_args(annotation):
        found = _model_of(arg)
        if found is not None:
            return found
    return None


def _check_strategies(spec: WorkloadSpec, path: Path) -> None:
    names = [p.name for p in spec.patches]
    if len(set(names)) != len(names):
        raise SpecError(f"{path}: patches: names must be unique")
    for patch in spec.patches:
        if not spec.resolve(patch.file).is_file():
            raise SpecError(f"{path}: patches.{patch.name}.file: {patch.file} is not a file")
    ids = [k.strategy for k in spec.knobs if k.strategy] + [p.strategy for p in spec.patches]
    if not ids:
        return
    from dftune.tools.catalog import default_catalog

    strategies = default_catalog().strategies
    for k in spec.knobs:
        if k.strategy and k.strategy not in strategies:
            raise SpecError(f"{path}: knobs.{k.name}.strategy: {k.strategy!r} is not in the strategy catalog")
    for patch in spec.patches:
        if patch.strategy not in strategies:
            raise SpecError(
                f"{path}: patches.{patch.name}.strategy: {patch.strategy!r} is not in the strategy catalog"
            )
