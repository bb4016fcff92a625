"""MemoryPool does what a CognitiveMemory per household does, operation by operation."""

from __future__ import annotations

import math
import re

import numpy as np
import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

from simulation.memory import (
    CognitiveMemory,
    EmbeddingRelevance,
    ReflectionSettings,
    RetentionSettings,
    RetrievalSettings,
    RuleBasedReflector,
)
from simulation.memory.pool import _MIN_GROWTH, POOL_STORES, MemoryPool, store_widths

HOUSEHOLDS = 4
# Few distinct importances and years, so that equal ranking keys (ties) are common.
importance = st.sampled_from([0.0, 0.2, 0.4, 0.5, 0.69, 0.7, 0.8, 0.9, 1.0])
# Years before 0 too: CognitiveMemory takes any integer year, and a pool must agree on them
# (it once took a negative rehearsal year for "never rehearsed").
year = st.integers(min_value=-6, max_value=12)
rows = st.sets(st.integers(min_value=0, max_value=HOUSEHOLDS - 1), min_size=1).map(sorted)

operation = st.one_of(
    st.tuples(st.just("write"), rows, st.lists(importance, min_size=HOUSEHOLDS), year),
    st.tuples(st.just("pinned"), rows, importance, year),
    st.tuples(st.just("consolidate"), rows),
    st.tuples(st.just("compact")),
    st.tuples(
        st.just("retrieve"),
        rows,
        st.integers(min_value=0, max_value=8),
        st.one_of(st.none(), year),
    ),
)

# The strategies a pool implements: spec, and weighted (with the recency decay its own or the
# memory's, a weight at zero, and queries: of words some texts hold, twice, or not at all, of
# stopwords only, and blank).
retrievals = st.sampled_from(
    [
        RetrievalSettings(),
        RetrievalSettings(strategy="weighted"),
        RetrievalSettings(strategy="weighted", w_recency=0.3, w_importance=2.0, recency_decay=0.8),
        RetrievalSettings(strategy="weighted", w_recency=0.0),
        RetrievalSettings(strategy="weighted", query="flood insurance"),
        RetrievalSettings(
            strategy="weighted", query="Damage, flood damage and hurricanes", w_relevance=2.5
        ),
        RetrievalSettings(strategy="weighted", query="the year", w_importance=0.0),
        RetrievalSettings(strategy="weighted", query="flood", w_relevance=0.0),
        RetrievalSettings(strategy="weighted", query="  "),
    ]
)
# What a write of each importance says: words that some of the others share, a word twice, a
# skill id, stopwords only and none at all (relevance scores them all).
_SAYS = {
    0.0: "",
    0.2: "a flood",
    0.4: "flood damage, flood damage",
    0.5: "bought flood insurance",
    0.69: "it was the year",
    0.7: "chose buy_insurance",
    0.8: "river flood damage to the house",
    0.9: "insurance claim paid",
    1.0: "no flood",
}
# The retention policies a pool implements (every one but tiered, which needs an archive).
retentions = st.sampled_from(
    [
        RetentionSettings(),
        RetentionSettings(policy="fifo"),
        RetentionSettings(policy="importance_weighted"),
        RetentionSettings(policy="importance_weighted", w_importance=0.0, w_recency=2.0),
    ]
)


def _build(
    working: int,
    episodic: int,
    threshold: float,
    decay: float,
    retrieval: RetrievalSettings | None = None,
    retention: RetentionSettings | None = None,
):
    ids = [f"H{n}" for n in range(HOUSEHOLDS)]
    settings = {
        "retrieval": retrieval or RetrievalSettings(),
        "retention": retention or RetentionSettings(),
    }
    memories = [CognitiveMemory(i, working, episodic, threshold, decay, **settings) for i in ids]
    return memories, MemoryPool(ids, working, episodic, threshold, decay, **settings)


def _held(pool: MemoryPool, row: int) -> set[int]:
    return {*pool.working(row), *pool.episodic(row)}


def _seqs(pool: MemoryPool, items) -> list[int]:
    return [pool.item(i).seq for i in items]


def _same_stores(memories: list[CognitiveMemory], pool: MemoryPool) -> None:
    for row, memory in enumerate(memories):
        assert _seqs(pool, pool.working(row)) == [i.seq for i in memory.working]
        ranked = pool._episodic[row, : pool.episodic_sizes[row]]
        assert _seqs(pool, ranked) == [i.seq for i in memory._episodic.ranked()]
        assert _seqs(pool, pool.episodic(row)) == [i.seq for i in memory.episodic]
        for item in (*memory.working, *memory.episodic):
            (index,) = [
                i for i in (*pool.working(row), *pool.episodic(row)) if pool.item(i).seq == item.seq
            ]
            assert pool.item(index) == item or _fields(pool.item(index)) == _fields(item)


def _fields(item) -> tuple:
    return (
        item.owner,
        item.seq,
        item.content,
        item.importance,
        item.year,
        item.tags,
        item.source,
        item.pinned,
        item.amount,
        item.last_access,
        item.access_count,
        item.consolidated,
    )


def _write(memories, pool, targets, importances, when):
    values = [importances[r] for r in targets]
    texts = [f"Year {when}: event {v} {_SAYS.get(v, '')}" for v in values]
    done = pool.write(targets, texts, values, when, ("flood",), source="flood", amount=5.0)
    for n, r in enumerate(targets):
        result = memories[r].write(
            texts[n], values[n], when, ("flood",), source="flood", amount=5.0
        )
        assert POOL_STORES[done.stores[n]] == result.store
        assert _fields(pool.item(done.items[n])) == _fields(result.item)
        _same_evictions(pool, done.evicted[n], result.evictions)


def _same_evictions(pool, evicted, evictions) -> None:
    got = [] if evicted < 0 else [pool.item(evicted).seq]
    assert got == [e.item.seq for e in evictions]


def _pin(memories, pool, targets, value, when, capacity):
    full = [r for r in targets if sum(i.pinned for i in memories[r].episodic) >= capacity]
    if full:
        with pytest.raises(ValueError, match="cannot pin more than"):
            pool.write(targets, "kept", value, when, pinned=True)
        for r in full:
            with pytest.raises(ValueError, match="cannot pin more than"):
                memories[r].write("kept", value, when, pinned=True)
        return
    done = pool.write(targets, "kept", value, when, pinned=True)
    for n, r in enumerate(targets):
        result = memories[r].write("kept", value, when, pinned=True)
        _same_evictions(pool, done.evicted[n], result.evictions)


def _consolidate(memories, pool, targets):
    moved = {r: [] for r in targets}
    forgotten = {r: [] for r in targets}
    for move in pool.consolidate(targets):
        for item, evicted in zip(move.items, move.evicted, strict=True):
            owner = pool._owner[item]
            moved[owner].append(pool.item(item).seq)
            if evicted >= 0:
                forgotten[owner].append(pool.item(evicted).seq)
    for r in targets:
        expected = memories[r].consolidate_detailed()
        assert moved[r] == [i.seq for i in expected.transferred]
        assert forgotten[r] == [e.item.seq for e in expected.evictions]


def _retrieve(memories, pool, targets, k, when):
    got = pool.retrieve(targets, k, when)
    for n, r in enumerate(targets):
        hits = memories[r].retrieve_scored(k, when)
        count = got.counts[n]
        assert count == len(hits)
        assert _seqs(pool, got.items[n, :count]) == [h.item.seq for h in hits]
        assert got.scores[n, :count].tolist() == [h.score for h in hits]
        assert [POOL_STORES[s] for s in got.stores[n, :count]] == [h.source for h in hits]
        assert (got.items[n, count:] == -1).all()


@settings(max_examples=300)
@given(
    st.lists(operation, max_size=40),
    st.integers(min_value=1, max_value=4),
    st.integers(min_value=1, max_value=5),
    st.sampled_from([0.0, 0.5, 0.7, 1.0]),
    st.sampled_from([0.5, 0.898, 0.95, 1.0]),
    retrievals,
    retentions,
)
def test_pool_matches_cognitive_memory(
    ops, working, episodic, threshold, decay, retrieval, retention
):
    """Any sequence of writes, pins, consolidations and retrievals gives equal results."""
    memories, pool = _build(working, episodic, threshold, decay, retrieval, retention)
    for op in ops:
        kind, *args = op
        if kind == "write":
            _write(memories, pool, *args)
        elif kind == "pinned":
            _pin(memories, pool, *args, episodic)
        elif kind == "consolidate":
            _consolidate(memories, pool, *args)
        elif kind == "compact":
            held = {(r, pool.item(i).seq) for r in range(HOUSEHOLDS) for i in _held(pool, r)}
            pool.compact()
            assert pool._size == len(held)
        else:
            _retrieve(memories, pool, *args)
        _same_stores(memories, pool)
    _same_snapshots(memories, pool, working, episodic, threshold, decay)
    copied = MemoryPool.from_memories(memories)
    assert (copied.retrieval, copied.retention) == (retrieval, retention)
    _same_snapshots(memories, copied, working, episodic, threshold, decay)


@settings(max_examples=100)
@given(
    st.lists(st.tuples(rows, importance, year, st.booleans()), max_size=25),
    st.sampled_from([0.5, 0.7]),
    retrievals,
    st.integers(min_value=1, max_value=8),
    year,
)
def test_pool_retrieves_an_item_in_both_stores_once(writes, threshold, retrieval, k, when):
    """Items written to working memory and consolidated sit in both stores: one candidate."""
    memories, _ = _build(3, 4, threshold, 0.9, retrieval)
    for targets, value, written, consolidate in writes:
        for r in targets:
            memories[r].write(f"Year {written}: note {value}", value, written, store="working")
            if consolidate:
                memories[r].consolidate_detailed()
    pool = MemoryPool.from_memories(memories)
    _retrieve(memories, pool, list(range(HOUSEHOLDS)), k, when)
    _same_snapshots(memories, pool, 3, 4, threshold, 0.9)  # access counts refreshed alike


def test_weighted_retrieval_scales_values_within_1e_12_to_one_half():
    """Importances that differ by less than 1e-12 carry no ranking, as CognitiveMemory has it."""
    memories, pool = _build(3, 4, 0.7, 0.9, RetrievalSettings(strategy="weighted"))
    for value in (0.5, 0.5 + 1e-13, 0.5 - 1e-13):
        _write(memories, pool, [0, 1], [value, 0.4, 0.0, 0.0], 2)
    _retrieve(memories, pool, [0, 1], 3, 4)
    scores = pool.retrieve([0, 1], 3, 4).scores.tolist()
    assert scores == [[1.0] * 3] * 2  # recency and importance alike in each: 0.5 + 0.5


@pytest.mark.parametrize("query", [None, "flood damage insurance"])
def test_weighted_retrieval_a_block_of_households_at_a_time_is_the_same(monkeypatch, query):
    rng = np.random.default_rng(7)
    ids = [f"H{n}" for n in range(10)]
    weighted = RetrievalSettings(strategy="weighted", w_recency=0.4, query=query)
    pools = [MemoryPool(ids, 3, 6, 0.5, 0.9, retrieval=weighted) for _ in range(2)]
    for when in range(1, 9):
        values = rng.choice([0.2, 0.4, 0.6, 0.9], size=10).tolist()
        texts = [f"Year {when}: {_SAYS.get(v, 'flood')}" for v in values]
        for pool in pools:
            pool.write(range(10), texts, values, when)
            pool.end_year(when)
    whole = pools[0].retrieve(range(10), 4, 9)
    monkeypatch.setattr("simulation.memory.pool._WEIGHTED_BLOCK", 3)
    monkeypatch.setattr("simulation.memory.pool._RELEVANCE_BLOCK", 3)
    blocked = pools[1].retrieve(range(10), 4, 9)
    for got, expected in zip(blocked, whole, strict=True):
        np.testing.assert_array_equal(got, expected)
    assert whole.counts.tolist() == [4] * 10
    used = pools[0]._size
    assert pools[1]._access_count[:used].tolist() == pools[0]._access_count[:used].tolist()


def test_importance_weighted_retention_keeps_a_recalled_memory():
    """Recency counts from the last retrieval: an old flood recalled this year outlives one
    from a year later that was not."""
    recall = RetentionSettings(policy="importance_weighted", w_importance=0.0, w_recency=1.0)
    memories, pool = _build(2, 2, 0.5, 0.95, retention=recall)
    _write(memories, pool, [0], [0.9], 1)  # H0:0, ranked first by decayed importance
    _write(memories, pool, [0], [0.8], 2)  # H0:1
    _retrieve(memories, pool, [0], 1, 5)  # recalls H0:0 only
    done = pool.write([0], "Year 5: flood", 0.8, 5)
    assert pool.item(done.evicted[0]).seq == 1
    assert [e.item.seq for e in memories[0].write("Year 5: flood", 0.8, 5).evictions] == [1]


def _same_snapshots(memories, pool, working, episodic, threshold, decay) -> None:
    """The pool's households, stored into fresh object memories, snapshot as the originals."""
    for row, memory in enumerate(memories):
        fresh = CognitiveMemory(
            memory.agent_id,
            working,
            episodic,
            threshold,
            decay,
            retrieval=pool.retrieval,
            retention=pool.retention,
            reflection=pool.reflection,
        )
        pool.store_into(row, fresh)
        assert fresh.to_dict() == memory.to_dict()


def test_pool_retrieves_a_flood_before_older_notes():
    pool = MemoryPool(["H0", "H1"], working_capacity=2, episodic_capacity=3, decay_rate=0.9)
    pool.write([0, 1], "Year 1: premium note", 0.5, 1)
    pool.write([0], "Year 2: A major flood", 0.9, 2)
    got = pool.retrieve([0, 1], top_k=2, year=3)
    assert pool.contents(got.items[0]) == ["Year 1: premium note", "Year 2: A major flood"]
    assert got.scores[0].tolist() == [0.5 * 0.9**2, 0.9 * 0.9]
    assert got.counts.tolist() == [2, 1]
    assert pool.contents(got.items[1]) == ["Year 1: premium note"]


def test_pool_retrieves_working_memory_newest_first_among_equals():
    """Working items of one year and importance come back newest first, as the object memory's.

    The random operations above seldom write three such items to one household; this order is
    the last of the working-memory ranking's tie-breaks.
    """
    pool = MemoryPool(["H0", "H1"], working_capacity=4, episodic_capacity=3)
    memory = CognitiveMemory("H0", 4, 3)
    for text, importance in [("old", 0.5), ("louder", 0.6), ("middle", 0.5), ("new", 0.5)]:
        pool.write([0], text, importance, 3)
        memory.write(text, importance, 3)
    pool.write([1], "last year's", 0.6, 2)
    pool.write([1], "this year's", 0.1, 3)
    got = pool.retrieve([1, 0], top_k=3, year=4)
    assert pool.contents(got.items[1]) == ["louder", "new", "middle"]
    assert [h.item.content for h in memory.retrieve_scored(3, 4)] == ["louder", "new", "middle"]
    assert pool.contents(got.items[0]) == ["this year's", "last year's"]
    assert got.stores[0].tolist() == [0, 0, -1]


def test_pool_refuses_repeated_rows_and_bad_importance():
    pool = MemoryPool(["H0"], working_capacity=2, episodic_capacity=2)
    with pytest.raises(ValueError, match="at most once"):
        pool.write([0, 0], "x", 0.5, 1)
    with pytest.raises(ValueError, match=r"importance must be in \[0, 1\], got 1.5"):
        pool.write([0], "x", 1.5, 1)
    two = MemoryPool(["H0", "H1"], working_capacity=2)
    for bad in (-0.25, math.nan):
        with pytest.raises(ValueError, match=rf"importance must be in \[0, 1\], got {bad}$"):
            two.write([0, 1], "x", [0.5, bad], 1)
    assert two.working_sizes.tolist() == [0, 0]
    with pytest.raises(ValueError, match="source must be one of"):
        pool.write([0], "x", 0.5, 1, source="rumour")
    with pytest.raises(ValueError, match="top_k"):
        pool.retrieve([0], -1)
    assert pool.working_sizes.tolist() == [0]


@pytest.mark.parametrize("households", [2, 100])  # rows counted, and (few of many) sorted
def test_pool_refuses_rows_repeated_or_outside_it(households):
    pool = MemoryPool([f"H{n}" for n in range(households)], working_capacity=2)
    last = households - 1
    for rows in ([last, 0, last], [0, 1, 0]):
        with pytest.raises(ValueError, match="at most once"):
            pool.write(rows, "x", 0.5, 1)
        with pytest.raises(ValueError, match="at most once"):
            pool.retrieve(rows, 2)
    for bad in (-1, households):
        with pytest.raises(IndexError, match=rf"rows must be in 0 \.\. {last}, got {bad}$"):
            pool.write([0, bad], "x", 0.5, 1)
        with pytest.raises(IndexError, match=rf"got {bad}$"):
            pool.retrieve([bad, 0], 2)
    pool.write([last, 0], "x", 0.5, 1)
    assert pool.working_sizes[[0, last]].tolist() == [1, 1]


def test_pool_write_to_no_rows_writes_nothing():
    # A phase whose event touched nobody (a year without floods) writes to no rows.
    pool = MemoryPool(["H0", "H1"], working_capacity=2)
    written = pool.write(np.array([], dtype=np.int64), [], np.array([]), 1)
    assert written.items.tolist() == []
    assert written.stores.tolist() == []
    assert pool.working_sizes.tolist() == [0, 0]
    assert pool.retrieve([0, 1], 2).counts.tolist() == [0, 0]


def test_pool_item_table_grows_past_its_first_allocation():
    pool = MemoryPool([f"H{n}" for n in range(300)], working_capacity=3, episodic_capacity=4)
    for when in range(10):
        pool.write(np.arange(300), f"Year {when}: note", 0.5 + 0.04 * when, when)
    assert pool.working_sizes.tolist() == [3] * 300
    # Years 5 to 9 reached the threshold; the capacity of 4 forgot the faintest, year 5's.
    assert pool.episodic_sizes.tolist() == [4] * 300
    assert pool.contents(pool.episodic(123)) == [f"Year {when}: note" for when in range(6, 10)]
    assert pool._size == 3000
    assert pool.contents(pool.working(299)) == [f"Year {when}: note" for when in (2, 3, 4)]


def test_pool_refuses_memories_it_does_not_implement():
    weighted = RetrievalSettings(strategy="weighted")
    other = "has other retrieval, retention or reflection settings than the first"
    with pytest.raises(ValueError, match=f"H1 {other}"):
        MemoryPool.from_memories([CognitiveMemory("H0"), CognitiveMemory("H1", retrieval=weighted)])
    fifo = RetentionSettings(policy="fifo")
    with pytest.raises(ValueError, match=f"H1 {other}"):
        MemoryPool.from_memories([CognitiveMemory("H0"), CognitiveMemory("H1", retention=fifo)])
    embedding = RetrievalSettings(strategy="weighted", query="flood", relevance="embedding")
    scorer = EmbeddingRelevance(lambda texts: np.ones((len(texts), 2)))
    with pytest.raises(
        ValueError, match="H0: a pool does not implement relevance scored by EmbeddingRelevance"
    ):
        MemoryPool.from_memories([CognitiveMemory("H0", retrieval=embedding, relevance=scorer)])
    with pytest.raises(ValueError, match="scores relevance to a query with keywords, not 'embed"):
        MemoryPool(["H0"], retrieval=embedding)
    with pytest.raises(ValueError, match="other capacities"):
        MemoryPool.from_memories([CognitiveMemory("H0"), CognitiveMemory("H1", 3)])
    held = CognitiveMemory("H2")
    held.write("Year 1: flood", 0.9, 1)
    data = held.to_dict()
    data["stores"] = {"working": [], "episodic": [], "semantic": [0], "archive": []}
    with pytest.raises(ValueError, match="H2: a pool does not implement semantic items beyond"):
        MemoryPool.from_memories([CognitiveMemory("H0"), CognitiveMemory.from_dict(data)])
    data["stores"] = {"working": [], "episodic": [], "semantic": [], "archive": [0]}
    with pytest.raises(ValueError, match="H2: a pool does not implement archived items without"):
        MemoryPool.from_memories([CognitiveMemory("H0"), CognitiveMemory.from_dict(data)])
    reflective = ReflectionSettings(enabled=True)
    with pytest.raises(ValueError, match=f"H1 {other}"):
        MemoryPool.from_memories(
            [CognitiveMemory("H0"), CognitiveMemory("H1", reflection=reflective)]
        )

    class Summariser(RuleBasedReflector):
        """Another reflector: the pool words only the rule-based one's reflections."""

    with pytest.raises(ValueError, match="H0: a pool does not implement reflection by Summar"):
        MemoryPool.from_memories(
            [CognitiveMemory("H0", reflection=reflective, reflector=Summariser())]
        )
    held.episodic[0].rehearsed = 3
    with pytest.raises(ValueError, match="H2: a pool does not implement rehearsed items without"):
        MemoryPool.from_memories([CognitiveMemory("H0"), held])


def test_pool_writes_distinct_texts_by_index():
    pool = MemoryPool(["H0", "H1", "H2"], working_capacity=2, episodic_capacity=2)
    pool.write([2, 0, 1], ["cheap", "dear"], 0.5, 1, text_index=[1, 0, 1])
    assert [pool.contents(pool.working(row)) for row in range(3)] == [
        ["cheap"],
        ["dear"],
        ["dear"],
    ]


def test_pool_writes_distinct_tag_sets_by_index():
    """One write of differently tagged memories: each row gets its own tag set, in order."""
    pool = MemoryPool(["H0", "H1", "H2"], working_capacity=2, episodic_capacity=2)
    done = pool.write(
        [2, 0, 1],
        "noted",
        0.5,
        1,
        [("decision", "insurance"), ("decision",)],
        tag_index=[1, 0, 1],
    )
    assert [pool.item(int(i)).tags for i in done.items] == [
        ("decision",),
        ("decision", "insurance"),
        ("decision",),
    ]
    with pytest.raises(ValueError, match="2 tag indices for 3 rows"):
        pool.write([0, 1, 2], "noted", 0.5, 2, [("a",)], tag_index=[0, 0])


def test_pool_writes_distinct_importances_by_index():
    """Importances named by index route, rank and evict as the same importances row by row."""
    ids = ["H0", "H1", "H2", "H3"]
    by_index = MemoryPool(ids, working_capacity=1, episodic_capacity=2)
    by_row = MemoryPool(ids, working_capacity=1, episodic_capacity=2)
    distinct, index = [0.3, 0.9, 0.0], [1, 0, 1, 2]
    for year in range(4):
        rows = np.roll(np.arange(4), year)
        done = by_index.write(rows, "noted", distinct, year, importance_index=index)
        same = by_row.write(rows, "noted", [distinct[i] for i in index], year)
        np.testing.assert_array_equal(done.stores, same.stores)
        np.testing.assert_array_equal(done.evicted, same.evicted)

    def held(pool: MemoryPool, row: int) -> list[tuple[int, float, bool]]:
        items = [pool.item(i) for i in (*pool.working(row), *pool.episodic(row))]
        return [(item.seq, item.importance, item.consolidated) for item in items]

    for row in range(4):
        assert held(by_index, row) == held(by_row, row)
    np.testing.assert_array_equal(by_index._key[: by_index._size], by_row._key[: by_row._size])
    with pytest.raises(ValueError, match="3 importance indices for 4 rows"):
        by_index.write(np.arange(4), "noted", distinct, 5, importance_index=[0, 1, 2])
    with pytest.raises(ValueError, match=r"importance must be in \[0, 1\], got 1.5"):
        by_index.write(np.arange(4), "noted", [0.5, 1.5], 5, importance_index=[0, 0, 1, 0])


def _noting_years(pool: MemoryPool, years: int) -> list[int]:
    """Write a note and a flood to every household a year; the table's size after each year."""
    rows = np.arange(len(pool))
    sizes = []
    for year in range(years):
        pool.write(rows, [f"Year {year}: note {n}" for n in rows], 0.5, year)
        pool.write(rows, f"Year {year}: flood", 0.9, year)
        pool.end_year(year, rows)
        sizes.append(pool._size)
    return sizes


def test_a_small_table_keeps_its_forgotten_items_until_they_are_many(monkeypatch):
    """Below _FORGOTTEN_KEPT forgotten items a year end leaves the table as it is."""
    monkeypatch.setattr("simulation.memory.pool._FORGOTTEN_KEPT", 3000)
    monkeypatch.setattr("simulation.memory.pool._MIN_GROWTH", 0)  # a table of its own size
    pool = MemoryPool([f"H{n}" for n in range(100)], working_capacity=2, episodic_capacity=2)
    sizes = _noting_years(pool, 40)
    # 400 live items (4 a household) and up to 3,000 forgotten ones; 200 more a year.
    assert sizes[:17] == list(range(200, 3401, 200))
    assert sizes[17] == 400  # 3,200 forgotten: compacted
    assert max(sizes) == 3400
    assert pool.contents(pool.working(7)) == ["Year 38: note 7", "Year 39: note 7"]


def test_a_full_table_grows_by_a_quarter_and_at_least_min_growth(monkeypatch):
    pool = MemoryPool([f"H{n}" for n in range(10)], working_capacity=2, episodic_capacity=2)
    start = pool._capacity
    for year in range(start // 10 + 1):
        pool.write(np.arange(10), "note", 0.5, year)
    assert pool._capacity == start + _MIN_GROWTH
    monkeypatch.setattr("simulation.memory.pool._MIN_GROWTH", 0)
    grown = pool._capacity
    for year in range((grown - pool._size) // 10 + 1):
        pool.write(np.arange(10), "note", 0.5, year)
    assert pool._capacity == int(grown * 1.25)


def test_year_ends_compact_forgotten_items_and_their_texts(monkeypatch):
    monkeypatch.setattr("simulation.memory.pool._FORGOTTEN_KEPT", 0)
    monkeypatch.setattr("simulation.memory.pool._MIN_GROWTH", 0)  # a table of its own size
    pool = MemoryPool([f"H{n}" for n in range(100)], working_capacity=2, episodic_capacity=2)
    assert max(_noting_years(pool, 60)) <= 2 * 400 + 1024  # 4 live items a household
    assert len(pool._texts) <= pool._size
    assert pool.contents(pool.working(7)) == ["Year 58: note 7", "Year 59: note 7"]
    assert pool.contents(pool.episodic(7)) == ["Year 58: flood", "Year 59: flood"]


@pytest.mark.parametrize("block", [1, 5, 64])
def test_compact_a_block_at_a_time_keeps_what_compacting_at_once_keeps(monkeypatch, block):
    """Compacting in blocks smaller than the table moves every live item and text alike."""

    def used_pool() -> MemoryPool:
        pool = MemoryPool([f"H{n}" for n in range(30)], working_capacity=3, episodic_capacity=4)
        rows = np.arange(30)
        for year in range(9):
            pool.write(rows, [f"Year {year}: note {n % 7}" for n in rows], 0.4, year)
            pool.write(rows[year % 3 :: 3], f"Year {year}: flood", 0.5 + year / 20, year)
            pool.consolidate(rows)
        return pool

    at_once, in_blocks = used_pool(), used_pool()
    at_once.compact()
    monkeypatch.setattr("simulation.memory.pool._COMPACT_BLOCK", block)
    in_blocks.compact()
    assert in_blocks._size == at_once._size < 9 * 40  # forgotten items were dropped
    assert in_blocks._texts == at_once._texts
    assert in_blocks._text_ids == at_once._text_ids
    for name in ("working", "episodic", "owner", "seq", "text", "importance", "key", "year"):
        size = at_once._size if name not in ("working", "episodic") else None
        np.testing.assert_array_equal(
            getattr(in_blocks, "_" + name)[:size], getattr(at_once, "_" + name)[:size]
        )
    for row in (0, 13, 29):
        assert in_blocks.contents(in_blocks.working(row)) == at_once.contents(at_once.working(row))
        assert in_blocks.contents(in_blocks.episodic(row)) == at_once.contents(
            at_once.episodic(row)
        )
    assert in_blocks.contents(in_blocks.working(13)) == [
        "Year 6: note 6",
        "Year 7: note 6",
        "Year 8: note 6",
    ]


def test_compacting_keeps_a_few_unused_texts_and_drops_many():
    """Unused texts are dropped once they reach an eighth of those in use, not one by one."""
    pool = MemoryPool([f"H{n}" for n in range(16)], working_capacity=1, episodic_capacity=1)
    rows = np.arange(16)
    pool.write(rows, [f"kept {n}" for n in rows], 0.5, 0)
    pool.write(rows[:1], "gone", 0.5, 1)  # one text of 17 unused: kept
    pool.compact()
    assert "kept 0" in pool._texts
    pool.write(rows[:4], "later", 0.5, 2)  # five of 18 unused: dropped
    pool.compact()
    assert sorted(pool._texts) == sorted([f"kept {n}" for n in range(4, 16)] + ["later"])
    assert pool.contents(pool.working(0)) == ["later"]
    assert pool.contents(pool.working(9)) == ["kept 9"]
    pool.write(rows[:1], "kept 0", 0.5, 3)  # a dropped text written again
    assert pool.contents(pool.working(0)) == ["kept 0"]


def test_relevance_to_a_query_reads_the_texts_a_compaction_renumbered():
    """Texts dropped by a compaction renumber the rest: relevance follows them."""
    query = RetrievalSettings(strategy="weighted", query="flood insurance claim", w_recency=0.0)
    memories, pool = _build(1, 1, 0.5, 0.9, query)
    rows = list(range(HOUSEHOLDS))
    for when, says in enumerate(["no claim", "a flood", "river flood damage", "flood insurance"]):
        _write(memories, pool, rows, [0.5] * HOUSEHOLDS, when)
        pool.write(rows, f"Year {when}: {says}", 0.4, when)  # below the threshold: working
        for memory in memories:
            memory.write(f"Year {when}: {says}", 0.4, when)
        _retrieve(memories, pool, rows, 2, when)  # indexes the texts written so far
    texts = len(pool._texts)
    pool.compact()
    assert len(pool._texts) < texts  # the forgotten texts are dropped, the others renumbered
    _write(memories, pool, rows, [0.9, 0.8, 0.5, 0.4], 5)
    _retrieve(memories, pool, rows, 2, 6)


def test_a_pool_keeps_copies_of_the_texts_not_the_memories_own_strings():
    """Emptied object memories free their texts: the pool holds none of their strings."""
    memories = [CognitiveMemory(f"H{n}", 2, 5, 0.7, 0.9) for n in range(3)]
    for n, memory in enumerate(memories):
        for year in range(4):
            memory.write(f"Year {year}: flood", 0.8, year, ("flood",))
            memory.write(f"Year {year}: note {n}", 0.2, year)
    strings = {id(item.content) for m in memories for item in (*m.working, *m.episodic)}
    pool = MemoryPool.from_memories(memories)
    assert sorted(pool._texts) == sorted(
        {item.content for m in memories for item in (*m.working, *m.episodic)}
    )
    assert not [text for text in pool._texts if id(text) in strings]
    assert pool.contents(pool.working(1)) == ["Year 2: note 1", "Year 3: note 1"]


def test_a_pool_of_filled_memories_goes_on_as_the_memories_do():
    """Items, pinned counts and counters are copied: the writes after agree, refusals too."""
    memories = [CognitiveMemory(f"H{n}", 2, 3, 0.7, 0.9) for n in range(5)]
    for n, memory in enumerate(memories[1:], start=1):
        for year in range(min(n, 3)):
            memory.write(f"Year {year}: kept {n}", 0.9, year, ("flood",), pinned=True)
        memory.write(f"note {n}", 0.2, n + 1)
    pool = MemoryPool.from_memories(memories)
    _pin(memories, pool, [0, 1, 2], 0.9, 7, capacity=3)  # room left: written by both
    _pin(memories, pool, [3], 0.9, 8, capacity=3)  # 3 pinned already: refused by both
    pool.write([0, 1, 2, 3, 4], "later", 0.3, 9)
    for memory in memories:
        memory.write("later", 0.3, 9)
    for row, memory in enumerate(memories):
        fresh = CognitiveMemory(f"H{row}", 2, 3, 0.7, 0.9)
        pool.store_into(row, fresh)
        assert fresh.to_dict() == memory.to_dict()


def test_many_full_memories_are_copied_in_batches():
    """More items than one copying batch: every household still gets its own items back."""
    memories = [CognitiveMemory(f"H{n}", 2, 40, 0.7, 0.9) for n in range(1_700)]
    for n, memory in enumerate(memories):
        for year in range(41):
            memory.write(f"Year {year}: flood {n}", 0.8 + (year % 3) / 20, year, ("flood",))
        memory.write(f"note {n}", 0.2, 41)
    pool = MemoryPool.from_memories(memories)
    assert pool._size == 1_700 * 41 > 65_536
    for row in (0, 900, 1_699):
        fresh = CognitiveMemory(f"H{row}", 2, 40, 0.7, 0.9)
        pool.store_into(row, fresh)
        assert fresh.to_dict() == memories[row].to_dict()


# What households remember that reflection reads: floods of known, unknown and no damage,
# claims paid and denied (with and without their payout), seeded floods, other seeded memories,
# and decisions it passes over. (source, tags, amount).
_EXPERIENCES = [
    ("flood", ("flood", "major"), 52000.5),
    ("flood", ("flood",), None),
    ("flood", ("flood", "no_damage"), 0.0),
    ("claim", ("claim",), 1200.25),
    ("claim", ("claim", "denied"), None),
    ("claim", ("claim",), None),
    ("seed", ("flood", "survey"), None),
    ("seed", ("survey",), None),
    ("decision", ("decision",), None),
]
reflective_operation = st.one_of(
    st.tuples(
        st.just("write"),
        rows,
        st.sampled_from(range(len(_EXPERIENCES))),
        st.sampled_from([0.0, 0.4, 0.7, 0.9, 1.0]),
        year,
    ),
    st.tuples(st.just("end_year"), rows, year),
    st.tuples(st.just("end_year"), st.just(list(range(HOUSEHOLDS))), year),
    st.tuples(
        st.just("retrieve"),
        rows,
        st.integers(min_value=0, max_value=8),
        st.one_of(st.none(), year),
    ),
    st.tuples(st.just("compact")),
)
# Low thresholds and small semantic memories: reflections, repeats and their evictions are
# common.
reflections = st.builds(
    ReflectionSettings,
    enabled=st.just(True),
    threshold=st.sampled_from([0.2, 0.5, 1.5]),
    importance=st.sampled_from([0.8, 0.3, 1.0]),
    semantic_capacity=st.integers(min_value=1, max_value=3),
)


def _reflective(working, episodic, threshold, decay, retrieval, reflection):
    ids = [f"H{n}" for n in range(HOUSEHOLDS)]
    settings = {"retrieval": retrieval, "reflection": reflection}
    memories = [CognitiveMemory(i, working, episodic, threshold, decay, **settings) for i in ids]
    return memories, MemoryPool(ids, working, episodic, threshold, decay, **settings)


def _remember(memories, pool, targets, kind, value, when):
    source, tags, amount = _EXPERIENCES[kind]
    text = f"Year {when}: {source} {_SAYS.get(value, '')}"
    done = pool.write(targets, text, value, when, tags, source=source, amount=amount)
    for n, r in enumerate(targets):
        result = memories[r].write(text, value, when, tags, source=source, amount=amount)
        assert _fields(pool.item(done.items[n])) == _fields(result.item)
        _same_evictions(pool, done.evicted[n], result.evictions)


def _end_year(memories, pool, targets, when):
    done = pool.end_year(when, targets)
    moved = {r: [] for r in targets}
    for move in done.moves:
        for item, evicted in zip(move.items, move.evicted, strict=True):
            moved[pool._owner[item]].append(
                (pool.item(item).seq, pool.item(evicted).seq if evicted >= 0 else None)
            )
    reflected = {
        int(pool._owner[i]): (i, e)
        for i, e in zip(done.reflections.items, done.reflections.evicted, strict=True)
    }
    assert (done.reflections.stores == POOL_STORES.index("semantic")).all()
    for r in targets:
        expected = memories[r].end_year(when)
        semantic = [e for e in expected.evictions if e.store == "semantic"]
        consolidated = [e for e in expected.evictions if e.store != "semantic"]
        assert [seq for seq, _ in moved[r]] == [i.seq for i in expected.transferred]
        assert [gone for _, gone in moved[r] if gone is not None] == [
            e.item.seq for e in consolidated
        ]
        if not expected.reflections:
            assert r not in reflected
            continue
        (reflection,) = expected.reflections
        item, evicted = reflected[r]
        got = pool.item(item)
        assert _fields(got) == _fields(reflection)
        assert got.evidence == reflection.evidence
        assert ([] if evicted < 0 else [pool.item(evicted).seq]) == [e.item.seq for e in semantic]


@settings(max_examples=300)
@given(
    st.lists(reflective_operation, min_size=10, max_size=60),
    st.integers(min_value=1, max_value=4),
    st.integers(min_value=1, max_value=5),
    st.sampled_from([0.0, 0.5, 0.7, 1.0]),
    st.sampled_from([0.5, 0.898, 1.0]),
    retrievals,
    reflections,
)
def test_pool_reflects_as_cognitive_memory(
    ops, working, episodic, threshold, decay, retrieval, reflection
):
    """Writes of every kind reflection reads, year ends, retrievals and compaction: equal
    reflections (text, tags, evidence), semantic memories, retrievals and counters."""
    memories, pool = _reflective(working, episodic, threshold, decay, retrieval, reflection)
    for op in ops:
        kind, *args = op
        if kind == "write":
            _remember(memories, pool, *args)
        elif kind == "end_year":
            _end_year(memories, pool, *args)
        elif kind == "compact":
            pool.compact()
        else:
            _retrieve(memories, pool, *args)
        _same_stores(memories, pool)
        for row, memory in enumerate(memories):
            ranked = pool._semantic[row, : pool._semantic_size[row]]
            assert _seqs(pool, ranked) == [i.seq for i in memory._semantic.ranked()]
    _same_snapshots(memories, pool, working, episodic, threshold, decay)
    copied = MemoryPool.from_memories(memories)
    for when in (13, 14):  # reflections it was given are compared by their evidence's ids
        _end_year(memories, copied, list(range(HOUSEHOLDS)), when)
        _retrieve(memories, copied, list(range(HOUSEHOLDS)), 4, when)


def test_pool_reflects_on_a_memory_in_both_stores_once():
    """A flood noted in working memory and consolidated sits in both stores: one piece of
    evidence, as the object memory counts it."""
    reflection = ReflectionSettings(enabled=True, threshold=0.5)
    memories = [CognitiveMemory(f"H{n}", 3, 4, 0.5, 0.9, reflection=reflection) for n in range(2)]
    for memory in memories:
        memory.write("Year 1: A flood", 0.6, 1, ("flood",), source="flood", store="working")
        memory.write("Year 1: A claim", 0.2, 1, ("claim",), source="claim", amount=900.0)
    pool = MemoryPool.from_memories(memories)
    done = pool.end_year(1)
    expected = [memory.end_year(1) for memory in memories]
    assert [len(e.transferred) for e in expected] == [1, 1]  # the flood, into both stores
    got = pool.items(done.reflections.items)
    assert [_fields(i) for i in got] == [_fields(e.reflections[0]) for e in expected]
    assert [i.evidence for i in got] == [("H0:0", "H0:1"), ("H1:0", "H1:1")]
    assert (
        got[0].content
        == "Year 1: I remember 1 flood in year 1; insurance paid 1 of my 1 claim ($900)."
    )


# Small archives, fast decay and low promotion counts: demotions, promotions, displacements
# on both tiers and promotions undone within a year end are common.
tiered = st.builds(
    RetentionSettings,
    policy=st.just("tiered"),
    archive_capacity=st.integers(min_value=1, max_value=3),
    demote_below=st.sampled_from([0.1, 0.3, 0.6]),
    promote_after=st.integers(min_value=1, max_value=2),
)
tiered_operation = st.one_of(
    st.tuples(st.just("write"), rows, st.lists(importance, min_size=HOUSEHOLDS), year),
    st.tuples(st.just("pinned"), rows, importance, year),
    st.tuples(st.just("experience"), rows, st.sampled_from(range(len(_EXPERIENCES))), year),
    st.tuples(st.just("end_year"), st.just(list(range(HOUSEHOLDS))), year),
    st.tuples(st.just("end_year"), rows, year),
    st.tuples(st.just("compact")),
    st.tuples(
        st.just("retrieve"),
        rows,
        st.integers(min_value=1, max_value=8),
        st.one_of(st.none(), year),
    ),
)


def _moves(pool, evicted, dropped) -> list[tuple[int, str, str | None]]:
    """A write's displacements as ``CognitiveMemory`` lists them: (seq, from, to)."""
    moves = []
    if evicted >= 0:
        moves.append((pool.item(evicted).seq, "episodic", "archive"))
    if dropped >= 0:
        moves.append((pool.item(dropped).seq, "archive", None))
    return moves


def _tiered_end_year(memories, pool, targets, when):
    done = pool.end_year(when, targets)
    moves = {r: [] for r in targets}
    for move in done.moves:
        for item, evicted, dropped in zip(move.items, move.evicted, move.dropped, strict=True):
            moves[int(pool._owner[item])].extend(_moves(pool, evicted, dropped))
    tiers = done.tiers
    for row, item, left, to in zip(tiers.rows, tiers.items, tiers.left, tiers.to, strict=True):
        moves[int(row)].append(
            (pool.item(item).seq, POOL_STORES[left], None if to < 0 else POOL_STORES[to])
        )
    for item, gone in zip(done.reflections.items, done.reflections.evicted, strict=True):
        if gone >= 0:
            moves[int(pool._owner[item])].append((pool.item(gone).seq, "semantic", None))
    promoted = {r: [] for r in targets}
    for item in tiers.promoted:
        promoted[int(pool._owner[item])].append(pool.item(item).seq)
    reflected = {int(pool._owner[i]): pool.item(i) for i in done.reflections.items}
    for r in targets:
        expected = memories[r].end_year(when)
        assert moves[r] == [(e.item.seq, e.store, e.to) for e in expected.evictions]
        assert promoted[r] == [i.seq for i in expected.promoted]
        assert [_fields(i) for i in expected.reflections] == (
            [_fields(reflected[r])] if r in reflected else []
        )


@settings(max_examples=300)
@given(
    st.lists(tiered_operation, min_size=10, max_size=60),
    st.integers(min_value=1, max_value=4),
    st.integers(min_value=1, max_value=4),
    st.sampled_from([0.0, 0.5, 0.7, 1.0]),
    st.sampled_from([0.5, 0.7, 0.898]),
    retrievals,
    tiered,
    st.booleans(),
)
def test_pool_tiers_memories_as_cognitive_memory(
    ops, working, episodic, threshold, decay, retrieval, retention, reflective
):
    """Tiered retention: equal displacements, demotions, promotions (their refreshed decay
    and ranking), archives, retrievals from them, reflections on them and snapshots."""
    ids = [f"H{n}" for n in range(HOUSEHOLDS)]
    reflection = ReflectionSettings(enabled=reflective, threshold=1.5, semantic_capacity=2)
    options = {"retrieval": retrieval, "retention": retention, "reflection": reflection}
    memories = [CognitiveMemory(i, working, episodic, threshold, decay, **options) for i in ids]
    pool = MemoryPool(ids, working, episodic, threshold, decay, **options)
    for op in ops:
        kind, *args = op
        if kind in ("write", "pinned", "experience"):
            targets, value, when = args
            pinned = kind == "pinned"
            if pinned and any(
                sum(i.pinned for i in memories[r].episodic) >= episodic for r in targets
            ):
                continue  # refused alike: test_pool_matches_cognitive_memory
            source, tags, amount = (
                _EXPERIENCES[value] if kind == "experience" else ("flood", ("flood",), 5.0)
            )
            values = [0.9 if kind == "experience" else value] * len(targets)
            if kind == "write":
                values = [value[r] for r in targets]
            texts = [f"Year {when}: {source} {_SAYS.get(v, '')}" for v in values]
            done = pool.write(
                targets, texts, values, when, tags, source=source, amount=amount, pinned=pinned
            )
            for n, r in enumerate(targets):
                result = memories[r].write(
                    texts[n], values[n], when, tags, source=source, amount=amount, pinned=pinned
                )
                assert _fields(pool.item(done.items[n])) == _fields(result.item)
                moved = _moves(pool, done.evicted[n], done.dropped[n])
                if done.evicted_from[n] == POOL_STORES.index("working"):
                    moved = [(pool.item(done.evicted[n]).seq, "working", None)]
                assert moved == [(e.item.seq, e.store, e.to) for e in result.evictions]
        elif kind == "end_year":
            _tiered_end_year(memories, pool, *args)
        elif kind == "compact":
            pool.compact()
        else:
            _retrieve(memories, pool, *args)
        _same_stores(memories, pool)
        for row, memory in enumerate(memories):
            ranked = pool._archive[row, : pool._archive_size[row]]
            assert _seqs(pool, ranked) == [i.seq for i in memory._archive.ranked()]
            assert [(pool.item(i).rehearsed, _fields(pool.item(i))) for i in ranked] == [
                (i.rehearsed, _fields(i)) for i in memory._archive.ranked()
            ]
            long_term = pool._episodic[row, : pool._episodic_size[row]]
            assert [pool.item(i).rehearsed for i in long_term] == [
                i.rehearsed for i in memory._episodic.ranked()
            ]
    _same_snapshots(memories, pool, working, episodic, threshold, decay)
    copied = MemoryPool.from_memories(memories)
    _same_snapshots(memories, copied, working, episodic, threshold, decay)
    everyone = list(range(HOUSEHOLDS))
    for when in (13, 14):  # a copy goes on as the memories do
        _retrieve(memories, copied, everyone, 3, when)
        _tiered_end_year(memories, copied, everyone, when)


@pytest.mark.parametrize(
    ("retention", "reflection"),
    [
        (RetentionSettings(), ReflectionSettings()),
        (RetentionSettings(policy="tiered", archive_capacity=7), ReflectionSettings()),
        (RetentionSettings(), ReflectionSettings(enabled=True, semantic_capacity=3)),
    ],
)
def test_store_widths_are_what_a_pool_sets_aside(retention, reflection):
    # The arrays engine is refused past MAX_SLOTS by these widths: they must be the pool's own.
    pool = MemoryPool(["H0", "H1"], 4, 9, retention=retention, reflection=reflection)
    stores = (pool._working, pool._episodic, pool._semantic, pool._archive)
    widths = store_widths(4, 9, retention, reflection)
    assert widths == tuple(store.shape[1] for store in stores)
    assert pool._semantic_evidence.shape == pool._semantic.shape


@pytest.mark.parametrize("now", [-5, 0, 30])
def test_a_promotion_in_a_year_before_0_restarts_decay_as_cognitive_memory(now):
    """A memory promoted back from the archive decays from its promotion in any year.

    The pool once read a rehearsal year below 0 as "never rehearsed", so an item promoted at
    year -5 decayed from its own year there and ranked below what CognitiveMemory ranked it.
    """
    retention = RetentionSettings(policy="tiered", promote_after=1)
    memory = CognitiveMemory("H0", 2, 1, 0.7, 0.95, retention=retention)
    pool = MemoryPool(["H0"], 2, 1, 0.7, 0.95, retention=retention)
    for text, when in (("kept", now), ("archived", now - 20)):  # the older goes to the archive
        memory.write(text, 0.9, when)
        pool.write([0], text, 0.9, when)
    memory.retrieve_scored(2, now)  # the archived item recalled once: promoted at year end
    pool.retrieve([0], 2, now)
    memory.end_year(now)
    pool.end_year(now)
    expected = [(h.item.content, h.score) for h in memory.retrieve_scored(2, now + 1, record=False)]
    found = pool.retrieve([0], 2, now + 1)
    count = int(found.counts[0])
    texts, scores = pool.contents(found.items[0][:count]), found.scores[0][:count].tolist()
    ranked = list(zip(texts, scores, strict=True))
    assert ranked == expected
    assert expected[0][0] == "archived"  # its decay restarted at the promotion


@pytest.mark.parametrize("outside", [2**31, -(2**31), 2**40, 2**64])
def test_a_year_the_pool_cannot_hold_is_refused_not_wrapped(outside):
    """The pool keeps 32-bit years: 2**31 was stored as -2**31 (CognitiveMemory kept it)."""
    pool = MemoryPool(["H0", "H1"], 2, 3, 0.7, 0.95)
    calls = {
        "write": lambda: pool.write([0], "x", 0.5, outside),
        "write per row": lambda: pool.write([0, 1], "x", 0.5, np.array([1, outside])),
        "numpy and Python": lambda: pool.write([0, 1], "x", 0.5, [np.int64(1), outside]),
        "retrieve": lambda: pool.retrieve([0], 2, outside),
        "end_year": lambda: pool.end_year(outside),
    }
    for name, call in calls.items():
        with pytest.raises(ValueError, match=rf"year must be within .* got {outside}"):
            call()
        assert int(pool.retrieve([0, 1], 5).counts.sum()) == 0, name  # nothing written
    pool.write([0], "held", 0.5, 2**31 - 1)  # the largest year it holds
    assert pool.item(0).year == 2**31 - 1


@pytest.mark.parametrize("flag", [True, np.True_, [True], np.array([False])])
def test_a_boolean_importance_is_refused_as_cognitive_memory_refuses_it(flag):
    """A flag is no importance: the pool took True (and arrays of flags) as 1.0."""
    pool = MemoryPool(["H0"], 2, 3, 0.7, 0.95)
    with pytest.raises(ValueError, match="importance must be a number in"):
        pool.write([0], "x", flag, 1)
    with pytest.raises(ValueError, match="importance must be a number in"):
        CognitiveMemory("H0").add_experience("x", flag if np.ndim(flag) == 0 else False, 1)
    assert int(pool.retrieve([0], 5).counts[0]) == 0


def test_a_store_asked_per_row_routes_and_consolidates_as_cognitive_memory():
    """``store`` as ``CognitiveMemory.write`` takes it: working at 0.9 is consolidated later."""
    asked = ["working", "episodic", "auto", "working"]
    memories = [CognitiveMemory(f"H{n}", 2, 3, 0.7, 0.95) for n in range(4)]
    pool = MemoryPool([m.agent_id for m in memories], 2, 3, 0.7, 0.95)
    importances = [0.9, 0.2, 0.9, 0.3]
    done = pool.write(range(4), "x", importances, 1, store=asked)
    for n, memory in enumerate(memories):
        result = memory.write("x", importances[n], 1, store=asked[n])
        assert POOL_STORES[done.stores[n]] == result.store
    moved = [int(pool._owner[i]) for write in pool.consolidate() for i in write.items]
    assert moved == [n for n, memory in enumerate(memories) if memory.consolidate()] == [0]
    for row, memory in enumerate(memories):  # the copy stays in working memory too
        assert _seqs(pool, pool.working(row)) == [i.seq for i in memory.working]
        assert _seqs(pool, pool.episodic(row)) == [i.seq for i in memory.episodic]


@pytest.mark.parametrize(
    ("store", "pinned", "refusal"),
    [
        ("wroking", False, "store must be 'working', 'episodic' or 'auto', got 'wroking'"),
        (["auto", "elsewhere"], False, "got 'elsewhere'"),
        ("working", True, "pinned items live in episodic memory"),
    ],
)
def test_a_store_the_pool_cannot_write_is_refused_before_anything_is(store, pinned, refusal):
    pool = MemoryPool(["H0", "H1"], 2, 3, 0.7, 0.95)
    with pytest.raises(ValueError, match=re.escape(refusal)):
        pool.write([0, 1], "x", 0.5, 1, store=store, pinned=pinned)
    assert int(pool.retrieve([0, 1], 5).counts.sum()) == 0


@pytest.mark.parametrize("year", [3e9, np.float64(3e9), 2.0, True, np.array([1, 2.5])])
def test_a_year_that_is_no_integer_is_refused_as_cognitive_memory_refuses_it(year):
    """3e9 was stored as year -1294967296 and True as year 1."""
    pool = MemoryPool(["H0", "H1"], 2, 3, 0.7, 0.95)
    with pytest.raises(TypeError, match="year must be an integer"):
        pool.write([0, 1], "x", 0.5, year)
    with pytest.raises(TypeError, match="year must be an integer"):
        CognitiveMemory("H0").write("x", 0.5, year if np.ndim(year) == 0 else 2.5)
    with pytest.raises(TypeError, match=r"year must be an integer, got 2\.5"):
        pool.end_year(2.5)  # int(2.5) was taken for year 2


@pytest.mark.parametrize("importances", [[True, 0.5], (np.True_, 0.5)])
def test_a_boolean_among_per_row_importances_is_refused(importances):
    pool = MemoryPool(["H0", "H1"], 2, 3, 0.7, 0.95)
    with pytest.raises(ValueError, match="importance must be a number in"):
        pool.write([0, 1], "x", importances, 1)


def test_a_retrieval_far_past_every_item_scores_as_cognitive_memory_without_a_huge_table():
    """Ages past the table are powered one by one: 2**31 - 1 once built 2**32 of them."""
    pool = MemoryPool(["H0"], 2, 3, 0.7, 0.95)
    memory = CognitiveMemory("H0", 2, 3, 0.7, 0.95)
    for when in (1, 5):
        pool.write([0], "x", 0.9, when)
        memory.write("x", 0.9, when)
    for now in (20_003, 2**31 - 1):
        found = pool.retrieve([0], 2, now)
        expected = [h.score for h in memory.retrieve_scored(2, now)]
        assert found.scores[0][: int(found.counts[0])].tolist() == expected
    assert all(len(table) <= 20_001 for table in pool._powers.values())


@pytest.mark.parametrize("held", ["written", "retrieved"])
def test_a_memory_with_a_year_the_pool_cannot_hold_is_refused_when_copied(held):
    """from_memories raised numpy's OverflowError for a year CognitiveMemory had kept."""
    memory = CognitiveMemory("H0", working_capacity=2, episodic_capacity=3)
    if held == "written":
        memory.write("far ahead", 0.5, 2**31)
    else:  # retrieval stamps the item's last access with the year asked about
        memory.write("now", 0.5, 3)
        assert len(memory.retrieve(2, 2**31)) == 1
    with pytest.raises(ValueError, match=r"year must be within .* got 2147483648"):
        MemoryPool.from_memories([memory])
