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

from typing import TYPE_CHECKING, Any, NamedTuple

import numpy as np

from simulation.audit.writer import DYNAMIC_FIELDS, DecisionLines
from simulation.memory.cognitive import Eviction, WriteResult, YearEnd
from simulation.memory.pool import POOL_STORES, PoolWrite

if TYPE_CHECKING:
    from collections.abc import Sequence

    from numpy.typing import NDArray

    from simulation.audit.writer import AuditWriter
    from simulation.memory.pool import MemoryPool, PoolRetrieval

__all__ = ["ArrayAudit"]


class _Sizes(NamedTuple):
    """What the writer reads of a household's memory: its two store sizes."""

    working_size: int
    episodic_size: int


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
        write, agent_ids = self.writer.memory_update, self.agent_ids
        for row, result in zip(rows.tolist(), self._results(done), strict=True):
            write(agent_ids[row], result)

    def _results(self, done: PoolWrite) -> list[WriteResult]:
        """Each write of ``done`` as the object path's ``WriteResult``."""
        pool = self.pool
        items = pool.items(done.items)
        evicting = np.flatnonzero(done.evicted >= 0)
        evicted = dict(zip(evicting.tolist(), pool.items(done.evicted[evicting]), strict=True))
        results = []
        for n, (item, store, source) in enumerate(
            zip(items, done.stores.tolist(), done.evicted_from.tolist(), strict=True)
        ):
            gone = evicted.get(n)
            evictions = () if gone is None else (Eviction(gone, POOL_STORES[source], None),)
            results.append(WriteResult(item, POOL_STORES[store], evictions))
        return results

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
            [
                {k: v for k, v in zip(DYNAMIC_FIELDS, values, strict=True) if v}
                for values in zip(*(before[name] for name in DYNAMIC_FIELDS), strict=True)
            ]
            if before is not None
            else []
        )
        self.writer.decisions(
            DecisionLines(
                [self.agent_ids[row] for row in households.tolist()],
                retrieved_ids,
                retrieved.scores[audited],
                self._results(PoolWrite(*(part[audited] for part in written))) if standard else [],
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
        transferred: dict[int, list[Any]] = {}
        evictions: dict[int, list[Eviction]] = {}
        for move in moves:  # one working slot after another: each household's own order
            owners = pool.column("owner", move.items)
            keep = self.audited[owners]
            if not keep.any():
                continue
            picked = PoolWrite(*(part[keep] for part in move))
            for row, result in zip(owners[keep].tolist(), self._results(picked), strict=True):
                transferred.setdefault(row, []).append(result.item)
                if result.evictions:
                    evictions.setdefault(row, []).extend(result.evictions)
        quiet = YearEnd((), (), (), ())
        rows = active[self.audited[active]]
        sizes = zip(
            pool.working_sizes[rows].tolist(), pool.episodic_sizes[rows].tolist(), strict=True
        )
        consolidation = self.writer.consolidation
        for row in rows.tolist():
            moved = transferred.get(row)
            report = (
                quiet
                if moved is None
                else YearEnd(tuple(moved), tuple(evictions.get(row, ())), (), ())
            )
            consolidation(self.agent_ids[row], report, _Sizes(*next(sizes)))  # type: ignore[arg-type]
