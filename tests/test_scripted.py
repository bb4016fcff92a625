"""Tests for the scripted decision policy: decisions read from a table."""

from __future__ import annotations

import warnings
from pathlib import Path

import pytest
import yaml

from simulation.config import ConfigError, ConfigWarning, load_config
from simulation.decisions.scripted import ScriptError, load_script
from simulation.runner import build_model

DEFAULT = Path(__file__).resolve().parents[1] / "configs" / "default.yaml"
SKILLS = ("buy_insurance", "buy_contents_insurance", "elevate_house", "relocate", "do_nothing")


def scripted_model(tmp_path: Path, rows: list[str], count: int = 20):
    table = tmp_path / "decisions.csv"
    table.write_text("agent_id,year,skill_id\n" + "".join(f"{r}\n" for r in rows), "utf-8")
    config, base = load_config(
        DEFAULT,
        [
            f"households.count={count}",
            "hazard.source=scripted",
            "hazard.events={}",
            "adaptation.elevation_cost=20000",  # affordable: at most half an income
            "decision.policy=scripted",
            f"decision.script={table}",
        ],
    )
    return build_model(config, base)


def tenants(tmp_path: Path) -> tuple[str, str]:
    """The richest owner's and renter's ids in the 20-household default population."""
    states = [h.state for h in scripted_model(tmp_path, []).households]
    owner = max((s for s in states if s.tenure == "owner"), key=lambda s: s.income)
    renter = max((s for s in states if s.tenure == "renter"), key=lambda s: s.income)
    return owner.agent_id, renter.agent_id


def test_households_do_what_the_table_says_and_wait_where_it_is_silent(tmp_path):
    owner, renter = tenants(tmp_path)
    model = scripted_model(
        tmp_path,
        [
            f"{owner},1,buy_insurance",
            f"{owner},2,buy_insurance",
            f"{owner},3,elevate_house",
            f"{renter},1,buy_contents_insurance",
            f"{renter},2,relocate",
        ],
    )
    by_id = {h.state.agent_id: h for h in model.households}
    expected = {
        owner: ["buy_insurance", "buy_insurance", "elevate_house"],
        renter: ["buy_contents_insurance", "relocate"],
    }
    for year in (1, 2, 3):
        model.step()
        for household in model.households:
            decision = household.last_decision
            if household.state.agent_id in expected:
                skills = expected[household.state.agent_id]
                if year <= len(skills):
                    assert decision.skill_id == skills[year - 1]
                    assert decision.valid
            else:
                assert decision.skill_id == "do_nothing"
            assert decision.threat is None  # no appraisal behind a scripted decision
        assert model.year_stats["invalid_proposals"] == 0
        if year == 2:
            assert by_id[owner].state.insured_years == 2
            assert by_id[renter].state.relocated
    assert by_id[owner].state.elevated
    assert not by_id[owner].state.has_insurance  # not renewed in year 3: lapsed


def test_a_scripted_skill_the_household_may_not_take_is_not_executed(tmp_path):
    owner, renter = tenants(tmp_path)
    model = scripted_model(tmp_path, [f"{renter},1,buy_insurance"])  # owners only
    decide_for = model.decide_for
    decisions = {}

    def recording(household, year):
        decisions[household.state.agent_id] = decision = decide_for(household, year)
        return decision

    model.decide_for = recording
    model.step()
    decision = decisions[renter]
    assert decision.proposal.skill_id == "buy_insurance"
    assert decision.skill_id == "do_nothing"
    assert not decision.validation.valid
    assert any("not eligible" in e for e in decision.validation.errors)
    assert model.year_stats["invalid_proposals"] == 1
    assert decisions[owner].skill_id == "do_nothing"  # not in the table


def test_a_scripted_run_is_reproducible(tmp_path):
    owner, _ = tenants(tmp_path)
    rows = [f"{owner},1,buy_insurance", f"{owner},2,elevate_house"]
    frames = []
    for name in ("a", "b"):
        folder = tmp_path / name
        folder.mkdir()
        model = scripted_model(folder, rows)
        for _ in range(3):
            model.step()
        frames.append(model.metrics())
    assert frames[0].equals(frames[1])


@pytest.mark.parametrize(
    ("text", "message"),
    [
        ("agent_id,skill_id\nH00001,do_nothing\n", "missing required column 'year'"),
        ("agent_id,year,skill_id\nH00001,0,do_nothing\n", "row 2, column year"),
        ("agent_id,year,skill_id\nH00001,2.5,do_nothing\n", "row 2, column year"),
        ("agent_id,year,skill_id\nH00001,1,do_nothing\n,2,do_nothing\n", "row 3, column agent_id"),
        ("agent_id,year,skill_id\nH00001,1,sandbags\n", "row 2, column skill_id: unknown skill"),
        (
            "agent_id,year,skill_id\nH00001,1,do_nothing\nH00001,1,relocate\n",
            "row 3: a second decision for H00001 in year 1",
        ),
    ],
)
def test_bad_tables_name_the_row_and_column(tmp_path, text, message):
    path = tmp_path / "decisions.csv"
    path.write_text(text, encoding="utf-8")
    with pytest.raises(ScriptError, match=message):
        load_script(path, SKILLS)


def test_a_household_not_in_the_run_is_named_with_its_row(tmp_path):
    owner, _ = tenants(tmp_path)
    rows = [
        f"{owner},1,buy_insurance",
        "H99999,1,relocate",
        f"{owner},2,do_nothing",
        "H7,3,relocate",
    ]
    with pytest.raises(ConfigError) as raised:
        scripted_model(tmp_path, rows)
    message = str(raised.value)
    assert "decision.script" in message
    assert (
        "decisions.csv: row 3, column agent_id: 'H99999' is not a household of this run" in message
    )
    assert "(2 of 4 rows name unknown households)" in message


@pytest.mark.parametrize("text", ["", "\n", "   \n\n"], ids=["empty", "newline", "blank-lines"])
def test_an_empty_table_is_named_not_a_traceback(tmp_path, text):
    path = tmp_path / "decisions.csv"
    path.write_text(text, encoding="utf-8")
    with pytest.raises(ScriptError, match=r"decisions\.csv: empty file: expected a header row"):
        load_script(path, SKILLS)


def test_a_missing_table_is_named(tmp_path):
    with pytest.raises(ScriptError, match=r"no_such\.csv: file not found"):
        load_script(tmp_path / "no_such.csv", SKILLS)


def test_rows_for_years_after_the_run_are_named_in_a_warning(tmp_path):
    owner, _ = tenants(tmp_path)
    with warnings.catch_warnings():
        warnings.simplefilter("error")  # rows within the run's 30 years: nothing to warn about
        scripted_model(tmp_path, [f"{owner},1,buy_insurance", f"{owner},30,relocate"])
    rows = [f"{owner},2,buy_insurance", f"{owner},40,relocate", f"{owner},31,relocate"]
    expected = (
        r"decision\.script: 2 entries are for years after the run's last year \(30\) and will "
        r"never be used \(from year 31\)"
    )
    with pytest.warns(ConfigWarning, match=expected):
        scripted_model(tmp_path, rows)


def test_switching_from_one_policy_to_the_other_drops_the_first(tmp_path):
    owner, _ = tenants(tmp_path)
    registry = yaml.safe_load((DEFAULT.parents[1] / "skill_registry.yaml").read_text("utf-8"))
    for skill in registry["skills"]:
        if skill["skill_id"] == "buy_contents_insurance":
            skill["eligible_agent_types"] = ["*"]  # a contents-only policy for owners too
    (tmp_path / "registry.yaml").write_text(yaml.safe_dump(registry), "utf-8")
    table = tmp_path / "decisions.csv"
    rows = ["buy_insurance", "buy_contents_insurance", "buy_contents_insurance", "do_nothing"]
    table.write_text(
        "agent_id,year,skill_id\n" + "".join(f"{owner},{n},{s}\n" for n, s in enumerate(rows, 1)),
        "utf-8",
    )
    config, base = load_config(
        DEFAULT,
        [
            "households.count=20",
            "hazard.source=scripted",
            "hazard.events={}",
            "decision.policy=scripted",
            f"decision.script={table}",
            f"registry={tmp_path / 'registry.yaml'}",
        ],
    )
    model = build_model(config, base)
    (household,) = [h for h in model.households if h.state.agent_id == owner]
    held = []
    for _ in rows:
        model.step()
        state = household.state
        held.append((state.has_insurance, state.has_contents_insurance, state.insured_years))
    # One spell of insurance, on the structure policy and then on the contents policy alone.
    assert held == [(True, False, 1), (False, True, 2), (False, True, 3), (False, False, 0)]
