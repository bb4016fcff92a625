"""Query relevance for weighted retrieval: TF-IDF keywords or a pluggable embedder.

A relevance scorer rates how well each candidate memory matches a free-text query; the weighted
retrieval strategy min-max normalises those ratings, so any monotone similarity works.

The keyword scorer is written here rather than taken from scikit-learn on purpose: a household's
corpus is a few dozen short sentences and changes every year, and refitting a vectorizer per
retrieval costs about a millisecond where this costs microseconds.
"""

from __future__ import annotations

import itertools
import math
import re
from collections import Counter
from functools import lru_cache
from typing import TYPE_CHECKING, Protocol, runtime_checkable

import numpy as np

if TYPE_CHECKING:
    from collections.abc import Callable, Sequence

    from simulation.memory.item import MemoryItem

__all__ = [
    "Embedder",
    "EmbeddingRelevance",
    "KeywordRelevance",
    "RelevanceScorer",
    "tokenize",
]

# Letters only: skill ids in decision memories ("buy_insurance") are words to a query too.
_WORD = re.compile(r"[a-z]{2,}")
# Words that appear in nearly every memory template and would only add noise.
_STOPWORDS = frozenset(
    {
        "a",
        "an",
        "and",
        "are",
        "as",
        "at",
        "be",
        "by",
        "for",
        "from",
        "had",
        "has",
        "have",
        "i",
        "in",
        "is",
        "it",
        "my",
        "of",
        "on",
        "or",
        "our",
        "the",
        "this",
        "to",
        "was",
        "were",
        "with",
        "year",
    }
)


@lru_cache(maxsize=65_536)
def tokenize(text: str) -> tuple[str, ...]:
    """Lower-case word tokens of ``text`` without stopwords or numbers (cached)."""
    return tuple(w for w in _WORD.findall(text.lower()) if w not in _STOPWORDS)


@runtime_checkable
class RelevanceScorer(Protocol):
    """Rates candidate memories against a query; higher is more relevant."""

    def scores(self, query: str, items: Sequence[MemoryItem]) -> list[float]:
        """Return one relevance value per item, in the items' order."""
        ...


class KeywordRelevance:
    """TF-IDF cosine similarity between the query and each candidate.

    Inverse document frequencies are computed over the candidate set of each retrieval (the
    household's own memories), with scikit-learn's smoothing: ``idf = ln((1 + n) / (1 + df)) + 1``.
    """

    def scores(self, query: str, items: Sequence[MemoryItem]) -> list[float]:
        """Return the TF-IDF cosine similarity of each item to ``query``."""
        q_terms = Counter(tokenize(query))
        if not q_terms or not items:
            return [0.0] * len(items)
        docs = [Counter(tokenize(item.content)) for item in items]
        df: Counter[str] = Counter()
        for doc in docs:
            df.update(doc.keys())
        n = len(docs)
        idf = {t: math.log((1 + n) / (1 + c)) + 1.0 for t, c in df.items()}
        q_weights = {t: tf * idf.get(t, math.log(1 + n) + 1.0) for t, tf in q_terms.items()}
        q_norm = math.sqrt(sum(w * w for w in q_weights.values()))
        out = []
        for doc in docs:
            if not doc:
                out.append(0.0)
                continue
            dot = sum(w * doc[t] * idf[t] for t, w in q_weights.items() if t in doc)
            if dot == 0.0:
                out.append(0.0)
                continue
            d_norm = math.sqrt(sum((tf * idf[t]) ** 2 for t, tf in doc.items()))
            out.append(dot / (q_norm * d_norm))
        return out


@runtime_checkable
class Embedder(Protocol):
    """Turns texts into dense vectors (e.g. a sentence-transformers model's ``encode``)."""

    def __call__(self, texts: Sequence[str]) -> np.ndarray:
        """Return an array of shape ``(len(texts), dim)``."""
        ...


class EmbeddingRelevance:
    """Cosine similarity of sentence embeddings, with a bounded per-text cache.

    Args:
        embedder: Any callable mapping a list of texts to a ``(n, dim)`` array, such as
            ``SentenceTransformer(...).encode``.
        cache_size: Texts whose embeddings are kept; memory contents repeat across years and
            households, so the cache saves most embedding calls.
    """

    def __init__(
        self, embedder: Embedder | Callable[[Sequence[str]], np.ndarray], cache_size: int = 65_536
    ):
        if cache_size.__class__ is not int or cache_size < 0:
            msg = f"cache_size must be a non-negative integer, got {cache_size!r}"
            raise ValueError(msg)
        self._embedder = embedder
        self._cache: dict[str, np.ndarray] = {}
        self._cache_size = cache_size

    def _vectors(self, texts: Sequence[str]) -> list[np.ndarray]:
        cache = self._cache
        missing = [t for t in dict.fromkeys(texts) if t not in cache]
        if not missing:
            return [cache[t] for t in texts]
        vectors = np.asarray(self._embedder(missing), dtype=float)
        if vectors.ndim != 2 or vectors.shape[0] != len(missing):
            msg = (
                f"embedder returned shape {vectors.shape} for {len(missing)} texts; "
                "expected (n_texts, dim)"
            )
            raise ValueError(msg)
        norms = np.linalg.norm(vectors, axis=1, keepdims=True)
        fresh = dict(zip(missing, vectors / np.where(norms == 0.0, 1.0, norms), strict=True))
        # Answered before the cache makes room: a full cache is cleared, texts of this call too.
        found = [fresh[t] if t in fresh else cache[t] for t in texts]
        if len(cache) + len(fresh) > self._cache_size:
            cache.clear()
        cache.update(itertools.islice(fresh.items(), self._cache_size))
        return found

    def scores(self, query: str, items: Sequence[MemoryItem]) -> list[float]:
        """Return the cosine similarity of each item's embedding to the query's."""
        if not items:
            return []
        vectors = self._vectors([query, *(item.content for item in items)])
        q = vectors[0]
        return [float(v @ q) for v in vectors[1:]]
