"""Tolerant parsing and validation of LLM decision replies."""

from __future__ import annotations

import asyncio
import dataclasses
import json
from typing import Any

import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

from simulation.decisions.base import LEVELS
from simulation.decisions.llm.client import ChatClient
from simulation.decisions.llm.parsing import (
    DecisionReply,
    ReplyFormatError,
    normalize_level,
    parse_decision,
    parse_reply,
    validate_reply,
)
from simulation.decisions.llm.testing import DEFAULT_DECISION, FakeOpenAIServer

REPLY = {
    "skill": "buy_insurance",
    "parameters": {"coverage": "building"},
    "constructs": {
        "TP": {"level": "H", "explanation": "We flooded twice in five years."},
        "CP": {"level": "M", "explanation": "The premium is 2% of income."},
    },
    "justification": "Insurance is affordable and the threat is real.",
}
TEXT = json.dumps(REPLY)
SKILLS = ("do_nothing", "buy_insurance", "elevate_house", "relocate")


def test_plain_json() -> None:
    reply = parse_reply(TEXT)
    assert reply == DecisionReply(
        skill="buy_insurance",
        parameters={"coverage": "building"},
        tp_level="H",
        tp_explanation="We flooded twice in five years.",
        cp_level="M",
        cp_explanation="The premium is 2% of income.",
        justification="Insurance is affordable and the threat is real.",
        warnings=[],
    )
    with pytest.raises(dataclasses.FrozenInstanceError):
        reply.skill = "relocate"  # type: ignore[misc]


@pytest.mark.parametrize(
    "content",
    [
        f"```json\n{TEXT}\n```",
        f"```\n{TEXT}\n```",
        f"Here is my answer:\n```JSON\n{json.dumps(REPLY, indent=2)}\n```\nLet me know.",
        f"Sure! After thinking about my memories, my decision is {TEXT} Thank you.",
        f"I considered {{this}} and {{that}}; final answer: {TEXT}",
        f"<think>Should I pick {{elevate}}? No, {{too costly}}.</think>\n{TEXT}",
        f"  \n{TEXT}\n\n",
    ],
    ids=["fenced", "bare-fence", "fence-in-prose", "prose", "braces-in-prose", "think", "space"],
)
def test_wrapped_json_is_found(content: str) -> None:
    assert parse_decision(content) == REPLY


def test_braces_and_quotes_inside_strings() -> None:
    tricky = {
        "skill": "do_nothing",
        "justification": 'A "}" and a "{" in text, plus {nested: {braces}} and \\ escapes }}',
        "constructs": {"TP": {"level": "L", "explanation": "{not json}"}},
    }
    content = f"Answer: {json.dumps(tricky)} -- end {{"
    assert parse_decision(content) == tricky
    assert parse_reply(content).tp_explanation == "{not json}"


def test_object_naming_a_skill_beats_an_earlier_object() -> None:
    content = 'The format is {"level": "H"}. My reply: {"decision": "relocate"}'
    assert parse_decision(content) == {"decision": "relocate"}


@pytest.mark.parametrize(
    "content",
    [
        'Relocating ({"skill": "relocate"}) is too drastic. My answer: {"skill": "do_nothing"}',
        'Reply as {"skill": "<one skill id from the list>"}. Here it is: {"skill": "do_nothing"}',
    ],
    ids=["weighed-then-answered", "format-repeated-then-answered"],
)
def test_the_last_object_naming_a_skill_is_the_answer(content: str) -> None:
    assert parse_decision(content) == {"skill": "do_nothing"}


@pytest.mark.parametrize("closing", ["</think>", "</THINK>"])
def test_thinking_that_only_a_closing_tag_ends_is_not_read(closing: str) -> None:
    # A reasoning model whose opening <think> was part of the prompt.
    content = (
        'Options: maybe {"skill": "relocate"} ... too drastic. What about '
        f'```json\n{{"skill": "elevate_house"}}\n``` no.\n{closing}\n\n{{"skill": "do_nothing"}}'
    )
    assert parse_decision(content) == {"skill": "do_nothing"}
    with pytest.raises(ReplyFormatError, match="empty"):
        parse_decision(f'Let me think {{"skill": "relocate"}}{closing}  ')


def test_nested_objects_are_not_taken_for_the_reply() -> None:
    # The outer object is complete, so its inner constructs are not separate candidates.
    obj = parse_decision('{"constructs": {"TP": {"level": "H"}}, "skill": "relocate"}')
    assert obj["skill"] == "relocate"


def test_trailing_commas_are_repaired() -> None:
    content = '{"skill": "elevate_house", "parameters": {"feet": 3,}, "note": "a, }",}'
    assert parse_decision(content) == {
        "skill": "elevate_house",
        "parameters": {"feet": 3},
        "note": "a, }",
    }


@pytest.mark.parametrize(
    "content",
    [
        "",
        "   ",
        "I would buy insurance.",
        '{"skill": "do_nothing", "constructs": {',
        "[1, 2, 3]",
        "{not: json}",
        "<think>{}</think>",
    ],
)
def test_no_json_object_raises(content: str) -> None:
    with pytest.raises(ReplyFormatError) as caught:
        parse_decision(content)
    assert isinstance(caught.value, ValueError)
    assert len(str(caught.value)) < 200


def test_non_text_reply_raises() -> None:
    with pytest.raises(ReplyFormatError, match="text"):
        parse_decision(None)  # type: ignore[arg-type]


@pytest.mark.parametrize(
    ("spelling", "level"),
    [
        ("VL", "VL"),
        ("very low", "VL"),
        ("Very_Low", "VL"),
        ("VERY-LOW", "VL"),
        ("l", "L"),
        ("Low", "L"),
        ("M", "M"),
        ("medium", "M"),
        ("MODERATE", "M"),
        ("h", "H"),
        ("High", "H"),
        ("vh", "VH"),
        ("very high", "VH"),
        (" VERY_HIGH ", "VH"),
    ],
)
def test_level_synonyms(spelling: str, level: str) -> None:
    assert normalize_level(spelling) == level
    reply = validate_reply({**REPLY, "constructs": {"TP": {"level": spelling}, "CP": spelling}})
    assert (reply.tp_level, reply.cp_level) == (level, level)


@pytest.mark.parametrize("spelling", ["extreme", "", None, 3, "HHH"])
def test_unknown_levels_warn(spelling: object) -> None:
    assert normalize_level(spelling) is None
    reply = validate_reply(
        {**REPLY, "constructs": {**REPLY["constructs"], "TP": {"level": spelling}}}
    )
    assert reply.tp_level is None
    assert reply.cp_level == "M"
    assert any("TP has no valid level" in warning for warning in reply.warnings)


@pytest.mark.parametrize("key", ["skill", "decision", "skill_id", "Skill", "DECISION", "action"])
def test_skill_key_synonyms(key: str) -> None:
    reply = validate_reply({key: "relocate", "justification": "too risky"})
    assert reply.skill == "relocate"


@pytest.mark.parametrize(
    ("written", "skill"),
    [
        ("Buy Insurance", "buy_insurance"),
        (" elevate-house ", "elevate_house"),
        ("DO_NOTHING", "do_nothing"),
    ],
)
def test_skill_spelling_is_normalised(written: str, skill: str) -> None:
    assert validate_reply({"skill": written}).skill == skill


def test_missing_constructs_and_justification_only_warn() -> None:
    reply = validate_reply({"skill": "do_nothing"})
    assert reply.skill == "do_nothing"
    assert reply.parameters == {}
    assert (reply.tp_level, reply.cp_level, reply.justification) == (None, None, "")
    assert reply.warnings == [
        "construct TP missing",
        "construct CP missing",
        "justification missing",
    ]


def test_construct_variants() -> None:
    reply = validate_reply(
        {
            "decision": "elevate_house",
            "Threat_Appraisal": {"Level": "high", "Reason": "deep flood last year"},
            "constructs": {"cp": {"level": "VERY LOW"}},
            "reasoning": "elevation protects us",
            "parameters": "none",
        }
    )
    assert (reply.tp_level, reply.tp_explanation) == ("H", "deep flood last year")
    assert (reply.cp_level, reply.cp_explanation) == ("VL", "")
    assert reply.justification == "elevation protects us"
    assert reply.parameters == {}
    assert "construct CP has no explanation" in reply.warnings
    assert any(warning.startswith("parameters ignored") for warning in reply.warnings)


@pytest.mark.parametrize(
    ("obj", "message"),
    [
        ({"constructs": REPLY["constructs"], "justification": "x"}, 'no "skill"'),
        ({"skill": ""}, "non-empty string"),
        ({"skill": None}, "non-empty string"),
        ({"skill": {"id": "relocate"}}, "non-empty string"),
        (["buy_insurance"], "JSON object"),
    ],
)
def test_invalid_replies_raise(obj: Any, message: str) -> None:
    with pytest.raises(ReplyFormatError, match=message):
        validate_reply(obj)


def test_allowed_skills_are_enforced() -> None:
    assert parse_reply(TEXT, allowed_skills=SKILLS).skill == "buy_insurance"
    with pytest.raises(ReplyFormatError, match="unknown skill 'build_a_moat'; choose one of"):
        validate_reply({"skill": "build_a_moat"}, allowed_skills=SKILLS)


_TEXT = st.text(
    alphabet=st.characters(blacklist_characters="{}`", blacklist_categories=("Cs",)), max_size=40
)


@settings(max_examples=60)
@given(
    before=_TEXT,
    after=_TEXT,
    justification=st.text(max_size=60),
    skill=st.sampled_from(SKILLS),
    tp=st.sampled_from(LEVELS),
)
def test_any_prose_around_a_reply_is_tolerated(
    before: str, after: str, justification: str, skill: str, tp: str
) -> None:
    reply = {"skill": skill, "constructs": {"TP": {"level": tp}}, "justification": justification}
    parsed = parse_decision(f"{before} {json.dumps(reply)} {after}")
    assert parsed == reply


def test_fake_server_content_faults_parse_as_expected() -> None:
    faults = ["ok", "prose", "code_fence", "invalid_json", "unknown_skill"]
    with FakeOpenAIServer(faults=faults) as server:

        async def contents() -> list[str]:
            async with ChatClient(server.base_url, "fake-model", timeout_s=2.0) as client:
                messages = [{"role": "user", "content": "decide"}]
                return [(await client.complete(messages)).content for _ in faults]

        ok, prose, fenced, invalid, unknown = asyncio.run(contents())
    for content in (ok, prose, fenced):
        assert parse_decision(content) == DEFAULT_DECISION
        assert parse_reply(content, SKILLS).skill == "do_nothing"
    assert prose != ok
    assert fenced.startswith("```json")
    with pytest.raises(ReplyFormatError):
        parse_reply(invalid, SKILLS)
    assert parse_reply(unknown).skill == "build_a_moat"
    with pytest.raises(ReplyFormatError, match="unknown skill"):
        parse_reply(unknown, SKILLS)
