"""Memory items and scored retrieval results.

A :class:`MemoryItem` is one remembered experience. Items are ordered by ``seq``, a per-memory
insertion counter, never by wall-clock time, so that equal inputs always give equal orderings
(DESIGN.md section 9.6).
"""

from __future__ import annotations

from dataclasses import dataclass
from typing import TYPE_CHECKING, Any, NamedTuple

if TYPE_CHECKING:
    from collections.abc import Mapping

__all__ = ["SOURCES", "STORES", "MemoryItem", "ScoredMemory"]

#: What produced a memory. ``seed`` memories are pre-seeded ("gifted") before the run starts;
#: ``reflection`` memories are written by a reflector into semantic memory.
SOURCES: frozenset[str] = frozenset(
    {"flood", "claim", "decision", "policy", "neighbor", "seed", "reflection", "other"}
)

#: Where an item can live. An item consolidated from working memory lives in ``working`` and
#: ``episodic`` at once until working memory evicts it; it is still one item (one id).
STORES: tuple[str, ...] = ("working", "episodic", "semantic", "archive")


#: Sequence numbers whose id suffix is prepared (a household writes two or three items a year).
_PREPARED_SEQS = 4096
_SEQ_SUFFIXES = tuple(f":{seq}" for seq in range(_PREPARED_SEQS))


@dataclass(slots=True, eq=False)
class MemoryItem:
    """One remembered experience.

    Attributes:
        owner: Id of the agent whose memory holds the item.
        seq: Insertion counter, unique within the owner's memory; orders items.
        content: The experience in natural language.
        importance: Salience in [0, 1]; routes the item and weights its retrieval. Like
            ``year`` and ``rehearsed``, fixed while the item is stored: long-term stores rank
            by all three.
        year: Simulation year the experience happened.
        tags: Classification tags, e.g. ``("flood", "major")``.
        source: What produced the item, one of :data:`SOURCES`.
        pinned: Pinned items are never forgotten by any retention policy.
        evidence: For reflections, the ids of the items they summarise.
        amount: The dollar amount behind the text (flood damage, claim payout, premium) for
            reflectors and analysis; ``None`` when the experience has none.
        last_access: Year the item was last written or retrieved (drives weighted recency).
        access_count: How many retrievals returned the item.
        consolidated: Whether consolidation already copied the item into episodic memory.
        rehearsed: Year of the rehearsal that last refreshed the item, or ``None``. Under the
            ``tiered`` retention policy an archived item recalled often enough is promoted back
            to episodic memory at year end, and from then on its importance decays from that
            year instead of from ``year`` (which stays the year the experience happened).
    """

    owner: str
    seq: int
    content: str
    importance: float
    year: int
    tags: tuple[str, ...] = ()
    source: str = "other"
    pinned: bool = False
    evidence: tuple[str, ...] = ()
    amount: float | None = None
    last_access: int = 0
    access_count: int = 0
    consolidated: bool = False
    rehearsed: int | None = None

    # Built on every use rather than cached on the item: a cached id string is 64 bytes more
    # per remembered item (a third of a GB for 100,000 households with full memories). The
    # standard audit builds about seven ids per household-year; joining the owner to a
    # prepared ":<seq>" takes half the instructions of formatting the number each time.
    @property
    def id(self) -> str:
        """Stable id, unique within a run because agent ids are: ``"<owner>:<seq>"``."""
        seq = self.seq
        if 0 <= seq < _PREPARED_SEQS:
            return self.owner + _SEQ_SUFFIXES[seq]
        return f"{self.owner}:{seq}"

    def to_dict(self) -> dict[str, Any]:
        """Return a JSON-ready dict of every field except ``owner`` (the memory knows it).

        ``rehearsed`` is left out while it is ``None``, as it is for almost every item: a
        checkpoint holds every household's items, and snapshots written before the field
        existed read the same.
        """
        data = {
            "seq": self.seq,
            "content": self.content,
            "importance": self.importance,
            "year": self.year,
            "tags": list(self.tags),
            "source": self.source,
            "pinned": self.pinned,
            "evidence": list(self.evidence),
            "amount": self.amount,
            "last_access": self.last_access,
            "access_count": self.access_count,
            "consolidated": self.consolidated,
        }
        if self.rehearsed is not None:
            data["rehearsed"] = self.rehearsed
        return data

    @classmethod
    def from_dict(cls, owner: str, data: Mapping[str, Any]) -> MemoryItem:
        """Rebuild an item written by :meth:`to_dict`."""
        return cls(
            owner=owner,
            seq=int(data["seq"]),
            content=str(data["content"]),
            importance=float(data["importance"]),
            year=int(data["year"]),
            tags=tuple(data.get("tags", ())),
            source=str(data.get("source", "other")),
            pinned=bool(data.get("pinned", False)),
            evidence=tuple(data.get("evidence", ())),
            amount=None if data.get("amount") is None else float(data["amount"]),
            last_access=int(data.get("last_access", data["year"])),
            access_count=int(data.get("access_count", 0)),
            consolidated=bool(data.get("consolidated", False)),
            rehearsed=None if data.get("rehearsed") is None else int(data["rehearsed"]),
        )


class ScoredMemory(NamedTuple):
    """A retrieved item with its retrieval score.

    Attributes:
        item: The retrieved item.
        score: Its score under the strategy that retrieved it. Under ``weighted`` higher scores
            rank first; under ``spec`` working memory comes first whatever its scores, then
            long-term items by decayed importance (the score).
        source: The store it was retrieved from (``working``, ``episodic``, ``semantic`` or
            ``archive``). This is where the item lives, not what produced it; for the latter
            see ``item.source``.
    """

    item: MemoryItem
    score: float
    source: str
