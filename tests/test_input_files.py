"""A device, a folder or a huge file named as an input is refused at once, on one line."""

from __future__ import annotations

import errno
from pathlib import Path

import pytest

from simulation.analysis.behaviour import BehaviourError, load_targets
from simulation.cli import main
from simulation.input_files import MAX_TEXT_BYTES, check_not_a_device, not_a_file, read_text

ROOT = Path(__file__).resolve().parent.parent
DEFAULT = ROOT / "configs" / "default.yaml"
DEVICE = Path("/dev/null")  # a character device on every POSIX machine; reads as empty


def _error(capsys: pytest.CaptureFixture[str], *argv: str) -> str:
    """Run the CLI, require exit code 2, and return its one stderr line."""
    assert main(list(argv)) == 2
    err = capsys.readouterr().err
    assert err.count("\n") == 1, err
    assert err.startswith("floodsim: error: "), err
    assert "Traceback" not in err
    return err


def test_read_text_reads_a_file_as_path_read_text_does(tmp_path):
    path = tmp_path / "a.yaml"
    path.write_text("years: 3\nname: ümlaut\n", encoding="utf-8")
    assert read_text(path) == path.read_text(encoding="utf-8")


def test_read_text_reads_windows_line_endings_as_path_read_text_does(tmp_path):
    # A prompt template saved on Windows must send the model the text a Unix one does.
    path = tmp_path / "prompt.txt"
    path.write_bytes(b"Year {year}:\r\nwhat now?\rOld Mac line.\n")
    assert (
        read_text(path)
        == path.read_text(encoding="utf-8")
        == ("Year {year}:\nwhat now?\nOld Mac line.\n")
    )


def test_read_text_refuses_a_file_larger_than_its_limit_without_reading_it_all(tmp_path):
    path = tmp_path / "big.yaml"
    path.write_bytes(b"x" * 11)
    assert read_text(path, limit=11) == "x" * 11
    with pytest.raises(OSError, match="larger than") as info:
        read_text(path, limit=10)
    assert info.value.errno == errno.EFBIG
    assert info.value.filename == str(path)


def test_a_device_is_refused_and_a_missing_path_is_left_to_the_caller(tmp_path):
    with pytest.raises(OSError, match="a device, not a file"):
        check_not_a_device(DEVICE)
    with pytest.raises(OSError, match="a device, not a file"):
        read_text(DEVICE)
    check_not_a_device(tmp_path / "missing.csv")  # the caller says "not found"
    check_not_a_device(tmp_path)  # a folder: open() says what it is


def test_not_a_file_says_what_the_path_is(tmp_path):
    assert not_a_file(tmp_path, "household table") == "a folder, not a household table"
    assert not_a_file(DEVICE, "household table") == "a device, not a household table"
    assert not_a_file(tmp_path / "x.csv", "household table") == "household table not found"


def test_a_device_given_as_the_config_is_refused(capsys):
    err = _error(capsys, "validate", str(DEVICE))
    assert f"{DEVICE}: cannot read: a device, not a file" in err


def test_a_config_over_the_size_limit_is_refused_before_it_is_read(capsys, tmp_path):
    # Sparse: the test costs no disk, and the old reader would have parsed 64 MiB of NULs.
    path = tmp_path / "huge.yaml"
    with path.open("wb") as file:
        file.truncate(MAX_TEXT_BYTES + 1)
    err = _error(capsys, "validate", str(path))
    assert f"{path}: cannot read: larger than 64 MiB" in err


@pytest.mark.parametrize(
    ("sets", "expected"),
    [
        (["registry={}"], "registry: {}: cannot read registry file: a device, not a file"),
        (["damage.curves={}"], "damage.curves: {}: cannot read curve file: a device, not a file"),
        (["households.table={}"], "households.table: {}: a device, not a household table"),
        (
            ["decision.policy=scripted", "decision.script={}"],
            "decision.script: {}: cannot read the table: a device, not a file",
        ),
        (
            ["decision.policy=llm", "decision.llm.prompt={}"],
            "decision.llm.prompt: {}: cannot read: a device, not a file",
        ),
    ],
    ids=["registry", "curves", "household-table", "script", "prompt"],
)
def test_a_device_named_by_a_config_key_is_refused(capsys, sets, expected):
    flags = [arg for value in sets for arg in ("--set", value.format(DEVICE))]
    err = _error(capsys, "validate", str(DEFAULT), *flags)
    assert expected.format(DEVICE) in err


def test_a_folder_given_as_a_household_table_is_named_as_one(capsys, tmp_path):
    err = _error(capsys, "validate", str(DEFAULT), "--set", f"households.table={tmp_path}")
    assert f"{tmp_path}: a folder, not a household table" in err


def test_a_folder_given_as_a_hazard_grid_is_named_as_one(capsys, tmp_path):
    err = _error(
        capsys,
        "validate",
        str(DEFAULT),
        "--set",
        "hazard.source=raster",
        "--set",
        f"hazard.rasters.1={tmp_path}",
    )
    assert f"{tmp_path}: a folder, not a hazard grid for year 1" in err


def test_a_device_given_as_behaviour_targets_is_refused():
    expected = r"cannot read the targets file \(a device, not a file\)"
    with pytest.raises(BehaviourError, match=expected):
        load_targets(DEVICE)
