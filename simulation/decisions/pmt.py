"""Protection Motivation Theory (PMT) decisions: the default, network-free decision policy.

A household appraises the flood *threat* from what it remembers and where it lives, appraises its
ability to *cope* with each protective action, and chooses among the offered skills by a
multinomial logit drawn from the model RNG (DESIGN.md section 5).

Threat appraisal (TP, in [0, 1]) saturates the evidence of the retrieved memories on top of the
zone baseline ``z``::

    S  = sum over retrieved memories of memory_weights[kind] * min(score, score_cap)
    TP = 1 - (1 - z) * exp(-threat_gain * S)

so a household with no threatening memories has exactly ``TP = z``, every memory raises TP and
TP never reaches 1. Because ``score`` is the retrieval score, decayed or forgotten memories count
less or not at all: forgetting drives behaviour.

Coping appraisal (CP, in [0, 1]) of an action skill with out-of-pocket cost ``c``::

    CP = clip(self_efficacy * response_efficacy[skill]
              + (claim_paid_bonus * min(claims_paid, max_claims_counted)
                 - claim_denied_penalty * min(claims_denied, max_claims_counted))  # insurance only
              - cost_sensitivity * c / max(income, 1), 0, 1)

``claims_paid`` and ``claims_denied`` are the household's counts over the run
(:class:`~simulation.agents.state.HouseholdState`), not memories: the trust a paid claim builds
does not fade with ``memory.decay_rate`` as threat appraisal does, so a flood's effect on
insurance take-up through its claims outlasts its memory (``claim_paid_bonus: 0`` removes it).

Choice: ``do_nothing`` has utility 0 (the reference); an action skill has::

    U = logit_scale * (asc[skill] + beta_tp * TP + beta_cp * CP
                       + insurance_zone_asc[zone] if an insurance skill
                       + renewal_inertia if an insurance skill and the household is insured)

and probabilities ``exp(U) / sum(exp(U))`` over the offered options. Exactly one
``rng.random()`` per decision picks the option from the cumulative probabilities in the order
the options were offered, so the RNG stream does not depend on the outcome.
"""

from __future__ import annotations

import math
from operator import attrgetter
from typing import TYPE_CHECKING, Annotated, Any

import numpy as np
import pandas as pd
from pydantic import Field, field_validator, model_validator

from simulation.agents.state import FloodZone, ZoneColumn, by_zone, per_zone
from simulation.config_base import LAX, ConfigModel
from simulation.cycle import DECISION_STATS, INSURANCE_SKILLS
from simulation.decisions.base import (
    LEVELS,
    Construct,
    DrawnUniform,
    Option,
    Proposal,
    level_of,
)
from simulation.rowwise import row_any, row_cumsum, row_max, row_sum_in_order

if TYPE_CHECKING:
    from collections.abc import Collection, Iterable, Mapping, Sequence

    from simulation.agents.state import HouseholdState
    from simulation.memory import MemoryItem, ScoredMemory

__all__ = [
    "MEMORY_KINDS",
    "PMTConfig",
    "PMTPolicy",
    "coping_appraisal",
    "kind_needs_amount",
    "kind_of",
    "memory_kind",
    "threat_appraisal",
]

#: Kinds of threat cue a retrieved memory can be, with how each reads in an explanation.
_KIND_PHRASES: dict[str, str] = {
    "flood_major": "a major flood",
    "flood_minor": "a minor flood",
    "flood_no_damage": "a flood that did no damage",
    "claim_denied": "a denied claim",
    "claim_paid": "a paid claim",
    "neighbor": "neighbours adapting",
    "policy": "a policy change",
    "reflection": "reflecting on past experience",
    "seed": "a flood experienced before the simulation",
}

#: The memory kinds ``memory_weights`` may name.
MEMORY_KINDS: tuple[str, ...] = tuple(_KIND_PHRASES)

#: How a skill reads in a justification: (noun, what "I" do when choosing it).
_SKILL_PHRASES: dict[str, tuple[str, str]] = {
    "buy_insurance": ("insurance", "buy insurance"),
    "buy_contents_insurance": ("contents insurance", "buy contents insurance"),
    "elevate_house": ("elevating the house", "elevate the house"),
    "relocate": ("relocating", "relocate"),
}

_DO_NOTHING = "do_nothing"
# Household fields _many_utilities reads for many households at once (map() with these runs in C).
_FLOOD_ZONE, _INCOME = attrgetter("flood_zone"), attrgetter("income")
_HAS_INSURANCE = attrgetter("has_insurance")
_HAS_CONTENTS_INSURANCE = attrgetter("has_contents_insurance")
_CLAIMS_PAID, _CLAIMS_DENIED = attrgetter("claims_paid"), attrgetter("claims_denied")

#: Tags that state a flood memory's severity, checked in this order.
_FLOOD_TAGS = (("major", "flood_major"), ("minor", "flood_minor"), ("no_damage", "flood_no_damage"))

#: Memory sources that are a threat cue of the same name whatever their tags.
_SOURCE_KINDS = {"neighbor": "neighbor", "policy": "policy", "reflection": "reflection"}

# Constructs are built for every household every year: tuple.__new__ skips the named tuple's
# Python-level __new__.
_new_tuple = tuple.__new__

# How close (in probability) a draw may come to a cumulative choice probability before
# decide_many leaves the choice to decide(): far above the few ulps by which numpy's exp and sum
# can differ from math.exp and math.fsum, and so rare that those households cost nothing.
_EXACT_MARGIN = 1e-9


_Fraction = Annotated[float, Field(ge=0.0, le=1.0)]
_NonNegative = Annotated[float, Field(ge=0.0, le=100.0)]
_Coefficient = Annotated[float, Field(ge=-50.0, le=50.0)]

_DEFAULT_ZONE_THREAT = {"AE": 0.25, "X": 0.05}
_DEFAULT_MEMORY_WEIGHTS = {
    "flood_major": 1.0,
    "flood_minor": 0.6,
    "flood_no_damage": 0.3,
    "claim_denied": 0.5,
    "claim_paid": 0.3,
    "neighbor": 0.15,
    "policy": 0.05,
    "reflection": 0.8,
    "seed": 0.8,
}
_DEFAULT_RESPONSE_EFFICACY = {
    "buy_insurance": 0.6,
    "buy_contents_insurance": 0.6,
    "elevate_house": 0.8,
    "relocate": 0.9,
}
_DEFAULT_ASC = {
    "buy_insurance": -3.75,
    "buy_contents_insurance": -4.25,
    "elevate_house": -6.5,
    "relocate": -9.0,
}


def _refuse_unknown_skills(skills: Iterable[str]) -> None:
    """Refuse a skill the yearly cycle does not have: a misspelt name would go unused.

    ``do_nothing`` is known but never listed as a choice here: it is the reference alternative,
    which takes no coefficients, and the callers refuse it with that reason.
    """
    unknown = sorted(set(skills) - set(DECISION_STATS))
    if unknown:
        actions = ", ".join(skill for skill in DECISION_STATS if skill != _DO_NOTHING)
        msg = (
            f"unknown skill(s) {unknown}; the model's skills are {actions} "
            "(a skill added to the registry alone cannot run)"
        )
        raise ValueError(msg)


def _refuse_reference_alternative(skills: Iterable[str]) -> None:
    """Refuse a coefficient for ``do_nothing``, whose utility is 0 by definition."""
    if _DO_NOTHING in skills:
        msg = f"{_DO_NOTHING} is the reference alternative (utility 0) and takes no coefficients"
        raise ValueError(msg)


class PMTConfig(ConfigModel):
    """Coefficients of the PMT policy: the ``decision.pmt`` section of a run config.

    Dictionaries keyed by zone, memory kind or skill are merged over their defaults, so a config
    only needs to name the entries it changes. The defaults are tuned so that, for an AE owner
    with income $60,000, a $1,200 premium, elevation at 30% of income and relocation at 100%:
    an uninsured household with no memories insures with probability ~0.15, an insured one
    renews with ~0.45, one that just remembered a major flood (score 0.9) insures with ~0.71,
    and elevation (~0.6% a year) and relocation (~0.05% a year) stay rare without floods.
    ``configs/default.yaml`` replaces several of these defaults with calibrated values.
    """

    # Threat appraisal.
    zone_threat: dict[FloodZone, _Fraction] = Field(
        default=_DEFAULT_ZONE_THREAT,
        description=(
            "Threat appraisal (TP) of a household with no threatening memories, by FEMA flood "
            "zone: living in the mapped 100-year floodplain (AE) is itself a threat cue; outside "
            "it (X) threat is low. Entries given override the defaults; an unlisted floodplain "
            "zone (A, VE, V) takes AE's entry."
        ),
    )
    other_zone_threat: _Fraction | None = Field(
        default=None,
        description="Baseline TP for a zone outside the floodplain (B, C, D) that is not listed "
        "in zone_threat; null: zone X's, as their premium and insurance constant are X's.",
    )
    memory_weights: dict[str, _NonNegative] = Field(
        default=_DEFAULT_MEMORY_WEIGHTS,
        description=(
            "How much one retrieved memory raises threat, by kind, before it is multiplied by its "
            "retrieval score. Kinds: flood_major / flood_minor / flood_no_damage (source flood, "
            "by tag, else by amount), claim_denied / claim_paid (source claim), neighbor, policy, "
            "reflection, and seed (a pre-seeded memory tagged flood, e.g. a survey-reported prior "
            "flood). Severe first-hand experience weighs most; decisions and other memories "
            "weigh 0. Entries given override the defaults."
        ),
    )
    major_damage_threshold: float = Field(
        default=50_000.0,
        ge=0.0,
        description=(
            "For a flood memory tagged neither major, minor nor no_damage: damage (its amount) "
            "at or above this many dollars makes it a major flood, below it a minor one, and 0 a "
            "flood without damage."
        ),
    )
    score_cap: float = Field(
        default=1.0,
        gt=0.0,
        le=10.0,
        description=(
            "Retrieval scores are capped at this value before weighting, because the weighted "
            "retrieval strategy scores up to the sum of its weights while the spec strategy "
            "scores decayed importance in [0, 1]."
        ),
    )
    threat_gain: float = Field(
        default=1.0,
        gt=0.0,
        le=20.0,
        description=(
            "How fast memory evidence S saturates threat: TP = 1 - (1 - zone_threat) * "
            "exp(-threat_gain * S). With 1.0 one major flood remembered at score 0.9 lifts an AE "
            "household from 0.25 to ~0.70 (H) and two such floods to ~0.88 (VH)."
        ),
    )
    # Coping appraisal.
    response_efficacy: dict[str, _Fraction] = Field(
        default=_DEFAULT_RESPONSE_EFFICACY,
        description=(
            "Perceived effectiveness of each action skill at reducing flood losses: insurance "
            "pays but does not prevent damage; elevation prevents most of it; relocation removes "
            "the exposure. Every skill in asc needs an entry. Entries given override the defaults."
        ),
    )
    self_efficacy: _Fraction = Field(
        default=0.6,
        description=(
            "Baseline confidence of a household that it can carry out a protective action; "
            "multiplies response efficacy in CP."
        ),
    )
    cost_sensitivity: _NonNegative = Field(
        default=4.0,
        description=(
            "How strongly out-of-pocket cost relative to income lowers CP: CP falls by "
            "cost_sensitivity * cost / income, so a premium of 2% of income lowers it by 0.08 and "
            "an elevation costing 30% of income by 1.2 (to 0)."
        ),
    )
    claim_paid_bonus: _Fraction = Field(
        default=0.1,
        description="CP gain of the insurance skills per paid claim so far in the run (trust "
        "that insurance pays; a count in the household's state, which does not decay with its "
        "memories).",
    )
    claim_denied_penalty: _Fraction = Field(
        default=0.15,
        description=(
            "CP loss of the insurance skills per denied claim (a denial hurts trust more than a "
            "payment builds it)."
        ),
    )
    max_claims_counted: int = Field(
        default=2,
        ge=0,
        le=100,
        description="Paid and denied claims beyond this many add no further CP change.",
    )
    insurance_skills: Annotated[tuple[str, ...], LAX] = Field(
        default=("buy_insurance", "buy_contents_insurance"),
        description=(
            "Skills that buy or renew an annual policy: claim experience changes their CP and "
            "renewal_inertia applies to them when the household is insured."
        ),
    )
    # Utility and choice.
    asc: dict[str, _Coefficient] = Field(
        default=_DEFAULT_ASC,
        description=(
            "Alternative-specific constant of each action skill relative to do_nothing (utility "
            "0): the hassle, distrust and inertia not captured by TP and CP. More negative for "
            "larger, irreversible steps. Every offered skill other than do_nothing needs an "
            "entry. Entries given override the defaults."
        ),
    )
    beta_tp: float = Field(
        default=6.0,
        ge=0.0,
        le=50.0,
        description="Utility of protection per unit of threat appraisal (TP in [0, 1]).",
    )
    beta_cp: float = Field(
        default=2.0,
        ge=0.0,
        le=50.0,
        description="Utility of an action per unit of its coping appraisal (CP in [0, 1]).",
    )
    insurance_zone_asc: dict[FloodZone, _Coefficient] = Field(
        default_factory=dict,
        description=(
            "Extra utility of the insurance skills by flood zone. An unlisted floodplain zone "
            "(A, VE, V) takes AE's entry and an unlisted zone outside it (B, C, D) X's; 0 when "
            "that is not listed either. It "
            "stands for what threat and cost do not capture: lenders require flood insurance "
            "for mortgaged homes in the 100-year floodplain (NFIP mandatory purchase), and "
            "outside it few people think of flood insurance at all."
        ),
    )
    renewal_inertia: float = Field(
        default=1.5,
        ge=0.0,
        le=50.0,
        description=(
            "Status-quo bias: extra utility of an insurance skill for a household that already "
            "holds a policy, so renewing is easier than buying (not renewing lets it lapse)."
        ),
    )
    logit_scale: float = Field(
        default=1.0,
        gt=0.0,
        le=100.0,
        description=(
            "Multiplies every utility: above 1 choices follow utilities more deterministically, "
            "below 1 they are more random."
        ),
    )

    @field_validator("zone_threat")
    @classmethod
    def _merge_zones(cls, value: dict[str, float]) -> dict[str, float]:
        return {**_DEFAULT_ZONE_THREAT, **value}

    @field_validator("memory_weights")
    @classmethod
    def _merge_weights(cls, value: dict[str, float]) -> dict[str, float]:
        unknown = sorted(set(value) - set(MEMORY_KINDS))
        if unknown:
            msg = f"unknown memory kind(s) {unknown}; expected some of {list(MEMORY_KINDS)}"
            raise ValueError(msg)
        return {**_DEFAULT_MEMORY_WEIGHTS, **value}

    @field_validator("response_efficacy")
    @classmethod
    def _merge_efficacy(cls, value: dict[str, float]) -> dict[str, float]:
        _refuse_reference_alternative(value)
        _refuse_unknown_skills(value)
        return {**_DEFAULT_RESPONSE_EFFICACY, **value}

    @field_validator("asc")
    @classmethod
    def _merge_asc(cls, value: dict[str, float]) -> dict[str, float]:
        _refuse_reference_alternative(value)
        _refuse_unknown_skills(value)
        return {**_DEFAULT_ASC, **value}

    @field_validator("insurance_skills")
    @classmethod
    def _known_insurance_skills(cls, value: tuple[str, ...]) -> tuple[str, ...]:
        _refuse_unknown_skills(value)
        # Claim experience and renewal inertia are about a policy: a skill that buys none
        # (elevate_house) would be appraised as one.
        other = sorted(set(value) - INSURANCE_SKILLS)
        if other:
            msg = (
                f"{other} buy no insurance policy (the insurance skills are "
                f"{', '.join(sorted(INSURANCE_SKILLS))})"
            )
            raise ValueError(msg)
        return value

    @model_validator(mode="after")
    def _check_skills(self) -> PMTConfig:
        stray = sorted(set(self.response_efficacy) - set(self.asc))
        if stray:  # a misspelt skill would otherwise be silently unused
            msg = f"response_efficacy names skill(s) {stray} that have no asc"
            raise ValueError(msg)
        return self


class _Coefficients:
    """Plain-Python copies of a config's numbers, built once so the hot path reads locals."""

    __slots__ = (
        "beta_cp",
        "beta_tp",
        "claim_adjustment",
        "cost_sensitivity",
        "gain",
        "inertia",
        "kinds",
        "labels",
        "major_threshold",
        "other_zone",
        "scale",
        "score_cap",
        "skills",
        "weights",
        "zone_asc",
        "zones",
    )

    def __init__(self, config: PMTConfig) -> None:
        # zone_threat always holds AE and X (the defaults are merged in).
        self.zones = by_zone(config.zone_threat, 0.0, outside=config.other_zone_threat)
        self.other_zone = (
            self.zones["X"] if config.other_zone_threat is None else config.other_zone_threat
        )
        self.weights = dict(config.memory_weights)
        self.major_threshold = config.major_damage_threshold
        self.score_cap = config.score_cap
        self.gain = config.threat_gain
        self.cost_sensitivity = config.cost_sensitivity
        self.beta_tp = config.beta_tp
        self.beta_cp = config.beta_cp
        self.inertia = config.renewal_inertia
        self.zone_asc = by_zone(config.insurance_zone_asc, 0.0)
        self.scale = config.logit_scale
        insurance = frozenset(config.insurance_skills)
        # skill -> (asc, self_efficacy * response_efficacy, is an insurance skill)
        self.skills: dict[str, tuple[float, float, bool]] = {
            skill: (asc, config.self_efficacy * config.response_efficacy[skill], skill in insurance)
            for skill, asc in config.asc.items()
        }
        # Text pieces of the explanations, formatted once rather than on every decision.
        self.labels: dict[str, tuple[str, str, str]] = {}
        for skill, (_, efficacy, _) in self.skills.items():
            words = skill.replace("_", " ")
            noun, verb = _SKILL_PHRASES.get(skill, (words, f"choose {words}"))
            self.labels[skill] = (noun, verb, f"efficacy {efficacy:.2f}")
        # (source, tags) -> memory kind, for the items whose kind those two decide (all but
        # floods without a severity tag): see _kind.
        self.kinds: dict[tuple[str, tuple[str, ...]], str | None] = {}
        self.claim_adjustment = (
            config.claim_paid_bonus,
            config.claim_denied_penalty,
            config.max_claims_counted,
        )

    def claim_term(self, state: HouseholdState) -> float:
        bonus, penalty, cap = self.claim_adjustment
        return bonus * min(state.claims_paid, cap) - penalty * min(state.claims_denied, cap)

    def skill(self, skill_id: str) -> tuple[float, float, bool]:
        params = self.skills.get(skill_id)
        if params is None:
            msg = (
                f"skill {skill_id!r} has no decision.pmt.asc / response_efficacy entry; "
                f"known: {sorted(self.skills)}"
            )
            raise ValueError(msg)
        return params


def memory_kind(item: MemoryItem, major_damage_threshold: float = 50_000.0) -> str | None:
    """Classify a memory as a threat cue (one of :data:`MEMORY_KINDS`), or ``None`` if it is not.

    Flood memories are classified by their ``major`` / ``minor`` / ``no_damage`` tag, else by
    ``amount`` (at or above ``major_damage_threshold`` major, above 0 minor, 0 no damage, unknown
    minor: a flood happened but its severity was not recorded). Claim memories are denied when
    tagged ``denied``, else paid. Seed memories count only when tagged ``flood``. Decisions and
    anything else are not threat cues.

    Args:
        item: The memory.
        major_damage_threshold: Damage in dollars from which an untagged flood is major.

    Returns:
        The kind, or ``None``.
    """
    return kind_of(item.source, item.tags, item.amount, major_damage_threshold)


def kind_of(
    source: str, tags: tuple[str, ...], amount: float | None, major_damage_threshold: float
) -> str | None:
    """:func:`memory_kind` of a memory with this source, these tags and this amount."""
    if source == "flood":
        return _flood_kind(tags, amount, major_damage_threshold)
    if source == "claim":
        return "claim_denied" if "denied" in tags else "claim_paid"
    if source == "seed":
        return "seed" if "flood" in tags else None
    return _SOURCE_KINDS.get(source)


def kind_needs_amount(source: str, tags: tuple[str, ...]) -> bool:
    """Whether :func:`kind_of` reads the amount: a flood memory without a severity tag."""
    return source == "flood" and _SEVERITY_TAGS.isdisjoint(tags)


def _flood_kind(tags: tuple[str, ...], amount: float | None, threshold: float) -> str:
    for tag, kind in _FLOOD_TAGS:
        if tag in tags:
            return kind
    if amount is None:  # a flood happened but its severity was not recorded
        return "flood_minor"
    if amount <= 0.0:
        return "flood_no_damage"
    return "flood_major" if amount >= threshold else "flood_minor"


#: How many (source, tags) pairs :func:`_kind` remembers: a model writes a few dozen; the bound
#: keeps memories written with ever-new tags from growing the table without end.
_KINDS_KEPT = 1024
_SEVERITY_TAGS = frozenset(tag for tag, _ in _FLOOD_TAGS)
_UNKNOWN = object()


def _kind(item: MemoryItem, c: _Coefficients) -> str | None:
    """:func:`memory_kind` of ``item`` with ``c``'s threshold, looked up where it can be.

    Every household appraises its retrieved memories every year, and most of those memories
    share their source and tags with thousands of others; only a flood without a severity tag
    needs its amount.
    """
    key = (item.source, item.tags)
    try:
        kind = c.kinds.get(key, _UNKNOWN)
    except TypeError:  # tags in a list (an item built by hand): not a key
        return memory_kind(item, c.major_threshold)
    if kind is _UNKNOWN:
        kind = memory_kind(item, c.major_threshold)
        decided_by_key = item.source != "flood" or not _SEVERITY_TAGS.isdisjoint(item.tags)
        if decided_by_key and len(c.kinds) < _KINDS_KEPT:
            c.kinds[key] = kind
    return kind


def _threat(
    memories: Sequence[ScoredMemory], flood_zone: str, c: _Coefficients, *, explain: bool = True
) -> tuple[float, str, str]:
    """Return TP, its explanation and the phrase naming its main driver (for justifications).

    Without ``explain`` the two texts are empty.
    """
    base = c.zones.get(flood_zone, c.other_zone)
    weights = c.weights
    cap = c.score_cap
    evidence = 0.0
    cues = 0
    top = 0.0
    top_item: MemoryItem | None = None
    top_kind = ""
    top_score = 0.0
    for item, score, _ in memories:
        kind = _kind(item, c)
        if kind is None or score <= 0.0:
            continue
        if score > cap:
            score = cap  # noqa: PLW2901 - the capped score is the one that counts
        contribution = weights[kind] * score
        if contribution <= 0.0:
            continue
        evidence += contribution
        cues += 1
        if contribution > top:
            top, top_item, top_kind, top_score = contribution, item, kind, score
    if not explain:
        tp = base if top_item is None else 1.0 - (1.0 - base) * math.exp(-c.gain * evidence)
        return tp, "", ""
    if top_item is None:
        tp = base
        explanation = f"zone {flood_zone} baseline {base:.2f}; no threatening memories retrieved"
        driver = f"with no remembered flood cues in zone {flood_zone}"
    else:
        tp = 1.0 - (1.0 - base) * math.exp(-c.gain * evidence)
        cue = f"{_KIND_PHRASES[top_kind]} remembered from year {top_item.year}"
        explanation = (
            f"zone {flood_zone} baseline {base:.2f} raised by {cues} remembered cue"
            f"{'s' if cues > 1 else ''}, strongest {cue} (score {top_score:.2f})"
        )
        driver = f"after {cue}"
    return tp, explanation, driver


def _coping(
    skill_id: str, cost: float, income: float, claim_term: float, c: _Coefficients
) -> float:
    _, efficacy, insurance = c.skill(skill_id)
    cp = efficacy - c.cost_sensitivity * cost / income
    if insurance:
        cp += claim_term
    return 0.0 if cp < 0.0 else min(cp, 1.0)


def threat_appraisal(
    memories: Sequence[ScoredMemory], flood_zone: str, config: PMTConfig | None = None
) -> tuple[float, str]:
    """Appraise flood threat from retrieved memories and the flood zone.

    Args:
        memories: Retrieved memories with their retrieval scores.
        flood_zone: The household's FEMA zone (``AE``, ``X``, ...).
        config: Coefficients; the defaults when ``None``.

    Returns:
        ``(TP, explanation)`` with TP in [0, 1].
    """
    tp, explanation, _ = _threat(memories, flood_zone, _Coefficients(config or PMTConfig()))
    return tp, explanation


def coping_appraisal(
    option: Option, state: HouseholdState, config: PMTConfig | None = None
) -> float:
    """Appraise a household's ability to cope by taking ``option``.

    Args:
        option: An action skill with its out-of-pocket cost (``do_nothing`` is not an action).
        state: The household (income and claim history are read).
        config: Coefficients; the defaults when ``None``.

    Returns:
        CP in [0, 1].

    Raises:
        ValueError: If the skill has no coefficients in ``config``.
    """
    c = _Coefficients(config or PMTConfig())
    income = max(1.0, state.income)
    return _coping(option.skill_id, option.cost, income, c.claim_term(state), c)


class PMTPolicy:
    """Protection Motivation Theory decisions: threat and coping appraisal, then a logit draw.

    Satisfies :class:`simulation.decisions.base.DecisionPolicy`. The policy holds no per-household
    state; all randomness comes from the ``rng`` passed to :meth:`decide`.

    Args:
        config: Coefficients; the defaults when ``None``.
        renewing: The skills that renew a household's annual policy, which the justification
            says it renews; any other choice lets the policy lapse. The model passes the skill
            registry's (skills whose effects set a policy); ``None``: the
            ``insurance_skills``.

    Attributes:
        config: The coefficients in use.
    """

    def __init__(
        self, config: PMTConfig | None = None, renewing: Collection[str] | None = None
    ) -> None:
        self.config = config or PMTConfig()
        self._c = _Coefficients(self.config)
        self._renewing = frozenset(self.config.insurance_skills if renewing is None else renewing)

    def decide(
        self,
        state: HouseholdState,
        memories: Sequence[ScoredMemory],
        options: Sequence[Option],
        context: Mapping[str, Any],
        rng: np.random.Generator,
        *,
        explain: bool = True,
    ) -> Proposal:
        """Choose one of ``options`` for the household.

        Exactly one ``rng.random()`` is drawn per call, even when only one option is offered,
        so that every household consumes the same amount of the stream whatever it is offered.

        Args:
            state: The household.
            memories: Its retrieved memories with retrieval scores.
            options: The skills it may choose this year, with their costs.
            context: Year, subsidy and premium rate (not needed: costs are already net).
            rng: The model's decision stream: its generator, or the year's uniforms drawn
                ahead from it (only ``random()`` is called).
            explain: Write the justification, the constructs' explanations and the choice
                probabilities. The model turns this off for households whose trace would not
                show them (they are most of the cost of a decision); the choice, TP and CP are
                the same.

        Returns:
            The chosen skill with TP/CP constructs, a justification and the choice probabilities
            (the last two only with ``explain``).

        Raises:
            ValueError: If ``options`` is empty or names a skill without coefficients.
        """
        if not options:
            msg = "no options offered"
            raise ValueError(msg)
        c = self._c
        tp, tp_explanation, driver = _threat(memories, state.flood_zone, c, explain=explain)
        income = max(1.0, state.income)
        insured = state.has_insurance or state.has_contents_insurance
        zone_term = c.zone_asc.get(state.flood_zone, 0.0)
        utilities, coping = _utilities(
            options, tp, income, c.claim_term(state), insured, zone_term, c
        )

        # Shift by the maximum so exp never overflows, whatever the coefficients.
        top = max(utilities)
        weights = [math.exp(u - top) for u in utilities]
        total = math.fsum(weights)
        probabilities = [w / total for w in weights]
        chosen = _pick(probabilities, rng.random())

        # CP is reported for the chosen action, or for the most likely action if none was chosen.
        focus = chosen
        if coping[chosen] < 0.0:
            focus = -1
            for n, cp in enumerate(coping):
                if cp >= 0.0 and (focus < 0 or utilities[n] > utilities[focus]):
                    focus = n
        skill_id = options[chosen].skill_id
        tp_level = level_of(tp)
        if not explain:
            cp = 0.0 if focus < 0 else coping[focus]
            return Proposal(
                skill_id=skill_id,
                parameters={},
                constructs={
                    "TP": _new_tuple(Construct, (tp_level, tp, "")),
                    "CP": _new_tuple(Construct, (level_of(cp), cp, "")),
                },
            )
        if focus < 0:
            cp_construct = Construct("VL", 0.0, "no protective action is offered")
            means, affordable = "no protective action is offered", False
        else:
            cp_construct, means, affordable = _coping_story(options[focus], coping[focus], state, c)
        if skill_id == _DO_NOTHING:
            act = "let my policy lapse" if insured else "do nothing this year"
            act = f"but I {act}" if affordable else f"so I {act}"
        else:
            verb = c.labels[skill_id][1]
            if insured:
                # One skill a year: elevating or relocating does not renew the annual policy.
                verb = (
                    "renew my policy"
                    if skill_id in self._renewing
                    else f"{verb} and let my policy lapse"
                )
            act = f"so I {verb}" if affordable else f"but I {verb} anyway"

        return Proposal(
            skill_id=skill_id,
            parameters={},
            constructs={"TP": Construct(tp_level, tp, tp_explanation), "CP": cp_construct},
            justification=f"Threat is {tp_level} {driver}; {means}, {act}.",
            probabilities={o.skill_id: p for o, p in zip(options, probabilities, strict=True)},
        )

    def decide_many(
        self,
        states: Sequence[HouseholdState],
        memories: Sequence[Sequence[ScoredMemory]],
        skill_ids: Sequence[str],
        costs: np.ndarray,
        valid: np.ndarray,
        draws: np.ndarray,
    ) -> list[Proposal]:
        """:meth:`decide` without explanations for many households at once, with its choices.

        Household ``n`` is offered the skills ``skill_ids[j]`` with ``valid[n, j]`` at cost
        ``costs[n, j]``, in column order, and decides with the uniform ``draws[n]``: the
        proposal is exactly what ``decide(..., explain=False)`` returns for those options and
        that draw. Threat appraisal stays per household (it reads each one's memories); coping,
        utilities and the logit choice are computed for all at once.

        Args:
            states: The households.
            memories: Each household's retrieved memories with retrieval scores.
            skill_ids: The skill of each column.
            costs: Out-of-pocket costs, a row per household.
            valid: Which skills each household may choose (a :meth:`SkillRegistry.valid_mask`).
            draws: One uniform in [0, 1) per household.

        Returns:
            One proposal per household, in order.

        Raises:
            ValueError: If a household is offered nothing, or is offered a skill without
                coefficients.
        """
        n = len(states)
        if n == 0:
            return []
        c = self._c
        costs = np.asarray(costs, dtype=float)
        valid = np.asarray(valid, dtype=bool)
        draws = np.asarray(draws, dtype=float)
        if not row_any(valid).all():
            msg = "no options offered"
            raise ValueError(msg)
        zones = list(map(_FLOOD_ZONE, states))
        tp = np.fromiter(
            (_threat(m, z, c, explain=False)[0] for m, z in zip(memories, zones, strict=True)),
            float,
            n,
        )
        chosen, cp, recheck = self.choose_many(
            tp,
            zones,
            np.fromiter(map(_INCOME, states), float, n),
            np.fromiter(map(_CLAIMS_PAID, states), float, n),
            np.fromiter(map(_CLAIMS_DENIED, states), float, n),
            np.fromiter(map(_HAS_INSURANCE, states), bool, n)
            | np.fromiter(map(_HAS_CONTENTS_INSURANCE, states), bool, n),
            skill_ids,
            costs,
            valid,
            draws,
        )
        # level_of for all at once: TP and CP are finite, and int() and astype both truncate.
        tp_levels = np.clip((tp * 5).astype(np.int64), 0, 4).tolist()
        cp_levels = np.clip((cp * 5).astype(np.int64), 0, 4).tolist()
        proposals: list[Proposal] = []
        for i, (skill, tp_i, cp_i, tp_level, cp_level, slow) in enumerate(
            zip(
                chosen.tolist(),
                tp.tolist(),
                cp.tolist(),
                tp_levels,
                cp_levels,
                recheck.tolist(),
                strict=True,
            )
        ):
            if slow:
                options = [
                    Option(skill_ids[j], float(costs[i, j])) for j in np.flatnonzero(valid[i])
                ]
                proposals.append(
                    self.decide(
                        states[i],
                        memories[i],
                        options,
                        {},
                        DrawnUniform(float(draws[i])),
                        explain=False,
                    )
                )
                continue
            proposals.append(
                Proposal(
                    skill_id=skill_ids[skill],
                    parameters={},
                    constructs={
                        "TP": _new_tuple(Construct, (LEVELS[tp_level], tp_i, "")),
                        "CP": _new_tuple(Construct, (LEVELS[cp_level], cp_i, "")),
                    },
                )
            )
        return proposals

    def appraise_threats(
        self, kinds: np.ndarray, scores: np.ndarray, zones: ZoneColumn | Sequence[str]
    ) -> np.ndarray:
        """TP of many households from their retrieved memories, as :meth:`decide` appraises it.

        Args:
            kinds: A row per household, a column per retrieved memory: the memory's kind as a
                position in :data:`MEMORY_KINDS`, or -1 for none (no threat cue, or no memory).
            scores: The memories' retrieval scores (anything where ``kinds`` is -1).
            zones: The households' flood zones (names, or a column of codes).

        Returns:
            Each household's TP.
        """
        c = self._c
        weight_of = np.array([c.weights[kind] for kind in MEMORY_KINDS] + [0.0])
        with np.errstate(invalid="ignore"):
            contribution = weight_of[kinds] * np.minimum(scores, c.score_cap)
            counts = (kinds >= 0) & (scores > 0.0) & (contribution > 0.0)
        cued = row_any(counts)
        # Added one memory at a time, in retrieval order, as the scalar sum adds them; adding
        # 0.0 for a memory that does not count changes nothing.
        evidence = row_sum_in_order(np.where(counts, contribution, 0.0))
        base = per_zone(zones, c.zones, c.other_zone)
        gain = -c.gain
        # math.exp, not np.exp: the two may differ in the last bit, and TP decides choices.
        # Households share their memories' years and scores, so a few hundred distinct
        # evidence values serve tens of thousands of households: each is exponentiated once.
        # Hashed, not sorted (np.unique): several times faster, and no order is needed.
        which, distinct = pd.factorize(evidence[cued], use_na_sentinel=False)
        saturation = np.array([math.exp(gain * e) for e in distinct.tolist()])
        tp = base.copy()
        tp[cued] = 1.0 - (1.0 - base[cued]) * saturation[which]
        return tp

    def choose_many(
        self,
        tp: np.ndarray,
        zones: ZoneColumn | Sequence[str],
        income: np.ndarray,
        claims_paid: np.ndarray,
        claims_denied: np.ndarray,
        insured: np.ndarray,
        skill_ids: Sequence[str],
        costs: np.ndarray,
        valid: np.ndarray,
        draws: np.ndarray,
    ) -> tuple[np.ndarray, np.ndarray, np.ndarray]:
        """The logit choices of many households from their TP and household columns.

        The arithmetic is :meth:`decide`'s, operation for operation, except the logit's
        ``exp`` and sums: where a draw falls within rounding of a cumulative probability (or
        past the last one) the household is flagged to decide through :meth:`decide`.

        Args:
            tp: Each household's threat appraisal.
            zones: Their flood zones (names, or a column of codes).
            income: Their incomes.
            claims_paid: Their paid claims so far.
            claims_denied: Their denied claims so far.
            insured: Whether each holds a policy.
            skill_ids: The skill of each column of ``costs`` and ``valid``.
            costs: Out-of-pocket costs, a row per household.
            valid: Which skills each household may choose.
            draws: One uniform in [0, 1) per household.

        Returns:
            The chosen column of each household, the CP reported with it, and which households
            must decide through :meth:`decide` instead.
        """
        c = self._c
        n = len(tp)
        bonus, penalty, cap = c.claim_adjustment
        claim_term = bonus * np.minimum(claims_paid, cap) - penalty * np.minimum(claims_denied, cap)
        zone_term = per_zone(zones, c.zone_asc, 0.0)
        # fmax, like the scalar max(1.0, income), ignores a NaN income.
        utilities, coping = _many_utilities(
            tp, np.fmax(1.0, income), claim_term, insured, zone_term, skill_ids, costs, valid, c
        )

        offered = np.where(valid, utilities, -np.inf)
        weights = np.exp(offered - row_max(offered)[:, None])
        cumulative = row_cumsum(weights / row_sum_in_order(weights)[:, None])
        below = draws[:, None] < cumulative
        chosen = below.argmax(axis=1)
        # numpy's exp and sum may differ from math.exp and math.fsum in the last bits, which
        # matters only where a draw falls within rounding of a cumulative probability (or past
        # the last one): those households decide through decide() itself.
        close = np.abs(cumulative - draws[:, None]) < _EXACT_MARGIN
        recheck = ~row_any(below) | row_any(close & valid)

        # CP is that of the chosen action, else of the most attractive offered action.
        rows = np.arange(n)
        chosen_cp = coping[rows, chosen]
        actions = valid & (coping >= 0.0)
        focus = np.where(
            chosen_cp < 0.0, np.where(actions, utilities, -np.inf).argmax(axis=1), chosen
        )
        cp = np.where((chosen_cp < 0.0) & ~row_any(actions), 0.0, coping[rows, focus])
        return chosen, cp, recheck


def _utilities(
    options: Sequence[Option],
    tp: float,
    income: float,
    claim_term: float,
    insured: bool,
    zone_term: float,
    c: _Coefficients,
) -> tuple[list[float], list[float]]:
    """Return each option's scaled utility and CP (-1 for ``do_nothing``, which is no action)."""
    threat_utility = c.beta_tp * tp
    beta_cp = c.beta_cp
    cost_sensitivity = c.cost_sensitivity
    scale = c.scale
    skills = c.skills
    utilities: list[float] = []
    coping: list[float] = []
    for option in options:
        skill_id = option.skill_id
        if skill_id == _DO_NOTHING:
            utilities.append(0.0)
            coping.append(-1.0)
            continue
        params = skills.get(skill_id)
        asc, efficacy, insurance = c.skill(skill_id) if params is None else params
        cp = efficacy - cost_sensitivity * option.cost / income
        if insurance:
            cp += claim_term
            asc += zone_term
            if insured:
                asc += c.inertia
        cp = 0.0 if cp < 0.0 else 1.0 if cp > 1.0 else cp
        utility = asc + threat_utility + beta_cp * cp
        utilities.append(scale * utility)
        coping.append(cp)
    return utilities, coping


def _many_utilities(
    tp: np.ndarray,
    income: np.ndarray,
    claim_term: np.ndarray,
    insured: np.ndarray,
    zone_term: np.ndarray,
    skill_ids: Sequence[str],
    costs: np.ndarray,
    valid: np.ndarray,
    c: _Coefficients,
) -> tuple[np.ndarray, np.ndarray]:
    """:func:`_utilities` of many households: utilities and CP arrays.

    The arithmetic is the scalar path's, operation for operation, so that every utility and CP
    is bit-identical to what :meth:`PMTPolicy.decide` computes.
    """
    threat_utility = c.beta_tp * tp
    utilities = np.zeros(valid.shape)
    coping = np.full(valid.shape, -1.0)  # -1: do_nothing, which is no action
    for j, skill_id in enumerate(skill_ids):
        if skill_id == _DO_NOTHING:
            continue
        params = c.skills.get(skill_id)
        if params is None:
            if valid[:, j].any():
                c.skill(skill_id)  # raises, naming the skill
            continue
        asc, efficacy, insurance = params
        cp = efficacy - c.cost_sensitivity * costs[:, j] / income
        skill_asc: float | np.ndarray = asc
        if insurance:
            cp = cp + claim_term
            skill_asc = asc + zone_term
            skill_asc = np.where(insured, skill_asc + c.inertia, skill_asc)
        cp = np.where(cp < 0.0, 0.0, np.where(cp > 1.0, 1.0, cp))
        utilities[:, j] = c.scale * (skill_asc + threat_utility + c.beta_cp * cp)
        coping[:, j] = cp

    return utilities, coping


def _pick(probabilities: list[float], draw: float) -> int:
    """Index of the option whose cumulative-probability interval holds ``draw`` in [0, 1)."""
    cumulative = 0.0
    for n, p in enumerate(probabilities):
        cumulative += p
        if draw < cumulative:
            return n
    # Rounding can leave the cumulative sum a hair below 1; the draw then belongs to the last
    # option with positive probability.
    n = len(probabilities) - 1
    while n > 0 and probabilities[n] == 0.0:
        n -= 1
    return n


def _coping_story(
    option: Option, cp: float, state: HouseholdState, c: _Coefficients
) -> tuple[Construct, str, bool]:
    """Return the CP construct of ``option``, a clause on its cost and whether it is affordable."""
    noun, _, efficacy = c.labels[option.skill_id]
    cost = option.cost
    share = cost / max(1.0, state.income)
    cost_text = f"${cost:,.0f} ({share:.1%} of income)"
    explanation = (
        f"{noun} costs {cost_text}, {efficacy}, "
        f"{state.claims_paid} paid and {state.claims_denied} denied claims"
    )
    if cost <= 0.0:
        return Construct(level_of(cp), cp, explanation), f"{noun} costs me nothing", True
    affordable = share <= 0.05
    verdict = "is affordable" if affordable else "is a stretch"
    if share > 0.2:
        verdict = "is costly"
    means = f"{noun} at {cost_text} {verdict}"
    return Construct(level_of(cp), cp, explanation), means, affordable
