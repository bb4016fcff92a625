"""Reflection: summarising experiences into semantic memory.

A reflector reads a household's memories and proposes reflection items: higher-level beliefs
("I have been flooded three times in ten years") with pointers to the items they rest on, as in
Generative Agents. :class:`RuleBasedReflector` needs no language model; any object with the same
``reflect`` method (for example one that asks an LLM) can replace it.
"""

from __future__ import annotations

from dataclasses import dataclass
from typing import TYPE_CHECKING, Protocol, runtime_checkable

if TYPE_CHECKING:
    from collections.abc import Sequence

    from simulation.memory.item import MemoryItem

__all__ = [
    "ReflectionDraft",
    "Reflector",
    "RuleBasedReflector",
    "flood_experience",
    "is_flood",
]


@dataclass(frozen=True, slots=True)
class ReflectionDraft:
    """A reflection proposed by a reflector, before the memory stores it.

    Attributes:
        content: The belief in natural language.
        evidence: Ids of the items it summarises.
        tags: Tags for the stored item (``reflection`` is always added).
        importance: Importance to store it with; ``None`` uses the configured default.
    """

    content: str
    evidence: tuple[str, ...]
    tags: tuple[str, ...] = ()
    importance: float | None = None


@runtime_checkable
class Reflector(Protocol):
    """Proposes reflections from a household's memories.

    A memory whose reflector proposed nothing does not ask it again until something new is
    written, so what it proposes must follow from the items it is given: having found nothing
    in some items, it would find nothing in the same items (or fewer, some having been
    forgotten since) in a later year.
    """

    def reflect(self, items: Sequence[MemoryItem], year: int) -> list[ReflectionDraft]:
        """Return reflections about ``items`` (distinct, oldest first) at ``year``."""
        ...


class RuleBasedReflector:
    """Summarises flood and insurance-claim experience without a language model.

    It writes at most one reflection: how many floods in which span of years, how many caused
    damage and how much in total, and how insurance claims turned out. Damage and payouts are
    read from each item's ``amount``; an item without one (a memory written without it, a
    survey flood seeded before the run) is of unknown amount, not of $0. Floods are items from
    the ``flood`` source and seeded items tagged ``flood``; a claim tagged ``denied`` counts as
    denied.
    """

    def reflect(self, items: Sequence[MemoryItem], year: int) -> list[ReflectionDraft]:
        """Return one flood-experience reflection, or none when there is no flood or claim."""
        floods = [i for i in items if is_flood(i.source, i.tags)]
        claims = [i for i in items if i.source == "claim"]
        if not floods and not claims:
            return []
        content, tags = flood_experience(
            year,
            [i.year for i in floods],
            [i.amount for i in floods],
            ["denied" in i.tags for i in claims],
            [i.amount for i in claims],
        )
        return [ReflectionDraft(content, tuple(i.id for i in floods + claims), tags)]


def is_flood(source: str, tags: tuple[str, ...]) -> bool:
    """Whether a memory of this source and these tags is a flood to :class:`RuleBasedReflector`."""
    return source == "flood" or (source == "seed" and "flood" in tags)


def flood_experience(
    year: int,
    flood_years: Sequence[int],
    flood_amounts: Sequence[float | None],
    claims_denied: Sequence[bool],
    claim_amounts: Sequence[float | None],
) -> tuple[str, tuple[str, ...]]:
    """The text and tags of :class:`RuleBasedReflector`'s reflection on these floods and claims.

    The memory pool words its reflections here too, so that both engines write the same ones.

    Args:
        year: The year reflected in.
        flood_years: The year of each flood memory, oldest memory first.
        flood_amounts: The damage of each (``None``: unknown).
        claims_denied: Whether each claim memory, oldest first, was denied.
        claim_amounts: The payout of each (``None``: unknown).

    Returns:
        The reflection's content and its tags (``reflection`` is added when it is stored).
    """
    parts = []
    if flood_years:
        first, last = min(flood_years), max(flood_years)
        span = f"in year {first}" if first == last else f"between years {first} and {last}"
        count = len(flood_years)
        text = f"I remember {count} flood{'s' if count != 1 else ''} {span}"
        damages = [d for d in flood_amounts if d is not None]
        if damages:
            damaging = sum(d > 0.0 for d in damages)
            text += f"; {damaging} damaged my home, ${sum(damages):,.0f} in total"
            if len(damages) < count:
                text += f", and I do not know the damage of {count - len(damages)}"
        parts.append(text)
    if claims_denied:
        claims = len(claims_denied)
        denied = sum(claims_denied)
        approved = claims - denied
        known = [
            a
            for a, no in zip(claim_amounts, claims_denied, strict=True)
            if not no and a is not None
        ]
        amount = ""
        if known:
            paid = f"${sum(known):,.0f}"
            amount = f" ({paid})" if len(known) == approved else f" ({paid} that I know of)"
        parts.append(
            f"insurance paid {approved} of my {claims} claim"
            f"{'s' if claims != 1 else ''}{amount}" + (f" and denied {denied}" if denied else "")
        )
    content = f"Year {year}: " + "; ".join(parts) + "."
    return content, ("flood_experience",) if flood_years else ("insurance_experience",)
