"""Household populations: generated from distributions or loaded from a CSV table.

A run's ``households:`` section (:class:`PopulationConfig`) either asks for ``count`` synthetic
households or names a ``table`` of real (e.g. surveyed) ones. Either way the result is a
:class:`Population`: one :class:`~simulation.agents.state.HouseholdState` per household, the
grid cell each household occupies (to place agents on a Mesa grid) and the memories some
households start with (:class:`SeedMemory`, e.g. a flood reported in a survey).

Generated populations
---------------------
Households fill a square-ish grid of ``width = ceil(sqrt(count))`` columns row by row (ids
``H00001``, ``H00002``, ... in that order). A river runs along row 0; ground rises with the
distance from it::

    ground = ground.base + ground.rise * row / (height - 1) + Normal(0, ground.noise_sd)

and a home is in flood zone ``AE`` (the 100-year floodplain) when its ground is below
``bfe_ft``, the 100-year water level, otherwise in zone ``X``. With the defaults (base 4.5 ft,
rise 12 ft, noise 1 ft, BFE 9 ft) the floodplain is the river-side ``(9 - 4.5) / 12 = 37.5 %``
of the grid: for 1,000 or more households 37-40 % are in AE (mean ground about 6.6 ft) and the
rest in X (mean ground about 12.8 ft). ``bfe_ft`` should be the 1 %-annual-chance level of the
hazard source; for a Gumbel annual maximum that is ``loc + 4.600 * scale``.

Generated values stay within what a household table takes, so that a run's ``households.csv``
loads back: incomes and owners' building values are whole dollars of at least $1 (a draw that
rounds to $0 is $1), dollars go up to :data:`MAX_DOLLARS` and ground lies within
:data:`MAX_GROUND_FT` of the datum; settings that generate more are refused, naming them.

Every generation draws the same number of variates for a given ``count`` (``2 * count``
uniforms, then ``5 * count`` standard normals), whatever the other settings, so changing, say,
``prior_flood_share`` in a sweep does not shift the random numbers used after it.

Household tables
----------------
A CSV file with a header row and one household per row, each with as many fields as the
header (an empty cell still needs its comma: a row with more or fewer fields is refused). Cells
are trimmed of surrounding spaces; blank lines are skipped; columns not listed here are allowed
and ignored (keep notes, survey ids, ... in the same file).

=====================  ========  =====================================================
column                 required  meaning
=====================  ========  =====================================================
``agent_id``           yes       unique, non-empty id
``tenure``             yes       ``owner`` or ``renter`` (any case)
``income``             yes       annual household income, dollars, > 0
                                 (dollar columns: at most :data:`MAX_DOLLARS`)
``structure_value``    yes       building replacement value, dollars; > 0 for owners,
                                 0 or empty for renters (they do not own the building)
``contents_value``     yes       contents replacement value, dollars, >= 0
``flood_zone``         yes       FEMA zone: ``AE``, ``A``, ``VE``, ``V``, ``X``, ``B``,
                                 ``C`` or ``D`` (any case; stored upper-case)
``ground_elevation``   yes       ground at the home, ft above the hazard datum,
                                 within +-:data:`MAX_GROUND_FT`
``first_floor_height`` yes       first floor above ground, ft, 0 to
                                 :data:`MAX_FIRST_FLOOR_FT`
``x``, ``y``           yes       map coordinates (units of the hazard rasters),
                                 within +-:data:`MAX_COORDINATE`
``prior_flood_year``   no        calendar year of a flood the household reported
                                 (1000 to 9999); empty = none
``prior_flood_damage`` no        damage of that flood, dollars, >= 0; empty = not
                                 reported (needs ``prior_flood_year``)
``grid_col``,          no        grid cell of the household (integers >= 0, both or
``grid_row``                     neither); households may share a cell (flats); the grid
                                 they span has at most :data:`MAX_GRID_CELLS` cells
=====================  ========  =====================================================

A reported flood becomes a seeded memory ("In 2012 my home was flooded causing $18,000 in
damages", importance ``prior_flood_importance``, tags ``flood`` and ``survey``). Its year is 0
(the start of the simulation) unless ``survey_year`` is set, in which case it is
``prior_flood_year - survey_year`` so that older floods have faded more.

Without ``grid_col``/``grid_row`` the cells come from the coordinates: if the distinct ``x`` and
``y`` values form a lattice (one household per point, at least half the points used) each
household's cell is the rank of its ``x`` and ``y`` among them; otherwise households are sorted by
``y`` then ``x`` and laid row by row on a ``ceil(sqrt(n))``-wide grid, so that grid neighbours
are map neighbours.

Every problem raises :class:`PopulationError` with one line naming the file, the row (numbered
as in a spreadsheet: the header is row 1) and the column, e.g.
``"households.csv: row 3, column income: expected a number, got 'abc'"``.
"""

from __future__ import annotations

import csv
import math
from dataclasses import dataclass
from pathlib import Path
from typing import TYPE_CHECKING, Annotated

import numpy as np
import pandas as pd
from pydantic import Field, model_validator

from simulation.agents.state import (
    FLOOD_ZONES,
    SFHA_ZONES,
    TENURES,
    FloodZone,
    HouseholdState,
    by_zone,
)
from simulation.config_base import ConfigModel
from simulation.errors import InputError
from simulation.input_files import longer_row, not_a_file

if TYPE_CHECKING:
    from collections.abc import Mapping, Sequence

__all__ = [
    "FLOOD_ZONES",
    "GENERATED_FLOOD_MEMORY",
    "MAX_COORDINATE",
    "MAX_DOLLARS",
    "MAX_FIRST_FLOOR_FT",
    "MAX_GRID_CELLS",
    "MAX_GROUND_FT",
    "OPTIONAL_COLUMNS",
    "REQUIRED_COLUMNS",
    "SFHA_ZONES",
    "FirstFloorConfig",
    "GroundConfig",
    "IncomeConfig",
    "LognormalConfig",
    "Population",
    "PopulationConfig",
    "PopulationError",
    "RenterContentsConfig",
    "SeedMemory",
    "StructureValueConfig",
    "build_population",
    "generate_population",
    "insure_at_start",
    "load_population_table",
    "population_table",
]

#: The most cells the grid of a table's ``grid_col`` and ``grid_row`` may span. Mesa builds
#: every cell of a grid, empty or not, at about 1.5 KB each: a million cells take 1.5 GB and
#: ten seconds, and one mistyped ``grid_col`` of 100,000 would take every byte of the machine.
MAX_GRID_CELLS = 1_000_000
# The longest field the table's second pass (_short_row) reads: 2**31 - 1, csv's C long on
# every platform.
_FIELD_LIMIT = 2**31 - 1

#: The largest dollar value a household table takes (income, values, a reported flood's
#: damage): finite values far beyond any home's, such as 1e308, overflowed the damage arithmetic
#: to infinity and NaN while the run went on.
MAX_DOLLARS = 1e12
#: The largest ground elevation above (or below) the hazard datum a table takes, ft.
MAX_GROUND_FT = 1e5
#: The largest first-floor height above ground a table takes, ft.
MAX_FIRST_FLOOR_FT = 1e3
#: The largest map coordinate (``x``, ``y``) either way a table takes: a raster's own bound
#: (``simulation.hazard.raster.MOST``). 1e308 overflowed the lookup of a household's cell.
MAX_COORDINATE = 1e15

#: Columns every household table must have.
REQUIRED_COLUMNS: tuple[str, ...] = (
    "agent_id",
    "tenure",
    "income",
    "structure_value",
    "contents_value",
    "flood_zone",
    "ground_elevation",
    "first_floor_height",
    "x",
    "y",
)

#: Columns a household table may have; any other column is ignored.
OPTIONAL_COLUMNS: tuple[str, ...] = (
    "prior_flood_year",
    "prior_flood_damage",
    "grid_col",
    "grid_row",
)

#: Text of the memory seeded into generated households that reported a prior flood.
GENERATED_FLOOD_MEMORY = (
    "Before the simulation began, my home was flooded (reported in the household survey)"
)

_SEED_TAGS = ("flood", "survey")
_MIN_ID_DIGITS = 5


class PopulationError(InputError):
    """An unusable household table (or population setting), described in one line.

    The message starts with the file and names the row and column where they apply, e.g.
    ``"data/households.csv: row 7, column tenure: unknown tenure 'landlord' (owner, renter)"``.

    Attributes:
        settings: For generated households, the ``households`` keys whose values made the
            problem (``("income",)``), so that the caller can name the file or flag that gave
            them; empty for a table.
    """

    def __init__(self, message: str, settings: tuple[str, ...] = ()) -> None:
        super().__init__(message)
        self.settings = settings


# --- configuration -----------------------------------------------------------------------------


class LognormalConfig(ConfigModel):
    """A lognormal distribution given by its median and the standard deviation of its log.

    Each use has its own subclass with its own defaults, so that a config giving only
    ``median`` keeps that use's default ``sigma`` (and vice versa).
    """

    median: float = Field(1.0, gt=0, description="Median, dollars (exp of the mean of the log).")
    sigma: float = Field(
        0.5, ge=0, le=3, description="Standard deviation of the natural log; 0 gives the median."
    )


class IncomeConfig(LognormalConfig):
    """Annual household income: median about the US median, dispersion of US incomes."""

    median: float = Field(
        70_000,
        gt=0,
        description="Median income, dollars (US median household income: $69,717 in ACS 2021, "
        "$74,755 in 2022).",
    )
    sigma: float = Field(
        0.7, ge=0, le=3, description="Standard deviation of log income (US: about 0.7-0.8)."
    )


class StructureValueConfig(LognormalConfig):
    """Owners' building replacement value."""

    median: float = Field(250_000, gt=0, description="Median building value, dollars.")
    sigma: float = Field(0.5, ge=0, le=3, description="Standard deviation of the log value.")


class RenterContentsConfig(LognormalConfig):
    """Renters' contents replacement value."""

    median: float = Field(30_000, gt=0, description="Median contents value, dollars.")
    sigma: float = Field(0.6, ge=0, le=3, description="Standard deviation of the log value.")


class GroundConfig(ConfigModel):
    """Ground elevation of generated homes: rising linearly away from the river, plus noise."""

    base: float = Field(
        4.5,
        description=(
            "Ground elevation at the river bank (grid row 0), ft above the hazard datum. With "
            "rise 12 and bfe_ft 9 the default puts 37.5% of the grid in the floodplain."
        ),
    )
    rise: float = Field(
        12.0,
        ge=0,
        le=1000,
        description="How much higher the far edge of the grid is than the river bank, ft.",
    )
    noise_sd: float = Field(
        1.0,
        ge=0,
        le=100,
        description=(
            "Standard deviation of local ground variation, ft, so the floodplain edge is "
            "ragged rather than a straight line."
        ),
    )


class FirstFloorConfig(ConfigModel):
    """First-floor height above ground of generated homes: a clipped normal."""

    mean: float = Field(
        1.5,
        ge=0,
        le=30,
        description="Mean first-floor height, ft (typical of slab and crawlspace foundations).",
    )
    sd: float = Field(0.5, ge=0, le=30, description="Standard deviation, ft.")
    low: float = Field(0.0, ge=0, description="Smallest height after clipping, ft.")
    high: float = Field(
        6.0, ge=0, le=30, description="Largest height after clipping, ft (AE bonus included)."
    )

    @model_validator(mode="after")
    def _ordered(self) -> FirstFloorConfig:
        if self.low > self.high:
            msg = f"low ({self.low:g}) must not exceed high ({self.high:g})"
            raise ValueError(msg)
        return self


class PopulationConfig(ConfigModel):
    """The ``households:`` section of a run config: how many households and what they are like.

    Either ``count`` households are generated (all other fields apply) or they are read from
    ``table`` (then ``count`` and the distributions are ignored; ``prior_flood_importance``,
    ``survey_year`` and ``initial_insured_share`` still apply).
    """

    count: int = Field(
        1000,
        ge=1,
        le=10_000_000,
        description="Number of households to generate; ignored when `table` is given.",
    )
    table: str | None = Field(
        None,
        min_length=1,
        description=(
            "CSV household table to load instead of generating households (columns in "
            "simulation.agents.population); a relative path is relative to the config file."
        ),
    )
    owner_share: float = Field(
        0.65,
        ge=0,
        le=1,
        description="Share of owner households; US homeownership rate is about 65% (Census HVS).",
    )
    income: IncomeConfig = Field(
        IncomeConfig(),
        description=(
            "Annual household income, dollars, lognormal. US median household income was $69,717 "
            "in ACS 2021 ($74,755 in 2022); the standard deviation of log income is about 0.7-0.8."
        ),
    )
    structure_value: StructureValueConfig = Field(
        StructureValueConfig(),
        description=(
            "Owners' building replacement value, dollars, lognormal (renters have 0: they do "
            "not own the building)."
        ),
    )
    contents_ratio: float = Field(
        0.5,
        ge=0,
        le=5,
        description=(
            "Owners' contents value as a multiple of structure value; 0.5 is the common "
            "HAZUS/FEMA assumption for residences."
        ),
    )
    renter_contents: RenterContentsConfig = Field(
        RenterContentsConfig(),
        description="Renters' contents replacement value, dollars, lognormal.",
    )
    cell_size: float = Field(
        30.0,
        gt=0,
        description=(
            "Spacing of the household grid in map units (metres by default; 30 m is a "
            "suburban lot), so x = column * cell_size and y = row * cell_size."
        ),
    )
    ground: GroundConfig = Field(
        GroundConfig(),
        description="Ground elevation, rising from the river along row 0 (ft above datum).",
    )
    bfe_ft: float = Field(
        9.0,
        description=(
            "Base flood elevation: the 100-year (1%-annual-chance) water level, ft above "
            "datum. Homes with ground below it are in zone AE, others in X. Keep it equal to "
            "the hazard source's 100-year level (Gumbel: loc + 4.600 * scale)."
        ),
    )
    first_floor_height: FirstFloorConfig = Field(
        FirstFloorConfig(),
        description="First-floor height above ground, ft: normal, clipped to [low, high].",
    )
    ae_first_floor_bonus: float = Field(
        1.0,
        ge=0,
        le=30,
        description=(
            "Extra first-floor height of AE homes, ft: homes built after the flood maps must "
            "have their lowest floor at or above the BFE, so floodplain homes sit higher."
        ),
    )
    prior_flood_share: float = Field(
        0.0,
        ge=0,
        le=1,
        description=(
            "Share of AE households that report a flood before the simulation (as in a "
            "household survey) and start with a memory of it; 0 = nobody."
        ),
    )
    prior_flood_importance: float = Field(
        0.8,
        ge=0,
        le=1,
        description="Importance of seeded prior-flood memories (generated and from tables).",
    )
    initial_insured_share: dict[FloodZone, Annotated[float, Field(ge=0, le=1)]] = Field(
        default_factory=dict,
        description=(
            "Share of households insured when the run starts, by FEMA zone; without it "
            "nobody is, and a flood in year 1 pays no claim. Owners hold a structure and "
            "contents policy (has_insurance), renters a contents policy "
            "(has_contents_insurance), each as if bought the year before (insured_years 1). "
            "An unlisted floodplain zone (A, VE, V) takes AE's entry, an unlisted zone outside "
            "it (B, C, D) X's, and 0 when that is unlisted too. NFIP take-up is about 30 % in "
            "the floodplain and a few per cent outside it. Drawn from a random stream of its "
            "own, so it moves no other draw of the run. Applies to tables too. Such a household "
            "has no memory of buying its policy, and check-behaviour's policy tenure, which is "
            "read from decisions, starts its spell at the first renewal (a policy let lapse in "
            "year 1 is no spell)."
        ),
    )
    survey_year: int | None = Field(
        None,
        ge=1000,
        le=9999,
        description=(
            "Calendar year of the household survey, taken as simulation year 0: a table's "
            "prior_flood_year Y is remembered at year Y - survey_year. Unset: at year 0."
        ),
    )


# --- result ------------------------------------------------------------------------------------


@dataclass(frozen=True, slots=True)
class SeedMemory:
    """A memory a household starts with (pass to ``CognitiveMemory.add_seed``).

    Attributes:
        content: What the household remembers.
        importance: Importance in [0, 1].
        year: Simulation year of the remembered event (0 = the start; negative = before).
        tags: Tags for retrieval filters.
    """

    content: str
    importance: float
    year: int
    tags: tuple[str, ...]


@dataclass(frozen=True, slots=True)
class Population:
    """The households of a run, ready to become agents.

    Attributes:
        states: One state per household, in id order for generated populations and in file
            order for tables.
        grid_shape: ``(height, width)`` of the grid the households live on.
        cells: Each household's ``(col, row)`` grid cell, aligned with ``states``; generated
            households each have their own cell, table households may share one.
        seeds: Memories to seed, by agent id; households without any are absent.
    """

    states: list[HouseholdState]
    grid_shape: tuple[int, int]
    cells: list[tuple[int, int]]
    seeds: dict[str, list[SeedMemory]]

    def __post_init__(self) -> None:
        if len(self.cells) != len(self.states):
            msg = f"Population: {len(self.states)} states but {len(self.cells)} cells"
            raise ValueError(msg)

    def __len__(self) -> int:
        return len(self.states)


# --- generation --------------------------------------------------------------------------------


def _grid_shape(count: int) -> tuple[int, int]:
    width = math.isqrt(count - 1) + 1  # ceil(sqrt(count)) without float rounding
    return math.ceil(count / width), width


def _lognormal(spec: LognormalConfig, z: np.ndarray) -> np.ndarray:
    return spec.median * np.exp(spec.sigma * z)


def generate_population(config: PopulationConfig, rng: np.random.Generator) -> Population:
    """Generate ``config.count`` synthetic households (see the module docstring).

    Args:
        config: Population settings (``table`` is ignored here).
        rng: Source of all randomness; it advances by ``2 * count`` uniforms and
            ``5 * count`` standard normals.

    Returns:
        The population, ids ``H00001``... in row-major grid order.
    """
    n = config.count
    height, width = _grid_shape(n)
    index = np.arange(n)
    row, col = np.divmod(index, width)

    # One fixed block of draws, always all of it, so that no setting changes how far the
    # generator advances (and hence what the rest of the run draws).
    u_tenure, u_prior = rng.random((2, n))
    z_income, z_structure, z_contents, z_ground, z_floor = rng.standard_normal((5, n))

    owner = u_tenure < config.owner_share
    # Whole dollars, at least one: a draw rounded to $0 (a wide sigma's tail) would be no income
    # or no building, which a household table (the run's households.csv) refuses.
    income = np.maximum(np.round(_lognormal(config.income, z_income)), 1.0)
    structure = np.where(
        owner, np.maximum(np.round(_lognormal(config.structure_value, z_structure)), 1.0), 0.0
    )
    contents = np.where(
        owner,
        np.round(config.contents_ratio * structure),
        np.round(_lognormal(config.renter_contents, z_contents)),
    )

    g = config.ground
    slope = row / (height - 1) if height > 1 else np.zeros(n)
    ground = g.base + g.rise * slope + g.noise_sd * z_ground
    in_ae = ground < config.bfe_ft

    f = config.first_floor_height
    floor = f.mean + f.sd * z_floor + np.where(in_ae, config.ae_first_floor_bonus, 0.0)
    floor = np.clip(floor, f.low, f.high)

    _check_generated(
        (
            ("income", income, ("income",)),
            ("structure_value", structure, ("structure_value",)),
            ("contents_value", contents, ("renter_contents", "contents_ratio")),
        ),
        MAX_DOLLARS,
    )
    _check_generated((("ground_elevation", ground, ("ground",)),), MAX_GROUND_FT)

    x = col * config.cell_size
    y = row * config.cell_size
    digits = max(_MIN_ID_DIGITS, len(str(n)))
    ids = [f"H{i:0{digits}d}" for i in range(1, n + 1)]

    states = _states(
        ids,
        np.where(owner, "owner", "renter"),
        income,
        structure,
        contents,
        np.where(in_ae, "AE", "X"),
        ground,
        floor,
        x.astype(float),
        y.astype(float),
    )
    cells = list(zip(col.tolist(), row.tolist(), strict=True))

    seeds: dict[str, list[SeedMemory]] = {}
    if config.prior_flood_share > 0:
        memory = SeedMemory(GENERATED_FLOOD_MEMORY, config.prior_flood_importance, 0, _SEED_TAGS)
        reported = in_ae & (u_prior < config.prior_flood_share)
        seeds = {ids[i]: [memory] for i in np.flatnonzero(reported).tolist()}
    return Population(states, (height, width), cells, seeds)


def _check_generated(
    columns: Sequence[tuple[str, np.ndarray, tuple[str, ...]]], most: float
) -> None:
    """Refuse generated values beyond ``most`` either way, as a household table refuses them.

    A run's households.csv must load back as a table; such values also overflowed the damage
    arithmetic to infinity and NaN.

    Raises:
        PopulationError: Naming the column, its largest value and the settings that made it.
    """
    for column, values, settings in columns:
        if not len(values):
            continue
        farthest = float(values[np.argmax(np.abs(values))])
        if not abs(farthest) <= most:  # inf too
            keys = " or ".join(f"households.{key}" for key in settings)
            msg = (
                f"generated {column} reaches {farthest:.4g}, beyond the {most:g} a household "
                f"table takes: change {keys}"
            )
            raise PopulationError(msg, settings)


# --- tables ------------------------------------------------------------------------------------


def _short_row(path: Path, width: int) -> tuple[int, int] | None:
    """The first row (counted as a spreadsheet does) with fewer than ``width`` fields, if any.

    Blank lines, spaces only included (an editor's last line), are not short rows: they are
    skipped like empty rows.
    """
    # pandas read the file whole; csv's default limit of 131,072 characters a field would
    # fail on a long cell of a column floodsim ignores (notes, a geometry).
    csv.field_size_limit(max(csv.field_size_limit(), _FIELD_LIMIT))
    with path.open(encoding="utf-8-sig", newline="") as fh:
        for row, record in enumerate(csv.reader(fh), start=1):
            blank = len(record) == 1 and not record[0].strip()
            if record and len(record) < width and not blank:
                return row, len(record)
    return None


class _Table:
    """A household table as trimmed strings, with the spreadsheet row number of each row."""

    def __init__(self, path: Path) -> None:
        self.path = path
        if not path.is_file():
            raise PopulationError(f"{path}: {not_a_file(path, 'household table')}")
        try:
            # All text, nothing turned into NaN: parsing is done here so that every bad cell
            # gets a message naming its row and column. The header is read as a data row so
            # that pandas neither renames duplicate names nor turns a first column into an
            # index when rows are longer than the header; blank lines are kept (and dropped
            # below) so that row numbers match what a spreadsheet shows.
            raw = pd.read_csv(
                path,
                header=None,
                dtype=str,
                keep_default_na=False,
                skip_blank_lines=False,
                encoding="utf-8-sig",
            )
        except pd.errors.EmptyDataError:
            # pandas says the same of a file whose first line is blank: tell the two apart.
            text = path.read_text(encoding="utf-8-sig", errors="replace")
            problem = (
                "the first line is blank: the header row of column names must come first"
                if text.strip()
                else "empty file: expected a header row of column names"
            )
            raise self.error(1, None, problem) from None
        except pd.errors.ParserError as exc:
            if longer := longer_row(exc):
                line, problem = longer
                raise self.error(line, None, problem) from None
            detail = " ".join(str(exc).split())
            raise PopulationError(f"{path}: not a readable CSV table ({detail})") from None
        except UnicodeDecodeError as exc:
            raise PopulationError(f"{path}: not UTF-8 text ({exc.reason})") from None
        # pandas refuses a row longer than the header but pads a shorter one with empty cells:
        # a row that lost a cell in the middle would shift its later values into the wrong
        # columns (x into first_floor_height, ...) and could pass every check.
        if short := _short_row(path, len(raw.columns)):
            row, fields = short
            problem = f"{fields} fields, but the header has {len(raw.columns)}"
            raise self.error(row, None, problem)
        raw = raw.apply(lambda column: column.str.strip())
        header = raw.iloc[0].tolist()
        named = [name for name in header if name]
        if not named:
            raise self.error(1, None, "empty header: expected a row of column names")
        for name in named:
            if named.count(name) > 1:
                raise self.error(1, name, "duplicate column")
        frame = raw.iloc[1:]
        frame.columns = header
        frame = frame.loc[~(frame == "").all(axis=1)]
        self.frame = frame
        self.rows = frame.index.to_numpy() + 1  # the header is row 1, data starts at 2
        if frame.empty:
            raise self.error(2, None, "no households: the table has a header but no data rows")
        for name in REQUIRED_COLUMNS:
            if name not in frame.columns:
                # What the header holds, beside what it needs: a typo there is then seen at once.
                needed, found = ", ".join(REQUIRED_COLUMNS), ", ".join(map(str, header))
                msg = f"missing required column (needs {needed}; found {found})"
                raise self.error(1, name, msg)

    def __len__(self) -> int:
        return len(self.frame)

    def error(self, row: int, column: str | None, problem: str) -> PopulationError:
        where = f"row {row}" if column is None else f"row {row}, column {column}"
        return PopulationError(f"{self.path}: {where}: {problem}")

    def text(self, column: str) -> np.ndarray:
        return self.frame[column].to_numpy(dtype=object)

    def fail_at(self, column: str, bad: np.ndarray, problem: str) -> None:
        """Raise for the first row where ``bad`` is true; ``problem`` may use ``{value!r}``."""
        if np.any(bad):
            i = int(np.argmax(bad))
            value = self.text(column)[i]
            raise self.error(int(self.rows[i]), column, problem.format(value=value))

    def numbers(
        self,
        column: str,
        *,
        low: float | None = None,
        low_open: bool = False,
        high: float | None = None,
        integer: bool = False,
        allow_empty: bool = False,
    ) -> np.ndarray:
        """Parse a column as finite numbers (NaN for empty cells when ``allow_empty``)."""
        text = self.text(column)
        empty = text == ""
        if not allow_empty:
            self.fail_at(column, empty, "missing value")
        values = pd.to_numeric(pd.Series(text), errors="coerce").to_numpy(dtype=float)
        kind = "an integer" if integer else "a number"
        self.fail_at(column, ~empty & ~np.isfinite(values), f"expected {kind}, got {{value!r}}")
        if integer:
            self.fail_at(
                column, ~empty & (values != np.round(values)), "expected an integer, got {value!r}"
            )
        if low is not None:
            too_low = values <= low if low_open else values < low
            need = f"> {low:g}" if low_open else f">= {low:g}"
            self.fail_at(column, ~empty & too_low, f"must be {need}, got {{value!r}}")
        if high is not None:
            self.fail_at(column, ~empty & (values > high), f"must be <= {high:g}, got {{value!r}}")
        return values


def _check_grid_size(
    table: _Table, col: np.ndarray, row: np.ndarray, shape: tuple[int, int]
) -> None:
    """Refuse grid cells spanning more than :data:`MAX_GRID_CELLS`, naming the farthest one."""
    height, width = shape
    if height * width <= MAX_GRID_CELLS:
        return
    name, values = ("grid_col", col) if width >= height else ("grid_row", row)
    i = int(np.argmax(values))
    problem = (
        f"{values[i]} makes the households' grid {height:,} rows by {width:,} columns "
        f"({height * width:,} cells); Mesa builds every cell, so at most {MAX_GRID_CELLS:,} "
        "(number the cells the households use from 0)"
    )
    raise table.error(int(table.rows[i]), name, problem)


def _layout_cells(x: np.ndarray, y: np.ndarray) -> tuple[np.ndarray, np.ndarray, tuple[int, int]]:
    """Grid cells ``(cols, rows, (height, width))`` for households at map points ``x, y``."""
    n = x.size
    xs, col = np.unique(x, return_inverse=True)
    ys, row = np.unique(y, return_inverse=True)
    one_per_point = np.unique(row * xs.size + col).size == n
    if one_per_point and xs.size * ys.size <= 2 * n:
        return col, row, (int(ys.size), int(xs.size))
    # Scattered points: bands of `width` households by y, each band ordered by x, so grid
    # neighbours stay map neighbours and no cell is empty except at the end of the last band.
    height, width = _grid_shape(n)
    rank = np.empty(n, dtype=np.int64)
    rank[np.lexsort((x, y))] = np.arange(n)
    row = rank // width
    rank[np.lexsort((x, row))] = np.arange(n)
    return rank - row * width, row, (height, width)


def _table_seeds(
    table: _Table, ids: Sequence[str], config: PopulationConfig
) -> dict[str, list[SeedMemory]]:
    columns = table.frame.columns
    has_year = "prior_flood_year" in columns
    if "prior_flood_damage" in columns and not has_year:
        msg = "prior_flood_damage needs a prior_flood_year column (the year of that flood)"
        raise table.error(1, "prior_flood_year", msg)
    if not has_year:
        return {}
    # A calendar year, as survey_year is: a year like -5000000000 overflowed the memory's years.
    years = table.numbers("prior_flood_year", low=1000, high=9999, integer=True, allow_empty=True)
    if "prior_flood_damage" in columns:
        damages = table.numbers("prior_flood_damage", low=0.0, high=MAX_DOLLARS, allow_empty=True)
        orphan = np.isnan(years) & ~np.isnan(damages)
        table.fail_at("prior_flood_year", orphan, "missing: prior_flood_damage is given")
    else:
        damages = np.full(len(table), np.nan)
    if config.survey_year is not None:
        after = years > config.survey_year
        problem = f"{{value}} is after survey_year {config.survey_year}"
        table.fail_at("prior_flood_year", after, problem)
    seeds: dict[str, list[SeedMemory]] = {}
    for i in np.flatnonzero(~np.isnan(years)).tolist():
        year = int(years[i])
        damage = damages[i]
        if np.isnan(damage):
            content = f"In {year} my home was flooded"
        else:
            content = f"In {year} my home was flooded causing ${damage:,.0f} in damages"
        when = 0 if config.survey_year is None else year - config.survey_year
        memory = SeedMemory(content, config.prior_flood_importance, when, _SEED_TAGS)
        seeds[ids[i]] = [memory]
    return seeds


def load_population_table(path: Path, config: PopulationConfig) -> Population:
    """Read households from a CSV table (columns in the module docstring).

    Args:
        path: The CSV file (already resolved by the caller).
        config: Population settings; ``prior_flood_importance`` and ``survey_year`` apply.

    Returns:
        The population, in file order.

    Raises:
        PopulationError: For a missing, empty or unreadable file, a missing required column, or
            any bad cell (non-numeric, out of range, unknown tenure or zone, duplicate id),
            naming the file, row and column.
    """
    table = _Table(Path(path))

    ids = table.text("agent_id")
    table.fail_at("agent_id", ids == "", "missing value")
    duplicated = pd.Series(ids).duplicated().to_numpy()
    if np.any(duplicated):
        i = int(np.argmax(duplicated))
        first = int(np.argmax(ids == ids[i]))
        problem = f"duplicate agent_id {ids[i]!r} (first in row {table.rows[first]})"
        raise table.error(int(table.rows[i]), "agent_id", problem)

    tenure = np.char.lower(table.text("tenure").astype(str))
    known = ", ".join(TENURES)
    table.fail_at("tenure", ~np.isin(tenure, TENURES), f"unknown tenure {{value!r}} ({known})")
    owner = tenure == "owner"

    zone = np.char.upper(table.text("flood_zone").astype(str))
    zones = ", ".join(FLOOD_ZONES)
    table.fail_at("flood_zone", ~np.isin(zone, FLOOD_ZONES), f"unknown zone {{value!r}} ({zones})")

    income = table.numbers("income", low=0.0, low_open=True, high=MAX_DOLLARS)
    structure = table.numbers("structure_value", low=0.0, high=MAX_DOLLARS, allow_empty=True)
    table.fail_at(
        "structure_value", owner & ~(structure > 0), "owners need a value > 0, got {value!r}"
    )
    renter_problem = "renters do not own the building: must be 0 or empty, got {value!r}"
    table.fail_at("structure_value", ~owner & (structure > 0), renter_problem)
    structure = np.nan_to_num(structure, nan=0.0)
    contents = table.numbers("contents_value", low=0.0, high=MAX_DOLLARS)
    ground = table.numbers("ground_elevation", low=-MAX_GROUND_FT, high=MAX_GROUND_FT)
    floor = table.numbers("first_floor_height", low=0.0, high=MAX_FIRST_FLOOR_FT)
    x = table.numbers("x", low=-MAX_COORDINATE, high=MAX_COORDINATE)
    y = table.numbers("y", low=-MAX_COORDINATE, high=MAX_COORDINATE)

    columns = table.frame.columns
    if ("grid_col" in columns) != ("grid_row" in columns):
        given, missing = (
            ("grid_col", "grid_row") if "grid_col" in columns else ("grid_row", "grid_col")
        )
        raise table.error(1, missing, f"missing: {given} is given, so both are needed")
    if "grid_col" in columns:
        # Bounded before the cast: an index of 2**63 or more would wrap past the grid check.
        last = float(MAX_GRID_CELLS - 1)
        col = table.numbers("grid_col", low=0.0, high=last, integer=True).astype(np.int64)
        row = table.numbers("grid_row", low=0.0, high=last, integer=True).astype(np.int64)
        shape = (int(row.max()) + 1, int(col.max()) + 1)
        _check_grid_size(table, col, row, shape)
    else:
        col, row, shape = _layout_cells(x, y)

    id_list = ids.tolist()
    states = _states(id_list, tenure, income, structure, contents, zone, ground, floor, x, y)
    cells = list(zip(col.tolist(), row.tolist(), strict=True))
    return Population(states, shape, cells, _table_seeds(table, id_list, config))


def build_population(
    config: PopulationConfig, rng: np.random.Generator, base_dir: Path | None = None
) -> Population:
    """The run's households: loaded from ``config.table`` if given, otherwise generated.

    Args:
        config: The ``households:`` section.
        rng: The run's generator; a table uses no randomness and leaves it untouched.
        base_dir: Directory a relative ``table`` path is relative to (the config file's);
            ``None`` = the working directory.

    Returns:
        The population.

    Raises:
        PopulationError: If the table cannot be used.
    """
    if config.table is None:
        return generate_population(config, rng)
    path = Path(config.table).expanduser()
    if not path.is_absolute() and base_dir is not None:
        path = Path(base_dir) / path
    return load_population_table(path, config)


def insure_at_start(
    population: Population, shares: Mapping[str, float], rng: np.random.Generator
) -> int:
    """Give the households their policies at the start (``initial_insured_share``).

    Args:
        population: The run's households; their states are changed in place.
        shares: The share insured per zone, as the config gives it (see :func:`by_zone`).
        rng: A generator of its own: one uniform per household, whatever its zone, so a
            household's draw does not hang on the others' zones or shares.

    Returns:
        How many households start insured.
    """
    if not any(shares.values()):
        return 0
    share = by_zone(shares, 0.0)
    draws = rng.random(len(population.states)).tolist()
    insured = 0
    for state, draw in zip(population.states, draws, strict=True):
        if draw < share[state.flood_zone]:
            if state.tenure == "owner":
                state.has_insurance = True
            else:
                state.has_contents_insurance = True
            state.insured_years = 1
            insured += 1
    return insured


def _states(
    ids: list[str],
    tenure: np.ndarray,
    income: np.ndarray,
    structure: np.ndarray,
    contents: np.ndarray,
    zone: np.ndarray,
    ground: np.ndarray,
    floor: np.ndarray,
    x: np.ndarray,
    y: np.ndarray,
) -> list[HouseholdState]:
    """Household records from per-household columns (generated or read from a table).

    Values become Python scalars (not numpy ones) so states serialise and compare like
    hand-made ones.
    """
    return [
        HouseholdState(
            agent_id=aid,
            tenure=ten,
            income=inc,
            structure_value=sv,
            contents_value=cv,
            flood_zone=fz,
            ground_elevation=gr,
            first_floor_height=ff,
            x=xx,
            y=yy,
        )
        for aid, ten, inc, sv, cv, fz, gr, ff, xx, yy in zip(
            ids,
            tenure.tolist(),
            income.tolist(),
            structure.tolist(),
            contents.tolist(),
            zone.tolist(),
            ground.tolist(),
            floor.tolist(),
            x.tolist(),
            y.tolist(),
            strict=True,
        )
    ]


def population_table(
    states: Sequence[HouseholdState], cells: Sequence[Sequence[int]]
) -> pd.DataFrame:
    """The households' fixed attributes as a household table (the columns this module reads).

    A run writes it as ``households.csv`` at its start: a household's tenure, zone, income,
    values, elevations, coordinates and grid cell, to join its audit lines by ``agent_id``, and
    a table :func:`load_population_table` reads back to the same households (their pre-seeded
    memories are not in it: those are the year-0 lines of ``memory_updates``).

    Args:
        states: The households, in the run's order.
        cells: Each household's ``(col, row)`` grid cell, aligned with ``states``.

    Returns:
        One row per household, columns :data:`REQUIRED_COLUMNS` then ``grid_col`` and
        ``grid_row``.
    """
    columns = {name: [getattr(s, name) for s in states] for name in REQUIRED_COLUMNS}
    columns["grid_col"] = [col for col, _row in cells]
    columns["grid_row"] = [row for _col, row in cells]
    return pd.DataFrame(columns)
