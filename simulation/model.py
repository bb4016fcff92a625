"""FloodAdaptationModel: households, institutions and the yearly cycle on Mesa.

One step is one year, in the order DESIGN.md section 2 fixes (and the README documents):

1. hazard: each active household's flood depth;
2. damage: depth above the first floor through the depth-damage curves;
3. claims: insured households with damage above the deductible claim; approval is drawn; the
   payout is the damage less the deductible, within the coverage limits;
4. event memories: flood and claim experiences, routed by importance;
5. institutions: the government may change the elevation subsidy, the insurer the premium rate;
   every household remembers a change;
6. social observation: each household remembers what its neighbours adopted *last* year (a
   snapshot, so activation order does not matter);
7. decisions: households, in a shuffled order, retrieve memories, the policy proposes a skill,
   the registry validates and executes it, and its memory template is written; insurance that
   is not renewed lapses (the PMT policy prices, validates and chooses for all households at
   once, with the same result: see ``_decide_together``);
8. year end: consolidation, retention and reflection; the metrics row is collected.

The model owns its random streams: Mesa's ``random`` (activation order) and numpy generators for
the population, hazard, claims and decisions, all derived from the config's seed, so equal
configs give equal runs.
"""

from __future__ import annotations

import math
import warnings
import weakref
from collections import defaultdict
from collections.abc import MutableMapping
from dataclasses import dataclass, field
from itertools import repeat
from operator import attrgetter, eq
from typing import TYPE_CHECKING, Any, NamedTuple

import mesa
import networkx as nx
import numpy as np
from mesa.discrete_space import (
    Cell,
    CellAgent,
    Network,
    OrthogonalMooreGrid,
    OrthogonalVonNeumannGrid,
)
from pydantic import BaseModel

from simulation.agents.institutions import Government, Insurer
from simulation.agents.population import (
    PopulationError,
    build_population,
    insure_at_start,
    population_table,
)
from simulation.agents.state import (
    SFHA_ZONES,
    STATE_FIELDS,
    TENURES,
    ZoneColumn,
    by_zone,
    check_state_values,
    per_zone,
)
from simulation.array_engine import ArrayEngine
from simulation.audit.writer import changed_state, dynamic_state
from simulation.config import (
    ConfigError,
    ConfigWarning,
    SocialConfig,
    is_curve_file,
    warn_ignored_keys,
)
from simulation.cycle import (
    ADOPTION_PHRASES,
    DECISION_STATS,
    INSURANCE_SKILLS,
    POLICY_FLAGS,
    retrieval_parameters,
)
from simulation.decisions.base import DrawnUniform
from simulation.decisions.llm import (
    CacheMiss,
    EndpointUnreachable,
    LLMConfigError,
    LLMPolicy,
    LLMRequest,
)
from simulation.decisions.pmt import PMTPolicy
from simulation.decisions.scripted import ScriptedPolicy, ScriptError, load_script
from simulation.hazard import (
    FEET_PER_METRE,
    PLAUSIBLE_DEPTH_FT,
    HazardError,
    RasterSource,
    Sites,
    compute_damage,
    load_curves,
)
from simulation.memory import CognitiveMemory
from simulation.metric_columns import COUNT_METRICS, METRIC_COLUMNS
from simulation.skills import RegistryError, SkillRegistry, Validation
from simulation.skills.registry import VALID
from simulation.skills.templates import render

if TYPE_CHECKING:
    from collections.abc import Callable, Iterable, Iterator, Mapping, Sequence
    from pathlib import Path

    import pandas as pd

    from simulation.agents.population import Population, PopulationConfig
    from simulation.agents.state import HouseholdState
    from simulation.audit.writer import AuditWriter
    from simulation.config import EventTemplate, RunConfig
    from simulation.decisions import Option, Proposal
    from simulation.decisions.llm import LLMOutcome
    from simulation.memory import ScoredMemory, WriteResult

__all__ = [
    "METRIC_COLUMNS",
    "Decision",
    "DecisionSummary",
    "FloodAdaptationModel",
    "HouseholdAgent",
]

#: The metrics that count households, claims or decisions (integers in model_years).
_COUNT_DTYPES = dict.fromkeys(COUNT_METRICS, "int64")

# Household fields read for many households at once (map() with these runs in C).
_X, _Y, _GROUND_ELEVATION = attrgetter("x"), attrgetter("y"), attrgetter("ground_elevation")
_NUMBER = attrgetter("number")
_STRUCTURE_VALUE, _CONTENTS_VALUE = attrgetter("structure_value"), attrgetter("contents_value")
_FLOOD_ZONE, _ELEVATED = attrgetter("flood_zone"), attrgetter("elevated")
_FIRST_FLOOR_HEIGHT = attrgetter("first_floor_height")
_TENURE = attrgetter("tenure")
#: A memory's text, importance and tags, as the registry renders it.
_Remembered = tuple[str, float, tuple[str, ...]]
# What executing each skill does to the household: the yearly cycle's bookkeeping (premiums,
# subsidies, adoptions, moves, metrics) follows from it, so a registry may not say otherwise.
_EFFECTS: dict[str, dict[str, object]] = {
    "buy_insurance": {"has_insurance": True},
    "buy_contents_insurance": {"has_contents_insurance": True},
    "elevate_house": {"elevated": True},
    "relocate": {"relocated": True},
    "do_nothing": {},
}
# Skills only an owner can take: renters do not own the building they would raise.
_OWNERS_ONLY = ("elevate_house",)


@dataclass(slots=True)
class _Gathered:
    """What a decision is made from: retrieved memories, priced options, context."""

    year: int
    retrieved: list[ScoredMemory]
    costs: dict[str, float]
    options: list[Option] | None  # None: the policy chose among the registry's valid mask
    context: dict[str, Any]
    before: dict[str, Any] | None
    explain: bool = True


@dataclass(slots=True)
class Decision:
    """One household's decision in one year, as the audit trail records it.

    :meth:`FloodAdaptationModel.decide_for` returns it; the household keeps only a
    :class:`DecisionSummary`.
    """

    year: int
    proposal: Proposal
    skill_id: str
    validation: Validation
    retrieved: list[ScoredMemory]
    state_changes: dict[str, tuple[Any, Any]] = field(default_factory=dict)
    memory_update: WriteResult | None = None
    cost: float = 0.0
    retries: int = 0
    via_llm: bool = False
    #: The skill a language model last proposed when its decision fell back to the default
    #: skill (``proposal`` is then the fallback's); ``None`` otherwise.
    rejected_skill_id: str | None = None

    @property
    def proposed_skill_id(self) -> str:
        """The skill the policy proposed: the model's rejected skill after a fallback."""
        return self.rejected_skill_id or self.proposal.skill_id


class DecisionSummary(NamedTuple):
    """What a household keeps of its latest decision; the whole :class:`Decision` is audited.

    A household holds this for a year, until it decides again. Holding the whole decision
    instead (retrieved memories, proposal, probabilities: a few dozen objects) cost about a
    tenth of a 50,000-household year: freeing it a year later, long after it had left the CPU
    caches. :meth:`FloodAdaptationModel.decide_for` returns the whole decision.

    Attributes:
        year: The year decided in.
        skill_id: The skill executed.
        proposed_skill_id: The skill the policy proposed (differs when it was invalid; after a
            language model's fallback to the default skill, the skill the model last named).
        valid: Whether the proposal passed validation.
        cost: Out-of-pocket cost of the executed skill.
        threat: The threat appraisal (TP) behind it; ``None`` when the policy gave none.
        via_llm: Whether a language model decided.
        retries: Re-asks after invalid language-model replies.
    """

    year: int
    skill_id: str
    proposed_skill_id: str
    valid: bool
    cost: float
    threat: float | None
    via_llm: bool
    retries: int


# Households decided together at a time (see _decide_together): few enough that their objects
# stay in the CPU caches from retrieval to execution, enough to spread numpy's per-call cost.
_DECISION_CHUNK = 1024

# A summary is built for every household every year: tuple.__new__ skips the named tuple's
# Python-level __new__.
_new_tuple = tuple.__new__


# The decide methods known to draw exactly one uniform per decision (see _DrawnAhead).
_ONE_UNIFORM_POLICIES = (PMTPolicy.decide, ScriptedPolicy.decide)


class _DrawnAhead:
    """A year's uniforms of the decision stream, drawn in one call; policies call ``random()``.

    ``Generator.random(n)`` gives the same numbers as ``n`` calls of ``Generator.random()``, so
    results do not change, but a scalar call costs about 0.6 µs and every household makes one.
    The PMT policy draws exactly one uniform per decision, which fixes how many to draw.
    """

    __slots__ = ("random",)

    def __init__(self, rng: np.random.Generator, count: int):
        self.random = iter(rng.random(count).tolist()).__next__


class HouseholdAgent(CellAgent):
    """A household: its state, its memory and its place among neighbours.

    Args:
        model: The model.
        state: The household's state record.
        memory: Its cognitive memory.
    """

    def __init__(self, model: FloodAdaptationModel, state: HouseholdState, memory: CognitiveMemory):
        super().__init__(model)
        self.state = state
        self.memory = memory
        self.neighbors: tuple[HouseholdAgent, ...] = ()
        self.adopted_last_year: str | None = None  # what neighbours can observe this year
        self.adopted_this_year: str | None = None
        self.last_decision: DecisionSummary | None = None
        self.uses_llm = False
        self.relocated_in: int | None = None  # the year it moved away
        # Its place in model.households, which the model sets: the variate of the year's
        # per-household draws that is this household's.
        self.number = 0

    @property
    def active(self) -> bool:
        """Whether the household still takes part (has not relocated)."""
        return not self.state.relocated

    def decide(self, year: int) -> Decision:
        """Step 7 for this household: retrieve, propose, validate, execute, remember.

        The model calls it in each year's step. Called outside that, it is a decision of its
        own: it changes the state, writes a memory and draws from the decision stream, so the
        years after differ from the run's. To look at what a household would recall, call
        ``household.memory.retrieve_scored(record=False)``, which changes nothing.
        """
        return self.model.decide_for(self, year)

    def remove(self) -> None:
        """Refused while its model runs; :meth:`FloodAdaptationModel.release` removes them all.

        Mesa's ``remove`` would take the household out of ``model.agents`` only: it would stay
        in the yearly cycle, its neighbours' links and the engine's columns, and go on being
        simulated and audited. A household leaves by relocating (the ``relocate`` skill).

        Raises:
            NotImplementedError: Unless the model is being released.
        """
        if self.model.households:  # release() empties the list before it removes agents
            msg = (
                f"household {self.state.agent_id}: households leave the simulation by "
                "relocating; removing one would leave it in the yearly cycle (model.release() "
                "removes every agent of a model that is done with)"
            )
            raise NotImplementedError(msg)
        super().remove()


def _synced(name: str) -> property:
    """A household attribute that :meth:`FloodAdaptationModel.sync` updates before it is read."""
    stored = "_" + name

    def read(self: _EngineHousehold) -> Any:
        if self.model._engine is not None:
            self.model.sync()
        return self.__dict__[stored]

    def write(self: _EngineHousehold, value: Any) -> None:
        self.__dict__[stored] = value

    return property(read, write, doc=f"``{name}``, as the engine last computed it.")


class _EngineHousehold(HouseholdAgent):
    """A household of a model on ``engine: arrays``, whose years the :class:`ArrayEngine` runs.

    Whatever the engine computes of it (state, memory, adoptions, move and last decision) is
    brought up to date (:meth:`FloodAdaptationModel.sync`) whenever it is read, so code reading
    households sees what the engine computed.
    """

    state = _synced("state")
    memory = _synced("memory")
    adopted_last_year = _synced("adopted_last_year")
    adopted_this_year = _synced("adopted_this_year")
    last_decision = _synced("last_decision")
    relocated_in = _synced("relocated_in")


class FloodAdaptationModel(mesa.Model):
    """Flood adaptation of households with cognitive memory.

    Args:
        config: A validated run config (see :func:`simulation.config.load_config`).
        base_dir: Folder that relative paths in the config refer to.
        origin: The config file's name, for error messages.
        origin_of: Names what gave the file path at a key (``("decision", "script")``) in the
            error about its file, such as the ``--set`` flag that did
            (:func:`simulation.config.setting_origin`); ``origin`` when not given.

    Raises:
        ConfigError: For a skill registry, damage curves, hazard files or a household table
            that cannot be used (the message names the config key and the broken file), a
            retrieval ``top_k`` above the registry's ``retrieve_memory`` limit, or an
            ``audit.sample`` id that is not a household's.
    """

    _released = False  # set by release(), after which the model refuses to step

    def __init__(
        self,
        config: RunConfig,
        base_dir: Path,
        origin: str = "config",
        origin_of: Callable[[tuple[str, ...]], str] | None = None,
    ):
        _forget_agent_counters_with_their_models()
        super().__init__(seed=config.seed)
        self.config = config
        where = origin_of or (lambda _: origin)
        # Spawned children do not depend on how many are spawned: adding a stream later
        # leaves the existing ones (and so earlier results) unchanged.
        streams = np.random.SeedSequence(config.seed).spawn(6)
        (
            self.population_rng,
            self.hazard_rng,
            self.claims_rng,
            self.decision_rng,
            self.assignment_rng,
            policies_rng,  # who holds a policy at the start, once, when the model is built
        ) = (np.random.default_rng(s) for s in streams)
        self.registry = _load_registry(base_dir / config.registry, where(("registry",)))
        # The policies each skill renews (sets): a household switching from one policy to the
        # other drops the first, as one that stops insuring drops both.
        self._renews = _renewed_policies(self.registry)
        try:
            self.curves = load_curves(_resolve(base_dir, config.damage.curves))
        except HazardError as err:
            raise ConfigError(f"{where(('damage', 'curves'))}: damage.curves: {err}") from None
        try:
            self.hazard = config.hazard.build(base_dir)
        except HazardError as err:
            raise ConfigError(f"{where(('hazard', 'rasters'))}: hazard: {err}") from None
        warn_ignored_keys(config, origin, origin_of, self.curves.contents_basis)
        self.llm: LLMPolicy | None = None
        if config.decision.policy == "llm":
            self._build_llm(base_dir, where)
        self._pending: dict[HouseholdAgent, _Gathered] = {}
        self._draws: _DrawnAhead | None = None  # the decision stream's uniforms of this year
        self._llm_outcomes: dict[HouseholdAgent, LLMOutcome] = {}
        self.government = Government(self, config.government)
        self.insurer = Insurer(self, config.insurer, config.insurance.rate_per_1000)
        self._zone_multiplier = by_zone(config.insurance.zone_multiplier, 1.0)

        population = self._build_population(base_dir, where, policies_rng)
        # Texts the households remember, shared between their memories (CognitiveMemory's
        # `texts`): emptied every year, since the default texts name their year, so a year's
        # pool holds its repeats and the pool stays small. Not sys.intern: early Python 3.12
        # releases never free interned strings (python/cpython#113993).
        self._texts: dict[str, str] = {}
        # (skill, year, cost) -> the decision memory it renders, for templates that name no
        # household field (see _decision_memory); emptied with the texts every year.
        self._decision_memories: dict[tuple[str, int, float], _Remembered] = {}
        self._populate(population)
        self._check_against_households(where)
        # What gave the decision table, named in its errors and warnings: a --set flag or a file.
        self._script_origin = where(("decision", "script"))
        self.policy = _decision_policy(
            config, base_dir, self.registry, population, self._script_origin
        )
        if self.llm is not None:
            draws = self.assignment_rng.random(len(self.households))
            for household, draw in zip(self.households, draws, strict=True):
                household.uses_llm = bool(draw < config.decision.llm_share)

        self.audit: AuditWriter | None = None
        self._tps: list[float] = []  # threat appraisals of this year's decisions (mean_tp)
        self._context = self._decision_context(0)
        self.year_stats: dict[str, float] = {}
        self.premiums_collected = 0.0  # premiums paid for the coming year's coverage
        self.datacollector = mesa.DataCollector(
            model_reporters={name: _stat(name) for name in METRIC_COLUMNS}
        )

    # ------------------------------------------------------------------------ set-up
    def _build_llm(self, base_dir: Path, where: Callable[[tuple[str, ...]], str]) -> None:
        """The language-model policy, its errors and warnings named by what set their keys."""
        try:
            with warnings.catch_warnings(record=True) as said:
                warnings.simplefilter("always", ConfigWarning)
                self.llm = LLMPolicy(
                    self.config.decision.llm, base_dir, self.config.seed, self.registry
                )
        except LLMConfigError as err:
            key = str(err).partition(":")[0]  # the message starts with its key
            raise ConfigError(f"{where(tuple(key.split('.')))}: {err}") from None
        for warning in said:  # named by what set the prompt, as the errors are
            message = str(warning.message)
            if issubclass(warning.category, ConfigWarning):
                key = message.partition(":")[0]
                message = f"{where(tuple(key.split('.')))}: {message}"
            warnings.warn(message, warning.category, stacklevel=3)
        # What gave the cache and the endpoint (the config file or a --set flag), named by
        # the errors that stop the run later.
        self._cache_origin, self._endpoint_origin = (
            where(("decision", "llm", "cache")),
            where(("decision", "llm", "base_url")),
        )

    def _check_against_households(self, where: Callable[[tuple[str, ...]], str]) -> None:
        """Refuse or warn of settings that the registry and households built rule out.

        Args:
            where: Names what gave the value at a key (see ``__init__``'s ``origin_of``).

        Raises:
            ConfigError: When the retrieval ``top_k`` exceeds what the registry's
                ``retrieve_memory`` tool allows, or ``audit.sample`` lists an id that is not a
                household's.
        """
        config = self.config
        top_k = config.memory.retrieval.top_k
        check = self.registry.check_tool("retrieve_memory", "owner", {"top_k": top_k})
        if not check.valid:
            msg = (
                f"{where(('memory', 'retrieval', 'top_k'))}: memory.retrieval.top_k: "
                f"{'; '.join(check.errors)} (retrieve_memory in {config.registry})"
            )
            raise ConfigError(msg)
        sample = config.audit.sample
        if isinstance(sample, list):  # a misspelt id would silently leave its household unaudited
            known = {household.state.agent_id for household in self.households}
            unknown = [agent_id for agent_id in sample if agent_id not in known]
            if unknown:
                msg = (
                    f"{where(('audit', 'sample'))}: audit.sample: {unknown[0]!r} is not a "
                    f"household of this run ({len(unknown)} of {len(sample)} listed ids are "
                    f"unknown; ids look like {self.households[0].state.agent_id!r})"
                )
                raise ConfigError(msg)
        self._check_hazard(where)
        self._check_network(where)

    def _check_network(self, where: Callable[[tuple[str, ...]], str]) -> None:
        """Warn of a small world's ``k`` that the population is too small for.

        The network is capped below the population size (a tiny test town with the default
        ``k`` needs that), so a ``k`` set beyond it would otherwise give an almost complete
        graph without a word.
        """
        social = self.config.social
        n = len(self.households)
        if social.neighborhood != "small_world" or social.k == _DEFAULT_K:
            return
        k = _small_world_k(social.k, n)
        if social.k > k:
            households = "household" if n == 1 else "households"
            starts = (
                f"each starts with {k}, almost every other household"
                if k
                else "a small world needs 3 households or more, so none has a neighbour"
            )
            warnings.warn(
                f"{where(('social', 'k'))}: social.k: {social.k} neighbours is more than {n:,} "
                f"{households} can each have; {starts}",
                ConfigWarning,
                stacklevel=2,
            )

    def _check_hazard(self, where: Callable[[tuple[str, ...]], str]) -> None:
        """Warn of hazard inputs the run will not use, or that reach no home.

        Args:
            where: Names what gave the value at a key (see ``__init__``'s ``origin_of``).
        """
        config = self.config
        for key in ("events", "rasters"):
            _warn_after_last_year(
                getattr(config.hazard, key),
                config.years,
                where(("hazard", key)),
                f"hazard.{key}",
                none_within="the run has no floods",
            )
        hazard = config.hazard
        if hazard.source == "scripted" and hazard.kind == "depth" and hazard.events:
            year, depth = max(hazard.events.items(), key=lambda event: event[1])
            if depth > PLAUSIBLE_DEPTH_FT:
                warnings.warn(
                    f"{where(('hazard', 'events'))}: hazard.events: year {year} floods every "
                    f"home {depth:g} ft deep (kind: depth, in ft), more than "
                    f"{PLAUSIBLE_DEPTH_FT:.0f} ft: a depth in another unit?",
                    ConfigWarning,
                    stacklevel=2,
                )
        if hazard.source == "scripted" and hazard.kind == "level" and hazard.events:
            year, level = max(hazard.events.items(), key=lambda event: event[1])
            lowest = min((h.state.ground_elevation for h in self.households), default=level)
            if level - lowest > PLAUSIBLE_DEPTH_FT:
                warnings.warn(
                    f"{where(('hazard', 'events'))}: hazard.events: year {year}'s water level "
                    f"{level:g} ft (kind: level, ft above the datum) stands {level - lowest:,.0f} "
                    f"ft above the lowest home's ground ({lowest:.3g} ft), more than "
                    f"{PLAUSIBLE_DEPTH_FT:.0f} ft: a level in another unit or datum?",
                    ConfigWarning,
                    stacklevel=2,
                )
        if isinstance(self.hazard, RasterSource):
            _warn_grids_at_homes(
                self.hazard,
                config.years,
                [h.state for h in self.households],
                where(("hazard", "rasters")),
            )

    @property
    def agents_by_type(self) -> dict[type[mesa.Agent], mesa.agent.AgentSet]:
        """Mesa's agent sets by type, the households under :class:`HouseholdAgent` on any engine.

        On ``engine: arrays`` households are instances of a subclass that brings what the
        engine computed up to date when read; Mesa files them under that private class.
        """
        by_type = super().agents_by_type
        if _EngineHousehold not in by_type:
            return by_type
        return {HouseholdAgent if t is _EngineHousehold else t: s for t, s in by_type.items()}

    @property
    def agent_types(self) -> list[type]:
        """The types of :attr:`agents_by_type`."""
        return list(self.agents_by_type)

    def release(self) -> None:
        """Let the model be garbage-collected once its run is over (it is unusable after).

        A model dropped without it is freed as well, but by the cyclic collector, which has to
        trace it first (:class:`_CountersByModel`): a 52,141-household model after 13 years
        took 4.4 s, its grid alone 0.45 s. This breaks the reference cycles between households
        (each is its neighbours' neighbour) and between the cells of the space (each is its
        neighbours' neighbour too, and caches its neighbourhood), and empties a small-world
        network's graph, so that reference counting frees households, memories and cells as
        soon as the model is dropped. It also removes the agents and the model's entry in
        Mesa's table of agent-id counters, and empties Mesa's class-level caches of cell
        neighbourhoods, which hold every cell of every grid built in the process.
        """
        self._engine = None
        self._released = True
        households, self.households = self.households, []
        self.remove_all_agents()
        counters = getattr(mesa.Agent, "_ids", None)
        if isinstance(counters, MutableMapping):
            counters.pop(self, None)
        _clear_cell_caches()
        for household in households:
            household.neighbors = ()
        space, self.space = self.space, None
        if space is not None:
            for cell in space.all_cells:
                cell.connections.clear()
                cell.__dict__.clear()  # cached neighbourhoods, which hold neighbouring cells
            if isinstance(space, Network):
                space.G.clear()  # networkx caches views of a graph on it: the graph is a cycle
        self._pending.clear()
        self._llm_outcomes.clear()
        self._texts.clear()
        self._decision_memories.clear()

    def _build_population(
        self,
        base_dir: Path,
        where: Callable[[tuple[str, ...]], str],
        policies_rng: np.random.Generator,
    ) -> Population:
        """The run's households as they start, holding the policies they start with."""
        households = self.config.households
        try:
            population = build_population(households, self.population_rng, base_dir)
        except PopulationError as err:
            if households.table is None:  # generated: the message names the settings
                origin = _origin_of_settings(households, err.settings, where)
                raise ConfigError(f"{origin}: households: {err}") from None
            raise ConfigError(
                f"{where(('households', 'table'))}: households.table: {err}"
            ) from None
        insure_at_start(population, households.initial_insured_share, policies_rng)
        return population

    def attach_audit(self, writer: AuditWriter) -> None:
        """Stream this run's audit trail to ``writer`` (logs the households' initial memories)."""
        self.audit = writer
        for household in self.households:
            writer.initial_memory(household.state.agent_id, household.memory)

    def _populate(self, population: Population) -> None:
        """Create the households, with their memories, and place them among neighbours."""
        # The engine running the years of `engine: arrays` while its columns are newer than the
        # households' objects (None: the objects are up to date; see sync).
        self._engine: ArrayEngine | None = None
        household = _EngineHousehold if self.config.engine == "arrays" else HouseholdAgent
        self.households: list[HouseholdAgent] = [
            household(self, state, self._new_memory(state.agent_id, population))
            for state in population.states
        ]
        for number, agent in enumerate(self.households):
            agent.number = number
        # Kept for household_table (a small_world network places households without them).
        self._grid_cells = np.array(population.cells, dtype=np.int32).reshape(-1, 2)
        self._place(population.grid_shape, population.cells)

    def _new_memory(self, agent_id: str, population: Population) -> CognitiveMemory:
        """A household's memory as configured, holding its pre-seeded memories."""
        settings = self.config.memory
        memory = CognitiveMemory(
            agent_id,
            settings.working_capacity,
            settings.episodic_capacity,
            settings.consolidation_threshold,
            settings.decay_rate,
            retrieval=settings.retrieval,
            retention=settings.retention,
            reflection=settings.reflection,
            texts=self._texts,
        )
        for seed in population.seeds.get(agent_id, ()):
            memory.add_seed(seed.content, seed.importance, seed.year, seed.tags)
        return memory

    def _place(self, grid_shape: tuple[int, int], cells: list[tuple[int, int]]) -> None:
        """Put households in a Mesa discrete space and cache each one's neighbours."""
        social = self.config.social
        if social.neighborhood == "small_world":
            n = len(self.households)
            k = _small_world_k(social.k, n)
            graph = nx.watts_strogatz_graph(n, k, social.p, seed=self.random)
            self.space = Network(graph, random=self.random)
            for node, agent in enumerate(self.households):
                agent.cell = self.space[node]
        else:
            height, width = grid_shape
            grid_cls = (
                OrthogonalMooreGrid if social.neighborhood == "moore" else OrthogonalVonNeumannGrid
            )
            self.space = grid_cls((width, height), torus=False, random=self.random)
            for agent, (col, row) in zip(self.households, cells, strict=True):
                agent.cell = self.space[(col, row)]
        for agent in self.households:
            cell = agent.cell
            # The cells a cell connects to are its neighbourhood (Mesa's radius-1
            # `neighborhood`, in the same order), read without building and caching a
            # CellCollection for every cell: a quarter of a second per 50,000-household build.
            neighbors = [
                a
                for near in cell.connections.values()
                for a in near.agents
                if a is not agent and isinstance(a, HouseholdAgent)
            ]
            # Several households can share a grid cell (tables with coarse coordinates).
            neighbors += [a for a in cell.agents if a is not agent and a not in neighbors]
            agent.neighbors = tuple(neighbors)
        _clear_cell_caches()  # the neighbour tuples are all the model needs from now on

    def household_table(self) -> pd.DataFrame:
        """Each household's fixed attributes and grid cell, as a household table.

        What :func:`~simulation.agents.population.population_table` makes of the households
        (a run writes it as ``households.csv``): ``households.table`` reads it back to them.
        """
        return population_table([h.state for h in self.households], self._grid_cells.tolist())

    # -------------------------------------------------------------------------- step
    def sync(self) -> None:
        """Bring the households' state and memory objects up to date with ``engine: arrays``.

        The engine keeps every household in columns while it runs years; reading a household's
        ``state``, ``memory``, ``last_decision``, ``adopted_last_year``, ``adopted_this_year``
        or ``relocated_in`` calls this, so code reading households never needs to. The next
        year reloads the columns from the objects, so changes made to them count.
        """
        engine, self._engine = self._engine, None
        if engine is not None:
            engine.store()

    def prepare(self) -> None:
        """Build what the next year needs ahead of it: the array engine's columns and pool.

        On ``engine: arrays`` the first :meth:`step` after building the model, or after a
        household was read (:meth:`sync`), converts every household into columns: about 0.25 s
        at 10,000 households, the cost of three to five years. The runner calls this before its
        first year, so that the years it times and reports are years only. Does nothing where
        the next step would not run on arrays.
        """
        if self._runs_on_arrays():
            self._array_engine()

    def _array_engine(self) -> ArrayEngine:
        """The array engine, built from the households unless it is built already."""
        if self._engine is None:
            # Set before the year runs: should it fail, reading a household still stores what
            # the engine holds (the objects' memories are emptied while it holds them).
            self._engine = ArrayEngine(self)
            # The pool keeps its own copies of the texts; the objects' shared ones can go.
            self._texts.clear()
            self._decision_memories.clear()
        return self._engine

    def step(self) -> None:
        """Advance one year (see the module docstring for the order).

        After the config's last year ``running`` turns false, so Mesa's ``run_model()`` runs
        exactly ``years`` years. A model stepped further goes on (the stochastic hazard keeps
        drawing), but the scripted floods, rasters and decision tables of a config end there.

        Raises:
            RuntimeError: For a model that :meth:`release` let go of.
        """
        if self._released:
            # Its households are gone: a year would be one of nobody, not an error later.
            msg = "this model was released (model.release()): build a new one to run again"
            raise RuntimeError(msg)
        if self._runs_on_arrays():
            self._step_arrays()
            return
        self._check_states()
        year = self.steps
        audit = self.audit
        if audit is not None:
            audit.begin_year(year)
        self._texts.clear()
        self._decision_memories.clear()
        active, departed, adopters = self._roll_call()
        stats = dict.fromkeys(METRIC_COLUMNS, 0.0)
        stats["year"] = year
        self.year_stats = stats

        depths, damage_s, damage_c = self._hazard_and_damage(year, active)
        claims_paid = self._claims_and_event_memories(year, active, depths, damage_s, damage_c)
        self._institutions(year, active, float(np.sum(damage_s + damage_c)), claims_paid)
        self._observe_neighbours(year, active, adopters)
        for household in departed:  # their neighbours have seen them go; now they are gone
            household.adopted_last_year = None

        self._tps = []
        self.premiums_collected = 0.0
        self._context = self._decision_context(year)
        # The same permutation AgentSet.shuffle_do would draw from self.random, without
        # building a weak-keyed AgentSet of the active households every year.
        order = list(active)
        self.random.shuffle(order)
        if self._decides_together():
            self._decide_together(order, year)
        else:
            if type(self.policy).decide in _ONE_UNIFORM_POLICIES:
                # One uniform per policy decision: every household but those a language model
                # decides. A policy of one's own may draw any number, from the generator.
                draws = len(order) if self.llm is None else sum(not h.uses_llm for h in order)
                self._draws = _DrawnAhead(self.decision_rng, draws)
            try:
                if self.llm is None:
                    decide = self.decide_for
                    for household in order:
                        decide(household, year)
                else:
                    self._decide_with_llm(order)
            finally:
                self._draws = None

        self._end_year(year, active, stats)
        if audit is not None:
            audit.end_year()
        self.running = year < self.config.years

    def _check_states(self) -> None:
        """Refuse, before the object path's year begins, a state value set to another type.

        Raises:
            TypeError: For a state field holding a value of another type, naming the household.
            ValueError: For a number field holding NaN or an infinity.
        """
        self.sync()
        try:
            check_state_values([h.state for h in self.households])
        except (TypeError, ValueError):
            self.steps -= 1  # not begun, as on the array engine (_step_arrays)
            raise

    def _step_arrays(self) -> None:
        """:meth:`step` on the array engine (``engine: arrays``): the same year, all at once."""
        try:
            engine = self._array_engine()
        except (TypeError, ValueError):
            # Refused before the engine took anything from the households (a state value of
            # another type set between years, memories it cannot pool): Mesa counted the year
            # before step() ran, but it has not begun, so it runs once the value is mended.
            self.steps -= 1
            raise
        year = self.steps
        audit = self.audit
        if audit is not None:
            audit.begin_year(year)
        stats = dict.fromkeys(METRIC_COLUMNS, 0.0)
        stats["year"] = year
        self.year_stats = stats
        engine.step(year)
        self.datacollector.collect(self)
        if audit is not None:
            audit.end_year()
        self.running = year < self.config.years

    def warn_unused_inputs(self) -> None:
        """Warn about what the inputs asked of the years run that the run could not do.

        That is a decision table's rows for households that had relocated by their year
        (:class:`~simulation.decisions.scripted.IgnoredScriptRowsWarning`): whether a household
        relocates is known only as the run goes. The runner calls this once a run has ended and
        its files are complete, so a warning (even one turned into an error) changes none of
        them; code that steps the model itself calls it when it is done.
        """
        if isinstance(self.policy, ScriptedPolicy):
            moved = {
                h.state.agent_id: h.relocated_in
                for h in self.households
                if h.relocated_in is not None
            }
            self.policy.warn_ignored_rows(
                moved, self.steps, f"{self._script_origin}: decision.script"
            )

    def _roll_call(
        self,
    ) -> tuple[list[HouseholdAgent], list[HouseholdAgent], set[HouseholdAgent]]:
        """The households still here, those who moved away last year, and last year's adopters.

        Households that moved away last year are seen leaving this year only.
        """
        active: list[HouseholdAgent] = []
        departed: list[HouseholdAgent] = []
        adopters: set[HouseholdAgent] = set()
        for household in self.households:
            if household.adopted_last_year is not None:
                adopters.add(household)
                if not household.active:
                    departed.append(household)
                    continue
            if household.active:
                active.append(household)
        return active, departed, adopters

    def _hazard_and_damage(
        self, year: int, active: list[HouseholdAgent]
    ) -> tuple[np.ndarray, np.ndarray, np.ndarray]:
        """Steps 1-2: flood depth at each active home and the damage it does."""
        states = [h.state for h in active]
        n = len(states)
        sites = Sites(
            x=np.fromiter(map(_X, states), float, n),
            y=np.fromiter(map(_Y, states), float, n),
            ground_elevation=np.fromiter(map(_GROUND_ELEVATION, states), float, n),
            index=np.fromiter(map(_NUMBER, active), np.int64, n),
            population=len(self.households),
        )
        depths = self.hazard.depths(year, self.hazard_rng, sites)
        damage_s, damage_c = self.damage(
            depths,
            np.fromiter(map(_FIRST_FLOOR_HEIGHT, states), float, n),
            np.fromiter(map(_ELEVATED, states), bool, n),
            np.fromiter(map(_STRUCTURE_VALUE, states), float, n),
            np.fromiter(map(_CONTENTS_VALUE, states), float, n),
        )
        return depths, damage_s, damage_c

    def damage(
        self,
        depths: np.ndarray,
        first_floor_height: np.ndarray,
        elevated: np.ndarray,
        structure: np.ndarray,
        contents: np.ndarray,
    ) -> tuple[np.ndarray, np.ndarray]:
        """Step 2 for many homes: structure and contents damage of ``depths`` (ft above ground).

        Also counts this year's flooded households. Both engines price floods through this.
        """
        raised = self.config.adaptation.elevation_height_ft
        # An elevated home's floor is raised; + 0.0 for the others, as one by one.
        floor = first_floor_height + np.where(elevated, raised, 0.0)
        above_floor = np.where(depths > 0.0, depths - floor, -np.inf)
        damage = self.config.damage
        basis = damage.owner_contents_basis
        if (basis if basis != "auto" else self.curves.contents_basis) == "structure":
            # A renter's building value is not known: the one its contents imply stands in.
            implied = contents / damage.renter_contents_ratio
            contents_basis = np.where(structure > 0.0, structure, implied)
        else:
            contents_basis = contents
        damage_s, damage_c = compute_damage(above_floor, structure, contents_basis, self.curves)
        # The curves' contents share of structure value cannot exceed what the contents are worth.
        damage_c = np.minimum(damage_c, contents)
        self.year_stats["flooded_households"] = int(np.count_nonzero(depths > 0.0))
        return damage_s, damage_c

    def _claims_and_event_memories(
        self,
        year: int,
        active: list[HouseholdAgent],
        depths: np.ndarray,
        damage_s: np.ndarray,
        damage_c: np.ndarray,
    ) -> float:
        """Steps 3-4: claims and the flood and claim memories they leave. Returns the payout."""
        ins, events, stats = self.config.insurance, self.config.events, self.year_stats
        # One uniform per household of the population every year, each household's its own:
        # the stream, and a household's luck with a claim, do not hang on who has moved away,
        # so runs that differ in their decisions still share their random numbers.
        approval_draws = self.claims_rng.random(len(self.households))
        total_damage = damage_s + damage_c
        paid_total = 0.0
        for i in np.flatnonzero(depths > 0.0):
            household = active[i]
            state = household.state
            damage = float(total_damage[i])
            depth = float(depths[i])
            if damage > 0.0:
                state.cumulative_damage += damage
                state.last_damage = damage
                stats["damaged_households"] += 1
                major = damage >= events.major_damage_threshold
                event = events.flood_major if major else events.flood_minor
            else:
                event = events.flood_no_damage
            self._remember(household, event, year, "flood", damage, damage=damage, depth=depth)
            if not state.insured or damage <= 0.0:
                continue
            structure = float(damage_s[i]) if state.has_insurance else 0.0
            loss = structure + float(damage_c[i])  # what the household's policies insure
            if loss <= ins.deductible:
                continue
            stats["claims_filed"] += 1
            if approval_draws[household.number] < ins.claim_approval_probability:
                # The deductible comes off the loss and the limits cap what is left: a loss
                # above a limit is paid up to the limit, as under the NFIP.
                covered = (
                    min(structure, ins.structure_limit) if state.has_insurance else 0.0
                ) + min(float(damage_c[i]), ins.contents_limit)
                payout = min(loss - ins.deductible, covered)
                paid_total += payout
                state.claims_paid += 1
                stats["claims_paid"] += 1
                self._remember(
                    household,
                    events.claim_paid,
                    year,
                    "claim",
                    payout,
                    payout=payout,
                    damage=damage,
                )
            else:
                state.claims_denied += 1
                self._remember(
                    household, events.claim_denied, year, "claim", 0.0, payout=0.0, damage=damage
                )
        stats["total_damage"] = float(np.sum(total_damage))
        stats["claims_paid_amount"] = paid_total
        return paid_total

    def _institutions(
        self, year: int, active: list[HouseholdAgent], total_damage: float, claims_paid: float
    ) -> None:
        """Step 5: subsidy and premium reviews; changes become policy memories."""
        for event, content in self.policy_changes(year, len(active), total_damage, claims_paid):
            for household in active:
                result = household.memory.write(
                    content, event.importance, year, event.tags, source="policy"
                )
                self._log(household, result)

    def policy_changes(
        self, year: int, active: int, total_damage: float, claims_paid: float
    ) -> list[tuple[EventTemplate, str]]:
        """Step 5's reviews: the subsidy's, then the premium rate's; what every household notes.

        Args:
            year: The year.
            active: How many households take part this year.
            total_damage: This year's flood damage, all households.
            claims_paid: This year's claim payouts.

        Returns:
            The event and its text for each change, in that order.
        """
        events = self.config.events
        changes = []
        subsidy = self.government.review(total_damage / max(active, 1))
        if subsidy is not None:
            changes.append((events.subsidy_change, subsidy))
        rate = self.insurer.review(self.premiums_collected, claims_paid)
        if rate is not None:
            changes.append((events.premium_change, rate))
        return [
            (event, render(event.template, {"year": year, "old": old, "new": new}))
            for event, (old, new) in changes
        ]

    def _observe_neighbours(
        self, year: int, active: list[HouseholdAgent], adopters: set[HouseholdAgent]
    ) -> None:
        """Step 6: remember last year's adoptions among neighbours (a snapshot).

        ``adopters`` are the households whose ``adopted_last_year`` is set. Most households
        have none among their neighbours in most years and remember nothing; the set tells them
        apart without reading every neighbour of every household.
        """
        if not self.config.social.observe or not adopters:
            return
        event = self.config.events.neighbor_adaptation
        for household in active:
            neighbors = household.neighbors
            if adopters.isdisjoint(neighbors):
                continue
            counts: dict[str, int] = {}
            total = 0  # neighbours still here, or who left last year (earlier leavers are gone)
            for neighbor in neighbors:
                adopted = neighbor.adopted_last_year
                if adopted is not None:
                    counts[adopted] = counts.get(adopted, 0) + 1
                    total += 1
                elif not neighbor.state.relocated:
                    total += 1
            for adopted, count in counts.items():
                content = render(
                    event.template,
                    {
                        "year": year,
                        "count": count,
                        "total": total,
                        "action": ADOPTION_PHRASES[adopted],
                    },
                )
                result = household.memory.write(
                    content, event.importance, year, (*event.tags, adopted), source="neighbor"
                )
                self._log(household, result)

    # --------------------------------------------------------------------- decisions
    def costs_for(self, state: HouseholdState) -> dict[str, float]:
        """Each skill's out-of-pocket cost for ``state`` this year."""
        ins, adapt = self.config.insurance, self.config.adaptation
        rate = self.insurer.rate * self._zone_multiplier[state.flood_zone]
        if state.elevated:
            rate *= ins.elevated_multiplier
        contents_cover = min(state.contents_value, ins.contents_limit)
        structure_cover = min(state.structure_value, ins.structure_limit)
        subsidy = self.government.subsidy_for(adapt.elevation_cost)
        return {
            "buy_insurance": rate * (structure_cover + contents_cover) / 1000.0,
            "buy_contents_insurance": rate * contents_cover / 1000.0,
            "elevate_house": adapt.elevation_cost * (1.0 - subsidy),
            "relocate": adapt.owner_relocation_cost
            if state.tenure == "owner"
            else adapt.renter_relocation_cost,
            "do_nothing": 0.0,
        }

    def cost_matrix(self, states: Sequence[HouseholdState]) -> np.ndarray:
        """:meth:`costs_for` of many households: a row each, a column per registry skill.

        Raises:
            KeyError: If the registry has a skill this model cannot price.
        """
        n = len(states)
        return self.costs_of(
            list(map(_FLOOD_ZONE, states)),
            np.fromiter(map(_ELEVATED, states), bool, n),
            np.fromiter(map(_STRUCTURE_VALUE, states), float, n),
            np.fromiter(map(_CONTENTS_VALUE, states), float, n),
            np.fromiter(map(eq, map(_TENURE, states), repeat("owner")), bool, n),
        )

    def costs_of(
        self,
        zones: ZoneColumn | Sequence[str],
        elevated: np.ndarray,
        structure: np.ndarray,
        contents: np.ndarray,
        owner: np.ndarray,
    ) -> np.ndarray:
        """:meth:`cost_matrix` of households given as columns (both engines price with it).

        Raises:
            KeyError: If the registry has a skill this model cannot price.
        """
        ins, adapt = self.config.insurance, self.config.adaptation
        n = len(zones)
        rate = self.insurer.rate * per_zone(zones, self._zone_multiplier)
        rate = np.where(elevated, rate * ins.elevated_multiplier, rate)
        contents_cover = np.minimum(contents, ins.contents_limit)
        structure_cover = np.minimum(structure, ins.structure_limit)
        subsidy = self.government.subsidy_for(adapt.elevation_cost)
        columns = {
            "buy_insurance": rate * (structure_cover + contents_cover) / 1000.0,
            "buy_contents_insurance": rate * contents_cover / 1000.0,
            "elevate_house": np.full(n, adapt.elevation_cost * (1.0 - subsidy)),
            "relocate": np.where(owner, adapt.owner_relocation_cost, adapt.renter_relocation_cost),
            "do_nothing": np.zeros(n),
        }
        costs = np.empty((n, len(self.registry.skill_ids)))
        for j, skill_id in enumerate(self.registry.skill_ids):
            costs[:, j] = columns[skill_id]
        return costs

    def _decision_context(self, year: int) -> dict[str, Any]:
        """What every household decides in ``year`` (one dict shared by all: policies read it)."""
        return {
            "year": year,
            "subsidy_share": self.government.subsidy_share,
            "premium_rate": self.insurer.rate,
        }

    def decide_for(self, household: HouseholdAgent, year: int) -> Decision:
        """Step 7 for one household; see :meth:`HouseholdAgent.decide`."""
        gathered = self._pending.pop(household, None) or self._gather(household, year)
        outcome = self._llm_outcomes.pop(household, None)
        if outcome is None:
            draws = self._draws
            proposal = self.policy.decide(
                household.state,
                gathered.retrieved,
                gathered.options,
                gathered.context,
                self.decision_rng if draws is None else draws,
                explain=gathered.explain,
            )
        else:
            proposal = outcome.proposal
        return self._finish(household, gathered, proposal, outcome)

    def _gather(self, household: HouseholdAgent, year: int) -> _Gathered:
        """Invoke the retrieve_memory tool and price the options (logged when audited)."""
        gathered = self._recall(household, year)
        self._log_recall(household, gathered)
        self._price(household, gathered)
        return gathered

    def _price(self, household: HouseholdAgent, gathered: _Gathered) -> None:
        """Price the household's options and keep the valid ones (one household's turn)."""
        gathered.costs = costs = self.costs_for(household.state)
        gathered.options = self.registry.valid_options(household.state, costs)

    def _recall(self, household: HouseholdAgent, year: int) -> _Gathered:
        """Invoke the retrieve_memory tool; neither logged nor priced yet."""
        return self._recall_all([household], year)[0]

    def _recall_all(self, households: list[HouseholdAgent], year: int) -> list[_Gathered]:
        """:meth:`_recall` for each of ``households``, in order."""
        top_k = self.config.memory.retrieval.top_k
        audit = self.audit
        # Only full traces show justifications and explanations.
        full = audit is not None and audit.level == "full"
        context = self._context
        if context["year"] != year:  # called outside the yearly step
            context = self._decision_context(year)
        return [
            _Gathered(
                year,
                household.memory.retrieve_scored(top_k, year),
                {},
                None,
                context,
                None,
                full and audit.audits(household.state.agent_id),
            )
            for household in households
        ]

    def _log_recall(self, household: HouseholdAgent, gathered: _Gathered) -> None:
        """Log the retrieve_memory call and snapshot the state the trace starts from."""
        audit, state = self.audit, household.state
        if audit is None or not audit.audits(state.agent_id):
            return
        parameters = retrieval_parameters(self.config.memory.retrieval, gathered.year)
        audit.tool_invocation(state.agent_id, parameters, gathered.retrieved)
        if audit.level == "full":
            gathered.before = dynamic_state(state)
        elif audit.level == "standard":
            gathered.before = changed_state(state)

    def _runs_on_arrays(self) -> bool:
        """Whether the array engine runs this model's years.

        That needs ``engine: arrays`` and decisions it makes as :meth:`decide_for` would: the
        PMT policy's (see :meth:`_decides_together`) or a decision table's, with neither
        :meth:`decide_for` nor :meth:`costs_for` replaced.
        """
        if self.config.engine != "arrays":
            return False
        return self._decides_together() or (
            type(self.policy).decide is ScriptedPolicy.decide and self._own_decisions()
        )

    def _own_decisions(self) -> bool:
        """Whether :meth:`decide_for` and :meth:`costs_for` are this class's own."""
        cls = type(self)
        return (
            cls.costs_for is FloodAdaptationModel.costs_for
            and cls.decide_for is FloodAdaptationModel.decide_for
            and "decide_for" not in vars(self)
            and "costs_for" not in vars(self)
        )

    def _decides_together(self) -> bool:
        """Whether this year's decisions can go through :meth:`_decide_together`.

        That needs the PMT policy (the only one with ``decide_many``) and no language model. A
        model whose :meth:`decide_for` or :meth:`costs_for` was replaced (by a subclass, or a
        wrapper set on the instance) or a policy that overrides ``decide`` keeps the
        one-household-at-a-time path, so the replacement is what runs.
        """
        return (
            self.llm is None
            and type(self.policy).decide is PMTPolicy.decide
            and self._own_decisions()
        )

    def _decide_together(self, order: list[HouseholdAgent], year: int) -> None:
        """Step 7 for all households, with the choices of :meth:`decide_for` one by one.

        Every household retrieves first (each reads and touches only its own memory); then each
        is logged, executes and remembers in its turn. What is done for all at once is pricing,
        validating and choosing (``PMTPolicy.decide_many``), which is exact because a
        household's options depend on the others only through the elevation subsidy's budget:
        when an elevation changes the subsidy, the households after it are priced and decide
        again. Households with full traces (explanations) decide one by one.
        """
        draws = self.decision_rng.random(len(order))  # the stream decide_for would use, in turn
        for first in range(0, len(order), _DECISION_CHUNK):
            last = first + _DECISION_CHUNK
            self._decide_chunk(order[first:last], draws[first:last], year)

    def _decide_chunk(self, order: list[HouseholdAgent], draws: np.ndarray, year: int) -> None:
        """:meth:`_decide_together` for consecutive households in the order, with their draws."""
        recalled = self._recall_all(order, year)
        elevation_cost = self.config.adaptation.elevation_cost
        government, registry, audit = self.government, self.registry, self.audit
        skill_ids = registry.skill_ids
        start, end = 0, len(order)
        while start < end:
            subsidy = government.subsidy_for(elevation_cost)
            spent = government.spent_this_year
            together = [n for n in range(start, end) if not recalled[n].explain]
            states = [order[n].state for n in together]
            costs = self.cost_matrix(states)
            valid = registry.valid_mask(states, costs)
            proposals = dict(
                zip(
                    together,
                    self.policy.decide_many(
                        states,
                        [recalled[n].retrieved for n in together],
                        skill_ids,
                        costs,
                        valid,
                        draws[together],
                    ),
                    strict=True,
                )
            )
            rows = dict(zip(together, costs.tolist(), strict=True))
            for n in range(start, end):
                household, gathered = order[n], recalled[n]
                # Logged in the household's turn, as one by one: its own state and memory are
                # as they were when it retrieved, and the trace finds the ids just logged.
                if audit is not None:
                    self._log_recall(household, gathered)
                proposal = proposals.get(n)
                if proposal is None:  # explained: decided alone, from the same draw
                    self._price(household, gathered)
                    proposal = self.policy.decide(
                        household.state,
                        gathered.retrieved,
                        gathered.options,
                        gathered.context,
                        DrawnUniform(float(draws[n])),
                        explain=True,
                    )
                else:
                    gathered.costs = dict(zip(skill_ids, rows[n], strict=True))
                self._finish(household, gathered, proposal, None)
                start = n + 1
                # Only a subsidy paid (an elevation) can change the subsidy within the year.
                if government.spent_this_year != spent:
                    spent = government.spent_this_year
                    if government.subsidy_for(elevation_cost) != subsidy:
                        break  # the rest are priced at the new subsidy

    def _finish(
        self,
        household: HouseholdAgent,
        gathered: _Gathered,
        proposal: Proposal,
        outcome: LLMOutcome | None,
    ) -> Decision:
        """Validate (again, with current costs), execute, remember and log one decision."""
        state, memory, year = household.state, household.memory, gathered.year
        if outcome is None and (
            gathered.options is None or _offers(gathered.options, proposal.skill_id)
        ):
            # Gathered and decided in this household's own turn (options None: chosen among the
            # valid ones by decide_many in this turn's prices): the option is still valid.
            costs, validation = gathered.costs, VALID
        else:
            costs = self.costs_for(state)  # earlier households may have used the subsidy budget
            validation = self.registry.check(
                proposal.skill_id, state, costs.get(proposal.skill_id, 0)
            )
        skill_id = proposal.skill_id if validation.valid else self.registry.default_skill
        if not validation.valid:
            self.year_stats["invalid_proposals"] += 1
        rejected = None
        if outcome is not None:
            validation = Validation.of(
                (*outcome.errors, *validation.errors), (*outcome.warnings, *validation.warnings)
            )
            if outcome.fallback:
                self.year_stats["invalid_proposals"] += 1
                # The proposal now names the default skill: what the model asked for would be
                # lost from the trace and the household's summary otherwise.
                rejected = outcome.proposed
        decision = Decision(
            year,
            proposal,
            skill_id,
            validation,
            gathered.retrieved,
            cost=costs[skill_id],
            retries=outcome.retries if outcome is not None else 0,
            via_llm=outcome is not None,
        )
        if rejected is not None:
            decision.rejected_skill_id = rejected
        self._execute(household, decision, costs)
        tp = proposal.constructs.get("TP")
        household.last_decision = _new_tuple(
            DecisionSummary,
            (
                year,
                skill_id,
                proposal.skill_id if rejected is None else rejected,
                validation.valid,
                decision.cost,
                None if tp is None else tp.value,
                decision.via_llm,
                decision.retries,
            ),
        )
        audit = self.audit
        if audit is not None and audit.audits(state.agent_id):
            audit.trace(state.agent_id, decision, gathered.before, state, memory)
            if outcome is not None:
                audit.llm_calls(state.agent_id, outcome.calls)
        if tp is not None:
            self._tps.append(tp.value)
        return decision

    def _decide_with_llm(self, order: list[HouseholdAgent]) -> None:
        """Gather every LLM household, decide them concurrently, then finish all in order.

        The errors that stop the run here name the config file and the key, like input errors.

        Raises:
            CacheMiss: A replay met a request its cache does not hold (``decision.llm.cache``).
            EndpointUnreachable: No request of the year reached the endpoint
                (``decision.llm.base_url``); the run can be resumed once the server runs.
        """
        year = self.steps
        requests, households = [], []
        for household in order:
            if household.uses_llm:
                gathered = self._gather(household, year)
                self._pending[household] = gathered
                households.append(household)
                requests.append(
                    LLMRequest(
                        household.state.agent_id,
                        year,
                        household.state,
                        gathered.retrieved,
                        gathered.options,
                        gathered.costs,
                        gathered.context,
                    )
                )
        try:
            outcomes = self.llm.decide_all(requests)  # even none: a recording creates its cache
        except CacheMiss as err:
            raise CacheMiss(err.request_hash, self._cache_origin) from None
        except EndpointUnreachable as err:
            raise EndpointUnreachable(f"{self._endpoint_origin}: {err}") from None
        self._llm_outcomes = dict(zip(households, outcomes, strict=True))
        for household in order:
            self.decide_for(household, year)

    def _execute(
        self, household: HouseholdAgent, decision: Decision, costs: dict[str, float]
    ) -> None:
        state, skill_id, year = household.state, decision.skill_id, decision.year
        was_insured = state.insured
        changes = decision.state_changes
        if was_insured:  # annual policies lapse unless this skill renews them
            renewed = self._renews[skill_id]
            for name in POLICY_FLAGS:
                if name not in renewed and getattr(state, name):
                    setattr(state, name, False)
                    changes[name] = (True, False)
            if not renewed:
                state.insured_years = 0
        changes.update(self.registry.apply(skill_id, state))
        cost = costs[skill_id]
        if skill_id in INSURANCE_SKILLS:
            state.insured_years = state.insured_years + 1 if was_insured else 1
            self.premiums_collected += cost
            if not was_insured:
                household.adopted_this_year = "insurance"
        elif skill_id == "elevate_house":
            elevation_cost = self.config.adaptation.elevation_cost
            self.government.pay(elevation_cost * self._subsidy_share(cost))
            household.adopted_this_year = skill_id
        elif skill_id == "relocate":
            household.adopted_this_year = skill_id
            household.relocated_in = year
        stat = DECISION_STATS.get(skill_id)
        if stat is not None:
            self.year_stats[stat] += 1
        key = (skill_id, year, cost)
        remembered = self._decision_memories.get(key)
        if remembered is None:
            remembered = self._decision_memory(skill_id, state, year, cost)
        content, importance, tags = remembered
        store = self.registry.skills[skill_id].memory.store
        decision.memory_update = self._log(
            household,
            household.memory.write(content, importance, year, tags, store=store, source="decision"),
        )

    def _subsidy_share(self, cost: float) -> float:
        """The share of the elevation cost a subsidy paid, given what the household paid."""
        return 1.0 - cost / max(self.config.adaptation.elevation_cost, 1e-9)

    def _decision_memory(
        self, skill_id: str, state: HouseholdState, year: int, cost: float
    ) -> _Remembered:
        """Render what executing ``skill_id`` leaves in memory (the registry's template).

        A template that names only these context values, not the household's fields, renders
        the same for everyone who paid the same: it is kept for the rest of the year, since
        most households make one of a few choices at one of a few prices.
        """
        context: dict[str, Any] = {"year": year, "cost": cost}
        if skill_id in INSURANCE_SKILLS:
            context["premium"] = cost
        elif skill_id == "elevate_house":
            context["subsidy_share"] = self._subsidy_share(cost)
        remembered = self.registry.memory_update(skill_id, state, context)
        if context.keys() >= set(self.registry.template_fields(skill_id)):
            self._decision_memories[skill_id, year, cost] = remembered
        return remembered

    def _remember(
        self,
        household: HouseholdAgent,
        event: EventTemplate,
        year: int,
        source: str,
        amount: float,
        **values: float,
    ) -> WriteResult:
        content = render(event.template, {"year": year, **values})
        return self._log(
            household,
            household.memory.write(
                content, event.importance, year, event.tags, source=source, amount=amount
            ),
        )

    def _log(self, household: HouseholdAgent, result: WriteResult) -> WriteResult:
        """Pass a memory write to the audit trail (when one is attached)."""
        if self.audit is not None:
            self.audit.memory_update(household.state.agent_id, result)
        return result

    # ------------------------------------------------------------ year end, metrics
    def _end_year(self, year: int, active: list[HouseholdAgent], stats: dict[str, float]) -> None:
        """Step 8: every household's year-end memory pass, then this year's metrics row.

        The metrics are tallied in the same pass rather than a pass of their own: in a large
        population every pass reads the households' objects back from main memory. Households
        that relocated in earlier years are not in ``active`` and count only in
        ``relocated_share`` (a share of all households; the other shares and means are over
        active households, NaN when there are none). ``insured_share_ae`` counts the whole
        floodplain (zones AE, A, VE and V) and ``insured_share_x`` everything outside it (X, B, C
        and D), each NaN without active households there.
        """
        audit = self.audit
        n = insured = elevated = working = episodic = 0
        # Active and insured households in the floodplain (AE, A, VE, V) and outside it.
        inside = [0, 0]
        outside = [0, 0]
        for household in active:
            memory = household.memory
            report = memory.end_year(year)
            if audit is not None:
                audit.consolidation(household.state.agent_id, report, memory)
            household.adopted_last_year = household.adopted_this_year
            household.adopted_this_year = None
            state = household.state
            if state.relocated:  # moved away this year
                continue
            n += 1
            covered = state.insured
            insured += covered
            elevated += state.elevated
            zone = inside if state.flood_zone in SFHA_ZONES else outside
            zone[0] += 1
            zone[1] += covered
            working += memory.working_size
            episodic += memory.episodic_size
        total = len(self.households)
        stats["active_households"] = n
        stats["premium_rate"] = self.insurer.rate
        stats["subsidy_share"] = self.government.subsidy_share
        stats["relocated_share"] = (total - n) / total if total else 0.0
        # A share or mean over nobody is undefined, not 0: NaN keeps "no households outside the
        # floodplain" or "everyone has moved away" from reading as "nobody insured".
        nan = math.nan
        stats["insured_share"] = insured / n if n else nan
        stats["elevated_share"] = elevated / n if n else nan
        for (in_zone, insured_in_zone), key in (
            (inside, "insured_share_ae"),
            (outside, "insured_share_x"),
        ):
            stats[key] = insured_in_zone / in_zone if in_zone else nan
        stats["mean_working"] = working / n if n else nan
        stats["mean_episodic"] = episodic / n if n else nan
        tps = self._tps
        stats["mean_tp"] = sum(tps) / len(tps) if tps else nan
        self.datacollector.collect(self)

    def metrics(self) -> Any:
        """The yearly metrics as a pandas DataFrame (one row per year)."""
        frame = self.datacollector.get_model_vars_dataframe()
        # Tallied as floats with the year's other statistics; written as the counts they are.
        return frame.reset_index(drop=True)[list(METRIC_COLUMNS)].astype(_COUNT_DTYPES)


class _CountersByModel(weakref.WeakKeyDictionary):
    """Mesa's agent-id counters, one per model, forgotten with their model.

    Mesa 3.3 keeps them in ``mesa.Agent._ids``, a class-level ``defaultdict`` keyed by the
    model itself (mesa issue #3179, fixed upstream after 3.3.1), which kept every model built in
    a process alive, with all its households and memories, until the process ended: a notebook
    running one model after another grew with each, and a test process held 201 models, which
    every full collection traced (0.3 to 0.5 s each). Held weakly, a model goes when its last
    user drops it.
    """

    def __init__(self, new_counter: Callable[[], Iterator[int]]) -> None:
        super().__init__()
        self._new_counter = new_counter

    def __getitem__(self, model: mesa.Model) -> Iterator[int]:
        try:
            return super().__getitem__(model)
        except KeyError:  # the defaultdict's behaviour: a new model's ids start at 1
            counter = self[model] = self._new_counter()
            return counter


def _forget_agent_counters_with_their_models() -> None:
    """Put :class:`_CountersByModel` in place of Mesa's table (once; a later Mesa has none)."""
    counters = getattr(mesa.Agent, "_ids", None)
    if isinstance(counters, defaultdict) and counters.default_factory is not None:
        weak = _CountersByModel(counters.default_factory)
        weak.update(counters)  # models built before keep counting where they were
        mesa.Agent._ids = weak


def _origin_of_settings(
    households: PopulationConfig,
    settings: tuple[str, ...],
    where: Callable[[tuple[str, ...]], str],
) -> str:
    """What gave ``households``' ``settings`` (keys, or sections of keys): a ``--set`` first.

    A generated population fails on settings together (a median and its spread), so the
    flag that set any key among them is named, else the file of the first.
    """
    keys: list[tuple[str, ...]] = []
    for name in settings:
        value = getattr(households, name)
        fields = type(value).model_fields if isinstance(value, BaseModel) else {}
        keys.extend([("households", name, field) for field in fields] or [("households", name)])
    origins = [where(key) for key in keys]
    flagged = next((origin for origin in origins if origin.startswith("--")), None)
    return flagged or (origins[0] if origins else where(("households",)))


def _clear_cell_caches() -> None:
    """Empty the caches Mesa 3.3 keeps on the Cell class itself (``functools.cache`` on methods).

    They are keyed by cell, so they keep every cell of every grid or network built in the
    process, and its agents with it. floodsim reads neighbourhoods once, when it places the
    households; another model in the same process only recomputes what it asks for again.
    """
    for name in ("get_neighborhood", "_neighborhood"):
        cache_clear = getattr(getattr(Cell, name, None), "cache_clear", None)
        if cache_clear is not None:
            cache_clear()


def _load_registry(path: Path, origin: str) -> SkillRegistry:
    """Load the skill registry and check it against what the yearly cycle can run.

    Raises:
        ConfigError: Naming the registry file and the skill or tool at fault.
    """
    try:
        # The yearly cycle prices every skill (costs_for) and knows each one's effect on the
        # institutions and the metrics: a skill added to the registry alone cannot run.
        registry = SkillRegistry.load(path, runnable=DECISION_STATS)
    except RegistryError as err:
        raise ConfigError(f"{origin}: registry: {err}") from None
    for skill_id, skill in registry.skills.items():
        if dict(skill.effects) != _EFFECTS[skill_id]:
            msg = (
                f"{origin}: registry: {path}: skill {skill_id!r}: effects: the model executes "
                f"it as {_flow(_EFFECTS[skill_id])} (its costs, institutions and metrics "
                f"follow from that), not {_flow(skill.effects)}"
            )
            raise ConfigError(msg)
        if skill_id in _OWNERS_ONLY and skill.eligible("renter"):
            msg = (
                f"{origin}: registry: {path}: skill {skill_id!r}: eligible_agent_types: "
                "renters do not own the building (use [owner])"
            )
            raise ConfigError(msg)
    for skill_id in registry.skill_ids:
        supplied = _template_context(skill_id)
        for name in registry.template_fields(skill_id):
            if name not in supplied and name not in STATE_FIELDS:
                msg = (
                    f"{origin}: registry: {path}: skill {skill_id!r}: memory.template: "
                    f"{{{name}}} has no value when this skill runs (it gets "
                    f"{', '.join(sorted(supplied))} and the household's state fields)"
                )
                raise ConfigError(msg)
    tool = registry.memory_tools.get("retrieve_memory")
    if tool is None:
        msg = (
            f"{origin}: registry: {path}: memory_tools: a retrieve_memory tool is required "
            "(households retrieve memories to decide)"
        )
        raise ConfigError(msg)
    others = [tool_id for tool_id in registry.memory_tools if tool_id != "retrieve_memory"]
    if others:
        # Accepted, it would be believed to do something: households call retrieve_memory only.
        msg = (
            f"{origin}: registry: {path}: memory tool {others[0]!r} is not one the model "
            "calls (households call retrieve_memory only, as memory.retrieval configures it)"
        )
        raise ConfigError(msg)
    closed = [tenure for tenure in TENURES if not tool.eligible(tenure)]
    if closed:
        msg = (
            f"{origin}: registry: {path}: memory tool 'retrieve_memory': eligible_agent_types: "
            f"every household retrieves memories to decide, but {closed[0]}s are left out "
            '(use ["*"])'
        )
        raise ConfigError(msg)
    return registry


def _flow(effects: Mapping[str, object]) -> str:
    """``effects`` as the registry writes them: ``{elevated: true}``."""
    pairs = ", ".join(
        f"{k}: {str(v).lower() if isinstance(v, bool) else v}" for k, v in effects.items()
    )
    return f"{{{pairs}}}"


def _renewed_policies(registry: SkillRegistry) -> dict[str, frozenset[str]]:
    """The annual policies each skill renews: those its effects set (the others lapse)."""
    return {
        skill_id: frozenset(name for name in POLICY_FLAGS if skill.effects.get(name) is True)
        for skill_id, skill in registry.skills.items()
    }


def _decision_policy(
    config: RunConfig,
    base_dir: Path,
    registry: SkillRegistry,
    population: Population,
    script_origin: str,
) -> PMTPolicy | ScriptedPolicy:
    """The policy of every household a language model does not decide for.

    ``script_origin`` is named in an error or a warning about the decision table (the config
    file or the ``--set`` flag that gave it).

    Raises:
        ConfigError: For a decision table that cannot be used or names unknown households.
    """
    decision = config.decision
    if decision.script is None:
        # The registry decides which skills renew a policy (_execute lapses it otherwise); the
        # justifications say so from the same rule.
        renewing = [skill_id for skill_id, renews in _renewed_policies(registry).items() if renews]
        return PMTPolicy(decision.pmt, renewing)
    households = frozenset(state.agent_id for state in population.states)
    try:
        decisions = load_script(base_dir / decision.script, registry.skill_ids, households)
    except ScriptError as err:
        raise ConfigError(f"{script_origin}: decision.script: {err}") from None
    _warn_after_last_year(
        (year for _, year in decisions), config.years, script_origin, "decision.script"
    )
    return ScriptedPolicy(decisions, registry.default_skill)


def _warn_after_last_year(
    years: Iterable[int], last: int, origin: str, key: str, *, none_within: str = ""
) -> None:
    """Warn that entries of ``key`` for years after the run's ``last`` year will never be used.

    Not an error: shortening a run (``--set years=5``) for a quick look is common, and the
    years that remain run as configured. Neither is a run none of whose years has an entry
    (the flood of a 30-year scenario in year 10, looked at for 5 years; the short arm of a
    sweep over ``years``), but then the warning says what that means, ``none_within``: a
    list of flood years none of which happens is easily read as "a few of my floods are cut".
    """
    years = list(years)
    after = sorted(year for year in years if year > last)
    if after:
        if len(after) == 1:
            entries, first = "1 entry is for a year", f"year {after[0]}"
        else:
            entries, first = f"{len(after):,} entries are for years", f"from year {after[0]}"
        message = (
            f"{origin}: {key}: {entries} after the run's last year ({last}) and will never be "
            f"used ({first})"
        )
        if none_within and len(after) == len(years):
            span = "year" if last == 1 else f"{last} years"
            message += f"; none is within the run's {span}, so {none_within}"
        warnings.warn(message, ConfigWarning, stacklevel=2)


def _warn_grids_at_homes(
    source: RasterSource, last: int, states: Sequence[HouseholdState], origin: str
) -> None:
    """Warn of the run's depth grids whose floods reach no home, or reach implausibly deep.

    A grid in another coordinate system than the households' x and y (degrees against
    metres, say), or NODATA wherever a home is, would otherwise pass for a run without
    floods; one in centimetres read as metres floods every home a hundred times too deep.
    The grids were read as the source was built (``HazardConfig.build``), so none is read
    here.
    """
    years = [year for year in source.paths if year <= last]
    if not years or not states:
        return
    x = np.array([state.x for state in states], dtype=np.float64)
    y = np.array([state.y for state in states], dtype=np.float64)
    missing, blank, deep = [], [], []
    for year in years:
        grid = source.grid(year)
        if grid is None:
            continue
        if not grid.covers(x, y).any():
            missing.append((year, grid))
            continue
        values = grid.sample(x, y, fill=np.nan)
        if np.isnan(values).all():
            blank.append((year, grid))
        elif np.nanmax(values) * _feet_per(source.units) > PLAUSIBLE_DEPTH_FT:
            deep.append((year, grid, float(np.nanmax(values))))
    if missing:
        year, grid = missing[0]
        west, east, south, north = grid.extent
        warnings.warn(
            f"{origin}: hazard.rasters: {_which(missing, years)} covers no home, so its flood "
            f"reaches no one: {grid.path} spans x {west:.10g} to {east:.10g} and y "
            f"{south:.10g} to {north:.10g}; the homes lie within x {np.nanmin(x):.10g} to "
            f"{np.nanmax(x):.10g} and y {np.nanmin(y):.10g} to {np.nanmax(y):.10g} (are both "
            "in the same coordinate system?)",
            ConfigWarning,
            stacklevel=2,
        )
    if blank:
        year, grid = blank[0]
        warnings.warn(
            f"{origin}: hazard.rasters: {_which(blank, years)} is NODATA at every home, so its "
            f"flood reaches no one ({grid.path})",
            ConfigWarning,
            stacklevel=2,
        )
    if deep:
        year, grid, most = deep[0]
        feet = "" if source.units == "ft" else f" ({most * _feet_per(source.units):,.0f} ft)"
        warnings.warn(
            f"{origin}: hazard.rasters: {_which(deep, years)} is up to {most:.4g} "
            f"{source.units} deep at a home{feet}, more than "
            f"{PLAUSIBLE_DEPTH_FT:.0f} ft: are its values in hazard.units ({source.units})? "
            f"({grid.path})",
            ConfigWarning,
            stacklevel=2,
        )


#: ``social.k``'s default, which tiny populations cap without a warning.
_DEFAULT_K = SocialConfig.model_fields["k"].default


def _small_world_k(k: int, n: int) -> int:
    """The neighbours each of ``n`` households starts with in a small world of ``k``.

    At most ``n - 1``, and even (k/2 on each side).
    """
    return max(min(k, n - 1 - (n - 1) % 2), 0) if n > 2 else 0


def _feet_per(units: str) -> float:
    return FEET_PER_METRE if units == "m" else 1.0


def _which(found: Sequence[tuple[Any, ...]], years: Sequence[int]) -> str:
    """``the grid of year 3``, or ``2 of the run's 5 grids (the first: year 3)``."""
    year = found[0][0]
    if len(found) == 1:
        return f"the grid of year {year}"
    return f"{len(found)} of the run's {len(years)} grids (the first: year {year})"


def _template_context(skill_id: str) -> frozenset[str]:
    """The values ``_execute`` gives ``skill_id``'s memory template besides the state fields."""
    if skill_id in INSURANCE_SKILLS:
        return frozenset({"year", "cost", "premium"})
    if skill_id == "elevate_house":
        return frozenset({"year", "cost", "subsidy_share"})
    return frozenset({"year", "cost"})


def _offers(options: list[Option], skill_id: str) -> bool:
    """Whether ``skill_id`` is among ``options``."""
    # A plain loop: cheaper than any() over a generator, and it runs every household-year.
    for option in options:  # noqa: SIM110 - see above
        if option.skill_id == skill_id:
            return True
    return False


def _stat(name: str) -> Any:
    def report(model: FloodAdaptationModel) -> float:
        return model.year_stats[name]

    return report


def _resolve(base_dir: Path, name_or_path: str) -> str:
    """A curve-set name stays a name; anything that looks like a file is made absolute."""
    if is_curve_file(name_or_path):
        return str(base_dir / name_or_path)
    return name_or_path
