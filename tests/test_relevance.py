"""KeywordIndex rates many households' candidates as KeywordRelevance rates each household's."""

from __future__ import annotations

import math
from collections import Counter
from types import SimpleNamespace

import numpy as np
import pytest
from hypothesis import example, given, settings
from hypothesis import strategies as st

from simulation.memory.relevance import KeywordIndex, KeywordRelevance, tokenize

# Texts sharing words in several numbers and orders, with repeats, stopwords only and nothing.
TEXTS = [
    "Year 3: A flood caused $12,000 damage to my house",
    "Year 4: A flood caused $900 damage to my house",
    "Year 5: No flood",
    "Year 5: flood flood flood",
    "Year 6: I chose buy_insurance",
    "Year 7: Insurance paid my claim for the damage",
    "Year 8: The government raised the elevation subsidy",
    "Year 9: it was the year",
    "",
    "Damage, damage and more damage; insurance claims denied",
    "claim claim insurance insurance insurance insurance insurance flood flood river",
    "river river river river river river river: flood insurance pays",
]
QUERIES = [
    "flood damage insurance",
    "Flood flood damage",
    "hurricane",  # a word of no text
    "insurance hurricane claim",
    "the year",  # stopwords only
    "buy_insurance",
    "river insurance insurance flood claim",
    "River, river, river: insurance insurance insurance claim",  # thrice: not a power of 2
]

households = st.lists(
    st.lists(st.integers(min_value=0, max_value=len(TEXTS) - 1), min_size=1, max_size=40),
    min_size=1,
    max_size=6,
)


def _flat(candidates: list[list[int]]):
    texts = np.array([code for held in candidates for code in held], dtype=np.int64)
    owner = np.repeat(np.arange(len(candidates)), [len(held) for held in candidates])
    counts = np.array([len(held) for held in candidates], dtype=np.int64)
    return texts, owner, counts


def _expected(query: str, candidates: list[list[int]], table: list[str]) -> list[float]:
    scorer = KeywordRelevance()
    return [
        value
        for held in candidates
        for value in scorer.scores(query, [SimpleNamespace(content=table[c]) for c in held])
    ]


def _textbook(query: str, texts: list[str]) -> list[float]:
    """TF-IDF cosine similarity document by document, as the docstring defines it."""
    q_terms = Counter(tokenize(query))
    if not q_terms:
        return [0.0] * len(texts)
    docs = [Counter(tokenize(text)) for text in texts]
    n = len(docs)
    df = Counter(term for doc in docs for term in doc)
    idf = {t: math.log((1 + n) / (1 + c)) + 1.0 for t, c in df.items()}
    q_weights = {t: tf * idf.get(t, math.log(1 + n) + 1.0) for t, tf in q_terms.items()}
    q_norm = math.sqrt(sum(w * w for w in q_weights.values()))
    out = []
    for doc in docs:
        dot = sum(w * doc[t] * idf[t] for t, w in q_weights.items() if t in doc)
        d_norm = math.sqrt(sum((tf * idf[t]) * (tf * idf[t]) for t, tf in doc.items()))
        out.append(dot / (q_norm * d_norm) if dot else 0.0)
    return out


@settings(max_examples=200)
@given(st.lists(st.sampled_from(TEXTS), max_size=30), st.sampled_from(QUERIES))
def test_keyword_relevance_is_the_textbook_similarity(texts, query):
    """Scoring each distinct document once gives every document its own value, exactly."""
    items = [SimpleNamespace(content=text) for text in texts]
    assert KeywordRelevance().scores(query, items) == _textbook(query, texts)
    assert KeywordRelevance().scores(query, items[:1]) == _textbook(query, texts[:1])


@settings(max_examples=200)
@given(households, st.sampled_from(QUERIES), st.permutations(TEXTS))
# Words asked for three times, in texts that hold them 5 and 7 times: where (w * tf) * idf and
# w * (tf * idf) differ.
@example([[8, 1, 6, 10]], QUERIES[-1], TEXTS)
def test_index_scores_as_the_object_scorer_to_the_bit(candidates, query, table):
    """Each candidate's value is the object scorer's for its household's candidates, exactly."""
    index = KeywordIndex()
    index.update(table)
    texts, owner, counts = _flat(candidates)
    got = index.scores(query, texts, owner, counts)
    assert got.tolist() == _expected(query, candidates, table)


# Words and what lies between them: capitals, digits, punctuation, line breaks, one-letter
# words, stopwords, letters outside ASCII (a capital I with a dot, a Kelvin sign that lowers
# to an ASCII k, an e with an accent inside a word).
pieces = st.sampled_from(
    [
        "flood",
        "FLOODS",
        "Flood-damage",
        "insurance",
        "claim",
        "the",
        "a",
        "x",
        " ",
        "  ",
        ", ",
        "$12,000",
        "7",
        "\n",
        "\u0130nsurance",
        "\u212alaim",
        "dam\u00e9ge",
        "river",
    ]
)
texts_of_pieces = st.lists(st.lists(pieces, max_size=8).map("".join), min_size=1, max_size=12)


@settings(max_examples=200)
@given(texts_of_pieces, texts_of_pieces, st.sampled_from([*QUERIES, "claim flood damage klaim"]))
@example(["x flood", "flood"], ["Flood\n7", "\u212alaim flood"], "flood klaim")
def test_index_tokenizes_any_text_as_the_object_scorer(first, later, query):
    """Texts indexed in batches (ASCII or not, with line breaks or not) have their own tokens."""
    index = KeywordIndex()
    index.update(first)
    table = [*first, *later]
    index.update(table)
    candidates = [list(range(len(table)))]
    texts, owner, counts = _flat(candidates)
    assert index.scores(query, texts, owner, counts).tolist() == _expected(query, candidates, table)


def test_index_reads_texts_added_later_and_follows_a_table_that_drops_some():
    index = KeywordIndex()
    table = TEXTS[:3]
    index.update(table)
    assert index.vocabulary_size == 5  # flood, caused, damage, house, no
    table = [*TEXTS[:3], *TEXTS[3:7]]
    index.update(table)
    candidates = [[0, 3, 5], [6, 2]]
    texts, owner, counts = _flat(candidates)
    assert index.scores("insurance claim", texts, owner, counts).tolist() == _expected(
        "insurance claim", candidates, table
    )
    used = np.array([i % 2 == 1 for i in range(len(table))])
    index.keep(used)
    kept = [text for text, keep in zip(table, used, strict=True) if keep]
    candidates = [[0, 1, 2], [2]]
    texts, owner, counts = _flat(candidates)
    assert index.scores("flood", texts, owner, counts).tolist() == _expected(
        "flood", candidates, kept
    )


def test_a_query_of_no_terms_rates_every_candidate_zero():
    index = KeywordIndex()
    index.update(TEXTS)
    texts, owner, counts = _flat([[0, 1], [2]])
    assert index.scores("the year, and a", texts, owner, counts).tolist() == [0.0, 0.0, 0.0]
    assert index.scores("flood", texts[:0], owner[:0], counts).tolist() == []


# The default config's flood templates: "damage" is a word of the flood that did none only.
DEFAULT_FLOODS = [
    "Year 3: A major flood caused $60,000 in damages",
    "Year 5: A minor flood caused $4,000 in damages",
    "Year 6: A flood occurred but caused no damage to my property",
    "Year 7: I purchased flood insurance (premium: $1,200)",
]


@pytest.mark.parametrize(
    ("query", "text"),
    [
        ("damage", DEFAULT_FLOODS[0]),
        ("damaged", DEFAULT_FLOODS[1]),
        ("insured", DEFAULT_FLOODS[3]),
        ("flooding", DEFAULT_FLOODS[2]),
        ("purchase", DEFAULT_FLOODS[3]),
    ],
)
def test_a_query_word_matches_its_other_inflections(query, text):
    """A researcher's query word finds a memory that words it otherwise, on both engines."""
    (score,) = KeywordRelevance().scores(query, [SimpleNamespace(content=text)])
    assert score > 0.0
    index = KeywordIndex()
    index.update([text])
    assert index.scores(query, *_flat([[0]])).tolist() == [score]


def test_the_readme_query_ranks_damaging_floods_above_the_flood_without_damage():
    scores = KeywordRelevance().scores(
        "flood damage", [SimpleNamespace(content=text) for text in DEFAULT_FLOODS]
    )
    major, minor, dry, _policy = scores
    assert min(major, minor) > dry
