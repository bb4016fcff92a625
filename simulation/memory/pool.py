"""MemoryPool: many households' memories as arrays, for whole-population operations.

A :class:`~simulation.memory.CognitiveMemory` is one household's memory as Python objects: a
yearly cycle over a population calls it once per household for every write and retrieval, and
those calls, not the arithmetic, are the cost of a simulated year. A pool holds the same
memories as columns (structure of arrays) and does each operation for many households in a
few numpy calls:

* the items of all households are rows of one append-only table (content and tags interned);
* working memory is a ``households x working_capacity`` matrix of item rows, oldest first;
* episodic memory is a ``households x (episodic_capacity + 1)`` matrix kept in retrieval order
  (decayed importance, then newest insertion first), so that retrieval reads its front and
  retention drops from its back, as :class:`~simulation.memory.stores.LongTermStore` does.

The pool implements the seed-000 configuration of ``CognitiveMemory`` exactly: ``spec``
retrieval, the ``decayed_importance`` retention policy, consolidation and pinned items. It also
implements ``weighted`` retrieval (recency, importance and keyword relevance to the settings'
query: :class:`~simulation.memory.relevance.KeywordIndex`), the ``fifo`` and
``importance_weighted`` retention policies, reflection by the
:class:`~simulation.memory.reflection.RuleBasedReflector` into semantic memory (a third matrix,
``households x (semantic_capacity + 1)``, ranked as episodic memory is) and the ``tiered``
retention policy, whose archive is a fourth matrix ranked alike (an item's decay then counts
from its last rehearsal, a column of the item table). Equal calls give equal items,
scores, orders, evictions and access counts (``tests/test_memory_pool.py`` checks this against
``CognitiveMemory`` operation by operation). Decay factors and the logarithms that rank items
are computed with Python's float arithmetic, as the object memory computes them, so that ties
break the same way.

Example:
    >>> pool = MemoryPool(["H0", "H1"], working_capacity=2, episodic_capacity=3)
    >>> writes = pool.write([0, 1], ["Year 1: A flood", "Year 1: No flood"], [0.9, 0.4], 1)
    >>> pool.contents(pool.retrieve([0, 1], top_k=2, year=2).items[0])
    ['Year 1: A flood']
"""

from __future__ import annotations

import math
from itertools import compress
from typing import TYPE_CHECKING, NamedTuple

import numpy as np
import pandas as pd

from simulation.memory.item import SOURCES, MemoryItem
from simulation.memory.reflection import RuleBasedReflector, flood_experience
from simulation.memory.relevance import KeywordIndex, KeywordRelevance
from simulation.memory.settings import (
    BOOLEANS,
    ReflectionSettings,
    RetentionSettings,
    RetrievalSettings,
    check_fraction,
    check_positive_int,
)
from simulation.rowwise import row_count, row_cumsum

if TYPE_CHECKING:
    from collections.abc import Iterable, Sequence

    from numpy.typing import ArrayLike, NDArray

    from simulation.memory.cognitive import CognitiveMemory

__all__ = [
    "MAX_SLOTS",
    "POOL_STORES",
    "MemoryPool",
    "PoolRetrieval",
    "PoolTiers",
    "PoolWrite",
    "PoolYearEnd",
    "store_widths",
]

#: Store codes of :class:`PoolWrite` and :class:`PoolRetrieval` (-1: none).
POOL_STORES: tuple[str, ...] = ("working", "episodic", "semantic", "archive")
_WORKING, _EPISODIC, _SEMANTIC, _ARCHIVE = 0, 1, 2, 3
_SOURCE_NAMES: tuple[str, ...] = tuple(sorted(SOURCES))
_SOURCE_CODES = {name: code for code, name in enumerate(_SOURCE_NAMES)}
_FLOOD, _CLAIM, _SEED = (_SOURCE_CODES[name] for name in ("flood", "claim", "seed"))
_REFLECTION = _SOURCE_CODES["reflection"]
_EMPTY = -1
# An item's rehearsal year when it has none: years may be negative (CognitiveMemory takes any
# integer year), so no year the int32 column can hold but its least stands for "none".
_NOT_REHEARSED = np.iinfo(np.int32).min
# The oldest age whose decay factor is kept in a table (up to twice this many entries, 160 kB).
_MOST_TABULATED_AGE = 10_000
_NO_ROWS = np.zeros(0, dtype=np.int64)
# The item table's columns in the order MemoryItem takes them (those it has).
_ITEM_FIELDS = (
    "owner",
    "seq",
    "text",
    "importance",
    "year",
    "tags",
    "source",
    "pinned",
    "amount",
    "last_access",
    "access_count",
    "consolidated",
)
_COLUMNS = (
    "owner",
    "seq",
    "text",
    "tags",
    "source",
    "importance",
    "year",
    "amount",
    "pinned",
    "consolidated",
    "last_access",
    "access_count",
)
_INITIAL_ITEMS = 1024
#: The item table grows by this share of its size when full: a table that doubled would, at
#: 100,000 full memories, claim 900 MB more at the first write for a year's few hundred
#: thousand new items (and copy the old 450 MB alongside).
_GROWTH = 0.25
#: ... but by at least this many items (about 4 MB): growing copies the table, and a small
#: table grown by a quarter at a time was copied 19 times in a 1,000-household run of 31 years.
_MIN_GROWTH = 1 << 16
#: Forgotten items are dropped (:meth:`MemoryPool.compact`) at a year end once they reach this
#: share of the live ones and the table is full but for this share: half the room the table is
#: given, so that a table sized for its memories need not grow (growing copies it, and keeps
#: the larger size). Unused texts are dropped once they reach this share of the used ones.
_SLACK = _GROWTH / 2
#: Forgotten items kept however few the live ones: dropping them from a small table saves a
#: few megabytes but costs a pass over it and a rebuilt text map (0.5 ms or so at 1,000
#: households, every fourth year). From about 2,000,000 live items (40,000 full memories),
#: ``_SLACK`` of them is more and decides alone.
_FORGOTTEN_KEPT = 1 << 18
_LOAD_BATCH = 65_536  # items copied from object memories at a time (see from_memories)
#: Table entries :meth:`MemoryPool.compact` indexes or copies at a time.
_COMPACT_BLOCK = 1 << 20
#: Households a weighted retrieval scores at a time: it reads every item of every memory, and
#: 100,000 full memories at once took 250 MB more at the run's peak (2,030 MB in all).
_WEIGHTED_BLOCK = 1 << 14
# Households scored for relevance at a time: each has an entry per term of each of its texts'
# kinds, and a row of counts per term and per kind of text (_FREQUENCY_CELLS in all at most).
_RELEVANCE_BLOCK = 1 << 12
_FREQUENCY_CELLS = 1 << 22


class PoolWrite(NamedTuple):
    """What one :meth:`MemoryPool.write` did, a row per written item.

    Attributes:
        items: The written items' indices in the pool's item table.
        stores: Where each went (codes into :data:`POOL_STORES`).
        evicted: The item each write displaced, or -1: forgotten, except that under ``tiered``
            retention an item displaced from episodic memory moves to the archive.
        evicted_from: The store the displaced item left (codes into :data:`POOL_STORES`), or -1.
        dropped: Under ``tiered`` retention, the item the archive forgot to make room for the
            displaced one, or -1; ``None`` under the other policies (nothing moves).
    """

    items: NDArray[np.int64]
    stores: NDArray[np.int8]
    evicted: NDArray[np.int64]
    evicted_from: NDArray[np.int8]
    dropped: NDArray[np.int64] | None = None

    def picked(self, which: ArrayLike) -> PoolWrite:
        """The writes at ``which`` (positions, or a mask over the writes)."""
        return PoolWrite(*(None if part is None else part[which] for part in self))

    @classmethod
    def joined(cls, writes: Sequence[PoolWrite], order: ArrayLike | None = None) -> PoolWrite:
        """``writes`` as one, optionally reordered (``order``: positions in the joined writes)."""
        parts = []
        for part in zip(*writes, strict=True):
            if part[0] is None:
                parts.append(None)
                continue
            joined = np.concatenate(part)
            parts.append(joined if order is None else joined[order])
        return cls(*parts)


#: What a year end that reflected nothing wrote.
_NOTHING_WRITTEN = PoolWrite(
    np.zeros(0, dtype=np.int64),
    np.zeros(0, dtype=np.int8),
    np.zeros(0, dtype=np.int64),
    np.zeros(0, dtype=np.int8),
)


class PoolYearEnd(NamedTuple):
    """What one :meth:`MemoryPool.end_year` did.

    Attributes:
        moves: What consolidation moved: one :class:`PoolWrite` per working slot that moved
            something, with what each item displaced from episodic memory.
        reflections: The reflections written (all to semantic memory) and the reflection each
            displaced (empty without reflection).
        tiers: What ``tiered`` retention demoted and promoted; ``None`` under other policies.
    """

    moves: tuple[PoolWrite, ...]
    reflections: PoolWrite
    tiers: PoolTiers | None = None


class PoolTiers(NamedTuple):
    """What ``tiered`` retention moved at a year end, after consolidation.

    Each household's moves lie together (households in row order), in the order they happened:
    the faded items demoted to the archive, then the rehearsed ones promoted back, each followed
    by what it displaced (an episodic item moving to the archive, an archived one forgotten).

    Attributes:
        rows: The household of each move.
        items: The item moved.
        left: The store it left (codes into :data:`POOL_STORES`).
        to: The store it moved to, or -1: forgotten.
        promoted: The items promoted that are still in episodic memory afterwards, households
            in row order.
    """

    rows: NDArray[np.int64]
    items: NDArray[np.int64]
    left: NDArray[np.int8]
    to: NDArray[np.int8]
    promoted: NDArray[np.int64]


class PoolRetrieval(NamedTuple):
    """The best memories of each household asked, best first, padded with -1.

    Attributes:
        items: ``rows x top_k`` item indices (-1 past ``counts``).
        scores: Their decayed importance (NaN past ``counts``).
        stores: Where each was found (codes into :data:`POOL_STORES`; -1 past ``counts``).
        counts: How many items each household got.
    """

    items: NDArray[np.int64]
    scores: NDArray[np.float64]
    stores: NDArray[np.int8]
    counts: NDArray[np.int64]


#: The most slots :func:`store_widths` may give a household (64 KiB of item numbers): a pool
#: sets every slot aside when it is made, full or not, so capacities far beyond what a run can
#: write (``episodic_capacity: 1000000000`` meant as "never forget") would ask for gigabytes
#: per household; ``CognitiveMemory`` holds only what is written and serves them instead.
MAX_SLOTS = 8192


def store_widths(
    working_capacity: int,
    episodic_capacity: int,
    retention: RetentionSettings,
    reflection: ReflectionSettings,
) -> tuple[int, int, int, int]:
    """The columns a :class:`MemoryPool` sets aside per household for each store.

    Working, episodic, semantic and archive, in :data:`POOL_STORES` order. The long-term
    stores take one column more than their capacity (an insertion lands before retention
    drops one); a store nothing ever enters (semantic without reflection, the archive under
    any policy but ``tiered``) takes one column, so that it costs nothing.
    """
    semantic = reflection.semantic_capacity + 1 if reflection.enabled else 1
    archive = retention.archive_capacity + 1 if retention.policy == "tiered" else 1
    return working_capacity, episodic_capacity + 1, semantic, archive


class MemoryPool:
    """Working, episodic, semantic and archive memories of many households in arrays.

    Households are numbered ``0 .. len(agent_ids) - 1`` (their *rows*). Every operation takes
    the rows it applies to; a row may appear once per call.

    Args:
        agent_ids: The owners, by row; item ids are ``"<agent_id>:<seq>"``.
        working_capacity: Items working memory holds before evicting the oldest.
        episodic_capacity: Items episodic memory holds before the lowest decayed importance is
            forgotten.
        consolidation_threshold: Importance at or above which a write goes to episodic memory
            and :meth:`consolidate` copies a working item there.
        decay_rate: Per-year decay of importance in (0, 1].
        retrieval: How :meth:`retrieve` ranks memories: ``spec`` (the default) or ``weighted``,
            with keyword relevance to its ``query`` if it has one (``top_k`` is not read:
            :meth:`retrieve` takes its own).
        retention: What an over-full episodic memory forgets: ``decayed_importance`` (the
            default), ``fifo`` or ``importance_weighted``; or ``tiered``, which moves it to an
            archive instead, and at each year end demotes faded items and promotes rehearsed
            ones (:meth:`end_year`).
        reflection: When :meth:`end_year` reflects, as ``CognitiveMemory``'s default
            :class:`~simulation.memory.reflection.RuleBasedReflector` does; off by default.

    Raises:
        ValueError: For a capacity below 1, a threshold outside [0, 1], a decay rate outside
            (0, 1] (naming the argument and the value), or ``embedding`` relevance to a query
            (a pool scores keywords only).
    """

    def __init__(
        self,
        agent_ids: Sequence[str],
        working_capacity: int = 10,
        episodic_capacity: int = 50,
        consolidation_threshold: float = 0.7,
        decay_rate: float = 0.95,
        *,
        retrieval: RetrievalSettings | None = None,
        retention: RetentionSettings | None = None,
        reflection: ReflectionSettings | None = None,
    ):
        check_positive_int("working_capacity", working_capacity)
        check_positive_int("episodic_capacity", episodic_capacity)
        check_fraction("consolidation_threshold", consolidation_threshold)
        check_fraction("decay_rate", decay_rate, low_open=True)
        retrieval = RetrievalSettings() if retrieval is None else retrieval
        if retrieval.query is not None and retrieval.relevance != "keyword":
            msg = f"a pool scores relevance to a query with keywords, not {retrieval.relevance!r}"
            raise ValueError(msg)
        retention = RetentionSettings() if retention is None else retention
        self.agent_ids = tuple(str(agent_id) for agent_id in agent_ids)
        n = len(self.agent_ids)
        self.working_capacity = working_capacity
        self.episodic_capacity = episodic_capacity
        self.consolidation_threshold = float(consolidation_threshold)
        self.decay_rate = float(decay_rate)
        self.retrieval = retrieval
        self.retention = retention
        self._tiered = retention.policy == "tiered"
        self.reflection = ReflectionSettings() if reflection is None else reflection
        # The query relevance is scored against, as CognitiveMemory scores it: a blank query
        # or a relevance weight of 0 scores none (and spec retrieval has no query).
        query = retrieval.query
        self._query = query if query and query.strip() and retrieval.w_relevance > 0.0 else None
        self._keywords = KeywordIndex()
        self._log_decay = math.log(self.decay_rate)
        # rate ** age for ages 0, 1, ... by rate (grown on demand): the decay of importance,
        # and weighted retrieval's decay of recency.
        self._powers: dict[float, NDArray[np.float64]] = {}
        self._texts: list[str] = []
        self._text_ids: dict[str, int] = {}
        self._tag_sets: list[tuple[str, ...]] = []
        self._tag_set_ids: dict[tuple[str, ...], int] = {}
        self._size = 0
        self._allocate(_INITIAL_ITEMS)
        self._next_seq = np.zeros(n, dtype=np.int64)
        self._clock = np.zeros(n, dtype=np.int64)  # latest year seen, as CognitiveMemory's
        self._since_reflection = np.zeros(n)  # importance written, as CognitiveMemory counts it
        working, episodic, semantic, archive = store_widths(
            working_capacity, episodic_capacity, retention, self.reflection
        )
        self._working = np.full((n, working), _EMPTY, dtype=np.int64)
        self._working_size = np.zeros(n, dtype=np.int64)
        self._episodic = np.full((n, episodic), _EMPTY, dtype=np.int64)
        self._episodic_size = np.zeros(n, dtype=np.int64)
        self._episodic_pinned = np.zeros(n, dtype=np.int64)
        # Semantic memory, in retrieval order like episodic memory.
        self._semantic = np.full((n, semantic), _EMPTY, dtype=np.int64)
        self._semantic_size = np.zeros(n, dtype=np.int64)
        # Beside each semantic item: how many items its evidence names when the pool reflected
        # it, or -1 for one it was given (see _held_reflections).
        self._semantic_evidence = np.full((n, semantic), _EMPTY, dtype=np.int64)
        self._evidence: dict[int, tuple[str, ...]] = {}  # item -> its evidence, if it has any
        # next_seq when the reflector last found nothing new (-1: never), as CognitiveMemory's.
        self._dry_seq = np.full(n, _EMPTY, dtype=np.int64)
        self._tag_flags: dict[str, NDArray[np.bool_]] = {}  # see _tagged
        # The tiered policy's archive, in retrieval order like episodic memory.
        self._archive = np.full((n, archive), _EMPTY, dtype=np.int64)
        self._archive_size = np.zeros(n, dtype=np.int64)

    # ------------------------------------------------------------------ item table
    def _allocate(self, capacity: int) -> None:
        """Grow the item table's columns to ``capacity`` rows, keeping what they hold."""
        size = self._size
        # 32-bit integers: a table of 100,000 full memories (5.4 million items) is 190 MB
        # smaller than with 64-bit ones. Rows, sequence numbers, text and tag codes, years and
        # access counts of a simulation stay far below 2**31 (years in the thousands, a few
        # writes per household-year).
        columns = {
            "owner": np.int32,
            "seq": np.int32,
            "text": np.int32,
            "tags": np.int32,
            "source": np.int8,
            "importance": np.float64,
            "year": np.int32,
            "amount": np.float64,  # NaN: no amount
            "pinned": np.bool_,
            "consolidated": np.bool_,
            "last_access": np.int32,
            "access_count": np.int32,
            "key": np.float64,  # retrieval key: since * log(decay) - log(importance)
        }
        # Only the tiered policy rehearses and archives: 8 bytes an item that the other
        # policies do without (43 MB at 100,000 full memories).
        columns.update(dict.fromkeys(self._tier_columns, np.int32))
        for name, dtype in columns.items():
            grown = np.empty(capacity, dtype=dtype)
            if size:
                grown[:size] = getattr(self, "_" + name)[:size]
            # An empty store slot (-1) indexes the last row, read and then set aside: it must
            # read the same in every run. (np.zeros would zero every free row, 1.5 % of a
            # 1,000-household run's instructions under callgrind, which counts rep stosb's
            # bytes.)
            if capacity > size:
                grown[-1] = 0
            setattr(self, "_" + name, grown)
        self._capacity = capacity

    @property
    def _tier_columns(self) -> tuple[str, ...]:
        """The item columns only the tiered policy keeps.

        ``rehearsed`` is the year of the rehearsal that last refreshed an item (``_NOT_REHEARSED``:
        none) and ``hits`` an archived item's access count when it was demoted (-1: not
        archived), as ``CognitiveMemory`` keeps them in ``MemoryItem.rehearsed`` and
        ``_demoted_hits``.
        """
        return ("rehearsed", "hits") if self._tiered else ()

    def _since(self, items: NDArray[np.int64]) -> NDArray:
        """The year each of ``items`` decays from: its last rehearsal's, else its own."""
        if not self._tiered:
            return self._year[items]
        rehearsed = self._rehearsed[items]
        return np.where(rehearsed != _NOT_REHEARSED, rehearsed, self._year[items])

    def _new_items(self, count: int) -> NDArray[np.int64]:
        """Reserve ``count`` rows of the item table and return their indices."""
        start, end = self._size, self._size + count
        if end > self._capacity:
            self._allocate(
                max(end, int(self._capacity * (1 + _GROWTH)), self._capacity + _MIN_GROWTH)
            )
        self._size = end
        if self._tiered:
            self._rehearsed[start:end] = _NOT_REHEARSED
            self._hits[start:end] = _EMPTY
        return np.arange(start, end, dtype=np.int64)

    def _intern_texts(self, texts: Iterable[str], *, copy: bool = False) -> NDArray[np.int64]:
        """The text id of each of ``texts``, adding the new ones (as copies if ``copy``)."""
        ids, table = self._text_ids, self._texts
        out = []
        for text in texts:
            text_id = ids.get(text)
            if text_id is None:
                if copy:
                    text = _copy_of(text)  # noqa: PLW2901 - the copy is what the pool keeps
                text_id = ids[text] = len(table)
                table.append(text)
            out.append(text_id)
        return np.array(out, dtype=np.int64)

    def _intern_tags(self, tags: tuple[str, ...]) -> int:
        tag_id = self._tag_set_ids.get(tags)
        if tag_id is None:
            tag_id = self._tag_set_ids[tags] = len(self._tag_sets)
            self._tag_sets.append(tags)
        return tag_id

    def _ranking_keys(
        self,
        importance: NDArray[np.float64],
        year: NDArray[np.int64],
        shared: tuple[NDArray[np.float64], NDArray[np.int64]] | None = None,
    ) -> NDArray:
        """``year * log(decay) - log(importance)`` (inf at importance 0), as Python computes it.

        ``math.log`` of each distinct importance, not ``np.log``: the two may differ in the last
        bit, and equal keys decide ties.

        Args:
            importance: Each item's importance.
            year: The year each item's decay counts from.
            shared: The importances and each item's position among them, when the caller
                knows them (see :meth:`write`'s ``importance_index``): no search for them.
        """
        if shared is not None:
            distinct, where = shared
        else:
            first = importance[:1]
            if (importance == first).all():  # one importance for all (the usual write)
                value = float(first[0]) if len(first) else 1.0
                return year * self._log_decay - (math.log(value) if value > 0.0 else -math.inf)
            # Hashed, not sorted (np.unique): several times faster, and no order is needed.
            where, distinct = pd.factorize(importance, use_na_sentinel=False)
        logs = np.array([math.log(v) if v > 0.0 else -math.inf for v in distinct.tolist()])
        return year * self._log_decay - logs[where]

    def _decay_factors(
        self, ages: NDArray[np.int64], rate: float | None = None
    ) -> NDArray[np.float64]:
        """``rate ** age`` for integer ages, each computed once with Python's float power.

        Args:
            ages: The ages, of any shape.
            rate: The decay per year; ``None``: the pool's ``decay_rate``.
        """
        rate = self.decay_rate if rate is None else rate
        if ages.size == 0:
            return np.ones(ages.shape)
        low, high = int(ages.min()), int(ages.max())
        # Retrieving before an item's year (or last access), or ages past the table's reach
        # (a retrieval at year 2**31 - 1 once built a table of 2**32 powers): rare, computed
        # apart, with the same Python float power.
        if low < 0 or high > _MOST_TABULATED_AGE:
            distinct, where = np.unique(ages, return_inverse=True)
            powers = np.array([rate ** int(age) for age in distinct.tolist()])
            return powers[where.reshape(ages.shape)]
        table = self._powers.get(rate)
        if table is None or high >= len(table):
            table = self._powers[rate] = np.array([rate**age for age in range(2 * high + 1)])
        return table[ages]

    # ------------------------------------------------------- object memories
    @classmethod
    def from_memories(cls, memories: Sequence[CognitiveMemory]) -> MemoryPool:
        """A pool holding copies of ``memories`` (their items, stores, counters), row by row.

        Raises:
            ValueError: If the memories differ in capacity, threshold, decay or retrieval,
                retention or reflection settings, or use what a pool does not implement
                (relevance scored otherwise than by keywords, a reflector other than the
                rule-based one, archived or rehearsed items without tiered retention).
        """
        if not memories:
            msg = "a pool needs at least one memory"
            raise ValueError(msg)
        first = memories[0]
        for memory in memories:
            _check_poolable(memory, first)
        pool = cls(
            [memory.agent_id for memory in memories],
            first.working_capacity,
            first.episodic_capacity,
            first.consolidation_threshold,
            first.decay_rate,
            retrieval=first.retrieval,
            retention=first.retention,
            reflection=first.reflection,
        )
        # The table is sized once, and items are copied a batch at a time: at 100,000 full
        # memories a column of Python values for every item at once would take gigabytes.
        count = sum(_distinct_count(m) for m in memories)
        pool._allocate(max(_INITIAL_ITEMS, int(count * (1 + _GROWTH))))
        items: list[MemoryItem] = []
        owners: list[int] = []
        pinned = [0] * len(memories)
        hits: list[tuple[int, int]] = []  # (item, access count at demotion) of archived items
        for row, memory in enumerate(memories):
            ranked = memory._episodic.ranked()
            reflections = memory._semantic.ranked()
            archived = memory._archive.ranked()
            if not (memory._working or ranked or reflections or archived):
                continue  # the usual at the start of a run: nothing to copy
            index = {}
            base = pool._size + len(items)
            for item in (*memory.working, *memory.episodic, *reflections, *archived):
                if item.seq not in index:
                    index[item.seq] = base + len(index)
                    items.append(item)
                    owners.append(row)
                    if item.evidence:
                        pool._evidence[index[item.seq]] = tuple(item.evidence)
            for store, sizes, held in (
                (pool._working, pool._working_size, memory.working),
                (pool._episodic, pool._episodic_size, ranked),
                (pool._semantic, pool._semantic_size, reflections),
                (pool._archive, pool._archive_size, archived),
            ):
                store[row, : len(held)] = [index[i.seq] for i in held]
                sizes[row] = len(held)
            demoted = memory._demoted_hits.items()
            hits.extend((index[seq], count) for seq, count in demoted if seq in index)
            pinned[row] = sum(i.pinned for i in ranked)
            if len(items) >= _LOAD_BATCH:
                pool._load_items(items, owners)
                items, owners = [], []
        pool._load_items(items, owners)
        if hits:
            at, counts = zip(*hits, strict=True)
            pool._hits[list(at)] = counts
        # The counters of every row at once: a numpy element set one at a time costs more.
        pool._next_seq[:] = [memory._next_seq for memory in memories]
        pool._clock[:] = [memory._clock for memory in memories]
        pool._since_reflection[:] = [memory._since_reflection for memory in memories]
        pool._dry_seq[:] = [memory._dry_reflection_seq for memory in memories]
        pool._episodic_pinned[:] = pinned
        return pool

    def _load_items(self, items: Sequence[MemoryItem], owners: Sequence[int]) -> None:
        """Append copies of ``items`` (owned by the rows ``owners``) to the item table."""
        index = self._new_items(len(items))
        self._owner[index] = owners
        self._seq[index] = [i.seq for i in items]
        # Copies of the texts, not the objects' strings: those lie among the items in memory
        # the interpreter can return to the system only once nothing in it lives (at 100,000
        # full memories, hundreds of MB that the emptied objects would otherwise keep).
        self._text[index] = self._intern_texts([i.content for i in items], copy=True)
        self._tags[index] = [self._intern_tags(tuple(i.tags)) for i in items]
        self._source[index] = [_SOURCE_CODES[i.source] for i in items]
        self._importance[index] = [i.importance for i in items]
        years = np.array([i.year for i in items])
        accessed = np.array([i.last_access for i in items])
        # A CognitiveMemory keeps any integer year; the columns here would wrap 2**31.
        _check_years(years)
        _check_years(accessed)
        self._year[index] = years
        self._amount[index] = [np.nan if i.amount is None else i.amount for i in items]
        self._pinned[index] = [i.pinned for i in items]
        self._consolidated[index] = [i.consolidated for i in items]
        self._last_access[index] = accessed
        self._access_count[index] = [i.access_count for i in items]
        if self._tiered:
            rehearsed = [_NOT_REHEARSED if i.rehearsed is None else i.rehearsed for i in items]
            _check_years([year for year in rehearsed if year != _NOT_REHEARSED])
            self._rehearsed[index] = rehearsed
        self._key[index] = self._ranking_keys(self._importance[index], self._since(index))

    def store_into(self, row: int, memory: CognitiveMemory) -> None:
        """Make ``memory`` (the object memory of ``row``'s household) hold what the pool does.

        Its settings stay; its items, stores and counters become copies of the pool's.
        """
        working = [self.item(i) for i in self.working(row)]
        by_seq = {item.seq: item for item in working}
        ranked = []
        for index in self._episodic[row, : self._episodic_size[row]].tolist():
            seq = int(self._seq[index])
            ranked.append(by_seq.get(seq) or self.item(index))
        reflections = self.items(self._semantic[row, : self._semantic_size[row]])
        archived = [
            by_seq.get(int(self._seq[index])) or self.item(index)
            for index in self._archive[row, : self._archive_size[row]].tolist()
        ]
        hits = {}
        if archived:
            at = self._archive[row, : self._archive_size[row]]
            demoted = self._hits[at]
            kept = demoted >= 0
            hits = dict(zip(self._seq[at][kept].tolist(), demoted[kept].tolist(), strict=True))
        texts = memory.texts
        if texts is not None:
            for item in {id(i): i for i in (*working, *ranked, *reflections, *archived)}.values():
                item.content = texts.setdefault(item.content, item.content)
        memory._load(
            working,
            ranked,
            next_seq=int(self._next_seq[row]),
            clock=int(self._clock[row]),
            since_reflection=float(self._since_reflection[row]),
            semantic_ranked=reflections,
            dry_reflection_seq=int(self._dry_seq[row]),
            archive_ranked=archived,
            demoted_hits=hits,
        )

    # ------------------------------------------------------------------ views
    def __len__(self) -> int:
        """Number of households."""
        return len(self.agent_ids)

    @property
    def working_sizes(self) -> NDArray[np.int64]:
        """Items in each household's working memory (read-only view)."""
        view = self._working_size.view()
        view.flags.writeable = False
        return view

    @property
    def episodic_sizes(self) -> NDArray[np.int64]:
        """Items in each household's episodic memory (read-only view)."""
        view = self._episodic_size.view()
        view.flags.writeable = False
        return view

    def working(self, row: int) -> list[int]:
        """Item indices of one household's working memory, oldest first."""
        return self._working[row, : self._working_size[row]].tolist()

    def episodic(self, row: int) -> list[int]:
        """Item indices of one household's episodic memory in the order it entered (by seq)."""
        items = self._episodic[row, : self._episodic_size[row]]
        return items[np.argsort(self._seq[items], kind="stable")].tolist()

    #: Names of the item sources, by the codes :meth:`column` gives for ``source``.
    source_names: tuple[str, ...] = _SOURCE_NAMES

    @property
    def texts(self) -> list[str]:
        """The distinct texts held, by the codes :meth:`column` gives for ``text``."""
        return self._texts

    @property
    def tag_sets(self) -> list[tuple[str, ...]]:
        """The distinct tag sets written so far, by the codes :meth:`column` gives for ``tags``."""
        return self._tag_sets

    def column(self, name: str, items: ArrayLike) -> np.ndarray:
        """A field of many items at once, by its name.

        The fields are ``owner`` (row), ``seq``, ``text`` (code into :attr:`texts`),
        ``tags`` (code into :attr:`tag_sets`), ``source`` (code into :attr:`source_names`),
        ``importance``, ``year``, ``amount`` (NaN: none), ``pinned``, ``consolidated``,
        ``last_access`` and ``access_count``.

        Raises:
            KeyError: For another name.
        """
        if name not in _COLUMNS:
            msg = f"no item column {name!r}; known: {', '.join(_COLUMNS)}"
            raise KeyError(msg)
        return getattr(self, "_" + name)[items]

    def contents(self, items: ArrayLike) -> list[str]:
        """The texts of ``items`` (item indices; -1 entries are skipped)."""
        texts, text = self._texts, self._text
        return [texts[text[i]] for i in np.asarray(items).ravel().tolist() if i >= 0]

    def item(self, index: int) -> MemoryItem:
        """A :class:`MemoryItem` snapshot of item ``index`` (for the audit trail and reports)."""
        amount = float(self._amount[index])
        year = int(self._year[index])
        return MemoryItem(
            self.agent_ids[self._owner[index]],
            int(self._seq[index]),
            self._texts[self._text[index]],
            float(self._importance[index]),
            year,
            self._tag_sets[self._tags[index]],
            _SOURCE_NAMES[self._source[index]],
            bool(self._pinned[index]),
            self._evidence.get(int(index), ()),
            None if math.isnan(amount) else amount,
            int(self._last_access[index]),
            int(self._access_count[index]),
            bool(self._consolidated[index]),
            self._rehearsal(int(index)),
        )

    def _rehearsal(self, index: int) -> int | None:
        """``MemoryItem.rehearsed`` of item ``index``."""
        if not self._tiered or self._rehearsed[index] == _NOT_REHEARSED:
            return None
        return int(self._rehearsed[index])

    def items(self, indices: ArrayLike) -> list[MemoryItem]:
        """:meth:`item` of many items at once (each field gathered in one call)."""
        index = np.asarray(indices, dtype=np.int64).ravel()
        agent_ids, texts, tag_sets = self.agent_ids, self._texts, self._tag_sets
        evidence = self._evidence

        def snapshot(
            at: int,
            owner: int,
            seq: int,
            text: int,
            importance: float,
            year: int,
            tags: int,
            source: int,
            pinned: bool,
            amount: float,
            last_access: int,
            access_count: int,
            consolidated: bool,
        ) -> MemoryItem:
            return MemoryItem(
                agent_ids[owner],
                seq,
                texts[text],
                importance,
                year,
                tag_sets[tags],
                _SOURCE_NAMES[source],
                pinned,
                evidence.get(at, ()) if evidence else (),
                None if math.isnan(amount) else amount,
                last_access,
                access_count,
                consolidated,
                None,
            )

        columns = (getattr(self, "_" + name)[index].tolist() for name in _ITEM_FIELDS)
        items = [snapshot(*fields) for fields in zip(index.tolist(), *columns, strict=True)]
        if self._tiered:
            for item, rehearsed in zip(items, self._rehearsed[index].tolist(), strict=True):
                if rehearsed != _NOT_REHEARSED:
                    item.rehearsed = rehearsed
        return items

    def ids(self, indices: ArrayLike) -> list[str]:
        """The ids (``"<agent_id>:<seq>"``) of many items at once."""
        index = np.asarray(indices, dtype=np.int64).ravel()
        agent_ids = self.agent_ids
        return [
            f"{agent_ids[owner]}:{seq}"
            for owner, seq in zip(
                self._owner[index].tolist(), self._seq[index].tolist(), strict=True
            )
        ]

    # ------------------------------------------------------------------ writes
    def write(
        self,
        rows: ArrayLike,
        contents: str | Sequence[str],
        importance: float | ArrayLike,
        year: int | ArrayLike,
        tags: Iterable[str] | Iterable[Iterable[str]] | None = None,
        *,
        source: str = "other",
        amount: float | ArrayLike | None = None,
        pinned: bool = False,
        store: str | ArrayLike = "auto",
        text_index: ArrayLike | None = None,
        tag_index: ArrayLike | None = None,
        importance_index: ArrayLike | None = None,
    ) -> PoolWrite:
        """Write one memory to each household of ``rows``, routed as ``CognitiveMemory.write``.

        Under ``store="auto"`` an item goes to episodic memory when it is pinned or its
        importance reaches the consolidation threshold, else to working memory.

        Args:
            rows: Households written to, each at most once.
            contents: One text for all, or one per row, or (with ``text_index``) the distinct
                texts written.
            importance: Salience in [0, 1], one for all or one per row, or (with
                ``importance_index``) the distinct importances written.
            year: Simulation year of the experience, one for all or one per row.
            tags: Classification tags shared by the items (a single string is one tag), or
                (with ``tag_index``) the distinct tag sets written.
            source: What produced the memories, one of :data:`~simulation.memory.item.SOURCES`.
            amount: Dollar amount behind each text, one for all or one per row, or ``None``.
            pinned: Never forget these items (they go to episodic memory).
            store: ``working``, ``episodic`` or ``auto``, one for all or one per row, as
                ``CognitiveMemory.write`` takes it: an item written to working memory at or
                above the threshold is copied to episodic memory by :meth:`consolidate`.
            text_index: For each row, the position of its text in ``contents``: many rows
                writing a few distinct texts look each text up once.
            tag_index: For each row, the position of its tag set in ``tags``: one write of
                memories tagged differently (each skill's decision memories, say).
            importance_index: For each row, the position of its importance in ``importance``:
                a few importances shared by many rows (each skill's) have their logarithms
                taken once each for the ranking keys, with no search of the rows for them.

        Returns:
            The items written, their stores and what each displaced.

        Raises:
            ValueError: For a repeated row, importance outside [0, 1], an unknown source or
                store, a pinned item asked into working memory, or pinning more items than a
                household's episodic memory can hold.
        """
        rows = np.asarray(rows, dtype=np.int64).ravel()
        m = len(rows)
        importance, shared = _importances_written(importance, importance_index, m)
        source_code = self._check_write(rows, importance, source, pinned=pinned)
        _check_years(year)
        asked = None if isinstance(store, str) and store == "auto" else _stores_asked(store, m)
        if asked is not None and pinned and (asked == "working").any():
            msg = "pinned items live in episodic memory; use store='episodic' or 'auto'"
            raise ValueError(msg)
        years = _per_row(year, m, np.int64)
        text_ids = self._texts_written(contents, text_index, m)
        tag_ids = self._tags_written(tags, tag_index, m)
        start = self._size
        items = self._new_items(m)
        new = slice(start, start + m)  # the same rows as items: filled without fancy indexing
        self._owner[new] = rows
        seqs = self._next_seq[rows]
        self._seq[new] = seqs
        self._next_seq[rows] = seqs + 1
        self._text[new] = text_ids
        self._tags[new] = tag_ids
        self._source[new] = source_code
        self._importance[new] = importance
        self._year[new] = years
        self._amount[new] = np.nan if amount is None else amount
        self._pinned[new] = pinned
        self._last_access[new] = years
        self._access_count[new] = 0
        self._key[new] = self._ranking_keys(importance, years, shared)
        self._clock[rows] = np.maximum(self._clock[rows], years)
        self._since_reflection[rows] += importance
        episodic = (
            np.ones(m, dtype=np.bool_) if pinned else importance >= self.consolidation_threshold
        )
        if asked is not None:
            episodic = np.where(asked == "auto", episodic, asked == "episodic")
        self._consolidated[new] = episodic
        if pinned:
            self._episodic_pinned[rows] += 1
        stores, evicted = self._route(rows, items, episodic)
        evicted_from = np.where(evicted >= 0, stores, _EMPTY).astype(np.int8)
        dropped = None
        if self._tiered:  # what episodic memory displaced moves to the archive
            dropped = self._demoted(rows, np.where(evicted_from == _EPISODIC, evicted, _EMPTY))
        return PoolWrite(items, stores, evicted, evicted_from, dropped)

    def _texts_written(
        self, contents: str | Sequence[str], text_index: ArrayLike | None, m: int
    ) -> NDArray[np.int64]:
        """The text id of each of ``m`` rows written (see :meth:`write`'s arguments)."""
        if isinstance(contents, str):  # one text for all: interned once
            return np.full(m, self._intern_texts((contents,))[0], dtype=np.int64)
        if text_index is not None:
            text_ids = self._intern_texts(contents)[np.asarray(text_index, dtype=np.int64)]
            if len(text_ids) != m:
                msg = f"{len(text_ids)} text indices for {m} rows"
                raise ValueError(msg)
            return text_ids
        text_ids = self._intern_texts(contents)
        if len(text_ids) != m:
            msg = f"{len(text_ids)} contents for {m} rows"
            raise ValueError(msg)
        return text_ids

    def _tags_written(
        self,
        tags: Iterable[str] | Iterable[Iterable[str]] | None,
        tag_index: ArrayLike | None,
        m: int,
    ) -> int | NDArray[np.int64]:
        """The tag set code of each of ``m`` rows written, or one for all (see :meth:`write`)."""
        if tag_index is None:
            given = () if tags is None else ((tags,) if isinstance(tags, str) else tuple(tags))
            return self._intern_tags(given)
        codes = np.array([self._intern_tags(tuple(t)) for t in tags or ()], dtype=np.int64)
        tag_ids = codes[np.asarray(tag_index, dtype=np.int64)]
        if len(tag_ids) != m:
            msg = f"{len(tag_ids)} tag indices for {m} rows"
            raise ValueError(msg)
        return tag_ids

    def _route(
        self, rows: NDArray[np.int64], items: NDArray[np.int64], episodic: NDArray[np.bool_]
    ) -> tuple[NDArray[np.int8], NDArray[np.int64]]:
        """Put new ``items`` in episodic memory where ``episodic``, else in working memory.

        Returns:
            The store of each item and the item it displaced (or -1).
        """
        m = len(rows)
        going = np.count_nonzero(episodic)
        if going == 0:  # a write is usually all to one store: no split and merge
            return np.full(m, _WORKING, dtype=np.int8), self._push_working(rows, items)
        if going == m:
            return np.full(m, _EPISODIC, dtype=np.int8), self._insert_episodic(rows, items)
        stores = np.where(episodic, _EPISODIC, _WORKING).astype(np.int8)
        evicted = np.empty(m, dtype=np.int64)
        to_working = ~episodic
        evicted[to_working] = self._push_working(rows[to_working], items[to_working])
        evicted[episodic] = self._insert_episodic(rows[episodic], items[episodic])
        return stores, evicted

    def _check_write(
        self, rows: NDArray[np.int64], importance: NDArray[np.float64], source: str, *, pinned: bool
    ) -> int:
        """Refuse a write :meth:`write` cannot make; return the source's code."""
        if _repeats(rows, len(self)):
            msg = "a pool write takes each household at most once"
            raise ValueError(msg)
        # Two reductions in the usual write; a NaN fails both (its minimum is NaN).
        if len(importance) and not (importance.min() >= 0.0 and importance.max() <= 1.0):
            bad = ~((importance >= 0.0) & (importance <= 1.0))
            msg = f"importance must be in [0, 1], got {float(importance[bad][0])!r}"
            raise ValueError(msg)
        source_code = _SOURCE_CODES.get(source)
        if source_code is None:
            msg = f"source must be one of {sorted(SOURCES)}, got {source!r}"
            raise ValueError(msg)
        if pinned:
            full = self._episodic_pinned[rows] >= self.episodic_capacity
            if full.any():
                msg = (
                    f"{self.agent_ids[rows[full][0]]}: cannot pin more than "
                    f"{self.episodic_capacity} items in episodic memory "
                    f"(episodic_capacity={self.episodic_capacity})"
                )
                raise ValueError(msg)
        return source_code

    def _push_working(self, rows: NDArray[np.int64], items: NDArray[np.int64]) -> NDArray:
        """Append ``items`` to the working memories of ``rows``; return the evicted (or -1)."""
        evicted = np.full(len(rows), _EMPTY, dtype=np.int64)
        if not len(rows):
            return evicted
        sizes = self._working_size[rows]
        full = sizes >= self.working_capacity
        if full.any():
            full_rows = rows[full]
            block = self._working.take(full_rows, axis=0)
            evicted[full] = block[:, 0]
            block[:, :-1] = block[:, 1:]
            block[:, -1] = items[full]
            self._working[full_rows] = block
        room = ~full
        if room.any():
            self._working[rows[room], sizes[room]] = items[room]
            self._working_size[rows[room]] += 1
        return evicted

    def _insert_episodic(self, rows: NDArray[np.int64], items: NDArray[np.int64]) -> NDArray:
        """Insert ``items`` at their rank in the episodic memories of ``rows``; enforce capacity.

        Returns:
            The item each insertion displaced (by the retention policy), or -1.
        """
        return self._insert_ranked(
            self._episodic, self._episodic_size, self.episodic_capacity, rows, items
        )

    def _demoted(self, rows: NDArray[np.int64], items: NDArray[np.int64]) -> NDArray[np.int64]:
        """Archive ``items`` (one per row of ``rows``; -1: none), which left episodic memory.

        Their access counts are noted: retrievals from the archive count from there.

        Returns:
            The item the archive forgot for each to make room (or -1).
        """
        dropped = np.full(len(rows), _EMPTY, dtype=np.int64)
        moving = items >= 0
        if not moving.any():
            return dropped
        owners, items = rows[moving], items[moving]
        self._hits[items] = self._access_count[items]
        gone = self._insert_ranked(
            self._archive, self._archive_size, self.retention.archive_capacity, owners, items
        )
        self._hits[gone[gone >= 0]] = _EMPTY
        dropped[moving] = gone
        return dropped

    def _insert_ranked(
        self,
        store: NDArray[np.int64],
        store_sizes: NDArray[np.int64],
        capacity: int,
        rows: NDArray[np.int64],
        items: NDArray[np.int64],
    ) -> NDArray[np.int64]:
        """Insert ``items`` at their rank in a store (episodic memory or the archive) of ``rows``.

        Args:
            store: The store's matrix, a row per household in retrieval order.
            store_sizes: How many items each household's store holds.
            capacity: How many it may hold; past it one item goes (see :meth:`_forgotten`; the
                archive forgets its lowest decayed importance, as ``decayed_importance`` does).
            rows: The households, each at most once.
            items: The item each one receives.

        Returns:
            The item each insertion displaced, or -1.
        """
        evicted = np.full(len(rows), _EMPTY, dtype=np.int64)
        if not len(rows):
            return evicted
        sizes = store_sizes[rows]
        # Only the columns up to the new item's: past the fullest of these memories every slot
        # is empty, and a memory short of its capacity (50 items by default) needs fewer.
        width = int(sizes.max()) + 1
        block = store[rows, :width]
        # Before every held item whose key is not lower: among equal keys the newest comes first.
        # (An empty slot's -1 reads the last key, whatever it is: `held` masks it.)
        held = block >= 0
        position = row_count((self._key[block] < self._key[items][:, None]) & held)
        # Each slot takes the item before it from the new item's on, in one gather; the last
        # slot is empty in every row, so nothing falls off.
        columns = np.arange(width)
        source = columns - (columns > position[:, None])
        source += (np.arange(len(rows)) * width)[:, None]
        block = block.take(source)
        block[np.arange(len(rows)), position] = items
        sizes = sizes + 1
        over = sizes > capacity
        if over.any():
            full = block[over]
            if store is self._episodic:
                last = self._forgotten(rows[over], full)
            else:  # the archive holds no pinned items: the last is the lowest
                last = np.full(len(full), capacity, dtype=np.int64)
            evicted[over] = full[np.arange(len(full)), last]
            block[over] = _removed(full, last)
            sizes[over] = capacity
        store[rows, :width] = block
        store_sizes[rows] = sizes
        return evicted

    def _forgotten(self, rows: NDArray[np.int64], full: NDArray[np.int64]) -> NDArray[np.int64]:
        """The column of the item each over-full episodic memory forgets, by retention policy.

        Args:
            rows: The households over capacity.
            full: Their episodic memories, in retrieval order, one item over capacity.
        """
        unpinned = ~self._pinned[full]
        policy = self.retention.policy
        if policy in ("decayed_importance", "tiered"):
            # The last unpinned item in retrieval order: the lowest decayed importance, and
            # among equal ones the earliest inserted (tiered moves it to the archive).
            return full.shape[1] - 1 - np.argmax(unpinned[:, ::-1], axis=1)
        # fifo: the oldest unpinned item (lowest seq); importance_weighted: the lowest
        # w_importance * importance + w_recency * decay ** (clock - last access), then the oldest.
        seqs = np.where(unpinned, self._seq[full], np.iinfo(np.int32).max)
        if policy == "importance_weighted":
            settings = self.retention
            ages = self._clock[rows][:, None] - self._last_access[full]
            value = settings.w_importance * self._importance[full] + (
                settings.w_recency * self._decay_factors(ages)
            )
            value[~unpinned] = np.inf
            seqs[value != value.min(axis=1)[:, None]] = np.iinfo(np.int32).max
        return np.argmin(seqs, axis=1)

    # ----------------------------------------------------------- consolidation
    def consolidate(self, rows: ArrayLike | None = None) -> tuple[PoolWrite, ...]:
        """Copy working items at or above the threshold into episodic memory, once each.

        Items move oldest first, as ``CognitiveMemory.consolidate`` moves them, one working
        slot at a time for all households at once.

        Args:
            rows: The households to consolidate; all when ``None``.

        Returns:
            One :class:`PoolWrite` per working slot that moved something (``stores`` all
            episodic), with the items moved and what each displaced.
        """
        rows = (
            np.arange(len(self), dtype=np.int64)
            if rows is None
            else np.asarray(rows, dtype=np.int64).ravel()
        )
        moves = []
        threshold = self.consolidation_threshold
        for slot in range(self.working_capacity):
            rows = rows[self._working_size[rows] > slot]
            if not len(rows):
                break
            items = self._working[rows, slot]
            due = ~self._consolidated[items] & (self._importance[items] >= threshold)
            if due.any():
                moving, owners = items[due], rows[due]
                self._consolidated[moving] = True
                evicted = self._insert_episodic(owners, moving)
                stores = np.full(len(moving), _EPISODIC, dtype=np.int8)
                evicted_from = np.where(evicted >= 0, _EPISODIC, _EMPTY).astype(np.int8)
                dropped = self._demoted(owners, evicted) if self._tiered else None
                moves.append(PoolWrite(moving, stores, evicted, evicted_from, dropped))
        return tuple(moves)

    def end_year(self, year: int, rows: ArrayLike | None = None) -> PoolYearEnd:
        """``CognitiveMemory.end_year``: the clock, consolidation, tiering, reflection.

        Item indices returned before this call may be invalid after it (:meth:`compact`);
        those it returns stay valid until the next year end.

        Args:
            year: The year that is ending.
            rows: The households whose year ends; all when ``None``.

        Returns:
            What :meth:`consolidate` moved, the reflections written (see :meth:`reflect`) and
            what tiered retention moved (see :meth:`_rebalance_tiers`).
        """
        _check_years(year)
        live = int(
            self._working_size.sum()
            + self._episodic_size.sum()
            + self._semantic_size.sum()
            + self._archive_size.sum()
        )
        forgotten = self._size - live
        # Compacting copies the whole table: it waits until the table is also nearly full (a
        # table sized for full memories already is; a growing one compacts less often).
        if forgotten > max(live * _SLACK + _INITIAL_ITEMS, _FORGOTTEN_KEPT) and self._size > (
            self._capacity * (1 - _SLACK)
        ):
            self.compact()
        rows = (
            np.arange(len(self), dtype=np.int64)
            if rows is None
            else np.asarray(rows, dtype=np.int64).ravel()
        )
        self._clock[rows] = np.maximum(self._clock[rows], int(year))
        moves = self.consolidate(rows)
        tiers = self._rebalance_tiers(int(year), rows) if self._tiered else None
        if not self.reflection.enabled:
            return PoolYearEnd(moves, _NOTHING_WRITTEN, tiers)
        return PoolYearEnd(moves, self.reflect(int(year), rows), tiers)

    def _rebalance_tiers(self, year: int, rows: NDArray[np.int64]) -> PoolTiers:
        """``CognitiveMemory._rebalance_tiers`` for many households.

        First each household's faded episodic items (unpinned, not recalled this year, their
        decayed importance below ``demote_below``) move to the archive, best first; then its
        archived items retrieved ``promote_after`` times since their demotion move back, best
        first, their decay restarting this year. Each move goes for all households at once,
        and displaces what a write would; a promotion that an earlier one's displacements
        forgot is skipped.
        """
        moves = _Moves()
        settings = self.retention
        everyone, rows = rows, self._fading(year, rows)
        width = int(self._episodic_size[rows].max(initial=0))
        if width:
            block = self._episodic[rows, :width]
            held = block >= 0
            safe = np.where(held, block, 0)
            ages = np.where(held, year - self._since(safe), 0)
            faded = (
                held
                & ~self._pinned[safe]
                & (self._last_access[safe] < year)
                & (self._importance[safe] * self._decay_factors(ages) < settings.demote_below)
            )
            if faded.any():
                fading = np.flatnonzero(faded.any(axis=1))
                block, faded = block[fading], faded[fading]
                owners = rows[fading]
                self._episodic[owners, :width] = _packed(block, ~faded)
                self._episodic_size[owners] -= row_count(faded)
                demoted = _packed(block, faded)
                for column in range(int(row_count(faded).max())):
                    going = demoted[:, column] >= 0
                    moves.add(owners[going], demoted[going, column], _EPISODIC, _ARCHIVE)
                    dropped = self._demoted(owners[going], demoted[going, column])
                    moves.add(owners[going], dropped, _ARCHIVE, _EMPTY)
        promoted = self._promote(year, everyone, moves)
        if len(promoted):  # those still in episodic memory, each household's in their order
            owners = self._owner[promoted].astype(np.int64)
            kept = (self._episodic[owners] == promoted[:, None]).any(axis=1)
            promoted, owners = promoted[kept], owners[kept]
            promoted = promoted[np.argsort(owners, kind="stable")]
        return moves.tiers(promoted)

    def _fading(self, year: int, rows: NDArray[np.int64]) -> NDArray[np.int64]:
        """Those of ``rows`` whose episodic memory may hold an item faded below ``demote_below``.

        ``log(importance * decay ** (year - since))`` is ``year * log(decay) - key``, and a
        store is ranked by ``key``: only a memory whose last item's key passes
        ``year * log(decay) - log(demote_below)`` can hold a faded item. The margin covers the
        rounding of the two sides; the faded items themselves are found as
        ``CognitiveMemory`` finds them, by their scores. Most memories hold none in a year, and
        this reads one key per memory instead of every item's five fields.
        """
        demote_below = self.retention.demote_below
        if demote_below <= 0.0:  # no score is below 0
            return _NO_ROWS
        sizes = self._episodic_size[rows]
        rows, sizes = rows[sizes > 0], sizes[sizes > 0]
        limit = year * self._log_decay - math.log(demote_below) - 1e-9
        return rows[self._key[self._episodic[rows, sizes - 1]] > limit]

    def _promote(self, year: int, rows: NDArray[np.int64], moves: _Moves) -> NDArray[np.int64]:
        """Promote the rehearsed archived items of ``rows`` (see :meth:`_rebalance_tiers`).

        Returns:
            The items promoted, in the order they were (they may have left episodic memory
            since).
        """
        width = int(self._archive_size[rows].max(initial=0))
        if not width:
            return np.zeros(0, dtype=np.int64)
        block = self._archive[rows, :width]
        held = block >= 0
        safe = np.where(held, block, 0)
        hits = self._hits[safe]
        due = held & (hits >= 0) & (self._access_count[safe] - hits >= self.retention.promote_after)
        if not due.any():
            return np.zeros(0, dtype=np.int64)
        some = np.flatnonzero(due.any(axis=1))
        owners, rehearsed = rows[some], _packed(block[some], due[some])
        promoted = []
        for column in range(rehearsed.shape[1]):
            items = rehearsed[:, column]
            # CognitiveMemory skips an item an earlier promotion's displacements forgot, but
            # none can be: a promotion leaves the archive before its displacement enters it,
            # so the archive never overflows here.
            still = items >= 0
            if not still.any():  # past every household's last rehearsed item
                break
            going, items = owners[still], items[still]
            archive = self._archive[going, : int(self._archive_size[going].max())]
            self._archive[going, : archive.shape[1]] = _removed(
                archive, np.argmax(archive == items[:, None], axis=1)
            )
            self._archive_size[going] -= 1
            self._hits[items] = _EMPTY
            # As CognitiveMemory: the decay clock restarts (never goes back), and the ranking
            # key follows it, before the item enters episodic memory.
            self._rehearsed[items] = np.maximum(year, self._since(items))
            self._key[items] = self._ranking_keys(self._importance[items], self._rehearsed[items])
            moves.add(going, items, _ARCHIVE, _EPISODIC)
            evicted = self._insert_episodic(going, items)
            moves.add(going, evicted, _EPISODIC, _ARCHIVE)
            moves.add(going, self._demoted(going, evicted), _ARCHIVE, _EMPTY)
            promoted.append(items)
        return np.concatenate(promoted) if promoted else np.zeros(0, dtype=np.int64)

    # ---------------------------------------------------------------- reflection
    def reflect(self, year: int, rows: ArrayLike) -> PoolWrite:
        """``CognitiveMemory.reflect`` with the rule-based reflector, for many households.

        A household reflects once the importance written since its last reflection reaches the
        threshold, and not again after finding nothing new until something is written. Its
        reflection, worded by :func:`~simulation.memory.reflection.flood_experience`, rests on
        the flood and claim memories of its working and episodic memory and archive; it is not
        written when a reflection held in semantic memory rests on exactly those. A semantic memory
        over its capacity forgets its oldest unpinned reflection.

        Args:
            year: The year reflected in (the reflections' year).
            rows: The households that may reflect, each at most once.

        Returns:
            The reflections written, in the order of ``rows``, and the reflection each one
            displaced (or -1).
        """
        _check_years(year)
        rows = np.asarray(rows, dtype=np.int64).ravel()
        settings = self.reflection
        asked = rows[
            (self._since_reflection[rows] >= settings.threshold)
            & (self._next_seq[rows] != self._dry_seq[rows])
        ]
        if not len(asked):
            return _NOTHING_WRITTEN
        owner, found, flood = self._evidence_of(asked)
        counts = np.bincount(owner, minlength=len(asked))
        writing = (counts > 0) & ~self._held_reflections(asked, found, counts)
        # Having found nothing new, a household asks again only once something is written.
        idle = asked[~writing]
        self._dry_seq[idle] = self._next_seq[idle]
        if not writing.any():
            return _NOTHING_WRITTEN
        writers = asked[writing]
        # Only the writers' evidence is read into Python (most households asked write nothing).
        mine = writing[owner]
        found, flood, counts = found[mine], flood[mine], counts[writing]
        ends = np.cumsum(counts).tolist()
        years, amounts = self._year[found].tolist(), self._amount[found].tolist()
        denied = self._tagged("denied", found).tolist()
        agent_ids, seqs, floods = self.agent_ids, self._seq[found].tolist(), flood.tolist()
        contents, tag_sets, evidence = [], [], []
        for row, start, end in zip(writers.tolist(), [0, *ends[:-1]], ends, strict=True):
            flooded = [i for i in range(start, end) if floods[i]]
            claimed = [i for i in range(start, end) if not floods[i]]
            content, tags = flood_experience(
                year,
                [years[i] for i in flooded],
                [None if amounts[i] != amounts[i] else amounts[i] for i in flooded],  # NaN: none
                [denied[i] for i in claimed],
                [None if amounts[i] != amounts[i] else amounts[i] for i in claimed],
            )
            contents.append(content)
            tag_sets.append(("reflection", *tags))
            agent = agent_ids[row]
            evidence.append(tuple(f"{agent}:{seqs[i]}" for i in (*flooded, *claimed)))
        items = self._write_reflections(writers, contents, tag_sets, year)
        for index, ids in zip(items.tolist(), evidence, strict=True):
            self._evidence[index] = ids
        evicted = self._insert_semantic(writers, items, counts)
        stores = np.full(len(items), _SEMANTIC, dtype=np.int8)
        evicted_from = np.where(evicted >= 0, _SEMANTIC, _EMPTY).astype(np.int8)
        return PoolWrite(items, stores, evicted, evicted_from)

    def _evidence_of(
        self, rows: NDArray[np.int64]
    ) -> tuple[NDArray[np.int64], NDArray[np.int64], NDArray[np.bool_]]:
        """The flood and claim memories each of ``rows`` holds (in any store but semantic memory).

        Returns:
            Each one's household (a position in ``rows``), item and whether it is a flood (else
            a claim), a household's together and oldest first.
        """
        working = self._working.take(rows, axis=0)
        episodic = self._episodic[rows, : max(1, int(self._episodic_size[rows].max()))]
        archive = self._archive[rows, : int(self._archive_size[rows].max())]
        held = np.concatenate((working, episodic, archive), axis=1)
        held = held[held >= 0]
        source = self._source[held]
        # RuleBasedReflector's floods (is_flood), for many items at once.
        flood = (source == _FLOOD) | ((source == _SEED) & self._tagged("flood", held))
        evident = flood | (source == _CLAIM)
        # An item consolidated and still in working memory is in both stores: once. Items are
        # distinct across households, so the distinct indices are each household's distinct
        # items.
        found, first = np.unique(held[evident], return_index=True)
        flood = flood[evident][first]
        position = np.full(len(self), _EMPTY, dtype=np.int64)
        position[rows] = np.arange(len(rows))
        owner = position[self._owner[found]]
        order = np.lexsort((self._seq[found], owner))
        return owner[order], found[order], flood[order]

    def _tagged(self, tag: str, items: NDArray[np.int64]) -> NDArray[np.bool_]:
        """Whether each of ``items`` carries ``tag`` (looked up by tag set, kept per tag)."""
        flags = self._tag_flags.get(tag)
        if flags is None or len(flags) < len(self._tag_sets):  # tag sets are only ever added
            flags = np.array([tag in tags for tags in self._tag_sets], dtype=bool)
            self._tag_flags[tag] = flags
        return flags[self._tags[items]]

    def _held_reflections(
        self, rows: NDArray[np.int64], found: NDArray[np.int64], counts: NDArray[np.int64]
    ) -> NDArray[np.bool_]:
        """Whether a reflection in each of ``rows``' semantic memory rests on exactly its evidence.

        ``found`` holds the evidence, ``counts[n]`` items of ``rows[n]`` after those of the
        rows before it (see :meth:`_evidence_of`).

        A reflection this pool wrote rested on every flood and claim memory its household held
        then. A memory no store holds never comes back (the archive is a store), so it rests on
        exactly those held now when all of these are older than it and as many as it named.
        A reflection the pool was given is compared by its evidence's ids.
        """
        held = np.zeros(len(rows), dtype=bool)
        if not self._semantic_size[rows].any():
            return held
        width = int(self._semantic_size[rows].max())
        reflections = self._semantic[rows, :width]
        named = self._semantic_evidence[rows, :width]
        some = np.flatnonzero(counts)
        newest = np.full(len(rows), -1, dtype=np.int64)
        starts = np.zeros(len(rows) + 1, dtype=np.int64)
        np.cumsum(counts, out=starts[1:])
        newest[some] = np.maximum.reduceat(self._seq[found], starts[some])
        present = reflections >= 0
        older = self._seq[np.where(present, reflections, 0)] > newest[:, None]
        held = (present & (named == counts[:, None]) & older).any(axis=1)
        given = (present & (named < 0)).any(axis=1) & ~held & (counts > 0)
        for n in np.flatnonzero(given).tolist():
            agent = self.agent_ids[rows[n]]
            span = slice(starts[n], starts[n + 1])
            ids = frozenset(f"{agent}:{seq}" for seq in self._seq[found[span]].tolist())
            given_ids = (
                self._evidence.get(i, ()) for i in reflections[n][named[n] < 0].tolist() if i >= 0
            )
            held[n] = any(evidence and frozenset(evidence) == ids for evidence in given_ids)
        return held

    def _write_reflections(
        self,
        rows: NDArray[np.int64],
        contents: list[str],
        tag_sets: list[tuple[str, ...]],
        year: int,
    ) -> NDArray[np.int64]:
        """Add a reflection item to the item table for each of ``rows``; return the items."""
        importance = self.reflection.importance
        m = len(rows)
        start = self._size
        items = self._new_items(m)
        new = slice(start, start + m)
        self._owner[new] = rows
        seqs = self._next_seq[rows]
        self._seq[new] = seqs
        self._next_seq[rows] = seqs + 1
        self._text[new] = self._intern_texts(contents)
        self._tags[new] = [self._intern_tags(tags) for tags in tag_sets]
        self._source[new] = _REFLECTION
        self._importance[new] = importance
        self._year[new] = year
        self._amount[new] = np.nan
        self._pinned[new] = False
        self._consolidated[new] = True
        self._last_access[new] = year
        self._access_count[new] = 0
        self._key[new] = self._ranking_keys(np.full(m, importance), np.full(m, year))
        self._clock[rows] = np.maximum(self._clock[rows], year)
        # CognitiveMemory counts a reflection's importance, then starts again from nothing.
        self._since_reflection[rows] = 0.0
        return items

    def _insert_semantic(
        self, rows: NDArray[np.int64], items: NDArray[np.int64], named: NDArray[np.int64]
    ) -> NDArray[np.int64]:
        """Insert reflections at their rank in the semantic memories of ``rows``.

        Args:
            rows: The households, each at most once.
            items: Their new reflections.
            named: How many items each one's evidence names.

        Returns:
            The reflection each household forgot (its oldest unpinned), or -1.
        """
        evicted = np.full(len(rows), _EMPTY, dtype=np.int64)
        sizes = self._semantic_size[rows]
        width = int(sizes.max()) + 1
        block = self._semantic[rows, :width]
        evidence = self._semantic_evidence[rows, :width]
        held = block >= 0
        keys = np.where(held, self._key[np.where(held, block, 0)], np.inf)
        # Before every held item whose key is not lower: among equal keys the newest first.
        position = row_count((keys < self._key[items][:, None]) & held)
        block = _inserted(block, position, items)
        evidence = _inserted(evidence, position, named)
        sizes = sizes + 1
        over = sizes > self.reflection.semantic_capacity
        if over.any():
            full = block[over]
            seqs = np.where(self._pinned[full], np.iinfo(np.int32).max, self._seq[full])
            last = np.argmin(seqs, axis=1)
            if self._pinned[full[np.arange(len(full)), last]].any():
                agent = self.agent_ids[rows[over][self._pinned[full].all(axis=1)][0]]
                msg = f"{agent}: semantic memory is full of pinned items"
                raise ValueError(msg)
            evicted[over] = full[np.arange(len(full)), last]
            block[over] = _removed(full, last)
            evidence[over] = _removed(evidence[over], last)
            sizes[over] = self.reflection.semantic_capacity
        self._semantic[rows, :width] = block
        self._semantic_evidence[rows, :width] = evidence
        self._semantic_size[rows] = sizes
        for gone in evicted[evicted >= 0].tolist():
            self._evidence.pop(gone, None)
        return evicted

    def compact(self) -> None:
        """Drop the items no store holds any more, and unused texts once there are enough.

        Forgotten items stay in the item table until this runs (:meth:`end_year` runs it first
        once they reach an eighth of the live ones and ``_FORGOTTEN_KEPT``, and the table is
        seven eighths full), so item indices are valid until then. Texts no item uses stay until
        they are an eighth of those used.
        """
        # Marks rather than np.unique, and every pass over the table a block at a time: at
        # 100,000 full memories the table holds millions of items, and a whole-table index or
        # copy at once (145 MB of them, measured) would be the run's peak of memory.
        size, step = self._size, _COMPACT_BLOCK
        stores = (self._working, self._episodic, self._semantic, self._archive)
        alive = np.zeros(size + 1, dtype=bool)  # the last entry stands for the -1 of free slots
        for store in stores:
            alive[store] = True
        alive[size] = False
        # remap[i]: item i's index once the dead are dropped, or -1 (also at the end, for -1).
        remap = np.cumsum(alive, dtype=np.int32 if size <= np.iinfo(np.int32).max else np.int64)
        remap -= 1
        np.copyto(remap, _EMPTY, where=~alive)
        kept = 0
        for start in range(0, size, step):  # live items move down, never past unread ones
            live = np.flatnonzero(alive[start : start + step]) + start
            for name in (*_COLUMNS, "key", *self._tier_columns):
                column = getattr(self, "_" + name)
                column[kept : kept + len(live)] = column[live]
            kept += len(live)
        del alive
        for block in stores:
            per = step // block.shape[1] + 1  # rows of about ``step`` entries
            for start in range(0, len(block), per):
                rows = block[start : start + per]
                rows[...] = remap[rows]
        moved = ((int(remap[i]), ids) for i, ids in self._evidence.items())
        self._evidence = {i: ids for i, ids in moved if i >= 0}
        del remap
        self._size = kept
        codes = self._text[:kept]  # a view: renumbered in place
        used = np.zeros(len(self._texts), dtype=bool)
        used[codes] = True
        in_use = int(np.count_nonzero(used))
        if len(used) - in_use <= in_use * _SLACK:
            # Few texts unused (the items forgotten mostly share their texts with items kept):
            # rebuilding the text map would cost more than they take.
            return
        renumber = np.cumsum(used, dtype=self._text.dtype)
        renumber -= 1
        for start in range(0, kept, step):
            part = codes[start : start + step]
            part[...] = renumber[part]
        del renumber
        # The old text map goes before the new one is built: at 100,000 households each holds
        # over a million texts, and both at once would be the year's peak of memory.
        self._text_ids = {}
        self._texts = list(compress(self._texts, used.tolist()))
        self._keywords.keep(used)
        del used
        self._text_ids = {text: i for i, text in enumerate(self._texts)}

    # ---------------------------------------------------------------- retrieval
    def retrieve(
        self, rows: ArrayLike, top_k: int, year: int | ArrayLike | None = None
    ) -> PoolRetrieval:
        """``CognitiveMemory.retrieve_scored`` for each of ``rows``, by the pool's strategy.

        ``spec``: working memory comes first, most recent year first, then higher importance,
        then the newest; then episodic memory by decayed importance, skipping items already
        returned from working memory, and semantic memory's reflections merged in by decayed
        importance. ``weighted``: see :meth:`_retrieve_weighted`. Every returned item's access
        count and last access are refreshed.

        Args:
            rows: The households retrieving, each at most once.
            top_k: Maximum items per household.
            year: The year of retrieval, one for all or one per row; ``None``: each
                household's latest year seen.

        Returns:
            The items, scores, stores and counts, best first.

        Raises:
            ValueError: For a negative ``top_k`` or a repeated row.
        """
        rows = np.asarray(rows, dtype=np.int64).ravel()
        m = len(rows)
        if top_k < 0:
            msg = f"top_k must be a non-negative integer, got {top_k!r}"
            raise ValueError(msg)
        if _repeats(rows, len(self)):
            msg = "a pool retrieval takes each household at most once"
            raise ValueError(msg)
        if year is not None:
            _check_years(year)
        # As CognitiveMemory: a year before the latest seen counts as it (no item is younger).
        now = (
            self._clock[rows]
            if year is None
            else np.maximum(np.asarray(year, dtype=np.int64), self._clock[rows])
        )
        if top_k == 0 or m == 0:
            return _nothing_retrieved(m, top_k)
        if self.retrieval.strategy == "weighted":
            block = _WEIGHTED_BLOCK
            if self._query is not None:
                self._keywords.update(self._texts)
                cells = self._keywords.cells_per_household
                block = max(1, min(_RELEVANCE_BLOCK, _FREQUENCY_CELLS // cells))
            blocks = [
                self._retrieve_weighted(rows[i : i + block], top_k, now[i : i + block])
                for i in range(0, m, block)
            ]
            if len(blocks) == 1:
                return blocks[0]
            return PoolRetrieval(*(np.concatenate(part) for part in zip(*blocks, strict=True)))
        return self._retrieve_spec(rows, top_k, now)

    def _retrieve_spec(
        self, rows: NDArray[np.int64], top_k: int, now: NDArray[np.int64]
    ) -> PoolRetrieval:
        """``spec`` retrieval (see :meth:`retrieve`), reflections merged in by score."""
        m = len(rows)
        # take, not fancy indexing: numpy copies whole rows many times faster this way.
        working = self._working.take(rows, axis=0)
        held = working >= 0
        # Most recent year first, then importance, then the newest (seq); empty slots last.
        order = np.lexsort(
            (-self._seq[working], -self._importance[working], -self._year[working], ~held),
            axis=-1,
        )
        width = working.shape[1]
        # Flat positions and one take: take_along_axis indexes by two broadcast index arrays.
        working = working.take(order + (np.arange(m) * width)[:, None])
        from_working = np.minimum(self._working_size[rows], top_k)
        working[np.arange(width) >= from_working[:, None]] = _EMPTY
        # At most top_k episodic candidates are needed: each one skipped was returned from
        # working memory, which then returned one item fewer than top_k.
        candidates = self._episodic[rows, :top_k]
        fresh = candidates >= 0
        for slot in range(width):  # a few slots: cheaper than one 3-d comparison
            fresh &= candidates != working[:, slot, None]
        rank = row_cumsum(fresh)  # a fresh candidate's place among its household's
        # Households with reflections or archived items merge them in below, from every fresh
        # candidate.
        merging = self._merging(rows)
        if len(merging):
            heads = self._heads(
                rows[merging],
                top_k,
                candidates[merging],
                fresh[merging],
                rank[merging],
                working[merging],
            )
        fresh &= rank <= (top_k - from_working)[:, None]
        # Working memory's items first (its first columns), then the fresh candidates in their
        # order: each goes straight to its column, with no sort.
        items = np.full((m, top_k), _EMPTY, dtype=np.int64)
        shown = min(width, top_k)
        items[:, :shown] = working[:, :shown]
        column = from_working[:, None] + rank - 1
        items.ravel()[(column + (np.arange(m) * top_k)[:, None])[fresh]] = candidates[fresh]
        got = items >= 0
        counts = row_count(got)
        # Working memory's items come first, so an item's store follows from its position.
        stores = np.full(items.shape, _EMPTY, dtype=np.int8)
        stores[got] = _EPISODIC
        stores[np.arange(items.shape[1]) < from_working[:, None]] = _WORKING
        if len(merging):
            taken = from_working[merging]
            self._merge_long_term(now[merging], heads, taken, items, stores, merging)
            got = items >= 0
            counts = row_count(got)
        found = items[got]  # row by row, each row's from the front
        when = np.repeat(now, counts)
        scores = np.full(items.shape, np.nan)
        scores[got] = self._importance[found] * self._decay_factors(when - self._since(found))
        self._access_count[found] += 1
        self._last_access[found] = np.maximum(self._last_access[found], when)
        return PoolRetrieval(items, scores, stores, counts)

    def _merging(self, rows: NDArray[np.int64]) -> NDArray[np.int64]:
        """The positions in ``rows`` of the households holding reflections or archived items."""
        if not (self.reflection.enabled or self._tiered):  # the usual pool: neither store
            return _NO_ROWS
        some = np.zeros(len(rows), dtype=bool)
        if self.reflection.enabled:
            some |= self._semantic_size[rows] > 0
        if self._tiered:
            some |= self._archive_size[rows] > 0
        return np.flatnonzero(some)

    def _heads(
        self,
        rows: NDArray[np.int64],
        top_k: int,
        candidates: NDArray[np.int64],
        fresh: NDArray[np.bool_],
        rank: NDArray[np.int64],
        returned: NDArray[np.int64],
    ) -> list[tuple[int, NDArray[np.int64]]]:
        """What :meth:`_merge_long_term` merges for ``rows``: each long-term store's candidates.

        Args:
            rows: The households.
            top_k: The items the retrieval returns at most.
            candidates: Their first ``top_k`` episodic items (fewer where the store is smaller).
            fresh: Which of these working memory did not return.
            rank: A fresh candidate's place among its household's (from 1): the retrieval has it
                already, so the episodic head is placed by it rather than packed again.
            returned: The items working memory returned, -1 past them.
        """
        m, width = len(rows), top_k + 1
        first = np.full((m, width), _EMPTY, dtype=np.int64)
        place = rank - 1 + (np.arange(m) * width)[:, None]
        first.ravel()[place[fresh]] = candidates[fresh]
        heads = [(_EPISODIC, first)]
        if self.reflection.enabled:  # a store's own items lie packed at its front
            semantic = np.full((m, width), _EMPTY, dtype=np.int64)
            shown = min(top_k, self._semantic.shape[1])
            semantic[:, :shown] = self._semantic[rows, :shown]
            heads.append((_SEMANTIC, semantic))
        if self._tiered:  # an archived item may still be in working memory
            archived = self._archive[rows, :top_k]
            unseen = archived >= 0
            for slot in range(returned.shape[1]):
                unseen &= archived != returned[:, slot, None]
            heads.append((_ARCHIVE, _packed(archived, unseen, width)))
        return heads

    def _merge_long_term(
        self,
        now: NDArray[np.int64],
        heads: list[tuple[int, NDArray[np.int64]]],
        from_working: NDArray[np.int64],
        items: NDArray[np.int64],
        stores: NDArray[np.int8],
        at: NDArray[np.int64],
    ) -> None:
        """The long-term part of a ``spec`` retrieval by households with several such stores.

        ``CognitiveMemory`` merges its long-term stores by their heads: of the next candidate
        of each store (episodic, semantic, archive), the higher decayed importance first, and
        on equal scores the newer item. A store's order is by ranking key, which may disagree
        with the scores in their last bit, so the merge goes head by head, a column at a time
        for all the households, rather than sorting the candidates.

        Args:
            now: The year each household retrieves in.
            heads: Each store's code and its candidates for the households, best first, then
                -1 (at least one empty column more than the merge can take: ``top_k + 1``).
            from_working: How many items each took from working memory.
            items: The retrieval's items, ``top_k`` columns: the rows ``at`` are theirs, and
                past their working memory's items they receive the merge's, in order.
            stores: The items' store codes, filled alike.
            at: The households' rows in ``items`` and ``stores``.
        """
        top_k = items.shape[1]
        need = top_k - from_working
        m = len(now)
        own = np.arange(m)
        width = top_k + 1
        # Each store's candidates flat, an empty slot scored -1 (below every decayed importance)
        # so that it never goes first; a head is a flat position, one per household.
        scored = []
        for _, block in heads:
            held = block >= 0
            safe = np.where(held, block, 0)
            ages = np.where(held, now[:, None] - self._since(safe), 0)
            scores = np.where(held, self._importance[safe] * self._decay_factors(ages), -1.0)
            scored.append((block.ravel(), scores.ravel(), self._seq[safe].ravel()))
        at_head = [own * width for _ in heads]
        store_codes = np.array([code for code, _ in heads] + [_EMPTY], dtype=np.int8)
        merged = np.full((m, top_k), _EMPTY, dtype=np.int64)
        codes = np.full((m, top_k), _EMPTY, dtype=np.int8)
        after_all = np.iinfo(np.int64).max  # the seq of no head: newer than none
        for column in range(top_k):
            best = np.full(m, _EMPTY, dtype=np.int64)  # which store's head goes next
            best_score = np.full(m, -1.0)
            best_seq = np.full(m, after_all, dtype=np.int64)
            for n, (_, scores, seqs) in enumerate(scored):
                score, seq = scores.take(at_head[n]), seqs.take(at_head[n])
                better = (score > best_score) | ((score == best_score) & (seq > best_seq))
                best = np.where(better, n, best)
                best_score = np.where(better, score, best_score)
                best_seq = np.where(better, seq, best_seq)
            best[column >= need] = _EMPTY
            taken = merged[:, column]
            for n, (block, _, _) in enumerate(scored):
                taking = best == n
                np.copyto(taken, block.take(at_head[n]), where=taking)
                at_head[n] += taking
            codes[:, column] = store_codes[best]  # -1 (none) reads the last, empty code
        # Past working memory's items, each column takes the merge's next one.
        after = np.arange(top_k) - from_working[:, None]
        place = np.maximum(after, 0)
        items[at] = np.where(after >= 0, merged[own[:, None], place], items[at])
        stores[at] = np.where(after >= 0, codes[own[:, None], place], stores[at])

    def _retrieve_weighted(
        self, rows: NDArray[np.int64], top_k: int, now: NDArray[np.int64]
    ) -> PoolRetrieval:
        """``weighted`` retrieval, as ``CognitiveMemory`` ranks it.

        Each distinct item of a household's working, episodic and semantic memory and archive is
        a candidate, scored
        ``w_recency * recency + w_importance * importance (+ w_relevance * relevance)``: each
        term min-max scaled over the household's candidates (0.5 for all when they span 1e-12
        or less), recency being ``recency_decay ** (year - last access)`` and relevance the
        TF-IDF similarity of an item's text to the query among the household's candidates
        (with a query only). The best ``top_k`` come first by score, then the newest.
        """
        settings = self.retrieval
        m = len(rows)
        working = self._working.take(rows, axis=0)
        # Ranked from the front: the longest of these households' episodic memories is enough.
        episodic = self._episodic[rows, : int(self._episodic_size[rows].max())]
        # A working item consolidated into episodic memory stays in working memory: once.
        again = np.zeros(episodic.shape, dtype=bool)
        for slot in range(working.shape[1]):
            again |= episodic == working[:, slot, None]
        # Reflections, then archived items, last, as CognitiveMemory lists its stores' items.
        semantic = self._semantic[rows, : int(self._semantic_size[rows].max())]
        archive = self._archive[rows, : int(self._archive_size[rows].max())]
        archived = archive >= 0
        for slot in range(working.shape[1]):  # an archived item may still be in working memory
            archived &= archive != working[:, slot, None]
        held = np.concatenate(
            (working >= 0, (episodic >= 0) & ~again, semantic >= 0, archived), axis=1
        )
        if not held.any():
            return _nothing_retrieved(m, top_k)
        # Row-major: each household's candidates next to each other, its working items first.
        owner, column = np.nonzero(held)
        found = np.concatenate((working, episodic, semantic, archive), axis=1)[owner, column]
        counts = np.bincount(owner, minlength=m)
        starts = np.zeros(m, dtype=np.int64)
        np.cumsum(counts[:-1], out=starts[1:])
        rate = self.decay_rate if settings.recency_decay is None else settings.recency_decay
        recency = self._decay_factors(now[owner] - self._last_access[found], float(rate))
        score = settings.w_recency * _scaled(recency, owner, starts, counts) + (
            settings.w_importance * _scaled(self._importance[found], owner, starts, counts)
        )
        if self._query is not None:
            relevance = self._keywords.scores(self._query, self._text[found], owner, counts)
            score = score + settings.w_relevance * _scaled(relevance, owner, starts, counts)
        # Each household's candidates side by side in a row, sorted row by row: by score, then
        # the newest (seq), best first. One lexsort of all of them, by household first, took
        # three times as long.
        place = np.arange(len(found)) - starts[owner]
        by_score = np.full((m, int(counts.max())), -np.inf)  # scores are >= 0: gaps sort last
        by_score[owner, place] = score
        by_seq = np.zeros(by_score.shape, dtype=np.int64)
        by_seq[owner, place] = self._seq[found]
        best = np.lexsort((-by_seq, -by_score), axis=1)[:, :top_k]
        got = np.arange(best.shape[1]) < np.minimum(counts, top_k)[:, None]
        chosen = (starts[:, None] + best)[got]  # row by row, best first
        found = found[chosen]
        shown = (slice(None), slice(0, best.shape[1]))
        items = np.full((m, top_k), _EMPTY, dtype=np.int64)
        items[shown][got] = found
        scores = np.full((m, top_k), np.nan)
        scores[shown][got] = score[chosen]
        stores = np.full((m, top_k), _EMPTY, dtype=np.int8)
        where = np.searchsorted(
            np.cumsum([working.shape[1], episodic.shape[1], semantic.shape[1]]),
            column[chosen],
            side="right",
        )
        codes = np.array([_WORKING, _EPISODIC, _SEMANTIC, _ARCHIVE], dtype=np.int8)
        stores[shown][got] = codes[where]
        when = now[owner[chosen]]
        self._access_count[found] += 1
        self._last_access[found] = np.maximum(self._last_access[found], when)
        return PoolRetrieval(items, scores, stores, np.minimum(counts, top_k))


def _packed(
    block: NDArray[np.int64], keep: NDArray[np.bool_], width: int | None = None
) -> NDArray[np.int64]:
    """The entries of ``block`` where ``keep``, each row's in its order from the front, then -1.

    Args:
        block: The entries, a row per household.
        keep: Which to keep.
        width: The columns of the result (``block``'s if ``None``; entries past it are cut).
    """
    m = len(block)
    width = block.shape[1] if width is None else width
    packed = np.full((m, width), _EMPTY, dtype=block.dtype)
    # Each kept entry straight to its place among its row's: no sort.
    place = row_cumsum(keep) - 1
    keep = keep & (place < width)
    packed.ravel()[(place + (np.arange(m) * width)[:, None])[keep]] = block[keep]
    return packed


class _Moves:
    """The moves of a year end's tiering, gathered a step at a time (see :class:`PoolTiers`)."""

    __slots__ = ("_parts",)

    def __init__(self) -> None:
        self._parts: list[tuple[NDArray[np.int64], NDArray[np.int64], int, int]] = []

    def add(self, rows: NDArray[np.int64], items: NDArray[np.int64], left: int, to: int) -> None:
        """Note that ``items[i]`` (-1: none) left store ``left`` of ``rows[i]`` for ``to``."""
        real = items >= 0
        if real.any():
            self._parts.append((rows[real], items[real], left, to))

    def tiers(self, promoted: NDArray[np.int64]) -> PoolTiers:
        """The moves, each household's together in the order they happened, and ``promoted``."""
        parts = self._parts
        if not parts:
            rows = items = np.zeros(0, dtype=np.int64)
            left = to = np.zeros(0, dtype=np.int8)
        else:
            rows = np.concatenate([p[0] for p in parts])
            items = np.concatenate([p[1] for p in parts])
            left = np.concatenate([np.full(len(p[0]), p[2], dtype=np.int8) for p in parts])
            to = np.concatenate([np.full(len(p[0]), p[3], dtype=np.int8) for p in parts])
            order = np.argsort(rows, kind="stable")  # each household's in the order noted
            rows, items, left, to = rows[order], items[order], left[order], to[order]
        return PoolTiers(rows, items, left, to, promoted)


def _inserted(block: NDArray, position: NDArray[np.int64], values: NDArray) -> NDArray:
    """``block`` with ``values[r]`` inserted at column ``position[r]`` of each row ``r``.

    The last column falls off: it is empty in a store one over its capacity at most.
    """
    columns = np.arange(block.shape[1])
    shifted = np.empty_like(block)
    shifted[:, 1:] = block[:, :-1]
    shifted[:, 0] = _EMPTY
    return np.where(
        columns < position[:, None],
        block,
        np.where(columns == position[:, None], values[:, None], shifted),
    )


def _removed(block: NDArray, column: NDArray[np.int64]) -> NDArray:
    """``block`` without column ``column[r]`` of each row ``r``, an empty slot at the end."""
    after = np.empty_like(block)
    after[:, :-1] = block[:, 1:]
    after[:, -1] = _EMPTY
    return np.where(np.arange(block.shape[1]) < column[:, None], block, after)


def _nothing_retrieved(m: int, top_k: int) -> PoolRetrieval:
    """The retrieval of ``m`` households that got nothing (``top_k`` columns of padding)."""
    return PoolRetrieval(
        np.full((m, top_k), _EMPTY, dtype=np.int64),
        np.full((m, top_k), np.nan),
        np.full((m, top_k), _EMPTY, dtype=np.int8),
        np.zeros(m, dtype=np.int64),
    )


def _scaled(
    values: NDArray[np.float64],
    owner: NDArray[np.int64],
    starts: NDArray[np.int64],
    counts: NDArray[np.int64],
) -> NDArray[np.float64]:
    """``values`` min-max scaled to [0, 1] within each household's run of them.

    A household's values lie together, from ``starts[h]``, ``counts[h]`` of them (``owner``
    names each one's household). Where a household's values span 1e-12 or less they carry no
    ranking and are all 0.5, as ``CognitiveMemory`` scales them.
    """
    some = np.flatnonzero(counts)
    low = np.zeros(len(counts))
    high = np.zeros(len(counts))
    low[some] = np.minimum.reduceat(values, starts[some])
    high[some] = np.maximum.reduceat(values, starts[some])
    span = high - low
    flat = span <= 1e-12
    span[flat] = 1.0  # not divided by: those households' values are 0.5
    scaled = (values - low[owner]) / span[owner]
    scaled[flat[owner]] = 0.5
    return scaled


def _copy_of(text: str) -> str:
    """A string equal to ``text`` but not ``text`` itself (unless a cached one-letter string)."""
    return text[:1] + text[1:]


def _importances_written(
    importance: float | ArrayLike, importance_index: ArrayLike | None, m: int
) -> tuple[NDArray[np.float64], tuple[NDArray[np.float64], NDArray[np.int64]] | None]:
    """Each of ``m`` rows' importance, and the importances shared by index (see :meth:`write`).

    Returns:
        The importance of each row, and, given ``importance_index``, the distinct importances
        with each row's position among them (else ``None``).
    """
    if importance.__class__ in BOOLEANS or _holds_a_boolean(importance):
        # As CognitiveMemory refuses one: a float array would take True for 1.0.
        msg = f"importance must be a number in [0, 1], got {importance!r}"
        raise ValueError(msg)
    if importance_index is None:
        return _per_row(importance, m, np.float64), None
    distinct = np.asarray(importance, dtype=np.float64).ravel()
    where = np.asarray(importance_index, dtype=np.int64).ravel()
    if len(where) != m:
        msg = f"{len(where)} importance indices for {m} rows"
        raise ValueError(msg)
    return distinct[where], (distinct, where)


def _holds_a_boolean(values: object) -> bool:
    """Whether a sequence or array of values has a boolean among them (``[True, 0.5]``)."""
    if isinstance(values, (int, float)):
        return False
    if isinstance(values, (list, tuple)):  # the array engine's: a few importances, one a group
        return any(value.__class__ in BOOLEANS for value in values)
    if isinstance(values, np.ndarray) and values.dtype != object:
        return values.dtype == np.bool_
    return any(value.__class__ in BOOLEANS for value in np.asarray(values, dtype=object).flat)


def _per_row(value: float | ArrayLike, m: int, dtype: type) -> NDArray:
    """``value`` as a new array of ``m`` entries: one for all, or one per row."""
    if isinstance(value, (int, float)):  # the usual write: no broadcast machinery
        return np.full(m, value, dtype=dtype)
    return np.broadcast_to(np.asarray(value, dtype=dtype), (m,)).copy()


_STORES_ASKED = ("auto", "working", "episodic")


def _stores_asked(store: str | ArrayLike, m: int) -> NDArray[np.str_]:
    """Each of ``m`` rows' ``store`` (one for all, or one per row), every one checked.

    Raises:
        ValueError: For a store other than ``auto``, ``working`` and ``episodic``.
    """
    asked = np.broadcast_to(np.asarray(store, dtype=np.str_), (m,))
    unknown = ~np.isin(asked, _STORES_ASKED)
    if unknown.any():
        msg = f"store must be 'working', 'episodic' or 'auto', got {str(asked[unknown][0])!r}"
        raise ValueError(msg)
    return asked


# The years an int32 column holds, but its least value, which stands for "not rehearsed".
_YEARS = (int(np.iinfo(np.int32).min) + 1, int(np.iinfo(np.int32).max))


def _check_years(year: int | ArrayLike) -> None:
    """Refuse what ``CognitiveMemory`` refuses as a year, and what 32-bit columns would wrap.

    Raises:
        TypeError: For a year that is not an integer (a float, a bool), naming it.
        ValueError: For a year outside ``-(2**31 - 1) .. 2**31 - 1``, naming it.
    """
    if year.__class__ is int:  # the usual call: one year for every household
        low = high = year
    else:
        years = np.asarray(year)
        if not years.size:
            return
        if years.dtype.kind == "O" and all(_whole(y) for y in years.flat):
            low, high = int(min(years.flat)), int(max(years.flat))  # beyond 64 bits
        elif isinstance(year, BOOLEANS) or years.dtype.kind not in "iu":
            # 3e9 was stored as -1294967296, True as 1, as the columns took them.
            shown = year if years.ndim == 0 else years.ravel()[0]
            msg = f"year must be an integer, got {shown!r}"
            raise TypeError(msg)
        else:
            low, high = int(years.min()), int(years.max())
    if low < _YEARS[0] or high > _YEARS[1]:
        outside = low if low < _YEARS[0] else high
        msg = (
            f"year must be within {_YEARS[0]} .. {_YEARS[1]} (a memory pool keeps 32-bit "
            f"years), got {outside}"
        )
        raise ValueError(msg)


def _whole(value: object) -> bool:
    """Whether ``value`` is an integer but not a boolean (Python's or numpy's)."""
    return isinstance(value, int | np.integer) and not isinstance(value, BOOLEANS)


def _repeats(rows: NDArray[np.int64], households: int) -> bool:
    """Whether ``rows`` names a household twice (or one outside ``0 .. households - 1``)."""
    if not len(rows):
        return False
    if 16 * len(rows) < households:  # a few rows: sorting them beats counting every household
        ordered = np.sort(rows)
        _check_within(int(ordered[0]), int(ordered[-1]), rows, households)
        return bool((ordered[1:] == ordered[:-1]).any())
    _check_within(int(rows.min()), int(rows.max()), rows, households)
    return bool(np.bincount(rows, minlength=households).max() > 1)


def _check_within(low: int, high: int, rows: NDArray[np.int64], households: int) -> None:
    """Refuse ``rows`` (lowest ``low``, highest ``high``) naming no household of the pool."""
    if low < 0 or high >= households:
        outside = rows[(rows < 0) | (rows >= households)]
        msg = f"rows must be in 0 .. {households - 1}, got {outside[0]}"
        raise IndexError(msg)


def _check_poolable(memory: CognitiveMemory, first: CognitiveMemory) -> None:
    """Refuse a memory a pool cannot hold (see :meth:`MemoryPool.from_memories`)."""
    settings = (
        memory.working_capacity,
        memory.episodic_capacity,
        memory.consolidation_threshold,
        memory.decay_rate,
    )
    if settings != (
        first.working_capacity,
        first.episodic_capacity,
        first.consolidation_threshold,
        first.decay_rate,
    ):
        msg = f"memory of {memory.agent_id} has other capacities, threshold or decay than the first"
        raise ValueError(msg)
    if (memory.retrieval, memory.retention, memory.reflection) != (
        first.retrieval,
        first.retention,
        first.reflection,
    ):
        msg = (
            f"memory of {memory.agent_id} has other retrieval, retention or reflection settings "
            "than the first"
        )
        raise ValueError(msg)
    problems = []
    if memory.retrieval.query is not None and type(memory.relevance) is not KeywordRelevance:
        problems.append(f"relevance scored by {type(memory.relevance).__name__}")
    if memory.reflection.enabled and type(memory.reflector) is not RuleBasedReflector:
        problems.append(f"reflection by {type(memory.reflector).__name__}")
    if len(memory._semantic) > memory.reflection.semantic_capacity or (
        len(memory._semantic) and not memory.reflection.enabled
    ):
        problems.append("semantic items beyond what its reflection settings keep")
    if memory.retention.policy != "tiered":
        if len(memory._archive):
            problems.append("archived items without tiered retention")
        stored = (*memory._working, *memory._episodic.ranked())
        if any(item.rehearsed is not None for item in stored):
            problems.append("rehearsed items without tiered retention")
    if problems:
        msg = f"memory of {memory.agent_id}: a pool does not implement {', '.join(problems)}"
        raise ValueError(msg)


def _distinct_count(memory: CognitiveMemory) -> int:
    """How many distinct items a memory's stores hold."""
    stores = (
        *memory._working,
        *memory._episodic.ranked(),
        *memory._semantic.ranked(),
        *memory._archive.ranked(),
    )
    return len({item.seq for item in stores})
