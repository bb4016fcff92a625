"""Tests for the scripted decision policy: decisions read from a table."""

from __future__ import annotations

import warnings
from pathlib import Path

import orjson
import pytest
import yaml

from simulation.cli import main
from simulation.config import ConfigError, ConfigWarning, load_config
from simulation.decisions.scripted import IgnoredScriptRowsWarning, ScriptError, load_script
from simulation.runner import build_model, resume_run, run_simulation

DEFAULT = Path(__file__).resolve().parents[1] / "configs" / "default.yaml"
SKILLS = ("buy_insurance", "buy_contents_insurance", "elevate_house", "relocate", "do_nothing")


def scripted_settings(tmp_path: Path, rows: list[str], count: int = 20) -> list[str]:
    table = tmp_path / "decisions.csv"
    table.write_text("agent_id,year,skill_id\n" + "".join(f"{r}\n" for r in rows), "utf-8")
    return [
        f"households.count={count}",
        "hazard.source=scripted",
        "hazard.events={}",
        "adaptation.elevation_cost=20000",  # affordable: at most half an income
        "decision.policy=scripted",
        f"decision.script={table}",
    ]


def scripted_model(tmp_path: Path, rows: list[str], count: int = 20):
    config, base = load_config(DEFAULT, scripted_settings(tmp_path, rows, count))
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
        (
            "agent_id,yaer,skill_id\nH00001,1,do_nothing\n",
            r"column 'year' \(needs agent_id, year, skill_id; found agent_id, yaer, skill_id\)",
        ),
        ("agent_id,year,skill_id\nH00001,0,do_nothing\n", "row 2, column year"),
        ("agent_id,year,skill_id\nH00001,2.5,do_nothing\n", "row 2, column year"),
        ("agent_id,year,skill_id\nH00001,1,do_nothing\n,2,do_nothing\n", "row 3, column agent_id"),
        ("agent_id,year,skill_id\nH00001,1,sandbags\n", "row 2, column skill_id: unknown skill"),
        (
            "agent_id,year,skill_id\nH00001,1,do_nothing\nH00001,1,relocate\n",
            "row 3: a second decision for H00001 in year 1",
        ),
        # Digits to str.isdigit that int() cannot read (a traceback), or reads as 1.
        ("agent_id,year,skill_id\nH00001,\u00b2,do_nothing\n", "row 2, column year: .*'\u00b2'"),
        ("agent_id,year,skill_id\nH00001,\u0661,do_nothing\n", "row 2, column year"),
        # A field too many was taken for an index, and the row named by its year.
        (
            "agent_id,year,skill_id\nH00001,1,do_nothing,extra\n",
            "row 2: 4 fields, but the header has 3",
        ),
        # A column named twice: pandas renamed the second, which then went unread.
        (
            "agent_id,year,skill_id,agent_id\nH00001,1,do_nothing,H00002\n",
            "row 1, column agent_id: repeated in the header",
        ),
    ],
)
def test_bad_tables_name_the_row_and_column(tmp_path, text, message):
    path = tmp_path / "decisions.csv"
    path.write_text(text, encoding="utf-8")
    with pytest.raises(ScriptError, match=message):
        load_script(path, SKILLS)


def test_rows_are_numbered_as_the_file_shows_them_blank_lines_included(tmp_path):
    path = tmp_path / "decisions.csv"
    path.write_text(
        "agent_id,year,skill_id\nH00001,1,relocate\n\nH00002,2,do_nothing\n  \nH00003,3,sandbags\n",
        encoding="utf-8",
    )
    with pytest.raises(ScriptError, match="row 6, column skill_id: unknown skill 'sandbags'"):
        load_script(path, SKILLS)
    path.write_text(path.read_text().replace("sandbags", "relocate"), encoding="utf-8")
    script = load_script(path, SKILLS)
    assert list(script.items()) == [
        (("H00001", 1), "relocate"),
        (("H00002", 2), "do_nothing"),
        (("H00003", 3), "relocate"),
    ]
    assert script.rows == [2, 4, 6]


def test_ignored_rows_are_numbered_as_the_file_shows_them(tmp_path):
    owner, renter = tenants(tmp_path)
    rows = relocating_rows(owner, renter)
    rows.insert(2, "")  # a blank line before the third decision: rows 4 on are one further
    model = scripted_model(tmp_path, rows)
    for _ in range(30):
        model.step()
    expected = ignored_message(owner, renter)
    for before, after in (("row 8", "row 9"), ("row 6", "row 7"), ("row 5", "row 6")):
        expected = expected.replace(before, after)
    with pytest.warns(IgnoredScriptRowsWarning) as caught:
        model.warn_unused_inputs()
    assert [str(w.message) for w in caught] == [f"config: {expected}"]


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


def relocating_rows(owner: str, renter: str) -> list[str]:
    """A table whose rows 5, 6, 8 and 9 come after their household relocated (in year 2, 4)."""
    return [
        f"{renter},1,buy_contents_insurance",
        f"{renter},2,relocate",
        f"{owner},1,buy_insurance",
        f"{renter},3,buy_contents_insurance",
        f"{renter},5,do_nothing",
        f"{owner},4,relocate",
        f"{owner},6,buy_insurance",
        f"{owner},30,elevate_house",
        f"{owner},3,do_nothing",  # before it relocated: used
    ]


def ignored_message(owner: str, renter: str) -> str:
    return (
        "decision.script: 4 rows were ignored because the household had relocated (left the "
        f"model) in an earlier year: row 5 ({renter}, year 3), row 6 ({renter}, year 5), "
        f"row 8 ({owner}, year 6) and 1 more"
    )


def test_rows_after_a_household_relocated_are_named_once_when_the_run_ends(tmp_path):
    owner, renter = tenants(tmp_path)
    model = scripted_model(tmp_path, relocating_rows(owner, renter))
    with warnings.catch_warnings():
        warnings.simplefilter("error", IgnoredScriptRowsWarning)  # not while the run goes on
        for _ in range(30):
            model.step()
    with pytest.warns(IgnoredScriptRowsWarning) as caught:
        model.warn_unused_inputs()
    by_id = {h.state.agent_id: h.state for h in model.households}
    assert by_id[owner].relocated
    assert by_id[renter].relocated
    assert [str(w.message) for w in caught] == [f"config: {ignored_message(owner, renter)}"]
    # Stopped early, the rows of the years not run are not counted.
    model = scripted_model(tmp_path, relocating_rows(owner, renter))
    for _ in range(5):
        model.step()
    with pytest.warns(IgnoredScriptRowsWarning, match=r"2 rows were ignored .*: row 5 .*, row 6 "):
        model.warn_unused_inputs()
    model = scripted_model(tmp_path, relocating_rows(owner, renter))
    for _ in range(3):
        model.step()
    with pytest.warns(
        IgnoredScriptRowsWarning, match=r"1 row was ignored .*: row 5 \(.*, year 3\)$"
    ):
        model.warn_unused_inputs()


def test_the_warning_comes_after_the_run_directory_is_complete(tmp_path):
    owner, renter = tenants(tmp_path)
    config, base = load_config(DEFAULT, scripted_settings(tmp_path, relocating_rows(owner, renter)))
    with warnings.catch_warnings():
        warnings.simplefilter("error", IgnoredScriptRowsWarning)
        with pytest.raises(IgnoredScriptRowsWarning):
            run_simulation(config, base, tmp_path / "out", progress=False)
    (run_dir,) = (tmp_path / "out").iterdir()
    assert orjson.loads((run_dir / "manifest.json").read_bytes())["status"] == "complete"
    assert len((run_dir / "model_years.csv").read_text(encoding="utf-8").splitlines()) == 31


def test_a_table_whose_rows_all_ran_draws_no_warning(tmp_path):
    owner, renter = tenants(tmp_path)
    rows = [f"{renter},1,buy_contents_insurance", f"{renter},2,relocate", f"{owner},30,relocate"]
    model = scripted_model(tmp_path, rows)
    with warnings.catch_warnings():
        warnings.simplefilter("error")
        for _ in range(30):
            model.step()


def test_floodsim_run_shows_the_ignored_rows_as_one_warning_line(tmp_path, capsys):
    owner, renter = tenants(tmp_path)
    settings = scripted_settings(tmp_path, relocating_rows(owner, renter))
    argv = ["run", str(DEFAULT), "--out", str(tmp_path / "out"), "--quiet"]
    assert main([*argv, *(arg for s in settings for arg in ("--set", s))]) == 0
    err = capsys.readouterr().err.splitlines()
    (table,) = [s for s in settings if s.startswith("decision.script=")]  # the flag gave it
    assert err == [f"floodsim: warning: --set {table}: {ignored_message(owner, renter)}"]


def test_a_resumed_run_still_names_the_rows_of_households_that_relocated_before(tmp_path):
    owner, renter = tenants(tmp_path)
    config, base = load_config(DEFAULT, scripted_settings(tmp_path, relocating_rows(owner, renter)))
    model = build_model(config, base)
    step = model.step

    def crash_in_year_seven() -> None:
        step()
        if model.steps == 7:
            raise KeyboardInterrupt

    model.step = crash_in_year_seven
    with pytest.raises(KeyboardInterrupt):
        run_simulation(
            config, base, tmp_path / "out", progress=False, model=model, checkpoint_every=5
        )
    (run_dir,) = (tmp_path / "out").iterdir()
    with pytest.warns(IgnoredScriptRowsWarning) as caught:
        resume_run(run_dir, progress=False)  # from year 5: both had moved away by then
    assert (run_dir / "manifest.json").read_text().count('"resumed": 1') == 1
    assert [str(w.message) for w in caught] == [
        f"{run_dir / 'config.resolved.yaml'}: {ignored_message(owner, renter)}"
    ]
