"""Hazard sources and ESRI ASCII grids: depths per household, reproducibility, input errors."""

from __future__ import annotations

import re
from typing import TYPE_CHECKING

import numpy as np
import pytest

import simulation.hazard.sources as sources_module
from simulation.hazard import (
    FEET_PER_METRE,
    AsciiGrid,
    HazardError,
    HazardSource,
    RasterSource,
    ScriptedSource,
    Sites,
    StochasticSource,
    make_source,
    read_ascii_grid,
)

if TYPE_CHECKING:
    from pathlib import Path

EULER_GAMMA = 0.5772156649


def _sites(
    ground: list[float], x: list[float] | None = None, y: list[float] | None = None
) -> Sites:
    n = len(ground)
    return Sites(
        x=np.array(x if x is not None else [0.0] * n),
        y=np.array(y if y is not None else [0.0] * n),
        ground_elevation=np.array(ground, dtype=float),
    )


GRID = """\
ncols 4
nrows 3
xllcorner 100.0
yllcorner 200.0
cellsize 10.0
NODATA_value -9999
0.0 0.5 1.0 1.5
2.0 -9999 3.0 3.5
4.0 4.5 5.0 5.5
"""


def _write(tmp_path: Path, text: str, name: str = "grid.asc") -> Path:
    path = tmp_path / name
    path.write_text(text)
    return path


# --- Sites ----------------------------------------------------------------------------------


def test_sites_require_equal_lengths() -> None:
    with pytest.raises(HazardError, match="lengths 2, 2 and 3"):
        Sites(x=np.zeros(2), y=np.zeros(2), ground_elevation=np.zeros(3))


def test_sites_reject_nan_ground() -> None:
    with pytest.raises(
        HazardError, match=r"Sites.ground_elevation: must be finite \(nan at index 1"
    ):
        Sites(x=np.zeros(2), y=np.zeros(2), ground_elevation=np.array([1.0, np.nan]))


# --- stochastic -----------------------------------------------------------------------------


def _run(source: StochasticSource, seed: int, sites: Sites, years: int = 20) -> np.ndarray:
    rng = np.random.default_rng(seed)
    return np.stack([source.depths(year, rng, sites) for year in range(years)])


def test_stochastic_reproducible_for_equal_seeds_and_differs_across_seeds() -> None:
    source = StochasticSource("gumbel", loc=5.0, scale=2.0, spatial_noise_sd=0.5)
    sites = _sites([3.0, 5.0, 8.0, 12.0])
    first = _run(source, 42, sites)
    np.testing.assert_array_equal(first, _run(source, 42, sites))
    assert not np.array_equal(first, _run(source, 43, sites))


def test_stochastic_depth_is_level_minus_ground_never_negative() -> None:
    source = StochasticSource("gumbel", loc=5.0, scale=2.0)
    sites = _sites([-10.0, 0.0, 5.0, 9.0, 30.0])
    rng = np.random.default_rng(7)
    for year in range(50):
        depth = source.depths(year, rng, sites)
        level = source.water_level(year, rng)  # same level, not a second draw
        np.testing.assert_allclose(depth, np.maximum(level - sites.ground_elevation, 0.0))
        assert np.all(depth >= 0.0)
        assert depth[-1] == 0.0 or level > 30.0


def test_stochastic_draws_one_level_per_year() -> None:
    source = StochasticSource("gumbel", loc=5.0, scale=2.0)
    sites = _sites([1.0, 2.0])
    rng = np.random.default_rng(3)
    level = source.water_level(2030, rng)
    source.depths(2030, rng, sites)
    assert source.water_level(2030, rng) == level
    reference = np.random.default_rng(3)
    assert level == reference.gumbel(5.0, 2.0)
    # Exactly one variate was consumed, so both generators are still in step.
    assert rng.random() == reference.random()


def test_stochastic_noise_draws_one_vector_per_year() -> None:
    source = StochasticSource("gumbel", loc=5.0, scale=2.0, spatial_noise_sd=1.0)
    sites = _sites([4.0, 4.0, 4.0])
    rng = np.random.default_rng(11)
    depth = source.depths(1, rng, sites)
    reference = np.random.default_rng(11)
    level = reference.gumbel(5.0, 2.0)
    noise = reference.normal(0.0, 1.0, size=3)
    np.testing.assert_allclose(depth, np.maximum(level + noise - 4.0, 0.0))
    assert rng.random() == reference.random()


def test_stochastic_noise_is_drawn_for_the_population_and_taken_by_place() -> None:
    """Who has moved away changes neither the draws nor any remaining home's noise."""
    source = StochasticSource("gumbel", loc=5.0, scale=2.0, spatial_noise_sd=1.0)
    ground = np.array([4.0, 3.0])
    sites = Sites(
        x=np.zeros(2), y=np.zeros(2), ground_elevation=ground, index=np.array([0, 2]), population=4
    )
    rng = np.random.default_rng(11)
    depth = source.depths(1, rng, sites)
    reference = np.random.default_rng(11)
    level = reference.gumbel(5.0, 2.0)
    noise = reference.normal(0.0, 1.0, size=4)
    np.testing.assert_allclose(depth, np.maximum(level + noise[[0, 2]] - ground, 0.0))
    assert rng.random() == reference.random()


@pytest.mark.parametrize(
    ("index", "population"),
    [([0, 4], 4), ([-1, 0], 4), ([0.0, 1.0], 4), ([0], 4)],
    ids=["past-the-end", "negative", "floats", "too-few"],
)
def test_sites_refuse_an_index_outside_the_population(index: list, population: int) -> None:
    with pytest.raises(HazardError, match=r"Sites\.index: one place in the population of 4"):
        Sites(
            x=np.zeros(2),
            y=np.zeros(2),
            ground_elevation=np.zeros(2),
            index=np.array(index),
            population=population,
        )


def test_stochastic_spatial_noise_has_the_configured_sd() -> None:
    source = StochasticSource("gumbel", loc=100.0, scale=1.0, spatial_noise_sd=0.3)
    depth = source.depths(1, np.random.default_rng(9), _sites([0.0] * 20_000))
    assert depth.min() > 0.0  # the level is far above ground: no depth is clipped to 0
    assert depth.std() == pytest.approx(0.3, rel=0.05)


def test_new_generator_never_reuses_a_cached_level() -> None:
    source = StochasticSource("gumbel", loc=5.0, scale=2.0)
    first = source.water_level(1, np.random.default_rng(1))
    assert source.water_level(1, np.random.default_rng(2)) != first


def test_gumbel_mean_is_loc_plus_euler_gamma_scale() -> None:
    source = StochasticSource("gumbel", loc=8.0, scale=2.0)
    rng = np.random.default_rng(2024)
    levels = np.array([source.water_level(year, rng) for year in range(20_000)])
    # standard error of the mean is pi * scale / sqrt(6 * n) ~ 0.018 ft
    assert levels.mean() == pytest.approx(8.0 + EULER_GAMMA * 2.0, abs=0.08)


def test_lognormal_levels_have_the_configured_log_moments() -> None:
    source = StochasticSource("lognormal", mean=1.5, sigma=0.4)
    rng = np.random.default_rng(5)
    logs = np.log([source.water_level(year, rng) for year in range(5_000)])
    assert logs.mean() == pytest.approx(1.5, abs=0.03)
    assert logs.std() == pytest.approx(0.4, abs=0.03)


@pytest.mark.parametrize(
    ("kwargs", "message"),
    [
        ({"distribution": "weibull", "loc": 1.0, "scale": 1.0}, "available: gumbel, lognormal"),
        ({"distribution": "gumbel", "scale": 1.0}, r"hazard.stochastic.loc: required"),
        ({"distribution": "gumbel", "loc": 1.0, "scale": 0.0}, r"stochastic.scale: .* > 0"),
        ({"distribution": "gumbel", "loc": 1.0, "scale": 1.0, "sigma": 1.0}, "not a parameter"),
        ({"distribution": "lognormal", "mean": 1.0, "sigma": -1.0}, r"stochastic.sigma"),
        ({"distribution": "gumbel", "loc": "5", "scale": 1.0}, r"stochastic.loc: expected"),
        ({"loc": 1.0, "scale": 1.0, "spatial_noise_sd": -0.1}, "spatial_noise_sd: .* >= 0"),
    ],
)
def test_stochastic_rejects_bad_parameters(kwargs: dict, message: str) -> None:
    with pytest.raises(HazardError, match=message):
        StochasticSource(**kwargs)


# --- scripted -------------------------------------------------------------------------------


def test_scripted_level_gives_exact_depths_and_dry_other_years() -> None:
    source = ScriptedSource({2025: 10.0, 2030: 4.0}, kind="level")
    sites = _sites([2.0, 9.5, 12.0])
    rng = np.random.default_rng(0)
    np.testing.assert_array_equal(source.depths(2025, rng, sites), [8.0, 0.5, 0.0])
    np.testing.assert_array_equal(source.depths(2030, rng, sites), [2.0, 0.0, 0.0])
    np.testing.assert_array_equal(source.depths(2026, rng, sites), [0.0, 0.0, 0.0])
    assert source.water_level(2025, rng) == 10.0
    assert source.water_level(2026, rng) is None
    # No randomness used.
    assert rng.random() == np.random.default_rng(0).random()


def test_scripted_depth_is_uniform_above_ground() -> None:
    source = ScriptedSource({"2031": 1.5}, kind="depth")
    sites = _sites([2.0, 50.0])
    rng = np.random.default_rng(0)
    np.testing.assert_array_equal(source.depths(2031, rng, sites), [1.5, 1.5])
    np.testing.assert_array_equal(source.depths(2032, rng, sites), [0.0, 0.0])
    assert source.water_level(2031, rng) is None


@pytest.mark.parametrize(
    ("events", "kind", "message"),
    [
        ({2020: 1.0}, "flow", "expected 'level' or 'depth'"),
        ({2020: -1.0}, "depth", r"events.2020: expected a number >= 0"),
        ({"soon": 1.0}, "level", "year 'soon' is not an integer"),
        ({2020: float("nan")}, "level", r"events.2020: expected a finite number"),
    ],
)
def test_scripted_rejects_bad_events(events: dict, kind: str, message: str) -> None:
    with pytest.raises(HazardError, match=message):
        ScriptedSource(events, kind=kind)


# --- ESRI ASCII grids -----------------------------------------------------------------------


def test_grid_header_and_values(tmp_path: Path) -> None:
    grid = read_ascii_grid(_write(tmp_path, GRID))
    assert isinstance(grid, AsciiGrid)
    assert (grid.nrows, grid.ncols) == (3, 4)
    assert (grid.xll, grid.yll, grid.cellsize) == (100.0, 200.0, 10.0)
    assert grid.values[0, 3] == 1.5  # row 0 is the northernmost row
    assert np.isnan(grid.values[1, 1])
    assert not grid.values.flags.writeable


def test_sample_at_cell_centres_matches_values(tmp_path: Path) -> None:
    grid = read_ascii_grid(_write(tmp_path, GRID))
    rows, cols = np.meshgrid(np.arange(3), np.arange(4), indexing="ij")
    x = 100.0 + (cols + 0.5) * 10.0
    y = 200.0 + (3 - rows - 0.5) * 10.0
    expected = np.nan_to_num(grid.values, nan=0.0)
    np.testing.assert_array_equal(grid.sample(x, y), expected)


def test_sample_at_corners_and_edges(tmp_path: Path) -> None:
    grid = read_ascii_grid(_write(tmp_path, GRID))
    x = np.array([100.0, 120.0, 140.0, 139.99, 100.0, 99.99])
    y = np.array([200.0, 210.0, 200.0, 229.99, 230.0, 215.0])
    # lower-left corner -> south-west cell; an inner corner -> the cell north-east of it;
    # the east and north borders are outside, as is anything west of the grid.
    np.testing.assert_array_equal(grid.sample(x, y), [4.0, 3.0, 0.0, 1.5, 0.0, 0.0])


def test_edges_of_decimal_cells_belong_to_the_cell_they_begin(tmp_path: Path) -> None:
    # 0.3 / 0.1 is 2.9999999999999996 in binary: flooring it would put x = 0.3 in column 2.
    values = " ".join(str(c) for c in range(10))
    text = f"ncols 10\nnrows 1\nxllcorner 0\nyllcorner 0\ncellsize 0.1\n{values}\n"
    grid = read_ascii_grid(_write(tmp_path, text))
    x = np.array([0.3, 0.6, 0.7, 0.05, 0.2999])
    np.testing.assert_array_equal(grid.sample(x, np.full(5, 0.05)), [3, 6, 7, 0, 2])


def test_sample_nodata_and_outside_are_dry(tmp_path: Path) -> None:
    grid = read_ascii_grid(_write(tmp_path, GRID))
    x = np.array([115.0, 50.0, 1e9, np.nan])
    y = np.array([215.0, 215.0, 215.0, 215.0])
    np.testing.assert_array_equal(grid.sample(x, y), [0.0, 0.0, 0.0, 0.0])
    assert grid.sample(x[:1], y[:1], fill=-1.0)[0] == -1.0


def test_centre_header_case_insensitive_and_wrapped_rows(tmp_path: Path) -> None:
    text = "NCOLS 3\nNROWS 2\nXLLCENTER 5\nYLLCENTER 5\nCELLSIZE 10\n1 2\n3 4 5\n6\n"
    grid = read_ascii_grid(_write(tmp_path, text))
    assert (grid.xll, grid.yll) == (0.0, 0.0)
    np.testing.assert_array_equal(grid.values, [[1, 2, 3], [4, 5, 6]])
    assert grid.sample(np.array([25.0]), np.array([5.0]))[0] == 6.0


@pytest.mark.parametrize(
    ("text", "message"),
    [
        (GRID.replace("cellsize 10.0\n", ""), r"header 'cellsize': missing"),
        (GRID.replace("ncols 4", "ncols four"), r"header 'ncols': expected a positive integer"),
        (GRID.replace("nrows 3", "nrows 0"), r"header 'nrows': expected a positive integer"),
        (GRID.replace("yllcorner 200.0\n", ""), r"header 'yllcorner': missing"),
        (GRID.replace("cellsize 10.0", "cellsize -1"), r"header 'cellsize': must be at least"),
        (
            GRID.replace("cellsize 10.0", "cellsize 0"),
            r"header 'cellsize': must be at least 1e-06, got '0'",
        ),
        # Beyond the reach of a map: overflowed the grid's checks with numpy warnings.
        (
            GRID.replace("cellsize 10.0", "cellsize 1e-308"),
            r"header 'cellsize': must be at least 1e-06, got '1e-308'",
        ),
        (GRID.replace("xllcorner 100.0", "xllcorner 1e308"), r"'xllcorner': '1e308' is beyond"),
        (
            GRID.replace("4.5", "1e308"),
            r"line 9: value '1e308' is beyond 1e\+15 \(grid row 3, column 2\)",
        ),
        (GRID.replace("cellsize 10.0", "cellsize 10 20"), r"header 'cellsize': expected one"),
        (GRID.replace("cellsize 10.0", "cellsize 10\ncellsize 10"), r"'cellsize': given twice"),
        (GRID.replace("cellsize 10.0", "dx 10"), r"line 5: unknown header key 'dx'"),
        (GRID.replace("xllcorner 100.0", "xllcorner 1\nxllcenter 1"), "not both"),
        (GRID.replace("3.0 3.5", "3.0"), r"found 11; line 8 has 3 values, ncols is 4"),
        (GRID + "6.0\n", "expected nrows x ncols = 3 x 4 = 12 values, found 13"),
        (GRID.replace("4.5", "4,5"), r"line 9: non-numeric value '4,5' \(grid row 3, column 2\)"),
        ("ncols 2\nnrows 1\nxllcorner 0\nyllcorner 0\ncellsize 1\n", "found 0"),
        # Python's float() reads "1_0" as 10, and a first value that is no number was taken
        # for a header key.
        (GRID.replace("4.5", "4_5"), r"line 9: non-numeric value '4_5' \(grid row 3, column 2\)"),
        (GRID.replace("0.0 0.5", "0x10 0.5"), r"line 7: non-numeric value '0x10' \(grid row 1, co"),
        (GRID.replace("ncols 4", "ncols 0_4"), r"header 'ncols': expected a positive integer"),
        (GRID.replace("cellsize 10.0", "cellsize 1_0"), r"header 'cellsize': expected a finite"),
        # NaN or infinite depths would read as dry or as the deepest flood: refused, like NaN
        # and infinite values in a config.
        (GRID.replace("4.5", "inf"), r"line 9: value 'inf' is not finite \(grid row 3, column 2\)"),
        (GRID.replace("1.5\n", "nan\n"), r"line 7: value 'nan' is not finite \(grid row 1, col"),
        (
            GRID.replace("3.5", "1e999"),
            r"line 8: value '1e999' is not finite \(grid row 2, column 4",
        ),
        # Wrapped rows: the line and the cell still point at the value.
        (
            "ncols 3\nnrows 2\nxllcorner 0\nyllcorner 0\ncellsize 1\n1 2\n3 -inf 5\n6\n",
            r"line 7: value '-inf' is not finite \(grid row 2, column 1\)",
        ),
    ],
)
def test_malformed_grids_name_file_and_key(tmp_path: Path, text: str, message: str) -> None:
    path = _write(tmp_path, text, "bad.asc")
    with pytest.raises(HazardError, match=message) as info:
        read_ascii_grid(path)
    assert str(info.value).startswith(f"{path}: ")


def test_missing_grid_file(tmp_path: Path) -> None:
    path = tmp_path / "absent.asc"
    with pytest.raises(HazardError, match=f"^{re.escape(str(path))}: grid file not found$"):
        read_ascii_grid(path)


def test_large_grid_reads_with_correct_shape(tmp_path: Path) -> None:
    values = np.arange(300 * 200, dtype=float).reshape(300, 200) / 7
    header = "ncols 200\nnrows 300\nxllcorner 0\nyllcorner 0\ncellsize 1\n"
    path = tmp_path / "big.asc"
    with path.open("w") as handle:
        handle.write(header)
        np.savetxt(handle, values, fmt="%.6f")
    grid = read_ascii_grid(path)
    np.testing.assert_allclose(grid.values, values, atol=1e-6)


# --- raster source --------------------------------------------------------------------------


def test_raster_source_samples_grid_per_year(tmp_path: Path) -> None:
    source = RasterSource({2030: _write(tmp_path, GRID)})
    sites = _sites([0.0, 0.0, 0.0], x=[105.0, 135.0, 500.0], y=[205.0, 225.0, 205.0])
    rng = np.random.default_rng(0)
    np.testing.assert_array_equal(source.depths(2030, rng, sites), [4.0, 1.5, 0.0])
    np.testing.assert_array_equal(source.depths(2031, rng, sites), [0.0, 0.0, 0.0])
    assert source.water_level(2030, rng) is None


def test_raster_source_converts_metres_and_clips_negative(tmp_path: Path) -> None:
    text = GRID.replace("0.0 0.5 1.0 1.5", "-1.0 0.5 1.0 1.5")
    source = RasterSource({"2030": _write(tmp_path, text)}, units="m")
    sites = _sites([0.0, 0.0], x=[105.0, 135.0], y=[225.0, 225.0])
    depth = source.depths(2030, np.random.default_rng(0), sites)
    np.testing.assert_allclose(depth, [0.0, 1.5 / 0.3048])
    assert abs(FEET_PER_METRE - 3.28084) < 1e-5


def test_raster_source_reads_each_file_once(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    calls: list[Path] = []
    real_reader = sources_module.read_ascii_grid

    def counting_reader(path: Path) -> AsciiGrid:
        calls.append(path)
        return real_reader(path)

    monkeypatch.setattr(sources_module, "read_ascii_grid", counting_reader)
    source = RasterSource({2030: _write(tmp_path, GRID), 2040: _write(tmp_path, GRID, "b.asc")})
    assert calls == []  # lazy
    sites = _sites([0.0], x=[105.0], y=[205.0])
    rng = np.random.default_rng(0)
    for _ in range(3):
        source.depths(2030, rng, sites)
    assert len(calls) == 1


def test_raster_source_missing_file_fails_at_construction(tmp_path: Path) -> None:
    present = _write(tmp_path, GRID)
    missing = tmp_path / "2035.asc"
    with pytest.raises(HazardError, match="hazard grid for year 2035 not found") as info:
        RasterSource({2030: present, 2035: missing})
    assert str(info.value).startswith(str(missing))


def test_raster_source_rejects_unknown_units(tmp_path: Path) -> None:
    with pytest.raises(HazardError, match="units: expected 'ft' or 'm'"):
        RasterSource({2030: _write(tmp_path, GRID)}, units="cm")


# --- factory --------------------------------------------------------------------------------


def test_make_source_builds_each_kind(tmp_path: Path) -> None:
    stochastic = make_source("stochastic", distribution="gumbel", loc=1.0, scale=1.0)
    scripted = make_source("scripted", events={2030: 2.0})
    raster = make_source("raster", paths={2030: str(_write(tmp_path, GRID))}, units="ft")
    assert isinstance(stochastic, StochasticSource)
    assert isinstance(scripted, ScriptedSource)
    assert isinstance(raster, RasterSource)
    for source in (stochastic, scripted, raster):
        assert isinstance(source, HazardSource)


def test_make_source_unknown_kind_lists_kinds() -> None:
    with pytest.raises(HazardError, match="unknown 'surge'; available: stochastic, scripted"):
        make_source("surge")


def test_make_source_unknown_parameter_is_a_hazard_error() -> None:
    with pytest.raises(HazardError, match=r"hazard.scripted: .*'level'.*parameters: events, kind"):
        make_source("scripted", events={}, level=3.0)


@pytest.mark.parametrize(
    "nodata", ["-3.4028234663852886e+38", "-3.40282346639e+038", "1e38", "-1e308"]
)
def test_a_float32_nodata_value_marks_cells_beyond_the_bound_on_values(tmp_path, nodata):
    """GDAL's and ArcGIS's usual NODATA_value lies beyond 1e15, which only values must keep to."""
    text = GRID.replace("NODATA_value -9999", f"NODATA_value {nodata}").replace(
        "2.0 -9999", f"2.0 {nodata}"
    )
    grid = read_ascii_grid(_write(tmp_path, text))
    assert np.isnan(grid.values[1, 1])
    assert np.nanmax(grid.values) == 5.5


# --- rules no earlier test held (helper 82's mutants) ---------------------------------------


@pytest.mark.parametrize("name", ["scale", "spatial_noise_sd"])
def test_a_boolean_stochastic_parameter_is_refused(name: str) -> None:
    """`scale: true` would otherwise be 1.0."""
    kwargs = {"loc": 10.0, "scale": 2.0, name: True}
    with pytest.raises(HazardError, match=f"stochastic.{name}: expected"):
        StochasticSource("gumbel", **kwargs)


def test_a_boolean_scripted_year_is_refused() -> None:
    with pytest.raises(HazardError, match="year True is not an integer"):
        ScriptedSource({True: 12.0})


def test_a_negative_year_given_as_text_reads_as_the_integer() -> None:
    assert ScriptedSource({"-1": 12.0, 3: 1.0}).events == {-1: 12.0, 3: 1.0}


def test_sites_refuse_arrays_that_are_not_one_dimensional() -> None:
    with pytest.raises(HazardError, match=r"Sites\.x: expected a 1-D array"):
        Sites(x=np.zeros((2, 2)), y=np.zeros((2, 2)), ground_elevation=np.zeros((2, 2)))


def test_rows_wrapped_evenly_across_lines_take_the_headers_shape(tmp_path: Path) -> None:
    """Six values three to a line: read in the file's layout, every cell would be misplaced."""
    path = tmp_path / "g.asc"
    path.write_text("ncols 2\nnrows 3\nxllcorner 0\nyllcorner 0\ncellsize 1\n1 2 3\n4 5 6\n")
    grid = read_ascii_grid(path)
    assert grid.values.shape == (3, 2)
    np.testing.assert_array_equal(grid.values, [[1, 2], [3, 4], [5, 6]])
