r"""Audit lines of one shape, encoded once per shape and filled in line by line.

:class:`~simulation.audit.writer.AuditWriter` logs the lines of ``engine: arrays`` many at a
time, and most of them share a few shapes: a household's retrieval, its decision, a memory
write, a quiet year end. Building a dict for each line and encoding it costs far more than the
line's bytes. Here orjson encodes each shape once, with a placeholder where a value varies,
into a bytes format (:func:`line_format`); a line is then one ``%`` of that format with the
line's values, each already encoded by orjson (numbers a batch at a time:
:func:`encoded_numbers`). The bytes are those orjson gives for the line's dict, since every
byte of them comes from orjson; ``tests/test_audit_lines.py`` and ``tests/test_array_engine.py``
compare them.

Example:
    >>> fmt = line_format({"agent_id": HOLE, "year": NUMBER, "scores": [HOLE]})
    >>> fmt % (b'"H1"', 3, b",".join(encoded_numbers([0.5, 0.25])))
    b'{"agent_id":"H1","year":3,"scores":[0.5,0.25]}\n'
"""

from __future__ import annotations

from typing import TYPE_CHECKING, Any

import orjson

if TYPE_CHECKING:
    from collections.abc import Collection, Hashable

__all__ = [
    "HOLE",
    "NUMBER",
    "EncodedStrings",
    "encoded",
    "encoded_number_lists",
    "encoded_numbers",
    "line_format",
]

# orjson escapes control characters inside strings (\u0001), so these bytes occur in its output
# only where a placeholder put them.
_HOLE_MARK, _NUMBER_MARK = b"\x01", b"\x02"
#: Placeholder for a value given already encoded (bytes), filled by ``%s``.
HOLE = orjson.Fragment(_HOLE_MARK)
#: Placeholder for an int, filled by ``%d`` (which writes ints as orjson does).
NUMBER = orjson.Fragment(_NUMBER_MARK)


def encoded(value: Any) -> bytes:
    """The orjson encoding of ``value``, in a bytes object of its own size, to keep.

    orjson returns each encoding in an object allocated for 4 KB: fine for a line written at
    once, but cached for 100,000 households, or held for every line of a year, those 4 KB add
    up to gigabytes.
    """
    return bytes(memoryview(orjson.dumps(value)))


def line_format(record: Any, *, line: bool = True) -> bytes:
    """``record`` encoded as a line, its placeholders turned into ``%s`` and ``%d``.

    Args:
        record: A line's dict, with :data:`HOLE` or :data:`NUMBER` where values vary.
        line: End with a newline (``False``: a format of one value within a line).

    Returns:
        A bytes format: ``line_format(r) % values`` is the line of ``r`` with the values in
        the placeholders' order (literal ``%`` of the fixed parts is escaped).
    """
    encoded = orjson.dumps(record, option=orjson.OPT_APPEND_NEWLINE if line else None)
    return encoded.replace(b"%", b"%%").replace(_HOLE_MARK, b"%s").replace(_NUMBER_MARK, b"%d")


def encoded_numbers(values: list[float] | list[int]) -> list[bytes]:
    """Each of ``values`` as orjson encodes it, from one orjson call for all of them.

    A number's encoding holds no comma, so the encoded list splits into its entries.
    """
    if not values:
        return []
    return orjson.dumps(values)[1:-1].split(b",")


def encoded_number_lists(rows: list[list[float]]) -> list[bytes]:
    """The inside of each row's JSON array (``b"0.5,0.25"`` for ``[0.5, 0.25]``), all at once.

    Numbers hold neither brackets nor commas, so ``],[`` occurs only between two rows.
    """
    if not rows:
        return []
    return orjson.dumps(rows)[2:-2].split(b"],[")


class EncodedStrings:
    """The orjson encodings of strings (or tuples of strings) that recur, each encoded once.

    The encodings are kept in objects of their own size (see :func:`encoded`).

    Args:
        limit: Encodings kept at most; past it, further values are encoded on every call.
    """

    __slots__ = ("_cache", "_limit")

    def __init__(self, limit: int = 1_000_000):
        self._cache: dict[Hashable, bytes] = {}
        self._limit = limit

    def __call__(self, value: Hashable) -> bytes:
        """The JSON encoding of ``value``."""
        known = self._cache.get(value)
        if known is None:
            known = encoded(value)
            if len(self._cache) < self._limit:
                self._cache[value] = known
        return known

    def many(self, values: Collection[Hashable]) -> list[bytes]:
        """The JSON encoding of each of ``values``."""
        # A batch repeats a few values (a source, a store, a skill) many times over: each
        # distinct one is looked up once, the rest is indexing.
        encoded = {value: self(value) for value in set(values)}
        return [encoded[value] for value in values]
