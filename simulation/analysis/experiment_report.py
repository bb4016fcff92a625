"""``floodsim report EXPERIMENT_DIR``: a static HTML page with the figures of a batch experiment.

:func:`write_experiment_report` reads what ``floodsim batch`` wrote (``experiment.json`` and
``model_years.parquet``) and writes into ``EXPERIMENT_DIR/report/`` or another folder:

- for each swept key with at most :data:`MAX_LINES` values, one figure per outcome of
  :data:`OUTCOMES` over the years, a line per value (the mean over its runs) and a band from
  the lowest to the highest run (``<outcome>_by_<key>.png``, :func:`~simulation.analysis.plots.
  plot_sweep`); the runs of a value include every level of the other swept keys;
- with exactly two swept keys of at most :data:`MAX_LINES` values each, every pair of them
  run (a grid), the same figures of the first key in a panel per value of the second
  (``<outcome>_by_<key>_within_<other>.png``, :func:`~simulation.analysis.plots.
  plot_sweep_facets`), where an interaction shows;
- for each swept key with more values (a Latin hypercube), every run's average of each outcome
  against the key's value (``runs_by_<key>.png``, :func:`~simulation.analysis.plots.
  plot_run_averages`);
- without a sweep, one figure per outcome over the years, the mean over the replicates with
  their band (``<outcome>.png``);
- ``points.csv``: for each design point, its values, how many runs it has and the mean and
  standard deviation over those runs of each outcome's average over the years;
- ``sensitivity.csv`` (when a swept key has numbers): over all runs, the Spearman rank
  correlation between each such key's value and each outcome's average over the years;
- ``paired.csv`` (when a swept key has two to :data:`MAX_LINES` values): each value against
  the key's first, run against run. Runs of one replicate meet the same floods and claim draws
  at every design point (common random numbers), so the difference between two such runs is
  the setting's effect, free of the luck of the floods that makes the points' spreads wide;
- ``index.html``: the experiment's facts, the tables and the figures with
  captions, referencing the PNGs by relative path, so the folder can be copied as it is.
"""

from __future__ import annotations

import html
import math
from pathlib import Path
from typing import TYPE_CHECKING, Any

import orjson
import pandas as pd

from simulation.analysis.metrics import table_cells
from simulation.analysis.report import REPORT_DIR, ReportError, figures_html, page_html
from simulation.config import canonical_key
from simulation.experiments.record import ExperimentRecord, RecordError, read_record

if TYPE_CHECKING:
    from matplotlib.figure import Figure

__all__ = [
    "MAX_LINES",
    "OUTCOMES",
    "is_experiment_dir",
    "paired_table",
    "points_table",
    "sensitivity_table",
    "write_experiment_report",
]

#: The outcomes drawn and tabled, with their axis labels: ``model_years`` columns.
OUTCOMES = {
    "insured_share": "insured share of active households",
    # By zone: a policy that prices the zones apart (flat against risk-based premiums) can
    # leave the whole town's share unchanged while moving each zone's.
    "insured_share_ae": "insured share in the floodplain (AE, A, VE, V)",
    "insured_share_x": "insured share outside the floodplain (X, B, C, D)",
    "elevated_share": "elevated share of active households",
    "relocated_share": "share of households moved away",
    "total_damage": "flood damage in the year ($)",
}
#: A swept key with at most this many values gets a line per value over the years; one with
#: more (a Latin hypercube) gets each run's averages against its value instead.
MAX_LINES = 8
#: Runs a rank correlation needs: any two are perfectly in line or against each other.
_MIN_RANKED_RUNS = 3
_DPI = 110


def is_experiment_dir(path: str | Path) -> bool:
    """Whether ``path`` is a folder ``floodsim batch`` wrote (it holds ``experiment.json``)."""
    return (Path(path) / "experiment.json").is_file()


def _load(folder: Path) -> tuple[ExperimentRecord, pd.DataFrame]:
    """The experiment's record and its runs' yearly metrics (complete runs only)."""
    try:
        record = read_record(folder)
    except RecordError as err:
        raise ReportError(str(err)) from None
    metrics = folder / "model_years.parquet"
    if not metrics.is_file():
        name = record.experiment.name
        msg = (
            f"{folder}: no model_years.parquet: experiment {name} has not finished (continue it "
            "with floodsim batch FILE --resume)"
        )
        raise ReportError(msg)
    try:
        frame = pd.read_parquet(metrics)
    except (OSError, ValueError) as err:
        msg = f"{metrics}: cannot be read ({err})"
        raise ReportError(msg) from None
    missing = [c for c in ("run_id", "point", "year", *OUTCOMES) if c not in frame]
    if missing:
        msg = f"{metrics}: no column {', '.join(missing)}"
        raise ReportError(msg)
    # A batch written before year keys were read as one (hazard.events.04) has its column so
    # spelled; its record, read again, names the key hazard.events.4.
    return record, frame.rename(columns=canonical_key)


def _per_run(frame: pd.DataFrame, keys: list[str]) -> pd.DataFrame:
    """One row per run: its point, swept values and each outcome's average over its years."""
    first = frame.groupby("run_id", sort=True)[["point", *keys]].first()
    averages = frame.groupby("run_id", sort=True)[list(OUTCOMES)].mean()
    return first.join(averages)


def points_table(frame: pd.DataFrame, keys: list[str]) -> pd.DataFrame:
    """Per design point: its values, its runs and each outcome's mean and sd over the runs.

    Args:
        frame: ``model_years.parquet`` of an experiment.
        keys: The swept keys (columns of ``frame``).

    Returns:
        One row per point, in point order: ``point``, each key, ``runs``, then
        ``<outcome> mean`` and ``<outcome> sd`` for each of :data:`OUTCOMES` (the sd of one run
        is NaN). A run's outcome is its average over the years that have a value; a year blank
        (NaN, a share over no household) is left out, and a run blank in every year is left
        out of that outcome's mean and sd, while ``runs`` counts every run of the point.
    """
    per_run = _per_run(frame, keys)
    grouped = per_run.groupby("point", sort=True)
    table = grouped[keys].first() if keys else pd.DataFrame(index=grouped.size().index)
    table["runs"] = grouped.size()
    for outcome in OUTCOMES:
        table[f"{outcome} mean"] = grouped[outcome].mean()
        table[f"{outcome} sd"] = grouped[outcome].std()
    return table.reset_index()


def sensitivity_table(frame: pd.DataFrame, keys: list[str]) -> pd.DataFrame:
    """Spearman rank correlation of each numeric swept key with each outcome, over all runs.

    Each run counts once, with each outcome's average over its years. A rank correlation
    needs no assumption about the shape of the relation, only that it runs one way; with a
    Latin hypercube the keys vary independently, so each key's correlation is its own.

    Args:
        frame: ``model_years.parquet`` of an experiment.
        keys: The swept keys (columns of ``frame``); those without numbers are left out.

    Returns:
        One row per numeric key (``key``, ``runs``: how many runs the correlations are over,
        then one column per outcome), over the runs where the key is not null
        (``government.budget: null`` is no budget limit, which has no rank among the numbers);
        a run whose outcome is NaN (a zone without households) is left out of that outcome's.
        NaN where the key or the outcome does not vary across those runs, or where fewer than
        three runs remain. Empty without a numeric key.
    """
    per_run = _per_run(frame, keys)
    numeric = [
        key
        for key in keys
        if pd.api.types.is_numeric_dtype(per_run[key])
        and not pd.api.types.is_bool_dtype(per_run[key])
    ]
    rows = []
    for key in numeric:
        # Ranked among the runs where the key has a number: ranks taken over every run and
        # then cut to those would count the null runs' outcomes in the others' ranks.
        runs = per_run.loc[per_run[key].notna(), [key, *OUTCOMES]].rank()
        # Rounded: a correlation of exactly 0 comes out as 1e-17 or so. Two runs always rank
        # in line or against each other (1 or -1): a correlation needs three.
        correlations = {
            # + 0.0: a correlation rounded from -1e-17 is -0.0, which the csv would write.
            o: round(runs[key].corr(runs[o], min_periods=_MIN_RANKED_RUNS), 12) + 0.0
            for o in OUTCOMES
        }
        rows.append({"key": key, "runs": len(runs), **correlations})
    return pd.DataFrame(rows, columns=["key", "runs", *OUTCOMES])


def paired_table(frame: pd.DataFrame, keys: list[str]) -> pd.DataFrame:
    """Each value of each swept key against the key's first value, run against run.

    A run is paired with the run of the key's first value (the reference) that has the same
    seed (its replicate) and the same values of the other swept keys: the two met the same
    floods and claim draws, so their difference is the key's effect alone. Each outcome is a
    run's average over its years, as in :func:`points_table`. Beside the comparison over every
    pair, each is repeated within each value of every other swept key, which shows whether an
    effect depends on that key (an interaction).

    Args:
        frame: ``model_years.parquet`` of an experiment (with its ``seed`` column).
        keys: The swept keys (columns of ``frame``); a key with more than :data:`MAX_LINES`
            values is left out, and so is a comparison without a pair (a Latin hypercube's
            points share no values of the other keys).

    Returns:
        One row per key, non-reference value, subset and outcome, in sweep order: ``key``,
        ``value``, ``reference``, ``within`` (``all`` for every pair, else ``other_key=value``),
        ``outcome``, ``pairs``, ``mean difference`` (value minus reference), ``sd``,
        ``relative`` (the mean difference over the reference runs' mean; NaN where that is 0),
        ``lower`` and ``higher`` (the pairs whose difference is below and above 0). Empty
        without such a key.
    """
    columns = ["key", "value", "reference", "within", "outcome", "pairs", "mean difference"]
    columns += ["sd", "relative", "lower", "higher"]
    per_run = _per_run(frame, keys).join(frame.groupby("run_id", sort=True)["seed"].first())
    in_order = per_run.sort_values("point")
    levels = {key: pd.unique(in_order[key]) for key in keys}  # the sweep's order, nulls kept
    compared = [key for key in keys if 2 <= len(levels[key]) <= MAX_LINES]
    rows = []
    for key in compared:
        others = [k for k in keys if k != key]
        reference = per_run[_equal(per_run[key], levels[key][0])]
        for value in levels[key][1:]:
            pairs = per_run[_equal(per_run[key], value)].merge(
                reference, on=["seed", *others], suffixes=("", " ref")
            )
            subsets = [("all", pairs)] + [
                (f"{other}={_shown(level)}", pairs[_equal(pairs[other], level)])
                for other in others
                if other in compared
                for level in levels[other]
            ]
            for within, subset in subsets:
                if subset.empty:  # no run of the reference shares these values (a hypercube)
                    continue
                rows.extend(
                    {
                        "key": key,
                        "value": None if pd.isna(value) else _plain(value),
                        "reference": None if pd.isna(levels[key][0]) else _plain(levels[key][0]),
                        "within": within,
                        "outcome": outcome,
                        **_difference(subset[outcome], subset[f"{outcome} ref"]),
                    }
                    for outcome in OUTCOMES
                )
    table = pd.DataFrame(rows, columns=columns)
    # Each key's values as the experiment file gives them: one column of several keys' values
    # would otherwise turn a sweep's whole years into floats (6.0) beside another's 0.8.
    for column in ("value", "reference"):
        table[column] = pd.Series([row[column] for row in rows], dtype=object)
    return table


def _difference(runs: pd.Series, references: pd.Series) -> dict[str, Any]:
    """The paired columns of :func:`paired_table` for one comparison.

    ``pairs`` counts the pairs with a difference: a run blank in an outcome (a share over no
    household) pairs with nothing there.
    """
    difference = runs - references
    base = references[difference.notna()].mean()
    return {
        "pairs": int(difference.notna().sum()),
        "mean difference": difference.mean(),
        "sd": difference.std(),
        "relative": difference.mean() / base if base else math.nan,
        "lower": int((difference < 0).sum()),
        "higher": int((difference > 0).sum()),
    }


def _sentence(label: str) -> str:
    """``label`` opening a sentence: its first letter raised, the rest as written (AE stays AE)."""
    return label[:1].upper() + label[1:]


def _shown(value: Any) -> str:
    """A swept value as the experiment file writes it (``null``, ``true``, ``0.8``)."""
    return "null" if pd.isna(value) else _values(_plain(value))


def _plain(value: Any) -> Any:
    """A numpy scalar as the Python value orjson writes."""
    return value.item() if hasattr(value, "item") else value


def _equal(column: pd.Series, value: Any) -> pd.Series:
    """Where ``column`` holds ``value``, a null matching a null (``government.budget: null``)."""
    return column.isna() if pd.isna(value) else column == value


def _figures(frame: pd.DataFrame, keys: list[str]) -> dict[str, tuple[Figure, str]]:
    """Figure file name -> (figure, caption), in page order."""
    # Imported here: matplotlib takes a while to import and only drawing needs it.
    from simulation.analysis import plots  # noqa: PLC0415

    figures: dict[str, tuple[Figure, str]] = {}
    runs = frame["run_id"].nunique()
    if not keys:
        replicates = f"{runs} replicates" if runs > 1 else "its one replicate"
        for outcome, label in OUTCOMES.items():
            figure = plots.plot_sweep(
                frame,
                "point",
                outcome,
                title=f"{outcome} over {replicates}",
                ylabel=label,
                band="min-max over replicates" if runs > 1 else None,
            )
            caption = (
                f"{_sentence(label)}, each year: the mean over the {runs} replicates, with a "
                "band from the lowest to the highest."
                if runs > 1
                else f"{_sentence(label)}, each year, in the one run of the experiment."
            )
            figures[f"{outcome}.png"] = (figure, caption)
        return figures
    per_run = _per_run(frame, keys)
    for key in keys:
        levels = frame[key].nunique(dropna=False)
        others = [k for k in keys if k != key]
        across = f", across every value of {', '.join(others)}" if others else ""
        if levels <= MAX_LINES:
            # One run a value (one replicate, no other key): a line each, and no band. The
            # caption names the other keys: the legend stays narrow.
            band: str | None = "min-max over runs" if others else "min-max over replicates"
            spread = (
                f"the mean over its runs{across}, with a band from the lowest run to the highest"
            )
            if _one_run_each(frame, key):
                band, spread = None, "its one run"
            for outcome, label in OUTCOMES.items():
                figure = plots.plot_sweep(
                    frame, key, outcome, title=f"{outcome} by {key}", ylabel=label, band=band
                )
                caption = f"{_sentence(label)}, each year, for each value of {key}: {spread}."
                figures[f"{outcome}_by_{key}.png"] = (figure, caption)
        else:
            figure = plots.plot_run_averages(per_run, key, OUTCOMES)
            caption = (
                f"Each run's average over its years of each outcome, against its value of "
                f"{key} ({levels} values{across})."
            )
            figures[f"runs_by_{key}.png"] = (figure, caption)
    sizes = [frame[k].nunique(dropna=False) for k in keys]
    if (
        len(keys) == 2
        and max(sizes) <= MAX_LINES
        # Every pair of values run (a grid, not a Latin hypercube's few scattered points).
        and frame.groupby(keys, dropna=False).ngroups == sizes[0] * sizes[1]
    ):
        # Each line above pools the other key's values: a panel per value shows how they meet.
        by, within = keys
        alone = _one_run_each(frame, keys)
        band = None if alone else "min-max over replicates"
        spread = (
            "its one run"
            if alone
            else "the mean over the design point's replicates, with a band from the lowest to "
            "the highest"
        )
        for outcome, label in OUTCOMES.items():
            figure = plots.plot_sweep_facets(frame, by, within, outcome, ylabel=label, band=band)
            caption = (
                f"{_sentence(label)}, each year, for each value of {by}, in a panel per value "
                f"of {within}: {spread}."
            )
            figures[f"{outcome}_by_{by}_within_{within}.png"] = (figure, caption)
    return figures


def _one_run_each(frame: pd.DataFrame, keys: str | list[str]) -> bool:
    """Whether each value of ``keys`` has one run: its lines then have no band to draw."""
    return bool(frame.groupby(keys, dropna=False)["run_id"].nunique().max() == 1)


def _facts(record: ExperimentRecord, frame: pd.DataFrame) -> list[tuple[str, str]]:
    experiment, sweep = record.experiment, record.experiment.sweep
    complete = sum(run.status == "complete" for run in record.runs)
    swept = [
        *(f"{k}: {_values(v)}" for k, v in sweep.grid.items()),
        *(
            f"{k}: {_values(list(v))} ({sweep.samples} Latin-hypercube samples)"
            for k, v in sweep.lhs.items()
        ),
    ]
    wall = record.wall_s
    return [
        ("experiment", experiment.name),
        ("base config", experiment.base),
        ("fixed overrides", _overrides(experiment.set)),
        ("sweep", "; ".join(swept) or "none (replicates only)"),
        ("replicates", str(experiment.replicates)),
        ("seed", str(experiment.seed)),
        ("runs", f"{complete} of {len(record.runs)} complete; the figures show the complete ones"),
        ("years", f"{int(frame['year'].min())} to {int(frame['year'].max())}"),
        ("wall time", "?" if wall is None else f"{wall:,.1f} s"),
    ]


def _values(values: Any) -> str:
    return orjson.dumps(values).decode()


def _overrides(overrides: dict[str, Any]) -> str:
    return ", ".join(f"{k}={_values(v)}" for k, v in overrides.items()) or "none"


def _table_html(table: pd.DataFrame) -> str:
    """The points' table with values as the experiment's files show them."""
    shown = table.copy()
    for column in shown:
        if shown[column].dtype == object:
            shown[column] = [str(cell) for cell in table_cells(list(shown[column]))]
        elif "." in str(column) and shown[column].isna().any():
            # A swept key's null is a setting (government.budget: null, no limit), which the
            # sweep line and the figures' legends call null: not a blank cell.
            shown[column] = ["null" if pd.isna(v) else _number(v) for v in shown[column]]
    return shown.to_html(
        index=False,
        na_rep="",
        float_format=_number,
        border=0,
    )


def _sensitivity_html(sensitivity: pd.DataFrame, keys: list[str]) -> str:
    if sensitivity.empty:
        # Said, not silent: the README lists sensitivity.csv among a report's files.
        return (
            "<h2>Sensitivity</h2>\n<p>No swept key has numbers to rank "
            f"({html.escape(', '.join(keys))}), so there is no rank correlation and no "
            "sensitivity.csv.</p>"
            if keys
            else ""
        )
    return f"""<h2>Sensitivity</h2>
<p>Spearman rank correlation, over all runs, between a swept key's value and an outcome's
average over the years (-1 to 1), over the runs where the key has a number: a null value
(an unlimited budget, say) has no rank. Blank where either does not vary over those runs;
sensitivity.csv holds the same table.</p>
{_table_html(sensitivity)}"""


def _paired_html(paired: pd.DataFrame, keys: list[str]) -> str:
    if paired.empty:
        return (
            f"<h2>Paired comparisons</h2>\n<p>No swept key has 2 to {MAX_LINES} values whose "
            "runs pair with a run of its first value (the same seed and the same values of the "
            "other swept keys, which a Latin hypercube's points do not share), so there is no "
            "paired.csv.</p>"
            if keys
            else ""
        )
    every = paired[paired["within"] == "all"].drop(columns="within")
    shown = every.assign(
        value=[_setting(cell) for cell in every["value"]],
        reference=[_setting(cell) for cell in every["reference"]],
        relative=[("" if math.isnan(r) else f"{r:+.1%}") for r in every["relative"]],
    )
    return f"""<h2>Paired comparisons</h2>
<p>Runs of one replicate meet the same floods and claim draws at every design point, so a
setting's effect is measured run against run: each run minus the run of the key's first value
that has the same seed and the same values of the other swept keys. Each outcome is a run's
average over its years; <em>relative</em> is the mean difference over the reference runs' mean,
and <em>lower</em> and <em>higher</em> count the pairs below and above zero. A difference the
points' spreads hide (they include the luck of the floods) shows here. paired.csv holds the
same table and each comparison again within each value of the other swept keys (its
<em>within</em> column), which shows whether an effect depends on them.</p>
{_table_html(shown)}"""


def _setting(value: Any) -> str:
    """A swept value in a table cell: ``null`` as the experiment file says it, numbers short."""
    if pd.isna(value):
        return "null"
    if isinstance(value, bool) or not isinstance(value, (int, float)):
        return str(value)
    return _number(float(value))


def _number(value: float) -> str:
    """A table cell: four significant digits, whole amounts (dollars) with thousands commas."""
    if math.isnan(value):
        return ""
    return f"{value:,.0f}" if abs(value) >= 1000 else f"{value:.4g}"


def _html(
    name: str,
    facts: list[tuple[str, str]],
    table: pd.DataFrame,
    sensitivity: pd.DataFrame,
    paired: pd.DataFrame,
    captions: dict[str, str],
    keys: list[str],
) -> str:
    rows = "\n".join(
        f"    <tr><th>{html.escape(k)}</th><td>{html.escape(v)}</td></tr>" for k, v in facts
    )
    figures = figures_html({file: (html.escape(file), text) for file, text in captions.items()})
    body = f"""<table>
{rows}
</table>
<h2>Design points</h2>
<p>Each outcome's average over a run's years: the mean and standard deviation over the point's
runs (points.csv holds the same table).</p>
{_table_html(table)}
{_sensitivity_html(sensitivity, keys)}
{_paired_html(paired, keys)}
<h2>Figures</h2>
{figures}"""
    return page_html(f"floodsim experiment report: {name}", body)


def write_experiment_report(experiment_dir: str | Path, out_dir: str | Path | None = None) -> Path:
    """Write the figures, ``points.csv`` and ``index.html`` of a batch experiment.

    Args:
        experiment_dir: The folder ``floodsim batch`` wrote (``experiment.json`` and, once the
            batch has finished, ``model_years.parquet``).
        out_dir: Folder for the report (default ``EXPERIMENT_DIR/report``); created when
            missing.

    Returns:
        The path of ``index.html``.

    Raises:
        ReportError: When the folder holds no finished experiment or the report folder cannot
            be written; one line naming the path and what is missing.
    """
    folder = Path(experiment_dir)
    record, frame = _load(folder)
    keys = [key for key in record.experiment.swept_keys if key in frame]
    target = Path(out_dir) if out_dir is not None else folder / REPORT_DIR
    table = points_table(frame, keys)
    sensitivity = sensitivity_table(frame, keys)
    paired = paired_table(frame, keys)
    figures = _figures(frame, keys)
    name = record.experiment.name
    try:
        target.mkdir(parents=True, exist_ok=True)
        for file_name, (figure, _) in figures.items():
            figure.savefig(target / file_name, dpi=_DPI)
        table.to_csv(target / "points.csv", index=False)
        if not sensitivity.empty:
            sensitivity.to_csv(target / "sensitivity.csv", index=False)
        if not paired.empty:
            paired.to_csv(target / "paired.csv", index=False)
        index = target / "index.html"
        captions = {file_name: caption for file_name, (_, caption) in figures.items()}
        page = _html(name, _facts(record, frame), table, sensitivity, paired, captions, keys)
        index.write_text(page, encoding="utf-8")
    except OSError as err:
        msg = f"{target}: cannot write the report ({err.strerror or err})"
        raise ReportError(msg) from None
    return index
