"""Agents: households and the institutions (government, insurer) they respond to."""

from __future__ import annotations

from simulation.agents.state import STATE_FIELDS, TENURES, HouseholdState

__all__ = ["STATE_FIELDS", "TENURES", "HouseholdState"]
