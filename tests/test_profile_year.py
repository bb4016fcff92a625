"""Timing the yearly cycle by phase (benchmarks/profile_year.py; no timing targets here)."""

from __future__ import annotations

from pathlib import Path

import pytest

from simulation.array_engine import ArrayEngine
from simulation.config import load_config
from simulation.model import FloodAdaptationModel
from simulation.runner import build_model

DEFAULT = Path(__file__).resolve().parents[1] / "configs" / "default.yaml"


@pytest.fixture(scope="module")
def profile_year(load_benchmark):
    return load_benchmark("profile_year")


def _model(*overrides):
    config, base = load_config(DEFAULT, ["households.count=60", "years=3", *overrides])
    return build_model(config, base)


@pytest.mark.parametrize("engine", ["objects", "arrays"])
def test_each_phase_that_ran_is_timed_and_they_add_up_to_the_years(profile_year, engine):
    model = _model(f"engine={engine}")
    seconds = profile_year.phase_seconds(model, 2)
    assert model.steps == 2
    phases = [name for name in seconds if name not in ("rest of step", "total")]
    # The PMT default decides in bulk; the one-by-one path never ran. The array engine takes
    # no roll call: it steps every household still here.
    assert phases == [
        *(["roll call"] if engine == "objects" else []),
        "1-2 hazard and damage",
        "3-4 claims and event memories",
        "5 institutions",
        "6 social observation",
        "7 decisions (in bulk)",
        "8 year end and metrics",
    ]
    assert all(seconds[name] > 0.0 for name in phases)
    assert sum(seconds[name] for name in phases) + seconds["rest of step"] == pytest.approx(
        seconds["total"]
    )


def test_decisions_one_by_one_are_timed_as_such(profile_year, tmp_path):
    script = tmp_path / "script.csv"
    script.write_text("agent_id,year,skill_id\n", encoding="utf-8")  # everyone waits
    # The object path decides a table's households one by one (the array engine, in bulk).
    model = _model("decision.policy=scripted", f"decision.script={script}", "engine=objects")
    seconds = profile_year.phase_seconds(model, 1)
    assert seconds["7 decisions (one by one)"] > 0.0
    assert "7 decisions (in bulk)" not in seconds


@pytest.mark.parametrize(
    ("engine", "cls", "phases"),
    [("objects", FloodAdaptationModel, "PHASES"), ("arrays", ArrayEngine, "ARRAY_PHASES")],
)
def test_the_model_class_is_left_as_it_was_even_when_a_year_fails(
    profile_year, monkeypatch, engine, cls, phases
):
    originals = {name: cls.__dict__[name] for name in getattr(profile_year, phases)}
    model = _model(f"engine={engine}")

    def flooded(*args, **kwargs):
        raise RuntimeError("levee breach")

    monkeypatch.setattr(model.government, "subsidy_for", flooded)
    with pytest.raises(RuntimeError, match="levee breach"):
        profile_year.phase_seconds(model, 2)
    assert {name: cls.__dict__[name] for name in originals} == originals
    # And the model still decides in bulk afterwards.
    assert _model()._decides_together()


def test_a_subclass_of_the_model_is_timed_where_it_inherits_the_phases(profile_year):
    class Inheriting(FloodAdaptationModel):
        """A study's model that overrides none of the phases."""

    config, base = load_config(DEFAULT, ["households.count=60", "years=3", "engine=objects"])
    model = Inheriting(config, base)
    seconds = profile_year.phase_seconds(model, 1)
    assert seconds["7 decisions (in bulk)"] > 0.0
    assert seconds["8 year end and metrics"] > 0.0
    assert "_end_year" not in vars(Inheriting)


@pytest.mark.parametrize(
    ("arguments", "message"),
    [
        (["--households", "0"], "--households and --years must be at least 1"),
        (["--years", "0"], "--households and --years must be at least 1"),
        (["--set", "audit.levle=full"], "audit.levle: unknown key"),
        (["--set", "nonsense"], "expected KEY=VALUE"),
    ],
)
def test_bad_arguments_get_one_line_and_exit_code_2(
    profile_year, monkeypatch, capsys, arguments, message
):
    monkeypatch.setattr("sys.argv", ["profile_year.py", "--households", "20", *arguments])
    with pytest.raises(SystemExit) as stopped:
        profile_year.main()
    assert stopped.value.code == 2
    assert message in capsys.readouterr().err


def _recording_build(monkeypatch, events):
    """Record in ``events`` when the array engine is built."""
    build = ArrayEngine.__init__

    def recorded(self, *args, **kwargs):
        events.append("build")
        build(self, *args, **kwargs)

    monkeypatch.setattr(ArrayEngine, "__init__", recorded)


def test_the_engine_is_built_before_the_phases_are_timed(profile_year, monkeypatch):
    # The runner builds the array engine before its first year (model.prepare); timed inside
    # the first year, the build (0.25 s at 10,000 households) swelled "rest of step".
    events: list[str] = []
    _recording_build(monkeypatch, events)
    clock = profile_year.time.perf_counter

    def recorded_clock():
        events.append("clock")
        return clock()

    monkeypatch.setattr(profile_year.time, "perf_counter", recorded_clock)
    profile_year.phase_seconds(_model("engine=arrays"), 2)
    assert events[0] == "build"
    assert events.count("build") == 1


def test_the_profile_starts_after_the_engine_is_built(profile_year, monkeypatch, capsys):
    events: list[str] = []
    _recording_build(monkeypatch, events)
    enable = profile_year.cProfile.Profile.enable

    def recorded_enable(self):
        events.append("profile")
        enable(self)

    monkeypatch.setattr(profile_year.cProfile.Profile, "enable", recorded_enable)
    monkeypatch.setattr(
        "sys.argv", ["profile_year.py", "--households", "20", "--years", "2", "--top", "3"]
    )
    profile_year.main()
    assert events == ["build", "profile"]
    assert "20 households x 2 years, audit off, engine arrays" in capsys.readouterr().out
