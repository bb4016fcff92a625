"""The instruction-count benchmark's parts that run without valgrind (no counting here)."""

from __future__ import annotations

import orjson
import pytest

from simulation import runner


@pytest.fixture(scope="module")
def bench(load_benchmark):
    return load_benchmark("bench_instructions")


def test_the_count_is_read_from_callgrinds_report(bench):
    output = "==123== Events    : Ir\n==123== Collected : 1,234,567\n==123==\n==123== I   refs: 9"
    assert bench.collected(output) == 1_234_567


@pytest.mark.parametrize("output", ["==1== valgrind: failed to start tool", "Collected : 0"])
def test_no_count_is_an_error_not_a_zero(bench, output):
    with pytest.raises(ValueError, match="callgrind"):
        bench.collected(output)


@pytest.mark.parametrize("engine", ["objects", "arrays"])
def test_the_counted_child_steps_its_years_through_ctypes(bench, tmp_path, engine):
    bench.child(12, 2, "standard", engine, tmp_path)
    lines = (tmp_path / "household_traces.jsonl").read_bytes().splitlines()
    # The warm-up year and both counted years ran and were written out.
    assert {orjson.loads(line)["year"] for line in lines} == {1, 2, 3}


def test_the_counted_child_writes_its_lines_on_the_counted_thread(bench, tmp_path, monkeypatch):
    # callgrind counts only the thread that steps the counted years: lines written behind the
    # run (audit.background) would be left out of the count.
    writers = []
    make_writer = runner._writer

    def kept(*args, **kwargs):
        writers.append(make_writer(*args, **kwargs))
        return writers[-1]

    monkeypatch.setattr(runner, "_writer", kept)
    # audit.background: auto would write behind a run of any size
    monkeypatch.setattr(runner, "BACKGROUND_FROM_HOUSEHOLDS", 1)
    bench.child(12, 1, "standard", "arrays", tmp_path)
    assert len(writers) == 1
    assert not writers[0].writes_behind
