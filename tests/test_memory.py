"""Tests for simulation.memory: seed 000 section 7 ported to the public API, plus the contract."""

from __future__ import annotations

import json
import math
import re

import numpy as np
import pytest

from simulation.memory import (
    CognitiveMemory,
    EmbeddingRelevance,
    ReflectionDraft,
    ReflectionSettings,
    RetentionSettings,
    RetrievalSettings,
    RuleBasedReflector,
    ScoredMemory,
)
from simulation.memory.reflection import flood_experience
from simulation.memory.relevance import tokenize

# --------------------------------------------------------------- seed 000 section 7.1 (unit)


def test_memory_add_working():
    mem = CognitiveMemory(agent_id="H001")
    for i in range(12):
        mem.add_working(f"Event {i}", importance=0.5)
    assert len(mem.working) == 10
    contents = [m.content for m in mem.working]
    assert "Event 0" not in contents
    assert "Event 1" not in contents
    assert contents[0] == "Event 2"  # oldest first


def test_memory_add_episodic():
    mem = CognitiveMemory(agent_id="H001")
    mem.add_episodic("Major flood", importance=0.9, year=3)
    assert len(mem.episodic) == 1
    assert mem.episodic[0].tags == ()
    assert mem.episodic[0].year == 3


def test_memory_consolidation():
    mem = CognitiveMemory(agent_id="H001")
    mem.add_working("Low importance", importance=0.3)
    mem.add_working("High importance", importance=0.8)
    assert mem.consolidate() == 1
    assert [m.content for m in mem.episodic] == ["High importance"]


def test_memory_retrieval_priority():
    mem = CognitiveMemory(agent_id="H001")
    mem.add_episodic("Old event", importance=0.9, year=1)
    mem.add_working("Recent event", importance=0.5, year=5)
    assert mem.retrieve(top_k=2, current_year=5) == ["Recent event", "Old event"]


def test_memory_retrieval_decay_follows_the_formula():
    # DESIGN.md 9.5: 0.9 * 0.95**9 = 0.567 > 0.5, so the year-1 event still ranks first.
    mem = CognitiveMemory(agent_id="H001")
    mem.add_episodic("Year 1 event", importance=0.9, year=1)
    mem.add_episodic("Year 10 event", importance=0.5, year=10)
    scored = mem.retrieve_scored(top_k=2, current_year=10)
    assert [s.item.content for s in scored] == ["Year 1 event", "Year 10 event"]
    assert scored[0].score == pytest.approx(0.9 * 0.95**9)
    assert scored[1].score == pytest.approx(0.5)


def test_memory_retrieval_decay_lets_recent_events_win_when_old_enough():
    mem = CognitiveMemory(agent_id="H001")
    mem.add_episodic("Year 1 event", importance=0.9, year=1)
    mem.add_episodic("Year 20 event", importance=0.5, year=20)
    # 0.9 * 0.95**19 = 0.34 < 0.5
    assert mem.retrieve(top_k=2, current_year=20)[0] == "Year 20 event"


# ---------------------------------------------------------- seed 000 section 7.2 (integration)


def test_memory_with_flood_decision_cycle():
    mem = CognitiveMemory("H001")
    mem.update_after_flood(damage=50_000, year=1)
    assert len(mem.episodic) == 1
    memories = mem.retrieve(top_k=5, current_year=2)
    assert "flood" in memories[0].lower()
    mem.update_after_decision("buy_insurance", year=2)
    assert len(mem.working) == 1
    assert mem.working[0].importance == 0.7


def test_memory_serialization_round_trip_through_json():
    mem = CognitiveMemory(agent_id="H001")
    mem.add_episodic("Event 1", importance=0.9, year=1)
    mem.add_working("Event 2", importance=0.5, year=2)
    restored = CognitiveMemory.from_dict(json.loads(json.dumps(mem.to_dict())))
    assert [m.content for m in restored.working] == ["Event 2"]
    assert [m.content for m in restored.episodic] == ["Event 1"]
    assert restored.retrieve(5, 3) == mem.retrieve(5, 3)


def test_memories_sharing_a_text_pool_hold_one_copy_of_equal_texts():
    pool: dict[str, str] = {}
    first, second = CognitiveMemory("H001", texts=pool), CognitiveMemory("H002", texts=pool)
    # Built at run time, as rendered texts are: equal strings, distinct objects.
    texts = ["".join(("Year 3: I purchased ", "flood insurance")) for _ in range(3)]
    assert texts[0] is not texts[1]
    first.add_working(texts[0], 0.5, 3)
    second.add_episodic(texts[1], 0.9, 3)
    second.add_working(texts[2], 0.5, 3)
    items = [*first.working, *second.episodic, *second.working]
    assert all(item.content is items[0].content for item in items)
    assert list(pool) == ["Year 3: I purchased flood insurance"]
    # Without a pool every memory keeps the text it was given.
    alone = CognitiveMemory("H003")
    alone.add_working(texts[2], 0.5, 3)
    assert alone.working[0].content is texts[2]
    assert alone.texts is None


def test_restored_memories_join_the_text_pool():
    mem = CognitiveMemory("H001")
    mem.add_episodic("Year 1: A major flood caused $90,000 in damages", 0.9, 1)
    pool: dict[str, str] = {}
    snapshot = json.loads(json.dumps(mem.to_dict()))
    restored = [CognitiveMemory.from_dict(snapshot, texts=pool) for _ in range(2)]
    assert restored[0].episodic[0].content is restored[1].episodic[0].content
    assert restored[0].texts is pool
    assert list(pool) == ["Year 1: A major flood caused $90,000 in damages"]


# ----------------------------------------------------------------------- convenience methods


def test_update_after_flood_text_and_routing():
    mem = CognitiveMemory("H001")
    item = mem.update_after_flood(damage=52_340.4, year=3)
    assert item.content == "Year 3: A flood occurred causing $52,340 in damages"
    assert item.importance == 0.9
    assert item.source == "flood"
    assert item.amount == 52_340.4
    assert mem.episodic == (item,)
    assert mem.working == ()


def test_update_after_decision_importance():
    mem = CognitiveMemory("H001")
    wait = mem.update_after_decision("do_nothing", year=4)
    act = mem.update_after_decision("elevate_house", year=4)
    assert wait.content == "Year 4: I decided to do_nothing"
    assert (wait.importance, act.importance) == (0.3, 0.7)
    assert mem.working == (wait, act)


def test_add_experience_routes_by_threshold():
    mem = CognitiveMemory("H001", consolidation_threshold=0.7)
    low = mem.add_experience("minor", importance=0.69)
    high = mem.add_experience("major", importance=0.7)
    assert mem.working == (low,)
    assert mem.episodic == (high,)


def test_item_ids_are_stable_and_unique():
    mem = CognitiveMemory("H007")
    ids = [mem.add_working(f"e{i}", 0.5).id for i in range(5)]
    assert ids == [f"H007:{i}" for i in range(5)]


# ------------------------------------------------------- DESIGN.md section 9 resolutions


def test_consolidation_is_idempotent_and_never_duplicates():
    mem = CognitiveMemory("H001")
    item = mem.add_working("High importance", importance=0.8, year=1)
    assert mem.consolidate() == 1
    assert mem.consolidate() == 0
    assert mem.consolidate() == 0
    assert mem.episodic == (item,)


def test_retrieval_never_returns_an_item_twice_after_consolidation():
    mem = CognitiveMemory("H001")
    mem.add_working("Insured", importance=0.8, year=1)
    mem.consolidate()
    retrieved = mem.retrieve(top_k=5, current_year=2)
    assert retrieved == ["Insured"]
    weighted = mem.retrieve(top_k=5, current_year=2, strategy="weighted")
    assert weighted == ["Insured"]


def test_consolidated_item_evicted_from_episodic_is_not_copied_again():
    mem = CognitiveMemory("H001", episodic_capacity=1)
    first = mem.add_working("first", importance=0.8, year=1)
    mem.consolidate()
    mem.add_episodic("stronger", importance=0.95, year=1)
    assert first not in mem.episodic
    assert mem.consolidate() == 0
    assert [m.content for m in mem.episodic] == ["stronger"]


def test_working_ties_within_a_year_broken_by_importance_then_recency():
    mem = CognitiveMemory("H001")
    mem.add_working("minor flood", importance=0.6, year=3)
    mem.add_working("neighbour insured", importance=0.4, year=3)
    mem.add_working("earlier", importance=0.6, year=2)
    mem.add_working("second minor", importance=0.6, year=3)
    assert mem.retrieve(top_k=4, current_year=3) == [
        "second minor",
        "minor flood",
        "neighbour insured",
        "earlier",
    ]


# ------------------------------------------------------------------------------ retention


def test_episodic_capacity_forgets_lowest_decayed_importance():
    mem = CognitiveMemory("H001", episodic_capacity=2)
    mem.add_episodic("old strong", importance=0.9, year=0)  # 0.9 * .95^-0 key
    mem.add_episodic("new weak", importance=0.5, year=10)
    result = mem.write("new strong", 0.8, 10, store="episodic")
    # at year 10: old strong 0.9*0.95**10 = 0.539 > new weak 0.5
    assert [m.content for m in mem.episodic] == ["old strong", "new strong"]
    assert [(e.item.content, e.store, e.to) for e in result.evictions] == [
        ("new weak", "episodic", None)
    ]


def test_fifo_retention_forgets_oldest():
    mem = CognitiveMemory("H001", episodic_capacity=2, retention=RetentionSettings(policy="fifo"))
    for name in ("a", "b", "c"):
        mem.add_episodic(name, importance=0.9, year=1)
    assert [m.content for m in mem.episodic] == ["b", "c"]


def test_importance_weighted_retention_keeps_rehearsed_memories():
    settings = RetentionSettings(policy="importance_weighted", w_importance=0.5, w_recency=0.5)
    mem = CognitiveMemory("H001", episodic_capacity=2, retention=settings)
    mem.add_episodic("rehearsed", importance=0.5, year=0, tags=["r"])
    mem.add_episodic("ignored", importance=0.55, year=0)
    assert mem.retrieve(top_k=1, current_year=10, tags=["r"]) == ["rehearsed"]
    mem.add_episodic("new", importance=0.6, year=10)
    # rehearsed: .5*.5 + .5*1 = .75; ignored: .5*.55 + .5*.95**10 = .57; decayed importance
    # alone would have forgotten "rehearsed" (0.5 < 0.55).
    assert [m.content for m in mem.episodic] == ["rehearsed", "new"]


def test_pinned_items_are_never_forgotten():
    mem = CognitiveMemory("H001", episodic_capacity=2)
    pinned = mem.add_episodic("survey: flooded in 1998", importance=0.1, year=0, pinned=True)
    for i in range(10):
        mem.add_episodic(f"flood {i}", importance=0.9, year=i)
    assert pinned in mem.episodic
    assert len(mem.episodic) == 2


def test_pinning_more_than_capacity_is_an_error():
    mem = CognitiveMemory("H001", episodic_capacity=1)
    mem.add_episodic("a", 0.5, pinned=True)
    with pytest.raises(ValueError, match="episodic_capacity=1"):
        mem.add_episodic("b", 0.5, pinned=True)
    assert [m.content for m in mem.episodic] == ["a"]


def test_unpinned_item_does_not_stick_when_all_others_are_pinned():
    mem = CognitiveMemory("H001", episodic_capacity=1)
    mem.add_episodic("a", 0.1, pinned=True)
    result = mem.write("b", 0.9, store="episodic")
    assert [m.content for m in mem.episodic] == ["a"]
    assert result.evictions[0].item is result.item


def test_tiered_retention_demotes_and_promotes():
    settings = RetentionSettings(
        policy="tiered", archive_capacity=3, demote_below=0.3, promote_after=2
    )
    mem = CognitiveMemory("H001", episodic_capacity=5, retention=settings)
    faded = mem.add_episodic("flood in year 0", importance=0.4, year=0)
    kept = mem.add_episodic("flood in year 9", importance=0.9, year=9)
    report = mem.end_year(10)  # 0.4 * 0.95**10 = 0.24 < 0.3
    assert faded in mem.archive
    assert faded not in mem.episodic
    assert kept in mem.episodic
    assert (faded.id, "episodic", "archive") in [
        (e.item.id, e.store, e.to) for e in report.evictions
    ]
    # Rehearsal: retrieving the archived memory twice promotes it back.
    for year in (11, 12):
        got = mem.retrieve_scored(top_k=1, current_year=year, sources=["other"], max_year=0)
        assert got[0].item is faded
        assert got[0].source == "archive"
    report = mem.end_year(12)
    assert report.promoted == (faded,)
    assert faded in mem.episodic


@pytest.mark.parametrize("name", ["retrieval", "retention", "reflection"])
def test_a_snapshots_settings_missing_a_field_are_refused_not_defaulted(name):
    """Rebuilding converts nothing: a field left out would take its default unseen."""
    mem = CognitiveMemory("H1")
    mem.update_after_flood(1_000.0, 1)
    data = mem.to_dict()
    dropped = next(iter(data[name]))
    del data[name][dropped]
    with pytest.raises(ValueError, match=f"^memory snapshot of H1: {name}: missing {dropped}$"):
        CognitiveMemory.from_dict(data)


def test_a_memory_exactly_at_the_demotion_line_stays_episodic():
    """Demoted below ``demote_below``, not at it: 0.5 * 0.5**1 is exactly 0.25."""
    tiered = RetentionSettings(policy="tiered", demote_below=0.25, promote_after=2)
    mem = CognitiveMemory("H1", decay_rate=0.5, retention=tiered)
    flood = mem.add_episodic("Year 0: a flood", 0.5, 0)
    assert mem.end_year(1).evictions == ()
    assert mem.episodic == (flood,)
    assert [e.to for e in mem.end_year(2).evictions] == ["archive"]


def test_a_promoted_memory_stays_episodic_as_long_as_a_new_one_would():
    """Rehearsal restarts the decay clock: no need to recall the memory again every year."""
    tiered = RetentionSettings(policy="tiered", demote_below=0.5, promote_after=2)
    mem = CognitiveMemory("H001", decay_rate=0.9, retention=tiered)
    flood = mem.add_episodic("Year 0: a flood", 0.9, 0)
    mem.end_year(6)  # 0.9 * 0.9**6 = 0.48 < 0.5
    assert mem.archive == (flood,)
    for _ in range(2):
        mem.retrieve(current_year=7, top_k=1)
    assert mem.end_year(7).promoted == (flood,)
    (hit,) = mem.retrieve_scored(1, 7)
    assert hit.score == pytest.approx(0.9)  # it decays from year 7 now, not from year 0
    snapshot = json.loads(json.dumps(mem.to_dict()))
    # Never recalled again: kept while 0.9 * 0.9**(year - 7) >= 0.5, to year 12 ...
    for year in range(8, 13):
        report = mem.end_year(year)
        assert report.evictions == ()
        assert mem.episodic == (flood,)
    # ... and demoted again at the first year end below it.
    report = mem.end_year(13)
    assert [(e.item, e.store, e.to) for e in report.evictions] == [(flood, "episodic", "archive")]
    assert mem.archive == (flood,)
    # A checkpoint taken after the promotion resumes the same way.
    restored = CognitiveMemory.from_dict(snapshot)
    assert restored.to_dict() == snapshot
    assert [year for year in range(8, 14) if restored.end_year(year).evictions] == [13]
    assert restored.to_list("archive") == ["Year 0: a flood"]
    # Items never promoted are written as before, so older snapshots read the same.
    assert all("rehearsed" not in item for item in _snapshot()["items"])


def test_a_promoted_memory_still_in_working_memory_is_scored_from_its_rehearsal():
    """One item, one decay clock, whichever store retrieval reads it from."""
    tiered = RetentionSettings(policy="tiered", demote_below=0.3, promote_after=2)
    mem = CognitiveMemory("H1", working_capacity=10, decay_rate=0.5, retention=tiered)
    flood = mem.write("Year 0: a flood", 0.8, 0, store="working").item
    mem.end_year(0)  # consolidated: in working and episodic memory
    mem.end_year(1)
    mem.end_year(2)  # 0.8 * 0.5**2 = 0.2 < 0.3, not recalled: demoted, still in working memory
    assert flood in mem.archive
    assert flood in mem.working
    for _ in range(2):
        mem.retrieve(top_k=1, current_year=3)
    assert mem.end_year(3).promoted == (flood,)
    (hit,) = mem.retrieve_scored(top_k=1, current_year=3)
    assert hit.source == "working"
    assert hit.score == pytest.approx(0.8)  # decayed from year 3, as episodic memory scores it


def test_tiered_overflow_demotes_instead_of_forgetting():
    settings = RetentionSettings(policy="tiered", archive_capacity=1, demote_below=0.0)
    mem = CognitiveMemory("H001", episodic_capacity=1, retention=settings)
    a = mem.add_episodic("a", 0.5, 1)
    b = mem.add_episodic("b", 0.6, 1)
    assert mem.episodic == (b,)
    assert mem.archive == (a,)
    c = mem.add_episodic("c", 0.7, 1)  # b demoted, archive full -> lowest (a) forgotten
    assert mem.episodic == (c,)
    assert mem.archive == (b,)


def test_archives_and_reflections_belong_to_their_household():
    # Memories share empty semantic and archive stores until they first write to one.
    settings = RetentionSettings(policy="tiered", archive_capacity=2, demote_below=0.0)
    reflection = ReflectionSettings(enabled=True, threshold=0.5)
    first = CognitiveMemory("H001", episodic_capacity=1, retention=settings, reflection=reflection)
    second = CognitiveMemory("H002", episodic_capacity=1, retention=settings, reflection=reflection)
    demoted = first.update_after_flood(20_000, 1)
    first.update_after_flood(60_000, 2)
    first.end_year(2)
    assert first.archive == (demoted,)
    assert len(first.semantic) == 1
    assert second.archive == ()
    assert second.semantic == ()
    second.add_episodic("flood in year 3", 0.9, 3)
    second.add_episodic("flood in year 4", 0.95, 4)
    assert [m.content for m in second.archive] == ["flood in year 3"]
    assert first.archive == (demoted,)


def test_round_trip_keeps_semantic_and_archive_memories():
    settings = RetentionSettings(policy="tiered", archive_capacity=2, demote_below=0.0)
    reflection = ReflectionSettings(enabled=True, threshold=0.5)
    mem = CognitiveMemory("H001", episodic_capacity=1, retention=settings, reflection=reflection)
    mem.update_after_flood(20_000, 1)
    mem.update_after_flood(60_000, 2)
    mem.end_year(2)
    restored = CognitiveMemory.from_dict(json.loads(json.dumps(mem.to_dict())))
    for store in ("episodic", "semantic", "archive"):
        assert [m.content for m in getattr(restored, store)] == [
            m.content for m in getattr(mem, store)
        ]
    assert restored.archive
    assert restored.semantic
    assert CognitiveMemory("H003").archive == ()  # the restored stores are the memory's own
    assert CognitiveMemory("H003").semantic == ()
    # A memory restored with an empty archive still gets its own on its first demotion.
    fresh = CognitiveMemory("H002", episodic_capacity=1, retention=settings)
    fresh = CognitiveMemory.from_dict(fresh.to_dict())
    fresh.add_episodic("a", 0.5, 1)
    fresh.add_episodic("b", 0.6, 1)
    assert [m.content for m in fresh.archive] == ["a"]
    assert [m.content for m in restored.archive] == [m.content for m in mem.archive]


# ------------------------------------------------------------------------------ retrieval


def test_retrieval_filters_by_tag_source_and_year():
    mem = CognitiveMemory("H001")
    mem.write("flood 1", 0.9, 1, ["flood"], source="flood")
    mem.write("claim 2", 0.8, 2, ["insurance", "claim"], source="claim")
    mem.write("policy 3", 0.5, 3, ["policy"], source="policy")
    mem.write("flood 4", 0.6, 4, ["flood"], source="flood")
    assert mem.retrieve(10, 5, tags=["flood"]) == ["flood 4", "flood 1"]
    assert mem.retrieve(10, 5, sources=["claim", "policy"]) == ["policy 3", "claim 2"]
    assert set(mem.retrieve(10, 5, min_year=2, max_year=3)) == {"claim 2", "policy 3"}
    assert mem.retrieve(10, 5, tags="insurance", strategy="weighted") == ["claim 2"]


def test_weighted_retrieval_scores_are_min_max_normalised():
    mem = CognitiveMemory("H001", retrieval=RetrievalSettings(strategy="weighted"))
    mem.add_episodic("a", 0.2, 0)
    mem.add_episodic("b", 0.9, 10)
    scored = mem.retrieve_scored(2, 10)
    assert [s.item.content for s in scored] == ["b", "a"]
    assert scored[0].score == pytest.approx(2.0)  # w_recency*1 + w_importance*1
    assert scored[1].score == pytest.approx(0.0)


def test_weighted_recency_is_refreshed_by_access():
    settings = RetrievalSettings(strategy="weighted", w_importance=0.0, w_relevance=0.0)
    control = CognitiveMemory("H001", retrieval=settings)
    mem = CognitiveMemory("H001", retrieval=settings)
    for m in (control, mem):
        m.add_episodic("old", 0.5, 0)
        m.add_episodic("newer", 0.5, 5)
    assert mem.retrieve(1, 10, max_year=0) == ["old"]  # recalling refreshes the old memory
    assert mem.episodic[0].last_access == 10
    assert mem.retrieve(1, 11) == ["old"]
    assert control.retrieve(1, 11) == ["newer"]


def test_query_relevance_picks_matching_memories():
    mem = CognitiveMemory("H001")
    mem.add_episodic("Year 2: Insurance paid $12,000 for my claim", 0.7, 2)
    mem.add_episodic("Year 3: The government raised the elevation subsidy", 0.7, 3)
    mem.add_episodic("Year 3: My neighbour elevated their house", 0.7, 3)
    got = mem.retrieve(1, 4, query="insurance claim payout", w_recency=0.0, w_importance=0.0)
    assert got == ["Year 2: Insurance paid $12,000 for my claim"]


def test_embedder_interface_is_pluggable():
    vocab = {"water": 0, "money": 1}

    def embed(texts):
        out = np.zeros((len(texts), 2))
        for n, text in enumerate(texts):
            for word, dim in vocab.items():
                out[n, dim] += text.count(word)
        return out + 1e-3

    settings = RetrievalSettings(
        strategy="weighted", relevance="embedding", w_recency=0.0, w_importance=0.0
    )
    mem = CognitiveMemory("H001", retrieval=settings, relevance=EmbeddingRelevance(embed))
    mem.add_episodic("water everywhere", 0.9, 1)
    mem.add_episodic("money from the insurer", 0.1, 1)
    assert mem.retrieve(1, 2, query="money") == ["money from the insurer"]
    assert mem.retrieve(1, 2, query="water") == ["water everywhere"]


def test_embedding_relevance_requires_a_scorer():
    with pytest.raises(ValueError, match="embedding"):
        CognitiveMemory("H001", retrieval=RetrievalSettings(relevance="embedding"))


def test_top_k_zero_returns_nothing_and_caps_results():
    mem = CognitiveMemory("H001")
    for i in range(8):
        mem.add_experience(f"e{i}", 0.5 + i * 0.05, i)
    assert mem.retrieve(top_k=0) == []
    assert len(mem.retrieve(top_k=3, current_year=8)) == 3
    assert len(mem.retrieve(top_k=50, current_year=8)) == 8


def test_format_for_prompt_and_to_list():
    mem = CognitiveMemory("H001")
    assert mem.format_for_prompt() == "- (no relevant memories)"
    mem.update_after_flood(1000, 1)
    mem.update_after_decision("buy_insurance", 1)
    assert mem.format_for_prompt(top_k=5, current_year=2) == (
        "- Year 1: I decided to buy_insurance\n- Year 1: A flood occurred causing $1,000 in damages"
    )
    assert mem.to_list() == [
        "Year 1: A flood occurred causing $1,000 in damages",
        "Year 1: I decided to buy_insurance",
    ]
    assert mem.to_list("working") == ["Year 1: I decided to buy_insurance"]


# ----------------------------------------------------------------------------- reflection


def test_reflection_summarises_floods_with_evidence():
    mem = CognitiveMemory("H001", reflection=ReflectionSettings(enabled=True, threshold=1.5))
    f1 = mem.update_after_flood(20_000, 2)
    f2 = mem.update_after_flood(60_000, 5)
    claim = mem.write(
        "Year 5: Insurance paid $40,000 for my claim",
        0.7,
        5,
        ["claim", "approved"],
        source="claim",
        amount=40_000,
    ).item
    report = mem.end_year(5)
    assert len(report.reflections) == 1
    reflection = report.reflections[0]
    assert reflection.source == "reflection"
    assert set(reflection.evidence) == {f1.id, f2.id, claim.id}
    assert "2 floods between years 2 and 5" in reflection.content
    assert "$80,000" in reflection.content
    assert "insurance paid 1 of my 1 claim ($40,000)" in reflection.content
    assert mem.semantic == (reflection,)
    # The accumulator was reset: no new reflection without new experience.
    assert mem.end_year(6).reflections == ()


def test_no_second_reflection_on_the_same_experience():
    """Decisions and neighbours pass the threshold again: the old flood is not reflected twice."""
    mem = CognitiveMemory("H001", reflection=ReflectionSettings(enabled=True, threshold=0.5))
    flood = mem.update_after_flood(60_000, 2)
    (first,) = mem.end_year(2).reflections
    for year in (3, 4, 5):
        mem.write(f"Year {year}: I decided to do_nothing", 0.7, year, source="decision")
        mem.write(f"Year {year}: 1 of my 8 neighbours moved", 0.4, year, source="neighbor")
        assert mem.end_year(year).reflections == ()
    assert mem.semantic == (first,)
    later = mem.update_after_flood(20_000, 6)  # new experience: a new belief
    (second,) = mem.end_year(6).reflections
    assert set(second.evidence) == {flood.id, later.id}
    assert "2 floods between years 2 and 6" in second.content


def test_reflection_below_threshold_writes_nothing():
    mem = CognitiveMemory("H001", reflection=ReflectionSettings(enabled=True, threshold=5.0))
    mem.update_after_flood(20_000, 2)
    assert mem.end_year(2).reflections == ()


def test_importance_adds_up_until_there_is_something_to_reflect_on():
    """Years of decisions pass the threshold with nothing to reflect on; a later flood is."""
    mem = CognitiveMemory("H001", reflection=ReflectionSettings(enabled=True, threshold=3.0))
    for year in range(1, 6):
        mem.write(f"Year {year}: I decided to do_nothing", 0.7, year, source="decision")
        assert mem.end_year(year).reflections == ()
    mem.update_after_flood(60_000, 6)
    assert len(mem.end_year(6).reflections) == 1
    assert mem.end_year(7).reflections == ()  # and only then does the count start again


def test_a_reflector_that_found_nothing_is_asked_again_only_after_new_memories():
    """Past the threshold with nothing to reflect on, quiet years leave the reflector alone."""

    class Counting:
        def __init__(self):
            self.years = []

        def reflect(self, items, year):
            self.years.append(year)
            return RuleBasedReflector().reflect(items, year)

    counting = Counting()
    settings = ReflectionSettings(enabled=True, threshold=1.0)
    mem = CognitiveMemory("H001", reflection=settings, reflector=counting)
    mem.write("Year 1: I decided to do_nothing", 0.7, 1, source="decision")
    mem.write("Year 1: 2 of my 8 neighbours bought insurance", 0.4, 1, source="neighbor")
    assert mem.end_year(1).reflections == ()  # past the threshold, but no flood or claim
    snapshot = json.loads(json.dumps(mem.to_dict()))
    for year in (2, 3, 4):  # nothing new written
        assert mem.end_year(year).reflections == ()
    assert counting.years == [1]
    mem.write("Year 5: I decided to do_nothing", 0.3, 5, source="decision")
    assert mem.end_year(5).reflections == ()  # something new, still nothing to reflect on
    assert mem.end_year(6).reflections == ()
    assert counting.years == [1, 5]
    mem.update_after_flood(60_000, 7)
    (reflection,) = mem.end_year(7).reflections
    assert reflection.year == 7
    assert reflection.content.startswith("Year 7: I remember 1 flood in year 7")
    assert counting.years == [1, 5, 7]
    # A checkpoint taken after a call that found nothing resumes without repeating it; one
    # written before memories kept track of that asks once more.
    counting.years.clear()
    CognitiveMemory.from_dict(snapshot, reflector=counting).end_year(2)
    assert counting.years == []
    del snapshot["dry_reflection_seq"]
    CognitiveMemory.from_dict(snapshot, reflector=counting).end_year(2)
    assert counting.years == [2]


def test_a_stored_items_importance_changed_later_does_not_corrupt_the_store():
    mem = CognitiveMemory("H", episodic_capacity=2, retention=RetentionSettings(policy="fifo"))
    flood = mem.add_episodic("A flood", 0.9, 1)
    mem.add_episodic("B claim", 0.5, 2)
    flood.importance = 0.3  # a caller's edit: the store still ranks by 0.9
    result = mem.write("C policy", 0.6, 3, store="episodic")
    assert [e.item.content for e in result.evictions] == ["A flood"]
    assert [i.content for i in mem.episodic] == ["B claim", "C policy"]


def test_skill_ids_in_memories_are_words_to_a_query():
    assert tokenize("Year 2: I decided to buy_insurance") == ("decid", "buy", "insur")
    mem = CognitiveMemory("H", retrieval=RetrievalSettings(strategy="weighted"))
    mem.write("Year 2: I decided to buy_insurance", 0.5, 2, source="decision")
    mem.write("Year 2: I decided to elevate_house", 0.5, 2, source="decision")
    (best, *_) = mem.retrieve_scored(1, 2, query="insurance", w_recency=0, w_importance=0)
    assert best.item.content.endswith("buy_insurance")


def test_a_default_query_is_refused_under_spec():
    with pytest.raises(ValueError, match="query: only used by strategy 'weighted'"):
        RetrievalSettings(strategy="spec", query="flood insurance")


def test_an_explicit_spec_retrieval_is_spec_whatever_the_default_query():
    """The settings' query is weighted's default: a call asking for spec gets spec scores."""
    settings = RetrievalSettings(strategy="weighted", query="flood")
    mem = CognitiveMemory("H", decay_rate=0.9, retrieval=settings)
    mem.add_working("Year 1: flood came", 0.3, 1)
    mem.add_episodic("Year 0: big loss", 0.9, 0)
    hits = mem.retrieve_scored(current_year=2, strategy="spec")
    assert [(h.item.content, h.score) for h in hits] == [
        ("Year 1: flood came", pytest.approx(0.3 * 0.9)),
        ("Year 0: big loss", pytest.approx(0.9 * 0.9**2)),
    ]
    weighted = mem.retrieve_scored(current_year=2)  # the settings' strategy, with its query
    assert sorted(h.score for h in weighted) != pytest.approx(sorted(h.score for h in hits))


@pytest.mark.parametrize("weight", ["w_recency", "w_importance", "w_relevance"])
def test_weights_given_to_a_spec_retrieval_are_refused(weight):
    mem = CognitiveMemory("H")
    mem.add_episodic("Year 1: flood", 0.5, 1)
    with pytest.raises(ValueError, match="only read by strategy weighted"):
        mem.retrieve_scored(current_year=2, **{weight: 5.0})
    assert mem.retrieve_scored(current_year=2, strategy="weighted", **{weight: 5.0})


def test_numpy_tags_and_top_k_are_taken_as_python_ones():
    mem = CognitiveMemory("H")
    item = mem.add_working("Year 1: flood", 0.5, 1, tags=np.str_("flood"))
    assert item.tags == ("flood",)
    assert mem.retrieve(np.int64(1), 1) == ["Year 1: flood"]
    with pytest.raises(ValueError, match="top_k must be a non-negative integer"):
        mem.retrieve(True, 1)


def test_custom_reflector_and_semantic_capacity():
    class Counter:
        def reflect(self, items, year):
            return [ReflectionDraft(f"Year {year}: {len(items)} memories", (), ("count",))]

    settings = ReflectionSettings(enabled=True, threshold=0.5, semantic_capacity=2)
    mem = CognitiveMemory("H001", reflection=settings, reflector=Counter())
    for year in range(4):
        mem.add_episodic(f"e{year}", 0.9, year)
        mem.end_year(year)
    assert [m.content for m in mem.semantic] == ["Year 2: 3 memories", "Year 3: 4 memories"]
    assert all("count" in m.tags and "reflection" in m.tags for m in mem.semantic)


# -------------------------------------------------------------------------- seeded memories


def test_seed_memories_are_tagged_and_routed():
    mem = CognitiveMemory("H001")
    gifted = mem.add_seed("Before the simulation my home flooded in 2011", 0.9, 0, ["flood"])
    weak = mem.add_seed("A neighbour once mentioned flood insurance", 0.4, 0)
    assert gifted.source == "seed"
    assert gifted.tags == ("seed", "flood")
    assert gifted in mem.episodic
    assert weak in mem.working
    assert mem.retrieve(5, 1, sources=["seed"]) == [weak.content, gifted.content]


# ------------------------------------------------------------------------------- bad input


@pytest.mark.parametrize(
    ("kwargs", "name"),
    [
        ({"working_capacity": 0}, "working_capacity"),
        ({"working_capacity": -3}, "working_capacity"),
        ({"episodic_capacity": 0}, "episodic_capacity"),
        ({"decay_rate": 0.0}, "decay_rate"),
        ({"decay_rate": 1.5}, "decay_rate"),
        ({"decay_rate": float("nan")}, "decay_rate"),
        ({"consolidation_threshold": -0.1}, "consolidation_threshold"),
        ({"consolidation_threshold": 1.01}, "consolidation_threshold"),
        ({"consolidation_threshold": True}, "consolidation_threshold"),
        ({"decay_rate": True}, "decay_rate"),
    ],
)
def test_bad_constructor_arguments_name_the_argument_and_value(kwargs, name):
    ((_, value),) = kwargs.items()
    with pytest.raises(ValueError, match=name) as err:
        CognitiveMemory("H001", **kwargs)
    assert repr(value) in str(err.value)


@pytest.mark.parametrize(
    "importance", [-0.01, 1.01, float("nan"), True, False, np.True_, np.False_]
)
@pytest.mark.parametrize("method", ["add_working", "add_episodic", "add_experience"])
def test_importance_outside_unit_interval_is_rejected(method, importance):
    """A bool is no importance (True would be stored as 1.0), as settings refuse bools; numpy's
    too (a value taken from a table), which was stored as 1.0."""
    mem = CognitiveMemory("H001")
    with pytest.raises(ValueError, match="importance") as err:
        getattr(mem, method)("x", importance=importance)
    assert repr(importance) in str(err.value)
    assert mem.counts() == {"working": 0, "episodic": 0, "semantic": 0, "archive": 0}


@pytest.mark.parametrize("damage", [-5.0, math.inf, math.nan, True, np.True_])
def test_a_flood_of_negative_or_infinite_damage_is_refused(damage):
    """And a flag passed for the amount ("A flood occurred causing $1 in damages" from True)."""
    mem = CognitiveMemory("H001")
    with pytest.raises(ValueError, match="damage must be a finite number >= 0") as err:
        mem.update_after_flood(damage, 1)
    assert repr(damage) in str(err.value)
    assert mem.counts()["episodic"] == 0


@pytest.mark.parametrize("year", [1.5, 2.0, "3", math.nan, True])
@pytest.mark.parametrize(
    "write",
    [
        lambda mem, year: mem.add_episodic("x", 0.5, year),
        lambda mem, year: mem.add_seed("a flood in the 1990s", 0.5, year),
        lambda mem, year: mem.update_after_flood(1_000.0, year),
        lambda mem, year: mem.update_after_decision("buy_insurance", year),
        lambda mem, year: mem.retrieve(current_year=year),
        lambda mem, year: mem.end_year(year),
    ],
)
def test_a_year_that_is_not_an_integer_is_refused(write, year):
    # int(1.5) would file under year 1 a memory whose text says "Year 1.5"; a NaN year would
    # make every decayed score NaN.
    mem = CognitiveMemory("H001")
    mem.add_episodic("a flood", 0.9, 1)
    with pytest.raises(TypeError, match=r"year must be an integer, got ") as err:
        write(mem, year)
    assert repr(year) in str(err.value)
    assert [item.year for item in mem.episodic] == [1]


def test_a_numpy_integer_year_is_a_year():
    mem = CognitiveMemory("H001")
    item = mem.add_episodic("a flood", 0.9, np.int64(4))
    assert item.year == 4
    assert item.year.__class__ is int
    assert mem.retrieve(current_year=np.int32(5)) == ["a flood"]


@pytest.mark.parametrize("content", [None, 42, b"bytes"])
def test_content_that_is_not_a_string_is_refused(content):
    mem = CognitiveMemory("H001")
    with pytest.raises(TypeError, match="content must be a string"):
        mem.add_working(content, 0.5, 1)
    assert mem.counts()["working"] == 0


def test_negative_top_k_is_rejected():
    mem = CognitiveMemory("H001")
    with pytest.raises(ValueError, match="top_k must be a non-negative integer, got -1"):
        mem.retrieve(top_k=-1)
    with pytest.raises(ValueError, match="top_k"):
        RetrievalSettings(top_k=-2)


def test_bad_settings_are_rejected():
    with pytest.raises(ValueError, match="strategy"):
        RetrievalSettings(strategy="magic")
    with pytest.raises(ValueError, match="policy"):
        RetentionSettings(policy="random")
    with pytest.raises(ValueError, match="threshold"):
        ReflectionSettings(threshold=0.0)
    with pytest.raises(ValueError, match="source"):
        CognitiveMemory("H001").write("x", source="rumour")
    with pytest.raises(ValueError, match="damage"):
        CognitiveMemory("H001").update_after_flood(-5.0, 1)


@pytest.mark.parametrize("value", [math.inf, math.nan])
@pytest.mark.parametrize(
    ("settings", "name"),
    [
        (RetrievalSettings, "w_recency"),
        (RetrievalSettings, "w_relevance"),
        (RetentionSettings, "w_importance"),
        (ReflectionSettings, "threshold"),
    ],
)
def test_weights_and_thresholds_must_be_finite(settings, name, value):
    # An infinite weight swamps every other term (and inf * 0 is NaN): no ranking survives it.
    with pytest.raises(ValueError, match=f"{name} must be a finite number"):
        settings(**{name: value})


@pytest.mark.parametrize(
    ("settings", "name", "value"),
    [
        (RetrievalSettings, "w_recency", True),
        (RetentionSettings, "w_importance", True),
        (RetentionSettings, "demote_below", np.True_),
        (ReflectionSettings, "threshold", True),
        (ReflectionSettings, "enabled", "false"),
        (ReflectionSettings, "enabled", 1),
        (ReflectionSettings, "enabled", None),
    ],
)
def test_settings_of_the_wrong_type_are_refused(settings, name, value):
    # From Python, unlike from a config file, nothing else checks types: the string "false"
    # would have switched reflection on.
    with pytest.raises(ValueError, match=f"{name} must be") as err:
        settings(**{name: value})
    assert repr(value) in str(err.value)


def test_from_dict_rejects_unknown_version():
    data = CognitiveMemory("H001").to_dict()
    data["format_version"] = 99
    with pytest.raises(ValueError, match="format_version"):
        CognitiveMemory.from_dict(data)


def test_an_embedding_cache_that_fills_mid_call_still_answers():
    def embed(texts):
        return np.array([[len(t), 1.0] for t in texts])

    memory = CognitiveMemory(
        "H",
        relevance=EmbeddingRelevance(embed, cache_size=4),
        retrieval=RetrievalSettings(strategy="weighted", relevance="embedding"),
    )
    for text in ("flood a", "flood bb"):
        memory.add_working(text, 0.5, 1)
    assert len(memory.retrieve(top_k=3, current_year=1, query="flood")) == 2
    for text in ("flood ccc", "flood dddd"):  # 3 cached + 2 new texts: the cache is emptied
        memory.add_working(text, 0.5, 1)
    assert len(memory.retrieve(top_k=4, current_year=1, query="flood")) == 4
    with pytest.raises(ValueError, match="cache_size"):
        EmbeddingRelevance(embed, cache_size=-1)


def test_a_single_string_is_one_tag():
    memory = CognitiveMemory("H")
    assert memory.add_episodic("levee breach", 0.9, 1, tags="flood").tags == ("flood",)
    assert memory.retrieve(current_year=1, tags="flood") == ["levee breach"]
    assert memory.add_seed("survey", 0.8, 0, tags="survey").tags == ("seed", "survey")


def test_a_refused_pinned_write_leaves_no_trace():
    memory = CognitiveMemory(
        "H", episodic_capacity=1, reflection=ReflectionSettings(enabled=True, threshold=1.0)
    )
    memory.add_episodic("P", 0.5, 1, pinned=True)
    before = memory.to_dict()
    with pytest.raises(ValueError, match="cannot pin more than 1"):
        memory.add_episodic("P2", 0.9, 99, pinned=True)
    assert memory.to_dict() == before


def test_a_blank_query_ranks_as_no_query():
    memory = CognitiveMemory("H")
    memory.add_working("old minor note", 0.1, 1)
    memory.add_episodic("recent major flood", 0.9, 5)
    spec = memory.retrieve(top_k=2, current_year=5)
    assert memory.retrieve(top_k=2, current_year=5, query=" ") == spec
    with pytest.raises(TypeError, match="query must be a string"):
        memory.retrieve(current_year=5, query=123)


def test_tiered_keeps_what_is_recalled_and_reports_only_lasting_promotions():
    tiered = RetentionSettings(policy="tiered", demote_below=0.3, promote_after=2)
    memory = CognitiveMemory("H", episodic_capacity=5, retention=tiered)
    memory.add_episodic("faint memory", 0.35, 0)
    memory.end_year(5)  # 0.35 * 0.95**5 = 0.27: archived
    assert memory.to_list("archive") == ["faint memory"]
    for year in (6, 7):  # recalled every year: promoted, then kept
        memory.retrieve(current_year=year, top_k=5)
        memory.retrieve(current_year=year, top_k=5)
        memory.end_year(year)
        assert memory.to_list("episodic") == ["faint memory"]
    for year in (8, 9):  # not recalled, but its promotion in year 6 refreshed it: 0.35 * 0.95**3
        memory.end_year(year)
        assert memory.to_list("episodic") == ["faint memory"]
    memory.retrieve(current_year=10, top_k=5)
    memory.end_year(10)  # 0.35 * 0.95**4 = 0.285, faint again, but recalled this year: kept
    assert memory.to_list("episodic") == ["faint memory"]
    memory.end_year(11)  # faint and not recalled: it fades to the archive again
    assert memory.to_list("archive") == ["faint memory"]
    full = CognitiveMemory("H", episodic_capacity=2, retention=tiered)
    full.add_episodic("faint memory", 0.35, 0)
    full.end_year(5)
    full.add_episodic("strong A", 0.9, 6)
    full.add_episodic("strong B", 0.9, 6)
    for _ in range(2):
        full.retrieve(current_year=6, top_k=5, max_year=0)
    # Promoted into a full memory, it is the first to go again: not a promotion.
    assert full.end_year(6).promoted == ()
    assert full.to_list("archive") == ["faint memory"]


def _snapshot() -> dict:
    memory = CognitiveMemory("H", episodic_capacity=2)
    memory.add_episodic("flood", 0.9, 1)
    memory.add_episodic("claim", 0.8, 2)
    memory.add_working("premium", 0.3, 2)
    return json.loads(json.dumps(memory.to_dict()))


@pytest.mark.parametrize(
    ("corrupt", "problem"),
    [
        (lambda d: d.update(format_version=True), "format_version must be 1"),
        (lambda d: d.pop("clock"), "memory snapshot: clock: Field required"),
        (lambda d: d.update(items=None), "items: Input should be a valid list (got None)"),
        # Values a plain conversion would take and change: refused by their type.
        (
            lambda d: d["items"][0].update(tags="flood"),
            "items.0.tags: Input should be a valid list",
        ),
        (
            lambda d: d["items"][1].update(pinned="false"),
            "items.1.pinned: Input should be a valid bo",
        ),
        (lambda d: d["items"][0].update(content=2), "items.0.content: Input should be a valid str"),
        (lambda d: d["items"][0].update(seq="0"), "items.0.seq: Input should be a valid integer"),
        (lambda d: d.update(clock=1.5), "clock: Input should be a valid integer (got 1.5)"),
        (lambda d: d["stores"].update(working="2"), "stores.working: Input should be a valid list"),
        (
            lambda d: d["items"][0].update(pined=True),
            "items.0.pined: unknown key",
        ),
        (lambda d: d["stores"]["episodic"].append(99), "stores name seq 99"),
        (lambda d: d["stores"]["working"].clear(), "item seq 2 is in no store"),
        (
            lambda d: d.update(demoted_hits={"01": 1}),
            "demoted_hits.01: String should match pattern",
        ),
        (lambda d: d["stores"]["working"].append(2), "working memory holds an item twice"),
        (lambda d: d["stores"]["archive"].append(0), "held twice by the long-term stores"),
        (lambda d: d.update(next_seq=0), "next_seq 0 is not above every item's seq"),
        (lambda d: d["items"][0].update(importance=5), "importance is outside [0, 1]"),
        (lambda d: d["items"][0].update(source="bogus"), "source is not one of"),
        (lambda d: d["items"].append(dict(d["items"][0])), "two items share a sequence number"),
        (lambda d: d.update(episodic_capacity=1), "more items than its capacity"),
        (lambda d: d["stores"]["episodic"].reverse(), "not in rank order"),
        (lambda d: d["items"][0].update(rehearsed=0), "rehearsed before its year"),
        (lambda d: d.update(dry_reflection_seq=9), "dry_reflection_seq 9 is above next_seq 3"),
    ],
)
def test_a_corrupt_snapshot_is_refused_by_name(corrupt, problem):
    data = _snapshot()
    CognitiveMemory.from_dict(data)  # the snapshot itself restores
    corrupt(data)
    with pytest.raises(ValueError, match=re.escape(problem)):
        CognitiveMemory.from_dict(data)


def test_a_snapshot_already_checked_is_not_checked_again():
    """A checkpoint checks every household's snapshot as it reads it (checked=True)."""
    data = _snapshot()
    data["items"][1]["pinned"] = 1  # a truthy value: what the type check alone would refuse
    with pytest.raises(ValueError, match="pinned"):
        CognitiveMemory.from_dict(data)
    restored = CognitiveMemory.from_dict(data, checked=True)
    assert {i.content: i.pinned for i in restored.episodic} == {"flood": False, "claim": True}
    data["items"][0]["importance"] = 5  # the memory's own checks still run
    with pytest.raises(ValueError, match="importance is outside"):
        CognitiveMemory.from_dict(data, checked=True)


def test_retrieval_without_a_year_is_at_the_latest_year_the_memory_has_seen():
    """Not year 0: items written in later years would be younger than the retrieval."""
    mem = CognitiveMemory("H", decay_rate=0.95)
    mem.add_episodic("Year 30: a flood", 0.9, 30)
    mem.add_episodic("Year 10: a claim", 0.8, 10)
    assert mem.retrieve_scored(2) == mem.retrieve_scored(2, 30)
    assert all(hit.score <= hit.item.importance for hit in mem.retrieve_scored(2))
    calendar = CognitiveMemory(
        "H", decay_rate=0.5, retrieval=RetrievalSettings(strategy="weighted")
    )
    calendar.add_episodic("Year 2024: a flood", 0.9, 2024)
    assert calendar.retrieve(1) == ["Year 2024: a flood"]  # overflowed at year 0


def test_a_reflection_on_floods_of_unknown_damage_does_not_say_zero_dollars():
    """A survey flood (seeded, no amount) and a flood written without its damage are floods of
    unknown damage, not of $0."""
    mem = CognitiveMemory("H001", reflection=ReflectionSettings(enabled=True, threshold=1.0))
    mem.add_seed("Year 0: the 2017 flood reached our street", 0.8, 0, tags=("flood",))
    mem.update_after_flood(60_000, 3)
    mem.add_episodic("Year 4: a flood", 0.9, 4, tags=("flood",), source="flood")
    mem.write("Year 3: insurance paid my claim", 0.7, 3, ("claim",), source="claim")
    (reflection,) = mem.end_year(4).reflections
    assert reflection.content == (
        "Year 4: I remember 3 floods between years 0 and 4; 1 damaged my home, $60,000 in "
        "total, and I do not know the damage of 2; insurance paid 1 of my 1 claim."
    )


def test_a_promotion_displaced_by_a_later_one_in_the_same_year_end_is_not_reported():
    """Two archived memories due at once with room for one: only the survivor was promoted."""
    tiered = RetentionSettings(policy="tiered", demote_below=0.5, promote_after=1)
    memory = CognitiveMemory(
        "H", working_capacity=1, episodic_capacity=2, decay_rate=0.5, retention=tiered
    )
    older = memory.add_episodic("flood A", 0.5, 0)
    newer = memory.add_episodic("flood B", 0.5, 0)
    memory.end_year(0)
    memory.end_year(1)  # both faded to 0.25: archived
    assert set(memory.archive) == {older, newer}
    memory.add_episodic("lasting", 0.5, 2, pinned=True)
    memory.retrieve(current_year=2, top_k=3)  # both rehearsed once: both due
    report = memory.end_year(2)
    # Equal scores after the promotion: the newer memory keeps the one free place.
    assert report.promoted == (newer,)
    assert newer in memory.episodic
    assert older in memory.archive
    promoted_then_displaced = [
        e.item for e in report.evictions if (e.store, e.to) == ("episodic", "archive")
    ]
    assert promoted_then_displaced == [older]


# ------------------------------------------------------------------- public API contract


@pytest.mark.parametrize(
    ("name", "value", "expected"),
    [
        ("retention", "fifo", "RetentionSettings, got str 'fifo'"),
        ("reflection", {"enabled": True}, "ReflectionSettings, got dict {'enabled': True}"),
        ("retrieval", {"strategy": "weighted"}, "RetrievalSettings, got dict"),
        ("retrieval", RetentionSettings(), "RetrievalSettings, got RetentionSettings"),
    ],
)
def test_settings_of_the_wrong_type_are_refused_at_construction(name, value, expected):
    """Accepted, a string or mapping would fail only at the first overflow or year end."""
    with pytest.raises(TypeError, match=f"^{name}: expected a {re.escape(expected)}"):
        CognitiveMemory("H1", **{name: value})


@pytest.mark.parametrize(
    ("name", "value"),
    [
        ("working_capacity", 2),
        ("episodic_capacity", 2),
        ("decay_rate", 0.1),
        ("retrieval", RetrievalSettings(strategy="weighted")),
        ("retention", RetentionSettings(policy="fifo")),
        ("reflection", ReflectionSettings(enabled=True)),
    ],
)
def test_settings_fixed_at_construction_cannot_be_reassigned(name, value):
    """The stores are sized and ranked by them when made: a new value would be half honoured."""
    mem = CognitiveMemory("H1", episodic_capacity=5)
    before = getattr(mem, name)
    with pytest.raises(AttributeError, match=f"{name} is fixed at construction.*new memory"):
        setattr(mem, name, value)
    assert getattr(mem, name) == before
    for year in range(8):
        mem.add_episodic(f"flood {year}", 0.9, year)
    assert len(mem.episodic) == 5


def test_the_consolidation_threshold_stays_settable_and_is_checked():
    """Consolidation honours a moved threshold; a bad one is refused where it is set."""
    mem = CognitiveMemory("H1")
    note = mem.add_working("a note", 0.4, 1)
    for bad in (1.5, math.nan, True, "0.3"):
        with pytest.raises((ValueError, TypeError), match="consolidation_threshold"):
            mem.consolidation_threshold = bad
    assert mem.consolidation_threshold == 0.7
    mem.consolidation_threshold = 0.3
    assert mem.consolidation_threshold == 0.3
    assert mem.consolidate_detailed().transferred == (note,)


@pytest.mark.parametrize(
    ("options", "match"),
    [
        ({"w_recency": math.nan}, "w_recency must be a finite number >= 0, got nan"),
        ({"w_relevance": -1}, "w_relevance must be a finite number >= 0, got -1"),
        ({"w_importance": math.inf}, "w_importance must be a finite number >= 0, got inf"),
        ({"sources": ["bogus"]}, r"sources must be among \[.*'flood'.*\], got \['bogus'\]"),
        ({"sources": "bogus"}, r"sources must be among .*, got \['bogus'\]"),
    ],
)
@pytest.mark.parametrize("method", ["retrieve", "retrieve_scored"])
def test_per_call_retrieval_options_are_checked_as_settings_are(method, options, match):
    mem = CognitiveMemory("H1", retrieval=RetrievalSettings(strategy="weighted"))
    mem.update_after_flood(1_000.0, 1)
    with pytest.raises(ValueError, match=match):
        getattr(mem, method)(3, 2, **options)


@pytest.mark.parametrize(
    ("call", "match"),
    [
        (lambda mem: mem.retrieve(3, 2, min_year="3"), "min_year must be an integer, got '3'"),
        (lambda mem: mem.retrieve(3, 2, max_year=2.5), "max_year must be an integer, got 2.5"),
        (lambda mem: mem.add_working("x", "0.5"), r"importance must be a number .*, got '0.5'"),
        (lambda mem: mem.add_experience("x", "0.5"), r"importance must be a number .*'0.5'"),
        (lambda mem: mem.add_episodic("x", None), r"importance must be a number .*, got None"),
        (lambda mem: mem.add_working("x", 0.5, 2, tags=5), r"tags must be a string or a list .*5"),
        (lambda mem: mem.add_working("x", 0.5, 2, [1, 2]), r"tags must be strings, got 1 in"),
        (lambda mem: mem.add_working("x", 0.5, 2, {"a": 1}), r"tags must be .*got a mapping"),
        (lambda mem: mem.add_seed("x", 0.5, 2, tags=5), r"tags must be a string or a list .*5"),
        (lambda mem: mem.update_after_flood("100", 2), r"damage must be .*, got '100'$"),
        (lambda mem: mem.update_after_decision(None, 2), r"decision must be a skill id .*None$"),
    ],
)
def test_mistyped_filters_and_importances_raise_a_clear_type_error(call, match):
    mem = CognitiveMemory("H1")
    mem.update_after_flood(1_000.0, 1)
    with pytest.raises(TypeError, match=match):
        call(mem)
    assert mem.counts()["working"] == 0


def test_a_write_refused_for_its_tags_leaves_no_trace_and_tags_read_back():
    """No sequence number, clock or reflection progress spent; a snapshot loads again."""
    mem = CognitiveMemory("H1")
    mem.update_after_flood(1_000.0, 1)
    before = mem.to_dict()
    with pytest.raises(TypeError, match="tags"):
        mem.write("x", 0.9, 7, tags=[1, 2])
    assert mem.to_dict() == before
    mem.write("y", 0.4, 2, tags=("a", "b"))
    mem.add_seed("z", 0.2, 2, tags="a")
    assert CognitiveMemory.from_dict(mem.to_dict()).to_dict() == mem.to_dict()
    assert [item.tags for item in mem.working] == [("a", "b"), ("seed", "a")]


def test_a_year_window_that_holds_no_year_is_refused():
    mem = CognitiveMemory("H1")
    mem.update_after_flood(1_000.0, 1)
    with pytest.raises(ValueError, match=r"min_year \(5\) is after max_year \(1\)"):
        mem.retrieve(3, 2, min_year=5, max_year=1)
    assert len(mem.retrieve(3, 2, min_year=1, max_year=1)) == 1


@pytest.mark.parametrize("strategy", ["spec", "weighted"])
def test_an_explicit_year_before_the_latest_seen_retrieves_as_the_default_does(strategy):
    """No item is younger than a retrieval: a score never exceeds the item's importance."""
    retrieval = RetrievalSettings(strategy=strategy)
    early, default = (CognitiveMemory("H1", retrieval=retrieval) for _ in range(2))
    for mem in (early, default):
        mem.update_after_flood(1_000.0, 5)
        mem.add_working("a note", 0.4, 3)
    got = early.retrieve_scored(5, current_year=2)
    expected = default.retrieve_scored(5)
    assert [(h.item.content, h.score, h.source) for h in got] == [
        (h.item.content, h.score, h.source) for h in expected
    ]
    assert all(hit.score <= hit.item.importance for hit in got if strategy == "spec")
    assert [hit.item.last_access for hit in got] == [5, 5]


def test_spec_order_is_working_memory_first_then_long_term_by_score():
    """What retrieve_scored documents: under spec, scores need not fall along the list."""
    mem = CognitiveMemory("H1")
    flood = mem.update_after_flood(1_000.0, 3)
    note = mem.add_working("a note", 0.2, 3)
    got = mem.retrieve_scored(2, 3)
    assert [(hit.item, hit.source) for hit in got] == [(note, "working"), (flood, "episodic")]
    assert got[0].score < got[1].score
    weighted = mem.retrieve_scored(2, 3, strategy="weighted")
    assert [hit.item for hit in weighted] == [flood, note]
    assert weighted[0].score >= weighted[1].score


@pytest.mark.parametrize("strategy", ["spec", "weighted"])
def test_a_retrieval_without_record_changes_nothing_a_later_one_reads(strategy):
    """A look from a notebook between years must not change the run."""

    def seen(hits: list[ScoredMemory]) -> list[tuple[str, float, str, int, int]]:
        return [
            (h.item.content, h.score, h.source, h.item.access_count, h.item.last_access)
            for h in hits
        ]

    looked, untouched = (
        CognitiveMemory("H1", retrieval=RetrievalSettings(strategy=strategy)) for _ in range(2)
    )
    for mem in (looked, untouched):
        mem.update_after_flood(1_000.0, 1)
        mem.add_working("a note", 0.4, 2)
    assert seen(looked.retrieve_scored(5, 3, record=False)) == seen(
        untouched.retrieve_scored(5, 3, record=False)
    )
    items = looked.episodic + looked.working
    assert [(i.access_count, i.last_access) for i in items] == [(0, 1), (0, 2)]
    assert seen(looked.retrieve_scored(5, 4)) == seen(untouched.retrieve_scored(5, 4))
    assert [(i.access_count, i.last_access) for i in items] == [(1, 4), (1, 4)]


@pytest.mark.parametrize(
    ("options", "error"),
    [
        ({"strategy": "bogus"}, ValueError),
        ({"sources": ["bogus"]}, ValueError),
        ({"strategy": "weighted", "w_recency": math.nan}, ValueError),
        ({"min_year": "x"}, TypeError),
    ],
)
def test_a_retrieval_of_nothing_checks_its_options_too(options, error):
    """A mistake is one at any top_k: found with 0, it is not hidden until top_k grows."""
    mem = CognitiveMemory("H1")
    mem.update_after_flood(1_000.0, 1)
    with pytest.raises(error):
        mem.retrieve_scored(0, 2, **options)
    assert mem.retrieve_scored(0, 2) == []


# ------------------------------------------------- rules no earlier test held (mutation tests)


def test_lowering_the_threshold_after_a_consolidation_moves_items_left_below_it():
    mem = CognitiveMemory("H")
    mem.add_working("big", 0.8, 1)
    mem.add_working("small", 0.5, 1)
    assert mem.consolidate() == 1  # 'big' moves, 'small' stays below 0.7
    mem.consolidation_threshold = 0.4
    assert mem.consolidate() == 1  # 'small' is due now
    assert [i.content for i in mem.episodic] == ["big", "small"]


def test_a_working_item_just_above_the_previous_best_is_consolidated_when_due():
    mem = CognitiveMemory("H")
    mem.add_working("a", 0.5, 1)
    mem.add_working("b", 0.55, 1)
    mem.consolidation_threshold = 0.55
    assert mem.consolidate() == 1
    assert [i.content for i in mem.episodic] == ["b"]


class _FixedImportanceReflector:
    def reflect(self, items, year):
        return [ReflectionDraft("belief", (items[0].id,), (), importance=0.25)]


def test_a_drafts_importance_is_the_stored_reflections_importance():
    """A custom or language-model reflector's importance is not replaced by the default."""
    mem = CognitiveMemory(
        "H",
        reflection=ReflectionSettings(enabled=True, threshold=0.5),
        reflector=_FixedImportanceReflector(),
    )
    mem.add_episodic("x", 0.9, 1)
    assert [i.importance for i in mem.end_year(1).reflections] == [0.25]


def test_a_tag_filter_keeps_items_carrying_any_one_of_the_tags():
    mem = CognitiveMemory("H")
    mem.add_episodic("flooded", 0.9, 1, tags=("flood",))
    mem.add_episodic("claimed", 0.8, 1, tags=("claim",))
    mem.add_episodic("other", 0.8, 1, tags=("policy",))
    got = mem.retrieve(top_k=5, current_year=1, tags=["flood", "claim"])
    assert sorted(got) == ["claimed", "flooded"]


def test_a_snapshot_whose_next_seq_equals_an_items_seq_is_refused():
    """The next write would reuse that item's id, in the audit trail and evidence links."""
    mem = CognitiveMemory("H")
    mem.add_working("a", 0.5, 1)
    mem.add_working("b", 0.5, 1)
    data = mem.to_dict()
    data["next_seq"] = 1  # items 0 and 1 exist
    with pytest.raises(ValueError, match="next_seq"):
        CognitiveMemory.from_dict(data)


def test_a_snapshot_with_working_memory_one_over_capacity_is_refused():
    mem = CognitiveMemory("H", working_capacity=3)
    for n in range(3):
        mem.add_working(f"w{n}", 0.5, 1)
    data = mem.to_dict()
    data["working_capacity"] = 2
    with pytest.raises(ValueError, match="over its capacity"):
        CognitiveMemory.from_dict(data)


def test_a_recency_decay_of_zero_is_refused():
    """Weighted retrieval reads a 0 as unset and would fall back to decay_rate unsaid."""
    with pytest.raises(ValueError, match="recency_decay"):
        RetrievalSettings(strategy="weighted", recency_decay=0.0)


def test_a_flood_without_damage_is_not_counted_as_damaging_in_a_reflection():
    content, _ = flood_experience(5, [1, 3], [0.0, 1000.0], [], [])
    assert "1 damaged my home, $1,000 in total" in content


def test_a_reflection_says_when_it_knows_only_some_payouts():
    content, _ = flood_experience(5, [], [], [False, False], [500.0, None])
    assert "insurance paid 2 of my 2 claims ($500 that I know of)" in content
