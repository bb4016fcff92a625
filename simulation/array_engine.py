"""ArrayEngine: the yearly cycle for all households at once, on columns instead of objects.

:class:`~simulation.model.FloodAdaptationModel` runs a year household by household: every
household's state is a :class:`~simulation.agents.state.HouseholdState` and its memory a
:class:`~simulation.memory.CognitiveMemory`, and each step of the cycle calls them once per
household. With ``engine: arrays`` the model hands its years to this engine instead, which
holds the same state as one numpy column per field and the memories in a
:class:`~simulation.memory.pool.MemoryPool`, and does each step of DESIGN.md section 2 for the
whole population in a few array operations.

The result is the object path's, exactly: equal seeds give equal metrics, states, memories and
decisions (``tests/test_array_engine.py`` compares the two). That holds because every random
stream is drawn in the same amounts and order, households decide in the same shuffled order
(an elevation that moves the subsidy re-prices those after it, as one by one), and every sum
that reaches a result is added in the object path's order.

The engine covers the configurations whose every step it implements
(:func:`simulation.config.array_engine_limits` names what it does not: language-model
decisions); the audit trail goes through
:class:`~simulation.array_audit.ArrayAudit`. At ``full`` the audited households' decisions are
explained, so those households decide one by one with the policy's scalar ``decide``, as the
object path's do; each keeps what its trace needs until the trace is written, so a year's
decisions go a block of such households at a time. A decision table's entries are looked up
and validated for the whole year at once; the reasons of a rejected proposal that an audited
household's trace shows are checked again one by one. The households' objects are brought up
to date by :meth:`ArrayEngine.store`; the model does it whenever one of them is read.
"""

from __future__ import annotations

import itertools
import math
from typing import TYPE_CHECKING, Any, NamedTuple

import numpy as np
import pandas as pd

from simulation.agents.state import (
    FIELD_KINDS,
    SFHA_ZONES,
    STATE_FIELDS,
    HouseholdState,
    ZoneColumn,
    refuse_state_value,
)
from simulation.array_audit import ArrayAudit
from simulation.audit.writer import DYNAMIC_FIELDS, StateChanges
from simulation.cycle import (
    ADOPTION_PHRASES,
    DECISION_STATS,
    INSURANCE_SKILLS,
    POLICY_FLAGS,
    retrieval_parameters,
)
from simulation.decisions.base import DrawnUniform, Option, Proposal
from simulation.decisions.pmt import MEMORY_KINDS, kind_needs_amount, kind_of
from simulation.decisions.scripted import ScriptedPolicy
from simulation.hazard import Sites
from simulation.memory.cognitive import WriteResult
from simulation.memory.item import ScoredMemory
from simulation.memory.pool import POOL_STORES, MemoryPool, PoolWrite
from simulation.rowwise import row_count
from simulation.skills.registry import VALID, Validation
from simulation.skills.templates import render_many

if TYPE_CHECKING:
    from collections.abc import Sequence

    from numpy.typing import NDArray

    from simulation.config import EventTemplate
    from simulation.memory.pool import PoolRetrieval
    from simulation.model import Decision, FloodAdaptationModel

__all__ = ["ArrayEngine"]

# The adoptions neighbours notice, by their code in the adoption columns.
_ADOPTIONS = tuple(ADOPTION_PHRASES)
_NONE = -1
# Codes of the kinds table: a (source, tag set) pair not classified yet, or whose memories are
# classified by their amount.
_UNCLASSIFIED, _BY_AMOUNT = -3, -2
# At most this many households decided one by one (those a full trace explains) go through step
# 7 at a time. Each holds its proposal and explanation, retrieved memories, states and decision
# until its trace is written: a 10-year run of 100,000 peaked at 1,303 MB with a year's at once,
# 820 MB a block at a time.
_EXPLAINED_PER_BLOCK = 4096
#: The households decided one by one, by their place in the decision order (those a full trace
#: explains): each one's proposal, its validation, the memories it retrieved and its state when
#: it decided.
_Apart = dict[int, tuple[Proposal, Validation, list[ScoredMemory], HouseholdState]]


class _Proposals(NamedTuple):
    """What a decision table proposed for each household of a year, in decision order.

    Attributes:
        skills: The skill (column) proposed.
        valid: Whether the household could take it (else it took the default skill).
        costs: Its cost to the household when it decided.
    """

    skills: NDArray[np.int64]
    valid: NDArray[np.bool_]
    costs: np.ndarray

    @classmethod
    def empty(cls, count: int) -> _Proposals:
        """Room for ``count`` households' proposals."""
        return cls(np.empty(count, dtype=np.int64), np.empty(count, dtype=bool), np.empty(count))

    def keep(
        self, done: slice, skills: NDArray[np.int64], valid: NDArray[np.bool_], costs: np.ndarray
    ) -> None:
        """Keep the proposals at positions ``done``, whose costs are the rows of ``costs``."""
        self.skills[done] = skills
        self.valid[done] = valid
        self.costs[done] = costs[np.arange(len(skills)), skills]


# The dtype kinds a state field's column may have, by the field's kind: a number field takes
# any numbers (a bool counts as 0 or 1, as in Python arithmetic on the object path).
_COLUMN_KINDS = {"bool": "b", "int": "iub", "float": "fiub", "str": "U"}


def _state_column(name: str, values: list[Any], states: list[HouseholdState]) -> np.ndarray:
    """A state field's column, of the field's type, refusing values that are not of it.

    A value changed between years on a household's state (``state.has_insurance = 1``) would
    otherwise turn a column of flags into integers or objects, and fail far away as an index
    error, or count a string as true; an integer set on every household's number field would
    make an integer column that a year's damage cannot be added to. Checked on the column,
    once, when the engine is built; the refusal is the object path's
    (:func:`~simulation.agents.state.check_state_values`).

    Raises:
        TypeError: Naming the household, the field and the value, for a value of another type.
        ValueError: For a number field holding NaN or an infinity, or an integer field one
            beyond 64 bits.
    """
    column = np.array(values)
    kind = FIELD_KINDS[name]
    if column.dtype.kind not in _COLUMN_KINDS[kind]:
        refuse_state_value(name, states)
    if kind == "int":
        if column.dtype.kind == "u":  # from 2**63 on, which int64 would wrap to negatives
            refuse_state_value(name, states)
        return column.astype(np.int64, copy=False)
    if kind == "float":
        column = column.astype(np.float64, copy=False)
        if not np.isfinite(column).all():
            refuse_state_value(name, states)
    return column


def _kind_code(kind: str | None) -> int:
    """A memory kind's position in MEMORY_KINDS, -1 for no threat cue."""
    return _NONE if kind is None else MEMORY_KINDS.index(kind)


class ArrayEngine:
    """A model's households as columns and a memory pool, stepped a year at a time.

    Built from the model's household objects as they are (so a model restored from a
    checkpoint continues where it was); :meth:`store` writes the columns and memories back.

    Args:
        model: The model whose years this engine runs.
    """

    def __init__(self, model: FloodAdaptationModel):
        self.model = model
        households = model.households
        states = [h.state for h in households]
        # What may refuse the households (a state value of another type, memories that cannot
        # be pooled) comes first, before anything is taken from them: the model counts such a
        # year as not begun (FloodAdaptationModel._step_arrays).
        self.columns: dict[str, np.ndarray] = {
            name: _state_column(name, [getattr(s, name) for s in states], states)
            for name in STATE_FIELDS
        }
        memories = [h.memory for h in households]
        self.pool = MemoryPool.from_memories(memories)
        held = _Held(model)
        for state in states:
            held.hold(state)
        for memory in memories:
            # The pool holds the items now; until store() the objects' copies would only be
            # stale, and at 100,000 households they take hundreds of MB.
            memory._load(
                [],
                [],
                next_seq=memory._next_seq,
                clock=memory._clock,
                since_reflection=memory._since_reflection,
            )
            held.hold(memory)
        n = len(households)
        code = {name: c for c, name in enumerate(_ADOPTIONS)}
        self.adopted_last = np.array(
            [code.get(h.adopted_last_year, _NONE) for h in households], dtype=np.int8
        )
        self.adopted_this = np.full(n, _NONE, dtype=np.int8)
        self.relocated_in = np.array(
            [_NONE if h.relocated_in is None else h.relocated_in for h in households]
        )
        # The latest decision of each household (what DecisionSummary holds).
        self.decided_in = np.array(
            [_NONE if h.last_decision is None else h.last_decision.year for h in households]
        )
        skill_ids = model.registry.skill_ids
        self.skill_ids = skill_ids
        self.buys_insurance = np.array([skill in INSURANCE_SKILLS for skill in skill_ids])
        self.decided = np.array(
            [
                0 if h.last_decision is None else skill_ids.index(h.last_decision.skill_id)
                for h in households
            ]
        )
        # The skill each household last proposed, and whether it could take it.
        self.decided_proposed = np.array(
            [
                0 if h.last_decision is None else skill_ids.index(h.last_decision.proposed_skill_id)
                for h in households
            ]
        )
        self.decided_valid = np.array(
            [h.last_decision is None or h.last_decision.valid for h in households], dtype=bool
        )
        self.decided_cost = np.array(
            [0.0 if h.last_decision is None else h.last_decision.cost for h in households]
        )
        self.decided_tp = np.array(
            [
                math.nan
                if h.last_decision is None or h.last_decision.threat is None
                else h.last_decision.threat
                for h in households
            ]
        )
        position = {h: i for i, h in enumerate(households)}
        counts = np.array([len(h.neighbors) for h in households], dtype=np.int64)
        width = int(counts.max(initial=0))
        self.neighbors = np.full((n, width), _NONE, dtype=np.int64)
        # Row by row, each household's neighbours in their order, the rest of the row -1.
        self.neighbors[np.arange(width) < counts[:, None]] = [
            position[other] for household in households for other in household.neighbors
        ]
        self.floodplain = np.isin(self.columns["flood_zone"], list(SFHA_ZONES))
        self.agent_ids: list[str] = self.columns["agent_id"].tolist()
        self.zones = ZoneColumn.of(self.columns["flood_zone"].tolist())
        self._kinds = np.zeros(0, dtype=np.int64)  # kind code of each (tag set, source) pair
        self._anyone: HouseholdState | None = None  # see _decision_texts
        self._state_names = tuple(STATE_FIELDS)
        self.audit = (
            None if model.audit is None else ArrayAudit(model.audit, self.pool, self.agent_ids)
        )

    # ------------------------------------------------------------------ the year
    def step(self, year: int) -> None:
        """Run year ``year``: steps 1 to 8 of the cycle, then the metrics row."""
        model = self.model
        stats = model.year_stats
        relocated = self.columns["relocated"]
        active = np.flatnonzero(~relocated)
        departed = relocated & (self.adopted_last >= 0)

        damage_s, damage_c, depths = self._hazard_and_damage(year, active)
        claims_paid = self._claims_and_event_memories(
            year, active, depths, damage_s, damage_c, stats
        )
        self._institutions(year, active, float(np.sum(damage_s + damage_c)), claims_paid)
        self._observe_neighbours(year, active)
        self.adopted_last[departed] = _NONE

        model.premiums_collected = 0.0
        order = list(range(len(active)))
        model.random.shuffle(order)  # the permutation the object path draws
        rows = active[np.array(order, dtype=np.int64)]
        draws = model.decision_rng.random(len(rows))
        tps = self._decide(year, rows, draws, stats)
        self._end_year(year, active, tps, stats)

    def _hazard_and_damage(
        self, year: int, active: NDArray[np.int64]
    ) -> tuple[np.ndarray, np.ndarray, np.ndarray]:
        """Steps 1-2 (as the model's ``_hazard_and_damage``)."""
        model, columns = self.model, self.columns
        sites = Sites(
            x=columns["x"][active].astype(float),
            y=columns["y"][active].astype(float),
            ground_elevation=columns["ground_elevation"][active].astype(float),
            index=active,
            population=len(columns["x"]),
        )
        depths = model.hazard.depths(year, model.hazard_rng, sites)
        damage_s, damage_c = model.damage(
            depths,
            columns["first_floor_height"][active].astype(float),
            columns["elevated"][active],
            columns["structure_value"][active].astype(float),
            columns["contents_value"][active].astype(float),
        )
        return damage_s, damage_c, depths

    def _claims_and_event_memories(
        self,
        year: int,
        active: NDArray[np.int64],
        depths: np.ndarray,
        damage_s: np.ndarray,
        damage_c: np.ndarray,
        stats: dict[str, float],
    ) -> float:
        """Steps 3-4 (as the model's ``_claims_and_event_memories``). Returns the payout."""
        config, columns = self.model.config, self.columns
        ins, events = config.insurance, config.events
        # One uniform per household of the population, each household's its own, as the
        # model's (a household's luck with a claim does not hang on who has moved away).
        approval_draws = self.model.claims_rng.random(len(columns["x"]))
        total_damage = damage_s + damage_c
        flooded = np.flatnonzero(depths > 0.0)
        rows = active[flooded]
        damage = total_damage[flooded]
        damaged = damage > 0.0
        hit = rows[damaged]
        columns["cumulative_damage"][hit] += damage[damaged]
        columns["last_damage"][hit] = damage[damaged]
        stats["damaged_households"] += int(np.count_nonzero(damaged))
        major = damage >= events.major_damage_threshold
        self._remember(
            rows,
            np.arange(len(rows)),
            0,
            (
                (events.flood_major, damaged & major),
                (events.flood_minor, damaged & ~major),
                (events.flood_no_damage, ~damaged),
            ),
            year,
            "flood",
            damage,
            damage=damage,
            depth=depths[flooded],
        )
        has_insurance = columns["has_insurance"][rows]
        insured = has_insurance | columns["has_contents_insurance"][rows]
        loss = np.where(has_insurance, damage_s[flooded], 0.0) + damage_c[flooded]
        claims = insured & damaged & (loss > ins.deductible)
        stats["claims_filed"] += int(np.count_nonzero(claims))
        approved = claims & (approval_draws[rows] < ins.claim_approval_probability)
        denied = claims & ~approved
        covered = np.where(has_insurance, np.minimum(damage_s[flooded], ins.structure_limit), 0.0)
        covered = covered + np.minimum(damage_c[flooded], ins.contents_limit)
        payout = np.where(approved, np.minimum(loss - ins.deductible, covered), 0.0)
        # Added claim by claim in the households' order, as the object path adds them.
        paid_total = float(np.cumsum(np.concatenate(([0.0], payout[approved])))[-1])
        columns["claims_paid"][rows[approved]] += 1
        columns["claims_denied"][rows[denied]] += 1
        stats["claims_paid"] += int(np.count_nonzero(approved))
        self._remember(
            rows[claims],
            np.flatnonzero(claims),
            1,
            ((events.claim_paid, approved[claims]), (events.claim_denied, denied[claims])),
            year,
            "claim",
            payout[claims],
            payout=payout[claims],
            damage=damage[claims],
        )
        stats["total_damage"] = float(np.sum(total_damage))
        stats["claims_paid_amount"] = paid_total
        if self.audit is not None:  # flood then claim, household by household
            self.audit.flush()
        return paid_total

    def _remember(
        self,
        rows: NDArray[np.int64],
        keys: np.ndarray,
        rank: int,
        events: Sequence[tuple[EventTemplate, NDArray[np.bool_]]],
        year: int,
        source: str,
        amount: np.ndarray,
        **values: np.ndarray,
    ) -> None:
        """Write into the memories of ``rows`` each row's event, rendered with its ``values``.

        ``events`` pairs each event template with the rows it is for (masks over ``rows``
        that split them): one pool write for all, as a write costs about the same for one row
        as for a hundred. ``keys`` and ``rank`` order the audit's lines (see
        :meth:`ArrayAudit.queue`).
        """
        if not len(rows):
            return
        memories = _Gathered(len(rows))
        for event, which in events:
            if not which.any():
                continue
            columns = {name: column[which].tolist() for name, column in values.items()}
            rendered = render_many(event.template, {"year": year}, columns)
            memories.add(which, rendered, event.importance, event.tags)
        done = memories.write(self.pool, rows, year, source=source, amount=amount)
        if self.audit is not None:
            self.audit.queue(rows, done, keys, rank)

    def _institutions(
        self, year: int, active: NDArray[np.int64], total_damage: float, claims_paid: float
    ) -> None:
        """Step 5 (as the model's ``_institutions``)."""
        changes = self.model.policy_changes(year, len(active), total_damage, claims_paid)
        for event, content in changes:
            done = self.pool.write(
                active, content, event.importance, year, event.tags, source="policy"
            )
            if self.audit is not None:  # every household's note of one change, then the next
                self.audit.queue(active, done, np.arange(len(active)))
                self.audit.flush()

    def _observe_neighbours(self, year: int, active: NDArray[np.int64]) -> None:
        """Step 6 (as the model's ``_observe_neighbours``): last year's adoptions nearby.

        A household remembers one memory per kind of adoption it saw, in the order its
        neighbours first show each kind.
        """
        config = self.model.config
        if not config.social.observe or not (self.adopted_last >= 0).any():
            return
        if not self.neighbors.shape[1]:
            return
        neighbors = self.neighbors.take(active, axis=0)  # faster than fancy indexing
        adopted = self.adopted_last[neighbors]  # a missing neighbour (-1) is masked next
        # Each (household, neighbour slot) that saw an adoption, household by household and
        # slot by slot: only households next to an adopter have anything to remember, and
        # there are few, so the work is done on these pairs rather than on the whole table.
        seer, slot = np.nonzero((adopted >= 0) & (neighbors >= 0))
        kinds_count = len(_ADOPTIONS)
        # A (household, kind) group per kind a household saw, in the order of the groups'
        # first pairs (pandas.factorize's order): each household's kinds in the order its
        # neighbours first show them.
        group, keys = pd.factorize(seer * kinds_count + adopted[seer, slot])
        seen = np.bincount(group, minlength=len(keys))
        households, kinds = np.divmod(keys, kinds_count)
        opens = np.ones(len(households), dtype=np.bool_)  # a household's first kind
        opens[1:] = households[1:] != households[:-1]
        starts = np.flatnonzero(opens)
        owner = np.cumsum(opens) - 1  # each group's household, by its place in starts
        ranks = np.arange(len(keys)) - starts[owner]
        # Neighbours still there, or gone this year after adopting, of the households that saw.
        around = neighbors[households[starts]]
        total = row_count(
            (around >= 0) & ((self.adopted_last[around] >= 0) | ~self.columns["relocated"][around])
        )[owner]
        event = config.events.neighbor_adaptation
        tag_sets = [(*event.tags, name) for name in _ADOPTIONS]
        span = neighbors.shape[1] + 1
        for rank in range(int(ranks.max()) + 1 if len(ranks) else 0):
            # Each household's rank-th kind seen, all of them in one write (in row order).
            at = np.flatnonzero(ranks == rank)
            which, kind = households[at], kinds[at]
            # One text per distinct (kind, count, total): neighbourhoods are small, so a few
            # dozen renders serve every household.
            seen_of = (kind * span + seen[at]) * span + total[at]
            # Small codes: counted (np.bincount), not sorted as np.unique would.
            occurs = np.bincount(seen_of) > 0
            codes = np.flatnonzero(occurs).tolist()
            index = (np.cumsum(occurs) - 1)[seen_of]
            texts = render_many(
                event.template,
                {"year": year},
                {
                    "count": [code // span % span for code in codes],
                    "total": [code % span for code in codes],
                    "action": [
                        ADOPTION_PHRASES[_ADOPTIONS[code // (span * span)]] for code in codes
                    ],
                },
            )
            done = self.pool.write(
                active[which],
                texts,
                event.importance,
                year,
                tag_sets,
                source="neighbor",
                text_index=index,
                tag_index=kind,
            )
            if self.audit is not None:
                self.audit.queue(active[which], done, which, rank)
        if self.audit is not None:  # household by household, each in the order it saw them
            self.audit.flush()

    # ---------------------------------------------------------------- decisions
    def _kind_codes(self, items: NDArray[np.int64]) -> NDArray[np.int64]:
        """The threat-cue kind of each retrieved item: a position in MEMORY_KINDS, or -1."""
        pool = self.pool
        threshold = self.model.policy.config.major_damage_threshold
        flat = items.ravel()
        got = np.flatnonzero(flat >= 0)
        found = flat[got]
        sources = len(pool.source_names)
        key = pool.column("tags", found) * sources + pool.column("source", found)
        table = self._kinds
        if key.size and key.max() >= len(table):
            grown = np.full(int(key.max()) + 1, _UNCLASSIFIED, dtype=np.int64)
            grown[: len(table)] = table
            table = self._kinds = grown
        # Most memories share their source and tag set with thousands: each pair is classified
        # once; only a flood without a severity tag is classified by its amount.
        found_kinds = table[key]
        new = found_kinds == _UNCLASSIFIED
        if new.any():
            for k in np.unique(key[new]).tolist():
                tags, source = pool.tag_sets[k // sources], pool.source_names[k % sources]
                if kind_needs_amount(source, tags):
                    table[k] = _BY_AMOUNT
                else:
                    table[k] = _kind_code(kind_of(source, tags, None, threshold))
            found_kinds = table[key]
        by_amount = np.flatnonzero(found_kinds == _BY_AMOUNT)
        if len(by_amount):
            amounts = pool.column("amount", found[by_amount]).tolist()
            found_kinds[by_amount] = [
                _kind_code(kind_of("flood", (), None if math.isnan(a) else a, threshold))
                for a in amounts
            ]
        kinds = np.full(flat.shape, _NONE, dtype=np.int64)
        kinds[got] = found_kinds
        return kinds.reshape(items.shape)

    def _cost_matrix(self, rows: NDArray[np.int64]) -> np.ndarray:
        """The model's ``cost_matrix`` for ``rows``, from the columns."""
        columns = self.columns
        return self.model.costs_of(
            self.zones[rows],
            columns["elevated"][rows],
            columns["structure_value"][rows].astype(float),
            columns["contents_value"][rows].astype(float),
            columns["tenure"][rows] == "owner",
        )

    def _decide(
        self, year: int, rows: NDArray[np.int64], draws: np.ndarray, stats: dict[str, float]
    ) -> np.ndarray:
        """Step 7 for ``rows`` in their order: retrieve, appraise, choose, execute, remember.

        Households decided one by one keep what their traces need until these are written, so
        the year goes in blocks of at most ``_EXPLAINED_PER_BLOCK`` of them, each decided,
        executed and logged before the next. The choices are those of one pass: a household's
        decision reads its own memories and state, and the year's context and subsidy, which
        carry over from block to block.

        Returns:
            The households' threat appraisals, in decision order.
        """
        context = self.model._decision_context(year)
        explained = [] if self.audit is None else np.flatnonzero(self.audit.explains[rows])
        starts = [0, *explained[_EXPLAINED_PER_BLOCK::_EXPLAINED_PER_BLOCK], len(rows)]
        blocks = [
            self._decide_block(year, rows[a:b], draws[a:b], stats, context)
            for a, b in itertools.pairwise(starts)
        ]
        return blocks[0] if len(blocks) == 1 else np.concatenate(blocks)

    def _decide_block(
        self,
        year: int,
        rows: NDArray[np.int64],
        draws: np.ndarray,
        stats: dict[str, float],
        context: dict[str, Any],
    ) -> np.ndarray:
        """:meth:`_decide` for a block of ``rows`` in their order, with the year's ``context``.

        Returns:
            The households' threat appraisals, in decision order.
        """
        model, pool, columns, registry = self.model, self.pool, self.columns, self.model.registry
        retrieved = pool.retrieve(rows, model.config.memory.retrieval.top_k, year)
        scripted = isinstance(model.policy, ScriptedPolicy)
        if scripted:  # no appraisal: the table names each household's skill
            tp = np.full(len(rows), math.nan)
            proposed = self._scripted_skills(model.policy, year, rows)
        else:
            kinds = self._kind_codes(retrieved.items)
            tp = model.policy.appraise_threats(kinds, retrieved.scores, self.zones[rows])
        elevation_cost = model.config.adaptation.elevation_cost
        chosen = np.empty(len(rows), dtype=np.int64)
        paid = np.empty(len(rows))
        cps = np.empty(len(rows))
        # What a decision table proposed (the PMT policy chooses among the valid skills).
        proposals = _Proposals.empty(len(rows)) if scripted else None
        fallback = self.skill_ids.index(registry.default_skill)
        # Households decided one by one, as on the object path: those whose full trace explains
        # the decision. (A trace below full gives a rejected proposal's reasons alone: see
        # _rejections.)
        apart: _Apart = {}
        audit = self.audit
        alone = np.zeros(len(rows), dtype=bool) if audit is None else audit.explains[rows]
        start = 0
        while start < len(rows):
            subsidy = model.government.subsidy_for(elevation_cost)
            part = slice(start, len(rows))
            these = rows[part]
            costs = self._cost_matrix(these)
            valid = registry.valid_mask_columns(columns, these, costs)
            if scripted:
                picks, cp = proposed[part].copy(), np.full(len(these), math.nan)
            else:
                picks, cp = self._choose(
                    retrieved, start, these, costs, valid, tp, draws, ~alone[part]
                )
            deciding = np.flatnonzero(alone[part])
            if len(deciding):
                picks[deciding], cp[deciding], tp[start + deciding] = self._decide_apart(
                    these[deciding],
                    retrieved,
                    start + deciding,
                    costs[deciding],
                    valid[deciding],
                    draws,
                    context,
                    apart,
                )
            if scripted:  # a skill the household may not take gives way to the default skill
                ok = valid[np.arange(len(picks)), picks]
                picks[~ok] = fallback
            end = start + self._until_subsidy_changes(picks, costs, subsidy)
            done = slice(start, end)
            chosen[done] = picks[: end - start]
            if proposals is not None:
                proposals.keep(done, proposed[done], ok[: end - start], costs)
            paid[done] = costs[np.arange(end - start), picks[: end - start]]
            cps[done] = cp[: end - start]
            start = end
        self._keep_proposals(rows, chosen, proposals, stats)
        self._execute_and_log(year, rows, retrieved, chosen, paid, tp, cps, apart, proposals, stats)
        return tp

    def _keep_proposals(
        self,
        rows: NDArray[np.int64],
        chosen: NDArray[np.int64],
        proposals: _Proposals | None,
        stats: dict[str, float],
    ) -> None:
        """Keep what each household proposed and whether it could take it; count the others.

        Args:
            rows: The households, in decision order.
            chosen: The skill (column) each executes.
            proposals: What a decision table proposed (``None``: the PMT policy, which
                proposes what it executes).
            stats: The year's counts.
        """
        if proposals is None:
            self.decided_proposed[rows] = chosen
            self.decided_valid[rows] = True
            return
        self.decided_proposed[rows] = proposals.skills
        self.decided_valid[rows] = proposals.valid
        stats["invalid_proposals"] += len(rows) - int(np.count_nonzero(proposals.valid))

    def _choose(
        self,
        retrieved: PoolRetrieval,
        start: int,
        rows: NDArray[np.int64],
        costs: np.ndarray,
        valid: np.ndarray,
        tp: np.ndarray,
        draws: np.ndarray,
        rechecked: NDArray[np.bool_],
    ) -> tuple[NDArray[np.int64], np.ndarray]:
        """The PMT policy's choices of the households from ``start`` in the decision order.

        Args:
            retrieved: What every household retrieved this year.
            start: The first household's place in the decision order.
            rows: The households from there on, in decision order.
            costs: The households' cost of each skill, a row each.
            valid: The skills each may take.
            tp: Every household's threat appraisal, in decision order.
            draws: The year's uniforms of the decision stream, in decision order.
            rechecked: The households whose draw near a boundary is decided again alone (the
                others are decided apart, or not near one).

        Returns:
            The skill (column) each chose, and the CP reported with it.
        """
        model, columns = self.model, self.columns
        part = slice(start, None)
        picks, cp, recheck = model.policy.choose_many(
            tp[part],
            self.zones[rows],
            columns["income"][rows].astype(float),
            columns["claims_paid"][rows].astype(float),
            columns["claims_denied"][rows].astype(float),
            columns["has_insurance"][rows] | columns["has_contents_insurance"][rows],
            self.skill_ids,
            costs,
            valid,
            draws[part],
        )
        for i in np.flatnonzero(recheck & rechecked).tolist():
            proposal = self._decide_alone(
                rows[i], retrieved, start + i, costs[i], valid[i], float(draws[start + i])
            )
            picks[i] = self.skill_ids.index(proposal.skill_id)
            cp[i] = proposal.constructs["CP"].value
        return picks, cp

    def _until_subsidy_changes(
        self, picks: NDArray[np.int64], costs: np.ndarray, subsidy: float
    ) -> int:
        """Pay the subsidies of the elevations among ``picks`` in turn, until one changes it.

        Returns:
            How many of the choices stand: all of them, or those up to and including the
            elevation that changed the subsidy (the rest are priced again).
        """
        skills, government = self.skill_ids, self.model.government
        if "elevate_house" not in skills:
            return len(picks)
        elevate = skills.index("elevate_house")
        elevation_cost = self.model.config.adaptation.elevation_cost
        for i in np.flatnonzero(picks == elevate).tolist():
            cost = float(costs[i, elevate])
            spent = government.spent_this_year
            government.pay(elevation_cost * (1.0 - cost / max(elevation_cost, 1e-9)))
            if government.spent_this_year != spent and (
                government.subsidy_for(elevation_cost) != subsidy
            ):
                return i + 1
        return len(picks)

    def _scripted_skills(
        self, policy: ScriptedPolicy, year: int, rows: NDArray[np.int64]
    ) -> NDArray[np.int64]:
        """The skill (column) a decision table names for each of ``rows`` in ``year``."""
        table, agent_ids = policy.decisions, self.agent_ids
        column = {skill_id: j for j, skill_id in enumerate(self.skill_ids)}
        default = policy.default_skill
        return np.array(
            [column[table.get((agent_ids[row], year), default)] for row in rows.tolist()],
            dtype=np.int64,
        )

    def _execute_and_log(
        self,
        year: int,
        rows: NDArray[np.int64],
        retrieved: PoolRetrieval,
        chosen: NDArray[np.int64],
        paid: np.ndarray,
        tp: np.ndarray,
        cp: np.ndarray,
        apart: _Apart,
        proposals: _Proposals | None,
        stats: dict[str, float],
    ) -> None:
        """Execute the year's choices (:meth:`_execute`) and log the audited households'.

        Args:
            year: The year.
            rows: The households, in decision order.
            retrieved: What each retrieved.
            chosen: The skill (column) each executes.
            paid: What each pays for it.
            tp: Each one's threat appraisal.
            cp: The coping appraisal reported with each choice.
            apart: The households decided one by one (:meth:`_decide_apart`), by position.
            proposals: What a decision table proposed (``None``: the PMT policy).
            stats: The year's counts.
        """
        audit, columns = self.audit, self.columns
        if audit is None:
            self._execute(year, rows, chosen, paid, tp, stats)
            return
        parameters = retrieval_parameters(self.model.config.memory.retrieval, year)
        if apart:
            positions, decisions = self._apart_decisions(year, rows, apart, chosen, paid)
            written = self._execute(year, rows, chosen, paid, tp, stats)
            updates = self.pool.items(written.items[positions])
            for (decision, _), item, store in zip(
                decisions, updates, written.stores[positions].tolist(), strict=True
            ):
                decision.memory_update = WriteResult(item, POOL_STORES[store], ())
            after = self._states(rows[positions])
            audit.decisions_apart(rows[positions], written, positions, decisions, after, parameters)
            return
        audited = np.flatnonzero(audit.audited[rows])
        before = (
            {name: columns[name][rows[audited]] for name in DYNAMIC_FIELDS}
            if audit.memory_streams
            else None
        )
        changes = self._state_changes(rows[audited], chosen[audited])
        rejections = None
        appraisals = {"tp": tp, "cp": cp}
        if proposals is not None:  # a table appraises nothing, and may be turned down
            appraisals = {"tp": None, "cp": None}
            turned_down = audited[~proposals.valid[audited]]
            if len(turned_down):
                rejections = self._rejections(year, rows, turned_down, chosen, paid, proposals)
        written = self._execute(year, rows, chosen, paid, tp, stats)
        choices = {"skill_ids": self.skill_ids, "skill": chosen, "cost": paid, **appraisals}
        audit.decisions(rows, retrieved, before, choices, changes, written, parameters, rejections)

    def _rejections(
        self,
        year: int,
        rows: NDArray[np.int64],
        positions: NDArray[np.int64],
        chosen: NDArray[np.int64],
        paid: np.ndarray,
        proposals: _Proposals,
    ) -> dict[int, Decision]:
        """The decisions whose table proposal was rejected, with the registry's reasons.

        Called before the choices are executed (the reasons are about the state before). The
        reasons are the object path's: the proposed skill checked again, at its cost then.

        Args:
            year: The year.
            rows: The households, in decision order.
            positions: The rejected ones' places in that order.
            chosen: The skill (column) each executes instead.
            paid: What each pays for it.
            proposals: What the table proposed.

        Returns:
            Each one's :class:`~simulation.model.Decision` (what its trace needs), by position.
        """
        from simulation.model import Decision  # noqa: PLC0415 - the model imports this

        check, skill_ids = self.model.registry.check, self.skill_ids
        rejections = {}
        for position, state in zip(positions.tolist(), self._states(rows[positions]), strict=True):
            proposed = skill_ids[proposals.skills[position]]
            rejections[position] = Decision(
                year,
                Proposal(skill_id=proposed),
                skill_ids[chosen[position]],
                check(proposed, state, float(proposals.costs[position])),
                [],
                cost=float(paid[position]),
            )
        return rejections

    def _state_changes(self, rows: NDArray[np.int64], chosen: NDArray[np.int64]) -> StateChanges:
        """What executing each choice will change (``Decision.state_changes``), before it does.

        The changes follow from the skill and the fields it reads (the policy flags and the
        fields skills set), so households alike in these share one dict, worked out once.
        """
        columns, renews, registry = self.columns, self.model._renews, self.model.registry
        if not len(rows):
            return StateChanges([], np.zeros(0, dtype=np.int64))
        read = list(POLICY_FLAGS)
        for skill_id in self.skill_ids:
            read += [name for name in registry.effects(skill_id) if name not in read]
        values = [columns[name][rows] for name in read]
        if all(column.dtype == np.bool_ for column in values):  # the usual: flags only
            code = chosen.astype(np.int64)
            for column in values:
                code = 2 * code + column
            which, _ = pd.factorize(code)  # hashed, not sorted: no order is needed
            # Each distinct code's first household: where the codes reach a new one.
            running = np.maximum.accumulate(which)
            first = np.flatnonzero(np.diff(running, prepend=-1))
            alike = np.column_stack([chosen[first], *(column[first] for column in values)])
        else:
            alike, which = np.unique(
                np.column_stack([chosen, *values]).astype(np.float64),
                axis=0,
                return_inverse=True,
            )
        kinds = []
        for j, *values in alike.tolist():
            skill_id = self.skill_ids[int(j)]
            state = {
                name: columns[name].dtype.type(v).item()
                for name, v in zip(read, values, strict=True)
            }
            changes: dict[str, tuple[Any, Any]] = {}
            for name in POLICY_FLAGS:  # annual policies lapse unless the skill renews them
                if state[name] and name not in renews[skill_id]:
                    changes[name] = (True, False)
                    state[name] = False
            for name, value in registry.effects(skill_id).items():
                if state[name] != value:
                    changes[name] = (state[name], value)
            kinds.append(changes)
        return StateChanges(kinds, which.reshape(-1))

    def _decide_alone(
        self,
        row: int,
        retrieved: PoolRetrieval,
        position: int,
        costs: np.ndarray,
        valid: np.ndarray,
        draw: float,
    ) -> Proposal:
        """The scalar decision of one household whose draw fell within rounding of a boundary."""
        return self.model.policy.decide(
            self._states([row])[0],
            self._recalled(retrieved, [position])[0],
            self._options(costs.tolist(), valid.tolist()),
            {},
            DrawnUniform(draw),
            explain=False,
        )

    def _options(self, costs: list[float], valid: list[bool]) -> list[Option]:
        """The skills a household may take, with their costs (a policy's ``options``)."""
        offered = zip(self.skill_ids, costs, valid, strict=True)
        return [Option(skill_id, cost) for skill_id, cost, ok in offered if ok]

    def _decide_apart(
        self,
        rows: NDArray[np.int64],
        retrieved: PoolRetrieval,
        positions: NDArray[np.int64],
        costs: np.ndarray,
        valid: np.ndarray,
        draws: np.ndarray,
        context: dict[str, Any],
        apart: _Apart,
    ) -> tuple[NDArray[np.int64], np.ndarray, np.ndarray]:
        """Decide for households one by one with the policy's ``decide``, as the object path.

        Their proposals are explained at ``full`` and validated as ``FloodAdaptationModel``
        validates them: a skill outside the valid options is checked again for the reasons.

        Args:
            rows: The households.
            retrieved: What every household retrieved this year.
            positions: Their places in the decision order (and in ``retrieved``).
            costs: Their cost of each skill, a row each.
            valid: The skills each may take.
            draws: The year's uniforms of the decision stream, by position.
            context: The year's decision context.
            apart: Receives ``(proposal, validation, retrieved memories, state)`` by position.

        Returns:
            The skill (column) each proposed, and the CP and TP it reported (NaN: none).
        """
        model, skill_ids = self.model, self.skill_ids
        decide, check = model.policy.decide, model.registry.check
        explain = self.audit is not None and self.audit.full
        positions_list = positions.tolist()
        picks: list[int] = []
        cps: list[float] = []
        tps: list[float] = []
        for position, state, memories, cost, allowed in zip(
            positions_list,
            self._states(rows),
            self._recalled(retrieved, positions_list),
            costs.tolist(),
            valid.tolist(),
            strict=True,
        ):
            draw = DrawnUniform(float(draws[position]))
            options = self._options(cost, allowed)
            proposal = decide(state, memories, options, context, draw, explain=explain)
            j = skill_ids.index(proposal.skill_id)
            validation = VALID if allowed[j] else check(proposal.skill_id, state, cost[j])
            apart[position] = (proposal, validation, memories, state)
            constructs = proposal.constructs
            picks.append(j)
            cps.append(constructs["CP"].value if "CP" in constructs else math.nan)
            tps.append(constructs["TP"].value if "TP" in constructs else math.nan)
        return np.array(picks, dtype=np.int64), np.array(cps), np.array(tps)

    def _recalled(self, retrieved: PoolRetrieval, positions: list[int]) -> list[list[ScoredMemory]]:
        """What the households at ``positions`` retrieved, as the object path's scored memories."""
        counts = retrieved.counts[positions]
        found = np.arange(retrieved.items.shape[1]) < counts[:, None]
        items = iter(self.pool.items(retrieved.items[positions][found]))
        scores = iter(retrieved.scores[positions][found].tolist())
        stores = iter(retrieved.stores[positions][found].tolist())
        return [
            [
                ScoredMemory(next(items), next(scores), POOL_STORES[next(stores)])
                for _ in range(count)
            ]
            for count in counts.tolist()
        ]

    def _apart_decisions(
        self,
        year: int,
        rows: NDArray[np.int64],
        apart: _Apart,
        chosen: NDArray[np.int64],
        paid: np.ndarray,
    ) -> tuple[list[int], list[tuple[Decision, HouseholdState]]]:
        """The object path's :class:`~simulation.model.Decision` of each household decided apart.

        Called before the choices are executed: each decision's ``state_changes`` are what
        executing it will change. Its ``memory_update`` is set once written.

        Returns:
            The households' positions in decision order, and each one's decision and state
            before it decided.
        """
        from simulation.model import Decision  # noqa: PLC0415 - the model imports this

        positions = sorted(apart)
        changes = self._state_changes(rows[positions], chosen[positions])
        decisions = []
        for position, which in zip(positions, changes.which.tolist(), strict=True):
            proposal, validation, memories, before = apart[position]
            decision = Decision(
                year,
                proposal,
                self.skill_ids[chosen[position]],
                validation,
                memories,
                state_changes=changes.kinds[which],
                cost=float(paid[position]),
            )
            decisions.append((decision, before))
        return positions, decisions

    def _states(self, rows: NDArray[np.int64] | list[int]) -> list[HouseholdState]:
        """The states of ``rows``' households as objects (copies)."""
        columns, names = self.columns, self._state_names
        values = zip(*(columns[name][rows].tolist() for name in names), strict=True)
        return [HouseholdState(**dict(zip(names, state, strict=True))) for state in values]

    def _execute(
        self,
        year: int,
        rows: NDArray[np.int64],
        chosen: NDArray[np.int64],
        paid: np.ndarray,
        tp: np.ndarray,
        stats: dict[str, float],
    ) -> PoolWrite:
        """Execute every household's choice and write its decision memory (in order).

        Returns:
            The decision memory writes, an entry per household in decision order.
        """
        model, columns, registry = self.model, self.columns, self.model.registry
        was_insured = columns["has_insurance"][rows] | columns["has_contents_insurance"][rows]
        renews = model._renews
        elevation_cost = model.config.adaptation.elevation_cost
        # Every household's decision memory goes in one pool write: its text, importance and
        # tags are the skill's, rendered as each skill executes (a template may read the state).
        memories = _Gathered(len(rows))
        for j, skill_id in enumerate(self.skill_ids):
            which = chosen == j
            if not which.any():
                continue
            these, cost, insured_before = rows[which], paid[which], was_insured[which]
            renewed = renews[skill_id]
            for name in POLICY_FLAGS:
                if name not in renewed:
                    columns[name][these] = False
            if not renewed:
                columns["insured_years"][these[insured_before]] = 0
            for name, value in registry.effects(skill_id).items():
                columns[name][these] = value
            if skill_id in INSURANCE_SKILLS:
                years = columns["insured_years"][these]
                columns["insured_years"][these] = np.where(insured_before, years + 1, 1)
                self.adopted_this[these[~insured_before]] = 0
            elif skill_id == "elevate_house":
                self.adopted_this[these] = 1
            elif skill_id == "relocate":
                self.adopted_this[these] = 2
                self.relocated_in[these] = year
            stat = DECISION_STATS.get(skill_id)
            if stat is not None:
                stats[stat] += int(np.count_nonzero(which))
            memories.add(
                which,
                *self._decision_texts(skill_id, these, cost, year, elevation_cost),
                store=registry.skills[skill_id].memory.store,
            )
        premiums = paid[self.buys_insurance[chosen]]
        # Added premium by premium in the decision order, as the object path adds them.
        model.premiums_collected = float(
            np.cumsum(np.concatenate(([model.premiums_collected], premiums)))[-1]
        )
        self.decided_in[rows] = year
        self.decided[rows] = chosen
        self.decided_cost[rows] = paid
        self.decided_tp[rows] = tp
        return memories.write(self.pool, rows, year, source="decision")

    def _decision_texts(
        self,
        skill_id: str,
        rows: NDArray[np.int64],
        cost: np.ndarray,
        year: int,
        elevation_cost: float,
    ) -> tuple[list[str], float, tuple[str, ...], NDArray[np.int64]]:
        """The registry's memory of executing ``skill_id``, for each of ``rows``.

        Returns:
            The distinct texts rendered, the memory's importance and tags (the skill's), and
            the position of each row's text among the texts.
        """
        registry = self.model.registry
        fields = set(registry.template_fields(skill_id))
        context_keys = {"year", "cost"}
        if skill_id in INSURANCE_SKILLS:
            context_keys.add("premium")
        elif skill_id == "elevate_house":
            context_keys.add("subsidy_share")
        if fields <= context_keys:  # one text per distinct cost, the household's fields unread
            distinct, index = _distinct(cost)
            if self._anyone is None:  # a template reading no field reads nobody's state
                self._anyone = self._states(rows[:1])[0]
            texts, importance, tags = registry.memory_updates(
                skill_id,
                self._anyone,
                {"year": year},
                _cost_columns(skill_id, distinct, elevation_cost),
            )
            return texts, importance, tags, index
        rendered = [
            registry.memory_update(skill_id, state, _context(skill_id, year, c, elevation_cost))
            for state, c in zip(self._states(rows), cost.tolist(), strict=True)
        ]
        _, importance, tags = rendered[0]
        return [text for text, _, _ in rendered], importance, tags, np.arange(len(rows))

    # ----------------------------------------------------------------- year end
    def _end_year(
        self, year: int, active: NDArray[np.int64], tps: np.ndarray, stats: dict[str, float]
    ) -> None:
        """Step 8 (as the model's ``_end_year``) and the metrics row."""
        model, columns = self.model, self.columns
        done = self.pool.end_year(year, active)
        if self.audit is not None:
            self.audit.year_end(active, done.moves, done.reflections, done.tiers)
        self.adopted_last[active] = self.adopted_this[active]
        self.adopted_this[active] = _NONE
        here = active[~columns["relocated"][active]]
        n = len(here)
        covered = columns["has_insurance"][here] | columns["has_contents_insurance"][here]
        inside = self.floodplain[here]
        total = len(model.households)
        nan = math.nan
        stats["active_households"] = n
        stats["premium_rate"] = model.insurer.rate
        stats["subsidy_share"] = model.government.subsidy_share
        stats["relocated_share"] = (total - n) / total if total else 0.0
        insured = int(np.count_nonzero(covered))
        stats["insured_share"] = insured / n if n else nan
        stats["elevated_share"] = int(np.count_nonzero(columns["elevated"][here])) / n if n else nan
        for zone, key in ((inside, "insured_share_ae"), (~inside, "insured_share_x")):
            in_zone = int(np.count_nonzero(zone))
            stats[key] = int(np.count_nonzero(covered & zone)) / in_zone if in_zone else nan
        working = int(self.pool.working_sizes[here].sum())
        episodic = int(self.pool.episodic_sizes[here].sum())
        stats["mean_working"] = working / n if n else nan
        stats["mean_episodic"] = episodic / n if n else nan
        # Summed decision by decision, in order, as the object path's sum() adds them.
        stats["mean_tp"] = float(np.cumsum(tps)[-1]) / len(tps) if len(tps) else nan

    # --------------------------------------------------------------- write back
    def store(self) -> None:
        """Write the columns and memories back into the households' objects."""
        from simulation.model import DecisionSummary  # noqa: PLC0415 - the model imports this

        model = self.model
        columns = self.columns
        names = [name for name in STATE_FIELDS if name != "agent_id"]
        values = {name: columns[name].tolist() for name in names}
        for row, household in enumerate(model.households):
            state = household.__dict__["_state"]
            _release(state)
            for name in names:
                setattr(state, name, values[name][row])
            memory = household.__dict__["_memory"]
            _release(memory)
            self.pool.store_into(row, memory)
            last = int(self.adopted_last[row])
            household.adopted_last_year = None if last < 0 else _ADOPTIONS[last]
            now = int(self.adopted_this[row])
            household.adopted_this_year = None if now < 0 else _ADOPTIONS[now]
            moved = int(self.relocated_in[row])
            household.relocated_in = None if moved < 0 else moved
            if self.decided_in[row] >= 0:
                skill_id = self.skill_ids[self.decided[row]]
                tp = float(self.decided_tp[row])
                household.last_decision = DecisionSummary(
                    int(self.decided_in[row]),
                    skill_id,
                    self.skill_ids[self.decided_proposed[row]],
                    bool(self.decided_valid[row]),
                    float(self.decided_cost[row]),
                    None if math.isnan(tp) else tp,
                    False,
                    0,
                )


#: The class attribute naming the class a held object had (see _Held).
_UNHELD = "_unheld_class"


class _Held:
    """Classes for the households' objects while the engine holds what they hold.

    A notebook may keep a household's state or memory across steps (``memory =
    household.memory``). Reading the household again brings its objects up to date
    (:meth:`ArrayEngine.store`), but a kept memory would show the empty memory the engine left
    (the pool has its items) and a kept state the values of the last read, and a value set on
    it would be overwritten by the engine's. Each object the engine holds is given a subclass
    of its class whose attribute reads and writes call ``model.sync()`` first, which gives it
    its class back (:func:`_release`): the object path's objects, never held, pay nothing.
    """

    def __init__(self, model: FloodAdaptationModel):
        self.model = model
        self._classes: dict[type, type] = {}

    def hold(self, obj: Any) -> None:
        """Make ``obj`` sync the model on its next attribute read."""
        cls = type(obj)
        held = self._classes.get(cls)
        if held is None:
            held = self._classes[cls] = self._held_class(cls)
        obj.__class__ = held

    def _held_class(self, cls: type) -> type:
        sync = self.model.sync

        def __getattribute__(obj: Any, name: str) -> Any:  # noqa: N807
            sync()  # gives obj its class back (_release)
            return object.__getattribute__(obj, name)

        def __setattr__(obj: Any, name: str, value: Any) -> None:  # noqa: N807
            # A write through a kept object (state = household.state; a step; state.income =
            # ...) lands on the object brought up to date, which the next year reloads: set
            # before the sync, store() would overwrite it with the engine's value.
            sync()
            _release(obj)  # already, unless the model let the engine go without storing
            setattr(obj, name, value)

        return type(
            f"Held{cls.__name__}",
            (cls,),
            {
                "__slots__": (),
                "__getattribute__": __getattribute__,
                "__setattr__": __setattr__,
                _UNHELD: cls,
            },
        )


def _release(obj: Any) -> None:
    """Give ``obj`` back the class it had before :meth:`_Held.hold` (without reading it)."""
    original = type(obj).__dict__.get(_UNHELD)
    if original is not None:
        object.__setattr__(obj, "__class__", original)  # not the held class's __setattr__


class _Gathered:
    """One pool write's memories, gathered a group of its rows at a time.

    Each group (a mask over the write's rows) brings its rendered texts, its importance and
    its tags; :meth:`write` then makes one pool write of them all, as a write costs about the
    same for one row as for a hundred.
    """

    __slots__ = ("group", "importances", "stores", "tag_sets", "text_index", "texts")

    def __init__(self, count: int) -> None:
        self.texts: list[str] = []
        self.text_index = np.empty(count, dtype=np.int64)
        # A group's importance, tags and store are its own: each row names them by its group.
        self.importances: list[float] = []
        self.tag_sets: list[tuple[str, ...]] = []
        self.stores: list[str] = []
        self.group = np.empty(count, dtype=np.int64)

    def add(
        self,
        which: NDArray[np.bool_],
        texts: list[str],
        importance: float,
        tags: Sequence[str],
        index: NDArray[np.int64] | None = None,
        store: str = "auto",
    ) -> None:
        """Give the rows of ``which`` these texts (``index``: each row's; else one apiece)."""
        start = len(self.texts)
        self.text_index[which] = start + (np.arange(len(texts)) if index is None else index)
        self.texts += texts
        self.group[which] = len(self.tag_sets)
        self.importances.append(importance)
        self.tag_sets.append(tuple(tags))
        self.stores.append(store)

    def write(
        self, pool: MemoryPool, rows: NDArray[np.int64], year: int, **options: Any
    ) -> PoolWrite:
        """Write the gathered memories to ``rows`` (``options``: :meth:`MemoryPool.write`'s)."""
        if any(store != "auto" for store in self.stores):  # a skill's memory.store
            options["store"] = np.array(self.stores)[self.group]
        return pool.write(
            rows,
            self.texts,
            self.importances,
            year,
            self.tag_sets,
            text_index=self.text_index,
            tag_index=self.group,
            importance_index=self.group,
            **options,
        )


def _distinct(values: np.ndarray) -> tuple[np.ndarray, NDArray[np.int64]]:
    """``np.unique(values, return_inverse=True)``, without its sort when all are equal.

    A year's ``do_nothing`` memories, most of a population's, share one cost (nothing).
    """
    if len(values) and (values == values[0]).all():
        return values[:1].copy(), np.zeros(len(values), dtype=np.int64)
    distinct, index = np.unique(values, return_inverse=True)
    return distinct, index.reshape(-1)


def _context(skill_id: str, year: int, cost: float, elevation_cost: float) -> dict[str, Any]:
    """What a decision memory's template may name besides the household's fields."""
    context: dict[str, Any] = {"year": year, "cost": cost}
    if skill_id in INSURANCE_SKILLS:
        context["premium"] = cost
    elif skill_id == "elevate_house":
        context["subsidy_share"] = 1.0 - cost / max(elevation_cost, 1e-9)
    return context


def _cost_columns(
    skill_id: str, costs: np.ndarray, elevation_cost: float
) -> dict[str, list[float]]:
    """:func:`_context`'s entries that follow from the cost, for each of ``costs``."""
    columns = {"cost": costs.tolist()}
    if skill_id in INSURANCE_SKILLS:
        columns["premium"] = columns["cost"]
    elif skill_id == "elevate_house":
        # Element by element the same double arithmetic as _context's.
        columns["subsidy_share"] = (1.0 - costs / max(elevation_cost, 1e-9)).tolist()
    return columns
