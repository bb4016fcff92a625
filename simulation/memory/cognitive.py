"""CognitiveMemory: a household's working, episodic, semantic and archive memory.

This implements the contract of DESIGN.md section 3 with the fixes of section 9:

* working memory is a FIFO of ``working_capacity`` items;
* episodic memory holds at most ``episodic_capacity`` items and forgets by a configurable
  retention policy; pinned items are never forgotten;
* ``consolidate`` copies each working item at or above the threshold into episodic memory once;
* ``retrieve`` never returns one item twice, and ordering uses insertion sequence, never time.

Beyond the seed specification it offers weighted (recency/importance/relevance) retrieval with
query relevance and metadata filters, rule-based or pluggable reflection into semantic memory,
tiered retention with promotion and demotion, and pre-seeded memories.

Example:
    >>> mem = CognitiveMemory(agent_id="H001")
    >>> _ = mem.update_after_flood(damage=50_000, year=3)
    >>> mem.retrieve(top_k=1, current_year=4)
    ['Year 3: A flood occurred causing $50,000 in damages']
"""

from __future__ import annotations

import heapq
import itertools
import math
from collections.abc import Mapping
from dataclasses import asdict, fields
from operator import attrgetter
from typing import TYPE_CHECKING, Any, NamedTuple, TypeVar

from simulation.memory.item import SOURCES, MemoryItem, ScoredMemory
from simulation.memory.reflection import RuleBasedReflector
from simulation.memory.relevance import KeywordRelevance
from simulation.memory.settings import (
    BOOLEANS,
    ReflectionSettings,
    RetentionSettings,
    RetrievalSettings,
    as_integer,
    check_fraction,
    check_non_negative,
    check_positive_int,
)
from simulation.memory.snapshot import check_snapshot
from simulation.memory.stores import LongTermStore

if TYPE_CHECKING:
    from collections.abc import Callable, Iterable, KeysView, Sequence

    from simulation.memory.reflection import Reflector
    from simulation.memory.relevance import RelevanceScorer

__all__ = [
    "FORMAT_VERSION",
    "CognitiveMemory",
    "Consolidation",
    "Eviction",
    "WriteResult",
    "YearEnd",
]

#: Version of the :meth:`CognitiveMemory.to_dict` layout.
FORMAT_VERSION = 1

_KEYWORD_RELEVANCE = KeywordRelevance()
_RULE_REFLECTOR = RuleBasedReflector()
_DEFAULT_RETRIEVAL = RetrievalSettings()
_DEFAULT_RETENTION = RetentionSettings()
_DEFAULT_REFLECTION = ReflectionSettings()
# Semantic memory and the archive stay empty unless reflection or tiered retention is on. Until
# a memory first writes to one, it reads these shared empty stores, which nothing writes to,
# instead of owning two stores of its own: about 400 bytes less per household.
_NO_SEMANTIC = LongTermStore("semantic", 0, 1.0)
_NO_ARCHIVE = LongTermStore("archive", 0, 1.0)
# Working memory is read most recent year first, ties by importance, then newest insertion.
_WORKING_ORDER = attrgetter("year", "importance", "seq")
# Named tuples built on hot paths go through tuple.__new__: their generated __new__ is a Python
# function and costs twice as much (about 290 against 125 ns).
_new_tuple = tuple.__new__


class Eviction(NamedTuple):
    """An item leaving a store: forgotten (``to`` is ``None``) or moved to another store."""

    item: MemoryItem
    store: str
    to: str | None


class WriteResult(NamedTuple):
    """What one memory write did: the item, where it went, and what it displaced."""

    item: MemoryItem
    store: str
    evictions: tuple[Eviction, ...]


class Consolidation(NamedTuple):
    """Items copied from working into episodic memory and what that displaced."""

    transferred: tuple[MemoryItem, ...]
    evictions: tuple[Eviction, ...]


class YearEnd(NamedTuple):
    """Everything the year-end pass changed (see :meth:`CognitiveMemory.end_year`)."""

    transferred: tuple[MemoryItem, ...]
    evictions: tuple[Eviction, ...]
    promoted: tuple[MemoryItem, ...]
    reflections: tuple[MemoryItem, ...]


# What most year ends change: nothing (shared, being immutable and empty).
_NO_CONSOLIDATION = Consolidation((), ())
_QUIET_YEAR_END = YearEnd((), (), (), ())


def _fixed(name: str, doc: str) -> property:
    """A read-only property for the setting ``name``, held in the slot ``_<name>``.

    Read through ``attrgetter`` (C code); assigning raises an ``AttributeError`` that says what
    to do instead, where a property without a setter would only say it has none.
    """

    def refuse(memory: CognitiveMemory, value: object) -> None:
        msg = f"CognitiveMemory.{name} is fixed at construction: build a new memory instead"
        raise AttributeError(msg)

    return property(attrgetter(f"_{name}"), refuse, doc=doc)


def _settings(name: str, value: Any, kind: type, default: Any) -> Any:
    """``value``, or ``default`` for ``None``; a TypeError unless it is a ``kind``."""
    if value is None:
        return default
    if not isinstance(value, kind):
        msg = f"{name}: expected a {kind.__name__}, got {type(value).__name__} {value!r}"
        raise TypeError(msg)
    return value


class CognitiveMemory:
    """A household's memory: FIFO working memory and decaying long-term stores.

    Args:
        agent_id: Owner id; item ids are ``"<agent_id>:<seq>"``.
        working_capacity: Items working memory holds before evicting the oldest.
        episodic_capacity: Items episodic memory holds before the retention policy forgets one.
        consolidation_threshold: Importance at or above which an item belongs in episodic memory
            (``add_experience`` routes there; ``consolidate`` copies working items there).
        decay_rate: Per-year decay of importance in (0, 1] for ranking and retention.
        retrieval: Retrieval settings; the seed-000 ``spec`` strategy by default.
        retention: Retention settings; drop the lowest decayed importance by default.
        reflection: Reflection settings; off by default.
        relevance: Relevance scorer for queries; TF-IDF keywords by default.
        reflector: Reflector used at year end; rule-based by default.
        texts: A pool of texts shared by many memories, or ``None``. A written text equal to
            one in the pool is kept as the pool's string object, so that households remembering
            the same words (one policy note, one premium in one year) hold one copy between
            them: in a run most remembered texts repeat another household's. Whoever creates
            the pool empties it (the model does so every year).

    The capacities, the decay rate and the three settings objects are read-only attributes:
    the stores are sized and ranked by them when made, so a new value would be honoured by
    some paths and not others (and would slip past the checks above). Build a new memory to
    change them. ``consolidation_threshold`` may be reassigned (checked as at construction):
    consolidation reads it afresh and moves every working item it makes due.

    Raises:
        ValueError: For a capacity below 1, a threshold outside [0, 1] or a decay rate outside
            (0, 1], naming the argument and the value.
        TypeError: For ``retrieval``, ``retention`` or ``reflection`` that is not ``None`` or
            a settings object of its class (a policy name, a mapping), naming the argument.
    """

    __slots__ = (
        "_archive",
        "_clock",
        "_consolidation_threshold",
        "_decay_rate",
        "_demoted_hits",
        "_dry_reflection_seq",
        "_episodic",
        "_episodic_capacity",
        "_next_seq",
        "_reflection",
        "_retention",
        "_retrieval",
        "_semantic",
        "_since_reflection",
        "_unconsolidated_max",
        "_working",
        "_working_capacity",
        "agent_id",
        "reflector",
        "relevance",
        "texts",
    )

    def __init__(
        self,
        agent_id: str,
        working_capacity: int = 10,
        episodic_capacity: int = 50,
        consolidation_threshold: float = 0.7,
        decay_rate: float = 0.95,
        *,
        retrieval: RetrievalSettings | None = None,
        retention: RetentionSettings | None = None,
        reflection: ReflectionSettings | None = None,
        relevance: RelevanceScorer | None = None,
        reflector: Reflector | None = None,
        texts: dict[str, str] | None = None,
    ):
        check_positive_int("working_capacity", working_capacity)
        check_positive_int("episodic_capacity", episodic_capacity)
        check_fraction("consolidation_threshold", consolidation_threshold)
        check_fraction("decay_rate", decay_rate, low_open=True)
        self.agent_id = str(agent_id)
        self._working_capacity = working_capacity
        self._episodic_capacity = episodic_capacity
        self._consolidation_threshold = float(consolidation_threshold)
        self._decay_rate = float(decay_rate)
        # Checked here: a policy name or a mapping would otherwise be stored and fail as an
        # AttributeError at the first overflow, year end or retrieval that reads a field.
        self._retrieval = _settings("retrieval", retrieval, RetrievalSettings, _DEFAULT_RETRIEVAL)
        self._retention = _settings("retention", retention, RetentionSettings, _DEFAULT_RETENTION)
        self._reflection = _settings(
            "reflection", reflection, ReflectionSettings, _DEFAULT_REFLECTION
        )
        if self._retrieval.relevance == "embedding" and relevance is None:
            msg = "retrieval.relevance='embedding' needs an embedding relevance scorer"
            raise ValueError(msg)
        self.relevance = relevance or _KEYWORD_RELEVANCE
        self.reflector = reflector or _RULE_REFLECTOR
        self.texts = texts
        self._working: list[MemoryItem] = []
        # At least the importance of every working item not yet consolidated (-1: none). Below
        # the threshold, consolidation has nothing to move and skips reading working memory:
        # with the default routing, every year end of every household.
        self._unconsolidated_max = -1.0
        self._episodic = LongTermStore("episodic", episodic_capacity, self._decay_rate)
        self._semantic = _NO_SEMANTIC  # until the first reflection (see _NO_SEMANTIC)
        self._archive = _NO_ARCHIVE  # until the first demotion
        self._next_seq = 0
        self._clock = 0  # latest year seen; the "now" of retention decisions between years
        self._since_reflection = 0.0
        # _next_seq when the reflector last proposed nothing (-1: it has not). Until something
        # is written the reflector would read the same items and again propose nothing.
        self._dry_reflection_seq = -1
        self._demoted_hits: dict[int, int] = {}  # archive seq -> access_count at demotion

    # --------------------------------------------------------------- settings
    working_capacity = _fixed("working_capacity", "Items working memory holds (read-only).")
    episodic_capacity = _fixed("episodic_capacity", "Items episodic memory holds (read-only).")
    decay_rate = _fixed("decay_rate", "Per-year decay of importance in (0, 1] (read-only).")
    retrieval = _fixed("retrieval", "Retrieval settings (read-only).")
    retention = _fixed("retention", "Retention settings (read-only).")
    reflection = _fixed("reflection", "Reflection settings (read-only).")

    @property
    def consolidation_threshold(self) -> float:
        """Importance at or above which an item belongs in episodic memory.

        Settable: :meth:`consolidate` reads it afresh and moves every working item it makes
        due, however it moved.

        Raises:
            ValueError: When set to a number outside [0, 1] (NaN, a bool).
            TypeError: When set to something that is not a number.
        """
        return self._consolidation_threshold

    @consolidation_threshold.setter
    def consolidation_threshold(self, value: float) -> None:
        check_fraction("consolidation_threshold", value)
        self._consolidation_threshold = float(value)

    # ------------------------------------------------------------------ views
    @property
    def working(self) -> tuple[MemoryItem, ...]:
        """Working memory, oldest first (read-only view)."""
        return tuple(self._working)

    @property
    def episodic(self) -> tuple[MemoryItem, ...]:
        """Episodic memory in the order items entered it (read-only view)."""
        return self._episodic.in_order()

    @property
    def semantic(self) -> tuple[MemoryItem, ...]:
        """Reflections, oldest first (read-only view)."""
        return self._semantic.in_order()

    @property
    def archive(self) -> tuple[MemoryItem, ...]:
        """Items demoted by the ``tiered`` retention policy (read-only view)."""
        return self._archive.in_order()

    @property
    def working_size(self) -> int:
        """Number of items in working memory (cheaper than :meth:`counts` on hot paths)."""
        return len(self._working)

    @property
    def episodic_size(self) -> int:
        """Number of items in episodic memory."""
        return len(self._episodic.ranked())

    def counts(self) -> dict[str, int]:
        """Number of items in each store."""
        return {
            "working": len(self._working),
            "episodic": len(self._episodic),
            "semantic": len(self._semantic),
            "archive": len(self._archive),
        }

    def __repr__(self) -> str:
        counts = ", ".join(f"{k}={v}" for k, v in self.counts().items())
        return f"CognitiveMemory(agent_id={self.agent_id!r}, {counts})"

    # ----------------------------------------------------------------- writes
    def _new_item(
        self,
        content: str,
        importance: float,
        year: int,
        tags: Iterable[str] | None,
        source: str,
        *,
        pinned: bool = False,
        amount: float | None = None,
        evidence: tuple[str, ...] = (),
    ) -> MemoryItem:
        try:
            if not 0.0 <= importance <= 1.0 or importance.__class__ in BOOLEANS:
                raise ValueError(_importance_problem(importance))
        except TypeError:  # a string or None: say which argument (try costs nothing unraised)
            raise TypeError(_importance_problem(importance)) from None
        if not isinstance(content, str):
            msg = f"content must be a string, got {content!r}"
            raise TypeError(msg)
        if year.__class__ is not int:  # the model's writes pass a plain int
            year = _year(year, "year")
        if source not in SOURCES:
            msg = f"source must be one of {sorted(SOURCES)}, got {source!r}"
            raise ValueError(msg)
        # Before the sequence number: a refused write leaves no trace. The model's writes pass
        # a tuple of strings, checked here without a call (an ABC check per write cost 4 %).
        if tags.__class__ is tuple:
            for tag in tags:
                if tag.__class__ is not str:
                    tags = _tag_tuple(tags)
                    break
        else:
            tags = _tag_tuple(tags)
        seq = self._next_seq
        self._next_seq = seq + 1
        if year > self._clock:
            self._clock = year
        self._since_reflection += importance
        texts = self.texts
        if texts is not None:
            content = texts.setdefault(content, content)
        return MemoryItem(
            self.agent_id,
            seq,
            content,
            float(importance),
            year,
            tags,
            source,
            pinned,
            evidence,
            amount,
            year,
        )

    def write(
        self,
        content: str,
        importance: float = 0.5,
        year: int = 0,
        tags: Iterable[str] | None = None,
        *,
        store: str = "auto",
        source: str = "other",
        pinned: bool = False,
        amount: float | None = None,
    ) -> WriteResult:
        """Write one memory and report where it went and what it displaced.

        The ``add_*`` methods are shorthands for this; the model and the audit trail use it
        directly because they log evictions.

        Args:
            content: The experience in natural language.
            importance: Salience in [0, 1].
            year: Simulation year of the experience.
            tags: Classification tags (a single string is one tag).
            store: ``working``, ``episodic``, or ``auto`` (episodic when importance reaches the
                consolidation threshold or the item is pinned, else working).
            source: What produced the memory, one of :data:`~simulation.memory.item.SOURCES`.
            pinned: Never forget this item (it goes to episodic memory).
            amount: Dollar amount behind the text (damage, payout), for reflection and analysis.

        Returns:
            The written item, its store and the evictions it caused.

        Raises:
            ValueError: For importance outside [0, 1], an unknown store or source, or pinning
                more items than episodic memory can hold.
            TypeError: For content that is not a string, importance that is not a number, or a
                year that is not an integer.
        """
        if store == "auto":
            try:
                store = (
                    "episodic"
                    if pinned or importance >= self._consolidation_threshold
                    else "working"
                )
            except TypeError:  # a string: say which argument (try costs nothing unraised)
                raise TypeError(_importance_problem(importance)) from None
        if store == "working":
            if pinned:
                msg = "pinned items live in episodic memory; use store='episodic' or 'auto'"
                raise ValueError(msg)
            item = self._new_item(content, importance, year, tags, source, amount=amount)
            if item.importance > self._unconsolidated_max:
                self._unconsolidated_max = item.importance
            return _new_tuple(WriteResult, (item, "working", self._push_working(item)))
        if store == "episodic":
            episodic = self._episodic
            if pinned and sum(i.pinned for i in episodic.ranked()) >= episodic.capacity:
                # Refused before the item exists: a rejected write leaves no trace (no sequence
                # number used, no clock or reflection progress).
                raise ValueError(_pin_overflow(episodic))
            item = self._new_item(
                content, importance, year, tags, source, pinned=pinned, amount=amount
            )
            item.consolidated = True  # already long-term; nothing to consolidate
            evictions = tuple(self._insert(self._episodic, item))
            return _new_tuple(WriteResult, (item, "episodic", evictions))
        msg = f"store must be 'working', 'episodic' or 'auto', got {store!r}"
        raise ValueError(msg)

    def add_working(
        self,
        content: str,
        importance: float = 0.5,
        year: int = 0,
        tags: Iterable[str] | None = None,
        *,
        source: str = "other",
    ) -> MemoryItem:
        """Add an item to working memory, evicting the oldest past capacity."""
        return self.write(content, importance, year, tags, store="working", source=source).item

    def add_episodic(
        self,
        content: str,
        importance: float = 0.5,
        year: int = 0,
        tags: Iterable[str] | None = None,
        *,
        source: str = "other",
        pinned: bool = False,
    ) -> MemoryItem:
        """Add an item to episodic memory; past capacity the retention policy forgets one."""
        return self.write(
            content, importance, year, tags, store="episodic", source=source, pinned=pinned
        ).item

    def add_experience(
        self,
        content: str,
        importance: float = 0.5,
        year: int = 0,
        tags: Iterable[str] | None = None,
        *,
        source: str = "other",
        pinned: bool = False,
    ) -> MemoryItem:
        """Add an item routed by importance: at or above the threshold to episodic memory."""
        return self.write(
            content, importance, year, tags, store="auto", source=source, pinned=pinned
        ).item

    def add_seed(
        self,
        content: str,
        importance: float = 0.5,
        year: int = 0,
        tags: Iterable[str] | None = None,
        *,
        pinned: bool = False,
    ) -> MemoryItem:
        """Add a pre-seeded ("gifted") memory, e.g. a flood reported in a survey.

        It is routed like :meth:`add_experience`, has source ``seed`` and carries the tag
        ``seed`` in addition to ``tags``.
        """
        return self.write_seed(content, importance, year, tags, pinned=pinned).item

    def write_seed(
        self,
        content: str,
        importance: float = 0.5,
        year: int = 0,
        tags: Iterable[str] | None = None,
        *,
        pinned: bool = False,
    ) -> WriteResult:
        """Like :meth:`add_seed`, returning the :class:`WriteResult` (for the audit trail)."""
        all_tags = ("seed", *(t for t in _tag_tuple(tags) if t != "seed"))
        return self.write(
            content, importance, year, all_tags, store="auto", source="seed", pinned=pinned
        )

    def update_after_flood(self, damage: float, year: int) -> MemoryItem:
        """Remember a flood: episodic, importance 0.9 (seed 000 section 4.2).

        Raises:
            ValueError: If ``damage`` is negative, infinite or NaN.
            TypeError: If ``damage`` is not a number.
        """
        try:
            bad = not 0.0 <= damage < math.inf or damage.__class__ in BOOLEANS  # NaN fails too
        except TypeError:  # a string or None: say which argument
            bad = None
        if bad is not False:
            msg = f"damage must be a finite number >= 0, got {damage!r}"
            raise ValueError(msg) if bad else TypeError(msg)
        return self.write(
            f"Year {year}: A flood occurred causing ${damage:,.0f} in damages",
            0.9,
            year,
            ("flood", "damage"),
            store="episodic",
            source="flood",
            amount=float(damage),
        ).item

    def update_after_decision(self, decision: str, year: int) -> MemoryItem:
        """Remember a decision: working memory, importance 0.3 for do_nothing else 0.7.

        Raises:
            TypeError: If ``decision`` is not a string (a skill id such as ``buy_insurance``).
        """
        if not isinstance(decision, str):  # None would be remembered as "I decided to None"
            msg = f"decision must be a skill id (a string), got {decision!r}"
            raise TypeError(msg)
        return self.write(
            f"Year {year}: I decided to {decision}",
            0.3 if decision == "do_nothing" else 0.7,
            year,
            ("decision",),
            store="working",
            source="decision",
        ).item

    def _own_semantic(self) -> LongTermStore:
        """Semantic memory, created on first use."""
        if self._semantic is _NO_SEMANTIC:
            capacity = self._reflection.semantic_capacity
            self._semantic = LongTermStore("semantic", capacity, self._decay_rate)
        return self._semantic

    def _own_archive(self) -> LongTermStore:
        """The archive, created on first use."""
        if self._archive is _NO_ARCHIVE:
            capacity = self._retention.archive_capacity
            self._archive = LongTermStore("archive", capacity, self._decay_rate)
        return self._archive

    def _push_working(self, item: MemoryItem) -> tuple[Eviction, ...]:
        working = self._working
        working.append(item)
        if len(working) <= self._working_capacity:
            return ()
        return (_new_tuple(Eviction, (working.pop(0), "working", None)),)

    def _insert(self, store: LongTermStore, item: MemoryItem) -> list[Eviction]:
        """Put ``item`` into ``store`` and enforce its capacity."""
        store.add(item)
        if len(store) <= store.capacity:
            return []
        victim = self._pop_victim(store)
        if victim is None:  # everything, the new item included, is pinned
            store.remove(item)
            raise ValueError(_pin_overflow(store))
        if store is self._episodic and self._retention.policy == "tiered":
            self._demoted_hits[victim.seq] = victim.access_count
            return [
                Eviction(victim, "episodic", "archive"),
                *self._insert(self._own_archive(), victim),
            ]
        if self._demoted_hits:
            self._demoted_hits.pop(victim.seq, None)
        return [_new_tuple(Eviction, (victim, store.name, None))]

    def _pop_victim(self, store: LongTermStore) -> MemoryItem | None:
        """Remove and return the item the retention policy forgets first, if any."""
        policy = self._retention.policy
        if store is self._semantic or (store is self._episodic and policy == "fifo"):
            victim = store.oldest_unpinned()  # for reflections: the newest supersedes the oldest
        elif store is self._episodic and policy == "importance_weighted":
            w_i, w_r = self._retention.w_importance, self._retention.w_recency
            decay, now = self._decay_rate, self._clock
            candidates = [i for i in store.ranked() if not i.pinned]
            victim = min(
                candidates,
                key=lambda i: (w_i * i.importance + w_r * decay ** (now - i.last_access), i.seq),
                default=None,
            )
        else:  # decayed importance: the spec, the tiered policy and the archive
            return store.pop_lowest_unpinned()
        if victim is not None:
            store.remove(victim)
        return victim

    def _load(
        self,
        working: list[MemoryItem],
        episodic_ranked: list[MemoryItem],
        *,
        next_seq: int,
        clock: int,
        since_reflection: float,
        semantic_ranked: Sequence[MemoryItem] = (),
        dry_reflection_seq: int = -1,
        archive_ranked: Sequence[MemoryItem] = (),
        demoted_hits: dict[int, int] | None = None,
    ) -> None:
        """Replace the stores and the counters (from a pool).

        ``episodic_ranked``, ``semantic_ranked`` and ``archive_ranked`` are in retrieval order;
        an item in working memory and a long-term store is one object. ``demoted_hits`` maps an
        archived item's seq to its access count at demotion.
        """
        self._working = working
        self._unconsolidated_max = max(
            (i.importance for i in working if not i.consolidated), default=-1.0
        )
        self._episodic.restore_ranked(episodic_ranked)
        if semantic_ranked:
            self._own_semantic().restore_ranked(list(semantic_ranked))
        else:
            self._semantic = _NO_SEMANTIC
        if archive_ranked:
            self._own_archive().restore_ranked(list(archive_ranked))
        else:
            self._archive = _NO_ARCHIVE
        self._demoted_hits = dict(demoted_hits or {})
        self._next_seq = next_seq
        self._clock = clock
        self._since_reflection = since_reflection
        self._dry_reflection_seq = dry_reflection_seq

    # ---------------------------------------------------------- consolidation
    def consolidate(self) -> int:
        """Copy working items at or above the threshold into episodic memory, once each.

        Returns:
            The number of items this call transferred (0 when called again).
        """
        return len(self.consolidate_detailed().transferred)

    def consolidate_detailed(self) -> Consolidation:
        """Like :meth:`consolidate`, returning the items transferred and the evictions."""
        threshold = self._consolidation_threshold
        if self._unconsolidated_max < threshold:
            return _NO_CONSOLIDATION
        transferred = []
        evictions: list[Eviction] = []
        left = -1.0  # the highest importance left unconsolidated
        for item in self._working:
            if not item.consolidated:
                importance = item.importance
                if importance >= threshold:
                    item.consolidated = True
                    transferred.append(item)
                    evictions.extend(self._insert(self._episodic, item))
                elif importance > left:
                    left = importance
        self._unconsolidated_max = left
        return _new_tuple(Consolidation, (tuple(transferred), tuple(evictions)))

    def end_year(self, year: int) -> YearEnd:
        """Year-end pass: consolidate, apply tiered demotion and promotion, then reflect.

        Args:
            year: The year that is ending. A year before one already ended or written is
                accepted, as writes out of year order are (a seed from before the run, an
                event reported late): the clock keeps the latest year seen, consolidation
                does not depend on the year, tiered demotion reads decay at ``year`` (a
                memory from after it is never demoted), a promotion never ages a memory, and
                reflections are dated ``year`` though they may rest on later memories.
                ``MemoryPool.end_year`` behaves the same (the engines must agree).

        Returns:
            Items transferred, evictions and moves, promoted items and new reflections.

        Raises:
            TypeError: For a ``year`` that is not an integer.
        """
        if year.__class__ is not int:  # the model passes a plain int
            year = _year(year, "year")
        self._clock = max(self._clock, year)
        transferred, evictions = self.consolidate_detailed()
        tiered = self._retention.policy == "tiered"
        if not (transferred or tiered or self._reflection.enabled):
            return _QUIET_YEAR_END
        moves = list(evictions)
        promoted: list[MemoryItem] = []
        if tiered:
            promoted = self._rebalance_tiers(year, moves)
        reflections = self.reflect(year, moves) if self._reflection.enabled else []
        return _new_tuple(YearEnd, (transferred, tuple(moves), tuple(promoted), tuple(reflections)))

    def _rebalance_tiers(self, year: int, moves: list[Eviction]) -> list[MemoryItem]:
        """Demote faded episodic items to the archive and promote rehearsed ones back.

        A promoted item's decay clock restarts at ``year`` (``MemoryItem.rehearsed``): it then
        stays in episodic memory as long as a new memory of its importance would, and is
        demoted again only once that fades below ``demote_below`` in a year it is not recalled.
        An item that a full episodic memory sends straight back to the archive keeps the
        refreshed clock (it was rehearsed all the same) but is not reported as promoted.

        Args:
            year: The year that is ending.
            moves: Receives every move and eviction, in the order they happen.

        Returns:
            The items promoted that are still in episodic memory afterwards.
        """
        settings, episodic, archive = self._retention, self._episodic, self._own_archive()
        # A memory recalled (or made) this year is being rehearsed: it stays, however faded.
        faded = [
            i
            for i in episodic.ranked()
            if not i.pinned
            and i.last_access < year
            and episodic.score(i, year) < settings.demote_below
        ]
        for item in faded:
            episodic.remove(item)
            self._demoted_hits[item.seq] = item.access_count
            moves.append(Eviction(item, "episodic", "archive"))
            moves.extend(self._insert(archive, item))
        promoted = []
        rehearsed = [
            i
            for i in archive.ranked()
            if i.access_count - self._demoted_hits.get(i.seq, i.access_count)
            >= settings.promote_after
        ]
        # Every rehearsed item is still archived when its turn comes: a promotion leaves the
        # archive before its displacement from episodic memory enters it, so the archive never
        # overflows (and forgets nothing) while promoting.
        for item in rehearsed:
            archive.remove(item)
            del self._demoted_hits[item.seq]
            # Rehearsal refreshes the memory, as in the seeds' systems (002: retrieval reinforces
            # a memory; 003: recency counts from the last retrieval; 004: promotion follows
            # sustained use). Kept at its faded score, it would be demoted again at the next
            # year end unless recalled again. The clock restarts rather than the importance
            # rising: importance is the experience's own salience (it routes writes and weighs
            # in weighted retrieval), and at most 1 it could not undo decades of decay. Set
            # between leaving the archive and entering episodic memory: stores rank by it.
            since = item.year if item.rehearsed is None else item.rehearsed
            item.rehearsed = max(year, since)  # a rehearsal never ages a memory
            moves.append(Eviction(item, "archive", "episodic"))
            moves.extend(self._insert(episodic, item))
            promoted.append(item)
        # A full episodic memory may send a promoted item straight back, or a later promotion
        # in this loop may displace an earlier one: only the promotions that lasted count.
        return [item for item in promoted if item in episodic]

    def reflect(self, year: int, moves: list[Eviction] | None = None) -> list[MemoryItem]:
        """Write reflections when enough importance accumulated since the last one.

        Importance keeps adding up until the reflector finds something to reflect on. Past the
        threshold, a reflector that proposed nothing is asked again only once something new
        has been written: about the same items it would propose nothing again. A proposal
        resting on exactly the evidence of a reflection already in semantic memory counts as
        nothing: it would store the same belief again, under a later year.

        Args:
            year: Current year (the reflections' year).
            moves: Optional list that receives evictions from semantic memory.

        Returns:
            The reflection items written (none when below the threshold, when the reflector
            proposes none, or when nothing was written since it last proposed none).
        """
        settings = self._reflection
        if self._since_reflection < settings.threshold:
            return []
        if self._next_seq == self._dry_reflection_seq:  # every write takes a sequence number
            return []
        drafts = self.reflector.reflect(self._distinct_items(include_semantic=False), year)
        # A reflection on exactly the items of one already held repeats it: the threshold was
        # passed by other memories (decisions, neighbours), not by anything it rests on.
        held = {frozenset(i.evidence) for i in self._semantic.ranked() if i.evidence}
        written = []
        for draft in drafts:
            evidence = frozenset(draft.evidence)
            if evidence in held:
                continue
            if evidence:
                held.add(evidence)
            importance = settings.importance if draft.importance is None else draft.importance
            item = self._new_item(
                draft.content,
                importance,
                year,
                ("reflection", *draft.tags),
                "reflection",
                evidence=tuple(draft.evidence),
            )
            item.consolidated = True
            evictions = self._insert(self._own_semantic(), item)
            if moves is not None:
                moves.extend(evictions)
            written.append(item)
        if written:  # importance keeps adding up until there is something to reflect on
            self._since_reflection = 0.0
        else:
            self._dry_reflection_seq = self._next_seq
        return written

    def _distinct_items(self, *, include_semantic: bool = True) -> list[MemoryItem]:
        """Every item once, oldest first."""
        seen: dict[int, MemoryItem] = {}
        stores = [self._working, self._episodic.ranked(), self._archive.ranked()]
        if include_semantic:
            stores.append(self._semantic.ranked())
        for store in stores:
            for item in store:
                seen.setdefault(item.seq, item)
        return [seen[s] for s in sorted(seen)]

    # -------------------------------------------------------------- retrieval
    def retrieve(
        self, top_k: int | None = None, current_year: int | None = None, **options: Any
    ) -> list[str]:
        """Return the contents of the best memories, at most ``top_k``, each at most once.

        Takes the same options as :meth:`retrieve_scored`.
        """
        return [hit[0].content for hit in self.retrieve_scored(top_k, current_year, **options)]

    def retrieve_scored(  # noqa: PLR0912 - one call per household-year: no helpers to call
        self,
        top_k: int | None = None,
        current_year: int | None = None,
        *,
        strategy: str | None = None,
        query: str | None = None,
        tags: Iterable[str] | None = None,
        sources: Iterable[str] | None = None,
        min_year: int | None = None,
        max_year: int | None = None,
        w_recency: float | None = None,
        w_importance: float | None = None,
        w_relevance: float | None = None,
        record: bool = True,
    ) -> list[ScoredMemory]:
        """Return the best memories with their scores, each at most once.

        The order depends on the strategy. ``spec``: working memory first (most recent year
        first, then higher importance, then the newest), then the long-term stores' items
        (episodic, semantic, archive) by decayed importance, best first, skipping items
        already returned from working memory; a working item comes first even with a lower
        score than the long-term items after it, so scores need not fall along the list.
        ``weighted`` (also a ``spec`` retrieval given a query): by weighted score, best first,
        ties to the newer item.

        Args:
            top_k: Maximum items; the retrieval settings' ``top_k`` when ``None``.
            current_year: The year of retrieval (for decay and recency); ``None``: the latest
                year the memory has seen, so that no item is younger than the retrieval (an
                age below zero would raise its score above its importance). An earlier year
                counts as that latest year too, for the same reason (``MemoryPool.retrieve``
                does the same): a retrieval happens now, after every memory it can return.
                The latest year seen starts at 0, so items of years before 0 are scored as at
                year 0 or later.
            strategy: ``spec`` or ``weighted``; the configured strategy when ``None``.
            query: Free text whose relevance weighs in under ``weighted`` (a query given to
                ``spec`` switches to ``weighted``, since ``spec`` has no relevance term);
                ``None``: the settings' ``query`` under ``weighted``, none under ``spec``.
            tags: Keep only items carrying at least one of these tags.
            sources: Keep only items produced by one of these sources (names from
                :data:`~simulation.memory.item.SOURCES`).
            min_year: Keep only items from this year on.
            max_year: Keep only items up to this year.
            w_recency: Override the recency weight of ``weighted``.
            w_importance: Override the importance weight of ``weighted``.
            w_relevance: Override the relevance weight of ``weighted``.
            record: Refresh every returned item's access count and last access, as a recall
                does (``importance_weighted`` and ``tiered`` retention and ``weighted``
                recency read them). ``False`` looks without changing the memory, so that a
                look from a notebook between years leaves the run as it would have been.

        Returns:
            Scored items (with ``record``, their access count and last access refreshed).

        Raises:
            ValueError: For a negative ``top_k``, an unknown strategy or source name, a weight
                that ``RetrievalSettings`` would refuse (negative, infinite, NaN), or weights
                given to a ``spec`` retrieval (which has none: they would be ignored).
            TypeError: For a ``current_year``, ``min_year`` or ``max_year`` that is not an
                integer, or a weight that is not a number.
        """
        settings = self._retrieval
        if current_year.__class__ is not int or current_year < self._clock:
            # The model's calls pass a plain int, the current year, never before the clock.
            current_year = _retrieval_year(current_year, self._clock)
        k = settings.top_k if top_k is None else top_k
        if k.__class__ is not int or k < 0:  # the model's calls pass a plain int
            k = _count(k)
        strategy = strategy or settings.strategy
        if strategy != "spec" and strategy != "weighted":  # noqa: PLR1714 - cheapest for "spec"
            msg = f"strategy must be 'spec' or 'weighted', got {strategy!r}"
            raise ValueError(msg)
        if query is not None or strategy == "weighted":  # the model's have none: skip the call
            # weighted's default query is the settings' (an explicit spec has none)
            query = _clean_query(settings.query if query is None else query)
        if tags is None and sources is None and min_year is None and max_year is None:
            keep = None  # the model's retrievals: skip building (and calling) a filter
        else:
            keep = _make_filter(tags, sources, min_year, max_year)
        if w_recency is not None or w_importance is not None or w_relevance is not None:
            # The model's calls give no weights: no checks.
            _check_weights(
                strategy == "spec" and query is None,
                w_recency=w_recency,
                w_importance=w_importance,
                w_relevance=w_relevance,
            )
        if k == 0:  # after the checks: a mistake is one at any top_k
            return []
        if strategy == "spec" and query is None:
            hits = self._retrieve_spec(k, current_year, keep)
        else:
            hits = self._retrieve_weighted(
                k,
                current_year,
                keep,
                query,
                settings.w_recency if w_recency is None else w_recency,
                settings.w_importance if w_importance is None else w_importance,
                settings.w_relevance if w_relevance is None else w_relevance,
            )
        if record:  # inline, not a helper: every household's retrieval every year runs it
            for item, _, _ in hits:
                item.access_count += 1
                if current_year > item.last_access:
                    item.last_access = current_year
        return hits

    def _retrieve_spec(
        self, k: int, year: int, keep: Callable[[MemoryItem], bool] | None
    ) -> list[ScoredMemory]:
        decay = self._decay_rate
        out: list[ScoredMemory] = []
        working = self._working
        if working:
            for item in sorted(working, key=_WORKING_ORDER, reverse=True):
                if keep is None or keep(item):
                    # Decayed from its rehearsal if tiered retention promoted it (it may still
                    # sit in working memory too), as the long-term stores score it.
                    since = item.rehearsed
                    score = item.importance * decay ** (
                        year - (item.year if since is None else since)
                    )
                    out.append(_new_tuple(ScoredMemory, (item, score, "working")))
                    if len(out) == k:
                        return out
        episodic = self._episodic
        if self._semantic is _NO_SEMANTIC and self._archive is _NO_ARCHIVE:
            # The usual case (no reflections, no archive) needs no merge: episodic memory's own
            # order is the answer.
            if not episodic.ranked():
                return out
            if keep is None:
                return _fill_from(episodic, out, {hit[0].seq for hit in out}, k, year)
        stores = [s for s in (episodic, self._semantic, self._archive) if s.ranked()]
        if not stores:
            return out
        seen = {hit[0].seq for hit in out}
        if len(stores) == 1 and keep is None:
            return _fill_from(stores[0], out, seen, k, year)
        return _merge_from(stores, out, seen, k, year, keep)

    def _retrieve_weighted(
        self,
        k: int,
        year: int,
        keep: Callable[[MemoryItem], bool] | None,
        query: str | None,
        w_recency: float,
        w_importance: float,
        w_relevance: float,
    ) -> list[ScoredMemory]:
        candidates: list[MemoryItem] = []
        where: list[str] = []
        seen: set[int] = set()
        for name, items in (
            ("working", self._working),
            ("episodic", self._episodic.ranked()),
            ("semantic", self._semantic.ranked()),
            ("archive", self._archive.ranked()),
        ):
            for item in items:
                if item.seq not in seen and (keep is None or keep(item)):
                    seen.add(item.seq)
                    candidates.append(item)
                    where.append(name)
        if not candidates:
            return []
        decay = self._retrieval.recency_decay or self._decay_rate
        recency = _minmax([decay ** (year - i.last_access) for i in candidates])
        importance = _minmax([i.importance for i in candidates])
        scores = [
            w_recency * r + w_importance * m for r, m in zip(recency, importance, strict=True)
        ]
        if query and w_relevance > 0.0:
            relevance = _minmax(self.relevance.scores(query, candidates))
            scores = [s + w_relevance * r for s, r in zip(scores, relevance, strict=True)]
        best = heapq.nlargest(
            k, range(len(candidates)), key=lambda n: (scores[n], candidates[n].seq)
        )
        return [_new_tuple(ScoredMemory, (candidates[n], scores[n], where[n])) for n in best]

    def format_for_prompt(
        self, top_k: int | None = None, current_year: int | None = None, **options: Any
    ) -> str:
        """Retrieved memories as a bulleted list for a prompt (``"- ..."`` per line)."""
        memories = self.retrieve(top_k, current_year, **options)
        if not memories:
            return "- (no relevant memories)"
        return "\n".join(f"- {m}" for m in memories)

    def to_list(self, store: str = "all") -> list[str]:
        """Contents of one store (``working``, ``episodic``, ``semantic``, ``archive``) or all.

        ``all`` lists every distinct item once, oldest first.
        """
        if store == "all":
            return [i.content for i in self._distinct_items()]
        views: dict[str, Sequence[MemoryItem]] = {
            "working": self._working,
            "episodic": self.episodic,
            "semantic": self.semantic,
            "archive": self.archive,
        }
        if store not in views:
            msg = f"store must be one of {[*views, 'all']}, got {store!r}"
            raise ValueError(msg)
        return [i.content for i in views[store]]

    # ---------------------------------------------------------- persistence
    def to_dict(self) -> dict[str, Any]:
        """A JSON-ready, versioned, lossless snapshot (settings objects included)."""
        return {
            "format_version": FORMAT_VERSION,
            "agent_id": self.agent_id,
            "working_capacity": self._working_capacity,
            "episodic_capacity": self._episodic_capacity,
            "consolidation_threshold": self._consolidation_threshold,
            "decay_rate": self._decay_rate,
            "retrieval": asdict(self._retrieval),
            "retention": asdict(self._retention),
            "reflection": asdict(self._reflection),
            "next_seq": self._next_seq,
            "clock": self._clock,
            "since_reflection": self._since_reflection,
            "dry_reflection_seq": self._dry_reflection_seq,
            "demoted_hits": {str(k): v for k, v in self._demoted_hits.items()},
            "items": [i.to_dict() for i in self._distinct_items()],
            "stores": {
                "working": [i.seq for i in self._working],
                "episodic": [i.seq for i in self._episodic.ranked()],
                "semantic": [i.seq for i in self._semantic.ranked()],
                "archive": [i.seq for i in self._archive.ranked()],
            },
        }

    @classmethod
    def from_dict(
        cls,
        data: Mapping[str, Any],
        *,
        relevance: RelevanceScorer | None = None,
        reflector: Reflector | None = None,
        texts: dict[str, str] | None = None,
        checked: bool = False,
    ) -> CognitiveMemory:
        """Restore a memory written by :meth:`to_dict` (also after a JSON round trip).

        Args:
            data: The snapshot.
            relevance: Relevance scorer to use (scorers are code, not data).
            reflector: Reflector to use.
            texts: Pool of shared texts (see the class); restored texts join it too.
            checked: ``data`` has already passed :func:`~simulation.memory.snapshot.
                check_snapshot` (a checkpoint checks every household's as it is read), so its
                field types are not checked again.

        Raises:
            ValueError: For an unknown ``format_version`` or a snapshot that is malformed or
                inconsistent: a missing, unknown or mistyped field (tags given as one text,
                ``"pinned": "false"``), a store naming an unknown item, two items with one
                sequence number, a store over its capacity or out of rank order, an
                importance outside [0, 1], a rehearsal before the item's year, ``next_seq`` not
                above every item's or below ``dry_reflection_seq``.
        """
        version = data.get("format_version") if isinstance(data, Mapping) else None
        if version.__class__ is not int or version != FORMAT_VERSION:
            msg = f"format_version must be {FORMAT_VERSION}, got {version!r}"
            raise ValueError(msg)
        if not checked:
            check_snapshot(data)
        try:
            mem = cls._restore(data, relevance, reflector, texts)
        except (KeyError, TypeError, AttributeError) as err:
            msg = f"memory snapshot: missing or malformed field ({type(err).__name__}: {err})"
            raise ValueError(msg) from None
        _check_restored(mem)
        return mem

    @classmethod
    def _restore(
        cls,
        data: Mapping[str, Any],
        relevance: RelevanceScorer | None,
        reflector: Reflector | None,
        texts: dict[str, str] | None,
    ) -> CognitiveMemory:
        mem = cls(
            data["agent_id"],
            data["working_capacity"],
            data["episodic_capacity"],
            data["consolidation_threshold"],
            data["decay_rate"],
            retrieval=_snapshot_settings(RetrievalSettings, data, "retrieval"),
            retention=_snapshot_settings(RetentionSettings, data, "retention"),
            reflection=_snapshot_settings(ReflectionSettings, data, "reflection"),
            relevance=relevance,
            reflector=reflector,
            texts=texts,
        )
        items = {int(d["seq"]): MemoryItem.from_dict(mem.agent_id, d) for d in data["items"]}
        if len(items) < len(data["items"]):
            msg = f"memory snapshot of {mem.agent_id}: two items share a sequence number"
            raise ValueError(msg)
        if texts is not None:
            for item in items.values():
                item.content = texts.setdefault(item.content, item.content)
        stores = data["stores"]
        _check_store_lists(mem.agent_id, stores, items.keys())
        mem._working = [items[s] for s in stores["working"]]
        mem._unconsolidated_max = max(
            (i.importance for i in mem._working if not i.consolidated), default=-1.0
        )
        mem._episodic.restore_ranked([items[seq] for seq in stores["episodic"]])
        if stores["semantic"]:
            mem._own_semantic().restore_ranked([items[seq] for seq in stores["semantic"]])
        if stores["archive"]:
            mem._own_archive().restore_ranked([items[seq] for seq in stores["archive"]])
        mem._next_seq = int(data["next_seq"])
        mem._clock = int(data["clock"])
        mem._since_reflection = float(data["since_reflection"])
        # Absent from snapshots older than the field: the reflector is asked once more.
        mem._dry_reflection_seq = int(data.get("dry_reflection_seq", -1))
        mem._demoted_hits = {int(k): int(v) for k, v in data["demoted_hits"].items()}
        return mem


def _check_store_lists(agent_id: str, stores: Mapping[str, list[int]], seqs: KeysView[int]) -> None:
    """Refuse store lists that name an unknown item, leave one out, or hold one twice.

    An item may be in working memory and in one long-term store at once (consolidation copies
    it), never in two long-term stores, nor twice in one store.
    """
    named = {*stores["working"], *stores["episodic"], *stores["semantic"], *stores["archive"]}
    long_term = [*stores["episodic"], *stores["semantic"], *stores["archive"]]
    problem = None
    if unknown := named - seqs:
        problem = f"stores name seq {min(unknown)}, which no item has"
    elif unheld := seqs - named:
        problem = f"item seq {min(unheld)} is in no store"
    elif len(set(stores["working"])) < len(stores["working"]):
        problem = "working memory holds an item twice"
    elif len(set(long_term)) < len(long_term):
        problem = "an item is held twice by the long-term stores"
    if problem is not None:
        msg = f"memory snapshot of {agent_id}: {problem}"
        raise ValueError(msg)


def _check_restored(mem: CognitiveMemory) -> None:
    """Refuse a restored memory that its own methods could not have produced."""
    stores = [mem._episodic, mem._semantic, mem._archive]
    items = {i.seq: i for i in mem._working}
    for store in stores:
        items.update((i.seq, i) for i in store.ranked())
    problem = None
    if items and mem._next_seq <= max(items):
        problem = f"next_seq {mem._next_seq} is not above every item's seq (up to {max(items)})"
    elif mem._dry_reflection_seq > mem._next_seq:
        problem = f"dry_reflection_seq {mem._dry_reflection_seq} is above next_seq {mem._next_seq}"
    elif len(mem._working) > mem.working_capacity:
        problem = f"working memory holds {len(mem._working)} items, over its capacity"
    elif any(len(store) > store.capacity for store in stores):
        problem = "a long-term store holds more items than its capacity"
    elif any(not 0.0 <= i.importance <= 1.0 for i in items.values()):
        problem = "an item's importance is outside [0, 1]"
    elif any(i.source not in SOURCES for i in items.values()):
        problem = f"an item's source is not one of {sorted(SOURCES)}"
    elif any(i.rehearsed is not None and i.rehearsed < i.year for i in items.values()):
        problem = "an item was rehearsed before its year"  # promotion never ages a memory
    elif any(
        any(a > b for a, b in itertools.pairwise(store._keys)) for store in stores if len(store)
    ):
        problem = "a long-term store is not in rank order"
    if problem is not None:
        msg = f"memory snapshot of {mem.agent_id}: {problem}"
        raise ValueError(msg)


def _merge_from(
    stores: list[LongTermStore],
    out: list[ScoredMemory],
    seen: set[int],
    k: int,
    year: int,
    keep: Callable[[MemoryItem], bool] | None,
) -> list[ScoredMemory]:
    """Append the best of several long-term stores, each already ranked, to ``out``.

    The stores are merged by their heads' scores until ``out`` holds ``k`` items.
    """
    heads = [0] * len(stores)
    while len(out) < k:
        best: tuple[int, MemoryItem] | None = None
        best_score = -1.0
        for n, store in enumerate(stores):
            ranked = store.ranked()
            i = heads[n]
            while i < len(ranked) and (
                ranked[i].seq in seen or (keep is not None and not keep(ranked[i]))
            ):
                i += 1
            heads[n] = i
            if i < len(ranked):
                score = store.score(ranked[i], year)
                if score > best_score or (
                    score == best_score and best is not None and ranked[i].seq > best[1].seq
                ):
                    best, best_score = (n, ranked[i]), score
        if best is None:
            break
        n, item = best
        out.append(_new_tuple(ScoredMemory, (item, best_score, stores[n].name)))
        seen.add(item.seq)
        heads[n] += 1
    return out


def _count(top_k: Any) -> int:
    """``top_k`` as an int: a Python or numpy integer that is not negative (and not a bool)."""
    k = as_integer(top_k)
    if k is None or k < 0:
        msg = f"top_k must be a non-negative integer, got {top_k!r}"
        raise ValueError(msg)
    return k


def _year(value: Any, name: str) -> int:
    """``value`` as an int: a Python or numpy integer (not a bool, a float or a string).

    A year is a whole number: ``int(1.5)`` would file under year 1 a memory whose text says
    "Year 1.5", and a NaN year would give every retrieval NaN scores.
    """
    year = as_integer(value)
    if year is None:
        msg = f"{name} must be an integer, got {value!r}"
        raise TypeError(msg)
    return year


_S = TypeVar("_S")


def _snapshot_settings(kind: type[_S], data: Mapping[str, Any], name: str) -> _S:
    """The settings of snapshot ``data[name]``, which must give every field ``to_dict`` wrote.

    A field left out would take its default: the memory rebuilt would not be the one written.

    Raises:
        ValueError: Naming the memory, the mapping and the fields missing.
    """
    given = data[name]
    missing = [f.name for f in fields(kind) if f.name not in given]
    if missing:
        msg = f"memory snapshot of {data['agent_id']}: {name}: missing {', '.join(missing)}"
        raise ValueError(msg)
    return kind(**given)


def _tag_tuple(tags: Iterable[str] | None) -> tuple[str, ...]:
    """``tags`` as a tuple of strings: one string is one tag, ``None`` or empty none.

    A tag that is not a string would be written and then refused by ``from_dict`` on reading
    the memory's own snapshot; a mapping would be kept as its keys, its values lost.

    Raises:
        TypeError: For tags that are not a string or an iterable of strings, naming ``tags``.
    """
    if tags is None:
        return ()
    if isinstance(tags, str):
        return (tags,) if tags else ()
    if isinstance(tags, Mapping):
        msg = f"tags must be a string or a list of strings, got a mapping {tags!r}"
        raise TypeError(msg)
    try:
        tagged = tuple(tags)
    except TypeError:
        msg = f"tags must be a string or a list of strings, got {tags!r}"
        raise TypeError(msg) from None
    for tag in tagged:
        if not isinstance(tag, str):
            msg = f"tags must be strings, got {tag!r} in {tags!r}"
            raise TypeError(msg)
    return tagged


def _check_weights(spec: bool, **weights: float | None) -> None:
    """Refuse the weights given to one retrieval as ``RetrievalSettings`` refuses its own.

    Args:
        spec: The retrieval is a ``spec`` one, which has no weights: they would be ignored.
        **weights: The weights given (``None``: not given).
    """
    for name, weight in weights.items():
        if weight is not None:
            check_non_negative(name, weight)
    if spec:
        msg = "w_recency, w_importance and w_relevance are only read by strategy weighted"
        raise ValueError(msg)


def _retrieval_year(current_year: Any, clock: int) -> int:
    """A retrieval's year: an integer, at least ``clock`` (the latest year seen; ``None``)."""
    return clock if current_year is None else max(_year(current_year, "current_year"), clock)


def _fill_from(
    store: LongTermStore,
    out: list[ScoredMemory],
    seen: set[int],
    k: int,
    year: int,
) -> list[ScoredMemory]:
    """Append ``store``'s best items not in ``seen`` to ``out`` until it holds ``k``."""
    name, score = store.name, store.score
    for item in store.ranked():
        if item.seq not in seen:
            out.append(_new_tuple(ScoredMemory, (item, score(item, year), name)))
            if len(out) == k:
                break
    return out


def _minmax(values: list[float]) -> list[float]:
    """Scale to [0, 1]; a constant list maps to 0.5 (it carries no ranking information)."""
    lo, hi = min(values), max(values)
    if hi - lo <= 1e-12:
        return [0.5] * len(values)
    span = hi - lo
    return [(v - lo) / span for v in values]


def _clean_query(query: object) -> str | None:
    """A retrieval query, or ``None`` for none or a blank one: no words to be relevant to."""
    if query is None:
        return None
    if not isinstance(query, str):
        msg = f"query must be a string, got {query!r}"
        raise TypeError(msg)
    return query if query.strip() else None


def _importance_problem(importance: object) -> str:
    return f"importance must be a number in [0, 1], got {importance!r}"


def _pin_overflow(store: LongTermStore) -> str:
    return (
        f"cannot pin more than {store.capacity} items in {store.name} memory "
        f"({store.name}_capacity={store.capacity})"
    )


def _make_filter(
    tags: Iterable[str] | None,
    sources: Iterable[str] | None,
    min_year: int | None,
    max_year: int | None,
) -> Callable[[MemoryItem], bool] | None:
    """Build a predicate for the metadata filters, or ``None`` when no filter applies.

    Raises:
        ValueError: For a source name not in :data:`~simulation.memory.item.SOURCES` (no item
            could match it: the retrieval would return nothing, unexplained).
        TypeError: For a ``min_year`` or ``max_year`` that is not an integer (compared with
            item years, a string would fail with a bare comparison error).
    """
    if tags is None and sources is None and min_year is None and max_year is None:
        return None
    tag_set = frozenset([tags] if isinstance(tags, str) else tags) if tags is not None else None
    source_set = (
        frozenset([sources] if isinstance(sources, str) else sources)
        if sources is not None
        else None
    )
    if source_set is not None and not source_set <= SOURCES:
        unknown = sorted(map(repr, source_set - SOURCES))
        msg = f"sources must be among {sorted(SOURCES)}, got [{', '.join(unknown)}]"
        raise ValueError(msg)
    if min_year is not None:
        min_year = _year(min_year, "min_year")
    if max_year is not None:
        max_year = _year(max_year, "max_year")
        if min_year is not None and min_year > max_year:  # no item could match: say why
            msg = f"min_year ({min_year}) is after max_year ({max_year}): no year is in both"
            raise ValueError(msg)

    def keep(item: MemoryItem) -> bool:
        if tag_set is not None and tag_set.isdisjoint(item.tags):
            return False
        if source_set is not None and item.source not in source_set:
            return False
        if min_year is not None and item.year < min_year:
            return False
        return max_year is None or item.year <= max_year

    return keep
