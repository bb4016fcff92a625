"""Experiment files and the runs they expand into.

An experiment file (``floodsim batch FILE``) names a base run config, fixed overrides, a sweep
(a full grid over dotted keys and/or a Latin hypercube over ranges) and a number of replicates::

    name: decay_sweep
    base: ../default.yaml                  # a run config, relative to this file
    set: {households.count: 500}           # fixed overrides (dotted keys)
    sweep:
      grid: {memory.decay_rate: [0.9, 0.95]}
      lhs: {decision.pmt.beta_tp: [3.0, 8.0]}
      samples: 4
    replicates: 5
    seed: 1
    executor: {kind: process, workers: 2}  # serial | process | dask (address: tcp://host:8786)

Replicate ``r`` of every design point runs with the seed of the ``r``-th child of
``numpy.random.SeedSequence(seed)``: adding replicates never changes the others' seeds, and
every point sees the same seeds (common random numbers make points comparable).
"""

from __future__ import annotations

import itertools
import math
import warnings
from dataclasses import dataclass
from pathlib import Path
from typing import TYPE_CHECKING, Annotated, Any, Literal

import numpy as np
import orjson
from pydantic import Field, ValidationError, field_validator, model_validator

from simulation.config import (
    EXPERIMENT_KEYS,
    WHOLE_TABLES,
    ConfigError,
    ConfigWarning,
    RunConfig,
    Section,
    apply_overrides,
    canonical_keys,
    check_event_templates,
    check_file_kind,
    describe_validation_error,
    file_kind,
    ignored_keys,
    read_yaml,
    rebase_paths,
    resolve_base,
    table_year,
    warn_code_defaults,
    year_key,
)
from simulation.config_base import LAX
from simulation.cores import MAX_WORKERS
from simulation.runner import build_model
from simulation.yaml_errors import dump_yaml

if TYPE_CHECKING:
    from collections.abc import Iterable

__all__ = [
    "EXPERIMENT_KEYS",
    "FOLDER_NAME",
    "MAX_RUNS",
    "MAX_WORKERS",
    "ExecutorConfig",
    "ExperimentConfig",
    "PlannedRun",
    "SweepConfig",
    "is_experiment",
    "load_experiment",
    "override_executor",
    "override_executor_config",
    "plan_runs",
    "replicate_seeds",
    "set_key_holding",
    "set_twice",
]


#: The most runs (design points x replicates) an experiment may have. Every run is planned and
#: validated before the first starts (about 0.1 ms and 3.5 KB each), and a million runs of even
#: a second each are eleven days of one core: a larger design is almost always a grid written
#: by mistake (four keys of 100 values are 100 million points), which would otherwise fill the
#: memory before a word is said. A study this large is split into several experiments.
MAX_RUNS = 1_000_000
#: The names experiments and calibrations may have: each names a folder of outputs/ (a letter
#: or digit first, then letters, digits, _ . -, at most 64 in all).
FOLDER_NAME = r"^[A-Za-z0-9][A-Za-z0-9_.-]{0,63}$"


def _level_off(key: str, value: Any) -> Any:
    """``value`` of ``key`` with the audit level ``off`` that YAML 1.1 read as false put back.

    A run config's ``audit.level: off`` is mended by its own section (``AuditConfig``); an
    experiment's ``set`` and ``grid`` would otherwise record, label and combine the runs' level
    as ``false`` (a grid of ``[off, minimal]`` is a column of a bool and a string, which the
    combined table cannot hold).
    """
    if key == "audit.level" and value is False:
        return "off"
    if key == "audit" and isinstance(value, dict) and value.get("level") is False:
        return {**value, "level": "off"}
    return value


def _listed_twice(values: list[Any]) -> Any:
    """The first value ``values`` holds twice, else ``None`` (lists and mappings included).

    Values are told apart by type and JSON text: ``"1"`` and ``true`` are not ``1``, but
    ``1.0`` is (a float key takes both; an integer key refuses the float anyway).
    """
    option = orjson.OPT_SORT_KEYS | orjson.OPT_NON_STR_KEYS
    seen: set[tuple[str, bytes]] = set()
    for value in values:
        number = isinstance(value, (int, float)) and not isinstance(value, bool)
        try:
            text = orjson.dumps(float(value) if number else value, option=option)
        except (TypeError, OverflowError):  # not JSON data, or an integer past a float's range
            text = repr(value).encode()
        if (tag := ("number" if number else type(value).__name__, text)) in seen:
            return value
        seen.add(tag)
    return None


def _check_dotted(keys: Iterable[str], where: str) -> None:
    """Refuse a swept key that is not a dotted config key (empty, ``a..b``, ``x=1``).

    Each becomes a ``KEY=VALUE`` override: such a key would be reported in a --set flag's words.
    """
    for key in keys:
        if "=" in key or not all(part.strip() for part in key.split(".")):
            msg = f"{where}: {key!r} is not a dotted config key (e.g. memory.decay_rate)"
            raise ValueError(msg)


class SweepConfig(Section):
    """What varies between design points (``sweep:``)."""

    grid: dict[str, list[Any]] = Field(
        default_factory=dict,
        description="Dotted config key -> list of values; the design is their full product.",
    )
    lhs: dict[str, Annotated[tuple[float, float], LAX]] = Field(
        default_factory=dict,
        description="Dotted config key -> [low, high]; `samples` Latin-hypercube points.",
    )
    samples: int = Field(0, ge=0, description="Latin-hypercube points (with `lhs`).")

    @field_validator("grid", mode="after")
    @classmethod
    def _grid_levels_off(cls, grid: dict[str, list[Any]]) -> dict[str, list[Any]]:
        grid = canonical_keys(grid)
        return {key: [_level_off(key, value) for value in values] for key, values in grid.items()}

    @field_validator("lhs", mode="after")
    @classmethod
    def _lhs_keys(cls, lhs: dict[str, tuple[float, float]]) -> dict[str, tuple[float, float]]:
        return canonical_keys(lhs)

    @model_validator(mode="after")
    def _consistent(self) -> SweepConfig:
        _check_dotted(self.grid, "grid")
        _check_dotted(self.lhs, "lhs")
        for key, values in self.grid.items():
            if not values:
                msg = f"grid.{key}: needs at least one value"
                raise ValueError(msg)
            if (twice := _listed_twice(values)) is not None:
                # Two points of one config: same seeds, same runs, counted as two.
                msg = f"grid.{key}: {twice!r} is listed twice"
                raise ValueError(msg)
        for key, (low, high) in self.lhs.items():
            if not low < high:
                msg = f"lhs.{key}: low ({low}) must be below high ({high})"
                raise ValueError(msg)
        if self.lhs and self.samples < 1:
            msg = "samples: must be >= 1 when lhs ranges are given"
            raise ValueError(msg)
        if self.samples and not self.lhs:
            msg = "samples: only used with lhs ranges, and none are given"
            raise ValueError(msg)
        overlap = set(self.grid) & set(self.lhs)
        if overlap:
            msg = f"{min(overlap)}: swept by both grid and lhs"
            raise ValueError(msg)
        # A key inside another swept key (memory.decay_rate and memory) would be overwritten by
        # it or overwrite it, depending on order: the runs would not be what their labels say.
        keys = [*self.grid, *self.lhs]
        for outer in keys:
            for inner in keys:
                if inner.startswith(f"{outer}."):
                    msg = f"{inner}: swept inside {outer}, which is swept too"
                    raise ValueError(msg)
        return self

    @property
    def points(self) -> int:
        """How many design points the sweep has: the grid's product times the samples."""
        return math.prod(len(values) for values in self.grid.values()) * max(self.samples, 1)


class ExecutorConfig(Section):
    """Where runs execute (``executor:``)."""

    kind: Literal["serial", "process", "dask"] = Field(
        "serial",
        description="serial: one after another here; process: a process pool on this machine; "
        "dask: a dask.distributed cluster (at `address`, or a LocalCluster started here).",
    )
    workers: int = Field(
        2,
        ge=1,
        le=MAX_WORKERS,
        description="Processes (process) or local Dask workers, 1 to 1024; a pool starts no "
        "more of them than the experiment has runs.",
    )
    address: str | None = Field(
        None, description="dask: scheduler address, e.g. tcp://host:8786 (null: LocalCluster)."
    )

    @model_validator(mode="after")
    def _address_needs_dask(self) -> ExecutorConfig:
        if self.address is None:
            return self
        if self.kind != "dask":
            msg = f"address: only used by kind dask (kind is {self.kind})"
            raise ValueError(msg)
        try:  # Dask's own parser: the error would otherwise surface as a traceback at connect
            from distributed.comm.addressing import (  # noqa: PLC0415 - optional extra
                parse_address,
                parse_host_port,
            )
        except ImportError:
            return self  # the executor says that dask is missing
        try:
            scheme, location = parse_address(self.address)
            if scheme in ("tcp", "tls"):
                parse_host_port(location)
        except ValueError as err:
            msg = f"address: {err} (expected e.g. tcp://host:8786)"
            raise ValueError(msg) from None
        return self


class ExperimentConfig(Section):
    """A batch experiment: a base config, overrides, a sweep and replicates.

    Its design points times its replicates are at most :data:`MAX_RUNS` runs.
    """

    name: str = Field(
        pattern=FOLDER_NAME,
        description="Experiment name: the default output folder is outputs/<name>.",
    )
    base: str = Field(description="Run config the experiment starts from (relative path).")
    set: dict[str, Any] = Field(
        default_factory=dict, description="Fixed overrides, dotted key -> value."
    )
    sweep: SweepConfig = Field(
        default_factory=SweepConfig,
        description="Swept keys: a grid of listed values and/or Latin-hypercube ranges.",
    )
    replicates: int = Field(1, ge=1, le=10_000, description="Runs per design point.")
    seed: int = Field(
        0, ge=0, lt=2**64, description="Root seed of the replicate seeds and the LHS design."
    )
    executor: ExecutorConfig = Field(
        default_factory=ExecutorConfig,
        description="Where the runs execute: serial, a process pool or a Dask cluster.",
    )

    @field_validator("set", mode="after")
    @classmethod
    def _set_level_off(cls, fixed: dict[str, Any]) -> dict[str, Any]:
        fixed = canonical_keys(fixed)  # hazard.events.02 is hazard.events.2
        return {key: _level_off(key, value) for key, value in fixed.items()}

    @model_validator(mode="after")
    def _experiment_owns_seed_and_name(self) -> ExperimentConfig:
        # Every run's seed is a replicate seed and its name the experiment's: a value given
        # here would be overwritten without a word.
        for where, keys in (("set", self.set), ("sweep", self.swept_keys)):
            if "seed" in keys:
                msg = f"{where}: seed: replicate seeds come from the experiment's `seed`"
                raise ValueError(msg)
            if "name" in keys:
                msg = f"{where}: name: runs are named after the experiment's `name`"
                raise ValueError(msg)
        if (twice := set_twice(self.set)) is not None:
            msg = f"set: {twice[0]}: also given by {twice[1]}; give it once"
            raise ValueError(msg)
        for key in self.swept_keys:
            if (fixed := set_key_holding(self.set, key)) is not None:
                what = "swept too" if fixed == key else f"holds {key}, which is swept too"
                msg = f"set: {fixed}: {what}; fix it in set or sweep it, not both"
                raise ValueError(msg)
            if (
                inner := _overwritten_inside(self.set, key, self.sweep.grid.get(key, []))
            ) is not None:
                msg = (
                    f"set: {inner}: inside {key}, which is swept (each point's {key} replaces "
                    "it); fix it in set or sweep it, not both"
                )
                raise ValueError(msg)
        runs = self.sweep.points * self.replicates
        if runs > MAX_RUNS:
            replicates = f"{self.replicates:,} replicate{'s' if self.replicates > 1 else ''}"
            msg = (
                f"sweep and replicates: {self.sweep.points:,} design points x {replicates} = "
                f"{runs:,} runs, more than {MAX_RUNS:,}; split the study into several experiments"
            )
            raise ValueError(msg)
        return self

    @property
    def swept_keys(self) -> list[str]:
        """The keys that vary, grid keys first."""
        return [*self.sweep.grid, *self.sweep.lhs]


_ABSENT = object()


def _overwritten_inside(fixed: dict[str, Any], key: str, values: list[Any]) -> str | None:
    """A dotted key of ``set`` inside the swept ``key`` that every point's value replaces.

    The sweep is applied after ``set``: a year table is replaced whole, a section key by key,
    so a key of ``set`` inside a swept table, or inside a swept section whose values give it
    too, would be gone from the runs without a word.
    """
    whole = tuple(key.split(".")) in WHOLE_TABLES
    for inner in fixed:
        if not inner.startswith(f"{key}."):
            continue
        rest = inner[len(key) + 1 :].split(".")
        for value in values:
            for part in rest:
                value = _entry(value, part)  # noqa: PLW2901 - walked down the dotted key
            if whole or value is not _ABSENT:
                return inner
    return None


def set_twice(fixed: dict[str, Any]) -> tuple[str, str] | None:
    """A dotted key of ``set`` that another of its keys gives a value too, and that other key.

    ``memory.decay_rate`` beside ``memory: {decay_rate: 0.9}``: one would win without a word;
    so would a year beside its whole table (``hazard.events.4`` beside ``hazard.events``).
    """
    for key in fixed:
        others = {other: value for other, value in fixed.items() if other != key}
        if (holder := set_key_holding(others, key)) is not None:
            return key, holder
        # A year table is replaced whole: beside it, one year given dotted is kept or lost
        # depending on which of the two comes first.
        parts = tuple(key.split("."))
        table = next(
            (t for t in WHOLE_TABLES if parts[: len(t)] == t and len(parts) > len(t)), None
        )
        if table is not None and (holder := set_key_holding(others, ".".join(table))):
            return key, holder
    return None


def set_key_holding(fixed: dict[str, Any], key: str) -> str | None:
    """The key of ``set`` that gives ``key`` (a swept or fitted one) a value too, if one does.

    ``set`` may give the key itself (``memory.decay_rate``) or a section holding it
    (``memory: {decay_rate: 0.9}``): the sweep or the search would overwrite either without a
    word.
    """
    parts = key.split(".")
    for cut in range(len(parts), 0, -1):
        value = fixed.get(".".join(parts[:cut]), _ABSENT)
        for part in parts[cut:]:
            value = _entry(value, part)
        if value is not _ABSENT:
            return ".".join(parts[:cut])
    return None


def _entry(section: Any, part: str) -> Any:
    """``section[part]``, or :data:`_ABSENT`.

    A year table's number key (``{4: 9.5}``, or ``{"04": 9.5}``) is the dotted key's ``"4"``,
    as overrides read it.
    """
    if not isinstance(section, dict):
        return _ABSENT
    if part in section:
        return section[part]
    year = year_key(part)
    return next((v for k, v in section.items() if table_year(k) == year), _ABSENT)


def override_executor(
    experiment: ExperimentConfig,
    origin: str,
    *,
    kind: str | None = None,
    workers: int | None = None,
    address: str | None = None,
) -> ExperimentConfig:
    """The experiment with its executor overridden (command-line options), validated like the file.

    See :func:`override_executor_config`, which this applies to ``experiment.executor``.

    Raises:
        ConfigError: Naming the overridden key and the problem.
    """
    executor = override_executor_config(
        experiment.executor, origin, kind=kind, workers=workers, address=address
    )
    if executor is experiment.executor:
        return experiment
    return experiment.model_copy(update={"executor": executor})


def override_executor_config(
    executor: ExecutorConfig,
    origin: str,
    *,
    kind: str | None = None,
    workers: int | None = None,
    address: str | None = None,
) -> ExecutorConfig:
    """An executor section with command-line overrides applied, validated like the file.

    Choosing another kind than dask drops the file's scheduler address, which belongs to its
    dask executor. ``--workers`` with a serial executor is kept but warned of (a
    :class:`ConfigWarning` naming ``origin``), as it changes nothing.

    Args:
        executor: The file's executor section.
        origin: The file the section comes from, for messages.
        kind: ``--executor``, if given.
        workers: ``--workers``, if given.
        address: ``--address``, if given.

    Returns:
        ``executor`` itself when nothing is overridden, else a new validated section.

    Raises:
        ConfigError: Naming the overridden key and the problem.
    """
    given = {
        key: value
        for key, value in {"kind": kind, "workers": workers, "address": address}.items()
        if value is not None
    }
    if not given:
        return executor
    data = executor.model_dump()
    if given.get("kind", "dask") != "dask" and "address" not in given:
        data["address"] = None
    data.update(given)
    try:
        overridden = ExecutorConfig.model_validate(data)
    except ValidationError as err:
        where = f"{origin}: executor as overridden"
        raise ConfigError(describe_validation_error(err, where)) from None
    if workers is not None and overridden.kind == "serial":
        msg = (
            f"{origin}: --workers {workers} is not used: the executor is serial (one run at a time)"
        )
        warnings.warn(ConfigWarning(msg), stacklevel=3)
    return overridden


@dataclass(frozen=True, slots=True)
class PlannedRun:
    """One run of an experiment.

    Attributes:
        run_id: Stable name, ``p<point>-r<replicate>``.
        point: Index of the design point.
        replicate: Index of the replicate.
        seed: The run's seed.
        params: Swept key -> value at this point.
        config: The run's full config as plain data.
    """

    run_id: str
    point: int
    replicate: int
    seed: int
    params: dict[str, Any]
    config: dict[str, Any]


def is_experiment(data: dict[str, Any]) -> bool:
    """Whether a YAML mapping is an experiment file (rather than a run config)."""
    return file_kind(data) == "experiment"


def replicate_seeds(root: int, replicates: int) -> list[int]:
    """Seed of each replicate: the first word of each spawned SeedSequence child."""
    children = np.random.SeedSequence(root).spawn(replicates)
    return [int(child.generate_state(1, dtype=np.uint32)[0]) for child in children]


def design_points(sweep: SweepConfig, seed: int) -> list[dict[str, Any]]:
    """Every design point: the grid's product times the Latin-hypercube samples."""
    grid_points = [
        dict(zip(sweep.grid, values, strict=True))
        for values in itertools.product(*sweep.grid.values())
    ] or [{}]
    if not sweep.lhs:
        return grid_points
    # Imported here: scipy.stats takes about a second to import, and spawned workers that only
    # execute runs never need it.
    from scipy.stats import qmc  # noqa: PLC0415

    sampler = qmc.LatinHypercube(d=len(sweep.lhs), seed=np.random.default_rng(seed))
    lows = [low for low, _ in sweep.lhs.values()]
    highs = [high for _, high in sweep.lhs.values()]
    samples = qmc.scale(sampler.random(sweep.samples), lows, highs)
    lhs_points = [
        {key: float(value) for key, value in zip(sweep.lhs, row, strict=True)} for row in samples
    ]
    return [{**g, **h} for g in grid_points for h in lhs_points]


def load_experiment(path: str | Path) -> tuple[ExperimentConfig, dict[str, Any], Path]:
    """Read and validate an experiment file.

    Returns:
        The experiment, its base run config as plain data (with ``set`` applied, paths made
        absolute) and the folder of the experiment file.

    Raises:
        ConfigError: One line naming the file, the key and the problem.
    """
    path = Path(path)
    origin = str(path)
    data = read_yaml(path)
    check_file_kind(data, "experiment", origin)
    try:
        experiment = ExperimentConfig.model_validate(data)
    except ValidationError as err:
        raise ConfigError(describe_validation_error(err, origin)) from None
    base_path = (path.resolve().parent / experiment.base).resolve()
    if not base_path.is_file():
        msg = f"{origin}: base: {base_path}: file not found"
        raise ConfigError(msg)
    base = resolve_base(base_path, read_yaml(base_path), (base_path,))
    rebase_paths(base, base_path.parent)
    fixed = [f"{key}={_yaml_value(value)}" for key, value in experiment.set.items()]
    base = apply_overrides(base, fixed, origin, where="set.")
    return experiment, base, path.resolve().parent


def _yaml_value(value: Any) -> str:
    return dump_yaml(value, default_flow_style=True).strip().removesuffix("...").strip()


#: A warning floodsim drew while checking a run: its category and message.
_Warned = tuple[type[Warning], str]


def plan_runs(experiment: ExperimentConfig, base: dict[str, Any], origin: str) -> list[PlannedRun]:
    """Expand an experiment into validated runs (every point x every replicate).

    Every file the runs name (registry, damage curves, household table, rasters, prompt) is
    opened and checked once per distinct combination, so a broken one stops the batch before
    anything runs. Each distinct warning a design point draws is shown once, ending with the
    point (as its errors do) unless every point draws it (an experiment without a sweep).

    Raises:
        ConfigError: When a swept value makes an invalid config or a named file is broken
            (names the experiment file, the key and the design point).
    """
    seeds = replicate_seeds(experiment.seed, experiment.replicates)
    runs = []
    checked: dict[tuple[Any, ...], tuple[_Warned, ...]] = {}
    # Each point's warnings (its replicates draw the same ones), with the point's label.
    warned: list[tuple[str, dict[_Warned, None]]] = []
    points = design_points(experiment.sweep, experiment.seed)
    _check_lhs_ends(experiment, base, points[0], origin, seeds[0])
    for point, params in enumerate(points):
        data = _point_config(experiment, base, params, origin)
        where = f"[design point {point}: {_describe_point(params)}]"
        warned.append((where, {}))
        try:
            config = RunConfig.model_validate({**data, "seed": seeds[0]})
        except ValidationError as err:
            _refuse_integer_lhs(err, experiment.sweep, origin)
            message = describe_validation_error(err, origin)
            if point == 0 and _fixed_refused(experiment, base, origin, message, seeds[0]):
                raise ConfigError(f"{message} (in set or the base config)") from None
            raise ConfigError(f"{message} {where}") from None
        try:
            check_event_templates(config, origin)
        except ConfigError as err:
            raise ConfigError(f"{err} {where}") from None
        warned[-1][1].update(dict.fromkeys(_check_files(config, origin, where, checked)))
        with warnings.catch_warnings(record=True) as caught:
            warnings.simplefilter("always")
            warn_code_defaults(config, data, origin)
        warned[-1][1].update(dict.fromkeys((w.category, str(w.message)) for w in caught))
        # A point's replicates differ in their seed alone, and every seed replicate_seeds draws
        # is valid: the point is validated once, and its runs share the config's sections (read
        # only), which keeps 100,000 planned runs from holding 100,000 copies of them.
        resolved = config.to_yaml_dict()
        runs.extend(
            PlannedRun(
                run_id=f"p{point:03d}-r{replicate:03d}",
                point=point,
                replicate=replicate,
                seed=seed,
                params=params,
                config={**resolved, "seed": seed},
            )
            for replicate, seed in enumerate(seeds)
        )
    _warn_per_point(warned)
    return runs


def _point_config(
    experiment: ExperimentConfig, base: dict[str, Any], params: dict[str, Any], origin: str
) -> dict[str, Any]:
    """A design point's run config as plain data: ``base`` with the point's swept values."""
    overrides = [f"{key}={_yaml_value(value)}" for key, value in params.items()]
    data = apply_overrides(base, overrides, origin, where="sweep: ")
    data["name"] = experiment.name
    return data


def _fixed_refused(
    experiment: ExperimentConfig, base: dict[str, Any], origin: str, message: str, seed: int
) -> bool:
    """Whether the base config with ``set``, before any sweep, is refused with ``message``.

    Then the mistake is in what every point shares, not in the first point's swept values.
    """
    try:
        RunConfig.model_validate({**base, "name": experiment.name, "seed": seed})
    except ValidationError as err:
        return describe_validation_error(err, origin) == message
    return False


def _check_lhs_ends(
    experiment: ExperimentConfig,
    base: dict[str, Any],
    first: dict[str, Any],
    origin: str,
    seed: int,
) -> None:
    """Refuse a Latin-hypercube range whose either end the run config refuses.

    The samples fall inside the range, so whether one lands past a key's limit would depend on
    the seed and the number of samples: the ends are checked (the other swept keys at the
    first point's values), as a calibration's bounds are.

    Raises:
        ConfigError: Naming the range, the end and the config's reason.
    """
    for key, ends in experiment.sweep.lhs.items():
        for label, end in zip(("low", "high"), ends, strict=True):
            data = _point_config(experiment, base, {**first, key: end}, origin)
            try:
                RunConfig.model_validate({**data, "seed": seed})
            except ValidationError as err:
                _refuse_integer_lhs(err, experiment.sweep, origin)
                message = describe_validation_error(err, origin)
                if _fixed_refused(experiment, base, origin, message, seed):
                    raise ConfigError(f"{message} (in set or the base config)") from None
                reason = describe_validation_error(err, "").removeprefix(": ")
                msg = f"{origin}: sweep.lhs.{key}: its {label} end {end!r} is refused: {reason}"
                raise ConfigError(msg) from None


def _describe_point(params: dict[str, Any]) -> str:
    return ", ".join(f"{k}={v!r}" for k, v in params.items()) or "base"


def _warn_per_point(warned: list[tuple[str, dict[_Warned, None]]]) -> None:
    """Show each point's warnings once, labelled with the point (``[design point 1: ...]``).

    A warning every point draws is about the experiment's fixed settings, not about one point:
    it is shown once as it is, as without a sweep, rather than once per point.
    """
    shown: set[_Warned] = set()
    for where, found in warned:
        for category, message in found:
            if all((category, message) in others for _, others in warned):
                if (category, message) not in shown:
                    shown.add((category, message))
                    warnings.warn(message, category, stacklevel=3)
            else:
                warnings.warn(f"{message} {where}", category, stacklevel=3)


def _refuse_integer_lhs(err: ValidationError, sweep: SweepConfig, origin: str) -> None:
    """Name a Latin-hypercube range over an integer key, whose fractional points always fail."""
    first = err.errors()[0]
    key = ".".join(str(part) for part in first["loc"])
    # Strict validation refuses any float for an integer (int_type); lax refused fractional ones.
    fractional = first["type"] in ("int_type", "int_from_float")
    if fractional and isinstance(first.get("input"), float) and key in sweep.lhs:
        msg = (
            f"{origin}: sweep.lhs.{key}: an integer key; Latin-hypercube points are fractional, "
            "so sweep it with grid"
        )
        raise ConfigError(msg) from None


def _check_files(
    config: RunConfig,
    origin: str,
    where: str,
    checked: dict[tuple[Any, ...], tuple[_Warned, ...]],
) -> tuple[_Warned, ...]:
    """Build a small model of ``config`` once per distinct set of referenced files and years.

    The model has 4 households, unless ``audit.sample`` lists ids or a decision table names
    households: those are checked against the run's own population (a table naming H00009 is
    fine in a run of 30).

    Returns:
        floodsim's warnings from building it (hazard years past the run's end, ignored keys),
        kept in ``checked`` for the next config of the same files and years, which draws them
        too; :func:`plan_runs` shows them. Other libraries' warnings are shown at once.
    """
    listed = config.audit.sample if isinstance(config.audit.sample, list) else None
    script = config.decision.script if config.decision.policy == "scripted" else None
    full_size = listed is not None or script is not None
    key = (
        origin,
        config.registry,
        config.damage.curves,
        config.households.table,
        # With the years: the model warns about hazard years past the run's end (a design
        # point of a sweep over years or events may have no flood at all).
        config.years,
        tuple(sorted(config.hazard.events.items())),
        tuple(sorted(config.hazard.rasters.items())),
        config.decision.policy,
        config.decision.llm.prompt,
        config.decision.llm.mode,
        config.decision.llm.cache,
        # The keys the model warns are ignored (a sweep over llm_share under pmt warns at the
        # points away from its default only).
        tuple(key for keys, _ in ignored_keys(config) for key in keys),
        script,
        None if listed is None else tuple(listed),
        config.households.count if full_size else None,
    )
    if key in checked:
        return checked[key]
    small = config
    if not full_size:
        small = config.model_copy(
            update={"households": config.households.model_copy(update={"count": 4})}
        )
    with warnings.catch_warnings(record=True) as caught:
        # Every one is recorded: a point whose warning Python's once-per-message filter would
        # drop (another point drew it first) must still know it draws it.
        warnings.simplefilter("always")
        try:
            build_model(small, Path(origin).resolve().parent, origin).release()
        except ConfigError as err:
            raise ConfigError(f"{err} {where}") from None
    ours: dict[_Warned, None] = {}
    for caught_warning in caught:
        if caught_warning.category.__module__.startswith("simulation."):
            ours[caught_warning.category, str(caught_warning.message)] = None
        else:  # not about the config: shown as the library raised it
            warnings.warn_explicit(
                caught_warning.message,
                caught_warning.category,
                caught_warning.filename,
                caught_warning.lineno,
            )
    checked[key] = tuple(ours)
    return checked[key]
