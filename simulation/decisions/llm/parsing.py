"""Tolerant parsing of LLM decision replies.

Models wrap their JSON in prose, in Markdown code fences or behind ``<think>`` blocks, spell
levels out (``"High"``, ``"very low"``) and rename keys (``decision`` for ``skill``).
:func:`parse_decision` finds the JSON object in such a reply; :func:`validate_reply` checks it
against the reply contract and normalises it::

    {"skill": "buy_insurance", "parameters": {},
     "constructs": {"TP": {"level": "H", "explanation": "..."},
                    "CP": {"level": "M", "explanation": "..."}},
     "justification": "..."}

A missing skill is an error (:class:`ReplyFormatError`, whose short message can be fed back to
the model); missing or odd constructs and justification are tolerated and reported in
``warnings``.
"""

from __future__ import annotations

import json
import re
from collections.abc import Collection, Mapping
from dataclasses import dataclass, field
from typing import Any, Final

from simulation.decisions.base import LEVELS

__all__ = [
    "LEVEL_SYNONYMS",
    "DecisionReply",
    "ReplyFormatError",
    "normalize_level",
    "normalize_skill",
    "parse_decision",
    "parse_reply",
    "validate_reply",
]

#: Spellings of the appraisal levels accepted in replies (compared upper-cased, with spaces and
#: hyphens as underscores).
LEVEL_SYNONYMS: Final[Mapping[str, str]] = {
    **{level: level for level in LEVELS},
    "VERY_LOW": "VL",
    "LOW": "L",
    "MEDIUM": "M",
    "MODERATE": "M",
    "MED": "M",
    "HIGH": "H",
    "VERY_HIGH": "VH",
}

#: Keys accepted for the chosen skill, in order of preference.
_SKILL_KEYS: Final = ("skill", "skill_id", "decision", "action")
_CONSTRUCT_KEYS: Final = {
    "TP": ("tp", "threat", "threat_appraisal"),
    "CP": ("cp", "coping", "coping_appraisal"),
}
_JUSTIFICATION_KEYS: Final = ("justification", "reasoning", "reason", "rationale")
_EXPLANATION_KEYS: Final = ("explanation", "reason", "reasoning", "why")

_THINK = re.compile(r"<think>.*?(?:</think>|\Z)", re.DOTALL | re.IGNORECASE)
# Reasoning models served with the opening tag already in the prompt reply with the closing tag
# only: everything before it is thinking.
_THINK_END = re.compile(r"</think>", re.IGNORECASE)
_FENCE = re.compile(r"```[ \t]*(?:json|JSON|javascript|js)?[ \t]*\n?(.*?)```", re.DOTALL)
_SKILL_SEPARATORS = re.compile(r"[\s\-]+")
#: Longest stretch of a reply quoted in an error message.
_QUOTE = 80

_DECODER = json.JSONDecoder()


class ReplyFormatError(ValueError):
    """A reply that does not satisfy the reply contract (the message says why, briefly).

    Attributes:
        skill: The skill the reply named (normalised) when that skill is what was refused (not
            one of the allowed skills), so that the audit trail can name it; else ``None``.
    """

    def __init__(self, message: str, skill: str | None = None) -> None:
        super().__init__(message)
        self.skill = skill


@dataclass(frozen=True, slots=True)
class DecisionReply:
    """A validated, normalised decision reply.

    Attributes:
        skill: The chosen skill id (stripped, lower-case, spaces and hyphens as underscores).
        parameters: Skill parameters (empty when none were given).
        tp_level: Threat appraisal level (one of ``LEVELS``), ``None`` if missing or unreadable.
        tp_explanation: Threat appraisal explanation (empty if missing).
        cp_level: Coping appraisal level, ``None`` if missing or unreadable.
        cp_explanation: Coping appraisal explanation (empty if missing).
        justification: Why the skill was chosen (empty if missing).
        warnings: What was missing or had to be guessed.
    """

    skill: str
    parameters: dict[str, Any] = field(default_factory=dict)
    tp_level: str | None = None
    tp_explanation: str = ""
    cp_level: str | None = None
    cp_explanation: str = ""
    justification: str = ""
    warnings: list[str] = field(default_factory=list)


def _quote(text: str) -> str:
    text = " ".join(text.split())
    return repr(text if len(text) <= _QUOTE else text[: _QUOTE - 3] + "...")


def _objects(text: str) -> list[dict[str, Any]]:
    """All JSON objects in ``text`` that parse, outermost first, in order of appearance.

    ``raw_decode`` is tried at each ``{``; it parses strings properly, so braces inside string
    values never confuse the scan. After a successful parse the scan resumes past the object,
    so an object's own nested objects are not reported separately.
    """
    found: list[dict[str, Any]] = []
    start = text.find("{")
    while start != -1:
        try:
            obj, end = _DECODER.raw_decode(text, start)
        except json.JSONDecodeError:
            start = text.find("{", start + 1)
            continue
        if isinstance(obj, dict):
            found.append(obj)
        start = text.find("{", end)
    return found


def _strip_trailing_commas(text: str) -> str:
    """Remove commas directly before ``}`` or ``]`` outside strings (a common model slip)."""
    out: list[str] = []
    in_string = escaped = False
    for index, char in enumerate(text):
        if in_string:
            out.append(char)
            if escaped:
                escaped = False
            elif char == "\\":
                escaped = True
            elif char == '"':
                in_string = False
            continue
        if char == '"':
            in_string = True
        elif char == ",":
            rest = text[index + 1 :].lstrip()
            if rest[:1] in {"}", "]"}:
                continue
        out.append(char)
    return "".join(out)


def _has_skill(obj: Mapping[str, Any]) -> bool:
    return any(str(key).strip().lower() in _SKILL_KEYS for key in obj)


def parse_decision(content: str) -> dict[str, Any]:
    """Extract the decision JSON object from a model reply.

    Accepts plain JSON, JSON in Markdown code fences, and JSON surrounded by prose or preceded
    by a ``<think>`` block (or by thinking that only a closing ``</think>`` ends). Objects in
    code fences are preferred to objects in the prose around them; among those, the last that
    names a skill wins (models weigh options before they answer), else the first object. As a
    last resort, trailing commas are removed and the search repeated.

    Args:
        content: The assistant message text.

    Returns:
        The decoded JSON object.

    Raises:
        ReplyFormatError: When no JSON object can be found.
    """
    if not isinstance(content, str):
        raise ReplyFormatError(f"reply must be text, got {type(content).__name__}")
    text = _THINK_END.split(_THINK.sub("", content))[-1].strip()
    if not text:
        raise ReplyFormatError("reply is empty; answer with one JSON object")
    # Fenced blocks first: prose around them may contain stray braces or example objects.
    blocks = [block for block in _FENCE.findall(text) if "{" in block]
    groups = [blocks, [text]] if blocks else [[text]]
    for repair in (False, True):
        first: dict[str, Any] | None = None
        for group in groups:
            found = [
                obj
                for source in group
                for obj in _objects(_strip_trailing_commas(source) if repair else source)
            ]
            named = [obj for obj in found if _has_skill(obj)]
            if named:
                return named[-1]
            if first is None and found:
                first = found[0]
        if first is not None:
            return first
    raise ReplyFormatError(f"no JSON object found in reply {_quote(text)}")


def normalize_level(value: object) -> str | None:
    """Map a level spelling (``"H"``, ``"high"``, ``"Very Low"``, ``"moderate"``) to a level.

    Returns:
        One of ``LEVELS``, or ``None`` when ``value`` is not a recognised level.
    """
    if not isinstance(value, str):
        return None
    key = _SKILL_SEPARATORS.sub("_", value.strip()).upper()
    return LEVEL_SYNONYMS.get(key)


def normalize_skill(value: str) -> str:
    """Normalise a skill spelling: stripped, lower-case, spaces and hyphens as underscores."""
    return _SKILL_SEPARATORS.sub("_", value.strip()).lower()


def _lower_keys(obj: Mapping[str, Any]) -> dict[str, Any]:
    # First spelling wins when a model repeats a key in different cases.
    lowered: dict[str, Any] = {}
    for key, value in obj.items():
        lowered.setdefault(str(key).strip().lower(), value)
    return lowered


def _first(obj: Mapping[str, Any], keys: Collection[str]) -> tuple[str | None, Any]:
    for key in keys:
        if key in obj:
            return key, obj[key]
    return None, None


def _construct(
    name: str, top: Mapping[str, Any], constructs: Mapping[str, Any], warnings: list[str]
) -> tuple[str | None, str]:
    """Read one construct's level and explanation, noting anything missing."""
    key, raw = _first(constructs, _CONSTRUCT_KEYS[name])
    if key is None:
        # Some models put the constructs at the top level instead of under "constructs".
        key, raw = _first(top, _CONSTRUCT_KEYS[name])
    if key is None:
        warnings.append(f"construct {name} missing")
        return None, ""
    if isinstance(raw, Mapping):
        fields = _lower_keys(raw)
        level_value = fields.get("level")
        explanation = _first(fields, _EXPLANATION_KEYS)[1]
    else:
        # A bare level, e.g. "TP": "high".
        level_value, explanation = raw, ""
    level = normalize_level(level_value)
    if level is None:
        warnings.append(f"construct {name} has no valid level (got {level_value!r})")
    if not isinstance(explanation, str):
        explanation = "" if explanation is None else str(explanation)
    if not explanation.strip():
        warnings.append(f"construct {name} has no explanation")
    return level, explanation.strip()


def validate_reply(
    obj: Mapping[str, Any], allowed_skills: Collection[str] | None = None
) -> DecisionReply:
    """Check a decoded reply against the reply contract and normalise it.

    Args:
        obj: The decoded JSON object (see :func:`parse_decision`).
        allowed_skills: When given, the skill must be one of these.

    Returns:
        The normalised reply, with warnings for tolerated omissions.

    Raises:
        ReplyFormatError: When the reply is not an object, names no skill, or names a skill
            outside ``allowed_skills``.
    """
    if not isinstance(obj, Mapping):
        raise ReplyFormatError(f"reply must be a JSON object, got {type(obj).__name__}")
    top = _lower_keys(obj)
    warnings: list[str] = []

    skill_key, skill_value = _first(top, _SKILL_KEYS)
    if skill_key is None:
        raise ReplyFormatError('reply has no "skill" field naming the chosen skill')
    if not isinstance(skill_value, str) or not skill_value.strip():
        raise ReplyFormatError(f'"skill" must be a non-empty string, got {skill_value!r}')
    skill = normalize_skill(skill_value)
    if allowed_skills is not None and skill not in allowed_skills:
        choices = ", ".join(sorted(allowed_skills))
        raise ReplyFormatError(f"unknown skill {skill!r}; choose one of: {choices}", skill)

    parameters = top.get("parameters")
    if parameters is None:
        parameters = {}
    elif not isinstance(parameters, Mapping):
        warnings.append(f"parameters ignored: expected an object, got {parameters!r}")
        parameters = {}

    constructs = top.get("constructs")
    if constructs is None:
        constructs = {}
    elif not isinstance(constructs, Mapping):
        warnings.append("constructs ignored: expected an object")
        constructs = {}
    constructs = _lower_keys(constructs)
    tp_level, tp_explanation = _construct("TP", top, constructs, warnings)
    cp_level, cp_explanation = _construct("CP", top, constructs, warnings)

    justification = _first(top, _JUSTIFICATION_KEYS)[1]
    if not isinstance(justification, str):
        justification = "" if justification is None else str(justification)
    if not justification.strip():
        warnings.append("justification missing")

    return DecisionReply(
        skill=skill,
        parameters=dict(parameters),
        tp_level=tp_level,
        tp_explanation=tp_explanation,
        cp_level=cp_level,
        cp_explanation=cp_explanation,
        justification=justification.strip(),
        warnings=warnings,
    )


def parse_reply(content: str, allowed_skills: Collection[str] | None = None) -> DecisionReply:
    """Parse and validate a model reply in one step (see :func:`parse_decision`)."""
    return validate_reply(parse_decision(content), allowed_skills)
