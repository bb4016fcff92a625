"""Reading the project's YAML files: duplicate keys refused, errors described on one line.

Shared by every loader of user-written YAML (configs, experiments, registries, curve files,
targets).
"""

from __future__ import annotations

import re
from typing import Any

import yaml

__all__ = ["describe_decode_error", "describe_yaml_error", "dump_yaml", "load_yaml"]

_MERGE_TAG = "tag:yaml.org,2002:merge"
_DIGITS_READABLE = 4300  # sys.get_int_max_str_digits()'s default


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
        # Read as YAML 1.2 does (see _INT below): digits are decimal, with or without leading
        # zeros; 0x and 0b keep their bases. Python refuses to convert more than 4,300 digits
        # (CVE-2020-10735) with a ValueError, which no loader's caller expects of a YAML file:
        # a YAML error names where it is.
        text = str(self.construct_scalar(node)).replace("_", "")
        sign = -1 if text.startswith("-") else 1
        digits = text.lstrip("+-")
        base = {"0x": 16, "0b": 2}.get(digits[:2].lower(), 10)
        try:
            return sign * int(digits[2:] if base != 10 else digits, base)
        except ValueError:
            problem = (
                f"an integer of {len(str(node.value))} characters, too long to read"
                if len(digits) > _DIGITS_READABLE
                else f"{node.value!r} has no digits after its base prefix"
            )
            raise yaml.constructor.ConstructorError(None, None, problem, node.start_mark) from None


_UniqueKeyLoader.add_constructor("tag:yaml.org,2002:int", _UniqueKeyLoader.construct_yaml_int)


class _Dumper(yaml.SafeDumper):
    """``yaml.SafeDumper`` that quotes the strings :func:`load_yaml` would read as numbers."""


_INT = "tag:yaml.org,2002:int"
_FLOAT = "tag:yaml.org,2002:float"

# YAML 1.1, which PyYAML implements, reads numbers as YAML 1.2 and every other tool do not:
# - `010` is octal (8) while `09` is text, so `years: 010` ran 8 years and a curve's depths
#   `005, 010` became 5 and 8;
# - `1:30` is base 60 (90), so `--set years=1:30` ran 90 years;
# - a number whose exponent has no point before it or no sign (5e-1, 1e6) is text, so a
#   registry refused `max_cost_share_of_income: 5e-1` as "not a number".
# The loader reads them as YAML 1.2 does: digits are decimal, `1:30` is text (which a number
# field then refuses), and those exponents are floats. 0x and 0b and `1_000` still read as
# numbers. The dumper quotes every string either rule set would read as a number, so what it
# writes loads back equal through load_yaml and through plain yaml.safe_load alike.
_DECIMAL_INT = re.compile(r"^[-+]?[0-9][0-9_]*$")
_EXPONENT_FLOAT = re.compile(r"^[-+]?(?:[0-9][0-9_]*(?:\.[0-9_]*)?|\.[0-9][0-9_]*)[eE][-+]?[0-9]+$")
_SIGNED_DIGITS = list("-+0123456789")

_UniqueKeyLoader.yaml_implicit_resolvers = {
    first: [(tag, regexp) for tag, regexp in resolvers if tag not in (_INT, _FLOAT)]
    for first, resolvers in yaml.SafeLoader.yaml_implicit_resolvers.items()
}
_UniqueKeyLoader.add_implicit_resolver(
    _INT, re.compile(r"^[-+]?(?:0b[0-1_]+|0x[0-9a-fA-F_]+|[0-9][0-9_]*)$"), _SIGNED_DIGITS
)
_UniqueKeyLoader.add_implicit_resolver(
    _FLOAT,
    re.compile(
        r"^(?:[-+]?[0-9][0-9_]*\.[0-9_]*(?:[eE][-+][0-9]+)?|\.[0-9][0-9_]*(?:[eE][-+][0-9]+)?"
        r"|[-+]?\.(?:inf|Inf|INF)|\.(?:nan|NaN|NAN))$"
    ),
    list("-+.0123456789"),
)
_Dumper.add_implicit_resolver(_INT, _DECIMAL_INT, _SIGNED_DIGITS)
for _cls in (_UniqueKeyLoader, _Dumper):
    _cls.add_implicit_resolver(_FLOAT, _EXPONENT_FLOAT, list("-+.0123456789"))


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
