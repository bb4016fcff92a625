"""Integration tests for FloodAdaptationModel: every stage of the yearly cycle has its effect."""

from __future__ import annotations

import copy
import gc
import re
import warnings
import weakref
from dataclasses import replace
from pathlib import Path
from typing import TYPE_CHECKING

import numpy as np
import pandas as pd
import pytest
from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st

import simulation.model as model_module
from simulation import checkpoint
from simulation.config import ConfigError, ConfigWarning, load_config
from simulation.decisions import Proposal
from simulation.decisions.pmt import PMTPolicy
from simulation.hazard import compute_damage
from simulation.model import METRIC_COLUMNS, Decision, FloodAdaptationModel, HouseholdAgent
from simulation.runner import build_model

if TYPE_CHECKING:
    from simulation.memory import WriteResult

DEFAULT = Path(__file__).resolve().parents[1] / "configs" / "default.yaml"


def make_model(*overrides: str, count: int = 64) -> FloodAdaptationModel:
    config, base = load_config(DEFAULT, [f"households.count={count}", *overrides])
    return build_model(config, base)


def flood_in_year_two(*extra: str, depth: float = 4.0, count: int = 64) -> FloodAdaptationModel:
    """Every home gets ``depth`` ft of water in year 2 and stays dry otherwise."""
    return make_model(
        "hazard.source=scripted",
        "hazard.kind=depth",
        f"hazard.events={{2: {depth}}}",
        *extra,
        count=count,
    )


def test_dry_years_leave_no_flood_memories_and_no_damage():
    model = flood_in_year_two()
    model.step()
    stats = model.year_stats
    assert stats["flooded_households"] == 0
    assert stats["total_damage"] == 0.0
    assert not any(i.source == "flood" for h in model.households for i in h.memory.episodic)


def test_hazard_damage_and_flood_memories():
    model = flood_in_year_two(depth=4.0)
    model.step()
    states_before = {
        h.unique_id: (h.state.elevated, h.state.first_floor_height) for h in model.households
    }
    active = [h for h in model.households if h.active]
    model.step()
    assert model.year_stats["flooded_households"] == len(active)
    # Damage equals the curves applied to depth above the (possibly raised) first floor.
    raised = model.config.adaptation.elevation_height_ft
    for household in active[:10]:
        elevated, ffh = states_before[household.unique_id]
        s = household.state
        above = np.array([4.0 - ffh - (raised if elevated else 0.0)])
        # A renter's contents curve applies to the building value its contents imply.
        implied = s.contents_value / model.config.damage.renter_contents_ratio
        basis = np.array([s.structure_value if s.structure_value > 0 else implied])
        ds, dc = compute_damage(above, np.array([s.structure_value]), basis, model.curves)
        expected = float(ds[0] + min(dc[0], s.contents_value))
        assert s.last_damage == pytest.approx(expected)
        floods = [
            i
            for i in (*household.memory.working, *household.memory.episodic)
            if i.source == "flood" and i.year == 2
        ]
        assert len(floods) == 1
        threshold = model.config.events.major_damage_threshold
        kind = "major" if expected >= threshold else "minor" if expected > 0 else "no_damage"
        assert kind in floods[0].tags
        assert floods[0].amount == pytest.approx(expected)
        # Routed by importance: major floods (0.9) to episodic, minor (0.6) to working.
        assert (floods[0] in household.memory.episodic) == (floods[0].importance >= 0.7)


def test_claims_pay_covered_damage_above_the_deductible_within_the_limits():
    # Low limits and a high deductible, so that both bind for some households. The object
    # path, whose damage phase is recorded below.
    model = flood_in_year_two(
        "engine=objects",
        "insurance.claim_approval_probability=1.0",
        "insurance.structure_limit=40000",
        "insurance.contents_limit=15000",
        "insurance.deductible=12000",
        depth=5.0,
        count=300,
    )
    model.step()
    policies = {
        h: (h.state.has_insurance, h.state.has_contents_insurance)
        for h in model.households
        if h.active
    }
    damages: dict[HouseholdAgent, tuple[float, float]] = {}
    hazard_and_damage = model._hazard_and_damage

    def recording(year: int, active: list[HouseholdAgent]):
        depths, structure, contents = hazard_and_damage(year, active)
        pairs = zip(structure.tolist(), contents.tolist(), strict=True)
        damages.update(zip(active, pairs, strict=True))
        return depths, structure, contents

    model._hazard_and_damage = recording
    model.step()
    ins = model.config.insurance
    expected_total, paid, below_deductible, over_a_limit = 0.0, 0, 0, 0
    for household, (structure_policy, contents_policy) in policies.items():
        claims = [
            i
            for i in (*household.memory.working, *household.memory.episodic)
            if i.source == "claim"
        ]
        structure, contents = damages[household]
        if not (structure_policy or contents_policy) or structure + contents <= 0.0:
            assert not claims  # uninsured or undamaged: no claim
            continue
        loss = (structure if structure_policy else 0.0) + contents
        covered = (min(structure, ins.structure_limit) if structure_policy else 0.0) + min(
            contents, ins.contents_limit
        )
        if loss <= ins.deductible:
            below_deductible += 1
            assert not claims
            continue
        # The deductible comes off the loss, then the limits cap the payout (DESIGN.md 2.3).
        expected = min(loss - ins.deductible, covered)
        over_a_limit += expected == covered < loss - ins.deductible
        assert len(claims) == 1
        assert "approved" in claims[0].tags
        assert claims[0].amount == pytest.approx(expected)
        expected_total += expected
        paid += 1
    assert model.year_stats["claims_filed"] == model.year_stats["claims_paid"] == paid > 0
    assert model.year_stats["claims_paid_amount"] == pytest.approx(expected_total)
    assert below_deductible > 0  # the deductible branch ran ...
    assert over_a_limit > 0  # ... and so did the limits, paying a loss over one up to it


def test_denied_claims_are_remembered():
    model = flood_in_year_two("insurance.claim_approval_probability=0.0", depth=5.0)
    model.step()
    model.step()
    assert model.year_stats["claims_filed"] > 0
    assert model.year_stats["claims_paid"] == 0
    denied = [h for h in model.households if h.state.claims_denied]
    assert len(denied) == model.year_stats["claims_filed"]
    for household in denied:
        memory = [i for i in household.memory.episodic if "denied" in i.tags]
        assert memory
        assert memory[0].importance == 0.8


def test_heavy_losses_raise_the_subsidy_and_everyone_remembers_it():
    model = flood_in_year_two(depth=5.0)
    model.step()
    model.step()  # heavy losses in year 2: the government reviews in the same year
    gov = model.config.government
    assert model.government.subsidy_share == pytest.approx(gov.initial_subsidy + gov.step)
    for household in model.households:
        if household.active:
            policy = [i for i in household.memory.working if i.source == "policy"]
            assert any("elevation subsidy from 50% to 55%" in i.content for i in policy)


@pytest.mark.parametrize("engine", ["objects", "arrays"])
def test_the_subsidy_is_reviewed_on_the_mean_damage_per_active_household(engine):
    """Total damage of many households must not read as one household's heavy loss."""
    model = make_model(f"engine={engine}", "government.heavy_loss_per_household=2000")
    assert model.policy_changes(1, 10, 19_999.0, 0.0) == []
    (change,) = model.policy_changes(2, 10, 20_000.0, 0.0)
    assert "elevation subsidy from 50% to 55%" in change[1]


@pytest.mark.parametrize("engine", ["objects", "arrays"])
def test_claims_are_approved_with_the_claims_stream_alone(engine):
    """Another claims stream changes who is denied, not the floods: the streams are apart."""
    runs = []
    for claims_seed in (None, 12345):
        model = make_model(f"engine={engine}", "years=8", count=200)
        if claims_seed is not None:
            model.claims_rng = np.random.default_rng(claims_seed)
        for _ in range(8):
            model.step()
        runs.append((model.metrics(), model.hazard_rng.bit_generator.state))
    (same, hazard), (other, other_hazard) = runs
    assert same["claims_filed"].sum() > 0
    assert not same["claims_paid"].equals(other["claims_paid"])
    assert hazard == other_hazard


@pytest.mark.parametrize("engine", ["objects", "arrays"])
def test_damage_of_exactly_the_major_threshold_is_a_major_flood(engine):
    first = flood_in_year_two(f"engine={engine}")
    first.step()
    first.step()
    damage = max(h.state.last_damage for h in first.households)
    assert damage > 0.0
    model = flood_in_year_two(f"engine={engine}", f"events.major_damage_threshold={damage!r}")
    model.step()
    model.step()
    (household,) = [h for h in model.households if h.state.last_damage == damage]
    (flood,) = [i for i in household.memory.episodic if i.source == "flood" and i.year == 2]
    assert "major" in flood.tags


@pytest.mark.parametrize("engine", ["objects", "arrays"])
def test_households_insured_at_the_start_claim_on_a_flood_in_year_one(engine):
    """Without policies at the start, a first-year flood paid nothing and biased early floods."""
    flood = ("hazard.source=scripted", "hazard.kind=depth", "hazard.events={1: 5.0}")
    bare = make_model(f"engine={engine}", *flood)
    insured = make_model(
        f"engine={engine}", *flood, "households.initial_insured_share={AE: 0.5, X: 0.5}"
    )
    policies = ("has_insurance", "has_contents_insurance", "insured_years")
    for a, b in zip(bare.households, insured.households, strict=True):
        differing = {k for k, v in a.state.to_dict().items() if b.state.to_dict()[k] != v}
        assert differing <= set(policies)  # the same town, its own stream for the policies
    assert sum(h.state.has_insurance or h.state.has_contents_insurance for h in insured.households)
    bare.step()
    insured.step()
    assert bare.year_stats["flooded_households"] == insured.year_stats["flooded_households"] > 0
    assert bare.year_stats["claims_filed"] == 0
    assert insured.year_stats["claims_paid"] > 0
    assert insured.year_stats["claims_paid_amount"] > 0


def test_households_share_equal_texts_and_the_pool_keeps_one_year():
    model = flood_in_year_two("engine=objects", depth=5.0)  # the object path's text pool
    model.step()
    model.step()
    # Every household remembers the subsidy change of year 2 in the same words: one string.
    notes = [
        item.content
        for household in model.households
        if household.active
        for item in household.memory.working
        if item.source == "policy"
    ]
    assert len(notes) > 1
    assert all(note is notes[0] for note in notes)
    pool = model.households[0].memory.texts
    assert all(h.memory.texts is pool for h in model.households)
    # Emptied at the start of each year: after year 2 it holds year 2's texts only.
    assert pool
    assert all(text.startswith("Year 2:") for text in pool)
    model.release()
    assert not pool


def test_neighbours_remember_last_years_adoptions():
    model = make_model("hazard.source=scripted", "hazard.events={}")
    model.step()
    adopters = {h for h in model.households if h.adopted_last_year}
    assert adopters
    model.step()
    for household in model.households:
        if not household.active:
            continue
        seen = sum(n in adopters for n in household.neighbors)
        notes = [i for i in household.memory.working if i.source == "neighbor" and i.year == 2]
        if seen:
            assert notes, household.unique_id
            total = sum(int(i.content.split(": ")[1].split(" of ")[0]) for i in notes)
            assert total == seen
        else:
            assert not notes


def test_institutions_and_neighbours_act_before_anyone_decides():
    model = flood_in_year_two(depth=5.0, count=100)
    model.step()

    def notes(household: HouseholdAgent, source: str) -> int:
        return sum(i.source == source and i.year == 2 for i in household.memory.working)

    at_decision: dict[HouseholdAgent, tuple[float, float, int, int]] = {}
    decide_for = model.decide_for

    def recording(household: HouseholdAgent, year: int) -> Decision:
        at_decision[household] = (
            model.government.subsidy_share,
            model.insurer.rate,
            notes(household, "policy"),
            notes(household, "neighbor"),
        )
        return decide_for(household, year)

    model.decide_for = recording
    model.step()
    assert at_decision
    for household, (subsidy, rate, policy, neighbor) in at_decision.items():
        # Step 5 (the heavy-loss year raised the subsidy) came before step 7 ...
        assert (subsidy, rate) == (model.government.subsidy_share, model.insurer.rate)
        assert subsidy > model.config.government.initial_subsidy
        assert policy >= notes(household, "policy") > 0
        # ... and so did step 6. Working memory holds only four items, so a decision's own
        # memory may push a note out afterwards, never add one.
        assert neighbor >= notes(household, "neighbor")
    assert sum(neighbor for *_, neighbor in at_decision.values()) > 0


def test_premiums_of_last_year_meet_claims_of_this_year():
    # A policy bought in year t's decisions covers the floods of year t + 1.
    model = flood_in_year_two(depth=5.0, count=150)
    reviews: list[tuple[float, float]] = []
    review = model.insurer.review

    def recording(premiums: float, claims: float) -> tuple[float, float] | None:
        reviews.append((premiums, claims))
        return review(premiums, claims)

    model.insurer.review = recording
    collected = [0.0]
    for _ in range(3):
        model.step()
        premiums = sum(
            h.last_decision.cost
            for h in model.households
            if h.last_decision is not None
            and h.last_decision.year == model.steps
            and h.last_decision.skill_id in ("buy_insurance", "buy_contents_insurance")
        )
        assert model.premiums_collected == pytest.approx(premiums)  # this year's only
        collected.append(premiums)
    claims = list(model.metrics()["claims_paid_amount"])
    assert claims[1] > 0  # the year-2 flood was claimed
    assert reviews == [
        (pytest.approx(collected[year - 1]), pytest.approx(claims[year - 1])) for year in (1, 2, 3)
    ]


def test_subsidies_are_charged_to_the_budget_and_stop_when_it_is_spent():
    cost = 20_000.0
    model = flood_in_year_two(
        f"adaptation.elevation_cost={cost}",
        "government.initial_subsidy=0.9",
        "government.max_subsidy=0.95",
        "government.budget=50000",  # about two and a half subsidies of 18,000
        "decision.pmt.asc.elevate_house=1.0",
        depth=5.0,
        count=200,
    )
    for _ in range(2):
        model.step()
        year = model.steps
        paid = [
            h.last_decision.cost
            for h in model.households
            if h.last_decision is not None
            and h.last_decision.year == year
            and h.last_decision.skill_id == "elevate_house"
        ]
        assert len(paid) > 3, "enough elevations to spend the budget"
        subsidies = [cost - c for c in paid]
        assert model.government.spent_this_year == pytest.approx(sum(subsidies))
        assert model.government.spent_this_year <= 50_000
        assert 0.0 in subsidies  # once the budget was spent, elevation cost the full price
        assert any(s > 0 for s in subsidies)


def test_prices_follow_the_premium_rate_zone_elevation_and_subsidy():
    model = make_model(
        "insurance.rate_per_1000=5.0",
        "insurance.zone_multiplier={AE: 1.0, X: 0.3}",
        "insurance.elevated_multiplier=0.5",
        "insurance.structure_limit=250000",
        "insurance.contents_limit=100000",
        "adaptation.elevation_cost=90000",
        "government.initial_subsidy=0.5",
        "adaptation.owner_relocation_cost=30000",
        "adaptation.renter_relocation_cost=5000",
        count=20,
    )
    owner = next(h.state for h in model.households if h.state.tenure == "owner")
    renter = next(h.state for h in model.households if h.state.tenure == "renter")
    owner_x = replace(owner, flood_zone="X", structure_value=300_000.0, contents_value=150_000.0)
    costs = model.costs_for(owner_x)
    # Cover is capped at the limits: 250,000 + 100,000 at $5 per $1,000 x 0.3 in zone X.
    assert costs["buy_insurance"] == pytest.approx(5.0 * 0.3 * 350_000 / 1000)
    assert costs["buy_contents_insurance"] == pytest.approx(5.0 * 0.3 * 100_000 / 1000)
    assert costs["elevate_house"] == pytest.approx(90_000 * 0.5)
    assert costs["relocate"] == 30_000
    assert costs["do_nothing"] == 0.0
    elevated = model.costs_for(replace(owner_x, flood_zone="AE", elevated=True))
    assert elevated["buy_insurance"] == pytest.approx(5.0 * 0.5 * 350_000 / 1000)
    renter_ae = replace(renter, flood_zone="AE", contents_value=40_000.0)
    assert model.costs_for(renter_ae)["buy_contents_insurance"] == pytest.approx(5.0 * 40.0)
    assert model.costs_for(renter_ae)["relocate"] == 5_000


def test_the_cost_matrix_prices_as_costs_for_does():
    model = make_model(
        "insurance.zone_multiplier={AE: 1.0, X: 0.3}",
        "insurance.elevated_multiplier=0.5",
        "insurance.structure_limit=250000",
        "insurance.contents_limit=100000",
        "government.initial_subsidy=0.35",
        count=40,
    )
    rng = np.random.default_rng(3)
    states = []
    for household in model.households:
        state = replace(
            household.state,
            flood_zone=str(rng.choice(["AE", "X", "VE"])),  # VE has no multiplier: 1
            elevated=bool(rng.random() < 0.5),
            structure_value=float(rng.choice([0.0, 180_000.0, 400_000.0])),
            contents_value=float(rng.choice([20_000.0, 150_000.0])),
        )
        states.append(state)
    matrix = model.cost_matrix(states)
    skill_ids = model.registry.skill_ids
    assert matrix.shape == (40, len(skill_ids))
    for state, row in zip(states, matrix.tolist(), strict=True):
        assert row == [model.costs_for(state)[skill_id] for skill_id in skill_ids]
    assert {s.tenure for s in states} == {"owner", "renter"}


def test_insured_years_count_renewals_and_only_new_policies_are_adoptions():
    model = make_model("hazard.source=scripted", "hazard.events={}", count=150)
    insurance = ("buy_insurance", "buy_contents_insurance")
    before = {h: (h.state.insured, h.state.insured_years) for h in model.households}
    renewals = 0
    for _ in range(4):
        model.step()
        for household in model.households:
            decision = household.last_decision
            if decision is None or decision.year != model.steps:
                continue
            was_insured, years = before[household]
            if decision.skill_id in insurance:
                assert household.state.insured_years == (years + 1 if was_insured else 1)
                # Neighbours notice a new policy, not a renewal.
                assert (household.adopted_last_year == "insurance") == (not was_insured)
                renewals += was_insured
            else:
                assert household.state.insured_years == 0
        before = {h: (h.state.insured, h.state.insured_years) for h in model.households}
    assert renewals > 0


def test_a_household_that_moved_away_is_seen_leaving_once():
    model = make_model(
        "hazard.source=scripted",
        "hazard.events={}",
        "decision.pmt.asc.relocate=2.0",
        "engine=objects",  # whose memory log is recorded below
        count=100,
    )
    notes: list[tuple[int, HouseholdAgent, str]] = []
    log = model._log

    def recording(household: HouseholdAgent, result: WriteResult) -> WriteResult:
        if result.item.source == "neighbor" and "relocate" in result.item.tags:
            notes.append((result.item.year, household, result.item.content))
        return log(household, result)

    model._log = recording
    gone: set[HouseholdAgent] = set()  # moved away before last year
    for year in (1, 2, 3):
        left_last_year = {h for h in model.households if h.state.relocated} - gone
        model.step()
        if year == 1:
            continue
        assert left_last_year, "some households move away every year"
        for household in model.households:
            if household.state.relocated and household not in left_last_year:
                continue  # (moved this year or earlier: observed no more)
            seen = [n for n in household.neighbors if n in left_last_year]
            mine = [c for y, h, c in notes if y == year and h is household]
            if not seen:
                assert not mine
                continue
            if not household.active:
                continue  # it moved away this year, after observing
            # "Year 2: 1 of my 8 neighbours moved away last year": only last year's leavers,
            # out of the neighbours who had not left before.
            count, total = re.match(r"Year \d+: (\d+) of my (\d+) ", mine[0]).groups()
            assert int(count) == len(seen)
            assert int(total) == sum(n not in gone for n in household.neighbors)
        gone |= left_last_year


def decision_stream_after(seed: int, draws: int) -> dict:
    """The state of a fresh decision stream of ``seed`` after ``draws`` uniforms."""
    reference = np.random.default_rng(np.random.SeedSequence(seed).spawn(5)[3])
    reference.random(draws)
    return reference.bit_generator.state


def test_each_decision_draws_one_uniform_from_the_decision_stream():
    # Runs stay reproducible, and comparable when a population changes, only if every policy
    # decision consumes exactly one uniform of the decision stream, in activation order.
    model = make_model("decision.pmt.asc.relocate=1.0", count=50)
    columns = ("decisions_buy_insurance", "decisions_elevate_house", "decisions_relocate")
    decisions = 0
    for _ in range(3):
        model.step()
        stats = model.year_stats
        decisions += int(stats["decisions_do_nothing"] + sum(stats[c] for c in columns))
    assert model.year_stats["active_households"] < 50  # some moved away and stopped deciding
    assert model.decision_rng.bit_generator.state == decision_stream_after(
        model.config.seed, decisions
    )

    # A decision outside the yearly step draws from the same stream.
    household = next(h for h in model.households if h.active)
    household.decide(model.steps)
    assert model.decision_rng.bit_generator.state == decision_stream_after(
        model.config.seed, decisions + 1
    )


def test_households_decide_in_a_fresh_shuffle_of_the_model_random_each_year():
    # The order is what a checkpoint's restored streams reproduce and what the array engine
    # draws: the active households shuffled once a year by Mesa's `random`, as shuffle_do would.
    model = make_model("engine=objects", "hazard.source=scripted", "hazard.events={}", count=60)
    decide_together = model._decide_together
    orders: list[list[HouseholdAgent]] = []

    def recording(order: list[HouseholdAgent], year: int) -> None:
        orders.append(list(order))
        decide_together(order, year)

    model._decide_together = recording
    for _ in range(3):
        expected = [h for h in model.households if h.active]
        copy.deepcopy(model.random).shuffle(expected)
        model.step()
        assert orders[-1] == expected
    assert all(order != sorted(order, key=lambda h: h.unique_id) for order in orders)
    assert orders[0] != orders[1] != orders[2]


def test_decisions_follow_the_registry_and_insurance_lapses():
    model = make_model("hazard.source=scripted", "hazard.events={}", count=100)
    decide_for = model.decide_for
    decisions: dict[HouseholdAgent, Decision] = {}

    def recording(household: HouseholdAgent, year: int) -> Decision:
        decisions[household] = decision = decide_for(household, year)
        return decision

    model.decide_for = recording
    for _ in range(3):
        decisions.clear()
        model.step()
        for household in model.households:
            if not household.active and household not in decisions:
                continue
            decision = decisions[household]
            allowed = model.registry.skills[decision.skill_id].allowed_state_changes | {
                "has_insurance",
                "has_contents_insurance",
            }
            assert set(decision.state_changes) <= allowed
            state = household.state
            if household.active:
                renewed = decision.skill_id in ("buy_insurance", "buy_contents_insurance")
                assert state.insured == renewed  # a policy not renewed lapses
            assert decision.memory_update is not None
            assert decision.memory_update.item.source == "decision"
            assert decision.proposal.constructs["TP"].level in {"VL", "L", "M", "H", "VH"}
            # What the household keeps of it.
            summary = household.last_decision
            assert summary is not None
            assert (summary.year, summary.skill_id, summary.cost) == (
                model.steps,
                decision.skill_id,
                decision.cost,
            )
            assert summary.proposed_skill_id == decision.proposal.skill_id
            assert summary.valid == decision.validation.valid
            assert summary.threat == decision.proposal.constructs["TP"].value
            assert (summary.via_llm, summary.retries) == (False, 0)


def test_renters_never_elevate_and_owners_never_buy_contents_only():
    model = flood_in_year_two(count=200)
    for _ in range(4):
        model.step()
    for household in model.households:
        if household.state.tenure == "renter":
            assert not household.state.elevated
            assert not household.state.has_insurance
        else:
            assert not household.state.has_contents_insurance


@pytest.mark.parametrize("engine", ["objects", "arrays"])
def test_mesas_run_model_runs_the_configs_years(engine, monkeypatch):
    # Model.run_model() steps while `running`: left true, it would never return.
    model = make_model("years=3", f"engine={engine}", count=20)
    step = model.step

    def step_within_ten_years() -> None:
        assert model.steps < 10, "run_model went on past the config's years"
        step()

    monkeypatch.setattr(model, "step", step_within_ten_years)
    model.run_model()
    assert model.steps == 3
    assert list(model.datacollector.get_model_vars_dataframe()["year"]) == [1, 2, 3]


@pytest.mark.parametrize("engine", ["objects", "arrays"])
def test_removing_a_household_is_refused_and_release_removes_them_all(engine):
    # Mesa's remove() would drop it from model.agents alone: it would go on being simulated.
    model = make_model("years=3", f"engine={engine}", count=20)
    model.step()
    household = model.households[3]
    with pytest.raises(NotImplementedError, match="households leave the simulation by relocat"):
        household.remove()
    assert household in model.agents
    assert household in model.households  # refused whole: nothing half-removed
    model.step()
    model.release()
    assert len(model.agents) == 0


def test_a_model_restored_from_a_checkpoint_knows_whether_it_is_running():
    model = make_model("years=2", count=10)
    model.step()
    early = checkpoint.capture(model)
    model.step()
    assert not model.running
    checkpoint.restore(model, early)
    assert model.running
    model.step()
    assert model.steps == 2
    assert not model.running


@pytest.mark.parametrize("engine", ["objects", "arrays"])
def test_relocated_households_leave_the_cycle(engine):
    model = make_model("decision.pmt.asc.relocate=5.0", f"engine={engine}", count=30)
    model.step()
    moved = [h for h in model.households if h.state.relocated]
    assert moved
    decided = {id(h): h.last_decision for h in moved}
    model.step()
    for household in moved:
        assert household.last_decision == decided[id(household)]  # of year 1: none since
    assert model.year_stats["active_households"] == 30 - len(moved)


@pytest.mark.parametrize("engine", ["objects", "arrays"])
def test_year_end_consolidates_working_memory(engine):
    # The model routes memories of importance >= the threshold straight to episodic memory, so
    # only a memory written to working memory by hand (as a user's extension might) shows the
    # year-end pass consolidating it. A large working memory keeps the year's other notes from
    # pushing it out (FIFO) before the year ends.
    # On engine arrays the year runs on the pool, and reading the memory afterwards gives new
    # item objects: the items are found again by their texts.
    model = make_model("memory.working_capacity=50", f"engine={engine}", count=20)
    model.step()
    household = next(h for h in model.households if h.active)
    memory = household.memory
    memory.write("Year 1: the levee nearly failed", 0.95, 1, store="working")
    memory.write("Year 1: a quiet evening", 0.1, 1, store="working")
    model.step()
    memory = household.memory
    (important,) = [i for i in memory.working if i.content.endswith("levee nearly failed")]
    (trivial,) = [i for i in memory.working if i.content.endswith("a quiet evening")]
    assert important.consolidated
    assert [i.content for i in memory.episodic].count(important.content) == 1
    assert not trivial.consolidated
    assert trivial.content not in [i.content for i in memory.episodic]


def test_metrics_rows_and_columns():
    model = make_model(count=40)
    for _ in range(4):
        model.step()
    frame = model.metrics()
    assert list(frame.columns) == list(METRIC_COLUMNS)
    assert list(frame["year"]) == [1, 2, 3, 4]
    assert frame["insured_share"].between(0, 1).all()
    assert (frame["mean_working"] <= model.config.memory.working_capacity).all()
    counts = ["active_households", "flooded_households", "claims_paid", "decisions_do_nothing"]
    assert all(frame[c].dtype == "int64" for c in [*counts, "invalid_proposals"])
    assert frame["total_damage"].dtype == "float64"


def test_same_seed_same_run_different_seed_different_run():
    def run(seed: int):
        model = make_model(f"seed={seed}", count=80)
        for _ in range(8):
            model.step()
        return model.metrics()

    first, again, other = run(3), run(3), run(4)
    assert first.equals(again)
    assert not first.equals(other)


def test_grid_and_network_neighbourhoods():
    moore = make_model(count=49)
    von = make_model("social.neighborhood=von_neumann", count=49)
    small = make_model("social.neighborhood=small_world", "social.k=4", count=49)
    centre = 24  # middle of a 7 x 7 grid
    assert len(moore.households[centre].neighbors) == 8
    assert len(von.households[centre].neighbors) == 4
    degrees = [len(h.neighbors) for h in small.households]
    assert sum(degrees) / len(degrees) == pytest.approx(4.0)
    assert all(isinstance(n, HouseholdAgent) for h in small.households for n in h.neighbors)


def test_a_small_world_k_beyond_the_population_is_warned_of_and_capped():
    settings = ("social.neighborhood=small_world", "social.p=0")
    with pytest.warns(ConfigWarning) as caught:
        model = make_model(*settings, "social.k=2000", count=10)
    assert [str(w.message) for w in caught] == [
        (
            "config: social.k: 2000 neighbours is more than 10 households can each have; each "
            "starts with 8, almost every other household"
        )
    ]
    assert {len(h.neighbors) for h in model.households} == {8}
    with pytest.warns(ConfigWarning) as caught:
        make_model(*settings, "social.k=4", count=2)
    assert [str(w.message) for w in caught] == [
        (
            "config: social.k: 4 neighbours is more than 2 households can each have; a small world "
            "needs 3 households or more, so none has a neighbour"
        )
    ]
    with warnings.catch_warnings():  # the default k, capped in a tiny town, is not the user's
        warnings.simplefilter("error")
        make_model("social.neighborhood=small_world", count=5)
        make_model(*settings, "social.k=8", count=10)


@pytest.mark.parametrize("kind", ["moore", "von_neumann", "small_world"])
def test_neighbours_are_mesa_neighbourhoods_in_order(kind: str) -> None:
    """Read from cell connections, they are Mesa's radius-1 neighbourhood, then cell-mates."""
    model = make_model(f"social.neighborhood={kind}", count=300)
    for household in model.households:
        expected = [
            a
            for a in household.cell.neighborhood.agents
            if a is not household and isinstance(a, HouseholdAgent)
        ]
        expected += [a for a in household.cell.agents if a is not household and a not in expected]
        assert household.neighbors == tuple(expected)


def test_release_frees_the_households_without_the_cycle_collector():
    """Batch workers drop model after model; tracing 50,000 households took seconds each."""
    model = make_model("social.neighborhood=moore", count=40)
    model.step()
    households = [weakref.ref(h) for h in model.households]
    assert any(h().neighbors for h in households)  # neighbours refer to each other
    gc.disable()
    try:
        model.release()
        assert all(h() is None for h in households)
    finally:
        gc.enable()


@pytest.mark.parametrize(("floodplain", "beyond"), [("A", "B"), ("VE", "C"), ("V", "D")])
def test_other_fema_zones_behave_as_the_configured_ae_and_x(floodplain: str, beyond: str):
    """A table's A, VE and V homes are priced, appraised and counted as AE homes; B, C and D
    homes as X homes (the config lists AE and X only)."""
    overrides = (
        "hazard.source=scripted",
        "hazard.kind=depth",
        "hazard.events={2: 4.0}",
        "decision.pmt.zone_threat={AE: 0.3, X: 0.12}",  # neither is a default
    )
    reference = make_model(*overrides, count=200)
    relabelled = make_model(*overrides, count=200)
    for household in relabelled.households:
        state = household.state
        state.flood_zone = floodplain if state.flood_zone == "AE" else beyond
    for ref, other in zip(reference.households, relabelled.households, strict=True):
        assert other.state.flood_zone != ref.state.flood_zone
        assert relabelled.costs_for(other.state) == reference.costs_for(ref.state)
    for _ in range(4):
        reference.step()
        relabelled.step()
    expected, got = reference.metrics(), relabelled.metrics()
    assert expected["insured_share_ae"].notna().all()
    assert expected["insured_share_x"].notna().all()
    pd.testing.assert_frame_equal(got, expected)
    choices = [h.last_decision for h in reference.households]
    assert [h.last_decision for h in relabelled.households] == choices


def test_shares_over_no_household_are_nan_not_zero():
    # Every home well below the base flood elevation: the whole town is in zone AE.
    model = make_model("households.bfe_ft=100")
    model.step()
    row = model.metrics().iloc[-1]
    assert {h.state.flood_zone for h in model.households} == {"AE"}
    assert np.isnan(row["insured_share_x"])
    assert row["insured_share_ae"] == row["insured_share"]

    # Everyone moves away in year 1: nothing is left to take a share of.
    gone = make_model(
        "decision.pmt.asc.relocate=30",
        "adaptation.owner_relocation_cost=0",
        "adaptation.renter_relocation_cost=0",
    )
    gone.step()
    row = gone.metrics().iloc[-1]
    assert row["active_households"] == 0
    assert row["relocated_share"] == 1.0
    for column in ("insured_share", "insured_share_ae", "insured_share_x", "elevated_share"):
        assert np.isnan(row[column]), column
    gone.step()  # nobody decides in year 2: no threat appraisal to average
    assert np.isnan(gone.metrics().iloc[-1]["mean_tp"])


@pytest.mark.parametrize(
    ("curves", "basis", "owners_contents_on"),
    [
        ("usace_one_story_no_basement", "auto", "structure"),  # as EGM 01-03 publishes it
        ("jrc_north_america", "auto", "contents"),  # JRC: a share of the contents value
        ("jrc_north_america", "structure", "structure"),  # an explicit choice still holds
    ],
)
def test_owners_contents_curve_applies_to_the_value_its_set_is_published_for(
    curves, basis, owners_contents_on
):
    model = flood_in_year_two(f"damage.curves={curves}", f"damage.owner_contents_basis={basis}")
    model.step()
    model.step()
    owners = [h.state for h in model.households if h.state.tenure == "owner"]
    assert owners
    for s in owners:
        above = np.array([4.0 - s.first_floor_height])
        base = s.structure_value if owners_contents_on == "structure" else s.contents_value
        ds, dc = compute_damage(
            above, np.array([s.structure_value]), np.array([base]), model.curves
        )
        assert s.last_damage == pytest.approx(float(ds[0] + min(dc[0], s.contents_value)))


@pytest.mark.parametrize("ratio", [0.5, 0.25])
def test_the_same_water_takes_the_same_share_of_a_renters_contents_as_of_an_owners(ratio):
    """Under USACE's curves (a share of structure value) renters lost half an owner's share."""
    model = flood_in_year_two(
        f"households.contents_ratio={ratio}", f"damage.renter_contents_ratio={ratio}", depth=9.0
    )
    model.step()
    model.step()
    shares: dict[str, list[float]] = {"owner": [], "renter": []}
    for household in model.households:
        s = household.state
        contents = compute_damage(
            np.array([9.0 - s.first_floor_height]),
            np.array([s.structure_value]),
            np.array([s.structure_value or s.contents_value / ratio]),
            model.curves,
        )[1][0]
        if s.tenure == "renter":
            assert s.last_damage == pytest.approx(min(contents, s.contents_value))
        shares[s.tenure].append(min(contents, s.contents_value) / s.contents_value)
    # One curve, one depth range: the shares of the two tenures span the same values.
    assert min(shares["renter"]) > 0.0
    assert max(shares["renter"]) == pytest.approx(max(shares["owner"]), rel=0.05)


@pytest.mark.parametrize(
    ("curves", "renter_ratio", "applied_to"),
    [
        # The damage key alone decides, whatever the owners' households.contents_ratio (0.5).
        ("usace_one_story_no_basement", 0.25, 4.0),
        # JRC's contents curve is a share of contents value: the ratio plays no part.
        ("jrc_north_america", 0.25, 1.0),
    ],
)
def test_a_renters_contents_curve_applies_to_what_the_damage_section_says(
    curves, renter_ratio, applied_to
):
    model = flood_in_year_two(
        f"damage.curves={curves}", f"damage.renter_contents_ratio={renter_ratio}", depth=5.0
    )
    model.step()
    model.step()
    renters = [h.state for h in model.households if h.state.tenure == "renter"]
    assert renters
    for s in renters:
        contents = compute_damage(
            np.array([5.0 - s.first_floor_height]),
            np.array([0.0]),
            np.array([s.contents_value * applied_to]),
            model.curves,
        )[1][0]
        assert s.last_damage == pytest.approx(min(contents, s.contents_value))


def test_an_elevated_home_takes_less_damage_by_exactly_the_raised_height():
    model = flood_in_year_two(depth=6.0)
    model.step()
    owners = [h for h in model.households if h.active and h.state.tenure == "owner"]
    raised_home, plain_home = owners[0], owners[1]
    raised_home.state.elevated = True
    ffh = {h: h.state.first_floor_height for h in (raised_home, plain_home)}
    model.step()
    raised = model.config.adaptation.elevation_height_ft
    for household, lift in ((raised_home, raised), (plain_home, 0.0)):
        s = household.state
        above = np.array([6.0 - ffh[household] - lift])
        ds, dc = compute_damage(
            above, np.array([s.structure_value]), np.array([s.structure_value]), model.curves
        )
        assert s.last_damage == pytest.approx(float(ds[0] + min(dc[0], s.contents_value)))
    # The same home unelevated would have lost more.
    s = raised_home.state
    unraised = compute_damage(
        np.array([6.0 - ffh[raised_home]]),
        np.array([s.structure_value]),
        np.array([s.structure_value]),
        model.curves,
    )
    assert s.last_damage < float(unraised[0][0] + min(unraised[1][0], s.contents_value))


def test_contents_damage_never_exceeds_what_the_contents_are_worth():
    # Contents worth a tenth of the structure: the curves' contents share of structure value
    # (up to 0.4 at 8 ft) is more than the contents themselves.
    model = flood_in_year_two("households.contents_ratio=0.1", depth=9.0)
    model.step()
    owners = [h for h in model.households if h.active and h.state.tenure == "owner"]
    model.step()
    capped = 0
    for household in owners:
        s = household.state
        ds, dc = compute_damage(
            np.array([9.0 - s.first_floor_height]),
            np.array([s.structure_value]),
            np.array([s.structure_value]),
            model.curves,
        )
        capped += dc[0] > s.contents_value
        assert s.last_damage == pytest.approx(float(ds[0] + min(dc[0], s.contents_value)))
    assert capped  # the cap binds for some owners, so the test checks it


def test_flood_depths_come_from_the_hazard_stream():
    # A level near the floodplain's ground every year: some homes flood, some stay dry.
    model = make_model("hazard.loc=9", "hazard.scale=1", "hazard.spatial_noise_sd=0.5", count=400)
    flooded = []
    for _ in range(3):
        stream = copy.deepcopy(model.hazard_rng)
        active = [h for h in model.households if h.active]
        sites_ground = np.array([h.state.ground_elevation for h in active])
        level = stream.gumbel(model.config.hazard.loc, model.config.hazard.scale)
        # One value per household of the population; each active home takes its own.
        noise = stream.normal(0.0, 0.5, size=400)[[h.number for h in active]]
        expected = int(np.count_nonzero(level + noise - sites_ground > 0.0))
        model.step()
        assert model.year_stats["flooded_households"] == expected
        flooded.append(expected)
    assert max(flooded) > 0
    assert min(flooded) < 400


@pytest.mark.parametrize("engine", ["arrays", "objects"])
def test_runs_that_differ_in_their_decisions_share_their_floods_and_claim_draws(engine):
    """Common random numbers: a policy that moves more households away meets the same floods.

    The hazard and claims streams draw a value per household of the population every year,
    moved away or not, so what households decide changes neither stream.
    """
    common = ("hazard.loc=9", "hazard.scale=1", "hazard.spatial_noise_sd=0.5", f"engine={engine}")
    calm = make_model(*common, "years=8", count=200)
    restless = make_model(*common, "years=8", "decision.pmt.asc={relocate: 2.0}", count=200)
    for model in (calm, restless):
        for _ in range(8):
            model.step()
    moved = [sum(h.state.relocated for h in m.households) for m in (calm, restless)]
    assert moved[0] < moved[1]
    for stream in ("hazard_rng", "claims_rng"):
        states = [getattr(m, stream).bit_generator.state for m in (calm, restless)]
        assert states[0] == states[1], stream


def _run_files(tmp_path: Path, overrides: list[str], *, together: bool, monkeypatch) -> dict:
    from simulation.runner import run_simulation

    if not together:
        monkeypatch.setattr(FloodAdaptationModel, "_decides_together", lambda self: False)
    config, base = load_config(
        DEFAULT,
        ["audit.gzip=false", "audit.timestamps=false", "years=8", "engine=objects", *overrides],
    )
    out = tmp_path / ("together" if together else "alone")
    run_dir = run_simulation(config, base, out, progress=False, run_id="same").run_dir
    monkeypatch.undo()
    return {
        path.name: path.read_bytes()
        for path in sorted(run_dir.iterdir())
        if path.suffix in {".jsonl", ".csv"}
    }


@pytest.mark.parametrize(
    "overrides",
    [
        ["households.count=300", "audit.level=standard"],
        # Explained (fully traced) households among the others, and a budget that runs out.
        [
            "households.count=300",
            "audit.level=full",
            "audit.sample=0.2",
            "government.budget=200000",
            "decision.pmt.asc.elevate_house=0.5",
        ],
    ],
    ids=["standard", "full-sample-budget"],
)
@pytest.mark.parametrize("chunk", [1024, 7])
def test_deciding_together_changes_nothing(tmp_path, monkeypatch, overrides, chunk):
    """Pricing, validating and choosing in bulk leaves every metric and audit line as it was."""
    monkeypatch.setattr(model_module, "_DECISION_CHUNK", chunk)
    calls = []
    decide_many = PMTPolicy.decide_many
    monkeypatch.setattr(
        PMTPolicy, "decide_many", lambda self, *a: calls.append(len(a[0])) or decide_many(self, *a)
    )
    together = _run_files(tmp_path, overrides, together=True, monkeypatch=monkeypatch)
    assert calls, "the run decided in bulk"
    assert max(calls) <= chunk
    if "government.budget=200000" in overrides and chunk > 300:
        assert len(calls) > 8, "the budget ran out mid-year and the rest decided again"
    alone = _run_files(tmp_path, overrides, together=False, monkeypatch=monkeypatch)
    assert set(together) == {
        "households.csv",
        "model_years.csv",
        "household_traces.jsonl",
        "memory_updates.jsonl",
        "tool_invocations.jsonl",
        "consolidation.jsonl",
    }
    for name, content in together.items():
        assert content == alone[name], name


def test_a_decision_memory_naming_household_fields_is_each_households_own(tmp_path):
    """A rendered decision memory is reused for the same choice at the same price only when
    its template names no household field."""
    shipped = (DEFAULT.parents[1] / "skill_registry.yaml").read_text(encoding="utf-8")
    waiting = '"Year {year}: I chose to wait and not take protective action"'
    assert waiting in shipped
    registry = tmp_path / "registry.yaml"
    registry.write_text(
        shipped.replace(waiting, '"Year {year}: I waited, earning ${income:,.0f}"'),
        encoding="utf-8",
    )
    model = make_model(f"registry={registry}", count=32)
    model.step()
    waited = [h for h in model.households if h.last_decision.skill_id == "do_nothing"]
    assert len({h.state.income for h in waited}) > 1
    for household in waited:
        (memory,) = [i for i in household.memory.working if i.source == "decision"]
        year, income = household.last_decision.year, household.state.income
        assert memory.content == f"Year {year}: I waited, earning ${income:,.0f}"


@pytest.mark.parametrize(
    ("events", "expected"),
    [("{12: 9.0}", "1 entry is for a year"), ("{11: 9.0, 15: 9.0}", "2 entries are for years")],
)
def test_scripted_events_after_the_last_year_are_named_in_a_warning(events, expected):
    with pytest.warns(
        ConfigWarning,
        match=rf"hazard\.events: {expected} after the run's last year \(10\)",
    ):
        make_model("years=10", "hazard.source=scripted", f"hazard.events={events}", count=8)
    with warnings.catch_warnings():
        warnings.simplefilter("error")
        make_model("years=10", "hazard.source=scripted", "hazard.events={10: 9.0}", count=8)


def test_scripted_events_none_of_which_falls_in_the_run_warn_that_it_has_no_floods():
    with pytest.warns(ConfigWarning) as caught:
        make_model(
            "years=10", "hazard.source=scripted", "hazard.events={11: 9.0, 15: 9.0}", count=8
        )
    (warning,) = caught
    assert str(warning.message) == (
        "config: hazard.events: 2 entries are for years after the run's last year (10) and "
        "will never be used (from year 11); none is within the run's 10 years, so the run has "
        "no floods"
    )
    # One flood still happens: the others are named, and no more than that is said.
    with pytest.warns(ConfigWarning) as caught:
        make_model("years=10", "hazard.source=scripted", "hazard.events={3: 9.0, 15: 9.0}", count=8)
    assert "no floods" not in str(caught[0].message)
    # No events at all is how a flood-free control run is written: nothing to warn about.
    with warnings.catch_warnings():
        warnings.simplefilter("error")
        make_model("years=10", "hazard.source=scripted", "hazard.events={}", count=8)


def test_raster_grids_after_the_last_year_are_named_in_a_warning(tmp_path):
    grid = tmp_path / "depth.asc"
    grid.write_text("ncols 2\nnrows 1\nxllcorner 0\nyllcorner 0\ncellsize 1\n1.0 2.0\n", "utf-8")
    rasters = f"hazard.rasters={{3: {grid}, 12: {grid}}}"
    with pytest.warns(
        ConfigWarning,
        match=r"hazard\.rasters: 1 entry is for a year after the run's last year \(10\) and will "
        r"never be used \(year 12\)$",
    ):
        make_model("years=10", "hazard.source=raster", rasters, count=8)
    with pytest.warns(ConfigWarning, match=r"\(year 12\); none is within the run's 10 years, so "):
        make_model("years=10", "hazard.source=raster", f"hazard.rasters={{12: {grid}}}", count=8)


def test_a_raster_grid_that_covers_no_home_is_named_in_a_warning(tmp_path):
    # A grid in UTM metres beside homes laid out from 0 (the default world's): a mistake that
    # would otherwise pass for a run without floods.
    far = tmp_path / "utm.asc"
    far.write_text("ncols 2\nnrows 1\nxllcorner 500000\nyllcorner 4000000\ncellsize 30\n1 2\n")
    near = tmp_path / "near.asc"
    near.write_text("ncols 1\nnrows 1\nxllcorner -10\nyllcorner -10\ncellsize 1000\n2.0\n")
    with pytest.warns(ConfigWarning) as caught:
        make_model("years=3", "hazard.source=raster", f"hazard.rasters={{2: {far}}}", count=8)
    expected = (
        f"config: hazard.rasters: the grid of year 2 covers no home, so its flood reaches no "
        f"one: {far} spans x 500000 to 500060 and y 4000000 to 4000030; the homes lie within "
        "x 0 to 60 and y 0 to 60 (are both in the same coordinate system?)"
    )
    assert [str(w.message) for w in caught] == [expected]
    both = f"hazard.rasters={{1: {near}, 2: {far}, 3: {far}}}"
    with pytest.warns(
        ConfigWarning, match=r"hazard\.rasters: 2 of the run's 3 grids \(the first: "
    ):
        make_model("years=3", "hazard.source=raster", both, count=8)
    with warnings.catch_warnings():  # a grid over the homes: nothing to say
        warnings.simplefilter("error")
        model = make_model("years=3", "hazard.source=raster", f"hazard.rasters={{2: {near}}}")
    model.step()
    model.step()
    assert model.year_stats["flooded_households"] == 64


def test_a_raster_grid_that_is_nodata_at_every_home_is_named_in_a_warning(tmp_path):
    blank = tmp_path / "blank.asc"
    blank.write_text(
        "ncols 2\nnrows 1\nxllcorner -10\nyllcorner -10\ncellsize 1000\nNODATA_value -9999\n"
        "-9999 -9999\n"
    )
    with pytest.warns(ConfigWarning) as caught:
        make_model("years=3", "hazard.source=raster", f"hazard.rasters={{2: {blank}}}", count=8)
    assert [str(w.message) for w in caught] == [
        (
            f"config: hazard.rasters: the grid of year 2 is NODATA at every home, so its flood "
            f"reaches no one ({blank})"
        )
    ]


@pytest.mark.parametrize(
    ("units", "said"),
    [("ft", "up to 150 ft deep at a home,"), ("m", "up to 150 m deep at a home (492 ft),")],
)
def test_a_depth_grid_implausibly_deep_at_a_home_is_named_in_a_warning(tmp_path, units, said):
    """Centimetres read as metres flood every home a hundred times too deep, without a word."""
    cm = tmp_path / "cm.asc"
    cm.write_text("ncols 2\nnrows 1\nxllcorner -10\nyllcorner -10\ncellsize 1000\n150 300\n")
    overrides = ("years=3", "hazard.source=raster", f"hazard.rasters={{2: {cm}}}")
    with pytest.warns(ConfigWarning) as caught:
        make_model(*overrides, f"hazard.units={units}", count=8)
    assert [str(w.message) for w in caught] == [
        (
            f"config: hazard.rasters: the grid of year 2 is {said} more than 50 ft: are its "
            f"values in hazard.units ({units})? ({cm})"
        )
    ]
    deep = ("hazard.source=scripted", "hazard.kind=depth", "hazard.events={2: 4.0, 3: 500}")
    with pytest.warns(ConfigWarning) as caught:
        make_model("years=3", *deep, count=8)
    assert [str(w.message) for w in caught] == [
        (
            "config: hazard.events: year 3 floods every home 500 ft deep (kind: depth, in ft), "
            "more than 50 ft: a depth in another unit?"
        )
    ]
    with warnings.catch_warnings():  # 12 ft: a deep flood, not a units mistake
        warnings.simplefilter("error")
        make_model(
            "years=3",
            "hazard.source=scripted",
            "hazard.kind=depth",
            "hazard.events={2: 12}",
            count=8,
        )


def test_a_scripted_water_level_implausibly_high_above_the_homes_is_warned_of():
    """A level in metres above another datum, or a depth typed as a level, floods every home
    hundreds of feet deep."""
    high = ("hazard.source=scripted", "hazard.kind=level", "hazard.events={2: 9.5, 3: 950}")
    with pytest.warns(ConfigWarning) as caught:
        model = make_model("years=3", *high, count=8)
    lowest = min(h.state.ground_elevation for h in model.households)
    assert [str(w.message) for w in caught] == [
        (
            "config: hazard.events: year 3's water level 950 ft (kind: level, ft above the datum) "
            f"stands {950 - lowest:,.0f} ft above the lowest home's ground ({lowest:.3g} ft), more "
            "than 50 ft: a level in another unit or datum?"
        )
    ]
    with warnings.catch_warnings():  # the single-flood scenario's 9.5 ft is a flood, not a slip
        warnings.simplefilter("error")
        make_model("years=3", "hazard.source=scripted", "hazard.events={2: 9.5}", count=8)


def test_justifications_say_renewed_what_the_registry_renews():
    """The policy lapses unless the skill's registry effects set it; the text follows the same
    rule, even where decision.pmt.insurance_skills leaves a skill out."""
    from simulation.decisions.base import Option

    model = make_model("decision.pmt.insurance_skills=[buy_insurance]", count=10)
    renter = replace(
        model.households[0].state, tenure="renter", has_insurance=False, has_contents_insurance=True
    )
    rng = np.random.default_rng(0)
    for skill_id, says in [("buy_contents_insurance", "renew my policy"), ("relocate", "lapse")]:
        proposal = model.policy.decide(renter, [], [Option(skill_id, 100.0)], {}, rng)
        assert says in proposal.justification, proposal.justification


@st.composite
def _world(draw: st.DrawFn) -> list[str]:
    """``--set`` overrides for a small world with drawn prices, institutions and floods."""
    return [
        f"seed={draw(st.integers(0, 2**16))}",
        f"hazard.loc={draw(st.floats(1.0, 6.0)):.2f}",
        f"insurance.rate_per_1000={draw(st.floats(2.0, 12.0)):.2f}",
        f"insurance.deductible={draw(st.integers(0, 20_000))}",
        f"insurance.structure_limit={draw(st.integers(10_000, 250_000))}",
        f"insurance.contents_limit={draw(st.integers(5_000, 100_000))}",
        f"insurance.claim_approval_probability={draw(st.floats(0.0, 1.0)):.2f}",
        f"insurer.enabled={str(draw(st.booleans())).lower()}",
        f"government.budget={draw(st.sampled_from(['null', '0', '50000', '500000']))}",
        f"adaptation.elevation_cost={draw(st.integers(5_000, 120_000))}",
        f"decision.pmt.asc.elevate_house={draw(st.floats(-6.0, 0.0)):.1f}",
        f"decision.pmt.asc.relocate={draw(st.floats(-6.0, 0.0)):.1f}",
        f"households.owner_share={draw(st.floats(0.0, 1.0)):.2f}",
    ]


# Every skill counts in one decisions_ column (contents insurance with buy_insurance).
_ADAPTATIONS = ("elevate_house", "relocate", "do_nothing")


@pytest.mark.slow
@settings(max_examples=15, suppress_health_check=[HealthCheck.too_slow])
@given(overrides=_world())
def test_the_yearly_books_balance_whatever_the_world(overrides: list[str]) -> None:
    """Counts nest, money is bounded by what caused it, adaptations are never undone, and every
    household that starts a year decides once in it: for any prices, institutions and floods."""
    config, base = load_config(DEFAULT, ["households.count=30", "years=6", *overrides])
    model = build_model(config, base)
    insurance, insurer = config.insurance, config.insurer
    government = config.government
    deciding = len(model.households)
    elevated: set[str] = set()
    relocated: set[str] = set()
    for _ in range(config.years):
        model.step()
        row = model.year_stats
        decided = sum(row[f"decisions_{s}"] for s in ("buy_insurance", *_ADAPTATIONS))
        assert decided == deciding
        assert row["active_households"] == deciding - row["decisions_relocate"]
        deciding = row["active_households"]
        assert row["damaged_households"] <= row["flooded_households"] <= decided
        assert row["claims_paid"] <= row["claims_filed"] <= row["damaged_households"]
        assert row["claims_paid_amount"] <= row["total_damage"] + 1e-6
        cap = insurance.structure_limit + insurance.contents_limit
        assert row["claims_paid_amount"] <= row["claims_paid"] * cap + 1e-6
        if insurer.enabled:
            assert insurer.min_rate <= row["premium_rate"] <= insurer.max_rate
        else:
            assert row["premium_rate"] == insurance.rate_per_1000
        assert government.min_subsidy <= row["subsidy_share"] <= government.max_subsidy
        for household in model.households:
            state = household.state
            if state.agent_id in relocated:
                assert state.relocated
                continue
            if state.relocated:
                relocated.add(state.agent_id)
            if state.agent_id in elevated:
                assert state.elevated  # an elevation is never undone
            if state.elevated:
                elevated.add(state.agent_id)
                assert state.tenure == "owner"
            assert len(household.memory.working) <= config.memory.working_capacity
            assert len(household.memory.episodic) <= config.memory.episodic_capacity
    metrics = model.metrics()
    assert metrics["relocated_share"].is_monotonic_increasing


class _InsureAtRandom:
    """A policy of one's own, written to the DecisionPolicy protocol."""

    def decide(self, state, memories, options, context, rng, *, explain=True):
        choices = sorted(o.skill_id for o in options)
        pick = choices[int(rng.integers(len(choices)))]  # a Generator, not one uniform
        return Proposal(pick, justification=f"drew {pick}" if explain else "")


@pytest.mark.parametrize("engine", ["objects", "arrays"])
def test_a_policy_of_ones_own_gets_the_generator_and_decides_every_household(engine):
    runs = []
    for _ in range(2):
        model = make_model(f"engine={engine}", "years=3")
        model.policy = _InsureAtRandom()
        model.run_model()
        runs.append(model.metrics())
    pd.testing.assert_frame_equal(runs[0], runs[1])
    chosen = {h.last_decision.skill_id for h in model.households if h.last_decision}
    assert len(chosen) > 2  # drawn among the options, not always one skill


@pytest.mark.parametrize("engine", ["objects", "arrays"])
def test_households_are_mesas_household_agents_by_type_on_either_engine(engine):
    model = make_model(f"engine={engine}", count=30)
    households = model.agents_by_type[HouseholdAgent]
    assert len(households) == 30
    assert set(households) == set(model.households)
    assert HouseholdAgent in model.agent_types


@pytest.mark.parametrize("engine", ["objects", "arrays"])
def test_a_released_model_refuses_another_year(engine):
    model = make_model(f"engine={engine}", "years=2", count=20)
    model.run_model()
    model.release()
    with pytest.raises(RuntimeError, match=r"was released .*build a new one"):
        model.step()


@pytest.mark.parametrize(
    ("override", "refusal"),
    [
        ("memory.retrieval.top_k=50", r"memory\.retrieval\.top_k: .*retrieve_memory in"),
        ("audit.sample=[H1]", r"audit\.sample: 'H1' is not a household of this run"),
    ],
)
def test_a_model_built_the_mesa_way_refuses_what_build_model_refuses(override, refusal):
    """FloodAdaptationModel(config, base_dir) checks the registry and sample ids itself."""
    config, base = load_config(DEFAULT, ["households.count=10", override])
    with pytest.raises(ConfigError, match=refusal):
        FloodAdaptationModel(config, base)


def test_build_model_takes_the_config_folder_as_text():
    config, base = load_config(DEFAULT, ["households.count=10", "years=2"])
    model = build_model(config, str(base))
    model.run_model()
    assert len(model.metrics()) == 2
