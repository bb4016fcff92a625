"""Whole audit lines checked against their stream's shipped JSON Schema, nested fields included.

The readers (:mod:`simulation.audit.readers`) check a line's top-level fields as they read it,
for about a microsecond a line. What those fields hold (a trace's ``reasoning.constructs.TP.value``,
a consolidation's ``reflections``) is checked here, where it is worth its cost:

* ``floodsim audit summarize`` checks every line (its ``schema`` check);
* the commands that analyse runs (``report``, ``check-behaviour``, ``audit memory``) check lines
  only once an analysis has failed on a value (:func:`damaged_lines_named`): a line damaged after
  the run wrote it is then named, file, line and field, instead of a traceback, and an intact
  run is read at the readers' speed.

The validators are compiled from the schemas by fastjsonschema, once per process and stream. At
level ``standard`` they take 3 to 7 µs a line; jsonschema's took 214 to 907.

Example::

    problem = line_problem(record, "household_traces")
    # 'reasoning.constructs.TP.value must be number (got "x")', or None
"""

from __future__ import annotations

import contextlib
import functools
from pathlib import Path
from typing import TYPE_CHECKING, Any

import fastjsonschema

from simulation.audit import load_schema
from simulation.audit.readers import AuditReadError, iter_file, stream_path
from simulation.audit.writer import LLM_STREAM, STREAMS

if TYPE_CHECKING:
    from collections.abc import Callable, Iterator

    from simulation.audit.readers import StrPath

__all__ = ["damaged_lines_named", "first_damaged_line", "line_problem"]

# What an analysis raises when a value is not what the schema promised: a mapping that is a
# list, a number that is text, a field that is missing.
_VALUE_ERRORS = (AttributeError, IndexError, KeyError, TypeError, ValueError)
# Characters of a wrong value shown in a message, enough to recognise it.
_SHOWN_CHARS = 80
# The name fastjsonschema gives the whole line.
_LINE = "data"


@functools.cache
def _validator(stream: str) -> Callable[[Any], Any]:
    # use_default=False: the validator must not fill in the schema's defaults (none today).
    return fastjsonschema.compile(load_schema(stream), use_default=False)


def line_problem(record: dict[str, Any], stream: str) -> str | None:
    """What in ``record`` breaks the JSON Schema of ``stream`` (the first thing found), if any.

    Args:
        record: One parsed audit line.
        stream: One of :data:`~simulation.audit.STREAMS` or ``llm_calls``.

    Returns:
        ``None`` for a line that matches, else the field and the rule it breaks, for example
        ``reasoning.constructs.TP.value must be number (got 'x')``.
    """
    try:
        _validator(stream)(record)
    except fastjsonschema.JsonSchemaValueException as err:
        return _described(err)
    return None


def _described(err: fastjsonschema.JsonSchemaValueException) -> str:
    name = err.name.removeprefix(f"{_LINE}.") if err.name != _LINE else "the line"
    rule = (err.message or "").removeprefix(err.name).strip()
    if err.rule in ("required", "additionalProperties"):  # the value is the whole mapping
        return f"{name} {rule}"
    shown = repr(err.value)
    if len(shown) > _SHOWN_CHARS:
        shown = shown[:_SHOWN_CHARS] + "..."
    return f"{name} {rule} (got {shown})"


def _stream_files(folder: Path) -> Iterator[tuple[Path, str]]:
    """The audit files of a run directory, or of each run of an experiment folder."""
    experiment_runs = folder / "runs"
    if experiment_runs.is_dir():
        runs = sorted(p for p in experiment_runs.iterdir() if p.is_dir())
    else:
        runs = [folder]
    for run in runs:
        for stream in (*STREAMS, LLM_STREAM):
            if (path := stream_path(run, stream)) is not None:
                yield path, stream


def first_damaged_line(folder: StrPath) -> str | None:
    """The first audit line under ``folder`` that breaks its stream's schema, named, if any.

    Args:
        folder: A run directory, or an experiment folder (its runs are read in name order).

    Returns:
        ``<file>: line <n> is malformed: <what>``, the form of the readers' own messages, or
        ``None`` when every line matches (or ``folder`` holds no audit streams).
    """
    for path, stream in _stream_files(Path(folder)):
        try:
            for number, record in iter_file(path):
                if (problem := line_problem(record, stream)) is not None:
                    return f"{path}: line {number} is malformed: {problem}"
        except AuditReadError as err:  # damaged where the readers look: their word is the finding
            return str(err)
    return None


@contextlib.contextmanager
def damaged_lines_named(folder: StrPath) -> Iterator[None]:
    """Report an analysis's failure on a damaged audit line as that line, not as a traceback.

    Inside the block, an AttributeError, IndexError, KeyError, TypeError or ValueError that
    floodsim did not raise on purpose (its own errors already say what is wrong) makes the
    streams under ``folder`` be checked against their schemas. If a line breaks its schema, an
    :class:`~simulation.audit.readers.AuditReadError` naming the first such line replaces the
    error; if none does, the error was not the data's, and it propagates unchanged.

    Args:
        folder: The run directory or experiment folder the block analyses.

    Raises:
        AuditReadError: Naming the first line under ``folder`` that breaks its schema.
    """
    try:
        yield
    except _VALUE_ERRORS as err:
        if type(err).__module__.partition(".")[0] == "simulation":
            raise
        found = first_damaged_line(folder)
        if found is None:
            raise
        msg = f"{found}; `floodsim audit summarize` lists every such line of a run"
        raise AuditReadError(msg) from err
