"""Okapi BM25 over the stored passages: the lexical half of the hybrid search.

Built in memory from the chromadb collection on first use (a few thousand passages take
milliseconds), so the lexical index can never disagree with what is stored.
"""

from __future__ import annotations

import math
from collections import Counter
from collections.abc import Sequence

from dftune.vectorstore.text import bigrams, tokens


class BM25:
    """BM25 with unigram and bigram terms (bigrams make "small reads" beat "small" + "reads")."""

    def __init__(self, docs: Sequence[str], *, k1: float = 1.2, b: float = 0.75) -> None:
        self.k1, self.b = k1, b
        self._tf: list[Counter[str]] = []
        df: Counter[str] = Counter()
        for d in docs:
            terms = _terms(d)
            tf = Counter(terms)
            self._tf.append(tf)
            df.update(tf.keys())
        self._len = [sum(tf.values()) for tf in self._tf]
        n = len(docs)
        self._avg = (sum(self._len) / n) if n else 0.0
        # The "plus one" idf variant: never negative, so common terms still count a little.
        self._idf = {t: math.log(1.0 + (n - f + 0.5) / (f + 0.5)) for t, f in df.items()}

    def __len__(self) -> int:
        return len(self._tf)

    def scores(self, query: str) -> list[float]:
        """One score per document, in the order the documents were given."""
        q = Counter(_terms(query))
        out = [0.0] * len(self._tf)
        if not q or not self._tf:
            return out
        k1, b, avg = self.k1, self.b, self._avg or 1.0
        for i, tf in enumerate(self._tf):
            norm = k1 * (1.0 - b + b * self._len[i] / avg)
            s = 0.0
            for term, qf in q.items():
                f = tf.get(term)
                if f:
                    s += self._idf[term] * qf * f * (k1 + 1.0) / (f + norm)
            out[i] = s
        return out


def _terms(text: str) -> list[str]:
    toks = tokens(text)
    return toks + list(bigrams(toks))
