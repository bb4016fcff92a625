"""Tests for simulation/rowwise.py: numpy's row reductions, bit for bit, on any width."""

from __future__ import annotations

import numpy as np
import pytest
from hypothesis import given, settings
from hypothesis import strategies as st
from hypothesis.extra import numpy as hnp

from simulation.rowwise import (
    NARROW,
    row_any,
    row_count,
    row_cumsum,
    row_max,
    row_sum_in_order,
)

# Widths on both sides of NARROW: column by column, and numpy's own.
shapes = st.tuples(st.integers(0, 30), st.integers(1, NARROW + 4))
floats = hnp.arrays(
    np.float64,
    shapes,
    elements=st.floats(allow_nan=True, allow_infinity=True, width=64),
)
# Finite values of very different sizes: sums that depend on the order of their terms.
finite = hnp.arrays(
    np.float64,
    shapes,
    elements=st.floats(-1e12, 1e12) | st.sampled_from([0.1, 0.2, 0.3, 1e-17, -0.0]),
)
booleans = hnp.arrays(np.bool_, st.tuples(st.integers(0, 30), st.integers(0, NARROW + 4)))


def _same(got: np.ndarray, expected: np.ndarray) -> None:
    assert got.dtype == expected.dtype
    assert got.shape == expected.shape
    # Bit for bit: a sum's last bit, and -0.0 where numpy has -0.0.
    assert got.tobytes() == expected.tobytes()


@settings(max_examples=200)
@given(floats)
def test_row_max_is_numpys(table):
    got, expected = row_max(table), table.max(axis=1)
    assert got.dtype == expected.dtype
    # NaN where numpy has NaN (whatever its sign bit); the maxima equal elsewhere.
    np.testing.assert_array_equal(got, expected)


@settings(max_examples=200)
@given(booleans)
def test_row_any_and_count_are_numpys(table):
    _same(row_any(table), table.any(axis=1))
    _same(row_count(table), table.sum(axis=1, dtype=np.int64))


@settings(max_examples=200)
@given(finite)
def test_row_cumsum_adds_as_numpy(table):
    _same(row_cumsum(table), np.cumsum(table, axis=1))


@settings(max_examples=200)
@given(booleans)
def test_row_cumsum_counts_booleans(table):
    _same(row_cumsum(table), np.cumsum(table, axis=1, dtype=np.int64))


@settings(max_examples=200)
@given(finite)
def test_row_sum_in_order_is_the_scalar_loops(table):
    expected = []
    for row in table.tolist():
        total = row[0]
        for value in row[1:]:
            total += value
        expected.append(total)
    _same(row_sum_in_order(table), np.array(expected, dtype=np.float64).reshape(len(table)))


def test_row_sum_in_order_adds_left_to_right():
    """((1e16 + 1) - 1e16) + 7 x 1 is 7.0: the 1 is lost in the first addition, as in the loop.

    (numpy 2.4's ``row.sum(axis=1)`` adds a row of ten pairwise and gives 6.0; the exact sum is
    8.0.)
    """
    row = np.array([[1e16, 1.0, -1e16, 1.0, 1.0, 1.0, 1.0, 1.0, 1.0, 1.0]])
    assert row_sum_in_order(row).tolist() == [7.0]
    wide = np.repeat(row, 3, axis=1)  # wider than NARROW: summed by np.cumsum
    assert row_sum_in_order(wide).tolist() == [21.0]


def test_a_table_without_columns():
    empty = np.zeros((3, 0))
    assert row_sum_in_order(empty).tolist() == [0.0, 0.0, 0.0]
    assert row_any(empty.astype(bool)).tolist() == [False, False, False]
    assert row_count(empty.astype(bool)).tolist() == [0, 0, 0]
    assert row_cumsum(empty).shape == (3, 0)
    with pytest.raises(ValueError, match="zero-size array"):
        row_max(empty)
