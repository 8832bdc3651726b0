"""Check a model's summary against what it was given: a sentence that cites anything else is dropped.

The model is told to use only the numbers it is given; this makes that true. Every number in a
sentence must be one of the given numbers (at the precision written, a share also as a
percentage), every proposal or strategy id it names must be one the run measured or knows, a
percentage next to one proposal must be that proposal's (or the overall) change, and a sentence
may not call a proposal a win that was not kept. Tables and markup are not prose and are dropped.
"""

from __future__ import annotations

import math
import re
from collections.abc import Iterable
from dataclasses import dataclass, field
from typing import Any

#: knob=value proposal ids, patch proposals, and catalog strategy ids (l1.x, l2.y, l3.z)
_ID = re.compile(
    r"(?<![\w.])(?:[A-Za-z_][A-Za-z0-9_]*=[^\s,;:()\[\]]+|patch[-:][A-Za-z0-9_.-]+|l[123]\.[a-z0-9_]+)"
)
_NUMBER = re.compile(
    r"(?<![\w.])(?P<sign>[+\-\u2212])?(?P<num>\d+(?:,\d{3})*(?:\.\d+)?)(?P<unit>\s?%|x\b|\u00d7)?"
)
_CLAIM = re.compile(
    r"\b(best|win|wins|won|winner|kept|worked|helped|improv\w*|faster|speed[- ]?ups?)\b", re.I
)
_NEGATION = re.compile(
    r"\b(not|no|never|didn't|did not|without|instead|"
    r"regress\w*|slower|worse|reverted|refused|rejected|failed)\b",
    re.I,
)
_MARKUP = re.compile(r"\||^\s*#{1,6}\s|```")
#: a percentage next to one proposal may be the run's overall change only when the sentence says so
_OVERALL = re.compile(r"\b(overall|total|in all|altogether|end[- ]to[- ]end|combined)\b", re.I)
#: bare counts in prose ("3 experiments") need no source
_SMALL_COUNT = 12


@dataclass
class Checked:
    kept: list[str] = field(default_factory=list)
    dropped: list[str] = field(default_factory=list)

    @property
    def text(self) -> str:
        return " ".join(self.kept)


def _numbers_in(value: Any) -> Iterable[float]:
    """Every number in a JSON value, including the numbers written inside its strings."""
    if isinstance(value, bool):
        return
    if isinstance(value, int | float):
        if math.isfinite(value):
            yield float(value)
            if 0.0 < abs(value) <= 1.0:
                yield 100.0 * float(value)  # a share, written as a percentage
        return
    if isinstance(value, str):
        for m in _NUMBER.finditer(value):
            x = float(m.group("num").replace(",", ""))
            yield -x if m.group("sign") in ("-", "\u2212") else x
        return
    if isinstance(value, dict):
        for v in value.values():
            yield from _numbers_in(v)
    elif isinstance(value, list | tuple):
        for v in value:
            yield from _numbers_in(v)


def _matches(written: str, signed: bool, x: float, allowed: list[float]) -> bool:
    decimals = len(written.split(".", 1)[1]) if "." in written else 0
    tol = 0.5 * 10 ** (-decimals) + 1e-9
    return any(abs((c if signed else abs(c)) - x) <= tol for c in allowed)


def _sentences(text: str) -> list[str]:
    flat = " ".join(text.split())
    return [s for s in re.split(r"(?<=[.!?])\s+", flat) if s.strip()]


def _split(text: str) -> list[str]:
    """Sentences of the prose; a line of markup (a table row, a heading, a fence) is a unit of its own."""
    out: list[str] = []
    prose: list[str] = []
    for line in text.splitlines():
        if _MARKUP.search(line):
            out += _sentences(" ".join(prose))
            prose = []
            out.append(" ".join(line.split()))
        else:
            prose.append(line)
    return out + _sentences(" ".join(prose))


def check_summary(text: str, given: dict[str, Any], *, wins: set[str]) -> Checked:
    """Keep the sentences of ``text`` whose every claim is in ``given`` (the facts and the outcome)."""
    allowed = list(_numbers_in(given))
    facts = given.get("facts") or {}
    outcome = given.get("outcome") or {}
    verdicts = {str(h.get("proposal")): h for h in facts.get("history") or []}
    known = set(verdicts) | set(wins) | {str(w.get("strategy")) for w in outcome.get("wins") or []}
    known |= set((facts.get("kb_prior_pct") or {}).keys())
    own = {p: h.get("change_pct") for p, h in verdicts.items()}
    overall = outcome.get("overall_pct")
    out = Checked()
    for sentence in _split(text):
        why = _problem(sentence, allowed, known, verdicts, own, overall, wins)
        if why:
            out.dropped.append(f"{why}: {sentence[:160]!r}")
        else:
            out.kept.append(sentence)
    return out


def _problem(
    sentence: str,
    allowed: list[float],
    known: set[str],
    verdicts: dict[str, Any],
    own: dict[str, Any],
    overall: Any,
    wins: set[str],
) -> str | None:
    if _MARKUP.search(sentence):
        return "a table or markup, not prose"
    ids = [m.group(0).rstrip(".") for m in _ID.finditer(sentence)]
    unknown = [i for i in ids if i not in known]
    if unknown:
        return f"names {', '.join(unknown)}, which this run did not measure"
    rest = _ID.sub(" ", sentence)
    percents: list[tuple[float, float]] = []  # (value, tolerance at the written precision)
    for m in _NUMBER.finditer(rest):
        num, unit, sign = m.group("num"), (m.group("unit") or "").strip(), m.group("sign")
        x = float(num.replace(",", ""))
        signed = sign is not None
        if signed and sign in ("-", "\u2212"):
            x = -x
        if not unit and not signed and "." not in num and x <= _SMALL_COUNT:
            continue
        if not _matches(num, signed, x, allowed):
            return f"cites {m.group(0).strip()}, which is not in the run's outcome"
        if unit == "%":
            decimals = len(num.split(".", 1)[1]) if "." in num else 0
            percents.append((abs(x), 0.5 * 10 ** (-decimals) + 1e-9))
    measured = [i for i in ids if i in verdicts]
    if len(measured) == 1 and percents:
        mine = own.get(measured[0])
        fits = [v for v in (mine, overall if _OVERALL.search(rest) else None) if isinstance(v, int | float)]
        if not any(abs(abs(v) - p) <= tol for v in fits for p, tol in percents):
            return f"attributes {percents[0][0]:g}% to {measured[0]}, which is not what it measured"
    claimed = [i for i in measured if i not in wins]
    if claimed and _CLAIM.search(rest) and not _NEGATION.search(rest):
        return f"calls {', '.join(claimed)} a success, but it was not kept"
    return None
