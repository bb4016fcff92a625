"""The audit trail of ``engine: arrays``: the object path's lines, in its order.

:class:`~simulation.array_engine.ArrayEngine` writes many households' memories at once and
decides for all of them together; an :class:`~simulation.audit.writer.AuditWriter` writes one
household's line at a time. :class:`ArrayAudit` sits between the two: it takes the engine's
writes and decisions as arrays, keeps the audited households' share, and hands the writer the
same objects, in the same order, that the object path hands it, so that the streams are the
same byte for byte (``tests/test_array_engine.py`` compares them).

Only the audited households cost anything here: with ``audit.sample`` below 1 the others are
dropped before a single object is built.
"""

from __future__ import annotations

from typing import TYPE_CHECKING, Any

import numpy as np

from simulation.audit.writer import DYNAMIC_FIELDS, DecisionLines, MemoryLines
from simulation.memory.pool import POOL_STORES, PoolWrite

if TYPE_CHECKING:
    from collections.abc import Sequence

    from numpy.typing import NDArray

    from simulation.audit.writer import AuditWriter
    from simulation.memory.pool import MemoryPool, PoolRetrieval

__all__ = ["ArrayAudit"]


class ArrayAudit:
    """An audit writer fed from a memory pool and the engine's columns.

    Args:
        writer: The run's writer (levels ``standard`` and ``minimal``).
        pool: The engine's memory pool.
        agent_ids: The households' ids, by row.
    """

    def __init__(self, writer: AuditWriter, pool: MemoryPool, agent_ids: Sequence[str]):
        self.writer = writer
        self.pool = pool
        self.agent_ids = list(agent_ids)
        self.audited = np.array([writer.audits(a) for a in self.agent_ids], dtype=bool)
        self.memory_streams = writer.level == "standard"
        # Writes waiting for their phase's end: (order keys, rank, rows, write), all audited.
        self._queued: list[tuple[np.ndarray, int, np.ndarray, PoolWrite]] = []

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
            picked = PoolWrite(*(part[audited] for part in done))
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
        parts = zip(*(q[3] for q in queued), strict=True)
        done = PoolWrite(*(np.concatenate(part)[order] for part in parts))
        self.writer.memory_updates(self._lines(rows, done))

    def _lines(self, rows: NDArray[np.int64], done: PoolWrite) -> MemoryLines:
        """The writes of ``done`` (to ``rows``) as the writer logs them, from the pool's columns."""
        pool, agent_ids = self.pool, self.agent_ids
        items = done.items
        amounts = pool.column("amount", items)
        has_amount = ~np.isnan(amounts)
        pinned = pool.column("pinned", items)
        tag_sets, sources = pool.tag_sets, pool.source_names
        evicting = done.evicted >= 0
        evicted: list[str | None] = [None] * len(items)
        evicted_from: list[str | None] = [None] * len(items)
        if evicting.any():
            where = np.flatnonzero(evicting).tolist()
            for n, gone, store in zip(
                where,
                pool.ids(done.evicted[evicting]),
                done.evicted_from[evicting].tolist(),
                strict=True,
            ):
                evicted[n] = gone
                evicted_from[n] = POOL_STORES[store]
        return MemoryLines(
            [agent_ids[row] for row in rows.tolist()],
            pool.ids(items),
            pool.contents(items),
            pool.column("importance", items).tolist(),
            pool.column("year", items).tolist(),
            [tag_sets[code] for code in pool.column("tags", items).tolist()],
            [sources[code] for code in pool.column("source", items).tolist()],
            [
                amount if present else None
                for amount, present in zip(amounts.tolist(), has_amount.tolist(), strict=True)
            ]
            if has_amount.any()
            else None,
            pinned.tolist() if pinned.any() else None,
            [POOL_STORES[store] for store in done.stores.tolist()],
            evicted,
            evicted_from,
        )

    # ------------------------------------------------------------------ decisions
    def decisions(
        self,
        year: int,
        rows: NDArray[np.int64],
        retrieved: PoolRetrieval,
        before: dict[str, list[Any]] | None,
        choices: dict[str, np.ndarray],
        state_changes: list[dict[str, tuple[Any, Any]]],
        written: PoolWrite,
        top_k: int,
    ) -> None:
        """Log each audited household's retrieval, decision memory and trace, in order.

        Args:
            year: The year.
            rows: The households in decision order.
            retrieved: What each retrieved.
            before: The dynamic state fields of each audited household before it decided
                (``None`` at ``minimal``, whose traces leave them out).
            choices: ``skill`` (column), ``cost``, ``tp`` and ``cp`` of each household.
            state_changes: What executing changed, for each audited household.
            written: Each household's decision memory write, in decision order.
            top_k: The retrieval's ``top_k``.
        """
        pool = self.pool
        audited = np.flatnonzero(self.audited[rows])
        if not len(audited):
            return
        households = rows[audited]
        standard = self.memory_streams
        skill_ids = choices["skill_ids"]
        retrieved_ids: list[list[str]] = []
        if standard:
            found = retrieved.items[audited]
            # Retrieved items are named by id only (the memory streams carry the contents).
            ids = pool.ids(found[found >= 0])
            start = 0
            for count in retrieved.counts[audited].tolist():
                retrieved_ids.append(ids[start : start + count])
                start += count
        states_before = (
            list(zip(*(before[name] for name in DYNAMIC_FIELDS), strict=True))
            if before is not None
            else []
        )
        self.writer.decisions(
            DecisionLines(
                [self.agent_ids[row] for row in households.tolist()],
                retrieved_ids,
                retrieved.scores[audited],
                self._lines(households, PoolWrite(*(part[audited] for part in written)))
                if standard
                else None,
                states_before,
                pool.working_sizes[households].tolist(),
                pool.episodic_sizes[households].tolist(),
                [skill_ids[j] for j in choices["skill"][audited].tolist()],
                choices["cost"][audited],
                choices["tp"][audited],
                choices["cp"][audited],
                state_changes,
            ),
            {"top_k": top_k, "current_year": year},
        )

    # ------------------------------------------------------------------ year end
    def year_end(self, active: NDArray[np.int64], moves: Sequence[PoolWrite]) -> None:
        """Log each audited active household's year end (consolidation), in household order."""
        if not self.memory_streams:
            return
        pool = self.pool
        rows = active[self.audited[active]]
        position = np.full(len(pool), -1, dtype=np.int64)
        position[rows] = np.arange(len(rows))
        moved: dict[int, tuple[list[str], list[tuple[str, str]]]] = {}
        for move in moves:  # one working slot after another: each household's own order
            owners = pool.column("owner", move.items)
            keep = self.audited[owners]
            if not keep.any():
                continue
            lines = self._lines(owners[keep], PoolWrite(*(part[keep] for part in move)))
            for row, item_id, gone, gone_from in zip(
                owners[keep].tolist(), lines.ids, lines.evicted, lines.evicted_from, strict=True
            ):
                transferred, forgotten = moved.setdefault(int(position[row]), ([], []))
                transferred.append(item_id)
                if gone is not None:
                    forgotten.append((gone, gone_from))  # type: ignore[arg-type]
        self.writer.year_ends(
            [self.agent_ids[row] for row in rows.tolist()],
            pool.working_sizes[rows].tolist(),
            pool.episodic_sizes[rows].tolist(),
            moved,
        )
