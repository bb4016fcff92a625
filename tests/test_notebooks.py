"""Execute the analysis notebooks top to bottom on small runs (nbclient, the project's kernel)."""

from __future__ import annotations

import re
import sys
from pathlib import Path

import nbformat
import pytest
from nbclient import NotebookClient
from nbclient.exceptions import CellExecutionError

from simulation.config import load_config
from simulation.experiments import run_experiment
from simulation.runner import run_simulation

pytestmark = pytest.mark.slow

ROOT = Path(__file__).resolve().parents[1]
NOTEBOOKS = ROOT / "notebooks"
# Appended to each notebook before it runs (not saved): which interpreter ran the kernel.
PROBE = "import sys\nprint('KERNEL-PYTHON:', sys.executable)"


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


def images(nb: nbformat.NotebookNode) -> int:
    return sum("image/png" in out.get("data", {}) for out in outputs(nb))


def check_clean(nb: nbformat.NotebookNode) -> None:
    assert not [out for out in outputs(nb) if out["output_type"] == "error"]
    assert all(cell.execution_count for cell in nb.cells if cell.cell_type == "code")
    # The kernel is the interpreter running the tests (the project's venv), not another Python.
    assert f"KERNEL-PYTHON: {sys.executable}" in text_of(nb)


def test_single_run_notebook(small_run, monkeypatch):
    monkeypatch.setenv("FLOODSIM_RUN_DIR", str(small_run))
    nb = execute("single_run.ipynb")
    check_clean(nb)
    text = text_of(nb)
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
    monkeypatch.setenv("FLOODSIM_RUN_DIR", str(run_dir))
    nb = execute("single_run.ipynb")
    check_clean(nb)
    text = text_of(nb)
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


def _experiment(tmp_path: Path, grid: str, *, replicates: int) -> Path:
    """The folder of a small batch experiment over ``grid`` (a YAML mapping), run serially."""
    path = tmp_path / "exp.yaml"
    path.write_text(
        f"name: sweep\nbase: {ROOT / 'configs' / 'default.yaml'}\n"
        "set: {households.count: 30, years: 3, audit.level: off}\n"
        f"replicates: {replicates}\nseed: 1\nsweep: {{grid: {grid}}}\n",
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


def test_batch_experiment_notebook_compares_a_null_level_as_a_level(monkeypatch, tmp_path):
    """An unlimited budget (null) is a setting of its own, not a row left out of the table."""
    grid = "{government.budget: [null, 1000000]}"
    monkeypatch.setenv("FLOODSIM_EXPERIMENT_DIR", str(_experiment(tmp_path, grid, replicates=1)))
    monkeypatch.delenv("FLOODSIM_SWEPT_KEY", raising=False)
    nb = execute("batch_experiment.ipynb")
    check_clean(nb)
    text = text_of(nb)
    assert "compared by government.budget" in text
    assert re.search(r"Mean take-up with budget null: [0-9.]+%, with 1000000(\.0)?: ", text)
    assert "over 1 runs each" in text


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
