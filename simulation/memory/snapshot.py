"""The layout of a memory snapshot, as :meth:`CognitiveMemory.to_dict` writes it, typed strictly.

A checkpoint holds one snapshot per household (``simulation/checkpoint.py``), and a resumed run
rebuilds each memory from it with :meth:`CognitiveMemory.from_dict`; a notebook may keep one in
a JSON file. Rebuilding converts as it reads (``int(seq)``, ``tuple(tags)``, ``bool(pinned)``),
and on a snapshot changed since it was written that conversion is silent damage: tags given as
the text ``"flood"`` would become five one-letter tags, ``"pinned": "false"`` would pin the
item, ``"content": 2`` would become the text ``"2"``. :class:`MemorySnapshot` refuses such
values first (:func:`check_snapshot`, which ``from_dict`` calls): each field must hold the JSON
type ``to_dict`` gives it (a number where a float is written may be an integer, as JSON cannot
tell ``1.0`` from ``1``).

The settings mappings (``retrieval``, ``retention``, ``reflection``) are checked by their
settings classes when the memory is rebuilt, and the snapshot's consistency (stores naming
known items, capacities, rank order) by ``from_dict``.

Example::

    check_snapshot(json.loads(path.read_text()))  # ValueError: items.0.pinned: ... (got 'false')
"""

from __future__ import annotations

import functools
from typing import Annotated, Any, Literal, NotRequired

from pydantic import (
    ConfigDict,
    Field,
    Strict,
    StrictBool,
    StrictInt,
    StrictStr,
    StringConstraints,
    TypeAdapter,
    ValidationError,
)
from typing_extensions import TypedDict  # pydantic needs it on Python < 3.12

from simulation.config_base import describe_validation_error

__all__ = ["MemorySnapshot", "SnapshotItem", "SnapshotStores", "check_snapshot"]

_Finite = Annotated[float, Strict(), Field(allow_inf_nan=False)]
_Count = Annotated[int, Strict(), Field(ge=0)]
# A sequence number as a JSON key writes it: "03" or " 3" would be read as 3 and written back
# as "3".
_SeqText = Annotated[str, StringConstraints(pattern=r"^(0|[1-9][0-9]*)$")]
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
    demoted_hits: dict[_SeqText, _Count]  # item seq (as text: a JSON key) -> hits while demoted
    items: list[SnapshotItem]
    stores: SnapshotStores


@functools.cache
def _snapshot_type() -> TypeAdapter[MemorySnapshot]:
    # Built on first use: building it takes about 20 ms, which a run without checkpoints or
    # snapshots should not pay at import.
    return TypeAdapter(MemorySnapshot)


def check_snapshot(data: object) -> None:
    """Refuse a snapshot whose fields do not hold the types :meth:`to_dict` writes.

    Args:
        data: A snapshot, as :meth:`CognitiveMemory.to_dict
            <simulation.memory.cognitive.CognitiveMemory.to_dict>` returns it or after a JSON
            round trip.

    Raises:
        ValueError: The first wrong field, as ``memory snapshot: key.path: what is wrong``
            (``items.0.tags: Input should be a valid list (got 'flood')``), with how many more
            problems there are.
    """
    try:
        _snapshot_type().validate_python(data)
    except ValidationError as err:
        raise ValueError(describe_validation_error(err, "memory snapshot")) from None
