"""Draft a workload spec from a command: which of the program's settings are tunables, which define it.

Users bring programs they did not write and rarely know which settings matter; STELLAR reads a
file system's manual for its tunables, this reads the program's own configuration: DLIO's Hydra
workload YAML, PyTorch ``DataLoader`` arguments and ``argparse`` options in its source, MPI-IO
hints, and any program's ``--help``.  Each setting is classified by the rules in
``resources/drafting/settings.toml``: a tunable (values to try, a catalog strategy) or part of
the workload's definition (dataset size, epochs, record/transfer size, number of files), which is
never offered.  Pure rules: no model is needed.
"""

from __future__ import annotations

import ast
import functools
import itertools
import re
import shlex
import shutil
import sys
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

import tomlkit
from pydantic import Field

from dftune.core import resource
from dftune.core.errors import DftuneError
from dftune.core.facts.stacks import is_launcher, is_python, python_imports, runs
from dftune.core.model import StrictModel
from dftune.core.process import run_command
from dftune.tools.runner.config_files import (
    ConfigFileError,
    ConfigFileInterface,
    config_format,
    flatten,
    read_tree,
)

HELP_TIMEOUT_S = 15.0
#: DLIO's workflow overrides that run only the training phase (data generated once, in setup).
DLIO_TRAIN_ONLY = (
    "++workload.workflow.generate_data=False",
    "++workload.workflow.train=True",
    "++workload.workflow.checkpoint=False",
)
DLIO_GENERATE_ONLY = (
    "++workload.workflow.generate_data=True",
    "++workload.workflow.train=False",
    "++workload.workflow.checkpoint=False",
)


class DraftError(DftuneError):
    """The command cannot be drafted (no such program, unreadable config): one line."""


@dataclass(frozen=True)
class Rule:
    match: re.Pattern[str]
    role: str
    why: str
    strategy: str | None = None
    values: tuple[Any, ...] = ()


@dataclass
class Setting:
    """One setting of the program, where it came from and what dftune makes of it."""

    name: str
    source: str
    default: Any = None
    #: how the program receives it: an option (``--num-workers``), a Hydra key, an env variable
    flag: str = ""
    role: str = "unknown"
    why: str = ""
    strategy: str | None = None
    values: list[Any] = field(default_factory=list)
    #: the values the program accepts (argparse ``choices``): what is tried, whatever the rule says
    choices: list[Any] = field(default_factory=list)
    #: the smallest value the call it feeds accepts (resources/drafting/call_sites.toml)
    minimum: float | None = None

    #: the program's option (argparse dest) that passes a call's argument: the knob's name
    option: str = ""
    #: the call it was read from, ``keyword:line`` ("" for an option, a config key, --help)
    call: str = ""
    #: a key of a configuration file the command names: that file as the command names it (the
    #: knob is then kind ``config``, tools/runner/config_files.py)
    config: str = ""

    @property
    def knob_name(self) -> str:
        return (
            re.sub(r"[^A-Za-z0-9]+", "_", (self.option or self.name).split(".")[-1]).strip("_").upper()
            or "KNOB"
        )


@dataclass
class Draft:
    """A drafted spec: the command with placeholders, its settings, and notes for the reader."""

    name: str
    kind: str
    command: list[str]
    settings: list[Setting]
    setup: list[str] | None = None
    tracing_output: str | None = None
    data_dir: str | None = None
    notes: list[str] = field(default_factory=list)
    #: the command as the user gave it
    source: list[str] = field(default_factory=list)
    #: a number the program prints about its own speed: (regex, lower_is_better)
    metric: tuple[str, bool] | None = None
    #: the benchmark's own summary as the metric: the [metric] table (kind, field, path), and why
    benchmark_metric: dict[str, str] = field(default_factory=dict)
    benchmark_metric_why: list[str] = field(default_factory=list)
    #: what a run of the spec finds for itself beyond its knobs (tools/runner/levers.py, foreseen)
    foreseen: list[str] = field(default_factory=list)

    @property
    def tunables(self) -> list[Setting]:
        return [s for s in self.settings if s.role == "tunable"]

    @property
    def workload(self) -> list[Setting]:
        return [s for s in self.settings if s.role == "workload"]


def load_rules() -> list[Rule]:
    return [
        Rule(
            re.compile(r["match"], re.IGNORECASE),
            r["role"],
            r["why"],
            r.get("strategy"),
            tuple(r.get("values", ())),
        )
        for r in resource.toml("drafting/settings.toml")["rule"]
    ]


def _unified(name: str) -> str:
    name = re.sub(r"(?<=[a-z0-9])(?=[A-Z])", "_", name)  # camelCase (IOR's blockSize) -> block_size
    return re.sub(r"[-.\s]+", "_", name).lower()


def classify(setting: Setting, rules: list[Rule]) -> Setting:
    """The first rule matching the setting's last name component (or its whole name) decides."""
    leaf = _unified(setting.name.split(".")[-1])
    whole = _unified(setting.name)
    for rule in rules:
        if rule.match.search(leaf) or (
            leaf != whole and rule.match.search(whole) and rule.role == "workload"
        ):
            setting.role, setting.why, setting.strategy = rule.role, rule.why, rule.strategy
            if rule.role == "tunable":
                setting.values = _values(rule.values, setting.default)
                if setting.choices:  # the program's own accepted values win over the rule's
                    first = [setting.default] if setting.default in setting.choices else []
                    setting.values = first + [c for c in setting.choices if c not in first]
                setting.values = _accepted(setting.values, setting.minimum)
            return setting
    setting.role, setting.why = (
        "unknown",
        "no rule matches it: neither offered nor known to define the workload",
    )
    return setting


def _accepted(values: list[Any], minimum: float | None) -> list[Any]:
    """The values the callee takes: none below its minimum (a pool of 0 workers raises)."""
    if minimum is None:
        return values
    return [v for v in values if isinstance(v, bool) or not isinstance(v, int | float) or v >= minimum]


def _values(candidates: tuple[Any, ...], default: Any) -> list[Any]:
    """The rule's values to try, in the default's type, with the default first."""
    out: list[Any] = []
    if isinstance(default, bool):
        out = [default, not default]
    elif (
        isinstance(default, int)
        and default in (0, 1)
        and candidates
        and all(isinstance(v, bool) for v in candidates)
    ):
        out = [default, 1 - default]  # an on/off setting the program takes as 0/1
    elif isinstance(default, int) and all(isinstance(v, int) and not isinstance(v, bool) for v in candidates):
        out = [default, *(v for v in candidates if v != default)]
    elif default is not None and candidates and all(isinstance(v, str) for v in candidates):
        out = [str(default), *(v for v in candidates if v != str(default))]
    else:
        out = list(candidates)
    return out


# ------------------------------------------------------------------ DLIO (Hydra workload YAML)
def _is_dlio(argv: list[str]) -> bool:
    return runs(argv, "dlio")


def _hydra_overrides(argv: list[str]) -> dict[str, str]:
    out: dict[str, str] = {}
    for a in argv:
        if "=" in a and not a.startswith("-"):
            key, value = a.split("=", 1)
            out[key.lstrip("+")] = value
    return out


def _option(argv: list[str], *names: str) -> str | None:
    for i, a in enumerate(argv):
        for n in names:
            if a == n and i + 1 < len(argv):
                return argv[i + 1]
            if a.startswith(n + "="):
                return a.split("=", 1)[1]
    return None


def dlio_workload_yaml(argv: list[str], cwd: Path) -> Path:
    """The workload YAML a DLIO command reads: ``--config-dir`` or the installed package's configs."""
    overrides = _hydra_overrides(argv)
    name = overrides.get("workload", "default")
    dirs: list[Path] = []
    cd = _option(argv, "--config-dir", "-cd")
    if cd:
        dirs.append(Path(cd) if Path(cd).is_absolute() else cwd / cd)
    for a in argv:  # a console script or interpreter of another environment: its site-packages
        p = Path(a)
        if p.parent.name == "bin" and (p.parent.parent / "lib").is_dir():
            dirs.extend(
                sorted((p.parent.parent / "lib").glob("python3*/site-packages/dlio_benchmark/configs"))
            )
    spec = None
    try:
        import importlib.util

        spec = importlib.util.find_spec("dlio_benchmark")
    except (ImportError, ValueError):
        spec = None
    if spec is not None and spec.submodule_search_locations:
        dirs.append(Path(next(iter(spec.submodule_search_locations))) / "configs")
    for d in dirs:
        for candidate in (d / "workload" / f"{name}.yaml", d / f"{name}.yaml"):
            if candidate.is_file():
                return candidate
    raise DraftError(
        f"DLIO workload config {name}.yaml not found (looked in {', '.join(map(str, dirs)) or 'nowhere'}):"
        " pass --config-dir DIR holding workload/<name>.yaml"
    )


#: DLIO settings that are tunables but absent from most workload configs (DLIO's own defaults).
DLIO_DEFAULTS = {"reader.read_threads": 1, "reader.prefetch_size": 2, "reader.computation_threads": 1}
#: Sections of a DLIO workload whose keys are settings of the run, not its identity.
DLIO_SECTIONS = ("dataset.", "reader.", "train.", "checkpoint.")


_HYDRA_OPTIONS = ("--config-dir", "-cd", "--config-name", "-cn", "--config-path", "-cp")


def _dlio_options_first(argv: list[str]) -> list[str]:
    """Hydra's options before its overrides: argparse takes the overrides as one trailing list."""
    n = 3 if len(argv) > 2 and argv[1] == "-m" else 1  # python -m dlio_benchmark.main ...
    head, options, overrides = argv[:n], list[str](), list[str]()
    i = n
    while i < len(argv):
        a = argv[i]
        if a in _HYDRA_OPTIONS and i + 1 < len(argv):
            options += [a, argv[i + 1]]
            i += 2
            continue
        (options if a.startswith("-") else overrides).append(a)
        i += 1
    return [*head, *options, *overrides]


def dlio_settings(argv: list[str], cwd: Path, rules: list[Rule]) -> tuple[list[Setting], Path]:
    """The settings of a DLIO command's workload YAML (its overrides win), and the YAML's path."""
    path = dlio_workload_yaml(argv, cwd)
    try:  # bounded: size, aliases, settings (an alias bomb is refused, not expanded)
        tree = read_tree(path)
    except ConfigFileError as exc:
        raise DraftError(f"{exc} (a DLIO workload YAML is a mapping of sections)") from None
    flat = {**DLIO_DEFAULTS, **flatten(tree, where=path)}
    overrides = _hydra_overrides(argv)
    settings: list[Setting] = []
    for key, value in flat.items():
        if not key.startswith(DLIO_SECTIONS):
            continue
        value = overrides.get(f"workload.{key}", value)
        s = classify(Setting(name=key, source=path.name, default=value, flag=f"++workload.{key}"), rules)
        settings.append(s)
    return settings, path


def draft_dlio(argv: list[str], cwd: Path, rules: list[Rule]) -> Draft:
    settings, path = dlio_settings(argv, cwd, rules)
    overrides = _hydra_overrides(argv)
    base = _dlio_options_first(
        [
            a
            for a in argv
            if not a.startswith(
                ("++workload.workflow.", "++workload.output.", "++workload.dataset.data_folder")
            )
        ]
    )
    command = [
        *base,
        "++workload.dataset.data_folder={data_dir}",
        "++workload.output.folder={trace_dir}",
        *DLIO_TRAIN_ONLY,
    ]
    setup = [
        *base,
        "++workload.dataset.data_folder={data_dir}",
        "++workload.output.folder={workdir}/generate",
        *DLIO_GENERATE_ONLY,
    ]
    name = overrides.get("workload", "dlio")
    return Draft(
        name=spec_name(f"dlio-{name}"),
        kind="dlio",
        source=argv,
        command=with_knobs(command, settings),
        settings=settings,
        setup=setup,
        tracing_output="{trace_dir}",
        data_dir="{workdir}/data",
        benchmark_metric={"kind": "dlio", "field": "train_throughput", "path": "{trace_dir}/summary.json"},
        benchmark_metric_why=[
            "DLIO's own training throughput, from the summary.json it writes in workload.output.folder:",
            "the time spent generating data and starting Python stays out of it",
        ],
        notes=[
            f"DLIO workload config: {path}",
            "the setup generates the dataset once; every replicate runs only the training phase "
            "(workflow.generate_data=False, train=True, checkpoint=False)",
            "DLIO initializes dftracer itself: dftune traces it in FUNCTION mode and collects "
            "trace-<rank>-of-<size>.pfw from workload.output.folder = {trace_dir}",
        ],
    )


# ------------------------------------------------------------------ Python source (DataLoader, argparse)
def _literal(node: ast.AST | None) -> Any:
    if node is None:
        return None
    try:
        return ast.literal_eval(node)
    except (ValueError, TypeError, SyntaxError, RecursionError, MemoryError):
        return None


#: the most words and symbols of a script parsed: the parser holds them all at once, about 0.4 KiB
#: each (a 1 MiB hand-written program has some 300,000 and takes ~110 MB; 4 MiB of ``1,1,...``
#: took 2 GB), so a larger script's source is not read
MAX_SOURCE_TOKENS = 300_000
#: the deepest syntax tree read: hand-written code nests a few dozen levels, and the walks that read
#: it (``ast.literal_eval``) recurse once per level
MAX_SOURCE_DEPTH = 200
_TOKEN = re.compile(r"\w+|[^\w\s]")


class SourceTooLarge(DraftError):
    """A script with more words and symbols than are parsed: its source is not read."""


def parse_python(source: str, filename: str) -> ast.Module:
    """The script's syntax tree, or a one-line :class:`DraftError`: not valid Python (binary data
    too), too deeply nested for the parser (``1+1+...`` of 200,000 terms, 50,000 nested lambdas)
    or for the walks that read it; :class:`SourceTooLarge` past :data:`MAX_SOURCE_TOKENS`, counted
    before the parser holds them."""
    if len(source) > MAX_SOURCE_TOKENS:  # fewer characters than that are fewer tokens too
        counted = sum(1 for _ in itertools.islice(_TOKEN.finditer(source), MAX_SOURCE_TOKENS + 1))
        if counted > MAX_SOURCE_TOKENS:
            raise SourceTooLarge(f"{filename} has more than {MAX_SOURCE_TOKENS:,} words and symbols")
    try:
        tree = ast.parse(source, filename=filename)
    except SyntaxError as exc:
        where = f"line {exc.lineno}" if exc.lineno else str(exc.msg)[:100]
        raise DraftError(f"{filename}: not valid Python ({where}): cannot read its settings") from None
    except (ValueError, RecursionError, MemoryError):  # NUL bytes; the parser's own depth limits
        raise DraftError(
            f"{filename}: not valid Python or too deeply nested to parse: cannot read its settings"
        ) from None
    stack: list[tuple[ast.AST, int]] = [(tree, 1)]
    while stack:
        node, depth = stack.pop()
        if depth > MAX_SOURCE_DEPTH:
            raise DraftError(
                f"{filename}: nested deeper than {MAX_SOURCE_DEPTH} levels: cannot read its settings"
            )
        stack.extend((child, depth + 1) for child in ast.iter_child_nodes(node))
    return tree


class CallSite(StrictModel):
    """A call whose argument decides how I/O is served, and what the callee accepts."""

    function: str
    keyword: str
    #: the argument's place when passed without its keyword
    position: int | None = None
    min: float | None = None
    #: the value the callee uses when the call leaves the argument out (as documented; None: not
    #: documented, or None itself): an env-gated patch adds the argument around it
    default: int | float | bool | None = None
    source: str


class _CallSites(StrictModel):
    call: list[CallSite]


class HydraInterface(StrictModel):
    module: str
    decorator: str
    path_keyword: str
    name_keyword: str
    suffixes: list[str] = Field(min_length=1)
    own_keys: list[str]
    override: str
    source: str = Field(min_length=1)


class HelpLibraries(StrictModel):
    modules: list[str]
    source: str = Field(min_length=1)


class Interfaces(StrictModel):
    """resources/drafting/interfaces.toml: how programs declare their settings besides argparse."""

    hydra: HydraInterface
    help_libraries: HelpLibraries
    config_files: ConfigFileInterface


@functools.cache
def interfaces() -> Interfaces:
    return resource.load("drafting/interfaces.toml", Interfaces, DraftError)


@functools.cache
def call_sites() -> tuple[CallSite, ...]:
    """resources/drafting/call_sites.toml."""
    return tuple(resource.load("drafting/call_sites.toml", _CallSites, DraftError).call)


def _call_name(node: ast.Call) -> str:
    func = node.func
    return func.attr if isinstance(func, ast.Attribute) else func.id if isinstance(func, ast.Name) else ""


def _argument(node: ast.Call, site: CallSite) -> ast.expr | None:
    for k in node.keywords:
        if k.arg == site.keyword:
            return k.value
    if site.position is not None and site.position < len(node.args):
        arg = node.args[site.position]
        return None if isinstance(arg, ast.Starred) else arg
    return None


def _option_of(
    expr: ast.expr, options: dict[str, Setting], assigned: dict[str, ast.expr], depth: int = 0
) -> str | None:
    """The program option whose value *is* the argument: ``args.threads``, a name assigned from it,
    ``int(args.threads)`` or either branch of ``x if cond else y`` (never the condition: in
    ``2 if args.workers else None`` the workers option only decides whether 2 is passed)."""
    if depth > 4:
        return None
    if isinstance(expr, ast.Attribute):
        return expr.attr if expr.attr in options else None
    if isinstance(expr, ast.Name):
        nxt = assigned.get(expr.id)
        return _option_of(nxt, options, assigned, depth + 1) if nxt is not None else None
    if isinstance(expr, ast.IfExp):
        branches: list[ast.expr] = [expr.body, expr.orelse]
    elif isinstance(expr, ast.Call) and _call_name(expr) in ("int", "float", "bool", "max", "min"):
        branches = list(expr.args)
    else:
        return None
    for b in branches:
        found = _option_of(b, options, assigned, depth + 1)
        if found:
            return found
    return None


def _argparse_option(node: ast.Call, filename: str) -> tuple[Setting, list[Any]] | bool | None:
    """An ``add_argument`` call's option and its choices; False for one named at run time."""
    flags = [a.value for a in node.args if isinstance(a, ast.Constant) and isinstance(a.value, str)]
    longs = [f for f in flags if f.startswith("--")] or flags
    if not longs and node.args:
        return False  # an option named at run time (a loop over hint names): --help shows it
    if not longs or not longs[0].startswith("-"):
        return None
    kw = {k.arg: k.value for k in node.keywords if k.arg}
    dest = _literal(kw.get("dest")) or longs[0].lstrip("-").replace("-", "_")
    default = _literal(kw.get("default"))
    action = _literal(kw.get("action"))
    if action in ("store_true", "store_false"):
        default = action == "store_false" if default is None else default
    choices = _literal(kw.get("choices"))
    setting = Setting(name=dest, source=f"{filename} (argparse)", default=default, flag=longs[0])
    return setting, list(choices) if isinstance(choices, list | tuple) else []


def python_settings(source: str, filename: str) -> tuple[list[Setting], bool]:
    """The argparse options of a Python program and the arguments of its I/O calls.

    An argument of a call in resources/drafting/call_sites.toml that comes from an option
    (``ThreadPoolExecutor(max_workers=args.threads)``) takes the option's flag and default and
    the callee's minimum, so the knob is passed on the command line and never crashes the call;
    one that no option passes is listed for the reader.  Also returns whether some options are
    named at run time (then only the program's ``--help`` lists them).
    """
    tree = parse_python(source, filename)
    sites: dict[str, list[CallSite]] = {}
    for site in call_sites():
        sites.setdefault(site.function, []).append(site)
    options: dict[str, Setting] = {}
    assigned: dict[str, ast.expr] = {}
    calls: list[tuple[CallSite, ast.expr, int]] = []
    dynamic = False
    for node in ast.walk(tree):
        if isinstance(node, ast.Assign) and len(node.targets) == 1 and isinstance(node.targets[0], ast.Name):
            assigned[node.targets[0].id] = node.value
        if not isinstance(node, ast.Call):
            continue
        name = _call_name(node)
        if name == "add_argument":
            found = _argparse_option(node, filename)
            if found is False:
                dynamic = True
            elif isinstance(found, tuple):
                options[found[0].name] = found[0]
                found[0].choices = found[1]
            continue
        for site in sites.get(name, ()):
            expr = _argument(node, site)
            if expr is not None:
                calls.append((site, expr, node.lineno))
    settings: list[Setting] = []
    by_option: dict[str, Setting] = {}
    for site, expr, line in sorted(calls, key=lambda c: c[2]):
        where = f"{filename}:{line} ({site.function} {site.keyword}=)"
        dest = _option_of(expr, options, assigned)
        if dest is None:
            if all(s.name != site.keyword or s.flag for s in settings):
                settings.append(
                    Setting(
                        name=site.keyword,
                        source=where,
                        default=_literal(expr),
                        minimum=site.min,
                        call=f"{site.keyword}:{line}",
                    )
                )
            continue
        if dest in by_option:  # the same option feeds a second call: the stricter minimum holds
            s = by_option[dest]
            if site.min is not None:
                s.minimum = site.min if s.minimum is None else max(s.minimum, site.min)
            continue
        opt = options[dest]
        s = Setting(
            name=site.keyword,
            source=where,
            default=opt.default,
            flag=opt.flag,
            choices=opt.choices,
            minimum=site.min,
            option=dest,
            call=f"{site.keyword}:{line}",
        )
        by_option[dest] = s
        settings.append(s)
    settings.extend(s for d, s in options.items() if d not in by_option)
    # a click or typer command declares its options in decorators and signatures: its --help says them
    libraries = interfaces().help_libraries.modules
    dynamic = dynamic or any(f"import {m}\n" in python_imports(source) for m in libraries)
    return settings, dynamic


#: the most of a script read (a hand-written program is well under a MiB)
SOURCE_BYTES = 4 << 20


def read_source(script: Path) -> str | None:
    """The script's text, or None when it is larger than :data:`SOURCE_BYTES` (or unreadable)."""
    try:
        with script.open("rb") as fh:
            raw = fh.read(SOURCE_BYTES + 1)
    except OSError:
        return None
    return None if len(raw) > SOURCE_BYTES else raw.decode("utf-8", errors="replace")


def _script(argv: list[str], cwd: Path) -> Path | None:
    for a in argv:
        if a.endswith(".py"):
            p = Path(a) if Path(a).is_absolute() else cwd / a
            if p.is_file():
                return p
    return None


# ------------------------------------------------------------------ any program's --help
_HELP_LINE = re.compile(
    r"^\s{1,12}(?:(-[A-Za-z0-9])(?:[ =]([A-Z][A-Z_]*|\S+))?(?:,\s*)?)?"
    r"\s*(--[A-Za-z0-9][\w.-]*)?(?:[ =]([^\s]+))?(?:\s{2,}(.+))?$"
)


#: the frame rich draws around typer's --help, and its mark of a required option
_BOX = re.compile(r"[\u2500-\u257f]")
_REQUIRED = re.compile(r"^(\s*)\*(?=\s)")
#: a value's type written where argparse puts the metavar (typer's ``<int>``, click's ``INTEGER``)
_TYPE_FIRST = re.compile(r"^(<\w+>|[A-Z][A-Z_]+)(?:\s{2,}|$)(.*)$")


def _unframed(line: str) -> str:
    return _REQUIRED.sub(r"\1 ", _BOX.sub(" ", line).rstrip())


def help_settings(text: str, program: str, rules: list[Rule]) -> list[Setting]:
    """Options of a ``--help`` text: ``-x VALUE``/``--long=VALUE`` lines with a description.

    The name is the word before `` -- `` in the description when there is one (IOR writes
    ``blockSize -- contiguous bytes ...``), else the long option, else the short one.  A default
    is read from ``=VALUE`` when it is a number or from ``(default: X)``.
    """
    out: list[Setting] = []
    seen: set[str] = set()
    for line in map(_unframed, text.splitlines()):
        m = _HELP_LINE.match(line)
        if not m or not (m.group(1) or m.group(3)):
            continue
        short, short_val, long_, long_val, desc = m.groups()
        desc = desc or ""
        if not (short_val or long_val) and (typed := _TYPE_FIRST.match(desc)):
            long_val, desc = typed.group(1), typed.group(2)
        if (long_ or short) in ("-h", "--help"):
            continue
        flag = long_ or short
        named = re.match(r"([A-Za-z][\w.]*)\s+--\s", desc)
        name = named.group(1) if named else (long_ or short).lstrip("-")
        raw = long_val or short_val
        d = re.search(r"[(\[]default:?\s*([^)\]]+)[)\]]", desc)
        default: Any = _number(d.group(1).strip()) if d else _number(raw) if raw else None
        if name in seen:
            continue
        seen.add(name)
        s = classify(Setting(name=name, source=f"{program} --help", default=default, flag=flag), rules)
        if raw is None and default is None:  # a flag without a value: on or off by its presence
            if s.role == "tunable":
                s.values = []
                s.why += " (a flag without a value: add it to the command to try it)"
            elif s.role == "unknown":
                s.why = "a flag without a value: no rule matches it"
        out.append(s)
    return out


def _number(text: str | None) -> Any:
    if text is None:
        return None
    if text.lower() in ("true", "false"):
        return text.lower() == "true"
    try:
        return int(text)
    except ValueError:
        try:
            return float(text)
        except ValueError:
            return None if text.isupper() or re.fullmatch(r"<\w+>", text) else text  # a metavar


def run_help(
    argv: list[str], cwd: Path, timeout_s: float = HELP_TIMEOUT_S, scratch: Path | None = None
) -> str:
    """The program's ``--help`` (stdout and stderr), or "" when it has none or cannot start.

    ``scratch``: run it there instead of ``cwd`` (its own paths made absolute), so a program that
    ignores ``--help`` and does its work writes nothing beside the user's files; on the timeout
    its whole process group is killed."""
    head = argv[: _program_end(argv)]
    if head[0] in ("python", "python3", "{python}"):  # the interpreter dftune runs ({python} in a spec)
        head = [sys.executable, *head[1:]]
    where = cwd
    if scratch is not None:
        head = [
            str((cwd / a).resolve()) if not Path(a).is_absolute() and (cwd / a).is_file() else a for a in head
        ]
        where = scratch
    res = run_command([*head, "--help"], timeout_s=timeout_s, cwd=where, contain=True)
    return "" if res.error else res.stdout + "\n" + res.stderr


def _program_end(argv: list[str]) -> int:
    """How many leading arguments name the program (``python script.py``, ``mpirun -n 2 ior``)."""
    for i, a in enumerate(argv):
        if a.endswith(".py"):
            return i + 1
    if is_launcher(argv[0]):
        i = 1
        while i < len(argv) and argv[i].startswith("-"):
            i += 2
        return min(i + 1, len(argv))
    return 1


# ------------------------------------------------------------------ the draft
def program_settings(
    argv: list[str],
    cwd: Path,
    rules: list[Rule],
    *,
    help_text: str | None = None,
    help_timeout_s: float = HELP_TIMEOUT_S,
    help_scratch: Path | None = None,
) -> tuple[list[Setting], str, list[str], str]:
    """The classified settings of ``argv``'s program (a Python script's source and options, else
    its ``--help``), its kind, notes for the reader and the script's source ("" for none).

    A setting the command already passes (``--threads 8``) defaults to that value: the draft
    reproduces the command as given."""
    script = _script(argv, cwd)
    kind, notes, source = "program", list[str](), ""
    found: list[Setting] = []
    helped: list[Setting] = []  # classified by help_settings (a flag without a value stays one)
    if script is not None:
        kind = "python"
        read = read_source(script)
        if read is None:
            notes.append(
                f"{script.name} is larger than {SOURCE_BYTES >> 20} MiB: not a hand-written program, its "
                "source is not read (its --help is)"
            )
        source = read or ""
        try:
            found, dynamic = python_settings(source, script.name) if source else ([], True)
        except SourceTooLarge as exc:
            notes.append(f"{exc}: not a hand-written program, its source is not read (its --help is)")
            source, found, dynamic = "", [], True
        if dynamic:
            known = {s.flag for s in found if s.flag}
            text = help_text if help_text is not None else run_help(argv, cwd, help_timeout_s, help_scratch)
            helped = [s for s in help_settings(text, script.name, rules) if s.flag not in known]
            found = [s for s in found if not _passed_by_key(s, helped, source)]
        configured, said = hydra_settings(source, script, argv)
        filed, said_too = config_file_settings(argv, cwd)
        configured += filed
        found = [s for s in found if not _passed_by_key(s, configured, source)] + configured
        notes += said + said_too
        if "DataLoader" in source:
            kind = "pytorch"
            notes.append(f"{script.name} builds a PyTorch DataLoader: its loader arguments are the tunables")
    else:
        if help_text is None and shutil.which(argv[0]) is None and not (cwd / argv[0]).is_file():
            raise DraftError(f"{argv[0]}: no such program (not a file, not on PATH)")
        text = help_text if help_text is not None else run_help(argv, cwd, help_timeout_s, help_scratch)
        if not text.strip():
            notes.append(f"{argv[0]} printed no --help: no settings found; add knobs by hand")
        helped = help_settings(text, Path(argv[0]).name, rules)
        found, said = config_file_settings(argv, cwd)
        notes += said
        if re.search(r"\bior\b|IOR", Path(argv[0]).name + text[:400]):
            kind = "ior"
    for s in [*found, *(h for h in helped if h.values)]:
        given = _option(argv, s.flag) if s.flag else None
        if given is not None and not given.startswith("-") and "{" not in given:
            s.default = _number(given) if _number(given) is not None else given
            if any(s is h for h in helped):
                classify(s, rules)
    return [*(classify(s, rules) for s in found), *helped], kind, notes, source


def hydra_config(source: str, script: Path) -> Path | None:
    """The primary configuration of a Hydra application (interfaces.toml ``[hydra]``: its
    decorator's config_path and config_name), or None when the script is not one or the file is
    not there."""
    h = interfaces().hydra
    if f"import {h.module}\n" not in python_imports(source):
        return None
    try:
        tree = parse_python(source, script.name)
    except DraftError:
        return None
    for node in ast.walk(tree):
        if not isinstance(node, ast.FunctionDef | ast.AsyncFunctionDef):
            continue
        for deco in node.decorator_list:
            if not (isinstance(deco, ast.Call) and _call_name(deco) == h.decorator):
                continue
            kw = {k.arg: k.value for k in deco.keywords if k.arg}
            where, name = kw.get(h.path_keyword), kw.get(h.name_keyword)
            if not (isinstance(where, ast.Constant) and isinstance(name, ast.Constant)):
                continue
            if not (isinstance(where.value, str) and isinstance(name.value, str)):
                continue
            stem = name.value if name.value.endswith(tuple(h.suffixes)) else name.value + h.suffixes[0]
            path = (script.parent / where.value / stem).resolve()
            return path if path.is_file() else None
    return None


def hydra_settings(source: str, script: Path, argv: list[str]) -> tuple[list[Setting], list[str]]:
    """The keys of a Hydra application's primary configuration as settings passed by
    ``++key=value`` overrides (Hydra's own syntax, so no source change), the command's own
    overrides as their defaults; and notes for the reader."""
    path = hydra_config(source, script)
    if path is None:
        return [], []
    try:  # bounded: size, aliases, settings
        tree = read_tree(path)
    except ConfigFileError as exc:
        return [], [f"{exc}: not read as a Hydra configuration"]
    given = _hydra_overrides(argv)
    rel = path.relative_to(script.parent.resolve()) if path.is_relative_to(script.parent.resolve()) else path
    out = []
    h = interfaces().hydra
    for key, value in flatten({k: v for k, v in tree.items() if k not in h.own_keys}, where=path).items():
        if isinstance(value, list) or (value is None and key not in given) or "{" in given.get(key, ""):
            continue  # a list, an unset key, or one the command fills with a placeholder (the data)
        default = given.get(key, value)
        number = _number(str(default)) if key in given else None
        out.append(
            Setting(
                name=key,
                source=str(rel),
                default=number if number is not None else default,
                flag=f"{h.override}{key}",
            )
        )
    notes = [f"{script.name} is a Hydra application: the keys of {rel} are passed as ++key=value"]
    return out, notes


def config_files_named(argv: list[str], cwd: Path) -> list[str]:
    """The configuration files the command passes its program (interfaces.toml
    ``[config_files]``: ``--config conf.yaml``, ``-c=conf.toml``), as the command names them."""
    option = re.compile(interfaces().config_files.options)
    out: list[str] = []
    for i, a in enumerate(argv[_program_end(argv) :], start=_program_end(argv)):
        flag, eq, value = a.partition("=")
        if eq and flag.startswith("-") and option.fullmatch(flag):
            named = value
        elif i > 0 and option.fullmatch(argv[i - 1]):
            named = a
        else:
            continue
        path = Path(named) if Path(named).is_absolute() else cwd / named
        if "{" not in named and config_format(named) and path.is_file() and named not in out:
            out.append(named)
    return out


def config_file_settings(argv: list[str], cwd: Path) -> tuple[list[Setting], list[str]]:
    """The keys of each configuration file the command names, as settings a config knob sets
    (a copy of the file with the value, tools/runner/config_files.py); notes for the reader."""
    out: list[Setting] = []
    notes: list[str] = []
    for named in config_files_named(argv, cwd):
        path = Path(named) if Path(named).is_absolute() else cwd / named
        try:
            flat = flatten(read_tree(path), where=named)
        except ConfigFileError as exc:
            notes.append(f"{exc}: its settings are not drafted")
            continue
        for key, value in flat.items():
            if isinstance(value, list | dict) or value is None:
                continue
            out.append(Setting(name=key, source=named, default=value, flag=key, config=named))
        notes.append(f"the settings in {named} are passed as a copy of it with the knobs' values")
    return out, notes


def _passed_by_key(s: Setting, configured: list[Setting], source: str) -> bool:
    """Whether a call's argument is read from one of the configuration's keys
    (``num_workers=cfg.loader.num_workers``), or is the parameter a click or typer option fills
    (``max_workers=threads`` for ``--threads``): that key or option is then the lever, not a
    listing."""
    keyword = s.call.partition(":")[0]
    if not keyword or s.flag:
        return False
    given = re.escape(keyword) + r"\s*=\s*"
    return any(
        re.search(
            rf"\b{given}(?:[A-Za-z_]\w*\.{re.escape(c.name)}|{re.escape(c.name.replace('-', '_'))})\b", source
        )
        or (c.config and re.search(rf"\b{given}[\w.\[\]'\"]*{_read_key(c.name.split('.')[-1])}", source))
        for c in configured
        if c.flag
    )


def _read_key(key: str) -> str:
    """A pattern for reading ``key`` from a loaded configuration: ``cfg["loader"]["key"]``,
    ``section.get("key", 0)`` or ``cfg.loader.key``."""
    k = re.escape(key)
    return rf"(?:\[\s*[\"']{k}[\"']\s*\]|\.get\(\s*[\"']{k}[\"']|\.{k}\b)"


#: ``{data_dir}`` as users write it: ``{DATA_DIR}``, ``{ data_dir }``, ``${data_dir}``
_DATA_PLACEHOLDER = re.compile(r"\$?\{\s*data_dir\s*\}", re.IGNORECASE)
#: an option that names the data folder (its value, an existing folder, becomes ``data_dir``)
_DATA_OPTION = re.compile(r"^--?[\w-]*(data|dataset|input|root|folder|dir)[\w-]*$", re.IGNORECASE)
#: a Hydra override that names it (``data.root=/scratch/set``, ``++dataset.dir=set``)
_DATA_KEY = re.compile(r"^\+{0,2}[\w.]*(data|dataset|input|root|folder|dir)[\w.]*$", re.IGNORECASE)


def data_folder(argv: list[str], cwd: Path, data_dir: Path | None = None) -> tuple[list[str], str | None]:
    """The command with its data folder as ``{data_dir}``, and the folder to put in the spec.

    The folder is ``data_dir`` when given, else an existing folder the command passes to a data
    option (``--data /scratch/set``, ``--data-dir=set``); a placeholder written in another form
    is normalized.  None: the command names no folder (the spec's default, an empty one under the
    run's workdir, is then what a setup must fill)."""
    out = [_DATA_PLACEHOLDER.sub("{data_dir}", a) for a in argv]
    folder = data_dir.resolve() if data_dir is not None else None
    for i, a in enumerate(out):
        flag, eq, value = a.partition("=")
        own = flag.lstrip("+").split(".")[0] in interfaces().hydra.own_keys  # hydra.run.dir is Hydra's
        if eq and (_DATA_OPTION.match(flag) or (_DATA_KEY.match(flag) and not own)):
            head = f"{flag}="
        elif i > 0 and _DATA_OPTION.match(out[i - 1]) and not a.startswith("-"):
            head, value = "", a
        else:
            continue
        if "{" in value:
            continue
        path = Path(value) if Path(value).is_absolute() else cwd / value
        if folder is None and path.is_dir():
            folder = path.resolve()
        if folder is not None and path.is_dir() and path.resolve() == folder:
            out[i] = head + "{data_dir}"
    return out, str(folder) if folder is not None else None


def spec_name(text: str) -> str:
    """A valid spec name from a program's or a workload's name (what a spec's ``name`` allows)."""
    return re.sub(r"[^A-Za-z0-9_.-]+", "-", text).strip("-.")[:64] or "workload"


def draft_spec(
    argv: list[str], cwd: Path, *, help_text: str | None = None, data_dir: Path | None = None
) -> Draft:
    """Classify the settings of ``argv``'s program and draft a workload spec for it.

    ``help_text``: the program's ``--help`` already captured (tests, or a program that must not
    be started); else it is run for programs that are neither DLIO nor a Python script.
    ``data_dir``: the folder holding the program's data (else found in the command).
    """
    if not argv:
        raise DraftError("spec init needs a command after --")
    rules = load_rules()
    if _is_dlio(argv):
        return draft_dlio(argv, cwd, rules)
    given = list(argv)
    argv, folder = data_folder(argv, cwd, data_dir)
    name = spec_name(Path(_script(argv, cwd) or argv[0]).stem)
    script = _script(argv, cwd)
    settings, kind, notes, source = program_settings(argv, cwd, rules, help_text=help_text)
    metric = printed_metric(source) if script is not None else None
    setup = _setup_command(argv, settings)
    if folder is not None and setup is not None:  # never let a data generator write into their data
        notes.append(f"the data is in {folder}: the program's own data generation is not run")
        setup = None
    head = ["{python}"] if is_python(argv[0]) and script is not None else argv[:1]
    command = with_knobs([*head, *argv[1:]], settings)
    if folder is None and setup is None and any("{data_dir}" in a for a in command):
        notes.append(
            "the command reads {data_dir} but nothing fills it: set data_dir to the folder holding "
            "the data (spec init --data-dir DIR) or a setup that writes it"
        )
    return Draft(
        name=name,
        kind=kind,
        command=command,
        settings=settings,
        notes=notes,
        source=given,
        metric=metric,
        setup=setup,
        data_dir=folder,
    )


_SETUP_FLAG = re.compile(
    r"^(setup_only|generate(_data)?(_only)?|prepare(_only)?|make_data|create_data|write_data)$"
)


def _setup_command(argv: list[str], settings: list[Setting]) -> list[str] | None:
    """The program's own data-preparation run (an option like ``--setup-only``): the spec's setup.

    The setup runs once per experiment, so replicates reuse the data set it writes instead of
    generating it again (the start-up a program with a data phase would otherwise pay every run).
    """
    for s in settings:
        if _SETUP_FLAG.match(_unified(s.name)) and s.flag and isinstance(s.default, bool):
            s.role, s.why = (
                "workload",
                "the program's data-generation phase: dftune runs it once as the setup",
            )
            head = ["{python}"] if is_python(argv[0]) else argv[:1]
            return [*head, *argv[1:], s.flag]
    return None


_PRINTED = re.compile(r"""print\(\s*f?["']([A-Za-z_]*(?:time|throughput|seconds|_s)\b[A-Za-z_]*)([ =:]+)\{""")


def printed_metric(source: str) -> tuple[str, bool] | None:
    """The program's own timing line (``print(f"train_time_s {t}")``) as a metric regex.

    A time is better lower, a throughput higher; the program's own number excludes its start-up
    (imports, worker launch), which wall time would count.
    """
    found = list(_PRINTED.finditer(source))
    if not found:
        return None
    # a total the program reports (io_time_s = write + read) rather than one of its parts
    total = [m for m in found if re.search(r"total|io_time|train|elapsed|epoch|run", m.group(1))]
    m = (total or found)[-1]
    name, sep = m.group(1), m.group(2)
    return f"{re.escape(name)}{sep}([0-9.eE+-]+)", "throughput" not in name


def with_knobs(argv: list[str], settings: list[Setting]) -> list[str]:
    """The command with each tunable option's value replaced by its knob placeholder (or appended)."""
    out = list(argv)
    flags: set[str] = set()
    for s in settings:
        if s.role != "tunable" or not s.flag or not s.values or s.config:
            continue  # a config key is set in a copy of its file, not on the command line
        if s.flag in flags:  # two settings read from one option: the first is its knob
            s.values, s.why = [], f"{s.why} (passed by {s.flag}, already a knob)"
            continue
        flags.add(s.flag)
        ph = "{" + s.knob_name + "}"
        # a Hydra key the command overrides already (key=, +key= or ++key=): that override is the knob
        forms = (s.flag + "=", *((s.flag[2:] + "=", s.flag[1:] + "=") if s.flag.startswith("++") else ()))
        for i, a in enumerate(out):
            if a == s.flag and i + 1 < len(out):
                out[i + 1] = ph
                break
            if a.startswith(forms):
                out[i] = f"{s.flag}={ph}"
                break
        else:
            out += [s.flag, ph] if not s.flag.startswith("++") else [f"{s.flag}={ph}"]
    return out


def _comments(table: Any, lines: list[str]) -> None:
    """Comment lines; a newline or another control character in them (a script named with one, an
    argument holding ESC) is shown escaped, never able to end the comment."""
    for line in lines:
        table.add(tomlkit.comment(_CONTROL.sub(lambda m: repr(m.group())[1:-1], line)))


#: characters a TOML comment cannot hold (control characters but the tab)
_CONTROL = re.compile(r"[\x00-\x08\x0a-\x1f\x7f]")


def render_toml(draft: Draft) -> str:
    """The draft as a workload spec (written by tomlkit, so any value is valid TOML) with comments
    that say why each setting is in or out."""
    doc = tomlkit.document()
    _comments(doc, [f"Drafted by `dftune spec init` from: {shlex.join(draft.source or draft.command)}"[:400]])
    _comments(doc, draft.notes)
    doc["name"] = draft.name
    doc["command"] = draft.command
    if draft.setup:
        doc["setup"] = draft.setup
    if draft.data_dir:
        doc["data_dir"] = draft.data_dir
    doc["replicates"] = 5
    doc["timeout_s"] = 600
    metric = tomlkit.table()
    if draft.benchmark_metric:
        _comments(metric, draft.benchmark_metric_why)
        metric.update(draft.benchmark_metric)
    elif draft.metric:
        _comments(
            metric, ["the program prints its own time: start-up (imports, workers) stays out of the metric"]
        )
        metric["kind"] = "stdout_regex"
        metric["pattern"] = tomlkit.string(draft.metric[0], literal="'" not in draft.metric[0])
        metric["lower_is_better"] = draft.metric[1]
    else:
        metric["kind"] = "wall_time"
    doc["metric"] = metric
    tracing = tomlkit.table()
    tracing["mode"] = "preload"
    tracing["mode"].comment("a self-tracing program is switched to FUNCTION mode by dftune")
    if draft.tracing_output:
        tracing["output"] = draft.tracing_output
    if draft.workload:
        tracing.add(tomlkit.nl())
        _comments(tracing, ["Part of the workload's definition (never offered as a tunable):"])
        _comments(tracing, [f"  {s.name} = {s.default!r}: {s.why}" for s in draft.workload])
    unknown = [s for s in draft.settings if s.role == "unknown"]
    if unknown:
        tracing.add(tomlkit.nl())
        _comments(tracing, ["Not classified (add a knob by hand if it changes how the I/O is done):"])
        _comments(tracing, [f"  {s.name} = {s.default!r}" for s in unknown])
    listed = [s for s in draft.tunables if not s.values or not s.flag]
    if listed:
        tracing.add(tomlkit.nl())
        _comments(tracing, ["Levers with no option to pass them (listed for the reader only):"])
        _comments(tracing, [f"  {s.name} ({s.source}): {s.why}" for s in listed])
    if draft.foreseen:
        tracing.add(tomlkit.nl())
        _comments(tracing, ["What a run of this spec finds for itself (measured under the same guards):"])
        _comments(tracing, draft.foreseen)
    doc["tracing"] = tracing
    knobs = tomlkit.aot()
    for s in draft.tunables:
        if not s.values or not s.flag:
            continue
        knob = tomlkit.table()
        _comments(knob, [f"{s.name} ({s.source}): {s.why}"])
        knob.update({"name": s.knob_name, "kind": "config" if s.config else "arg"})
        if s.config:
            knob.update({"file": s.config, "key": s.name})
        knob.update({"values": s.values, "default": s.values[0]})
        if s.strategy:
            knob["strategy"] = s.strategy
        knobs.append(knob)
    if knobs:
        doc["knobs"] = knobs
    return tomlkit.dumps(doc)
