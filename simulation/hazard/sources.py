"""Flood event sources: each household's flood water depth for a simulated year.

A hazard source answers one question per year for all active households at once: how deep is
the water at each site, in feet above ground (0 = dry)? Three sources are provided:

* :class:`StochasticSource` draws an annual maximum water level from a distribution;
* :class:`ScriptedSource` replays listed years (a water level or a uniform depth);
* :class:`RasterSource` samples one flood-depth grid (``.asc``) per year.

Randomness comes only from the ``numpy.random.Generator`` the model passes in, and each source
draws a fixed number of variates per year, so equal seeds give equal runs, and runs that differ
in what their households decide still share their floods (common random numbers): a variate per
household is drawn for the whole population, moved away or not, and each site takes its own.
"""

from __future__ import annotations

import inspect
import math
from dataclasses import dataclass
from pathlib import Path
from typing import TYPE_CHECKING, Any, Protocol, runtime_checkable

import numpy as np

from simulation.hazard.curves import HazardError
from simulation.hazard.raster import AsciiGrid, read_ascii_grid
from simulation.input_files import not_a_file

if TYPE_CHECKING:
    import os
    from collections.abc import Mapping

__all__ = [
    "FEET_PER_METRE",
    "PLAUSIBLE_DEPTH_FT",
    "SOURCE_KINDS",
    "HazardSource",
    "RasterSource",
    "ScriptedSource",
    "Sites",
    "StochasticSource",
    "make_source",
]

#: International foot: exactly 0.3048 m.
FEET_PER_METRE = 1.0 / 0.3048
#: Deeper than this at a home (ft above ground) is warned about as a likely units mistake
#: (centimetres read as metres, metres as feet): 50 ft is above the highest storm surges
#: recorded in the United States (about 28 ft, Katrina) and river floods at homes.
PLAUSIBLE_DEPTH_FT = 50.0

#: Distributions :class:`StochasticSource` can draw annual maximum levels from, with the
#: parameters each one needs.
_DISTRIBUTIONS: dict[str, tuple[str, ...]] = {
    "gumbel": ("loc", "scale"),
    "lognormal": ("mean", "sigma"),
}


def _finite_array(name: str, values: Any) -> np.ndarray:
    array = np.asarray(values, dtype=np.float64)
    if array.ndim != 1:
        msg = f"Sites.{name}: expected a 1-D array (one value per household), got {array.shape}"
        raise HazardError(msg)
    bad = ~np.isfinite(array)
    if np.any(bad):
        i = int(np.argmax(bad))
        msg = f"Sites.{name}: must be finite ({array[i]} at index {i})"
        raise HazardError(msg)
    return array


@dataclass(frozen=True, slots=True)
class Sites:
    """Where the active households are: arrays of equal length, one entry per household.

    Attributes:
        x: Easting of each household, in the coordinate system of any hazard grids.
        y: Northing of each household.
        ground_elevation: Ground elevation at each household (ft above the datum of the water
            levels).
        index: Each site's household, by its place in the run's population (0 to
            ``population - 1``); ``None``: the sites are the whole population, in order.
        population: How many households the run has, moved away included (with ``index``).

    Raises:
        HazardError: If the arrays are not 1-D, differ in length or hold NaN/inf, or an index
            is outside the population.
    """

    x: np.ndarray
    y: np.ndarray
    ground_elevation: np.ndarray
    index: np.ndarray | None = None
    population: int = 0

    def __post_init__(self) -> None:
        for name in ("x", "y", "ground_elevation"):
            object.__setattr__(self, name, _finite_array(name, getattr(self, name)))
        if not self.x.size == self.y.size == self.ground_elevation.size:
            msg = (
                f"Sites: x, y and ground_elevation must have one entry per household, got "
                f"lengths {self.x.size}, {self.y.size} and {self.ground_elevation.size}"
            )
            raise HazardError(msg)
        if self.index is None:
            object.__setattr__(self, "population", self.x.size)
            return
        index = np.asarray(self.index)
        outside = index.size and (index.min() < 0 or index.max() >= self.population)
        if index.shape != self.x.shape or index.dtype.kind not in "iu" or outside:
            msg = (
                f"Sites.index: one place in the population of {self.population} per site "
                f"expected, got {index!r}"
            )
            raise HazardError(msg)
        object.__setattr__(self, "index", index)

    def __len__(self) -> int:
        return int(self.x.size)


@runtime_checkable
class HazardSource(Protocol):
    """What the model asks of a hazard source each year."""

    def depths(self, year: int, rng: np.random.Generator, sites: Sites) -> np.ndarray:
        """Water depth at each site in ft above ground (>= 0, 0 = dry), shaped like ``sites``."""
        ...

    def water_level(self, year: int, rng: np.random.Generator) -> float | None:
        """The year's water level (ft above datum) for metrics, or ``None`` if not applicable."""
        ...


def _number(where: str, value: Any, *, low: float | None = None, low_open: bool = False) -> float:
    """Return ``value`` as a finite float, at least ``low`` (above it with ``low_open``)."""
    # bool is an int subclass, but ``true`` in a config is a typo, not a number
    is_number = isinstance(value, int | float | np.integer | np.floating)
    number = float(value) if is_number and not isinstance(value, bool) else math.nan
    ok = math.isfinite(number)
    if ok and low is not None:
        ok = number > low if low_open else number >= low
    if not ok:
        need = "a finite number" if low is None else f"a number {'>' if low_open else '>='} {low:g}"
        msg = f"{where}: expected {need}, got {value!r}"
        raise HazardError(msg)
    return number


class StochasticSource:
    """Annual maximum water level drawn from a distribution; depth = level - ground.

    Each year draws exactly one level, plus one normal noise value per household when
    ``spatial_noise_sd > 0`` (local variation of the water surface). The level of a year is
    drawn once per ``(year, generator)``: whichever of :meth:`depths` and :meth:`water_level`
    is called first draws it and the other reuses it, so the model may call both.

    Args:
        distribution: ``"gumbel"`` (parameters ``loc``, ``scale``) or ``"lognormal"``
            (``mean``, ``sigma`` of the level's natural log).
        loc: Gumbel location (ft above datum).
        scale: Gumbel scale (ft), > 0.
        mean: Lognormal mean of ``log(level)``.
        sigma: Lognormal standard deviation of ``log(level)``, > 0.
        spatial_noise_sd: Standard deviation (ft) of per-household noise on the level, >= 0.

    Raises:
        HazardError: For an unknown distribution, a missing or out-of-range parameter, or a
            parameter that belongs to the other distribution.
    """

    def __init__(
        self,
        distribution: str = "gumbel",
        *,
        loc: float | None = None,
        scale: float | None = None,
        mean: float | None = None,
        sigma: float | None = None,
        spatial_noise_sd: float = 0.0,
    ) -> None:
        if distribution not in _DISTRIBUTIONS:
            msg = (
                f"hazard.stochastic.distribution: unknown {distribution!r}; "
                f"available: {', '.join(_DISTRIBUTIONS)}"
            )
            raise HazardError(msg)
        given = {"loc": loc, "scale": scale, "mean": mean, "sigma": sigma}
        needed = _DISTRIBUTIONS[distribution]
        for name, value in given.items():
            if name in needed and value is None:
                msg = f"hazard.stochastic.{name}: required for distribution {distribution!r}"
                raise HazardError(msg)
            if name not in needed and value is not None:
                msg = (
                    f"hazard.stochastic.{name}: not a parameter of {distribution!r} "
                    f"(it takes {', '.join(needed)})"
                )
                raise HazardError(msg)
        self.distribution = distribution
        self.params: dict[str, float] = {
            name: _number(
                f"hazard.stochastic.{name}",
                given[name],
                low=0.0 if name in ("scale", "sigma") else None,
                low_open=True,
            )
            for name in needed
        }
        self.spatial_noise_sd = _number(
            "hazard.stochastic.spatial_noise_sd", spatial_noise_sd, low=0.0
        )
        # (year, generator, level) of the last draw; holding the generator itself (not its id)
        # means a new run with a new generator can never reuse a stale level.
        self._last: tuple[int, np.random.Generator, float] | None = None

    def __repr__(self) -> str:
        params = ", ".join(f"{k}={v!r}" for k, v in self.params.items())
        return (
            f"StochasticSource({self.distribution!r}, {params}, "
            f"spatial_noise_sd={self.spatial_noise_sd!r})"
        )

    def water_level(self, year: int, rng: np.random.Generator) -> float:
        """The year's annual maximum water level (ft above datum), drawn once per year.

        Args:
            year: Simulated year.
            rng: The run's generator.

        Returns:
            The level.
        """
        last = self._last
        if last is not None and last[0] == year and last[1] is rng:
            return last[2]
        if self.distribution == "gumbel":
            level = float(rng.gumbel(self.params["loc"], self.params["scale"]))
        else:
            level = float(rng.lognormal(self.params["mean"], self.params["sigma"]))
        self._last = (year, rng, level)
        return level

    def depths(self, year: int, rng: np.random.Generator, sites: Sites) -> np.ndarray:
        """Water depth at each site: ``max(0, level + noise - ground_elevation)`` in ft.

        Args:
            year: Simulated year.
            rng: The run's generator.
            sites: Active households.

        Returns:
            Depth above ground per household, >= 0.
        """
        level = self.water_level(year, rng)
        surface: float | np.ndarray = level
        if self.spatial_noise_sd > 0:
            # One value per household of the population, so that the draws, and each home's
            # own, do not hang on who has moved away (see the module docstring).
            noise = rng.normal(0.0, self.spatial_noise_sd, size=sites.population)
            surface = level + (noise if sites.index is None else noise[sites.index])
        return np.maximum(surface - sites.ground_elevation, 0.0)


def _year_key(kind: str, key: Any) -> int:
    # YAML gives int keys; JSON and CLI overrides give strings.
    if isinstance(key, bool):
        raise HazardError(f"hazard.{kind}: year {key!r} is not an integer")
    if isinstance(key, int | np.integer):
        return int(key)
    if isinstance(key, str) and key.strip().lstrip("-").isdigit():
        return int(key)
    raise HazardError(f"hazard.{kind}: year {key!r} is not an integer")


class ScriptedSource:
    """Floods in listed years only; uses no randomness.

    Args:
        events: Year to value. With ``kind="level"`` the value is a water level (ft above
            datum; depth = ``max(0, level - ground_elevation)``); with ``kind="depth"`` it is
            a depth (ft above ground, >= 0) applied at every site.
        kind: ``"level"`` or ``"depth"``.

    Raises:
        HazardError: For an unknown kind, a non-integer year or a non-finite (or, for
            depths, negative) value.
    """

    def __init__(self, events: Mapping[int, float], kind: str = "level") -> None:
        if kind not in ("level", "depth"):
            msg = f"hazard.scripted.kind: expected 'level' or 'depth', got {kind!r}"
            raise HazardError(msg)
        self.kind = kind
        parsed: dict[int, float] = {}
        for key, value in events.items():
            year = _year_key("scripted.events", key)
            parsed[year] = _number(
                f"hazard.scripted.events.{year}", value, low=0.0 if kind == "depth" else None
            )
        self.events: dict[int, float] = dict(sorted(parsed.items()))

    def __repr__(self) -> str:
        return f"ScriptedSource({self.events!r}, kind={self.kind!r})"

    def water_level(self, year: int, rng: np.random.Generator) -> float | None:
        """The scripted level of ``year``; ``None`` in dry years and for ``kind="depth"``.

        Args:
            year: Simulated year.
            rng: Unused (accepted for the common interface).

        Returns:
            The level or ``None``.
        """
        if self.kind == "level":
            return self.events.get(year)
        return None

    def depths(self, year: int, rng: np.random.Generator, sites: Sites) -> np.ndarray:
        """Water depth at each site in ft above ground; zeros in unlisted years.

        Args:
            year: Simulated year.
            rng: Unused (accepted for the common interface).
            sites: Active households.

        Returns:
            Depth above ground per household, >= 0.
        """
        value = self.events.get(year)
        if value is None:
            return np.zeros(len(sites))
        if self.kind == "depth":
            return np.full(len(sites), value)
        return np.maximum(value - sites.ground_elevation, 0.0)


class RasterSource:
    """One flood-depth grid per year, sampled at each household's coordinates.

    Every file must exist when the source is built, so a run with a wrong path fails before
    it starts; grids are read on first use and kept (each file is read once). Years without a
    grid are dry. Sites outside a grid or in NODATA cells are dry, and negative cell values
    (some models write them for dry land) count as 0.

    Args:
        paths: Year to ``.asc`` file of water depth above ground.
        units: Units of the grid values: ``"ft"`` or ``"m"`` (converted to feet).

    Raises:
        HazardError: For unknown units, a non-integer year or a missing file (naming the
            file and the year).
    """

    def __init__(self, paths: Mapping[int, str | os.PathLike[str]], units: str = "ft") -> None:
        if units not in ("ft", "m"):
            msg = f"hazard.raster.units: expected 'ft' or 'm', got {units!r}"
            raise HazardError(msg)
        self.units = units
        self._factor = FEET_PER_METRE if units == "m" else 1.0
        parsed: dict[int, Path] = {}
        for key, raw in paths.items():
            year = _year_key("raster.paths", key)
            path = Path(raw)
            if not path.is_file():
                msg = f"{path}: {not_a_file(path, f'hazard grid for year {year}')}"
                raise HazardError(msg)
            parsed[year] = path
        self.paths: dict[int, Path] = dict(sorted(parsed.items()))
        self._grids: dict[int, AsciiGrid] = {}

    def __repr__(self) -> str:
        paths = {year: str(path) for year, path in self.paths.items()}
        return f"RasterSource({paths!r}, units={self.units!r})"

    def grid(self, year: int) -> AsciiGrid | None:
        """The grid of ``year`` (read on first use), or ``None`` if the year is dry.

        Args:
            year: Simulated year.

        Returns:
            The grid or ``None``.
        """
        if year not in self.paths:
            return None
        if year not in self._grids:
            self._grids[year] = read_ascii_grid(self.paths[year])
        return self._grids[year]

    def water_level(self, year: int, rng: np.random.Generator) -> None:
        """Always ``None``: a depth grid has no single water level.

        Args:
            year: Simulated year.
            rng: Unused (accepted for the common interface).
        """

    def depths(self, year: int, rng: np.random.Generator, sites: Sites) -> np.ndarray:
        """Grid value at each site, in ft above ground (>= 0); zeros in years without a grid.

        Args:
            year: Simulated year.
            rng: Unused (accepted for the common interface).
            sites: Active households.

        Returns:
            Depth above ground per household.
        """
        grid = self.grid(year)
        if grid is None:
            return np.zeros(len(sites))
        return np.maximum(grid.sample(sites.x, sites.y) * self._factor, 0.0)


_SOURCES: dict[str, type[HazardSource]] = {
    "stochastic": StochasticSource,
    "scripted": ScriptedSource,
    "raster": RasterSource,
}

#: Kinds :func:`make_source` accepts.
SOURCE_KINDS: tuple[str, ...] = tuple(_SOURCES)


def make_source(kind: str, **params: Any) -> HazardSource:
    """Build a hazard source from its config kind and parameters.

    Args:
        kind: ``"stochastic"``, ``"scripted"`` or ``"raster"``.
        **params: Keyword arguments of the source's constructor.

    Returns:
        The source.

    Raises:
        HazardError: For an unknown kind, unknown or missing parameters, or invalid values.
    """
    cls = _SOURCES.get(kind)
    if cls is None:
        msg = f"hazard.kind: unknown {kind!r}; available: {', '.join(SOURCE_KINDS)}"
        raise HazardError(msg)
    signature = inspect.signature(cls)
    try:
        signature.bind(**params)
    except TypeError as exc:
        accepted = ", ".join(signature.parameters)
        msg = f"hazard.{kind}: {exc} (parameters: {accepted})"
        raise HazardError(msg) from None
    return cls(**params)
