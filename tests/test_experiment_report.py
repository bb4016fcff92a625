"""Tests for the report of a batch experiment (``floodsim report EXPERIMENT_DIR``)."""

from __future__ import annotations

import re
import shutil
import struct
from pathlib import Path
from typing import Any

import numpy as np
import orjson
import pandas as pd
import pytest
import yaml
from scipy.stats import spearmanr

from simulation.analysis import plots
from simulation.analysis.experiment_report import (
    MAX_LINES,
    OUTCOMES,
    is_experiment_dir,
    paired_table,
    points_table,
    sensitivity_table,
    write_experiment_report,
)
from simulation.analysis.report import ReportError
from simulation.cli import main
from simulation.experiments import run_experiment

ROOT = Path(__file__).resolve().parents[1]
DEFAULT = ROOT / "configs" / "default.yaml"
TARGETS = ROOT / "configs" / "targets" / "stylized_facts.yaml"
PNG_SIGNATURE = b"\x89PNG\r\n\x1a\n"


def batch(folder: Path, **changes: Any) -> Path:
    """Run a small experiment into ``folder/out`` and return that folder."""
    data: dict[str, Any] = {
        "name": "tiny",
        "base": str(DEFAULT),
        "set": {"households.count": 30, "years": 4, "audit.level": "off"},
        "sweep": {"grid": {"memory.decay_rate": [0.8, 0.95]}},
        "replicates": 2,
        "seed": 3,
        "executor": {"kind": "serial"},
    }
    data.update(changes)
    path = folder / "experiment.yaml"
    path.write_text(yaml.safe_dump(data, sort_keys=False), encoding="utf-8")
    return run_experiment(path, folder / "out", progress=False).out_dir


def png_size(path: Path) -> tuple[int, int]:
    data = path.read_bytes()
    assert data[:8] == PNG_SIGNATURE, path
    return struct.unpack(">II", data[16:24])


@pytest.fixture(scope="module")
def grid(tmp_path_factory) -> Path:
    return batch(tmp_path_factory.mktemp("grid"))


def test_a_grid_gets_each_outcome_by_each_swept_key_and_the_points_table(grid):
    index = write_experiment_report(grid)
    assert index == grid / "report" / "index.html"
    for outcome in OUTCOMES:
        width, height = png_size(index.parent / f"{outcome}_by_memory.decay_rate.png")
        assert width >= 600
        assert height >= 300
    page = index.read_text(encoding="utf-8")
    assert "floodsim experiment report: tiny" in page
    assert "memory.decay_rate: [0.8,0.95]" in page
    assert "4 of 4 complete" in page
    assert page.count("<figure>") == len(OUTCOMES)
    assert 'src="insured_share_by_memory.decay_rate.png"' in page
    # Each zone's take-up apart too: a policy can move both and leave the town's unchanged.
    for zone in ("ae", "x"):
        assert f'src="insured_share_{zone}_by_memory.decay_rate.png"' in page
    # A caption opens with a capital and keeps the zones' names as they are written.
    assert "Insured share in the floodplain (AE, A, VE, V), each year, for each value" in page

    frame = pd.read_parquet(grid / "model_years.parquet")
    table = pd.read_csv(index.parent / "points.csv")
    assert table["point"].tolist() == [0, 1]
    assert table["memory.decay_rate"].tolist() == [0.8, 0.95]
    assert table["runs"].tolist() == [2, 2]
    # Each run's average over its years, then the mean and sd over the point's runs.
    runs = frame[frame["point"] == 1].groupby("run_id")["insured_share"].mean()
    assert table.loc[1, "insured_share mean"] == pytest.approx(runs.mean())
    assert table.loc[1, "insured_share sd"] == pytest.approx(runs.std())


def test_the_points_table_of_two_swept_keys_has_a_row_per_combination(tmp_path):
    sweep = {"grid": {"memory.decay_rate": [0.8, 0.95], "insurer.enabled": [True, False]}}
    folder = batch(tmp_path, sweep=sweep, replicates=1)
    table = points_table(pd.read_parquet(folder / "model_years.parquet"), [*sweep["grid"]])
    assert table[["memory.decay_rate", "insurer.enabled"]].values.tolist() == [
        [0.8, True],
        [0.8, False],
        [0.95, True],
        [0.95, False],
    ]
    assert table["runs"].tolist() == [1, 1, 1, 1]
    assert table["insured_share sd"].isna().all()  # one run per point: no spread
    index = write_experiment_report(folder)
    page = index.read_text(encoding="utf-8")
    assert "across every value of insurer.enabled" in page
    # Each key's figures, and the decay rate's in a panel per insurer setting.
    assert page.count("<figure>") == 3 * len(OUTCOMES)
    facets = "insured_share_by_memory.decay_rate_within_insurer.enabled.png"
    assert f'src="{facets}"' in page
    assert png_size(index.parent / facets)[0] >= 600
    # A switch has no ranks worth correlating: only the decay rate is in the sensitivity table.
    assert pd.read_csv(index.parent / "sensitivity.csv")["key"].tolist() == ["memory.decay_rate"]


def test_a_null_setting_is_named_null_in_the_points_table_of_the_page(tmp_path):
    """government.budget: null (no limit) is a setting, not a blank cell."""
    folder = batch(tmp_path, sweep={"grid": {"government.budget": [None, 1_000_000]}}, replicates=1)
    page = write_experiment_report(folder).read_text(encoding="utf-8")
    table = page[page.index("<h2>Design points</h2>") : page.index("<h2>Sensitivity</h2>")]
    cells = re.findall(r"<td>([^<]*)</td>", table)
    assert cells[:3] == ["0", "null", "1"]  # point, budget, runs
    assert "1,000,000" in cells
    paired = page[page.index("<h2>Paired comparisons</h2>") : page.index("<h2>Figures</h2>")]
    assert re.findall(r"<td>([^<]*)</td>", paired)[:3] == ["government.budget", "1,000,000", "null"]


def test_a_latin_hypercube_key_gets_each_runs_averages_against_its_value(tmp_path):
    samples = MAX_LINES + 1
    key = "decision.pmt.beta_tp"  # how strongly threat drives a purchase: take-up follows it
    folder = batch(tmp_path, sweep={"lhs": {key: [1.0, 10.0]}, "samples": samples}, replicates=1)
    index = write_experiment_report(folder, tmp_path / "elsewhere")
    assert index == tmp_path / "elsewhere" / "index.html"
    names = sorted(p.name for p in index.parent.glob("*.png"))
    assert names == [f"runs_by_{key}.png"]
    page = index.read_text(encoding="utf-8")
    assert f"({samples} values)" in page
    assert "Spearman rank correlation" in page
    # Its points share no values to pair runs by: the page says why there is no paired.csv.
    assert f"No swept key has 2 to {MAX_LINES} values whose runs pair" in page
    assert not (index.parent / "paired.csv").exists()

    frame = pd.read_parquet(folder / "model_years.parquet")
    per_run = frame.groupby("run_id")[[key, "insured_share"]].mean()
    expected = spearmanr(per_run[key], per_run["insured_share"]).statistic
    assert expected > 0.5
    sensitivity = pd.read_csv(index.parent / "sensitivity.csv")
    assert sensitivity["key"].tolist() == [key]
    assert sensitivity.loc[0, "insured_share"] == pytest.approx(expected)
    pd.testing.assert_frame_equal(sensitivity_table(frame, [key]), sensitivity)


def test_without_a_sweep_each_outcome_is_drawn_over_the_replicates(tmp_path):
    folder = batch(tmp_path, sweep={}, replicates=3)
    index = write_experiment_report(folder)
    names = sorted(p.name for p in index.parent.glob("*.png"))
    assert names == sorted(f"{outcome}.png" for outcome in OUTCOMES)
    page = index.read_text(encoding="utf-8")
    assert "none (replicates only)" in page
    assert "the mean over the 3 replicates" in page
    assert "Sensitivity" not in page
    assert not (index.parent / "sensitivity.csv").exists()


def test_an_experiment_of_one_run_is_not_said_to_have_replicates(tmp_path):
    folder = batch(tmp_path, sweep={}, replicates=1)
    page = write_experiment_report(folder).read_text(encoding="utf-8")
    assert "each year, in the one run of the experiment." in page
    assert "1 replicates" not in page


def test_a_grid_of_one_run_a_point_is_drawn_and_captioned_without_a_band(tmp_path):
    sweep = {"grid": {"memory.decay_rate": [0.8, 0.95], "decision.pmt.beta_tp": [4.0, 8.0]}}
    folder = batch(tmp_path, sweep=sweep, replicates=1)
    page = write_experiment_report(folder).read_text(encoding="utf-8")
    # A key's own figure pools the other key's runs, with a band; a panel holds one run.
    assert "for each value of memory.decay_rate: the mean over its runs, across" in page
    assert "in a panel per value of decision.pmt.beta_tp: its one run." in page


def test_a_batch_with_a_year_key_spelled_with_a_zero_is_reported_with_that_key(tmp_path):
    """Written before 04 and 4 were one year: the record now says hazard.events.4."""
    base = tmp_path / "base.yaml"
    base.write_text(f"base: {DEFAULT}\nhazard: {{source: scripted, events: {{2: 9.5}}}}\n")
    folder = batch(
        tmp_path, base=str(base), sweep={"grid": {"hazard.events.4": [6.0, 9.0]}}, replicates=1
    )
    metrics = folder / "model_years.parquet"
    pd.read_parquet(metrics).rename(columns={"hazard.events.4": "hazard.events.04"}).to_parquet(
        metrics
    )
    write_experiment_report(folder)
    points = pd.read_csv(folder / "report" / "points.csv")
    assert "hazard.events.4" in points.columns
    assert (folder / "report" / "insured_share_by_hazard.events.4.png").is_file()


def test_a_sweep_of_one_run_a_value_draws_no_band_and_names_none():
    rows = [
        {"run_id": f"r{a}", "year": year, "a": a, "insured_share": 0.1 * a}
        for a in (1, 2)
        for year in (1, 2)
    ]
    figure = plots.plot_sweep(pd.DataFrame(rows), "a", band=None)
    assert figure.axes[0].get_legend().get_title().get_text() == ""
    many = plots.plot_sweep(pd.DataFrame(rows), "a")
    assert many.axes[0].get_legend().get_title().get_text() == "band: min-max over replicates"
    facets = plots.plot_sweep_facets(pd.DataFrame(rows).assign(b="x"), "a", "b", band=None)
    assert facets.axes[-1].get_legend().get_title().get_text() == ""


def test_a_sweep_without_numbers_says_why_it_has_no_sensitivity_table(tmp_path):
    """The README lists sensitivity.csv among a report's files: its absence is explained."""
    folder = batch(tmp_path, sweep={"grid": {"engine": ["objects", "arrays"]}}, replicates=1)
    index = write_experiment_report(folder)
    page = index.read_text(encoding="utf-8")
    assert "No swept key has numbers to rank (engine), so there is no rank correlation" in page
    assert not (index.parent / "sensitivity.csv").exists()
    assert (index.parent / "paired.csv").is_file()


def test_run_averages_of_a_key_without_numbers_label_its_values():
    per_run = pd.DataFrame(
        {"insurer.enabled": [True, False, True], **{o: [0.1, 0.2, 0.3] for o in OUTCOMES}}
    )
    figure = plots.plot_run_averages(per_run, "insurer.enabled", OUTCOMES)
    axes = figure.get_axes()
    assert len(axes) == len(OUTCOMES)
    assert [t.get_text() for t in axes[0].get_xticklabels()] == ["False", "True"]
    assert all(ax.get_xlabel() == "insurer.enabled" for ax in axes)


def test_an_unfinished_experiment_is_a_report_error_saying_how_to_finish_it(grid, tmp_path):
    unfinished = tmp_path / "unfinished"
    unfinished.mkdir()
    (unfinished / "experiment.json").write_bytes((grid / "experiment.json").read_bytes())
    assert is_experiment_dir(unfinished)
    with pytest.raises(ReportError, match=r"has not finished .*--resume"):
        write_experiment_report(unfinished)
    assert not (unfinished / "report").exists()


def test_floodsim_report_of_an_experiment_folder(grid, tmp_path, capsys):
    out = tmp_path / "report"
    assert main(["report", str(grid), "--out", str(out)]) == 0
    assert capsys.readouterr().out.strip() == str(out / "index.html")
    (tmp_path / "broken").mkdir()
    (tmp_path / "broken" / "experiment.json").write_text("{not json", encoding="utf-8")
    assert main(["report", str(tmp_path / "broken")]) == 2
    assert "experiment.json: cannot be read" in capsys.readouterr().err


@pytest.mark.parametrize(
    ("edit", "problem"),
    [
        (lambda r: r["experiment"].update(set="x"), "experiment.set: Input should be a valid dict"),
        (lambda r: r["runs"][0].update(point="p000"), "runs.0.point: Input should be a valid int"),
        (lambda r: r["runs"][1].update(run_dir="../../etc"), "runs.1.run_dir: expected runs/"),
        (lambda r: r["runs"][0].update(status="done"), "runs.0.status: Input should be 'pending'"),
        (lambda r: r.pop("runs"), "runs: Field required"),
    ],
    ids=["set", "point", "run_dir", "status", "no-runs"],
)
@pytest.mark.parametrize("command", ["report", "check-behaviour"])
def test_an_experiment_record_changed_since_the_batch_is_named(
    grid, tmp_path, capsys, command, edit, problem
):
    """A KeyError, AttributeError or ValueError ended both commands halfway through."""
    broken = tmp_path / "broken"
    shutil.copytree(grid, broken, ignore=shutil.ignore_patterns("report"))
    path = broken / "experiment.json"
    record = orjson.loads(path.read_bytes())
    edit(record)
    path.write_bytes(orjson.dumps(record))
    argv = [command, str(broken)]
    if command == "check-behaviour":
        argv += ["--targets", str(TARGETS)]
    assert main(argv) == 2
    err = capsys.readouterr().err
    assert err.startswith(f"floodsim: error: {path}: {problem}"), err
    assert err.count("\n") == 1


@pytest.mark.parametrize(
    "insured",
    [
        [0.9, 0.1, 0.2, 0.3],  # with the null run, the ranks would not agree
        # The null run's outcome between the others': ranked among all runs, the others' ranks
        # would be 1, 3 and 4, and their correlation with the budget's 0.98.
        [0.15, 0.1, 0.2, 0.3],
    ],
)
def test_sensitivity_ranks_a_key_over_the_runs_where_it_has_a_number(insured):
    """A null (government.budget: null, no limit) has no rank: those runs are left out."""
    key = "government.budget"
    budgets = [None, 1e5, 2e5, 3e5]
    frame = pd.DataFrame(
        {
            "run_id": [f"p{i:03d}-r000" for i in range(4) for _ in range(2)],
            "point": [i for i in range(4) for _ in range(2)],
            "year": [1, 2] * 4,
            key: [b for b in budgets for _ in range(2)],
            **{o: [0.0] * 8 for o in OUTCOMES},
        }
    ).assign(insured_share=[s for s in insured for _ in range(2)])
    table = sensitivity_table(frame, [key])
    assert table.loc[0, "insured_share"] == pytest.approx(1.0)
    assert table.loc[0, "runs"] == 3  # a correlation of 1.0 over 3 runs, not 4: said with it
    assert table[["elevated_share", "relocated_share", "total_damage"]].isna().all().all()
    only_null_and_one = frame[frame["point"].isin([0, 1])]
    assert sensitivity_table(only_null_and_one, [key])[list(OUTCOMES)].isna().all().all()


def _luck(seed: int, b: str) -> float:
    """What the floods of a seed, and the key b, give every outcome of a run."""
    return {11: 0.1, 12: 0.5}[seed] + {"x": 0.0, "y": 0.2}[b]


def _two_key_frame(effect: float) -> pd.DataFrame:
    """Runs of two swept keys and two seeds whose insured share is ``effect`` per unit of a."""
    points = enumerate([(1.0, "x"), (1.0, "y"), (2.0, "x"), (2.0, "y")])
    rows = [
        {
            "run_id": f"p{point:03d}-r{replicate:03d}",
            "point": point,
            "replicate": replicate,
            "seed": seed,
            "a": a,
            "b": b,
            "year": year,
            **dict.fromkeys(OUTCOMES, _luck(seed, b)),
            "insured_share": _luck(seed, b) + effect * a,
        }
        for point, (a, b) in points
        for replicate, seed in enumerate([11, 12])
        for year in (1, 2)
    ]
    return pd.DataFrame(rows)


def test_paired_comparisons_measure_a_keys_effect_run_against_run():
    """The luck of the floods (here as wide as the effect) cancels within each pair."""
    table = paired_table(_two_key_frame(0.05), ["a", "b"])
    every = table[table["within"] == "all"]
    insured = every[every["outcome"] == "insured_share"].set_index("key")
    assert insured.loc["a", ["value", "reference", "pairs", "lower", "higher"]].tolist() == [
        2.0,
        1.0,
        4,
        0,
        4,
    ]
    assert insured.loc["a", "mean difference"] == pytest.approx(0.05)
    assert insured.loc["a", "sd"] == pytest.approx(0.0)
    # The reference runs' mean insured share: the luck (0.1, 0.5, 0.3, 0.7) plus 0.05.
    assert insured.loc["a", "relative"] == pytest.approx(0.05 / 0.45)
    # b's effect is the luck it adds, the same in every pair.
    assert insured.loc["b", "mean difference"] == pytest.approx(0.2)
    damage = every[(every["key"] == "a") & (every["outcome"] == "total_damage")].iloc[0]
    assert (damage["mean difference"], damage["lower"], damage["higher"]) == (0.0, 0, 0)


def test_paired_comparisons_are_repeated_within_each_value_of_the_other_key():
    """An effect that depends on the other key (an interaction) shows in its subsets."""
    frame = _two_key_frame(0.05)
    frame["insured_share"] += ((frame["a"] == 2.0) & (frame["b"] == "y")) * 0.1
    table = paired_table(frame, ["a", "b"])
    insured = table[(table["key"] == "a") & (table["outcome"] == "insured_share")]
    by_subset = insured.set_index("within")[["pairs", "mean difference"]]
    assert by_subset.index.tolist() == ["all", 'b="x"', 'b="y"']
    assert by_subset["pairs"].tolist() == [4, 2, 2]
    assert by_subset["mean difference"].tolist() == pytest.approx([0.1, 0.05, 0.15])


def test_paired_comparisons_pair_a_null_reference_and_leave_out_a_latin_hypercube():
    frame = _two_key_frame(0.05).assign(a=lambda f: f["a"].where(f["a"] == 2.0, None))
    table = paired_table(frame, ["a", "b"])
    row = table[(table["outcome"] == "insured_share") & (table["within"] == "all")].iloc[0]
    assert pd.isna(row["reference"])
    assert (row["key"], row["value"], row["pairs"]) == ("a", 2.0, 4)
    assert row["mean difference"] == pytest.approx(0.05)  # the null runs are those of a=1
    # A Latin hypercube: no two points share a value of either key.
    hypercube = frame.assign(a=frame["point"] + 0.5, b=frame["point"] * 0.1 + 0.31)
    assert paired_table(hypercube, ["a", "b"]).empty
    many = pd.concat(
        _two_key_frame(0.05).assign(a=value, point=lambda f, v=value: f["point"] + 10 * v)
        for value in range(MAX_LINES + 1)
    )
    assert paired_table(many, ["a"]).empty


def test_an_experiment_report_pairs_the_runs_of_each_value(grid):
    index = write_experiment_report(grid)
    paired = pd.read_csv(index.parent / "paired.csv")
    assert set(paired["outcome"]) == set(OUTCOMES)
    assert paired["key"].unique().tolist() == ["memory.decay_rate"]
    assert paired[["value", "reference", "within", "pairs"]].drop_duplicates().values.tolist() == [
        [0.95, 0.8, "all", 2]
    ]
    assert "<h2>Paired comparisons</h2>" in index.read_text(encoding="utf-8")


def test_facets_draw_each_design_point_apart_in_a_panel_per_value_of_the_other_key():
    """A line in a panel is the mean of that design point's runs, not of the pooled values."""
    rows = [
        {"run_id": f"{a}-{b}-{r}", "year": year, "a": a, "b": b, "insured_share": value}
        for a in (0.1, 0.2)
        for b in ("x", "y")
        for r in range(2)
        for year in (1, 2, 3)
        # An interaction: a matters under b = y only.
        for value in [0.5 + (a if b == "y" else 0.0) + 0.01 * r]
    ]
    figure = plots.plot_sweep_facets(pd.DataFrame(rows), "a", "b")
    left, right = figure.axes[:2]
    assert [ax.get_title() for ax in (left, right)] == ["b = x", "b = y"]
    means = {
        ax.get_title(): [round(float(line.get_ydata()[0]), 6) for line in ax.get_lines()]
        for ax in (left, right)
    }
    assert means == {"b = x": [0.505, 0.505], "b = y": [0.605, 0.705]}
    assert left.get_shared_y_axes().joined(left, right)
    # The figure's title names both keys, not the last panel's value.
    assert figure.get_suptitle() == "insured_share by a, a panel per b"


def test_a_small_latin_hypercube_of_two_keys_gets_no_panels_of_one_line_each(tmp_path):
    """Four scattered points are not a grid: a panel per value would hold a line each."""
    sweep = {"lhs": {"memory.decay_rate": [0.7, 0.99], "decision.pmt.beta_tp": [1.0, 9.0]}}
    folder = batch(tmp_path, sweep={**sweep, "samples": 4}, replicates=1)
    index = write_experiment_report(folder)
    assert not list(index.parent.glob("*_within_*.png"))
    assert len(list(index.parent.glob("*_by_*.png"))) == 2 * len(OUTCOMES)


def test_a_value_keeps_its_colour_in_every_panel_though_a_panel_lacks_one():
    rows = [
        {"run_id": f"{a}-{b}", "year": year, "a": a, "b": b, "insured_share": 0.5}
        for a, b in [(1, "x"), (2, "x"), (3, "x"), (2, "y"), (3, "y")]
        for year in (1, 2)
    ]
    figure = plots.plot_sweep_facets(pd.DataFrame(rows), "a", "b")
    colours = {
        ax.get_title(): {line.get_label(): line.get_color() for line in ax.get_lines()}
        for ax in figure.axes[:2]
    }
    x, y = colours["b = x"], colours["b = y"]
    assert len(set(x.values())) == 3
    assert {label: x[label] for label in y} == y


def test_a_null_value_of_the_lines_key_keeps_its_colour_in_every_panel():
    """government.budget: null (no limit) as the first of two swept keys, as a grid may be."""
    rows = [
        {"run_id": f"{a}-{b}", "year": year, "a": a, "b": b, "insured_share": 0.5}
        for a in (None, 1e6)
        for b in (0.2, 0.5)
        for year in (1, 2)
    ]
    figure = plots.plot_sweep_facets(pd.DataFrame(rows), "a", "b")
    colours = [
        {line.get_label(): line.get_color() for line in ax.get_lines()} for ax in figure.axes[:2]
    ]
    assert colours[0] == colours[1]
    assert "a = null (n = 1)" in colours[0]


def test_integer_levels_beside_a_null_are_named_as_integers():
    """government.budget: [null, 1000000] is read back as floats: not '1000000.0'."""
    rows = [
        {"run_id": f"{a}-{b}", "year": year, "a": a, "b": b, "insured_share": 0.5}
        for a in (None, 1_000_000)
        for b in (None, 2)
        for year in (1, 2)
    ]
    figure = plots.plot_sweep_facets(pd.DataFrame(rows), "a", "b")
    assert [ax.get_title() for ax in figure.axes[:2]] == ["b = 2", "b = null"]
    labels = [line.get_label() for line in figure.axes[0].get_lines()]
    assert labels == ["a = 1000000 (n = 1)", "a = null (n = 1)"]
    floats = pd.DataFrame(rows).assign(a=lambda f: f["a"].fillna(0.5))  # not all whole
    (line, _) = plots.plot_sweep(floats, "a").axes[0].get_lines()
    assert line.get_label() == "a = 0.5 (n = 2)"


def test_a_long_panel_title_is_wrapped_within_its_panel():
    """A mapping swept as a value (flat against zone premiums) titled each panel past its edge."""
    key = "insurance.zone_multiplier"
    values = ['{"AE":1.0,"X":0.3}', '{"AE":1.0,"X":1.0}']
    rows = [
        {"run_id": f"{a}-{b}", "year": year, "a": a, key: b, "insured_share": 0.5}
        for a in (2.0, 8.0)
        for b in values
        for year in (1, 2)
    ]
    figure = plots.plot_sweep_facets(pd.DataFrame(rows), "a", key)
    titles = [ax.get_title() for ax in figure.axes[:2]]
    assert titles == [f"{key} =\n{value}" for value in values]
    short = plots.plot_sweep_facets(pd.DataFrame(rows).rename(columns={key: "b"}), "a", "b")
    assert short.axes[0].get_title() == f"b = {values[0]}"
    # A key longer than a line stays whole: wrapped at spaces only, never inside a name.
    long_key = "decision.pmt.response_efficacy.buy_contents_insurance"
    named = plots.plot_sweep_facets(
        pd.DataFrame(rows).rename(columns={key: long_key}), "a", long_key
    )
    assert named.axes[0].get_title() == f"{long_key}\n= {values[0]}"


def test_a_correlation_over_fewer_than_three_runs_is_left_blank():
    """Two runs always rank in line or against each other: a Spearman of 1.0 there says nothing."""
    key = "households.bfe_ft"
    frame = pd.DataFrame(
        {
            "run_id": [f"p{i:03d}-r000" for i in range(3)],
            "point": [0, 1, 2],
            "year": [1, 1, 1],
            key: [8.0, 9.0, 100.0],
            **{o: [0.1, 0.2, 0.3] for o in OUTCOMES},
        }
    ).assign(insured_share_x=[0.01, 0.02, np.nan])  # the whole town in the floodplain
    table = sensitivity_table(frame, [key])
    assert table.loc[0, "runs"] == 3
    assert table.loc[0, "insured_share"] == pytest.approx(1.0)
    assert np.isnan(table.loc[0, "insured_share_x"])


def test_an_outcome_without_a_value_in_any_run_says_so():
    """A town all in the floodplain has no share outside it: the figure is not left blank."""
    rows = [
        {"run_id": f"{a}-{r}", "year": year, "a": a, "insured_share_x": np.nan}
        for a in (1.0, 2.0)
        for r in range(2)
        for year in (1, 2)
    ]
    figure = plots.plot_sweep(pd.DataFrame(rows), "a", value="insured_share_x")
    assert [t.get_text() for t in figure.axes[0].texts] == ["no run has a value of insured_share_x"]
    rows = [{**row, "insured_share_x": 0.1} for row in rows]
    assert not plots.plot_sweep(pd.DataFrame(rows), "a", value="insured_share_x").axes[0].texts


def test_paired_comparisons_count_the_pairs_that_have_a_difference():
    """A run blank in an outcome (a share over nobody) pairs with nothing there."""
    frame = _two_key_frame(0.05)
    blank = (frame["seed"] == 12) & (frame["a"] == 2.0) & (frame["b"] == "x")
    frame.loc[blank, "insured_share_x"] = np.nan
    table = paired_table(frame, ["a", "b"])
    every = table[(table["key"] == "a") & (table["within"] == "all")].set_index("outcome")
    assert every.loc["insured_share_x", "pairs"] == 3
    assert every.loc["insured_share", "pairs"] == 4
    # The reference mean is that of the same three pairs: (0.1 + 0.3 + 0.7) / 3.
    assert every.loc["insured_share_x", "mean difference"] == pytest.approx(0.0)
    assert every.loc["insured_share_x", "relative"] == pytest.approx(0.0)


def test_a_correlation_of_nothing_is_written_as_zero_not_minus_zero(tmp_path):
    key = "households.bfe_ft"
    frame = pd.DataFrame(
        {
            "run_id": [f"p{i:03d}-r000" for i in range(7)],
            "point": range(7),
            "year": [1] * 7,
            key: [1.0, 2.0, 3.0, 4.0, 5.0, 6.0, 7.0],
            # No trend: the correlation comes out as -2e-17, rounded to -0.0.
            **{o: [0.2, 0.0, 0.0, 0.2, 0.0, 0.3, 0.0] for o in OUTCOMES},
        }
    )
    table = sensitivity_table(frame, [key])
    assert (table[list(OUTCOMES)] == 0).all().all()
    table.to_csv(tmp_path / "sensitivity.csv", index=False)
    assert "-0.0" not in (tmp_path / "sensitivity.csv").read_text(encoding="utf-8")


def test_a_sweeps_legend_counts_the_runs_with_a_value():
    rows = [
        {"run_id": f"{a}-{r}", "year": year, "a": a, "insured_share_x": np.nan if r else 0.1}
        for a in (1.0, 2.0)
        for r in range(3)
        for year in (1, 2)
    ]
    figure = plots.plot_sweep(pd.DataFrame(rows), "a", value="insured_share_x")
    labels = [t.get_text() for t in figure.axes[0].get_legend().get_texts()]
    assert labels == ["a = 1.0 (n = 1)", "a = 2.0 (n = 1)"]


def test_paired_values_are_written_as_the_experiment_gives_them(tmp_path):
    """A whole number of one key is not written 6.0 because another key's values are 0.8."""
    frame = _two_key_frame(0.05).assign(b=lambda f: f["b"].map({"x": 3, "y": 6}))
    table = paired_table(frame, ["a", "b"])
    table.to_csv(tmp_path / "paired.csv", index=False)
    written = pd.read_csv(tmp_path / "paired.csv", dtype=str)
    every = written[written["within"] == "all"].drop_duplicates("key").set_index("key")
    assert every.loc["b", ["value", "reference"]].tolist() == ["6", "3"]
    assert every.loc["a", ["value", "reference"]].tolist() == ["2.0", "1.0"]
