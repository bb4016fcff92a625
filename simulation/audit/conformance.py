"""Whole audit lines checked: against their stream's shipped JSON Schema, and against themselves.

The readers (:mod:`simulation.audit.readers`) check a line's top-level fields as they read it,
for about a microsecond a line. What those fields hold (a trace's ``reasoning.constructs.TP.value``,
a consolidation's ``reflections``) is checked here, where it is worth its cost, and so is what a
JSON Schema cannot say but every line the writer makes satisfies: lists of one length (retrieved
ids and their scores), a count and its list, the year a ``retrieve_memory`` call names and its
line's, memory item ids (``<household>:<n>``) of the line's own household, and an LLM request
that agrees with where its reply came from (a cached reply made no request and took no time;
a reply from the endpoint took a request; a failed request reports no tokens).

* ``floodsim audit summarize`` checks every line (its ``schema`` check);
* the commands that analyse runs (``report``, ``check-behaviour``, ``audit memory``) and the
  analysis functions a notebook calls (:func:`simulation.audit.readers.naming_damaged_lines`)
  check lines only once an analysis has failed on a value (:func:`damaged_lines_named`): a line
  damaged after the run wrote it is then named, file, line and field, instead of a traceback,
  and an intact run is read at the readers' speed.

The validators are compiled from the schemas by fastjsonschema, once per process and stream. At
level ``standard`` they take 3 to 7 µs a line (jsonschema's took 214 to 907), and the agreement
1 to 2.5 more.

Example::

    problem = line_problem(record, "household_traces")
    # 'reasoning.constructs.TP.value must be number (got "x")', or None
"""

from __future__ import annotations

import contextlib
import functools
import itertools
from pathlib import Path
from typing import TYPE_CHECKING, Any

import fastjsonschema

from simulation.audit import load_schema
from simulation.audit.readers import (
    AuditReadError,
    _shown,
    iter_file,
    lines_counted,
    listed_lines,
    read_manifest,
    stream_path,
)
from simulation.audit.writer import LLM_STREAM, STREAMS

if TYPE_CHECKING:
    from collections.abc import Callable, Iterable, Iterator

    from simulation.audit.readers import StrPath

__all__ = ["damaged_lines_named", "first_damaged_line", "line_problem"]

# What an analysis raises when a value is not what the schema promised: a mapping that is a
# list, a number that is text, a field that is missing.
_VALUE_ERRORS = (AttributeError, IndexError, KeyError, TypeError, ValueError)
# The name fastjsonschema gives the whole line.
_LINE = "data"


@functools.cache
def _validator(stream: str) -> Callable[[Any], Any]:
    # use_default=False: the validator must not fill in the schema's defaults (none today).
    return fastjsonschema.compile(load_schema(stream), use_default=False)


def line_problem(record: dict[str, Any], stream: str) -> str | None:
    """What is wrong with ``record`` as a line of ``stream`` (the first thing found), if anything.

    The line is checked against the stream's JSON Schema, then, if it matches, for the agreement
    between its fields that the module docstring lists.

    Args:
        record: One parsed audit line.
        stream: One of :data:`~simulation.audit.STREAMS` or ``llm_calls``.

    Returns:
        ``None`` for a line that is what the writer makes, else the field and what is wrong
        with it, for example ``reasoning.constructs.TP.value must be number (got 'x')`` or
        ``memory.retrieved names 'H00002:3', not an item of this household``.
    """
    try:
        _validator(stream)(record)
    except fastjsonschema.JsonSchemaValueException as err:
        return _described(err)
    agreement = _AGREEMENT.get(stream)
    return None if agreement is None else agreement(record)


def _described(err: fastjsonschema.JsonSchemaValueException) -> str:
    name = err.name.removeprefix(f"{_LINE}.") if err.name != _LINE else "the line"
    rule = (err.message or "").removeprefix(err.name).strip()
    if err.rule in ("required", "additionalProperties"):  # the value is the whole mapping
        return f"{name} {rule}"
    return f"{name} {rule} (got {_shown(err.value)})"


# ------------------------------------------------------------------ what a schema cannot say
# The writer's lines agree with themselves in ways JSON Schema cannot express: lists of one
# length, a count and its list, the year a call names and the line's, memory item ids that
# are "<owner>:<n>" with the line's household as owner, and an LLM request's status, attempts
# and tokens. Checked after the schema, so the fields are there and of their types.


def _foreign(record: dict[str, Any], ids: Iterable[str]) -> str | None:
    """The first of ``ids`` that is not an item of the line's household, if any."""
    owner = f"{record['agent_id']}:"
    return next((i for i in ids if not i.startswith(owner)), None)


def _not_owned(field: str, item_id: str | None) -> str | None:
    if item_id is None:
        return None
    return f"{field} names {item_id!r}, not an item of this household"


def _lengths(block: dict[str, Any], name: str, keys: Iterable[str], count: int) -> str | None:
    """Whether each of ``keys`` present in ``block`` has ``count`` entries."""
    for key in keys:
        if key in block and len(block[key]) != count:
            return f"{name}.{key} has {len(block[key])} entries for {count} retrieved items"
    return None


def _trace_agreement(record: dict[str, Any]) -> str | None:
    memory = record.get("memory")
    if memory is not None:
        retrieved = memory["retrieved"]
        keys = ("retrieval_scores", "retrieved_from", "retrieved_content")
        if problem := _lengths(memory, "memory", keys, len(retrieved)):
            return problem
        snapshot = (
            i["id"] for key in ("working_items", "episodic_items") for i in memory.get(key, ())
        )
        if problem := _not_owned("memory.retrieved", _foreign(record, retrieved)):
            return problem
        if problem := _not_owned("memory's items", _foreign(record, snapshot)):
            return problem
    update = record.get("memory_update")
    return (
        None if update is None else _not_owned("memory_update.id", _foreign(record, [update["id"]]))
    )


def _tool_agreement(record: dict[str, Any]) -> str | None:
    call = record["tool_invocation"]
    count = call["result_count"]
    if len(call["result"]) != count:
        return f"tool_invocation.result_count is {count} for {len(call['result'])} results"
    top_k = call["parameters"].get("top_k")
    if top_k is not None and count > top_k:
        return f"tool_invocation.result_count is {count}, above parameters.top_k {top_k}"
    if problem := _lengths(call, "tool_invocation", ("scores", "result_ids"), count):
        return problem
    year = call["parameters"].get("current_year")
    if year is not None and year != record["year"]:
        return (
            f"tool_invocation.parameters.current_year is {year} in a line of year {record['year']}"
        )
    # At level full the result is the items' contents, and their ids are result_ids.
    ids = call["result_ids"] if "result_ids" in call else call["result"]
    return _not_owned("tool_invocation's result", _foreign(record, ids))


def _end_agreement(record: dict[str, Any]) -> str | None:
    block = record["consolidation"]
    transferred = block["transferred_items"]
    if block["transferred_count"] != len(transferred):
        return (
            f"consolidation.transferred_count is {block['transferred_count']} for "
            f"{len(transferred)} transferred_items"
        )
    ids = itertools.chain(
        transferred,
        block["promoted"],
        (e["id"] for e in block["evicted"]),
        (r["id"] for r in block["reflections"]),
    )
    return _not_owned("consolidation", _foreign(record, ids))


def _update_agreement(record: dict[str, Any]) -> str | None:
    ids = itertools.chain((record["memory_item"]["id"],), (e["id"] for e in record["evicted"]))
    return _not_owned("memory_updates", _foreign(record, ids))


def _call_agreement(record: dict[str, Any]) -> str | None:
    # A reply from the cache is an "ok" made by no request to the endpoint (cache.py); any
    # other "ok" took at least one; a failure reports no tokens.
    status, attempts = record["status"], record["transport_attempts"]
    if record["cached"]:
        if status != "ok":
            return f"status is {status!r} in a line of a reply from the cache"
        if attempts:
            return f"transport_attempts is {attempts} in a line of a reply from the cache"
        if record.get("latency_s", 0) != 0:
            return f"latency_s is {record['latency_s']} in a line of a reply from the cache"
    elif status == "ok" and not attempts:
        return "transport_attempts is 0 in a line of a reply from the endpoint"
    if status != "ok":
        for key in ("prompt_tokens", "completion_tokens"):
            if record[key] is not None:
                return f"{key} is {record[key]} in a line of a failed request ({status})"
    return None


_AGREEMENT: dict[str, Callable[[dict[str, Any]], str | None]] = {
    "household_traces": _trace_agreement,
    "tool_invocations": _tool_agreement,
    "consolidation": _end_agreement,
    "memory_updates": _update_agreement,
    LLM_STREAM: _call_agreement,
}


def _stream_files(folder: Path) -> Iterator[tuple[Path, str, int | None]]:
    """The audit files of a run directory, or of each run of an experiment folder.

    Each with its stream and the lines its run's manifest records (``None``: unknown).
    """
    experiment_runs = folder / "runs"
    if experiment_runs.is_dir():
        runs = sorted(p for p in experiment_runs.iterdir() if p.is_dir())
    else:
        runs = [folder]
    for run in runs:
        try:
            manifest = read_manifest(run)
        except AuditReadError:  # the readers name what is wrong with it when they need it
            manifest = None
        for stream in (*STREAMS, LLM_STREAM):
            if (path := stream_path(run, stream)) is not None:
                yield path, stream, listed_lines(manifest, stream)


def first_damaged_line(folder: StrPath, *, progress: bool | None = None) -> str | None:
    """The first audit line under ``folder`` that :func:`line_problem` finds wrong, named, if any.

    Args:
        folder: A run directory, or an experiment folder (its runs are read in name order).
        progress: Count the lines checked on a progress bar on stderr (``None``: when stderr is
            a terminal). Every line of an intact run is checked, at 4 to 10 µs a line.

    Returns:
        ``<file>: line <n> is malformed: <what>``, the form of the readers' own messages, or
        ``None`` when every line is what the writer makes (or ``folder`` holds no streams).
    """
    for path, stream, total in _stream_files(Path(folder)):
        counted = lines_counted(
            iter_file(path),
            total=total,
            desc=f"looking for a damaged line in {path.name}",
            progress=progress,
        )
        try:
            with counted:
                for number, record in counted:
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
    lines under ``folder`` be checked (:func:`line_problem`). If one is damaged, an
    :class:`~simulation.audit.readers.AuditReadError` naming the first such line replaces the
    error; if none is, the error was not the data's, and it propagates unchanged.

    Args:
        folder: The run directory or experiment folder the block analyses.

    Raises:
        AuditReadError: Naming the first damaged line under ``folder``.
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
