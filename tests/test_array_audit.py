"""Tests for simulation/array_audit.py: what it encodes is what the object path writes."""

from __future__ import annotations

import numpy as np
import orjson
from hypothesis import given
from hypothesis import strategies as st

from simulation.array_audit import _states
from simulation.audit.writer import DYNAMIC_FIELDS

# The engine's columns of the dynamic fields, as np.array makes them from the states' values.
_FIELD_VALUES = {
    "has_insurance": st.booleans(),
    "has_contents_insurance": st.booleans(),
    "elevated": st.booleans(),
    "relocated": st.booleans(),
    "cumulative_damage": st.sampled_from([0.0, -0.0, 1.5, 12345.678, 1e-7]),
    "insured_years": st.integers(0, 40),
    "claims_paid": st.floats(0, 1e7, allow_nan=False),
    "claims_denied": st.integers(0, 5),
}
households = st.lists(st.fixed_dictionaries(_FIELD_VALUES), min_size=1, max_size=20)


@given(households)
def test_states_before_are_the_set_fields_as_the_object_path_encodes_them(states):
    columns = {name: np.array([s[name] for s in states]) for name in DYNAMIC_FIELDS}
    expected = [orjson.dumps({name: s[name] for name in DYNAMIC_FIELDS if s[name]}) for s in states]
    assert _states(columns).to_pylist() == expected
