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


def test_the_counted_child_runs_the_config_keys_it_is_given(bench, tmp_path, monkeypatch):
    configs = []
    build = runner.build_model

    def kept(config, base):
        configs.append(config)
        return build(config, base)

    monkeypatch.setattr(runner, "build_model", kept)
    bench.child(12, 1, "standard", "arrays", tmp_path, ["memory.retention.policy=tiered"])
    (config,) = configs
    assert config.memory.retention.policy == "tiered"
    assert (config.households.count, config.engine) == (12, "arrays")


def test_a_bad_config_key_is_refused_before_anything_is_counted(bench, monkeypatch, capsys):
    monkeypatch.setattr("sys.argv", ["bench_instructions.py", "--set", "memory.nope=1"])
    with pytest.raises(SystemExit) as exit_:
        bench.main()
    assert exit_.value.code == 2
    assert "memory.nope" in capsys.readouterr().err


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


def test_the_floors_child_steps_the_empty_model_through_ctypes(bench):
    model = bench.floor_child(20, 3)
    assert model.steps == 4  # the warm-up step and the three counted ones
    assert len(model.agents) == 20


def test_a_row_gives_its_count_as_a_multiple_of_the_floor(bench):
    row = {
        "households": 1000,
        "years": 12,
        "audit": "standard",
        "engine": "arrays",
        "instructions_per_household_year": 68909,
        "floor_instructions_per_agent_step": 3907,
        "ratio_to_floor": 17.64,
    }
    assert bench.row_line(row) == (
        "     1,000 hh x 12 y  standard arrays      68,909 instructions per household-year"
        " (17.6x the floor)"
    )
    row |= {
        "against": "../other",
        "against_instructions_per_household_year": 70000,
        "ratio": 0.9844,
    }
    assert bench.row_line(row).endswith("(17.6x the floor)   against 70,000 (0.984x)")
