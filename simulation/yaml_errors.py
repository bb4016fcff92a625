"""One-line descriptions of YAML syntax errors, shared by every loader of YAML files."""

from __future__ import annotations

from typing import TYPE_CHECKING

if TYPE_CHECKING:
    import yaml

__all__ = ["describe_yaml_error"]


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
