"""Credentials in the environment: which variables hold them, the environment a workload gets, redaction.

dftune itself may need an API key (the chat model, remote embeddings); the programs it tunes
never do unless the spec says so. A workload that prints its environment would otherwise put
the key into its logs under DFTUNE_HOME, into reports, and into whatever the program uploads.
"""

from __future__ import annotations

import functools
import os
import re
from collections.abc import Iterable, Mapping

from dftune.core.facts import credential_facts

#: shorter values are not redacted from text (they would match everywhere)
_MIN_REDACT = 6


@functools.cache
def _rules() -> tuple[re.Pattern[str], re.Pattern[str] | None]:
    """The name rules and the value rules of resources/facts/credentials.toml, each as one pattern."""
    found = credential_facts()
    names = re.compile("|".join(f"(?:{r.pattern})" for r in found.name), re.IGNORECASE)
    values = "|".join(f"(?:{r.pattern})" for r in found.value)
    return names, re.compile(values, re.IGNORECASE) if values else None


def is_secret(name: str, value: str = "") -> bool:
    """Does this variable hold a credential, by its name or by its value (credentials.toml)?"""
    names, values = _rules()
    return bool(names.search(name) or (values is not None and value and values.search(value)))


def scrubbed_environ(
    env: Mapping[str, str] | None = None, *, allow: Iterable[str] = ()
) -> tuple[dict[str, str], list[str]]:
    """``env`` (default: this process's) without its credentials, except the names in ``allow``.

    Returns the environment and the names withheld (names only: never log a value)."""
    source = os.environ if env is None else env
    keep = set(allow)
    out: dict[str, str] = {}
    withheld: list[str] = []
    for name, value in source.items():
        if name not in keep and is_secret(name, value):
            withheld.append(name)
        else:
            out[name] = value
    return out, sorted(withheld)


def redact(text: str, env: Mapping[str, str] | None = None) -> str:
    """``text`` with the value of every credential variable of ``env`` replaced by ``***``."""
    source = os.environ if env is None else env
    for name, value in source.items():
        if len(value) >= _MIN_REDACT and is_secret(name, value) and value in text:
            text = text.replace(value, "***")
    return text
