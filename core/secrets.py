"""Credentials in the environment: which variables hold them, the environment a workload gets, redaction.

dftune itself may need an API key (the chat model, remote embeddings); the programs it tunes
never do unless the spec says so. A workload that prints its environment would otherwise put
the key into its logs under DFTUNE_HOME, into reports, and into whatever the program uploads.
"""

from __future__ import annotations

import os
import re
from collections.abc import Iterable, Mapping

#: names that hold credentials: *_API_KEY, *_KEY, *_TOKEN, *SECRET*, *PASSWORD*, *CREDENTIAL*,
#: *_PWD (MYSQL_PWD; PWD and OLDPWD are folders), *_JWT (CI_JOB_JWT), *_DSN (SENTRY_DSN: a URL
#: with its key), ... (TOKENIZERS_PARALLELISM and the like are not tokens: the word must stand
#: alone between underscores)
_SECRET_NAME = re.compile(
    r"API_?KEY|(^|_)(ACCESS_)?KEY(S)?($|_)|(^|_)TOKENS?($|_)|SECRET|PASSWORD|PASSWD|CREDENTIAL|(^|_)AUTH($|_)"
    r"|(^|_)COOKIE($|_)|(^|_)PAT($|_)|_PWD$|(^|_)JWT($|_)|(^|_)DSN($|_)",
    re.IGNORECASE,
)
#: a URL carrying credentials in its user part: a password (``https://user:pass@host``: proxies,
#: database URLs) or a token alone (``https://TOKEN@github.com/...``, a Sentry DSN's key)
_URL_PASSWORD = re.compile(r"[a-z][a-z0-9+.-]*://[^/\s@]+@", re.IGNORECASE)
#: shorter values are not redacted from text (they would match everywhere)
_MIN_REDACT = 6


def is_secret(name: str, value: str = "") -> bool:
    """Does this variable hold a credential (by its name, or a password inside a URL value)?"""
    return bool(_SECRET_NAME.search(name) or _URL_PASSWORD.search(value))


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
