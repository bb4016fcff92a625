"""The skill registry: what a household may do, when, at what cost, and what it remembers.

The registry is read from YAML (``skill_registry.yaml`` at the repository root)::

    version: 1
    default_skill: do_nothing
    skills:
      - skill_id: buy_insurance
        description: Buy or renew an annual flood insurance policy
        eligible_agent_types: [owner]
        preconditions: ["not relocated"]
        institutional_constraints: {max_premium_share_of_income: 0.05}
        allowed_state_changes: [has_insurance]
        effects: {has_insurance: true}
        memory: {template: "Year {year}: ...", importance: 0.7, tags: [decision, insurance]}
    memory_tools:
      - skill_id: retrieve_memory
        eligible_agent_types: ["*"]
        implementation_mapping: memory.retrieve
        parameters: {top_k: 5}
        institutional_constraints: {max_retrieve: 10}
        allowed_state_changes: []

Everything is checked when the file loads (structure, state fields, effect types, template
placeholders), so that a typo stops a run before its first year; each problem raises
:class:`RegistryError` with a one-line message naming the file, the skill and the key. At run
time :meth:`SkillRegistry.check` validates a proposal, :meth:`SkillRegistry.apply` executes it
and :meth:`SkillRegistry.memory_update` renders what the household remembers of it.
"""

from __future__ import annotations

import math
import operator
import re
import typing
from dataclasses import dataclass
from numbers import Real
from types import MappingProxyType
from typing import TYPE_CHECKING, Any, Literal, NamedTuple

import numpy as np
import yaml
from pydantic import BaseModel, ConfigDict, Field, ValidationError

from simulation.agents.state import FLOOD_ZONES, STATE_FIELDS, TENURES, HouseholdState
from simulation.decisions.base import Option
from simulation.errors import InputError, shown_value
from simulation.input_files import read_text
from simulation.skills.templates import (
    TemplateError,
    render,
    render_many,
    shows_text,
    template_fields,
)
from simulation.yaml_errors import describe_decode_error, describe_yaml_error, load_yaml

if TYPE_CHECKING:
    import os
    from collections.abc import Callable, Collection, Iterable, Mapping, Sequence

__all__ = [
    "ANY_AGENT",
    "CONSTRAINTS",
    "CONTEXT_FIELDS",
    "SKILL_CONSTRAINTS",
    "TOOL_CONSTRAINTS",
    "VALID",
    "MemoryTemplate",
    "MemoryTool",
    "Precondition",
    "RegistryError",
    "Skill",
    "SkillRegistry",
    "Validation",
    "load_registry",
]

#: Template placeholders a caller supplies in ``context`` (besides the household state fields).
CONTEXT_FIELDS: frozenset[str] = frozenset(
    {"year", "cost", "premium", "subsidy_share", "deductible", "coverage", "payout", "damage"}
)

#: Institutional constraints a skill may declare (limits are shares of annual income).
SKILL_CONSTRAINTS = frozenset({"max_premium_share_of_income", "max_cost_share_of_income"})
#: The state fields whose effect makes a skill an insurance skill (its cost is a premium).
_INSURANCE_FIELDS = ("has_insurance", "has_contents_insurance")
#: Institutional constraints a memory tool may declare.
TOOL_CONSTRAINTS = frozenset({"max_retrieve"})
#: Every known institutional constraint.
CONSTRAINTS = SKILL_CONSTRAINTS | TOOL_CONSTRAINTS

#: Agent type that makes a skill eligible for every tenure.
ANY_AGENT = "*"

# Python type of each state field (bool, int, float or str), for checking comparisons and
# effect values against the field they touch.
_FIELD_TYPES: dict[str, type] = {
    name: hint
    for name, hint in typing.get_type_hints(HouseholdState).items()
    if name in STATE_FIELDS
}
#: ``max_cost_share_of_income`` must be below this: an out-of-pocket cost may exceed a year's
#: income (a loan), but ten years' is a percentage written for a share, or no limit.
_MAX_COST_SHARE = 10.0
#: The state fields a bare or ``not`` precondition may test.
_BOOLEAN_FIELDS: tuple[str, ...] = tuple(
    sorted(name for name, kind in _FIELD_TYPES.items() if kind is bool)
)
# Values that stand in for context placeholders when format specs are checked at load; the
# caller passes numbers (year an int, money and shares floats).
_CONTEXT_SAMPLES: dict[str, object] = dict.fromkeys(CONTEXT_FIELDS, 0.0) | {"year": 0}

_OPS: dict[str, Callable[[Any, Any], bool]] = {
    "==": operator.eq,
    "!=": operator.ne,
    "<": operator.lt,
    "<=": operator.le,
    ">": operator.gt,
    ">=": operator.ge,
}
_ORDERING = frozenset({"<", "<=", ">", ">="})
_COMPARISON_RE = re.compile(r"^([A-Za-z_]\w*)\s*(==|!=|<=|>=|<|>)\s*(.+?)$")
_TRUTH_RE = re.compile(r"^(not\s+)?([A-Za-z_]\w*)$")
_INT_RE = re.compile(r"^[+-]?\d+$")
_NUMBER_RE = re.compile(r"^[+-]?(\d+(\.\d*)?|\.\d+)([eE][+-]?\d+)?$")
_WORD_RE = re.compile(r"^[A-Za-z_][\w.-]*$")
_QUOTED_RE = re.compile(r"""^(?:"([^"]*)"|'([^']*)')$""")
# Options are built for every household every year: tuple.__new__ skips the named tuple's
# Python-level __new__.
_new_tuple = tuple.__new__


class RegistryError(InputError):
    """Invalid skill registry, or a registry used outside its contract.

    Load errors are one line: ``"<file>: skill '<id>': <key>: <problem>"``, e.g.
    ``"skill_registry.yaml: skill 'elevate_house': preconditions[0]: unknown state field
    'elevatd'"``.
    """


# --------------------------------------------------------------------------------------------
# Runtime objects
# --------------------------------------------------------------------------------------------


def _is_number(value: object) -> bool:
    return isinstance(value, int | float) and not isinstance(value, bool)


def _value_matches(field: str, value: object) -> bool:
    """Whether ``value`` has the type of state field ``field`` (ints count as floats)."""
    kind = _FIELD_TYPES[field]
    if kind is bool:
        return isinstance(value, bool)
    if kind is float:
        return _is_number(value)
    if kind is int:
        return isinstance(value, int) and not isinstance(value, bool)
    return isinstance(value, kind)


#: State fields whose values come from a fixed vocabulary: a misspelt value in a precondition
#: would make its skill silently never (or always) available.
_VOCABULARIES: dict[str, tuple[str, ...]] = {"tenure": TENURES, "flood_zone": FLOOD_ZONES}


def _unknown_field(name: str) -> str:
    """The error for a name that is not a household state field, listing the fields."""
    return f"unknown state field {name!r} (fields: {', '.join(sorted(STATE_FIELDS))})"


def _unknown_value(field: str, value: object) -> str:
    """Why ``value`` cannot be a value of state field ``field``; empty when it can."""
    allowed = _VOCABULARIES.get(field)
    if allowed is None or value in allowed:
        return ""
    return f"unknown {field} {value!r} (allowed: {', '.join(allowed)})"


def _parse_value(text: str) -> object:
    """Parse the right-hand side of a comparison: number, true/false, word or quoted string."""
    quoted = _QUOTED_RE.match(text)
    if quoted:
        return quoted.group(1) if quoted.group(1) is not None else quoted.group(2)
    if text.lower() in {"true", "false"}:
        return text.lower() == "true"
    if _INT_RE.match(text):
        return int(text)
    if _NUMBER_RE.match(text):
        return float(text)
    if _WORD_RE.match(text):
        return text
    msg = (
        f"cannot read value {shown_value(text)} (expected a number, true/false, a word or a "
        "quoted string)"
    )
    raise ValueError(msg)


@dataclass(frozen=True, slots=True)
class Precondition:
    """One parsed precondition: ``FIELD``, ``not FIELD`` or ``FIELD OP VALUE``.

    Attributes:
        text: The precondition as written in the registry (used in error messages).
        field: The household state field it reads.
        op: ``"truthy"``, ``"not"`` or a comparison operator (``==``, ``!=``, ``<``, ``<=``,
            ``>``, ``>=``).
        value: The literal compared with (``None`` for truthiness tests).
    """

    text: str
    field: str
    op: str
    value: object = None

    @classmethod
    def parse(cls, text: str) -> Precondition:
        """Parse and type-check a precondition.

        Args:
            text: E.g. ``"not relocated"``, ``"tenure == owner"``, ``"income >= 20000"``.

        Returns:
            The precondition.

        Raises:
            ValueError: If the text does not follow the grammar, names an unknown state field,
                or compares a field with a value of the wrong type.
        """
        stripped = text.strip()
        comparison = _COMPARISON_RE.match(stripped)
        if comparison:
            field, op, raw = comparison.groups()
            value = _parse_value(raw.strip())
        else:
            truth = _TRUTH_RE.match(stripped)
            if not truth:
                msg = (
                    f"cannot parse {shown_value(text)} (expected FIELD, 'not FIELD' or "
                    "'FIELD OP VALUE')"
                )
                raise ValueError(msg)
            field, op, value = truth.group(2), "not" if truth.group(1) else "truthy", None
        if field not in STATE_FIELDS:
            raise ValueError(_unknown_field(field))
        kind = _FIELD_TYPES[field]
        if op in {"truthy", "not"} and kind is not bool:
            # Python's truth of a zone or an income is "non-empty" or "non-zero": a skill gated
            # on it would be silently always or never available.
            vocabulary = _VOCABULARIES.get(field, ("VALUE",))
            # The example keeps the test's sense: "not income" is "income <= 0".
            example = (
                f"{'!=' if op == 'not' else '=='} {vocabulary[0]}"
                if kind is str
                else f"{'<=' if op == 'not' else '>'} 0"
            )
            msg = (
                f"{shown_value(stripped)}: a bare or 'not' test needs a true/false field "
                f"({', '.join(_BOOLEAN_FIELDS)}); compare {kind.__name__} field {field!r} "
                f"instead, e.g. '{field} {example}'"
            )
            raise ValueError(msg)
        if op in _ORDERING and not (kind in {int, float} and _is_number(value)):
            msg = f"{op} needs a numeric field and a number, got {kind.__name__} field {field!r}"
            msg += f" and {value!r}"
            raise ValueError(msg)
        if op in {"==", "!="}:
            if not _value_matches(field, value):
                msg = (
                    f"{kind.__name__} field {field!r} compared with "
                    f"{type(value).__name__} {value!r}"
                )
                raise ValueError(msg)
            problem = _unknown_value(field, value)
            if problem:
                raise ValueError(problem)
        return cls(text=stripped, field=field, op=op, value=value)

    def check(self, state: HouseholdState) -> bool:
        """Whether ``state`` satisfies the precondition."""
        current = getattr(state, self.field)
        if self.op == "truthy":
            return bool(current)
        if self.op == "not":
            return not current
        return bool(_OPS[self.op](current, self.value))


@dataclass(frozen=True, slots=True)
class MemoryTemplate:
    """What a household remembers after executing a skill.

    Attributes:
        template: Safe format template (see :mod:`simulation.skills.templates`).
        importance: Memory importance in [0, 1].
        tags: Memory tags.
        store: Where the memory is written: ``auto`` (episodic memory from the consolidation
            threshold up, else working memory, as event memories go), ``working`` (the FIFO,
            from which year-end consolidation copies it to episodic memory when its importance
            reaches the threshold: seed 000's ``update_after_decision``) or ``episodic``.
    """

    template: str
    importance: float
    tags: tuple[str, ...] = ()
    store: Literal["auto", "working", "episodic"] = "auto"


@dataclass(frozen=True, slots=True)
class Skill:
    """A household decision and its rules.

    Attributes:
        skill_id: Identifier a proposal names.
        description: Text for prompts and option lists.
        eligible_agent_types: Tenures that may use it (``"*"`` for all).
        preconditions: State conditions that must all hold.
        institutional_constraints: Affordability limits (shares of annual income).
        allowed_state_changes: State fields the skill may change.
        effects: Field -> value set when the skill executes.
        memory: What the household remembers of it.
    """

    skill_id: str
    description: str
    eligible_agent_types: tuple[str, ...]
    preconditions: tuple[Precondition, ...]
    institutional_constraints: Mapping[str, float]
    allowed_state_changes: frozenset[str]
    effects: Mapping[str, object]
    memory: MemoryTemplate

    def eligible(self, agent_type: str) -> bool:
        """Whether households of ``agent_type`` (a tenure) may use the skill."""
        return ANY_AGENT in self.eligible_agent_types or agent_type in self.eligible_agent_types


@dataclass(frozen=True, slots=True)
class MemoryTool:
    """A read-only tool a household may invoke while deciding (e.g. memory retrieval).

    Attributes:
        skill_id: Identifier of the tool.
        description: Text for prompts.
        eligible_agent_types: Tenures that may use it (``"*"`` for all).
        implementation_mapping: Dotted name of what implements it, e.g. ``memory.retrieve``.
        parameters: Default parameters, e.g. ``{"top_k": 5}``.
        institutional_constraints: Limits, e.g. ``{"max_retrieve": 10}``.
        allowed_state_changes: Always empty: tools do not change the household.
    """

    skill_id: str
    description: str
    eligible_agent_types: tuple[str, ...]
    implementation_mapping: str
    parameters: Mapping[str, object]
    institutional_constraints: Mapping[str, float]
    allowed_state_changes: frozenset[str] = frozenset()

    def eligible(self, agent_type: str) -> bool:
        """Whether households of ``agent_type`` (a tenure) may use the tool."""
        return ANY_AGENT in self.eligible_agent_types or agent_type in self.eligible_agent_types


@dataclass(frozen=True, slots=True)
class Validation:
    """Outcome of validating a proposal or tool call.

    Attributes:
        valid: True when there are no errors.
        errors: Why the proposal may not be executed.
        warnings: Remarks that do not block execution.
    """

    valid: bool
    errors: tuple[str, ...] = ()
    warnings: tuple[str, ...] = ()

    @classmethod
    def of(cls, errors: Iterable[str], warnings: Iterable[str] = ()) -> Validation:
        """Build a validation that is valid exactly when ``errors`` is empty."""
        errors = tuple(errors)
        warnings = tuple(warnings)
        if not errors and not warnings:
            return VALID  # immutable, so one instance serves every clean check
        return cls(valid=not errors, errors=errors, warnings=warnings)

    def to_dict(self) -> dict[str, Any]:
        """JSON-ready form for traces: ``{"valid": ..., "errors": [...], "warnings": [...]}``."""
        return {"valid": self.valid, "errors": list(self.errors), "warnings": list(self.warnings)}


#: The result of a check that found nothing wrong.
VALID = Validation(valid=True)


# --------------------------------------------------------------------------------------------
# File structure (pydantic) and its translation into one-line errors
# --------------------------------------------------------------------------------------------


class _Spec(BaseModel):
    # Strict: YAML "yes"/"1" must not silently become booleans or numbers; and a number is
    # finite (YAML's .nan would otherwise be refused as if it were out of range).
    model_config = ConfigDict(extra="forbid", strict=True, allow_inf_nan=False)


_ID = Field(pattern=r"^[A-Za-z_][A-Za-z0-9_]*$")


class _MemorySpec(_Spec):
    template: str
    importance: float = Field(ge=0.0, le=1.0)
    tags: list[str] = []
    store: Literal["auto", "working", "episodic"] = "auto"


class _SkillSpec(_Spec):
    skill_id: str = _ID
    description: str
    eligible_agent_types: list[str] = Field(min_length=1)
    preconditions: list[str] = []
    institutional_constraints: dict[str, float] = {}
    allowed_state_changes: list[str]
    effects: dict[str, Any] = {}
    memory: _MemorySpec


class _ToolSpec(_Spec):
    skill_id: str = _ID
    description: str = ""
    eligible_agent_types: list[str] = Field(min_length=1)
    # Accepted for compatibility with the seed's shape; tools take no state preconditions.
    preconditions: list[str] = Field(default=[], max_length=0)
    implementation_mapping: str = Field(min_length=1)
    parameters: dict[str, Any] = {}
    institutional_constraints: dict[str, float] = {}
    allowed_state_changes: list[str] = []


class _RegistrySpec(_Spec):
    version: int = 1
    default_skill: str = "do_nothing"
    # Entries are validated one by one so that errors can name the skill.
    skills: list[Any] = Field(min_length=1)
    memory_tools: list[Any] = []


_SUPPORTED_VERSION = 1


def _key_path(loc: Sequence[int | str]) -> str:
    """Render a pydantic location as ``memory.tags[1]``."""
    path = ""
    for part in loc:
        if isinstance(part, int):
            path += f"[{part}]"
        elif part != "[key]":
            path += f".{part}" if path else str(part)
    return path


def _describe(error: Mapping[str, Any], model: type[BaseModel]) -> tuple[str, str]:
    """Return (key path, problem) for one pydantic error."""
    loc = error["loc"]
    path = _key_path(loc)
    kind = error["type"]
    if kind == "extra_forbidden":
        owner: type[BaseModel] = model
        for part in loc[:-1]:
            field = owner.model_fields.get(str(part))
            nested = field.annotation if field else None
            if isinstance(nested, type) and issubclass(nested, BaseModel):
                owner = nested
        scope = "top-level " if owner is _RegistrySpec else ""
        return path, f"unknown {scope}key (allowed: {', '.join(owner.model_fields)})"
    if kind == "missing":
        return path, "missing required key"
    if kind in {"model_type", "dict_type"}:
        return path, f"expected a mapping, got {shown_value(error['input'])}"
    problem = error["msg"][0].lower() + error["msg"][1:]
    if kind == "string_pattern_mismatch":
        problem = "must be an identifier (letters, digits, underscores)"
    return path, f"{problem}, got {shown_value(error['input'])}"


def _first_error(exc: ValidationError, model: type[BaseModel]) -> tuple[str, str]:
    # An unknown key usually explains a "missing" one (a typo), so report it first.
    errors = sorted(exc.errors(), key=lambda e: e["type"] != "extra_forbidden")
    return _describe(errors[0], model)


# --------------------------------------------------------------------------------------------
# Building skills and tools from validated specs
# --------------------------------------------------------------------------------------------


class _Builder:
    """Turns the parsed YAML into skills and tools, raising one-line errors."""

    def __init__(self, origin: str) -> None:
        self.origin = origin

    def fail(self, label: str | None, key: str, problem: str) -> RegistryError:
        parts = [self.origin, *([label] if label else []), *([key] if key else []), problem]
        return RegistryError(": ".join(parts))

    @staticmethod
    def label(kind: str, index: int, raw: object) -> str:
        sid = raw.get("skill_id") if isinstance(raw, dict) else None
        if isinstance(sid, str) and sid:
            return f"{kind} {sid!r}"
        return f"{'skills' if kind == 'skill' else 'memory_tools'}[{index}]"

    def runnable(self, raws: list[Any], runnable: Collection[str]) -> None:
        for index, raw in enumerate(raws):
            skill_id = raw.get("skill_id") if isinstance(raw, dict) else None
            if isinstance(skill_id, str) and skill_id not in runnable:
                problem = (
                    f"not a skill the model can price and execute (it knows "
                    f"{', '.join(runnable)}; a new skill needs code as well as this entry)"
                )
                raise self.fail(self.label("skill", index, raw), "skill_id", problem)

    def spec(self, model: type[_Spec], raw: object, label: str | None) -> Any:
        try:
            return model.model_validate(raw)
        except ValidationError as exc:
            key, problem = _first_error(exc, model)
            raise self.fail(label, key, problem) from None

    def agent_types(self, label: str, types: list[str]) -> tuple[str, ...]:
        allowed = (*TENURES, ANY_AGENT)
        for i, agent_type in enumerate(types):
            if agent_type not in allowed:
                problem = f"unknown agent type {agent_type!r} (allowed: {', '.join(allowed)})"
                raise self.fail(label, f"eligible_agent_types[{i}]", problem)
        return tuple(types)

    def constraints(
        self, label: str, constraints: dict[str, float], allowed: frozenset[str]
    ) -> Mapping[str, float]:
        for name, value in constraints.items():
            key = f"institutional_constraints.{name}"
            if name not in allowed:
                where = "memory tools" if name in TOOL_CONSTRAINTS else "skills"
                problem = (
                    f"unknown constraint {name!r} (allowed: {', '.join(sorted(allowed))})"
                    if name not in CONSTRAINTS
                    else f"constraint {name!r} applies to {where} only"
                )
                raise self.fail(label, key, problem)
            if not (math.isfinite(value) and value > 0):
                raise self.fail(label, key, f"must be a positive number, got {value!r}")
        return MappingProxyType(dict(constraints))

    def constraints_fit(self, label: str, spec: _SkillSpec) -> None:
        """Refuse an affordability limit of the other kind of cost than the skill's.

        The limit applies to whatever the skill costs, so the two names would act alike: a
        premium limit on an elevation, or a premium share written as a percentage (5 for 5 %),
        would run as something the registry does not say.
        """
        insures = any(spec.effects.get(name) is True for name in _INSURANCE_FIELDS)
        for name, value in spec.institutional_constraints.items():
            key = f"institutional_constraints.{name}"
            if name == "max_premium_share_of_income":
                if not insures:
                    problem = (
                        "limits an insurance premium, and this skill buys no insurance (its "
                        "effects set neither has_insurance nor has_contents_insurance): use "
                        "max_cost_share_of_income"
                    )
                    raise self.fail(label, key, problem)
                if value > 1:
                    problem = f"a share of income (0.05 is 5 %), at most 1, got {value!r}"
                    raise self.fail(label, key, problem)
            elif name == "max_cost_share_of_income" and insures:
                problem = (
                    "an insurance skill's cost is its premium: use max_premium_share_of_income"
                )
                raise self.fail(label, key, problem)
            elif name == "max_cost_share_of_income" and value >= _MAX_COST_SHARE:
                # A cost above a year's income can be financed (1.5 is allowed), but not one
                # of ten years' or more: that is a percentage (50 for 50 %), or no limit at all.
                problem = (
                    f"a share of income (0.5 is 50 %), below {_MAX_COST_SHARE:g}, got {value:g} "
                    "(remove the key for no limit)"
                )
                raise self.fail(label, key, problem)

    def state_fields(self, label: str, key: str, names: list[str]) -> frozenset[str]:
        for i, name in enumerate(names):
            if name not in STATE_FIELDS:
                raise self.fail(label, f"{key}[{i}]", _unknown_field(name))
        return frozenset(names)

    def skill(self, index: int, raw: object) -> Skill:
        label = self.label("skill", index, raw)
        spec: _SkillSpec = self.spec(_SkillSpec, raw, label)
        preconditions = []
        for i, text in enumerate(spec.preconditions):
            try:
                preconditions.append(Precondition.parse(text))
            except ValueError as exc:
                raise self.fail(label, f"preconditions[{i}]", str(exc)) from None
        allowed = self.state_fields(label, "allowed_state_changes", spec.allowed_state_changes)
        for name, value in spec.effects.items():
            key = f"effects.{name}"
            if name not in STATE_FIELDS:
                raise self.fail(label, key, _unknown_field(name))
            if name not in allowed:
                raise self.fail(label, key, f"field {name!r} is not in allowed_state_changes")
            if not _value_matches(name, value):
                kind = _FIELD_TYPES[name].__name__
                raise self.fail(label, key, f"{kind} field {name!r} cannot be set to {value!r}")
            problem = _unknown_value(name, value)
            if problem:
                raise self.fail(label, key, problem)
            if _FIELD_TYPES[name] is float:
                # Keep float fields floats when the YAML writes a whole number.
                spec.effects[name] = float(value)
        self.constraints_fit(label, spec)
        return Skill(
            skill_id=spec.skill_id,
            description=spec.description,
            eligible_agent_types=self.agent_types(label, spec.eligible_agent_types),
            preconditions=tuple(preconditions),
            institutional_constraints=self.constraints(
                label, spec.institutional_constraints, SKILL_CONSTRAINTS
            ),
            allowed_state_changes=allowed,
            effects=MappingProxyType(dict(spec.effects)),
            memory=self.memory(label, spec.memory),
        )

    def memory(self, label: str, spec: _MemorySpec) -> MemoryTemplate:
        # Blank text would be remembered, retrieved and audited as it is, every time, unseen.
        if not shows_text(spec.template):
            raise self.fail(label, "memory.template", "empty: the memory would hold no text")
        for index, tag in enumerate(spec.tags):
            if not shows_text(tag):
                raise self.fail(label, f"memory.tags[{index}]", f"an empty tag, got {tag!r}")
            if tag in spec.tags[:index]:
                # A tag counts once in retrieval's tag match; twice, it is most likely a slip
                # for another tag.
                problem = f"{tag!r} is given twice (first as tags[{spec.tags.index(tag)}])"
                raise self.fail(label, f"memory.tags[{index}]", problem)
        try:
            names = template_fields(spec.template)
        except TemplateError as exc:
            raise self.fail(label, "memory.template", str(exc)) from None
        samples: dict[str, object] = {}
        for name in sorted(names):
            if name in CONTEXT_FIELDS:
                samples[name] = _CONTEXT_SAMPLES[name]
            elif name in STATE_FIELDS:
                # A text of one letter: a template blank even then is blank for every value.
                kind = _FIELD_TYPES[name]
                samples[name] = "x" if kind is str else kind()
            else:
                problem = (
                    f"unknown placeholder {name!r} (allowed: household state fields and "
                    f"{', '.join(sorted(CONTEXT_FIELDS))})"
                )
                raise self.fail(label, "memory.template", problem)
        try:
            # Catch specs that cannot format the field's type (e.g. "{tenure:.0f}") at load.
            sample = render(spec.template, samples)
        except TemplateError as exc:
            raise self.fail(label, "memory.template", str(exc)) from None
        if not shows_text(sample):  # "{tenure:.0}": placeholders only, each cut to nothing
            problem = f"renders as blank text ({sample!r}): the memory would hold no text"
            raise self.fail(label, "memory.template", problem)
        return MemoryTemplate(spec.template, spec.importance, tuple(spec.tags), spec.store)

    def tool(self, index: int, raw: object) -> MemoryTool:
        label = self.label("memory tool", index, raw)
        spec: _ToolSpec = self.spec(_ToolSpec, raw, label)
        if spec.allowed_state_changes:
            problem = "memory tools are read-only; must be empty"
            raise self.fail(label, "allowed_state_changes", problem)
        constraints = self.constraints(label, spec.institutional_constraints, TOOL_CONSTRAINTS)
        problem = _top_k_problem(spec.parameters, constraints)
        if problem:
            raise self.fail(label, "parameters.top_k", problem)
        return MemoryTool(
            skill_id=spec.skill_id,
            description=spec.description,
            eligible_agent_types=self.agent_types(label, spec.eligible_agent_types),
            implementation_mapping=spec.implementation_mapping,
            parameters=MappingProxyType(dict(spec.parameters)),
            institutional_constraints=constraints,
        )


def _top_k_problem(parameters: Mapping[str, object], constraints: Mapping[str, float]) -> str:
    """Describe what is wrong with ``parameters["top_k"]`` ('' when fine or absent)."""
    if "top_k" not in parameters:
        return ""
    top_k = parameters["top_k"]
    if not (isinstance(top_k, int) and not isinstance(top_k, bool) and top_k >= 1):
        return f"top_k must be a positive integer, got {top_k!r}"
    limit = constraints.get("max_retrieve")
    if limit is not None and top_k > limit:
        return f"top_k {top_k} exceeds max_retrieve {limit:g}"
    return ""


def _money(value: float) -> str:
    return f"-${-value:,.0f}" if value < 0 else f"${value:,.0f}"


# --------------------------------------------------------------------------------------------
# The registry
# --------------------------------------------------------------------------------------------


class SkillRegistry:
    """Household skills and memory tools, validated at load.

    Args:
        skills: The skills, in the order options are offered.
        memory_tools: The read-only tools.
        default_skill: Skill executed when a proposal is invalid.
        origin: Where the registry came from (a file name), for error messages.

    Raises:
        RegistryError: On a duplicate id (skills and tools share one namespace) or a
            ``default_skill`` that is not one of ``skills`` or that some household might not be
            allowed (it must be eligible for every tenure, with no precondition but
            ``not relocated`` and no institutional constraint).
    """

    def __init__(
        self,
        skills: Sequence[Skill],
        memory_tools: Sequence[MemoryTool] = (),
        default_skill: str = "do_nothing",
        origin: str = "<registry>",
    ) -> None:
        self.origin = origin
        seen: dict[str, str] = {}
        for kind, items in (("skill", skills), ("memory tool", memory_tools)):
            for item in items:
                if item.skill_id in seen:
                    msg = (
                        f"{origin}: {kind} {item.skill_id!r}: skill_id: duplicate id "
                        f"(already used by a {seen[item.skill_id]})"
                    )
                    raise RegistryError(msg)
                seen[item.skill_id] = kind
        self._skills: Mapping[str, Skill] = MappingProxyType({s.skill_id: s for s in skills})
        self._tools: Mapping[str, MemoryTool] = MappingProxyType(
            {t.skill_id: t for t in memory_tools}
        )
        if default_skill not in self._skills:
            msg = (
                f"{origin}: default_skill: {default_skill!r} is not a defined skill "
                f"(skills: {', '.join(self._skills)})"
            )
            raise RegistryError(msg)
        problem = _not_always_admissible(self._skills[default_skill])
        if problem:
            # It is executed unchecked when a proposal is invalid, and it is the option every
            # household must always have: a default some household may not take would execute
            # what the rules forbid, or leave that household without any option.
            msg = (
                f"{origin}: default_skill: {default_skill!r} must be open to every household "
                f"that decides, but {problem}"
            )
            raise RegistryError(msg)
        self._default = default_skill
        # Compiled once: options(), apply() and memory_update() run for every household every
        # year.
        self._terms = tuple(_admission(skill) for skill in self._skills.values())
        self._admits = tuple(
            (skill.skill_id, _compile_admits(terms), skill.description)
            for skill, terms in zip(self._skills.values(), self._terms, strict=True)
        )
        self._outside = {
            skill.skill_id: sorted(set(skill.effects) - skill.allowed_state_changes)
            for skill in self._skills.values()
        }
        self._placeholders = {
            skill.skill_id: tuple(sorted(template_fields(skill.memory.template)))
            for skill in self._skills.values()
        }

    # ---- construction ------------------------------------------------------------------------

    @classmethod
    def load(
        cls, path: str | os.PathLike[str], runnable: Collection[str] | None = None
    ) -> SkillRegistry:
        """Read and validate a registry file.

        Args:
            path: The YAML file, e.g. ``"skill_registry.yaml"``.
            runnable: The skill ids the caller can execute, if it cannot execute any other:
                a skill outside them is refused before its other keys are checked, since
                mending those would not make it run.

        Returns:
            The registry.

        Raises:
            RegistryError: If the file is missing, unreadable, not valid YAML, or any skill or
                tool is invalid; the one-line message names the file, the skill and the key.
        """
        origin = str(path)
        try:
            text = read_text(path)
        except FileNotFoundError:
            msg = f"{origin}: registry file not found"
            raise RegistryError(msg) from None
        except OSError as exc:
            msg = f"{origin}: cannot read registry file: {exc.strerror or exc}"
            raise RegistryError(msg) from None
        except UnicodeDecodeError as exc:
            msg = f"{origin}: cannot read registry file: {describe_decode_error(exc)}"
            raise RegistryError(msg) from None
        try:
            data = load_yaml(text)
        except yaml.YAMLError as exc:
            msg = f"{origin}: invalid YAML: {describe_yaml_error(exc)}"
            raise RegistryError(msg) from None
        return cls.from_mapping(data, origin, runnable)

    @classmethod
    def from_mapping(
        cls, data: object, origin: str = "<registry>", runnable: Collection[str] | None = None
    ) -> SkillRegistry:
        """Validate an already-parsed registry (the YAML document as Python objects).

        Args:
            data: Mapping with ``version``, ``default_skill``, ``skills`` and ``memory_tools``.
            origin: Name used in error messages (usually the file).
            runnable: As for :meth:`load`.

        Returns:
            The registry.

        Raises:
            RegistryError: As for :meth:`load`.
        """
        builder = _Builder(origin)
        if not isinstance(data, dict):
            shown = "an empty document" if data is None else f"{type(data).__name__} {data!r}"
            raise builder.fail(None, "", f"top level must be a mapping, got {shown}")
        top: _RegistrySpec = builder.spec(_RegistrySpec, data, None)
        if top.version != _SUPPORTED_VERSION:
            problem = f"unsupported version {top.version} (expected {_SUPPORTED_VERSION})"
            raise builder.fail(None, "version", problem)
        if runnable is not None:
            builder.runnable(top.skills, runnable)
        skills = [builder.skill(i, raw) for i, raw in enumerate(top.skills)]
        tools = [builder.tool(i, raw) for i, raw in enumerate(top.memory_tools)]
        return cls(skills, tools, top.default_skill, origin)

    # ---- read access ------------------------------------------------------------------------

    @property
    def skills(self) -> Mapping[str, Skill]:
        """Skills by id, in file order."""
        return self._skills

    @property
    def memory_tools(self) -> Mapping[str, MemoryTool]:
        """Memory tools by id, in file order."""
        return self._tools

    @property
    def default_skill(self) -> str:
        """Skill to execute when a proposal is invalid."""
        return self._default

    def template_fields(self, skill_id: str) -> tuple[str, ...]:
        """The placeholders of ``skill_id``'s memory template, sorted."""
        return self._placeholders[skill_id]

    @property
    def skill_ids(self) -> tuple[str, ...]:
        """Skill ids in file order."""
        return tuple(self._skills)

    def __repr__(self) -> str:
        return (
            f"SkillRegistry(origin={self.origin!r}, skills={list(self._skills)}, "
            f"memory_tools={list(self._tools)}, default_skill={self._default!r})"
        )

    # ---- validation -------------------------------------------------------------------------

    def check(self, skill_id: str, state: HouseholdState, cost: float) -> Validation:
        """Validate that ``state``'s household may execute ``skill_id`` this year at ``cost``.

        Args:
            skill_id: The proposed skill.
            state: The household.
            cost: Out-of-pocket cost in dollars (premium, elevation cost after subsidy,
                relocation cost net of buyout); compared with income by the skill's
                affordability constraints.

        Returns:
            The validation; every failed rule adds one error (eligibility, each precondition,
            each constraint, a cost that is negative, infinite or NaN), e.g.
            ``"precondition failed: not relocated"``.

        Raises:
            TypeError: For a ``cost`` that is not a number (a string would fail far inside).
        """
        if cost.__class__ is not float and (  # the model's costs: no ABC check
            not isinstance(cost, Real) or isinstance(cost, (bool, np.bool_))
        ):
            msg = f"cost must be a number of dollars, got {cost!r}"
            raise TypeError(msg)
        skill = self._skills.get(skill_id)
        if skill is None:
            hint = " (it is a memory tool)" if skill_id in self._tools else ""
            return Validation.of([f"unknown skill {skill_id!r}{hint}"])
        errors: list[str] = []
        if not skill.eligible(state.tenure):
            errors.append(
                f"not eligible: tenure {state.tenure!r} not in "
                f"[{', '.join(skill.eligible_agent_types)}]"
            )
        errors.extend(
            f"precondition failed: {condition.text}"
            for condition in skill.preconditions
            if not condition.check(state)
        )
        if not 0.0 <= cost < math.inf:  # NaN fails it too
            errors.append(f"invalid cost {cost!r}: a cost is a finite number >= 0")
        else:
            for name, limit in skill.institutional_constraints.items():
                problem = _affordability_problem(name, limit, cost, state.income)
                if problem:
                    errors.append(problem)
        return Validation.of(errors)

    def options(
        self, state: HouseholdState, costs: Mapping[str, float], descriptions: bool = True
    ) -> tuple[list[Option], dict[str, Validation]]:
        """Split the skills into this year's options and the rejected ones.

        Args:
            state: The household.
            costs: Out-of-pocket cost of each skill this year; a skill not listed costs 0.
            descriptions: Copy each skill's description into its option (for prompts).

        Returns:
            The valid options in file order, and the validation of every rejected skill.

        Raises:
            RegistryError: If ``costs`` names a skill the registry does not define (a typo in
                the caller would otherwise make that skill silently free).
        """
        unknown = sorted(costs.keys() - self._skills.keys())
        if unknown:
            msg = f"{self.origin}: costs given for unknown skills: {', '.join(unknown)}"
            raise RegistryError(msg)
        valid: list[Option] = []
        rejected: dict[str, Validation] = {}
        for skill_id, admits, description in self._admits:
            cost = float(costs.get(skill_id, 0.0))
            if admits(state, cost):
                valid.append(Option(skill_id, cost, description if descriptions else ""))
            else:  # the slow path, only to say why
                rejected[skill_id] = self.check(skill_id, state, cost)
        return valid, rejected

    def valid_options(self, state: HouseholdState, costs: Mapping[str, float]) -> list[Option]:
        """This year's options alone, for the per-household hot path.

        Equivalent to ``options(state, costs)[0]`` but says nothing about rejected skills, so no
        error text is built.

        Args:
            state: The household.
            costs: Out-of-pocket cost of every skill this year (each skill must be listed).

        Returns:
            The valid options in file order, each with the skill's description.
        """
        return [
            _new_tuple(Option, (skill_id, cost, description))
            for skill_id, admits, description in self._admits
            if admits(state, cost := costs[skill_id])
        ]

    def valid_mask(self, states: Sequence[HouseholdState], costs: np.ndarray) -> np.ndarray:
        """Which skills each of many households may take: :meth:`valid_options` in bulk.

        Entry ``[n, j]`` is :meth:`check`'s verdict on household ``n`` taking skill
        ``skill_ids[j]`` at cost ``costs[n, j]``. Models that decide a whole population at once
        use this instead of building an option list per household.

        Args:
            states: The households.
            costs: Out-of-pocket costs, a row per household and a column per skill in
                :attr:`skill_ids` order.

        Returns:
            A boolean array shaped like ``costs``.

        Raises:
            ValueError: If ``costs`` is not shaped (households, skills).
        """
        costs = np.asarray(costs, dtype=float)
        if costs.shape != (len(states), len(self._terms)):
            msg = (
                f"costs must be shaped ({len(states)}, {len(self._terms)}) "
                f"(households, skills), got {costs.shape}"
            )
            raise ValueError(msg)
        if not states:
            return np.zeros(costs.shape, dtype=bool)
        return self._valid_mask(_Columns(states), costs)

    def valid_mask_columns(
        self, columns: Mapping[str, np.ndarray], rows: np.ndarray, costs: np.ndarray
    ) -> np.ndarray:
        """:meth:`valid_mask` of households held as columns (one array per state field).

        Args:
            columns: Each state field's values, an entry per household.
            rows: The households to check, positions in the columns.
            costs: Out-of-pocket costs, a row per entry of ``rows``.

        Returns:
            A boolean array shaped like ``costs``.
        """
        costs = np.asarray(costs, dtype=float)
        return self._valid_mask(_ArrayColumns(columns, rows), costs)

    def effects(self, skill_id: str) -> Mapping[str, object]:
        """What executing ``skill_id`` sets: ``{field: value}`` (see :meth:`apply`).

        Raises:
            RegistryError: For an unknown skill.
        """
        skill = self._skills.get(skill_id)
        if skill is None:
            msg = f"{self.origin}: cannot apply unknown skill {skill_id!r}"
            raise RegistryError(msg)
        return skill.effects

    def _valid_mask(self, columns: _Columns | _ArrayColumns, costs: np.ndarray) -> np.ndarray:
        valid = np.empty(costs.shape, dtype=bool)
        of_tenure: dict[str, np.ndarray] = {}  # each tenure compared once, for every skill
        for j, (tenures, preconditions, limits) in enumerate(self._terms):
            cost = costs[:, j]
            admitted = np.isfinite(cost)
            if tenures is not None:
                eligible = np.zeros(len(cost), dtype=bool)
                for tenure in tenures:
                    same = of_tenure.get(tenure)
                    if same is None:
                        same = of_tenure[tenure] = columns.array("tenure") == tenure
                    eligible |= same
                admitted &= eligible
            for condition in preconditions:
                admitted &= columns.holds(condition)
            if limits:
                income = columns.array("income")
                unaffordable = income <= 0
                with np.errstate(divide="ignore", over="ignore", invalid="ignore"):
                    share = cost / income
                for limit in limits:
                    unaffordable |= ~(share <= limit)  # a NaN share (NaN income) fails, as in check
                admitted &= ~((cost > 0) & unaffordable)
            valid[:, j] = admitted
        # A negative cost is refused as check refuses it; the model's costs never are, so one
        # pass over the whole matrix (at 1,000 households numpy's per-call overhead is most of
        # a comparison's cost: a second comparison per skill counted 1.3 % of a year at off).
        if costs.size and not costs.min() >= 0.0:  # a negative cost, or a NaN hiding one
            valid &= costs >= 0.0
        return valid

    def check_tool(
        self, tool_id: str, agent_type: str, parameters: Mapping[str, object]
    ) -> Validation:
        """Validate a memory-tool call.

        Args:
            tool_id: The tool, e.g. ``retrieve_memory``.
            agent_type: The caller's tenure.
            parameters: Call parameters; ``top_k`` (if given) must be a positive integer no
                larger than the tool's ``max_retrieve``. Other parameters are not checked.

        Returns:
            The validation.
        """
        tool = self._tools.get(tool_id)
        if tool is None:
            hint = " (it is a skill, not a memory tool)" if tool_id in self._skills else ""
            return Validation.of([f"unknown memory tool {tool_id!r}{hint}"])
        errors: list[str] = []
        if not tool.eligible(agent_type):
            errors.append(
                f"not eligible: agent type {agent_type!r} not in "
                f"[{', '.join(tool.eligible_agent_types)}]"
            )
        problem = _top_k_problem(parameters, tool.institutional_constraints)
        if problem:
            errors.append(problem)
        return Validation.of(errors)

    # ---- execution --------------------------------------------------------------------------

    def apply(self, skill_id: str, state: HouseholdState) -> dict[str, tuple[object, object]]:
        """Execute a skill's effects on ``state`` (validate with :meth:`check` first).

        Args:
            skill_id: The skill.
            state: The household, changed in place.

        Returns:
            ``{field: (before, after)}`` for each field whose value changed (a renewal that
            leaves ``has_insurance`` true returns ``{}``).

        Raises:
            RegistryError: For an unknown skill, or an effect outside the skill's
                ``allowed_state_changes`` (checked before anything is changed).
        """
        skill = self._skills.get(skill_id)
        if skill is None:
            msg = f"{self.origin}: cannot apply unknown skill {skill_id!r}"
            raise RegistryError(msg)
        outside = self._outside[skill_id]
        if outside:
            msg = (
                f"{self.origin}: skill {skill_id!r}: effects change {', '.join(outside)} "
                "outside allowed_state_changes"
            )
            raise RegistryError(msg)
        changes: dict[str, tuple[object, object]] = {}
        for name, value in skill.effects.items():
            before = getattr(state, name)
            if before != value:
                setattr(state, name, value)
                changes[name] = (before, value)
        return changes

    def memory_update(
        self, skill_id: str, state: HouseholdState, context: Mapping[str, object]
    ) -> tuple[str, float, tuple[str, ...]]:
        """Render what the household remembers of executing ``skill_id``.

        Args:
            skill_id: The executed skill.
            state: The household (its fields fill state placeholders).
            context: Values for context placeholders (``year``, ``premium``,
                ``subsidy_share``, ...); a key that is also a state field overrides it.

        Returns:
            ``(content, importance, tags)``.

        Raises:
            RegistryError: For an unknown skill.
            TemplateError: If a placeholder has no value, naming the skill and placeholder.
        """
        skill, values = self._template_values(skill_id, state, context)
        try:
            content = render(skill.memory.template, values)
        except TemplateError as exc:
            msg = f"skill {skill_id!r}: memory.template: {exc}"
            raise TemplateError(msg) from None
        return content, skill.memory.importance, skill.memory.tags

    def memory_updates(
        self,
        skill_id: str,
        state: HouseholdState,
        context: Mapping[str, object],
        columns: Mapping[str, Sequence[object]],
    ) -> tuple[list[str], float, tuple[str, ...]]:
        """:meth:`memory_update` for many contexts that differ only in ``columns``.

        The array engine renders a skill's memory once for each distinct cost that households
        paid for it (each premium, say); the placeholders filled from ``state`` and ``context``
        are formatted once for all of them.

        Args:
            skill_id: The executed skill.
            state: The household whose fields fill state placeholders (the same for all).
            context: Values for context placeholders shared by all the texts.
            columns: Values for context placeholders that differ, a sequence per name, all of
                one length; a name here overrides ``context`` and the state.

        Returns:
            ``(contents, importance, tags)``: one content per position of ``columns``.

        Raises:
            RegistryError: For an unknown skill.
            TemplateError: If a placeholder has no value, naming the skill and placeholder.
        """
        skill, values = self._template_values(skill_id, state, context, columns)
        try:
            contents = render_many(skill.memory.template, values, columns)
        except TemplateError as exc:
            msg = f"skill {skill_id!r}: memory.template: {exc}"
            raise TemplateError(msg) from None
        return contents, skill.memory.importance, skill.memory.tags

    def _template_values(
        self,
        skill_id: str,
        state: HouseholdState,
        context: Mapping[str, object],
        columns: Mapping[str, object] = MappingProxyType({}),
    ) -> tuple[Skill, dict[str, object]]:
        """The skill, and the values of its template's placeholders that ``columns`` leaves.

        A placeholder takes its value from ``context`` first, then from the state's field.

        Raises:
            RegistryError: For an unknown skill.
        """
        skill = self._skills.get(skill_id)
        if skill is None:
            msg = f"{self.origin}: no memory template for unknown skill {skill_id!r}"
            raise RegistryError(msg)
        values: dict[str, object] = {}
        for name in self._placeholders[skill_id]:
            if name in columns:
                continue
            if name in context:
                values[name] = context[name]
            elif name in STATE_FIELDS:
                values[name] = getattr(state, name)
        return skill, values


class _Admission(NamedTuple):
    """What :meth:`SkillRegistry.check` tests of one skill, compiled for the hot paths."""

    tenures: tuple[str, ...] | None  # None: every tenure is eligible
    preconditions: tuple[Precondition, ...]
    limits: tuple[float, ...]  # affordability limits, shares of annual income


# Preconditions (field, op, value) every household that decides meets.
_NOT_RELOCATED = frozenset(
    {("relocated", "not", None), ("relocated", "==", False), ("relocated", "!=", True)}
)


def _not_always_admissible(skill: Skill) -> str:
    """Why some household that decides might not be allowed ``skill``; empty when none."""
    closed = [tenure for tenure in TENURES if not skill.eligible(tenure)]
    if closed:
        return f"its eligible_agent_types leave out {closed[0]}s"
    for precondition in skill.preconditions:
        # "not relocated" (or "relocated == false", "relocated != true") is the one every
        # household that decides meets: movers are gone.
        if (precondition.field, precondition.op, precondition.value) not in _NOT_RELOCATED:
            return f"its precondition {shown_value(precondition.text)} can fail"
    if skill.institutional_constraints:
        name = next(iter(skill.institutional_constraints))
        return f"its institutional constraint {name} can make it unaffordable"
    return ""


def _admission(skill: Skill) -> _Admission:
    return _Admission(
        None if ANY_AGENT in skill.eligible_agent_types else tuple(skill.eligible_agent_types),
        tuple(skill.preconditions),
        tuple(
            limit
            for name, limit in skill.institutional_constraints.items()
            if name in SKILL_CONSTRAINTS
        ),
    )


def _compile_admits(terms: _Admission) -> Callable[[HouseholdState, float], bool]:
    """One predicate with exactly :meth:`SkillRegistry.check`'s verdict, minus the error text."""
    tenures, limits = terms.tenures, terms.limits
    tests = tuple(_compile_precondition(p) for p in terms.preconditions)
    inf = math.inf

    def admits(state: HouseholdState, cost: float) -> bool:
        if tenures is not None and state.tenure not in tenures:
            return False
        for test in tests:
            if not test(state):
                return False
        if not 0.0 <= cost < inf:  # negative, infinite or NaN, as in check
            return False
        if cost > 0 and limits:
            income = state.income
            if income <= 0:
                return False
            share = cost / income
            for limit in limits:
                if not share <= limit:  # a NaN share (NaN income) fails, as in check
                    return False
        return True

    return admits


class _Columns:
    """State fields of many households as arrays, each read from the states once."""

    __slots__ = ("_arrays", "_states", "_values")

    def __init__(self, states: Sequence[HouseholdState]) -> None:
        self._states = states
        self._values: dict[str, list[Any]] = {}
        self._arrays: dict[str, np.ndarray] = {}

    def values(self, name: str) -> list[Any]:
        values = self._values.get(name)
        if values is None:
            values = self._values[name] = list(map(operator.attrgetter(name), self._states))
        return values

    def array(self, name: str) -> np.ndarray:
        array = self._arrays.get(name)
        if array is None:
            array = self._arrays[name] = np.array(self.values(name))
        return array

    def holds(self, condition: Precondition) -> np.ndarray:
        """Where ``condition`` holds, as :meth:`Precondition.check` decides it."""
        if condition.op in ("truthy", "not"):  # of a true/false field (Precondition.parse)
            truth = np.fromiter(map(bool, self.values(condition.field)), bool, len(self._states))
            return truth if condition.op == "truthy" else ~truth
        return np.asarray(_OPS[condition.op](self.array(condition.field), condition.value), bool)


class _ArrayColumns:
    """:class:`_Columns` of households held as columns: the entries of ``rows`` of each."""

    __slots__ = ("_arrays", "_columns", "_rows")

    def __init__(self, columns: Mapping[str, np.ndarray], rows: np.ndarray) -> None:
        self._columns = columns
        self._rows = rows
        self._arrays: dict[str, np.ndarray] = {}

    def array(self, name: str) -> np.ndarray:
        array = self._arrays.get(name)
        if array is None:
            array = self._arrays[name] = self._columns[name][self._rows]
        return array

    def holds(self, condition: Precondition) -> np.ndarray:
        """Where ``condition`` holds, as :meth:`Precondition.check` decides it."""
        if condition.op in ("truthy", "not"):  # of a true/false field (Precondition.parse)
            truth = self.array(condition.field).astype(bool)
            return truth if condition.op == "truthy" else ~truth
        return np.asarray(_OPS[condition.op](self.array(condition.field), condition.value), bool)


def _compile_precondition(condition: Precondition) -> Callable[[HouseholdState], bool]:
    get = operator.attrgetter(condition.field)
    if condition.op == "truthy":
        return lambda state: bool(get(state))
    if condition.op == "not":
        return lambda state: not get(state)
    compare, value = _OPS[condition.op], condition.value
    return lambda state: bool(compare(get(state), value))


def _affordability_problem(name: str, limit: float, cost: float, income: float) -> str:
    """Describe why ``cost`` breaks constraint ``name`` ('' when it does not)."""
    if name not in SKILL_CONSTRAINTS or cost <= 0:
        return ""
    if income <= 0:
        return (
            f"unaffordable: cost {_money(cost)} with income {_money(income)}, "
            f"limit {limit:.1%} ({name})"
        )
    share = cost / income
    if share <= limit:
        return ""
    return f"unaffordable: cost {_money(cost)} is {share:.1%} of income, limit {limit:.1%} ({name})"


def load_registry(path: str | os.PathLike[str]) -> SkillRegistry:
    """Read and validate a registry file (same as :meth:`SkillRegistry.load`)."""
    return SkillRegistry.load(path)
