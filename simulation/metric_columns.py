"""The columns of a run's ``model_years.csv``: what the model writes and its readers check.

Kept apart from :mod:`simulation.model` so that the readers of a run's outputs know them
without importing Mesa.
"""

from __future__ import annotations

__all__ = ["COUNT_METRICS", "METRIC_COLUMNS"]

#: Columns of ``model_years.csv``, in order.
METRIC_COLUMNS = (
    "year",
    "active_households",
    "insured_share",
    "insured_share_ae",
    "insured_share_x",
    "elevated_share",
    "relocated_share",
    "flooded_households",
    "damaged_households",
    "total_damage",
    "claims_filed",
    "claims_paid",
    "claims_paid_amount",
    "premium_rate",
    "subsidy_share",
    "mean_tp",
    "mean_working",
    "mean_episodic",
    "decisions_buy_insurance",
    "decisions_elevate_house",
    "decisions_relocate",
    "decisions_do_nothing",
    "invalid_proposals",
)

#: The metrics that count households, claims or decisions: whole numbers.
COUNT_METRICS = (
    "active_households",
    "flooded_households",
    "damaged_households",
    "claims_filed",
    "claims_paid",
    *(c for c in METRIC_COLUMNS if c.startswith("decisions_")),
    "invalid_proposals",
)
