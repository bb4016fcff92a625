"""Fit model parameters to behavioural targets (``floodsim calibrate FILE``).

A calibration file names a run config, the parameters to fit (dotted config keys with a start
value and bounds), a targets file (:mod:`simulation.analysis.behaviour`) and how hard to try::

    name: baseline
    base: ../scenarios/single_flood.yaml       # run config the simulations start from
    set: {households.count: 500, audit.level: minimal}   # fixed overrides (dotted keys)
    targets: ../targets/stylized_facts.yaml    # named targets with values and tolerances
    parameters:                                # dotted config key -> start and bounds
      decision.pmt.renewal_inertia: {start: 1.5, low: 0.0, high: 5.0}
      decision.pmt.beta_tp: {start: 6.0, low: 1.0, high: 10.0}
    replicates: 3                              # runs per evaluation
    seed: 11                                   # root of the replicate seeds
    method: nelder-mead                        # nelder-mead | powell
    max_evaluations: 40                        # distinct parameter vectors simulated, at most
    executor: {kind: process, workers: 2}      # serial | process | dask (as in experiments)

Paths are relative to the calibration file. Every problem (unknown key, a parameter that is not
a real-valued key of the run config, starts the config rejects together, a bound it rejects
with the other parameters at their starts, ``low >= high``, a start outside its bounds, a
missing targets or base file) raises :class:`CalibrationError` with one line naming the file
and the key, before any simulation runs.

Method: simulated method of moments.
    For a parameter vector θ, ``replicates`` simulations run as one batch experiment (its
    ``set`` is the fixed overrides plus θ) through the configured executor. Replicate ``r``
    always has the seed of the ``r``-th child of ``SeedSequence(seed)``, the same at every θ
    (common random numbers), so the objective is a deterministic function of θ and the whole
    calibration is reproducible from ``seed``. Each target's statistic is computed per run and
    averaged over replicates by :func:`~simulation.analysis.behaviour.check_behaviour`, and
    the loss is

        L(θ) = Σ_targets ((mean_sim - target) / tolerance)²

    i.e. squared distance in tolerances (a target of zero tolerance is refused at load). A
    statistic that is not finite (NaN: no jump to recover from, no insured spell, or a share
    over nobody, as when every household has moved away; inf:
    take-up never recovers within the run, or most policies outlast it) contributes
    :data:`NONFINITE_PENALTY` instead, the term of a value 100 tolerances away: worse than any
    plausible finite miss, yet finite so the optimiser can still compare points. A point whose
    values make an invalid run config together is not simulated: every target scores the
    penalty and ``evaluations.csv`` gives the reason. At load, the start point is checked
    whole and each bound with the other parameters at their starts, so the search always has
    a valid point, but a later point that moves several parameters at once (e.g.
    ``government.min_subsidy`` up and ``government.initial_subsidy`` down, past each other)
    may be refused.

    ``scipy.optimize.minimize`` (``method`` nelder-mead or powell, with bounds) searches θ
    scaled to [0, 1] by each parameter's bounds, so one step means the same share of every
    range. Nelder-Mead starts from a simplex of the start point and one vertex a quarter of the
    range away along each parameter. Parameter values are rounded to 6 decimals before
    simulating and evaluations are cached on them, so a point the optimiser revisits (often a
    bound, where it clips) is not simulated again. At most ``max_evaluations`` distinct points
    are simulated; the search stops when the budget is spent or the optimiser converges.

Outputs, in ``out_dir`` (default ``outputs/calibration/<name>``):

``evaluations.csv``
    One row per point in order: ``evaluation``, each parameter, ``loss``, each target's
    simulated value (mean over replicates) and ``invalid``: why the point's config was refused,
    with the point's values (empty for the points simulated).
``best.yaml``
    The best point as dotted-key overrides (``parameters``, usable as a run config's ``--set``
    values or an experiment's ``set``), its ``loss``, which evaluation it was, how many targets
    pass, each target's simulated value, target, tolerance and result, the ``fingerprint``
    ``--resume`` checks and the ``code`` digest it warns of when this code differs.
``calibration.png``
    Loss by evaluation (with the running best) and each target at the best point relative to
    its target ± tolerance.
``evaluations/eNNN/``
    The batch experiment of the best evaluation (``experiment.yaml``, ``experiment.json``,
    ``runs/``); the folders of the other evaluations are deleted as the search goes.

Resuming (``resume=True``, ``floodsim calibrate FILE --resume``):
    An interrupted calibration writes the evaluations that finished. Resumed into the same
    folder, the search starts again from the start point, and each point it asks for that the
    earlier attempt simulated is answered from ``evaluations.csv`` instead of simulated: the
    objective is deterministic, so the search retraces the earlier attempt's steps and then
    goes on where it stopped. The same works for a calibration that spent its budget, resumed
    with a larger ``max_evaluations``. Only ``max_evaluations`` (not below the evaluations
    finished) and the executor may change between attempts: ``best.yaml`` records a
    fingerprint of everything else (the calibration file's other keys, the base config with
    ``set`` applied, the files that config reads and the targets file), and an attempt of
    other settings is refused. A folder without an earlier attempt's ``best.yaml`` starts from
    the beginning, and the runs an unfinished evaluation left there are removed, unless its
    ``evaluations.csv`` holds more than the first evaluation (only a deleted ``best.yaml`` does
    that): those are refused to replace without ``--overwrite``. The summaries
    (``evaluations.csv`` and ``best.yaml``, whose ``stopped`` then reads ``running``) are
    written after every evaluation, so a process killed outright (SIGKILL, the out-of-memory
    killer, a job's hard time limit) loses only the evaluation it was simulating;
    ``calibration.png`` is drawn when the search stops (budget, convergence, Ctrl-C or
    SIGTERM). It can be killed at any moment and still be resumed: the runs of the best
    evaluation the summaries name are kept until they name another, and a summary is replaced
    whole (``evaluations.csv`` first, which ``--resume`` takes the best from).
"""

from __future__ import annotations

import copy
import hashlib
import io
import math
import shutil
import warnings
from collections import deque
from dataclasses import dataclass, replace
from pathlib import Path
from typing import TYPE_CHECKING, Any, Literal, NoReturn

import numpy as np
import orjson
import pandas as pd
import yaml
from pydantic import Field, ValidationError, field_validator, model_validator
from tqdm import tqdm

from simulation.analysis.behaviour import (
    TABLE_COLUMNS,
    BehaviourError,
    ShortWindowWarning,
    Target,
    UnscriptedFloodWarning,
    check_behaviour,
    draw_target_offsets,
    load_targets,
    tenure_audit_problem,
)
from simulation.atomic import replace_file, temporary_name
from simulation.code_digest import code_digest
from simulation.config import (
    CodeDefaultsWarning,
    ConfigError,
    ConfigWarning,
    RunConfig,
    apply_overrides,
    canonical_keys,
    check_file_kind,
    create_output_folder,
    describe_validation_error,
    read_yaml,
    rebase_paths,
    resolve_base,
)
from simulation.config_base import ConfigModel
from simulation.errors import InputError, results_kept_in
from simulation.experiments.batch import run_experiment
from simulation.experiments.design import (
    FOLDER_NAME,
    ExecutorConfig,
    ExperimentConfig,
    override_executor_config,
    plan_runs,
    set_key_holding,
    set_twice,
)
from simulation.folder_lock import hold_folder
from simulation.output_kinds import CALIBRATION, other_kind_error
from simulation.runner import config_hash, input_digests
from simulation.yaml_errors import describe_yaml_error, dump_yaml

if TYPE_CHECKING:
    from collections.abc import Callable

    from matplotlib.figure import Figure

__all__ = [
    "NONFINITE_PENALTY",
    "CalibrationConfig",
    "CalibrationError",
    "CalibrationResult",
    "ParameterSpec",
    "calibrate",
    "load_calibration",
    "plot_calibration",
    "target_loss",
]

#: Loss term of a target whose simulated statistic is NaN or infinite (100 tolerances squared).
NONFINITE_PENALTY = 1.0e4
#: Decimals parameter values are rounded to before simulating (and the cache key).
_DECIMALS = 6
#: The summaries a calibration writes at the top of its folder (beside ``evaluations/``).
_SUMMARIES = ("evaluations.csv", "best.yaml", "calibration.png")
#: Nelder-Mead's initial simplex: each extra vertex moves one parameter this share of its range.
_SIMPLEX_STEP = 0.25


class CalibrationError(InputError):
    """A bad calibration file or a calibration that cannot proceed (one line naming the file)."""


class _BudgetSpentError(Exception):
    """Raised inside the objective to stop the optimiser once max_evaluations are simulated."""


class ParameterSpec(ConfigModel):
    """One fitted parameter: its start value and bounds (an entry of ``parameters:``)."""

    start: float = Field(description="Where the search starts.")
    low: float = Field(description="Lower bound (inclusive).")
    high: float = Field(description="Upper bound (inclusive); must exceed low.")

    @model_validator(mode="after")
    def _ordered(self) -> ParameterSpec:
        if not self.low < self.high:
            msg = f"low ({self.low}) must be below high ({self.high})"
            raise ValueError(msg)
        if not self.low <= self.start <= self.high:
            msg = f"start ({self.start}) is outside [low, high] = [{self.low}, {self.high}]"
            raise ValueError(msg)
        return self


class CalibrationConfig(ConfigModel):
    """A whole calibration file (see the module docstring)."""

    name: str = Field(
        pattern=FOLDER_NAME,
        description="Calibration name: the default output folder is outputs/calibration/<name>.",
    )
    base: str = Field(description="Run config the simulations start from (relative path).")
    set: dict[str, Any] = Field(
        default_factory=dict, description="Fixed overrides, dotted key -> value."
    )
    targets: str = Field(description="Targets file (relative path).")
    parameters: dict[str, ParameterSpec] = Field(
        min_length=1, description="Dotted config key -> {start, low, high}."
    )
    replicates: int = Field(1, ge=1, le=1000, description="Runs per evaluation.")
    seed: int = Field(0, ge=0, lt=2**64, description="Root seed of the replicate seeds.")
    method: Literal["nelder-mead", "powell"] = Field(
        "nelder-mead", description="scipy.optimize.minimize method (bounded)."
    )
    max_evaluations: int = Field(
        40, ge=1, le=100_000, description="Distinct parameter vectors simulated, at most."
    )
    executor: ExecutorConfig = Field(
        default_factory=ExecutorConfig,
        description="Where each evaluation's runs execute: serial, a process pool or Dask.",
    )

    @field_validator("set", mode="after")
    @classmethod
    def _set_keys(cls, fixed: dict[str, Any]) -> dict[str, Any]:
        return canonical_keys(fixed)  # hazard.events.02 is hazard.events.2

    @field_validator("parameters", mode="after")
    @classmethod
    def _parameter_keys(cls, parameters: dict[str, ParameterSpec]) -> dict[str, ParameterSpec]:
        return canonical_keys(parameters)


@dataclass(frozen=True, slots=True)
class CalibrationResult:
    """A finished calibration.

    Attributes:
        out_dir: The output folder.
        best: Best parameter values, dotted key -> value.
        loss: Loss at ``best``.
        table: The behaviour table (:func:`check_behaviour`) at ``best``.
        evaluations: The rows of ``evaluations.csv``.
        experiment_dir: The kept batch experiment of the best evaluation.
        message: Why the search stopped.
        resumed: How many of the evaluations an earlier attempt had simulated (``resume``).
    """

    out_dir: Path
    best: dict[str, float]
    loss: float
    table: pd.DataFrame
    evaluations: pd.DataFrame
    experiment_dir: Path
    message: str
    resumed: int = 0


# ------------------------------------------------------------------------------ loading
def _yaml_value(value: Any) -> str:
    return dump_yaml(value, default_flow_style=True).strip().removesuffix("...").strip()


def _lookup(data: dict[str, Any], key: str) -> Any:
    node: Any = data
    for part in key.split("."):
        if not isinstance(node, dict) or part not in node:
            return None
        node = node[part]
    return node


def _point_config(base: dict[str, Any], values: dict[str, float], origin: str) -> RunConfig:
    """The run config of ``base`` with the parameters at ``values`` (raises ValidationError)."""
    overrides = [f"{key}={_yaml_value(value)}" for key, value in values.items()]
    return RunConfig.model_validate(apply_overrides(base, overrides, origin, where="parameters."))


def _refusal(err: ValidationError, origin: str) -> str:
    """The run config's first objection, without the file name (for use inside a message)."""
    return describe_validation_error(err, origin).removeprefix(f"{origin}: ")


def _refused_integer(err: ValidationError, key: str) -> bool:
    """Whether ``err`` is strict validation refusing a float (even 100.0) for integer ``key``."""
    first = err.errors()[0]
    integer = first["type"] == "int_type" and isinstance(first.get("input"), float)
    return integer and ".".join(map(str, first["loc"])) == key


def _require_real(config: RunConfig, key: str, origin: str) -> None:
    # Only real-valued keys can be searched continuously: an integer key (households.count,
    # seed) validates at its bounds but would reject the fractional values in between.
    if not isinstance(_lookup(config.to_yaml_dict(), key), float):
        _not_real_valued(key, origin)


def _check_parameters(
    base: dict[str, Any], parameters: dict[str, ParameterSpec], origin: str
) -> None:
    """The start point, and each bound with the other parameters at their starts, must be valid.

    The search begins at the start point, and Nelder-Mead's first simplex moves one parameter
    at a time from it, so these are the points a file must make valid. Checking a bound
    against the base config's values instead would refuse a bound that only conflicts with a
    value the search never pairs it with, and let through starts that conflict with each
    other. Points further on that move several parameters may still be refused together; they
    score the penalty (see the module docstring).
    """
    starts = {key: spec.start for key, spec in parameters.items()}
    try:
        config = _point_config(base, starts, origin)
    except ValidationError as err:
        _refuse_start(err, starts, origin)
    for key in parameters:
        _require_real(config, key, origin)
    others = " with the other parameters at their starts" if len(parameters) > 1 else ""
    for key, spec in parameters.items():
        for field in ("low", "high"):
            try:
                config = _point_config(base, {**starts, key: getattr(spec, field)}, origin)
            except ValidationError as err:
                if _refused_integer(err, key):
                    _not_real_valued(key, origin)
                msg = (
                    f"{origin}: parameters.{key}.{field}: rejected by the run config{others} "
                    f"({_refusal(err, origin)})"
                )
                raise CalibrationError(msg) from None
            _require_real(config, key, origin)


def _refuse_start(err: ValidationError, starts: dict[str, float], origin: str) -> NoReturn:
    """Raise for a refused start point, naming the parameter(s) the refusal is about.

    The refusal's location picks them: the key itself (a value out of range, an unknown key),
    or the fitted keys inside the section whose check failed (``government`` for a
    ``min_subsidy`` above ``initial_subsidy``); all of them if it names none.
    """
    loc = ".".join(map(str, err.errors()[0]["loc"]))
    named = [key for key in starts if loc == key or loc.startswith(f"{key}.")]
    if not named:
        named = [key for key in starts if not loc or key.startswith(f"{loc}.")] or list(starts)
    if len(named) == 1:
        key = named[0]
        if _refused_integer(err, key):
            _not_real_valued(key, origin)
        msg = f"{origin}: parameters.{key}: rejected by the run config ({_refusal(err, origin)})"
    else:
        values = ", ".join(f"{key}={_yaml_value(starts[key])}" for key in named)
        msg = (
            f"{origin}: parameters: the starts {values} are rejected together by the run "
            f"config ({_refusal(err, origin)})"
        )
    raise CalibrationError(msg) from None


def _not_real_valued(key: str, origin: str) -> NoReturn:
    msg = f"{origin}: parameters.{key}: not a real-valued key of the run config"
    raise CalibrationError(msg)


def load_calibration(path: str | Path) -> tuple[CalibrationConfig, Path]:
    """Read and validate a calibration file (and the base config and targets it names).

    Returns:
        The calibration and the folder of the file.

    Raises:
        CalibrationError: One line naming the file, the key and the problem.
    """
    path = Path(path)
    origin = str(path)
    try:
        data = read_yaml(path)
        check_file_kind(data, "calibration", origin)
    except ConfigError as err:
        raise CalibrationError(str(err)) from None
    try:
        calibration = CalibrationConfig.model_validate(data)
    except ValidationError as err:
        raise CalibrationError(describe_validation_error(err, origin)) from None
    if "seed" in calibration.set:
        msg = f"{origin}: set.seed: replicate seeds come from the calibration's `seed`"
        raise CalibrationError(msg)
    if "name" in calibration.set:
        msg = f"{origin}: set.name: the runs take the calibration's `name`"
        raise CalibrationError(msg)
    if (twice := set_twice(calibration.set)) is not None:
        msg = f"{origin}: set.{twice[0]}: also given by {twice[1]}; give it once"
        raise CalibrationError(msg)
    for key in calibration.parameters:
        if (fixed := set_key_holding(calibration.set, key)) is not None:
            what = "also a fitted parameter" if fixed == key else f"holds {key}, a fitted parameter"
            msg = f"{origin}: set.{fixed}: {what}; fix it or fit it, not both"
            raise CalibrationError(msg)
    folder = path.resolve().parent
    calibration = calibration.model_copy(update={"set": _absolute_paths(calibration.set, folder)})
    targets = _load_targets(calibration, folder, origin)
    names = {t.name for t in targets}
    clash = sorted(names & ({"evaluation", "loss"} | set(calibration.parameters)))
    if clash:
        msg = f"{origin}: targets: target name {clash[0]!r} clashes with an evaluations column"
        raise CalibrationError(msg)
    base, base_config = _base_config(calibration, folder, origin)
    _check_parameters(base, calibration.parameters, origin)
    _check_target_years(targets, base_config.years, origin)
    if any(t.statistic == "median_policy_tenure" for t in targets):
        _check_tenure_level(calibration, base_config, origin)
    return calibration, folder


def _check_tenure_level(
    calibration: CalibrationConfig, base_config: RunConfig, origin: str
) -> None:
    """Refuse an audit level whose runs cannot give ``median_policy_tenure``.

    Raises:
        CalibrationError: Naming ``set`` (the level, or a share of policies at the start), or
            the fitted parameter that may give households policies at the start.
    """
    level, shares = base_config.audit.level, base_config.households.initial_insured_share
    problem = tenure_audit_problem(level, shares)
    where = "set"
    for key, spec in calibration.parameters.items():  # a share the search may raise above 0
        if problem is None and key.startswith("households.initial_insured_share"):
            problem = tenure_audit_problem(level, {key: max(spec.start, spec.high)})
            where = f"parameters: {key}"
    if problem is not None:
        msg = f"{origin}: {where}: target median_policy_tenure {problem}"
        raise CalibrationError(msg)


def _absolute_paths(overrides: dict[str, Any], folder: Path) -> dict[str, Any]:
    """``set:`` with the file paths it gives made absolute against the calibration's folder.

    Each evaluation runs as an experiment file of its own under the output folder, where a
    relative path would no longer find its file.
    """
    rebased = {}
    for key, value in overrides.items():
        *sections, last = key.split(".")
        nested: dict[str, Any] = {}
        inner = nested
        for part in sections:
            inner = inner.setdefault(part, {})
        inner[last] = copy.deepcopy(value)
        rebase_paths(nested, folder)  # knows which keys are paths
        rebased[key] = _lookup(nested, key)
    return rebased


def _load_targets(calibration: CalibrationConfig, folder: Path, origin: str) -> list[Target]:
    targets_path = (folder / calibration.targets).resolve()
    if not targets_path.is_file():
        msg = f"{origin}: targets: {targets_path}: file not found"
        raise CalibrationError(msg)
    try:
        targets = load_targets(targets_path)
    except BehaviourError as err:
        msg = f"{origin}: targets: {err}"
        raise CalibrationError(msg) from None
    for target in targets:
        if target.tolerance <= 0:
            # The loss counts a miss in tolerances: a target to be met exactly would have no
            # scale, and any scale given it instead would weigh it against the others unsaid.
            msg = (
                f"{origin}: targets: target {target.name!r}: tolerance {target.tolerance:g} "
                "cannot scale the calibration's loss (a miss is counted in tolerances): give "
                "the distance the fit should aim within"
            )
            raise CalibrationError(msg)
    return targets


def _check_target_years(targets: list[Target], years: int, origin: str) -> None:
    """A target must read at least one simulated year: past the run's end it scores NaN.

    A ``years`` range may run past the end (the mean is over the years simulated), which is
    warned about here, once, rather than by every evaluation; the year an event statistic
    needs after its flood may not.
    """
    for target in targets:
        last = None
        if target.years is not None:
            last = target.years[0]
            if target.years[1] > years >= last:
                where = f"{origin}: targets: target {target.name!r}"
                warnings.warn(
                    ShortWindowWarning(where, target.years, years, "the calibration's runs end"),
                    stacklevel=3,
                )
        elif target.flood_year is not None:
            # The year after the flood (the jump) or `years_since` after it must be simulated.
            after = target.years_since if target.statistic == "event_change_at" else 1
            last = target.flood_year + (after or 0)
        if last is not None and last > years:
            msg = (
                f"{origin}: targets: target {target.name!r} needs year {last}, but the "
                f"calibration's runs last {years} years"
            )
            raise CalibrationError(msg)


def _base_config(
    calibration: CalibrationConfig, folder: Path, origin: str
) -> tuple[dict[str, Any], RunConfig]:
    """The base run config with ``set`` applied: as plain data, and validated."""
    base_path = (folder / calibration.base).resolve()
    if not base_path.is_file():
        msg = f"{origin}: base: {base_path}: file not found"
        raise CalibrationError(msg)
    try:
        base = resolve_base(base_path, read_yaml(base_path), (base_path,))
        rebase_paths(base, base_path.parent)
        fixed = [f"{key}={_yaml_value(value)}" for key, value in calibration.set.items()]
        base = apply_overrides(base, fixed, origin, where="set.")
    except ConfigError as err:
        raise CalibrationError(str(err)) from None
    try:
        config = RunConfig.model_validate(base)
    except ValidationError as err:
        detail = describe_validation_error(err, origin).removeprefix(f"{origin}: ")
        msg = f"{origin}: set: the base config with these overrides is invalid ({detail})"
        raise CalibrationError(msg) from None
    return base, config


# ------------------------------------------------------------------------------ objective
def target_loss(value: float, target: float, tolerance: float) -> float:
    """One target's loss term: ``((value - target) / tolerance)²`` or the non-finite penalty."""
    if not math.isfinite(value):
        return NONFINITE_PENALTY
    scale = tolerance if tolerance > 0 else 1.0
    return ((value - target) / scale) ** 2


@dataclass(slots=True)
class _Evaluation:
    index: int
    params: dict[str, float]
    loss: float
    table: pd.DataFrame
    folder: Path
    invalid: str = ""  # why the point's run config was refused (not simulated)


class _Search:
    """Simulates parameter vectors, caches them, keeps the best folder, counts the budget."""

    def __init__(
        self,
        calibration: CalibrationConfig,
        base_path: Path,
        targets_path: Path,
        out: Path,
        run: Callable[[Path, Path], None],
        base: dict[str, Any],
        origin: str,
    ) -> None:
        self.calibration = calibration
        self.base_path = base_path
        self.base = base  # the base config with `set` applied, as plain data
        self.origin = origin
        self.targets_path = targets_path
        self.out = out
        self.run = run
        self.keys = list(calibration.parameters)
        self.targets = load_targets(targets_path)
        specs = calibration.parameters.values()
        self.low = np.array([s.low for s in specs], float)
        self.high = np.array([s.high for s in specs], float)
        self.cache: dict[tuple[float, ...], float] = {}
        self.history: list[_Evaluation] = []
        # An earlier attempt's evaluations, in order, answered instead of simulated (resume).
        self.replay: deque[_Evaluation] = deque()
        self.best: _Evaluation | None = None
        # The best evaluation as the summaries on disk have it. Its runs stay until they name
        # another: a process killed before that leaves them for --resume to read.
        self.recorded: Path | None = None
        self.bar: tqdm | None = None
        # Writes the summaries after each evaluation simulated (set by _search).
        self.record: Callable[[], object] | None = None

    def params(self, scaled: np.ndarray) -> dict[str, float]:
        values = self.low + np.clip(scaled, 0.0, 1.0) * (self.high - self.low)
        return {key: round(float(v), _DECIMALS) for key, v in zip(self.keys, values, strict=True)}

    def __call__(self, scaled: np.ndarray) -> float:
        params = self.params(np.asarray(scaled, float))
        key = tuple(params.values())
        if key in self.cache:
            return self.cache[key]
        if len(self.history) >= self.calibration.max_evaluations:
            raise _BudgetSpentError
        replayed = bool(self.replay)
        if replayed:
            evaluation = self.replay.popleft()
            if evaluation.params != params:
                msg = (
                    f"{self.origin}: --resume: the search does not retrace the earlier attempt "
                    f"in {self.out}: it asks for {_describe(params)} where evaluation "
                    f"{evaluation.index} was {_describe(evaluation.params)}; start again "
                    "without --resume"
                )
                raise CalibrationError(msg)
        else:
            evaluation = self.evaluate(len(self.history), params)
        self.cache[key] = evaluation.loss
        self.history.append(evaluation)
        if self.best is None or evaluation.loss < self.best.loss:
            if self.best is not None and self.best.folder != self.recorded:
                shutil.rmtree(self.best.folder, ignore_errors=True)
            self.best = evaluation
        else:
            shutil.rmtree(evaluation.folder, ignore_errors=True)
        # A replayed evaluation is in the earlier attempt's files already, which say more.
        if self.record is not None and not replayed:
            self.record()
        if self.bar is not None:
            self.bar.update()
            self.bar.set_postfix(best=f"{self.best.loss:.4g}", last=f"{evaluation.loss:.4g}")
        return evaluation.loss

    def _check_summary(self, summary: object, fingerprint: str) -> None:
        """Refuse an earlier attempt's ``best.yaml`` of other settings; warn of other code.

        Raises:
            CalibrationError: When it holds no summary or one of other settings.
        """
        if not isinstance(summary, dict):
            msg = (
                f"{self.origin}: --resume: {self.out / 'best.yaml'} holds no calibration "
                "summary (it may have been cut short); start again without --resume"
            )
            raise CalibrationError(msg)
        if summary.get("fingerprint") != fingerprint:
            msg = (
                f"{self.origin}: --resume: {self.out} holds a calibration of other settings "
                "(the calibration file, its base config, the files that reads or the targets "
                "changed; only max_evaluations and the executor may); start again without "
                "--resume or choose another --out"
            )
            raise CalibrationError(msg)
        if summary.get("code") not in (None, code_digest()):  # None: written before the key
            warnings.warn(
                f"{self.out}: --resume answers the earlier attempt's points from losses that "
                f"other floodsim code computed (code {str(summary['code'])[:12]} then, "
                f"{code_digest()[:12]} now): a changed model or statistic may score them "
                "otherwise (start again without --resume to score every point with this code)",
                ConfigWarning,
                stacklevel=3,
            )

    def resume_from(self, fingerprint: str) -> int:
        """Queue the earlier attempt's evaluations in ``self.out`` for replay; return how many.

        Removes the folders of evaluations that did not finish, or did but were not the best
        (all but the recorded best's).

        Raises:
            CalibrationError: When the earlier attempt had other settings (``fingerprint``) or
                finished more evaluations than ``max_evaluations``, or its best evaluation's
                folder or ``evaluations.csv`` is missing or damaged.
        """
        try:
            summary = yaml.safe_load((self.out / "best.yaml").read_text(encoding="utf-8"))
        except FileNotFoundError:
            if _rows(self.out / "evaluations.csv") > 1:
                # best.yaml follows evaluations.csv after every evaluation: only the first can
                # be without it (killed between the two). Without it nothing says the others
                # are of these settings, and starting again would replace them unasked.
                msg = (
                    f"{self.origin}: --resume: {self.out / 'best.yaml'} is missing, so the "
                    f"evaluations in {self.out / 'evaluations.csv'} cannot be checked against "
                    "this calibration; start again with --overwrite (or put best.yaml back)"
                )
                raise CalibrationError(msg) from None
            # Interrupted before its first evaluation finished: nothing to keep. The runs that
            # evaluation left would be refused as another experiment's results when it is
            # simulated again, and scored as a failed point.
            _clear_results(self.out)
            return 0
        except (OSError, yaml.YAMLError) as err:
            why = describe_yaml_error(err) if isinstance(err, yaml.YAMLError) else err
            msg = f"{self.origin}: --resume: {self.out / 'best.yaml'} cannot be read: {why}"
            raise CalibrationError(msg) from None
        self._check_summary(summary, fingerprint)
        where = self.out / "evaluations.csv"
        evaluations = self._read_evaluations(where)
        for position, evaluation in enumerate(evaluations):
            if evaluation.index != position:
                indices = [e.index for e in evaluations]
                problem = (
                    f"evaluation {evaluation.index} appears twice"
                    if indices.count(evaluation.index) > 1
                    else f"evaluation {position} is missing"
                    if position not in indices
                    else "its rows are out of order"
                )
                msg = f"{self.origin}: --resume: {where}: {problem}"
                raise CalibrationError(msg)
        counted = summary.get("evaluations")
        if isinstance(counted, int) and len(evaluations) < counted:
            # Written before best.yaml after every evaluation, evaluations.csv is never
            # behind it: rows were removed since.
            msg = (
                f"{self.origin}: --resume: {where} holds {len(evaluations)} evaluations but "
                f"best.yaml counts {counted}: rows were removed since it was written"
            )
            raise CalibrationError(msg)
        budget = self.calibration.max_evaluations
        if len(evaluations) > budget:
            # The search would stop before reaching the recorded best, whose runs are the
            # only ones kept.
            msg = (
                f"{self.origin}: --resume: max_evaluations {budget} is below the "
                f"{len(evaluations)} evaluations the earlier attempt in {self.out} finished"
            )
            raise CalibrationError(msg)
        if not evaluations:
            msg = f"{self.origin}: --resume: {where} holds no evaluations"
            raise CalibrationError(msg)
        # The best is read from evaluations.csv, not best.yaml: a process killed between
        # writing the two leaves the later word in evaluations.csv. Its first lowest loss is
        # the best the search itself kept, and its runs are still there (see `recorded`).
        best = min(evaluations, key=lambda e: e.loss)
        for stale in (self.out / "evaluations").glob("e*"):
            if stale != best.folder:
                shutil.rmtree(stale, ignore_errors=True)
        if not best.invalid:
            evaluations[best.index] = self._rescored(best)
        self.recorded = best.folder
        self.replay.extend(evaluations)
        return len(evaluations)

    def _read_evaluations(self, where: Path) -> list[_Evaluation]:
        """The rows of an earlier attempt's ``evaluations.csv``, each checked whole.

        Raises:
            CalibrationError: For a file that cannot be read, lacks a column, ends inside a row
                (it is written whole, ending with a newline) or records a loss that is not a
                finite number (every loss, a penalty's too, is one).
        """
        try:
            # As text, parsed by float(): the losses and parameter values must come back to
            # the same floats, which pandas' own float parsing does not promise.
            text = where.read_bytes()
            table = pd.read_csv(io.BytesIO(text), dtype=str, keep_default_na=False)
        except (OSError, ValueError, pd.errors.ParserError) as err:
            msg = f"{self.origin}: --resume: {where} cannot be read: {err}"
            raise CalibrationError(msg) from None
        fail = f"{self.origin}: --resume: {where}"
        missing = [c for c in ("evaluation", *self.keys, "loss", "invalid") if c not in table]
        if missing:
            msg = f"{fail}: has no column {', '.join(map(repr, missing))}"
            raise CalibrationError(msg)
        if text and not text.endswith(b"\n"):
            msg = f"{fail}: its last row is cut short (the file was cut after it was written)"
            raise CalibrationError(msg)
        names = [str(name) for name in table.columns[len(self.keys) + 2 : -1]]
        evaluations = []
        for number, row in enumerate(table.to_dict(orient="records"), start=2):
            try:
                evaluation = self._recorded(row, names)
            except ValueError as err:
                msg = f"{fail}: line {number} cannot be read: {err}"
                raise CalibrationError(msg) from None
            if not math.isfinite(evaluation.loss):
                msg = f"{fail}: line {number}: loss {row['loss']!r} is not a finite number"
                raise CalibrationError(msg)
            evaluations.append(evaluation)
        return evaluations

    def _recorded(self, row: dict[str, Any], names: list[str]) -> _Evaluation:
        """One row of ``evaluations.csv`` as an evaluation (its table: each target's value)."""
        index = int(row["evaluation"])
        invalid = str(row["invalid"])
        folder = self.out / "evaluations" / f"e{index:03d}"
        params = {key: float(row[key]) for key in self.keys}
        if invalid:
            return self._invalid(index, params, folder, invalid)
        values = [float(row[name]) if row[name] != "" else math.nan for name in names]
        table = pd.DataFrame({"name": names, "value": values})
        return _Evaluation(index, params, float(row["loss"]), table, folder)

    def _rescored(self, evaluation: _Evaluation) -> _Evaluation:
        """The recorded best with its whole behaviour table, read again from its runs."""
        try:
            with warnings.catch_warnings():
                warnings.simplefilter("ignore", ShortWindowWarning)  # said once, at setup
                table = check_behaviour(evaluation.folder, self.targets_path, strict=True)
        except (BehaviourError, ConfigError, OSError) as err:
            msg = (
                f"{self.origin}: --resume: the best evaluation's runs in {evaluation.folder} "
                f"cannot be read ({err}); start again without --resume"
            )
            raise CalibrationError(msg) from None
        return replace(evaluation, table=table)

    def evaluate(self, index: int, params: dict[str, float]) -> _Evaluation:
        """Run the replicates at ``params`` as a batch experiment and score the targets."""
        c = self.calibration
        folder = self.out / "evaluations" / f"e{index:03d}"
        # Checked here rather than left to the experiment: its error would name an experiment
        # file that is deleted with the point's folder and a design point the calibration
        # does not have.
        try:
            _point_config(self.base, params, self.origin)
        except ValidationError as err:
            reason = f"{_refusal(err, self.origin)} (at {_describe(params)})"
            return self._invalid(index, params, folder, reason)
        folder.mkdir(parents=True, exist_ok=True)
        experiment = {
            "name": c.name,
            "base": str(self.base_path),
            "set": {**c.set, **params},
            "replicates": c.replicates,
            "seed": c.seed,
            "executor": c.executor.model_dump(mode="json"),
        }
        path = folder / "experiment.yaml"
        path.write_text(dump_yaml(experiment, sort_keys=False), encoding="utf-8")
        try:
            with warnings.catch_warnings():
                # Said once, at setup (_check_files), not under each evaluation's own file.
                warnings.simplefilter("ignore", CodeDefaultsWarning)
                self.run(path, folder)
        except ConfigError as err:  # refused before any run started
            # Without the experiment file (deleted with the folder) and the design point label.
            reason = str(err).removeprefix(f"{path}: ").removesuffix(" [design point 0: base]")
            return self._invalid(index, params, folder, f"{reason} (at {_describe(params)})")
        try:
            with warnings.catch_warnings():
                warnings.simplefilter("ignore", ShortWindowWarning)  # said once, at setup
                if index > 0:  # said at the first evaluation
                    warnings.simplefilter("ignore", UnscriptedFloodWarning)
                table = check_behaviour(folder, self.targets_path, strict=True)
        except BehaviourError as err:
            msg = f"{c.name}: evaluation {index} ({_describe(params)}): {err}"
            raise CalibrationError(msg) from None
        loss = float(
            sum(
                target_loss(float(r.value), float(r.target), float(r.tolerance))
                for r in table.itertuples(index=False)
            )
        )
        return _Evaluation(index, params, loss, table, folder)

    def _invalid(
        self, index: int, params: dict[str, float], folder: Path, reason: str
    ) -> _Evaluation:
        """A point whose run config is invalid: every target scores the non-finite penalty."""
        rows = [
            {
                "name": t.name,
                "point": 0,
                "setting": "",
                "value": math.nan,
                "spread": math.nan,
                "min": math.nan,
                "max": math.nan,
                "n_runs": 0,
                "n_infinite": 0,
                "target": t.value,
                "tolerance": t.tolerance,
                "passed": False,
                "statistic": t.statistic,
                "description": t.description,
            }
            for t in self.targets
        ]
        table = pd.DataFrame(rows, columns=list(TABLE_COLUMNS))
        loss = NONFINITE_PENALTY * len(rows)
        return _Evaluation(index, params, loss, table, folder, invalid=reason)


def _describe(params: dict[str, float]) -> str:
    return ", ".join(f"{k}={v:g}" for k, v in params.items())


def _optimise(search: _Search, calibration: CalibrationConfig) -> str:
    """Run scipy's minimiser on the scaled parameters; return why it stopped."""
    # Imported on use: scipy.optimize takes a while to import and only calibration needs it.
    from scipy.optimize import minimize  # noqa: PLC0415

    specs = list(calibration.parameters.values())
    x0 = np.array([(s.start - s.low) / (s.high - s.low) for s in specs], float)
    n = len(x0)
    options: dict[str, Any] = {"maxfev": calibration.max_evaluations, "xatol": 1e-4}
    if calibration.method == "nelder-mead":
        simplex = [x0]
        for i in range(n):
            vertex = x0.copy()
            # Step towards the interior so that no vertex starts clipped onto the start point.
            vertex[i] += _SIMPLEX_STEP if x0[i] + _SIMPLEX_STEP <= 1.0 else -_SIMPLEX_STEP
            simplex.append(vertex)
        options["initial_simplex"] = np.array(simplex)
    else:
        options = {"maxfev": calibration.max_evaluations, "xtol": 1e-4}
    try:
        result = minimize(
            search,
            x0,
            method="Nelder-Mead" if calibration.method == "nelder-mead" else "Powell",
            bounds=[(0.0, 1.0)] * n,
            options=options,
        )
    except _BudgetSpentError:
        return f"stopped after max_evaluations ({calibration.max_evaluations}) simulated points"
    return str(result.message)


# ------------------------------------------------------------------------------ outputs
def plot_calibration(
    evaluations: pd.DataFrame, table: pd.DataFrame, *, title: str | None = None
) -> Figure:
    """Loss by evaluation (and the running best), and each target at the best point.

    The right panel draws every target relative to itself, as ``check-behaviour``'s figure
    does (:func:`~simulation.analysis.behaviour.draw_target_offsets`).

    Args:
        evaluations: The rows of ``evaluations.csv``.
        table: The behaviour table at the best point.
        title: Figure title.
    """
    # matplotlib is imported where a figure is drawn: every floodsim command would pay for it.
    from matplotlib.figure import Figure  # noqa: PLC0415
    from matplotlib.ticker import MaxNLocator  # noqa: PLC0415

    n = len(table)
    fig = Figure(figsize=(13.0, max(3.5, 1.2 + 0.6 * n)), layout="constrained")
    left, right = fig.subplots(1, 2, width_ratios=[1.0, 1.4])
    losses = evaluations["loss"].to_numpy(float)
    index = evaluations["evaluation"].to_numpy(int)
    left.plot(index, losses, "o", color="tab:blue", ms=4, label="evaluation")
    left.step(index, np.minimum.accumulate(losses), where="post", color="black", label="best")
    # Log only when the losses span more than a decade: within one, a log axis labels few
    # ticks, some as 8x10^0.
    if len(losses) and losses.min() > 0 and losses.max() > 10 * losses.min():
        left.set_yscale("log")
    left.xaxis.set_major_locator(MaxNLocator(integer=True))  # evaluations are counted
    left.set_xlabel("evaluation")
    left.set_ylabel("loss  Σ ((simulated - target) / tolerance)²")
    left.grid(visible=True, alpha=0.3)
    left.legend(fontsize="small")
    draw_target_offsets(right, table, list(table["name"]), spread=False, verdict=False)
    right.set_xlabel(
        "(simulated - target) / tolerance at the best point   (grey: within tolerance)"
    )
    right.grid(visible=True, axis="x", alpha=0.3)
    fig.suptitle(title or "Calibration", fontweight="bold")
    return fig


def _write_outputs(
    out: Path,
    calibration: CalibrationConfig,
    search: _Search,
    best: _Evaluation,
    message: str,
    origin: str,
    fingerprint: str,
    *,
    draw: bool = True,
) -> pd.DataFrame:
    """Write ``evaluations.csv`` and ``best.yaml`` (and ``calibration.png`` with ``draw``)."""
    keys = search.keys
    names = list(best.table["name"])
    rows = []
    for e in search.history:
        values = dict(zip(e.table["name"], e.table["value"].astype(float), strict=True))
        rows.append(
            {
                "evaluation": e.index,
                **e.params,
                "loss": e.loss,
                **{name: values.get(name, math.nan) for name in names},
                "invalid": e.invalid,
            }
        )
    evaluations = pd.DataFrame(rows, columns=["evaluation", *keys, "loss", *names, "invalid"])
    # Each summary is replaced whole: Ctrl-C or a kill while they are written leaves the
    # earlier one (or none), never a file cut short that --resume could not read.
    replace_file(out / "evaluations.csv", evaluations.to_csv(index=False).encode("utf-8"))
    table = best.table
    if draw:
        # Before best.yaml: interrupted while drawing, the summary still says the search was
        # running (as written after the last evaluation), not that it stopped with no figure.
        figure = plot_calibration(
            evaluations,
            table,
            title=f"Calibration {calibration.name}: best loss {best.loss:.4g} "
            f"(evaluation {best.index} of {len(search.history)})",
        )
        figure.savefig(out / "calibration.png", dpi=110)
    summary = {
        "calibration": origin,
        "method": calibration.method,
        "parameters": dict(best.params),
        "loss": best.loss,
        "evaluation": best.index,
        "evaluations": len(search.history),
        "stopped": message,
        "targets_passed": int(table["passed"].sum()),
        "targets_total": len(table),
        "targets": {
            str(r.name): {
                "simulated": float(r.value),
                "target": float(r.target),
                "tolerance": float(r.tolerance),
                "passed": bool(r.passed),
            }
            for r in table.itertuples(index=False)
        },
        "experiment": best.folder.relative_to(out).as_posix(),
        "fingerprint": fingerprint,  # what --resume checks (see the module docstring)
        "code": code_digest(),  # the floodsim code of the losses (--resume warns of another)
    }
    text = dump_yaml(summary, sort_keys=False, allow_unicode=True)
    replace_file(out / "best.yaml", text.encode("utf-8"))
    if search.recorded is not None and search.recorded != best.folder:
        # The summaries name the new best now: the runs of the one they named before can go.
        shutil.rmtree(search.recorded, ignore_errors=True)
    search.recorded = best.folder
    return evaluations


def _check_output_folder(out: Path, *, resume: bool, overwrite: bool) -> None:
    """Refuse to write a calibration where results it should not replace or mix with are.

    Raises:
        CalibrationError: One line naming the folder: for a run directory or a batch
            experiment's folder (whatever the flags), or for an earlier calibration's results
            without ``resume`` or ``overwrite``: replacing them unasked would lose its
            evaluations, which took hours.
        ValueError: For ``resume`` and ``overwrite`` together.
    """
    if resume and overwrite:
        msg = "resume and overwrite exclude each other"
        raise ValueError(msg)
    if error := other_kind_error(out, CALIBRATION):
        raise CalibrationError(error)
    for name in _SUMMARIES:
        if (out / name).exists() and not (out / name).is_file():
            # Found only when written, after the first evaluation; and --resume would meet it
            # again every time.
            msg = f"{out / name}: a folder where the calibration writes a file: remove it"
            raise CalibrationError(msg)
    if resume or overwrite:
        return
    held = [name for name in (*_SUMMARIES, "evaluations") if (out / name).exists()]
    if held:
        msg = (
            f"{out}: holds the results of a calibration ({', '.join(held)}); add --resume to "
            "continue it, or --overwrite to replace them"
        )
        raise CalibrationError(msg)


def _rows(path: Path) -> int:
    """The data rows of a CSV file (0 when it is missing)."""
    try:
        with path.open("rb") as file:
            return max(sum(1 for _ in file) - 1, 0)
    except FileNotFoundError:
        return 0


def _clear_results(out: Path) -> None:
    """Remove a calibration's results from ``out``: its evaluations' runs and its summaries."""
    shutil.rmtree(out / "evaluations", ignore_errors=True)
    for name in _SUMMARIES:
        (out / name).unlink(missing_ok=True)
        temporary_name(out / name).unlink(missing_ok=True)  # left by an interrupted write


# ------------------------------------------------------------------------------ entry point
def calibrate(
    path: str | Path,
    out_dir: str | Path | None = None,
    *,
    executor: str | None = None,
    workers: int | None = None,
    resume: bool = False,
    overwrite: bool = False,
    progress: bool | None = None,
) -> CalibrationResult:
    """Fit the parameters of the calibration file ``path`` (see the module docstring).

    Args:
        path: The calibration file.
        out_dir: Output folder; ``outputs/calibration/<name>`` by default. One that holds
            a calibration's results needs ``resume`` or ``overwrite``; one that holds a run or
            a batch experiment is refused.
        executor: Override the file's executor kind (serial, process, dask).
        workers: Override the number of workers.
        resume: Continue the earlier attempt in ``out_dir``: the evaluations it finished are
            read back instead of simulated (see "Resuming" in the module docstring).
        overwrite: Remove the calibration results ``out_dir`` holds first.
        progress: Show a progress bar over evaluations (``None``: only on a terminal).

    Returns:
        The best parameters, their loss and behaviour table, every evaluation and the folder.

    Raises:
        CalibrationError: For a bad calibration file (before anything runs), an output
            folder that holds results it may not replace (before anything runs), an earlier
            attempt of other settings to resume, or a run that fails or lacks what a target
            needs.
        ValueError: For ``resume`` and ``overwrite`` together.
        KeyboardInterrupt: On Ctrl-C, once ``evaluations.csv``, ``best.yaml`` and the figure
            of the evaluations that finished are written (``stopped: interrupted after N
            evaluations``).
    """
    origin = str(path)
    calibration, folder = load_calibration(path)
    # Overridden here, once, so that a problem or warning names the calibration file rather
    # than each evaluation's generated experiment file.
    try:
        settings = override_executor_config(
            calibration.executor, origin, kind=executor, workers=workers
        )
    except ConfigError as err:
        raise CalibrationError(str(err)) from None
    calibration = calibration.model_copy(update={"executor": settings})
    base_path = (folder / calibration.base).resolve()
    targets_path = (folder / calibration.targets).resolve()
    _check_files(calibration, base_path, origin)
    out = (
        Path(out_dir) if out_dir is not None else Path("outputs") / "calibration" / calibration.name
    )
    _check_output_folder(out, resume=resume, overwrite=overwrite)
    try:
        create_output_folder(out)
    except ConfigError as err:
        raise CalibrationError(str(err)) from None

    def run(experiment_path: Path, experiment_out: Path) -> None:
        result = run_experiment(experiment_path, experiment_out, progress=False)
        if result.failed:
            error = next((r["error"] for r in result.runs if r["status"] == "failed"), None)
            msg = f"{experiment_out}: {result.failed} run(s) failed: {error}"
            raise CalibrationError(msg)

    # One calibration writes a folder at a time: a second would clear the first's results.
    busy = CalibrationError(
        f"{out}: another floodsim batch or calibration is writing this folder; wait for it to "
        "end, or give another --out"
    )
    with hold_folder(out, busy):
        _check_output_folder(out, resume=resume, overwrite=overwrite)  # again, now it is held
        base, base_config = _base_config(calibration, folder, origin)
        fingerprint = _fingerprint(calibration, base_config, base_path, targets_path)
        search = _Search(calibration, base_path, targets_path, out, run, base, origin)
        if resume:
            resumed = search.resume_from(fingerprint)
        else:
            resumed = 0
            # An earlier calibration's results in the same folder would mislead, and a later
            # --resume would take them for this one's.
            _clear_results(out)
        # From here a failed write leaves evaluations that --resume reads back.
        with results_kept_in(out):
            return _search(search, calibration, out, origin, fingerprint, resumed, progress)


def _search(
    search: _Search,
    calibration: CalibrationConfig,
    out: Path,
    origin: str,
    fingerprint: str,
    resumed: int,
    progress: bool | None,
) -> CalibrationResult:
    """Search from the start point, writing the outputs as :func:`calibrate` says."""
    search.bar = tqdm(
        total=calibration.max_evaluations,
        desc=f"calibrate {calibration.name}",
        unit="eval",
        disable=None if progress is None else not progress,
    )

    def record() -> None:
        # After every evaluation, so that a kill loses only the one being simulated. Drawing
        # the figure (a few tenths of a second) is left to the end.
        if search.best is not None:  # always, after an evaluation
            running = f"running: {len(search.history)} evaluations so far"
            _write_outputs(
                out, calibration, search, search.best, running, origin, fingerprint, draw=False
            )

    search.record = record
    try:
        message = _optimise(search, calibration)
    except KeyboardInterrupt:
        # Evaluations take minutes each: the finished ones are written out before stopping.
        # While an earlier attempt is still being replayed its files say more than this one.
        if search.best is not None and not search.replay:
            stopped = f"interrupted after {len(search.history)} evaluations"
            _write_outputs(out, calibration, search, search.best, stopped, origin, fingerprint)
        raise
    finally:
        search.bar.close()
    best = search.best
    if best is None:  # pragma: no cover - the optimiser always evaluates the start point
        msg = f"{origin}: no evaluation ran"
        raise CalibrationError(msg)
    evaluations = _write_outputs(out, calibration, search, best, message, origin, fingerprint)
    return CalibrationResult(
        out_dir=out,
        best=dict(best.params),
        loss=best.loss,
        table=best.table,
        evaluations=evaluations,
        experiment_dir=best.folder,
        message=message,
        resumed=resumed,
    )


def _fingerprint(
    calibration: CalibrationConfig, base_config: RunConfig, base_path: Path, targets_path: Path
) -> str:
    """SHA-256 of what decides every evaluation's loss: all but the budget and the executor.

    That is the calibration's other keys, the base config with ``set`` applied (its paths are
    absolute), the contents of the files that config reads and of the targets file.
    """
    problem = {
        "calibration": calibration.model_dump(
            mode="json", exclude={"name", "max_evaluations", "executor"}
        ),
        "base_config": config_hash(base_config),
        "inputs": input_digests(base_config, base_path.parent),
        "targets": hashlib.sha256(targets_path.read_bytes()).hexdigest(),
    }
    return hashlib.sha256(orjson.dumps(problem, option=orjson.OPT_SORT_KEYS)).hexdigest()


def _check_files(calibration: CalibrationConfig, base_path: Path, origin: str) -> None:
    """Plan the start point's runs: checks every file they name before anything runs."""
    starts = {key: spec.start for key, spec in calibration.parameters.items()}
    experiment = ExperimentConfig(
        name=calibration.name,
        base=str(base_path),
        set={**calibration.set, **starts},
        replicates=1,
        seed=calibration.seed,
    )
    fixed = [f"{key}={_yaml_value(value)}" for key, value in experiment.set.items()]
    try:
        base = resolve_base(base_path, read_yaml(base_path), (base_path,))
        rebase_paths(base, base_path.parent)
        plan_runs(experiment, apply_overrides(base, fixed, origin, where="set."), origin)
    except ConfigError as err:
        raise CalibrationError(str(err)) from None
