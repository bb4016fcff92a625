"""The memory micro-benchmark's subjects and report (benchmarks/bench_memory.py; no timing)."""

from __future__ import annotations

import json

import pytest


@pytest.fixture(scope="module")
def bench(load_benchmark):
    return load_benchmark("bench_memory")


def test_the_measured_memory_is_full(bench):
    memory = bench.full_memory("weighted")
    assert (len(memory.working), len(memory.episodic)) == (10, 50)
    assert memory.retrieval.strategy == "weighted"


def test_deep_size_counts_a_shared_object_once(bench):
    text = "Year 3: a flood occurred" * 4
    alone = bench.deep_size([text])
    assert bench.deep_size([text, text]) == alone + 8  # one more list slot, the text once
    assert bench.deep_size(bench.full_memory()) > bench.deep_size(bench.full_memory().working)


def test_the_report_gives_the_machine_and_each_figure(bench, monkeypatch, capsys, tmp_path):
    figures = {"retrieve(top_k=5) spec, working full": 3.25, "memory size (bytes)": 9000.0}
    monkeypatch.setattr(bench, "run", lambda: figures)
    out = tmp_path / "memory.json"
    monkeypatch.setattr("sys.argv", ["bench_memory.py", "--json", str(out)])
    bench.main()
    written = json.loads(out.read_text())
    assert written["results"] == figures
    host, title, *rows = capsys.readouterr().out.splitlines()
    assert host == bench.machine_line(written["machine"])
    assert title == "CognitiveMemory, 10 working + 50 episodic items"
    assert rows == [
        "  retrieve(top_k=5) spec, working full           3.25 us",
        "  memory size (bytes)                         9000.00 B",
    ]
