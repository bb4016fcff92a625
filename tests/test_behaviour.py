"""Tests for behavioural targets: the targets file, statistics on real runs, the command."""

from __future__ import annotations

import argparse
import json
import math
import re
import shutil
import warnings
from pathlib import Path
from typing import Any

import numpy as np
import orjson
import pandas as pd
import pytest
import yaml
from matplotlib.figure import Figure

from simulation.analysis import behaviour, behaviour_commands
from simulation.analysis.behaviour import (
    STATISTICS,
    TABLE_COLUMNS,
    BehaviourError,
    BlankStatisticError,
    BlankYearsWarning,
    IncompleteExperimentWarning,
    ShortWindowWarning,
    Target,
    UncomputedTargetWarning,
    UnscriptedFloodWarning,
    _summary,
    check_behaviour,
    load_targets,
    median_tenure,
    plot_behaviour,
    row_labels,
    run_statistic,
)
from simulation.analysis.event_study import event_study, recovery_years
from simulation.audit.readers import iter_records
from simulation.cli import main
from simulation.config import ConfigError, load_config
from simulation.experiments import ExperimentConfig, run_experiment
from simulation.runner import run_simulation

ROOT = Path(__file__).resolve().parents[1]
SCENARIO = ROOT / "configs" / "scenarios" / "single_flood.yaml"
TARGETS = ROOT / "configs" / "targets" / "stylized_facts.yaml"
SMALL = ["households.count=200", "years=20", "audit.level=minimal"]


@pytest.fixture(scope="module")
def run_dir(tmp_path_factory):
    config, base = load_config(SCENARIO, SMALL)
    out = tmp_path_factory.mktemp("run")
    return run_simulation(config, base, out, progress=False).run_dir


def run_small_experiment(tmp_path_factory, name: str, body: str) -> Path:
    """Run an experiment on the single-flood scenario, serially; ``body`` follows ``base``."""
    folder = tmp_path_factory.mktemp(name)
    path = folder / "experiment.yaml"
    path.write_text(f"name: {name}\nbase: {SCENARIO}\n{body}", encoding="utf-8")
    return run_experiment(path, folder / "out", executor="serial", progress=False).out_dir


@pytest.fixture(scope="module")
def experiment_dir(tmp_path_factory):
    return run_small_experiment(
        tmp_path_factory,
        "single_flood_reps",
        "set: {households.count: 200, audit.level: minimal}\n"  # the full 30 years
        "replicates: 2\nseed: 3\nexecutor: {kind: serial}\n",
    )


@pytest.fixture(scope="module")
def sweep_dir(tmp_path_factory):
    return run_small_experiment(
        tmp_path_factory,
        "decay_points",
        "set: {households.count: 150, years: 16, audit.level: minimal}\n"
        "sweep: {grid: {memory.decay_rate: [0.6, 1.0]}}\n"
        "replicates: 2\nseed: 5\nexecutor: {kind: serial}\n",
    )


def write_targets(tmp_path: Path, entries: list[dict]) -> Path:
    path = tmp_path / "targets.yaml"
    path.write_text(yaml.safe_dump({"targets": entries}), encoding="utf-8")
    return path


GOOD = {"name": "t", "statistic": "mean_of_column", "value": 0.5, "tolerance": 0.1}


def test_stylized_facts_file_validates():
    targets = load_targets(TARGETS)
    assert {t.statistic for t in targets} == set(STATISTICS)
    assert all(t.source and t.description for t in targets)
    events = [t for t in targets if t.statistic.startswith("event_")]
    assert events
    assert all(t.flood_year == 10 for t in events)
    # The event studies behind the jump report changes in log policies: relative changes.
    assert {t.change for t in events if t.statistic != "event_recovery_years"} == {"relative"}


def test_validate_knows_a_targets_file_and_run_refuses_one(capsys, tmp_path, monkeypatch):
    monkeypatch.chdir(tmp_path)  # should the refusal break, the run lands in a scratch folder
    assert main(["validate", str(TARGETS)]) == 0
    assert "ok (targets file: 6 targets)" in capsys.readouterr().out
    assert main(["run", str(TARGETS)]) == 2
    err = capsys.readouterr().err
    assert "this is a targets file" in err
    assert "floodsim check-behaviour --targets" in err


@pytest.mark.parametrize(
    ("change", "key"),
    [
        ({"statistic": "median_of_nothing"}, "targets[0].statistic"),
        ({"value": None}, "targets[0].value"),
        ({"colour": "red"}, "targets[0].colour"),
        ({"tolerance": -0.1}, "targets[0].tolerance"),
        ({"statistic": "event_change_at"}, "years_since"),
        ({"years": [9, 3]}, "years"),
        ({"column": "insured_shares"}, "targets[0].column"),
        ({"years_since": 3}, "years_since: not used by statistic mean_of_column"),
        ({"statistic": "median_policy_tenure", "column": "insured_share"}, "column: not used"),
        ({"statistic": "event_jump", "flood_year": 0}, "targets[0].flood_year"),
        ({"change": "relative"}, "change: not used by statistic mean_of_column"),
        ({"statistic": "event_recovery_years", "change": "relative"}, "change: not used"),
        ({"statistic": "event_jump", "change": "percent"}, "targets[0].change"),
    ],
)
def test_bad_targets_name_file_and_key(tmp_path, change, key):
    entry = {k: v for k, v in {**GOOD, **change}.items() if v is not None}
    path = write_targets(tmp_path, [entry])
    with pytest.raises(BehaviourError) as info:
        load_targets(path)
    message = str(info.value)
    assert "\n" not in message
    assert message.startswith(str(path))
    assert key in message


def test_a_run_config_given_as_targets_is_named_as_one():
    config = ROOT / "configs" / "default.yaml"
    with pytest.raises(BehaviourError) as raised:
        load_targets(config)
    assert str(raised.value) == (
        f"{config}: this is a run config (it sets years), not a targets file; "
        "run it with floodsim run"
    )


def test_bad_targets_file_shapes(tmp_path):
    missing = tmp_path / "missing.yaml"
    with pytest.raises(BehaviourError, match=re.escape(f"{missing}: targets file not found")):
        load_targets(missing)
    top = tmp_path / "list.yaml"
    top.write_text("- a\n", encoding="utf-8")
    with pytest.raises(BehaviourError, match="top level"):
        load_targets(top)
    extra = tmp_path / "extra.yaml"
    extra.write_text(yaml.safe_dump({"targets": [GOOD], "tragets": []}), encoding="utf-8")
    with pytest.raises(BehaviourError, match="tragets: unknown key"):
        load_targets(extra)
    dup = write_targets(tmp_path, [GOOD, GOOD])
    with pytest.raises(BehaviourError, match="duplicate target name 't'"):
        load_targets(dup)
    twice = tmp_path / "twice.yaml"
    twice.write_text("targets: []\ntargets: []\n", encoding="utf-8")
    with pytest.raises(BehaviourError, match="line 2, column 1: duplicate key 'targets'"):
        load_targets(twice)
    latin1 = tmp_path / "latin1.yaml"
    latin1.write_bytes(b"targets:\n  - name: caf\xe9\n")
    with pytest.raises(BehaviourError, match=r"latin1\.yaml: not UTF-8 text \(byte 22"):
        load_targets(latin1)


@pytest.mark.parametrize(
    ("stray", "problem"),
    [
        ({3: -1}, "3: Keys should be strings (got 3)"),  # was an IndexError in the message
        ({"tragets": []}, "tragets: unknown key"),  # was "targets: unknown key", as a run config
    ],
)
def test_validate_names_a_stray_key_of_a_targets_file(tmp_path, capsys, stray, problem):
    path = tmp_path / "targets.yaml"
    path.write_text(yaml.safe_dump({"targets": [GOOD], **stray}), encoding="utf-8")
    assert main(["validate", str(path)]) == 2
    assert capsys.readouterr().err == f"floodsim: error: {path}: {problem}\n"
    with pytest.raises(BehaviourError) as raised:
        load_targets(path)
    assert str(raised.value) == f"{path}: {problem}"


def test_check_behaviour_on_a_run(run_dir):
    table = check_behaviour(run_dir, TARGETS)
    assert tuple(table.columns) == TABLE_COLUMNS
    assert table["name"].tolist() == [t.name for t in load_targets(TARGETS)]
    # Ten years after the flood may be too few to recover (a censored duration: infinite).
    durations = table["statistic"] == "event_recovery_years"
    assert np.isfinite(table.loc[~durations, "value"]).all()
    assert not table.loc[durations, "value"].isna().any()
    assert table["spread"].isna().all()  # one run: no spread
    assert (table["n_runs"] == 1).all()
    expected = (table["value"] - table["target"]).abs() <= table["tolerance"]
    assert table["passed"].tolist() == expected.tolist()
    jump = table.set_index("name").loc["takeup_jump_after_flood", "value"]
    assert jump > 0


def test_check_behaviour_on_an_experiment(experiment_dir):
    table = check_behaviour(experiment_dir, TARGETS)
    assert table["name"].tolist() == [t.name for t in load_targets(TARGETS)]
    assert (table["n_runs"] == 2).all()
    # A run may end before take-up recovers (a censored duration: infinite); all else is finite.
    durations = table["statistic"] == "event_recovery_years"
    assert np.isfinite(table.loc[~durations, "value"]).all()
    assert np.isfinite(table.loc[~durations, "spread"]).all()
    assert not table.loc[durations, "value"].isna().any()
    assert (table.loc[~durations, "min"] <= table.loc[~durations, "value"]).all()
    assert (table.loc[~durations, "value"] <= table.loc[~durations, "max"]).all()
    # Recovery is read off the runs' mean change, not a median of each noisy run's own.
    target = next(t for t in load_targets(TARGETS) if t.statistic == "event_recovery_years")
    combined = pd.read_parquet(experiment_dir / "model_years.parquet")
    mean = event_study(combined, target.flood_year, target.column, target.baseline_years)
    expected = recovery_years(mean.set_index("years_since")["mean"], target.fraction)
    assert table.loc[durations, "value"].item() == expected
    fig = plot_behaviour(table)
    assert isinstance(fig, Figure)
    assert [t.get_text() for t in fig.axes[0].get_yticklabels()] == table["name"].tolist()[::-1]


def test_an_experiments_figure_has_a_panel_per_target_and_a_row_per_design_point():
    """54 rows on one axis left the labels the figure's width; a missing value is not an arrow."""
    settings = [
        f"government.initial_subsidy={s}, memory.decay_rate={d}"
        for s in (0.2, 0.5)
        for d in (0.8, 0.98)
    ]
    table = pd.DataFrame(
        [
            {
                "name": name,
                "point": point,
                "setting": setting,
                "value": value,
                "spread": math.nan,
                "target": 1.0,
                "tolerance": 0.5,
                "passed": value == 1.0,
            }
            for name, value in (("jump", math.nan), ("share", 1.0))
            for point, setting in enumerate(settings)
        ]
    )
    fig = plot_behaviour(table)
    jump, share = fig.axes
    assert jump.get_title(loc="left") == "jump: target 1 ± 0.5"
    assert [t.get_text() for t in share.get_yticklabels()] == settings[::-1]
    assert not jump.lines[1:]  # the zero line alone: no marker for a missing value
    assert [t.get_text().split("  ")[0] for t in jump.texts] == ["no value"] * 4
    assert len(share.lines) > 1


@pytest.mark.parametrize(
    ("value", "said", "passed"),
    [(0.6503, "0.6503", False), (0.6497, "0.65", True), (0.65, "0.65", True), (0.4, "0.4", True)],
)
def test_a_value_near_the_band_is_written_with_the_digits_that_show_its_side(value, said, passed):
    """0.6503 against 0.5 ± 0.15 fails: written "0.65", it read as the band's edge."""
    row = {"name": "share", "point": 0, "setting": "", "value": value, "spread": math.nan}
    row |= {"target": 0.5, "tolerance": 0.15, "passed": passed}
    (ax,) = plot_behaviour(pd.DataFrame([row])).axes
    verdict = "PASS" if passed else "FAIL"
    assert ax.texts[0].get_text() == f"{said}  (target 0.5 ± 0.15)  {verdict}"
    assert "standard deviation over runs" in ax.get_xlabel()


def test_targets_dated_to_a_flood_on_an_unscripted_hazard_are_warned_of_once(tmp_path):
    config, base = load_config(SCENARIO.parent.parent / "default.yaml", SMALL)
    stochastic = run_simulation(config, base, tmp_path, progress=False).run_dir
    dated = {**GOOD, "name": "jump", "statistic": "event_jump", "flood_year": 3}
    targets = write_targets(tmp_path, [GOOD, dated])
    with pytest.warns(UncomputedTargetWarning) as caught:
        check_behaviour(stochastic, targets)
    about = [str(w.message) for w in caught if "hazard.source" in str(w.message)]
    expected = (
        f"{stochastic}: hazard.source is stochastic, but jump measure the aftermath of a "
        "damaging flood in year 3: runs that do not flood then give no value for them, and "
        "earlier floods blur the rest (check a run of a scripted hazard, such as "
        "configs/scenarios/single_flood.yaml, against them)"
    )
    assert about == [expected]


def test_event_targets_without_a_year_on_an_unscripted_hazard_are_warned_of(tmp_path):
    """Each run's most damaging flood was measured, earlier floods in its baseline, unsaid."""
    config, base = load_config(SCENARIO.parent.parent / "default.yaml", SMALL)
    stochastic = run_simulation(config, base, tmp_path, progress=False).run_dir
    undated = {**GOOD, "name": "jump", "statistic": "event_jump"}
    with warnings.catch_warnings(record=True) as caught:
        warnings.simplefilter("always")
        check_behaviour(stochastic, write_targets(tmp_path, [GOOD, undated]))
    about = [str(w.message) for w in caught if w.category is UnscriptedFloodWarning]
    expected = (
        f"{stochastic}: hazard.source is stochastic, but jump measure the aftermath of each "
        "run's most damaging flood, which the run's other floods blur (check a run of a "
        "scripted hazard, such as configs/scenarios/single_flood.yaml, against them)"
    )
    assert about == [expected]


def test_a_sweep_that_floods_stochastically_at_some_points_is_warned_of_them(tmp_path, run_dir):
    """A sweep may set hazard.source itself: every design point's runs are asked."""
    config, base = load_config(SCENARIO.parent.parent / "default.yaml", SMALL)
    stochastic = run_simulation(config, base, tmp_path, progress=False).run_dir
    dated = load_targets(
        write_targets(tmp_path, [{**GOOD, "statistic": "event_jump", "flood_year": 3}])
    )
    with warnings.catch_warnings():
        warnings.simplefilter("error")
        behaviour._warn_unscripted_floods(tmp_path, dated, [(0, "a", [run_dir])])
    with pytest.warns(UnscriptedFloodWarning, match="stochastic at some design points"):
        behaviour._warn_unscripted_floods(
            tmp_path, dated, [(0, "a", [run_dir]), (1, "b", [stochastic])]
        )


def test_statistics_match_hand_computation(run_dir):
    metrics = pd.read_csv(run_dir / "model_years.csv").set_index("year")
    mean = Target(**{**GOOD, "column": "insured_share_x", "years": (3, 7)})
    assert run_statistic(run_dir, mean) == pytest.approx(metrics.loc[3:7, "insured_share_x"].mean())
    baseline = metrics.loc[7:9, "insured_share_ae"].mean()
    change = Target(**{**GOOD, "statistic": "event_change_at", "years_since": 2})
    assert run_statistic(run_dir, change) == pytest.approx(
        metrics.loc[12, "insured_share_ae"] - baseline
    )
    tenure = run_statistic(run_dir, Target(**{**GOOD, "statistic": "median_policy_tenure"}))
    ended, still_open = _spells_by_hand(run_dir, last_year=int(metrics.index.max()))
    assert still_open  # the run ends with policies in force: censoring matters here
    assert tenure == median_tenure(ended, still_open)


def _spells_by_hand(run_dir: Path, last_year: int) -> tuple[list[int], list[int]]:
    """Insured spells from the traces, with pandas: (ended, still open at ``last_year``)."""
    traces = pd.DataFrame(iter_records(run_dir, "household_traces"))
    traces["insured"] = [
        a["decision_skill"] in {"buy_insurance", "buy_contents_insurance"} for a in traces["action"]
    ]
    ended, still_open = [], []
    for _, rows in traces.sort_values("year").groupby("agent_id"):
        runs = (rows["insured"] != rows["insured"].shift()).cumsum()
        for _, spell in rows[rows["insured"]].groupby(runs[rows["insured"]]):
            last = spell["year"].max()
            if last == rows["year"].max() and last == last_year:
                still_open.append(len(spell))
            else:
                ended.append(len(spell))
    return ended, still_open


def test_a_policy_held_before_the_run_counts_from_when_it_was_bought(tmp_path):
    """Spells in force at the first traced year were cut short, or missed when not renewed."""

    def trace(agent_id: str, year: int, skill: str, before: dict[str, Any]) -> bytes:
        action = {"decision_skill": skill}
        line = {"schema_version": 1, "run_id": "r", "year": year, "agent_id": agent_id}
        checked = {"reasoning": {"constructs": {}}, "validation": {"valid": True}}
        return orjson.dumps(line | {"state_before": before, "action": action} | checked)

    held = {"has_insurance": True, "insured_years": 1}  # initial_insured_share's policy
    lines = [
        # Renewed twice, then lapsed: three years, the first before the run.
        trace("H1", 1, "buy_insurance", held),
        trace("H1", 2, "buy_insurance", {"has_insurance": True, "insured_years": 2}),
        trace("H1", 3, "do_nothing", {"has_insurance": True, "insured_years": 3}),
        # Not renewed: a one-year spell, ended.
        trace("H2", 1, "do_nothing", held),
        trace("H2", 2, "do_nothing", {}),
        trace("H2", 3, "do_nothing", {}),
        # Bought in the run and still held at its end.
        trace("H3", 1, "do_nothing", {}),
        trace("H3", 2, "buy_insurance", {}),
        trace("H3", 3, "buy_insurance", {"has_insurance": True, "insured_years": 1}),
    ]
    (tmp_path / "household_traces.jsonl").write_bytes(b"\n".join(lines) + b"\n")
    assert behaviour._policy_spells(tmp_path, last_year=3) == ([3, 1], [2])


def test_tenure_of_a_minimal_run_with_policies_at_the_start_is_refused(tmp_path):
    """Minimal traces have no state_before: the first cohort's spells would start in year 1."""
    settings = ["households.count=30", "years=4", "households.initial_insured_share={AE: 0.5}"]
    target = Target(**{**GOOD, "statistic": "median_policy_tenure"})
    for level in ("minimal", "standard"):
        config, base = load_config(SCENARIO, [*settings, f"audit.level={level}"])
        run = run_simulation(config, base, tmp_path / level, progress=False).run_dir
        if level == "minimal":
            with pytest.raises(BehaviourError, match="minimal traces do not say since when"):
                run_statistic(run, target)
        else:
            assert run_statistic(run, target) > 0


@pytest.mark.parametrize(
    ("ended", "still_open", "expected"),
    [
        ([1, 2, 2, 3], [], 2.0),  # no censoring: the first length with half the spells over
        ([1, 2], [], 1.0),  # exactly half have ended after 1 year
        ([1, 1, 5], [2, 2, 2, 2], 5.0),  # after year 2 only the 5-year spell is at risk
        ([1], [5, 5], math.inf),  # two of three policies outlast what was seen
        ([], [3], math.inf),
        ([], [], math.nan),
        # Censored steps multiply to 0.5000000000000001 at year 3: still half of the spells.
        ([1, 1, 2, 2, 3], [3, 3, 3, 3, 3], 3.0),
    ],
)
def test_median_tenure_is_kaplan_meier(ended, still_open, expected):
    result = median_tenure(ended, still_open)
    assert result == expected or (math.isnan(expected) and math.isnan(result))


def test_median_tenure_counts_open_spells():
    """Leaving open spells out would report 1 year; they are half the policies and last 4+."""
    assert median_tenure([1, 1, 1, 1, 4, 4], [4, 4, 4, 4, 4, 4]) == 4.0


def test_tenure_needs_traces(tmp_path):
    config, base = load_config(SCENARIO, ["households.count=30", "years=10", "audit.level=off"])
    run = run_simulation(config, base, tmp_path, progress=False).run_dir
    target = Target(**{**GOOD, "statistic": "median_policy_tenure"})
    with pytest.raises(BehaviourError, match="household_traces"):
        run_statistic(run, target)


def test_path_neither_run_nor_experiment(tmp_path):
    with pytest.raises(BehaviourError, match="neither a run directory"):
        check_behaviour(tmp_path, TARGETS)


@pytest.mark.parametrize("state", ["{not json", '{"runs": 5}', "[1, 2]", '{"runs": [3]}'])
def test_a_broken_experiment_json_is_named(tmp_path, state):
    (tmp_path / "experiment.json").write_text(state, encoding="utf-8")
    (tmp_path / "model_years.parquet").write_bytes(b"")
    with pytest.raises(BehaviourError, match=re.escape(f"{tmp_path / 'experiment.json'}: ")):
        check_behaviour(tmp_path, TARGETS)


def parse(argv: list[str]) -> argparse.Namespace:
    parser = argparse.ArgumentParser(prog="floodsim")
    behaviour_commands.register(parser.add_subparsers(dest="command"))
    return parser.parse_args(argv)


def test_command_exit_code_follows_the_table(run_dir, tmp_path, capsys):
    out = tmp_path / "out"
    args = parse(["check-behaviour", str(run_dir), "--targets", str(TARGETS), "--out", str(out)])
    code = args.func(args)
    table = pd.read_csv(out / "behaviour.csv")
    assert code == (0 if table["passed"].all() else 1)
    assert (out / "behaviour.png").stat().st_size > 0
    printed = capsys.readouterr().out
    for name in table["name"]:
        assert name in printed
    assert ("FAIL" in printed) == (code == 1)


def test_command_passes_and_fails(run_dir, tmp_path):
    value = run_statistic(run_dir, Target(**GOOD))
    loose = write_targets(tmp_path, [{**GOOD, "value": value, "tolerance": 0.01}])
    args = parse(["check-behaviour", str(run_dir), "--targets", str(loose)])
    assert args.func(args) == 0
    assert (run_dir / "behaviour.csv").is_file()  # default --out: the run folder
    strict = write_targets(tmp_path, [{**GOOD, "value": value + 1, "tolerance": 0.5}])
    args = parse(["check-behaviour", str(run_dir), "--targets", str(strict)])
    assert args.func(args) == 1


@pytest.mark.parametrize("under_a_file", [True, False])
def test_command_output_folder_that_cannot_exist_is_bad_input(
    run_dir, tmp_path, monkeypatch, under_a_file
):
    """Refused before any run is read (an experiment's can take minutes), not after."""
    blocker = tmp_path / "a_file"
    blocker.write_text("not a folder", encoding="utf-8")
    out = blocker / "out" if under_a_file else blocker

    def never(*_: object) -> None:
        pytest.fail("the runs were checked before the output folder")

    monkeypatch.setattr(behaviour, "check_behaviour", never)
    args = parse(["check-behaviour", str(run_dir), "--targets", str(TARGETS), "--out", str(out)])
    with pytest.raises(ConfigError, match=f"{re.escape(str(out))}: cannot create the output"):
        args.func(args)


def test_a_trace_line_damaged_since_the_run_is_bad_input_naming_it(run_dir, tmp_path, capsys):
    """The tenure target reads every trace by year; a year that is a list was a traceback."""
    copy = tmp_path / run_dir.name
    shutil.copytree(run_dir, copy)
    traces = copy / "household_traces.jsonl"
    lines = traces.read_bytes().splitlines(keepends=True)
    record = orjson.loads(lines[5])
    lines[5] = orjson.dumps({**record, "year": [record["year"]]}) + b"\n"
    traces.write_bytes(b"".join(lines))
    code = main(["check-behaviour", str(copy), "--targets", str(TARGETS), "--out", str(tmp_path)])
    assert code == 2
    assert capsys.readouterr().err == (
        f"floodsim: error: {traces}: line 6 is malformed: year is not an integer "
        f"(got [{record['year']}])\n"
    )


def test_command_with_a_bad_targets_file_leaves_no_output_folder(run_dir, tmp_path):
    bad = write_targets(tmp_path, [{**GOOD, "statistic": "median"}])
    out = tmp_path / "out"
    args = parse(["check-behaviour", str(run_dir), "--targets", str(bad), "--out", str(out)])
    with pytest.raises(BehaviourError, match="statistic"):
        args.func(args)
    assert not out.exists()


def test_command_explains_a_target_without_a_value(run_dir, tmp_path, capsys):
    # The run has 20 years: a mean over years 25-30 has nothing to average.
    beyond = write_targets(tmp_path, [{**GOOD, "years": [25, 30]}])
    args = parse(
        ["check-behaviour", str(run_dir), "--targets", str(beyond), "--out", str(tmp_path)]
    )
    assert args.func(args) == 1
    printed = capsys.readouterr().out
    assert "-: the statistic has no value in these runs" in printed


def test_command_explains_an_infinite_duration(run_dir, tmp_path, capsys, monkeypatch):
    monkeypatch.setattr(behaviour, "_run_spells", lambda *_: ([], [5]))  # held past the run
    target = {**GOOD, "statistic": "median_policy_tenure", "value": 3.0, "tolerance": 1.0}
    path = write_targets(tmp_path, [target])
    args = parse(["check-behaviour", str(run_dir), "--targets", str(path), "--out", str(tmp_path)])
    assert args.func(args) == 1
    printed = capsys.readouterr().out
    assert "inf: a duration that had not ended by the run's last year" in printed
    assert "-: the statistic has no value" not in printed


def test_command_bad_targets_raise(run_dir, tmp_path):
    bad = write_targets(tmp_path, [{**GOOD, "tolerance": -1}])
    args = parse(["check-behaviour", str(run_dir), "--targets", str(bad)])
    with pytest.raises(BehaviourError, match="tolerance"):
        args.func(args)


def test_infinite_recovery_has_no_spread():
    mean, spread, low, high = _summary([4.0, math.inf])
    assert mean == math.inf
    assert math.isnan(spread)
    assert (low, high) == (4.0, math.inf)


def test_censored_durations_summarise_by_their_median():
    from simulation.analysis.behaviour import _summary

    value, spread, low, high = _summary([5.0, math.inf, 7.0], censored=True)
    assert value == 7.0  # one run that never recovered does not make the summary infinite
    assert spread == pytest.approx(math.sqrt(2.0))
    assert (low, high) == (5.0, math.inf)
    assert _summary([5.0, math.inf, math.inf], censored=True)[0] == math.inf
    assert _summary([5.0, math.inf, 7.0])[0] == math.inf  # plain statistics: the mean


def test_sweep_reports_each_design_point(sweep_dir):
    """Each point is checked on its own runs: pooling would mix two decay rates."""
    with pytest.warns(ShortWindowWarning):  # the targets' years reach past the 16-year runs
        table = check_behaviour(sweep_dir, TARGETS)
    names = [t.name for t in load_targets(TARGETS)]
    assert table["name"].tolist() == names * 2
    assert table["point"].tolist() == [0] * len(names) + [1] * len(names)
    assert set(table["setting"]) == {"memory.decay_rate=0.6", "memory.decay_rate=1.0"}
    assert (table["n_runs"] == 2).all()
    state = json.loads((sweep_dir / "experiment.json").read_text(encoding="utf-8"))
    for point in (0, 1):
        runs = [sweep_dir / r["run_dir"] for r in state["runs"] if r["point"] == point]
        rows = table[table["point"] == point].set_index("name")
        for target in load_targets(TARGETS):
            if target.statistic == "median_policy_tenure":  # the runs' spells together
                ended, still_open = [], []
                for run in runs:
                    last = int(pd.read_csv(run / "model_years.csv")["year"].max())
                    spells = behaviour._policy_spells(run, last)
                    ended, still_open = ended + spells[0], still_open + spells[1]
                expected = median_tenure(ended, still_open)
                assert rows.loc[target.name, "value"] == expected
                continue
            with warnings.catch_warnings():
                warnings.simplefilter("ignore", ShortWindowWarning)  # said by check_behaviour
                values = [run_statistic(run, target) for run in runs]
            if target.statistic != "event_recovery_years":  # that one reads the mean change
                assert rows.loc[target.name, "value"] == pytest.approx(np.mean(values))
    by_point = table.pivot(index="name", columns="point", values="value")
    assert not np.allclose(by_point[0], by_point[1], equal_nan=True)


def test_sweep_command_labels_rows_with_their_setting(sweep_dir, tmp_path, capsys):
    args = parse(["check-behaviour", str(sweep_dir), "--targets", str(TARGETS)])
    args.out = str(tmp_path)
    args.func(args)
    printed = capsys.readouterr().out
    assert "median_policy_tenure [memory.decay_rate=0.6]" in printed
    assert "median_policy_tenure [memory.decay_rate=1.0]" in printed
    assert "(2 design points, 4 runs)" in printed
    table = pd.read_csv(tmp_path / "behaviour.csv")
    assert table["point"].tolist() == sorted(table["point"])


EARLY = [  # the flood is in year 10: a 12-year baseline can only average years 1-9
    {**GOOD, "name": "jump", "statistic": "event_jump", "baseline_years": 12},
    {**GOOD, "name": "back", "statistic": "event_recovery_years", "baseline_years": 12},
]


def short_baseline_lines(capsys) -> list[str]:
    return [line for line in capsys.readouterr().err.splitlines() if "warning" in line]


def test_command_warns_once_per_target_about_a_short_baseline(run_dir, tmp_path, capsys):
    args = parse(
        ["check-behaviour", str(run_dir), "--targets", str(write_targets(tmp_path, EARLY))]
    )
    args.out = str(tmp_path)
    args.func(args)
    tail = (
        "averages only 9 of the 12 years asked for: the flood (year 10) comes too early in the run"
    )
    assert short_baseline_lines(capsys) == [
        f"floodsim: warning: target 'jump': the pre-flood baseline of 1 of 1 run(s) {tail}",
        f"floodsim: warning: target 'back': the pre-flood baseline of 1 of 1 run(s) {tail}",
    ]


def test_short_baseline_warnings_count_a_design_points_runs(sweep_dir, tmp_path, capsys):
    """Two runs per point: each warning names its point and counts both runs, once."""
    targets = write_targets(tmp_path, EARLY[1:])  # recovery also reads the runs' mean change
    args = parse(["check-behaviour", str(sweep_dir), "--targets", str(targets)])
    args.out = str(tmp_path)
    args.func(args)
    lines = short_baseline_lines(capsys)
    assert len(lines) == 2
    for line, setting in zip(
        lines, ["memory.decay_rate=0.6", "memory.decay_rate=1.0"], strict=True
    ):
        assert line.startswith(f"floodsim: warning: target 'back' [{setting}]: ")
        assert "baseline of 2 of 2 run(s) averages only 9 of the 12 years" in line


def test_a_mean_window_past_the_runs_is_warned_about_once_per_point(sweep_dir, tmp_path, capsys):
    """The 16-year runs cannot average years 5-30: the mean is over 5-16, and each point says so."""
    window = {**GOOD, "column": "insured_share", "years": [5, 30]}
    inside = {**GOOD, "name": "inside", "column": "insured_share", "years": [5, 16]}
    targets = write_targets(tmp_path, [window, inside])
    table = check_behaviour(sweep_dir, targets)
    args = parse(["check-behaviour", str(sweep_dir), "--targets", str(targets)])
    args.out = str(tmp_path)
    args.func(args)
    lines = short_baseline_lines(capsys)
    assert len(lines) == 2
    for line, setting in zip(
        lines, ["memory.decay_rate=0.6", "memory.decay_rate=1.0"], strict=True
    ):
        assert line == (
            f"floodsim: warning: target 't' [{setting}]: years 5-30 reach past the run's last "
            "year (2 of 2 run(s) end in year 16): the mean is over years 5-16 only"
        )
    # what it computes is the mean over the years the runs have
    values = table.set_index(["name", "point"])["value"]
    assert values["t", 0] == pytest.approx(values["inside", 0])
    with pytest.warns(
        ShortWindowWarning, match=r"target 't': years 5-30 .* \(the run ends in year"
    ):
        run_statistic(next((sweep_dir / "runs").iterdir()), Target(**window))
    late = Target(**{**window, "years": [20, 30]})  # starts after the 16 years
    with pytest.warns(ShortWindowWarning, match=r"year 16\): there is no year to average, so the"):
        assert math.isnan(run_statistic(next((sweep_dir / "runs").iterdir()), late))


def test_a_target_the_run_cannot_answer_fails_with_its_reason_and_the_rest_are_checked(
    run_dir, tmp_path, capsys
):
    # The flood is in year 10 of 20: nothing was damaged in year 12, and year 30 is not a year
    # of the run. Neither stops the check of the others.
    quiet = {**EARLY[0], "name": "wrong_year", "baseline_years": 3, "flood_year": 12}
    after = {**quiet, "name": "after_the_end", "flood_year": 30}
    path = write_targets(tmp_path, [EARLY[0], quiet, after, GOOD])
    args = parse(["check-behaviour", str(run_dir), "--targets", str(path)])
    assert args.func(args) == 1
    captured = capsys.readouterr()
    warned = [line for line in captured.err.splitlines() if "warning" in line]
    assert [line.split(":")[2] for line in warned[:1]] == [" target 'jump'"]  # short baseline
    assert "target 'wrong_year': event_study: no household was damaged in year 12" in warned[1]
    assert "the given flood year 30 is not a year of the run (1 to 20)" in warned[2]
    assert warned[2].endswith("(1 of 1 run(s) give no value for this target: so it fails)")
    table = pd.read_csv(run_dir / "behaviour.csv")
    assert table["name"].tolist() == ["jump", "wrong_year", "after_the_end", "t"]
    assert table["value"].isna().tolist() == [False, True, True, False]
    assert not table["passed"][1:3].any()
    # Calibration asks for the error: a target no run can answer is a mistake in its setup.
    with pytest.raises(BehaviourError, match="no household was damaged in year 12"):
        check_behaviour(run_dir, write_targets(tmp_path, [quiet]), strict=True)


def test_an_unaudited_run_fails_the_tenure_target_and_passes_the_others(tmp_path):
    config, base = load_config(SCENARIO, ["households.count=60", "audit.level=off"])
    run = run_simulation(config, base, tmp_path / "runs", progress=False).run_dir
    tenure = {**GOOD, "name": "tenure", "statistic": "median_policy_tenure", "value": 3.0}
    path = write_targets(tmp_path, [tenure, {**GOOD, "tolerance": 1.0}])
    with pytest.warns(UncomputedTargetWarning, match="needs the household_traces audit stream"):
        table = check_behaviour(run, path)
    assert table["passed"].tolist() == [False, True]


def test_a_share_over_nobody_fails_its_target_saying_why(tmp_path):
    """In a town all in the floodplain the share outside it is blank, not a miss of 0.01."""
    settings = ["households.count=40", "years=12", "audit.level=off", "households.bfe_ft=100"]
    config, base = load_config(SCENARIO, settings)
    run = run_simulation(config, base, tmp_path / "runs", progress=False).run_dir
    outside = {**GOOD, "name": "x", "column": "insured_share_x", "value": 0.01}
    path = write_targets(tmp_path, [outside, {**GOOD, "tolerance": 1.0}])
    with pytest.warns(UncomputedTargetWarning) as caught:
        table = check_behaviour(run, path)
    (said,) = [str(w.message) for w in caught]
    assert said.startswith(f"{run}: target 'x': insured_share_x is blank (NaN) in every year: ")
    assert table["passed"].tolist() == [False, True]
    assert math.isnan(table["value"][0])
    # A calibration's search point can empty a group: it scores the penalty, not an error.
    with warnings.catch_warnings():
        warnings.simplefilter("error", UncomputedTargetWarning)
        strict = check_behaviour(run, path, strict=True)
    assert math.isnan(strict["value"][0])
    assert strict["passed"].tolist() == [False, True]


def test_tenure_over_runs_is_the_median_of_their_spells_together(run_dir, tmp_path, monkeypatch):
    """Not the median of the runs' medians, which was 3.5 for runs of 3 and 4 years."""
    from simulation.analysis import behaviour

    monkeypatch.setattr(behaviour, "_run_groups", lambda _: [(0, "", [run_dir] * 4)])
    # Run medians 3, 4, 3 and infinite (a run whose one policy outlasts it).
    spells = iter([([3, 3, 4], []), ([4, 4, 3], []), ([3, 3, 4], []), ([], [9])])
    monkeypatch.setattr(behaviour, "_run_spells", lambda *_: next(spells))
    target = {**GOOD, "statistic": "median_policy_tenure", "value": 3.0, "tolerance": 1.0}
    row = check_behaviour(run_dir, write_targets(tmp_path, [target])).iloc[0]
    # Ten spells: five end at 3 years (of ten at risk), four at 4 (of five): half by year 3.
    assert (row["value"], row["min"], row["max"], row["n_runs"]) == (3.0, 3.0, math.inf, 4)
    assert row["passed"]


def test_runs_without_a_duration_are_counted_and_said(run_dir, tmp_path, monkeypatch):
    """A run in which no one held a policy has no tenure: n_runs counts it, a warning says so."""
    from simulation.analysis import behaviour

    monkeypatch.setattr(behaviour, "_run_groups", lambda _: [(0, "", [run_dir] * 3)])
    spells = iter([([3, 3], []), ([], []), ([3, 5, 5], [])])
    monkeypatch.setattr(behaviour, "_run_spells", lambda *_: next(spells))
    target = {**GOOD, "statistic": "median_policy_tenure", "value": 3.0, "tolerance": 1.0}
    path = write_targets(tmp_path, [target])
    with pytest.warns(UncomputedTargetWarning) as caught:
        row = check_behaviour(run_dir, path).iloc[0]
    (said,) = [str(w.message) for w in caught]
    assert said == (
        f"{run_dir}: target 't': no insured spell: no household held a policy "
        "(1 of 3 run(s) have none: the value is that of the other 2)"
    )
    assert (row["value"], row["n_runs"], row["min"], row["max"]) == (3.0, 3, 3.0, 5.0)
    # No run with a spell: the row has no value, and the warning says why rather than nothing.
    monkeypatch.setattr(behaviour, "_run_spells", lambda *_: ([], []))
    with pytest.warns(UncomputedTargetWarning, match=r"3 of 3 run\(s\) have none: so the tar"):
        row = check_behaviour(run_dir, path).iloc[0]
    assert math.isnan(row["value"])
    assert not row["passed"]
    # A calibration scores the penalty, without a word.
    with warnings.catch_warnings():
        warnings.simplefilter("error", UncomputedTargetWarning)
        assert math.isnan(check_behaviour(run_dir, path, strict=True)["value"][0])


def test_a_durations_spread_says_how_many_infinite_runs_it_leaves_out(
    run_dir, tmp_path, monkeypatch
):
    """The spread of 3, 5 and 7 with two runs never recovered is not the spread of five."""
    from simulation.analysis import behaviour
    from simulation.analysis.behaviour_commands import format_table

    monkeypatch.setattr(behaviour, "_run_groups", lambda _: [(0, "", [run_dir] * 5)])
    # Run medians 3, infinite, 5, infinite and 7.
    spells = iter([([3], []), ([], [8]), ([5], []), ([], [8]), ([7], [])])
    monkeypatch.setattr(behaviour, "_run_spells", lambda *_: next(spells))
    target = {**GOOD, "statistic": "median_policy_tenure", "value": 5.0, "tolerance": 1.0}
    table = check_behaviour(run_dir, write_targets(tmp_path, [target]))
    row = table.iloc[0]
    assert (row["spread"], row["n_runs"], row["n_infinite"]) == (2.0, 5, 2)
    assert "  2 (2 of 5 runs inf)  " in format_table(table)
    labels = [t.get_text() for t in plot_behaviour(table).axes[0].texts]
    assert any("± 2 (2 of 5 runs inf)" in label for label in labels)


def write_record(folder: Path, runs: list[dict[str, Any]]) -> None:
    """An ``experiment.json`` as ``floodsim batch`` writes it, around these runs' records."""
    defaults = {"replicate": 0, "seed": 1, "params": {}, "error": None, "duration_s": 0.1}
    record = {
        "schema_version": 1,
        "experiment": ExperimentConfig(name="e", base="base.yaml").model_dump(mode="json"),
        "runs": [{**defaults, **run} for run in runs],
        "wall_s": None,
    }
    (folder / "experiment.json").write_text(json.dumps(record), encoding="utf-8")


def test_an_interrupted_experiment_is_checked_on_its_complete_runs_labelled_as_swept(
    tmp_path, monkeypatch
):
    """No model_years.parquet yet; one run cannot give a duration; labels read null and JSON."""
    params = {"government.budget": None, "audit.sample": ["H1", "H2"]}
    runs = [
        {"run_id": f"p000-r00{n}", "point": 0, "status": status, "run_dir": f"runs/r{n}"}
        for n, status in enumerate(["complete", "complete", "pending"])
    ]
    for run in runs:
        run["params"] = params
    write_record(tmp_path, runs)

    def spells(run_dir: Path, target: Target) -> tuple[list[int], list[int]]:
        if run_dir.name == "r0":
            raise BehaviourError(f"{run_dir}: target {target.name!r}: needs household_traces")
        return [4], []

    monkeypatch.setattr(behaviour, "_run_spells", spells)
    target = {**GOOD, "name": "tenure", "statistic": "median_policy_tenure", "value": 4.0}
    with (
        pytest.warns(IncompleteExperimentWarning) as incomplete,
        pytest.warns(UncomputedTargetWarning) as uncomputed,
    ):
        table = check_behaviour(tmp_path, write_targets(tmp_path, [target]))
    said = {w.category: str(w.message) for w in (*incomplete, *uncomputed)}
    assert said[IncompleteExperimentWarning] == (
        f"{tmp_path}: 1 of 3 runs are not complete (1 pending); checked on the complete ones "
        f"(to finish them: floodsim batch <experiment file> --out {tmp_path} --resume)"
    )
    assert said[UncomputedTargetWarning].endswith(
        '(1 of 2 run(s) at [government.budget=null, audit.sample=["H1","H2"]] give no value '
        "for this target: its value is that of the other 1)"
    )
    row = table.iloc[0]
    assert (row["value"], row["n_runs"], row["passed"]) == (4.0, 2, True)
    assert row["setting"] == 'government.budget=null, audit.sample=["H1","H2"]'


def test_design_points_without_a_complete_run_are_named_as_left_out(tmp_path, monkeypatch):
    statuses = {"p000-r000": "complete", "p001-r000": "failed", "p001-r001": "pending"}
    runs = [
        {"run_id": run_id, "point": int(run_id[1:4]), "status": status, "run_dir": f"runs/{run_id}"}
        for run_id, status in statuses.items()
    ]
    write_record(tmp_path, runs)
    monkeypatch.setattr(behaviour, "run_statistic", lambda *_: GOOD["value"])
    with pytest.warns(IncompleteExperimentWarning) as caught:
        table = check_behaviour(tmp_path, write_targets(tmp_path, [GOOD]))
    assert len(caught) == 1
    assert "2 of 3 runs are not complete (1 failed, 1 pending)" in str(caught[0].message)
    assert "1 of 2 design points have none and are left out" in str(caught[0].message)
    assert table["point"].tolist() == [0]


def test_the_one_point_of_a_sweep_left_is_labelled_with_its_setting(tmp_path, monkeypatch):
    """Only decision.policy=pmt completed: its rows say so, in the table as when all did."""
    runs = [
        {"run_id": "p000-r000", "point": 0, "status": "complete", "run_dir": "runs/p000-r000"},
        {"run_id": "p001-r000", "point": 1, "status": "failed", "run_dir": "runs/p001-r000"},
    ]
    runs[0]["params"], runs[1]["params"] = {"decision.policy": "pmt"}, {"decision.policy": "llm"}
    write_record(tmp_path, runs)
    monkeypatch.setattr(behaviour, "run_statistic", lambda *_: GOOD["value"])
    with pytest.warns(IncompleteExperimentWarning):
        table = check_behaviour(tmp_path, write_targets(tmp_path, [GOOD]))
    assert row_labels(table) == ["t [decision.policy=pmt]"]
    unswept = table.assign(setting="")  # a run, or an experiment without a sweep
    assert row_labels(unswept) == ["t"]


def test_a_replicate_without_the_event_does_not_void_a_duration(tmp_path, monkeypatch):
    """One run with no post-flood jump (or no insured spell) has no duration of its own."""
    (tmp_path / "model_years.parquet").write_bytes(b"")
    runs = [
        {"run_id": f"p000-r00{n}", "point": 0, "status": "complete", "run_dir": f"runs/r{n}"}
        for n in range(2)
    ]
    write_record(tmp_path, runs)
    recovery = {"r0": math.nan, "r1": 12.0}
    monkeypatch.setattr(behaviour, "run_statistic", lambda run_dir, _: recovery[run_dir.name])
    spells = {"r0": ([], []), "r1": ([4], [])}  # r0: nobody insured, no median
    monkeypatch.setattr(behaviour, "_run_spells", lambda run_dir, _: spells[run_dir.name])
    monkeypatch.setattr(behaviour, "_mean_recovery", lambda runs, target: 9.0)
    monkeypatch.setattr(behaviour, "_warn_unscripted_floods", lambda *_: None)  # no run dirs
    targets = write_targets(
        tmp_path,
        [
            {"name": "recovery", "statistic": "event_recovery_years", "value": 9, "tolerance": 3},
            {"name": "tenure", "statistic": "median_policy_tenure", "value": 3, "tolerance": 1},
        ],
    )
    table = check_behaviour(tmp_path, targets).set_index("name")
    assert table.loc["recovery", "value"] == 9.0  # read off the runs' mean change
    assert table.loc["tenure", "value"] == 4.0  # the median of the runs that have one
    assert (table["n_runs"] == 2).all()


def test_a_flood_in_the_runs_last_year_says_why_its_jump_has_no_value(tmp_path):
    config, base = load_config(SCENARIO, ["households.count=120", "years=10", "audit.level=off"])
    run = run_simulation(config, base, tmp_path / "runs", progress=False).run_dir
    jump = {
        **GOOD,
        "name": "jump",
        "statistic": "event_jump",
        "column": "insured_share",
        "flood_year": 10,
    }
    after = {**jump, "name": "after", "statistic": "event_change_at", "years_since": 3}
    with pytest.warns(UncomputedTargetWarning) as caught:
        table = check_behaviour(run, write_targets(tmp_path, [jump, after]))
    said = [str(w.message) for w in caught]
    assert len(said) == 2
    assert (
        "target 'jump': needs year 1 after the flood, but the run ends 0 year(s) after it"
        in (said[0])
    )
    assert "(flood in year 10, last year 10)" in said[0]
    assert "target 'after': needs year 3 after the flood" in said[1]
    assert table["value"].isna().all()
    assert not table["passed"].any()


def _with_blank_years(run_dir: Path, folder: Path, column: str, years: list[int]) -> Path:
    """A copy of ``run_dir`` whose ``column`` is blank (a share over nobody) in ``years``."""
    copy = folder / run_dir.name
    shutil.copytree(run_dir, copy)
    metrics = pd.read_csv(copy / "model_years.csv")
    metrics.loc[metrics["year"].isin(years), column] = math.nan
    metrics.to_csv(copy / "model_years.csv", index=False)
    return copy


def test_a_mean_over_years_some_of_them_blank_says_it_leaves_them_out(run_dir, tmp_path):
    run = _with_blank_years(run_dir, tmp_path, "insured_share_ae", [3, 4])
    target = Target(**{**GOOD, "column": "insured_share_ae", "years": (1, 10)})
    with pytest.warns(BlankYearsWarning, match=r"'t': 2 of 10 year\(s\) are blank .* the run"):
        value = run_statistic(run, target)
    metrics = pd.read_csv(run_dir / "model_years.csv").set_index("year")["insured_share_ae"]
    assert value == pytest.approx(metrics.loc[[1, 2, *range(5, 11)]].mean())


def test_blank_years_are_warned_of_once_per_target_counting_runs(run_dir, tmp_path, monkeypatch):
    blank = _with_blank_years(run_dir, tmp_path, "insured_share_ae", [2, 3, 4])
    monkeypatch.setattr(behaviour, "_run_groups", lambda _: [(0, "", [run_dir, blank, blank])])
    path = write_targets(tmp_path, [{**GOOD, "column": "insured_share_ae", "tolerance": 1.0}])
    with pytest.warns(BlankYearsWarning) as caught:
        check_behaviour(run_dir, path)
    (said,) = [str(w.message) for w in caught]
    assert said == (
        "target 't': 3 of 20 year(s) are blank (NaN, a share or mean over no household) in "
        "2 of 3 run(s) (the most in any one run): the mean is over the years with a value"
    )


def test_an_event_change_over_a_blank_column_is_no_value_said_so(run_dir, tmp_path, monkeypatch):
    """Not NaN without a word: the target fails, and the warning says why."""
    blank = _with_blank_years(run_dir, tmp_path, "insured_share_ae", list(range(1, 21)))
    jump = {**GOOD, "statistic": "event_jump", "column": "insured_share_ae", "tolerance": 1.0}
    with pytest.raises(BlankStatisticError, match="insured_share_ae is blank"):
        run_statistic(blank, Target(**jump))
    monkeypatch.setattr(behaviour, "_run_groups", lambda _: [(0, "", [run_dir, blank])])
    with pytest.warns(
        UncomputedTargetWarning, match=r"is blank \(NaN\) 1 year\(s\) after the flood .*1 of 2"
    ):
        row = check_behaviour(run_dir, write_targets(tmp_path, [jump])).iloc[0]
    assert math.isnan(row["value"])
    assert not row["passed"]


@pytest.mark.parametrize("change", ["absolute", "relative"])
def test_an_event_change_over_a_blank_baseline_is_no_value_either_way(run_dir, tmp_path, change):
    """A calibration scores it as a penalty rather than stop: a point can empty a group."""
    blank = _with_blank_years(run_dir, tmp_path, "insured_share_ae", [7, 8, 9])
    jump = {
        **GOOD,
        "statistic": "event_jump",
        "column": "insured_share_ae",
        "flood_year": 10,
        "change": change,
    }
    with pytest.raises(BlankStatisticError, match="insured_share_ae is blank"):
        run_statistic(blank, Target(**jump))
    with warnings.catch_warnings():
        warnings.simplefilter("error", UncomputedTargetWarning)
        strict = check_behaviour(blank, write_targets(tmp_path, [jump]), strict=True)
    assert math.isnan(strict["value"][0])


def test_a_recovery_over_a_blank_column_says_it_is_blank_not_that_nothing_rose(run_dir, tmp_path):
    blank = _with_blank_years(run_dir, tmp_path, "insured_share_ae", list(range(1, 21)))
    recovery = {
        **GOOD,
        "statistic": "event_recovery_years",
        "column": "insured_share_ae",
        "flood_year": 10,
    }
    with pytest.raises(BlankStatisticError, match=r"insured_share_ae is blank .* every year after"):
        run_statistic(blank, Target(**recovery))


def test_replicates_that_agree_have_their_value_as_mean_and_no_spread():
    """Not a mean above its own max by one unit in the last place, with a spread of 7e-17."""
    assert _summary([0.353125] * 4) == (0.353125, 0.0, 0.353125, 0.353125)
    mean, spread, low, high = _summary([0.1, 0.2, 0.4])
    assert low <= mean <= high
    assert spread == pytest.approx(np.std([0.1, 0.2, 0.4], ddof=1))


@pytest.mark.parametrize(
    ("value", "target", "tolerance", "passed"),
    [
        (0.65, 0.5, 0.15, True),
        (0.35, 0.5, 0.15, True),
        (0.7, 0.6, 0.1, True),
        (0.66, 0.5, 0.15, False),
    ],
)
def test_a_value_on_the_edge_of_its_band_passes(value, target, tolerance, passed):
    """0.65 - 0.5 is 0.15000000000000002 in binary floats: 0.65 failed 0.5 ± 0.15."""
    assert behaviour._within(value, target, tolerance) is passed
