"""Tests for simulation.yaml_errors: the strict YAML loader and its one-line errors."""

from __future__ import annotations

import math
from pathlib import Path

import pytest
import yaml

from simulation.cli import main
from simulation.yaml_errors import describe_yaml_error, dump_yaml, load_yaml

DEFAULT = Path(__file__).resolve().parents[1] / "configs" / "default.yaml"


def test_a_key_given_twice_is_refused_with_its_line():
    with pytest.raises(yaml.YAMLError) as info:
        load_yaml("years: 2\nmemory:\n  decay_rate: 0.9\n  decay_rate: 0.8\n")
    assert describe_yaml_error(info.value).startswith(
        "line 4, column 3: duplicate key 'decay_rate'"
    )


def test_equal_keys_in_different_mappings_and_merge_keys_are_fine():
    text = (
        "defaults: &d {importance: 0.5, tags: [flood]}\n"
        "minor: {<<: *d, importance: 0.6}\n"
        "major: {<<: *d, importance: 0.9}\n"
    )
    data = load_yaml(text)
    assert data["minor"] == {"importance": 0.6, "tags": ["flood"]}
    assert data["major"]["importance"] == 0.9


def test_only_safe_yaml_is_loaded():
    with pytest.raises(yaml.YAMLError):
        load_yaml("!!python/object/apply:os.system ['true']\n")


@pytest.mark.parametrize(
    ("text", "value"),
    [("5e-1", 0.5), ("1e6", 1e6), ("1.5e3", 1500.0), ("-2E+2", -200.0), (".5e1", 5.0)],
)
def test_numbers_with_an_exponent_are_floats_as_in_yaml_1_2(text, value):
    loaded = load_yaml(f"x: {text}")["x"]
    assert isinstance(loaded, float)
    assert loaded == value


def test_text_that_only_looks_like_an_exponent_stays_text():
    loaded = load_yaml('a: e5\nb: 5e\nc: "5e-1"\nd: 12\ne: 1.0')
    assert loaded == {"a": "e5", "b": "5e", "c": "5e-1", "d": 12, "e": 1.0}
    assert isinstance(loaded["d"], int)


@pytest.mark.parametrize("text", ["2e3", "1.5e3", "-2E+2", ".5e1", "1e6"])
def test_strings_that_look_like_exponent_numbers_are_written_quoted_and_read_back(text):
    dumped = dump_yaml({"name": text})
    assert load_yaml(dumped) == {"name": text}


def test_a_mantissa_needs_a_digit():
    assert load_yaml("x: ._e1") == {"x": "._e1"}


def test_a_run_named_like_a_number_can_be_run_again_from_its_resolved_config(tmp_path):
    argv = ["--set", 'name="2e3"', "--set", "years=1", "--set", "households.count=20", "--quiet"]
    assert main(["run", str(DEFAULT), *argv, "--out", str(tmp_path)]) == 0
    (run_dir,) = tmp_path.iterdir()
    resolved = run_dir / "config.resolved.yaml"
    assert load_yaml(resolved.read_text(encoding="utf-8"))["name"] == "2e3"
    assert main(["run", str(resolved), "--quiet", "--out", str(tmp_path)]) == 0


def test_an_integer_too_long_for_python_is_a_yaml_error_with_its_line():
    """Python refuses to read more than 4,300 digits: a ValueError no loader's caller expects."""
    with pytest.raises(yaml.YAMLError) as caught:
        load_yaml("name: x\nyears: 1" + "0" * 5000 + "\n")
    assert describe_yaml_error(caught.value) == (
        "line 2, column 8: an integer of 5001 characters, too long to read"
    )
    assert load_yaml("years: 1" + "0" * 4000) == {"years": 10**4000}  # below the limit: read


@pytest.mark.parametrize("huge", ["1" + "0" * 5000, "0x" + "f" * 4999], ids=["decimal", "hex"])
@pytest.mark.parametrize("where", ["file", "--set"])
def test_a_config_with_a_huge_integer_is_refused_on_one_line(tmp_path, capsys, where, huge):
    path = tmp_path / "big.yaml"
    path.write_text(f"base: {DEFAULT}\n" + (f"years: {huge}\n" if where == "file" else ""))
    argv = ["validate", str(path)] + (["--set", f"years={huge}"] if where == "--set" else [])
    assert main(argv) == 2
    (line,) = capsys.readouterr().err.splitlines()
    assert line.endswith("an integer of 5001 characters, too long to read")
    assert len(line) < 300


@pytest.mark.parametrize(
    ("text", "value"),
    [
        # YAML 1.1 read `010` as octal 8 while `09` stayed text: a researcher means ten, nine.
        *[("010", 10), ("09", 9), ("-007", -7), ("00", 0), ("1_000", 1000)],
        *[("0x1F", 31), ("0b101", 5)],
        # YAML 1.1 read `-.5` as text: `--set hazard.loc=-.5` was refused as not a number.
        *[("-.5", -0.5), ("+.5", 0.5), (".5", 0.5), ("1_000.5", 1000.5), ("+.inf", math.inf)],
        # An explicit tag reads what the implicit rule reads.
        *[("!!int 0x1F", 31), ("!!float 3", 3.0), ("!!float -.5", -0.5)],
    ],
)
def test_numbers_read_as_yaml_1_2_reads_them(text, value):
    loaded = load_yaml(f"x: {text}")["x"]
    assert type(loaded) is type(value)
    assert loaded == value


@pytest.mark.parametrize(
    ("text", "problem"),
    [
        ("!!int 1:30", "'1:30' is not an integer"),
        ("!!int abc", "'abc' is not an integer"),
        ("!!float 1:30", "'1:30' is not a number"),
        ("!!float abc", "'abc' is not a number"),
        # int() and float() take more than the rule reads: a sign twice, spaces, other digits.
        ("!!int --5", "'--5' is not an integer"),
        ("!!int 0x-5", "'0x-5' is not an integer"),
        ("!!int ' 12 '", "' 12 ' is not an integer"),
        ("!!int \u0661\u0662", "'\u0661\u0662' is not an integer"),
        ("!!float infinity", "'infinity' is not a number"),
        ("!!float nan", "'nan' is not a number"),
    ],
)
def test_an_explicitly_tagged_number_follows_the_same_rules(text, problem):
    """`!!float 1:30` was still 90.0, and `!!int abc` said it had no digits after 0x."""
    with pytest.raises(yaml.YAMLError) as caught:
        load_yaml(f"x: {text}")
    assert describe_yaml_error(caught.value) == f"line 1, column 4: {problem}"


def test_leading_zeros_do_not_count_towards_the_bound_on_digits():
    assert load_yaml("x: " + "0" * 5000 + "1") == {"x": 1}


def test_the_largest_integer_python_shows_is_read_and_written_back():
    """4,300 nines: a bound by bits refused it, and so what dump_yaml wrote."""
    largest = 10**4300 - 1
    assert load_yaml(dump_yaml({"x": largest})) == {"x": largest}


def test_a_hex_integer_too_long_to_show_is_refused_as_a_decimal_one_is():
    """It was read, then crashed the first message that showed it with a traceback."""
    assert load_yaml("x: 0x" + "f" * 3500)["x"] == 16**3500 - 1  # below the bound: read
    with pytest.raises(yaml.YAMLError) as caught:
        load_yaml("x: 0x" + "f" * 3600)
    assert describe_yaml_error(caught.value) == (
        "line 1, column 4: an integer of 3602 characters, too long to read"
    )


@pytest.mark.parametrize("text", ["1:30", "1:30.5", "-2:00"])
def test_base_60_numbers_stay_text(text):
    """YAML 1.1 read `1:30` as 90: `--set years=1:30` ran 90 years."""
    assert load_yaml(f"x: {text}") == {"x": text}


@pytest.mark.parametrize("text", ["0x_", "0b__"])
def test_a_base_prefix_without_digits_is_a_yaml_error_that_says_so(text):
    with pytest.raises(yaml.YAMLError) as caught:
        load_yaml(f"x: {text}")
    assert describe_yaml_error(caught.value) == (
        f"line 1, column 4: '{text}' has no digits after its base prefix"
    )


@pytest.mark.parametrize(
    "text", ["010", "09", "-08", "1:30", "1:30.5", "0x3", "1_0", "5e-1", "-.5", "+.5"]
)
def test_strings_either_yaml_version_reads_as_numbers_are_written_quoted(text):
    """What floodsim writes reads back equal in floodsim and in a notebook's yaml.safe_load."""
    dumped = dump_yaml({"name": text})
    assert load_yaml(dumped) == {"name": text}
    assert yaml.safe_load(dumped) == {"name": text}


def test_a_zero_padded_years_runs_that_many_years_and_base_60_is_refused(tmp_path, capsys):
    path = tmp_path / "padded.yaml"
    path.write_text(f"base: {DEFAULT}\nyears: 010\nhouseholds:\n  count: 20\n")
    assert main(["run", str(path), "--quiet", "--out", str(tmp_path / "runs")]) == 0
    (run_dir,) = (tmp_path / "runs").iterdir()
    assert load_yaml((run_dir / "config.resolved.yaml").read_text(encoding="utf-8"))["years"] == 10
    capsys.readouterr()
    assert main(["validate", str(path), "--set", "years=1:30"]) == 2
    (line,) = capsys.readouterr().err.splitlines()
    assert "years" in line
    assert "1:30" in line
