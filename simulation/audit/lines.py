r"""Audit lines made a column at a time: one shape, many lines, no Python loop per line.

:class:`~simulation.audit.writer.AuditWriter` logs the lines of ``engine: arrays`` many at a
time, and they share a few shapes: a household's retrieval, its decision, a memory write, a
quiet year end. Building a dict for each line and encoding it, or even filling a bytes format
line by line, costs far more than the line's bytes. Here orjson encodes each shape once, with a
placeholder where a value varies, into a :class:`LineTemplate`; its lines are then filled in
by pyarrow, column by column, from columns of values that orjson has already encoded: numbers
a whole array at a time (:func:`numbers`), recurring strings once each (:func:`strings`).
A row's JSON list is cut from entries that already carry their commas (:func:`joined_numbers`,
:func:`joined_rows`), with no step per entry.
Every byte of a line comes from orjson, so the lines are those orjson gives for the lines'
dicts; ``tests/test_audit_lines.py`` and ``tests/test_array_engine.py`` compare them.

A column is a pyarrow binary array of encoded JSON values, or a column of recurring values
kept as codes into a table of their encodings (:func:`coded`), which a template joins to the
fixed parts around it entry by entry rather than line by line. A null in a column leaves the
line's entry out where the template marks it :data:`OPTIONAL` (see :func:`optional`).

Example:
    >>> import numpy as np
    >>> template = LineTemplate({"agent_id": HOLE, "year": HOLE, "scores": [HOLE]})
    >>> lines = template.fill(
    ...     strings(["H1", "H2"]),
    ...     numbers(np.array([3, 4])),
    ...     joined_numbers(np.array([0.5, 0.25, 1.0]), np.array([2, 1])),
    ... )
    >>> bytes(line_bytes(lines))
    b'{"agent_id":"H1","year":3,"scores":[0.5,0.25]}\n{"agent_id":"H2","year":4,"scores":[1.0]}\n'
"""

from __future__ import annotations

import functools
import re
from typing import TYPE_CHECKING, Any

import numpy as np
import orjson
import pyarrow as pa
import pyarrow.compute as pc

if TYPE_CHECKING:
    from collections.abc import Callable, Iterable, Mapping

    from numpy.typing import ArrayLike

__all__ = [
    "HOLE",
    "NOTHING",
    "OPTIONAL",
    "LineTemplate",
    "coded",
    "collapsed",
    "encoded",
    "joined_numbers",
    "joined_rows",
    "line_bytes",
    "nonzero_objects",
    "numbers",
    "only_where",
    "optional",
    "separated",
    "strings",
]

# orjson escapes control characters inside strings (\u0001), so these bytes occur in its output
# only where a placeholder put them.
_HOLE_MARK, _OPTIONAL_MARK = b"\x01", b"\x02"
#: Placeholder for a value, filled from a column of encoded values.
HOLE = orjson.Fragment(_HOLE_MARK)
#: Placeholder for an entry of an object that some lines leave out: ``{"k": OPTIONAL}`` is
#: filled from a column holding ``,"k":<value>`` or nothing (see :func:`optional`).
OPTIONAL = orjson.Fragment(_OPTIONAL_MARK)
# An optional entry with its comma and key (keys are orjson-encoded: no bare quote inside);
# the entry is never an object's first, which is all the templates need.
_OPTIONAL_ENTRY = re.compile(rb',"(?:[^"\\]|\\.)*":\x02')
_COMMA = ord(",")
_BINARY = pa.binary()
#: The empty value, as a pyarrow scalar (a separator, or what fills a null).
NOTHING = pa.scalar(b"", _BINARY)
_NO_SEPARATOR = NOTHING
_ENTRY_SEPARATOR = pa.scalar(b",", _BINARY)
_NULL = pa.scalar(None, _BINARY)
_OPEN, _CLOSE = pa.scalar(b"{", _BINARY), pa.scalar(b"}", _BINARY)
_EMPTY_OBJECT = pa.array([b"{}"], _BINARY)
_BIG = 2**31  # a binary array's offsets are 32-bit


def encoded(value: Any) -> bytes:
    """The orjson encoding of ``value``, in a bytes object of its own size, to keep.

    orjson returns each encoding in an object allocated for 4 KB: fine for a line written at
    once, but kept for 100,000 households those 4 KB add up to gigabytes.
    """
    return bytes(memoryview(orjson.dumps(value)))


@functools.lru_cache(maxsize=1024)
def _fixed(part: bytes) -> pa.Scalar:
    """``part`` as a pyarrow scalar, made once for every template that has it.

    pyarrow makes a scalar of each bytes argument on every call, which took 80 % of a call on a
    thousand lines; a scalar takes about 2.6 µs to make, and the templates of each year (whose
    lines carry the year) have all but their first part in common with the year before's.
    """
    return pa.scalar(part, _BINARY)


class LineTemplate:
    """Lines of one shape: the encoded record split at its placeholders.

    Args:
        record: A line's dict, with :data:`HOLE` (or :data:`OPTIONAL`) where values vary.
        line: End each line with a newline (``False``: values within a line).
    """

    __slots__ = ("_parts",)

    def __init__(self, record: Any, *, line: bool = True):
        text = orjson.dumps(record, option=orjson.OPT_APPEND_NEWLINE if line else None)
        text = _OPTIONAL_ENTRY.sub(_HOLE_MARK, text)
        if _OPTIONAL_MARK in text:
            raise ValueError("OPTIONAL stands only for a value of an object, after its first")
        self._parts = text.split(_HOLE_MARK)

    @property
    def holes(self) -> int:
        """How many columns :meth:`fill` takes."""
        return len(self._parts) - 1

    @property
    def parts(self) -> tuple[bytes, ...]:
        """The fixed bytes before, between and after the placeholders (one more than holes)."""
        return tuple(self._parts)

    def fill(self, *columns: pa.Array | bytes) -> pa.Array:
        """The lines whose values are the columns' entries, in the placeholders' order.

        Args:
            *columns: Binary arrays of encoded values, all of one length (a line per entry),
                or bytes: one encoded value for every line. At least one must be an array. A
                column of recurring values may come as a ``pa.DictionaryArray`` (codes into a
                binary array of their encodings, as :func:`coded` makes): the fixed parts
                around it then join its entries rather than each line, where it has at most
                half as many entries as lines.

        Returns:
            A binary array of the lines (see :func:`line_bytes` to write them).
        """
        if len(columns) != self.holes:
            raise ValueError(f"the template has {self.holes} holes, given {len(columns)} columns")
        # pyarrow's join costs about the same for each piece of each line, whatever its length
        # (docs/performance.md): values the same in every line join the fixed parts around
        # them, and a coded column takes the fixed parts on both sides into its entries.
        pieces: list[Any] = []
        fixed = self._parts[0]
        waiting: tuple[pa.DictionaryArray, bytes] | None = None  # a coded column and its prefix
        for given, part in zip(columns, self._parts[1:], strict=True):
            if isinstance(given, bytes):
                fixed += given + part
                continue
            if waiting is not None:
                pieces.append(self._folded(*waiting, fixed))
                waiting, fixed = None, b""
            column = _foldable(given)
            if isinstance(column, pa.DictionaryArray):
                waiting = column, fixed
            else:
                if fixed:
                    pieces.append(_fixed(fixed))
                pieces.append(column)
            fixed = part
        if waiting is not None:
            pieces.append(self._folded(*waiting, fixed))
            fixed = b""
        if not pieces:
            raise ValueError("a template is filled from at least one array")
        if fixed:
            pieces.append(_fixed(fixed))
        if len(pieces) == 1:  # a coded column that took every fixed part
            return pieces[0]
        # binary_join_element_wise takes its last argument as the separator.
        return pc.binary_join_element_wise(*pieces, _NO_SEPARATOR)

    def _folded(self, column: pa.DictionaryArray, prefix: bytes, suffix: bytes) -> pa.Array:
        """``column``'s values, each between ``prefix`` and ``suffix``."""
        entries = column.dictionary
        if prefix or suffix:
            around = [_fixed(prefix)] if prefix else []
            around.append(entries)
            if suffix:
                around.append(_fixed(suffix))
            entries = pc.binary_join_element_wise(*around, _NO_SEPARATOR)
        return entries.take(column.indices)


def _foldable(column: pa.Array) -> pa.Array:
    """``column``, decoded unless it is coded with at most half as many entries as lines.

    Folding joins up to three pieces per entry to spare two per line: with more entries than
    that, joining them would cost more than it spares.
    """
    if isinstance(column, pa.DictionaryArray) and 2 * len(column.dictionary) > len(column):
        return column.dictionary.take(column.indices)
    return column


def numbers(values: ArrayLike) -> pa.Array:
    """Each of ``values`` (ints, floats or bools, 1-D) as orjson encodes it.

    orjson encodes the whole array at once; a number's encoding holds no comma, so the
    encoding splits at its commas into the entries, without a Python object per entry.
    """
    array = np.ascontiguousarray(values)
    if not len(array):
        return pa.array([], _BINARY)
    return pc.binary_slice(_terminated_numbers(array), 0, -1)


def joined_numbers(values: ArrayLike, counts: ArrayLike) -> pa.Array:
    """The inside of a JSON list per row: the next ``counts[i]`` of ``values``, encoded.

    Cut from orjson's encoding of the whole array, which already holds each row's entries and
    the commas between them, one after another: a row is that stretch of it, with no step per
    entry.
    """
    array = np.ascontiguousarray(values)
    if not len(array):
        return joined_rows(pa.array([], _BINARY), counts)
    return joined_rows(_terminated_numbers(array), counts)


def _terminated_numbers(array: np.ndarray) -> pa.Array:
    """Each entry of ``array`` (not empty) as orjson encodes it, with the comma after it.

    The last entry ends in the closing bracket instead: one byte either way.
    """
    text = orjson.dumps(array, option=orjson.OPT_SERIALIZE_NUMPY)
    commas = np.flatnonzero(np.frombuffer(text, dtype=np.uint8) == _COMMA)
    # Entry i is text[offsets[i]:offsets[i+1]]: its encoding and the byte after it.
    offsets = np.empty(len(array) + 1, dtype=np.int32)
    offsets[0] = 1
    offsets[1:-1] = commas + 1
    offsets[-1] = len(text)
    return pa.Array.from_buffers(
        _BINARY, len(array), [None, pa.py_buffer(offsets), pa.py_buffer(text)]
    )


def collapsed(
    values: np.ndarray, encode: Callable[[np.ndarray], pa.Array] = numbers
) -> pa.Array | bytes:
    """``encode(values)``, or the bytes of its one value when ``values`` are all the same.

    :meth:`LineTemplate.fill` joins bytes to the template's fixed parts: a value the same in
    every line (a write's year, a full working memory's size) then costs nothing per line.

    Args:
        values: A 1-D array (floats are compared by their bits: 0.0 and -0.0 encode
            differently).
        encode: Makes the column of encoded values from ``values`` (:func:`numbers`, or a
            table's ``take`` for codes).
    """
    bits = values.view(f"u{values.itemsize}") if values.dtype.kind == "f" else values
    if len(values) and (bits == bits[0]).all():
        if encode is numbers:  # orjson's "[v]" holds the value as numbers() encodes it
            return orjson.dumps(values[:1], option=orjson.OPT_SERIALIZE_NUMPY)[1:-1]
        return encode(values[:1])[0].as_py()
    return encode(values)


def coded(codes: ArrayLike, table: pa.Array) -> pa.DictionaryArray:
    """The column ``table.take(codes)``, kept as codes into ``table`` until a template fills it.

    :meth:`LineTemplate.fill` then joins the fixed parts around the column to the table's
    entries, once each, rather than to every line.

    Args:
        codes: Positions in ``table``, 1-D.
        table: Encoded values (a binary array), such as :func:`strings` makes.
    """
    indices = pa.array(np.asarray(codes, dtype=np.int64).ravel())
    return pa.DictionaryArray.from_arrays(indices, table, safe=False)


def strings(values: Iterable[Any]) -> pa.Array:
    """Each of ``values`` (strings, tuples of strings, ...) as orjson encodes it.

    Meant for tables of distinct values, taken from by code (``strings(names).take(codes)``).
    orjson encodes the whole list at once, and the entries are cut from that encoding where
    each is as long as it can be at the least: ``len(value) + 2`` bytes, an ASCII text without
    escapes between its quotes (or an empty tuple). No encoding is shorter, so when the whole
    list's length is the sum of these, every entry's is, and their bounds follow from the
    lengths alone. 10,000 memory texts took 0.45 ms this way, against 2.8 ms one by one.
    Otherwise (an escape, a character beyond ASCII, a tag set) each value is encoded on its
    own and copied out of orjson's 4 KB object (:func:`encoded`) before the next is made: the
    table of 100,000 household ids would otherwise pass through 400 MB.
    """
    values = values if isinstance(values, list) else list(values)
    count = len(values)
    if not count:
        return pa.array([], _BINARY)
    text = orjson.dumps(values)
    try:
        lengths = np.fromiter(map(len, values), dtype=np.int64, count=count)
    except TypeError:  # a value without a length (a number): encoded on its own
        lengths = None
    # '[' + the entries, each followed by ',' (the last by ']'): len(value) + 3 bytes apiece.
    if lengths is None or len(text) != int(lengths.sum()) + 3 * count + 1 or len(text) >= _BIG:
        return pa.array([encoded(value) for value in values], _BINARY)
    ends = np.empty(count + 1, dtype=np.int32)
    ends[0] = 1
    np.cumsum(lengths + 3, out=ends[1:])
    ends[1:] += 1
    terminated = pa.Array.from_buffers(
        _BINARY, count, [None, pa.py_buffer(ends), pa.py_buffer(text)]
    )
    return pc.binary_slice(terminated, 0, -1)


def separated(values: pa.Array) -> pa.Array:
    """Each of ``values`` followed by a comma: a table to take the entries of :func:`joined_rows`.

    Made once for a table of encodings, the commas then cost nothing per line.
    """
    return pc.binary_join_element_wise(values, _ENTRY_SEPARATOR, NOTHING)


def joined_rows(values: pa.Array, counts: ArrayLike) -> pa.Array:
    """The inside of a JSON list per row: the next ``counts[i]`` of ``values``, comma-joined.

    Each entry of ``values`` already ends in its comma, and the entries of a row lie one after
    another in ``values``' data (as :func:`separated` entries taken from a table do): a row is
    that stretch of bytes but its last byte, one slice per row and nothing per entry.

    Args:
        values: Encoded values, each followed by one byte (a comma), without nulls.
        counts: How many of ``values`` each row takes, in order; they add up to all of them.
    """
    counts = np.asarray(counts, dtype=np.int64)
    ends = np.zeros(len(counts) + 1, dtype=np.int64)
    np.cumsum(counts, out=ends[1:])
    if ends[-1] != len(values):
        msg = f"the rows take {ends[-1]} entries, given {len(values)}"
        raise ValueError(msg)
    if len(values):
        _, offsets, data = values.buffers()
        bounds = np.frombuffer(
            offsets, dtype=np.int32, count=len(values) + 1, offset=4 * values.offset
        )
    else:  # every row is empty
        data, bounds = pa.py_buffer(b""), np.zeros(1, dtype=np.int32)
    rows = pa.Array.from_buffers(_BINARY, len(counts), [None, pa.py_buffer(bounds[ends]), data])
    return pc.binary_slice(rows, 0, -1)


def only_where(mask: ArrayLike, values: pa.Array | pa.Scalar) -> pa.Array:
    """``values`` (an array, or one scalar for all) where ``mask`` holds, null elsewhere.

    Makes the column of an entry that only some lines have (see :func:`optional`).
    """
    return pc.if_else(pa.array(mask, pa.bool_()), values, _NULL)


def optional(key: str, values: pa.Array) -> pa.Array | bytes:
    """A column for an :data:`OPTIONAL` entry ``key``: ``,"key":value``, or nothing where null.

    Returns:
        The column, or ``b""`` (nothing in any line) when every value is null.
    """
    if values.null_count == len(values):
        return b""
    entry = pc.binary_join_element_wise(_entry_start(key), values, _NO_SEPARATOR)
    return pc.fill_null(entry, _NO_SEPARATOR)


def nonzero_objects(columns: Mapping[str, np.ndarray]) -> pa.DictionaryArray:
    """Each row's JSON object of its values that are not 0 or False, keyed by column name.

    Row ``i`` is what orjson gives for ``{k: v[i] for k, v in columns.items() if v[i]}``: the
    entries in the columns' order, ``{}`` where every value is 0. A household's changed state
    fields, say, without a dict per household. The column comes :func:`coded`: the rows with
    no entry share the one empty object.

    Args:
        columns: At least one column, all 1-D and of one length: bools, ints or floats
            (nan counts as set, as it is truthy).
    """
    present = {key: values != 0 for key, values in columns.items()}
    # Only the rows with an entry are joined (pyarrow's cost is per row and piece); the
    # others take the empty object, the first of the table.
    rows = np.flatnonzero(np.logical_or.reduce(list(present.values())))
    which = np.zeros(len(next(iter(columns.values()))), dtype=np.int64)
    which[rows] = np.arange(1, len(rows) + 1)
    entries = []
    opened = np.zeros(len(rows), dtype=bool)  # whether a row has an entry yet: then a comma
    for key, values in columns.items():
        here = present[key][rows]
        if not here.any():  # the usual for some fields: no column at all
            continue
        # Each row's start of this entry: none (absent), '"key":' or ',"key":'.
        starts = _entry_starts(key, b"true" if values.dtype == np.bool_ else b"")
        start = starts.take(pa.array(np.where(here, opened.view(np.int8) + 1, 0)))
        if values.dtype == np.bool_:
            entries.append(start)
        else:  # a null start nulls the joined entry
            entries.append(pc.binary_join_element_wise(start, numbers(values[rows]), NOTHING))
        opened |= here
    objects = [_EMPTY_OBJECT]
    if entries:  # an absent entry (null) adds nothing to its row
        objects.append(
            pc.binary_join_element_wise(
                _OPEN, *entries, _CLOSE, NOTHING, null_handling="replace", null_replacement=""
            )
        )
    return coded(which, pa.concat_arrays(objects))


@functools.cache
def _entry_starts(key: str, value: bytes) -> pa.Array:
    """No entry, ``"key":value`` and ``,"key":value``: the starts of an entry, by position."""
    entry = orjson.dumps(key) + b":" + value
    return pa.array([None, entry, b"," + entry], _BINARY)


@functools.cache
def _entry_start(key: str) -> pa.Scalar:
    """``,"key":`` as a pyarrow scalar (made once: see LineTemplate.__init__)."""
    return pa.scalar(b"," + orjson.dumps(key) + b":", _BINARY)


def line_bytes(lines: pa.Array) -> memoryview:
    """The bytes of ``lines`` (a binary array), one after the other, without a copy."""
    if not len(lines):
        return memoryview(b"")
    _, offsets, data = lines.buffers()
    bounds = np.frombuffer(offsets, dtype=np.int32, count=len(lines) + 1, offset=4 * lines.offset)
    return memoryview(data)[int(bounds[0]) : int(bounds[-1])]
