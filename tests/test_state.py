"""Household state helpers: flood zones as a column of codes, and values looked up by zone."""

from __future__ import annotations

import numpy as np
import pytest
from hypothesis import given
from hypothesis import strategies as st

from simulation.agents.state import FLOOD_ZONES, ZoneColumn, check_state_values, per_zone

zone_lists = st.lists(st.sampled_from(FLOOD_ZONES), max_size=40)
zone_values = st.dictionaries(
    st.sampled_from(FLOOD_ZONES), st.floats(allow_nan=False, allow_infinity=False)
)


@given(zones=zone_lists, values=zone_values, default=st.floats(allow_nan=False))
def test_a_zone_column_looks_up_what_the_names_look_up(
    zones: list[str], values: dict[str, float], default: float
) -> None:
    by_name = per_zone(zones, values, default)
    by_code = per_zone(ZoneColumn.of(zones), values, default)
    assert by_code.dtype == by_name.dtype == np.float64
    np.testing.assert_array_equal(by_code, by_name)


@given(zones=zone_lists, start=st.integers(0, 40))
def test_part_of_a_zone_column_is_the_column_of_part_of_the_names(
    zones: list[str], start: int
) -> None:
    column = ZoneColumn.of(zones)
    assert len(column) == len(zones)
    np.testing.assert_array_equal(column[start:].codes, ZoneColumn.of(zones[start:]).codes)
    rows = np.arange(len(zones))[::-1]
    np.testing.assert_array_equal(column[rows].codes, ZoneColumn.of(zones[::-1]).codes)


def test_a_zone_without_a_value_or_default_is_a_key_error_only_where_a_household_is() -> None:
    values = {"AE": 2.0, "X": 1.0}
    np.testing.assert_array_equal(per_zone(ZoneColumn.of(["X", "AE"]), values), [1.0, 2.0])
    for zones in (["AE", "VE"], ZoneColumn.of(["AE", "VE"])):
        with pytest.raises(KeyError, match="VE"):
            per_zone(zones, values)


def test_a_name_that_is_no_flood_zone_is_refused() -> None:
    with pytest.raises(KeyError, match="Z"):
        ZoneColumn.of(["AE", "Z"])


def test_no_states_have_nothing_to_refuse() -> None:
    """The 64-bit bound's min() and max() must not be asked of an empty sequence."""
    assert check_state_values([]) is None
