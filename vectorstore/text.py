"""Text helpers shared by the lexical index, the hashed embedding and the PDF chunker.

Tokens are lower-case words with a light suffix stemmer, so "reads", "reading" and "read"
meet; identifiers such as ``cb_buffer_size`` or ``posix_fadvise`` are kept whole *and* split
into their parts, because engineers type both.
"""

from __future__ import annotations

import itertools
import re
from collections.abc import Iterable, Iterator

_WORD = re.compile(r"[a-z0-9]+(?:[_.\-][a-z0-9]+)*")
_SENTENCE_END = re.compile(r"(?<=[.!?])\s+(?=[A-Z0-9(\[])")

#: Words too common in this domain's prose to say anything about a passage.
_STOP_TEXT = """
    a about above after again all also an and any are as at be because been before being below
    between both but by can could did do does doing down during each few for from further had
    has have having he her here hers him his how i if in into is it its itself just me more most
    my no nor not now of off on once only or other our out over own same she should so some such
    than that the their them then there these they this those through to too under until up very
    was we were what when where which while who whom why will with would you your e.g i.e via
    per one two using used use uses
"""
STOPWORDS = frozenset(_STOP_TEXT.split())

_SUFFIXES = ("ations", "ation", "ings", "ing", "ies", "ied", "es", "ed", "ly", "s")


def stem(word: str) -> str:
    """Strip one common English suffix and a final "e"; short words and numbers stay as they are."""
    if len(word) <= 3 or not word.isalpha():
        return word
    base = word
    for suf in _SUFFIXES:
        if not word.endswith(suf) or len(word) - len(suf) < 3:
            continue
        if suf == "s" and word.endswith(("ss", "us", "is")):
            break
        base = word[: -len(suf)]
        if suf in ("ies", "ied"):
            base += "y"
        elif len(base) > 3 and base[-1] == base[-2] and base[-1] not in "lsz":
            base = base[:-1]  # "stripping" -> "strip"
        break
    if len(base) >= 4 and base.endswith("e"):
        base = base[:-1]  # "cache" and "caching" meet at "cach"
    return base


def words(text: str) -> list[str]:
    """Lower-case words and identifiers of ``text``, stop words removed, not stemmed."""
    out: list[str] = []
    for m in _WORD.finditer(text.lower()):
        w = m.group(0).strip("._-")
        if not w:
            continue
        parts = re.split(r"[_.\-]", w)
        if len(parts) > 1:
            out.append(w)
            out.extend(p for p in parts if p and p not in STOPWORDS)
        elif w not in STOPWORDS:
            out.append(w)
    return out


def tokens(text: str) -> list[str]:
    """Stemmed index terms of ``text`` (what BM25 and the hashed embedding see)."""
    return [stem(w) for w in words(text)]


def bigrams(toks: list[str]) -> Iterator[str]:
    for a, b in itertools.pairwise(toks):
        yield f"{a} {b}"


def normalize_space(text: str) -> str:
    """Join hyphenated line breaks and collapse whitespace (PDF text is full of both)."""
    text = re.sub(r"(\w)-\n(\w)", r"\1\2", text)
    return re.sub(r"\s+", " ", text).strip()


def chunk(text: str, *, target: int = 900, overlap: int = 150) -> list[str]:
    """Split a page into passages of about ``target`` characters on sentence boundaries.

    Neighbouring passages share up to ``overlap`` characters so a claim that straddles a
    boundary is still found whole in one of them."""
    text = normalize_space(text)
    if not text:
        return []
    if len(text) <= target:
        return [text]
    sentences = _split_long(_SENTENCE_END.split(text), target)
    out: list[str] = []
    cur: list[str] = []
    size = 0
    for s in sentences:
        if cur and size + len(s) + 1 > target:
            out.append(" ".join(cur))
            tail: list[str] = []
            tail_size = 0
            for prev in reversed(cur):
                if tail_size + len(prev) > overlap:
                    break
                tail.insert(0, prev)
                tail_size += len(prev) + 1
            cur, size = tail, tail_size
        cur.append(s)
        size += len(s) + 1
    if cur:
        last = " ".join(cur)
        if not out or last not in out[-1]:
            out.append(last)
    return out


def _split_long(sentences: Iterable[str], target: int) -> list[str]:
    """Cut sentences longer than ``target`` (tables, reference lists) at word boundaries."""
    out: list[str] = []
    for s in sentences:
        while len(s) > target:
            cut = s.rfind(" ", 0, target)
            cut = cut if cut > target // 2 else target
            out.append(s[:cut].strip())
            s = s[cut:].strip()
        if s:
            out.append(s)
    return out
