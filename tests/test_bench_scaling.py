"""The scaling benchmark's verdicts and figure (benchmarks/bench_scaling.py; no timing here)."""

from __future__ import annotations

import json
import os
from importlib import metadata

import pytest


@pytest.fixture(scope="module")
def bench(load_benchmark):
    return load_benchmark("bench_scaling")


def _row(households, audit, us, floor, rss=500.0, memories="as run"):
    return {
        "households": households,
        "audit": audit,
        "memories": memories,
        "us_per_household_year": us,
        "floor_us_per_agent_step": floor,
        "ratio_to_floor": round(us / floor, 1),
        "peak_rss_mb": rss,
    }


def test_verdicts_follow_the_targets(bench):
    rows = [
        _row(1_000, "off", 4.0, 0.4),  # 10x: met
        _row(1_000, "standard", 10.0, 0.4),  # 25x: missed
        _row(100_000, "off", 6.0, 0.8, rss=2100.0),  # 7.5x met; 1.5x growth missed
        _row(100_000, "standard", 12.0, 0.8, rss=900.0),  # 15x met; 1.2x growth met
        # Memories filled: judged on RSS only, never on cost (slower, and not the matrix's).
        _row(100_000, "standard", 90.0, 0.8, rss=2100.0, memories="full"),
        _row(100_000, "off", 90.0, 0.8, rss=1900.0, memories="full"),
    ]
    lines = bench.target_checks(rows)

    def verdict(*words):
        (line,) = [x for x in lines if all(w in x for w in words)]
        return line.rsplit(": ", 1)[1]

    assert verdict("1000 households, audit off, engine objects:", "floor") == "met"
    assert verdict("1000 households, audit standard, engine objects:", "floor") == "MISSED"
    assert verdict("100000 households, audit off, engine objects:", "floor") == "met"
    assert verdict("100000 households, audit standard, engine objects:", "floor") == "met"
    assert verdict("audit off, engine objects: cost per household-year") == "MISSED"
    assert verdict("audit standard, engine objects: cost per household-year") == "met"
    assert (
        verdict("100000 households, audit standard, engine objects, full memories: peak RSS")
        == "MISSED"
    )
    assert verdict("100000 households, audit off, engine objects, full memories: peak RSS") == "met"
    # Runs whose memories were not filled say nothing about the RSS target.
    assert len([x for x in lines if "peak RSS" in x]) == 2
    # Growth is the target's only between 1,000 and 100,000 households, at off and standard.
    others = bench.target_checks(
        [
            _row(1_000, "off", 4.0, 0.4),
            _row(10_000, "off", 9.0, 0.4),
            _row(1_000, "full", 4.0, 0.4),
            _row(100_000, "full", 9.0, 0.4),
        ]
    )
    grown = [x for x in others if "cost per household-year" in x]
    assert len(grown) == 2
    assert all(
        x.endswith("(not judged: the target compares 1,000 with 100,000 households)") for x in grown
    )


def test_fill_memories_fills_every_store_and_the_memories_stay_full(bench):
    from simulation.config import load_config
    from simulation.runner import build_model

    config, base = load_config(bench.DEFAULT_CONFIG, ["households.count=40"])
    model = build_model(config, base)
    bench.fill_memories(model)
    memories = [h.memory for h in model.households]
    working, episodic = config.memory.working_capacity, config.memory.episodic_capacity
    assert {(m.working_size, m.episodic_size) for m in memories} == {(working, episodic)}
    items = [i for m in memories for i in m.episodic]
    share = {s: sum(i.source == s for i in items) / len(items) for s in ("decision", "claim")}
    # About the mix of a long default run's fullest memories: mostly decisions, some claims.
    assert 0.7 <= share["decision"] <= 0.85
    assert 0.05 <= share["claim"] <= 0.2
    assert any(i.source == "flood" for i in items)
    # Rendered from the configured templates, with each household's own premium.
    premium = model.costs_for(model.households[0].state)["buy_insurance"]
    expected = f"I purchased flood insurance (premium: ${premium:,.0f})"
    assert expected in memories[0].episodic[0].content
    assert not any("{" in i.content for m in memories for i in (*m.working, *m.episodic))
    for _ in range(3):
        model.step()
    active = [h.memory for h in model.households if h.active]
    assert {(m.working_size, m.episodic_size) for m in active} == {(working, episodic)}


def test_plot_draws_every_level_and_engine_the_floor_and_the_targets(bench, tmp_path):
    def on_arrays(row):
        return {**row, "engine": "arrays"}

    rows = [
        _row(1_000, "off", 28.0, 0.32),
        _row(1_000, "standard", 45.0, 0.30),
        _row(1_000, "full", 67.0, 0.31),
        on_arrays(_row(1_000, "full", 50.0, 0.31)),
        _row(10_000, "off", 28.0, 0.35),
        on_arrays(_row(10_000, "off", 3.0, 0.35)),
        _row(10_000, "standard", 51.0, 0.34),
        # Filled memories measure memory, not cost: not drawn.
        on_arrays(_row(10_000, "standard", 90.0, 0.34, memories="full")),
    ]
    figure = bench.plot_scaling(rows)
    (ax,) = figure.axes
    lines = {line.get_label(): line for line in ax.get_lines()}
    assert set(lines) == {
        "floodsim, audit off, engine objects",
        "floodsim, audit off, engine arrays",
        "floodsim, audit standard, engine objects",
        "floodsim, audit full, engine objects",
        "floodsim, audit full, engine arrays",
        "floor: empty Mesa step",
        "target off: 15x floor",
        "target standard: 20x floor",
    }
    assert list(lines["floodsim, audit standard, engine objects"].get_ydata()) == [45.0, 51.0]
    assert list(lines["floodsim, audit full, engine objects"].get_xdata()) == [1_000]
    assert list(lines["floodsim, audit full, engine arrays"].get_ydata()) == [50.0]
    assert list(lines["floodsim, audit off, engine arrays"].get_xdata()) == [10_000]
    # The floor per size is the median over that size's rows; targets are multiples of it.
    assert list(lines["floor: empty Mesa step"].get_ydata()) == [0.31, 0.35]
    assert list(lines["target off: 15x floor"].get_ydata()) == pytest.approx([4.65, 5.25])
    png = tmp_path / "scaling.png"
    figure.savefig(png)
    assert png.read_bytes().startswith(b"\x89PNG")


def test_the_floor_of_a_size_is_the_lowest_of_its_processes_and_divides_every_cost(bench):
    def measured(households, audit, us, floors):
        row = {"households": households, "audit": audit, "us_per_household_year": us}
        return {**row, "floor_us_per_agent_step_processes": floors}

    rows = bench.with_floors(
        [
            measured(1_000, "off", 4.5, [0.45, 0.3]),
            measured(1_000, "standard", 9.0, [0.4, 0.225, 0.31]),
            measured(10_000, "off", 3.0, [0.5, 0.25]),
        ]
    )
    assert [r["floor_us_per_agent_step"] for r in rows] == [0.225, 0.225, 0.25]
    assert [r["ratio_to_floor"] for r in rows] == [20.0, 40.0, 12.0]
    assert rows[0]["floor_us_per_agent_step_processes"] == [0.45, 0.3]  # its own, as measured
    assert rows[0]["us_per_household_year"] == 4.5
    # Beside the verdict's ratio, the ratio to the median of the row's own floors, measured in
    # the same moment of a shared host as its cost.
    assert [r["ratio_to_floor_beside"] for r in rows] == [12.0, 29.0, 8.0]


def test_the_ratio_beside_is_the_median_of_the_rounds_and_printed_with_the_verdict(bench):
    rounds = bench.with_floors(
        [
            {
                "households": 1_000,
                "audit": "off",
                "us_per_household_year": us,
                "peak_rss_mb": 200.0,
                "floor_us_per_agent_step_processes": floors,
            }
            for us, floors in ((6.0, [0.3, 0.6, 0.5]), (9.0, [0.6, 0.55, 0.65]), (8.0, [0.2]))
        ]
    )
    row = bench.combine_rounds(rounds)
    # Each round's cost over its own floors (12x, 15x, 40x); the median of those, not the
    # ratio of the median round (8.0 us, whose own floor gives 40x).
    assert row["ratio_to_floor_beside"] == 15.0
    assert row["ratio_to_floor"] == 40.0  # the verdict's: the lowest floor of every round
    (line,) = bench.target_checks([row])
    assert line.endswith(
        "40.0x floor (target <= 15.0x): MISSED (15.0x the floor measured beside it)"
    )


def test_a_fresh_process_steps_the_floor_and_reports_seconds_per_agent_step(bench):
    (floor,) = bench.floor_in_fresh_processes(50, 2, processes=1, min_seconds=0.0)
    # An agent-step of an empty model: far above nothing, far below a millisecond.
    assert 1e-9 < floor < 1e-3


def test_plot_without_rows_is_none(bench):
    assert bench.plot_scaling([]) is None


def test_small_configurations_repeat_and_report_their_median(bench):
    assert [bench.repeats_for(n, 30) for n in (1_000, 10_000, 100_000)] == [5, 3, 1]
    row = bench.measure_one(500, "off", 2, repeats=3)
    assert row["runs"] == 3
    fastest, slowest = row["run_s_range"]
    assert fastest <= row["run_s"] <= slowest
    # The cost is the median run's steps (run_s is rounded to milliseconds: the tolerance).
    assert row["us_per_household_year"] == pytest.approx(row["run_s"] / 1_000 * 1e6, rel=0.1)
    # A run's fixed costs (its folder, manifest, metrics) are not in the cost.
    assert row["run_fixed_s"] > 0
    # The steps' CPU time, and the kernel's part of it.
    assert row["cpu_us_per_household_year"] > 0
    assert row["system_us_per_household_year"] >= 0


def _rounds(row, costs):
    return {**row, "rounds_us_per_household_year": costs}


def test_a_configuration_reports_its_median_round_and_every_rounds_cost(bench):
    rounds = [
        _row(1_000, "off", us, 0.5, rss=rss) for us, rss in ((30.0, 170), (50, 190), (40, 180))
    ]
    row = bench.combine_rounds(rounds)
    assert row["us_per_household_year"] == 40.0  # the median round, with its own floor and ratio
    assert row["ratio_to_floor"] == 80.0
    assert row["rounds_us_per_household_year"] == [30.0, 50, 40]  # in round order
    assert row["peak_rss_mb"] == 190  # the highest of any round
    # An even number of rounds reports the faster of the two middle ones.
    assert bench.combine_rounds(rounds[:2])["us_per_household_year"] == 30.0


def test_growth_is_judged_round_by_round(bench):
    # A slow second round for the small size: its median round (20) is a slow one, so the
    # medians alone would say 0.7x, while within every other round the large size costs 1.4x.
    small = _rounds(_row(1_000, "off", 20.0, 0.5), [10.0, 20.0, 20.0])
    large = _rounds(_row(100_000, "off", 14.0, 0.9), [14.0, 14.0, 28.0])
    assert bench.growth(small, large) == pytest.approx(1.4)
    (line,) = [x for x in bench.target_checks([small, large]) if "cost per household-year" in x]
    assert line.endswith("1.40x that at 1000 (target <= 1.3x): MISSED")
    # Rows from a single round (or unequal rounds) are compared by their reported costs.
    assert bench.growth(_row(1_000, "off", 20.0, 0.5), large) == pytest.approx(0.7)
    unequal = _rounds(_row(100_000, "off", 14.0, 0.9), [14.0, 14.0])
    assert bench.growth(small, unequal) == pytest.approx(0.7)


def test_rounds_run_every_configuration_in_turn(bench, tmp_path, monkeypatch, capsys):
    out = tmp_path / "scaling.json"
    argv = ["bench_scaling.py", "--households", "20", "40", "--levels", "off", "--years", "1"]
    argv += ["--repeats", "1", "--rounds", "2", "--json", str(out)]
    argv += ["--floor-seconds", "0", "--floor-processes", "1"]
    monkeypatch.setattr("sys.argv", argv)
    bench.main()
    printed = capsys.readouterr()
    started = [x for x in printed.err.splitlines() if x.startswith("running")]
    assert started == [
        "running 20 households, audit off, engine objects (round 1 of 2) ...",
        "running 40 households, audit off, engine objects (round 1 of 2) ...",
        "running 20 households, audit off, engine objects (round 2 of 2) ...",
        "running 40 households, audit off, engine objects (round 2 of 2) ...",
    ]
    written = json.loads(out.read_text())
    assert [len(r["rounds_us_per_household_year"]) for r in written["rows"]] == [2, 2]
    assert any("cost per household-year at 40" in x for x in written["targets"])
    # One floor process after each configuration in each round: two per row, both kept.
    assert [len(r["floor_us_per_agent_step_processes"]) for r in written["rows"]] == [2, 2]
    # The machine first (also in the JSON), then each row's CPU time, the kernel's in brackets.
    host, header, _, *lines = printed.out.splitlines()
    assert host == bench.machine_line(written["machine"])
    assert written["machine"]["cpus"] == os.cpu_count()
    assert "CPU us (sys)" in header
    cpu, kernel = (written["rows"][0][f"{k}_us_per_household_year"] for k in ("cpu", "system"))
    assert f"{cpu:.1f} ({kernel:.1f})" in lines[0]


def test_both_engines_are_measured_at_each_level_and_judged_by_it(
    bench, tmp_path, monkeypatch, capsys
):
    out = tmp_path / "scaling.json"
    argv = ["bench_scaling.py", "--households", "30", "--levels", "off", "full"]
    argv += ["--engines", "objects", "arrays", "--years", "2", "--repeats", "1"]
    argv += ["--floor-seconds", "0", "--floor-processes", "2", "--json", str(out)]
    monkeypatch.setattr("sys.argv", argv)
    bench.main()
    started = [x for x in capsys.readouterr().err.splitlines() if x.startswith("running")]
    assert started == [
        "running 30 households, audit off, engine objects ...",
        "running 30 households, audit off, engine arrays ...",
        "running 30 households, audit full, engine objects ...",
        "running 30 households, audit full, engine arrays ...",
    ]
    rows = json.loads(out.read_text())["rows"]
    assert [(r["audit"], r["engine"]) for r in rows] == [
        ("off", "objects"),
        ("off", "arrays"),
        ("full", "objects"),
        ("full", "arrays"),
    ]
    # Two fresh processes after each configuration; the size's floor is the lowest of all 8.
    assert [len(r["floor_us_per_agent_step_processes"]) for r in rows] == [2, 2, 2, 2]
    lowest = min(f for r in rows for f in r["floor_us_per_agent_step_processes"])
    assert [r["floor_us_per_agent_step"] for r in rows] == [lowest] * 4
    assert lowest > 0
    arrays = {**_row(1_000, "off", 5.0, 0.4), "engine": "arrays"}
    (line,) = [x for x in bench.target_checks([arrays]) if "floor" in x]
    assert (
        line == "   1000 households, audit off, engine arrays: 12.5x floor (target <= 15.0x): met"
    )
    assert ("standard", "arrays") in bench.MATRIX[100_000]
    assert ("full", "arrays") in bench.MATRIX[1_000]
    assert ("full", "arrays") not in bench.MATRIX[100_000]


def test_rounds_must_be_positive(bench, monkeypatch):
    monkeypatch.setattr("sys.argv", ["bench_scaling.py", "--rounds", "0"])
    with pytest.raises(SystemExit):
        bench.main()


@pytest.mark.parametrize("flag", [["--levels", "off"], ["--engines", "arrays"]])
def test_levels_or_engines_without_sizes_are_refused_not_run_as_the_whole_matrix(
    bench, monkeypatch, capsys, flag
):
    monkeypatch.setattr("sys.argv", ["bench_scaling.py", *flag])
    with pytest.raises(SystemExit) as info:
        bench.main()
    assert info.value.code == 2
    assert f"{flag[0]} applies to the --households sizes: give them too" in capsys.readouterr().err


def test_config_keys_set_on_the_command_line_reach_every_configuration(
    bench, tmp_path, monkeypatch
):
    out = tmp_path / "scaling.json"
    argv = ["bench_scaling.py", "--households", "40", "--levels", "standard", "--years", "2"]
    argv += ["--repeats", "1", "--floor-seconds", "0", "--floor-processes", "1", "--json", str(out)]
    monkeypatch.setattr("sys.argv", [*argv, "--set", "audit.sample=0.5"])
    bench.main()
    (half,) = json.loads(out.read_text())["rows"]
    monkeypatch.setattr("sys.argv", argv)
    bench.main()
    (everyone,) = json.loads(out.read_text())["rows"]
    assert half["set"] == ["audit.sample=0.5"]
    assert everyone["set"] == []
    audit_bytes = "audit_bytes_per_household_year"
    assert 0 < half[audit_bytes] < 0.75 * everyone[audit_bytes]


def test_the_split_recovers_a_cost_per_household_year_and_one_per_year(bench):
    # 2.5 us per household-year plus 4 ms per year: 6.5 us at 1,000, 4.5 at 2,000, 3.5 at 4,000.
    rows = [
        {**_row(n, "standard", 2.5 + 4000.0 / n, 0.2), "engine": "arrays"}
        for n in (4_000, 1_000, 2_000)
    ]
    rows.append({**_row(1_000, "off", 3.0, 0.2), "engine": "arrays"})  # one size: no fit
    rows.append({**_row(2_000, "standard", 90.0, 0.2, memories="full"), "engine": "arrays"})
    (split,) = bench.cost_split(rows)
    assert split["audit"] == "standard"
    assert split["households"] == [1_000, 2_000, 4_000]
    assert split["us_per_household_year"] == pytest.approx(2.5, abs=1e-3)
    assert split["ms_per_year"] == pytest.approx(4.0, abs=1e-3)
    (line,) = bench.split_lines([split])
    assert line == (
        "audit standard, engine arrays: 2.50 us per household-year + 4.00 ms per year "
        "(fit over 1000, 2000, 4000 households); at 1000 households the part per year is "
        "4.00 of 6.50 us per household-year, and the target allows 4.00 (20 x the floor)"
    )


def test_split_is_written_with_the_rows_when_asked(bench, tmp_path, monkeypatch, capsys):
    out = tmp_path / "scaling.json"
    argv = ["bench_scaling.py", "--households", "20", "40", "--levels", "off", "--years", "1"]
    argv += ["--repeats", "1", "--floor-seconds", "0", "--floor-processes", "1", "--json", str(out)]
    monkeypatch.setattr("sys.argv", argv)
    bench.main()
    assert "split" not in json.loads(out.read_text())
    monkeypatch.setattr("sys.argv", [*argv, "--split"])
    bench.main()
    (split,) = json.loads(out.read_text())["split"]
    assert (split["audit"], split["engine"], split["households"]) == ("off", "objects", [20, 40])
    assert "audit off, engine objects: " in capsys.readouterr().out


_CPUINFO = """processor\t: 0
vendor_id\t: AuthenticAMD
cpu family\t: 25
model\t\t: 1
model name\t: AMD EPYC

processor\t: 1
cpu family\t: 6
model\t\t: 207
model name\t: Intel Xeon
"""


def test_the_machine_is_the_first_processor_of_cpuinfo_with_the_libraries(bench, tmp_path):
    cpuinfo = tmp_path / "cpuinfo"
    cpuinfo.write_text(_CPUINFO)
    host = bench.machine(cpuinfo)
    assert (host["processor"], host["cpu_family"], host["cpu_model"]) == ("AMD EPYC", "25", "1")
    assert host["cpus"] == os.cpu_count()
    assert host["libraries"]["numpy"] == metadata.version("numpy")
    assert set(host["libraries"]) == {"mesa", "numpy", "pyarrow", "orjson"}
    line = bench.machine_line(host)
    assert line.startswith(f"machine: AMD EPYC (family 25, model 1), {os.cpu_count()} CPUs; ")
    assert f"numpy {metadata.version('numpy')}" in line


def test_without_cpuinfo_the_machine_is_platforms_and_has_no_family(bench, tmp_path):
    host = bench.machine(tmp_path / "absent")
    assert host["processor"]
    assert host["cpu_family"] is None
    assert "family" not in bench.machine_line(host)


def test_the_plot_names_the_processor_it_was_measured_on(bench):
    rows = [_row(1_000, "off", 4.0, 0.4), _row(10_000, "off", 3.0, 0.3)]
    for row in rows:
        row["engine"] = "arrays"
    (axes,) = bench.plot_scaling(rows, "AMD EPYC").axes
    assert axes.get_title().endswith("\non AMD EPYC")
    (axes,) = bench.plot_scaling(rows).axes
    assert "\n" not in axes.get_title()
