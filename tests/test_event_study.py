"""Tests for the event study: exact numbers on synthetic runs and a real single-flood run."""

from __future__ import annotations

import math
from pathlib import Path

import numpy as np
import pandas as pd
import pytest
from matplotlib.figure import Figure

from simulation.analysis.event_study import (
    EVENT_COLUMNS,
    RunsLeftOutWarning,
    ShortBaselineWarning,
    detect_flood_year,
    event_study,
    plot_event_study,
    recovery_years,
)
from simulation.config import load_config
from simulation.runner import run_simulation

SCENARIO = Path(__file__).resolve().parents[1] / "configs" / "scenarios" / "single_flood.yaml"


def synthetic(run_id: str, level: float, jump: float, flood: int = 5, years: int = 12):
    """A flat share ``level`` that jumps by ``jump`` one year after ``flood`` and halves yearly."""
    year = np.arange(1, years + 1)
    since = year - flood
    change = np.where(since >= 1, jump * 0.5 ** (since - 1), 0.0)
    damaged = np.where(year == flood, 40, 0)
    return pd.DataFrame(
        {
            "run_id": run_id,
            "year": year,
            "insured_share_ae": level + change,
            "damaged_households": damaged,
        }
    )


def test_event_study_single_run_exact():
    table = event_study(synthetic("a", 0.4, 0.2).drop(columns="run_id"), flood_year=5)
    assert tuple(table.columns) == EVENT_COLUMNS
    assert table["years_since"].tolist() == list(range(-3, 8))
    changes = table.set_index("years_since")["mean"]
    assert changes.loc[[-3, -2, -1, 0]].tolist() == pytest.approx([0, 0, 0, 0])
    assert changes.loc[1] == pytest.approx(0.2)
    assert changes.loc[3] == pytest.approx(0.05)
    assert table["std"].isna().all()
    assert (table["n_runs"] == 1).all()
    assert table.attrs == {
        "column": "insured_share_ae",
        "flood_year": 5,
        "baseline_years": 3,
        "relative": False,
    }


def test_relative_changes_are_fractions_of_each_runs_baseline():
    # 0.1 points on 0.4 and 0.3 points on 0.6 are 25 % and 50 %: the mean relative jump is 37.5 %.
    frame = pd.concat([synthetic("a", 0.4, 0.1), synthetic("b", 0.6, 0.3)])
    table = event_study(frame, flood_year=5, relative=True).set_index("years_since")
    assert table.loc[1, "mean"] == pytest.approx(0.375)
    assert table.loc[2, "mean"] == pytest.approx(0.1875)
    assert table.loc[-1, "mean"] == pytest.approx(0.0)
    assert table.attrs["relative"] is True


def test_relative_changes_leave_out_runs_without_a_pre_flood_level():
    frame = pd.concat([synthetic("a", 0.0, 0.1), synthetic("b", 0.5, 0.1)])
    said = r"^event_study: 1 of 2 run\(s\) left out, having no baseline \(a: no positive baseline"
    with pytest.warns(RunsLeftOutWarning, match=said) as caught:
        table = event_study(frame, flood_year=5, relative=True).set_index("years_since")
    assert caught[0].message.left_out == {"a": "no positive baseline (year 5)"}
    assert table.loc[1, "n_runs"] == 1
    assert table.loc[1, "mean"] == pytest.approx(0.2)
    with pytest.raises(ValueError, match="with a positive level"):
        event_study(synthetic("a", 0.0, 0.1), flood_year=5, relative=True)


def test_a_given_flood_year_without_damage_is_refused():
    # The synthetic flood is in year 5; claiming it was in year 7 would measure noise.
    with pytest.raises(ValueError, match="no household was damaged in year 7"):
        event_study(synthetic("a", 0.4, 0.2), flood_year=7)


def test_event_study_replicates_difference_each_run_from_its_own_baseline():
    # Different levels, different jumps: the levels must cancel, the jumps average.
    frame = pd.concat([synthetic("a", 0.3, 0.1), synthetic("b", 0.6, 0.3)])
    table = event_study(frame, flood_year=5, baseline_years=2).set_index("years_since")
    assert table.index.min() == -2
    assert table.loc[1, "mean"] == pytest.approx(0.2)
    assert table.loc[1, "std"] == pytest.approx(np.std([0.1, 0.3], ddof=1))
    assert table.loc[1, "q10"] == pytest.approx(0.12)
    assert table.loc[1, "q90"] == pytest.approx(0.28)
    assert table.loc[2, "mean"] == pytest.approx(0.1)
    assert (table["n_runs"] == 2).all()


def test_event_study_baseline_is_mean_of_pre_flood_years():
    frame = synthetic("a", 0.4, 0.2)
    frame.loc[frame["year"] == 4, "insured_share_ae"] = 0.7  # baseline (3 years) = 0.5
    table = event_study(frame, flood_year=5).set_index("years_since")
    assert table.loc[0, "mean"] == pytest.approx(-0.1)
    assert table.loc[-1, "mean"] == pytest.approx(0.2)


def test_an_early_flood_warns_that_the_baseline_is_short():
    frame = pd.concat([synthetic("a", 0.4, 0.2, flood=3), synthetic("b", 0.4, 0.2, flood=3)])
    with pytest.warns(ShortBaselineWarning, match=r"2 of 2 run\(s\) averages only 2 of the 4"):
        table = event_study(frame, flood_year=3, baseline_years=4)
    assert table["years_since"].min() == -2  # the years the runs have
    assert table.set_index("years_since").loc[1, "mean"] == pytest.approx(0.2)


def test_a_run_flooded_in_its_first_year_is_left_out_with_a_warning_naming_it():
    """It has no year before the flood; the mean of the others must not pass for all runs'."""
    runs = [synthetic("early", 0.4, 0.9, flood=1)]
    runs += [synthetic(f"r{i}", 0.4, 0.2, flood=5) for i in range(4)]
    with pytest.warns(RunsLeftOutWarning) as caught:
        table = event_study(pd.concat(runs)).set_index("years_since")
    (warning,) = [w.message for w in caught if isinstance(w.message, RunsLeftOutWarning)]
    assert str(warning) == (
        "event_study: 1 of 5 run(s) left out, having no baseline "
        "(early: no year before the flood (year 1))"
    )
    assert warning.runs == 5
    assert table.loc[1, "mean"] == pytest.approx(0.2)
    assert table.loc[1, "n_runs"] == 4


def test_the_flood_years_said_are_those_of_the_runs_studied():
    """A left-out run's early flood is neither the table's flood year nor a short baseline's."""
    runs = [synthetic("early", 0.4, 0.2, flood=1), synthetic("a", 0.4, 0.2, flood=3)]
    short = r"the flood \(year 3\) comes too early"
    with pytest.warns(RunsLeftOutWarning), pytest.warns(ShortBaselineWarning, match=short):
        table = event_study(pd.concat(runs), baseline_years=4)
    assert table.attrs["flood_year"] == 3


def test_a_short_baseline_warning_names_the_floods_of_the_short_runs_only():
    runs = [synthetic("a", 0.4, 0.2, flood=2), synthetic("b", 0.4, 0.2, flood=10)]
    with pytest.warns(
        ShortBaselineWarning, match=r"the flood \(year 2\) comes too early"
    ) as caught:
        event_study(pd.concat(runs), baseline_years=3)
    assert caught[0].message.flood_years == (2,)


def test_a_warning_of_many_left_out_runs_names_three():
    runs = [synthetic(f"e{i}", 0.4, 0.2, flood=1) for i in range(5)]
    with pytest.warns(
        RunsLeftOutWarning, match=r"e2: no year before the flood \(year 1\); and 2 more\)$"
    ):
        event_study([*runs, synthetic("late", 0.4, 0.2, flood=5)])


def test_a_full_baseline_does_not_warn(recwarn):
    event_study(synthetic("a", 0.4, 0.2, flood=5), flood_year=5, baseline_years=4)
    assert not [w for w in recwarn if issubclass(w.category, ShortBaselineWarning)]


def test_flood_year_detected_per_run():
    frame = pd.concat([synthetic("a", 0.4, 0.2, flood=5), synthetic("b", 0.4, 0.2, flood=7)])
    table = event_study(frame).set_index("years_since")
    assert table.loc[1, "mean"] == pytest.approx(0.2)
    assert table.attrs["flood_year"] is None  # differs between runs


def test_detect_flood_year():
    frame = synthetic("a", 0.4, 0.2, flood=6)
    assert detect_flood_year(frame) == 6
    frame.loc[frame["year"] == 9, "damaged_households"] = 40  # a tie: the earliest wins
    assert detect_flood_year(frame) == 6
    with pytest.raises(ValueError, match="no year"):
        detect_flood_year(frame.assign(damaged_households=0))


def test_event_study_errors():
    frame = synthetic("a", 0.4, 0.2)
    with pytest.raises(ValueError, match="no column"):
        event_study(frame, 5, column="nope")
    with pytest.raises(ValueError, match="baseline_years"):
        event_study(frame, 5, baseline_years=0)
    # Not int(): year 2.7 would be studied as year 2, and 1.5 baseline years as 1.
    for flood, baseline, said in ((5.5, 3, "flood_year"), (5, 1.5, "baseline_years")):
        with pytest.raises(ValueError, match=f"{said} must be a whole number"):
            event_study(frame, flood, baseline_years=baseline)
    with pytest.raises(ValueError, match="baseline_years must be a whole number >= 1, got True"):
        event_study(frame, 5, baseline_years=True)
    assert event_study(frame, np.int64(5)).attrs["flood_year"] == 5  # a year off a table
    with pytest.raises(ValueError, match="before the flood"):
        event_study(synthetic("a", 0.4, 0.2, flood=1), flood_year=1)


def test_recovery_years():
    changes = pd.Series([0.0, 0.2, 0.1, 0.05, 0.015, 0.0], index=range(6))
    assert recovery_years(changes, 0.1) == 4
    assert recovery_years(changes, 0.5) == 2
    assert recovery_years(changes.iloc[:4], 0.1) == math.inf
    assert math.isnan(recovery_years(-changes, 0.1))  # no jump to recover from
    for fraction in (0, 1, -0.5, 2, math.nan):  # no recovery to speak of: refused, not answered
        with pytest.raises(ValueError, match="fraction must be between 0 and 1"):
            recovery_years(changes, fraction)


def test_plot_event_study_renders(tmp_path):
    frame = pd.concat([synthetic("a", 0.3, 0.1), synthetic("b", 0.6, 0.3)])
    fig = plot_event_study(event_study(frame, 5))
    assert isinstance(fig, Figure)
    ax = fig.axes[0]
    assert "years since" in ax.get_xlabel()
    assert "flood in year 5" in ax.get_title()
    fig.savefig(tmp_path / "event.png")
    assert (tmp_path / "event.png").stat().st_size > 0


def test_plot_of_relative_changes_says_so_in_percent():
    frame = pd.concat([synthetic("a", 0.4, 0.1), synthetic("b", 0.6, 0.3)])
    ax = plot_event_study(event_study(frame, 5, relative=True)).axes[0]
    assert "% of the pre-flood mean" in ax.get_ylabel()
    assert ax.yaxis.get_major_formatter()(0.25, 0) == "25%"


@pytest.mark.slow
def test_single_flood_scenario_raises_floodplain_take_up(tmp_path):
    config, base = load_config(SCENARIO, ["households.count=300", "years=20", "audit.level=off"])
    assert config.hazard.source == "scripted"
    assert config.hazard.events == {10: 9.5}
    metrics = run_simulation(config, base, tmp_path, progress=False).metrics
    assert detect_flood_year(metrics) == 10
    damaged = metrics.set_index("year")["damaged_households"]
    assert damaged.drop(10).eq(0).all()  # the one flood and no other
    table = event_study(metrics, flood_year=10).set_index("years_since")
    assert table.loc[1, "mean"] > 0
    assert table.index.max() == 10
