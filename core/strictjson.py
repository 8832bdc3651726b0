"""JSON that every strict parser reads: no NaN or Infinity, ever.

Why: Python's ``json.dumps`` writes ``NaN`` and ``Infinity`` by default, which are not JSON; a
client with a strict parser (JSON-RPC, ``jq``, JavaScript) then fails on a whole document
because of one number.  A non-finite number means "unknown" here, so it is written as null.
"""

from __future__ import annotations

import json
import math
from typing import Any


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


def loads(text: str) -> Any:
    """A strict parser: ``NaN``, ``Infinity`` and ``-Infinity`` are errors, as in RFC 8259."""
    return json.loads(text, parse_constant=_refuse)
