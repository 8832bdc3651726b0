"""The facts layer: what dftune knows about the world, as validated data (resources/facts/).

Path classes, process roles, launchers and their per-job files, software stacks and their
signatures, container formats, tool caches, self-tracing programs, the names and values of
credentials in the environment: each an entry with a reason
and a source, loaded once through the schemas of :mod:`.models`. Code asks questions here
(:func:`dftune.core.facts.paths.classify`: what is this path, for this run?;
:func:`dftune.core.facts.stacks.detect`: which stack does this run use?) and never keeps a list
of names of its own. A new program should need a data entry, not a code patch.
"""

from __future__ import annotations

import functools
import tomllib
from importlib import resources
from typing import Any, TypeVar

from pydantic import BaseModel, ValidationError

from dftune.core import resource
from dftune.core.errors import DftuneError
from dftune.core.facts.models import (
    CredentialFacts,
    DarshanFacts,
    FilesystemFacts,
    FormatFacts,
    LauncherFacts,
    PathFacts,
    ProcessFacts,
    ProgramFacts,
    StackFacts,
)

M = TypeVar("M", bound=BaseModel)


class FactsError(DftuneError):
    """A facts file is not what its schema says: one line naming the file and the entry."""


def _load(name: str, schema: type[M]) -> M:
    return resource.load(f"facts/{name}", schema, FactsError)


@functools.cache
def path_facts() -> PathFacts:
    return _load("paths.toml", PathFacts)


@functools.cache
def launcher_facts() -> LauncherFacts:
    return _load("launchers.toml", LauncherFacts)


@functools.cache
def format_facts() -> FormatFacts:
    return _load("formats.toml", FormatFacts)


@functools.cache
def stack_facts() -> StackFacts:
    return _load("stacks.toml", StackFacts)


@functools.cache
def filesystem_facts() -> FilesystemFacts:
    return _load("filesystems.toml", FilesystemFacts)


@functools.cache
def process_facts() -> ProcessFacts:
    return _load("processes.toml", ProcessFacts)


@functools.cache
def program_facts() -> ProgramFacts:
    return _load("programs.toml", ProgramFacts)


@functools.cache
def darshan_facts() -> DarshanFacts:
    return _load("darshan.toml", DarshanFacts)


@functools.cache
def credential_facts() -> CredentialFacts:
    return _load("credentials.toml", CredentialFacts)


def all_facts() -> list[BaseModel]:
    """Every facts file, loaded (a bad one raises :class:`FactsError`)."""
    return [
        path_facts(),
        launcher_facts(),
        format_facts(),
        stack_facts(),
        filesystem_facts(),
        process_facts(),
        program_facts(),
        darshan_facts(),
        credential_facts(),
    ]
