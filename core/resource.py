"""The one way code reads the data under resources/: a TOML file, validated by its schema, with
a bad file told in one line that names it and the entry."""

from __future__ import annotations

import functools
import tomllib
from importlib import resources
from typing import Any, TypeVar

from pydantic import BaseModel, ValidationError

from dftune.core.errors import DftuneError

M = TypeVar("M", bound=BaseModel)


class ResourceError(DftuneError):
    """A file under resources/ is not what its schema says."""


@functools.cache
def _parsed(relpath: str) -> dict[str, Any]:
    return tomllib.loads((resources.files("dftune.resources") / relpath).read_text(encoding="utf-8"))


def toml(relpath: str, error: type[DftuneError] = ResourceError) -> dict[str, Any]:
    """resources/``relpath``, parsed once (the files ship with dftune; do not change the dict)."""
    try:
        return _parsed(relpath)
    except tomllib.TOMLDecodeError as exc:
        raise error(f"resources/{relpath}: not valid TOML: {exc}") from None


def validated(name: str, data: Any, schema: type[M], error: type[DftuneError] = ResourceError) -> M:
    """``data`` as ``schema``; else ``error`` naming ``name`` and the first entry that is wrong."""
    try:
        return schema.model_validate(data)
    except ValidationError as exc:
        first = exc.errors()[0]
        where = ".".join(str(x) for x in first["loc"])
        raise error(f"{name}: {where}: {first['msg']}") from None


def load(relpath: str, schema: type[M], error: type[DftuneError] = ResourceError) -> M:
    """resources/``relpath`` validated by ``schema``."""
    return validated(f"resources/{relpath}", toml(relpath, error), schema, error)
