"""JSON that every strict parser reads: no NaN or Infinity, ever.

Why: Python's ``json.dumps`` writes ``NaN`` and ``Infinity`` by default, which are not JSON; a
client with a strict parser (JSON-RPC, ``jq``, JavaScript) then fails on a whole document
because of one number.  A non-finite number means "unknown" here, so it is written as null.

The files dftune keeps (a measurement's ``bench.json`` and ``analysis.json``, ledgers, caches)
are stricter: :func:`write_file` refuses a non-finite number where it is written, naming the file
and the key, and :func:`read_file` / :func:`read_model` turn a corrupt file, a NaN, an Infinity or
a number too large for a float into one line naming the file and what is wrong.
"""

from __future__ import annotations

import json
import math
from pathlib import Path
from typing import Any, TypeVar

from pydantic import BaseModel, ValidationError

from dftune.core.errors import DftuneError
from dftune.core.fsio import UnreadableFile, atomic_write_bytes, read_regular

M = TypeVar("M", bound=BaseModel)
#: The most of a kept JSON file read (an analysis of a large trace is a few MiB): past this, or a
#: name that is a pipe or a device, the file is refused rather than read whole
READ_FILE_BYTES = 256 << 20


def finite(doc: Any) -> Any:
    """``doc`` with every non-finite float (NaN, +-Infinity) replaced by None, recursively."""
    if isinstance(doc, float):
        return doc if math.isfinite(doc) else None
    if isinstance(doc, dict):
        return {k: finite(v) for k, v in doc.items()}
    if isinstance(doc, list | tuple):
        return [finite(v) for v in doc]
    return doc


def dumps(doc: Any, **kwargs: Any) -> str:
    """``json.dumps`` of :func:`finite` of ``doc``, refusing NaN and Infinity outright."""
    return json.dumps(finite(doc), allow_nan=False, **kwargs)


def _refuse(constant: str) -> Any:
    raise ValueError(f"not JSON: {constant}")


def loads(text: str | bytes) -> Any:
    """A strict parser: ``NaN``, ``Infinity``, ``-Infinity`` and a number too large for a float
    (``1e999``, which Python reads as infinity) are errors (ValueError)."""
    return json.loads(text, parse_constant=_refuse, parse_float=_number)


# --------------------------------------------------------------------------- files


class JSONFileError(DftuneError, ValueError):
    """A JSON file dftune keeps cannot be written or read back as JSON; names the file and why."""


def _non_finite(doc: Any, where: str = "") -> tuple[str, float] | None:
    """(key path, value) of the first non-finite float in ``doc``, None when there is none."""
    if isinstance(doc, float):
        return None if math.isfinite(doc) else (where or "(the document)", doc)
    if isinstance(doc, dict):
        items: Any = ((f"{where}.{k}" if where else str(k), v) for k, v in doc.items())
    elif isinstance(doc, list | tuple):
        items = ((f"{where}[{i}]", v) for i, v in enumerate(doc))
    else:
        return None
    for key, value in items:
        found = _non_finite(value, key)
        if found is not None:
            return found
    return None


def dumps_checked(doc: Any, where: str | Path, **kwargs: Any) -> str:
    """``json.dumps`` that refuses a non-finite number, naming ``where`` (the file) and its key:
    a NaN in a file dftune keeps is a fault to see where it is made, not a null to read later."""
    try:
        return json.dumps(doc, allow_nan=False, **kwargs)
    except ValueError:
        found = _non_finite(doc)
        if found is None:
            raise
        key, value = found
        raise JSONFileError(
            f"cannot write {where}: {key} is {value!r}, not a finite number (JSON has no NaN or Infinity)"
        ) from None


def write_file(path: Path, doc: Any, **kwargs: Any) -> None:
    """Write ``doc`` to ``path`` as strict JSON, atomically: nothing is written when it has a NaN."""
    atomic_write_bytes(path, dumps_checked(doc, path, **kwargs).encode("utf-8"))


def _number(text: str) -> float:
    value = float(text)
    if not math.isfinite(value):
        raise ValueError(f"{text} overflows a 64-bit float")
    return value


def _constant(name: str) -> Any:
    raise ValueError(f"{name} is not JSON (no NaN or Infinity)")


def parse_file_text(data: bytes, path: str | Path) -> Any:
    """Strictly parsed JSON of a file's bytes; any fault is one :class:`JSONFileError` naming the file."""
    try:
        text = data.decode("utf-8")
    except UnicodeDecodeError as exc:
        raise JSONFileError(f"{path}: not UTF-8 text (byte {exc.start})") from None
    try:
        return json.loads(text, parse_constant=_constant, parse_float=_number)
    except json.JSONDecodeError as exc:
        raise JSONFileError(
            f"{path}: not valid JSON: {exc.msg} (line {exc.lineno}, column {exc.colno})"
        ) from None
    except RecursionError:
        raise JSONFileError(f"{path}: not valid JSON: nested too deeply") from None
    except ValueError as exc:
        raise JSONFileError(f"{path}: {exc}") from None


def read_file(path: str | Path) -> Any:
    """The JSON document in ``path``, strictly: corrupt text, NaN, Infinity or a number too large
    for a float, or a name that is not a regular file of at most :data:`READ_FILE_BYTES`, is one
    :class:`JSONFileError` naming the file and what is wrong."""
    try:
        data = read_regular(path, READ_FILE_BYTES, "JSON file")
    except OSError as exc:
        raise JSONFileError(f"{path}: cannot read: {exc.strerror or exc}") from None
    except UnreadableFile as exc:
        raise JSONFileError(str(exc)) from None
    return parse_file_text(data, path)


def read_model(path: str | Path, model: type[M]) -> M:
    """:func:`read_file` validated as ``model``; a field that does not fit names the file and the field."""
    doc = read_file(path)
    try:
        return model.model_validate(doc)
    except ValidationError as exc:
        first = exc.errors()[0]
        where = ".".join(str(p) for p in first["loc"]) or "(the document)"
        raise JSONFileError(
            f"{path}: not a {model.__name__} document: {where}: {first['msg']} "
            f"({exc.error_count()} error{'s' if exc.error_count() != 1 else ''})"
        ) from None
