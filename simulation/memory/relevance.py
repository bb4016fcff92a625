"""Query relevance for weighted retrieval: TF-IDF keywords or a pluggable embedder.

A relevance scorer rates how well each candidate memory matches a free-text query; the weighted
retrieval strategy min-max normalises those ratings, so any monotone similarity works.

The keyword scorer is written here rather than taken from scikit-learn on purpose: a household's
corpus is a few dozen short sentences and changes every year, and refitting a vectorizer per
retrieval costs about a millisecond where this costs microseconds. :class:`KeywordIndex` is the
same scorer for many households at once, over a memory pool's table of texts (the array engine).

Terms are stemmed with the Snowball English stemmer, so that a query matches the templates'
inflections: "flood damage" finds "caused $60,000 in damages", "insured" finds "insurance" and
"flooded" finds "flood". Without it the default templates' major and minor floods ("damages")
were the memories a "damage" query missed, and only "no damage" matched.
"""

from __future__ import annotations

import itertools
import math
import re
import threading
from collections import Counter
from functools import lru_cache
from typing import TYPE_CHECKING, Protocol, runtime_checkable

import numpy as np
import snowballstemmer

if TYPE_CHECKING:
    from collections.abc import Callable, Iterable, Sequence

    from numpy.typing import NDArray

    from simulation.memory.item import MemoryItem

__all__ = [
    "Embedder",
    "EmbeddingRelevance",
    "KeywordIndex",
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


_STEMMER = snowballstemmer.stemmer("english")
# A Snowball stemmer keeps the word it works on in itself, so two threads must not share a call.
_STEMMER_LOCK = threading.Lock()


@lru_cache(maxsize=65_536)
def _stem(word: str) -> str:
    """The Snowball English stem of a lower-case ``word`` ("damages", "damaged": "damag")."""
    with _STEMMER_LOCK:
        return _STEMMER.stemWord(word)


def _terms(words: Iterable[str]) -> tuple[str, ...]:
    """The stems of the ``words`` (lower case, two letters or more) that are not stopwords."""
    return tuple(_stem(w) for w in words if w not in _STOPWORDS)


def _words(text: str) -> tuple[str, ...]:
    return _terms(_WORD.findall(text.lower()))


# Every byte but the lower-case ASCII letters and the line break, as a space: a lower-cased
# ASCII text's tokens are then its words of two letters or more.
_LETTERS = bytes(c if 97 <= c <= 122 or c == 10 else 32 for c in range(256))


def _shapes(texts: Sequence[str]) -> list[bytes] | list[tuple[str, ...]]:
    """Keys that tell the texts' tokens apart, made several times faster than the tokens.

    For ASCII texts, each text's letters with every other character a space: texts alike up to
    numbers and punctuation share one, made for all texts in one pass. Otherwise (or when a text
    has a line break, which separates them here) the tokens themselves.
    """
    joined = "\n".join(texts).lower()
    if joined.isascii() and joined.count("\n") == len(texts) - 1:
        return joined.encode("ascii").translate(_LETTERS).split(b"\n")
    return [_words(text) for text in texts]


@lru_cache(maxsize=65_536)
def tokenize(text: str) -> tuple[str, ...]:
    """Stemmed lower-case word tokens of ``text`` without stopwords or numbers (cached)."""
    return _words(text)


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
        # Items of one template differ in numbers only: their tokens, and so their values, are
        # the same. Each distinct document is scored once, counted as often as it occurs.
        keys = [tokenize(item.content) for item in items]
        copies = Counter(keys)
        docs = {key: _document(key) for key in copies}
        df: Counter[str] = Counter()
        for key, times in copies.items():
            for term in docs[key]:
                df[term] += times
        n = len(items)
        idf = {t: math.log((1 + n) / (1 + c)) + 1.0 for t, c in df.items()}
        q_weights = {t: tf * idf.get(t, math.log(1 + n) + 1.0) for t, tf in q_terms.items()}
        q_norm = math.sqrt(sum(w * w for w in q_weights.values()))
        value = {}
        for key, doc in docs.items():
            dot = sum(w * doc[t] * idf[t] for t, w in q_weights.items() if t in doc)
            if dot == 0.0:  # also every document without terms
                value[key] = 0.0
                continue
            # w * w, not w ** 2: C's pow (Python's **) misses the nearest float for about one
            # value in a thousand, and KeywordIndex squares with numpy's product.
            d_norm = math.sqrt(sum(w * w for w in [tf * idf[t] for t, tf in doc.items()]))
            value[key] = dot / (q_norm * d_norm)
        return [value[key] for key in keys]


@lru_cache(maxsize=4096)
def _document(tokens: tuple[str, ...]) -> Counter[str]:
    """The term counts of a document, in the order its terms first occur (not to be changed)."""
    return Counter(tokens)


class KeywordIndex:
    """:class:`KeywordRelevance` for many households' candidates at once, over a table of texts.

    A :class:`~simulation.memory.pool.MemoryPool` keeps its texts in a table, and its items
    name them by position. The index reads each text of the table once (the new texts of a
    retrieval together, in one pass where they are ASCII: :func:`_shapes`), into its
    *signature*: its distinct terms in the order they first occur, with their counts (the texts
    of one memory template differ in numbers, which are not terms, so they share one).
    :meth:`scores` then rates every household's candidates in a few numpy calls with
    :class:`KeywordRelevance`'s arithmetic, step for step, so that the two agree to the bit:
    the logarithms come from ``math.log`` (a table by candidate count and document frequency)
    and each sum is added left to right in the object scorer's order (``np.bincount`` adds
    its weights in their order).
    """

    def __init__(self) -> None:
        self._terms: dict[str, int] = {}  # the vocabulary: term -> id
        self._signatures: dict[tuple[str, ...], int] = {}  # by a text's tokens
        self._by_shape: dict[bytes | tuple[str, ...], int] = {}  # by a text's _shapes key
        self._signature_of = np.zeros(0, dtype=np.int64)  # by text code
        # The signatures' terms and counts, one after another: signature s has entries
        # start[s] .. start[s] + length[s] - 1.
        self._start: list[int] = []
        self._length: list[int] = []
        self._term: list[int] = []
        self._count: list[float] = []
        self._arrays: tuple[np.ndarray, ...] = ()  # the four lists as arrays, once indexed
        self._idf = np.zeros((0, 0))  # idf[n, df] for df <= n

    @property
    def vocabulary_size(self) -> int:
        """How many distinct terms the indexed texts hold."""
        return len(self._terms)

    @property
    def cells_per_household(self) -> int:
        """The width of a household's rows in :meth:`scores`' tables (by term, by signature)."""
        return max(1, len(self._terms), len(self._start))

    def update(self, texts: Sequence[str]) -> None:
        """Index the texts of ``texts`` past those already indexed.

        The table may only have grown since the last call (or since :meth:`keep`).
        """
        known = len(self._signature_of)
        if known == len(texts):
            return
        by_shape = self._by_shape
        codes = []
        for shape in _shapes(texts[known:]):
            signature = by_shape.get(shape)
            if signature is None:
                if isinstance(shape, bytes):
                    tokens = _terms(w for w in shape.decode("ascii").split() if len(w) > 1)
                else:
                    tokens = shape
                signature = by_shape[shape] = self._signature(tokens)
            codes.append(signature)
        self._signature_of = np.concatenate((self._signature_of, np.array(codes, dtype=np.int64)))

    def _signature(self, tokens: tuple[str, ...]) -> int:
        """The signature of a text of these tokens, added if new."""
        signature = self._signatures.get(tokens)
        if signature is None:
            signature = self._signatures[tokens] = len(self._start)
            doc = Counter(tokens)
            terms = self._terms
            self._start.append(len(self._term))
            self._length.append(len(doc))
            self._term.extend(terms.setdefault(term, len(terms)) for term in doc)
            self._count.extend(float(count) for count in doc.values())
            self._arrays = ()
        return signature

    def keep(self, used: NDArray[np.bool_]) -> None:
        """Follow the text table as it drops the texts not ``used`` (by their old codes)."""
        self._signature_of = self._signature_of[used[: len(self._signature_of)]]

    def scores(
        self,
        query: str,
        texts: NDArray[np.integer],
        owner: NDArray[np.int64],
        counts: NDArray[np.int64],
    ) -> NDArray[np.float64]:
        """Each candidate's TF-IDF cosine similarity to ``query`` among its household's.

        Args:
            query: The query.
            texts: Each candidate's text code (indexed by :meth:`update`).
            owner: Each candidate's household, ``0 .. len(counts) - 1``.
            counts: Each household's number of candidates (its documents for the idf).

        Returns:
            What :meth:`KeywordRelevance.scores` gives each candidate, called with its
            household's candidates.
        """
        query_terms = Counter(tokenize(query))
        found = len(texts)
        if not query_terms or not found:
            return np.zeros(found)
        if not self._arrays:
            self._arrays = (
                np.array(self._start, dtype=np.int64),
                np.array(self._length, dtype=np.int64),
                np.array(self._term, dtype=np.int64),
                np.array(self._count),
            )
        start, length, term_of, count_of = self._arrays
        m, vocabulary, kinds = len(counts), len(self._terms), len(self._start)
        # A household's candidates of one signature score alike: each (household, signature)
        # pair is scored once, its candidates counted as that many documents. In a default run
        # a household's candidates have a third as many pairs.
        pair_of = owner * kinds + self._signature_of[texts]
        held = np.bincount(pair_of, minlength=m * kinds)
        pairs = np.flatnonzero(held)
        owner_of, signature = np.divmod(pairs, kinds)
        lengths = length[signature]
        # One entry per term of each pair, a signature's in the order of its text.
        pair = np.repeat(np.arange(len(pairs)), lengths)
        entry = np.arange(len(pair)) + np.repeat(
            start[signature] - (np.cumsum(lengths) - lengths), lengths
        )
        term, count = term_of[entry], count_of[entry]
        household = owner_of[pair]
        cell = household * vocabulary + term
        # How many of its household's candidates hold each term (each holds it at most once).
        frequency = np.bincount(cell, weights=held[pairs][pair], minlength=m * vocabulary)
        frequency = frequency.astype(np.int64)
        idf_of = self._idf_table(int(counts.max()))
        width = idf_of.shape[1]
        idf = idf_of.ravel()[counts[household] * width + frequency[cell]]
        weight = count * idf
        norm = np.sqrt(np.bincount(pair, weights=weight * weight, minlength=len(pairs)))
        dot = np.zeros(len(pairs))
        query_norm = np.zeros(m)  # 0.0 + w: what Python's sum starts with
        households = np.arange(m) * vocabulary
        for word, times in query_terms.items():
            term_id = self._terms.get(word)
            # A word of no text has no document; its idf is that of a frequency of 0.
            term_idf = idf_of[counts, 0 if term_id is None else frequency[households + term_id]]
            query_weight = times * term_idf
            query_norm += query_weight * query_weight
            if term_id is None:
                continue
            hit = np.flatnonzero(term == term_id)
            holder = household[hit]
            dot[pair[hit]] += query_weight[holder] * count[hit] * term_idf[holder]
        query_norm = np.sqrt(query_norm)
        similarity = np.zeros(len(pairs))
        some = np.flatnonzero(dot)  # a zero product is 0 without a norm (an empty text has 0)
        similarity[some] = dot[some] / (query_norm[owner_of[some]] * norm[some])
        place = np.zeros(len(held), dtype=np.int64)
        place[pairs] = np.arange(len(pairs))
        return similarity[place[pair_of]]

    def _idf_table(self, most: int) -> NDArray[np.float64]:
        """``ln((1 + n) / (1 + df)) + 1`` at ``[n, df]`` for ``df <= n <= most`` (``math.log``)."""
        table = self._idf
        if most < len(table):
            return table
        size = max(most + 1, 2 * len(table))
        table = np.zeros((size, size))
        for n in range(size):
            table[n, : n + 1] = [math.log((1 + n) / (1 + df)) + 1.0 for df in range(n + 1)]
        self._idf = table
        return table


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
