"""The bad-input corpus: every broken file in tests/bad_inputs is rejected cleanly.

Each case is a run config (``floodsim run``) or an experiment file (``floodsim batch``) that is
broken in one realistic way: YAML syntax, wrong top-level types, unknown keys, wrong types,
out-of-range values, broken damage curves, inconsistent skill registries, malformed household
tables, missing and malformed rasters, bad experiment files. For every case the command and
``floodsim validate`` exit with code 2 and print one stderr line ``floodsim: error: <file>:
<key>: <problem>`` (no traceback) naming the file and the key, and nothing that looks like a
run is left in the output folder.

Run configs inherit ``../../configs/default.yaml`` with 30 households and 2 years, so nothing
heavy runs if validation wrongly lets one through. Data files the cases point at live in
``tests/bad_inputs/files``.
"""

from __future__ import annotations

from dataclasses import dataclass
from pathlib import Path
from typing import Literal

import pytest

from simulation.cli import main
from simulation.config import ConfigError, read_yaml
from simulation.experiments import is_experiment

BAD = Path(__file__).resolve().parent / "bad_inputs"
ERROR_PREFIX = "floodsim: error: "
MIN_CASES = 25


@dataclass(frozen=True)
class Case:
    """A broken input in tests/bad_inputs and what its error message must name."""

    config: str  # file name under tests/bad_inputs
    command: Literal["run", "batch"]  # batch for experiment files
    culprit: str | None  # file under bad_inputs the message must name; None: the config itself
    keys: tuple[str, ...]  # key, field, line or value the message must name (outside the paths)
    bug: str | None = None  # known bug: exit code, one line or nothing written is wrong
    message_bug: str | None = None  # known bug: the message misses the file or key

    @property
    def path(self) -> Path:
        return BAD / self.config

    @property
    def culprit_path(self) -> Path:
        return BAD / self.culprit if self.culprit else self.path


def run(config: str, culprit: str | None, *keys: str, **bugs: str) -> Case:
    return Case(config, "run", culprit, keys, **bugs)


def batch(config: str, culprit: str | None, *keys: str, **bugs: str) -> Case:
    return Case(config, "batch", culprit, keys, **bugs)


CASES: tuple[Case, ...] = (
    # ---------------------------------------------------------------- YAML and top-level types
    run("yaml_syntax_error.yaml", None, "line 7", "YAML syntax error"),
    run("tab_indented.yaml", None, "line 6", "YAML syntax error", "'\\t'"),
    run("duplicate_key.yaml", None, "line 5", "duplicate key 'years'"),
    run("not_utf8.yaml", None, "not UTF-8 text", "byte"),
    run("top_level_list.yaml", None, "top level", "list"),
    run("top_level_string.yaml", None, "top level", "got text ('../../configs/default.yaml"),
    run("empty_file.yaml", None, "the file is empty"),
    run("section_is_scalar.yaml", None, ": memory: ", "dictionary", "0.9"),
    run(
        "missing_base.yaml",
        None,
        "base",
        "defualt.yaml",
        "not found",
    ),
    run("circular_base.yaml", None, ": base: ", "circular"),
    # ------------------------------------------------------------- unknown keys and wrong types
    run("unknown_key.yaml", None, "memory.retrieval.strategi", "unknown key"),
    run("wrong_type.yaml", None, "memory.working_capacity", "ten"),
    run("zone_multiplier_word.yaml", None, "insurance.zone_multiplier.AE", "cheap"),
    run("pmt_beta_word.yaml", None, "decision.pmt.beta_tp", "high"),
    run("years_boolean.yaml", None, ": years: ", "not a boolean"),
    run("number_for_a_boolean.yaml", None, "memory.reflection.enabled", "valid boolean", "got 1"),
    run("quoted_number.yaml", None, ": years: ", "valid integer", "'2'"),
    run("float_for_an_integer.yaml", None, "households.count", "valid integer", "30.0"),
    run("unknown_hazard_source.yaml", None, "hazard.source", "tsunami"),
    run("unknown_retrieval_strategy.yaml", None, "memory.retrieval", "strategy", "magic"),
    run("unknown_retention_policy.yaml", None, "memory.retention", "policy", "random"),
    # ------------------------------------------------------------------- out-of-range values
    run("out_of_range.yaml", None, "memory.decay_rate", "1.5"),
    run("zero_years.yaml", None, ": years: ", "got 0"),
    run("seed_too_large.yaml", None, ": seed: ", "18446744073709551616"),
    run("owner_share_above_one.yaml", None, "households.owner_share", "1.5"),
    run("negative_hazard_scale.yaml", None, "hazard.scale", "-1"),
    run("audit_sample_above_one.yaml", None, "audit.sample", "(0, 1]", "got 2"),
    run("audit_sample_empty.yaml", None, "audit.sample", "nobody"),
    run("audit_sample_unknown_id.yaml", None, "audit.sample", "'H0007'", "not a household"),
    run("event_importance_above_one.yaml", None, "events.flood_major.importance", "1.2"),
    run("subsidy_bounds_swapped.yaml", None, ": government: ", "min_subsidy", "max_subsidy"),
    run("insurer_rate_bounds_swapped.yaml", None, ": insurer: ", "min_rate", "max_rate"),
    run(
        "premium_outside_insurer_bounds.yaml",
        None,
        ": insurer: ",
        "insurance.rate_per_1000",
        "50.0",
        "max_rate",
    ),
    run("zone_multiplier_negative.yaml", None, "insurance.zone_multiplier.AE", "-1.0"),
    run("small_world_odd_k.yaml", None, "social.k", "multiple of 2", "5"),
    # ------------------------------------------------------------------- NaN and infinity
    run("insurance_rate_infinite.yaml", None, "insurance.rate_per_1000", "finite", "inf"),
    run("pmt_zone_asc_nan.yaml", None, "decision.pmt.insurance_zone_asc.X", "finite", "nan"),
    # ------------------------------------------------------ keys that would be silently unused
    run("zone_multiplier_misspelt_zone.yaml", None, "insurance.zone_multiplier.ae", "'AE'"),
    run(
        "pmt_efficacy_misspelt_skill.yaml",
        None,
        "decision.pmt",
        "response_efficacy",
        "elevate_hous",
    ),
    run(
        "scripted_events_without_scripted_source.yaml",
        None,
        "hazard.events",
        "source scripted",
        "stochastic",
    ),
    run("gumbel_with_lognormal_parameters.yaml", None, "hazard.mean", "lognormal", "gumbel"),
    run("lognormal_with_gumbel_location.yaml", None, "hazard.loc", "gumbel", "lognormal"),
    run(
        "retrieval_weight_under_spec.yaml",
        None,
        "memory.retrieval",
        "w_recency",
        "strategy weighted",
    ),
    run("small_world_k_on_a_grid.yaml", None, "social.k", "neighborhood small_world", "moore"),
    run("scripted_with_gumbel_scale.yaml", None, "hazard.scale", "source stochastic", "scripted"),
    run("units_without_raster_source.yaml", None, "hazard.units", "source raster", "'m'"),
    run("kind_without_scripted_source.yaml", None, "hazard.kind", "source scripted", "'depth'"),
    run("scripted_event_year_zero.yaml", None, "hazard.events.0", "greater than or equal to 1"),
    run("llm_base_url_not_a_url.yaml", None, "decision.llm.base_url", "localhost:11434/v1"),
    # ------------------------------------------------------------------- scripted decisions
    run("scripted_without_script.yaml", None, "decision", "script", "required"),
    run(
        "script_unknown_skill.yaml",
        "files/decisions_unknown_skill.csv",
        "decision.script",
        "row 3",
        "sandbags",
    ),
    run(
        "script_unknown_household.yaml",
        None,
        "decision.script",
        "H99999",
        "not a household",
    ),
    run(
        "relevance_embedding_in_a_run.yaml",
        None,
        "memory.retrieval",
        "embedding needs a sentence embedder",
    ),
    # ----------------------------------------------------------------------- hazard settings
    run(
        "lognormal_without_parameters.yaml",
        None,
        "hazard.mean",
        "lognormal",
    ),
    run(
        "raster_source_without_grids.yaml",
        None,
        "hazard.rasters",
    ),
    # ------------------------------------------------------------------------ damage curves
    run(
        "decreasing_curve.yaml",
        "files/decreasing_curves.yaml",
        "damage.curves",
        "structure.damage_fraction",
        "non-decreasing",
    ),
    run(
        "curve_unequal_lengths.yaml",
        "files/curves_unequal_lengths.yaml",
        "damage.curves",
        "contents.damage_fraction",
        "5 values",
    ),
    run(
        "curve_percent_fractions.yaml",
        "files/curves_in_percent.yaml",
        "damage.curves",
        "structure.damage_fraction",
        "[0, 1]",
        "10.0",
    ),
    run(
        "curve_yaml_syntax_error.yaml",
        "files/curves_unclosed_brace.yaml",
        "damage.curves",
        "line 3",
        "YAML",
    ),
    run("unknown_curve_set.yaml", None, "damage.curves", "usace_one_story_no_basment"),
    # ------------------------------------------------------------------------ skill registry
    run("missing_registry.yaml", None, ": registry: ", "skill_regsitry.yaml", "not found"),
    run("scripted_year_twice.yaml", None, ": hazard.events: ", "year 2 is given twice"),
    run(
        "scripted_year_twice_padded.yaml",
        None,
        ": hazard.events: ",
        "year 2 is given twice (2 and '02')",
    ),
    run("empty_registry_path.yaml", None, ": registry: ", "at least 1 character", "(got '')"),
    run(
        "registry_unknown_field.yaml",
        "files/registry_unknown_field.yaml",
        ": registry: ",
        "elevate_house",
        "preconditions[1]",
        "elevatd",
    ),
    run(
        "registry_unknown_placeholder.yaml",
        "files/registry_unknown_placeholder.yaml",
        ": registry: ",
        "buy_insurance",
        "memory.template",
        "premum",
    ),
    run(
        "registry_state_change.yaml",
        "files/registry_state_change.yaml",
        ": registry: ",
        "elevate_house",
        "allowed_state_changes",
        "flood_wall",
    ),
    run(
        "registry_duplicate_skill.yaml",
        "files/registry_duplicate_skill.yaml",
        ": registry: ",
        "relocate",
        "skill_id",
        "duplicate",
    ),
    run(
        "registry_tool_changes_state.yaml",
        "files/registry_tool_changes_state.yaml",
        ": registry: ",
        "retrieve_memory",
        "allowed_state_changes",
        "read-only",
    ),
    run(
        "registry_default_undefined.yaml",
        "files/registry_default_undefined.yaml",
        ": registry: ",
        "default_skill",
        "wait",
    ),
    run(
        "registry_default_owners_only.yaml",
        "files/registry_default_owners_only.yaml",
        ": registry: ",
        "default_skill",
        "buy_insurance",
        "leave out renters",
    ),
    run(
        "registry_retrieve_owners_only.yaml",
        "files/registry_retrieve_owners_only.yaml",
        ": registry: ",
        "retrieve_memory",
        "eligible_agent_types",
        "renters are left out",
    ),
    run(
        "registry_without_retrieve_tool.yaml",
        "files/registry_without_retrieve_tool.yaml",
        ": registry: ",
        "retrieve_memory",
    ),
    run(
        "registry_placeholder_without_value.yaml",
        "files/registry_placeholder_without_value.yaml",
        ": registry: ",
        "do_nothing",
        "memory.template",
        "{deductible}",
    ),
    run(
        "registry_second_memory_tool.yaml",
        "files/registry_second_memory_tool.yaml",
        ": registry: ",
        "recall_floods",
        "call retrieve_memory only",
    ),
    run(
        "registry_unknown_skill.yaml",
        "files/registry_unknown_skill.yaml",
        ": registry: ",
        "buy_sandbags",
        "price and execute",
    ),
    run(
        "registry_effect_not_the_models.yaml",
        "files/registry_effect_not_the_models.yaml",
        ": registry: ",
        "elevate_house",
        "effects",
        "{elevated: false}",
    ),
    run(
        "registry_renters_elevate.yaml",
        "files/registry_renters_elevate.yaml",
        ": registry: ",
        "elevate_house",
        "eligible_agent_types",
        "renters",
    ),
    # ---------------------------------------------------------------------- household tables
    run("missing_household_table.yaml", None, "households.table", "househods.csv", "not found"),
    run(
        "malformed_household_table.yaml",
        "files/households_bad_income.csv",
        "households.table",
        "row 4",
        "income",
        "67k",
    ),
    run(
        "household_table_missing_column.yaml",
        "files/households_no_flood_zone.csv",
        "households.table",
        "flood_zone",
        "missing required column",
    ),
    run(
        "household_table_grid_too_large.yaml",
        "files/households_grid_too_large.csv",
        "row 4, column grid_col",
        "100000",
        "2,100,021 cells",
        "at most 1,000,000",
    ),
    run(
        "household_table_duplicate_ids.yaml",
        "files/households_duplicate_ids.csv",
        "households.table",
        "row 5",
        "agent_id",
        "H00002",
    ),
    run(
        "household_table_negative_income.yaml",
        "files/households_negative_income.csv",
        "households.table",
        "row 3",
        "income",
        "-41000",
    ),
    run(
        "household_table_unknown_tenure.yaml",
        "files/households_unknown_tenure.csv",
        "households.table",
        "row 4",
        "tenure",
        "landlord",
    ),
    # --------------------------------------------------------------------------------- rasters
    run(
        "raster_missing_grid.yaml",
        None,
        ": hazard: ",
        "year 1",
        "no_such_depth_year1.asc",
        "not found",
    ),
    run(
        "raster_malformed_grid.yaml",
        "files/depth_year1_typo.asc",
        ": hazard: ",
        "line 7",
        "O.5",
    ),
    run(
        "raster_wrong_value_count.yaml",
        "files/depth_year1_short_row.asc",
        ": hazard: ",
        "12 values",
        "found 11",
        "line 8",
    ),
    run(
        "raster_missing_cellsize.yaml",
        "files/depth_year1_no_cellsize.asc",
        ": hazard: ",
        "cellsize",
        "missing",
    ),
    # ------------------------------------------------------------------------ experiment files
    batch("experiment_unknown_key.yaml", None, ": replicate: ", "unknown key"),
    batch("experiment_zero_replicates.yaml", None, ": replicates: ", "got 0"),
    batch(
        "experiment_too_many_runs.yaml",
        None,
        ": sweep and replicates: ",
        "100,000,000 design points",
        "more than 1,000,000",
    ),
    batch(
        "experiment_lhs_range_reversed.yaml",
        None,
        ": sweep: ",
        "lhs.decision.pmt.beta_tp",
        "8.0",
        "3.0",
    ),
    batch("experiment_unknown_sweep_key.yaml", None, "memory.decay_rat", "unknown key"),
    batch(
        "experiment_sweep_out_of_range.yaml",
        None,
        "memory.decay_rate",
        "1.5",
        "design point 1",
    ),
    batch("experiment_sets_a_swept_key.yaml", None, ": set: memory: ", "memory.decay_rate"),
    batch("experiment_grid_value_twice.yaml", None, "grid.memory.decay_rate", "0.8", "twice"),
    batch(
        "experiment_lhs_range_past_limit.yaml",
        None,
        "sweep.lhs.memory.decay_rate",
        "high end 1.5",
        "less than or equal to 1",
    ),
    batch("experiment_set_wrong_type.yaml", None, "audit.gzip", "(got 1)", "in set"),
    batch("experiment_gpu_executor.yaml", None, "executor.kind", "gpu"),
    batch("experiment_sets_seed.yaml", None, ": set: ", "seed"),
    batch("experiment_sweeps_seed.yaml", None, ": sweep: ", "seed"),
    batch("experiment_samples_without_lhs.yaml", None, "samples", "lhs"),
    batch("experiment_address_without_dask.yaml", None, "executor", "address", "dask"),
    batch(
        "experiment_missing_base.yaml",
        None,
        "base",
        "defualt.yaml",
        "not found",
    ),
    batch(
        "experiment_broken_registry.yaml",
        "files/registry_default_undefined.yaml",
        ": registry: ",
        "default_skill",
        "wait",
    ),
)


def cases(bug_field: str) -> list:
    params = []
    for case in CASES:
        reason = getattr(case, bug_field)
        marks = [pytest.mark.xfail(strict=True, reason=f"bug: {reason}")] if reason else []
        params.append(pytest.param(case, id=case.config.removesuffix(".yaml"), marks=marks))
    return params


def call(capsys, *argv: object) -> tuple[int, str, str]:
    code = main([str(a) for a in argv])
    captured = capsys.readouterr()
    return code, captured.out, captured.err


def assert_one_error_line(code: int, out: str, err: str) -> str:
    """Exit 2, nothing on stdout, one stderr line with the error prefix; returns that line."""
    assert code == 2, err
    assert "Traceback" not in err
    assert out == ""
    assert err.endswith("\n"), err
    lines = err.splitlines()
    assert len(lines) == 1, err
    assert lines[0].startswith(ERROR_PREFIX), err
    return lines[0]


def file_names(path: Path) -> tuple[str, ...]:
    """Ways a message may name ``path``: as given, resolved, or by its basename."""
    return (str(path), str(path.resolve()), path.name)


def without_paths(line: str, *paths: Path) -> str:
    """The line with every spelling of ``paths`` replaced, so keys are not found in file names."""
    names = {name for path in paths for name in file_names(path)}
    for name in sorted(names, key=len, reverse=True):  # whole paths before basenames
        line = line.replace(name, "<file>")
    return line


# ---------------------------------------------------------------------------- the corpus table
def test_corpus_has_at_least_25_distinct_cases():
    assert len(CASES) >= MIN_CASES
    assert len({case.config for case in CASES}) == len(CASES)


def test_every_file_in_bad_inputs_has_a_row():
    on_disk = {p.name for p in BAD.glob("*.yaml")}
    in_table = {case.config for case in CASES}
    assert sorted(on_disk - in_table) == [], "add a row to CASES for each new file"
    assert sorted(in_table - on_disk) == [], "a row names a file that does not exist"


def test_every_data_file_is_used_by_a_case():
    texts = " ".join(case.path.read_text(encoding="utf-8", errors="replace") for case in CASES)
    for data_file in sorted((BAD / "files").iterdir()):
        assert f"files/{data_file.name}" in texts, data_file
    for case in CASES:
        assert case.culprit_path.is_file(), case.culprit


@pytest.mark.parametrize("case", CASES, ids=lambda case: case.config.removesuffix(".yaml"))
def test_command_matches_the_kind_of_file(case):
    try:
        data = read_yaml(case.path)
    except ConfigError:
        assert case.command == "run"  # unreadable files are tried as run configs
        return
    assert (case.command == "batch") == is_experiment(data)


# ------------------------------------------------------------------------------ the behaviour
@pytest.mark.parametrize("case", cases("bug"))
def test_bad_input_exits_2_with_one_line_and_writes_nothing(capsys, tmp_path, monkeypatch, case):
    monkeypatch.chdir(tmp_path)  # a stray relative outputs/ would land here
    out_root = tmp_path / "out"
    code, out, err = call(capsys, case.command, case.path, "--out", out_root)
    assert_one_error_line(code, out, err)
    assert not out_root.exists() or list(out_root.iterdir()) == []
    assert [p.name for p in tmp_path.iterdir()] in ([], ["out"])


@pytest.mark.parametrize("case", cases("message_bug"))
def test_bad_input_message_names_the_file_and_the_key(capsys, tmp_path, monkeypatch, case):
    monkeypatch.chdir(tmp_path)
    _, _, err = call(capsys, case.command, case.path, "--out", tmp_path / "out")
    assert err.startswith(ERROR_PREFIX), err
    line = err.splitlines()[0]
    assert any(name in line for name in file_names(case.culprit_path)), line
    rest = without_paths(line, case.path, case.culprit_path)
    for key in case.keys:
        assert key in rest, f"{key!r} missing from {line!r}"


@pytest.mark.parametrize("case", cases("bug"))
def test_validate_rejects_bad_input(capsys, tmp_path, monkeypatch, case):
    monkeypatch.chdir(tmp_path)
    code, out, err = call(capsys, "validate", case.path)
    assert_one_error_line(code, out, err)
    assert list(tmp_path.iterdir()) == []
