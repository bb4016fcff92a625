"""The LLM throughput benchmark, end to end on a small world (benchmarks/bench_llm.py).

No rate is asserted: the figures depend on the machine. What is checked is that the benchmark
runs, counts what it sent, records its machine, and refuses arguments it cannot measure with.
"""

from __future__ import annotations

import json

import pytest


@pytest.fixture(scope="module")
def bench(load_benchmark):
    return load_benchmark("bench_llm")


def _main(bench, monkeypatch, *arguments):
    monkeypatch.setattr("sys.argv", ["bench_llm.py", *arguments])
    return bench.main()


@pytest.mark.slow
def test_a_small_run_counts_every_decision_and_records_the_machine(
    bench, monkeypatch, capsys, tmp_path
):
    out = tmp_path / "llm.json"
    code = _main(
        bench,
        monkeypatch,
        *("--households", "6", "--years", "2", "--latency", "0.01", "--concurrency", "3"),
        *("--json", str(out)),
    )
    assert code == 0
    written = json.loads(out.read_text())
    assert written["ideal_decisions_per_s"] == 300.0
    figures = written["variants"]["loopback"]
    # Every household decides with the model every year, one request each, none falling back.
    assert [year["llm_decisions"] for year in figures["model"]["years"]] == [6, 6]
    assert figures["model"]["http_requests"] == 12
    assert (figures["decide_all"]["requests"], figures["decide_all"]["fallbacks"]) == (6, 0)
    printed = capsys.readouterr().out.splitlines()
    assert bench.machine_line(written["machine"]) in printed


@pytest.mark.parametrize(
    "arguments",
    [["--households", "0"], ["--years", "0"], ["--concurrency", "0"], ["--latency", "0"]],
)
def test_arguments_it_cannot_measure_with_are_refused(bench, monkeypatch, capsys, arguments):
    with pytest.raises(SystemExit) as stopped:
        _main(bench, monkeypatch, *arguments)
    assert stopped.value.code == 2
    assert "must be at least 1 and --latency above 0" in capsys.readouterr().err


def test_an_unknown_variant_is_refused(bench, monkeypatch, capsys):
    with pytest.raises(SystemExit) as stopped:
        _main(bench, monkeypatch, "--variants", "loopback,satellite")
    assert stopped.value.code == 2
    assert "unknown variant(s): satellite" in capsys.readouterr().err
