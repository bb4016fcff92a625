"""Event study: how a yearly metric moves in the years around a flood.

The method is a difference from a pre-flood baseline, computed per run and then averaged:

1. For each run (each ``run_id``; a frame without one is a single run), the *baseline* is the
   mean of ``column`` over the ``baseline_years`` years just before the flood year
   (``flood_year - baseline_years`` .. ``flood_year - 1``; years missing from the run are
   skipped, with a :class:`ShortBaselineWarning`, and a run with none of them has no baseline
   and is left out, with a :class:`RunsLeftOutWarning`).
2. The run's *change* at ``years_since = year - flood_year`` is ``column(year) - baseline``
   (in the column's units: for a share, percentage points / 100), or with ``relative`` that
   difference divided by the baseline (0.09: 9 % above the pre-flood level, the unit of
   studies that regress the log of policies). A run whose baseline is 0 has no relative change
   and is left out (warned of as well).
3. Across runs, each ``years_since`` gets the mean change, its standard deviation, its 10 % and
   90 % quantiles and the number of runs that reach that year.

Subtracting each run's own baseline removes level differences between replicates, so the spread
measures how differently runs *respond*, not where they started. Because the model collects a
year's metrics after that year's decisions (see :mod:`simulation.model`), ``years_since = 0``
already includes the purchases made in the flood year itself; ``years_since = 1`` is the first
full year after the flood, the point the empirical literature calls the take-up jump.
"""

from __future__ import annotations

import itertools
import math
import warnings
from typing import TYPE_CHECKING

import numpy as np
import pandas as pd

from simulation.memory.settings import as_integer

if TYPE_CHECKING:
    from collections.abc import Iterable

    from matplotlib.figure import Figure

__all__ = [
    "EVENT_COLUMNS",
    "RunsLeftOutWarning",
    "ShortBaselineWarning",
    "detect_flood_year",
    "event_study",
    "plot_event_study",
    "recovery_years",
    "short_baseline_warning",
]

#: Columns of the table :func:`event_study` returns, in order.
EVENT_COLUMNS = ("years_since", "mean", "std", "q10", "q90", "n_runs")
_RUN_KEY = "run_id"
_SINGLE_RUN = "run"  # run_id given to a frame that has none


def _as_frame(frames: pd.DataFrame | Iterable[pd.DataFrame]) -> pd.DataFrame:
    """One long frame with a ``run_id`` column, whatever was passed in."""
    if isinstance(frames, pd.DataFrame):
        parts = [frames]
    else:
        parts = list(frames)
        if not parts:
            msg = "event_study: no model_years frames given"
            raise ValueError(msg)
    labelled = []
    for number, part in enumerate(parts):
        if _RUN_KEY in part.columns:
            labelled.append(part)
        else:
            # Several frames without run ids are distinct runs: number them so they stay apart.
            label = _SINGLE_RUN if len(parts) == 1 else f"{_SINGLE_RUN}{number}"
            labelled.append(part.assign(**{_RUN_KEY: label}))
    return pd.concat(labelled, ignore_index=True)


def detect_flood_year(metrics: pd.DataFrame) -> int:
    """The year with the most damaged households (the earliest one on a tie).

    Args:
        metrics: ``model_years`` of one run (``year`` and ``damaged_households`` columns).

    Raises:
        ValueError: When the frame has no ``damaged_households`` column or no year with damage.
    """
    if "damaged_households" not in metrics.columns or metrics.empty:
        msg = "detect_flood_year: model_years has no damaged_households column"
        raise ValueError(msg)
    damaged = metrics["damaged_households"].to_numpy(float)
    if not np.any(damaged > 0):
        msg = "detect_flood_year: no year of the run damaged any household"
        raise ValueError(msg)
    # argmax returns the first maximum, so ties go to the earliest flood.
    return int(metrics["year"].to_numpy()[int(np.argmax(damaged))])


def _check_flooded(run: pd.DataFrame, flood_year: int) -> None:
    """Refuse a given flood year outside the run, or in which the run damaged no household."""
    years = run["year"]
    if len(years) and not years.min() <= flood_year <= years.max():
        msg = (
            f"event_study: the given flood year {flood_year} is not a year of the run "
            f"({int(years.min())} to {int(years.max())})"
        )
        raise ValueError(msg)
    if "damaged_households" not in run.columns:
        return
    damaged = run.loc[run["year"] == flood_year, "damaged_households"]
    if len(damaged) and not float(damaged.iloc[0]) > 0:
        msg = (
            f"event_study: no household was damaged in year {flood_year}, the given flood year "
            "(leave flood_year out to use the year with most damaged households)"
        )
        raise ValueError(msg)


class ShortBaselineWarning(UserWarning):
    """Some runs' pre-flood baselines average fewer years than asked (the flood came early).

    Args:
        message: The warning text.
        short_runs: How many runs have a short baseline.
        runs: How many runs the event study used.
        averaged: The fewest pre-flood years any of those baselines averages.
        asked: ``baseline_years``.
        flood_years: The flood years of the runs.
    """

    def __init__(
        self,
        message: str,
        *,
        short_runs: int,
        runs: int,
        averaged: int,
        asked: int,
        flood_years: tuple[int, ...],
    ) -> None:
        super().__init__(message)
        self.short_runs = short_runs
        self.runs = runs
        self.averaged = averaged
        self.asked = asked
        self.flood_years = flood_years


class RunsLeftOutWarning(UserWarning):
    """Some runs have no usable baseline and are left out of the event study.

    Args:
        message: The warning text.
        left_out: Each left-out run's id and the reason (``"no year before the flood"``, or
            for ``relative`` changes ``"no positive baseline"``).
        runs: How many runs were given.
    """

    def __init__(self, message: str, *, left_out: dict[str, str], runs: int) -> None:
        super().__init__(message)
        self.left_out = left_out
        self.runs = runs


_NO_PRE_FLOOD_YEAR = "no year before the flood"
_NO_POSITIVE_BASELINE = "no positive baseline"


def _run_changes(
    run: pd.DataFrame, flood_year: int, column: str, baseline_years: int, *, relative: bool
) -> pd.Series | str:
    """One run's change from its pre-flood baseline, by years_since, or why it has none."""
    series = run.set_index("year")[column].astype(float).sort_index()
    before = series.loc[flood_year - baseline_years : flood_year - 1]
    if before.empty:
        return _NO_PRE_FLOOD_YEAR
    baseline = float(before.mean())
    if relative and baseline <= 0:
        # No level to be relative to. A blank baseline (NaN: a share over no household) is
        # kept, as without ``relative``: its changes are blank, not a missing pre-flood year.
        return _NO_POSITIVE_BASELINE
    changes = series.loc[flood_year - baseline_years :] - baseline
    if relative:
        changes /= baseline
    changes.index = changes.index.astype(int) - flood_year
    return changes


def event_study(
    frames: pd.DataFrame | Iterable[pd.DataFrame],
    flood_year: int | None = None,
    column: str = "insured_share_ae",
    baseline_years: int = 3,
    *,
    relative: bool = False,
) -> pd.DataFrame:
    """Change of ``column`` by years since a flood, relative to the pre-flood level.

    See the module docstring for the method.

    Args:
        frames: One run's ``model_years``, a combined frame with a ``run_id`` column (an
            experiment's ``model_years.parquet``), or several such frames.
        flood_year: The flood's year; ``None`` detects it per run with
            :func:`detect_flood_year`.
        column: The ``model_years`` column to study.
        baseline_years: Years before the flood whose mean is the baseline (at least 1).
        relative: Changes as a fraction of each run's baseline instead of in the column's
            units.

    Returns:
        One row per ``years_since`` from ``-baseline_years`` to the last year any run reaches,
        with :data:`EVENT_COLUMNS`: ``mean`` change over runs, ``std`` (NaN for one run),
        ``q10`` and ``q90`` quantiles, and ``n_runs``. ``frame.attrs`` records ``column``,
        ``flood_year`` (``None`` when detected and different between runs),
        ``baseline_years`` and ``relative``.

    Raises:
        ValueError: For a missing column, a run id holding a year twice (two runs sharing an
            id), ``baseline_years`` below 1, a given ``flood_year``
            in which a run damaged no household, or no run with a year before the flood (with
            ``relative``: and a positive baseline).
    """
    baseline_years = _whole("baseline_years", baseline_years, 1)
    if flood_year is not None:
        flood_year = _whole("flood_year", flood_year, None)
    data = _as_frame(frames)
    for needed in ("year", column):
        if needed not in data.columns:
            msg = f"event_study: model_years has no column {needed!r}"
            raise ValueError(msg)
    per_run: dict[str, pd.Series] = {}
    floods: set[int] = set()  # the flood years of the runs studied
    unused_floods: set[int] = set()  # and of those left out
    short: list[int] = []  # years in each shortened baseline
    short_floods: set[int] = set()  # and those runs' flood years
    left_out: dict[str, str] = {}  # run id: why it has no baseline
    for run_id, run in data.groupby(_RUN_KEY, sort=False):
        if run["year"].duplicated().any():
            msg = (
                f"event_study: run {run_id!r} has a year more than once: two runs share its id "
                "(tell them apart by run_id before combining them)"
            )
            raise ValueError(msg)
        if flood_year is None:
            year = detect_flood_year(run)
        else:
            year = int(flood_year)
            _check_flooded(run, year)
        changes = _run_changes(run, year, column, baseline_years, relative=relative)
        if isinstance(changes, str):
            left_out[str(run_id)] = f"{changes} (year {year})"
            unused_floods.add(year)
        else:
            per_run[str(run_id)] = changes
            floods.add(year)
            averaged = int((changes.index < 0).sum())  # the pre-flood years the run has
            if averaged < baseline_years:
                short.append(averaged)
                short_floods.add(year)
    if not per_run:
        needs = " with a positive level" if relative else ""
        msg = (
            f"event_study: no run has a year before the flood{needs} (year {_years(unused_floods)})"
        )
        raise ValueError(msg)
    for warning in _warnings(left_out, short, len(per_run), baseline_years, short_floods):
        warnings.warn(warning, stacklevel=2)
    wide = pd.DataFrame(per_run)  # rows: years_since, columns: runs
    table = pd.DataFrame(
        {
            "years_since": wide.index.astype(int),
            "mean": wide.mean(axis=1).to_numpy(),
            "std": wide.std(axis=1, ddof=1).to_numpy() if wide.shape[1] > 1 else np.nan,
            "q10": wide.quantile(0.1, axis=1).to_numpy(),
            "q90": wide.quantile(0.9, axis=1).to_numpy(),
            "n_runs": wide.notna().sum(axis=1).to_numpy(),
        }
    ).reset_index(drop=True)
    table.attrs.update(
        column=column,
        flood_year=floods.pop() if len(floods) == 1 else None,
        baseline_years=baseline_years,
        relative=relative,
    )
    return table


def _warnings(
    left_out: dict[str, str], short: list[int], used: int, baseline_years: int, floods: set[int]
) -> list[UserWarning]:
    """What :func:`event_study` warns of: runs left out, then baselines shorter than asked."""
    found: list[UserWarning] = []
    if left_out:
        runs = len(left_out) + used
        shown = "; ".join(
            f"{run_id}: {why}" for run_id, why in itertools.islice(left_out.items(), 3)
        )
        more = f"; and {len(left_out) - 3} more" if len(left_out) > 3 else ""
        found.append(
            RunsLeftOutWarning(
                f"event_study: {len(left_out)} of {runs} run(s) left out, having no baseline "
                f"({shown}{more})",
                left_out=left_out,
                runs=runs,
            )
        )
    if short:
        found.append(
            short_baseline_warning(
                "event_study: ", len(short), used, min(short), baseline_years, floods
            )
        )
    return found


def _whole(name: str, value: object, least: int | None) -> int:
    """``value`` as an int, refused unless whole (and at least ``least``); not ``int()``.

    ``int()`` would run 1.5 baseline years as 1, or a flood in year 2.7 as year 2.

    Raises:
        ValueError: Naming ``name`` and the value.
    """
    whole = as_integer(value)
    if whole is None or (least is not None and whole < least):
        at_least = f" >= {least}" if least is not None else ""
        msg = f"event_study: {name} must be a whole number{at_least}, got {value!r}"
        raise ValueError(msg)
    return whole


def _years(floods: set[int]) -> str:
    return ", ".join(str(year) for year in sorted(floods))


def short_baseline_warning(
    prefix: str, short_runs: int, runs: int, averaged: int, asked: int, floods: set[int]
) -> ShortBaselineWarning:
    """The :class:`ShortBaselineWarning` for these counts, its text starting with ``prefix``."""
    return ShortBaselineWarning(
        f"{prefix}the pre-flood baseline of {short_runs} of {runs} run(s) averages only "
        f"{averaged} of the {asked} years asked for: the flood (year {_years(floods)}) comes "
        "too early in the run",
        short_runs=short_runs,
        runs=runs,
        averaged=averaged,
        asked=asked,
        flood_years=tuple(sorted(floods)),
    )


def recovery_years(changes: pd.Series, fraction: float = 0.1, jump_at: int = 1) -> float:
    """Years after a flood until the change falls back to ``fraction`` of the jump.

    Args:
        changes: A run's (or the mean) change indexed by ``years_since``.
        fraction: Share of the jump that counts as "back at the baseline".
        jump_at: The ``years_since`` of the jump.

    Returns:
        The first ``years_since`` after ``jump_at`` whose change is at or below
        ``fraction * jump``; ``inf`` when the run ends first; NaN when there is no positive
        jump to recover from (or the run ends before ``jump_at``).

    Raises:
        ValueError: For a ``fraction`` not strictly between 0 and 1 (as a target's is):
            at 0 or below, or at 1 or above, the answer says nothing of a recovery.
    """
    if not 0 < fraction < 1:
        msg = f"recovery_years: fraction must be between 0 and 1 (exclusive), got {fraction}"
        raise ValueError(msg)
    if jump_at not in changes.index:
        return math.nan
    jump = float(changes.loc[jump_at])
    if not jump > 0:
        return math.nan
    later = changes.loc[changes.index > jump_at]
    below = later[later <= fraction * jump]
    return float(below.index[0]) if not below.empty else math.inf


def plot_event_study(table: pd.DataFrame, *, title: str | None = None) -> Figure:
    """The mean change by years since the flood, with the 10-90 % band over runs.

    Args:
        table: The result of :func:`event_study`.
        title: Figure title (default: names the column and the flood year).
    """
    # matplotlib is imported where a figure is drawn: every floodsim command would pay for it.
    from matplotlib.figure import Figure  # noqa: PLC0415
    from matplotlib.ticker import MaxNLocator, PercentFormatter  # noqa: PLC0415

    column = table.attrs.get("column", "value")
    flood_year = table.attrs.get("flood_year")
    fig = Figure(figsize=(9.0, 5.0), layout="constrained")
    ax = fig.subplots()
    x = table["years_since"].to_numpy()
    n_runs = int(table["n_runs"].max()) if len(table) else 0
    if n_runs > 1:
        ax.fill_between(
            x,
            table["q10"].to_numpy(float),
            table["q90"].to_numpy(float),
            color="tab:blue",
            alpha=0.2,
            label=f"10-90 % of {n_runs} runs",
        )
    ax.plot(x, table["mean"], "o-", color="tab:blue", lw=2, label="mean change")
    ax.axhline(0.0, color="black", lw=1, label="pre-flood baseline")
    ax.axvline(0.0, color="tab:red", ls="--", lw=1.5, label="flood")
    ax.set_xlabel("years since the flood")
    if table.attrs.get("relative"):
        ax.set_ylabel(f"change in {column}, % of the pre-flood mean")
        ax.yaxis.set_major_formatter(PercentFormatter(xmax=1.0))
    else:
        ax.set_ylabel(f"change in {column} vs pre-flood mean")
    ax.xaxis.set_major_locator(MaxNLocator(integer=True))
    ax.grid(visible=True, alpha=0.3)
    ax.legend(loc="best", fontsize="small")  # not over the post-flood peak
    where = f", flood in year {flood_year}" if flood_year is not None else ""
    ax.set_title(title or f"Event study: {column}{where}", fontweight="bold")
    return fig
