"""Facts of the yearly cycle that both engines follow (``engine: objects`` and ``arrays``).

Which skills insure, which annual policies lapse unless renewed, which metrics column counts
each skill's decisions, and what neighbours notice of each adoption: the model
(:mod:`simulation.model`) and the array engine (:mod:`simulation.array_engine`) read them from
here, so that the two cannot disagree.
"""

from __future__ import annotations

__all__ = ["ADOPTION_PHRASES", "DECISION_STATS", "INSURANCE_SKILLS", "POLICY_FLAGS"]

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
