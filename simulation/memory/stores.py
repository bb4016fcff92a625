"""Long-term memory stores kept in retrieval order.

Under exponential decay, ``importance * decay ** (year_now - year)`` ranks items in the same order
for every ``year_now``: the common factor ``decay ** year_now`` cancels. A store therefore keeps its
items sorted once, by ``year * log(decay) - log(importance)`` (ascending is best first), on
insertion (a binary search and a short memmove); retrieval reads the best items off the front
instead of scoring and sorting the whole store every time.

An item's decay clock starts at its ``year``, or at the year a rehearsal last refreshed it
(``MemoryItem.rehearsed``, set by tiered retention's promotion while the item is in no store).
"""

from __future__ import annotations

import math
from array import array
from bisect import bisect_left
from typing import TYPE_CHECKING

if TYPE_CHECKING:
    from simulation.memory.item import MemoryItem

__all__ = ["LongTermStore"]


class LongTermStore:
    """A capacity-bounded store ranked by decayed importance.

    Args:
        name: ``episodic``, ``semantic`` or ``archive``.
        capacity: Items the store may hold; the owner enforces it (it decides what goes).
        decay_rate: Per-year decay in (0, 1].
    """

    __slots__ = ("_keys", "_log_decay", "_ranked", "capacity", "decay_rate", "name")

    def __init__(self, name: str, capacity: int, decay_rate: float):
        self.name = name
        self.capacity = capacity
        self.decay_rate = decay_rate
        self._log_decay = math.log(decay_rate)
        # Ascending == best first. An array of doubles, not a list of floats: 8 bytes a key
        # instead of a 24-byte float object and an 8-byte pointer.
        self._keys = array("d")
        self._ranked: list[MemoryItem] = []

    def _key(self, item: MemoryItem) -> float:
        importance = item.importance
        if importance <= 0.0:
            return math.inf
        since = item.rehearsed
        return (item.year if since is None else since) * self._log_decay - math.log(importance)

    def __len__(self) -> int:
        return len(self._ranked)

    def __contains__(self, item: MemoryItem) -> bool:
        return self._index(item) >= 0

    def _index(self, item: MemoryItem) -> int:
        keys, ranked = self._keys, self._ranked
        i = bisect_left(keys, self._key(item))
        n = len(ranked)
        while i < n and ranked[i] is not item:
            i += 1
        if i < n:
            return i
        # Not where its key says: its importance or year was changed after it was stored (the
        # store ranks by the values it had then). Found by identity, it is still the one removed.
        return next((j for j, other in enumerate(ranked) if other is item), -1)

    def add(self, item: MemoryItem) -> None:
        """Insert ``item`` at its rank; among equal keys the newest item goes first."""
        key = self._key(item)
        i = bisect_left(self._keys, key)
        self._keys.insert(i, key)
        self._ranked.insert(i, item)

    def restore_ranked(self, items: list[MemoryItem]) -> None:
        """Replace the contents with ``items``, already in ranked order (from a snapshot)."""
        self._ranked = list(items)
        self._keys = array("d", [self._key(item) for item in items])

    def remove(self, item: MemoryItem) -> None:
        """Remove ``item``.

        Raises:
            ValueError: If the store does not hold it.
        """
        i = self._index(item)
        if i < 0:
            msg = f"{self.name} memory does not hold item {item.id}"
            raise ValueError(msg)
        del self._keys[i]
        del self._ranked[i]

    def score(self, item: MemoryItem, year: int) -> float:
        """Decayed importance of ``item`` at ``year``, from its year or its last rehearsal."""
        since = item.rehearsed
        return item.importance * self.decay_rate ** (year - (item.year if since is None else since))

    def in_order(self) -> tuple[MemoryItem, ...]:
        """Items oldest first (by insertion sequence)."""
        return tuple(sorted(self._ranked, key=_seq))

    def ranked(self) -> list[MemoryItem]:
        """Items best first (the live list: do not mutate)."""
        return self._ranked

    def pop_lowest_unpinned(self) -> MemoryItem | None:
        """Remove and return the unpinned item ranked lowest, if any (one scan from the end)."""
        ranked = self._ranked
        for i in range(len(ranked) - 1, -1, -1):
            if not ranked[i].pinned:
                del self._keys[i]
                return ranked.pop(i)
        return None

    def oldest_unpinned(self) -> MemoryItem | None:
        """The unpinned item with the lowest insertion sequence, if any."""
        unpinned = [item for item in self._ranked if not item.pinned]
        return min(unpinned, key=_seq) if unpinned else None


def _seq(item: MemoryItem) -> int:
    return item.seq
