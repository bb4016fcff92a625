"""Reading the project's YAML files: duplicate keys refused, errors described on one line.

Shared by every loader of user-written YAML (configs, experiments, registries, curve files,
targets).
"""

from __future__ import annotations

import math
import re
from typing import Any

import yaml

__all__ = ["describe_decode_error", "describe_yaml_error", "dump_yaml", "load_yaml"]

_MERGE_TAG = "tag:yaml.org,2002:merge"
_DIGITS_READABLE = 4300  # sys.get_int_max_str_digits()'s default
_READABLE_BELOW = 10**_DIGITS_READABLE


class _UniqueKeyLoader(yaml.SafeLoader):
    """``yaml.SafeLoader`` that refuses a key given twice in one mapping.

    YAML parsers keep the last of two equal keys, so a config that sets ``years`` twice, or has
    two ``households:`` sections, would silently lose the first.
    """

    def construct_mapping(self, node: yaml.MappingNode, deep: bool = False) -> dict[Any, Any]:
        seen: set[Any] = set()
        for key_node, _ in node.value:
            if key_node.tag == _MERGE_TAG:  # "<<: *anchor" merges keys; later keys may override
                continue
            key = self.construct_object(key_node, deep=deep)
            try:
                duplicate = key in seen
            except TypeError:  # an unhashable key: the base constructor reports it
                continue
            if duplicate:
                raise yaml.constructor.ConstructorError(
                    "while constructing a mapping",
                    node.start_mark,
                    f"duplicate key {key!r}",
                    key_node.start_mark,
                )
            seen.add(key)
        return super().construct_mapping(node, deep=deep)

    def construct_yaml_int(self, node: yaml.ScalarNode) -> int:
        # Read as YAML 1.2 does (see _INT_12 below): digits are decimal, with or without leading
        # zeros; 0x and 0b keep their bases. Python refuses to convert more than 4,300 digits
        # (CVE-2020-10735) with a ValueError, which no loader's caller expects of a YAML file:
        # a YAML error names where it is. A hex or binary number is read whatever its length,
        # but would fail the first message that shows it, so it is held to the same bound.
        scalar = str(self.construct_scalar(node))
        if not _INT_12.fullmatch(scalar):  # an explicit !!int: int() would take " 12 " or "--5"
            problem = f"{node.value!r} is not an integer"
            raise yaml.constructor.ConstructorError(None, None, problem, node.start_mark)
        text = scalar.replace("_", "")
        sign = -1 if text.startswith("-") else 1
        digits = text[1:] if text[:1] in ("-", "+") else text
        base = {"0x": 16, "0b": 2}.get(digits[:2].lower(), 10)
        body = digits[2:] if base != 10 else digits
        if not body:  # 0x_: the rule's digits may all be separators
            problem = f"{node.value!r} has no digits after its base prefix"
            raise yaml.constructor.ConstructorError(None, None, problem, node.start_mark)
        # Leading zeros count towards Python's bound on digits, not towards the value.
        significant = body.lstrip("0") or "0"
        # int() refuses a decimal one past the bound; a hex or binary one would fail later.
        if (base == 10 and len(significant) > _DIGITS_READABLE) or abs(
            value := sign * int(significant, base)
        ) >= _READABLE_BELOW:
            problem = f"an integer of {len(str(node.value))} characters, too long to read"
            raise yaml.constructor.ConstructorError(None, None, problem, node.start_mark)
        return value

    def construct_yaml_float(self, node: yaml.ScalarNode) -> float:
        # PyYAML's own would read an explicit `!!float 1:30` as base 60 (90.0), and float()
        # would take "infinity" or " 12 ": an explicit tag follows the implicit rule, in which
        # a decimal integer is a float too (`!!float 3` is 3.0).
        scalar = str(self.construct_scalar(node))
        if not (_FLOAT_12.fullmatch(scalar) or _DECIMAL.fullmatch(scalar)):
            problem = f"{node.value!r} is not a number"
            raise yaml.constructor.ConstructorError(None, None, problem, node.start_mark)
        text = scalar.replace("_", "").lower()
        if text.endswith((".inf", ".nan")):
            return {".inf": math.inf, "+.inf": math.inf, "-.inf": -math.inf}.get(text, math.nan)
        return float(text)


_UniqueKeyLoader.add_constructor("tag:yaml.org,2002:int", _UniqueKeyLoader.construct_yaml_int)
_UniqueKeyLoader.add_constructor("tag:yaml.org,2002:float", _UniqueKeyLoader.construct_yaml_float)


class _Dumper(yaml.SafeDumper):
    """``yaml.SafeDumper`` that quotes the strings :func:`load_yaml` would read as numbers."""


_INT = "tag:yaml.org,2002:int"
_FLOAT = "tag:yaml.org,2002:float"

# YAML 1.1, which PyYAML implements, reads numbers as YAML 1.2 and every other tool do not:
# - `010` is octal (8) while `09` is text, so `years: 010` ran 8 years and a curve's depths
#   `005, 010` became 5 and 8;
# - `1:30` is base 60 (90), so `--set years=1:30` ran 90 years;
# - a number whose exponent has no point before it or no sign (5e-1, 1e6), or a signed one
#   with no digit before its point (-.5), is text, so a registry refused
#   `max_cost_share_of_income: 5e-1` as "not a number".
# The loader reads numbers as YAML 1.2's core schema does: digits are decimal, `1:30` is text
# (which a number field then refuses), and those are floats. 0x and 0b, and `1_000` (YAML 1.1's
# digit separator) still read as numbers. The dumper quotes every string either rule set would
# read as a number, so what it writes loads back equal through load_yaml and yaml.safe_load.
_INT_12 = re.compile(r"^[-+]?(?:0b[0-1_]+|0x[0-9a-fA-F_]+|[0-9][0-9_]*)$")
_FLOAT_12 = re.compile(
    r"^(?:[-+]?(?:[0-9][0-9_]*\.[0-9_]*|\.[0-9][0-9_]*)(?:[eE][-+]?[0-9]+)?"
    r"|[-+]?[0-9][0-9_]*[eE][-+]?[0-9]+"
    r"|[-+]?\.(?:inf|Inf|INF)|\.(?:nan|NaN|NAN))$"
)
_DECIMAL = re.compile(r"^[-+]?[0-9][0-9_]*$")
_NUMBER_STARTS = list("-+.0123456789")

_UniqueKeyLoader.yaml_implicit_resolvers = {
    first: [(tag, regexp) for tag, regexp in resolvers if tag not in (_INT, _FLOAT)]
    for first, resolvers in yaml.SafeLoader.yaml_implicit_resolvers.items()
}
for _cls in (_UniqueKeyLoader, _Dumper):  # the dumper keeps YAML 1.1's rules besides
    _cls.add_implicit_resolver(_INT, _INT_12, _NUMBER_STARTS)
    _cls.add_implicit_resolver(_FLOAT, _FLOAT_12, _NUMBER_STARTS)


def load_yaml(text: str) -> Any:
    """Parse one YAML document safely, refusing duplicate keys.

    Raises:
        yaml.YAMLError: For a syntax error or a key given twice in one mapping.
    """
    return yaml.load(text, Loader=_UniqueKeyLoader)


def dump_yaml(data: Any, **options: Any) -> str:
    """``yaml.safe_dump`` with :func:`load_yaml`'s number rules: what it writes loads back equal.

    ``options`` are ``yaml.dump``'s (``sort_keys``, ``default_flow_style``, ...).
    """
    return yaml.dump(data, Dumper=_Dumper, **options)


def describe_yaml_error(err: yaml.YAMLError) -> str:
    """``"line L, column C: <problem>[, <context> started at line K]"`` on one line.

    PyYAML's own message spans several lines and quotes the stream; users need the position
    and the problem, and where an unclosed bracket or quote began.
    """
    mark = getattr(err, "problem_mark", None)
    where = f"line {mark.line + 1}, column {mark.column + 1}: " if mark else ""
    problem = getattr(err, "problem", None) or str(err).splitlines()[0]
    context, start = getattr(err, "context", None), getattr(err, "context_mark", None)
    if context and start:
        problem += f", {context} started at line {start.line + 1}"
    return where + problem


def describe_decode_error(err: UnicodeDecodeError) -> str:
    """``"not UTF-8 text (byte N: <reason>)"``, for a file that is not UTF-8 encoded."""
    return f"not UTF-8 text (byte {err.start}: {err.reason})"
