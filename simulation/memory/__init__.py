"""Household cognitive memory: working, episodic, semantic and archive stores.

The public entry point is :class:`CognitiveMemory`; :class:`MemoryItem` is one remembered
experience and :class:`ScoredMemory` one retrieval result. Settings objects tune retrieval,
retention and reflection; relevance scorers and reflectors are pluggable.
"""

from __future__ import annotations

from simulation.memory.cognitive import (
    FORMAT_VERSION,
    CognitiveMemory,
    Consolidation,
    Eviction,
    WriteResult,
    YearEnd,
)
from simulation.memory.item import SOURCES, STORES, MemoryItem, ScoredMemory
from simulation.memory.reflection import ReflectionDraft, Reflector, RuleBasedReflector
from simulation.memory.relevance import (
    Embedder,
    EmbeddingRelevance,
    KeywordRelevance,
    RelevanceScorer,
)
from simulation.memory.settings import (
    RETENTION_POLICIES,
    RETRIEVAL_STRATEGIES,
    ReflectionSettings,
    RetentionSettings,
    RetrievalSettings,
)

__all__ = [
    "FORMAT_VERSION",
    "RETENTION_POLICIES",
    "RETRIEVAL_STRATEGIES",
    "SOURCES",
    "STORES",
    "CognitiveMemory",
    "Consolidation",
    "Embedder",
    "EmbeddingRelevance",
    "Eviction",
    "KeywordRelevance",
    "MemoryItem",
    "ReflectionDraft",
    "ReflectionSettings",
    "Reflector",
    "RelevanceScorer",
    "RetentionSettings",
    "RetrievalSettings",
    "RuleBasedReflector",
    "ScoredMemory",
    "WriteResult",
    "YearEnd",
]
