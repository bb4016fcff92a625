"""Depth-damage curves: flood depth above the first floor to damage as a fraction of value.

A curve set (:class:`DamageCurves`) pairs a structure curve with a contents curve and the
citation they come from. Curve sets are read from YAML, either one of the tables shipped in
``curves_data.yaml`` (see :func:`available_curve_sets`) or a user file of the same shape::

    source: "citation of the tables"
    units: feet_above_first_floor
    structure: {depth: [-2, -1, 0, ...], damage_fraction: [0.0, 0.025, 0.134, ...]}
    contents: {depth: [...], damage_fraction: [...]}

Every validation failure raises :class:`HazardError` naming the file and the key, so that a bad
table stops a run before it starts instead of producing silently wrong damages.
"""

from __future__ import annotations

import functools
import math
import os
from collections.abc import Mapping
from dataclasses import dataclass
from importlib import resources
from pathlib import Path
from typing import Any

import numpy as np
import yaml

from simulation.errors import InputError
from simulation.input_files import read_text
from simulation.yaml_errors import describe_decode_error, describe_yaml_error, load_yaml

__all__ = [
    "CURVE_UNITS",
    "DEFAULT_CURVE_SET",
    "DamageCurves",
    "DepthDamageCurve",
    "HazardError",
    "available_curve_sets",
    "compute_damage",
    "curve_set_from_mapping",
    "is_curve_file",
    "load_curves",
]

#: Curve set used when a run config does not name one.
DEFAULT_CURVE_SET = "usace_one_story_no_basement"

#: The only depth convention the tables may use; stated in every file so a table in metres or
#: relative to the ground cannot be loaded by mistake.
CURVE_UNITS = "feet_above_first_floor"

_SHIPPED_FILE = "curves_data.yaml"
_SET_KEYS = ("source", "units", "structure", "contents")
#: Optional key of a curve set: the value its contents curve is a fraction of.
_BASIS_KEY = "contents_basis"
CONTENTS_BASES = ("contents", "structure")
_CURVE_KEYS = ("depth", "damage_fraction")


class HazardError(InputError):
    """Invalid hazard input: a curve table, a hazard grid or a hazard source configuration.

    The message starts with the file (when there is one) and the offending key or row, e.g.
    ``"configs/curves.yaml: structure.damage_fraction: must be non-decreasing (...)"``.
    """


def _fail(where: str, problem: str) -> HazardError:
    return HazardError(f"{where}: {problem}")


def _num(value: float) -> str:
    # Plain Python repr ("4.0", "0.58"), not numpy's "np.float64(4.0)".
    return repr(float(value))


def _shown(value: object) -> str:
    """``repr(value)``, shortened past 40 characters (a number of hundreds of digits)."""
    text = repr(value)
    return text if len(text) <= 40 else f"{text[:20]}...{text[-8:]} ({len(text)} characters)"


def _as_number_array(values: Any, where: str) -> np.ndarray:
    """Convert a YAML list (or array) of numbers to a float array, rejecting anything else."""
    if isinstance(values, np.ndarray) and values.ndim == 1:
        items: list[Any] = values.tolist()
    elif isinstance(values, list | tuple):
        items = list(values)
    else:
        raise _fail(where, f"expected a list of numbers, got {values!r}")
    for index, item in enumerate(items):
        # bool is an int subclass, but ``true`` in a table is a typo, not a number
        if isinstance(item, bool) or not isinstance(item, int | float | np.integer | np.floating):
            raise _fail(where, f"expected a number at index {index}, got {item!r}")
        try:
            finite = math.isfinite(item)
        except OverflowError:  # an integer too large for a float (400 digits)
            finite = False
        if not finite:
            raise _fail(where, f"must be finite ({_shown(item)} at index {index})")
    return np.array(items, dtype=np.float64)


def _check_table(depths: Any, fractions: Any, where: str) -> tuple[np.ndarray, np.ndarray]:
    """Validate one curve table; ``where`` prefixes the key names in error messages."""
    d = _as_number_array(depths, f"{where}.depth")
    f = _as_number_array(fractions, f"{where}.damage_fraction")
    if d.size != f.size:
        raise _fail(
            f"{where}.damage_fraction",
            f"has {f.size} values but depth has {d.size}; the lists must pair up",
        )
    if d.size < 2:
        raise _fail(f"{where}.depth", f"needs at least 2 points to interpolate, got {d.size}")
    # Compared, not subtracted: the difference of depths near +-1e308 overflows.
    flat = d[1:] <= d[:-1]
    if np.any(flat):
        i = int(np.argmax(flat)) + 1
        raise _fail(
            f"{where}.depth",
            f"must be strictly increasing ({_num(d[i])} after {_num(d[i - 1])} at index {i})",
        )
    outside = (f < 0.0) | (f > 1.0)
    if np.any(outside):
        i = int(np.argmax(outside))
        raise _fail(
            f"{where}.damage_fraction",
            f"must be within [0, 1] ({_num(f[i])} at depth {_num(d[i])}); percentages must be "
            "divided by 100",
        )
    drops = np.diff(f) < 0
    if np.any(drops):
        i = int(np.argmax(drops)) + 1
        raise _fail(
            f"{where}.damage_fraction",
            f"must be non-decreasing ({_num(f[i])} after {_num(f[i - 1])} at depth {_num(d[i])})",
        )
    # Curves are shared by every household of a run, so nobody may edit them in place.
    d.flags.writeable = False
    f.flags.writeable = False
    return d, f


@dataclass(frozen=True, slots=True)
class DepthDamageCurve:
    """Piecewise-linear damage fraction as a function of water depth above the first floor.

    Attributes:
        name: Label used in error messages and reports, e.g. ``"jrc_north_america.contents"``.
        depths: Water depth above the first floor (ft), strictly increasing, at least 2 points.
            Tables may start below 0 (USACE curves start at -2 ft: water under the floor still
            damages the structure).
        fractions: Damage as a fraction of replacement value at each depth, in [0, 1] and
            non-decreasing. Stored as read-only float arrays.

    Raises:
        HazardError: If the table is invalid; the message names ``<name>.depth`` or
            ``<name>.damage_fraction`` and the offending point.
    """

    name: str
    depths: np.ndarray
    fractions: np.ndarray

    def __post_init__(self) -> None:
        depths, fractions = _check_table(self.depths, self.fractions, self.name)
        object.__setattr__(self, "depths", depths)
        object.__setattr__(self, "fractions", fractions)

    @classmethod
    def from_table(
        cls, name: str, depth: Any, damage_fraction: Any, *, origin: str | None = None
    ) -> DepthDamageCurve:
        """Build a curve from YAML lists, naming ``origin`` (usually the file) in errors.

        Args:
            name: Curve name and key path, e.g. ``"structure"``.
            depth: Depths in feet above the first floor.
            damage_fraction: Damage fractions, one per depth.
            origin: File (or other source) the table came from.

        Returns:
            The validated curve.

        Raises:
            HazardError: If the table is invalid.
        """
        where = f"{origin}: {name}" if origin else name
        depths, fractions = _check_table(depth, damage_fraction, where)
        return cls(name, depths, fractions)

    def __call__(self, depth: np.ndarray | float) -> np.ndarray | float:
        """Damage fraction at ``depth`` ft above the first floor (linear interpolation).

        Depths at or below the first tabulated depth give the first fraction and depths above
        the last give the last fraction (the curve is flat outside its table). NaN gives NaN;
        :func:`compute_damage` turns that into zero damage.

        Args:
            depth: Water depth(s) above the first floor in feet.

        Returns:
            A float for a scalar depth, otherwise an array shaped like ``depth``.
        """
        result = np.interp(depth, self.depths, self.fractions)
        if np.ndim(depth) == 0:
            return float(result)
        return result


@dataclass(frozen=True, slots=True)
class DamageCurves:
    """The structure and contents curves used for every household of a run.

    Attributes:
        structure: Structure damage as a fraction of structure replacement value.
        contents: Contents damage as a fraction of the value it is applied to (see
            :func:`compute_damage` on USACE contents curves).
        source: Citation of the tables, recorded with the run.
        contents_basis: The value the contents curve is a fraction of as published:
            ``contents`` (most sets) or ``structure`` (USACE EGM 01-03).
    """

    structure: DepthDamageCurve
    contents: DepthDamageCurve
    source: str
    contents_basis: str = "contents"

    def __post_init__(self) -> None:
        for key in ("structure", "contents"):
            if not isinstance(getattr(self, key), DepthDamageCurve):
                msg = f"{key}: expected a DepthDamageCurve, got {type(getattr(self, key))!r}"
                raise HazardError(msg)
        if not isinstance(self.source, str) or not self.source.strip():
            msg = f"source: expected a non-empty citation, got {self.source!r}"
            raise HazardError(msg)


def curve_set_from_mapping(
    data: Mapping[str, Any], origin: str, *, key: str | None = None
) -> DamageCurves:
    """Build a curve set from a parsed YAML mapping.

    Args:
        data: Mapping with ``source``, ``units`` (must be ``feet_above_first_floor``),
            ``structure`` and ``contents``; each curve has ``depth`` and ``damage_fraction``.
        origin: Where the mapping came from (a file path), first in every error message.
        key: Key path of the mapping inside ``origin`` (e.g. ``"curves"`` or a shipped set's
            name), prefixed to key names in error messages and curve names.

    Returns:
        The validated curve set.

    Raises:
        HazardError: On a missing or unknown key, wrong units or an invalid table.
    """
    prefix = f"{key}." if key else ""
    where = f"{origin}: {key}" if key else origin
    if not isinstance(data, Mapping):
        raise _fail(where, f"expected a mapping with keys {', '.join(_SET_KEYS)}, got {data!r}")
    unknown = sorted(str(k) for k in data if k not in (*_SET_KEYS, _BASIS_KEY))
    if unknown:
        raise _fail(
            f"{origin}: {prefix}{unknown[0]}",
            f"unknown key (expected {', '.join(_SET_KEYS)} and optionally {_BASIS_KEY})",
        )
    basis = data.get(_BASIS_KEY, "contents")
    if basis not in CONTENTS_BASES:
        raise _fail(
            f"{origin}: {prefix}{_BASIS_KEY}",
            f"must be one of {', '.join(CONTENTS_BASES)}, got {basis!r}",
        )
    for name in _SET_KEYS:
        if name not in data:
            raise _fail(f"{origin}: {prefix}{name}", "missing")
    if data["units"] != CURVE_UNITS:
        raise _fail(
            f"{origin}: {prefix}units",
            f"must be {CURVE_UNITS!r} (convert depths to feet above the first floor), "
            f"got {data['units']!r}",
        )
    source = data["source"]
    if not isinstance(source, str) or not source.strip():
        raise _fail(f"{origin}: {prefix}source", f"expected a non-empty citation, got {source!r}")
    curves: dict[str, DepthDamageCurve] = {}
    for part in ("structure", "contents"):
        table = data[part]
        if not isinstance(table, Mapping):
            raise _fail(f"{origin}: {prefix}{part}", f"expected a mapping, got {table!r}")
        extra = sorted(str(k) for k in table if k not in _CURVE_KEYS)
        if extra:
            raise _fail(
                f"{origin}: {prefix}{part}.{extra[0]}",
                f"unknown key (expected {', '.join(_CURVE_KEYS)})",
            )
        for name in _CURVE_KEYS:
            if name not in table:
                raise _fail(f"{origin}: {prefix}{part}.{name}", "missing")
        curves[part] = DepthDamageCurve.from_table(
            f"{prefix}{part}", table["depth"], table["damage_fraction"], origin=origin
        )
    return DamageCurves(
        structure=curves["structure"],
        contents=curves["contents"],
        source=source,
        contents_basis=basis,
    )


@functools.cache
def _shipped_tables() -> dict[str, Any]:
    # Parsed once per process; callers only read it.
    text = resources.files("simulation.hazard").joinpath(_SHIPPED_FILE).read_text(encoding="utf-8")
    tables = yaml.safe_load(text)
    if not isinstance(tables, dict):
        msg = f"{_SHIPPED_FILE}: expected a mapping of curve-set names"
        raise HazardError(msg)
    return tables


def available_curve_sets() -> tuple[str, ...]:
    """Return the names of the shipped curve sets, sorted."""
    return tuple(sorted(_shipped_tables()))


def _read_curve_file(path: Path) -> DamageCurves:
    origin = str(path)
    try:
        text = read_text(path)
    except FileNotFoundError:
        raise _fail(origin, "curve file not found") from None
    except OSError as exc:
        raise _fail(origin, f"cannot read curve file: {exc.strerror or exc}") from None
    except UnicodeDecodeError as exc:
        raise _fail(origin, f"cannot read curve file: {describe_decode_error(exc)}") from None
    try:
        data = load_yaml(text)
    except yaml.YAMLError as exc:
        raise _fail(origin, f"not valid YAML: {describe_yaml_error(exc)}") from None
    if not isinstance(data, dict):
        raise _fail(origin, f"expected a mapping of one curve set, got {data!r}")
    if "structure" in data:
        return curve_set_from_mapping(data, origin)
    # Same shape as curves_data.yaml: a single named set.
    if len(data) == 1:
        (name,) = data
        return curve_set_from_mapping(data[name], origin, key=str(name))
    raise _fail(
        origin,
        f"expected one curve set (source, units, structure, contents) or one named set, "
        f"found keys {', '.join(sorted(map(str, data)))}",
    )


def load_curves(name_or_path: str | os.PathLike[str] = DEFAULT_CURVE_SET) -> DamageCurves:
    """Load a shipped curve set by name or a curve set from a YAML file.

    Args:
        name_or_path: A name from :func:`available_curve_sets`, or a path to a YAML file holding
            one curve set (bare, or under a single name as in the shipped file).

    Returns:
        The validated curve set.

    Raises:
        HazardError: For an unknown name (listing the available ones), a missing or unreadable
            file, or an invalid table.
    """
    if isinstance(name_or_path, os.PathLike):  # a path object is never a shipped set's name
        return _read_curve_file(Path(name_or_path))
    text = str(name_or_path)
    tables = _shipped_tables()
    if text in tables:
        return curve_set_from_mapping(tables[text], _SHIPPED_FILE, key=text)
    # A name is never looked up as a file in the current folder as well: the same config would
    # then load a set or be refused depending on where it is run, and a run's id, which hashes
    # the files a config names (see is_curve_file), would not follow an edit to that file.
    if is_curve_file(text):
        return _read_curve_file(Path(text))
    msg = (
        f"unknown curve set {text!r}; available: {', '.join(available_curve_sets())} "
        "(or give a curve file: a name ending in .yaml or .yml, or a path with a /)"
    )
    raise HazardError(msg)


def is_curve_file(curves: str) -> bool:
    """Whether ``damage.curves`` names a file (``*.yaml``, or a path) rather than a shipped set."""
    return curves.lower().endswith((".yaml", ".yml")) or "/" in curves


def compute_damage(
    depth_above_floor_ft: np.ndarray,
    structure_value: np.ndarray,
    contents_value: np.ndarray,
    curves: DamageCurves,
) -> tuple[np.ndarray, np.ndarray]:
    """Structure and contents damage in dollars for every household at once.

    Dry households must be passed as ``-inf`` depth: interpolation alone would give them the
    curve's first fraction (not necessarily 0), so damage is forced to 0 wherever the depth is
    ``-inf`` or NaN. Any finite depth, however far below the floor, is a flooded site and gets
    the curve value (the first fraction below the table). The caller therefore computes
    ``where(site_depth > 0, site_depth - first_floor_height, -inf)``.

    USACE EGM 01-03 contents curves give contents damage as a percentage of *structure* value
    (the memo's way of avoiding content-to-structure value ratios). To apply them as published,
    pass the structure value as ``contents_value``; passing a separate contents value applies
    them to that value instead.

    Args:
        depth_above_floor_ft: Water depth above each household's first floor (ft), ``-inf`` for
            dry households.
        structure_value: Structure replacement value ($), broadcastable to the depths.
        contents_value: Value the contents fraction applies to ($), broadcastable likewise.
        curves: The run's curve set.

    Returns:
        ``(structure_damage, contents_damage)`` in dollars, float arrays shaped like the
        broadcast inputs, 0 for dry households.

    Raises:
        HazardError: If the input shapes do not broadcast together.
    """
    depth = np.asarray(depth_above_floor_ft, dtype=np.float64)
    try:
        depth, s_value, c_value = np.broadcast_arrays(
            depth,
            np.asarray(structure_value, dtype=np.float64),
            np.asarray(contents_value, dtype=np.float64),
        )
    except ValueError:
        msg = (
            "compute_damage: depth_above_floor_ft, structure_value and contents_value have "
            f"incompatible shapes {np.shape(depth_above_floor_ft)}, {np.shape(structure_value)}"
            f" and {np.shape(contents_value)}"
        )
        raise HazardError(msg) from None
    wet = ~(np.isnan(depth) | np.isneginf(depth))
    structure = np.where(wet, curves.structure(depth) * s_value, 0.0)
    contents = np.where(wet, curves.contents(depth) * c_value, 0.0)
    return structure, contents
