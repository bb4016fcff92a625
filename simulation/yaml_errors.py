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
        # Python refuses to convert more than 4,300 digits (CVE-2020-10735) with a ValueError,
        # which no loader's caller expects of a YAML file: a YAML error names where it is.
        try:
            return super().construct_yaml_int(node)
        except ValueError:
            raise yaml.constructor.ConstructorError(
                None,
                None,
                f"an integer of {len(str(node.value))} characters, too long to read",
                node.start_mark,
            ) from None


_UniqueKeyLoader.add_constructor("tag:yaml.org,2002:int", _UniqueKeyLoader.construct_yaml_int)


class _Dumper(yaml.SafeDumper):
    """``yaml.SafeDumper`` that quotes the strings :func:`load_yaml` would read as floats."""


# YAML 1.1, which PyYAML implements, reads a number whose exponent has no point before it or no
# sign (5e-1, 1e6, 1.5e3) as text, where YAML 1.2 and every other tool read a float: a registry
# would then refuse `max_cost_share_of_income: 5e-1` as "not a number". Those resolve as floats;
# the dumper knows it too, so a string such as a run named "2e3" is written quoted and read back
# as the same string.
for _cls in (_UniqueKeyLoader, _Dumper):
    _cls.add_implicit_resolver(
        "tag:yaml.org,2002:float",
        re.compile(r"^[-+]?(?:[0-9][0-9_]*(?:\.[0-9_]*)?|\.[0-9][0-9_]*)[eE][-+]?[0-9]+$"),
        list("-+.0123456789"),
    )


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
