"""The audit trail of ``engine: arrays``: the object path's lines, in its order.

:class:`~simulation.array_engine.ArrayEngine` writes many households' memories at once and
decides for all of them together. :class:`ArrayAudit` takes the engine's writes and decisions
as arrays, keeps the audited households' share, puts them in the object path's order, and
encodes their values a column at a time from the pool's codes (ids, texts, tags:
``simulation/audit/lines.py``). The :class:`~simulation.audit.writer.AuditWriter`'s batch
methods fill its line templates with these columns, so that the streams are the object path's
byte for byte (``tests/test_array_engine.py`` compares them).

Only the audited households cost anything here: with ``audit.sample`` below 1 the others are
dropped before a single value is encoded.

With a background thread (``audit.background``), the run's thread only reads what the lines
need from the pool (:class:`_Written`, numpy copies); the encoding is handed to the writer's
thread (:meth:`AuditWriter.later <simulation.audit.writer.AuditWriter.later>`), while the pool
moves on. All of the encoding goes there: it grows tables of id ends (:meth:`ArrayAudit._cover`)
one after another, and a second thread encoding beside it could index one table by another's
new size: past its end, or within it at another store's entry.
"""

from __future__ import annotations

from typing import TYPE_CHECKING, Any, NamedTuple

import numpy as np
import pandas as pd
import pyarrow as pa
import pyarrow.compute as pc

from simulation.audit.lines import (
    NOTHING,
    coded,
    collapsed,
    joined_rows,
    nonzero_objects,
    numbers,
    only_where,
    strings,
)
from simulation.audit.writer import (
    NO_EVICTIONS,
    DecisionLines,
    MemoryLines,
    StateChanges,
    changed_state,
    dynamic_state,
    eviction_parts,
)
from simulation.memory.pool import POOL_STORES, PoolTiers, PoolWrite

if TYPE_CHECKING:
    from collections.abc import Sequence

    from numpy.typing import NDArray

    from simulation.agents.state import HouseholdState
    from simulation.audit.writer import AuditWriter, YearEndMoves
    from simulation.memory.pool import MemoryPool, PoolRetrieval
    from simulation.model import Decision

__all__ = ["ArrayAudit"]

_BINARY = pa.binary()
_TRUE = pa.scalar(b"true", _BINARY)
_QUOTE = pa.scalar(b'"', _BINARY)
_QUOTE_COMMA = pa.scalar(b'",', _BINARY)
_NO_EVICTIONS = pa.scalar(NO_EVICTIONS, _BINARY)
#: Households whose whole memories a full trace reads are turned into items this many at a
#: time: a year's at once held every item of every audited memory, 35 MB of the 384 MB peak RSS
#: of a full run of 10,000 households.
_APART_BLOCK = 1024
_NONE_MOVED = np.zeros(0, dtype=np.int64)


class _Written(NamedTuple):
    """What the lines of some pool writes need of the pool, read when they were written.

    Each array has an entry per write (``evicted_*``: per write that evicted an item). The
    pool's text and tag tables are taken as they are: the pool only appends to them, and
    compaction replaces them rather than change them, so codes read here stay valid in them.
    """

    owner: np.ndarray
    seq: np.ndarray
    text: np.ndarray
    importance: np.ndarray
    year: np.ndarray
    tags: np.ndarray
    source: np.ndarray
    amount: np.ndarray
    pinned: np.ndarray
    evicted_owner: np.ndarray
    evicted_seq: np.ndarray
    texts: list[str]
    tag_sets: list[tuple[str, ...]]
    moved: np.ndarray
    moves: list[list[dict[str, str | None]]]

    @classmethod
    def read(cls, pool: MemoryPool, done: PoolWrite) -> _Written:
        """Read what the lines of ``done`` need from ``pool``.

        ``moved`` holds the writes whose displaced item moved to the archive (tiered
        retention), and ``moves`` their ``evicted`` lists: that item, and the one the archive
        forgot for it if any. They are few: the writes to a full episodic memory.
        """
        items = done.items
        gone = done.evicted[done.evicted >= 0]
        moved = _NONE_MOVED
        moves = []
        if done.dropped is not None:
            moved = np.flatnonzero(done.evicted_from == POOL_STORES.index("episodic"))
            dropped = done.dropped[moved]
            forgotten = iter(pool.ids(dropped[dropped >= 0]))
            for displaced, dropping in zip(
                pool.ids(done.evicted[moved]), (dropped >= 0).tolist(), strict=True
            ):
                moves.append([{"id": displaced, "from": "episodic", "to": "archive"}])
                if dropping:
                    moves[-1].append({"id": next(forgotten), "from": "archive", "to": None})
        return cls(
            *(pool.column(name, items) for name in cls._fields[:9]),
            pool.column("owner", gone),
            pool.column("seq", gone),
            pool.texts,
            pool.tag_sets,
            moved,
            moves,
        )


class ArrayAudit:
    """An audit writer fed from a memory pool and the engine's columns.

    Args:
        writer: The run's writer (any level but ``off``).
        pool: The engine's memory pool.
        agent_ids: The households' ids, by row.
    """

    def __init__(self, writer: AuditWriter, pool: MemoryPool, agent_ids: Sequence[str]):
        self.writer = writer
        self.pool = pool
        self.agent_ids = list(agent_ids)
        self.audited = np.array([writer.audits(a) for a in self.agent_ids], dtype=bool)
        self.memory_streams = writer.level in ("standard", "full")
        self.full = writer.level == "full"
        # Where an item displaced from episodic memory goes: the archive under tiered retention.
        self._displaced_to = "archive" if pool.retention.policy == "tiered" else None
        #: Households whose decisions are traced (the audited ones, at a level with traces).
        self.traced = self.audited & (writer.traces is not None)
        #: Households whose traces explain their decisions (the traced ones, at ``full``).
        self.explains = self.traced & self.full
        # Writes waiting for their phase's end: (order keys, rank, rows, write), all audited.
        self._queued: list[tuple[np.ndarray, int, np.ndarray, PoolWrite]] = []
        # Encoded once, taken from by row or code (see simulation/audit/lines.py): each
        # household's id, and the start of its items' ids ('"H00001:' of "H00001:7").
        self._agents = strings(self.agent_ids)
        self._id_starts = pc.binary_slice(strings([f"{a}:" for a in self.agent_ids]), 0, -1)
        self._stores = strings(POOL_STORES)
        self._sources = strings(pool.source_names)
        # The end of an item's id by its sequence number ('7"' of "H00001:7"), the same
        # followed by a comma (to join a list of ids), and by the rest of an eviction's list
        # from each store in turn (by store * len(_id_ends) + seq); grown as needed.
        self._id_ends = self._separated_id_ends = self._eviction_ends = pa.array([], _BINARY)
        parts = [eviction_parts(store) for store in POOL_STORES]
        self._eviction_start = pa.scalar(parts[0][0], _BINARY)  # '[{"id":', whatever the store
        self._eviction_tails = [pa.scalar(b'"' + after, _BINARY) for _, after in parts]

    # ------------------------------------------------------------------ memory writes
    def queue(
        self, rows: NDArray[np.int64], done: PoolWrite, keys: np.ndarray, rank: int = 0
    ) -> None:
        """Hold the audited share of one pool write until :meth:`flush`.

        Args:
            rows: The households written to.
            done: What the write did.
            keys: Where each row's line goes in its phase's order.
            rank: Where the write goes among the writes of one household with equal keys.
        """
        if not self.memory_streams:
            return
        audited = self.audited[rows]
        if audited.any():
            picked = done.picked(audited)
            self._queued.append((np.asarray(keys)[audited], rank, rows[audited], picked))

    def flush(self) -> None:
        """Log the queued writes, ordered by their keys, then by rank."""
        queued, self._queued = self._queued, []
        if not queued:
            return
        keys = np.concatenate([q[0] for q in queued])
        ranks = np.concatenate([np.full(len(q[0]), q[1]) for q in queued])
        order = np.lexsort((ranks, keys))
        rows = np.concatenate([q[2] for q in queued])[order]
        done = PoolWrite.joined([q[3] for q in queued], order)
        self.writer.later(self._log_writes, rows, done, _Written.read(self.pool, done))

    def _log_writes(self, rows: NDArray[np.int64], done: PoolWrite, written: _Written) -> None:
        self.writer.memory_updates(self._lines(rows, done, written))

    def _item_ids(
        self, owners: NDArray[np.int64], seqs: NDArray[np.int64], *, separated: bool = False
    ) -> pa.Array:
        """The encoded ids (``"<agent_id>:<seq>"``) of the items of ``owners`` and ``seqs``.

        Args:
            owners: Each item's household.
            seqs: Each item's sequence number.
            separated: Follow each id with a comma (for :func:`joined_rows`).
        """
        self._cover(seqs)
        ends = self._separated_id_ends if separated else self._id_ends
        return pc.binary_join_element_wise(self._id_starts.take(owners), ends.take(seqs), NOTHING)

    def _evictions(
        self, owners: NDArray[np.int64], seqs: NDArray[np.int64], stores: NDArray[np.integer]
    ) -> pa.Array:
        """The ``evicted`` lists of writes that displaced the items of ``owners`` and ``seqs``.

        Args:
            owners: Each displaced item's household.
            seqs: Its sequence number.
            stores: The store it left (a position in ``POOL_STORES``).
        """
        self._cover(seqs)
        ends = self._eviction_ends.take(stores.astype(np.int64) * len(self._id_ends) + seqs)
        return pc.binary_join_element_wise(
            self._eviction_start, self._id_starts.take(owners), ends, NOTHING
        )

    def _cover(self, seqs: NDArray[np.int64]) -> None:
        """Grow the tables of id ends to hold every one of ``seqs``.

        Called only where lines are encoded: on the writer's thread when there is one (see the
        module docstring), never beside it.
        """
        if not len(seqs) or seqs.max() < len(self._id_ends):
            return
        # A sequence number's digits need no escaping: an id's encoding is its start's, the
        # digits and the closing quote. Doubling the tables keeps their growth cheap.
        count = max(2 * len(self._id_ends), int(seqs.max()) + 1, 64)
        digits = numbers(np.arange(count))
        self._id_ends = pc.binary_join_element_wise(digits, _QUOTE, NOTHING)
        self._separated_id_ends = pc.binary_join_element_wise(digits, _QUOTE_COMMA, NOTHING)
        self._eviction_ends = pa.concat_arrays(
            [pc.binary_join_element_wise(digits, tail, NOTHING) for tail in self._eviction_tails]
        )

    def _lines(self, rows: NDArray[np.int64], done: PoolWrite, written: _Written) -> MemoryLines:
        """The writes of ``done`` (to ``rows``) as the writer logs them, from the pool's columns."""
        count = len(done.items)
        amounts = written.amount
        has_amount = ~np.isnan(amounts)
        pinned = written.pinned
        evicting = done.evicted >= 0
        evicted: pa.Array | bytes = NO_EVICTIONS
        if evicting.any():
            evicted = self._evictions(
                written.evicted_owner, written.evicted_seq, done.evicted_from[evicting]
            )
            if not evicting.all():
                gaps = pc.replace_with_mask(pa.nulls(count, _BINARY), pa.array(evicting), evicted)
                evicted = pc.fill_null(gaps, _NO_EVICTIONS)
            if len(written.moved):  # moved to the archive, not forgotten
                moving = np.zeros(count, dtype=bool)
                moving[written.moved] = True
                evicted = pc.replace_with_mask(evicted, pa.array(moving), strings(written.moves))
        return MemoryLines(
            self._agents.take(rows),
            self._item_ids(written.owner, written.seq),
            _labels(written.text, written.texts),
            collapsed(written.importance, numbers),
            collapsed(written.year, numbers),
            collapsed(written.tags, lambda c: _labels(c, written.tag_sets)),
            collapsed(written.source, lambda c: coded(c, self._sources)),
            only_where(has_amount, numbers(np.where(has_amount, amounts, 0.0)))
            if has_amount.any()
            else pa.nulls(count, _BINARY),
            only_where(pinned, _TRUE) if pinned.any() else pa.nulls(count, _BINARY),
            collapsed(done.stores, lambda c: coded(c, self._stores)),
            evicted,
        )

    # ------------------------------------------------------------------ decisions
    def decisions(
        self,
        rows: NDArray[np.int64],
        retrieved: PoolRetrieval,
        before: dict[str, np.ndarray] | None,
        choices: dict[str, np.ndarray],
        state_changes: StateChanges,
        written: PoolWrite,
        parameters: dict[str, Any],
        rejections: dict[int, Decision] | None = None,
    ) -> None:
        """Log each audited household's retrieval, decision memory and trace, in order.

        Args:
            rows: The households in decision order.
            retrieved: What each retrieved.
            before: The dynamic state fields of each audited household before it decided
                (``None`` at ``minimal``, whose traces leave them out).
            choices: ``skill`` (column), ``cost``, ``tp`` and ``cp`` of each household (``tp``
                and ``cp`` ``None``: a policy that appraises nothing, as a decision table), and
                ``skill_ids``, the skills' ids by the codes ``skill`` holds.
            state_changes: What executing changed, for each audited household.
            written: Each household's decision memory write, in decision order.
            parameters: The parameters of the ``retrieve_memory`` calls
                (:func:`~simulation.cycle.retrieval_parameters`).
            rejections: The decisions of the audited households whose proposal was rejected,
                by position in ``rows`` (their traces give the reasons).
        """
        pool = self.pool
        audited = np.flatnonzero(self.audited[rows])
        if not len(audited):
            return
        households = rows[audited]
        standard = self.memory_streams
        counts = retrieved.counts[audited] if standard else np.zeros(len(audited), np.int64)
        # What the lines need of the pool, read now: the pool moves on while they are made.
        if standard:
            found = retrieved.items.take(audited, axis=0)
            found = found[found >= 0]
            found_owners, found_seqs = pool.column("owner", found), pool.column("seq", found)
            decided = written.picked(audited)
            memories = _Written.read(pool, decided)
        sizes = pool.working_sizes[households], pool.episodic_sizes[households]
        scores = retrieved.scores.take(audited, axis=0)
        skill, cost = choices["skill"][audited], choices["cost"][audited]
        tp, cp = (None if choices[key] is None else choices[key][audited] for key in ("tp", "cp"))
        rejected_at = sorted(rejections) if rejections else []
        rejected = [rejections[position] for position in rejected_at] if rejections else []

        def log() -> None:
            # Retrieved items are named by id only (the memory streams carry the contents).
            ids = (
                self._item_ids(found_owners, found_seqs, separated=True)
                if standard
                else pa.array([], _BINARY)
            )
            entries = None
            if rejected:  # each rejected proposal's action and reasons, among nulls
                entries = _among_nulls(
                    len(audited),
                    np.searchsorted(audited, rejected_at),
                    [self.writer.rejection(decision) for decision in rejected],
                )
            self.writer.decisions(
                DecisionLines(
                    self._agents.take(households),
                    joined_rows(ids, counts),
                    counts,
                    scores,
                    self._lines(households, decided, memories) if standard else None,
                    nonzero_objects(before) if before is not None else None,
                    *sizes,
                    coded(skill, strings(choices["skill_ids"])),
                    cost,
                    tp,
                    cp,
                    state_changes,
                    entries,
                ),
                parameters,
            )

        self.writer.later(log)

    def decisions_apart(
        self,
        households: NDArray[np.int64],
        written: PoolWrite,
        positions: list[int],
        decisions: Sequence[tuple[Decision, HouseholdState]],
        after: Sequence[HouseholdState],
        parameters: dict[str, Any],
    ) -> None:
        """Log households decided one by one: retrieval, decision memory and trace, in order.

        Their decision memories' lines are made as every batch's are, on the writer's thread
        when there is one. A full trace shows the household's whole memory and the policy's
        reasons: no batch of columns holds these, so the retrieval and the trace are the records
        the object path writes, through the same writer methods, on the run's thread (the pool
        moves on after).

        Args:
            households: The households, in decision order.
            written: Every household's decision memory write, in decision order.
            positions: The households' places in the decision order.
            decisions: Each one's decision and its state before it decided.
            after: Each one's state after.
            parameters: The parameters of the ``retrieve_memory`` calls.
        """
        pool, writer, agent_ids = self.pool, self.writer, self.agent_ids
        if self.memory_streams:  # encoded on the writer's thread, as every batch's lines
            decided = written.picked(positions)
            writer.later(self._log_writes, households, decided, _Written.read(pool, decided))
        rows = households.tolist()
        snapshot = {"full": dynamic_state, "standard": changed_state}.get(writer.level)
        for start in range(0, len(rows), _APART_BLOCK):
            block = rows[start : start + _APART_BLOCK]
            for row, (decision, before), state, memory in zip(
                block,
                decisions[start : start + _APART_BLOCK],
                after[start : start + _APART_BLOCK],
                self._memory_views(block),
                strict=True,
            ):
                agent_id = agent_ids[row]
                writer.tool_invocation(agent_id, parameters, decision.retrieved)
                before_state = snapshot(before) if snapshot is not None else None
                writer.trace(agent_id, decision, before_state, state, memory)

    def _memory_views(self, rows: list[int]) -> list[_MemoryView]:
        """What the traces of ``rows`` read of their memories: all of it at ``full``."""
        pool = self.pool
        if not self.full:  # the traces read only the sizes
            return [
                _MemoryView.sized(w, e)
                for w, e in zip(
                    pool.working_sizes[rows].tolist(),
                    pool.episodic_sizes[rows].tolist(),
                    strict=True,
                )
            ]
        working = [pool.working(row) for row in rows]
        episodic = [pool.episodic(row) for row in rows]
        index = np.array([i for held in (*working, *episodic) for i in held], dtype=np.int64)
        texts = pool.texts
        items = map(
            _Snapshot,
            pool.ids(index),
            [texts[code] for code in pool.column("text", index).tolist()],
            pool.column("importance", index).tolist(),
            pool.column("year", index).tolist(),
        )
        held = [[next(items) for _ in indices] for indices in (*working, *episodic)]
        count = len(rows)
        return [_MemoryView(w, e) for w, e in zip(held[:count], held[count:], strict=True)]

    # ------------------------------------------------------------------ year end
    def year_end(
        self,
        active: NDArray[np.int64],
        moves: Sequence[PoolWrite],
        reflections: PoolWrite,
        tiers: PoolTiers | None = None,
    ) -> None:
        """Log each audited active household's year end (consolidation), in household order.

        Args:
            active: The households whose year ended.
            moves: What consolidation moved, a working slot at a time.
            reflections: The reflections written, and the reflections they displaced.
            tiers: What tiered retention demoted and promoted (``None``: another policy).
        """
        if not self.memory_streams:
            return
        pool = self.pool
        rows = active[self.audited[active]]
        position = np.full(len(pool), -1, dtype=np.int64)
        position[rows] = np.arange(len(rows))
        moved: dict[int, YearEndMoves] = {}
        for move in moves:  # one working slot after another: each household's own order
            owners = pool.column("owner", move.items)
            keep = self.audited[owners]
            if not keep.any():
                continue
            # Under tiered retention what episodic memory displaced moved to the archive,
            # which may have forgotten an item for it.
            dropped = move.dropped
            dropped = [-1] * int(keep.sum()) if dropped is None else dropped[keep].tolist()
            for row, item_id, gone, dropped_item in zip(
                owners[keep].tolist(),
                pool.ids(move.items[keep]),
                move.evicted[keep].tolist(),
                dropped,
                strict=True,
            ):
                transferred, left, _, _ = _moved(moved, position[row])
                transferred.append(item_id)
                if gone >= 0:
                    left.append((pool.ids([gone])[0], "episodic", self._displaced_to))
                if dropped_item >= 0:
                    left.append((pool.ids([dropped_item])[0], "archive", None))
        if tiers is not None and len(tiers.items):
            self._tiered(tiers, position, moved)
        if len(reflections.items):
            self._reflected(reflections, position, moved)
        self.writer.year_ends(
            self._agents.take(rows),
            pool.working_sizes[rows],
            pool.episodic_sizes[rows],
            moved,
        )

    def _reflected(
        self, reflections: PoolWrite, position: NDArray[np.int64], moved: dict[int, YearEndMoves]
    ) -> None:
        """Add the audited households' reflections, and those they displaced, to ``moved``.

        A reflection comes after the consolidation, and so does the reflection it displaced.
        """
        pool = self.pool
        owners = pool.column("owner", reflections.items)
        keep = self.audited[owners]
        for row, written, gone in zip(
            owners[keep].tolist(),
            pool.items(reflections.items[keep]),
            reflections.evicted[keep].tolist(),
            strict=True,
        ):
            _, left, reflected, _ = _moved(moved, position[row])
            reflected.append(written)
            if gone >= 0:
                left.append((pool.ids([gone])[0], "semantic", None))

    def _tiered(
        self, tiers: PoolTiers, position: NDArray[np.int64], moved: dict[int, YearEndMoves]
    ) -> None:
        """Add the audited households' demotions and promotions to ``moved``, in order."""
        pool = self.pool
        keep = self.audited[tiers.rows]
        for row, item_id, left_store, to in zip(
            tiers.rows[keep].tolist(),
            pool.ids(tiers.items[keep]),
            tiers.left[keep].tolist(),
            tiers.to[keep].tolist(),
            strict=True,
        ):
            _, left, _, _ = _moved(moved, position[row])
            left.append((item_id, POOL_STORES[left_store], None if to < 0 else POOL_STORES[to]))
        owners = pool.column("owner", tiers.promoted)
        keep = self.audited[owners]
        for row, item_id in zip(owners[keep].tolist(), pool.ids(tiers.promoted[keep]), strict=True):
            _moved(moved, position[row])[3].append(item_id)


def _moved(moved: dict[int, YearEndMoves], position: int) -> YearEndMoves:
    """The year end moves of the audited household at ``position``, started if need be."""
    return moved.setdefault(int(position), ([], [], [], []))


class _Snapshot(NamedTuple):
    """What a full trace shows of a memory item, by ``MemoryItem``'s names.

    Made from four of the pool's columns rather than as a whole ``MemoryItem`` (fourteen
    fields) of each item of every audited memory, every year: 2.8 % fewer instructions per
    household-year at ``full`` (1,000 households x 6 years, ``bench_instructions.py``).
    """

    id: str
    content: str
    importance: float
    year: int


class _MemoryView:
    """What a full trace reads of a household's memory, by ``CognitiveMemory``'s names.

    Args:
        working: Its working memory, oldest first.
        episodic: Its episodic memory in the order the items entered it.
    """

    __slots__ = ("episodic", "episodic_size", "working", "working_size")

    def __init__(self, working: list[_Snapshot], episodic: list[_Snapshot]):
        self.working = working
        self.episodic = episodic
        self.working_size = len(working)
        self.episodic_size = len(episodic)

    @classmethod
    def sized(cls, working: int, episodic: int) -> _MemoryView:
        """A view of the sizes alone (what traces below ``full`` read)."""
        view = cls([], [])
        view.working_size, view.episodic_size = working, episodic
        return view


def _among_nulls(
    count: int, where: NDArray[np.int64], rows: list[tuple[bytes, bytes]]
) -> tuple[pa.Array, pa.Array]:
    """Two columns of ``count`` nulls, with the pairs of ``rows`` at the positions ``where``."""
    mask = np.zeros(count, dtype=bool)
    mask[where] = True
    nulls, given = pa.nulls(count, _BINARY), pa.array(mask)
    first, second = zip(*rows, strict=True)
    return (
        pc.replace_with_mask(nulls, given, pa.array(first, _BINARY)),
        pc.replace_with_mask(nulls, given, pa.array(second, _BINARY)),
    )


def _labels(codes: NDArray[np.integer], names: Sequence[Any]) -> pa.DictionaryArray:
    """The encodings of ``names[code]`` for each of ``codes``, each distinct one encoded once."""
    # Hashed, not sorted (np.unique): several times faster, and no order is needed.
    which, used = pd.factorize(codes)
    return coded(which, strings([names[code] for code in used.tolist()]))
