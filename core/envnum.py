"""Numbers dftune reads from its own environment variables (``DFTUNE_*``), validated in one place.

Why: a setting read with a bare ``float()`` takes ``inf``, ``nan`` or ``1e309``; they then reach
a library that fails with a KeyError about a time unit, or a comparison that is always false
silently brings back the default. Every numeric variable goes through :func:`env_number`, so a
bad value is one line naming the variable, what it holds and the range it must be in.
"""

from __future__ import annotations

import math
import os

from dftune.core.errors import DftuneError

#: the longest wait a ``*_S`` setting may ask for: a day (anything longer is a typo, or a hang)
DAY_S = 86400.0


class SettingError(DftuneError):
    """A ``DFTUNE_*`` environment variable holds a value dftune cannot use."""


def env_float(
    name: str, default: float, *, low: float, high: float, low_open: bool = False, unit: str = ""
) -> float:
    """``$name`` as a finite number in ``[low, high]`` (``(low, high]`` when ``low_open``), or
    ``default`` when unset or blank; anything else is a :class:`SettingError`."""
    raw = _raw(name)
    if raw is None:
        return default
    of = f" of {unit}" if unit else ""
    try:
        value = float(raw)
    except ValueError:
        raise SettingError(f"{name}={raw!r}: not a number{of}") from None
    if not math.isfinite(value):
        raise SettingError(f"{name}={raw!r}: not a finite number{of}")
    if value < low or (low_open and value == low) or value > high:
        lower = f"more than {_text(low)}" if low_open else f"at least {_text(low)}"
        raise SettingError(
            f"{name}={raw!r}: must be {lower} and at most {_text(high)}{' ' + unit if unit else ''}"
        )
    return value


def env_int(name: str, default: int, *, low: int, high: int) -> int:
    """``$name`` as an integer (any base Python writes: ``0x10``) in ``[low, high]``, or ``default``
    when unset or blank; anything else is a :class:`SettingError`."""
    raw = _raw(name)
    if raw is None:
        return default
    try:
        value = int(raw, 0)
    except ValueError:
        raise SettingError(f"{name}={raw!r}: not an integer") from None
    if not low <= value <= high:
        raise SettingError(f"{name}={raw!r}: must be between {low} and {high}")
    return value


def _raw(name: str) -> str | None:
    raw = os.environ.get(name, "").strip()
    return raw or None


def _text(x: float) -> str:
    return str(int(x)) if float(x).is_integer() else repr(x)
