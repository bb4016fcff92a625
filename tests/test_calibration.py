"""Tests for calibration: the file format, the fit's outputs, reproducibility and the command."""

from __future__ import annotations

import argparse
import errno
import math
import os
import shutil
import warnings
from pathlib import Path
from typing import Any

import pandas as pd
import pytest
import yaml

from simulation import atomic
from simulation.analysis.behaviour import ShortWindowWarning
from simulation.calibration import commands
from simulation.calibration.fit import (
    NONFINITE_PENALTY,
    CalibrationError,
    calibrate,
    load_calibration,
    target_loss,
)
from simulation.cli import main
from simulation.config import CodeDefaultsWarning, ConfigWarning
from simulation.folder_lock import hold_folder

# The shipped targets average years 5-30 and these calibrations run 16 years to stay quick: the
# warning that says so is tested once (test_powell_within_budget) and would be noise elsewhere.
pytestmark = pytest.mark.filterwarnings("ignore::simulation.analysis.behaviour.ShortWindowWarning")

ROOT = Path(__file__).resolve().parents[1]
SCENARIO = ROOT / "configs" / "scenarios" / "single_flood.yaml"
TARGETS = ROOT / "configs" / "targets" / "stylized_facts.yaml"
BASELINE = ROOT / "configs" / "calibration" / "baseline.yaml"
DECAY = {"memory.decay_rate": {"start": 0.95, "low": 0.7, "high": 0.99}}
PARAMETERS = {
    "decision.pmt.renewal_inertia": {"start": 1.5, "low": 0.0, "high": 5.0},
    "decision.pmt.beta_tp": {"start": 6.0, "low": 1.0, "high": 10.0},
}


def tiny(**changes: Any) -> dict[str, Any]:
    """A calibration small enough for a test: 40 households, 16 years (flood in year 10)."""
    data: dict[str, Any] = {
        "name": "tiny",
        "base": str(SCENARIO),
        "set": {
            "households.count": 40,
            "years": 16,
            "audit.level": "minimal",
            "audit.timestamps": False,
        },
        "targets": str(TARGETS),
        "parameters": PARAMETERS,
        "replicates": 2,
        "seed": 5,
        "method": "nelder-mead",
        "max_evaluations": 4,
        "executor": {"kind": "serial"},
    }
    data.update(changes)
    return data


def write(folder: Path, data: dict[str, Any], name: str = "calibration.yaml") -> Path:
    path = folder / name
    path.write_text(yaml.safe_dump(data, sort_keys=False), encoding="utf-8")
    return path


@pytest.fixture(scope="module")
def fitted(tmp_path_factory):
    folder = tmp_path_factory.mktemp("calibration")
    path = write(folder, tiny())
    return calibrate(path, folder / "out", progress=False)


def test_outputs(fitted):
    out = fitted.out_dir
    table = pd.read_csv(out / "evaluations.csv")
    assert 1 <= len(table) <= 4
    assert list(table.columns[:4]) == ["evaluation", *PARAMETERS, "loss"]
    assert list(table["evaluation"]) == list(range(len(table)))
    assert table["loss"].map(math.isfinite).all()
    best = yaml.safe_load((out / "best.yaml").read_text(encoding="utf-8"))
    assert set(best["parameters"]) == set(PARAMETERS)
    for key, value in best["parameters"].items():
        assert PARAMETERS[key]["low"] <= value <= PARAMETERS[key]["high"]
    assert best["loss"] == pytest.approx(table["loss"].min())
    assert best["loss"] == pytest.approx(fitted.loss)
    assert best["targets_total"] == len(fitted.table)
    assert best["targets_passed"] == int(fitted.table["passed"].sum())
    assert (out / "calibration.png").stat().st_size > 0
    # Only the best evaluation's experiment folder is kept, and it is a complete batch.
    kept = sorted(p.name for p in (out / "evaluations").iterdir())
    assert kept == [f"e{best['evaluation']:03d}"]
    assert best["experiment"] == f"evaluations/{kept[0]}"
    assert (fitted.experiment_dir / "experiment.json").is_file()
    assert len(list((fitted.experiment_dir / "runs").iterdir())) == 2


@pytest.mark.parametrize("command", ["run", "validate", "batch", "calibrate"])
def test_best_yaml_given_as_a_config_is_named_as_the_summary(fitted, capsys, command):
    best = fitted.out_dir / "best.yaml"
    assert main([command, str(best)]) == 2
    err = capsys.readouterr().err
    assert err == (
        f"floodsim: error: {best}: this is a calibration's summary (best.yaml), not a config; "
        "give its parameters to a run config, as keys or with --set KEY=VALUE\n"
    )


def test_a_calibration_folder_made_unwritable_while_it_goes_exits_1_not_2(
    tmp_path, capsys, monkeypatch
):
    """The command was right: --resume continues it once the folder is writable again."""
    path = write(tmp_path, tiny(max_evaluations=1))
    out = tmp_path / "out"

    def refused(target: Path, _: bytes) -> None:
        raise PermissionError(errno.EACCES, "Permission denied", str(target))

    monkeypatch.setattr("simulation.calibration.fit.replace_file", refused)
    assert main(["calibrate", str(path), "--out", str(out), "--quiet"]) == 1
    assert capsys.readouterr().err.endswith(
        f"floodsim: error: Permission denied ({out / 'evaluations.csv'}); results so far in "
        f"{out}: continue with the same command and --resume (finished evaluations are read "
        "back)\n"
    )


def test_a_base_outside_the_default_world_is_warned_of_once_not_per_evaluation(tmp_path):
    """Each evaluation's experiment file is floodsim's own: a warning naming it would mislead."""
    base = tmp_path / "bare.yaml"
    base.write_text(
        f"registry: {ROOT / 'skill_registry.yaml'}\n"
        "hazard: {source: scripted, kind: level, events: {10: 9.5}}\n",
        encoding="utf-8",
    )
    path = write(tmp_path, tiny(base=str(base), max_evaluations=3))
    with warnings.catch_warnings(record=True) as caught:
        warnings.simplefilter("always")
        calibrate(path, tmp_path / "out", progress=False)
    said = [str(w.message) for w in caught if issubclass(w.category, CodeDefaultsWarning)]
    assert len(said) == 1, said
    assert "evaluations" not in said[0]


def test_parameters_change_the_simulations(fitted):
    # Nelder-Mead's first evaluations are the start and a step along each parameter.
    table = pd.read_csv(fitted.out_dir / "evaluations.csv")
    assert len(table) >= 2
    names = list(fitted.table["name"])
    first, second = table.iloc[0], table.iloc[1]
    assert (first[list(PARAMETERS)] != second[list(PARAMETERS)]).any()
    assert (first[names].astype(float) != second[names].astype(float)).any()
    assert first["loss"] != second["loss"]


def test_reproducible_from_seed(fitted, tmp_path):
    path = write(tmp_path, tiny())
    again = calibrate(path, tmp_path / "out", progress=False)
    assert (again.out_dir / "evaluations.csv").read_bytes() == (
        fitted.out_dir / "evaluations.csv"
    ).read_bytes()
    assert again.best == fitted.best


def test_an_interrupted_calibration_keeps_the_evaluations_that_finished(tmp_path, monkeypatch):
    """Ctrl-C in the second evaluation: the first is in evaluations.csv and best.yaml."""
    from simulation.calibration import fit

    real = fit.run_experiment
    calls = []

    def interrupted_second(*args: Any, **kwargs: Any) -> Any:
        calls.append(args)
        if len(calls) == 2:
            raise KeyboardInterrupt
        return real(*args, **kwargs)

    monkeypatch.setattr(fit, "run_experiment", interrupted_second)
    path = write(tmp_path, tiny(parameters=DECAY, replicates=1))
    with pytest.raises(KeyboardInterrupt):
        calibrate(path, tmp_path / "out", executor="serial", progress=False)
    table = pd.read_csv(tmp_path / "out" / "evaluations.csv")
    assert table["evaluation"].tolist() == [0]
    assert table["memory.decay_rate"].tolist() == [DECAY["memory.decay_rate"]["start"]]
    best = yaml.safe_load((tmp_path / "out" / "best.yaml").read_text(encoding="utf-8"))
    assert best["stopped"] == "interrupted after 1 evaluations"
    assert best["evaluation"] == 0


def test_powell_within_budget(tmp_path):
    """Also: a target window past the runs' end is said once, at setup, not per evaluation."""
    path = write(tmp_path, tiny(method="powell", parameters=DECAY, max_evaluations=3))
    with pytest.warns(ShortWindowWarning) as caught:
        result = calibrate(path, tmp_path / "out", executor="serial", progress=False)
    windows = [str(w.message) for w in caught if w.category is ShortWindowWarning]
    assert windows == [
        f"{path}: targets: target {name!r}: years 5-30 reach past the run's last year (the "
        "calibration's runs end in year 16): the mean is over years 5-16 only"
        for name in ("insured_share_floodplain", "insured_share_outside_floodplain")
    ]
    assert 1 <= len(result.evaluations) <= 3
    assert 0.7 <= result.best["memory.decay_rate"] <= 0.99


def test_workers_for_a_serial_executor_is_warned_of_once_naming_the_calibration_file(tmp_path):
    """Not once per evaluation, and not naming the evaluations' generated experiment files."""
    path = write(tmp_path, tiny(parameters=DECAY, replicates=1, max_evaluations=3))
    with pytest.warns(ConfigWarning) as caught:
        result = calibrate(path, tmp_path / "out", workers=4, progress=False)
    said = [str(w.message) for w in caught if w.category is ConfigWarning]
    assert said == [f"{path}: --workers 4 is not used: the executor is serial (one run at a time)"]
    assert len(result.evaluations) == 3
    (kept,) = (tmp_path / "out" / "evaluations").iterdir()  # the best evaluation's
    ran = yaml.safe_load((kept / "experiment.yaml").read_text(encoding="utf-8"))
    assert ran["executor"]["kind"] == "serial"
    assert ran["executor"]["workers"] == 4


class _Killed(BaseException):
    """Stands for SIGKILL (or a job's time limit): the calibration gets to write nothing."""


def _counting_runs(
    monkeypatch, interrupt_at: int | None = None, stop: type[BaseException] = KeyboardInterrupt
) -> list[Any]:
    """Count the evaluations simulated; optionally raise ``stop`` as the ``interrupt_at``-th ends.

    The interrupted evaluation's batch has run, so its folder holds a whole experiment.
    """
    from simulation.calibration import fit

    real = fit.run_experiment
    calls: list[Any] = []

    def counted(*args: Any, **kwargs: Any) -> Any:
        calls.append(args)
        result = real(*args, **kwargs)
        if len(calls) == interrupt_at:
            raise stop
        return result

    monkeypatch.setattr(fit, "run_experiment", counted)
    return calls


def _outputs(out: Path) -> tuple[bytes, bytes, list[str]]:
    return (
        (out / "evaluations.csv").read_bytes(),
        (out / "best.yaml").read_bytes(),
        sorted(p.name for p in (out / "evaluations").iterdir()),
    )


@pytest.mark.parametrize("first", ["interrupted", "budget"])
def test_a_resumed_calibration_ends_as_one_that_never_stopped(tmp_path, monkeypatch, first):
    """Interrupted in its fourth evaluation, or stopped by a budget of three and given six."""
    data = tiny(parameters=PARAMETERS, replicates=1, max_evaluations=6)
    path = write(tmp_path, data)
    whole = calibrate(path, tmp_path / "whole", progress=False)
    assert len(whole.evaluations) == 6

    out = tmp_path / "resumed"
    if first == "interrupted":
        _counting_runs(monkeypatch, interrupt_at=4)
        with pytest.raises(KeyboardInterrupt):
            calibrate(path, out, progress=False)
    else:
        calibrate(write(tmp_path, {**data, "max_evaluations": 3}), out, progress=False)
    assert len(pd.read_csv(out / "evaluations.csv")) == 3
    path = write(tmp_path, data)
    simulated = _counting_runs(monkeypatch)
    resumed = calibrate(path, out, resume=True, progress=False)

    assert (resumed.resumed, len(simulated)) == (3, 3)
    assert _outputs(out) == _outputs(tmp_path / "whole")
    assert resumed.best == whole.best
    pd.testing.assert_frame_equal(resumed.table, whole.table)


@pytest.mark.parametrize(
    ("change", "refusal"),
    [
        ({"seed": 6}, "holds a calibration of other settings"),
        ({"set": {"households.count": 41}}, "holds a calibration of other settings"),
        ({"max_evaluations": 2}, "max_evaluations 2 is below the 3 evaluations"),
    ],
)
def test_resuming_an_earlier_attempt_it_cannot_continue_is_refused(tmp_path, change, refusal):
    data = tiny(parameters=DECAY, replicates=1, max_evaluations=3)
    calibrate(write(tmp_path, data), tmp_path / "out", progress=False)
    before = _outputs(tmp_path / "out")
    path = write(tmp_path, {**data, **change})
    with pytest.raises(CalibrationError, match=refusal):
        calibrate(path, tmp_path / "out", resume=True, progress=False)
    assert _outputs(tmp_path / "out") == before


@pytest.fixture(scope="module")
def three_done(tmp_path_factory) -> tuple[Path, Path]:
    """A finished calibration of three evaluations (its file and its output folder)."""
    folder = tmp_path_factory.mktemp("three")
    path = write(folder, tiny(parameters=DECAY, replicates=1, max_evaluations=3))
    calibrate(path, folder / "out", progress=False)
    return path, folder / "out"


def _cut(text: bytes) -> bytes:
    return text[:-12]


def _swap(text: bytes) -> bytes:
    head, *rows = text.splitlines(keepends=True)
    return head + rows[1] + rows[0] + b"".join(rows[2:])


def _twice(text: bytes) -> bytes:
    return text + text.splitlines(keepends=True)[1]


def _rename(text: bytes) -> bytes:
    return text.replace(b",loss,", b",Loss,", 1)


def _nan_loss(text: bytes) -> bytes:
    head, first, *rest = text.splitlines(keepends=True)
    cells = first.split(b",")
    cells[2] = b"nan"
    return head + b",".join(cells) + b"".join(rest)


@pytest.mark.parametrize(
    ("damage", "refusal"),
    [
        (_cut, r"its last row is cut short"),
        (_swap, r"its rows are out of order"),
        (_twice, r"evaluation 0 appears twice"),
        (_rename, r"has no column 'loss'$"),
        (_nan_loss, r"line 2: loss 'nan' is not a finite number"),
        (lambda text: text[: text.rindex(b"\n", 0, -1) + 1], "holds 2 evaluations but best"),
    ],
    ids=["cut", "swapped", "twice", "renamed", "nan-loss", "last-row-removed"],
)
def test_resuming_from_a_damaged_evaluations_csv_says_what_is_wrong(
    three_done, tmp_path, damage, refusal
):
    """A cut last row was read with its missing values as 0 or blank; the others were named as
    a missing evaluation or a raw KeyError."""
    path, done = three_done
    out = tmp_path / "out"
    shutil.copytree(done, out)
    (out / "evaluations.csv").write_bytes(damage((out / "evaluations.csv").read_bytes()))
    with pytest.raises(CalibrationError, match=refusal) as caught:
        calibrate(path, out, resume=True, progress=False)
    assert "\n" not in str(caught.value)


def test_resuming_without_best_yaml_does_not_replace_the_evaluations(three_done, tmp_path):
    """It started again and overwrote them, though a changed calibration file had made them
    another calibration's."""
    path, done = three_done
    out = tmp_path / "out"
    shutil.copytree(done, out)
    (out / "best.yaml").unlink()
    before = (out / "evaluations.csv").read_bytes()
    with pytest.raises(CalibrationError, match=r"best\.yaml is missing, .* with --overwrite"):
        calibrate(path, out, resume=True, progress=False)
    assert (out / "evaluations.csv").read_bytes() == before
    (out / "best.yaml").write_text("a: [\n  {{{: [\n", encoding="utf-8")
    with pytest.raises(
        CalibrationError, match=r"best\.yaml cannot be read: line \d+, column"
    ) as caught:
        calibrate(path, out, resume=True, progress=False)
    assert "\n" not in str(caught.value)


def test_a_folder_where_a_summary_goes_is_refused_before_anything_runs(three_done, tmp_path):
    """Found when the figure was drawn, after the search: every --resume met it again."""
    path, done = three_done
    out = tmp_path / "out"
    shutil.copytree(done, out)
    (out / "calibration.png").unlink()
    (out / "calibration.png").mkdir()
    for flags in ({"resume": True}, {"overwrite": True}):
        with pytest.raises(CalibrationError, match=r"calibration\.png: a folder where the"):
            calibrate(path, out, progress=False, **flags)


def test_a_target_of_zero_tolerance_is_refused_by_a_calibration(tmp_path):
    """The loss counts misses in tolerances: it was scaled by 1, the least weight of all."""
    targets = yaml.safe_load(TARGETS.read_text(encoding="utf-8"))
    targets["targets"][0]["tolerance"] = 0
    (tmp_path / "targets.yaml").write_text(yaml.safe_dump(targets), encoding="utf-8")
    path = write(tmp_path, tiny(targets=str(tmp_path / "targets.yaml")))
    name = targets["targets"][0]["name"]
    with pytest.raises(CalibrationError, match=rf"target '{name}': tolerance 0 cannot scale"):
        load_calibration(path)


def test_a_folder_another_calibration_is_writing_is_refused_untouched(tmp_path):
    data = tiny(parameters=DECAY, replicates=1, max_evaluations=2)
    calibrate(write(tmp_path, data), tmp_path / "out", progress=False)
    before = _outputs(tmp_path / "out")
    # Held as the other calibration's process holds it; with --overwrite this one would
    # otherwise clear that one's results at its start.
    with hold_folder(tmp_path / "out"), pytest.raises(CalibrationError) as info:
        calibrate(write(tmp_path, data), tmp_path / "out", overwrite=True, progress=False)
    assert str(info.value) == (
        f"{tmp_path / 'out'}: another floodsim batch or calibration is writing this folder; "
        "wait for it to end, or give another --out"
    )
    assert _outputs(tmp_path / "out") == before


def test_a_calibration_again_needs_resume_or_overwrite_to_touch_the_earlier_one(
    tmp_path, monkeypatch, capsys
):
    """Its evaluations took hours: a second run without a flag would have deleted them."""
    data = tiny(parameters=DECAY, replicates=1, max_evaluations=2)
    path = write(tmp_path, data)
    out = tmp_path / "out"
    calibrate(path, out, progress=False)
    before = _outputs(out)
    simulated = _counting_runs(monkeypatch)
    code = main(["calibrate", str(path), "--out", str(out), "--quiet"])
    assert code == 2
    # The last line of stderr: the tiny calibration's short windows are warned about first.
    assert capsys.readouterr().err.splitlines()[-1] == (
        f"floodsim: error: {out}: holds the results of a calibration (evaluations.csv, "
        "best.yaml, calibration.png, evaluations); add --resume to continue it, or "
        "--overwrite to replace them"
    )
    assert _outputs(out) == before
    assert not simulated
    assert main(["calibrate", str(path), "--out", str(out), "--quiet", "--overwrite"]) == 0
    assert len(simulated) == 2
    assert _outputs(out) == before  # the same calibration again, simulated again
    with pytest.raises(SystemExit) as raised:
        main(["calibrate", str(path), "--out", str(out), "--resume", "--overwrite"])
    assert raised.value.code == 2


@pytest.mark.parametrize("kind", ["run", "experiment"])
def test_a_run_or_an_experiments_folder_is_never_a_calibrations(tmp_path, kind, capsys):
    out = tmp_path / kind
    out.mkdir()
    mark = "manifest.json" if kind == "run" else "experiment.json"
    (out / mark).write_text("{}", encoding="utf-8")
    path = write(tmp_path, tiny(parameters=DECAY, replicates=1, max_evaluations=2))
    what = "a run directory" if kind == "run" else "a batch experiment's folder"
    for flags in ((), ("--resume",), ("--overwrite",)):
        assert main(["calibrate", str(path), "--out", str(out), "--quiet", *flags]) == 2
        assert capsys.readouterr().err.splitlines()[-1] == (
            f"floodsim: error: {out}: is {what} (it holds {mark}), not a calibration's "
            "folder; give another --out"
        )
    assert sorted(p.name for p in out.iterdir()) == [mark]


def test_resuming_after_the_registry_was_edited_is_refused(tmp_path):
    """The base config names the registry by path only: its contents are in the fingerprint."""
    registry = tmp_path / "registry.yaml"
    registry.write_bytes((ROOT / "skill_registry.yaml").read_bytes())
    data = tiny(parameters=DECAY, replicates=1, max_evaluations=2)
    data["set"] = {**data["set"], "registry": str(registry)}
    path = write(tmp_path, data)
    calibrate(path, tmp_path / "out", progress=False)
    registry.write_bytes(registry.read_bytes() + b"# edited\n")
    with pytest.raises(CalibrationError, match="holds a calibration of other settings"):
        calibrate(path, tmp_path / "out", resume=True, progress=False)


def test_resuming_losses_other_code_computed_is_warned_of(tmp_path):
    """A changed model or statistic would score the replayed points otherwise, unsaid."""
    path = write(tmp_path, tiny(parameters=DECAY, replicates=1, max_evaluations=2))
    calibrate(path, tmp_path / "out", progress=False)
    best = tmp_path / "out" / "best.yaml"
    summary = yaml.safe_load(best.read_text(encoding="utf-8"))
    with warnings.catch_warnings():
        warnings.simplefilter("error", ConfigWarning)  # the same code: nothing to say
        calibrate(path, tmp_path / "out", resume=True, progress=False)
    best.write_text(yaml.safe_dump({**summary, "code": "0" * 64}), encoding="utf-8")
    with pytest.warns(ConfigWarning, match=r"other floodsim code computed \(code 000000000000 "):
        calibrate(path, tmp_path / "out", resume=True, progress=False)


def test_resuming_where_nothing_finished_starts_from_the_beginning(tmp_path, monkeypatch):
    """Even over a finished calibration: starting again with --overwrite clears its results."""
    path = write(tmp_path, tiny(parameters=DECAY, replicates=1, max_evaluations=2))
    calibrate(path, tmp_path / "out", progress=False)
    _counting_runs(monkeypatch, interrupt_at=1)
    with pytest.raises(KeyboardInterrupt):
        calibrate(path, tmp_path / "out", overwrite=True, progress=False)
    assert not (tmp_path / "out" / "best.yaml").exists()
    simulated = _counting_runs(monkeypatch)
    result = calibrate(path, tmp_path / "out", resume=True, progress=False)
    assert (result.resumed, len(simulated), len(result.evaluations)) == (0, 2, 2)
    # The interrupted evaluation's leftover runs are simulated again, not refused and scored
    # as a failed point.
    assert not result.evaluations["invalid"].any()
    calibrate(path, tmp_path / "whole", progress=False)
    assert _outputs(tmp_path / "out") == _outputs(tmp_path / "whole")


def test_ctrl_c_while_the_summaries_are_written_leaves_a_folder_resume_continues(
    tmp_path, monkeypatch
):
    path = write(tmp_path, tiny(parameters=DECAY, replicates=1, max_evaluations=2))
    calibrate(path, tmp_path / "whole", progress=False)
    real = os.replace

    def interrupted(src: Any, dst: Any) -> None:
        if Path(dst).name == "best.yaml":  # evaluations.csv is written, best.yaml not yet
            raise KeyboardInterrupt
        real(src, dst)

    with monkeypatch.context() as patch:
        patch.setattr(atomic.os, "replace", interrupted)
        with pytest.raises(KeyboardInterrupt):
            calibrate(path, tmp_path / "out", progress=False)
    assert not (tmp_path / "out" / "best.yaml").exists()
    result = calibrate(path, tmp_path / "out", resume=True, progress=False)
    assert not result.evaluations["invalid"].any()
    assert _outputs(tmp_path / "out") == _outputs(tmp_path / "whole")
    assert sorted(p.name for p in (tmp_path / "out").iterdir()) == sorted(
        p.name for p in (tmp_path / "whole").iterdir()
    )


def test_a_calibration_killed_outright_loses_only_the_evaluation_it_was_simulating(
    tmp_path, monkeypatch
):
    """SIGKILL (the out-of-memory killer, a job's hard time limit) writes nothing at the end:
    the summaries written after each evaluation are what --resume continues from."""
    data = tiny(parameters=PARAMETERS, replicates=1, max_evaluations=5)
    path = write(tmp_path, data)
    whole = calibrate(path, tmp_path / "whole", progress=False)
    out = tmp_path / "out"
    _counting_runs(monkeypatch, interrupt_at=3, stop=_Killed)
    with pytest.raises(_Killed):
        calibrate(path, out, progress=False)
    assert pd.read_csv(out / "evaluations.csv")["evaluation"].tolist() == [0, 1]
    best = yaml.safe_load((out / "best.yaml").read_text(encoding="utf-8"))
    assert best["stopped"] == "running: 2 evaluations so far"
    assert best["evaluations"] == 2
    assert not (out / "calibration.png").exists()  # drawn when the search stops

    simulated = _counting_runs(monkeypatch)
    resumed = calibrate(path, out, resume=True, progress=False)
    assert (resumed.resumed, len(simulated)) == (2, 3)
    assert _outputs(out) == _outputs(tmp_path / "whole")
    assert (out / "calibration.png").is_file()
    pd.testing.assert_frame_equal(resumed.table, whole.table)


def test_killed_after_a_resumed_attempt_found_a_better_point_it_resumes(tmp_path, monkeypatch):
    """Stopped by a budget of three (best: evaluation 2), then resumed with six: evaluation 4
    is better, and the process is killed in evaluation 5. The summaries written after
    evaluation 4 name it, and its runs must be there for the next --resume."""
    data = tiny(parameters=PARAMETERS, replicates=1, max_evaluations=6)
    whole = calibrate(write(tmp_path, data), tmp_path / "whole", progress=False)
    losses = whole.evaluations["loss"].tolist()
    assert min(losses[:3]) == losses[2] > losses[4] == min(losses[:5])  # what the test needs

    out = tmp_path / "out"
    calibrate(write(tmp_path, {**data, "max_evaluations": 3}), out, progress=False)
    path = write(tmp_path, data)
    _counting_runs(monkeypatch, interrupt_at=3, stop=_Killed)  # e3, e4, then killed in e5
    with pytest.raises(_Killed):
        calibrate(path, out, resume=True, progress=False)
    assert yaml.safe_load((out / "best.yaml").read_text(encoding="utf-8"))["evaluation"] == 4

    simulated = _counting_runs(monkeypatch)
    resumed = calibrate(path, out, resume=True, progress=False)
    assert (resumed.resumed, len(simulated)) == (5, 1)
    assert _outputs(out) == _outputs(tmp_path / "whole")
    pd.testing.assert_frame_equal(resumed.table, whole.table)


def test_killed_between_the_summaries_of_a_resumed_attempt_it_resumes(tmp_path, monkeypatch):
    """Killed after evaluations.csv took evaluation 4, a new best, but before best.yaml did:
    the two disagree on the best, and evaluations.csv is the later word."""
    data = tiny(parameters=PARAMETERS, replicates=1, max_evaluations=6)
    calibrate(write(tmp_path, data), tmp_path / "whole", progress=False)
    out = tmp_path / "out"
    calibrate(write(tmp_path, {**data, "max_evaluations": 3}), out, progress=False)
    path = write(tmp_path, data)
    real = os.replace
    written = []

    def killed(src: Any, dst: Any) -> None:
        if Path(dst).name == "best.yaml":
            written.append(dst)
            if len(written) == 2:  # after evaluation 3's summaries, in evaluation 4's
                raise _Killed
        real(src, dst)

    with monkeypatch.context() as patch:
        patch.setattr(atomic.os, "replace", killed)
        with pytest.raises(_Killed):
            calibrate(path, out, resume=True, progress=False)
    assert len(pd.read_csv(out / "evaluations.csv")) == 5
    assert yaml.safe_load((out / "best.yaml").read_text(encoding="utf-8"))["evaluation"] == 2

    simulated = _counting_runs(monkeypatch)
    resumed = calibrate(path, out, resume=True, progress=False)
    assert (resumed.resumed, len(simulated)) == (5, 1)
    assert _outputs(out) == _outputs(tmp_path / "whole")


def test_resuming_from_a_summary_cut_short_says_so(tmp_path):
    path = write(tmp_path, tiny(parameters=DECAY, replicates=1, max_evaluations=2))
    calibrate(path, tmp_path / "out", progress=False)
    (tmp_path / "out" / "best.yaml").write_text("", encoding="utf-8")
    with pytest.raises(CalibrationError, match="holds no calibration summary"):
        calibrate(path, tmp_path / "out", resume=True, progress=False)


# Valid at the start and at each bound with the other at its start. Both starts lie in the
# top quarter of their ranges, so the simplex steps each one down; the subsidies do not move
# these targets, so the losses tie and the reflection of the last vertex comes next: it
# lowers initial_subsidy (0.485) and raises min_subsidy to its bound (0.5), past each other.
SUBSIDIES = {
    "government.initial_subsidy": {"start": 0.5, "low": 0.45, "high": 0.51},
    "government.min_subsidy": {"start": 0.45, "low": 0.0, "high": 0.5},
}


def test_a_point_whose_values_conflict_scores_the_penalty_and_the_search_goes_on(tmp_path):
    """The reason names the refusal and the values, not an experiment file or design point."""
    path = write(tmp_path, tiny(parameters=SUBSIDIES, max_evaluations=4))
    result = calibrate(path, tmp_path / "out", progress=False)
    table = pd.read_csv(tmp_path / "out" / "evaluations.csv", keep_default_na=False)
    invalid = table[table["invalid"] != ""]
    assert list(invalid["evaluation"]) == [3]
    assert invalid["invalid"].iat[0] == (
        "government: initial_subsidy (0.485) must lie within [min_subsidy, max_subsidy] = "
        "[0.5, 0.95] (at government.initial_subsidy=0.485, government.min_subsidy=0.5)"
    )
    penalty = NONFINITE_PENALTY * len(result.table)
    assert invalid["loss"].iat[0] == penalty
    assert result.loss < penalty
    assert not (tmp_path / "out" / "evaluations" / "e003").exists()


def test_bounds_are_checked_with_the_other_parameters_at_their_starts(tmp_path):
    # min_subsidy's high (0.6) conflicts with the base's initial_subsidy (0.5), a value the
    # search never pairs it with: initial_subsidy is fitted, from 0.7 up.
    parameters = {
        "government.min_subsidy": {"start": 0.3, "low": 0.0, "high": 0.6},
        "government.initial_subsidy": {"start": 0.7, "low": 0.65, "high": 0.9},
    }
    calibration, _ = load_calibration(write(tmp_path, tiny(parameters=parameters)))
    assert set(calibration.parameters) == set(parameters)


def test_a_bound_that_conflicts_with_another_start_is_refused(tmp_path):
    # min_subsidy's high (0.45) fits the base's initial_subsidy (0.5) but not its start (0.4).
    parameters = {
        "government.min_subsidy": {"start": 0.2, "low": 0.0, "high": 0.45},
        "government.initial_subsidy": {"start": 0.4, "low": 0.3, "high": 0.9},
    }
    path = write(tmp_path, tiny(parameters=parameters))
    with pytest.raises(CalibrationError) as caught:
        load_calibration(path)
    assert str(caught.value) == (
        f"{path}: parameters.government.min_subsidy.high: rejected by the run config with the "
        "other parameters at their starts (government: initial_subsidy (0.4) must lie within "
        "[min_subsidy, max_subsidy] = [0.45, 0.95])"
    )


def test_starts_that_conflict_are_refused_at_load_naming_them(tmp_path):
    # Each start is valid against the base (initial_subsidy 0.5, min_subsidy 0.2), and each
    # bound would be too; together min_subsidy 0.45 is above initial_subsidy 0.35.
    parameters = {
        "government.min_subsidy": {"start": 0.45, "low": 0.0, "high": 0.5},
        "government.initial_subsidy": {"start": 0.35, "low": 0.3, "high": 0.9},
    }
    path = write(tmp_path, tiny(parameters=parameters))
    with pytest.raises(CalibrationError) as caught:
        load_calibration(path)
    assert str(caught.value) == (
        f"{path}: parameters: the starts government.min_subsidy=0.45, "
        "government.initial_subsidy=0.35 are rejected together by the run config (government: "
        "initial_subsidy (0.35) must lie within [min_subsidy, max_subsidy] = [0.45, 0.95])"
    )


def test_target_loss():
    assert target_loss(0.6, 0.5, 0.05) == pytest.approx(4.0)
    assert target_loss(math.inf, 9.0, 3.0) == NONFINITE_PENALTY
    assert target_loss(math.nan, 3.0, 1.0) == NONFINITE_PENALTY
    assert target_loss(2.0, 1.0, 0.0) == pytest.approx(1.0)  # zero tolerance: plain squares


@pytest.mark.parametrize(
    ("changes", "key"),
    [
        ({"unknown_option": 1}, "unknown_option"),
        (
            {
                "parameters": {
                    "decision.pmt.no_such_coefficient": PARAMETERS["decision.pmt.beta_tp"]
                }
            },
            "parameters.decision.pmt.no_such_coefficient",
        ),
        (
            {"parameters": {"decision.pmt.beta_tp": {"start": 5.0, "low": 6.0, "high": 6.0}}},
            "parameters.decision.pmt.beta_tp",
        ),
        (
            {"parameters": {"decision.pmt.beta_tp": {"start": 12.0, "low": 1.0, "high": 10.0}}},
            "parameters.decision.pmt.beta_tp",
        ),
        (
            {"parameters": {"memory.decay_rate": {"start": 0.9, "low": 0.5, "high": 1.5}}},
            "parameters.memory.decay_rate.high",
        ),
        (
            {"parameters": {"decision.pmt": PARAMETERS["decision.pmt.beta_tp"]}},
            "parameters.decision.pmt",
        ),
        (
            {"parameters": {"memory.working_capacity": {"start": 10, "low": 5, "high": 20}}},
            "parameters.memory.working_capacity",
        ),
        ({"targets": "no_such_targets.yaml"}, "targets"),
        ({"base": "no_such_config.yaml"}, "base"),
        ({"parameters": {}}, "parameters"),
        ({"set": {"seed": 3}}, "set.seed"),
        ({"set": {"name": "other"}}, "set.name"),
        ({"set": {"decision.pmt.beta_tp": 3.0}}, "set.decision.pmt.beta_tp"),
        # A section holding a fitted key: the search's value silently won.
        ({"set": {"decision": {"pmt": {"beta_tp": 3.0}}}}, "set.decision"),
        # A key given dotted and in its section: one of the two silently won.
        (
            {"set": {"memory.decay_rate": 0.8, "memory": {"decay_rate": 0.9}}},
            "set.memory.decay_rate",
        ),
        ({"set": {"households.count": 40, "years": 12}}, "targets"),  # reads year 15
    ],
    ids=[
        "unknown-top-level-key",
        "unknown-parameter-key",
        "low-not-below-high",
        "start-outside-bounds",
        "bound-rejected-by-config",
        "parameter-is-a-section",
        "parameter-not-real-valued",
        "missing-targets-file",
        "missing-base-file",
        "no-parameters",
        "seed-in-set",
        "name-in-set",
        "fixed-and-fitted",
        "fixed-in-a-section-and-fitted",
        "set-twice",
        "targets-past-the-run",
    ],
)
def test_bad_files(tmp_path, changes, key):
    path = write(tmp_path, tiny(**changes))
    with pytest.raises(CalibrationError) as caught:
        calibrate(path, tmp_path / "out", progress=False)
    message = str(caught.value)
    assert "\n" not in message
    assert message.startswith(f"{path}: ")
    assert f" {key}:" in message or f" {key}." in message
    assert not (tmp_path / "out").exists()  # nothing ran


def test_targets_past_the_runs_name_the_calibrations_runs(tmp_path):
    # `years` comes from `set`, not the base config (30 years): the message says whose runs.
    path = write(tmp_path, tiny(set={"households.count": 40, "years": 12}))
    with pytest.raises(CalibrationError, match=r"but the calibration's runs last 12 years$"):
        load_calibration(path)


@pytest.mark.parametrize(
    ("settings", "refusal"),
    [
        (
            {"audit.level": "off"},
            r"household_traces audit stream \(audit.level is off: use minimal",
        ),
        # Minimal traces do not say which households held their policy before the run.
        (
            {"households.initial_insured_share": {"AE": 0.3}},
            r"hold policies at the start .* \(use audit.level standard\)$",
        ),
    ],
)
def test_tenure_at_an_audit_level_that_cannot_give_it_is_refused(tmp_path, settings, refusal):
    data = tiny()
    path = write(tmp_path, tiny(set={**data["set"], **settings}))
    with pytest.raises(CalibrationError, match=f"set: target median_policy_tenure .*{refusal}"):
        load_calibration(path)


def test_tenure_at_minimal_with_a_fitted_share_of_starting_policies_is_refused(tmp_path):
    """It loaded, and failed at the first point that gave households a policy at the start."""
    share = {"start": 0.0, "low": 0.0, "high": 0.5}
    path = write(
        tmp_path, tiny(parameters={**PARAMETERS, "households.initial_insured_share.AE": share})
    )
    refusal = r": parameters: households.initial_insured_share.AE: target median_policy_tenure "
    with pytest.raises(CalibrationError, match=refusal + ".* minimal traces do not say since"):
        load_calibration(path)


def test_an_integer_key_is_not_real_valued_even_at_whole_bounds(tmp_path):
    # Strict validation refuses 5.0 for an integer: the message still says why it cannot be fit.
    spec = {"start": 10, "low": 5, "high": 20}
    path = write(tmp_path, tiny(parameters={"memory.working_capacity": spec}))
    with pytest.raises(CalibrationError) as caught:
        calibrate(path, tmp_path / "out", progress=False)
    assert str(caught.value) == (
        f"{path}: parameters.memory.working_capacity: not a real-valued key of the run config"
    )


def test_relative_paths_in_set_stay_relative_to_the_calibration_file(tmp_path):
    (tmp_path / "registry.yaml").write_bytes((ROOT / "skill_registry.yaml").read_bytes())
    data = tiny(parameters=DECAY, max_evaluations=1)
    data["set"] = {**data["set"], "registry": "registry.yaml"}
    path = write(tmp_path, data)
    result = calibrate(path, tmp_path / "out", progress=False)
    assert len(result.evaluations) == 1
    manifest = yaml.safe_load(
        next(result.experiment_dir.glob("runs/*/manifest.json")).read_text(encoding="utf-8")
    )
    assert manifest["status"] == "complete"


def test_baseline_file_is_valid():
    calibration, folder = load_calibration(BASELINE)
    assert folder == BASELINE.parent
    assert "decision.pmt.renewal_inertia" in calibration.parameters
    assert calibration.replicates >= 2


def test_command_prints_folder_last(tmp_path, capsys):
    parser = argparse.ArgumentParser(prog="floodsim")
    commands.register(parser.add_subparsers(dest="command"))
    path = write(tmp_path, tiny(max_evaluations=2))
    out = tmp_path / "out"
    args = parser.parse_args(["calibrate", str(path), "--out", str(out), "--quiet"])
    assert args.func(args) == 0
    lines = capsys.readouterr().out.strip().splitlines()
    assert lines[-1] == str(out)
    assert lines[0] == "best parameters:"
    assert any(line.startswith("loss ") for line in lines)
    assert any("median_policy_tenure" in line for line in lines)
    assert (out / "best.yaml").is_file()


def test_ctrl_c_while_the_last_figure_is_drawn_leaves_a_summary_that_says_running(
    tmp_path, monkeypatch
):
    """Not a best.yaml that reads finished beside no calibration.png: --resume completes it."""
    from simulation.calibration import fit

    path = write(tmp_path, tiny(parameters=DECAY, replicates=1, max_evaluations=3))
    calibrate(path, tmp_path / "whole", progress=False)

    def interrupted(*_: Any, **__: Any) -> Any:
        raise KeyboardInterrupt

    with monkeypatch.context() as patch:
        patch.setattr(fit, "plot_calibration", interrupted)
        with pytest.raises(KeyboardInterrupt):
            calibrate(path, tmp_path / "out", progress=False)
    best = yaml.safe_load((tmp_path / "out" / "best.yaml").read_text(encoding="utf-8"))
    assert best["stopped"] == "running: 3 evaluations so far"
    assert not (tmp_path / "out" / "calibration.png").exists()
    simulated = _counting_runs(monkeypatch)
    resumed = calibrate(path, tmp_path / "out", resume=True, progress=False)
    assert (resumed.resumed, len(simulated)) == (3, 0)
    assert _outputs(tmp_path / "out") == _outputs(tmp_path / "whole")
    assert (tmp_path / "out" / "calibration.png").is_file()


def test_a_year_set_twice_in_two_spellings_is_refused_by_a_calibration(tmp_path):
    """hazard.events.4 and .04 are one year to the runs: one value would be lost unsaid."""
    fixed = {**tiny()["set"], "hazard.events.4": 7.0, "hazard.events.04": 8.0}
    with pytest.raises(CalibrationError, match=r"hazard.events.4 and hazard.events.04 are one"):
        load_calibration(write(tmp_path, tiny(set=fixed)))
    calibration, _ = load_calibration(
        write(tmp_path, tiny(set={**tiny()["set"], "hazard.events.04": 7.0}))
    )
    assert calibration.set["hazard.events.4"] == 7.0
