"""Facts of the yearly cycle that both engines follow (``engine: objects`` and ``arrays``).

Which skills insure, which annual policies lapse unless renewed, which metrics column counts
each skill's decisions, what neighbours notice of each adoption, and how the trail names a
household's retrieval: the model
(:mod:`simulation.model`) and the array engine (:mod:`simulation.array_engine`) read them from
here, so that the two cannot disagree.
"""

from __future__ import annotations

from typing import TYPE_CHECKING, Any

if TYPE_CHECKING:
    from simulation.memory.settings import RetrievalSettings

__all__ = [
    "ADOPTION_PHRASES",
    "DECISION_STATS",
    "INSURANCE_SKILLS",
    "POLICY_FLAGS",
    "retrieval_parameters",
]

#: The skills that buy (or renew) an annual flood insurance policy.
INSURANCE_SKILLS = frozenset({"buy_insurance", "buy_contents_insurance"})
#: The annual policies a household can hold: each lapses unless the year's skill renews it.
POLICY_FLAGS = ("has_insurance", "has_contents_insurance")
#: The metrics column counting each skill's decisions (both insurance skills count as one).
DECISION_STATS = {
    "buy_insurance": "decisions_buy_insurance",
    "buy_contents_insurance": "decisions_buy_insurance",
    "elevate_house": "decisions_elevate_house",
    "relocate": "decisions_relocate",
    "do_nothing": "decisions_do_nothing",
}
#: What neighbours notice, per adoption: the action phrase of the neighbour template.
ADOPTION_PHRASES = {
    "insurance": "bought flood insurance",
    "elevate_house": "elevated their homes",
    "relocate": "moved away",
}


def retrieval_parameters(retrieval: RetrievalSettings, year: int) -> dict[str, Any]:
    """The parameters of a household's ``retrieve_memory`` call, as the trail logs them.

    The scores of weighted retrieval depend on its query: the trail names the strategy and the
    query, so that they can be explained from the trail alone (spec lines stay as the seed's).
    """
    parameters: dict[str, Any] = {"top_k": retrieval.top_k, "current_year": year}
    if retrieval.strategy != "spec":
        parameters["strategy"] = retrieval.strategy
        parameters["query"] = retrieval.query
    return parameters
