"""Tests for the government (subsidy) and insurer (premium rate) agents."""

from __future__ import annotations

from pathlib import Path

import mesa
import pandas as pd
import pytest

from simulation.agents.institutions import Government, Insurer
from simulation.config import GovernmentConfig, InsurerConfig, load_config
from simulation.runner import run_simulation


def test_subsidy_rises_after_heavy_losses_up_to_the_maximum():
    gov = Government(mesa.Model(seed=1), GovernmentConfig(max_subsidy=0.6, step=0.05))
    assert gov.review(5_000.0) == (0.5, 0.55)
    assert gov.review(5_000.0) == (0.55, 0.6)
    assert gov.review(5_000.0) is None  # at the maximum
    assert gov.subsidy_share == 0.6


def test_subsidy_relaxes_after_quiet_years_down_to_the_minimum():
    config = GovernmentConfig(initial_subsidy=0.3, min_subsidy=0.25, relax_after=2)
    gov = Government(mesa.Model(seed=1), config)
    assert gov.review(0.0) is None
    assert gov.review(0.0) == (0.3, 0.25)
    assert [gov.review(0.0) for _ in range(4)] == [None] * 4
    assert gov.subsidy_share == 0.25


def test_budget_caps_subsidies_within_a_year():
    gov = Government(mesa.Model(seed=1), GovernmentConfig(budget=100_000))
    assert gov.subsidy_for(90_000) == 0.5
    gov.pay(45_000)
    assert gov.subsidy_for(90_000) == 0.5  # 45k + 45k fits
    gov.pay(45_000)
    assert gov.subsidy_for(90_000) == 0.0  # the budget is spent
    gov.review(0.0)  # a new year
    assert gov.subsidy_for(90_000) == 0.5


def test_a_budget_for_exactly_n_subsidies_funds_n_despite_rounding():
    gov = Government(mesa.Model(seed=1), GovernmentConfig(initial_subsidy=0.55, budget=99_000))
    paid = 90_000 * (1.0 - 40_500 / 90_000)  # what the model pays: 49,500.00000000001
    gov.pay(paid)
    assert gov.subsidy_for(90_000) == 0.55  # the second of two fits
    gov.pay(paid)
    assert gov.subsidy_for(90_000) == 0.0


def test_government_config_rejects_initial_outside_bounds():
    with pytest.raises(ValueError, match="initial_subsidy"):
        GovernmentConfig(initial_subsidy=0.99)


def test_insurer_waits_for_a_full_window_then_moves_toward_the_target():
    insurer = Insurer(mesa.Model(seed=1), InsurerConfig(window=2, max_change=0.18), rate=4.0)
    assert insurer.review(100.0, 300.0) is None  # window not yet full
    old, new = insurer.review(100.0, 300.0)  # loss ratio 3.0 vs 0.8: capped at +18%
    assert (old, new) == (4.0, pytest.approx(4.72))


def test_insurer_tolerance_and_bounds():
    config = InsurerConfig(window=1, tolerance=0.25, min_rate=3.5, max_change=0.18)
    insurer = Insurer(mesa.Model(seed=1), config, rate=4.0)
    assert insurer.review(100.0, 90.0) is None  # loss ratio 0.9: within 25% of 0.8
    assert insurer.review(100.0, 0.0) == (4.0, 3.5)  # -18% would be 3.28: floored at min_rate
    assert insurer.review(0.0, 50.0) is None  # no premiums, no ratio
    disabled = Insurer(mesa.Model(seed=1), InsurerConfig(enabled=False, window=1), rate=4.0)
    assert disabled.review(100.0, 1_000.0) is None


def test_insurer_judges_only_the_last_window_years():
    insurer = Insurer(mesa.Model(seed=1), InsurerConfig(window=2), rate=4.0)
    assert insurer.review(100.0, 1_000.0) is None  # window not yet full
    assert insurer.review(100.0, 80.0) == (4.0, pytest.approx(4.72))  # ratio 5.4: +18%
    # The year of heavy claims has left the window: 160 / 200 = 0.8, on target.
    assert insurer.review(100.0, 80.0) is None


def test_insurer_rate_is_capped_at_max_rate_and_skips_changes_below_a_cent():
    capped = Insurer(mesa.Model(seed=1), InsurerConfig(window=1, max_rate=12.0), rate=11.0)
    assert capped.review(100.0, 500.0) == (11.0, 12.0)  # +18% would be 12.98
    assert capped.review(100.0, 500.0) is None  # at the cap
    assert capped.rate == 12.0
    config = InsurerConfig(window=1, min_rate=2.0, tolerance=0.0)
    tiny = Insurer(mesa.Model(seed=1), config, rate=2.004)
    assert tiny.review(100.0, 0.0) is None  # floored at 2.0: a change below a cent per $1,000
    assert tiny.rate == 2.004


def test_rates_and_shares_stay_within_bounds_of_more_digits_than_they_keep():
    """A bound of 5 decimals holds a rate kept to 4, and one of 14 a share kept to 10."""
    falling = InsurerConfig(window=1, min_rate=2.00004, max_change=0.5)
    low = Insurer(mesa.Model(seed=1), falling, rate=2.5)
    assert low.review(100.0, 0.0) == (2.5, 2.00004)
    high = InsurerConfig(window=1, max_rate=11.99996, max_change=0.5)
    rising = Insurer(mesa.Model(seed=1), high, rate=11.0)
    assert rising.review(100.0, 500.0) == (11.0, 11.99996)
    config = GovernmentConfig(
        initial_subsidy=0.2, min_subsidy=0.12345678901234, step=0.1, relax_after=1
    )
    gov = Government(mesa.Model(seed=1), config)
    assert gov.review(0.0) == (0.2, 0.12345678901234)
    assert gov.subsidy_share >= config.min_subsidy


def test_a_heavy_loss_year_restarts_the_count_of_quiet_years():
    config = GovernmentConfig(initial_subsidy=0.5, max_subsidy=0.95, relax_after=2)
    gov = Government(mesa.Model(seed=1), config)
    assert gov.review(0.0) is None  # quiet year 1
    assert gov.review(5_000.0) == (0.5, 0.55)  # heavy: raised, and the quiet count restarts
    assert gov.review(0.0) is None  # quiet year 1 again
    assert gov.review(0.0) == (0.55, 0.5)  # quiet year 2: relaxed


def test_without_relax_after_the_subsidy_never_relaxes():
    gov = Government(mesa.Model(seed=1), GovernmentConfig(relax_after=None))
    assert [gov.review(0.0) for _ in range(30)] == [None] * 30
    assert gov.subsidy_share == 0.5


def test_a_step_of_zero_holds_the_subsidy_at_its_initial_share():
    """An experiment comparing fixed subsidies: heavy losses and quiet years change nothing."""
    config = GovernmentConfig(initial_subsidy=0.8, step=0.0, relax_after=1)
    gov = Government(mesa.Model(seed=1), config)
    assert [gov.review(loss) for loss in [5_000.0, 0.0, 5_000.0, 0.0]] == [None] * 4
    assert gov.subsidy_share == 0.8


def test_insurer_config_rejects_inverted_bounds():
    with pytest.raises(ValueError, match="min_rate"):
        InsurerConfig(min_rate=9.0, max_rate=3.0)


# ---------------------------------------------------------------- shipped policy scenarios
SCENARIOS = Path(__file__).resolve().parents[1] / "configs" / "scenarios"
DEFAULT = SCENARIOS.parent / "default.yaml"


def _yearly(config: Path, seed: int, tmp_path: Path) -> pd.DataFrame:
    """``model_years`` of a 1,000-household, 30-year run of ``config`` without an audit."""
    overrides = ["households.count=1000", "years=30", "audit.level=off"]
    loaded, base = load_config(config, overrides, seed=seed)
    run = run_simulation(loaded, base, tmp_path / f"{config.stem}-{seed}", progress=False)
    return pd.read_csv(run.run_dir / "model_years.csv")


def test_without_a_subsidy_no_share_is_ever_paid_and_fewer_homes_are_elevated(tmp_path):
    elevated = {"default": 0.0, "no_subsidy": 0.0}
    for seed in (1, 2, 3):
        plain = _yearly(DEFAULT, seed, tmp_path)
        unsubsidised = _yearly(SCENARIOS / "no_subsidy.yaml", seed, tmp_path)
        assert (unsubsidised["subsidy_share"] == 0.0).all()  # heavy-loss years raise nothing
        elevated["default"] += plain["elevated_share"].iloc[-1]
        elevated["no_subsidy"] += unsubsidised["elevated_share"].iloc[-1]
    assert elevated["no_subsidy"] < elevated["default"]


def test_flat_premiums_insure_fewer_homes_outside_the_floodplain(tmp_path):
    """Zone X policies cost about three times as much at the floodplain's rate."""
    outside = {"default": 0.0, "flat": 0.0}
    for seed in (1, 2, 3):
        outside["default"] += _yearly(DEFAULT, seed, tmp_path)["insured_share_x"].mean()
        flat = _yearly(SCENARIOS / "flat_premiums.yaml", seed, tmp_path)
        outside["flat"] += flat["insured_share_x"].mean()
    assert outside["flat"] < outside["default"]


def test_mean_damage_at_exactly_the_heavy_loss_level_raises_the_subsidy():
    config = GovernmentConfig(heavy_loss_per_household=2_000.0, step=0.05)
    gov = Government(mesa.Model(seed=1), config)
    assert gov.review(1_999.99) is None
    assert gov.review(2_000.0) == (0.5, 0.55)


def test_the_quiet_year_count_restarts_after_each_relaxation():
    """One step every relax_after quiet years, not one every year once the first is due."""
    config = GovernmentConfig(initial_subsidy=0.5, min_subsidy=0.1, step=0.1, relax_after=2)
    gov = Government(mesa.Model(seed=1), config)
    assert [gov.review(0.0) for _ in range(4)] == [None, (0.5, 0.4), None, (0.4, 0.3)]


def test_a_heavy_loss_level_of_zero_leaves_a_dry_year_quiet():
    """Every damaging year is heavy at level 0; a year without damage is not."""
    config = GovernmentConfig(heavy_loss_per_household=0.0, step=0.05, relax_after=1)
    gov = Government(mesa.Model(seed=1), config)
    assert gov.review(0.01) == (0.5, 0.55)
    assert gov.review(0.0) == (0.55, 0.5)


def test_a_falling_rate_is_capped_at_max_change_a_year():
    insurer = Insurer(mesa.Model(seed=1), InsurerConfig(window=1, max_change=0.18), rate=10.0)
    assert insurer.review(1_000.0, 0.0) == (10.0, 8.2)  # a loss ratio of 0 would be rate 0


def test_a_loss_ratio_at_the_edge_of_the_tolerance_changes_nothing():
    config = InsurerConfig(window=1, target_loss_ratio=0.5, tolerance=0.5)
    insurer = Insurer(mesa.Model(seed=1), config, rate=4.0)
    assert insurer.review(100.0, 75.0) is None  # 0.75 is 1.5 times the target: on the edge
    assert insurer.review(100.0, 76.0) is not None
