"""Tests for simulation/audit/lines.py: lines filled column by column are orjson's lines."""

from __future__ import annotations

import numpy as np
import orjson
import pyarrow as pa
import pytest
from hypothesis import assume, given
from hypothesis import strategies as st

from simulation.audit.lines import (
    HOLE,
    OPTIONAL,
    LineTemplate,
    coded,
    collapsed,
    joined_numbers,
    joined_rows,
    line_bytes,
    nonzero_objects,
    numbers,
    only_where,
    optional,
    separated,
    strings,
)

# Any text, including quotes, backslashes, percent signs, control characters and non-ASCII.
texts = st.text()
floats = st.floats(allow_nan=False, allow_infinity=False)
ints = st.integers(-(2**53), 2**53)


def _values(column: pa.Array) -> list[bytes | None]:
    return column.to_pylist()


@st.composite
def records(draw: st.DrawFn) -> list[dict]:
    """Lines of one shape: an id, a year, a list of scores, and an optional amount."""
    count = draw(st.integers(1, 6))
    return [
        {
            "agent_id": draw(texts),
            "year": draw(ints),
            "scores": draw(st.lists(floats, max_size=5)),
            "amount": draw(st.one_of(st.none(), floats)),
        }
        for _ in range(count)
    ]


@given(texts, records())
def test_filled_lines_are_the_lines_orjson_writes(run_id, lines):
    template = LineTemplate(
        {"run_id": run_id, "agent_id": HOLE, "year": HOLE, "scores": [HOLE], "amount": OPTIONAL}
    )
    scores = [line["scores"] for line in lines]
    amounts = [line["amount"] for line in lines]
    filled = template.fill(
        strings(line["agent_id"] for line in lines),
        numbers(np.array([line["year"] for line in lines], dtype=np.int64)),
        joined_numbers(
            np.array([s for row in scores for s in row], dtype=float),
            [len(row) for row in scores],
        ),
        optional(
            "amount",
            pa.array([None if a is None else orjson.dumps(a) for a in amounts], pa.binary()),
        ),
    )
    expected = b"".join(
        orjson.dumps(
            {
                "run_id": run_id,
                **{k: v for k, v in line.items() if k != "amount" or v is not None},
            },
            option=orjson.OPT_APPEND_NEWLINE,
        )
        for line in lines
    )
    assert bytes(line_bytes(filled)) == expected


@given(st.lists(floats))
def test_floats_are_encoded_one_by_one_as_orjson_encodes_them(values):
    assert _values(numbers(np.array(values, dtype=float))) == [orjson.dumps(v) for v in values]


@given(st.lists(ints))
def test_ints_are_encoded_as_orjson_encodes_them(values):
    assert _values(numbers(np.array(values, dtype=np.int64))) == [orjson.dumps(v) for v in values]


@given(st.lists(st.sampled_from([0.0, -0.0, 0.5, float("nan")]), min_size=1, max_size=6))
def test_a_column_of_one_value_collapses_to_its_bytes(values):
    array = np.array(values)
    got = collapsed(array)
    each = [orjson.dumps(v) for v in values]
    if isinstance(got, bytes):  # only when every value encodes the same
        assert each == [got] * len(values)
    else:
        assert _values(got) == each
        assert len(set(each)) > 1  # kept whole only where the values differ
    assert collapsed(np.array([4, 4, 4])) == b"4"
    assert collapsed(np.array([], dtype=np.int64)).to_pylist() == []


@given(
    st.one_of(
        floats.map(lambda v: np.array([v])),
        ints.map(lambda v: np.array([v], dtype=np.int64)),
        st.booleans().map(lambda v: np.array([v])),
        st.integers(0, 255).map(lambda v: np.array([v], dtype=np.uint8)),
    ),
    st.integers(1, 5),
)
def test_a_repeated_number_collapses_to_its_encoding_in_a_column(value, count):
    assert collapsed(np.repeat(value, count)) == numbers(value)[0].as_py()


def test_nan_is_encoded_as_orjson_encodes_it():
    assert _values(numbers(np.array([np.nan, 1.5]))) == [b"null", b"1.5"]


@given(st.lists(st.one_of(texts, st.tuples(texts, texts))))
def test_strings_and_tags_are_encoded_as_orjson_encodes_them(values):
    assert _values(strings(values)) == [orjson.dumps(v) for v in values]


# Printable ASCII: mostly texts cut from one encoding of the whole list, and now and then one
# with a quote or a backslash, which orjson escapes.
ascii_texts = st.text(st.characters(min_codepoint=32, max_codepoint=126))


@given(st.lists(st.one_of(ascii_texts, st.just(()), st.none(), ints)))
def test_strings_cut_from_one_encoding_are_orjsons(values):
    """Texts, empty tag sets, nulls and numbers: each entry as orjson encodes it alone."""
    assert _values(strings(iter(values))) == [orjson.dumps(v) for v in values]


def test_strings_of_many_plain_texts_are_cut_from_one_encoding():
    texts = [f"Year {n}: a flood of {n % 7}.5 ft, damage ${n * 1234:,}" for n in range(5000)]
    assert _values(strings(texts)) == [orjson.dumps(t) for t in texts]
    assert _values(strings([*texts, 'the "levee"'])) == [
        *(orjson.dumps(t) for t in texts),
        b'"the \\"levee\\""',
    ]


@given(st.lists(st.lists(floats, max_size=6)), st.lists(st.lists(ints, max_size=6)))
def test_numbers_are_joined_row_by_row_from_one_encoding(float_rows, int_rows):
    for rows, dtype in ((float_rows, float), (int_rows, np.int64)):
        values = np.array([v for row in rows for v in row], dtype=dtype)
        got = _values(joined_numbers(values, [len(row) for row in rows]))
        assert got == [orjson.dumps(row)[1:-1] for row in rows]


@given(st.lists(st.lists(texts, max_size=4)), st.integers(0, 3))
def test_separated_entries_are_joined_row_by_row(rows, skipped):
    # The entries may start at an offset into their buffers, as a slice's do.
    flat = ["x"] * skipped + [v for row in rows for v in row]
    entries = separated(strings(flat)).slice(skipped)
    got = _values(joined_rows(entries, [len(row) for row in rows]))
    assert got == [orjson.dumps(row)[1:-1] for row in rows]


def test_joined_rows_take_every_entry():
    with pytest.raises(ValueError, match="the rows take 2 entries, given 3"):
        joined_rows(separated(strings(["a", "b", "c"])), [1, 1])
    assert _values(joined_rows(pa.array([], pa.binary()), [0, 0])) == [b"", b""]


def test_the_lines_of_a_slice_are_its_own():
    lines = LineTemplate({"n": HOLE}).fill(numbers(np.arange(5)))
    assert bytes(line_bytes(lines[2:4])) == b'{"n":2}\n{"n":3}\n'
    assert bytes(line_bytes(lines[:0])) == b""


def test_a_template_shows_its_fixed_parts():
    template = LineTemplate({"a": HOLE, "b": 1, "c": [HOLE]})
    assert template.parts == (b'{"a":', b',"b":1,"c":[', b"]}\n")
    assert template.holes == 2


def test_a_value_template_has_no_newline():
    template = LineTemplate([{"id": HOLE, "to": None}], line=False)
    assert _values(template.fill(strings(["a"]))) == [b'[{"id":"a","to":null}]']


def test_a_template_takes_one_column_per_hole():
    with pytest.raises(ValueError, match="2 holes, given 1"):
        LineTemplate({"a": HOLE, "b": HOLE}).fill(strings(["x"]))


def test_an_optional_entry_cannot_open_an_object():
    with pytest.raises(ValueError, match="after its first"):
        LineTemplate({"a": OPTIONAL, "b": HOLE})


@st.composite
def columns_of_each_kind(draw: st.DrawFn) -> list[tuple[str, list[str], list[int]]]:
    """Four columns of texts, each given as an array, as codes into a table, or once for all."""
    count = draw(st.integers(1, 8))
    columns = []
    for _ in range(4):
        table = draw(st.lists(texts, min_size=1, max_size=4))
        codes = draw(st.lists(st.integers(0, len(table) - 1), min_size=count, max_size=count))
        kind = draw(st.sampled_from(["array", "coded", "once"]))
        columns.append((kind, table, [0] * count if kind == "once" else codes))
    return columns


@given(texts, columns_of_each_kind())
def test_coded_columns_fill_the_lines_orjson_writes(run_id, columns):
    # A coded column takes the fixed parts around it into its table's entries (where the table
    # is small beside the lines): next to another coded column, to values given once, first,
    # last, or as the only column left; the lines must not change.
    assume(any(kind != "once" for kind, _, _ in columns))
    template = LineTemplate(
        {"run_id": run_id, "a": HOLE, "nested": {"b": HOLE, "c": HOLE}, "d": [HOLE]}
    )
    given_columns: list[pa.Array | bytes] = []
    for kind, table, codes in columns:
        if kind == "once":
            given_columns.append(orjson.dumps(table[0]))
        elif kind == "coded":
            given_columns.append(coded(np.array(codes), strings(table)))
        else:
            given_columns.append(strings(table[code] for code in codes))
    rows = zip(*([table[code] for code in codes] for _, table, codes in columns), strict=True)
    expected = b"".join(
        orjson.dumps(
            {"run_id": run_id, "a": a, "nested": {"b": b, "c": c}, "d": [d]},
            option=orjson.OPT_APPEND_NEWLINE,
        )
        for a, b, c, d in rows
    )
    assert bytes(line_bytes(template.fill(*given_columns))) == expected


def test_a_coded_column_reads_as_its_table_taken_by_code():
    column = coded(np.array([2, 0, 2, 1]), strings(["x", "y", "z"]))
    assert _values(column) == [b'"z"', b'"x"', b'"z"', b'"y"']
    assert _values(column[1:3]) == [b'"x"', b'"z"']


def test_values_the_same_in_every_line_can_be_given_once():
    template = LineTemplate({"a": HOLE, "b": HOLE, "c": OPTIONAL})
    absent = optional("c", pa.nulls(2, pa.binary()))
    assert absent == b""
    lines = template.fill(b'"x"', numbers(np.arange(2)), absent)
    assert bytes(line_bytes(lines)) == b'{"a":"x","b":0}\n{"a":"x","b":1}\n'


def test_a_template_is_filled_from_at_least_one_array():
    with pytest.raises(ValueError, match="at least one array"):
        LineTemplate({"a": HOLE}).fill(b"1")


def test_entries_only_some_lines_have_are_left_out_of_the_others():
    template = LineTemplate({"id": HOLE, "pinned": OPTIONAL, "amount": OPTIONAL})
    lines = template.fill(
        numbers(np.arange(3)),
        optional("pinned", only_where([True, False, False], pa.scalar(b"true"))),
        optional("amount", only_where([False, False, True], numbers(np.array([0.0, 0.0, 2.5])))),
    )
    assert bytes(line_bytes(lines)) == (
        b'{"id":0,"pinned":true}\n{"id":1}\n{"id":2,"amount":2.5}\n'
    )


@given(
    st.integers(0, 6).flatmap(
        lambda count: st.tuples(
            st.lists(st.booleans(), min_size=count, max_size=count),
            st.lists(
                st.sampled_from([0.0, -0.0, 1.5, 1e-7, 3e16, float("nan")]),
                min_size=count,
                max_size=count,
            ),
            st.lists(st.one_of(st.just(0), ints), min_size=count, max_size=count),
        )
    )
)
def test_objects_of_the_values_set_are_what_orjson_writes_for_them(rows):
    flags, amounts, counts = rows
    columns = {
        "insured": np.array(flags, dtype=bool),
        "damage": np.array(amounts, dtype=float),
        "claims": np.array(counts, dtype=np.int64),
    }
    values = list(zip(flags, amounts, counts, strict=True))
    expected = [
        orjson.dumps({k: v for k, v in zip(columns, row, strict=True) if v}) for row in values
    ]
    assert _values(nonzero_objects(columns)) == expected


def test_rows_with_nothing_set_are_empty_objects_wherever_they_are():
    columns = {"a": np.array([False, True, False]), "b": np.array([0, 0, 0])}
    assert _values(nonzero_objects(columns)) == [b"{}", b'{"a":true}', b"{}"]
    assert _values(nonzero_objects({"a": np.zeros(2, dtype=bool)})) == [b"{}", b"{}"]
