"""The decision-policy interface shared by the ``pmt``, ``llm`` and ``scripted`` policies.

A policy sees one household, its retrieved memories (with scores) and the options it may choose
from this year, and returns a :class:`Proposal`. The skill registry validates every proposal;
an invalid one is never executed.
"""

from __future__ import annotations

from dataclasses import dataclass, field
from typing import TYPE_CHECKING, Any, NamedTuple, Protocol, runtime_checkable

if TYPE_CHECKING:
    from collections.abc import Mapping, Sequence

    import numpy as np

    from simulation.agents.state import HouseholdState
    from simulation.memory import ScoredMemory

__all__ = [
    "LEVELS",
    "Construct",
    "DecisionPolicy",
    "DrawnUniform",
    "Option",
    "Proposal",
    "level_of",
]

#: Appraisal levels, lowest first (very low, low, medium, high, very high).
LEVELS = ("VL", "L", "M", "H", "VH")


def level_of(value: float) -> str:
    """Map an appraisal in [0, 1] to a level by equal fifths."""
    fifth = int(value * 5)
    return LEVELS[4 if fifth > 4 else 0 if fifth < 0 else fifth]


# Construct and Option are named tuples, immutable like frozen dataclasses, because every
# household builds several of each every year and a frozen dataclass takes about twice as long
# to construct (each field is set through object.__setattr__).
class Construct(NamedTuple):
    """One appraisal construct (threat or coping) as the trace records it."""

    level: str
    value: float
    explanation: str


class Option(NamedTuple):
    """A skill the household may choose this year and what it would cost.

    Attributes:
        skill_id: The skill.
        cost: Out-of-pocket cost this year in dollars (premium, elevation cost after subsidy,
            relocation cost net of buyout); 0 for ``do_nothing``.
        description: The registry's description (for prompts).
    """

    skill_id: str
    cost: float
    description: str = ""


@dataclass(slots=True)
class Proposal:
    """What a policy proposes: a skill, its parameters and the reasoning behind it."""

    skill_id: str
    parameters: dict[str, Any] = field(default_factory=dict)
    constructs: dict[str, Construct] = field(default_factory=dict)
    justification: str = ""
    probabilities: dict[str, float] | None = None


class DrawnUniform:
    """One uniform drawn ahead, passed as a policy's ``rng`` (whose ``random()`` it returns).

    Policies draw exactly one uniform per decision, so a model that draws a year's uniforms in
    one call hands each household its own this way.
    """

    __slots__ = ("value",)

    def __init__(self, value: float) -> None:
        self.value = value

    def random(self) -> float:
        """The uniform."""
        return self.value


@runtime_checkable
class DecisionPolicy(Protocol):
    """Chooses a skill for one household.

    A policy of one's own replaces the configured one on a built model
    (``model.policy = MyPolicy()``, from the next year it steps); the model then decides one
    household at a time on either engine, calling :meth:`decide` as below.
    """

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
        """Return a proposal among ``options``.

        Args:
            state: The household.
            memories: Its retrieved memories with their retrieval scores.
            options: The skills it may choose this year, with their costs.
            context: ``year``, ``subsidy_share`` and ``premium_rate``.
            rng: The model's decision stream. A policy of one's own gets the generator itself;
                the built-in policies, which draw exactly one uniform per decision, may get
                :class:`DrawnUniform` or the year's uniforms drawn ahead, of which only
                ``random()`` is called.
            explain: Whether the trace shows the proposal's justification and constructs;
                a policy may skip writing them when it is ``False``.
        """
        ...
