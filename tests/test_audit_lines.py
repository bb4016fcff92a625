"""Tests for simulation/audit/lines.py: formats filled in give the bytes orjson gives."""

from __future__ import annotations

import math

import orjson
from hypothesis import given
from hypothesis import strategies as st

from simulation.audit.lines import (
    HOLE,
    NUMBER,
    EncodedStrings,
    encoded_number_lists,
    encoded_numbers,
    line_format,
)

# Any text, including quotes, backslashes, percent signs, control characters and non-ASCII.
texts = st.text()
numbers = st.one_of(st.integers(-(2**53), 2**53), st.floats(allow_nan=False, allow_infinity=False))


@given(texts, texts, st.integers(0, 10**6), st.lists(numbers, max_size=8))
def test_a_filled_format_is_the_line_orjson_writes(run_id, agent_id, year, scores):
    record = {"run_id": run_id, "agent_id": agent_id, "year": year, "scores": scores}
    fmt = line_format({"run_id": run_id, "agent_id": HOLE, "year": NUMBER, "scores": [HOLE]})
    line = fmt % (orjson.dumps(agent_id), year, b",".join(encoded_numbers(scores)))
    assert line == orjson.dumps(record, option=orjson.OPT_APPEND_NEWLINE)


def test_a_value_format_has_no_newline():
    fmt = line_format([{"id": HOLE, "to": None}], line=False)
    assert fmt % b'"a"' == b'[{"id":"a","to":null}]'


@given(st.lists(numbers))
def test_numbers_are_encoded_one_by_one_as_orjson_encodes_them(values):
    assert encoded_numbers(values) == [orjson.dumps(v) for v in values]


def test_nan_is_encoded_as_orjson_encodes_it():
    assert encoded_numbers([math.nan, 1.5]) == [b"null", b"1.5"]


@given(st.lists(st.lists(st.floats(allow_nan=False, allow_infinity=False), max_size=6)))
def test_lists_of_numbers_are_encoded_row_by_row(rows):
    assert encoded_number_lists(rows) == [orjson.dumps(row)[1:-1] for row in rows]


@given(st.lists(st.one_of(texts, st.tuples(texts, texts))))
def test_strings_and_tags_are_encoded_as_orjson_encodes_them(values):
    encode = EncodedStrings(limit=3)
    assert encode.many(values) == [orjson.dumps(v) for v in values]
    assert [encode(v) for v in values] == [orjson.dumps(v) for v in values]
