"""KeywordIndex rates many households' candidates as KeywordRelevance rates each household's."""

from __future__ import annotations

from types import SimpleNamespace

import numpy as np
from hypothesis import example, given, settings
from hypothesis import strategies as st

from simulation.memory.relevance import KeywordIndex, KeywordRelevance

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


@settings(max_examples=200, deadline=None)
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
