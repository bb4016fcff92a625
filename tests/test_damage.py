"""Depth-damage curves: shipped tables, validation errors, file loading and damage in dollars."""

from __future__ import annotations

import re
import warnings
from pathlib import Path

import numpy as np
import pytest
import yaml

from simulation.hazard import (
    DEFAULT_CURVE_SET,
    DamageCurves,
    DepthDamageCurve,
    HazardError,
    available_curve_sets,
    compute_damage,
    curve_set_from_mapping,
    load_curves,
)

USACE_DEPTHS = np.arange(-2.0, 17.0)
USACE_STRUCTURE_PCT = [
    0, 2.5, 13.4, 23.3, 32.1, 40.1, 47.1, 53.2, 58.6, 63.2,
    67.2, 70.5, 73.2, 75.4, 77.2, 78.5, 79.5, 80.2, 80.7,
]  # fmt: skip
USACE_CONTENTS_PCT = [
    0, 2.4, 8.1, 13.3, 17.9, 22.0, 25.7, 28.8, 31.5, 33.8,
    35.7, 37.2, 38.4, 39.2, 39.7, 40.0, 40.0, 40.0, 40.0,
]  # fmt: skip


def _valid_set() -> dict:
    return {
        "source": "test tables",
        "units": "feet_above_first_floor",
        "structure": {"depth": [0, 2, 4], "damage_fraction": [0.0, 0.5, 0.8]},
        "contents": {"depth": [0, 4], "damage_fraction": [0.1, 0.3]},
    }


@pytest.fixture(scope="module")
def usace() -> DamageCurves:
    return load_curves("usace_one_story_no_basement")


# --- shipped tables -------------------------------------------------------------------------


def test_default_curve_set_is_usace(usace: DamageCurves) -> None:
    assert DEFAULT_CURVE_SET == "usace_one_story_no_basement"
    default = load_curves()
    np.testing.assert_array_equal(default.structure.fractions, usace.structure.fractions)
    assert "EGM 01-03" in default.source


def test_available_curve_sets_lists_shipped_names() -> None:
    assert available_curve_sets() == ("jrc_north_america", "usace_one_story_no_basement")


def test_usace_tables_match_egm_01_03(usace: DamageCurves) -> None:
    np.testing.assert_array_equal(usace.structure.depths, USACE_DEPTHS)
    np.testing.assert_array_equal(usace.contents.depths, USACE_DEPTHS)
    np.testing.assert_allclose(usace.structure(USACE_DEPTHS), np.array(USACE_STRUCTURE_PCT) / 100)
    np.testing.assert_allclose(usace.contents(USACE_DEPTHS), np.array(USACE_CONTENTS_PCT) / 100)


@pytest.mark.parametrize(
    ("depth", "structure", "contents"),
    [(0.0, 0.134, 0.081), (4.0, 0.471, 0.257), (-1.0, 0.025, 0.024), (16.0, 0.807, 0.400)],
)
def test_usace_values_at_tabulated_depths(
    usace: DamageCurves, depth: float, structure: float, contents: float
) -> None:
    assert usace.structure(depth) == pytest.approx(structure)
    assert usace.contents(depth) == pytest.approx(contents)


def test_interpolates_linearly_between_points(usace: DamageCurves) -> None:
    assert usace.structure(0.5) == pytest.approx((0.134 + 0.233) / 2)
    assert usace.structure(2.25) == pytest.approx(0.321 + 0.25 * (0.401 - 0.321))
    assert usace.contents(-1.5) == pytest.approx(0.012)


def test_flat_outside_the_table(usace: DamageCurves) -> None:
    assert usace.structure(-10.0) == 0.0
    assert usace.structure(40.0) == pytest.approx(0.807)
    assert usace.contents(40.0) == pytest.approx(0.400)


def test_scalar_in_float_out_array_in_array_out(usace: DamageCurves) -> None:
    assert isinstance(usace.structure(1.0), float)
    result = usace.structure(np.array([[0.0, 1.0], [2.0, 3.0]]))
    assert isinstance(result, np.ndarray)
    assert result.shape == (2, 2)


def test_usace_contents_never_exceed_structure(usace: DamageCurves) -> None:
    assert np.all(usace.contents(USACE_DEPTHS) <= usace.structure(USACE_DEPTHS))


def test_jrc_curve_converted_to_feet() -> None:
    jrc = load_curves("jrc_north_america")
    metres = np.array([0, 0.5, 1, 1.5, 2, 3, 4, 5, 6])
    np.testing.assert_allclose(jrc.structure.depths, np.round(metres * 3.28084, 2))
    assert jrc.structure(np.round(1.0 * 3.28084, 2)) == pytest.approx(0.44)
    assert jrc.structure(100.0) == pytest.approx(0.96)
    np.testing.assert_array_equal(jrc.structure.fractions, jrc.contents.fractions)
    assert "JRC" in jrc.source
    assert "both" in jrc.source


def test_curve_arrays_are_read_only(usace: DamageCurves) -> None:
    with pytest.raises(ValueError, match="read-only"):
        usace.structure.fractions[0] = 1.0


# --- validation -----------------------------------------------------------------------------


def test_hazard_error_is_a_value_error() -> None:
    assert issubclass(HazardError, ValueError)


def test_message_names_file_key_and_point() -> None:
    data = _valid_set()
    data["structure"] = {"depth": [3, 4, 5], "damage_fraction": [0.5, 0.62, 0.58]}
    with pytest.raises(HazardError) as info:
        curve_set_from_mapping(data, "configs/curves.yaml", key="curves")
    assert str(info.value) == (
        "configs/curves.yaml: curves.structure.damage_fraction: must be non-decreasing "
        "(0.58 after 0.62 at depth 5.0)"
    )


@pytest.mark.parametrize(
    ("table", "key", "problem"),
    [
        ({"depth": [0, 1, 2], "damage_fraction": [0.1, 0.3, 0.2]}, "damage_fraction", "non-decr"),
        ({"depth": [0, 1, 2], "damage_fraction": [0.1, 0.3, 1.2]}, "damage_fraction", r"\[0, 1\]"),
        ({"depth": [0, 1, 2], "damage_fraction": [-0.1, 0.3, 0.5]}, "damage_fraction", "within"),
        ({"depth": [0, 1, 2], "damage_fraction": [0.1, 0.3]}, "damage_fraction", "pair up"),
        ({"depth": [0], "damage_fraction": [0.1]}, "depth", "at least 2"),
        ({"depth": [0, 2, 1], "damage_fraction": [0.1, 0.2, 0.3]}, "depth", "strictly incr"),
        ({"depth": [0, 1, 1], "damage_fraction": [0.1, 0.2, 0.3]}, "depth", "strictly incr"),
        ({"depth": [0, "x"], "damage_fraction": [0.1, 0.2]}, "depth", "number at index 1"),
        ({"depth": [0, 1], "damage_fraction": [0.1, float("nan")]}, "damage_fraction", "finite"),
        ({"depth": [0, 1], "damage_fraction": [0.1, True]}, "damage_fraction", "number"),
        ({"depth": 3, "damage_fraction": [0.1, 0.2]}, "depth", "list of numbers"),
        ({"depth": [0, 1]}, "damage_fraction", "missing"),
        ({"depth": [0, 1], "damage_fraction": [0, 1], "fractions": [0, 1]}, "fractions", "unknown"),
    ],
)
def test_invalid_tables_name_the_key(table: dict, key: str, problem: str) -> None:
    data = _valid_set()
    data["contents"] = table
    with pytest.raises(HazardError, match=problem) as info:
        curve_set_from_mapping(data, "my_curves.yaml")
    assert str(info.value).startswith(f"my_curves.yaml: contents.{key}: ")


@pytest.mark.parametrize("missing", ["source", "units", "structure", "contents"])
def test_missing_set_key_is_named(missing: str) -> None:
    data = _valid_set()
    del data[missing]
    with pytest.raises(HazardError, match=f"^f.yaml: {missing}: missing$"):
        curve_set_from_mapping(data, "f.yaml")


def test_wrong_units_rejected() -> None:
    data = _valid_set()
    data["units"] = "metres"
    with pytest.raises(HazardError, match=r"^f.yaml: units: must be 'feet_above_first_floor'"):
        curve_set_from_mapping(data, "f.yaml")


def test_a_set_says_what_its_contents_curve_is_a_share_of() -> None:
    assert load_curves("usace_one_story_no_basement").contents_basis == "structure"
    assert load_curves("jrc_north_america").contents_basis == "contents"
    assert curve_set_from_mapping(_valid_set(), "f.yaml").contents_basis == "contents"
    data = {**_valid_set(), "contents_basis": "structure"}
    assert curve_set_from_mapping(data, "f.yaml").contents_basis == "structure"
    data["contents_basis"] = "income"
    with pytest.raises(HazardError, match=r"^f.yaml: contents_basis: must be one of"):
        curve_set_from_mapping(data, "f.yaml")


def test_direct_construction_validates_with_curve_name() -> None:
    with pytest.raises(HazardError, match=r"^roof.damage_fraction: must be non-decreasing"):
        DepthDamageCurve("roof", np.array([0.0, 1.0]), np.array([0.5, 0.4]))


# --- loading files --------------------------------------------------------------------------


def test_load_bare_curve_file(tmp_path: Path) -> None:
    path = tmp_path / "curves.yaml"
    path.write_text(yaml.safe_dump(_valid_set()))
    curves = load_curves(str(path))
    assert curves.source == "test tables"
    assert curves.structure(1.0) == pytest.approx(0.25)
    assert curves.contents(2.0) == pytest.approx(0.2)
    assert load_curves(path).structure(3.0) == pytest.approx(0.65)


def test_load_named_curve_file_like_shipped_one(tmp_path: Path) -> None:
    path = tmp_path / "local.yml"
    data = _valid_set()
    data["structure"]["damage_fraction"] = [0.0, 0.9, 0.8]
    path.write_text(yaml.safe_dump({"local_survey": data}))
    with pytest.raises(HazardError) as info:
        load_curves(path)
    assert str(info.value).startswith(f"{path}: local_survey.structure.damage_fraction: ")


def test_curve_file_with_several_sets_rejected(tmp_path: Path) -> None:
    path = tmp_path / "two.yaml"
    path.write_text(yaml.safe_dump({"a": _valid_set(), "b": _valid_set()}))
    with pytest.raises(HazardError, match="expected one curve set"):
        load_curves(path)


def test_unknown_name_lists_available_sets() -> None:
    with pytest.raises(HazardError, match="unknown curve set 'usace'") as info:
        load_curves("usace")
    assert "jrc_north_america" in str(info.value)
    assert "usace_one_story_no_basement" in str(info.value)


def test_missing_curve_file_names_path(tmp_path: Path) -> None:
    path = tmp_path / "nope.yaml"
    with pytest.raises(HazardError, match=f"^{re.escape(str(path))}: curve file not found$"):
        load_curves(str(path))


def test_invalid_yaml_names_path(tmp_path: Path) -> None:
    path = tmp_path / "broken.yaml"
    path.write_text("structure: [1, 2\n")
    with pytest.raises(HazardError, match=f"^{re.escape(str(path))}: not valid YAML: line 2, "):
        load_curves(path)


# --- damage in dollars ----------------------------------------------------------------------


def test_compute_damage_is_value_times_fraction(usace: DamageCurves) -> None:
    depth = np.array([0.0, 1.5, -1.0, 30.0])
    structure_value = np.array([100_000.0, 200_000.0, 150_000.0, 80_000.0])
    contents_value = np.array([50_000.0, 60_000.0, 70_000.0, 40_000.0])
    structure, contents = compute_damage(depth, structure_value, contents_value, usace)
    np.testing.assert_allclose(structure, structure_value * usace.structure(depth))
    np.testing.assert_allclose(contents, contents_value * usace.contents(depth))
    assert structure[0] == pytest.approx(13_400.0)
    assert contents[1] == pytest.approx(60_000.0 * (0.133 + 0.179) / 2)


def test_dry_and_nan_households_take_no_damage(usace: DamageCurves) -> None:
    # A first fraction above 0 shows that -inf is forced to 0 rather than interpolated.
    curves = curve_set_from_mapping(
        {**_valid_set(), "contents": {"depth": [0, 4], "damage_fraction": [0.1, 0.3]}}, "t"
    )
    depth = np.array([-np.inf, np.nan, -5.0])
    structure, contents = compute_damage(depth, np.full(3, 1000.0), np.full(3, 500.0), curves)
    np.testing.assert_array_equal(structure, [0.0, 0.0, 0.0])
    np.testing.assert_array_equal(contents, [0.0, 0.0, 50.0])
    structure, contents = compute_damage(np.array([-np.inf]), 1e5, 1e5, usace)
    assert structure[0] == contents[0] == 0.0


def test_compute_damage_broadcasts_scalar_values(usace: DamageCurves) -> None:
    structure, contents = compute_damage(np.array([0.0, 1.0]), 1000.0, 2000.0, usace)
    np.testing.assert_allclose(structure, [134.0, 233.0])
    np.testing.assert_allclose(contents, [162.0, 266.0])


def test_compute_damage_shape_mismatch_raises(usace: DamageCurves) -> None:
    with pytest.raises(HazardError, match="incompatible shapes"):
        compute_damage(np.zeros(3), np.zeros(2), np.zeros(3), usace)


def test_a_whole_number_too_large_for_a_float_is_refused_not_a_traceback(tmp_path: Path) -> None:
    """10**400 raised OverflowError from math.isfinite."""
    data = _valid_set()
    data["structure"]["depth"] = [0, 1, 10**400]
    path = tmp_path / "curves.yaml"
    path.write_text(yaml.safe_dump(data))
    with pytest.raises(
        HazardError, match=r"structure\.depth: must be finite \(1000.*\(401 characters\) at index 2"
    ):
        load_curves(path)


def test_depths_near_the_float_limit_are_checked_without_overflow(tmp_path: Path) -> None:
    data = _valid_set()
    data["structure"] = {"depth": [-1e308, 1e308], "damage_fraction": [0.0, 0.8]}
    path = tmp_path / "curves.yaml"
    path.write_text(yaml.safe_dump(data))
    with warnings.catch_warnings():
        warnings.simplefilter("error")  # np.diff's overflow warning was printed
        assert load_curves(path).structure.depths.tolist() == [-1e308, 1e308]


def test_a_bare_name_is_not_looked_up_in_the_current_folder(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    """Otherwise a config would load or fail by where it is run, and its run id not follow edits."""
    (tmp_path / "survey.txt").write_text(yaml.safe_dump(_valid_set()))
    monkeypatch.chdir(tmp_path)
    with pytest.raises(HazardError, match=r"^unknown curve set 'survey.txt'; .* with a /\)$"):
        load_curves("survey.txt")
    assert load_curves("./survey.txt").source == "test tables"
    assert load_curves(Path("survey.txt")).source == "test tables"

    class Named:  # any os.PathLike, not only a pathlib.Path
        def __fspath__(self) -> str:
            return "survey.txt"

    assert load_curves(Named()).source == "test tables"


# --- rules no earlier test held (helper 82's mutants) ---------------------------------------


def test_curve_depths_are_read_only_as_fractions_are() -> None:
    """One curve serves every household: an edit in place would shift the whole run's damage."""
    curves = load_curves("usace_one_story_no_basement")
    with pytest.raises(ValueError, match="read-only"):
        curves.structure.depths[0] = 5.0


def test_a_misspelled_curve_set_key_is_refused() -> None:
    """`contents_basys` ignored would apply the contents curve to the wrong value."""
    data = {**_valid_set(), "contents_basys": "structure"}
    with pytest.raises(HazardError, match=r"c\.yaml: contents_basys: unknown key"):
        curve_set_from_mapping(data, "c.yaml")


def test_a_blank_citation_is_refused_naming_the_file() -> None:
    with pytest.raises(HazardError, match=r"^c\.yaml: source: expected a non-empty citation"):
        curve_set_from_mapping({**_valid_set(), "source": "   "}, "c.yaml")
