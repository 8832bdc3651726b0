"""Configuration files as knobs: a setting the program reads from the file its command names
(``train.py --config conf/train.yaml`` with ``loader: {num_workers: 0}``).

Each call that runs the program writes a copy of the file with the knobs' values set
(``<workdir>/dftune-config/<name>``) and passes the copy where the command names the original,
so the original is never touched and every arm, the baseline included, reads a copy dftune
wrote (resources/facts/paths.toml classes it as the arm's configuration, not data). YAML, TOML
and JSON are read with the standard parsers, bounded in size, in the number of keys and in the
number of values once YAML aliases are expanded (an alias bomb is refused, not expanded).
"""

from __future__ import annotations

import copy
import functools
import json
import tomllib
from collections.abc import Iterator, Mapping
from pathlib import Path
from typing import Any, Literal

import tomlkit
from pydantic import Field

from dftune.core import resource
from dftune.core.errors import DftuneError
from dftune.core.fsio import atomic_write_bytes
from dftune.core.model import StrictModel

#: the folder under a call's workdir that holds the copies it passes
CONFIG_FOLDER = "dftune-config"


class ConfigFileInterface(StrictModel):
    """resources/drafting/interfaces.toml ``[config_files]``."""

    #: a pattern over an option's name (``--config``, ``-c``) whose value is a configuration file
    options: str
    #: the suffixes of each format read (yaml, toml, json)
    formats: dict[Literal["yaml", "toml", "json"], list[str]]
    source: str = Field(min_length=1)


@functools.cache
def config_interface() -> ConfigFileInterface:
    data = resource.toml("drafting/interfaces.toml").get("config_files", {})
    return resource.validated("drafting/interfaces.toml [config_files]", data, ConfigFileInterface)


#: the most of a configuration file read (a hand-written one is a few KiB)
MAX_BYTES = 1 << 20
#: the most keys walked in one (an alias bomb names billions through a few anchors)
MAX_KEYS = 20_000


class ConfigFileError(DftuneError, ValueError):
    """A configuration file cannot be read or written as a knob needs: one line naming it."""


#: the most aliases (``*name``) one YAML file may use: a hand-written config uses a few; an alias
#: bomb uses a few dozen nested ones, and merge keys (``<<: *a``) copy what they name at load time
MAX_ALIASES = 1000
#: the most values (mappings, lists, list items and scalars, each counted wherever an alias repeats
#: it) a file may hold once expanded. The parser shares what an alias names, so a bomb of nine anchors
#: and eighty aliases loads as a few dozen objects, but a copy or any full walk of it meets a billion
#: list items (neither the alias count nor the key count, which skips lists, bounds that). A
#: hand-written configuration holds hundreds of values; a copy of this many is written in seconds.
MAX_VALUES = 100_000
#: the deepest nesting of mappings and lists: a hand-written file nests a few levels, and the copy
#: and its YAML writer recurse once per level
MAX_DEPTH = 100


def load_yaml(text: str, where: Path | str) -> Any:
    """YAML as ``yaml.safe_load`` reads it, as plain dicts and lists (each alias a copy), refused past
    :data:`MAX_ALIASES` aliases (before any is expanded), past :data:`MAX_VALUES` values as they are
    expanded and past :data:`MAX_KEYS` settings."""
    import yaml

    class Bounded(yaml.SafeLoader):
        aliases = 0

        def compose_node(self, parent: Any, index: Any) -> Any:
            if self.check_event(yaml.AliasEvent):
                Bounded.aliases += 1
                if Bounded.aliases > MAX_ALIASES:
                    raise ConfigFileError(f"{where}: more than {MAX_ALIASES:,} YAML aliases, not read")
            return super().compose_node(parent, index)

    loader = Bounded(text)
    try:
        tree = loader.get_single_data()
    finally:
        loader.dispose()
    if isinstance(tree, Mapping):
        flatten(tree, where=where)  # the settings, bounded as they are walked
    return _plain(tree, where)  # expanded here, bounded, so nothing later meets an unbounded tree


def config_format(path: str | Path) -> str | None:
    """``yaml``, ``toml`` or ``json`` by the file's suffix, or None for another file."""
    suffix = Path(path).suffix.lower()
    return next((k for k, v in config_interface().formats.items() if suffix in v), None)


def read_tree(path: Path) -> dict[str, Any]:
    """The file's settings as nested mappings (TOML as tomlkit's document, so a copy keeps its
    layout and comments)."""
    kind = config_format(path)
    if kind is None:
        raise ConfigFileError(f"{path}: not a YAML, TOML or JSON file (by its suffix)")
    if not path.is_file():
        raise ConfigFileError(f"{path}: no such configuration file")
    try:
        with path.open("rb") as fh:
            raw = fh.read(MAX_BYTES + 1)
    except OSError as exc:
        raise ConfigFileError(f"{path}: cannot be read ({exc.strerror or exc})") from None
    if len(raw) > MAX_BYTES:
        raise ConfigFileError(f"{path}: larger than {MAX_BYTES >> 20} MiB, not a configuration file")
    text = raw.decode("utf-8", errors="replace")
    try:
        tree: Any
        if kind == "yaml":
            tree = load_yaml(text, path)
        elif kind == "toml":
            tomllib.loads(text)  # tomlkit accepts a little more than the standard; refuse that
            tree = tomlkit.parse(text)
        else:
            tree = _plain(json.loads(text), path)  # bounded in depth for the copy's deepcopy
    except ConfigFileError:
        raise
    except Exception as exc:  # each parser has its own error types (JSON's RecursionError too)
        first = str(exc).splitlines()[0] if str(exc) else type(exc).__name__
        raise ConfigFileError(f"{path}: not valid {kind.upper()}: {first[:200]}") from None
    if tree is None:
        return {}
    if not isinstance(tree, Mapping):
        raise ConfigFileError(f"{path}: a configuration file holds a mapping of settings at its top")
    flatten(tree, where=path)  # the bound on keys, before anything walks it again
    return dict(tree) if kind != "toml" else tree  # type: ignore[return-value]


def flatten(tree: Mapping[str, Any], *, where: Path | str = "", prefix: str = "") -> dict[str, Any]:
    """Every leaf setting by its dotted key (``loader.num_workers``), in the file's order; at most
    :data:`MAX_KEYS` walked."""
    out: dict[str, Any] = {}
    stack: list[tuple[str, Iterator[tuple[Any, Any]]]] = [(prefix, iter(tree.items()))]
    walked = 0
    while stack:
        head, items = stack[-1]
        item = next(items, None)
        if item is None:
            stack.pop()
            continue
        walked += 1
        if walked > MAX_KEYS:
            raise ConfigFileError(f"{where}: more than {MAX_KEYS:,} settings, not read")
        key, value = item
        if isinstance(value, Mapping):
            stack.append((f"{head}{key}.", iter(value.items())))
        else:
            out[f"{head}{key}"] = value
    return out


def with_values(tree: Mapping[str, Any], values: Mapping[str, Any]) -> Any:
    """A copy of ``tree`` with each dotted key set (a missing key is added, as Hydra's ``++``
    does); the original is not changed."""
    out = copy.deepcopy(tree)
    for key, value in values.items():
        node: Any = out
        parts = key.split(".")
        for part in parts[:-1]:
            child = node.get(part)
            if child is None:
                node[part] = child = {}
            if not isinstance(child, Mapping):
                raise ConfigFileError(f"{key}: {part} is a value in the file, not a section")
            node = child
        node[parts[-1]] = value
    return out


def dumps(tree: Any, kind: str, where: Path | str = "") -> str:
    """The file's text; refused (naming ``where``) past :data:`MAX_VALUES` values or :data:`MAX_DEPTH`
    levels, however the tree was made."""
    if kind == "yaml":
        import yaml

        return yaml.safe_dump(_plain(tree, where), sort_keys=False, default_flow_style=False)
    if kind == "toml":
        return tomlkit.dumps(tree)
    return json.dumps(_plain(tree, where), indent=2) + "\n"


def _plain(tree: Any, where: Path | str) -> Any:
    """The tree as plain dicts and lists, every value a copy of its own (what an alias names is
    expanded), counting each one as it is made: past :data:`MAX_VALUES` or :data:`MAX_DEPTH` it is
    refused before it can grow further."""
    made = 0

    def plain(node: Any, depth: int) -> Any:
        nonlocal made
        made += 1
        if made > MAX_VALUES:
            raise ConfigFileError(
                f"{where}: more than {MAX_VALUES:,} values (an alias counted as all it names), not read"
            )
        if depth > MAX_DEPTH:
            raise ConfigFileError(f"{where}: nested deeper than {MAX_DEPTH} levels, not read")
        if isinstance(node, Mapping):
            return {str(k): plain(v, depth + 1) for k, v in node.items()}
        if isinstance(node, list | tuple):
            return [plain(v, depth + 1) for v in node]
        return node

    return plain(tree, 1)


def names_file(argument: str, file: str) -> bool:
    """Whether a command's argument passes ``file`` (``conf.yaml`` or ``--config=conf.yaml``)."""
    return argument == file or argument.endswith("=" + file)


def pass_copy(argument: str, file: str, copy_path: str) -> str:
    if argument == file:
        return copy_path
    if argument.endswith("=" + file):
        return argument[: -len(file)] + copy_path
    return argument


def write_copies(files: Mapping[str, Mapping[str, Any]], *, cwd: Path, workdir: Path) -> dict[str, str]:
    """Each file (as the command names it, read relative to ``cwd``) copied with its keys set,
    under ``workdir``; the argument -> the copy's path.  Two files of one name get numbered
    copies."""
    out: dict[str, str] = {}
    folder = workdir / CONFIG_FOLDER
    names = [Path(f).name for f in files]
    for i, (file, values) in enumerate(files.items()):
        source = Path(file) if Path(file).is_absolute() else cwd / file
        kind = config_format(source) or "yaml"
        tree = with_values(read_tree(source), values)
        name = Path(file).name if names.count(Path(file).name) == 1 else f"{i}-{Path(file).name}"
        target = folder / name
        folder.mkdir(parents=True, exist_ok=True)
        atomic_write_bytes(target, dumps(tree, kind, source).encode())
        out[file] = str(target)
    return out
