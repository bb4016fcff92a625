"""Tests for replacing a file whole (simulation.atomic): what every --resume relies on."""

from __future__ import annotations

import os

import pytest

from simulation import atomic
from simulation.atomic import replace_file, temporary_name


def test_a_file_is_created_or_replaced_and_no_temporary_file_is_left(tmp_path):
    path = tmp_path / "record.json"
    replace_file(path, b"first")
    replace_file(path, b"second")
    assert path.read_bytes() == b"second"
    assert sorted(p.name for p in tmp_path.iterdir()) == ["record.json"]


def test_a_write_stopped_before_the_move_leaves_the_old_file_whole(tmp_path, monkeypatch):
    path = tmp_path / "best.yaml"
    replace_file(path, b"old: 1\n")

    def stopped(*_: object) -> None:
        raise KeyboardInterrupt

    monkeypatch.setattr(atomic.os, "replace", stopped)
    with pytest.raises(KeyboardInterrupt):
        replace_file(path, b"new: 2\n")
    assert path.read_bytes() == b"old: 1\n"
    # Beside it, under the name the cleanups of runs, batches and calibrations remove.
    assert temporary_name(path) == tmp_path / ".best.yaml.tmp"
    assert temporary_name(path).read_bytes() == b"new: 2\n"


@pytest.mark.parametrize("durable", [False, True])
def test_a_durable_write_reaches_the_disk_before_the_move(tmp_path, monkeypatch, durable):
    calls: list[str] = []
    real_fsync, real_replace = os.fsync, os.replace

    def fsync(fd: int) -> None:
        calls.append("fsync")
        real_fsync(fd)

    def replace(src: object, dst: object) -> None:
        calls.append("replace")
        real_replace(src, dst)

    monkeypatch.setattr(atomic.os, "fsync", fsync)
    monkeypatch.setattr(atomic.os, "replace", replace)
    replace_file(tmp_path / "checkpoint.json", b"{}", durable=durable)
    assert calls == (["fsync", "replace"] if durable else ["replace"])


def test_a_write_the_disk_cannot_hold_leaves_no_temporary_file(tmp_path, monkeypatch):
    """A full disk: the part written would only take space from the disk that lacks it."""
    path = tmp_path / "checkpoint.json"
    replace_file(path, b"old")

    def full(fd: int) -> None:
        raise OSError(28, "No space left on device")

    monkeypatch.setattr(atomic.os, "fsync", full)
    with pytest.raises(OSError, match="No space left on device"):
        replace_file(path, b"new, cut short", durable=True)
    assert path.read_bytes() == b"old"
    assert sorted(p.name for p in tmp_path.iterdir()) == ["checkpoint.json"]


def test_a_draft_that_cannot_be_written_is_reported_under_the_file_it_replaces(tmp_path):
    """The user knows experiment.json, not .experiment.json.tmp."""
    path = tmp_path / "experiment.json"
    temporary_name(path).mkdir()  # stands for any reason the draft cannot be opened
    with pytest.raises(IsADirectoryError) as info:
        replace_file(path, b"{}")
    assert info.value.filename == str(path)
