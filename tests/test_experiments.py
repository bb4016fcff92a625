"""Tests for batch experiments: design, seeds, executors, failures, resume, combined outputs."""

from __future__ import annotations

import multiprocessing
import shutil
import socket
from multiprocessing import connection
from pathlib import Path

import numpy as np
import orjson
import pandas as pd
import pytest
from pydantic import ValidationError
from scipy.stats import qmc

from simulation.analysis import metrics
from simulation.analysis.metrics import RunDirError, combine_runs
from simulation.cli import main
from simulation.config import ConfigError, IgnoredKeyWarning, RunConfig, load_config
from simulation.experiments import (
    SweepConfig,
    batch,
    executors,
    load_experiment,
    plan_runs,
    replicate_seeds,
    run_experiment,
)
from simulation.experiments.design import design_points
from simulation.experiments.executors import RunTask, execute_run
from simulation.folder_lock import hold_folder
from simulation.runner import config_hash

DEFAULT = Path(__file__).resolve().parents[1] / "configs" / "default.yaml"
SCENARIO = DEFAULT.parent / "scenarios" / "single_flood.yaml"
EXPERIMENTS = DEFAULT.parent / "experiments"


def write_experiment(folder: Path, body: str = "", *, replicates: int = 2) -> Path:
    folder.mkdir(parents=True, exist_ok=True)
    path = folder / "exp.yaml"
    path.write_text(
        f"name: tiny\nbase: {DEFAULT}\n"
        "set: {households.count: 30, years: 3, audit.level: minimal}\n"
        f"replicates: {replicates}\nseed: 1\n"
        + (body or "sweep: {grid: {memory.decay_rate: [0.8, 0.95]}}\n"),
        encoding="utf-8",
    )
    return path


def scripted_experiment(folder: Path, rows: str, body: str) -> Path:
    """:func:`write_experiment` for 2 years of scripted decisions: the table's ``rows``."""
    table = folder / "decisions.csv"
    table.write_text(f"agent_id,year,skill_id\n{rows}", encoding="utf-8")
    path = write_experiment(folder, body)
    text = path.read_text(encoding="utf-8").replace(
        "years: 3,", f"years: 2, decision.policy: scripted, decision.script: {table},"
    )
    path.write_text(text, encoding="utf-8")
    return path


def state(out: Path) -> dict:
    return orjson.loads((out / "experiment.json").read_bytes())


@pytest.fixture(scope="module")
def serial_result(tmp_path_factory):
    folder = tmp_path_factory.mktemp("serial")
    return run_experiment(write_experiment(folder), folder / "out", executor="serial")


def test_replicate_seeds_come_from_seed_sequence_and_are_stable():
    assert replicate_seeds(1, 2) == replicate_seeds(1, 5)[:2]
    assert len(set(replicate_seeds(1, 50))) == 50
    assert replicate_seeds(1, 3) != replicate_seeds(2, 3)


def test_grid_and_lhs_design(tmp_path):
    path = write_experiment(
        tmp_path,
        "sweep:\n  grid: {memory.decay_rate: [0.8, 0.9, 0.95]}\n"
        "  lhs: {decision.pmt.beta_tp: [3.0, 8.0], insurance.rate_per_1000: [2.0, 6.0]}\n"
        "  samples: 4\n",
        replicates=3,
    )
    experiment, base, _ = load_experiment(path)
    runs = plan_runs(experiment, base, str(path))
    assert len(runs) == 3 * 4 * 3
    points = {r.point: r.params for r in runs}
    assert len(points) == 12
    for params in points.values():
        assert 3.0 <= params["decision.pmt.beta_tp"] <= 8.0
        assert 2.0 <= params["insurance.rate_per_1000"] <= 6.0
    # Latin hypercube: each of the 4 strata of a range holds exactly one sample per grid value.
    betas = sorted({p["decision.pmt.beta_tp"] for p in points.values()})
    assert [int((b - 3.0) / 5.0 * 4) for b in betas] == [0, 1, 2, 3]
    # The swept values reach each run's config; every point shares the replicate seeds.
    run = runs[5]
    assert run.config["decision"]["pmt"]["beta_tp"] == run.params["decision.pmt.beta_tp"]
    assert {r.seed for r in runs if r.point == 0} == {r.seed for r in runs if r.point == 7}
    again, _, _ = load_experiment(path)
    assert [r.params for r in plan_runs(again, base, str(path))] == [r.params for r in runs]


def test_each_planned_run_is_its_point_validated_with_its_own_seed(tmp_path):
    path = write_experiment(tmp_path, replicates=3)
    experiment, base, _ = load_experiment(path)
    runs = plan_runs(experiment, base, str(path))
    assert [r.seed for r in runs] == replicate_seeds(1, 3) * 2
    for run in runs:
        assert run.config["seed"] == run.seed
        assert run.config["memory"]["decay_rate"] == run.params["memory.decay_rate"]
        # What a worker validates is the config the run's own seed gives, whole.
        alone, _ = load_config(
            DEFAULT,
            [
                "households.count=30",
                "years=3",
                "audit.level=minimal",
                f"memory.decay_rate={run.params['memory.decay_rate']}",
                "name=tiny",
                f"registry={DEFAULT.parents[1] / 'skill_registry.yaml'}",  # made absolute
            ],
            seed=run.seed,
        )
        assert RunConfig.model_validate(run.config) == alone


def test_serial_batch_writes_runs_state_and_parquet(serial_result):
    out = serial_result.out_dir
    records = state(out)["runs"]
    assert [r["run_id"] for r in records] == ["p000-r000", "p000-r001", "p001-r000", "p001-r001"]
    assert all(r["status"] == "complete" and r["error"] is None for r in records)
    assert {r["params"]["memory.decay_rate"] for r in records} == {0.8, 0.95}
    for record in records:
        manifest = orjson.loads((out / record["run_dir"] / "manifest.json").read_bytes())
        assert manifest["seed"] == record["seed"]
        assert manifest["run_id"] == record["run_id"]
    frame = pd.read_parquet(out / "model_years.parquet")
    assert len(frame) == 4 * 3
    assert list(frame.columns[:5]) == ["run_id", "point", "replicate", "seed", "memory.decay_rate"]
    assert {"year", "insured_share", "mean_tp"} <= set(frame.columns)
    assert serial_result.failed == 0
    # The batch's wall time spans every run's (the serial executor runs them one after another).
    assert state(out)["wall_s"] == serial_result.wall_s
    assert serial_result.wall_s >= sum(r["duration_s"] for r in records)


@pytest.mark.parametrize("kind", ["process", "process-fork", "process-spawn", "dask"])
def test_results_identical_whichever_executor_ran_them(serial_result, tmp_path, kind, monkeypatch):
    if kind.startswith("process-"):  # workers started one way (else as auto picks here)
        kind, method = kind.split("-")
        monkeypatch.setattr(executors, "pool_start_method", lambda choice="auto": method)
    path = write_experiment(tmp_path)
    result = run_experiment(path, tmp_path / "out", executor=kind, workers=2)
    assert result.failed == 0
    expected = pd.read_parquet(serial_result.out_dir / "model_years.parquet")
    got = pd.read_parquet(result.out_dir / "model_years.parquet")
    pd.testing.assert_frame_equal(got, expected)
    for record in state(result.out_dir)["runs"]:
        run_dir = record["run_dir"]
        assert (result.out_dir / run_dir / "model_years.csv").read_bytes() == (
            serial_result.out_dir / run_dir / "model_years.csv"
        ).read_bytes()


def test_failed_runs_are_recorded_and_resume_reruns_only_them(tmp_path, capsys, monkeypatch):
    from simulation import runner

    real = runner.run_simulation

    def flaky(config, *args, **kwargs):  # design point 1 fails at run time
        if kwargs.get("run_id", "").startswith("p001"):
            raise RuntimeError("worker ran out of memory")
        return real(config, *args, **kwargs)

    monkeypatch.setattr(runner, "run_simulation", flaky)
    path = write_experiment(tmp_path)
    code = main(
        ["batch", str(path), "--out", str(tmp_path / "out"), "--executor", "serial", "--quiet"]
    )
    captured = capsys.readouterr()
    assert code == 1
    wall_s = state(tmp_path / "out")["wall_s"]
    summary = "2 of 4 runs complete (0 kept from an earlier attempt), 2 failed"
    assert f"{summary}, in {wall_s:,.1f} s" in captured.out
    records = state(tmp_path / "out")["runs"]
    assert [r["status"] for r in records] == ["complete", "complete", "failed", "failed"]
    assert "worker ran out of memory" in records[2]["error"]
    assert "failed p001-r000" in captured.err
    assert len(pd.read_parquet(tmp_path / "out" / "model_years.parquet")) == 2 * 3
    # The cause goes away; resume keeps the complete runs and reruns the failed ones.
    monkeypatch.setattr(runner, "run_simulation", real)
    first = (tmp_path / "out" / "runs" / "p000-r000" / "manifest.json").read_bytes()
    result = run_experiment(path, tmp_path / "out", executor="serial", resume=True)
    assert result.skipped == 2
    assert result.failed == 0
    assert (tmp_path / "out" / "runs" / "p000-r000" / "manifest.json").read_bytes() == first
    assert len(pd.read_parquet(tmp_path / "out" / "model_years.parquet")) == 4 * 3


def test_broken_files_named_by_runs_stop_the_batch_before_it_starts(tmp_path, capsys):
    path = write_experiment(
        tmp_path, "sweep: {grid: {households.table: [null, missing.csv]}}\n", replicates=2
    )
    assert main(["batch", str(path), "--out", str(tmp_path / "out"), "--quiet"]) == 2
    err = capsys.readouterr().err
    assert "households.table" in err
    assert "missing.csv" in err
    assert "design point 1" in err
    assert not (tmp_path / "out").exists()


def test_resume_reruns_missing_run_directories(serial_result, tmp_path):
    out = tmp_path / "copy"
    shutil.copytree(serial_result.out_dir, out)
    shutil.rmtree(out / "runs" / "p001-r000")
    path = write_experiment(tmp_path)
    result = run_experiment(path, out, executor="serial", resume=True)
    assert result.skipped == 3
    assert (out / "runs" / "p001-r000" / "manifest.json").exists()


def test_resume_reruns_a_complete_run_whose_model_years_csv_is_gone(
    serial_result, tmp_path, capsys
):
    """A run recorded complete is kept only if its folder still holds what a complete run has."""
    out = tmp_path / "copy"
    shutil.copytree(serial_result.out_dir, out)
    (out / "runs" / "p000-r000" / "model_years.csv").unlink()
    shutil.rmtree(out / "runs" / "p001-r001")
    path = write_experiment(tmp_path)
    code = main(
        ["batch", str(path), "--out", str(out), "--executor", "serial", "--resume", "--quiet"]
    )
    assert code == 0, capsys.readouterr().err
    assert "2 kept from an earlier attempt" in capsys.readouterr().out
    assert (out / "runs" / "p000-r000" / "model_years.csv").is_file()
    assert (out / "runs" / "p001-r001" / "model_years.csv").is_file()
    assert state(out)["wall_s"] is not None
    assert pd.read_parquet(out / "model_years.parquet").equals(
        pd.read_parquet(serial_result.out_dir / "model_years.parquet")
    )


@pytest.mark.parametrize(
    "damage",
    [
        lambda text: text[:40] + b"\xaf\xfe" + text[42:],  # not UTF-8
        lambda text: text.replace(b"\n2,", b"\nx,", 1),  # a year that is not a number
        lambda text: text[: text.rindex(b"\n", 0, -1) + 1],  # the last year cut off
        lambda text: text.replace(b"total_damage", b"total_damages", 1),
    ],
    ids=["bytes", "text", "a-year-short", "renamed-column"],
)
def test_resume_reruns_a_complete_run_whose_model_years_csv_was_damaged(
    serial_result, tmp_path, capsys, damage
):
    """It was kept, and combining the metrics read the file as it was: a traceback (bytes, text)
    or a metrics table a year short or with a column renamed."""
    out = tmp_path / "copy"
    shutil.copytree(serial_result.out_dir, out)
    metrics = out / "runs" / "p000-r001" / "model_years.csv"
    metrics.write_bytes(damage(metrics.read_bytes()))
    path = write_experiment(tmp_path)
    code = main(
        ["batch", str(path), "--out", str(out), "--executor", "serial", "--resume", "--quiet"]
    )
    assert code == 0, capsys.readouterr().err
    assert "3 kept from an earlier attempt" in capsys.readouterr().out
    assert pd.read_parquet(out / "model_years.parquet").equals(
        pd.read_parquet(serial_result.out_dir / "model_years.parquet")
    )


@pytest.mark.parametrize(
    "damage",
    [
        lambda run: (run / "household_traces.jsonl").unlink(),  # deleted to free the disk
        lambda run: (run / "household_traces.jsonl").write_bytes(b""),
        lambda run: (run / "config.resolved.yaml").write_text(
            (run / "config.resolved.yaml")
            .read_text(encoding="utf-8")
            .replace("years: 3", "years: 4", 1),
            encoding="utf-8",
        ),
    ],
    ids=["stream-deleted", "stream-emptied", "config-edited"],
)
def test_resume_reruns_a_complete_run_whose_audit_or_config_changed_since(
    serial_result, tmp_path, capsys, damage
):
    """It was kept as complete: an audit trail without the stream its manifest lists, or a
    config.resolved.yaml that no longer describes the run beside it."""
    out = tmp_path / "copy"
    shutil.copytree(serial_result.out_dir, out)
    run = out / "runs" / "p000-r001"
    damage(run)
    path = write_experiment(tmp_path)
    code = main(
        ["batch", str(path), "--out", str(out), "--executor", "serial", "--resume", "--quiet"]
    )
    assert code == 0, capsys.readouterr().err
    assert "3 kept from an earlier attempt" in capsys.readouterr().out
    before = serial_result.out_dir / "runs" / "p000-r001"
    # Run again: its files are a run's again (the traces' timestamps aside).
    assert (run / "config.resolved.yaml").read_bytes() == (
        before / "config.resolved.yaml"
    ).read_bytes()
    traces = (run / "household_traces.jsonl").read_text(encoding="utf-8").splitlines()
    assert len(traces) == len((before / "household_traces.jsonl").read_text().splitlines()) > 0
    assert pd.read_parquet(out / "model_years.parquet").equals(
        pd.read_parquet(serial_result.out_dir / "model_years.parquet")
    )


@pytest.mark.parametrize(
    ("damage", "kept"),
    [
        (lambda records: records[2].pop("run_id"), 3),  # that run cannot be matched: it reruns
        (lambda records: records[2].update(run_id=[1, 2]), 3),
        (lambda records: records[3].update(point="1", replicate=[1], error={}), 4),
    ],
    ids=["a-record-without-its-id", "an-id-that-is-a-list", "a-record-with-wrong-values"],
)
def test_resume_records_kept_runs_as_the_plan_has_them(
    serial_result, tmp_path, capsys, damage, kept
):
    """A damaged record of experiment.json ended the batch with a traceback (a KeyError while
    planning, or point '1' beside the others' integers while combining the metrics)."""
    out = tmp_path / "copy"
    shutil.copytree(serial_result.out_dir, out)
    data = state(out)
    damage(data["runs"])
    (out / "experiment.json").write_bytes(orjson.dumps(data))
    path = write_experiment(tmp_path)
    code = main(
        ["batch", str(path), "--out", str(out), "--executor", "serial", "--resume", "--quiet"]
    )
    assert code == 0, capsys.readouterr().err
    assert f"{kept} kept from an earlier attempt" in capsys.readouterr().out
    fields = ("run_id", "point", "replicate", "seed", "params", "status", "error", "run_dir")
    assert [{k: r[k] for k in fields} for r in state(out)["runs"]] == [
        {k: r[k] for k in fields} for r in state(serial_result.out_dir)["runs"]
    ]
    assert pd.read_parquet(out / "model_years.parquet").equals(
        pd.read_parquet(serial_result.out_dir / "model_years.parquet")
    )


def test_resume_keeps_a_run_a_worker_finished_after_the_batch_was_interrupted(
    serial_result, tmp_path
):
    """Ctrl-C stops the batch before it records the runs its workers were finishing."""
    out = tmp_path / "copy"
    shutil.copytree(serial_result.out_dir, out)
    document = state(out)
    for record in document["runs"][2:]:
        record.update(status="pending", run_dir=None, duration_s=None)
    (out / "experiment.json").write_bytes(orjson.dumps(document))
    kept = (out / "runs" / "p001-r000" / "manifest.json").read_bytes()
    result = run_experiment(write_experiment(tmp_path), out, executor="serial", resume=True)
    assert result.skipped == 4
    assert (out / "runs" / "p001-r000" / "manifest.json").read_bytes() == kept
    assert [r["status"] for r in state(out)["runs"]] == ["complete"] * 4
    assert state(out)["runs"][2]["run_dir"] == "runs/p001-r000"


def test_resume_keeps_runs_whose_manifest_hashed_audit_background(serial_result, tmp_path):
    """Manifests written before the key was left out of the config hash recorded it too."""
    out = tmp_path / "copy"
    shutil.copytree(serial_result.out_dir, out)
    manifest_path = out / "runs" / "p000-r001" / "manifest.json"
    manifest = orjson.loads(manifest_path.read_bytes())
    resolved, _ = load_config(manifest_path.parent / "config.resolved.yaml")
    manifest["config_hash"] = config_hash(resolved, execution_keys=True)
    manifest_path.write_bytes(orjson.dumps(manifest))
    kept = manifest_path.read_bytes()
    result = run_experiment(write_experiment(tmp_path), out, executor="serial", resume=True)
    assert result.skipped == 4
    assert manifest_path.read_bytes() == kept
    manifest["config_hash"] = "0" * 64  # a hash of neither kind: the run is done again
    manifest_path.write_bytes(orjson.dumps(manifest))
    result = run_experiment(write_experiment(tmp_path), out, executor="serial", resume=True)
    assert result.skipped == 3
    assert orjson.loads(manifest_path.read_bytes())["config_hash"] == config_hash(resolved)


def test_a_large_batch_rewrites_its_record_a_bounded_number_of_times(tmp_path, monkeypatch):
    # Rewritten after every run, experiment.json would cost the square of the runs.
    monkeypatch.setattr(batch, "_STATE_WRITES", 2)  # as 200 would for 400 runs or more
    write_json, writes = batch._write_json, []

    def counted(target: Path, data: dict) -> None:
        writes.append([r["status"] for r in data["runs"]])
        write_json(target, data)

    monkeypatch.setattr(batch, "_write_json", counted)
    path = write_experiment(tmp_path, "sweep: {grid: {memory.decay_rate: [0.8, 0.85, 0.9]}}\n")
    run_experiment(path, tmp_path / "out", executor="serial", progress=False)
    # The plan, after every third of the 6 runs, and the end (with the batch's time).
    assert [w.count("complete") for w in writes] == [0, 3, 6, 6]
    assert [r["status"] for r in state(tmp_path / "out")["runs"]] == ["complete"] * 6


def test_ctrl_c_records_the_runs_finished_since_the_last_rewrite(tmp_path, monkeypatch):
    monkeypatch.setattr(batch, "_STATE_WRITES", 1)  # the record is rewritten at the end only
    stop_at, finished = 3, []

    class StoppedAtTheThirdRun(batch.tqdm):
        def update(self, n: int = 1) -> bool | None:
            finished.append(n)
            if len(finished) == stop_at:
                raise KeyboardInterrupt
            return super().update(n)

    monkeypatch.setattr(batch, "tqdm", StoppedAtTheThirdRun)
    path = write_experiment(tmp_path, "sweep: {grid: {memory.decay_rate: [0.8, 0.85, 0.9]}}\n")
    with pytest.raises(KeyboardInterrupt):
        run_experiment(path, tmp_path / "out", executor="serial", progress=False)
    statuses = [r["status"] for r in state(tmp_path / "out")["runs"]]
    assert statuses == ["complete"] * stop_at + ["pending"] * 3


def test_ctrl_c_stops_a_process_batch_without_waiting_for_the_run_in_progress(
    tmp_path, monkeypatch
):
    """The run a worker is in is killed: not recorded, not complete, so --resume redoes it."""
    path = tmp_path / "exp.yaml"
    path.write_text(
        f"name: tiny\nbase: {DEFAULT}\nset: {{years: 100, audit.level: minimal}}\n"
        "sweep: {grid: {households.count: [30, 3000]}}\nreplicates: 1\nseed: 1\n",
        encoding="utf-8",
    )
    write_json = batch._write_json
    writes = []

    def interrupted_at_the_first_outcome(target: Path, data: dict) -> None:
        writes.append(target)
        if len(writes) == 2:  # the plan, then p000's outcome: p001 has just started
            raise KeyboardInterrupt
        write_json(target, data)

    monkeypatch.setattr(batch, "_write_json", interrupted_at_the_first_outcome)
    before = set(multiprocessing.active_children())
    out = tmp_path / "out"
    with pytest.raises(KeyboardInterrupt):
        run_experiment(path, out, executor="process", workers=1, progress=False)
    # Its sentinel, not is_alive(): the pool's own thread may be reaping the worker still.
    for worker in set(multiprocessing.active_children()) - before:
        assert connection.wait([worker.sentinel], timeout=0)
    assert [r["status"] for r in state(out)["runs"]] == ["pending", "pending"]
    killed = out / "runs" / "p001-r000" / "manifest.json"
    # Waiting for it would take the whole run (seconds) and leave it complete.
    assert not killed.exists() or orjson.loads(killed.read_bytes())["status"] == "running"


def test_resume_reruns_runs_the_edited_experiment_changed(serial_result, tmp_path):
    out = tmp_path / "copy"
    shutil.copytree(serial_result.out_dir, out)
    kept = (out / "runs" / "p000-r000" / "manifest.json").read_bytes()
    # Design point 1 moves from 0.95 to 0.9; design point 0 (0.8) is the same run as before.
    path = write_experiment(tmp_path, "sweep: {grid: {memory.decay_rate: [0.8, 0.9]}}\n")
    result = run_experiment(path, out, executor="serial", resume=True)
    assert result.skipped == 2
    assert (out / "runs" / "p000-r000" / "manifest.json").read_bytes() == kept
    resolved, _ = load_config(out / "runs" / "p001-r000" / "config.resolved.yaml")
    assert resolved.memory.decay_rate == 0.9
    combined = pd.read_parquet(out / "model_years.parquet")
    assert sorted(combined["memory.decay_rate"].unique()) == [0.8, 0.9]
    # A fixed setting changed under every run: nothing is kept.
    edited = path.read_text(encoding="utf-8").replace("years: 3", "years: 2")
    path.write_text(edited, encoding="utf-8")
    result = run_experiment(path, out, executor="serial", resume=True)
    assert result.skipped == 0
    assert len(pd.read_parquet(out / "model_years.parquet")) == 4 * 2


def test_resume_labels_kept_runs_with_the_keys_added_to_the_sweep(serial_result, tmp_path):
    out = tmp_path / "copy"
    shutil.copytree(serial_result.out_dir, out)
    # 4.0 is the default rate: the runs at it are the runs already made, now labelled by it.
    path = write_experiment(
        tmp_path,
        "sweep: {grid: {memory.decay_rate: [0.8, 0.95], insurance.rate_per_1000: [4.0, 6.0]}}\n",
        replicates=1,
    )
    result = run_experiment(path, out, executor="serial", resume=True)
    assert result.skipped == 1  # p000-r000: decay 0.8 at the default rate, as before
    kept = next(r for r in state(out)["runs"] if r["run_id"] == "p000-r000")
    assert kept["params"] == {"memory.decay_rate": 0.8, "insurance.rate_per_1000": 4.0}
    combined = pd.read_parquet(out / "model_years.parquet")
    assert combined["insurance.rate_per_1000"].notna().all()
    assert combined.groupby("insurance.rate_per_1000")["run_id"].nunique().to_dict() == {
        4.0: 2,
        6.0: 2,
    }


def test_list_and_mapping_values_are_swept_and_labelled_whole(tmp_path):
    body = (
        "sweep: {grid: {"
        "audit.sample: [[H00001, H00002, H00006], [H00003]], "
        "hazard.events: [{2: 9.5}, {1: 9.5, 3: 9.0}]}}\n"
    )
    path = write_experiment(tmp_path, body, replicates=1)
    scripted = "audit.level: minimal, hazard.source: scripted, hazard.kind: depth"
    path.write_text(path.read_text().replace("audit.level: minimal", scripted))
    result = run_experiment(path, tmp_path / "out", executor="serial")
    assert result.failed == 0
    combined = pd.read_parquet(result.out_dir / "model_years.parquet")
    assert len(combined) == 4 * 3
    labels = combined.groupby("point")[["audit.sample", "hazard.events"]].first()
    assert labels.to_dict("list") == {
        "audit.sample": ['["H00001","H00002","H00006"]'] * 2 + ['["H00003"]'] * 2,
        "hazard.events": ['{"2":9.5}', '{"1":9.5,"3":9.0}'] * 2,
    }
    assert state(result.out_dir)["runs"][1]["params"]["hazard.events"] == {"1": 9.5, "3": 9.0}
    runs = sorted((result.out_dir / "runs").iterdir())
    stacked = combine_runs(runs, keys=["audit.sample", "hazard.events"])
    assert stacked.groupby("run_id")[["sample", "events"]].first().to_dict("list") == {
        "sample": labels["audit.sample"].tolist(),
        "events": labels["hazard.events"].tolist(),
    }


def test_a_swept_or_set_events_table_replaces_the_base_table(tmp_path):
    base = tmp_path / "base.yaml"
    base.write_text(f"base: {DEFAULT}\nhazard: {{source: scripted, events: {{2: 9.5, 3: 7.0}}}}\n")
    body = "sweep: {grid: {hazard.events: [{}, {3: 9.5}]}}\n"
    path = write_experiment(tmp_path, body, replicates=1)
    path.write_text(path.read_text().replace(str(DEFAULT), str(base)))
    experiment, data, _ = load_experiment(path)
    runs = plan_runs(experiment, data, str(path))
    tables = [RunConfig.model_validate(run.config).hazard.events for run in runs]
    assert tables == [{}, {3: 9.5}]  # neither keeps the base's year 2
    fixed = path.read_text().replace("audit.level", "hazard.events: {1: 8.0}, audit.level")
    path.write_text(fixed.replace(body, ""))
    assert load_experiment(path)[1]["hazard"]["events"] == {1: 8.0}


@pytest.mark.parametrize(
    ("fixed", "refusal"),
    [
        ("memory.decay_rate: 0.5", "set: memory.decay_rate: swept too"),
        ("memory: {decay_rate: 0.5}", "set: memory: holds memory.decay_rate, which is swept too"),
    ],
)
def test_a_key_both_set_and_swept_is_refused_before_anything_runs(tmp_path, capsys, fixed, refusal):
    """The sweep would overwrite the fixed value without a word."""
    path = write_experiment(tmp_path)
    path.write_text(path.read_text().replace("audit.level", f"{fixed}, audit.level"))
    assert main(["batch", str(path), "--out", str(tmp_path / "out")]) == 2
    assert capsys.readouterr().err == (
        f"floodsim: error: {path}: {refusal}; fix it in set or sweep it, not both\n"
    )
    assert not (tmp_path / "out").exists()
    # Another key of the same section is no clash.
    path = write_experiment(tmp_path)
    path.write_text(
        path.read_text().replace("audit.level", "memory.working_capacity: 5, audit.level")
    )
    assert main(["validate", str(path)]) == 0


@pytest.mark.parametrize(
    ("fixed", "holder"),
    [
        ("{hazard.events: {4: 9.5}, hazard.events.4: 3.0}", "hazard.events"),  # 9.5 was lost
        ("{hazard.events.4: 3.0, hazard.events: {6: 9.5}}", "hazard.events"),  # 3.0 was lost
        ("{hazard.events.4: 3.0, hazard: {events: {6: 9.5}}}", "hazard"),
    ],
)
def test_a_year_set_beside_its_events_table_is_refused(tmp_path, capsys, fixed, holder):
    """A table's years are numbers, the dotted key's text: the check did not see them."""
    path = tmp_path / "exp.yaml"
    path.write_text(f"name: t\nbase: {SCENARIO}\nset: {fixed}\n", encoding="utf-8")
    assert main(["validate", str(path)]) == 2
    assert capsys.readouterr().err == (
        f"floodsim: error: {path}: set: hazard.events.4: also given by {holder}; give it once\n"
    )
    path.write_text(
        f"name: t\nbase: {SCENARIO}\nset: {{hazard.events.4: 3.0, hazard.events.6: 9.5}}\n"
    )
    assert main(["validate", str(path)]) == 0
    # A year swept while set fixes it in the table is the clash set-and-swept names.
    path.write_text(
        f"name: t\nbase: {SCENARIO}\nset: {{hazard.events: {{4: 9.5}}}}\n"
        "sweep: {grid: {hazard.events.4: [3.0, 9.0]}}\n"
    )
    assert main(["validate", str(path)]) == 2
    assert (
        "set: hazard.events: holds hazard.events.4, which is swept too" in capsys.readouterr().err
    )


@pytest.mark.parametrize(
    ("body", "said"),
    [
        (
            "set: {hazard.events.4: 7.0, hazard.events.04: 8.0}\n",  # 7.0 was lost
            "set: hazard.events.4 and hazard.events.04 are one key (hazard.events.4)",
        ),
        (
            "sweep: {grid: {hazard.events.4: [5.0, 6.0], hazard.events.0x4: [1.0, 2.0]}}\n",
            "sweep.grid: hazard.events.4 and hazard.events.0x4 are one key (hazard.events.4)",
        ),
        (
            "set: {hazard.events: {4: 9.5}}\nsweep: {grid: {hazard.events.04: [3.0, 9.0]}}\n",
            "set: hazard.events: holds hazard.events.4, which is swept too",
        ),
        (
            'set: {hazard.events: {"04": 9.5}}\nsweep: {grid: {hazard.events.4: [3.0, 9.0]}}\n',
            "set: hazard.events: holds hazard.events.4, which is swept too",
        ),
    ],
)
def test_a_year_is_one_key_however_it_is_spelled(tmp_path, capsys, body, said):
    """04 and 0x4 are year 4 to the runs (YAML reads them so): the checks compare text."""
    path = tmp_path / "exp.yaml"
    path.write_text(f"name: t\nbase: {SCENARIO}\n{body}", encoding="utf-8")
    assert main(["validate", str(path)]) == 2
    assert said in capsys.readouterr().err


def test_a_swept_year_is_labelled_as_the_runs_read_it(tmp_path):
    path = tmp_path / "exp.yaml"
    path.write_text(
        f"name: t\nbase: {SCENARIO}\nsweep: {{grid: {{hazard.events.0x4: [3.0, 9.0]}}}}\n"
    )
    experiment, *_ = load_experiment(path)
    assert experiment.swept_keys == ["hazard.events.4"]


@pytest.mark.parametrize(
    ("fixed", "sweep", "inner"),
    [
        ("{hazard.events.4: 9.5}", "{hazard.events: [{2: 8.0}, {3: 8.0}]}", "hazard.events.4"),
        ("{memory.decay_rate: 0.9}", "{memory: [{decay_rate: 0.8}, {decay_rate: 0.85}]}", None),
    ],
    ids=["year-in-a-swept-table", "key-in-a-swept-section"],
)
def test_a_set_key_inside_a_swept_table_or_section_value_is_refused(
    tmp_path, capsys, fixed, sweep, inner
):
    """Applied after set, each point's value replaced it: year 4 was gone from every run."""
    path = tmp_path / "exp.yaml"
    path.write_text(f"name: t\nbase: {SCENARIO}\nset: {fixed}\nsweep: {{grid: {sweep}}}\n")
    assert main(["validate", str(path)]) == 2
    inner = inner or "memory.decay_rate"
    outer = inner.rsplit(".", 1)[0]
    assert capsys.readouterr().err == (
        f"floodsim: error: {path}: set: {inner}: inside {outer}, which is swept (each point's "
        f"{outer} replaces it); fix it in set or sweep it, not both\n"
    )
    # A section's other keys are kept: values merge into a section key by key.
    path.write_text(
        f"name: t\nbase: {SCENARIO}\nset: {{memory.working_capacity: 5}}\n"
        "sweep: {grid: {memory: [{decay_rate: 0.8}, {decay_rate: 0.85}]}}\n"
    )
    assert main(["validate", str(path)]) == 0


@pytest.mark.parametrize("key", ["''", "a..b", "'x=1'", "memory."])
def test_a_swept_key_that_is_no_dotted_key_is_refused_in_the_sweeps_words(tmp_path, capsys, key):
    """It was refused as a --set flag: "sweep: '=1': expected KEY=VALUE with a dotted KEY"."""
    path = write_experiment(tmp_path, f"sweep: {{grid: {{{key}: [1]}}}}\n")
    assert main(["validate", str(path)]) == 2
    err = capsys.readouterr().err
    assert err.startswith(f"floodsim: error: {path}: sweep: grid: ")
    assert err.endswith(" is not a dotted config key (e.g. memory.decay_rate)\n")


def test_a_key_set_twice_dotted_and_in_its_section_is_refused(tmp_path, capsys):
    """One of the two would win without a word."""
    path = write_experiment(tmp_path, "sweep: {grid: {government.initial_subsidy: [0.2, 0.5]}}\n")
    fixed = "memory.decay_rate: 0.8, memory: {decay_rate: 0.9}, audit.level"
    path.write_text(path.read_text().replace("audit.level", fixed))
    assert main(["validate", str(path)]) == 2
    assert capsys.readouterr().err == (
        f"floodsim: error: {path}: set: memory.decay_rate: also given by memory; give it once\n"
    )
    # Other keys of the same section are no clash.
    path.write_text(
        path.read_text().replace("memory.decay_rate: 0.8", "memory.working_capacity: 5")
    )
    assert main(["validate", str(path)]) == 0


@pytest.mark.parametrize(
    ("values", "twice"),
    [("[0.8, 0.9, 0.8]", "0.8"), ("[1, 1.0]", "1.0"), ("[{3: 9.5}, {3: 9.5}]", "{3: 9.5}")],
)
def test_a_grid_value_listed_twice_is_refused(tmp_path, capsys, values, twice):
    """Two design points of one config and one set of seeds would pass for a spread of two."""
    key = "hazard.events" if "{" in values else "memory.decay_rate"
    path = write_experiment(tmp_path, f"sweep: {{grid: {{{key}: {values}}}}}\n")
    assert main(["validate", str(path)]) == 2
    assert capsys.readouterr().err.endswith(f"grid.{key}: {twice} is listed twice\n")


def test_a_latin_hypercube_range_is_checked_at_its_ends_whatever_the_samples(tmp_path, capsys):
    """Whether a sample lands past the limit depends on the seed: the ends decide."""
    for seed in range(1, 7):
        body = f"sweep: {{lhs: {{memory.decay_rate: [0.5, 1.5]}}, samples: 1}}\nseed: {seed}\n"
        path = write_experiment(tmp_path, body)
        path.write_text(path.read_text().replace("seed: 1\n", "", 1))
        assert main(["validate", str(path)]) == 2
        assert capsys.readouterr().err == (
            f"floodsim: error: {path}: sweep.lhs.memory.decay_rate: its high end 1.5 is "
            "refused: memory.decay_rate: Input should be less than or equal to 1 (got 1.5)\n"
        )


@pytest.mark.parametrize(
    "sweep",
    ["", "sweep: {lhs: {memory.decay_rate: [0.5, 0.9]}, samples: 2}\n"],
    ids=["grid", "lhs"],
)
def test_a_mistake_in_set_is_not_blamed_on_the_first_design_point_or_a_range(
    tmp_path, capsys, sweep
):
    path = write_experiment(tmp_path, sweep)
    path.write_text(path.read_text().replace("audit.level: minimal", "audit: {gzip: 1}"))
    assert main(["validate", str(path)]) == 2
    assert capsys.readouterr().err == (
        f"floodsim: error: {path}: audit.gzip: Input should be a valid boolean (got 1) "
        "(in set or the base config)\n"
    )


def test_a_key_swept_inside_another_swept_key_is_refused(tmp_path, capsys):
    body = "sweep: {grid: {memory.decay_rate: [0.8, 0.9], memory: [{decay_rate: 0.5}]}}\n"
    path = write_experiment(tmp_path, body)
    assert main(["batch", str(path), "--out", str(tmp_path / "out")]) == 2
    assert "memory.decay_rate: swept inside memory, which is swept too" in capsys.readouterr().err
    assert not (tmp_path / "out").exists()


def test_batches_sharing_a_dask_scheduler_get_their_own_runs(tmp_path, monkeypatch):
    """Run ids repeat across experiments; two batches on one scheduler must not swap runs."""
    distributed = pytest.importorskip("distributed")
    from simulation.experiments import executors

    def fake_run(task: RunTask) -> executors.RunOutcome:
        return executors.RunOutcome(task.run_id, "complete", None, task.out_root, 0.0)

    monkeypatch.setattr(executors, "execute_run", fake_run)
    with distributed.LocalCluster(n_workers=1, processes=False, dashboard_address=None) as cluster:
        first = executors.DaskExecutor(1, cluster.scheduler_address)
        second = executors.DaskExecutor(1, cluster.scheduler_address)
        try:
            ours = first.run([RunTask("p000-r000", {}, ".", "first")])
            theirs = second.run([RunTask("p000-r000", {}, ".", "second")])
            assert next(ours).run_dir == "first"  # its result stays held while `ours` is open
            assert next(theirs).run_dir == "second"
        finally:
            first.close()
            second.close()


def test_resume_reruns_runs_whose_registry_was_edited(tmp_path):
    registry = tmp_path / "registry.yaml"
    shutil.copyfile(DEFAULT.parent.parent / "skill_registry.yaml", registry)
    path = write_experiment(tmp_path, f"sweep: {{grid: {{registry: [{registry}]}}}}\n")
    run_experiment(path, tmp_path / "out", executor="serial")
    assert run_experiment(path, tmp_path / "out", executor="serial", resume=True).skipped == 2
    with registry.open("a", encoding="utf-8") as file:
        file.write("# edited after the first attempt\n")
    assert run_experiment(path, tmp_path / "out", executor="serial", resume=True).skipped == 0


@pytest.mark.parametrize(
    "sweep",
    ["{years: [3, 2]}", "{hazard.events: [{1: 9.5}, {2: 9.0}]}"],
    ids=["years", "events"],
)
def test_a_design_point_without_a_flood_in_its_years_is_warned_about(tmp_path, capsys, sweep):
    body = f"sweep: {{grid: {sweep}}}\n"
    path = write_experiment(tmp_path, body, replicates=2)
    events = "" if "events" in sweep else ", hazard.events: {3: 9.5}"
    text = path.read_text(encoding="utf-8").replace(
        "audit.level: minimal}", f"audit.level: minimal, hazard.source: scripted{events}}}"
    )
    path.write_text(text.replace("years: 3, ", "years: 1, " if "events" in sweep else ""), "utf-8")
    assert main(["validate", str(path)]) == 0
    err = capsys.readouterr().err
    year = 2 if "events" in sweep else 3
    last = 1 if "events" in sweep else 2
    span = "year" if last == 1 else f"{last} years"
    assert err.count("floodsim: warning: ") == 1  # the point that has its flood says nothing
    assert (
        f"{path}: hazard.events: 1 entry is for a year after the run's last year ({last}) and "
        f"will never be used (year {year}); none is within the run's {span}, so the run has no "
        "floods"
    ) in err


def test_a_design_point_warning_names_its_point_once(tmp_path, capsys):
    # Only the point whose flood is past the last year has none; its 2 replicates warn once.
    body = "sweep: {grid: {hazard.events: [{1: 9.5}, {40: 9.5}]}}\n"
    path = write_experiment(tmp_path, body, replicates=2)
    text = path.read_text(encoding="utf-8")
    path.write_text(text.replace("minimal}", "minimal, hazard.source: scripted}"), "utf-8")
    assert main(["validate", str(path)]) == 0
    warned = [line for line in capsys.readouterr().err.splitlines() if "warning" in line]
    flood_free = (
        f"floodsim: warning: {path}: hazard.events: 1 entry is for a year after the run's last "
        "year (3) and will never be used (year 40); none is within the run's 3 years, so the run "
        "has no floods [design point 1: hazard.events={40: 9.5}]"
    )
    assert warned == [flood_free]


@pytest.mark.parametrize(
    ("sweep", "point", "ignored"),
    [
        ("{decision.policy: [pmt, llm]}", "0: decision.policy='pmt'", "decision.llm.temperature"),
        # No other key of the files and years checked once tells these points apart.
        ("{decision.llm_share: [1.0, 0.5]}", "1: decision.llm_share=0.5", "decision.llm_share"),
    ],
    ids=["policy", "llm_share"],
)
def test_an_ignored_key_warning_names_the_points_that_ignore_it(tmp_path, sweep, point, ignored):
    path = write_experiment(tmp_path, f"sweep: {{grid: {sweep}}}\n", replicates=2)
    if "policy" in sweep:
        text = path.read_text(encoding="utf-8")
        path.write_text(
            text.replace("minimal}", "minimal, decision.llm.temperature: 0.5}"), "utf-8"
        )
    with pytest.warns(IgnoredKeyWarning) as caught:
        plan_runs(*load_experiment(path)[:2], str(path))
    because = "is ignored because decision.policy is pmt, not llm"
    assert [str(w.message) for w in caught] == [
        f"{path}: {ignored} {because} [design point {point}]"
    ]


@pytest.mark.parametrize("body", ["", "executor: {kind: serial}\n"], ids=["sweep", "no-sweep"])
def test_a_warning_every_design_point_draws_is_not_labelled(tmp_path, body):
    # As without a sweep: it is about the experiment's fixed settings, not about one point.
    path = write_experiment(tmp_path, body, replicates=2)
    text = path.read_text(encoding="utf-8")
    path.write_text(text.replace("minimal}", "minimal, decision.llm.temperature: 0.5}"), "utf-8")
    with pytest.warns(IgnoredKeyWarning) as caught:
        plan_runs(*load_experiment(path)[:2], str(path))
    assert [str(w.message) for w in caught] == [
        f"{path}: decision.llm.temperature is ignored because decision.policy is pmt, not llm"
    ]


@pytest.mark.parametrize("executor", ["serial", "process"])
def test_a_run_warning_from_a_worker_is_one_floodsim_line(tmp_path, capfd, executor):
    # Rows after a household relocated are known only as the run ends, in the worker.
    rows = "".join(f"H0000{n},1,relocate\nH0000{n},2,do_nothing\n" for n in range(1, 5))
    path = scripted_experiment(tmp_path, rows, "executor: {kind: process, workers: 2}\n")
    argv = ["batch", str(path), "--out", str(tmp_path / "out"), "--executor", executor, "--quiet"]
    assert main(argv) == 0
    err = capfd.readouterr().err
    warned = [line for line in err.splitlines() if "decision.script" in line]
    assert warned  # the renters among H00001-H00004 can afford to move
    for run_id in ("p000-r000", "p000-r001"):
        mine = [line for line in warned if line.startswith(f"floodsim: warning: {run_id}: ")]
        assert len(mine) <= 1
    assert all(line.startswith("floodsim: warning: p000-r00") for line in warned)
    assert "IgnoredScriptRowsWarning" not in err


@pytest.mark.parametrize("executor", ["serial", "process"])
def test_each_batch_run_whose_decisions_fell_back_says_so_once(tmp_path, capfd, executor):
    # Insurance is for owners only: the renters among the 30 households propose it invalidly.
    rows = "".join(f"H{n:05d},1,buy_insurance\n" for n in range(1, 31))
    path = scripted_experiment(tmp_path, rows, "sweep: {grid: {memory.decay_rate: [0.9]}}\n")
    out = tmp_path / "out"
    argv = ["batch", str(path), "--out", str(out), "--executor", executor, "--quiet"]
    assert main(argv) == 0
    warned = sorted(line for line in capfd.readouterr().err.splitlines() if "fell back" in line)
    assert len(warned) == 2  # once per run
    for line, run_id in zip(warned, ("p000-r000", "p000-r001"), strict=True):
        table = pd.read_csv(out / "runs" / run_id / "model_years.csv")
        fallbacks = table["invalid_proposals"].sum()
        decisions = table.filter(like="decisions_").to_numpy().sum()
        assert fallbacks > 0
        # The words of floodsim run, after the run's id.
        counted = f"{fallbacks} of {decisions} decisions ("
        assert line.startswith(f"floodsim: warning: {run_id}: {counted}")
        assert line.endswith(
            ") fell back to do_nothing: invalid proposals or failed language-model calls (see the "
            "traces' validation and llm_calls)"
        )


def test_a_swept_event_template_is_checked_before_running(tmp_path, capsys):
    path = write_experiment(
        tmp_path,
        "sweep: {grid: {events.flood_major.template: ['Year {year}', 'Year {yaer}']}}\n",
    )
    assert main(["batch", str(path), "--out", str(tmp_path / "out"), "--quiet"]) == 2
    err = capsys.readouterr().err
    assert "events.flood_major.template: unknown placeholder 'yaer'" in err
    assert "[design point 1: " in err
    assert not (tmp_path / "out").exists()


def test_listed_audit_ids_are_checked_against_the_runs_population(tmp_path):
    body = "sweep: {grid: {memory.decay_rate: [0.9]}}\n"
    good = write_experiment(tmp_path / "good", body)
    text = good.read_text(encoding="utf-8").replace(
        "audit.level: minimal", "audit.sample: [H00025]"
    )
    good.write_text(text, encoding="utf-8")
    assert len(plan_runs(*load_experiment(good)[:2], str(good))) == 2  # 30 households
    bad = write_experiment(tmp_path / "bad", body)
    bad.write_text(text.replace("H00025", "H00031"), encoding="utf-8")
    with pytest.raises(ConfigError, match=r"audit\.sample: 'H00031' is not a household"):
        plan_runs(*load_experiment(bad)[:2], str(bad))


def test_a_decision_table_is_checked_against_the_runs_population(tmp_path):
    """Each table of a sweep over tables, against the 30 households of the runs."""
    tables = []
    for name, last in (("first", "H00030"), ("second", "H00029")):
        table = tmp_path / f"{name}.csv"
        table.write_text(f"agent_id,year,skill_id\n{last},1,do_nothing\n", encoding="utf-8")
        tables.append(str(table))
    body = f"sweep: {{grid: {{decision.script: [{', '.join(tables)}]}}}}\n"
    good = write_experiment(tmp_path, body, replicates=1)
    scripted = "audit.level: minimal, decision.policy: scripted"
    good.write_text(good.read_text().replace("audit.level: minimal", scripted))
    assert len(plan_runs(*load_experiment(good)[:2], str(good))) == 2
    (tmp_path / "second.csv").write_text("agent_id,year,skill_id\nH00031,1,do_nothing\n")
    unknown = r"second\.csv: row 2, column agent_id: 'H00031' is not a household.*design point 1"
    with pytest.raises(ConfigError, match=unknown):
        plan_runs(*load_experiment(good)[:2], str(good))


def test_a_latin_hypercube_over_an_integer_key_is_refused_by_name(tmp_path):
    path = write_experiment(tmp_path, "sweep: {lhs: {years: [2, 4]}, samples: 3}\n")
    path.write_text(path.read_text(encoding="utf-8").replace(" years: 3,", ""))
    with pytest.raises(ConfigError, match=r"sweep\.lhs\.years: an integer key"):
        plan_runs(*load_experiment(path)[:2], str(path))


def test_a_set_key_below_a_value_is_named_as_the_files_set(tmp_path):
    path = write_experiment(tmp_path)
    path.write_text(path.read_text(encoding="utf-8").replace("years: 3", "years.x: 3"))
    with pytest.raises(ConfigError, match=r"exp\.yaml: set\.years\.x: years is not a section"):
        load_experiment(path)


def test_invalid_experiments_fail_before_running(tmp_path, capsys):
    bad_key = write_experiment(tmp_path / "a", "sweep: {grid: {memory.decay_rat: [0.9]}}\n")
    with pytest.raises(ConfigError, match=r"exp\.yaml: memory\.decay_rat: unknown key"):
        plan_runs(*load_experiment(bad_key)[:2], str(bad_key))
    bad_value = write_experiment(tmp_path / "b", "sweep: {grid: {memory.decay_rate: [0.9, 1.5]}}\n")
    code = main(["batch", str(bad_value), "--out", str(tmp_path / "out")])
    err = capsys.readouterr().err
    assert code == 2
    assert "memory.decay_rate" in err
    assert "1.5" in err
    assert not (tmp_path / "out").exists()
    (tmp_path / "c").mkdir()
    (tmp_path / "c" / "exp.yaml").write_text("name: x\nbase: d.yaml\nreplicates: 0\n")
    assert main(["validate", str(tmp_path / "c" / "exp.yaml")]) == 2
    assert "replicates" in capsys.readouterr().err


@pytest.mark.parametrize(
    ("options", "key", "shown"),
    [
        (["--workers", "0"], "workers", "got 0"),
        (["--workers", "-1"], "workers", "got -1"),
        (["--executor", "dask", "--workers", "-1"], "workers", "got -1"),
        (["--workers", "1025"], "workers", "less than or equal to 1024"),
        (["--workers", "99999999999999999999999"], "workers", "less than or equal to 1024"),
        (["--executor", "dask", "--address", "notanaddress"], "address", "missing port"),
        (["--address", "tcp://127.0.0.1:8786"], "address", "kind dask"),
    ],
)
def test_bad_executor_options_are_refused_before_anything_runs(
    tmp_path, capsys, options, key, shown
):
    path = write_experiment(tmp_path)
    code = main(["batch", str(path), "--out", str(tmp_path / "out"), "--quiet", *options])
    err = capsys.readouterr().err
    assert code == 2
    assert err.count("\n") == 1
    assert f"executor as overridden: {key}:" in err
    assert shown in err
    assert not (tmp_path / "out").exists()


def test_an_unreachable_dask_scheduler_is_named_and_leaves_no_run_records(tmp_path, capsys):
    dask = pytest.importorskip("dask")
    with socket.socket() as probe:  # a port nothing listens on
        probe.bind(("127.0.0.1", 0))
        address = f"tcp://127.0.0.1:{probe.getsockname()[1]}"
    path = write_experiment(tmp_path, f"executor: {{kind: dask, address: '{address}'}}\n")
    with dask.config.set({"distributed.comm.timeouts.connect": "1s"}):
        code = main(["batch", str(path), "--out", str(tmp_path / "out"), "--quiet"])
    err = capsys.readouterr().err
    assert code == 1
    assert f"cannot reach the Dask scheduler at {address}" in err
    assert not (tmp_path / "out").exists()


def test_another_executor_kind_drops_the_files_dask_address(tmp_path):
    path = write_experiment(
        tmp_path, "executor: {kind: dask, address: 'tcp://scheduler:8786'}\n", replicates=1
    )
    result = run_experiment(path, tmp_path / "out", executor="serial", progress=False)
    assert result.failed == 0
    executor = state(result.out_dir)["experiment"]["executor"]
    assert executor == {"kind": "serial", "workers": 2, "address": None}


@pytest.mark.parametrize(
    "name", ["decay_sweep", "subsidy_sweep", "premium_policy", "premium_repricing"]
)
def test_shipped_experiments_validate(name, capsys):
    assert main(["validate", str(EXPERIMENTS / f"{name}.yaml")]) == 0
    assert "ok (experiment" in capsys.readouterr().out


def test_an_experiment_with_only_set_is_validated_as_an_experiment(tmp_path, capsys):
    """`set:` alone makes an experiment (one run of the changed base), for validate as for batch."""
    path = tmp_path / "one_run.yaml"
    head = f"name: one_run\nbase: {DEFAULT}\nset: {{households.count: 20, years: 2}}\n"
    path.write_text(head, encoding="utf-8")
    assert main(["validate", str(path)]) == 0
    assert "ok (experiment one_run: 1 run = 1 design point x 1 replicate," in (
        capsys.readouterr().out
    )  # "1 runs" before
    path.write_text(head + "replicate: 2\n", encoding="utf-8")  # typo of `replicates`
    assert main(["validate", str(path)]) == 2
    assert capsys.readouterr().err.strip().endswith("one_run.yaml: replicate: unknown key")


def test_a_worker_keeps_no_model_after_its_runs(tmp_path):
    """Batch workers run model after model; none may outlive its run (Mesa 3.3 kept them)."""
    import gc

    import mesa
    from mesa.discrete_space import Cell

    from simulation.model import FloodAdaptationModel

    def models() -> tuple[int, int]:
        gc.collect()
        objects = gc.get_objects()
        return (
            sum(isinstance(o, FloodAdaptationModel) for o in objects),
            sum(isinstance(o, Cell) for o in objects),
        )

    before, counters = models(), len(mesa.Agent._ids)
    config, base = load_config(DEFAULT, ["households.count=20", "years=2", "audit.level=off"])
    for n in range(3):
        task = RunTask(f"leak-{n}", config.model_dump(mode="json"), str(base), str(tmp_path))
        assert execute_run(task).status == "complete"
    assert models() == before
    assert len(mesa.Agent._ids) == counters


@pytest.mark.parametrize("executor", ["serial", "process"])
def test_a_config_warning_is_printed_once_per_experiment(tmp_path, capfd, executor):
    # capfd: process workers write to the file descriptor, not to this process's sys.stderr.
    body = (
        "sweep: {grid: {memory.decay_rate: [0.8, 0.95]}}\n"
        "executor: {kind: process, workers: 2}\n"
        "set: {households.count: 30, years: 3, audit.level: minimal, hazard.source: scripted, "
        "hazard.events: {10: 9.5}}\n"
    )
    text = write_experiment(tmp_path, body).read_text(encoding="utf-8")
    path = tmp_path / "exp.yaml"
    # One set: mapping (the helper's own is replaced by the body's).
    path.write_text(
        text.replace("set: {households.count: 30, years: 3, audit.level: minimal}\n", ""), "utf-8"
    )
    argv = ["batch", str(path), "--out", str(tmp_path / "out"), "--executor", executor, "--quiet"]
    assert main(argv) == 0
    err = capfd.readouterr().err
    assert err.count("hazard.events: 1 entry is for a year after the run's last year (3)") == 1
    assert "ConfigWarning" not in err


def test_an_experiment_folder_given_for_a_run_says_where_its_runs_are(serial_result, capsys):
    """`floodsim report` and `audit summarize` take an experiment folder too
    (tests/test_experiment_report.py, tests/test_audit_replay.py); `audit memory` needs a run."""
    out = serial_result.out_dir
    assert main(["audit", "memory", str(out), "--agent", "H00001", "--year", "1"]) == 2
    err = capsys.readouterr().err
    assert (
        f"{out}: an experiment folder, not a run directory: its runs are in {out / 'runs'}" in err
    )


def test_run_readers_refuse_an_experiment_folder_rather_than_find_nothing(serial_result):
    """An unaudited run has no traces and gives empty tables; an experiment folder is an error."""
    with pytest.raises(RunDirError, match="an experiment folder"):
        metrics.tp_distribution(serial_result.out_dir)
    with pytest.raises(RunDirError, match="an experiment folder"):
        metrics.flood_events(serial_result.out_dir)
    with pytest.raises(RunDirError, match="an experiment folder"):
        metrics.read_stream_frame(serial_result.out_dir, "household_traces")


def test_workers_given_for_a_serial_executor_are_said_to_be_unused(tmp_path, capsys):
    path = write_experiment(tmp_path, replicates=1)  # the file's executor: serial (the default)
    assert main(["batch", str(path), "--out", str(tmp_path / "out"), "--workers", "3"]) == 0
    assert (
        f"floodsim: warning: {path}: --workers 3 is not used: the executor is serial (one run at "
        "a time)" in capsys.readouterr().err
    )


def small_experiment(folder: Path, name: str, replicates: int) -> Path:
    """An experiment of 2 design points x ``replicates`` runs of 10 households for 2 years."""
    folder.mkdir(parents=True, exist_ok=True)
    path = folder / f"{name}.yaml"
    path.write_text(
        f"name: {name}\nbase: {DEFAULT}\n"
        "set: {households.count: 10, years: 2, audit.level: minimal}\n"
        "sweep: {grid: {memory.decay_rate: [0.8, 0.95]}}\n"
        f"replicates: {replicates}\nseed: 1\nexecutor: {{kind: serial}}\n",
        encoding="utf-8",
    )
    return path


def batch_cli(capsys, path: Path, out: Path, *flags: str) -> tuple[int, str]:
    code = main(["batch", str(path), "--out", str(out), "--quiet", *flags])
    return code, capsys.readouterr().err


def test_a_resume_keeping_runs_other_code_made_warns(tmp_path, capsys):
    """Their config and inputs are this attempt's, but a changed model may give other results."""
    out = tmp_path / "out"
    path = small_experiment(tmp_path, "kept", replicates=1)
    assert batch_cli(capsys, path, out)[0] == 0
    code, err = batch_cli(capsys, path, out, "--resume")
    assert (code, err) == (0, "")  # the same code: nothing to say
    first = out / "runs" / "p000-r000" / "manifest.json"
    manifest = orjson.loads(first.read_bytes())
    manifest["versions"]["code"] = "0" * 64
    first.write_bytes(orjson.dumps(manifest))
    code, err = batch_cli(capsys, path, out, "--resume")
    assert code == 0
    assert err == (
        f"floodsim: warning: {out}: --resume keeps 1 complete run(s) that other floodsim code "
        "made (p000-r000): a changed model may give other results than the runs made now "
        "(--overwrite runs every one again)\n"
    )


def test_an_output_folder_with_another_experiment_is_refused_unless_overwritten(tmp_path, capsys):
    out = tmp_path / "out"
    first = small_experiment(tmp_path, "first", replicates=2)
    assert batch_cli(capsys, first, out)[0] == 0
    before = {p: p.read_bytes() for p in sorted(out.rglob("*")) if p.is_file()}
    (out / "notes.txt").write_text("mine\n", encoding="utf-8")
    (out / "behaviour.csv").write_text("checked the first experiment\n", encoding="utf-8")
    second = small_experiment(tmp_path, "second", replicates=1)
    for flags in ((), ("--resume",)):
        code, err = batch_cli(capsys, second, out, *flags)
        assert code == 2
        assert err.startswith(f"floodsim: error: {out}: holds the results of experiment 'first' ")
        assert err.endswith("give another --out, or --overwrite to replace them\n")
        assert err.count("\n") == 1
    assert "not of 'second': --resume continues only the same experiment" in err
    # Nothing was touched.
    assert {p: p.read_bytes() for p in before} == before
    assert sorted(p.name for p in (out / "runs").iterdir()) == [
        "p000-r000",
        "p000-r001",
        "p001-r000",
        "p001-r001",
    ]
    code, err = batch_cli(capsys, second, out, "--overwrite")
    assert code == 0, err
    assert sorted(p.name for p in (out / "runs").iterdir()) == ["p000-r000", "p001-r000"]
    assert state(out)["experiment"]["name"] == "second"
    assert not (out / "behaviour.csv").exists()  # it checked the results now replaced
    assert (out / "notes.txt").read_text(encoding="utf-8") == "mine\n"  # not floodsim's


def test_a_refusal_counts_a_single_run_in_the_singular(tmp_path, capsys):
    path = tmp_path / "one.yaml"
    path.write_text(
        f"name: one\nbase: {DEFAULT}\nset: {{households.count: 5, years: 1}}\n", encoding="utf-8"
    )
    out = tmp_path / "out"
    assert batch_cli(capsys, path, out)[0] == 0
    code, err = batch_cli(capsys, path, out)
    assert code == 2
    assert "holds the results of experiment 'one' (1 run, 1 complete); " in err


def test_the_same_experiment_again_needs_resume_or_overwrite(tmp_path, capsys):
    out = tmp_path / "out"
    path = small_experiment(tmp_path, "same", replicates=1)
    assert batch_cli(capsys, path, out)[0] == 0
    code, err = batch_cli(capsys, path, out)
    assert code == 2
    assert err == (
        f"floodsim: error: {out}: holds the results of experiment 'same' (2 runs, 2 complete); "
        "add --resume to keep its complete runs and run the rest, or --overwrite to replace "
        "them\n"
    )
    kept = (out / "runs" / "p000-r000" / "manifest.json").read_bytes()
    code, err = batch_cli(capsys, path, out, "--resume")
    assert code == 0, err
    assert (out / "runs" / "p000-r000" / "manifest.json").read_bytes() == kept
    # Beside the kept run: gone once the run is done again. (Its manifest may come out the
    # same bytes: 10 households for 2 years can start, end and last as long, to the
    # millisecond, as the first time.)
    sentinel = out / "runs" / "p000-r000" / "sentinel.txt"
    sentinel.write_text("written after the first attempt", encoding="utf-8")
    assert main(["report", str(out)]) == 0  # of the runs replaced next: it goes with them
    code, err = batch_cli(capsys, path, out, "--overwrite")
    assert code == 0, err
    assert not sentinel.exists()
    assert not (out / "report").exists()
    manifest = orjson.loads((out / "runs" / "p000-r000" / "manifest.json").read_bytes())
    assert manifest["status"] == "complete"
    with pytest.raises(SystemExit) as raised:
        main(["batch", str(path), "--out", str(out), "--resume", "--overwrite"])
    assert raised.value.code == 2
    assert "not allowed with argument" in capsys.readouterr().err


def test_resume_with_fewer_replicates_removes_the_runs_the_experiment_no_longer_has(
    tmp_path, capsys
):
    out = tmp_path / "out"
    assert batch_cli(capsys, small_experiment(tmp_path, "shrinks", replicates=2), out)[0] == 0
    kept = (out / "runs" / "p001-r000" / "manifest.json").read_bytes()
    fewer = small_experiment(tmp_path / "edited", "shrinks", replicates=1)
    code, err = batch_cli(capsys, fewer, out, "--resume")
    assert code == 0, err
    assert sorted(p.name for p in (out / "runs").iterdir()) == ["p000-r000", "p001-r000"]
    assert (out / "runs" / "p001-r000" / "manifest.json").read_bytes() == kept
    assert [r["run_id"] for r in state(out)["runs"]] == ["p000-r000", "p001-r000"]


def test_a_folder_with_runs_but_no_readable_experiment_json_is_refused(tmp_path, capsys):
    out = tmp_path / "out"
    (out / "runs" / "p000-r000").mkdir(parents=True)
    path = small_experiment(tmp_path, "fresh", replicates=1)
    code, err = batch_cli(capsys, path, out, "--resume")
    assert code == 2
    assert err == (
        f"floodsim: error: {out}: holds batch results (run folders in runs/ but no "
        "experiment.json); give another --out, or --overwrite to replace them\n"
    )
    (out / "experiment.json").write_text("{not json", encoding="utf-8")
    code, err = batch_cli(capsys, path, out)
    assert code == 2
    assert "(an experiment.json that cannot be read)" in err
    assert batch_cli(capsys, path, out, "--overwrite")[0] == 0
    assert state(out)["experiment"]["name"] == "fresh"


@pytest.mark.parametrize("flags", [(), ("--resume",), ("--overwrite",)])
def test_a_calibrations_folder_given_as_the_output_folder_is_refused(tmp_path, capsys, flags):
    """--overwrite would remove runs/ and leave best.yaml describing runs no longer there."""
    out = tmp_path / "calibration"
    out.mkdir()
    for name in ("best.yaml", "evaluations.csv"):
        (out / name).write_text(f"{name} of a calibration\n", encoding="utf-8")
    code, err = batch_cli(capsys, small_experiment(tmp_path, "into_a_fit", 1), out, *flags)
    assert code == 2
    assert err == (
        f"floodsim: error: {out}: is a calibration's folder (it holds best.yaml and "
        "evaluations.csv), not a batch experiment's folder; give another --out\n"
    )
    assert sorted(p.name for p in out.iterdir()) == ["best.yaml", "evaluations.csv"]


@pytest.mark.parametrize("flags", [(), ("--resume",), ("--overwrite",)])
def test_a_run_directory_given_as_the_output_folder_is_refused(
    serial_result, tmp_path, capsys, flags
):
    """A run directory never becomes an experiment's folder too, whatever the flags."""
    run_dir = tmp_path / "run"
    shutil.copytree(serial_result.out_dir / "runs" / "p000-r000", run_dir)
    (run_dir / "behaviour.csv").write_text("checked this run\n", encoding="utf-8")
    before = {p: p.read_bytes() for p in sorted(run_dir.rglob("*")) if p.is_file()}
    code, err = batch_cli(capsys, small_experiment(tmp_path, "into_a_run", 1), run_dir, *flags)
    assert code == 2
    assert err == (
        f"floodsim: error: {run_dir}: is a run directory (it holds manifest.json and "
        "config.resolved.yaml), not a batch experiment's folder; give another --out\n"
    )
    assert {p: p.read_bytes() for p in sorted(run_dir.rglob("*")) if p.is_file()} == before
    # Only its resolved config left (a run stopped before its manifest): still a run directory.
    (run_dir / "manifest.json").unlink()
    code, err = batch_cli(capsys, small_experiment(tmp_path, "into_a_run", 1), run_dir, *flags)
    assert code == 2
    assert "is a run directory (it holds config.resolved.yaml)" in err
    assert not (run_dir / "experiment.json").exists()


def test_a_resume_that_replaces_or_removes_runs_removes_the_check_and_report_of_the_old_ones(
    tmp_path, capsys
):
    out = tmp_path / "out"
    path = small_experiment(tmp_path, "reseeded", replicates=2)
    assert batch_cli(capsys, path, out)[0] == 0
    derived = ("behaviour.csv", "behaviour.png", "report/index.html")

    def check_behaviour() -> None:  # what check-behaviour and report leave, and a user's file
        (out / "report").mkdir(exist_ok=True)
        for name in (*derived, "notes.txt"):
            (out / name).write_text(f"{name} of the runs so far\n", encoding="utf-8")

    check_behaviour()
    # Nothing to do: the check still holds.
    assert batch_cli(capsys, path, out, "--resume")[0] == 0
    assert all((out / name).is_file() for name in derived)
    # A replicate dropped: no run reruns, one is removed.
    fewer = small_experiment(tmp_path / "fewer", "reseeded", replicates=1)
    assert batch_cli(capsys, fewer, out, "--resume")[0] == 0
    assert not any((out / name).exists() for name in derived)
    assert not (out / "report").exists()
    # Another seed: every run reruns.
    check_behaviour()
    seeds = {r["seed"] for r in state(out)["runs"]}
    reseeded = path.read_text(encoding="utf-8").replace("seed: 1", "seed: 2")
    path.write_text(reseeded, encoding="utf-8")
    code, err = batch_cli(capsys, path, out, "--resume")
    assert code == 0, err
    assert seeds.isdisjoint(r["seed"] for r in state(out)["runs"])
    assert not any((out / name).exists() for name in derived)
    assert (out / "notes.txt").read_text(encoding="utf-8") == "notes.txt of the runs so far\n"


@pytest.mark.parametrize(
    ("executor", "workers", "spare_core"),
    [("serial", 2, True), ("process", 1, True), ("process", 2, False)],
)
def test_runs_side_by_side_write_their_audits_on_their_own_thread(
    tmp_path, monkeypatch, executor, workers, spare_core
):
    from simulation import runner
    from simulation.experiments import batch
    from simulation.experiments.executors import SerialExecutor

    given: list[bool] = []
    real = runner.run_simulation

    def recording(config, *args, **kwargs):
        given.append(kwargs["spare_core"])
        return real(config, *args, **kwargs)

    monkeypatch.setattr(runner, "run_simulation", recording)
    # The runs go one by one in this process, but are planned for the executor named.
    monkeypatch.setattr(batch, "make_executor", lambda *args: SerialExecutor())
    path = write_experiment(tmp_path, replicates=1)
    run_experiment(path, tmp_path / "out", executor=executor, workers=workers, progress=False)
    assert given == [spare_core, spare_core]


@pytest.mark.parametrize(("executor", "workers", "started"), [("process", 5, 1), ("dask", 1024, 1)])
def test_a_pool_starts_no_more_workers_than_the_experiment_has_runs(
    tmp_path, monkeypatch, executor, workers, started
):
    from simulation.experiments import batch
    from simulation.experiments.executors import SerialExecutor

    asked: list[tuple] = []

    def recording(*args):
        asked.append(args)
        return SerialExecutor()

    monkeypatch.setattr(batch, "make_executor", recording)
    path = write_experiment(tmp_path, "", replicates=1)
    text = path.read_text(encoding="utf-8").replace("[0.8, 0.95]", "[0.8]")
    path.write_text(text, encoding="utf-8")
    result = run_experiment(
        path, tmp_path / "out", executor=executor, workers=workers, progress=False
    )
    assert asked == [(executor, started, None)]
    assert [run["status"] for run in result.runs] == ["complete"]


def test_a_folder_another_batch_is_writing_is_called_busy_not_holding_results(tmp_path, capsys):
    """Its half-written results would be refused with advice (--resume) the lock refuses too."""
    path = write_experiment(tmp_path, replicates=1)
    out = tmp_path / "out"
    run_experiment(path, out, progress=False)
    with hold_folder(out):  # another batch writing it again
        code = main(["batch", str(path), "--out", str(out), "--quiet"])
    assert code == 2
    assert capsys.readouterr().err == (
        f"floodsim: error: {out}: another floodsim batch or calibration is writing this "
        "folder; wait for it to end, or give another --out\n"
    )


def test_the_combined_metrics_are_never_left_cut_short(tmp_path, monkeypatch):
    """A kill while model_years.parquet is written leaves none, not an unreadable file."""
    path = write_experiment(tmp_path, replicates=1)
    out = tmp_path / "out"
    real = pd.DataFrame.to_parquet

    def killed_midway(frame: pd.DataFrame, target: Path, **options: object) -> None:
        Path(target).write_bytes(b"PAR1")  # the start of a file, and then the kill
        raise KeyboardInterrupt

    monkeypatch.setattr(pd.DataFrame, "to_parquet", killed_midway)
    with pytest.raises(KeyboardInterrupt):
        run_experiment(path, out, progress=False)
    assert not (out / "model_years.parquet").exists()
    monkeypatch.setattr(pd.DataFrame, "to_parquet", real)
    run_experiment(path, out, progress=False, resume=True)
    assert len(pd.read_parquet(out / "model_years.parquet")) == 2 * 3
    assert not (out / ".model_years.parquet.tmp").exists()


def test_a_resume_that_adds_runs_removes_the_earlier_combined_metrics_first(tmp_path):
    """Stopped before its end, it would leave them to read as the whole experiment's."""
    path = write_experiment(tmp_path, replicates=1)
    out = tmp_path / "out"
    run_experiment(path, out, progress=False)
    shutil.rmtree(out / "runs" / "p000-r000")  # as if it had not finished
    seen = []

    def interrupted(task: RunTask) -> None:
        seen.append((out / "model_years.parquet").exists())
        raise KeyboardInterrupt

    with pytest.MonkeyPatch.context() as patch:
        patch.setattr(executors, "execute_run", interrupted)
        with pytest.raises(KeyboardInterrupt):
            run_experiment(path, out, executor="serial", progress=False, resume=True)
    assert seen == [False]
    assert not (out / "model_years.parquet").exists()


def test_combined_metrics_the_disk_cannot_hold_leave_no_draft_and_name_the_file(
    tmp_path, monkeypatch
):
    path = write_experiment(tmp_path, replicates=1)
    out = tmp_path / "out"

    def full(frame: pd.DataFrame, target: Path, **options: object) -> None:
        Path(target).write_bytes(b"PAR1")
        raise OSError(28, "No space left on device")

    monkeypatch.setattr(pd.DataFrame, "to_parquet", full)
    with pytest.raises(OSError, match="No space left on device") as info:
        run_experiment(path, out, progress=False)
    assert info.value.filename == str(out / "model_years.parquet")
    assert not (out / ".model_years.parquet.tmp").exists()


def test_a_folder_another_batch_is_writing_is_refused_before_anything_runs(tmp_path, capsys):
    path = write_experiment(tmp_path, replicates=1)
    out = tmp_path / "out"
    out.mkdir()
    with hold_folder(out):  # as the other batch's process holds it while its runs go on
        code = main(["batch", str(path), "--out", str(out), "--quiet", "--resume"])
    assert code == 2
    assert capsys.readouterr().err == (
        f"floodsim: error: {out}: another floodsim batch or calibration is writing this "
        "folder; wait for it to end, or give another --out\n"
    )
    assert not any(out.iterdir())


def test_an_audit_level_off_that_yaml_read_as_false_is_off_in_a_sweep_and_in_set(tmp_path):
    """A grid of [off, minimal] was a column of a bool and a string no table could combine."""
    path = write_experiment(tmp_path, "sweep: {grid: {audit.level: [off, minimal]}}\n")
    path.write_text(
        path.read_text(encoding="utf-8").replace(", audit.level: minimal}", "}"),
        encoding="utf-8",
    )
    result = run_experiment(path, tmp_path / "out", executor="serial", progress=False)
    combined = pd.read_parquet(result.out_dir / "model_years.parquet")
    assert sorted(set(combined["audit.level"])) == ["minimal", "off"]
    fixed = write_experiment(tmp_path / "fixed", "")
    fixed.write_text(
        fixed.read_text(encoding="utf-8").replace("audit.level: minimal", "audit.level: off"),
        encoding="utf-8",
    )
    experiment, _, _ = load_experiment(fixed)
    assert experiment.set["audit.level"] == "off"
    nested = tmp_path / "nested.yaml"
    nested.write_text(
        fixed.read_text(encoding="utf-8").replace("audit.level: off", "audit: {level: off}"),
        encoding="utf-8",
    )
    assert load_experiment(nested)[0].set["audit"] == {"level": "off"}


# --- rules no earlier test held (helper 82's mutants) ---------------------------------------


def test_replicate_seeds_are_the_first_uint32_word_of_each_seed_sequence_child():
    """Published seeds must name the same runs in every release."""
    expected = [
        int(child.generate_state(1, dtype=np.uint32)[0])
        for child in np.random.SeedSequence(1).spawn(3)
    ]
    assert replicate_seeds(1, 3) == expected == [1641411168, 1454127163, 2749604155]


def test_the_lhs_design_is_scipys_latin_hypercube_seeded_with_the_experiment_seed():
    sweep = SweepConfig.model_validate(
        {"lhs": {"a.x": [3.0, 8.0], "b.y": [2.0, 6.0]}, "samples": 4}
    )
    sampler = qmc.LatinHypercube(d=2, seed=np.random.default_rng(7))
    expected = qmc.scale(sampler.random(4), [3.0, 2.0], [8.0, 6.0])
    got = [[point["a.x"], point["b.y"]] for point in design_points(sweep, 7)]
    np.testing.assert_allclose(got, expected)


def test_the_lhs_design_puts_one_sample_in_each_stratum_of_every_range():
    sweep = SweepConfig.model_validate(
        {"lhs": {"a.x": [0.0, 10.0], "b.y": [-1.0, 1.0]}, "samples": 10}
    )
    for seed in range(5):
        points = design_points(sweep, seed)
        for key, (low, high) in sweep.lhs.items():
            strata = sorted(int((point[key] - low) / (high - low) * 10) for point in points)
            assert strata == list(range(10)), (seed, key)


def test_a_sweep_counts_the_grid_product_times_the_samples():
    both = {"grid": {"a.x": [1, 2, 3]}, "lhs": {"b.y": [0.0, 1.0]}, "samples": 4}
    assert SweepConfig.model_validate(both).points == 12
    assert SweepConfig.model_validate({"lhs": {"b.y": [0.0, 1.0]}, "samples": 4}).points == 4
    assert SweepConfig.model_validate({}).points == 1


@pytest.mark.parametrize(
    ("sweep", "said"),
    [
        ({"lhs": {"a.x": [5.0, 5.0]}, "samples": 2}, r"low \(5.0\) must be below high \(5.0\)"),
        ({"lhs": {"a.x": [0.0, 1.0]}}, "samples: must be >= 1 when lhs ranges are given"),
        (
            {"grid": {"a.x": [1.0, 2.0]}, "lhs": {"a.x": [0.0, 3.0]}, "samples": 2},
            "a.x: swept by both grid and lhs",
        ),
    ],
)
def test_a_sweep_that_cannot_be_run_as_labelled_is_refused(sweep, said):
    with pytest.raises(ValidationError, match=said):
        SweepConfig.model_validate(sweep)


# --- design rules no earlier test held (helper 86's mutants) -------------------------------


def _scenario_experiment(tmp_path, body):
    path = tmp_path / "exp.yaml"
    path.write_text(f"name: t\nbase: {SCENARIO}\n{body}", encoding="utf-8")
    return path


def test_keys_sharing_a_prefix_but_not_a_section_may_both_be_swept(tmp_path):
    # audit.gzip_level is not inside audit.gzip: no "swept inside" refusal
    path = _scenario_experiment(
        tmp_path, "sweep: {grid: {audit.gzip: [true, false], audit.gzip_level: [1, 3]}}\n"
    )
    assert main(["validate", str(path)]) == 0


def test_a_range_swept_inside_a_grid_key_is_refused(tmp_path, capsys):
    body = (
        "sweep: {grid: {memory: [{working_capacity: 5}]}, "
        "lhs: {memory.decay_rate: [0.5, 0.9]}, samples: 2}\n"
    )
    assert main(["validate", str(_scenario_experiment(tmp_path, body))]) == 2
    assert "memory.decay_rate: swept inside memory, which is swept too" in capsys.readouterr().err


def test_a_mapping_listed_twice_in_another_key_order_is_refused(tmp_path, capsys):
    body = "sweep: {grid: {hazard.events: [{2: 8.0, 3: 9.0}, {3: 9.0, 2: 8.0}]}}\n"
    assert main(["validate", str(_scenario_experiment(tmp_path, body))]) == 2
    assert capsys.readouterr().err.endswith("is listed twice\n")


def test_a_grid_integer_past_a_floats_range_is_refused_in_words(tmp_path, capsys):
    big = "1" + "0" * 400
    body = f"sweep: {{grid: {{households.count: [30, {big}]}}}}\n"
    assert main(["validate", str(_scenario_experiment(tmp_path, body))]) == 2
    assert "households.count" in capsys.readouterr().err


def test_a_key_both_set_and_swept_by_a_range_is_refused(tmp_path, capsys):
    body = (
        "set: {memory: {decay_rate: 0.5}}\n"
        "sweep: {lhs: {memory.decay_rate: [0.6, 0.9]}, samples: 2}\n"
    )
    assert main(["validate", str(_scenario_experiment(tmp_path, body))]) == 2
    assert "set: memory: holds memory.decay_rate, which is swept too" in capsys.readouterr().err


def test_each_swept_raster_file_is_checked_before_anything_runs(tmp_path, capsys):
    (tmp_path / "depth.asc").write_text(
        "ncols 2\nnrows 1\nxllcorner 0\nyllcorner 0\ncellsize 1\n1.0 2.0\n", "utf-8"
    )
    (tmp_path / "broken.asc").write_text("not a grid\n", "utf-8")
    body = (
        "set: {hazard: {source: raster, events: {}}}\n"
        "sweep: {grid: {hazard.rasters: [{1: depth.asc}, {1: broken.asc}]}}\n"
    )
    assert main(["validate", str(_scenario_experiment(tmp_path, body))]) == 2
    err = capsys.readouterr().err
    assert "broken.asc" in err
    assert "design point 1" in err


def test_each_swept_curve_file_is_checked_before_anything_runs(tmp_path, capsys):
    (tmp_path / "broken.yaml").write_text("source: nowhere\n", "utf-8")
    body = "sweep: {grid: {damage.curves: [usace_one_story_no_basement, broken.yaml]}}\n"
    assert main(["validate", str(_scenario_experiment(tmp_path, body))]) == 2
    err = capsys.readouterr().err
    assert "broken.yaml" in err
    assert "design point 1" in err


def test_each_swept_registry_is_checked_before_anything_runs(tmp_path, capsys):
    good = Path(__file__).resolve().parents[1] / "skill_registry.yaml"
    (tmp_path / "broken.yaml").write_text("skills: 3\n", "utf-8")
    body = f"sweep: {{grid: {{registry: [{good}, broken.yaml]}}}}\n"
    assert main(["validate", str(_scenario_experiment(tmp_path, body))]) == 2
    err = capsys.readouterr().err
    assert "broken.yaml" in err
    assert "design point 1" in err


def _sized_experiment(tmp_path, fixed, sweep):
    path = tmp_path / "exp.yaml"
    path.write_text(
        f"name: t\nbase: {DEFAULT}\nset: {{years: 2, audit.level: minimal, {fixed}}}\n"
        f"sweep: {{grid: {sweep}}}\n",
        encoding="utf-8",
    )
    return path


def test_each_swept_audit_list_is_checked_against_the_population(tmp_path, capsys):
    path = _sized_experiment(
        tmp_path, "households.count: 30", "{audit.sample: [[H00001], [H00031]]}"
    )
    assert main(["validate", str(path)]) == 2
    err = capsys.readouterr().err
    assert "'H00031' is not a household" in err
    assert "design point 1" in err


def test_listed_audit_ids_are_checked_against_each_swept_population(tmp_path, capsys):
    path = _sized_experiment(tmp_path, "audit.sample: [H00025]", "{households.count: [30, 20]}")
    assert main(["validate", str(path)]) == 2
    err = capsys.readouterr().err
    assert "'H00025' is not a household" in err
    assert "design point 1" in err


def test_a_replay_point_without_its_cache_is_refused_before_anything_runs(tmp_path, capsys):
    path = _sized_experiment(
        tmp_path,
        "households.count: 30, decision.policy: llm, decision.llm.cache: none.sqlite",
        "{decision.llm.mode: [record, replay]}",
    )
    assert main(["validate", str(path)]) == 2
    err = capsys.readouterr().err
    assert "none.sqlite" in err
    assert "design point 1" in err


def test_workers_alone_keeps_the_files_dask_address():
    from simulation.experiments.design import ExecutorConfig, override_executor_config

    executor = ExecutorConfig(kind="dask", address="tcp://host:8786")
    overridden = override_executor_config(executor, "exp.yaml", workers=3)
    assert (overridden.kind, overridden.workers, overridden.address) == (
        "dask",
        3,
        "tcp://host:8786",
    )


def test_a_year_swept_by_two_ranges_in_two_spellings_is_refused(tmp_path, capsys):
    body = "sweep: {lhs: {hazard.events.4: [5.0, 6.0], hazard.events.04: [1.0, 2.0]}, samples: 2}\n"
    assert main(["validate", str(_scenario_experiment(tmp_path, body))]) == 2
    assert "hazard.events.4 and hazard.events.04 are one key" in capsys.readouterr().err


def test_a_ranged_year_is_labelled_as_the_runs_read_it(tmp_path):
    from simulation.experiments import load_experiment

    body = "sweep: {lhs: {hazard.events.0x4: [5.0, 6.0]}, samples: 2}\n"
    experiment, *_ = load_experiment(_scenario_experiment(tmp_path, body))
    assert experiment.swept_keys == ["hazard.events.4"]


def test_the_command_lines_executor_replaces_the_files(tmp_path):
    from simulation.experiments.design import load_experiment, override_executor

    path = _scenario_experiment(tmp_path, "executor: {kind: process, workers: 2}\n")
    experiment, *_ = load_experiment(path)
    overridden = override_executor(experiment, str(path), kind="serial")
    assert overridden.executor.kind == "serial"
    assert experiment.executor.kind == "process"  # the loaded experiment is left as it was


def test_a_set_section_that_is_no_mapping_is_refused_in_words(tmp_path, capsys):
    body = "set: {memory: 5}\nsweep: {grid: {memory.decay_rate: [0.8, 0.9]}}\n"
    assert main(["validate", str(_scenario_experiment(tmp_path, body))]) == 2
    assert "memory" in capsys.readouterr().err
