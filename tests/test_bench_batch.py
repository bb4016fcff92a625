"""The batch benchmark's report and its refusals (benchmarks/bench_batch.py; no timing here)."""

from __future__ import annotations

import json

import pytest

from simulation.experiments.batch import ExperimentResult


@pytest.fixture(scope="module")
def bench(load_benchmark):
    return load_benchmark("bench_batch")


def _main(bench, monkeypatch, *arguments):
    monkeypatch.setattr("sys.argv", ["bench_batch.py", *arguments])
    bench.main()


def test_the_report_gives_the_machine_both_times_and_their_ratio(
    bench, monkeypatch, capsys, tmp_path
):
    asked = []

    def timed(kind, runs, workers, folder):
        asked.append((kind, runs, workers))
        return {"serial": 40.0, "process": 22.0}[kind]

    monkeypatch.setattr(bench, "timed", timed)
    out = tmp_path / "batch.json"
    _main(bench, monkeypatch, "--runs", "4", "--workers", "3", "--json", str(out))
    assert asked == [("serial", 4, 3), ("process", 4, 3)]
    written = json.loads(out.read_text())
    assert written["ratio"] == 0.55
    assert (written["serial_s"], written["process_s"]) == (40.0, 22.0)
    # The ratio depends on the host as well as the code: the machine is recorded and printed.
    host, summary = capsys.readouterr().out.splitlines()
    assert host == bench.machine_line(written["machine"])
    assert summary.endswith("ratio 0.550 (target <= 0.6)")


@pytest.mark.parametrize("arguments", [["--runs", "0"], ["--workers", "0"]])
def test_runs_and_workers_below_one_are_refused(bench, monkeypatch, capsys, arguments):
    with pytest.raises(SystemExit) as stopped:
        _main(bench, monkeypatch, *arguments)
    assert stopped.value.code == 2
    assert "--runs and --workers must be at least 1" in capsys.readouterr().err


def test_a_failed_run_stops_the_benchmark_with_its_error(bench, monkeypatch, tmp_path):
    runs = [
        {"run_id": "r0", "status": "complete", "error": None},
        {"run_id": "r1", "status": "failed", "error": "MemoryError: out of memory"},
    ]

    def failing(path, out_dir, progress):
        return ExperimentResult(out_dir, runs, failed=1, skipped=0, wall_s=1.0)

    monkeypatch.setattr(bench, "run_experiment", failing)
    with pytest.raises(SystemExit, match=r"1 of 2 serial runs failed; the first: MemoryError"):
        bench.timed("serial", 2, 1, tmp_path)


@pytest.mark.slow
def test_a_timed_experiment_runs_every_replicate(bench, tmp_path):
    # The experiment file the benchmark writes must stay one that floodsim accepts.
    assert bench.timed("serial", 1, 1, tmp_path) > 0.0
    record = json.loads((tmp_path / "serial" / "experiment.json").read_text())
    assert [run["status"] for run in record["runs"]] == ["complete"]
