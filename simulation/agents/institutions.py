"""Institutions households respond to: the government (elevation subsidy) and the insurer.

Both are Mesa agents that review the year once its losses are known and may change one policy
lever within configured bounds. A change is returned as ``(old, new)`` so the model can turn it
into a policy-change memory for every household.
"""

from __future__ import annotations

from collections import deque
from typing import TYPE_CHECKING

import mesa

if TYPE_CHECKING:
    from simulation.config import GovernmentConfig, InsurerConfig

__all__ = ["RATE_DIGITS", "SUBSIDY_DIGITS", "Government", "Insurer"]

#: Decimals the subsidy share is rounded to after each change (keeps steps from drifting),
#: before it is held to its bounds (a bound of more decimals is taken as it is).
SUBSIDY_DIGITS = 10
#: Decimals of the premium rate per $1,000 after each change (a filed rate), before it is held
#: to its bounds (a bound of more decimals is taken as it is).
RATE_DIGITS = 4

_HALF_CENT = 0.005


class Government(mesa.Agent):
    """Sets the share of elevation costs it subsidises.

    After a heavy-loss year (mean damage per active household above the configured level) the
    share rises by one step, up to its maximum; after ``relax_after`` quiet years in a row it
    falls by one step, down to its minimum. An optional yearly budget caps what it pays.
    """

    def __init__(self, model: mesa.Model, config: GovernmentConfig):
        super().__init__(model)
        self.config = config
        self.subsidy_share = config.initial_subsidy
        self.quiet_years = 0
        self.spent_this_year = 0.0

    def subsidy_for(self, cost: float) -> float:
        """The share this government would pay of ``cost`` now, given its remaining budget."""
        budget = self.config.budget
        # Money is compared to the half cent: payments carry rounding error (90,000 x 0.55 is
        # 49,500.00000000001), which must not cost the last household a budget covers its share.
        if (
            budget is not None
            and self.spent_this_year + cost * self.subsidy_share > budget + _HALF_CENT
        ):
            return 0.0
        return self.subsidy_share

    def pay(self, amount: float) -> None:
        """Record a subsidy payment against this year's budget."""
        self.spent_this_year += amount

    def review(self, mean_damage: float) -> tuple[float, float] | None:
        """Adjust the subsidy after a year with ``mean_damage`` per active household.

        Returns:
            ``(old, new)`` when the share changed, else ``None``.
        """
        cfg = self.config
        self.spent_this_year = 0.0
        old = self.subsidy_share
        if mean_damage >= cfg.heavy_loss_per_household and mean_damage > 0.0:
            self.quiet_years = 0
            self.subsidy_share = min(cfg.max_subsidy, old + cfg.step)
        else:
            self.quiet_years += 1
            if cfg.relax_after is not None and self.quiet_years >= cfg.relax_after:
                self.quiet_years = 0
                self.subsidy_share = max(cfg.min_subsidy, old - cfg.step)
        # Rounded, then held to the bounds: a bound of more digits than kept stays a bound.
        share = round(self.subsidy_share, SUBSIDY_DIGITS)
        self.subsidy_share = min(cfg.max_subsidy, max(cfg.min_subsidy, share))
        return (old, self.subsidy_share) if self.subsidy_share != old else None


class Insurer(mesa.Agent):
    """Moves the premium rate toward a target loss ratio over a rolling window.

    The rate is scaled by ``loss_ratio / target`` over the last ``window`` years, clipped to
    ``max_change`` per year and to ``[min_rate, max_rate]``; within ``tolerance`` of the target
    nothing changes. A window without premiums leaves the rate as it is. Every year counts
    toward the window, those before the first premiums too (year 1: no premium was bought
    before the run, and its claims are those of the policies households start with, if any):
    the first review comes ``window`` years after the run starts, not after the first
    premiums.
    """

    def __init__(self, model: mesa.Model, config: InsurerConfig, rate: float):
        super().__init__(model)
        self.config = config
        self.rate = rate
        #: (premiums, claims) of the last ``window`` years, oldest first.
        self.history: deque[tuple[float, float]] = deque(maxlen=config.window)

    def review(self, premiums: float, claims: float) -> tuple[float, float] | None:
        """Record a year's premiums and claims; return ``(old, new)`` if the rate changed."""
        cfg = self.config
        self.history.append((premiums, claims))
        if not cfg.enabled or len(self.history) < cfg.window:
            return None
        total_premiums = sum(p for p, _ in self.history)
        if total_premiums <= 0.0:
            return None
        loss_ratio = sum(c for _, c in self.history) / total_premiums
        if abs(loss_ratio / cfg.target_loss_ratio - 1.0) <= cfg.tolerance:
            return None
        factor = min(
            1.0 + cfg.max_change, max(1.0 - cfg.max_change, loss_ratio / cfg.target_loss_ratio)
        )
        old = self.rate
        # Rounded, then held to the bounds: a bound of more digits than kept stays a bound.
        new = min(cfg.max_rate, max(cfg.min_rate, round(old * factor, RATE_DIGITS)))
        if abs(new - old) < 0.005:  # below a cent per $1,000: not worth a filing
            return None
        self.rate = new
        return (old, new)
