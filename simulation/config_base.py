"""The base of every config model: what all of floodsim's YAML files refuse alike.

Run configs (and the sections defined next to the code that uses them), experiment,
calibration and targets files are pydantic models built on :class:`ConfigModel`. It lives in a
module of its own because those sections are imported by :mod:`simulation.config`, which builds
on them. :func:`describe_validation_error` is the one line in which a refusal of any of them
(and of a checkpoint or a memory snapshot) is reported.
"""

from __future__ import annotations

import re
import types
from typing import Annotated, Any, Union, get_args, get_origin
from urllib.parse import parse_qsl, urlsplit

from pydantic import (
    BaseModel,
    ConfigDict,
    Strict,
    ValidationError,
    ValidationInfo,
    field_validator,
)

from simulation.errors import shown_value

__all__ = [
    "LAX",
    "SECRET_KEY_NAMES",
    "ConfigModel",
    "describe_validation_error",
    "url_holds_credentials",
]

#: Keys that hold the *name* of a secret: their values are never echoed in an error.
SECRET_KEY_NAMES = frozenset({"api_key_env"})
#: Query parameters of a URL whose values are credentials (``?api_key=...``, ``&token=...``).
_CREDENTIAL_PARAMETER = re.compile(r"key|token|secret|passw|sig|auth", re.IGNORECASE)


def url_holds_credentials(value: object) -> bool:
    """Whether ``value`` is a URL holding a password or a credential-named query parameter.

    Such a URL is never echoed in an error, and ``decision.llm.base_url`` refuses it: the config
    is written into the run directory, and a key belongs in the variable ``api_key_env`` names.
    """
    if not isinstance(value, str):
        return False
    try:
        parts = urlsplit(value)
        password = parts.password
    except ValueError:  # an invalid port or bracket: not a URL to hold anything
        return False
    names = (name for name, _ in parse_qsl(parts.query, keep_blank_values=True))
    return password is not None or any(_CREDENTIAL_PARAMETER.search(n) for n in names)


#: Marks a type that takes what YAML and JSON give where strict mode would not: a tuple from a
#: list (YAML has no tuples) and an integer mapping key from a digit string (JSON keys are
#: strings, and so are the year keys of a written ``config.resolved.yaml``). What the tuple
#: holds stays strict: ``Annotated[tuple[str, ...], LAX]``.
LAX = Strict(False)


def _bare(annotation: Any) -> Any:
    """``annotation`` without ``Annotated[...]`` metadata."""
    while get_origin(annotation) is Annotated:
        annotation = get_args(annotation)[0]
    return annotation


def _wants_a_number(annotation: Any) -> bool:
    """Whether a value of ``annotation`` may be a number but not a boolean."""
    annotation = _bare(annotation)
    if get_origin(annotation) in (Union, types.UnionType):
        members = [_bare(member) for member in get_args(annotation)]
        return bool not in members and any(m in (int, float) for m in members)
    return annotation in (int, float)


def _boolean_for_a_number(annotation: Any, value: Any) -> str | None:
    """Where ``value`` holds a boolean that ``annotation`` expects a number for, else ``None``.

    ``""`` is ``value`` itself; inside mappings (``{X: false}`` for a zone multiplier) the key,
    inside sequences (an ``lhs`` range) the index. Unions are looked through (``audit.sample``,
    a fraction or a list of ids).
    """
    if isinstance(value, bool):
        return "" if _wants_a_number(annotation) else None
    annotation = _bare(annotation)
    origin, args = get_origin(annotation), get_args(annotation)
    if origin in (Union, types.UnionType):
        for member in args:
            if get_origin(_bare(member)) in (dict, list, tuple):
                found = _boolean_for_a_number(member, value)
                if found is not None:
                    return found
        return None
    if origin is dict and isinstance(value, dict) and len(args) == 2:
        # Keys too: a year given as true would be year 1.
        items = [(key, args[0], key) for key in value]
        items += [(key, args[1], item) for key, item in value.items()]
    elif origin in (list, tuple) and isinstance(value, (list, tuple)) and args:
        fixed = origin is tuple and Ellipsis not in args and len(args) == len(value)
        items = [(f"[{n}]", args[n] if fixed else args[0], item) for n, item in enumerate(value)]
    else:
        return None
    for key, expected, item in items:
        found = _boolean_for_a_number(expected, item)
        if found is not None:
            return f"{key}{'.' if found and not found.startswith('[') else ''}{found}"
    return None


class ConfigModel(BaseModel):
    """A config model: unknown keys, NaN, infinity and values of another type are errors.

    Values are immutable once validated. NaN and infinity (YAML ``.nan``, ``.inf``) mean nothing
    as a rate, cost, limit, count or coefficient; a missing limit is ``null`` where the key
    allows it. Validation is strict (pydantic's strict mode): a boolean must be ``true`` or
    ``false``, not ``1`` or ``"yes"``; a number must be a number, not a quoted string
    (``years: "10"``) or a boolean (YAML reads ``true`` as a boolean, which would otherwise be
    the number 1: ``years: true`` would run one year); an integer must be written without a
    fractional part (``10``, not ``10.0``). A whole number is still a float (``cost: 50000``).
    A research config should say what it means: a lax reading hides the mistake behind a
    typo or a quoting slip. Tuples and integer mapping keys are marked :data:`LAX`.
    """

    model_config = ConfigDict(extra="forbid", frozen=True, allow_inf_nan=False, strict=True)

    @field_validator("*", mode="before")
    @classmethod
    def _booleans_are_not_numbers(cls, value: Any, info: ValidationInfo) -> Any:
        where = _boolean_for_a_number(cls.model_fields[info.field_name].annotation, value)
        if where is not None:
            msg = f"{where + ': ' if where else ''}expected a number, not a boolean"
            raise ValueError(msg)
        return value


def describe_validation_error(error: ValidationError, origin: str) -> str:
    """One line: file, dotted key path, problem (and how many more problems there are)."""
    errors = error.errors()
    first = errors[0]
    loc = ".".join(str(p) for p in first["loc"] if p != "[key]")  # a dict key: named anyway
    # Without "or instance of GovernmentConfig": the name of a class of ours tells a user nothing.
    message = first["msg"].removeprefix("Value error, ").split(" or instance of ")[0]
    if first["type"] in ("extra_forbidden", "unexpected_keyword_argument"):
        message = "unknown key"
    elif first["type"] == "string_type" and isinstance(first.get("input"), (dict, list)):
        # `template: Year {year}: a flood` unquoted is YAML for a mapping, not the text.
        kind = "a mapping" if isinstance(first["input"], dict) else "a list"
        message = (
            f"{message}, got {kind}: YAML reads unquoted text holding ': ', braces or brackets "
            "as one; put the text in quotes"
        )
    elif (
        "input" in first
        and first["type"] != "missing"
        and not isinstance(first["input"], dict)
        and not (first["loc"] and first["loc"][-1] in SECRET_KEY_NAMES)  # may be a pasted key
        and not url_holds_credentials(first["input"])
    ):
        message = f"{message} (got {shown_value(first['input'])})"
    more = len(errors) - 1
    suffix = ""
    if more:
        # Where the next one is: a problem the first one hides (a key left out of its section
        # by its indentation, whose section then reads empty) is often the one to mend.
        after = ".".join(str(p) for p in errors[1]["loc"] if p != "[key]")
        at = f", the next at {after}" if after else ""
        suffix = f" (and {more} more problem{'s' if more > 1 else ''}{at})"
    if not loc and first["type"] == "value_error":  # a cross-key check names its keys itself
        return f"{origin}: {message}{suffix}"
    return f"{origin}: {loc or '(top level)'}: {message}{suffix}"
