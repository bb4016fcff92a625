"""Execute the analysis notebooks top to bottom on small runs (nbclient, the project's kernel)."""

from __future__ import annotations

import json
import os
import re
import sys
from pathlib import Path

import nbformat
import pandas as pd
import pytest
from nbclient import NotebookClient
from nbclient.exceptions import CellExecutionError

from simulation.analysis import plots
from simulation.config import load_config
from simulation.experiments import run_experiment
from simulation.runner import run_simulation

pytestmark = pytest.mark.slow

ROOT = Path(__file__).resolve().parents[1]
NOTEBOOKS = ROOT / "notebooks"
# Appended to each notebook before it runs (not saved): which interpreter ran the kernel.
PROBE = "import sys\nprint('KERNEL-PYTHON:', sys.executable)"
# Appended too: a line on each axes of every figure a notebook keeps in a variable.
FIGURE_PROBE = """
import json as _json
from matplotlib.figure import Figure as _Figure
for _name, _figure in sorted(globals().items()):
    if isinstance(_figure, _Figure):
        for _ax in _figure.axes:
            _low, _high = sorted(_ax.get_xlim())
            _legend = _ax.get_legend()
            _facts = {
                "figure": _name,
                "xlim": [_low, _high],
                "xticks": [float(t) for t in _ax.get_xticks() if _low <= t <= _high],
                "legend": _legend.get_title().get_text() if _legend else None,
                "labels": [t.get_text() for t in _legend.get_texts()] if _legend else [],
                "texts": [t.get_text() for t in _ax.texts],
            }
            print("FIGURE-AXES " + _json.dumps(_facts))
"""


@pytest.fixture(scope="module")
def small_run(tmp_path_factory) -> Path:
    config, base_dir = load_config(
        ROOT / "configs" / "default.yaml", ["households.count=120", "years=10"]
    )
    return run_simulation(config, base_dir, tmp_path_factory.mktemp("runs"), progress=False).run_dir


def execute(name: str, cwd: Path = ROOT) -> nbformat.NotebookNode:
    """Run ``notebooks/<name>`` from ``cwd``; nbclient raises if any cell fails."""
    nb = nbformat.read(NOTEBOOKS / name, as_version=4)
    nb.cells.append(nbformat.v4.new_code_cell(PROBE))
    nb.cells.append(nbformat.v4.new_code_cell(FIGURE_PROBE))
    client = NotebookClient(
        nb, timeout=120, kernel_name="python3", resources={"metadata": {"path": str(cwd)}}
    )
    client.execute()
    return nb


def outputs(nb: nbformat.NotebookNode) -> list[dict]:
    return [out for cell in nb.cells if cell.cell_type == "code" for out in cell.outputs]


def text_of(nb: nbformat.NotebookNode) -> str:
    parts = []
    for out in outputs(nb):
        if out["output_type"] == "stream":
            parts.append(out["text"])
        parts.append(out.get("data", {}).get("text/plain", ""))
        parts.append(out.get("data", {}).get("text/html", ""))
    return "\n".join(parts)


def figure_axes(nb: nbformat.NotebookNode) -> list[dict]:
    """What :data:`FIGURE_PROBE` printed: one entry per axes of each figure kept in a variable."""
    return [
        json.loads(line.removeprefix("FIGURE-AXES "))
        for line in text_of(nb).splitlines()
        if line.startswith("FIGURE-AXES ")
    ]


def images(nb: nbformat.NotebookNode) -> int:
    return sum("image/png" in out.get("data", {}) for out in outputs(nb))


def run_single_run(
    monkeypatch: pytest.MonkeyPatch, run_dir: Path
) -> tuple[nbformat.NotebookNode, str]:
    """``single_run.ipynb`` executed on ``run_dir``, checked clean, and its text output."""
    monkeypatch.setenv("FLOODSIM_RUN_DIR", str(run_dir))
    nb = execute("single_run.ipynb")
    check_clean(nb)
    return nb, text_of(nb)


def check_clean(nb: nbformat.NotebookNode) -> None:
    assert not [out for out in outputs(nb) if out["output_type"] == "error"]
    assert all(cell.execution_count for cell in nb.cells if cell.cell_type == "code")
    # A warning the notebook does not explain reads as a fault to whoever runs it.
    warned = [out["text"] for out in outputs(nb) if out.get("name") == "stderr"]
    assert not [text for text in warned if "Warning" in text], warned
    # The kernel is the interpreter running the tests (the project's venv), not another Python.
    assert f"KERNEL-PYTHON: {sys.executable}" in text_of(nb)


def test_single_run_notebook(small_run, monkeypatch):
    nb, text = run_single_run(monkeypatch, small_run)
    assert f"Loading the run in {small_run}" in text
    assert "Following household H" in text
    assert "Memory of household H" in text  # rebuilt memories were printed
    assert "Working memory" in text
    assert "TP_level" in text  # the decision trace table
    assert "content" in text  # the retrievals table with memory texts
    assert "damaging flood that year" in text  # every household's decisions, in one pass
    # adaptation, damage/claims and the household's appraisal figure
    assert images(nb) >= 3


def test_a_notebook_copied_out_of_the_repository_analyses_the_run_it_is_given(
    small_run, monkeypatch, tmp_path
):
    """Only the notebook's own run needs the repository's default config."""
    monkeypatch.setenv("FLOODSIM_RUN_DIR", str(small_run))
    nb = execute("single_run.ipynb", cwd=tmp_path)
    check_clean(nb)
    assert f"Loading the run in {small_run}" in text_of(nb)


def test_single_run_notebook_on_a_minimal_audit_run(monkeypatch, tmp_path):
    """Decision traces only: the memory sections are skipped, the decisions still explained."""
    config, base_dir = load_config(
        ROOT / "configs" / "default.yaml", ["households.count=80", "years=6", "audit.level=minimal"]
    )
    run_dir = run_simulation(config, base_dir, tmp_path, progress=False).run_dir
    nb, text = run_single_run(monkeypatch, run_dir)
    assert "This run writes decision traces only (audit.level: minimal)" in text
    assert "Memory of household" not in text  # no replay without the memory streams
    assert "TP_level" in text  # the decision trace table
    assert images(nb) >= 3  # adaptation, damage/claims and the household's appraisal figure


def test_batch_experiment_notebook(monkeypatch, tmp_path):
    monkeypatch.delenv("FLOODSIM_EXPERIMENT_DIR", raising=False)
    monkeypatch.setenv("FLOODSIM_SMALL", "1")
    monkeypatch.setenv("FLOODSIM_OUTPUT_DIR", str(tmp_path))
    nb = execute("batch_experiment.ipynb")
    check_clean(nb)
    text = text_of(nb)
    assert "Ran 6 runs (60 households x 8 years) in " in text
    assert f" s into {tmp_path}" in text
    # Its runs are kept where it said, one folder per (decay rate, seed), not in a temporary folder.
    assert len(list(tmp_path.glob("*/model_years.csv"))) == 6
    assert "insured_pct" in text  # the take-up table
    assert "Mean take-up with decay_rate 0.95" in text
    assert images(nb) >= 2  # take-up over time, overall and in zone AE


def test_batch_experiment_notebook_refuses_a_folder_without_results(monkeypatch, tmp_path):
    """A mistyped or unfinished experiment folder must not be swapped for the notebook's grid."""
    monkeypatch.setenv("FLOODSIM_SMALL", "1")
    monkeypatch.setenv("FLOODSIM_OUTPUT_DIR", str(tmp_path / "own"))
    monkeypatch.setenv("FLOODSIM_EXPERIMENT_DIR", str(tmp_path / "no_such_experiment"))
    with pytest.raises(CellExecutionError, match=r"holds no model_years\.parquet"):
        execute("batch_experiment.ipynb")
    assert not (tmp_path / "own").exists()  # nothing was run in its place


def _experiment(
    tmp_path: Path,
    grid: str | None,
    *,
    replicates: int,
    fixed: str = "households.count: 30, years: 3, audit.level: off",
) -> Path:
    """The folder of a small batch experiment over ``grid`` (a YAML mapping), run serially.

    ``grid`` None: no sweep, replicates only. ``fixed``: the experiment's ``set`` (YAML).
    """
    path = tmp_path / "exp.yaml"
    sweep = f"sweep: {{grid: {grid}}}\n" if grid is not None else ""
    path.write_text(
        f"name: sweep\nbase: {ROOT / 'configs' / 'default.yaml'}\n"
        f"set: {{{fixed}}}\n"
        f"replicates: {replicates}\nseed: 1\n{sweep}",
        encoding="utf-8",
    )
    return run_experiment(path, tmp_path / "out", executor="serial", progress=False).out_dir


def test_batch_experiment_notebook_on_an_experiment_sweeping_another_key(monkeypatch, tmp_path):
    """Runs at two subsidy levels share their replicate seeds: each is still a run of its own."""
    grid = "{memory.decay_rate: [0.8, 0.95], government.initial_subsidy: [0.2, 0.5]}"
    monkeypatch.setenv("FLOODSIM_EXPERIMENT_DIR", str(_experiment(tmp_path, grid, replicates=2)))
    nb = execute("batch_experiment.ipynb")
    check_clean(nb)
    text = text_of(nb)
    assert "Loaded" in text
    assert "compared by memory.decay_rate" in text
    assert "This experiment also sweeps government.initial_subsidy" in text
    assert "percentage points over 4 runs each" in text
    # A level's n counts its runs at every subsidy: its band spans those runs, not only seeds.
    assert {axes["legend"] for axes in figure_axes(nb)} == {"band: min-max over runs"}
    assert "the band spans the seeds" not in "".join(cell.source for cell in nb.cells)


@pytest.mark.parametrize("named", [False, True])
def test_batch_experiment_notebook_compares_the_levels_of_any_swept_key(
    monkeypatch, tmp_path, named
):
    """An experiment of the user's own sweeps what it sweeps: not necessarily the decay rate."""
    grid = "{government.initial_subsidy: [0.2, 0.5]}"
    monkeypatch.setenv("FLOODSIM_EXPERIMENT_DIR", str(_experiment(tmp_path, grid, replicates=2)))
    if named:
        monkeypatch.setenv("FLOODSIM_SWEPT_KEY", "government.initial_subsidy")
    else:
        monkeypatch.delenv("FLOODSIM_SWEPT_KEY", raising=False)
    nb = execute("batch_experiment.ipynb")
    check_clean(nb)
    text = text_of(nb)
    assert "compared by government.initial_subsidy" in text
    assert "Mean take-up with initial_subsidy 0.5" in text
    assert "percentage points over 2 runs each" in text
    assert images(nb) >= 2
    assert {axes["legend"] for axes in figure_axes(nb)} == {"band: min-max over replicates"}


def test_batch_experiment_notebook_compares_levels_in_the_sweeps_order_as_the_report_does(
    monkeypatch, tmp_path
):
    """Against the level the sweep lists first, run against run: the sign paired.csv gives."""
    from simulation.analysis.experiment_report import paired_table

    grid = "{insurance.rate_per_1000: [4.0, 2.0]}"
    folder = _experiment(
        tmp_path, grid, replicates=3, fixed="households.count: 60, years: 6, audit.level: off"
    )
    monkeypatch.setenv("FLOODSIM_EXPERIMENT_DIR", str(folder))
    monkeypatch.delenv("FLOODSIM_SWEPT_KEY", raising=False)
    nb = execute("batch_experiment.ipynb")
    check_clean(nb)
    text = text_of(nb)
    frame = pd.read_parquet(folder / "model_years.parquet")
    row = paired_table(frame, ["insurance.rate_per_1000"]).query(
        "outcome == 'insured_share' and within == 'all'"
    )
    (difference,) = row["mean difference"] * 100
    assert difference != 0  # else the sign would not be tested
    means = re.search(
        r"Mean take-up with rate_per_1000 2\.0: ([0-9.]+)%, with 4\.0: ([0-9.]+)% "
        r"\(difference ([-+][0-9.]+) percentage points over 3 runs each\)",
        text,
    )
    assert means is not None
    paired = re.search(
        r"Paired by replicate: rate_per_1000 2\.0 minus 4\.0: ([-+][0-9.]+) percentage points "
        r"\(sd [0-9.]+ over 3 pairs; (\d) higher, (\d) lower\)",
        text,
    )
    assert paired is not None
    assert float(paired.group(1)) == pytest.approx(difference, abs=0.051)
    assert float(means.group(3)) == pytest.approx(difference, abs=0.11)
    assert int(paired.group(2)) + int(paired.group(3)) <= 3


def test_batch_experiment_notebook_does_not_compare_a_latin_hypercubes_levels_one_by_one(
    monkeypatch, tmp_path
):
    """Each of its runs has a level of its own: the first point's draw is no reference."""
    path = tmp_path / "exp.yaml"
    path.write_text(
        f"name: lhs\nbase: {ROOT / 'configs' / 'default.yaml'}\n"
        "set: {households.count: 30, years: 3, audit.level: off}\nreplicates: 1\nseed: 1\n"
        "sweep: {lhs: {memory.decay_rate: [0.8, 0.99]}, samples: 10}\n",
        encoding="utf-8",
    )
    folder = run_experiment(path, tmp_path / "out", executor="serial", progress=False).out_dir
    monkeypatch.setenv("FLOODSIM_EXPERIMENT_DIR", str(folder))
    monkeypatch.delenv("FLOODSIM_SWEPT_KEY", raising=False)
    nb = execute("batch_experiment.ipynb")
    check_clean(nb)
    text = text_of(nb)
    assert (
        "decay_rate takes 10 values, more than the 8 compared level by level: see the table "
        "above, and the rank correlation in floodsim report's sensitivity.csv." in text
    )
    assert "Mean take-up with decay_rate" not in text
    assert "Paired by replicate" not in text


def test_batch_experiment_notebook_does_not_point_a_key_without_numbers_to_a_rank(
    monkeypatch, tmp_path
):
    """Nine event tables have no rank: sensitivity.csv has no row for them."""
    tables = ", ".join(f"{{{year}: 9.0}}" for year in range(1, 10))
    fixed = "households.count: 30, years: 3, audit.level: off, hazard.source: scripted"
    folder = _experiment(tmp_path, f"{{hazard.events: [{tables}]}}", replicates=1, fixed=fixed)
    monkeypatch.setenv("FLOODSIM_EXPERIMENT_DIR", str(folder))
    monkeypatch.delenv("FLOODSIM_SWEPT_KEY", raising=False)
    nb = execute("batch_experiment.ipynb")
    check_clean(nb)
    text = text_of(nb)
    assert "takes 9 values, more than the 8 compared level by level: see the table above." in text
    assert "sensitivity.csv" not in text


def test_batch_experiment_notebook_compares_a_null_level_as_a_level(monkeypatch, tmp_path):
    """An unlimited budget (null) is a setting of its own, not a row left out of the table."""
    grid = "{government.budget: [null, 1000000]}"
    monkeypatch.setenv("FLOODSIM_EXPERIMENT_DIR", str(_experiment(tmp_path, grid, replicates=1)))
    monkeypatch.delenv("FLOODSIM_SWEPT_KEY", raising=False)
    nb = execute("batch_experiment.ipynb")
    check_clean(nb)
    text = text_of(nb)
    assert "compared by government.budget" in text
    # The reference is the level the sweep lists first, as floodsim report's: here null.
    assert re.search(r"Mean take-up with budget 1000000(\.0)?: [0-9.]+%, with null: ", text)
    assert re.search(r"Paired by replicate: budget 1000000(\.0)? minus null: ", text)
    assert "over 1 runs each" in text
    # The table names the level null too, as the text and the experiment file do: not NaN.
    assert "<th>null</th>" in text
    assert "<th>NaN</th>" not in text


def test_batch_experiment_notebook_keeps_a_key_whose_short_name_is_taken(monkeypatch, tmp_path):
    """memory_weights.seed's short name is the runs' seed column: the dotted name stays."""
    grid = "{decision.pmt.memory_weights.seed: [0.5, 0.8]}"
    monkeypatch.setenv("FLOODSIM_EXPERIMENT_DIR", str(_experiment(tmp_path, grid, replicates=1)))
    monkeypatch.setenv("FLOODSIM_SWEPT_KEY", "")  # empty: unset, as the other variables
    nb = execute("batch_experiment.ipynb")
    check_clean(nb)
    text = text_of(nb)
    assert "compared by decision.pmt.memory_weights.seed" in text
    assert "Mean take-up with decision.pmt.memory_weights.seed 0.8: " in text
    assert "also sweeps" not in text  # the compared key is no other key


def test_batch_experiment_notebook_refuses_a_key_the_experiment_does_not_sweep(
    monkeypatch, tmp_path
):
    grid = "{government.initial_subsidy: [0.2, 0.5]}"
    monkeypatch.setenv("FLOODSIM_EXPERIMENT_DIR", str(_experiment(tmp_path, grid, replicates=1)))
    monkeypatch.setenv("FLOODSIM_SWEPT_KEY", "memory.decay_rate")
    with pytest.raises(CellExecutionError, match=r"FLOODSIM_SWEPT_KEY=memory\.decay_rate is not"):
        execute("batch_experiment.ipynb")


def test_batch_experiment_notebook_reads_the_swept_keys_from_the_experiment(monkeypatch, tmp_path):
    """A swept key without a dot (years) is swept all the same: experiment.json says so."""
    folder = _experiment(
        tmp_path, "{years: [2, 4]}", replicates=1, fixed="households.count: 30, audit.level: off"
    )
    monkeypatch.setenv("FLOODSIM_EXPERIMENT_DIR", str(folder))
    monkeypatch.delenv("FLOODSIM_SWEPT_KEY", raising=False)
    nb = execute("batch_experiment.ipynb")
    check_clean(nb)
    text = text_of(nb)
    assert "compared by years" in text
    assert "sweeps no key" not in text
    assert re.search(r"Mean take-up with years 4: [0-9.]+%, with 2: ", text)


@pytest.mark.parametrize("replicates", [3, 1])
def test_batch_experiment_notebook_compares_the_replicates_of_an_experiment_without_a_sweep(
    monkeypatch, tmp_path, replicates
):
    """As single_flood_replicates.yaml and large_scale.yaml: replicates only, to the end."""
    folder = _experiment(tmp_path, None, replicates=replicates)
    monkeypatch.setenv("FLOODSIM_EXPERIMENT_DIR", str(folder))
    monkeypatch.delenv("FLOODSIM_SWEPT_KEY", raising=False)
    nb = execute("batch_experiment.ipynb")
    check_clean(nb)
    text = text_of(nb)
    assert f"{replicates} runs. Experiment sweep sweeps no key: its runs are replicates" in text
    assert f"Mean take-up over the {replicates} replicates of sweep: " in text
    if replicates > 1:
        assert "percentage points across their seeds, from " in text
    else:
        assert "a single replicate: no spread across seeds to show" in text
    assert images(nb) >= 2
    assert {axes["legend"] for axes in figure_axes(nb)} == {"band: min-max over replicates"}


def test_notebooks_find_a_relative_folder_from_the_notebooks_folder(
    small_run, monkeypatch, tmp_path
):
    """As floodsim prints them, relative to the repository root, or to the kernel's folder."""
    # Jupyter starts the kernel in the notebook's folder.
    from_root = os.path.relpath(small_run, ROOT)
    monkeypatch.setenv("FLOODSIM_RUN_DIR", from_root)
    nb = execute("single_run.ipynb", cwd=NOTEBOOKS)
    check_clean(nb)
    assert f"Loading the run in {small_run.resolve()}" in text_of(nb)
    # Relative to the kernel's own folder first.
    monkeypatch.setenv("FLOODSIM_RUN_DIR", os.path.relpath(small_run, NOTEBOOKS))
    nb = execute("single_run.ipynb", cwd=NOTEBOOKS)
    assert f"Loading the run in {small_run.resolve()}" in text_of(nb)

    folder = _experiment(tmp_path, "{memory.decay_rate: [0.8, 0.95]}", replicates=1)
    monkeypatch.setenv("FLOODSIM_EXPERIMENT_DIR", os.path.relpath(folder, ROOT))
    monkeypatch.delenv("FLOODSIM_SWEPT_KEY", raising=False)
    nb = execute("batch_experiment.ipynb", cwd=NOTEBOOKS)
    check_clean(nb)
    assert f"Loaded {folder.resolve() / 'model_years.parquet'}: 2 runs" in text_of(nb)


def test_a_relative_folder_found_nowhere_is_refused_naming_where_it_was_looked_for(monkeypatch):
    monkeypatch.setenv("FLOODSIM_SMALL", "1")
    monkeypatch.setenv("FLOODSIM_EXPERIMENT_DIR", "outputs/no_such_experiment")
    where = re.escape(f"in {NOTEBOOKS} or in {ROOT}")
    with pytest.raises(CellExecutionError, match=rf"no_such_experiment: no such path {where}"):
        execute("batch_experiment.ipynb", cwd=NOTEBOOKS)


def _run(tmp_path: Path, settings: list[str]) -> Path:
    """A small run of the default config with ``settings``, into ``tmp_path``."""
    config, base_dir = load_config(ROOT / "configs" / "default.yaml", settings)
    return run_simulation(config, base_dir, tmp_path / "runs", progress=False).run_dir


def _script(tmp_path: Path) -> str:
    """``decision.script=...`` for a table that has one household (a renter) insure in year 2."""
    table = tmp_path / "decisions.csv"
    table.write_text("agent_id,year,skill_id\nH00001,2,buy_contents_insurance\n", encoding="utf-8")
    return f"decision.script={table}"


@pytest.mark.parametrize("policy", ["pmt", "scripted"])
def test_single_run_notebook_says_plainly_that_nobody_flooded(monkeypatch, tmp_path, policy):
    """No flood to follow: said once, and the rest still runs (scripted: without appraisals)."""
    settings = ["households.count=30", "years=5", "hazard.source=scripted", "hazard.events={}"]
    if policy == "scripted":
        settings += ["decision.policy=scripted", _script(tmp_path)]
    _nb, text = run_single_run(monkeypatch, _run(tmp_path, settings))
    assert "Nobody was flooded in this run" in text
    assert "Following household H" in text
    assert "at the end of year 0" not in text  # no year before a flood that never came
    assert "flood memory was never retrieved" not in text
    assert "Memory of household H" in text  # its memory, all the same
    assert "TP_level" in text  # and its decisions
    assert "Empty DataFrame" not in text


@pytest.mark.parametrize("level", ["standard", "minimal"])
def test_single_run_notebook_says_scripted_decisions_carry_no_appraisals(
    monkeypatch, tmp_path, level
):
    settings = ["households.count=30", "years=6", f"audit.level={level}"]
    settings += ["decision.policy=scripted", _script(tmp_path)]
    nb, text = run_single_run(monkeypatch, _run(tmp_path, settings))
    note = "The decisions of this run (decision.policy scripted) carry no appraisals"
    # Section 7 runs at level minimal too: its decisions are in the traces. Without a flood to
    # follow, nor appraisals, the household followed is the first to choose a measure.
    if level == "minimal":
        assert "Following household H00001, the first to choose a measure, in section 7" in text
    else:
        assert "Following household H" in text
    assert "TP_level" in text
    (household,) = [a for a in figure_axes(nb) if a["figure"] == "household_figure"]
    assert any(t.startswith(note) for t in household["texts"])
    assert not any("appraisal" in label for label in household["labels"])  # no empty lines
    low, high = household["xlim"]  # every year of the run, not only those something was drawn in
    assert low < 1
    assert high > 6
    if level == "standard":  # the flood-year comparison of section 8 says it too
        assert f"{note}: they are read from its script" in text
        assert "damaging flood that year" not in text  # no table of counts 0 and NaN


def test_single_run_notebook_counts_only_the_audited_sample(monkeypatch, tmp_path):
    run_dir = _run(tmp_path, ["households.count=120", "years=10", "audit.sample=0.25"])
    _nb, text = run_single_run(monkeypatch, run_dir)
    damaged = int(pd.read_csv(run_dir / "model_years.csv")["damaged_households"].sum())
    assert re.search(
        r"[0-9]+ households of the audited sample \(audited sample: 0.25\) had damaging floods; "
        rf"model_years.csv, which counts every household, has {damaged} household-years ",
        text,
    )
    assert re.search(r"[0-9]+ households \(audited sample: 0.25\), [0-9]+ decisions", text)


def test_single_run_notebook_on_an_audited_sample_that_drew_nobody(monkeypatch, tmp_path):
    run_dir = _run(tmp_path, ["households.count=5", "years=2", "audit.sample=0.01"])
    _nb, text = run_single_run(monkeypatch, run_dir)
    assert "hold no household (audited sample: 0.01)" in text
    assert "carry no appraisals" not in text  # the PMT policy appraises: nobody was traced


def test_single_run_notebook_on_a_one_year_run(monkeypatch, tmp_path):
    run_dir = _run(tmp_path, ["households.count=30", "years=1"])
    nb, text = run_single_run(monkeypatch, run_dir)
    assert "Empty DataFrame" not in text
    assert "retrieved no memory before deciding in year 1" in text
    (household,) = [a for a in figure_axes(nb) if a["figure"] == "household_figure"]
    assert household["xticks"] == [1.0]


def test_a_one_year_run_is_drawn_on_whole_years_with_points_told_apart(tmp_path):
    run_dir = _run(tmp_path, ["households.count=30", "years=1", "audit.level=off"])
    years = pd.read_csv(run_dir / "model_years.csv")
    figures = [
        plots.plot_adaptation(years),
        plots.plot_damage_claims(years),
        plots.plot_threat(pd.DataFrame(columns=["year", "agent_id", "tp"]), metrics=years),
        plots.plot_sweep(years.assign(level=1), "level"),
    ]
    for figure in figures:
        for ax in figure.axes:
            low, high = sorted(ax.get_xlim())
            assert [t for t in ax.get_xticks() if low <= t <= high] == [1.0]
    top, bottom = figures[0].axes
    for ax in (top, bottom):  # one point per series: its look tells it from the others'
        looks = [(line.get_marker(), line.get_color()) for line in ax.get_lines()]
        assert len(set(looks)) == len(looks) > 1
