"""Household populations: generation statistics, reproducibility, CSV tables and their errors."""

from __future__ import annotations

import dataclasses
import re
from pathlib import Path

import numpy as np
import pytest
from pydantic import ValidationError

from simulation.agents.population import (
    FLOOD_ZONES,
    GENERATED_FLOOD_MEMORY,
    REQUIRED_COLUMNS,
    Population,
    PopulationConfig,
    PopulationError,
    SeedMemory,
    build_population,
    generate_population,
    insure_at_start,
    load_population_table,
    population_table,
)
from simulation.agents.state import HouseholdState

EXAMPLE = Path(__file__).parent / "data" / "households_small.csv"

HEADER = ",".join(REQUIRED_COLUMNS)
GOOD_ROWS = [
    "A1,owner,50000,200000,100000,AE,5.0,2.0,0,0",
    "A2,renter,30000,0,20000,X,12.0,1.0,30,0",
]


def _generate(seed: int = 0, **settings: object) -> Population:
    return generate_population(PopulationConfig(**settings), np.random.default_rng(seed))


def _column(population: Population, name: str) -> np.ndarray:
    return np.array([getattr(state, name) for state in population.states])


@pytest.fixture(scope="module")
def big() -> Population:
    return _generate(seed=7, count=20_000)


def _write_csv(tmp_path: Path, lines: list[str], name: str = "households.csv") -> Path:
    path = tmp_path / name
    path.write_text("\n".join(lines) + "\n")
    return path


def _table_error(path: Path) -> str:
    with pytest.raises(PopulationError) as info:
        load_population_table(path, PopulationConfig())
    message = str(info.value)
    assert "\n" not in message
    assert str(path) in message
    return message


# --- generation ------------------------------------------------------------------------------


def test_count_ids_and_grid_order() -> None:
    population = _generate(count=10)
    assert len(population) == 10
    assert [s.agent_id for s in population.states] == [f"H{i:05d}" for i in range(1, 11)]
    assert population.grid_shape == (3, 4)  # width ceil(sqrt(10)) = 4, 3 rows
    assert population.cells[:5] == [(0, 0), (1, 0), (2, 0), (3, 0), (0, 1)]
    assert len(set(population.cells)) == 10
    first, fifth = population.states[0], population.states[4]
    assert (first.x, first.y) == (0.0, 0.0)
    assert (fifth.x, fifth.y) == (0.0, 30.0)
    assert all(isinstance(s, HouseholdState) for s in population.states)


def test_ids_widen_past_five_digits() -> None:
    population = _generate(count=100_000)
    assert population.states[0].agent_id == "H000001"
    assert population.states[-1].agent_id == "H100000"
    assert len({s.agent_id for s in population.states}) == 100_000


def test_single_household() -> None:
    population = _generate(count=1)
    assert population.grid_shape == (1, 1)
    assert population.cells == [(0, 0)]


def test_owner_share_and_renter_values(big: Population) -> None:
    owner = _column(big, "tenure") == "owner"
    assert abs(owner.mean() - 0.65) < 0.03
    structure = _column(big, "structure_value")
    contents = _column(big, "contents_value")
    assert np.all(structure[~owner] == 0.0)
    assert np.all(structure[owner] > 0.0)
    assert np.all(contents > 0.0)
    np.testing.assert_allclose(contents[owner], 0.5 * structure[owner], atol=0.5)
    assert 200_000 < np.median(structure[owner]) < 300_000
    assert 24_000 < np.median(contents[~owner]) < 36_000
    assert 60_000 < np.median(_column(big, "income")) < 80_000


def test_owner_share_follows_config() -> None:
    owner = _column(_generate(count=20_000, owner_share=0.3), "tenure") == "owner"
    assert abs(owner.mean() - 0.3) < 0.03
    assert set(_column(_generate(count=50, owner_share=1.0), "tenure")) == {"owner"}


def test_lognormal_sigmas_follow_config() -> None:
    sigmas = {"income": 0.9, "structure_value": 0.3, "renter_contents": 0.8}
    population = _generate(count=20_000, **{key: {"sigma": s} for key, s in sigmas.items()})
    owner = _column(population, "tenure") == "owner"
    log_income = np.log(_column(population, "income"))
    log_structure = np.log(_column(population, "structure_value")[owner])
    log_renter_contents = np.log(_column(population, "contents_value")[~owner])
    assert log_income.std() == pytest.approx(0.9, rel=0.05)
    assert log_structure.std() == pytest.approx(0.3, rel=0.05)
    assert log_renter_contents.std() == pytest.approx(0.8, rel=0.05)
    # sigma 0: everybody gets the median
    flat = _generate(count=500, **{key: {"sigma": 0} for key in sigmas})
    owner = _column(flat, "tenure") == "owner"
    assert set(_column(flat, "income")) == {70_000.0}
    assert set(_column(flat, "structure_value")[owner]) == {250_000.0}
    assert set(_column(flat, "contents_value")[~owner]) == {30_000.0}


def test_contents_ratio_sets_owner_contents() -> None:
    population = _generate(count=2000, contents_ratio=0.3)
    owner = _column(population, "tenure") == "owner"
    structure = _column(population, "structure_value")[owner]
    contents = _column(population, "contents_value")[owner]
    assert owner.any()
    # rounded to whole dollars like every generated value
    np.testing.assert_array_equal(contents, np.round(0.3 * structure))


def test_flood_zones_follow_ground(big: Population) -> None:
    zone = _column(big, "flood_zone")
    ground = _column(big, "ground_elevation")
    ae = zone == "AE"
    assert set(zone) == {"AE", "X"}
    assert 0.33 <= ae.mean() <= 0.42  # documented: about 37.5 %
    assert np.all(ground[ae] < 9.0)
    assert np.all(ground[~ae] >= 9.0)
    assert ground[ae].mean() < ground[~ae].mean() - 4.0
    # ground rises away from the river along y = 0
    y = _column(big, "y")
    assert ground[y == 0].mean() < ground[y == y.max()].mean()


def test_bfe_moves_the_floodplain() -> None:
    low = (_column(_generate(count=5000, bfe_ft=7.0), "flood_zone") == "AE").mean()
    high = (_column(_generate(count=5000, bfe_ft=12.0), "flood_zone") == "AE").mean()
    assert low < 0.25
    assert high > 0.55


def test_ground_rises_from_base_at_the_river_to_base_plus_rise_at_the_far_row() -> None:
    population = _generate(count=12, ground={"base": 2.0, "rise": 7.0, "noise_sd": 0})
    assert population.grid_shape == (3, 4)
    ground = _column(population, "ground_elevation")
    rows = np.array([row for _, row in population.cells])
    np.testing.assert_array_equal(ground[rows == 0], 2.0)
    np.testing.assert_array_equal(ground[rows == 1], 5.5)
    np.testing.assert_array_equal(ground[rows == 2], 9.0)


def test_ground_exactly_at_bfe_is_zone_x() -> None:
    # 9 x 9 grid: ground 4.5 + 12 * row / 8 is 7.5 ft in row 2 and exactly 9.0 ft in row 3
    population = _generate(count=81, bfe_ft=9.0, ground={"base": 4.5, "rise": 12, "noise_sd": 0})
    assert population.grid_shape == (9, 9)
    ground = _column(population, "ground_elevation")
    zone = _column(population, "flood_zone")
    rows = np.array([row for _, row in population.cells])
    np.testing.assert_array_equal(ground[rows == 3], 9.0)
    assert set(zone[rows == 3]) == {"X"}
    assert set(zone[rows == 2]) == {"AE"}
    assert set(zone[rows > 3]) == {"X"}


def test_first_floor_heights(big: Population) -> None:
    floor = _column(big, "first_floor_height")
    ae = _column(big, "flood_zone") == "AE"
    assert floor.min() >= 0.0
    assert floor.max() <= 6.0
    assert floor[ae].mean() - floor[~ae].mean() == pytest.approx(1.0, abs=0.1)
    clipped = _column(
        _generate(count=2000, first_floor_height={"mean": 3, "sd": 5, "low": 1, "high": 4}),
        "first_floor_height",
    )
    assert clipped.min() == 1.0
    assert clipped.max() == 4.0


def test_same_seed_same_population_different_seed_different() -> None:
    a, b, c = (
        _generate(seed=3, count=500),
        _generate(seed=3, count=500),
        _generate(seed=4, count=500),
    )
    assert a == b
    assert [s.income for s in a.states] != [s.income for s in c.states]


def test_draws_do_not_depend_on_settings() -> None:
    after = []
    for settings in ({}, {"prior_flood_share": 0.5, "owner_share": 0.1, "ground": {"noise_sd": 0}}):
        rng = np.random.default_rng(11)
        generate_population(PopulationConfig(count=300, **settings), rng)
        after.append(rng.random())
    assert after[0] == after[1]


def test_no_seeds_by_default(big: Population) -> None:
    assert big.seeds == {}


def test_prior_flood_seeds_only_for_ae() -> None:
    population = _generate(count=5000, prior_flood_share=0.5, prior_flood_importance=0.7)
    zone = {s.agent_id: s.flood_zone for s in population.states}
    n_ae = sum(z == "AE" for z in zone.values())
    assert population.seeds
    assert all(zone[agent_id] == "AE" for agent_id in population.seeds)
    assert abs(len(population.seeds) / n_ae - 0.5) < 0.05
    memories = next(iter(population.seeds.values()))
    assert memories == [SeedMemory(GENERATED_FLOOD_MEMORY, 0.7, 0, ("flood", "survey"))]
    everyone = _generate(count=500, prior_flood_share=1.0)
    assert len(everyone.seeds) == sum(s.flood_zone == "AE" for s in everyone.states)


def test_population_is_frozen() -> None:
    population = _generate(count=4)
    with pytest.raises(dataclasses.FrozenInstanceError):
        population.grid_shape = (9, 9)  # type: ignore[misc]


# --- config ----------------------------------------------------------------------------------


def test_config_defaults_are_documented() -> None:
    config = PopulationConfig()
    assert config.count == 1000
    assert config.table is None
    assert config.income.median == 70_000
    assert config.bfe_ft == 9.0
    # a partly given section keeps the other defaults of that section
    partial = PopulationConfig(income={"median": 50_000}, renter_contents={"sigma": 0.1})
    assert partial.income.sigma == 0.7
    assert partial.renter_contents.median == 30_000
    assert PopulationConfig(ground={"rise": 5}).ground.base == 4.5
    for name, field in PopulationConfig.model_fields.items():
        assert field.description, name


@pytest.mark.parametrize(
    ("settings", "key"),
    [
        ({"households": 10}, "households"),
        ({"income": {"median": 1, "mean": 2}}, "mean"),
        ({"ground": {"slope": 1}}, "slope"),
    ],
)
def test_config_rejects_unknown_keys(settings: dict, key: str) -> None:
    with pytest.raises(ValidationError, match=key):
        PopulationConfig(**settings)


@pytest.mark.parametrize(
    ("settings", "key"),
    [
        ({"count": 0}, "count"),
        ({"count": True}, "count"),
        ({"count": 2.5}, "count"),
        ({"owner_share": 1.2}, "owner_share"),
        ({"income": {"median": -5, "sigma": 0.7}}, "median"),
        ({"structure_value": {"median": 1, "sigma": -0.1}}, "sigma"),
        ({"contents_ratio": -1}, "contents_ratio"),
        ({"cell_size": 0}, "cell_size"),
        ({"ground": {"noise_sd": -1}}, "noise_sd"),
        ({"bfe_ft": float("nan")}, "bfe_ft"),
        ({"first_floor_height": {"low": 5, "high": 2}}, "first_floor_height"),
        ({"prior_flood_share": 1.5}, "prior_flood_share"),
        ({"prior_flood_importance": -0.1}, "prior_flood_importance"),
        ({"table": ""}, "table"),
    ],
)
def test_config_rejects_out_of_range(settings: dict, key: str) -> None:
    with pytest.raises(ValidationError, match=key):
        PopulationConfig(**settings)


def test_config_is_frozen() -> None:
    with pytest.raises(ValidationError):
        PopulationConfig().count = 5  # type: ignore[misc]


# --- tables ----------------------------------------------------------------------------------


def test_example_table_loads() -> None:
    population = load_population_table(EXAMPLE, PopulationConfig())
    assert len(population) == 12
    assert population.states[0] == HouseholdState(
        agent_id="H00001",
        tenure="owner",
        income=82000.0,
        structure_value=310000.0,
        contents_value=155000.0,
        flood_zone="AE",
        ground_elevation=5.1,
        first_floor_height=2.5,
        x=0.0,
        y=0.0,
    )
    renter = population.states[4]
    assert renter.tenure == "renter"
    assert renter.structure_value == 0.0  # left empty in the file
    # coordinates on a 4 x 3 lattice give the grid directly
    assert population.grid_shape == (3, 4)
    assert population.cells[:6] == [(0, 0), (1, 0), (2, 0), (3, 0), (0, 1), (1, 1)]
    assert population.seeds == {
        "H00001": [
            SeedMemory(
                "In 2012 my home was flooded causing $18,000 in damages",
                0.8,
                0,
                ("flood", "survey"),
            )
        ],
        "H00002": [SeedMemory("In 2012 my home was flooded", 0.8, 0, ("flood", "survey"))],
        "H00004": [
            SeedMemory(
                "In 2018 my home was flooded causing $42,500 in damages",
                0.8,
                0,
                ("flood", "survey"),
            )
        ],
    }


def test_survey_year_dates_seeded_memories() -> None:
    population = load_population_table(EXAMPLE, PopulationConfig(survey_year=2020))
    assert population.seeds["H00001"][0].year == -8
    assert population.seeds["H00004"][0].year == -2


def test_survey_year_before_a_reported_flood_is_an_error() -> None:
    with pytest.raises(PopulationError, match=r"row 2, column prior_flood_year: 2012 is after"):
        load_population_table(EXAMPLE, PopulationConfig(survey_year=2010))


def test_flood_in_the_survey_year_is_remembered_at_year_zero(tmp_path: Path) -> None:
    lines = [
        f"{HEADER},prior_flood_year,prior_flood_damage",
        f"{GOOD_ROWS[0]},2012,5000",
        f"{GOOD_ROWS[1]},2011,",
    ]
    config = PopulationConfig(survey_year=2012)
    population = load_population_table(_write_csv(tmp_path, lines), config)
    assert population.seeds == {
        "A1": [
            SeedMemory(
                "In 2012 my home was flooded causing $5,000 in damages",
                0.8,
                0,
                ("flood", "survey"),
            )
        ],
        "A2": [SeedMemory("In 2011 my home was flooded", 0.8, -1, ("flood", "survey"))],
    }


def test_table_normalises_case_and_spaces(tmp_path: Path) -> None:
    path = _write_csv(
        tmp_path, [HEADER + ",extra", " B1 , Owner ,50000,1,1, ae ,5,0,0,0,ignored", "", ""]
    )
    (state,) = load_population_table(path, PopulationConfig()).states
    assert (state.agent_id, state.tenure, state.flood_zone) == ("B1", "owner", "AE")
    assert state.flood_zone in FLOOD_ZONES


def test_table_grid_columns(tmp_path: Path) -> None:
    path = _write_csv(
        tmp_path,
        [HEADER + ",grid_col,grid_row", GOOD_ROWS[0] + ",2,0", GOOD_ROWS[1] + ",2,5"],
    )
    population = load_population_table(path, PopulationConfig())
    assert population.cells == [(2, 0), (2, 5)]
    assert population.grid_shape == (6, 3)


def test_table_scattered_coordinates_get_compact_cells(tmp_path: Path) -> None:
    rng = np.random.default_rng(5)
    lines = [HEADER]
    for i, (x, y) in enumerate(rng.uniform(0, 1000, size=(10, 2))):
        lines.append(f"S{i},renter,30000,0,20000,X,12,1,{x:.3f},{y:.3f}")
    population = load_population_table(_write_csv(tmp_path, lines), PopulationConfig())
    assert population.grid_shape == (3, 4)
    assert len(set(population.cells)) == 10
    ys = [s.y for s in population.states]
    rows = [row for _, row in population.cells]
    # bands by y: every household in a lower row lies south of every one in a higher row
    for a in range(10):
        for b in range(10):
            if rows[a] < rows[b]:
                assert ys[a] < ys[b]


def test_table_incomplete_lattice_keeps_lattice_cells(tmp_path: Path) -> None:
    # 5 of the 9 points of a 3 x 3 lattice: at least half are used, so the lattice is the grid
    points = [(0, 0), (2, 0), (1, 1), (0, 2), (2, 2)]
    lines = [HEADER]
    for i, (col, row) in enumerate(points):
        lines.append(f"L{i},renter,30000,0,20000,X,12,1,{100 + 30 * col},{500 + 30 * row}")
    population = load_population_table(_write_csv(tmp_path, lines), PopulationConfig())
    assert population.grid_shape == (3, 3)
    assert population.cells == points


def test_build_population_dispatches(tmp_path: Path) -> None:
    rng = np.random.default_rng(1)
    assert len(build_population(PopulationConfig(count=7), rng, None)) == 7
    (tmp_path / "data").mkdir()
    _write_csv(tmp_path / "data", [HEADER, *GOOD_ROWS], name="h.csv")
    config = PopulationConfig(count=7, table="data/h.csv")
    state_before = rng.bit_generator.state
    population = build_population(config, rng, tmp_path)
    assert [s.agent_id for s in population.states] == ["A1", "A2"]
    assert rng.bit_generator.state == state_before
    absolute = PopulationConfig(table=str(tmp_path / "data" / "h.csv"))
    assert len(build_population(absolute, rng, Path("/elsewhere"))) == 2


# --- table errors ----------------------------------------------------------------------------


def test_missing_file(tmp_path: Path) -> None:
    message = _table_error(tmp_path / "nope.csv")
    assert "not found" in message


def test_empty_file(tmp_path: Path) -> None:
    path = tmp_path / "empty.csv"
    path.write_text("")
    message = _table_error(path)
    assert "row 1" in message
    assert "empty file" in message


def test_a_blank_first_line_is_named_as_such(tmp_path: Path) -> None:
    table = _write_csv(tmp_path, [HEADER])
    path = tmp_path / "blank_first.csv"
    path.write_text("\n" + table.read_text())
    message = _table_error(path)
    assert "row 1" in message
    assert "the first line is blank" in message


def test_header_only(tmp_path: Path) -> None:
    message = _table_error(_write_csv(tmp_path, [HEADER]))
    assert "row 2" in message
    assert "no households" in message


def test_missing_column(tmp_path: Path) -> None:
    header = HEADER.replace(",contents_value", "")
    rows = [r.replace(",100000,", ",").replace(",20000,", ",") for r in GOOD_ROWS]
    message = _table_error(_write_csv(tmp_path, [header, *rows]))
    assert "row 1, column contents_value: missing required column (needs " in message
    assert f"; found {header.replace(',', ', ')})" in message  # a typo in it is seen at once


@pytest.mark.parametrize(
    ("bad_row", "expected"),
    [
        # row 3 = the second data row (header is row 1)
        (
            "B,owner,abc,200000,100000,AE,5,2,0,0",
            r"row 3, column income: expected a number, got 'abc'",
        ),
        ("B,owner,0,200000,100000,AE,5,2,0,0", r"row 3, column income: must be > 0"),
        ("B,owner,,200000,100000,AE,5,2,0,0", r"row 3, column income: missing value"),
        (
            "B,owner,5e4,200000,-1,AE,5,2,0,0",
            r"row 3, column contents_value: must be >= 0, got '-1'",
        ),
        ("B,landlord,5e4,1,1,AE,5,2,0,0", r"row 3, column tenure: unknown tenure 'landlord'"),
        (
            "A1,owner,5e4,1,1,AE,5,2,0,0",
            r"row 3, column agent_id: duplicate agent_id 'A1' \(first in row 2\)",
        ),
        (",owner,5e4,1,1,AE,5,2,0,0", r"row 3, column agent_id: missing value"),
        ("B,owner,5e4,1,1,Q,5,2,0,0", r"row 3, column flood_zone: unknown zone 'Q'"),
        ("B,owner,5e4,0,1,AE,5,2,0,0", r"row 3, column structure_value: owners need a value > 0"),
        ("B,renter,5e4,9,1,AE,5,2,0,0", r"row 3, column structure_value: renters do not own"),
        ("B,owner,5e4,1,1,AE,5,-0.5,0,0", r"row 3, column first_floor_height: must be >= 0"),
        ("B,owner,5e4,1,1,AE,inf,2,0,0", r"row 3, column ground_elevation: expected a number"),
        ("B,owner,5e4,1,1,AE,5,2,0,nan", r"row 3, column y: expected a number"),
    ],
)
def test_bad_cell_names_row_and_column(tmp_path: Path, bad_row: str, expected: str) -> None:
    message = _table_error(_write_csv(tmp_path, [HEADER, GOOD_ROWS[0], bad_row]))
    assert re.search(expected, message), message


@pytest.mark.parametrize("blank", ["", " ", "\t  "], ids=["empty", "a-space", "tab-and-spaces"])
def test_row_numbers_count_blank_lines(tmp_path: Path, blank: str) -> None:
    lines = [HEADER, GOOD_ROWS[0], blank, "B,owner,abc,1,1,AE,5,2,0,0"]
    message = _table_error(_write_csv(tmp_path, lines))
    assert "row 4, column income" in message


@pytest.mark.parametrize("blank", [" ", "   ", "\t"])
def test_a_line_of_spaces_is_skipped_as_a_blank_line_is(tmp_path: Path, blank: str) -> None:
    """An editor often leaves one at the end of a file."""
    lines = [HEADER, *GOOD_ROWS, blank, blank]
    population = load_population_table(_write_csv(tmp_path, lines), PopulationConfig())
    assert len(population.states) == len(GOOD_ROWS)


@pytest.mark.parametrize(
    ("extra_header", "cells", "expected"),
    [
        ("prior_flood_year", ["", "20x"], r"row 3, column prior_flood_year: expected an integer"),
        (
            "prior_flood_year",
            ["", "2012.5"],
            r"row 3, column prior_flood_year: expected an integer",
        ),
        # A calendar year: -5000000000 was read, then overflowed the memory's year mid-run.
        (
            "prior_flood_year",
            ["2010", "-5000000000"],
            r"row 3, column prior_flood_year: must be >= 1000, got '-5000000000'",
        ),
        ("prior_flood_year", ["2010", "12021"], r"row 3, column prior_flood_year: must be <= 9999"),
        (
            "prior_flood_year,prior_flood_damage",
            ["2010,5", ",300"],
            r"row 3, column prior_flood_year: missing: prior_flood_damage is given",
        ),
        (
            "prior_flood_year,prior_flood_damage",
            ["2010,5", "2011,-3"],
            r"row 3, column prior_flood_damage: must be >= 0",
        ),
        ("prior_flood_damage", ["5", "6"], r"row 1, column prior_flood_year"),
        ("grid_col", ["0", "1"], r"row 1, column grid_row: missing"),
        ("grid_col,grid_row", ["0,0", "-1,0"], r"row 3, column grid_col: must be >= 0"),
        # Not wrapped to a negative index by the cast past the grid's size check.
        ("grid_col,grid_row", ["0,0", "1e19,0"], r"row 3, column grid_col: must be <= 999999"),
    ],
)
def test_bad_optional_columns(
    tmp_path: Path, extra_header: str, cells: list[str], expected: str
) -> None:
    lines = [
        f"{HEADER},{extra_header}",
        *(f"{r},{c}" for r, c in zip(GOOD_ROWS, cells, strict=True)),
    ]
    message = _table_error(_write_csv(tmp_path, lines))
    assert re.search(expected, message), message


def test_a_long_cell_of_an_ignored_column_is_read(tmp_path: Path) -> None:
    """Python's csv limits a field to 131,072 characters; pandas, which read it, does not."""
    lines = [f"{HEADER},notes", f"{GOOD_ROWS[0]},{'a' * 200_000}", f"{GOOD_ROWS[1]},short"]
    population = load_population_table(_write_csv(tmp_path, lines), PopulationConfig())
    assert len(population.states) == 2


def test_row_longer_than_header(tmp_path: Path) -> None:
    message = _table_error(_write_csv(tmp_path, [HEADER, GOOD_ROWS[0], GOOD_ROWS[1] + ",surplus"]))
    assert "row 3: 11 fields, but the header has 10" in message


def test_row_shorter_than_header(tmp_path: Path) -> None:
    # A cell lost in the middle (first_floor_height): pandas pads the row at its end, so
    # every later value would move one column left (x into first_floor_height, the
    # prior-flood year into y) and the row would pass every check.
    header = f"{HEADER},prior_flood_year,prior_flood_damage"
    short = "A2,renter,30000,0,20000,X,12.0,30,0,2012,"
    lines = [header, GOOD_ROWS[0] + ",,", "", short]
    message = _table_error(_write_csv(tmp_path, lines))
    assert message.endswith(": row 4: 11 fields, but the header has 12")


def test_duplicate_column(tmp_path: Path) -> None:
    lines = [HEADER + ",income", *(row + ",1" for row in GOOD_ROWS)]
    message = _table_error(_write_csv(tmp_path, lines))
    assert "row 1, column income: duplicate column" in message


def test_unnamed_extra_columns_are_ignored(tmp_path: Path) -> None:
    lines = [HEADER + ",notes,", GOOD_ROWS[0] + ",hello,", GOOD_ROWS[1] + ",,"]
    assert len(load_population_table(_write_csv(tmp_path, lines), PopulationConfig())) == 2


# --- policies at the start -----------------------------------------------------------------------


def test_households_start_insured_in_their_zones_share_owners_and_renters_alike(
    big: Population,
) -> None:
    population = dataclasses.replace(big, states=[dataclasses.replace(s) for s in big.states])
    rng = np.random.default_rng(3)
    insured = insure_at_start(population, {"AE": 0.3, "X": 0.02}, rng)
    zone = _column(population, "flood_zone")
    owner = _column(population, "tenure") == "owner"
    policy = _column(population, "has_insurance") | _column(population, "has_contents_insurance")
    assert insured == policy.sum()
    assert policy[zone == "AE"].mean() == pytest.approx(0.3, abs=0.02)
    assert policy[zone == "X"].mean() == pytest.approx(0.02, abs=0.005)
    # Owners insure building and contents, renters their contents: the skills' own policies.
    assert not (_column(population, "has_contents_insurance") & owner).any()
    assert not (_column(population, "has_insurance") & ~owner).any()
    assert policy[owner].any()
    assert policy[~owner].any()
    assert (_column(population, "insured_years")[policy] == 1).all()
    assert (_column(population, "insured_years")[~policy] == 0).all()
    # One draw per household whatever the shares: the draw of one does not hang on the others'.
    assert rng.bit_generator.state == _advanced(3, len(population.states))


def _advanced(seed: int, draws: int) -> dict:
    rng = np.random.default_rng(seed)
    rng.random(draws)
    return rng.bit_generator.state


def test_no_share_insures_nobody_and_draws_nothing() -> None:
    population = _generate(count=50)
    rng = np.random.default_rng(3)
    assert insure_at_start(population, {}, rng) == 0
    assert insure_at_start(population, {"AE": 0.0, "X": 0.0}, rng) == 0
    assert not any(s.has_insurance or s.has_contents_insurance for s in population.states)
    assert rng.bit_generator.state == np.random.default_rng(3).bit_generator.state


@pytest.mark.parametrize(
    ("shares", "problem"),
    [({"AE": 1.5}, "less than or equal to 1"), ({"Z": 0.3}, "Input should be 'AE'")],
)
def test_initial_insured_shares_are_checked(shares: dict, problem: str) -> None:
    with pytest.raises(ValidationError, match=problem):
        PopulationConfig(initial_insured_share=shares)


# --- the run's households.csv ----------------------------------------------------------------


@pytest.mark.parametrize("source", ["generated", "table"])
def test_a_population_table_reads_back_to_the_same_households(tmp_path: Path, source) -> None:
    """A run's households.csv loads as ``households.table`` to equal states, cells and grid."""
    population = (
        _generate(seed=3, count=47)  # not a square: the last grid row is part-filled
        if source == "generated"
        else load_population_table(EXAMPLE, PopulationConfig())
    )
    path = tmp_path / "households.csv"
    population_table(population.states, population.cells).to_csv(path, index=False)
    again = load_population_table(path, PopulationConfig())
    assert again.states == population.states  # floats to the bit, zones and tenures as read
    assert again.cells == population.cells
    assert again.grid_shape == population.grid_shape
    assert again.seeds == {}  # pre-seeded memories are not attributes


def test_a_population_table_has_the_table_columns_in_order() -> None:
    population = _generate(count=4)
    table = population_table(population.states, population.cells)
    assert list(table.columns) == [*REQUIRED_COLUMNS, "grid_col", "grid_row"]
    assert table["agent_id"].tolist() == ["H00001", "H00002", "H00003", "H00004"]


@pytest.mark.parametrize(
    ("column", "value", "refusal"),
    [
        ("contents_value", "1e308", r"column contents_value: must be <= 1e\+12, got '1e308'"),
        ("income", "2e12", r"column income: must be <= 1e\+12"),
        ("ground_elevation", "-1e308", r"column ground_elevation: must be >= -100000"),
        ("first_floor_height", "5000", r"column first_floor_height: must be <= 1000"),
        # Looking up a household's raster cell overflowed, with numpy's warning.
        ("x", "1e308", r"column x: must be <= 1e\+15, got '1e308'"),
        ("y", "-2e15", r"column y: must be >= -1e\+15, got '-2e15'"),
    ],
)
def test_a_finite_value_far_beyond_any_home_is_refused(
    tmp_path: Path, column: str, value: str, refusal: str
) -> None:
    """1e308 of contents passed, and the run went on with infinite and NaN damage."""
    row = dict(zip(REQUIRED_COLUMNS, GOOD_ROWS[1].split(","), strict=True)) | {column: value}
    message = _table_error(_write_csv(tmp_path, [HEADER, GOOD_ROWS[0], ",".join(row.values())]))
    assert re.search(rf"row 3, {refusal}", message), message


@pytest.mark.parametrize(
    ("settings", "refusal"),
    [
        ({"income": {"median": 2e12}}, r"generated income reaches .*: change households\.income"),
        (
            {"structure_value": {"median": 1e306}},
            r"generated structure_value reaches \d\.\d+e\+306, beyond the 1e\+12",
        ),
        ({"ground": {"base": -200000}}, r"generated ground_elevation reaches -2e\+05"),
    ],
)
def test_generated_values_a_household_table_would_refuse_are_refused(settings, refusal) -> None:
    """A run's households.csv loads back as a table: generation keeps within its bounds."""
    with pytest.raises(PopulationError, match=refusal):
        _generate(count=50, **settings)


def test_a_generated_run_loads_back_from_its_households_csv_at_the_bounds(tmp_path) -> None:
    population = _generate(count=50, income={"median": 1e9, "sigma": 0.0})
    path = tmp_path / "households.csv"
    population_table(population.states, population.cells).to_csv(path, index=False)
    assert load_population_table(path, PopulationConfig()).states == population.states


@pytest.mark.parametrize("setting", ["income", "structure_value"])
def test_a_draw_that_rounds_to_no_dollars_is_one_dollar(tmp_path: Path, setting: str) -> None:
    """A run's households.csv loads back: $0 of income or of an owner's building would not."""
    population = _generate(count=40, **{setting: {"median": 0.3, "sigma": 0.1}})
    values = _column(population, setting)
    owners = _column(population, "tenure") == "owner"
    assert (values[owners if setting == "structure_value" else slice(None)] == 1.0).all()
    path = tmp_path / "households.csv"
    population_table(population.states, population.cells).to_csv(path, index=False)
    assert load_population_table(path, PopulationConfig()).states == population.states
