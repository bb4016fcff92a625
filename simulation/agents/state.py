"""Household state: the fields skills may read (preconditions) and change (effects).

The state is plain data so that traces can log it before and after a decision and checkpoints can
restore it. Skill preconditions, effects and memory templates are checked against
:data:`STATE_FIELDS` when the skill registry loads.
"""

from __future__ import annotations

import math
from dataclasses import asdict, dataclass, fields
from itertools import chain, repeat
from operator import attrgetter
from typing import TYPE_CHECKING, Any, Literal, TypeVar, get_args

import numpy as np

if TYPE_CHECKING:
    from collections.abc import Iterable, Mapping, Sequence

    from numpy.typing import NDArray

__all__ = [
    "FIELD_KINDS",
    "FLOOD_ZONES",
    "SFHA_ZONES",
    "STATE_FIELDS",
    "TENURES",
    "FloodZone",
    "HouseholdState",
    "ZoneColumn",
    "by_zone",
    "check_state_values",
    "per_zone",
    "refuse_state_value",
]

_T = TypeVar("_T")

#: Agent types a skill can be made eligible for.
TENURES = ("owner", "renter")

#: FEMA flood zones a household can be in. A household table may use any of them; generated
#: populations use AE (below the base flood elevation) and X. Config sections keyed by zone
#: accept these names only, so a misspelt zone is an error rather than a silently unused entry.
FloodZone = Literal["AE", "A", "VE", "V", "X", "B", "C", "D"]
FLOOD_ZONES: tuple[str, ...] = get_args(FloodZone)
#: Zones of the Special Flood Hazard Area (the 100-year floodplain, where federally backed
#: mortgages require flood insurance); the others (X, B, C, D) are outside it.
SFHA_ZONES: frozenset[str] = frozenset({"AE", "A", "VE", "V"})


def by_zone(values: Mapping[str, _T], default: _T, *, outside: _T | None = None) -> dict[str, _T]:
    """Every zone's value from a config section keyed by zone, which usually lists AE and X only.

    A zone listed in ``values`` takes its entry. An unlisted floodplain zone (A, VE, V: see
    :data:`SFHA_ZONES`) takes AE's entry and an unlisted zone outside it (B, C, D) ``outside``,
    or X's entry when ``outside`` is None; ``default`` where that entry is missing too. So a
    household table using the full set of FEMA zones has its A, VE and V homes priced and
    appraised as the calibrated AE ones, and its B, C and D homes as the X ones.

    Returns:
        A value for each of :data:`FLOOD_ZONES`.
    """
    floodplain = values.get("AE", default)
    beyond = values.get("X", default) if outside is None else outside
    return {
        zone: values.get(zone, floodplain if zone in SFHA_ZONES else beyond) for zone in FLOOD_ZONES
    }


@dataclass(frozen=True, slots=True, eq=False)  # an array field has no plain equality
class ZoneColumn:
    """Many households' flood zones, each as its position in :data:`FLOOD_ZONES`.

    A value per zone is looked up once and taken for every household (:func:`per_zone`),
    where a list of zone names costs a dictionary lookup per household every year.

    Attributes:
        codes: Each household's zone, as a position in :data:`FLOOD_ZONES`.
    """

    codes: NDArray[np.intp]

    @classmethod
    def of(cls, zones: Iterable[str]) -> ZoneColumn:
        """The column of ``zones``, names from :data:`FLOOD_ZONES`.

        Raises:
            KeyError: For a name that is not a flood zone.
        """
        return cls(np.fromiter(map(_ZONE_POSITIONS.__getitem__, zones), np.intp))

    def __len__(self) -> int:
        return len(self.codes)

    def __getitem__(self, rows: slice | NDArray[np.integer]) -> ZoneColumn:
        """The zones of some of the households (a slice, or their positions)."""
        return ZoneColumn(self.codes[rows])


_ZONE_POSITIONS = {zone: i for i, zone in enumerate(FLOOD_ZONES)}


def per_zone(
    zones: ZoneColumn | Iterable[str], values: Mapping[str, float], default: float | None = None
) -> NDArray[np.float64]:
    """``values[zone]`` for each household's zone, or ``default`` where ``values`` has none.

    Raises:
        KeyError: For a zone ``values`` has no entry for, when ``default`` is None.
    """
    if not isinstance(zones, ZoneColumn):
        names = list(zones)
        if default is None:
            return np.fromiter(map(values.__getitem__, names), float, len(names))
        return np.fromiter(map(values.get, names, repeat(default)), float, len(names))
    table = np.empty(len(FLOOD_ZONES))
    for i, zone in enumerate(FLOOD_ZONES):
        value = values.get(zone, default)
        if value is None:
            if i in zones.codes:
                raise KeyError(zone)
            value = math.nan  # no household is in this zone
        table[i] = value
    return table[zones.codes]


@dataclass(slots=True)
class HouseholdState:
    """What one household is and has done.

    Attributes:
        agent_id: Unique id, e.g. ``"H00042"``.
        tenure: ``owner`` or ``renter`` (the agent type of skill eligibility).
        income: Annual household income in dollars.
        structure_value: Replacement value of the building in dollars (0 for renters).
        contents_value: Replacement value of the contents in dollars.
        flood_zone: FEMA zone, one of :data:`FLOOD_ZONES`: generated populations use ``AE``
            (the 100-year floodplain, :data:`SFHA_ZONES`) and ``X`` (outside it).
        ground_elevation: Ground elevation at the home, feet above the datum.
        first_floor_height: First floor above ground, feet.
        x: Easting of the home (same units as hazard rasters).
        y: Northing of the home.
        has_insurance: Holds an annual structure-and-contents flood policy (owners).
        has_contents_insurance: Holds an annual contents-only flood policy (renters).
        elevated: The home has been elevated (owners, once).
        relocated: The household has moved away (permanent; it no longer takes part).
        cumulative_damage: Flood damage suffered so far, dollars.
        last_damage: Flood damage in the most recent flood year, dollars.
        insured_years: Consecutive years the current policy has been held (0 when uninsured).
        claims_paid: Claims paid so far.
        claims_denied: Claims denied so far.
    """

    agent_id: str
    tenure: str
    income: float
    structure_value: float
    contents_value: float
    flood_zone: str
    ground_elevation: float
    first_floor_height: float
    x: float = 0.0
    y: float = 0.0
    has_insurance: bool = False
    has_contents_insurance: bool = False
    elevated: bool = False
    relocated: bool = False
    cumulative_damage: float = 0.0
    last_damage: float = 0.0
    insured_years: int = 0
    claims_paid: int = 0
    claims_denied: int = 0

    @property
    def insured(self) -> bool:
        """Holds any flood policy (structure or contents)."""
        return self.has_insurance or self.has_contents_insurance

    def to_dict(self) -> dict[str, Any]:
        """All fields as a JSON-ready dict."""
        return asdict(self)


#: Names of the state fields, for validating preconditions, effects and templates.
STATE_FIELDS: frozenset[str] = frozenset(f.name for f in fields(HouseholdState))

#: Each state field's kind, by its annotation: ``bool``, ``int``, ``float`` or ``str``.
FIELD_KINDS: dict[str, str] = {f.name: str(f.type) for f in fields(HouseholdState)}

# The types a field of each kind may hold: a number field takes any number (a bool counts as 0
# or 1, as in Python arithmetic), and numpy's scalars count as Python's (numpy's bool too, as
# the array engine's columns take it).
_ACCEPTED: dict[str, tuple[type, ...]] = {
    "bool": (bool, np.bool_),
    "int": (int, np.integer, np.bool_),
    "float": (int, float, np.integer, np.floating, np.bool_),
    "str": (str,),
}
_INT64_MIN, _INT64_MAX = -(2**63), 2**63 - 1

# Each kind's fields, and a getter of their values as a tuple (every kind has two or more).
_FIELDS_OF: dict[str, tuple[str, ...]] = {
    kind: tuple(name for name, of in FIELD_KINDS.items() if of == kind) for kind in _ACCEPTED
}
_VALUES_OF = {kind: attrgetter(*names) for kind, names in _FIELDS_OF.items()}


def check_state_values(states: Sequence[HouseholdState]) -> None:
    """Refuse a state field holding a value of another type, or one its kind cannot hold.

    A value set on a household between years (``state.has_insurance = 1`` or ``"no"``,
    ``state.income = float("nan")``) would otherwise be counted as true, or spread NaN
    through the year's damage and metrics. Both engines check every household when a year
    starts: the array engine as it builds its columns, the object path with this, one pass
    over each kind of field's values (about 0.6 ms a year at 1,000 households).

    Raises:
        TypeError: Naming the household, the field and the value, for a value of another type.
        ValueError: For a number field holding NaN or an infinity, or an integer field one
            beyond 64 bits.
    """
    for kind, values_of in _VALUES_OF.items():
        values = list(chain.from_iterable(map(values_of, states)))
        accepted = _ACCEPTED[kind]
        fits = all(issubclass(held, accepted) for held in set(map(type, values)))
        if fits and kind == "float":
            try:
                fits = math.isfinite(sum(values))
            except OverflowError:  # an integer too large for a float
                fits = False
        elif fits and kind == "int" and values:  # as the array engine's int64 columns hold them
            fits = min(values) >= _INT64_MIN and max(values) <= _INT64_MAX
        if not fits:  # or a sum past the largest float, which refuses nobody
            for name in _FIELDS_OF[kind]:
                refuse_state_value(name, states)


def refuse_state_value(name: str, states: Iterable[HouseholdState]) -> None:
    """Raise for the first household whose field ``name`` holds what it may not; else return.

    Raises:
        TypeError: For a value of another type than the field's (:data:`FIELD_KINDS`).
        ValueError: For a number field holding NaN, an infinity or an integer beyond floats,
            or an integer field one beyond 64 bits, which the array engine's columns cannot
            hold (the object path refuses it too, so that both engines run the same worlds).
    """
    kind = FIELD_KINDS[name]
    accepted = _ACCEPTED[kind]
    for state in states:
        value = getattr(state, name)
        if not isinstance(value, accepted):
            msg = (
                f"household {state.agent_id}: state.{name}: expected {kind}, got "
                f"{type(value).__name__} {value!r}"
            )
            raise TypeError(msg)
        if kind == "float":
            try:
                finite = math.isfinite(value)
            except OverflowError:
                finite = False
            if not finite:
                msg = f"household {state.agent_id}: state.{name}: {value!r} is not finite"
                raise ValueError(msg)
        elif kind == "int" and not _INT64_MIN <= value <= _INT64_MAX:
            msg = f"household {state.agent_id}: state.{name}: {value!r} is beyond 64 bits"
            raise ValueError(msg)
