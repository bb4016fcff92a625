"""Behavioural tests of the Protection Motivation Theory decision policy."""

from __future__ import annotations

import math

import numpy as np
import pytest
from hypothesis import given, settings
from hypothesis import strategies as st
from pydantic import ValidationError

from simulation.agents.state import HouseholdState, ZoneColumn
from simulation.decisions.base import LEVELS, DecisionPolicy, DrawnUniform, Option
from simulation.decisions.pmt import (
    MEMORY_KINDS,
    PMTConfig,
    PMTPolicy,
    _pick,  # the draw's mapping to an option, whose float edge no run reaches on purpose
    coping_appraisal,
    memory_kind,
    threat_appraisal,
)
from simulation.memory.item import MemoryItem, ScoredMemory

INCOME = 60_000.0
PREMIUM = 1_200.0  # 2% of income
OPTIONS = (
    Option("do_nothing", 0.0),
    Option("buy_insurance", PREMIUM),
    Option("elevate_house", 0.3 * INCOME),
    Option("relocate", INCOME),
)


def household(**changes: object) -> HouseholdState:
    fields: dict[str, object] = {
        "agent_id": "H00001",
        "tenure": "owner",
        "income": INCOME,
        "structure_value": 250_000.0,
        "contents_value": 60_000.0,
        "flood_zone": "AE",
        "ground_elevation": 5.0,
        "first_floor_height": 1.0,
    }
    fields.update(changes)
    return HouseholdState(**fields)  # type: ignore[arg-type]


def memory(
    source: str,
    tags: tuple[str, ...] = (),
    *,
    score: float = 0.9,
    year: int = 3,
    amount: float | None = None,
    seq: int = 1,
) -> ScoredMemory:
    item = MemoryItem(
        "H00001", seq, f"Year {year}: {source}", 0.9, year, tags=tags, source=source, amount=amount
    )
    return ScoredMemory(item, score, "episodic")


MAJOR_FLOOD = memory("flood", ("flood", "major"), amount=80_000.0)


def probabilities(state: HouseholdState, memories=(), options=OPTIONS, config=None):
    proposal = PMTPolicy(config).decide(
        state, list(memories), options, {}, np.random.default_rng(0)
    )
    assert proposal.probabilities is not None
    return proposal.probabilities


# Threat appraisal -------------------------------------------------------------------------------


def test_threat_without_memories_is_the_zone_baseline() -> None:
    ae, _ = threat_appraisal([], "AE")
    x, _ = threat_appraisal([], "X")
    assert ae == 0.25
    assert x == 0.05
    assert ae > x


@pytest.mark.parametrize("zone", ["A", "VE", "V"])
def test_unlisted_floodplain_zones_take_the_ae_baseline(zone: str) -> None:
    """A household table with every FEMA zone: its A, VE and V homes are floodplain homes."""
    assert threat_appraisal([], zone)[0] == 0.25
    config = PMTConfig(zone_threat={"AE": 0.4}, other_zone_threat=0.1)
    assert threat_appraisal([], zone, config)[0] == 0.4
    listed = PMTConfig(zone_threat={zone: 0.6})
    assert threat_appraisal([], zone, listed)[0] == 0.6


@pytest.mark.parametrize("zone", ["B", "C", "D"])
def test_unlisted_zones_outside_the_floodplain_take_x_or_other_zone_threat(zone: str) -> None:
    assert threat_appraisal([], zone)[0] == 0.05
    assert threat_appraisal([], zone, PMTConfig(zone_threat={"X": 0.15}))[0] == 0.15
    assert threat_appraisal([], zone, PMTConfig(other_zone_threat=0.1))[0] == 0.1
    listed = PMTConfig(zone_threat={zone: 0.2}, other_zone_threat=0.1)
    assert threat_appraisal([], zone, listed)[0] == 0.2


def test_major_flood_raises_threat_and_names_it() -> None:
    none, _ = threat_appraisal([], "AE")
    flooded, explanation = threat_appraisal([MAJOR_FLOOD], "AE")
    assert flooded > none + 0.3
    assert math.isclose(flooded, 1 - 0.75 * math.exp(-0.9))
    assert "major flood" in explanation
    assert "year 3" in explanation


def test_decayed_memory_gives_less_threat() -> None:
    scores = [0.9, 0.9 * 0.95**5, 0.9 * 0.95**15, 0.0]
    tps = [
        threat_appraisal([memory("flood", ("flood", "major"), score=s)], "AE")[0] for s in scores
    ]
    assert tps == sorted(tps, reverse=True)
    assert len(set(tps)) == len(tps)
    assert tps[-1] == 0.25  # a forgotten (score 0) memory is no cue at all


def test_severity_orders_threat() -> None:
    tp = {
        tag: threat_appraisal([memory("flood", ("flood", tag))], "X")[0]
        for tag in ("major", "minor", "no_damage")
    }
    assert tp["major"] > tp["minor"] > tp["no_damage"] > 0.05


def test_claim_denied_raises_threat_more_than_paid() -> None:
    base, _ = threat_appraisal([], "AE")
    denied, _ = threat_appraisal([memory("claim", ("claim", "denied"))], "AE")
    paid, _ = threat_appraisal([memory("claim", ("claim",))], "AE")
    assert denied > paid > base


def test_threat_saturates_below_one() -> None:
    floods = [memory("flood", ("flood", "major"), seq=n, score=5.0) for n in range(50)]
    tp, _ = threat_appraisal(floods, "AE")
    assert 0.99 < tp <= 1.0
    capped, _ = threat_appraisal([memory("flood", ("flood", "major"), score=3.0)], "AE")
    unit, _ = threat_appraisal([memory("flood", ("flood", "major"), score=1.0)], "AE")
    assert capped == unit  # weighted-retrieval scores above score_cap count as score_cap


def test_decisions_and_other_memories_are_not_threat_cues() -> None:
    cues = [memory("decision", ("decision",)), memory("other"), memory("seed", ("seed",))]
    assert threat_appraisal(cues, "AE")[0] == 0.25


@pytest.mark.parametrize(
    ("source", "tags", "amount", "kind"),
    [
        ("flood", ("flood", "major"), None, "flood_major"),
        ("flood", ("flood", "minor"), 90_000.0, "flood_minor"),
        ("flood", ("flood", "no_damage"), None, "flood_no_damage"),
        ("flood", ("flood", "damage"), 50_000.0, "flood_major"),
        ("flood", ("flood", "damage"), 49_999.0, "flood_minor"),
        ("flood", ("flood", "damage"), 0.0, "flood_no_damage"),
        ("flood", ("flood",), None, "flood_minor"),
        ("claim", ("claim", "denied"), 0.0, "claim_denied"),
        ("claim", ("claim",), 20_000.0, "claim_paid"),
        ("neighbor", (), None, "neighbor"),
        ("policy", (), None, "policy"),
        ("reflection", ("reflection",), None, "reflection"),
        ("seed", ("seed", "flood"), None, "seed"),
        ("seed", ("seed",), None, None),
        ("decision", ("decision",), None, None),
        ("other", (), None, None),
    ],
)
def test_memory_kind(source, tags, amount, kind) -> None:
    item = MemoryItem("H1", 0, "x", 0.5, 1, tags=tags, source=source, amount=amount)
    assert memory_kind(item) == kind
    assert kind is None or kind in MEMORY_KINDS


# Coping appraisal -------------------------------------------------------------------------------


def test_coping_falls_with_cost_relative_to_income() -> None:
    state = household()
    cps = [coping_appraisal(Option("buy_insurance", cost), state) for cost in (0, 600, 1200, 6000)]
    assert cps == sorted(cps, reverse=True)
    assert math.isclose(cps[2], 0.6 * 0.6 - 4.0 * 0.02)  # 2% of income lowers CP by 0.08
    poorer = coping_appraisal(Option("buy_insurance", 1200), household(income=20_000.0))
    assert poorer < cps[2]
    assert coping_appraisal(Option("elevate_house", 0.3 * INCOME), state) == 0.0
    assert coping_appraisal(Option("relocate", 0.0), state) == pytest.approx(0.54)


def test_claim_experience_moves_insurance_coping_only() -> None:
    option = Option("buy_insurance", PREMIUM)
    base = coping_appraisal(option, household())
    assert coping_appraisal(option, household(claims_paid=1)) == pytest.approx(base + 0.1)
    assert coping_appraisal(option, household(claims_paid=5)) == pytest.approx(base + 0.2)
    assert coping_appraisal(option, household(claims_denied=1)) == pytest.approx(base - 0.15)
    assert coping_appraisal(option, household(claims_denied=9)) == 0.0
    elevate = Option("elevate_house", 5_000.0)
    assert coping_appraisal(elevate, household(claims_paid=2)) == coping_appraisal(
        elevate, household()
    )


def test_coping_of_unknown_skill_is_an_error() -> None:
    with pytest.raises(ValueError, match="flood_wall"):
        coping_appraisal(Option("flood_wall", 1.0), household())


# Choice -----------------------------------------------------------------------------------------


def test_probabilities_sum_to_one_over_offered_options_only() -> None:
    offered = (OPTIONS[0], OPTIONS[1])
    probs = probabilities(household(), [MAJOR_FLOOD], offered)
    assert list(probs) == ["do_nothing", "buy_insurance"]
    assert math.isclose(sum(probs.values()), 1.0)
    full = probabilities(household(), [MAJOR_FLOOD])
    assert math.isclose(sum(full.values()), 1.0)
    assert set(full) == {o.skill_id for o in OPTIONS}
    assert all(0.0 < p < 1.0 for p in full.values())


def test_plausibility_targets_of_the_defaults() -> None:
    uninsured = probabilities(household())
    insured = probabilities(household(has_insurance=True))
    flooded = probabilities(household(), [MAJOR_FLOOD])
    assert 0.1 <= uninsured["buy_insurance"] <= 0.2
    assert 0.3 <= insured["buy_insurance"] <= 0.6
    assert flooded["buy_insurance"] > 0.6
    assert uninsured["elevate_house"] < 0.01
    assert insured["elevate_house"] < 0.01
    assert uninsured["relocate"] < uninsured["elevate_house"]
    assert flooded["relocate"] < flooded["elevate_house"] < 0.05
    outside = probabilities(household(flood_zone="X"))
    assert outside["buy_insurance"] < uninsured["buy_insurance"]
    renter = household(tenure="renter", structure_value=0.0, income=40_000.0)
    contents = (Option("do_nothing", 0.0), Option("buy_contents_insurance", 400.0))
    assert 0.05 < probabilities(renter, (), contents)["buy_contents_insurance"] < 0.2


def test_forgetting_lowers_insurance_uptake() -> None:
    uptake = [
        probabilities(household(), [memory("flood", ("flood", "major"), score=0.9 * 0.9**age)])[
            "buy_insurance"
        ]
        for age in range(0, 30, 5)
    ]
    assert uptake == sorted(uptake, reverse=True)
    assert uptake[0] > 0.6
    assert uptake[-1] < 0.2


def test_denied_claims_lower_renewal() -> None:
    trusting = probabilities(household(has_insurance=True, claims_paid=1))
    burnt = probabilities(household(has_insurance=True, claims_denied=2))
    assert burnt["buy_insurance"] < trusting["buy_insurance"]


def test_logit_scale_sharpens_choice() -> None:
    flat = probabilities(household(), [MAJOR_FLOOD], config=PMTConfig(logit_scale=0.2))
    sharp = probabilities(household(), [MAJOR_FLOOD], config=PMTConfig(logit_scale=5.0))
    assert max(sharp.values()) > max(flat.values())


def test_empirical_frequency_matches_probability() -> None:
    policy = PMTPolicy()
    state = household(has_insurance=True)
    rng = np.random.default_rng(12345)
    p = policy.decide(state, [], OPTIONS, {}, rng).probabilities["buy_insurance"]
    n = 20_000
    hits = sum(
        policy.decide(state, [], OPTIONS, {}, rng).skill_id == "buy_insurance" for _ in range(n)
    )
    assert abs(hits / n - p) < 0.01


def test_same_seed_same_choices_different_seed_differs() -> None:
    policy = PMTPolicy()
    states = [
        household(agent_id=f"H{n:05d}", flood_zone="AE" if n % 3 else "X", has_insurance=n % 2 == 0)
        for n in range(200)
    ]
    flood = [[MAJOR_FLOOD] if n % 4 == 0 else [] for n in range(200)]

    def run(seed: int) -> list[str]:
        rng = np.random.default_rng(seed)
        return [
            policy.decide(s, m, OPTIONS, {}, rng).skill_id
            for s, m in zip(states, flood, strict=True)
        ]

    assert run(7) == run(7)
    assert run(7) != run(8)


def test_exactly_one_draw_per_decision_even_with_one_option() -> None:
    policy = PMTPolicy()
    for options in (OPTIONS, (OPTIONS[0],)):
        rng = np.random.default_rng(3)
        reference = np.random.default_rng(3)
        proposal = policy.decide(household(), [MAJOR_FLOOD], options, {}, rng)
        reference.random()
        assert rng.random() == reference.random()
    assert proposal.skill_id == "do_nothing"
    assert proposal.probabilities == {"do_nothing": 1.0}
    assert proposal.constructs["CP"].level in LEVELS


def test_no_options_or_unknown_skill_is_an_error() -> None:
    rng = np.random.default_rng(0)
    with pytest.raises(ValueError, match="no options offered"):
        PMTPolicy().decide(household(), [], [], {}, rng)
    with pytest.raises(ValueError, match="flood_wall"):
        PMTPolicy().decide(household(), [], [Option("flood_wall", 1.0)], {}, rng)


def test_proposal_carries_constructs_and_justification() -> None:
    policy = PMTPolicy()
    assert isinstance(policy, DecisionPolicy)
    rng = np.random.default_rng(1)
    seen = set()
    for n in range(60):
        state = household(has_insurance=n % 2 == 0)
        memories = [MAJOR_FLOOD] if n % 3 == 0 else []
        proposal = policy.decide(state, memories, OPTIONS, {"year": 5}, rng)
        seen.add(proposal.skill_id)
        assert proposal.parameters == {}
        assert proposal.skill_id in proposal.probabilities
        tp, cp = proposal.constructs["TP"], proposal.constructs["CP"]
        assert tp.level in LEVELS
        assert cp.level in LEVELS
        assert 0.0 <= tp.value <= 1.0
        assert 0.0 <= cp.value <= 1.0
        assert tp.explanation
        assert cp.explanation
        assert proposal.justification.startswith(f"Threat is {tp.level} ")
        assert proposal.justification.endswith(".")
        if memories:
            assert "major flood remembered from year 3" in proposal.justification
    assert {"do_nothing", "buy_insurance"} <= seen


@pytest.mark.parametrize("skill", ["elevate_house", "relocate"])
def test_justification_says_a_policy_lapses_when_the_choice_does_not_renew_it(skill: str) -> None:
    option = next(o for o in OPTIONS if o.skill_id == skill)
    rng = np.random.default_rng(0)
    insured = PMTPolicy().decide(household(has_insurance=True), [], (option,), {}, rng)
    uninsured = PMTPolicy().decide(household(), [], (option,), {}, rng)
    assert insured.skill_id == uninsured.skill_id == skill
    assert "and let my policy lapse" in insured.justification
    assert "lapse" not in uninsured.justification
    renewed = PMTPolicy().decide(household(has_insurance=True), [], (OPTIONS[1],), {}, rng)
    assert "renew my policy" in renewed.justification
    assert "lapse" not in renewed.justification


def test_cp_construct_reports_the_chosen_or_most_likely_action() -> None:
    rng = np.random.default_rng(0)
    policy = PMTPolicy()
    state = household()
    for _ in range(50):
        proposal = policy.decide(state, [], OPTIONS, {}, rng)
        cp = proposal.constructs["CP"]
        if proposal.skill_id == "do_nothing":
            expected = coping_appraisal(OPTIONS[1], state)  # insurance is the likeliest action
        else:
            option = next(o for o in OPTIONS if o.skill_id == proposal.skill_id)
            expected = coping_appraisal(option, state)
        assert cp.value == pytest.approx(expected)
        assert cp.level in LEVELS


# Configuration ----------------------------------------------------------------------------------


def test_config_partial_dicts_merge_over_defaults() -> None:
    config = PMTConfig(zone_threat={"VE": 0.4}, asc={"buy_insurance": -2.0})
    assert config.zone_threat == {"AE": 0.25, "X": 0.05, "VE": 0.4}
    assert config.asc["relocate"] == PMTConfig().asc["relocate"]
    assert config.asc["buy_insurance"] == -2.0
    assert PMTConfig.model_validate(config.model_dump()) == config


@pytest.mark.parametrize(
    ("bad", "refusal"),
    [
        ({"threat_gian": 1.0}, r"threat_gian\n.*Extra inputs"),
        ({"zone_threat": {"AE": 1.5}}, r"zone_threat\.AE\n.*less than or equal to 1"),
        ({"memory_weights": {"earthquake": 1.0}}, r"unknown memory kind\(s\) \['earthquake'\]"),
        ({"memory_weights": {"flood_major": -1.0}}, r"memory_weights\.flood_major\n"),
        ({"self_efficacy": 1.2}, r"self_efficacy\n.*less than or equal to 1"),
        ({"cost_sensitivity": -1.0}, r"cost_sensitivity\n.*greater than or equal to 0"),
        ({"beta_tp": -1.0}, r"beta_tp\n.*greater than or equal to 0"),
        ({"logit_scale": 0.0}, r"logit_scale\n.*greater than 0"),
        ({"threat_gain": 0.0}, r"threat_gain\n.*greater than 0"),
        ({"max_claims_counted": -1}, r"max_claims_counted\n.*greater than or equal to 0"),
        ({"asc": {"do_nothing": 0.0}}, r"asc\n.*do_nothing is the reference alternative"),
        ({"asc": {"flood_wall": -5.0}}, r"asc\n.*unknown skill\(s\) \['flood_wall'\]"),
        # A name misspelt the same way in both tables used to pass and go unused.
        (
            {"asc": {"elevate_hosue": 3.0}, "response_efficacy": {"elevate_hosue": 0.9}},
            r"asc\n.*unknown skill\(s\) \['elevate_hosue'\]; the model's skills are buy_",
        ),
        # do_nothing takes no coefficients, so it is not offered as a skill to name.
        ({"asc": {"relocat": -9.0}}, r"skills are buy_insurance, [a-z_, ]*relocate \(a skill"),
        ({"response_efficacy": {"relocat": 0.5}}, r"response_efficacy\n.*\['relocat'\]"),
        ({"insurance_skills": ["flood_wall"]}, r"insurance_skills\n.*unknown skill"),
        (
            {"response_efficacy": {"do_nothing": 0.5}},
            r"response_efficacy\n.*do_nothing is the reference alternative \(utility 0\)",
        ),
        ({"insurance_skills": ["do_nothing"]}, r"insurance_skills\n.*\['do_nothing'\] buy no"),
        (
            {"insurance_skills": ["buy_insurance", "elevate_house"]},
            (
                r"insurance_skills\n.*\['elevate_house'\] buy no insurance policy \(the "
                r"insurance skills are buy_contents_insurance, buy_insurance\)"
            ),
        ),
    ],
)
def test_config_rejects_bad_values(bad, refusal) -> None:
    """Each bad value is refused for its own reason, not for one a neighbouring check gives."""
    with pytest.raises(ValidationError, match=refusal):
        PMTConfig.model_validate(bad)


def test_config_is_frozen() -> None:
    config = PMTConfig()
    with pytest.raises(ValidationError):
        config.beta_tp = 1.0  # type: ignore[misc]


def test_insurance_zone_constant_shifts_insurance_by_zone_only():
    """A zone constant (mandatory purchase in the floodplain) moves insurance, not elevation."""
    plain = PMTPolicy(PMTConfig())
    zoned = PMTPolicy(PMTConfig(insurance_zone_asc={"X": -3.0}))
    x_home = household(
        agent_id="H1",
        contents_value=100000.0,
        flood_zone="X",
        ground_elevation=12.0,
        first_floor_height=1.5,
    )
    ae_home = household(agent_id="H2", contents_value=100000.0, first_floor_height=2.5)
    options = [
        Option("buy_insurance", 420.0),
        Option("elevate_house", 45000.0),
        Option("do_nothing", 0.0),
    ]
    rng = np.random.default_rng(0)
    px = plain.decide(x_home, [], options, {}, rng).probabilities
    zx = zoned.decide(x_home, [], options, {}, rng).probabilities
    assert zx["buy_insurance"] < px["buy_insurance"] / 10
    # Elevation's utility is unchanged, so its share grows only through renormalisation.
    assert zx["elevate_house"] / zx["do_nothing"] == pytest.approx(
        px["elevate_house"] / px["do_nothing"]
    )
    pa = plain.decide(ae_home, [], options, {}, rng).probabilities
    za = zoned.decide(ae_home, [], options, {}, rng).probabilities
    assert za == pytest.approx(pa)


@pytest.mark.parametrize(
    "memories",
    [(), (MAJOR_FLOOD,), (memory("claim", ("denied",)), memory("flood", ("flood", "minor")))],
)
@pytest.mark.parametrize("insured", [False, True])
def test_decide_without_explanations_chooses_the_same(memories, insured) -> None:
    """explain=False (the model's setting for households not fully audited) drops the texts.

    The probabilities, which only full traces show, are dropped too; the choice is the same.
    """
    state = household(has_insurance=insured)
    policy = PMTPolicy()
    for seed in range(20):
        full = policy.decide(state, list(memories), OPTIONS, {}, np.random.default_rng(seed))
        lean = policy.decide(
            state, list(memories), OPTIONS, {}, np.random.default_rng(seed), explain=False
        )
        assert lean.skill_id == full.skill_id
        assert lean.probabilities is None
        assert full.probabilities is not None
        for name in ("TP", "CP"):
            assert lean.constructs[name].value == full.constructs[name].value
            assert lean.constructs[name].level == full.constructs[name].level
            assert lean.constructs[name].explanation == ""
            assert full.constructs[name].explanation
        assert lean.justification == ""
        assert full.justification


# Many households at once ------------------------------------------------------------------------

SKILL_IDS = ("buy_insurance", "buy_contents_insurance", "elevate_house", "relocate", "do_nothing")
MEMORY_POOL = (
    MAJOR_FLOOD,
    memory("flood", ("flood", "minor"), score=0.4, seq=2),
    memory("claim", ("denied",), seq=3),
    memory("claim", (), score=1.7, seq=4),
    memory("neighbor", ("insurance",), score=0.2, seq=5),
    memory("decision", ("insurance",), seq=6),
)
_HOUSEHOLD = st.tuples(
    st.floats(min_value=-500.0, max_value=250_000.0),  # income
    st.sampled_from(["AE", "X", "VE"]),
    st.booleans(),  # structure policy
    st.booleans(),  # contents policy
    st.integers(0, 4),  # paid claims
    st.integers(0, 4),  # denied claims
    st.lists(st.sampled_from(MEMORY_POOL), max_size=4, unique_by=lambda m: m.item.seq),
    st.lists(st.floats(min_value=0.0, max_value=150_000.0), min_size=5, max_size=5),  # costs
    st.lists(st.booleans(), min_size=5, max_size=5).filter(any),  # offered
    st.floats(min_value=0.0, max_value=1.0, exclude_max=True),  # the draw
)


def _one_by_one(policy, states, memories, costs, valid, draws):
    proposals = []
    for n, state in enumerate(states):
        options = [Option(s, float(costs[n, j])) for j, s in enumerate(SKILL_IDS) if valid[n, j]]
        rng = DrawnUniform(float(draws[n]))  # this household's uniform
        proposals.append(policy.decide(state, memories[n], options, {}, rng, explain=False))
    return proposals


def _batch(households):
    states = [
        household(
            income=income,
            flood_zone=zone,
            has_insurance=insured,
            has_contents_insurance=contents,
            claims_paid=paid,
            claims_denied=denied,
        )
        for income, zone, insured, contents, paid, denied, *_ in households
    ]
    memories = [list(h[6]) for h in households]
    costs = np.array([h[7] for h in households])
    valid = np.array([h[8] for h in households])
    draws = np.array([h[9] for h in households])
    return states, memories, costs, valid, draws


@settings(max_examples=200)
@given(households=st.lists(_HOUSEHOLD, min_size=1, max_size=10), inertia=st.booleans())
def test_deciding_many_at_once_equals_deciding_one_by_one(households, inertia) -> None:
    """decide_many gives each household exactly decide(explain=False)'s proposal."""
    config = PMTConfig(renewal_inertia=1.5) if inertia else None
    policy = PMTPolicy(config)
    states, memories, costs, valid, draws = _batch(households)
    together = policy.decide_many(states, memories, SKILL_IDS, costs, valid, draws)
    assert together == _one_by_one(policy, states, memories, costs, valid, draws)


COSTS = (900.0, 0.0, 45_000.0, 30_000.0, 0.0)


def test_draws_on_a_choice_boundary_are_decided_as_one_by_one() -> None:
    """A draw within rounding of a cumulative probability goes through decide() itself."""
    policy = PMTPolicy()
    state = household()
    options = [Option(s, c) for s, c in zip(SKILL_IDS, COSTS, strict=True)]
    offered = [o for o in options if o.skill_id != "buy_contents_insurance"]
    probabilities = policy.decide(state, [MAJOR_FLOOD], offered, {}, np.random.default_rng(0))
    assert probabilities.probabilities is not None
    edges = np.cumsum(list(probabilities.probabilities.values()))
    # Each boundary exactly, a hair either side, and the largest double below 1.
    draws = [d for e in edges[:-1] for d in (np.nextafter(e, 0), e, np.nextafter(e, 1))]
    draws.append(np.nextafter(1.0, 0))
    n = len(draws)
    states, memories = [state] * n, [[MAJOR_FLOOD]] * n
    costs = np.tile([o.cost for o in options], (n, 1))
    valid = np.tile([o.skill_id != "buy_contents_insurance" for o in options], (n, 1))
    together = policy.decide_many(states, memories, SKILL_IDS, costs, valid, np.array(draws))
    assert together == _one_by_one(policy, states, memories, costs, valid, draws)
    assert len({p.skill_id for p in together}) == 4  # every offered option is chosen somewhere


def test_deciding_many_rejects_what_deciding_one_rejects() -> None:
    policy = PMTPolicy()
    costs, draws = np.zeros((1, 5)), np.array([0.5])
    with pytest.raises(ValueError, match="no options offered"):
        policy.decide_many([household()], [[]], SKILL_IDS, costs, np.zeros((1, 5), bool), draws)
    with pytest.raises(ValueError, match=r"'sandbag' has no decision\.pmt\.asc"):
        policy.decide_many(
            [household()], [[]], ("sandbag", "do_nothing"), costs[:, :2], np.ones((1, 2)), draws
        )
    assert policy.decide_many([], [], SKILL_IDS, np.zeros((0, 5)), np.zeros((0, 5)), []) == []


def test_one_policy_appraises_every_memory_by_its_own_kind() -> None:
    """A policy that has seen a memory's source and tags before still classifies each memory
    as memory_kind does: an untagged flood by its own amount, every time."""
    policy = PMTPolicy()
    fresh = [
        memory("flood", ("flood",), amount=80_000.0),
        memory("flood", ("flood",), amount=1_000.0),
        memory("flood", ("flood",), amount=0.0),
        memory("flood", ("flood",)),
        memory("flood", ("flood", "minor"), amount=80_000.0),
        memory("claim", ("claim", "denied")),
        memory("claim", ("claim",)),
        memory("seed", ("seed", "flood")),
        memory("seed", ("seed",)),
        memory("decision", ("decision",)),
        memory("flood", ["flood"], amount=80_000.0),  # type: ignore[arg-type]
    ]
    for _ in range(2):  # the second pass finds what the first one learnt
        for hit in fresh:
            expected = threat_appraisal([hit], "AE")[0]
            proposal = policy.decide(household(), [hit], OPTIONS, {}, DrawnUniform(0.5))
            assert proposal.constructs["TP"].value == expected, hit.item
    kinds = {memory_kind(hit.item) for hit in fresh}
    assert kinds == {
        "flood_major",
        "flood_minor",
        "flood_no_damage",
        "claim_denied",
        "claim_paid",
        "seed",
        None,
    }


_KIND_EXAMPLES = {
    "flood_major": ("flood", ("flood",), 80_000.0),
    "flood_minor": ("flood", ("flood",), 1_000.0),
    "flood_no_damage": ("flood", ("flood",), 0.0),
    "claim_denied": ("claim", ("claim", "denied"), None),
    "claim_paid": ("claim", ("claim",), None),
    "seed": ("seed", ("seed", "flood"), None),
    None: ("decision", ("decision",), None),
}
# Retrieval scores are importance times decay: finite, and 0 for an item at importance 0.
_scores = st.one_of(st.floats(-1.0, 3.0), st.just(0.0))


@settings(max_examples=300)
@given(
    households=st.lists(
        st.tuples(
            st.sampled_from(["AE", "X", "VE", "B"]),
            st.lists(st.tuples(st.sampled_from(list(_KIND_EXAMPLES)), _scores), max_size=6),
        ),
        min_size=1,
        max_size=8,
    ),
    top_k=st.integers(0, 6),
)
def test_appraising_many_at_once_equals_appraising_one_by_one(households, top_k) -> None:
    """appraise_threats (the array engine's) gives each household threat_appraisal's TP."""
    policy = PMTPolicy()
    n = len(households)
    kinds = np.full((n, top_k), -1, dtype=np.int64)
    scores = np.full((n, top_k), np.nan)
    expected = []
    for i, (zone, retrieved) in enumerate(households):
        hits = []
        for j, (kind, score) in enumerate(retrieved[:top_k]):
            source, tags, amount = _KIND_EXAMPLES[kind]
            hit = memory(source, tags, score=score, amount=amount, seq=j)
            assert memory_kind(hit.item) == kind
            hits.append(hit)
            kinds[i, j] = -1 if kind is None else MEMORY_KINDS.index(kind)
            scores[i, j] = score
        expected.append(threat_appraisal(hits, zone)[0])
    zones = [zone for zone, _ in households]
    got = policy.appraise_threats(kinds, scores, zones)
    assert got.tolist() == expected
    assert policy.appraise_threats(kinds, scores, ZoneColumn.of(zones)).tolist() == expected


def test_of_equally_strong_cues_the_first_retrieved_is_named():
    """Retrieval ranks what matters first: a tie keeps that order in the explanation."""
    earlier = memory("flood", ("flood", "major"), amount=80_000.0, year=3, seq=1)
    later = memory("flood", ("flood", "major"), amount=80_000.0, year=5, seq=2)
    for first, second in ((earlier, later), (later, earlier)):
        _, explanation = threat_appraisal([first, second], "AE")
        assert f"remembered from year {first.item.year} " in explanation


def test_a_draw_past_the_rounded_total_goes_to_the_last_possible_option():
    """Ten tenths sum to a hair below 1: the largest draw belongs to the last option with a
    chance, never to one whose probability is 0."""
    assert sum([0.1] * 10) <= 0.9999999999999999  # the loop alone would pick no option
    assert _pick([0.1] * 10 + [0.0], 0.9999999999999999) == 9
    assert _pick([0.1] * 10 + [0.0, 0.0], 0.9999999999999999) == 9
    assert _pick([0.5, 0.5, 0.0], 0.25) == 0


def test_a_zero_chance_option_is_never_drawn_and_intervals_are_half_open():
    """Option n takes draws in [its cumulative start, its end): a draw on an edge goes on."""
    assert _pick([0.0, 1.0], 0.0) == 1
    assert _pick([0.25, 0.75], 0.25) == 1
    assert _pick([0.25, 0.75], 0.2499999) == 0


def test_the_threat_explanation_counts_its_cues() -> None:
    _, one = threat_appraisal([MAJOR_FLOOD], "AE")
    assert "raised by 1 remembered cue, strongest" in one
    minor = memory("flood", ("flood",), amount=5_000.0, seq=2)
    _, two = threat_appraisal([MAJOR_FLOOD, minor], "AE")
    assert "raised by 2 remembered cues, strongest" in two


def test_coping_is_held_at_one() -> None:
    config = PMTConfig(response_efficacy={"buy_insurance": 1.0}, self_efficacy=1.0)
    option = Option("buy_insurance", 0.0)
    assert coping_appraisal(option, household(claims_paid=5), config) == 1.0


def _justify(option: Option, **state: object) -> str:
    decided = PMTPolicy().decide(household(**state), [], (option,), {}, np.random.default_rng(0))
    assert decided.skill_id == option.skill_id
    return decided.justification


def test_an_insured_household_that_does_nothing_lets_its_policy_lapse() -> None:
    choice = Option("do_nothing", 0.0)
    assert "let my policy lapse" in _justify(choice, has_insurance=True)
    assert "do nothing this year" in _justify(choice)
    assert "lapse" not in _justify(choice)


@pytest.mark.parametrize(
    ("share", "verdict"),
    [
        (0.05, "is affordable"),
        (0.0501, "is a stretch"),
        (0.2, "is a stretch"),
        (0.2001, "is costly"),
    ],
)
def test_the_cost_is_worded_by_its_share_of_income(share: float, verdict: str) -> None:
    cost = share * INCOME
    said = _justify(Option("buy_insurance", cost))
    assert f"at ${cost:,.0f} ({share:.1%} of income) {verdict}" in said
