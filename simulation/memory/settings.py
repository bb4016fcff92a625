"""Tunable behaviour of a cognitive memory: retrieval, retention and reflection settings.

Settings objects are immutable and shared by every household of a run, so a memory holds only a
reference to them. Each validates its values on construction and raises ``ValueError`` naming the
argument and the value. The YAML keys of ``memory:`` in a run config map one to one onto these
fields (see ``configs/default.yaml``).
"""

from __future__ import annotations

import math
import operator
from dataclasses import dataclass
from typing import Annotated

import numpy as np
from pydantic import ConfigDict, Strict

__all__ = [
    "BOOLEANS",
    "RETENTION_POLICIES",
    "RETRIEVAL_STRATEGIES",
    "ReflectionSettings",
    "RetentionSettings",
    "RetrievalSettings",
    "as_integer",
    "check_fraction",
    "check_non_negative",
    "check_positive_int",
]

RETRIEVAL_STRATEGIES = ("spec", "weighted")
#: The boolean types, which compare as numbers (True >= 0.7) but are refused where a number is
#: meant: numpy's too, since a value taken from an array or a table is one.
BOOLEANS = (bool, np.bool_)

# How a run config validates these settings (plain construction in Python ignores both): like
# every config section (simulation.config_base.ConfigModel) it refuses unknown keys, NaN and
# infinity, and takes each value as its own type only: a number must be given as one (pydantic
# would read a YAML `true` as 1, and "10" as 10), a boolean as true or false (not 1). Strict per
# field: a strict config would refuse the mapping a YAML section gives for the settings object.
_CONFIG = ConfigDict(extra="forbid", allow_inf_nan=False)
_STRICT = Strict()
RETENTION_POLICIES = ("decayed_importance", "fifo", "importance_weighted", "tiered")


def check_fraction(name: str, value: float, *, low_open: bool = False) -> None:
    """Raise ``ValueError`` unless ``value`` is a number in [0, 1] (or (0, 1] with ``low_open``).

    Raises:
        ValueError: For a number (or bool) outside the interval, NaN included.
        TypeError: For a value that is not a number (a string), naming ``name``.
    """
    try:
        ok = (0.0 < value <= 1.0) if low_open else (0.0 <= value <= 1.0)
    except TypeError:  # a string: the bare comparison error would not say which argument
        ok = None
    if not ok or isinstance(value, BOOLEANS):  # NaN fails both comparisons: refused too
        interval = "(0, 1]" if low_open else "[0, 1]"
        msg = f"{name} must be in {interval}, got {value!r}"
        raise ValueError(msg) if ok is not None else TypeError(msg)


def as_integer(value: object) -> int | None:
    """``value`` as an ``int`` when it is an integer, else ``None``.

    numpy integers count: a year or count taken from a pandas table is one. Booleans do not.
    """
    if isinstance(value, BOOLEANS) or not hasattr(value, "__index__"):
        return None
    return operator.index(value)


def check_positive_int(name: str, value: int) -> None:
    """Raise ``ValueError`` unless ``value`` is an integer >= 1."""
    if isinstance(value, bool) or not isinstance(value, int) or value < 1:
        msg = f"{name} must be a positive integer, got {value!r}"
        raise ValueError(msg)


def check_non_negative(name: str, value: float) -> None:
    """Raise unless ``value`` is a finite number >= 0 (a weight).

    Raises:
        ValueError: For a negative, infinite or NaN number, or a bool.
        TypeError: For a value that is not a number (a string), naming ``name``.
    """
    try:
        ok = 0.0 <= value < math.inf  # NaN fails the comparison too
    except TypeError:  # a string: the bare comparison error would not say which argument
        ok = None
    if not ok or isinstance(value, bool):
        msg = f"{name} must be a finite number >= 0, got {value!r}"
        raise ValueError(msg) if ok is not None else TypeError(msg)


@dataclass(frozen=True, slots=True)
class RetrievalSettings:
    """How ``retrieve`` ranks memories.

    Attributes:
        strategy: ``spec`` (seed 000: working memory most recent first, then long-term items by
            ``importance * decay ** age``) or ``weighted`` (Generative-Agents style
            ``w_recency * recency + w_importance * importance + w_relevance * relevance``, each
            min-max normalised over the candidates).
        top_k: Items returned when the caller does not say.
        w_recency: Weight of recency (``recency_decay ** years since last access``).
        w_importance: Weight of importance.
        w_relevance: Weight of query relevance (ignored when no query is given).
        recency_decay: Per-year decay of recency; ``None`` uses the memory's ``decay_rate``.
        relevance: ``keyword`` (TF-IDF) or ``embedding`` (needs an embedder at construction).
        query: Default query for weighted retrieval (e.g. ``"flood damage insurance"``); not
            with ``spec``, which has no relevance term.
    """

    __pydantic_config__ = _CONFIG

    strategy: str = "spec"
    top_k: Annotated[int, _STRICT] = 5
    w_recency: Annotated[float, _STRICT] = 1.0
    w_importance: Annotated[float, _STRICT] = 1.0
    w_relevance: Annotated[float, _STRICT] = 1.0
    recency_decay: Annotated[float | None, _STRICT] = None
    relevance: str = "keyword"
    query: str | None = None

    def __post_init__(self) -> None:
        if self.strategy not in RETRIEVAL_STRATEGIES:
            msg = f"strategy must be one of {RETRIEVAL_STRATEGIES}, got {self.strategy!r}"
            raise ValueError(msg)
        if isinstance(self.top_k, bool) or not isinstance(self.top_k, int) or self.top_k < 0:
            msg = f"top_k must be a non-negative integer, got {self.top_k!r}"
            raise ValueError(msg)
        for name in ("w_recency", "w_importance", "w_relevance"):
            check_non_negative(name, getattr(self, name))
        if self.recency_decay is not None:
            check_fraction("recency_decay", self.recency_decay, low_open=True)
        if self.query is not None and self.strategy == "spec":
            # Every retrieval would switch to weighted (spec has no relevance term) unseen.
            msg = "query: only used by strategy 'weighted' (spec has no relevance term)"
            raise ValueError(msg)
        if self.relevance not in ("keyword", "embedding"):
            msg = f"relevance must be 'keyword' or 'embedding', got {self.relevance!r}"
            raise ValueError(msg)


@dataclass(frozen=True, slots=True)
class RetentionSettings:
    """What episodic memory forgets when it is over capacity.

    Attributes:
        policy: ``decayed_importance`` (drop the lowest ``importance * decay ** age``; the
            spec), ``fifo`` (drop the oldest), ``importance_weighted`` (drop the lowest
            ``w_importance * importance + w_recency * recency``, recency counting from the
            last retrieval, so recently recalled memories survive), or ``tiered`` (demote
            instead of dropping: see below).
        w_importance: Importance weight of ``importance_weighted``.
        w_recency: Recency weight of ``importance_weighted``.
        archive_capacity: ``tiered``: items the archive tier holds; past it the lowest decayed
            importance is forgotten.
        demote_below: ``tiered``: at year end, episodic items whose decayed importance fell
            below this move to the archive, unless recalled (or made) that year.
        promote_after: ``tiered``: an archived item retrieved this many times since its
            demotion moves back into episodic memory at year end. Rehearsal strengthens
            memories: its decay restarts from that year, so it stays, recalled or not, as long
            as a new memory of its importance would.
    """

    __pydantic_config__ = _CONFIG

    policy: str = "decayed_importance"
    w_importance: Annotated[float, _STRICT] = 0.7
    w_recency: Annotated[float, _STRICT] = 0.3
    archive_capacity: Annotated[int, _STRICT] = 50
    demote_below: Annotated[float, _STRICT] = 0.1
    promote_after: Annotated[int, _STRICT] = 2

    def __post_init__(self) -> None:
        if self.policy not in RETENTION_POLICIES:
            msg = f"policy must be one of {RETENTION_POLICIES}, got {self.policy!r}"
            raise ValueError(msg)
        check_non_negative("w_importance", self.w_importance)
        check_non_negative("w_recency", self.w_recency)
        check_positive_int("archive_capacity", self.archive_capacity)
        check_fraction("demote_below", self.demote_below)
        check_positive_int("promote_after", self.promote_after)


@dataclass(frozen=True, slots=True)
class ReflectionSettings:
    """When and how experiences are summarised into semantic memory.

    Attributes:
        enabled: Whether reflection runs at year end.
        threshold: Importance accumulated since the last reflection that triggers one (the sum of
            the importances of items written since; Generative Agents uses the same trigger).
            Past it, the reflector is asked at each year end until it proposes a reflection,
            but not again after proposing none until something new has been written.
        importance: Importance of the reflection items written.
        semantic_capacity: Reflections kept; the oldest is replaced first.
    """

    __pydantic_config__ = _CONFIG

    enabled: Annotated[bool, _STRICT] = False
    threshold: Annotated[float, _STRICT] = 3.0
    importance: Annotated[float, _STRICT] = 0.8
    semantic_capacity: Annotated[int, _STRICT] = 5

    def __post_init__(self) -> None:
        if not isinstance(self.enabled, bool):  # the string "false" would switch it on
            msg = f"enabled must be True or False, got {self.enabled!r}"
            raise ValueError(msg)
        # An infinite threshold would mean "never reflect": enabled=False says that.
        if not 0.0 < self.threshold < math.inf or isinstance(self.threshold, bool):
            msg = f"threshold must be a finite number > 0, got {self.threshold!r}"
            raise ValueError(msg)
        check_fraction("importance", self.importance)
        check_positive_int("semantic_capacity", self.semantic_capacity)
