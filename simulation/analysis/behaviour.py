"""Check a run or an experiment against behavioural targets (stylized facts).

A targets file is YAML with one list, ``targets``; each entry says what to compute from a run
and what value, within what absolute tolerance, it should have::

    targets:
      - name: insured_share_floodplain         # unique; letters, digits, _ . -
        description: "About half of single-family homes in the 100-year floodplain are insured"
        source: "Kousky et al. 2018; Dixon et al. 2006 (RAND)"
        statistic: mean_of_column              # how the value is computed from a run
        column: insured_share_ae               # a model_years column
        years: [5, 30]                         # inclusive year range (optional: every year)
        value: 0.5                             # the target
        tolerance: 0.15                        # pass if |simulated - value| <= tolerance

Statistics (the keys each one uses besides ``value`` and ``tolerance``):

``mean_of_column``
    Mean of ``column`` over the years in ``years`` (every year when omitted). Years past a
    run's last year are not there to average: the mean is over the years the run has, with a
    :class:`ShortWindowWarning`. A year whose value is blank (NaN: a share or mean over no
    household, as when everyone in a group has moved away) is left out of the mean, with a
    :class:`BlankYearsWarning`; a column blank in every year gives the run no value.
``event_jump``
    The event-study change of ``column`` at ``years_since = 1`` (the first full year after the
    flood) from the mean of the ``baseline_years`` (default 3) years before ``flood_year``
    (detected as the year with most damaged households when omitted; a given year in which no
    household was damaged is an error); see :mod:`simulation.analysis.event_study`. With
    ``change: relative`` the change is divided by that pre-flood mean (0.09: 9 % above it, as
    studies of log policy counts report), with ``change: absolute`` (the default) it is in the
    column's units.
``event_change_at``
    The same change at ``years_since`` (required), also ``absolute`` or ``relative``.
``event_recovery_years``
    The first ``years_since`` after the jump at which the change is at or below ``fraction``
    (default 0.1) of the jump: ``inf`` when the run ends first, NaN when there is no jump.
``median_policy_tenure``
    Median length in years of insured spells, from the ``household_traces`` audit stream (any
    audit level but ``off``, and ``standard`` or ``full`` where households hold policies at the
    start; with ``audit.sample`` below 1, the sampled households). A household
    is insured at the end of a year exactly when that year's executed skill
    (``action.decision_skill``) is ``buy_insurance`` or ``buy_contents_insurance``, since a
    policy that is not renewed lapses. A spell is a run of consecutive insured years; it ends
    when the household's next traced year is not insured (a lapse, or a move away). A spell
    still open in the run's last year is right-censored: its policy was held at least that
    long. A policy already in force at the household's first traced year (bought before the
    run, ``households.initial_insured_share``) counts from when it was bought: its spell starts
    ``state_before.insured_years`` earlier, and one not renewed that year ends there, so the
    first cohort's spells are neither cut short nor, when they lapse at once, missed. The
    ``minimal`` level's traces have no ``state_before``: a run at that level with policies at
    the start cannot answer the target (:func:`tenure_audit_problem`).
    The median is the Kaplan-Meier median (the first length at which the estimated share
    of spells still in force is at most one half), as NFIP tenure studies follow each cohort of
    new policies until half have lapsed; leaving the open spells out would bias it short, since
    the longest spells are the likeliest to be still open. It is ``inf`` when more than half
    are still in force at the longest length observed, NaN without any spell.

For an experiment folder (``experiment.json`` and ``model_years.parquet``) every statistic is
computed for each complete run (its run directory under ``runs/``) and the table reports the
mean over runs as ``value`` and their standard deviation as ``spread``, with ``min`` and
``max``; a sweep gets one row per target and design point (``point``, with its swept values as
``setting``), since pooling runs with different parameters would describe none of them.
``event_recovery_years`` over several runs is the recovery of their *mean* change (the event
study's ``mean`` column), as the published event studies estimate it from an average response:
one run's yearly sampling noise (about 2-3 points of AE take-up in a 1,000-household town) is
as large as a tenth of a jump of a few points, so one run's first year below that line is mostly
noise. Its spread, min and max are those of the runs' own recovery years, the spread over the
finite ones (a run that has not recovered when it ends is infinite: right-censored); the
``n_infinite`` column counts the runs left out of the spread that way. A run that has not
recovered may level off above ``fraction`` of the jump rather than be slow: under the PMT
policy, for one, a paid claim raises coping appraisal for the rest of the run (it counts the
household's claims, which do not decay with its memories).
``median_policy_tenure`` over several runs is the Kaplan-Meier median of all their spells
together (replicates of one design point draw their spells from one process, and a median of
the runs' medians could be a length no spell has: 3.5 from runs of 3 and 4 years), with the
spread, min and max of the runs' own medians (the spread over the finite ones). For the other
statistics an infinite per-run value makes the mean
infinite and the spread NaN. A run that holds no duration of its own (no rise after the flood,
no insured spell) is counted in ``n_runs`` but has no place in the spread, min and max; an
:class:`UncomputedTargetWarning` counts such runs. A run whose pre-flood baseline is shorter
than ``baseline_years`` warns (:class:`~simulation.analysis.event_study.ShortBaselineWarning`),
once per target and design point, counting its runs.
"""

from __future__ import annotations

import math
import statistics
import warnings
from collections import Counter
from pathlib import Path
from typing import TYPE_CHECKING, Annotated, Any, Literal

import numpy as np
import pandas as pd
import yaml
from pydantic import Field, ValidationError, field_validator, model_validator

from simulation.analysis.event_study import (
    ShortBaselineWarning,
    event_study,
    recovery_years,
    short_baseline_warning,
)
from simulation.analysis.metrics import RunDirError, load_run, stream_path, table_cells
from simulation.audit.readers import iter_records
from simulation.config import ConfigError, check_file_kind
from simulation.config_base import LAX, ConfigModel
from simulation.errors import InputError, shown_value
from simulation.experiments.record import RecordError, read_record
from simulation.input_files import read_text
from simulation.model import METRIC_COLUMNS
from simulation.yaml_errors import describe_decode_error, describe_yaml_error, load_yaml

if TYPE_CHECKING:
    from collections.abc import Iterable, Mapping

    from matplotlib.axes import Axes
    from matplotlib.figure import Figure

__all__ = [
    "STATISTICS",
    "TABLE_COLUMNS",
    "BehaviourError",
    "BlankStatisticError",
    "BlankYearsWarning",
    "IncompleteExperimentWarning",
    "ShortWindowWarning",
    "Target",
    "TargetsFile",
    "UncomputedTargetWarning",
    "UnscriptedFloodWarning",
    "check_behaviour",
    "draw_target_offsets",
    "load_targets",
    "median_tenure",
    "plot_behaviour",
    "row_labels",
    "run_statistic",
    "tenure_audit_problem",
]

#: Statistics a target may use (see the module docstring).
STATISTICS = (
    "mean_of_column",
    "event_jump",
    "event_change_at",
    "event_recovery_years",
    "median_policy_tenure",
)
#: Columns of the table :func:`check_behaviour` returns, in order.
TABLE_COLUMNS = (
    "name",
    "point",
    "setting",
    "value",
    "spread",
    "min",
    "max",
    "n_runs",
    "n_infinite",
    "target",
    "tolerance",
    "passed",
    "statistic",
    "description",
)
_INSURANCE_SKILLS = frozenset({"buy_insurance", "buy_contents_insurance"})


class BlankStatisticError(Exception):
    """A run's statistic is over nobody (a share of no household): it has no value.

    Not a mistake in the targets: a calibration's search point can empty a group (everyone
    relocated), so even ``strict`` checking gives the target no value (NaN) rather than stop.
    """


class BehaviourError(InputError):
    """A bad targets file or a path that is neither a run nor an experiment (one line)."""


class UncomputedTargetWarning(UserWarning):
    """Some runs cannot give a target's statistic (no flood in its year, no traces)."""


class UnscriptedFloodWarning(UncomputedTargetWarning):
    """Targets dated to a flood year, checked on runs of a stochastic hazard."""


class IncompleteExperimentWarning(UserWarning):
    """An experiment is checked on its complete runs while others are pending or failed."""


class ShortWindowWarning(UserWarning):
    """A ``mean_of_column`` target's ``years`` reach past the last year of a run.

    The mean is taken over the years the run has, so a 16-year run checked against years
    5-30 answers for years 5-16: a different statistic from the one the target describes.

    Args:
        where: What the warning is about (a run's target, or a target over runs).
        years: The target's inclusive year range.
        last_year: The (earliest) last year of the runs.
        runs: Who ends then (``"the run ends"`` for one run).
    """

    def __init__(
        self,
        where: str,
        years: tuple[int, int],
        last_year: int,
        runs: str = "the run ends",
    ):
        first, end = years
        averaged = (
            f"the mean is over years {first}-{last_year} only"
            if first <= last_year
            else "there is no year to average, so the target fails"
        )
        super().__init__(
            f"{where}: years {first}-{end} reach past the run's last year ({runs} in year "
            f"{last_year}): {averaged}"
        )
        self.years = (first, end)
        self.last_year = last_year


class BlankYearsWarning(UserWarning):
    """A ``mean_of_column`` target's column is blank (NaN) in some of the years it averages.

    A share or mean over nobody is blank (everyone in the group moved away): the mean is over
    the years with a value, which describes fewer years than the target names.

    Args:
        where: What the warning is about (a run's target, or a target over runs).
        blank: How many years of the window are blank (in the run with the most).
        years: How many years the window holds.
        runs: Whose years are blank (``"the run"`` for one run).
    """

    def __init__(self, where: str, blank: int, years: int, runs: str = "the run"):
        super().__init__(
            f"{where}: {blank} of {years} year(s) are blank (NaN, a share or mean over no "
            f"household) in {runs}: the mean is over the years with a value"
        )
        self.blank = blank
        self.years = years


# The keys each statistic reads besides those every target has (see the module docstring).
_ALWAYS_READ = frozenset({"name", "description", "source", "statistic", "value", "tolerance"})
_EVENT_KEYS = frozenset({"column", "flood_year", "baseline_years"})
_READS: dict[str, frozenset[str]] = {
    "mean_of_column": frozenset({"column", "years"}),
    "event_jump": _EVENT_KEYS | {"change"},
    "event_change_at": _EVENT_KEYS | {"years_since", "change"},
    "event_recovery_years": _EVENT_KEYS | {"fraction"},
    "median_policy_tenure": frozenset(),
}


class Target(ConfigModel):
    """One behavioural target (an entry of ``targets:``)."""

    name: str = Field(pattern=r"^[A-Za-z0-9][A-Za-z0-9_.-]{0,63}$")
    description: str = ""
    source: str = ""
    statistic: Literal[
        "mean_of_column",
        "event_jump",
        "event_change_at",
        "event_recovery_years",
        "median_policy_tenure",
    ]
    column: str = "insured_share_ae"
    years: (
        Annotated[tuple[Annotated[int, Field(ge=1)], Annotated[int, Field(ge=1)]], LAX] | None
    ) = None
    flood_year: Annotated[int, Field(ge=1)] | None = None
    baseline_years: Annotated[int, Field(ge=1)] = 3
    years_since: Annotated[int, Field(ge=0)] | None = None
    change: Literal["absolute", "relative"] = "absolute"
    fraction: Annotated[float, Field(gt=0, lt=1)] = 0.1
    value: float
    tolerance: Annotated[float, Field(ge=0)]

    @field_validator("column")
    @classmethod
    def _known_column(cls, value: str) -> str:
        if value not in METRIC_COLUMNS or value == "year":
            msg = f"{value!r} is not a model_years column ({', '.join(METRIC_COLUMNS[1:])})"
            raise ValueError(msg)
        return value

    @model_validator(mode="after")
    def _consistent(self) -> Target:
        # A key the statistic does not read is a mistake in the file (say, years_since on a
        # mean_of_column target meant as an event statistic): refused rather than ignored.
        unused = sorted(self.model_fields_set - _ALWAYS_READ - _READS[self.statistic])
        if unused:
            msg = f"{unused[0]}: not used by statistic {self.statistic}"
            raise ValueError(msg)
        if self.years is not None and self.years[0] > self.years[1]:
            msg = f"years: start {self.years[0]} is after end {self.years[1]}"
            raise ValueError(msg)
        if self.statistic == "event_change_at" and self.years_since is None:
            msg = "years_since: required by statistic event_change_at"
            raise ValueError(msg)
        return self


class TargetsFile(ConfigModel):
    """A whole targets file."""

    targets: list[Target] = Field(min_length=1)

    @model_validator(mode="after")
    def _unique_names(self) -> TargetsFile:
        names = [t.name for t in self.targets]
        duplicates = sorted({n for n in names if names.count(n) > 1})
        if duplicates:
            msg = f"duplicate target name {duplicates[0]!r}"
            raise ValueError(msg)
        return self


def _describe(error: ValidationError, origin: Path, data: dict[str, Any]) -> str:
    """One line naming the file, the key (``targets[2].tolerance``) and the problem."""
    first = error.errors()[0]
    parts: list[str] = []
    for part in first["loc"]:
        if isinstance(part, int) and parts:  # a list index; first, a key of the file
            parts[-1] = f"{parts[-1]}[{part}]"
        else:
            parts.append(str(part))
    loc = ".".join(parts)
    message = first["msg"].removeprefix("Value error, ")
    if first["type"] == "extra_forbidden":
        message = "unknown key"
    elif first["type"] == "missing":
        message = "required key is missing"
    elif first["type"] != "value_error" and "input" in first:
        message = f"{message} (got {shown_value(first['input'])})"
    # A validator's own message starts with the key it is about ("years_since: ..."); name the
    # entry by its target name too, which is easier to find in the file than an index.
    index = first["loc"][1] if len(first["loc"]) > 1 and first["loc"][0] == "targets" else None
    named = ""
    if isinstance(index, int):
        entries = data.get("targets") or []
        entry = entries[index] if index < len(entries) else None
        if isinstance(entry, dict) and entry.get("name"):
            named = f" (target {entry['name']!r})"
    return f"{origin}: {loc or '(top level)'}{named}: {message}"


def load_targets(path: str | Path) -> list[Target]:
    """Read and validate a targets file.

    Raises:
        BehaviourError: One line naming the file, the key and the problem.
    """
    origin = Path(path)
    try:
        data = load_yaml(read_text(origin))
    except FileNotFoundError:
        msg = f"{origin}: targets file not found"
        raise BehaviourError(msg) from None
    except OSError as err:
        msg = f"{origin}: cannot read the targets file ({err.strerror})"
        raise BehaviourError(msg) from None
    except UnicodeDecodeError as err:
        msg = f"{origin}: {describe_decode_error(err)}"
        raise BehaviourError(msg) from None
    except yaml.YAMLError as err:
        msg = f"{origin}: YAML syntax error: {describe_yaml_error(err)}"
        raise BehaviourError(msg) from None
    if not isinstance(data, dict):
        msg = f"{origin}: (top level): expected a mapping with a 'targets' list"
        raise BehaviourError(msg)
    try:  # a run config or experiment given by mistake is named as what it is
        check_file_kind(data, "targets", str(origin))
    except ConfigError as err:
        raise BehaviourError(str(err)) from None
    try:
        return list(TargetsFile.model_validate(data).targets)
    except ValidationError as err:
        raise BehaviourError(_describe(err, origin, data)) from None


# ------------------------------------------------------------------------------ statistics
def _policy_spells(run_dir: Path, last_year: int) -> tuple[list[int], list[int]]:
    """Lengths of the ended and of the still open insured spells of every traced household."""
    years: dict[str, dict[int, bool]] = {}
    held_before: dict[str, tuple[int, int]] = {}  # (first traced year, years insured before it)
    for record in iter_records(run_dir, "household_traces"):
        agent_id, year = str(record["agent_id"]), int(record["year"])
        skill = (record.get("action") or {}).get("decision_skill")
        years.setdefault(agent_id, {})[year] = skill in _INSURANCE_SKILLS
        if agent_id not in held_before or year < held_before[agent_id][0]:
            held = (record.get("state_before") or {}).get("insured_years", 0)
            held_before[agent_id] = (year, int(held))
    ended: list[int] = []
    still_open: list[int] = []
    for agent_id, insured_by_year in years.items():
        length = held_before[agent_id][1]  # a policy bought before its first traced year
        for year in sorted(insured_by_year):
            if insured_by_year[year]:
                length += 1
            elif length:
                ended.append(length)
                length = 0
        # A spell open at the household's last traced year ended only if the household left
        # (moved away) before the run ended; otherwise it is right-censored.
        if length:
            (ended if max(insured_by_year) < last_year else still_open).append(length)
    return ended, still_open


def tenure_audit_problem(level: str, initial_insured_share: Mapping[str, float]) -> str | None:
    """Why a run at audit ``level`` cannot give ``median_policy_tenure``, if it cannot.

    ``off`` writes no traces; ``minimal`` writes no ``state_before``, so where households hold
    policies at the start (any ``initial_insured_share`` above 0) it cannot tell their spells
    from those bought in the first year.
    """
    if level == "off":
        return "needs the household_traces audit stream (audit.level is off: use minimal or above)"
    if level == "minimal" and any(float(share) > 0 for share in initial_insured_share.values()):
        return (
            "households hold policies at the start (households.initial_insured_share), and "
            "minimal traces do not say since when (use audit.level standard)"
        )
    return None


def median_tenure(ended: list[int], still_open: list[int]) -> float:
    """Kaplan-Meier median of spell lengths, ``still_open`` ones right-censored.

    Args:
        ended: Lengths of spells whose end was seen.
        still_open: Lengths of spells still running when observation stopped.

    Returns:
        The first length at which the estimated share of spells lasting longer is at most one
        half; ``inf`` if that share stays above one half, NaN without any spell.
    """
    if not ended and not still_open:
        return math.nan
    if not ended:
        return math.inf
    # Imported here: scipy.stats takes half a second, which every floodsim command would pay.
    from scipy.stats import CensoredData, ecdf  # noqa: PLC0415

    survival = ecdf(CensoredData(uncensored=ended, right=still_open)).sf
    # A float tolerance: with censoring the survival is a product of steps, and a share of one
    # half can come out a hair above it (0.5000000000000001), which must still count.
    reached = np.flatnonzero(survival.probabilities <= 0.5 + 1e-12)
    return float(survival.quantiles[reached[0]]) if reached.size else math.inf


def run_statistic(run_dir: str | Path, target: Target) -> float:
    """The value of ``target``'s statistic for one run directory.

    Raises:
        BehaviourError: When the run lacks what the statistic needs (a column, the flood's
            baseline years, or the ``household_traces`` stream).
        BlankStatisticError: When a ``mean_of_column`` target's column is blank in every
            year it reads (a share or mean over no household).
    """
    if target.statistic == "median_policy_tenure":
        return median_tenure(*_run_spells(Path(run_dir), target))
    run = load_run(run_dir)
    metrics = run.metrics
    where = f"{run.run_dir}: target {target.name!r}"
    if target.column not in metrics.columns:
        msg = f"{where}: model_years has no column {target.column!r}"
        raise BehaviourError(msg)
    if target.statistic == "mean_of_column":
        values = metrics
        if target.years is not None:
            last = int(metrics["year"].max())
            if target.years[1] > last:
                warnings.warn(ShortWindowWarning(where, target.years, last), stacklevel=2)
            values = metrics[metrics["year"].between(*target.years)]
        blank = int(values[target.column].isna().sum())
        if blank and blank == len(values):
            # A share or mean over nobody is blank, not 0 (README): no target can pass on it.
            span = "every year" if target.years is None else "every year of its range"
            msg = (
                f"{where}: {target.column} is blank (NaN) in {span}: a share or mean over no "
                "household, such as zone X's share in a town without zone X"
            )
            raise BlankStatisticError(msg)
        if blank:
            warnings.warn(BlankYearsWarning(where, blank, len(values)), stacklevel=2)
        return float(values[target.column].mean()) if len(values) else math.nan
    try:
        table = event_study(
            metrics,
            target.flood_year,
            target.column,
            target.baseline_years,
            relative=target.change == "relative",
        )
    except ValueError as err:
        msg = f"{where}: {err}"
        raise BehaviourError(msg) from None
    changes = table.set_index("years_since")["mean"]
    if target.statistic == "event_recovery_years":
        if changes[changes.index >= 1].isna().all():  # not "no rise": nothing to see one in
            msg = (
                f"{where}: {target.column} is blank (NaN) in every year after the flood or in "
                "every baseline year: a share or mean over no household"
            )
            raise BlankStatisticError(msg)
        return recovery_years(changes, target.fraction)
    at = 1 if target.statistic == "event_jump" else int(target.years_since or 0)
    if at not in changes.index:
        # The run ends too soon after its flood (a flood in its last year has no year after
        # it): say so, rather than fail the target with no reason given.
        last = int(metrics["year"].max())
        flood = table.attrs.get("flood_year")
        msg = (
            f"{where}: needs year {at} after the flood, but the run ends "
            f"{last - flood if flood is not None else 'too few'} year(s) after it "
            f"(flood in year {flood}, last year {last})"
        )
        raise BehaviourError(msg)
    change = float(changes.loc[at])
    if math.isnan(change):
        # The column is blank at that year or across the baseline (a share over nobody).
        msg = (
            f"{where}: {target.column} is blank (NaN) {at} year(s) after the flood or in "
            "every baseline year: a share or mean over no household"
        )
        raise BlankStatisticError(msg)
    return change


def _run_spells(run_dir: Path, target: Target) -> tuple[list[int], list[int]]:
    """The ended and the still open insured spells of a run (see ``_policy_spells``).

    Raises:
        BehaviourError: When the run has no traces, or traces that cannot tell its spells
            (naming the run and ``target``).
    """
    run = load_run(run_dir)
    where = f"{run.run_dir}: target {target.name!r}"
    if stream_path(run.run_dir, "household_traces") is None:
        msg = f"{where}: median_policy_tenure needs the household_traces audit stream"
        raise BehaviourError(msg)
    level = str((run.manifest.get("audit") or {}).get("level", ""))
    shares = (run.config.get("households") or {}).get("initial_insured_share") or {}
    if (problem := tenure_audit_problem(level, shares)) is not None:
        msg = f"{where}: median_policy_tenure: {problem}"
        raise BehaviourError(msg)
    return _policy_spells(run.run_dir, int(run.metrics["year"].max()))


def _mean_recovery(runs: list[Path], target: Target) -> float:
    """Recovery years of the mean change over ``runs`` (see the module docstring)."""
    frames = [load_run(run_dir).metrics.assign(run_id=str(run_dir)) for run_dir in runs]
    table = event_study(frames, target.flood_year, target.column, target.baseline_years)
    return recovery_years(table.set_index("years_since")["mean"], target.fraction)


def _warn_unfinished(
    path: Path, unfinished: Counter[str], total: int, points: set[int], checked: Iterable[int]
) -> None:
    """Warn that an experiment is checked on part of its runs (by status) and which points."""
    statuses = ", ".join(f"{n} {status}" for status, n in sorted(unfinished.items()))
    left_out = len(points - set(checked))
    without = f", {left_out} of {len(points)} design points have none and are left out"
    warnings.warn(
        f"{path}: {unfinished.total()} of {total} runs are not complete ({statuses}); checked "
        f"on the complete ones{without if left_out else ''} (to finish them: floodsim batch "
        f"<experiment file> --out {path} --resume)",
        IncompleteExperimentWarning,
        stacklevel=4,
    )


def _run_groups(path: Path) -> list[tuple[int, str, list[Path]]]:
    """The run directories behind ``path`` as ``(point, setting, runs)`` per design point.

    A run directory is one group (point 0, no setting); an experiment has one group per design
    point with a complete run, its setting the swept values (``key=value, ...``).
    """
    # The runs' own model_years are read, so an interrupted experiment (no parquet yet) is
    # checked on the runs it completed.
    if (path / "experiment.json").is_file():
        try:
            runs = read_record(path).runs
        except RecordError as err:
            raise BehaviourError(str(err)) from None
        groups: dict[int, tuple[str, list[Path]]] = {}
        unfinished: Counter[str] = Counter()
        for record in runs:
            if record.status != "complete" or record.run_dir is None:
                unfinished[record.status] += 1
                continue
            setting = ", ".join(
                f"{key}={_setting_text(value)}" for key, value in record.params.items()
            )
            groups.setdefault(record.point, (setting, []))[1].append(path / record.run_dir)
        if not groups:
            msg = f"{path}: the experiment has no complete run"
            raise BehaviourError(msg)
        if unfinished:
            _warn_unfinished(path, unfinished, len(runs), {r.point for r in runs}, groups.keys())
        return [(point, *groups[point]) for point in sorted(groups)]
    if (path / "manifest.json").is_file():
        return [(0, "", [path])]
    msg = f"{path}: neither a run directory (manifest.json) nor an experiment (experiment.json)"
    raise BehaviourError(msg)


def _setting_text(value: Any) -> str:
    """A swept value as model_years.parquet and plot_sweep show it (null, JSON for lists)."""
    return "null" if value is None else str(table_cells([value])[0])


def _summary(values: list[float], *, censored: bool = False) -> tuple[float, float, float, float]:
    """Central value, spread (sample std), min and max over runs.

    The central value is the mean, or with ``censored`` (durations where infinity means "not
    within the run") the median, infinite only once half the values are (check_behaviour puts
    a pooled value in its place for several runs).
    """
    array = np.asarray(values, float)
    finite = np.isfinite(array)
    if np.isnan(array).any():
        return math.nan, math.nan, math.nan, math.nan
    low, high = float(array.min()), float(array.max())
    if censored:
        spread = statistics.stdev(array[finite].tolist()) if finite.sum() > 1 else math.nan
        return float(np.median(array)), spread, low, high
    if not finite.all():
        return float(array[~finite][0]), math.nan, low, high
    # fmean and stdev sum exactly: replicates that agree have their value as mean and a
    # spread of 0, not a mean one unit in the last place above their max and 7e-17.
    mean = min(max(statistics.fmean(values), low), high)
    spread = statistics.stdev(array.tolist()) if len(array) > 1 else math.nan
    return mean, spread, low, high


def _run_statistics(
    runs: list[Path], target: Target, *, strict: bool
) -> tuple[list[float], list[Path], list[str], tuple[list[int], list[int]]]:
    """Each run's statistic (NaN where it has none), the runs that gave one, and why not.

    For ``median_policy_tenure`` also every run's spells together (ended, still open).

    Raises:
        BehaviourError: For a run that cannot be read, or (``strict``) one lacking what the
            statistic needs.
    """
    values: list[float] = []
    answered: list[Path] = []
    problems: list[str] = []
    pooled: tuple[list[int], list[int]] = ([], [])
    for run_dir in runs:
        try:
            if target.statistic == "median_policy_tenure":  # each run's traces read once
                ended, still_open = _run_spells(run_dir, target)
                pooled[0].extend(ended)
                pooled[1].extend(still_open)
                values.append(median_tenure(ended, still_open))
            else:
                values.append(run_statistic(run_dir, target))
        except RunDirError as err:
            raise BehaviourError(str(err)) from None
        except BehaviourError as err:
            if strict:
                raise
            values.append(math.nan)
            problems.append(str(err))
        except BlankStatisticError as err:
            values.append(math.nan)
            if not strict:  # a calibration scores the penalty, without a word
                problems.append(str(err))
        else:
            answered.append(run_dir)
    return values, answered, problems, pooled


def check_behaviour(
    path: str | Path, targets_path: str | Path, *, strict: bool = False
) -> pd.DataFrame:
    """Compare a run, or an experiment's replicates, with every target of a targets file.

    A run that cannot give a target's statistic (its flood year is not in the run or damaged
    no one, the statistic needs an audit stream the run did not write) has no value for it:
    the target's row is NaN and fails, an :class:`UncomputedTargetWarning` says why (once per
    target and design point), and the other targets are still checked. (For
    ``event_recovery_years`` and ``median_policy_tenure``, whose runs may lack the event
    anyway, the value is that of the other runs.)

    Args:
        path: A run directory or an experiment folder.
        targets_path: A targets file (see the module docstring).
        strict: Raise instead, for the first run that cannot give a statistic (calibration:
            a target no run can answer is an error in its setup, not a miss). A statistic
            over nobody (:class:`BlankStatisticError`) is no value even so: a search point
            can empty a group.

    Returns:
        One row per target (and, for a sweep, per design point) with :data:`TABLE_COLUMNS`:
        ``point`` and ``setting`` (the design point and its swept values; 0 and ``""`` without
        a sweep), ``value`` (the mean over the point's runs; for ``event_recovery_years`` the
        recovery of the runs' mean change, for ``median_policy_tenure`` the Kaplan-Meier
        median of their spells together),
        ``spread`` (their standard deviation; NaN for one run), ``min``, ``max``, ``n_runs``,
        ``n_infinite`` (runs whose own value is infinite, which the spread of a duration
        leaves out), ``target`` and ``tolerance`` (from the file), ``passed`` (``|value - target| <=
        tolerance``; false for a NaN value), ``statistic`` and ``description``. Rows are
        ordered by point, then as in the targets file.

    Raises:
        BehaviourError: For a bad targets file, a path that is neither a run nor an
            experiment, or (``strict``) a run lacking what a statistic needs.
    """
    targets = load_targets(targets_path)
    groups = _run_groups(Path(path))
    _warn_unscripted_floods(path, targets, groups)
    rows = []
    for point, setting, runs in groups:
        for target in targets:
            with warnings.catch_warnings(record=True) as caught:
                # Each run warns on its own; one warning per target and point says it all.
                warnings.simplefilter("always", ShortBaselineWarning)
                warnings.simplefilter("always", ShortWindowWarning)
                warnings.simplefilter("always", BlankYearsWarning)
                values, answered, problems, spells = _run_statistics(runs, target, strict=strict)
            _warn_again(caught, target.name, setting, len(runs))
            recovery = target.statistic == "event_recovery_years"
            if problems:
                # A duration is read from the runs that have one; the other statistics need all.
                spared = recovery or target.statistic == "median_policy_tenure"
                outcome = (
                    f"its value is that of the other {len(answered)}"
                    if spared and answered
                    else "so it fails"
                )
                # The first run's reason stands for the others: a sweep's points say which.
                warnings.warn(
                    UncomputedTargetWarning(
                        f"{problems[0]} ({len(problems)} of {len(runs)} run(s)"
                        f"{_at_point(setting)} give no value "
                        f"for this target: {outcome})"
                    ),
                    stacklevel=2,
                )
            if recovery or target.statistic == "median_policy_tenure":
                # A run without the event (no jump to recover from, no insured spell) has no
                # duration of its own; it does not void what the other runs say.
                known = [v for v in values if not math.isnan(v)]
                if not strict:  # a calibration scores the penalty, without a word
                    _warn_durationless(runs, values, answered, target, setting, recovery=recovery)
                mean, spread, low, high = (
                    _summary(known, censored=True) if known else (math.nan,) * 4
                )
            else:
                mean, spread, low, high = _summary(values)
            if recovery and len(answered) > 1:  # the runs' mean change, whatever each did
                with warnings.catch_warnings():
                    warnings.simplefilter("ignore", ShortBaselineWarning)  # said just above
                    mean = _mean_recovery(answered, target)
            elif target.statistic == "median_policy_tenure" and len(answered) > 1:
                mean = median_tenure(*spells)  # every run's spells together
            passed = (
                _within(mean, target.value, target.tolerance) if not math.isnan(mean) else False
            )
            rows.append(
                (
                    target.name,
                    point,
                    setting,
                    mean,
                    spread,
                    low,
                    high,
                    len(values),
                    sum(math.isinf(v) for v in values),
                    target.value,
                    target.tolerance,
                    passed,
                    target.statistic,
                    target.description,
                )
            )
    table = pd.DataFrame(rows, columns=list(TABLE_COLUMNS))
    table.attrs["source"] = str(path)
    return table


def _at_point(setting: str) -> str:
    """`` at [key=value, ...]`` naming a sweep's design point in a warning; ``""`` without one."""
    return f" at [{setting}]" if setting else ""


def _warn_durationless(
    runs: list[Path],
    values: list[float],
    answered: list[Path],
    target: Target,
    setting: str,
    *,
    recovery: bool,
) -> None:
    """Warn of runs that were read but hold no duration of their own (NaN), counting them.

    They are in ``n_runs`` but not in the spread, min and max; when no run has a duration the
    target has no value, and this says why.
    """
    read = set(answered)
    blank = [
        run for run, value in zip(runs, values, strict=True) if run in read and math.isnan(value)
    ]
    if not blank:
        return
    what = (
        "no rise after the flood to recover from"
        if recovery
        else "no insured spell: no household held a policy"
    )
    valued = len(answered) - len(blank)
    if not valued:
        outcome = "so the target has no value and fails"
    elif recovery:  # the recovery of the runs' mean change, to which every run read adds
        outcome = "their own is left out of the spread, min and max"
    else:
        outcome = f"the value is that of the other {valued}"
    warnings.warn(
        UncomputedTargetWarning(
            f"{blank[0]}: target {target.name!r}: {what} ({len(blank)} of {len(runs)} "
            f"run(s){_at_point(setting)} have none: {outcome})"
        ),
        stacklevel=3,
    )


def _warn_unscripted_floods(
    path: str | Path, targets: list[Target], groups: list[tuple[int, str, list[Path]]]
) -> None:
    """Warn once when event targets measure a flood that the runs' hazard does not script.

    A stochastic hazard floods when its draws say: a replicate without a damaging flood in a
    target's year has no value for the target (each says so), and one with floods before it
    measures their aftermath too, as does a target without a year, whose flood is each run's
    most damaging one. The targets file's own comments say which scenario its event targets
    assume; this says it before a screen of per-target warnings.
    """
    events = [t for t in targets if t.statistic.startswith("event_")]
    if not events or not groups:
        return
    # One run per design point: a sweep may set hazard.source itself.
    sources = {
        (load_run(runs[0]).config.get("hazard") or {}).get("source", "stochastic")
        for _, _, runs in groups
    }
    if "stochastic" not in sources:  # scripted events and rasters flood in the years they name
        return
    where = " at some design points" if len(sources) > 1 else ""
    dated = [t.name for t in events if t.flood_year is not None]
    undated = [t.name for t in events if t.flood_year is None]
    check = (
        "(check a run of a scripted hazard, such as configs/scenarios/single_flood.yaml, "
        "against them)"
    )
    if dated:
        years = sorted({t.flood_year for t in events if t.flood_year is not None})
        warnings.warn(
            UnscriptedFloodWarning(
                f"{path}: hazard.source is stochastic{where}, but {', '.join(dated)} measure the "
                f"aftermath of a damaging flood in year {', '.join(map(str, years))}: runs that "
                f"do not flood then give no value for them, and earlier floods blur the rest "
                f"{check}"
            ),
            stacklevel=3,
        )
    if undated:
        warnings.warn(
            UnscriptedFloodWarning(
                f"{path}: hazard.source is stochastic{where}, but {', '.join(undated)} measure "
                "the aftermath of each run's most damaging flood, which the run's other floods "
                f"blur {check}"
            ),
            stacklevel=3,
        )


def _warn_again(caught: list[warnings.WarningMessage], name: str, setting: str, runs: int) -> None:
    """Re-issue what one target's statistics warned: short baselines and windows once, counted."""
    short, windows, blanks = [], [], []
    for w in caught:
        if isinstance(w.message, ShortBaselineWarning):
            short.append(w.message)  # one run's statistic
        elif isinstance(w.message, ShortWindowWarning):
            windows.append(w.message)
        elif isinstance(w.message, BlankYearsWarning):
            blanks.append(w.message)
        else:
            warnings.warn_explicit(w.message, w.category, w.filename, w.lineno)
    where = f" [{setting}]" if setting else ""
    if windows:
        first, end = windows[0].years
        last = min(w.last_year for w in windows)
        warnings.warn(
            ShortWindowWarning(
                f"target {name!r}{where}",
                (first, end),
                last,
                f"{len(windows)} of {runs} run(s) end",
            ),
            stacklevel=3,
        )
    if blanks:
        most = max(blanks, key=lambda w: w.blank)
        warnings.warn(
            BlankYearsWarning(
                f"target {name!r}{where}",
                most.blank,
                most.years,
                f"{len(blanks)} of {runs} run(s) (the most in any one run)",
            ),
            stacklevel=3,
        )
    if short:
        warnings.warn(
            short_baseline_warning(
                f"target {name!r}{where}: ",
                len(short),
                runs,
                min(w.averaged for w in short),
                short[0].asked,
                {year for w in short for year in w.flood_years},
            ),
            stacklevel=3,
        )


def row_labels(table: pd.DataFrame) -> list[str]:
    """Each row's target name, followed by its design point's setting (a sweep's rows).

    A sweep of which one point has complete runs is still labelled: its rows describe that
    point, not the experiment.
    """
    if table["point"].nunique() <= 1 and not any(table["setting"]):
        return [str(name) for name in table["name"]]
    return [
        f"{name} [{setting or f'point {point}'}]"
        for name, point, setting in zip(
            table["name"], table["point"], table["setting"], strict=True
        )
    ]


# ------------------------------------------------------------------------------ figure
def draw_target_offsets(
    ax: Axes, table: pd.DataFrame, labels: list[str], *, spread: bool = True, verdict: bool = True
) -> None:
    """Draw each target's simulated value relative to it on ``ax``, one row per target.

    The grey band is target ± tolerance (-1..1) and the marker sits at ``(value - target) /
    tolerance``, clipped to ±3 with an arrow (an infinite value, such as a recovery that never
    came, sits at the edge; a row without a value has no marker and says "no value"). Passing
    targets are green, failing ones red; the real numbers are written beside each row.
    :func:`plot_behaviour` and the calibration's figure draw their targets with it.

    Args:
        ax: The axes to draw on.
        table: Rows with ``value``, ``target``, ``tolerance``, ``passed`` and, with
            ``spread``, ``spread`` (as :func:`check_behaviour` returns).
        labels: The rows' labels, top to bottom.
        spread: Draw the spread as an error bar and write it beside the value.
        verdict: Write PASS or FAIL after the numbers.
    """
    n = len(table)
    limit = 3.0  # tolerances shown; values further out are clipped to the edge with an arrow
    for row, record in enumerate(table.itertuples(index=False)):
        y = n - 1 - row
        # A zero tolerance draws any miss at the edge: its band is the target alone.
        tolerance = float(record.tolerance) or 1e-12
        colour = "tab:green" if record.passed else "tab:red"
        ax.axhspan(
            y - 0.3,
            y + 0.3,
            xmin=(limit - 1) / (2 * limit),
            xmax=(limit + 1) / (2 * limit),
            color="0.85",
            zorder=0,
        )
        value = float(record.value)
        spread_of = float(record.spread) if spread else math.nan
        if math.isfinite(value):
            offset = (value - float(record.target)) / tolerance
            shown = float(np.clip(offset, -limit, limit))
            bar = spread_of / tolerance if math.isfinite(spread_of) else 0.0
            marker = "o" if shown == offset else (">" if offset > 0 else "<")
            ax.errorbar(
                shown,
                y,
                xerr=bar if shown == offset and bar else None,
                fmt=marker,
                color=colour,
                ms=9,
                capsize=4,
                zorder=3,
            )
        elif not math.isnan(value):  # infinite (never recovered): off the scale
            ax.plot(limit, y, ">" if value > 0 else "<", color=colour, ms=9, zorder=3)
        spread_text = f" ± {spread_of:.3g}" if math.isfinite(spread_of) else ""
        infinite = int(getattr(record, "n_infinite", 0))
        if spread and infinite and math.isfinite(spread_of):
            spread_text += f" ({infinite} of {int(record.n_runs)} runs inf)"
        verdict_text = f"  {'PASS' if record.passed else 'FAIL'}" if verdict else ""
        ax.text(
            limit * 1.05,
            y,
            f"{'no value' if math.isnan(value) else _beside_band(value, record)}{spread_text}  "
            f"(target {record.target:.3g} "
            f"± {record.tolerance:.3g}){verdict_text}",
            va="center",
            fontsize="small",
            color=colour,
        )
    ax.axvline(0.0, color="black", lw=1)
    ax.set_xlim(-limit, limit)
    ax.set_ylim(-0.7, n - 0.3)
    ax.set_yticks(range(n), labels[::-1])


_OFFSET_AXIS = (
    "(simulated - target) / tolerance   (grey band: within tolerance; bar: ± the standard "
    "deviation over runs)"
)


def _beside_band(value: float, record: Any) -> str:
    """``value`` to 3 significant digits, or as many more as show its side of the band.

    0.6503 against 0.5 ± 0.15 fails, but "0.65" would read as the band's edge, a pass.
    """
    target, tolerance = float(record.target), float(record.tolerance)
    inside = _within(value, target, tolerance)
    for digits in range(3, 18):
        text = f"{value:.{digits}g}"
        if _within(float(text), target, tolerance) == inside:
            return text
    return repr(value)


def _within(value: float, target: float, tolerance: float) -> bool:
    """Whether ``value`` lies within ``target ± tolerance``, its edges included.

    The edge is forgiven binary floats' last bits: 0.65 - 0.5 is 0.15000000000000002, which
    would fail 0.65 against 0.5 ± 0.15.
    """
    gap = abs(value - target)
    return gap <= tolerance or math.isclose(gap, tolerance, rel_tol=1e-12, abs_tol=0.0)


def plot_behaviour(table: pd.DataFrame, *, title: str | None = None) -> Figure:
    """One row per target: the target ± tolerance as a band, the simulated value on it.

    Each row has its own horizontal scale (targets mix shares and years), so values are drawn
    relative to the target: the band spans -1..1 tolerance and the marker sits at
    ``(value - target) / tolerance``, with the spread as an error bar in the same units. Passing
    targets are green, failing ones red; the real numbers are written beside each row.

    Args:
        table: The result of :func:`check_behaviour`.
        title: Figure title (default: names the run or experiment).
    """
    # matplotlib is imported where a figure is drawn: every floodsim command would pay for it.
    from matplotlib.figure import Figure  # noqa: PLC0415
    from matplotlib.patches import Patch  # noqa: PLC0415

    n = len(table)
    source = table.attrs.get("source")
    title = title or f"Behavioural targets{f' ({Path(source).name})' if source else ''}"
    if table["point"].nunique() > 1:
        fig = _plot_by_target(table)
        fig.suptitle(title, fontweight="bold")
    else:
        fig = Figure(figsize=(10.0, 1.0 + 0.7 * max(n, 1)), layout="constrained")
        ax = fig.subplots()
        draw_target_offsets(ax, table, row_labels(table))
        ax.set_xlabel(_OFFSET_AXIS)
        ax.grid(visible=True, axis="x", alpha=0.3)
        ax.set_title(title, fontweight="bold")
    # Below the axes: inside, it covered the markers of the bottom rows.
    fig.legend(
        handles=[
            Patch(color="0.85", label="target ± tolerance"),
            Patch(color="tab:green", label="pass"),
            Patch(color="tab:red", label="fail"),
        ],
        loc="outside lower center",
        ncols=3,
        fontsize="small",
    )
    return fig


def _plot_by_target(table: pd.DataFrame) -> Figure:
    """An experiment's rows as a panel per target, a row per design point in each.

    One axis of every target x point (54 rows for 6 targets and 9 points) leaves the labels,
    each naming the target and the point's setting, most of the figure's width.
    """
    from matplotlib.figure import Figure  # noqa: PLC0415

    targets = list(dict.fromkeys(table["name"]))
    points = table["point"].nunique()
    fig = Figure(figsize=(12.0, 1.2 + (0.9 + 0.45 * points) * len(targets)), layout="constrained")
    axes = fig.subplots(len(targets), 1, sharex=True, squeeze=False)[:, 0]
    for ax, name in zip(axes, targets, strict=True):
        rows = table[table["name"] == name]
        labels = [
            setting or f"point {point}"
            for point, setting in zip(rows["point"], rows["setting"], strict=True)
        ]
        draw_target_offsets(ax, rows, labels)
        first = rows.iloc[0]
        ax.set_title(
            f"{name}: target {first['target']:.3g} ± {first['tolerance']:.3g}",
            loc="left",
            fontsize="medium",
        )
        ax.grid(visible=True, axis="x", alpha=0.3)
    axes[-1].set_xlabel(_OFFSET_AXIS)
    return fig
