"""Figures of a run: adaptation, losses, memory, threat appraisal, and parameter sweeps.

Every function returns a :class:`matplotlib.figure.Figure` built without pyplot, so plotting
touches no global state, needs no display and works in threads, tests and headless servers
(``fig.savefig(...)`` renders through Agg). In a notebook, ``display(fig)`` shows one.
Inputs are the tables of :mod:`simulation.analysis.metrics`.
"""

from __future__ import annotations

import textwrap
from typing import TYPE_CHECKING, Any

import numpy as np
import pandas as pd
from matplotlib.figure import Figure
from matplotlib.ticker import MaxNLocator, PercentFormatter

from simulation.analysis.metrics import WRITE_PREFIX, adaptation_shares, damage_and_claims

if TYPE_CHECKING:
    from collections.abc import Callable, Iterable

    from matplotlib.axes import Axes

__all__ = [
    "NO_TRACES",
    "no_appraisal",
    "no_traced_household",
    "plot_adaptation",
    "plot_damage_claims",
    "plot_household",
    "plot_memory",
    "plot_run_averages",
    "plot_sweep",
    "plot_sweep_facets",
    "plot_threat",
]

_SIZE = (9.0, 5.0)
#: Characters of a facet panel's title per line (a panel is 3.6 inches wide).
_PANEL_TITLE_CHARS = 36
# Structural measures are rare (a few percent at most) next to insurance (tens of percent), so
# they get their own panel and scale instead of a flat line at the bottom of one shared axis.
# Each insurance series: its label, line style and a shade of blue of its own: a one-year run
# draws points, which show no line style, so their colours tell them apart.
_INSURANCE_LINES = {
    "insured_share": ("insured, all zones", "-", "tab:blue"),
    "insured_share_ae": ("insured, floodplain (AE, A, VE, V)", "--", "navy"),
    "insured_share_x": ("insured, outside it (X, B, C, D)", ":", "deepskyblue"),
}
_STRUCTURAL_LINES = {
    "elevated_share": ("elevated (share of active households)", "tab:green"),
    "relocated_share": ("moved away (share of all households)", "tab:red"),
}
_SOURCE_COLOURS = {
    "flood": "tab:blue",
    "claim": "tab:orange",
    "decision": "tab:green",
    "policy": "tab:purple",
    "neighbor": "tab:olive",
    "seed": "tab:brown",
    "reflection": "tab:pink",
    "other": "tab:gray",
}


def _title(base: str, run_id: str | None) -> str:
    return f"{base} ({run_id})" if run_id else base


def _whole_numbers() -> MaxNLocator:
    """Ticks on whole numbers only, a single one too: one year's axis would tick at 0.96, 0.98..."""
    return MaxNLocator(integer=True, min_n_ticks=1)


def _year_axis(ax: Axes) -> None:
    ax.set_xlabel("simulation year")
    ax.xaxis.set_major_locator(_whole_numbers())
    ax.grid(visible=True, alpha=0.3)


def plot_adaptation(metrics: pd.DataFrame, *, run_id: str | None = None) -> Figure:
    """Adaptation shares over time: insurance take-up (all, AE, X), elevation, relocation.

    Args:
        metrics: ``model_years`` of a run.
        run_id: Shown in the title when given.
    """
    shares = adaptation_shares(metrics)
    fig = Figure(figsize=(_SIZE[0], 6.0), layout="constrained")
    top, bottom = fig.subplots(2, 1, sharex=True, height_ratios=(3, 2))
    # A line through one year is invisible: a one-year run is drawn as points.
    marker = "o" if len(shares.index) == 1 else None
    for column, (label, style, colour) in _INSURANCE_LINES.items():
        # A zone without households (all of a town in the floodplain) has no share to draw.
        if column in shares and shares[column].notna().any():
            top.plot(
                shares.index,
                shares[column],
                style,
                color=colour,
                lw=2,
                marker=marker,
                label=label,
            )
    top.set_ylabel("share of active households")
    top.set_title("Flood insurance take-up")
    top.set_ylim(0, max(0.05, float(shares.filter(like="insured").max().max()) * 1.1))
    for column, (label, colour) in _STRUCTURAL_LINES.items():
        if column in shares:
            bottom.plot(
                shares.index, shares[column], color=colour, lw=2, marker=marker, label=label
            )
    bottom.set_ylabel("share of households")
    bottom.set_title("Structural measures (own scale)")
    structural = shares.filter(items=list(_STRUCTURAL_LINES))
    peak = float(structural.max().max()) if not structural.empty else 0.0
    bottom.set_ylim(0, max(0.01, peak * 1.2))
    for ax in (top, bottom):
        ax.yaxis.set_major_formatter(PercentFormatter(xmax=1.0))
        ax.legend(loc="best", fontsize="small")  # a rise in the first years stays in sight
        _year_axis(ax)
    top.set_xlabel("")
    fig.suptitle(_title("Adaptation over time", run_id), fontweight="bold")
    return fig


def plot_damage_claims(metrics: pd.DataFrame, *, run_id: str | None = None) -> Figure:
    """Flood damage and paid claims per year (bars, $M) and flooded households (twin axis).

    Args:
        metrics: ``model_years`` of a run.
        run_id: Shown in the title when given.
    """
    losses = damage_and_claims(metrics)
    years = losses.index.to_numpy()
    fig = Figure(figsize=_SIZE, layout="constrained")
    ax = fig.subplots()
    width = 0.4
    damage = ax.bar(
        years - width / 2, losses["damage_musd"], width, color="tab:red", label="flood damage"
    )
    claims = ax.bar(
        years + width / 2, losses["claims_paid_musd"], width, color="tab:blue", label="claims paid"
    )
    ax.set_ylabel("$ million per year")
    ax.set_ylim(0, max(0.1, float(losses[["damage_musd", "claims_paid_musd"]].max().max()) * 1.15))
    _year_axis(ax)
    twin = ax.twinx()
    (flooded,) = twin.plot(
        years,
        losses["flooded_households"],
        "o-",
        color="black",
        ms=4,
        lw=1,
        label="flooded households (right axis)",
    )
    twin.set_ylabel("flooded households")
    twin.set_ylim(0, max(1.0, float(losses["flooded_households"].max()) * 1.15))
    twin.yaxis.set_major_locator(_whole_numbers())
    if not losses["flooded_households"].any():
        # Empty axes alone read as a figure that failed to draw.
        ax.text(
            0.5,
            0.5,
            "no household was flooded in this run",
            transform=ax.transAxes,
            ha="center",
            va="center",
            color="dimgray",
        )
    ax.set_title(_title("Flood damage and insurance claims", run_id), fontweight="bold")
    # Beside the axes, not on them: inside, it covered the tallest bars.
    fig.legend(
        handles=[damage, claims, flooded], loc="outside lower center", ncols=3, fontsize="small"
    )
    return fig


def plot_memory(
    composition: pd.DataFrame,
    *,
    working_capacity: int | None = None,
    run_id: str | None = None,
    writers: str = "all households",
) -> Figure:
    """Mean memory store sizes over time and, when audited, memory writes by source.

    Args:
        composition: :func:`~simulation.analysis.metrics.memory_composition` of a run.
        working_capacity: Drawn as a reference line when given.
        run_id: Shown in the title when given.
        writers: Whose writes the stream counts, for the axis label (a sampled audit logs
            only its sample's).
    """
    writes = composition.filter(like=WRITE_PREFIX)
    stores = composition[["mean_working", "mean_episodic"]].dropna(how="all")
    fig = Figure(figsize=(_SIZE[0], 6.5 if not writes.empty else _SIZE[1]), layout="constrained")
    if writes.empty:
        sizes = fig.subplots()
        bars = None
    else:
        sizes, bars = fig.subplots(2, 1, sharex=True)
    marker = "o" if len(stores.index) == 1 else None  # a line through one year is invisible
    for column, colour, label in (
        ("mean_working", "tab:blue", "working"),
        ("mean_episodic", "tab:orange", "episodic"),
    ):
        sizes.plot(stores.index, stores[column], lw=2, marker=marker, color=colour, label=label)
    if working_capacity is not None:
        sizes.axhline(working_capacity, color="tab:blue", ls=":", lw=1, label="working capacity")
    sizes.set_ylabel("items per household (mean)")
    sizes.set_ylim(bottom=0)
    sizes.set_title("Memory store sizes at year end")
    sizes.legend(loc="upper left", fontsize="small")
    _year_axis(sizes)
    if bars is None:
        sizes.text(
            0.99,
            0.02,
            "memory_updates stream not written: writes by source unavailable",
            transform=sizes.transAxes,
            ha="right",
            va="bottom",
            fontsize="small",
            color="dimgray",
        )
    else:
        sizes.set_xlabel("")
        bottom = np.zeros(len(writes))
        for column in writes.columns:
            source = column.removeprefix(WRITE_PREFIX)
            values = writes[column].to_numpy(float)
            bars.bar(
                writes.index,
                values,
                0.8,
                bottom=bottom,
                color=_SOURCE_COLOURS.get(source, "tab:cyan"),
                label=source,
            )
            bottom += values
        bars.set_ylabel(f"memory writes ({writers})")
        seeded = 0 in writes.index
        bars.set_title(
            "Memory writes by source" + (" (year 0: pre-seeded memories)" if seeded else "")
        )
        bars.legend(loc="upper left", fontsize="small", ncols=4)
        bars.set_ylim(0, max(1.0, float(bottom.max()) * 1.3))
        _year_axis(bars)
    fig.suptitle(_title("Household memory", run_id), fontweight="bold")
    return fig


#: Why a run's traces hold no threat appraisal, by default: no traces at all.
NO_TRACES = (
    "Household traces were not written for this run\n"
    "(no household_traces stream: audit level 'off' or an older run),\n"
    "so the per-household distribution is unavailable."
)


def plot_threat(
    tp: pd.DataFrame,
    *,
    metrics: pd.DataFrame | None = None,
    run_id: str | None = None,
    why_empty: str = NO_TRACES,
) -> Figure:
    """Distribution of threat appraisal (TP) across traced households, per year.

    Box plots (quartiles, whiskers at 1.5 IQR) with the mean on top. Without any TP the
    figure says why (``why_empty``) and, when ``metrics`` is given and has any, shows
    ``model_years``' ``mean_tp``.

    Args:
        tp: :func:`~simulation.analysis.metrics.tp_distribution` of a run.
        metrics: ``model_years`` of the run, for the fallback mean.
        run_id: Shown in the title when given.
        why_empty: The note shown when ``tp`` is empty: :data:`NO_TRACES`, or another reason
            (decisions that carry no threat appraisal, such as scripted ones:
            :func:`no_appraisal`).
    """
    fig = Figure(figsize=_SIZE, layout="constrained")
    ax = fig.subplots()
    ax.set_ylabel("threat appraisal TP (0 = none, 1 = maximal)")
    ax.set_ylim(0, 1)
    _year_axis(ax)
    ax.set_title(_title("Threat appraisal across households", run_id), fontweight="bold")
    if tp.empty:
        # A line of NaN draws nothing but would still have its legend entry.
        if metrics is not None and "mean_tp" in metrics and metrics["mean_tp"].notna().any():
            ax.plot(
                metrics["year"],
                metrics["mean_tp"],
                "o-",
                color="tab:red",
                ms=3,
                label="mean TP, all households (model_years)",
            )
            ax.legend(loc="upper left", fontsize="small")
        if not len(ax.lines):  # nothing drawn: the run's years, not matplotlib's -0.05..0.05
            years = metrics["year"] if metrics is not None and "year" in metrics else []
            if len(years):
                ax.set_xlim(min(years) - 0.5, max(years) + 0.5)
        _note(ax, why_empty)
        return fig
    grouped = tp.groupby("year")["tp"]
    years = np.array(sorted(grouped.groups))
    ax.boxplot(
        [grouped.get_group(year).to_numpy(float) for year in years],
        positions=years,
        widths=0.6,
        showfliers=False,
        patch_artist=True,
        boxprops={"facecolor": "lightsteelblue", "edgecolor": "steelblue"},
        medianprops={"color": "navy"},
        whiskerprops={"color": "steelblue"},
        capprops={"color": "steelblue"},
        manage_ticks=False,
        label="quartiles, whiskers 1.5 IQR",
    )
    ax.plot(years, grouped.mean().to_numpy(), "D-", color="tab:red", ms=4, lw=1, label="mean")
    counts = grouped.size()
    ax.xaxis.set_major_locator(_whole_numbers())
    ax.set_xlim(years.min() - 0.7, years.max() + 0.7)
    ax.legend(loc="upper left", fontsize="small")
    ax.text(
        0.99,
        0.98,
        _traced(int(counts.min()), int(counts.max())),
        transform=ax.transAxes,
        ha="right",
        va="top",
        fontsize="small",
        color="dimgray",
    )
    return fig


def no_appraisal(policy: str | None) -> str:
    """Why a run's household traces, though written, hold no appraisals: its decision policy.

    For ``why_empty`` of :func:`plot_threat` and :func:`plot_household`, and for a notebook to
    print (the line breaks suit a figure; a sentence is the text with them made spaces).

    Args:
        policy: The run's ``decision.policy`` (``scripted`` reads decisions from a table), if
            known.
    """
    named = f" (decision.policy {policy})" if policy else ""
    how = "read from its script" if policy == "scripted" else "made without them"
    return (
        f"The decisions of this run{named} carry no appraisals:\n"
        f"they are {how}, so there is no threat (TP)\n"
        "or coping (CP) appraisal to show."
    )


def no_traced_household(sample: str) -> str:
    """Why a run's household traces, though written, hold no appraisals: they hold no household.

    An ``audit.sample`` small enough to draw no household of the population leaves the streams
    empty; the policy is not to blame.

    Args:
        sample: :func:`~simulation.audit.readers.sample_hint` of the run (`` (audited sample:
            0.01)``), or ``""``.
    """
    return (
        f"The household traces of this run hold no household{sample}:\n"
        "none was audited, so there is no threat (TP)\n"
        "or coping (CP) appraisal to show."
    )


def plot_household(
    decisions: pd.DataFrame,
    *,
    agent_id: str,
    damaging_years: Iterable[int] = (),
    years: Iterable[int] = (),
    why_empty: str | None = None,
) -> Figure:
    """One household's threat and coping appraisals, its damaging floods and its choices by year.

    Args:
        decisions: :func:`~simulation.analysis.metrics.household_decisions` of the household
            (columns ``year``, ``TP``, ``CP`` and ``decision``).
        agent_id: The household, for the title.
        damaging_years: Years in which a flood damaged its home, shaded.
        years: The run's years: the axis spans them all, not only the years something was
            drawn in.
        why_empty: The note shown when no decision carries an appraisal (default:
            :func:`no_appraisal` without the policy's name).
    """
    fig = Figure(figsize=(_SIZE[0], 4.5), layout="constrained")
    ax = fig.subplots()
    appraised = decisions[["TP", "CP"]].notna().any(axis=None)
    if appraised:
        ax.plot(
            decisions["year"], decisions["TP"], "o-", color="tab:red", label="threat appraisal TP"
        )
        ax.plot(
            decisions["year"], decisions["CP"], "s-", color="tab:blue", label="coping appraisal CP"
        )
    for i, year in enumerate(sorted(set(damaging_years))):
        ax.axvspan(
            year - 0.4,
            year + 0.4,
            color="tab:red",
            alpha=0.12,
            lw=0,
            label="damaging flood" if i == 0 else None,
        )
    markers = iter("^vDPX*")
    for skill, rows in decisions[decisions["decision"] != "do_nothing"].groupby("decision"):
        ax.scatter(
            rows["year"],
            [0.03] * len(rows),
            marker=next(markers, "o"),
            s=45,
            label=f"chose {skill}",
        )
    ax.set_ylabel("appraisal (0 to 1)")
    ax.set_ylim(0, 1)
    shown = [*years, *decisions["year"]]
    if shown:
        ax.set_xlim(min(shown) - 0.5, max(shown) + 0.5)
    _year_axis(ax)
    ax.set_title(f"Household {agent_id}: appraisals and decisions")
    if ax.get_legend_handles_labels()[0]:
        ax.legend(loc="upper left", fontsize="small", ncols=2)
    if not appraised:
        _note(ax, why_empty if why_empty is not None else no_appraisal(None))
    return fig


def _note(ax: Axes, text: str) -> None:
    """Why a figure is empty, boxed in the middle of its axes."""
    ax.text(
        0.5,
        0.55,
        text,
        transform=ax.transAxes,
        ha="center",
        va="center",
        fontsize="medium",
        bbox={"boxstyle": "round", "facecolor": "whitesmoke", "edgecolor": "gray"},
    )


#: Line styles of a sweep's levels, in turn.
_SWEEP_STYLES = ("-", "--", ":", "-.")


def plot_sweep(
    frame: pd.DataFrame,
    by: str,
    value: str = "insured_share",
    *,
    title: str | None = None,
    ylabel: str | None = None,
    band: str | None = "min-max over replicates",
) -> Figure:
    """One line per value of ``by`` (mean over its runs) with a min-max band over its runs.

    Args:
        frame: Stacked ``model_years`` rows (one per run and year) with columns ``year``,
            ``by`` and ``value``, e.g. from :func:`~simulation.analysis.metrics.combine_runs`.
        by: The swept parameter's column, e.g. ``decay_rate``.
        value: The metric to plot; share columns (``*_share``, ``*_share_ae``...) are shown as
            percentages.
        title: Figure title (a default names the metric and the parameter).
        ylabel: Y axis label (default: the metric's name).
        band: What the band spans, for the legend's title (a value's runs may also span the
            values of other swept keys); ``None`` where there is one run a value, and no band.
    """
    fig = Figure(figsize=_SIZE, layout="constrained")
    ax = fig.subplots()
    _draw_sweep(ax, frame, by, value, name=_level_namer(frame[by]))
    ax.set_ylabel(ylabel or f"{value} (mean over replicates)")
    # Beside the axes, not on them: with several values the bands fill the whole plot.
    ax.legend(
        loc="upper left",
        bbox_to_anchor=(1.01, 1.0),
        fontsize="small",
        title=None if band is None else f"band: {band}",
        title_fontsize="small",
    )
    ax.set_title(title or f"{value} by {by}", fontweight="bold")
    return fig


def plot_sweep_facets(
    frame: pd.DataFrame,
    by: str,
    within: str,
    value: str = "insured_share",
    *,
    title: str | None = None,
    ylabel: str | None = None,
    band: str | None = "min-max over replicates",
) -> Figure:
    """:func:`plot_sweep` of ``by`` in one panel per value of a second swept key, ``within``.

    A line of :func:`plot_sweep` pools the runs of every value of the other keys; here each
    panel holds one value of ``within``, so an interaction (a subsidy that matters only at
    some premium) shows as lines that part in some panels and not in others. The panels share
    their axes; the band spans the replicates of one design point.

    Args:
        frame: Stacked ``model_years`` rows with columns ``year``, ``by``, ``within`` and
            ``value``.
        by: The key drawn as lines.
        within: The key whose values get a panel each.
        value: The metric to plot (shares as percentages).
        title: Figure title (a default names the metric and both keys).
        ylabel: Y axis label of the first panel (default: the metric's name).
        band: What the band spans, for the legend's title; ``None`` where a design point has
            one run, and no band.
    """
    groups = list(frame.groupby(within, sort=True, dropna=False))
    # A value of `by` keeps its colour and style in every panel, whichever values a panel has.
    levels = list(frame.groupby(by, sort=True, dropna=False).groups)
    fig = Figure(figsize=(3.6 * len(groups) + 2.4, 4.4), layout="constrained")
    axes = np.atleast_1d(fig.subplots(1, len(groups), sharex=True, sharey=True))
    name_by, name_within = _level_namer(frame[by]), _level_namer(frame[within])
    for ax, (level, group) in zip(axes, groups, strict=True):
        _draw_sweep(ax, group, by, value, levels, name=name_by)
        shown = f"{within} = {name_within(level)}"
        # Wrapped at its spaces: a long value (a mapping) would run into the next panel's.
        ax.set_title(
            textwrap.fill(shown, _PANEL_TITLE_CHARS, break_long_words=False), fontsize="medium"
        )
    axes[0].set_ylabel(ylabel or value)
    axes[-1].legend(
        loc="upper left",
        bbox_to_anchor=(1.02, 1.0),
        fontsize="small",
        title=None if band is None else f"band: {band}",
        title_fontsize="small",
    )
    fig.suptitle(title or f"{value} by {by}, a panel per {within}", fontweight="bold")
    return fig


def _level_namer(values: pd.Series) -> Callable[[Any], str]:
    """How a swept key's values are named in a figure: ``null`` for a null, else the value.

    A column of integers and a null (``government.budget: [null, 1000000]``) is read back as
    floats: its values are named as the integers the experiment gave, not ``1000000.0``.
    """
    given = values.dropna()
    whole = bool(
        len(given) < len(values)
        and pd.api.types.is_float_dtype(values)
        and (given == given.round()).all()
    )

    def name(level: Any) -> str:
        if pd.isna(level):
            return "null"
        return str(int(level)) if whole else str(level)

    return name


def _position(levels: list[Any], level: Any) -> int:
    """Where ``level`` is among ``levels``, a null matching a null (NaN is not NaN's equal)."""
    null = pd.isna(level)
    return next(i for i, known in enumerate(levels) if (pd.isna(known) if null else known == level))


def _draw_sweep(
    ax: Axes,
    frame: pd.DataFrame,
    by: str,
    value: str,
    levels: list[Any] | None = None,
    *,
    name: Callable[[Any], str],
) -> None:
    """A line per value of ``by`` (the mean over its runs) and its min-max band, on ``ax``.

    ``levels`` (all the values of ``by``, in order) gives each value its colour and style: the
    same in every panel of a figure, though a panel may lack some values; ``name`` (of all the
    values too, by :func:`_level_namer`) its name in the legend.
    """
    # dropna=False: a null level is a setting too (government.budget null: no budget limit).
    groups = list(frame.groupby(by, sort=True, dropna=False))
    for position, (level, group) in enumerate(groups):
        index = position if levels is None else _position(levels, level)
        # count, not size: a run blank in every year (a share over nobody) draws nothing.
        stats = group.groupby("year")[value].agg(["mean", "min", "max", "count"])
        (line,) = ax.plot(
            stats.index,
            stats["mean"],
            lw=2,
            # A line through one year is invisible: a one-year run is drawn as points.
            marker="o" if len(stats.index) == 1 else None,
            color=f"C{index % 10}",
            # Levels whose runs are alike (a budget that never binds, and no budget) draw the
            # same line: a style of its own each keeps the one drawn first in sight.
            ls=_SWEEP_STYLES[index % len(_SWEEP_STYLES)],
            label=f"{by} = {name(level)} (n = {int(stats['count'].max())})",
        )
        ax.fill_between(
            stats.index, stats["min"], stats["max"], color=line.get_color(), alpha=0.2, lw=0
        )
    if frame[value].isna().all():
        # A share over nobody (no household outside the floodplain) in every run: an empty
        # frame alone reads as a figure that failed to draw.
        ax.text(
            0.5,
            0.5,
            f"no run has a value of {value}",
            transform=ax.transAxes,
            ha="center",
            va="center",
            color="dimgray",
        )
    if "_share" in value:
        ax.yaxis.set_major_formatter(PercentFormatter(xmax=1.0))
        ax.set_ylim(bottom=0)
    _year_axis(ax)


def plot_run_averages(
    per_run: pd.DataFrame,
    by: str,
    outcomes: dict[str, str],
    *,
    title: str | None = None,
) -> Figure:
    """Each run's average of each outcome against the value of a swept key, a panel an outcome.

    Meant for a key with many values (a Latin hypercube), where :func:`plot_sweep` would draw a
    line per value: here each run is a point, so the trend across the range shows.

    Args:
        per_run: One row per run with the column ``by`` and a column per outcome (the run's
            average over its years).
        by: The swept key's column.
        outcomes: Outcome column -> axis label; share columns are shown as percentages.
        title: Figure title (a default names the key).
    """
    fig = Figure(figsize=(4.0 * len(outcomes) + 1.0, 4.2), layout="constrained")
    axes = np.atleast_1d(fig.subplots(1, len(outcomes)))
    values = per_run[by]
    numeric = pd.api.types.is_numeric_dtype(values) and not pd.api.types.is_bool_dtype(values)
    if numeric:
        x = values.to_numpy(float)
    else:  # categories in their sorted order, labelled on the axis
        categories = pd.Categorical(values.astype(str))
        x = categories.codes.astype(float)
    for ax, (column, label) in zip(axes, outcomes.items(), strict=True):
        ax.plot(x, per_run[column], "o", ms=5, alpha=0.7, color="tab:blue")
        ax.set_xlabel(by)
        ax.set_ylabel(label)
        if "_share" in column:
            ax.yaxis.set_major_formatter(PercentFormatter(xmax=1.0))
        ax.set_ylim(bottom=0)  # shares and amounts: a change near zero is not a large one
        if not numeric:
            ax.set_xticks(range(len(categories.categories)), list(categories.categories))
        ax.grid(visible=True, alpha=0.3)
    fig.suptitle(
        title or f"Each run's average over its years against {by} ({len(per_run)} runs)",
        fontweight="bold",
    )
    return fig


def _traced(fewest: int, most: int) -> str:
    """How many households a year's box summarises: fewer as households move away."""
    if fewest == most:
        return f"{most:,} traced households per year"
    return f"{fewest:,} to {most:,} traced households per year"
