"""Tests for run configs: loading, ``base:`` inheritance, ``--set`` overrides and error messages."""

from __future__ import annotations

import os
import re
import warnings
from pathlib import Path
from types import MappingProxyType
from typing import TYPE_CHECKING

import pytest
import yaml
from hypothesis import given, settings
from hypothesis import strategies as st
from pydantic import BaseModel

from simulation.cli import main
from simulation.config import (
    DEFAULT_WORLD_KEYS,
    ConfigError,
    ConfigWarning,
    IgnoredKeyWarning,
    RunConfig,
    apply_overrides,
    create_output_folder,
    ignored_keys,
    is_curve_file,
    load_config,
    read_yaml,
    resolve_base,
    setting_origin,
    warn_ignored_keys,
)
from simulation.experiments.design import SweepConfig, load_experiment, plan_runs
from simulation.runner import build_model, config_hash

if TYPE_CHECKING:
    from collections.abc import Iterator

ROOT = Path(__file__).resolve().parents[1]
DEFAULT = ROOT / "configs" / "default.yaml"
LLM_SCENARIO = ROOT / "configs" / "scenarios" / "llm_households.yaml"
SINGLE_FLOOD = ROOT / "configs" / "scenarios" / "single_flood.yaml"
REGISTRY = ROOT / "skill_registry.yaml"


def write(path: Path, text: str) -> Path:
    path.parent.mkdir(parents=True, exist_ok=True)
    path.write_text(text, encoding="utf-8")
    return path


def load_error(path: Path, overrides: list[str] | None = None, named: object = None) -> str:
    """The ConfigError message of loading ``path``, checked to be one line naming the file.

    ``named`` is what the message names instead of ``path`` (a ``--set`` override).
    """
    with pytest.raises(ConfigError) as info:
        load_config(path, overrides)
    message = str(info.value)
    assert "\n" not in message, message
    assert message.startswith(f"{path if named is None else named}: "), message
    return message


# ------------------------------------------------------------------------------- default.yaml
def test_default_config_loads():
    config, base_dir = load_config(DEFAULT)
    assert isinstance(config, RunConfig)
    assert base_dir == DEFAULT.parent
    assert config.name == "default"
    assert config.seed == 42
    assert config.years == 30
    assert config.households.count == 1000
    assert config.hazard.source == "stochastic"
    assert (base_dir / config.registry).resolve() == REGISTRY


@pytest.mark.parametrize(
    "scenario", sorted(p.name for p in (ROOT / "configs" / "scenarios").glob("*.yaml"))
)
def test_every_shipped_scenario_validates(scenario, capsys):
    assert main(["validate", str(ROOT / "configs" / "scenarios" / scenario)]) == 0
    assert f"{scenario}: ok" in capsys.readouterr().out


def test_default_config_accepts_a_relative_path(monkeypatch):
    monkeypatch.chdir(ROOT)
    config, base_dir = load_config("configs/default.yaml")
    assert base_dir == DEFAULT.parent
    assert config == load_config(DEFAULT)[0]


# ---------------------------------------------------------------------------------- overrides
@pytest.mark.parametrize(
    ("override", "read", "expected"),
    [
        ("years=7", lambda c: c.years, 7),
        ("households.count=60", lambda c: c.households.count, 60),
        ("memory.decay_rate=0.9", lambda c: c.memory.decay_rate, 0.9),
        ("memory.retrieval.top_k=3", lambda c: c.memory.retrieval.top_k, 3),
        ("memory.retrieval.strategy=weighted", lambda c: c.memory.retrieval.strategy, "weighted"),
        ("memory.reflection.enabled=true", lambda c: c.memory.reflection.enabled, True),
        ("insurer.enabled=false", lambda c: c.insurer.enabled, False),
        ("insurance.rate_per_1000=5.5", lambda c: c.insurance.rate_per_1000, 5.5),
        ("government.relax_after=null", lambda c: c.government.relax_after, None),
        (
            "decision.pmt.insurance_skills=[buy_insurance]",
            lambda c: c.decision.pmt.insurance_skills,
            ("buy_insurance",),
        ),
        (
            "events.flood_major.tags=[flood, big]",
            lambda c: c.events.flood_major.tags,
            ("flood", "big"),
        ),
        (
            ("hazard.source=scripted", "hazard.events={3: 9.5, 5: 11}"),
            lambda c: c.hazard.events,
            {3: 9.5, 5: 11.0},
        ),
        ("insurance.zone_multiplier.X=0.5", lambda c: c.insurance.zone_multiplier["X"], 0.5),
    ],
)
def test_set_override_changes_the_field(override, read, expected):
    config, _ = load_config(DEFAULT, [override] if isinstance(override, str) else list(override))
    value = read(config)
    assert value == expected
    assert type(value) is type(expected)


def test_set_override_leaves_sibling_keys_alone():
    default, _ = load_config(DEFAULT)
    config, _ = load_config(
        DEFAULT, ["memory.retrieval.top_k=3", "insurance.zone_multiplier.X=0.5"]
    )
    assert config.memory.retrieval.strategy == default.memory.retrieval.strategy
    assert config.memory.retrieval.w_recency == default.memory.retrieval.w_recency
    assert config.memory.decay_rate == default.memory.decay_rate
    assert config.insurance.zone_multiplier == {"AE": 1.0, "X": 0.5}
    untouched = {"name", "seed", "years", "registry", "households", "hazard", "decision"}
    assert config.model_dump(include=untouched) == default.model_dump(include=untouched)


def test_a_mapping_override_merges_into_its_section():
    default, _ = load_config(DEFAULT)
    config, _ = load_config(DEFAULT, ["memory={decay_rate: 0.5, retrieval: {top_k: 3}}"])
    assert config.memory.decay_rate == 0.5
    assert config.memory.retrieval.top_k == 3
    # The keys it leaves out keep default.yaml's values (4 and "spec"), not the model's own.
    assert config.memory.working_capacity == default.memory.working_capacity
    assert config.memory.retrieval.strategy == default.memory.retrieval.strategy
    data = {"memory": {"decay_rate": 0.9, "retrieval": {"top_k": 5}}}
    assert apply_overrides(data, ["memory={retrieval: {strategy: weighted}}"], "o") == {
        "memory": {"decay_rate": 0.9, "retrieval": {"top_k": 5, "strategy": "weighted"}}
    }
    assert apply_overrides({"years": 3}, ["years={a: 1}"], "o") == {"years": {"a": 1}}


def test_later_override_wins_and_value_may_contain_equals():
    overrides = ["years=3", "years=4", "memory.retrieval.strategy=weighted"]
    config, _ = load_config(DEFAULT, [*overrides, "memory.retrieval.query=a=b"])
    assert config.years == 4
    assert config.memory.retrieval.query == "a=b"


def test_seed_argument_overrides_config_and_set():
    assert load_config(DEFAULT, seed=7)[0].seed == 7
    assert load_config(DEFAULT, ["seed=5"])[0].seed == 5
    assert load_config(DEFAULT, ["seed=5"], seed=9)[0].seed == 9
    assert load_config(DEFAULT, seed=0)[0].seed == 0


def test_apply_overrides_does_not_mutate_its_input():
    data = {"memory": {"decay_rate": 0.9, "retrieval": {"top_k": 5}}, "years": 3}
    result = apply_overrides(data, ["memory.retrieval.top_k=2", "years=4"], "cfg.yaml")
    assert result == {"memory": {"decay_rate": 0.9, "retrieval": {"top_k": 2}}, "years": 4}
    assert data == {"memory": {"decay_rate": 0.9, "retrieval": {"top_k": 5}}, "years": 3}


def test_apply_overrides_creates_missing_sections():
    assert apply_overrides({}, ["memory.retrieval.top_k=2"], "o") == {
        "memory": {"retrieval": {"top_k": 2}}
    }


@pytest.mark.parametrize(
    ("override", "expected"),
    [
        ("years", "KEY=VALUE"),
        ("=5", "KEY=VALUE"),
        ("  =5", "KEY=VALUE"),
        ("years=[1", "cannot parse"),
        ("memory.decay_rate.fast=1", "not a section"),
    ],
)
def test_apply_overrides_errors(override, expected):
    # A --set error names only its flag (the file is not at fault); a file's set: names it.
    for where, start in (("--set ", "--set "), ("set.", "cfg.yaml: set.")):
        with pytest.raises(ConfigError) as info:
            apply_overrides({"memory": {"decay_rate": 0.9}}, [override], "cfg.yaml", where=where)
        message = str(info.value)
        assert message.startswith(start), message
        assert expected in message
        assert "\n" not in message


def test_set_paths_are_made_absolute_against_the_given_folder(tmp_path):
    overrides = [
        "registry=r.yaml",
        "households={table: h.csv}",
        "damage.curves=jrc_north_america",  # a shipped set's name, not a path
        "decision.script=sub/d.csv",
        "decision.llm={cache: c.sqlite, prompt: p.txt}",
        "hazard.rasters={1: a.asc}",
        "hazard.rasters.2=/abs/b.asc",
    ]
    data = apply_overrides({}, overrides, "o", cwd=tmp_path)
    here = tmp_path.resolve()
    assert data == {
        "registry": str(here / "r.yaml"),
        "households": {"table": str(here / "h.csv")},
        "damage": {"curves": "jrc_north_america"},
        "decision": {
            "script": str(here / "sub" / "d.csv"),
            "llm": {"cache": str(here / "c.sqlite"), "prompt": str(here / "p.txt")},
        },
        "hazard": {"rasters": {1: str(here / "a.asc"), 2: "/abs/b.asc"}},
    }
    assert apply_overrides({}, ["registry=r.yaml"], "o") == {"registry": "r.yaml"}  # set:


def test_bad_override_through_load_config_names_the_key():
    message = load_error(DEFAULT, ["years=-1"], named="--set years=-1")
    assert ": years: " in message
    assert "-1" in message


@pytest.mark.parametrize(
    ("overrides", "named", "key"),
    [
        (["years=abc"], "--set years=abc", "years"),
        (["memory={decay_rate: 2}"], "--set memory={decay_rate: 2}", "memory.decay_rate"),
        # The later override gives the value; a mapping merged over it leaves it alone.
        (["memory.decay_rate=3", "memory.decay_rate=2"], "--set memory.decay_rate=2", None),
        (
            ["memory.decay_rate=2", "memory={working_capacity: 3}"],
            "--set memory.decay_rate=2",
            None,
        ),
        (["hazard.events={x: 1}", "hazard.source=scripted"], "--set hazard.events={x: 1}", None),
        (["events.flood_major.tags=[1]"], "--set events.flood_major.tags=[1]", None),
        (["audit.sample=abc"], "--set audit.sample=abc", "audit.sample"),  # a union's member
        (["memory.retrieval.strategi=weighted"], "--set memory.retrieval.strategi=weighted", None),
        (["colour.hue=red"], "--set colour.hue=red", "colour"),  # it made up the section
        # A key only another key makes wrong, set on the command line.
        (["hazard.mean=3"], "--set hazard.mean=3", "hazard.mean"),
        (
            ["events.flood_major={template: 'Year {yr}'}"],
            "--set events.flood_major={template: 'Year {yr}'}",
            "events.flood_major.template",
        ),
        # A pasted key is not repeated in the message, whichever way it was given.
        (
            ["decision.llm.api_key_env=sk-abc123"],
            "--set decision.llm.api_key_env=(value not shown)",
            None,
        ),
        (["decision.llm={api_key_env: sk-abc123}"], "--set decision.llm=(value not shown)", None),
    ],
)
def test_a_bad_value_from_set_names_the_override(overrides, named, key):
    message = load_error(DEFAULT, overrides, named=named)
    assert f"{named}: {key or ''}" in message
    assert str(DEFAULT) not in message
    assert "sk-abc123" not in message


def test_a_bad_value_the_overrides_did_not_set_names_the_file(tmp_path):
    config = write(tmp_path / "c.yaml", f"base: {DEFAULT}\nmemory: {{decay_rate: 1.5}}\n")
    # The bad decay_rate is the file's, merged under the override's mapping.
    assert ": memory.decay_rate: " in load_error(config, ["memory={working_capacity: 3}"])
    # A check across keys whose keys (insurance.rate_per_1000, min_rate) are the file's.
    config = write(tmp_path / "d.yaml", f"base: {DEFAULT}\ninsurer: {{min_rate: 5.0}}\n")
    assert ": insurer: the starting premium " in load_error(config, ["insurer.max_rate=11"])
    # A raster source the file chose, without grids: the file's fault, not the flag's.
    config = write(tmp_path / "e.yaml", f"base: {DEFAULT}\nhazard: {{source: raster}}\n")
    message = load_error(config, ["hazard.units=m"])
    assert message.startswith(f"{config}: hazard.rasters: "), message


@pytest.mark.parametrize(
    "override", ["households.income.median=2e12", "households.renter_contents.median=2e12", None]
)
def test_settings_that_generate_values_a_table_refuses_name_what_gave_them(tmp_path, override):
    """The config file was named for a flag's generated incomes beyond $1e12."""
    income = "" if override else ", income: {median: 2.0e12}"  # None: the file sets it
    child = write(tmp_path / "child.yaml", f"base: {DEFAULT}\nhouseholds: {{count: 50{income}}}\n")
    overrides = [override] if override else []
    config, base_dir = load_config(child, overrides)
    with pytest.raises(ConfigError) as info:
        build_model(config, base_dir, str(child), setting_origin(str(child), overrides))
    named = f"--set {override}" if override else str(child)
    assert str(info.value).startswith(f"{named}: households: generated "), str(info.value)


def test_a_bad_seed_argument_names_it():
    with pytest.raises(ConfigError, match=r"^--seed -1: seed: "):
        load_config(DEFAULT, seed=-1)


# ------------------------------------------------------------------------- base: inheritance
@pytest.mark.parametrize("relative", [False, True], ids=["absolute", "relative"])
def test_base_inheritance_merges_deeply(tmp_path, relative):
    base = os.path.relpath(DEFAULT, tmp_path / "exp") if relative else str(DEFAULT)
    child = write(
        tmp_path / "exp" / "child.yaml",
        f"base: {base}\n"
        "name: child\n"
        "years: 3\n"
        "households: {count: 40}\n"
        "memory:\n"
        "  decay_rate: 0.8\n"
        "  retrieval: {top_k: 7}\n"
        "insurance: {zone_multiplier: {X: 0.4}}\n",
    )
    config, base_dir = load_config(child)
    default, _ = load_config(DEFAULT)
    assert base_dir == child.parent
    # child wins
    assert config.name == "child"
    assert config.years == 3
    assert config.households.count == 40
    assert config.memory.decay_rate == 0.8
    assert config.memory.retrieval.top_k == 7
    # other base keys kept, also next to overridden ones in the same section
    assert config.seed == default.seed
    assert config.households.owner_share == default.households.owner_share
    assert config.households.income == default.households.income
    assert config.memory.working_capacity == default.memory.working_capacity
    assert config.memory.retrieval.strategy == default.memory.retrieval.strategy
    assert config.insurance.zone_multiplier == {"AE": 1.0, "X": 0.4}
    assert config.hazard == default.hazard
    assert config.decision == default.decision
    # the base's relative registry still points at the real file
    assert (base_dir / config.registry).resolve() == REGISTRY
    model = build_model(config, base_dir, str(child))
    assert len(model.households) == 40
    assert model.registry.default_skill == "do_nothing"


def test_base_chain_and_overrides_on_top(tmp_path):
    write(tmp_path / "a" / "mid.yaml", f"base: {DEFAULT}\nyears: 6\nmemory: {{decay_rate: 0.8}}\n")
    child = write(
        tmp_path / "b" / "child.yaml",
        "base: ../a/mid.yaml\nmemory: {working_capacity: 4}\nhouseholds: {count: 30}\n",
    )
    config, base_dir = load_config(child, ["years=2"], seed=11)
    assert config.years == 2  # --set beats the chain
    assert config.seed == 11
    assert config.memory.decay_rate == 0.8  # from the middle file
    assert config.memory.working_capacity == 4  # from the child
    assert config.memory.episodic_capacity == 50  # from default.yaml
    assert (base_dir / config.registry).resolve() == REGISTRY
    assert len(build_model(config, base_dir).households) == 30


# ------------------------------------------------ year tables: replaced whole, never merged
SCRIPTED = "hazard: {source: scripted, events: {2: 9.5, 4: 7.0}}\n"


def test_a_child_events_table_replaces_its_base_table(tmp_path):
    write(tmp_path / "base.yaml", f"base: {DEFAULT}\n{SCRIPTED}")
    child = write(tmp_path / "child.yaml", "base: base.yaml\nhazard: {events: {}}\n")
    config, _ = load_config(child)
    assert config.hazard.events == {}  # a flood-free control, not the base's floods
    assert config.hazard.source == "scripted"  # the rest of the section still merges


@pytest.mark.parametrize(
    ("override", "expected"),
    [
        ("hazard.events={}", {}),
        ("hazard.events={4: 9.5}", {4: 9.5}),
        ("hazard={events: {4: 9.5}}", {4: 9.5}),
    ],
)
def test_a_set_events_table_replaces_the_config_table(tmp_path, override, expected):
    config_path = write(tmp_path / "c.yaml", f"base: {DEFAULT}\n{SCRIPTED}")
    config, _ = load_config(config_path, [override])
    assert config.hazard.events == expected
    assert config.hazard.source == "scripted"


@pytest.mark.parametrize(
    ("overrides", "expected"),
    [
        (["hazard.events.4=12.0"], {2: 9.5, 4: 12.0}),  # the file's year 4, not a second one
        (["hazard.events.6=3.0"], {2: 9.5, 4: 7.0, 6: 3.0}),
        (["hazard.events.4=12.0", "hazard.events.4=1.5"], {2: 9.5, 4: 1.5}),
        # The file's YAML would read these keys as year 4 too.
        (["hazard.events.04=12.0"], {2: 9.5, 4: 12.0}),
        (["hazard.events.0x4=12.0"], {2: 9.5, 4: 12.0}),
        (["hazard.events.+4=12.0"], {2: 9.5, 4: 12.0}),
    ],
)
def test_a_set_year_of_an_events_table_sets_that_year_only(tmp_path, overrides, expected):
    config_path = write(tmp_path / "c.yaml", f"base: {DEFAULT}\n{SCRIPTED}")
    config, _ = load_config(config_path, overrides)
    assert config.hazard.events == expected


@pytest.mark.parametrize("key", ["3", "03"])
def test_a_bad_value_of_a_set_year_names_the_flag_not_the_file(tmp_path, key):
    config_path = write(tmp_path / "c.yaml", f"base: {DEFAULT}\n{SCRIPTED}")
    override = f"hazard.events.{key}=.nan"
    message = load_error(config_path, [override], named=f"--set {override}")
    assert message.startswith(f"--set {override}: hazard.events.3: ")


def test_a_bad_set_value_of_a_year_the_file_writes_as_a_float_names_the_flag(tmp_path):
    config_path = write(
        tmp_path / "c.yaml",
        f"base: {DEFAULT}\nhazard: {{source: scripted, events: {{2.0: 9.5, 4: 7.0}}}}\n",
    )
    override = "hazard.events.2=.nan"
    assert load_error(config_path, [override], named=f"--set {override}")


@pytest.mark.parametrize(
    ("section", "override"),
    [
        ("hazard: {source: scripted, events: {'1e0': 3.0}}", "hazard.events.1=4.0"),
        ("insurance: {zone_multiplier: {'1.0': 2.0}}", "insurance.zone_multiplier.1=2.0"),
    ],
)
def test_a_bad_key_of_the_file_is_not_blamed_on_a_set_of_another(tmp_path, section, override):
    """A quoted '1e0' is no year to the field; a zone '1.0' is not the flag's zone 1."""
    config_path = write(tmp_path / "c.yaml", f"base: {DEFAULT}\n{section}\n")
    assert load_error(config_path, [override])


def test_a_set_year_replaces_a_zero_padded_year_of_the_file(tmp_path):
    """`010:` in a file is year 10 (YAML 1.2), so `hazard.events.010` and `.10` are that year."""
    config_path = write(
        tmp_path / "c.yaml",
        f"base: {DEFAULT}\nyears: 12\nhazard: {{source: scripted, events: {{010: 5.0, 3: 4.0}}}}\n",
    )
    for key in ("010", "10", "1_0"):
        config, _ = load_config(config_path, [f"hazard.events.{key}=9.5"])
        assert config.hazard.events == {3: 4.0, 10: 9.5}


def test_a_child_rasters_table_replaces_its_base_table(tmp_path):
    write(tmp_path / "base.yaml", "hazard: {source: raster, rasters: {1: a.asc, 2: b.asc}}\n")
    child = write(tmp_path / "child.yaml", "base: base.yaml\nhazard: {rasters: {2: c.asc}}\n")
    assert resolve_base(child, read_yaml(child), (child,))["hazard"] == {
        "source": "raster",
        "rasters": {2: "c.asc"},
    }


def test_set_replaces_rasters_whole_but_merges_coefficient_tables():
    data = {
        "hazard": {"rasters": {1: "a.asc", 2: "b.asc"}},
        "insurance": {"zone_multiplier": {"AE": 1.0, "X": 0.3}},
        "decision": {"pmt": {"asc": {"relocate": -9.0, "elevate_house": -6.5}}},
    }
    overrides = [
        "hazard.rasters={2: c.asc}",
        "insurance.zone_multiplier={X: 0.5}",
        "decision={pmt: {asc: {relocate: -8.0}}}",
    ]
    assert apply_overrides(data, overrides, "o") == {
        "hazard": {"rasters": {2: "c.asc"}},
        "insurance": {"zone_multiplier": {"AE": 1.0, "X": 0.5}},
        "decision": {"pmt": {"asc": {"relocate": -8.0, "elevate_house": -6.5}}},
    }


def test_child_registry_is_relative_to_the_child(tmp_path):
    registry = write(tmp_path / "reg" / "skills.yaml", REGISTRY.read_text(encoding="utf-8"))
    child = write(
        tmp_path / "child.yaml", f"base: {DEFAULT}\nregistry: reg/skills.yaml\nyears: 2\n"
    )
    config, base_dir = load_config(child)
    assert (base_dir / config.registry).resolve() == registry


def test_base_curve_file_stays_relative_to_the_base(tmp_path):
    write(
        tmp_path / "base" / "curves.yaml",
        "source: test\nunits: feet_above_first_floor\n"
        "structure: {depth: [0, 10], damage_fraction: [0.0, 0.5]}\n"
        "contents: {depth: [0, 10], damage_fraction: [0.0, 0.25]}\n",
    )
    write(
        tmp_path / "base" / "base.yaml",
        f"base: {DEFAULT}\ndamage: {{curves: curves.yaml}}\nhouseholds: {{count: 30}}\nyears: 2\n",
    )
    child = write(tmp_path / "child" / "child.yaml", "base: ../base/base.yaml\nseed: 3\n")
    config, base_dir = load_config(child)
    model = build_model(config, base_dir, str(child))
    assert model.curves.source == "test"


def test_base_llm_cache_and_prompt_stay_relative_to_the_base(tmp_path):
    write(tmp_path / "base" / "prompt.txt", "Decide for {agent_id}.\n")
    write(
        tmp_path / "base" / "base.yaml",
        f"base: {DEFAULT}\ndecision:\n  policy: llm\n"
        "  llm: {mode: replay, cache: replies.sqlite, prompt: prompt.txt}\n",
    )
    child = write(tmp_path / "child" / "child.yaml", "base: ../base/base.yaml\nseed: 3\n")
    config, base_dir = load_config(child)
    assert (base_dir / config.decision.llm.cache) == tmp_path / "base" / "replies.sqlite"
    assert (base_dir / config.decision.llm.prompt) == tmp_path / "base" / "prompt.txt"


# ------------------------------------------------------------------------------ error messages
@pytest.mark.parametrize(
    ("text", "key", "detail"),
    [
        ("colour: red\n", "colour", "unknown key"),
        ("memory:\n  retrieval:\n    strategi: weighted\n", "memory.retrieval.strategi", "unknown"),
        ("households: {count: 30, colour: red}\n", "households.colour", "unknown"),
        ("years: many\n", "years", "many"),
        ("memory: {working_capacity: ten}\n", "memory.working_capacity", "ten"),
        ("memory: {decay_rate: 1.5}\n", "memory.decay_rate", "1.5"),
        ("households: {count: 0}\n", "households.count", "0"),
        ("years: 0\n", "years", "0"),
        ("seed: -3\n", "seed", "-3"),
        ("name: my run\n", "name", "my run"),
        ("hazard: {source: tsunami}\n", "hazard.source", "tsunami"),
        ("memory: {retrieval: {strategy: psychic}}\n", "memory.retrieval", "psychic"),
        (
            "government: {initial_subsidy: 0.99, max_subsidy: 0.95}\n",
            "government",
            "initial_subsidy",
        ),
        ("insurer: {min_rate: 20}\n", "insurer", "min_rate"),
        ('events:\n  claim_paid: {template: "Year {yeer}", importance: 0.7}\n', "", "yeer"),
        ('events:\n  claim_paid: {template: "{year.real}", importance: 0.7}\n', "", "year.real"),
        ('events:\n  claim_paid: {template: "Year {year", importance: 0.7}\n', "", "malformed"),
        ('events:\n  claim_paid: {template: " ", importance: 0.7}\n', "", "empty: the memory"),
        (
            "events:\n  claim_paid: {template: x, importance: 0.7, tags: [claim, '']}\n",
            "events.claim_paid.tags",
            "tag 1 is empty",
        ),
        (
            'events:\n  claim_paid: {template: "\\u200b\\u034f", importance: 0.7}\n',
            "",
            "empty: the memory",
        ),
        (
            'events:\n  claim_paid: {template: x, importance: 0.7, tags: ["\\u3164"]}\n',
            "events.claim_paid.tags",
            "tag 0 is empty",
        ),
        (
            "events:\n  claim_paid: {template: x, importance: 0.7, tags: [claim, paid, claim]}\n",
            "events.claim_paid.tags",
            "tag 2 ('claim') is given twice (first as tag 0)",
        ),
    ],
    ids=[
        "unknown-top-level",
        "unknown-nested",
        "unknown-households",
        "wrong-type-years",
        "wrong-type-int",
        "decay-rate-above-1",
        "zero-households",
        "zero-years",
        "negative-seed",
        "bad-name",
        "unknown-hazard-source",
        "unknown-retrieval-strategy",
        "subsidy-above-max",
        "min-rate-above-max",
        "template-unknown-placeholder",
        "template-attribute-access",
        "template-unclosed-brace",
        "template-blank",
        "tag-blank",
        "template-of-zero-width-characters",
        "tag-of-a-hangul-filler",
        "tag-given-twice",
    ],
)
def test_config_error_names_file_and_key(tmp_path, text, key, detail):
    path = write(tmp_path / "bad.yaml", text)
    message = load_error(path)
    key = key or "events.claim_paid.template"
    assert f": {key}: " in message or f": {key}." in message, message
    assert detail in message, message


def test_the_same_errors_through_base_and_set(tmp_path):
    child = write(tmp_path / "child.yaml", f"base: {DEFAULT}\nmemory: {{decay_rate: 1.5}}\n")
    assert ": memory.decay_rate: " in load_error(child)
    message = load_error(
        DEFAULT, ["memory.retrieval.strategi=weighted"], "--set memory.retrieval.strategi=weighted"
    )
    assert ": memory.retrieval.strategi: unknown key" in message
    child = write(
        tmp_path / "other.yaml", f"base: {DEFAULT}\ngovernment: {{initial_subsidy: 0.99}}\n"
    )
    problem = "government: initial_subsidy (0.99) must lie within [min_subsidy, max_subsidy]"
    assert load_error(child).startswith(f"{child}: {problem}")
    override = "government.initial_subsidy=0.99"
    assert load_error(DEFAULT, [override], f"--set {override}").startswith(
        f"--set {override}: {problem}"
    )


def test_several_problems_are_counted_on_one_line(tmp_path):
    path = write(tmp_path / "bad.yaml", "years: many\nseed: -1\ncolour: red\n")
    assert "2 more problems, the next at " in load_error(path)


def test_a_key_out_of_its_section_is_named_beside_the_emptied_section(tmp_path):
    """An unindented key leaves its section empty: the message points at the key as well."""
    path = write(tmp_path / "bad.yaml", "years: 3\nadaptation:\nelevation_cost: 60000.0\n")
    message = load_error(path)
    assert message.startswith(f"{path}: adaptation: Input should be a valid dictionary")
    assert message.endswith("(and 1 more problem, the next at elevation_cost)")


def test_yaml_syntax_error_names_the_line(tmp_path):
    path = write(tmp_path / "bad.yaml", "years: 3\nmemory:\n  decay_rate: 0.9\n retrieval: {}\n")
    message = load_error(path)
    assert "line 4" in message
    assert "YAML" in message


def test_unclosed_flow_mapping_names_a_line(tmp_path):
    path = write(tmp_path / "bad.yaml", "households: {count: 30\nyears: 2\n")
    assert "line " in load_error(path)


@pytest.mark.parametrize(
    ("text", "kind"), [("- years: 3\n- seed: 1\n", "list"), ("just words\n", "text ('just words')")]
)
def test_top_level_must_be_a_mapping(tmp_path, text, kind):
    message = load_error(write(tmp_path / "bad.yaml", text))
    assert "top level" in message
    assert kind in message


@pytest.mark.parametrize(
    "text", ["", "\n  \n", "# nothing yet\n# still nothing\n", "---\n# a comment\n...\n"]
)
def test_an_empty_file_is_refused_as_empty(tmp_path, text):
    # Not the defaults: next to no registry it used to fail on a missing skill_registry.yaml.
    message = load_error(write(tmp_path / "empty.yaml", text))
    assert (
        message
        == f"{tmp_path / 'empty.yaml'}: the file is empty (nothing but blank lines and comments)"
    )


def test_an_empty_base_file_is_named(tmp_path):
    write(tmp_path / "blank.yaml", "# to be written\n")
    child = write(tmp_path / "child.yaml", "base: blank.yaml\nyears: 2\n")
    with pytest.raises(ConfigError, match=r"blank\.yaml: the file is empty"):
        load_config(child)


def test_a_null_document_is_not_a_mapping(tmp_path):
    message = load_error(write(tmp_path / "null.yaml", "null\n"))
    assert message.endswith("top level must be a mapping of keys (key: value lines), got null")


def test_a_csv_table_given_as_a_config_is_named_as_one(tmp_path):
    message = load_error(write(tmp_path / "households.csv", "agent_id,income\nh1,50000\n"))
    expected = "got text ('agent_id,income h1,50000'): a CSV file, where a YAML config goes"
    assert message.endswith(expected), message


def test_an_out_folder_that_is_a_dangling_link_says_where_the_link_points(tmp_path):
    link = tmp_path / "out"
    link.symlink_to(tmp_path / "gone" / "runs")
    with pytest.raises(ConfigError) as info:
        create_output_folder(link)
    assert str(info.value) == (
        f"{link}: cannot create the output folder: {link} is a link to "
        f"{tmp_path / 'gone' / 'runs'}, which does not exist"
    )


@pytest.mark.parametrize(
    ("make", "out", "reason"),
    [
        (lambda t: (t / "f").write_text("x"), "f", "{t}/f is a file, not a folder"),
        (lambda t: (t / "f").write_text("x"), "f/runs", "{t}/f is a file, not a folder"),
        (
            lambda t: (t / "l").symlink_to(t / "gone"),
            "l/runs",
            "{t}/l is a link to {t}/gone, which does not exist",
        ),
        (
            lambda t: (t / "l").symlink_to(t / "l"),
            "l",
            "{t}/l is a link that leads round in a loop",
        ),
    ],
    ids=["file", "file-above", "dangling-link-above", "loop"],
)
def test_an_out_folder_blocked_by_a_file_or_link_says_which_and_why(tmp_path, make, out, reason):
    """mkdir says only "File exists" (or "Too many levels of symbolic links")."""
    make(tmp_path)
    with pytest.raises(ConfigError) as info:
        create_output_folder(tmp_path / out)
    expected = f"{tmp_path / out}: cannot create the output folder: {reason.format(t=tmp_path)}"
    assert str(info.value) == expected


def test_missing_file(tmp_path):
    message = load_error(tmp_path / "nope.yaml")
    assert "not found" in message


def test_missing_base_file_names_it(tmp_path):
    child = write(tmp_path / "child.yaml", "base: no_such_base.yaml\nyears: 2\n")
    with pytest.raises(ConfigError, match=r"no_such_base\.yaml: file not found") as info:
        load_config(child)
    assert "\n" not in str(info.value)


def test_base_must_be_a_string(tmp_path):
    message = load_error(write(tmp_path / "bad.yaml", "base: [a.yaml, b.yaml]\n"))
    assert ": base: " in message


def test_circular_base(tmp_path):
    first = write(tmp_path / "a.yaml", "base: b.yaml\nyears: 2\n")
    second = write(tmp_path / "b.yaml", "base: a.yaml\nseed: 1\n")
    with pytest.raises(ConfigError) as info:
        load_config(first)
    message = str(info.value)
    assert "\n" not in message
    # the cycle closes at b.yaml's base: key, which points back at a.yaml
    assert message.startswith(f"{second}: base: ")
    assert "circular" in message
    assert str(first) in message


def test_base_that_names_itself(tmp_path):
    path = write(tmp_path / "self.yaml", "base: ./self.yaml\nyears: 2\n")
    assert "circular" in load_error(path)


def test_config_error_is_a_value_error():
    assert issubclass(ConfigError, ValueError)


# ---------------------------------------------------------------------------------- round trip
@pytest.mark.parametrize(
    "overrides",
    [
        [],
        [
            "hazard.source=scripted",
            "hazard.kind=depth",
            "hazard.events={2: 3.5, 4: 1}",
            "memory.retrieval.strategy=weighted",
            "memory.retrieval.query=flood damage",
            "memory.retrieval.recency_decay=0.9",
            "memory.reflection.enabled=true",
            "government.budget=250000",
            "government.relax_after=null",
            "social.neighborhood=small_world",
            "events.flood_major.tags=[flood, big]",
            "households.table=data/households.csv",
        ],
    ],
    ids=["default", "non-default"],
)
def test_to_yaml_dict_round_trips(tmp_path, overrides):
    config, _ = load_config(DEFAULT, overrides)
    dumped = write(tmp_path / "resolved.yaml", yaml.safe_dump(config.to_yaml_dict()))
    again, _ = load_config(dumped)
    assert again == config
    assert config_hash(again) == config_hash(config)
    assert again.to_yaml_dict() == config.to_yaml_dict()


def _documented_fields(model: type[BaseModel], prefix: str = "") -> Iterator[tuple[str, bool]]:
    """(dotted key, has a description) for every field of ``model`` and its sections."""
    for name, field in model.model_fields.items():
        key = f"{prefix}{name}"
        yield key, bool(field.description)
        annotation = field.annotation
        if isinstance(annotation, type) and issubclass(annotation, BaseModel):
            yield from _documented_fields(annotation, f"{key}.")


def test_every_config_key_is_documented_where_it_is_defined():
    undocumented = [key for key, has in _documented_fields(RunConfig) if not has]
    assert undocumented == []


def test_an_error_names_the_file_in_the_base_chain_that_set_the_key(tmp_path):
    shared = tmp_path / "shared.yaml"
    shared.write_text(f"base: {DEFAULT}\nmemory: {{decay_rate: 1.5}}\n", encoding="utf-8")
    study = tmp_path / "study.yaml"
    study.write_text("base: shared.yaml\nyears: 3\n", encoding="utf-8")
    with pytest.raises(ConfigError) as info:
        load_config(study)
    assert str(info.value).startswith(f"{shared}: memory.decay_rate: ")
    # What sets the key last is named: the study, or the --set override on top of it.
    study.write_text("base: shared.yaml\nmemory: {decay_rate: 2.5}\n", encoding="utf-8")
    with pytest.raises(ConfigError, match=r"^" + re.escape(f"{study}: memory.decay_rate: ")):
        load_config(study)
    with pytest.raises(ConfigError, match=r"^--set memory\.decay_rate=3\.5: memory\.decay_rate: "):
        load_config(study, ["memory.decay_rate=3.5"])


def test_a_curve_file_is_recognised_whatever_the_case_of_its_suffix():
    assert all(is_curve_file(name) for name in ("a.yaml", "a.YML", "B.Yaml", "dir/curves"))
    assert not is_curve_file("jrc_north_america")


@pytest.mark.parametrize(
    ("override", "where"),
    [
        ("insurance.zone_multiplier.X=false", "insurance.zone_multiplier: X: "),
        ("decision.pmt.asc.relocate=true", "decision.pmt.asc: relocate: "),
        ("decision.pmt.memory_weights.seed=true", "decision.pmt.memory_weights: seed: "),
        ("audit.sample=true", "audit.sample: "),
        ("hazard.events={10: true}", "hazard.events: 10: "),
        ("hazard.events={true: 9.0}", "hazard.events: True: "),
    ],
)
def test_a_boolean_is_not_a_number_inside_mappings_and_unions_either(override, where):
    overrides = [override] + (["hazard.source=scripted"] if "events" in override else [])
    with pytest.raises(ConfigError, match=f"{re.escape(where)}expected a number, not a boolean"):
        load_config(DEFAULT, overrides)


def test_a_boolean_in_an_lhs_range_is_not_a_number():
    with pytest.raises(ValueError, match=r"insurer\.tolerance\[0\]: expected a number"):
        SweepConfig.model_validate({"lhs": {"insurer.tolerance": [False, 0.5]}, "samples": 4})


def test_booleans_where_booleans_belong_and_lists_of_ids_still_load():
    config, _ = load_config(DEFAULT, ["audit.gzip=true", "audit.sample=[H00001, H00002]"])
    assert config.audit.gzip is True
    assert config.audit.sample == ["H00001", "H00002"]


# ---------------------------------------------------------------------------------- strictness
@pytest.mark.parametrize(
    ("text", "key", "problem"),
    [
        ("insurer: {enabled: 1}\n", "insurer.enabled", "valid boolean (got 1)"),
        ("memory: {reflection: {enabled: 1}}\n", "memory.reflection.enabled", "valid boolean"),
        ("social: {observe: 'yes'}\n", "social.observe", "valid boolean (got 'yes')"),
        ('years: "10"\n', "years", "valid integer (got '10')"),
        ("years: 10.0\n", "years", "valid integer (got 10.0)"),
        ("memory: {decay_rate: '0.9'}\n", "memory.decay_rate", "valid number (got '0.9')"),
        ("memory: {retrieval: {w_recency: '1'}}\n", "memory.retrieval.w_recency", "valid number"),
        ("decision: {pmt: {beta_tp: '6'}}\n", "decision.pmt.beta_tp", "valid number (got '6')"),
        ("insurance: {zone_multiplier: {X: '0.3'}}\n", "insurance.zone_multiplier.X", "number"),
        ("events: {flood_major: {tags: [flood, 1]}}\n", "events.flood_major.tags.1", "string"),
    ],
)
def test_a_value_of_another_type_is_refused_not_converted(tmp_path, text, key, problem):
    path = write(tmp_path / "c.yaml", f"base: {DEFAULT}\n{text}")
    message = load_error(path)
    assert f": {key}: Input should be a " in message
    assert problem in message


@pytest.mark.parametrize(
    ("override", "key"),
    [("memory.reflection.enabled=1", "memory.reflection.enabled"), ("years='12'", "years")],
)
def test_set_values_are_as_strict_as_the_file(override, key):
    message = load_error(DEFAULT, [override], named=f"--set {override}")
    assert f": {key}: Input should be a valid " in message


def test_what_yaml_and_set_give_for_each_type_still_loads(tmp_path):
    path = write(
        tmp_path / "c.yaml",
        f"base: {DEFAULT}\nadaptation: {{elevation_cost: 50000}}\n"  # an int for a float
        "hazard: {source: scripted, events: {3: 9, '5': 2.5}}\n"  # year keys as resolved YAML has
        "events: {flood_major: {tags: [flood, big]}}\n",  # a list for a tuple
    )
    config, _ = load_config(path, ["years=12", "memory.reflection.enabled=true", "seed=7"])
    assert config.adaptation.elevation_cost == 50000.0
    assert isinstance(config.adaptation.elevation_cost, float)
    assert config.hazard.events == {3: 9.0, 5: 2.5}
    assert config.events.flood_major.tags == ("flood", "big")
    assert (config.years, config.seed, config.memory.reflection.enabled) == (12, 7, True)


# ------------------------------------------------------------------- keys the run would not read
@pytest.mark.parametrize(
    ("override", "key"),
    [
        ("memory.retrieval.w_recency=2", "w_recency"),
        ("memory.retrieval.w_importance=0", "w_importance"),
        ("memory.retrieval.w_relevance=0.5", "w_relevance"),
        ("memory.retrieval.recency_decay=0.5", "recency_decay"),
    ],
)
def test_a_retrieval_weight_under_spec_is_refused(override, key):
    message = load_error(DEFAULT, [override], named=f"--set {override}")
    assert message.endswith(
        f": memory.retrieval: {key}: only read by strategy weighted (strategy is spec)"
    )
    weighted = ["memory.retrieval.strategy=weighted", "memory.retrieval.query=flood damage"]
    config, _ = load_config(DEFAULT, [override, *weighted])
    assert getattr(config.memory.retrieval, key) == yaml.safe_load(override.partition("=")[2])


def test_a_relevance_weight_without_a_query_is_refused():
    weighted = ["memory.retrieval.strategy=weighted", "memory.retrieval.w_relevance=0.5"]
    message = load_error(DEFAULT, weighted, named="--set memory.retrieval.w_relevance=0.5")
    assert message.endswith(
        ": memory.retrieval: w_relevance: only read with a query (query is null)"
    )


@pytest.mark.parametrize(
    ("override", "policy"),
    [
        ("memory.retention.w_importance=0.5", "importance_weighted"),
        ("memory.retention.w_recency=0.5", "importance_weighted"),
        ("memory.retention.archive_capacity=10", "tiered"),
        ("memory.retention.demote_below=0.3", "tiered"),
        ("memory.retention.promote_after=3", "tiered"),
    ],
)
@pytest.mark.parametrize("other", ["decayed_importance", "fifo", "importance_weighted", "tiered"])
def test_a_retention_setting_under_another_policy_is_refused(override, policy, other):
    overrides = [f"memory.retention.policy={other}", override]
    key = override.partition("=")[0].rpartition(".")[2]
    if other == policy:
        config, _ = load_config(DEFAULT, overrides)
        assert getattr(config.memory.retention, key) == yaml.safe_load(override.partition("=")[2])
    else:
        message = load_error(DEFAULT, overrides, named=f"--set {override}")
        assert message.endswith(
            f": memory.retention: {key}: only read by policy {policy} (policy is {other})"
        )


@pytest.mark.parametrize(
    ("text", "override"),
    [
        ("memory: {retrieval: {w_recency: 2.0}}\n", "memory.retrieval.w_recency=2.0"),
        ("hazard: {events: {4: 9.5}}\n", "hazard.events={4: 9.5}"),
        ("hazard: {events: {4: 9.5}}\n", "hazard={events: {4: 9.5}}"),
    ],
)
def test_a_key_refused_by_a_check_across_keys_names_what_set_it(tmp_path, text, override):
    """The file when the file set the refused key; its flag when a --set did (README)."""
    path = write(tmp_path / "c.yaml", f"base: {DEFAULT}\n{text}")
    file_message = load_error(path)
    flag_message = load_error(DEFAULT, [override], named=f"--set {override}")
    detail = file_message.removeprefix(f"{path}: ")
    assert detail == flag_message.removeprefix(f"--set {override}: ")
    assert detail.startswith(("memory.retrieval: w_recency: only read", "hazard.events: only"))


@pytest.mark.parametrize(
    ("overrides", "problem"),
    [
        # The memory settings' own checks name the key without a colon after it.
        (["memory.retrieval.top_k=-5"], "memory.retrieval: top_k must be a non-negative"),
        (["memory.retention.promote_after=0"], "memory.retention: promote_after must be"),
        (["memory.reflection={importance: 2.0}"], "memory.reflection: importance must be"),
        # Checks of two keys against each other: whichever of them a flag set.
        (["insurer.max_rate=1.5"], "insurer: min_rate (2.0) must not exceed max_rate (1.5)"),
        (["households.first_floor_height.low=9"], "households.first_floor_height: low (9)"),
        (["government.initial_subsidy=0"], "government: initial_subsidy (0.0) must lie"),
        # A key of another section, named in full; the flag's key named after the file's.
        (["insurance.rate_per_1000=1.5"], "insurer: the starting premium insurance.rate"),
        (["insurer.min_rate=5"], "insurer: the starting premium insurance.rate_per_1000 (4.0)"),
        # Two flags that fail only together: the one of the key the message names first.
        (["insurer.min_rate=5", "insurer.max_rate=3"], "insurer: min_rate (5.0) must not"),
        # Two flags each at fault in one section: the one the message is about.
        (
            ["memory.retention.demote_below=2", "memory.retention.w_importance=0.9"],
            "memory.retention: demote_below must be in [0, 1], got 2.0",
        ),
        # A field's check naming a sibling by its name alone: the file was named.
        (["hazard.distribution=lognormal", "hazard.sigma=0.5"], "hazard.mean: required for"),
        (["hazard.source=raster"], "hazard.rasters: a raster source needs at least one year"),
    ],
)
def test_a_flag_faulted_by_a_check_across_keys_is_named_in_place_of_the_file(overrides, problem):
    """Such checks once named configs/default.yaml, which was right, for a value a flag gave."""
    message = load_error(DEFAULT, overrides, named=f"--set {overrides[0]}")
    assert message.removeprefix(f"--set {overrides[0]}: ").startswith(problem)


def _leaf_keys(node: dict, above: tuple[str, ...] = ()) -> Iterator[str]:
    for key, value in node.items():
        if isinstance(value, dict) and value:
            yield from _leaf_keys(value, (*above, str(key)))
        else:
            yield ".".join((*above, str(key)))


DEFAULT_LEAVES = sorted(_leaf_keys(yaml.safe_load(DEFAULT.read_text(encoding="utf-8"))))


BAD_VALUES = ["-5", "0", "2", "1.5", "-0.5", "1000000000", "zzz", "true", "[]"]


@settings(max_examples=80)
@given(
    overrides=st.lists(
        st.builds("{}={}".format, st.sampled_from(DEFAULT_LEAVES), st.sampled_from(BAD_VALUES)),
        min_size=1,
        max_size=2,
    )
)
def test_a_value_refused_from_the_command_line_names_a_flag(overrides):
    """Whatever keys of default.yaml flags make wrong, the user is sent to one of the flags."""
    try:
        load_config(DEFAULT, overrides)
    except ConfigError as err:
        message = str(err)
    else:
        return  # values the keys take
    # A secret's value is not shown (decision.llm.api_key_env).
    shown = [f"--set {o}: " for o in overrides]
    shown += [f"--set {o.partition('=')[0]}=(value not shown): " for o in overrides]
    assert message.startswith(tuple(shown)), message


def test_a_negative_scripted_depth_names_what_gave_it(tmp_path):
    # It was refused only when the hazard source was built, naming configs/default.yaml (the
    # file that set the hazard section), which holds neither the depth nor kind: depth.
    override = "hazard.events={4: -1.0}"
    message = load_error(SINGLE_FLOOD, ["hazard.kind=depth", override], named=f"--set {override}")
    assert message.endswith(": hazard: events: year 4: a depth (kind depth) must be >= 0, got -1.0")
    path = write(
        tmp_path / "c.yaml", f"base: {SINGLE_FLOOD}\nhazard: {{kind: depth, events: {{4: -1.0}}}}\n"
    )
    assert load_error(path).startswith(f"{path}: hazard: events: year 4: ")
    config, _ = load_config(SINGLE_FLOOD, ["hazard.events={4: -1.0}"])  # a level may be < 0
    assert config.hazard.events == {4: -1.0}


@pytest.mark.parametrize("key", ["4.5", "true", "null"])
def test_a_bad_year_key_given_with_set_names_the_flag(key):
    # pydantic locates a bad mapping key by its text ('4.5'), not by the YAML value (4.5).
    override = f"hazard.events={{{key}: 9.5}}"
    message = load_error(SINGLE_FLOOD, [override], named=f"--set {override}")
    assert "hazard.events" in message


@pytest.mark.parametrize("neighborhood", ["moore", "von_neumann"])
@pytest.mark.parametrize(("override", "key"), [("social.k=4", "k"), ("social.p=0.3", "p")])
def test_a_small_world_setting_on_a_grid_is_refused(neighborhood, override, key):
    overrides = [f"social.neighborhood={neighborhood}", override]
    message = load_error(DEFAULT, overrides, named=f"--set {override}")
    assert f": social.{key}: only read by neighborhood small_world " in message
    assert f"(neighborhood is {neighborhood})" in message
    config, _ = load_config(DEFAULT, ["social.neighborhood=small_world", override])
    assert getattr(config.social, key) == yaml.safe_load(override.partition("=")[2])


def test_the_default_config_sets_every_such_key_at_its_default():
    # default.yaml lists them all: none is refused or warned about.
    config, _ = load_config(DEFAULT)
    assert ignored_keys(config) == []


def test_llm_settings_under_another_policy_are_named_in_a_warning():
    config, _ = load_config(LLM_SCENARIO, ["decision.policy=pmt", "decision.llm_share=0.5"])
    keys = ["decision.llm_share", "decision.llm.mode", "decision.llm.cache"]
    assert ignored_keys(config) == [(keys, "decision.policy is pmt, not llm")]
    with pytest.warns(IgnoredKeyWarning) as caught:
        warn_ignored_keys(config, "llm.yaml")
    expected = (
        "llm.yaml: decision.llm_share, decision.llm.mode and decision.llm.cache are ignored "
        "because decision.policy is pmt, not llm"
    )
    assert [str(w.message) for w in caught] == [expected]
    assert issubclass(IgnoredKeyWarning, UserWarning)
    config, _ = load_config(
        DEFAULT,
        ["decision.policy=scripted", "decision.script=x.csv", "decision.llm.model=llama3"],
    )
    assert ignored_keys(config) == [
        (["decision.llm.model"], "decision.policy is scripted, not llm")
    ]
    config, _ = load_config(LLM_SCENARIO)  # read by the policy: nothing to say
    assert ignored_keys(config) == []


def test_a_gzip_level_without_gzip_is_named_in_a_warning():
    config, _ = load_config(DEFAULT, ["audit.gzip_level=3"])
    assert ignored_keys(config) == [(["audit.gzip_level"], "audit.gzip is false")]
    with pytest.warns(IgnoredKeyWarning) as caught:
        warn_ignored_keys(config, "run.yaml")
    expected = "run.yaml: audit.gzip_level is ignored because audit.gzip is false"
    assert [str(w.message) for w in caught] == [expected]
    config, _ = load_config(DEFAULT, ["audit.gzip=true", "audit.gzip_level=3"])
    assert ignored_keys(config) == []


def test_generation_settings_beside_a_household_table_are_named_as_ignored(tmp_path):
    """A sweep over prior_flood_share with a table would otherwise give equal points unseen."""
    table = ROOT / "tests" / "data" / "households_small.csv"
    overrides = [
        f"households.table={table}",
        "households.prior_flood_share=0.9",
        "households.income.median=50000",
        "households.count=5",  # documented as ignored with a table: not named
        "households.prior_flood_importance=0.7",  # read by a table's seeded floods
    ]
    config, _ = load_config(DEFAULT, overrides)
    reason = "households.table is set: the table gives the households"
    assert ignored_keys(config) == [
        (["households.income.median", "households.prior_flood_share"], reason)
    ]
    with pytest.warns(IgnoredKeyWarning) as caught:
        warn_ignored_keys(config, "run.yaml", setting_origin(str(DEFAULT), overrides))
    assert [str(w.message) for w in caught] == [
        (
            f"--set households.income.median=50000: households.income.median is ignored because "
            f"{reason}"
        ),
        (
            f"--set households.prior_flood_share=0.9: households.prior_flood_share is ignored "
            f"because {reason}"
        ),
    ]
    generated, _ = load_config(DEFAULT, overrides[1:])
    assert ignored_keys(generated) == []


def test_an_ignored_key_warning_names_what_gave_each_key():
    overrides = ["decision.policy=pmt", "decision.llm_share=0.5"]
    config, _ = load_config(LLM_SCENARIO, overrides)
    with pytest.warns(IgnoredKeyWarning) as caught:
        warn_ignored_keys(config, "llm.yaml", setting_origin(str(LLM_SCENARIO), overrides))
    because = "ignored because decision.policy is pmt, not llm"
    assert [str(w.message) for w in caught] == [
        f"--set decision.llm_share=0.5: decision.llm_share is {because}",
        f"{LLM_SCENARIO}: decision.llm.mode and decision.llm.cache are {because}",
    ]


def test_one_audited_id_without_brackets_is_told_to_be_a_list():
    message = load_error(DEFAULT, ["audit.sample=H00001"], named="--set audit.sample=H00001")
    assert message.endswith(
        ": audit.sample: a fraction in (0, 1] or a list of agent ids: one id is [H00001] "
        "(got 'H00001')"
    )
    assert ".float" not in message


@pytest.mark.parametrize(
    ("override", "problem"),
    [
        ("memory.retrieval.x.y=1", "memory.retrieval.x: unknown key"),
        ("hazard.events.3=9.0", "hazard.events: only read by source scripted"),
        ("decision.pmt.asc.nope=1.0", "decision.pmt.asc: unknown skill(s) ['nope']"),
    ],
)
def test_an_override_below_the_key_an_error_is_about_is_named(override, problem):
    """The error lands on a section the flag set a key inside: the flag, not the file, is wrong."""
    message = load_error(DEFAULT, ["years=3", override], named=f"--set {override}")
    assert f": {problem}" in message


def test_audited_ids_that_yaml_reads_as_numbers_are_told_to_be_quoted():
    message = load_error(DEFAULT, ["audit.sample=[1, 2]"], named="--set audit.sample=[1, 2]")
    assert message.endswith(
        ": audit.sample: a list of agent ids, which are text: quote an id that looks like a "
        "number (['1'], not [1]) (got [1, 2])"
    )
    assert ".float" not in message
    config, _ = load_config(DEFAULT, ["audit.sample=['1', '2']"])
    assert config.audit.sample == ["1", "2"]


def test_a_valid_config_is_read_once_per_file_of_its_base_chain(monkeypatch):
    """Finding which file or flag set a key is for errors: a valid config reads each file once
    (every run, validation and design point loads one; re-reading made loading 10x slower)."""
    import simulation.config as config_module

    read = []
    real = config_module.read_yaml

    def counting(path: Path) -> dict:
        read.append(Path(path).resolve())
        return real(path)

    monkeypatch.setattr(config_module, "read_yaml", counting)
    scenario = ROOT / "configs" / "scenarios" / "single_flood.yaml"
    load_config(scenario, ["households.count=30", "years=3", "events.flood_major.importance=0.8"])
    assert read == [scenario, DEFAULT]
    # Naming what set each file key while a model is built reads the chain once, too.
    read.clear()
    origin_of = setting_origin(str(scenario), ["years=3"])
    named = [
        origin_of(loc) for loc in [("registry",), ("hazard", "events"), ("decision", "script")]
    ]
    assert named == [str(DEFAULT), str(scenario), str(DEFAULT)]
    assert read == [scenario, DEFAULT]


def test_text_that_yaml_reads_as_a_mapping_is_told_to_be_quoted():
    """An event template with ': ' or braces, unquoted, is YAML for a mapping, not the text."""
    quote = (
        "YAML reads unquoted text holding ': ', braces or brackets as one; put the text in quotes"
    )
    override = "events.flood_major.template=Year {year}: a flood"
    message = load_error(DEFAULT, [override], named=f"--set {override}")
    assert message.endswith(
        f"events.flood_major.template: Input should be a valid string, got a mapping: {quote}"
    )
    unparsable = "events.flood_major.template=A flood: {damage} lost"
    message = load_error(DEFAULT, [unparsable], named="--set events.flood_major.template")
    assert message.endswith(
        "cannot parse value 'A flood: {damage} lost' (a value is read as YAML: put text holding "
        "': ', braces or brackets in quotes)"
    )
    quoted = ["events.flood_major.template='Year {year}: a flood of ${damage:,.0f}'"]
    assert load_config(DEFAULT, quoted)[0].events.flood_major.template.startswith("Year {year}: ")


def _differing_keys(code: object, file: object, path: str = "") -> list[str]:
    """Dotted keys whose value differs between two nested mappings (either may lack a key)."""
    if isinstance(code, dict) and isinstance(file, dict):
        return [
            key
            for name in sorted({*code, *file}, key=str)
            for key in _differing_keys(
                code.get(name, "<absent>"), file.get(name, "<absent>"), f"{path}{name}."
            )
        ]
    return [] if code == file else [path.removesuffix(".")]


def test_the_default_world_keys_are_those_default_yaml_sets_away_from_the_code():
    config, _ = load_config(DEFAULT)
    differing = _differing_keys(RunConfig().model_dump(), config.model_dump())
    assert sorted(differing) == sorted([*DEFAULT_WORLD_KEYS, "name", "registry"])


def test_a_config_outside_the_default_world_is_warned_of_its_code_defaults(tmp_path):
    path = write(
        tmp_path / "mine.yaml",
        f"registry: {ROOT / 'skill_registry.yaml'}\nmemory: {{decay_rate: 0.9}}\n"
        "decision: {pmt: {beta_tp: 6.16, asc: {relocate: -9.0}}}\n",
    )
    with pytest.warns(ConfigWarning) as caught:
        load_config(path)
    (message,) = [str(w.message) for w in caught]
    unset = [
        key
        for key in DEFAULT_WORLD_KEYS
        if key not in ("memory.decay_rate", "decision.pmt.beta_tp")
    ]
    assert message == (
        f"{path}: {', '.join(unset)} not set (by it or a base: file): the run takes the code's "
        "uncalibrated default for each, not the value configs/default.yaml sets; start the config "
        "from base: <path to>/configs/default.yaml to get those"
    )
    assert "decision.pmt.asc.buy_insurance" in unset  # another entry of the table is not it


def test_keys_a_run_never_reads_are_not_named_and_default_yaml_draws_no_warning(tmp_path):
    script = write(tmp_path / "script.csv", "agent_id,year,skill_id\n")
    path = write(
        tmp_path / "mine.yaml",
        f"registry: {ROOT / 'skill_registry.yaml'}\n"
        f"decision: {{policy: scripted, script: {script}}}\n",
    )
    with pytest.warns(ConfigWarning, match=r"mine\.yaml: memory\.decay_rate, ") as caught:
        load_config(path)
    assert "decision.pmt" not in str(caught[0].message)
    with warnings.catch_warnings():
        warnings.simplefilter("error")
        load_config(DEFAULT)
        load_config(write(tmp_path / "child.yaml", f"base: {DEFAULT}\nyears: 3\n"))


def test_an_experiment_on_a_config_outside_the_default_world_is_warned_once(tmp_path):
    base = write(tmp_path / "mine.yaml", f"registry: {ROOT / 'skill_registry.yaml'}\nyears: 2\n")
    experiment = write(
        tmp_path / "exp.yaml",
        f"name: e\nbase: {base}\nsweep: {{grid: {{memory.decay_rate: [0.8, 0.9]}}}}\n"
        "replicates: 2\nseed: 1\n",
    )
    experiment_config, data, _ = load_experiment(experiment)
    with pytest.warns(ConfigWarning) as caught:
        plan_runs(experiment_config, data, str(experiment))
    (message,) = [str(w.message) for w in caught]
    assert message.startswith(f"{experiment}: decision.pmt.threat_gain, ")
    assert "memory.decay_rate" not in message  # the sweep sets it


def test_with_settings_validates_each_key_as_a_file_would():
    config, _ = load_config(DEFAULT)
    changed = config.with_settings({"years": 5, "memory": {"decay_rate": 0.9}})
    assert (changed.years, changed.memory.decay_rate) == (5, 0.9)
    # A section given as a mapping merges, as --set does: the other keys keep their values.
    assert changed.memory.working_capacity == config.memory.working_capacity
    assert changed.model_copy(update={"years": config.years, "memory": config.memory}) == config
    for changes, problem in [
        ({"yeers": 3}, "with_settings: yeers: unknown key"),
        ({"years": "abc"}, "with_settings: years: Input should be a valid integer"),
        ({"seed.x": 1}, "with_settings: seed.x: seed is not a section"),
    ]:
        with pytest.raises(ConfigError, match=f"^{re.escape(problem)}"):
            config.with_settings(changes)
    with pytest.raises(TypeError, match="a mapping of dotted keys to values, not str"):
        config.with_settings("years=5")  # type: ignore[arg-type]
    # Any mapping, however deep: read-only views merge as dicts do.
    nested = MappingProxyType({"retrieval": MappingProxyType({"top_k": 3})})
    assert config.with_settings({"memory": nested}).memory.retrieval.top_k == 3


def test_overrides_given_as_one_string_are_refused_naming_the_list_wanted():
    with pytest.raises(TypeError, match=re.escape("not one string (['years=5'])")):
        load_config(DEFAULT, "years=5")  # type: ignore[arg-type]


@pytest.mark.parametrize(
    ("event", "template", "detail"),
    [
        ("flood_major", "{damage:d}", "placeholder 'damage': format spec 'd' does not apply"),
        ("claim_paid", "Paid {payout:d}", "placeholder 'payout': format spec 'd'"),
        ("neighbor_adaptation", "{count} {action:d}", "placeholder 'action': format spec 'd'"),
        ("flood_major", "{year:%Y}", "placeholder 'year': format spec '%Y'"),
        # Never used in a short run without a premium change, so the run itself passed.
        ("premium_change", "{old:d}", "placeholder 'old': format spec 'd'"),
        ("neighbor_adaptation", "{action:.0}", "renders as blank text ('')"),
    ],
)
def test_an_event_template_spec_its_value_cannot_take_is_refused_at_load(
    tmp_path, event, template, detail
):
    """As the registry's are: the run stopped at the first such event, naming no file or key."""
    path = write(
        tmp_path / "bad.yaml",
        f"base: {DEFAULT}\nevents:\n  {event}: {{template: '{template}'}}\n",
    )
    message = load_error(path)
    assert message.startswith(f"{path}: events.{event}.template: {detail}"), message


def test_every_event_placeholder_has_a_value_to_check_specs_with():
    """A placeholder added to an event needs a sample of its type, or loading fails with it."""
    import simulation.config as config_module

    placeholders = set().union(*config_module.EVENT_FIELDS.values())
    assert placeholders == set(config_module._EVENT_SAMPLES)


def test_a_renter_contents_ratio_no_curve_reads_is_named_as_ignored(tmp_path):
    """The ratio only converts renters' contents under a share-of-structure contents curve."""
    ratio = "damage.renter_contents_ratio=0.4"
    config, base = load_config(DEFAULT, [ratio, "damage.owner_contents_basis=contents"])
    assert ignored_keys(config) == [
        (["damage.renter_contents_ratio"], "damage.owner_contents_basis is contents")
    ]
    config, base = load_config(DEFAULT, [ratio, "damage.curves=jrc_north_america"])
    reason = "the curve set jrc_north_america applies its contents curve to contents value"
    assert ignored_keys(config, "contents") == [(["damage.renter_contents_ratio"], reason)]
    with pytest.warns(
        IgnoredKeyWarning, match=f"renter_contents_ratio is ignored because {reason}"
    ):
        build_model(config, base)
    read = [ratio, "damage.owner_contents_basis=structure", "damage.curves=jrc_north_america"]
    assert ignored_keys(load_config(DEFAULT, read)[0], "contents") == []
    assert ignored_keys(load_config(DEFAULT, [ratio])[0], "structure") == []  # USACE: read


@pytest.mark.parametrize("value", ["1e308", "-2e5"])
def test_a_scripted_level_beyond_any_ground_is_refused(value):
    """1e308 ran, after a warning spelling out a 309-digit height, as a table's ground can't."""
    override = f"hazard.events={{1: {value}}}"
    message = load_error(DEFAULT, ["hazard.source=scripted", override], f"--set {override}")
    assert ": hazard.events.1: Input should be " in message
