"""Decision policies: ``pmt`` (Protection Motivation Theory, default), ``llm``, ``scripted``.

The policies live in their modules: :mod:`simulation.decisions.pmt`,
:mod:`simulation.decisions.llm` and :mod:`simulation.decisions.scripted`.
"""

from __future__ import annotations

from simulation.decisions.base import (
    LEVELS,
    Construct,
    DecisionPolicy,
    Option,
    Proposal,
    level_of,
)

__all__ = ["LEVELS", "Construct", "DecisionPolicy", "Option", "Proposal", "level_of"]
