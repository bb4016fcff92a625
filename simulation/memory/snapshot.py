"""The layout of a memory snapshot, as :meth:`CognitiveMemory.to_dict` writes it, typed strictly.

A checkpoint holds one snapshot per household (``simulation/checkpoint.py``), and a resumed run
rebuilds each memory from it with :meth:`CognitiveMemory.from_dict`, which converts as it reads
(``int(seq)``, ``tuple(tags)``, ``bool(pinned)``). On a snapshot changed since it was written
that conversion is silent damage: tags given as the text ``"flood"`` become five one-letter
tags, ``"pinned": "false"`` pins the item, ``"content": 2`` becomes the text ``"2"``.
:class:`MemorySnapshot` refuses such values first: each field must hold the JSON type
``to_dict`` gives it (a number where a float is written may be an integer, as JSON cannot tell
``1.0`` from ``1``).

The settings mappings (``retrieval``, ``retention``, ``reflection``) are checked by their
settings classes when the memory is rebuilt, and the snapshot's consistency (stores naming
known items, capacities, rank order) by ``from_dict``.

Example::

    from pydantic import TypeAdapter

    TypeAdapter(MemorySnapshot).validate_python(memory.to_dict())
"""

from __future__ import annotations

from typing import Annotated, Any, Literal, NotRequired

from pydantic import ConfigDict, Field, Strict, StrictBool, StrictInt, StrictStr
from typing_extensions import TypedDict  # pydantic needs it on Python < 3.12

__all__ = ["MemorySnapshot", "SnapshotItem", "SnapshotStores"]

_Finite = Annotated[float, Strict(), Field(allow_inf_nan=False)]
_Count = Annotated[int, Strict(), Field(ge=0)]
# No unknown keys: a misspelt one would be a missing one, read as its default.
_CLOSED = ConfigDict(extra="forbid")


class SnapshotItem(TypedDict):
    """One item (:meth:`MemoryItem.to_dict <simulation.memory.item.MemoryItem.to_dict>`)."""

    __pydantic_config__ = _CLOSED  # type: ignore[misc]

    seq: _Count
    content: StrictStr
    importance: _Finite  # in [0, 1]: from_dict checks the range
    year: StrictInt  # pre-seeded memories may lie before year 1
    tags: list[StrictStr]
    source: StrictStr  # one of SOURCES: from_dict checks it
    pinned: StrictBool
    evidence: list[StrictStr]
    amount: _Finite | None
    last_access: StrictInt
    access_count: _Count
    consolidated: StrictBool
    rehearsed: NotRequired[StrictInt]  # written only once the item is rehearsed


class SnapshotStores(TypedDict):
    """The sequence numbers each store holds, in its order."""

    __pydantic_config__ = _CLOSED  # type: ignore[misc]

    working: list[_Count]
    episodic: list[_Count]
    semantic: list[_Count]
    archive: list[_Count]


class MemorySnapshot(TypedDict):
    """A whole memory: settings, counters, items and stores."""

    __pydantic_config__ = _CLOSED  # type: ignore[misc]

    format_version: Literal[1]
    agent_id: StrictStr
    working_capacity: StrictInt
    episodic_capacity: StrictInt
    consolidation_threshold: _Finite
    decay_rate: _Finite
    retrieval: dict[str, Any]
    retention: dict[str, Any]
    reflection: dict[str, Any]
    next_seq: _Count
    clock: StrictInt
    since_reflection: _Finite
    dry_reflection_seq: NotRequired[StrictInt]  # absent from snapshots older than the field
    demoted_hits: dict[str, _Count]  # item seq (as text: a JSON key) -> hits while demoted
    items: list[SnapshotItem]
    stores: SnapshotStores
