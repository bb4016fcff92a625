"""Flood hazard: yearly flood depths at household sites and the damage they cause.

Each simulated year the model asks a :class:`HazardSource` for the water depth at every active
household's site (:class:`Sites`), subtracts each first-floor height and turns the result into
dollars with :func:`compute_damage` and a :class:`DamageCurves` set from :func:`load_curves`.
All work is vectorised over households; randomness comes only from the generator the model
passes in. Invalid input raises :class:`HazardError` naming the file and the key or row.
"""

from __future__ import annotations

from simulation.hazard.curves import (
    CURVE_UNITS,
    DEFAULT_CURVE_SET,
    DamageCurves,
    DepthDamageCurve,
    HazardError,
    available_curve_sets,
    compute_damage,
    curve_set_from_mapping,
    is_curve_file,
    load_curves,
)
from simulation.hazard.raster import AsciiGrid, read_ascii_grid
from simulation.hazard.sources import (
    FEET_PER_METRE,
    PLAUSIBLE_DEPTH_FT,
    SOURCE_KINDS,
    HazardSource,
    RasterSource,
    ScriptedSource,
    Sites,
    StochasticSource,
    make_source,
)

__all__ = [
    "CURVE_UNITS",
    "DEFAULT_CURVE_SET",
    "FEET_PER_METRE",
    "PLAUSIBLE_DEPTH_FT",
    "SOURCE_KINDS",
    "AsciiGrid",
    "DamageCurves",
    "DepthDamageCurve",
    "HazardError",
    "HazardSource",
    "RasterSource",
    "ScriptedSource",
    "Sites",
    "StochasticSource",
    "available_curve_sets",
    "compute_damage",
    "curve_set_from_mapping",
    "is_curve_file",
    "load_curves",
    "make_source",
    "read_ascii_grid",
]
