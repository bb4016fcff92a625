"""AuditWriter: the JSONL audit trail of a run.

Four streams (DESIGN.md section 6; JSON Schemas in ``simulation/audit/schemas``):

``household_traces.jsonl``
    one line per audited household-year: state, retrieved memories, reasoning, action, the memory
    the action left, validation;
``memory_updates.jsonl``
    one line per memory write, with the items it evicted or moved;
``consolidation.jsonl``
    one line per audited household-year end: transfers, retention moves, reflections;
``tool_invocations.jsonl``
    one line per ``retrieve_memory`` call.

At the ``standard`` level traces refer to memories by id; the memory streams carry the contents,
so which items any household's stores hold at the end of any year can be rebuilt from them
(:func:`simulation.audit.replay.rebuild_memory`); each item's access count and last access come
from ``tool_invocations`` (``docs/audit_streams.md``). Lines are encoded with orjson into a
per-stream buffer and written whole, so a crash can only truncate the last line of a file.
"""

from __future__ import annotations

import contextlib
import functools
import hashlib
import io
import operator
import os
from datetime import UTC, datetime
from typing import TYPE_CHECKING, Any, BinaryIO, NamedTuple

import numpy as np
import orjson
import pandas as pd
import pyarrow as pa
import pyarrow.compute as pc
from isal import igzip

from simulation.audit.background import Background
from simulation.audit.lines import (
    HOLE,
    OPTIONAL,
    LineTemplate,
    coded,
    collapsed,
    encoded,
    joined_numbers,
    joined_rows,
    line_bytes,
    numbers,
    only_where,
    optional,
    separated,
    strings,
)
from simulation.decisions.base import LEVELS

if TYPE_CHECKING:
    from collections.abc import Callable, Hashable
    from concurrent.futures import Future
    from pathlib import Path

    from simulation.agents.state import HouseholdState
    from simulation.config import AuditConfig
    from simulation.decisions.base import Construct
    from simulation.memory import (
        CognitiveMemory,
        Eviction,
        MemoryItem,
        ScoredMemory,
        WriteResult,
        YearEnd,
    )
    from simulation.model import Decision

__all__ = [
    "DYNAMIC_FIELDS",
    "LLM_STREAM",
    "NO_EVICTIONS",
    "SCHEMA_VERSION",
    "STREAMS",
    "AuditWriter",
    "DecisionLines",
    "MemoryLines",
    "StateChanges",
    "YearEndMoves",
    "changed_state",
    "dynamic_state",
    "eviction_parts",
    "stream_names",
]

SCHEMA_VERSION = 1
#: What a household's year end moved, for :meth:`AuditWriter.year_ends`: the ids of the items
#: it transferred, the ``(id, from, to)`` of each item that left a store (``to``: the store it
#: moved to, or ``None``: forgotten), the reflections it wrote and the ids of the items tiered
#: retention promoted.
YearEndMoves = tuple[list[str], list[tuple[str, str, str | None]], list["MemoryItem"], list[str]]
STREAMS = ("household_traces", "memory_updates", "consolidation", "tool_invocations")
#: Written besides :data:`STREAMS` when households decide with a language model.
LLM_STREAM = "llm_calls"
#: Streams each level writes.
_LEVEL_STREAMS = {
    "full": STREAMS,
    "standard": STREAMS,
    "minimal": ("household_traces",),
    "off": (),
}


def stream_names(level: str, *, llm: bool) -> tuple[str, ...]:
    """The streams an audit ``level`` writes; ``llm``: households decide with a language model."""
    names = _LEVEL_STREAMS[level]
    return (*names, LLM_STREAM) if llm and level != "off" else names


#: Household fields that change during a run (the rest are fixed and live in the config/table).
DYNAMIC_FIELDS = (
    "has_insurance",
    "has_contents_insurance",
    "elevated",
    "relocated",
    "cumulative_damage",
    "insured_years",
    "claims_paid",
    "claims_denied",
)
_dynamic_values = operator.attrgetter(*DYNAMIC_FIELDS)  # all of them in one C call
#: How many (working, episodic) size pairs a writer keeps the quiet year-end entry of: at most
#: 255 occur with configs/default.yaml's capacities (4 and 50); the bound holds for any.
_QUIET_KEPT = 4096
#: The shapes of the lines the batch methods write (keys of their line formats).
_UPDATE, _YEAR_END, _CALL, _TRACE, _MINIMAL_TRACE = range(5)
#: The ``validation`` entry of a trace whose proposal stood (below ``full``).
_VALID = pa.scalar(b'{"valid":true}', pa.binary())
#: A decision's action (with its cost where one was paid).
_ACTION = LineTemplate({"decision_skill": HOLE, "cost": OPTIONAL}, line=False)
_BINARY = pa.binary()
#: The ``evicted`` list of a memory write that displaced nothing.
NO_EVICTIONS = b"[]"
_LEVEL_NAMES = strings(LEVELS)
#: A construct's entry in a trace (see _constructs).
_CONSTRUCT = LineTemplate({"level": HOLE, "value": HOLE}, line=False)
#: Lines the batch methods make before writing them: a year's lines of a stream at once
#: would take hundreds of MB at 100,000 households (and the stream's buffer would keep them).
#: 2,048 traces are about 1 MB, the size of a core's L2 cache: at 10,000 households the
#: kernel's time (copying lines to the page cache, faulting in fresh buffers) fell from 1.0-1.8
#: to 0.45-0.65 µs per household-year against batches of 8,192 (docs/performance.md).
_LINES_PER_BATCH = 2048
#: A batch of encoded lines this large is written to its file directly, not through the
#: stream's buffer: one system call is nothing beside copying a batch this size.
_DIRECT_BYTES = 1 << 16
#: Every this many bytes of lines, a stream tells the kernel it will not read its file's
#: pages again (see _Stream._release). 16 and 64 MiB measured alike, 256 MiB slower.
_RELEASE_BYTES = 64 << 20
#: ``os.posix_fadvise``, which macOS and Windows lack: there the streams never release pages.
_FADVISE = getattr(os, "posix_fadvise", None)
#: The parts of a year end that changed nothing (a YearEnd's fields: see _consolidation).
_QUIET_YEAR_END: Any = ((), (), (), ())


def dynamic_state(state: HouseholdState) -> dict[str, Any]:
    """The fields of ``state`` that can change during a run."""
    return dict(zip(DYNAMIC_FIELDS, _dynamic_values(state), strict=True))


def changed_state(state: HouseholdState) -> dict[str, Any]:
    """The dynamic fields that differ from their initial value (every one starts False or 0)."""
    values = _dynamic_values(state)
    if not any(values):  # most households most years: skip the comprehension
        return {}
    return {name: value for name, value in zip(DYNAMIC_FIELDS, values, strict=True) if value}


# Adding and then subtracting 1.5 * 2**52 leaves a float of magnitude below 2**51 rounded to
# the nearest integer, ties to even, exactly as round() does, without building an int on the way
# (a third cheaper per score, and every audited household-year rounds a dozen).
_TO_INTEGER = 6755399441055744.0
_EXACT_BELOW = 2.0**51
#: The largest rounding scale whose values in [0, 1] are encoded from a table (_shares).
_TABLED_SCALE = 1e4


def _rounded(value: float, scale: float) -> float:
    """``value`` rounded to ``1/scale`` (e.g. 1e3: three decimals), for shorter lines.

    ``round(value * scale) / scale`` gives the float nearest to the rounded decimal, which
    prints as that short decimal, for a fraction of the cost of ``round(value, ndigits)`` (which
    goes through a correctly rounded decimal conversion); the two differ by at most one unit in
    the last kept place on exact halves. Infinities, nan and values too large to scale are
    returned as they are.
    """
    scaled = value * scale
    if -_EXACT_BELOW < scaled < _EXACT_BELOW:
        return (scaled + _TO_INTEGER - _TO_INTEGER) / scale
    if scaled - scaled != 0.0:  # inf or nan (or too large to scale): nothing to round
        return value
    return round(scaled) / scale


def _rounded_scores(hits: list[ScoredMemory], scale: float) -> list[float]:
    """Each hit's score, :func:`_rounded` to ``1/scale`` (one call per list, not per score)."""
    rounded = []
    to_integer, below = _TO_INTEGER, _EXACT_BELOW
    for _, score, _ in hits:
        scaled = score * scale
        if -below < scaled < below:
            rounded.append((scaled + to_integer - to_integer) / scale)
        else:
            rounded.append(_rounded(score, scale))
    return rounded


def _ids_and_scores(
    hits: list[ScoredMemory], scale: float, trace_scale: float
) -> tuple[list[str], list[float], list[float]]:
    """Each hit's id, and its score rounded to ``1/scale`` and to ``1/trace_scale``.

    One pass for what a ``retrieve_memory`` line and the trace after it both show.
    """
    ids = []
    scores = []
    trace_scores = []
    to_integer, below = _TO_INTEGER, _EXACT_BELOW
    for item, score, _ in hits:
        ids.append(item.id)
        scaled = score * scale
        coarse = score * trace_scale
        if -below < scaled < below and -below < coarse < below:
            scores.append((scaled + to_integer - to_integer) / scale)
            trace_scores.append((coarse + to_integer - to_integer) / trace_scale)
        else:
            scores.append(_rounded(score, scale))
            trace_scores.append(_rounded(score, trace_scale))
    return ids, scores, trace_scores


def _rounded_array(values: np.ndarray, scale: float) -> np.ndarray:
    """:func:`_rounded` of every entry of ``values``."""
    # A value too large to scale overflows to inf and is left as given, as _rounded leaves it.
    with np.errstate(over="ignore", invalid="ignore"):
        scaled = values * scale
        exact = np.abs(scaled) < _EXACT_BELOW
    # The same two float operations as _rounded, in the same order, for every entry at once.
    # NaN (padding) and infinities stay as they are, as _rounded leaves them.
    rounded = np.where(exact, ((scaled + _TO_INTEGER) - _TO_INTEGER) / scale, values)
    huge = np.flatnonzero((~exact & np.isfinite(scaled)).reshape(-1))
    if len(huge):  # too large to round by adding: as _rounded rounds them
        flat, given = rounded.reshape(-1), values.reshape(-1)
        for i in huge.tolist():
            flat[i] = _rounded(float(given[i]), scale)
    return rounded


def _rounded_numbers(values: np.ndarray, scale: float) -> pa.Array:
    """``numbers(_rounded_array(values, scale))``: encoded, each rounded to ``1/scale``.

    Appraisals and retrieval scores are shares, in [0, 1]: rounded to three decimals they take
    one of 1,001 values, whose encodings are made once and taken from.
    """
    steps = _share_steps(values, scale)
    if steps is not None:
        return _shares(int(scale)).take(steps)
    return numbers(_rounded_array(values, scale))


def _joined_rounded_numbers(values: np.ndarray, scale: float, counts: np.ndarray) -> pa.Array:
    """:func:`_rounded_numbers` of ``values`` as the inside of a JSON list per row of ``counts``.

    Shares take their entries, comma and all, from a table (:func:`_separated_shares`).
    """
    steps = _share_steps(values, scale)
    if steps is not None:
        return joined_rows(_separated_shares(int(scale)).take(steps), counts)
    return joined_numbers(_rounded_array(values, scale), counts)


def _share_steps(values: np.ndarray, scale: float) -> np.ndarray | None:
    """Each value's count of ``1/scale`` steps, if all of them round into [0, 1], else ``None``.

    :func:`_rounded_array`'s operations up to its division, for the tables of :func:`_shares`
    (scales up to :data:`_TABLED_SCALE`). ``None`` too for no values, NaN, or a value too
    large to scale.
    """
    if scale > _TABLED_SCALE or not len(values):
        return None
    with np.errstate(over="ignore", invalid="ignore"):
        steps = (values * scale + _TO_INTEGER) - _TO_INTEGER
    if not ((steps >= 0.0) & (steps <= scale)).all():  # False for NaN
        return None
    return steps.astype(np.int64)


@functools.cache
def _shares(scale: int) -> pa.Array:
    """The encodings of 0, 1/scale, 2/scale, ... 1, by step."""
    return numbers(np.arange(scale + 1) / float(scale))


@functools.cache
def _separated_shares(scale: int) -> pa.Array:
    """:func:`_shares`, each followed by a comma."""
    return separated(_shares(scale))


def _construct_entries(values: np.ndarray) -> pa.Array:
    """Each appraisal's encoded trace entry, ``{"level":"M","value":0.512}`` (see _constructs).

    The level is that of the value as given, the value rounded to three decimals: in [0, 1]
    a few thousand entries occur, made once (:func:`_construct_table`) and taken from.
    """
    levels = _level_codes(values)
    steps = _share_steps(values, 1e3)
    if steps is not None:
        return coded(levels * 1001 + steps, _construct_table())
    return _CONSTRUCT.fill(_LEVEL_NAMES.take(levels), _rounded_numbers(values, 1e3))


@functools.cache
def _construct_table() -> pa.Array:
    """The entries of every level with every value 0, 0.001, ... 1, by ``level * 1001 + step``."""
    levels, steps = np.divmod(np.arange(len(LEVELS) * 1001), 1001)
    return _CONSTRUCT.fill(_LEVEL_NAMES.take(levels), _shares(1000).take(steps))


def _level_codes(values: np.ndarray) -> np.ndarray:
    """:func:`~simulation.decisions.base.level_of` of finite values in [0, 1], all at once.

    Returns:
        Codes into :data:`~simulation.decisions.base.LEVELS`.
    """
    return np.clip((values * 5).astype(np.int64), 0, 4)


class StateChanges(NamedTuple):
    """What executing many households' choices changed: households alike share an entry.

    Attributes:
        kinds: The distinct changes, ``{field: (before, after)}`` each.
        which: The position in ``kinds`` of each household's changes.
    """

    kinds: list[dict[str, tuple[Any, Any]]]
    which: np.ndarray


def eviction_parts(store: str) -> tuple[bytes, bytes]:
    """The ``evicted`` list of a write that displaced an item from ``store``, around its id.

    ``[{"id":`` and ``,"from":"<store>","to":null}]``: the list of a displaced item is the
    first, the item's encoded id, and the second (see :class:`MemoryLines`).
    """
    before, after = LineTemplate([{"id": HOLE, "from": store, "to": None}], line=False).parts
    return before, after


def _state_after_entries(changes: StateChanges) -> pa.Array | bytes:
    """Each household's :func:`optional` ``state_after`` entry: what changed, if anything did.

    Each distinct change is encoded once, key and all, and taken by the households.

    Returns:
        The column, or ``b""`` when no household's choice changed anything.
    """
    encodings = [
        orjson.dumps({k: new for k, (_, new) in change.items()}) if change else None
        for change in changes.kinds
    ]
    entries = optional("state_after", pa.array(encodings, _BINARY))
    return entries if isinstance(entries, bytes) else coded(changes.which, entries)


class MemoryLines(NamedTuple):
    """Many memory writes, in order, as :meth:`AuditWriter.memory_updates` logs them.

    Each attribute is a column of encoded JSON values, an entry per write (a pyarrow binary
    array, or one coded into a table of encodings: see simulation/audit/lines.py). Those typed
    ``pa.Array | bytes`` may instead be one encoded value, the same for every write: a line
    template then writes it with its fixed parts, at no cost per line.

    Attributes:
        agent_ids: The household of each write.
        ids: The id of each written item.
        contents: Its text.
        importance: Its importance.
        years: Its year.
        tags: Its tags.
        sources: Its source (also the line's ``update_type``).
        amounts: Its dollar amount; null where it has none.
        pinned: ``true`` where it is pinned, else null.
        stores: Where it went (``working`` or ``episodic``).
        evicted: Its line's ``evicted`` list: the item it displaced (forgotten), with the store
            that item left (:func:`eviction_parts`), or :data:`NO_EVICTIONS`.
    """

    agent_ids: pa.Array
    ids: pa.Array
    contents: pa.Array
    importance: pa.Array | bytes
    years: pa.Array | bytes
    tags: pa.Array | bytes
    sources: pa.Array | bytes
    amounts: pa.Array
    pinned: pa.Array
    stores: pa.Array | bytes
    evicted: pa.Array | bytes


class DecisionLines(NamedTuple):
    """Many households' decisions, in decision order, as :meth:`AuditWriter.decisions` logs them.

    Values the writer rounds are given as numbers; the rest are encoded JSON values (pyarrow
    binary arrays, or coded into tables of encodings: see simulation/audit/lines.py).

    Attributes:
        agent_ids: The households (encoded).
        retrieved: The encoded ids of each one's retrieved memories, best first, comma-joined
            (the inside of a JSON array; empty at ``minimal``).
        counts: How many memories each one retrieved (0 at ``minimal``).
        scores: Their retrieval scores, a row per household (padded past its count).
        updates: Each one's decision memory write (``None`` at ``minimal``).
        states_before: Each one's encoded ``state_before``: its :data:`DYNAMIC_FIELDS` that are
            not 0 or False before deciding (``standard``; ``None`` at ``minimal``).
        working: Each one's working memory size after its write.
        episodic: Each one's episodic memory size after its write.
        skills: The skill each executed (encoded).
        costs: What each paid.
        tp: Each one's threat appraisal (``None``: the policy appraises nothing, as a decision
            table; the traces' ``constructs`` are empty).
        cp: The coping appraisal reported with each choice (``None`` with ``tp``).
        state_changes: What executing changed for each.
        rejections: The encoded trace entries, ``action`` and ``validation``
            (:meth:`AuditWriter.rejection`), of each decision whose proposal was rejected, and
            nulls for the others (``None``: every proposal stood, as the PMT policy's do).
    """

    agent_ids: pa.Array
    retrieved: pa.Array
    counts: np.ndarray
    scores: np.ndarray
    updates: MemoryLines | None
    states_before: pa.Array | None
    working: np.ndarray
    episodic: np.ndarray
    skills: pa.Array
    costs: np.ndarray
    tp: np.ndarray | None
    cp: np.ndarray | None
    state_changes: StateChanges
    rejections: tuple[pa.Array, pa.Array] | None = None


def _rows(lines: Any, start: int, stop: int) -> Any:
    """The rows ``start:stop`` of ``lines`` (a :class:`MemoryLines` or :class:`DecisionLines`)."""

    def rows_of(part: Any) -> Any:
        if part is None or isinstance(part, bytes):  # nothing, or the same in every row
            return part
        if isinstance(part, MemoryLines):
            return _rows(part, start, stop)
        if isinstance(part, StateChanges):
            return StateChanges(part.kinds, part.which[start:stop])
        if isinstance(part, tuple):  # the rejections' two columns
            return tuple(column[start:stop] for column in part)
        return part[start:stop]

    return type(lines)(*(rows_of(part) for part in lines))


def _consolidation(report: YearEnd, sizes: tuple[int, int]) -> dict[str, Any]:
    """The ``consolidation`` entry of a year end that left the stores at ``sizes``."""
    transferred, evictions, promoted, reflections = report
    # Most year ends change nothing: the conditions skip building empty comprehensions.
    return {
        "transferred_count": len(transferred),
        "transferred_items": [i.id for i in transferred] if transferred else [],
        "evicted": _evictions(evictions),
        "promoted": [i.id for i in promoted] if promoted else [],
        "reflections": [_item(i) for i in reflections] if reflections else [],
        "working_after": sizes[0],
        "episodic_after": sizes[1],
    }


def _constructs(constructs: dict[str, Construct], *, full: bool) -> dict[str, Any]:
    """A trace's constructs: level and value (to 3 decimals), at ``full`` to 4 and explained."""
    if full:
        return {
            name: {"level": c.level, "value": _rounded(c.value, 1e4), "explanation": c.explanation}
            for name, c in constructs.items()
        }
    return {
        name: {"level": c.level, "value": _rounded(c.value, 1e3)} for name, c in constructs.items()
    }


def _action(decision: Decision, level: str) -> dict[str, Any]:
    """A trace's ``action`` entry: the skill executed and, above ``minimal``, how it came."""
    action: dict[str, Any] = {"decision_skill": decision.skill_id}
    if level == "minimal":
        return action
    full = level == "full"
    proposal = decision.proposal
    # Decision.proposed_skill_id, read without the property call (once per trace)
    proposed = decision.rejected_skill_id or proposal.skill_id
    if proposed != decision.skill_id or full:
        action["proposed_skill"] = proposed
    if proposal.parameters or full:
        action["skill_parameters"] = proposal.parameters
    if decision.cost or full:
        action["cost"] = _rounded(decision.cost, 1e2)
    return action


def _validation(decision: Decision, *, full: bool) -> dict[str, Any]:
    """A trace's ``validation`` entry: the verdict, with its reasons where there are any."""
    validation = decision.validation
    if not (full or validation.errors or validation.warnings or decision.via_llm):
        return {"valid": validation.valid}
    entry: dict[str, Any] = {
        "valid": validation.valid,
        "errors": list(validation.errors),
        "warnings": list(validation.warnings),
    }
    if decision.via_llm:
        entry["retries"] = decision.retries
    return entry


def _item(item: MemoryItem, destination: str | None = None) -> dict[str, Any]:
    # Tuples go in as they are: orjson writes them as JSON arrays, like lists.
    record = {
        "id": item.id,
        "content": item.content,
        "importance": item.importance,
        "year": item.year,
        "tags": item.tags,
        "source": item.source,
    }
    if item.amount is not None:
        record["amount"] = item.amount
    if item.pinned:
        record["pinned"] = True
    if item.evidence:
        record["evidence"] = item.evidence
    if destination is not None:
        record["destination"] = destination
    return record


def _evictions(evictions: tuple[Eviction, ...] | list[Eviction]) -> list[dict[str, Any]]:
    # A loop rather than a comprehension: most writes evict nothing or one item, for which
    # the comprehension's own function call is most of the cost.
    records = []
    for item, store, to in evictions:
        records.append({"id": item.id, "from": store, "to": to})
    return records


class _Stream:
    """One buffered output file; only whole lines ever reach the file.

    The buffer is a ``BytesIO`` rewound after each write-out rather than emptied: it keeps its
    capacity, where a ``bytearray`` that is cleared gives its memory back and regrows by copying
    (about 0.4 µs per line in a 20,000-household run, more than compressing it).

    ``resume`` (offset, lines) truncates the file to a committed offset and appends from there.
    """

    __slots__ = (
        "buffer",
        "compress",
        "file",
        "level",
        "limit",
        "lines",
        "path",
        "size",
        "unreleased",
    )

    def __init__(
        self,
        path: Path,
        *,
        compress: bool,
        limit: int,
        resume: tuple[int, int] | None = None,
        level: int = 1,
    ):
        self.path = path
        self.compress = compress
        self.level = level
        self.buffer = io.BytesIO()
        self.size = 0  # bytes of the buffer that hold lines not yet written out
        self.limit = limit
        self.lines = 0
        # Bytes written since the file's pages were last released; None: never release them.
        self.unreleased: int | None = 0 if _FADVISE is not None else None
        mode = "wb"
        if resume is not None:
            offset, self.lines = resume
            os.truncate(path, offset)
            mode = "ab"
        # None between two gzip members: the next one starts with the next line written. A
        # resumed gzip stream starts between members, as the run it continues was at its offset.
        self.file: BinaryIO | None = None if resume and compress else self._open(mode)

    def _open(self, mode: str) -> BinaryIO:
        # A gzip file opened for appending starts a new member: readers decode members in turn.
        # mtime=0 keeps the header free of wall-clock time, so equal runs give equal bytes.
        if self.compress:
            return igzip.IGzipFile(filename=self.path, mode=mode, compresslevel=self.level, mtime=0)
        return self.path.open(mode)

    def commit(self) -> tuple[int, int]:
        """Write everything buffered and return the (byte offset, line count) it reached."""
        self.end_member()  # a gzip file is valid up to the end of its last whole member
        fd = os.open(self.path, os.O_RDONLY)
        try:
            os.fsync(fd)
        finally:
            os.close(fd)
        return self.path.stat().st_size, self.lines

    def end_member(self) -> None:
        """Write everything buffered; a compressed stream also ends its gzip member.

        Called at every year end, so members end at year ends only: the bytes of a stream do
        not depend on when checkpoints were taken, and a run resumed from one comes out the
        same, byte for byte, as a run never stopped.
        """
        self.flush()
        if self.compress and self.file is not None:
            self.file.close()
            self.file = None

    def write(self, record: dict[str, Any]) -> None:
        self.size += self.buffer.write(orjson.dumps(record, option=orjson.OPT_APPEND_NEWLINE))
        self.lines += 1
        if self.size >= self.limit:
            self.flush()

    def write_lines(self, lines: pa.Array) -> None:
        """Write lines already encoded (a binary array, each ending in a newline), in order.

        A batch of :data:`_DIRECT_BYTES` or more, or one that would fill the buffer, goes to
        the file as it is, after what the buffer holds: copying it into the buffer first would
        copy its every byte twice. Smaller batches are gathered in the buffer.
        """
        data = line_bytes(lines)
        self.lines += len(lines)
        if len(data) < _DIRECT_BYTES and self.size + len(data) < self.limit:
            self.size += self.buffer.write(data)
            return
        self._write_buffer()
        if self.file is None:
            self.file = self._open("ab")
        self.file.write(data)
        self._written(len(data))

    def _write_buffer(self) -> None:
        """Hand what the buffer holds to the file (opening it between gzip members)."""
        if self.size:
            if self.file is None:
                self.file = self._open("ab")
            with self.buffer.getbuffer() as view, view[: self.size] as lines:
                self.file.write(lines)
            self.buffer.seek(0)
            self._written(self.size)
            self.size = 0

    def _written(self, size: int) -> None:
        if self.unreleased is not None:
            self.unreleased += size
            if self.unreleased >= _RELEASE_BYTES:
                self._release()

    def _release(self) -> None:
        """Advise the kernel to drop the file's cached pages (``POSIX_FADV_DONTNEED``).

        Lines are written once and not read back during the run, yet every byte written stays
        in the page cache. A run writing gigabytes grows the cache by as much: on this project's
        VMs each new page of it cost about 3 ms per MB in the kernel once the cache outgrew the
        pages recently freed, 6 of 10 µs per household-year at 100,000 households
        (docs/performance.md). The advice starts writing back the pages still dirty and drops
        those already on disk, so the cache stays a few releases deep and its pages are reused.
        Advice only: the file's bytes are the same, and a file system that refuses it
        (``OSError``) is not asked again.
        """
        try:
            _FADVISE(self.file.fileno(), 0, 0, os.POSIX_FADV_DONTNEED)
        except OSError:
            self.unreleased = None
        else:
            self.unreleased = 0

    def flush(self) -> None:
        self._write_buffer()
        if self.file is not None:
            self.file.flush()

    def close(self) -> None:
        self.flush()
        if self.file is not None:
            self.file.close()
            self.file = None

    def abandon(self) -> None:
        """Close the file after a failure, without the lines still buffered here.

        They may end a year partway; the run's manifest says which years are whole. Closed
        now, the file is not held open (and its last bytes not written) whenever the
        collector reaches a writer that a notebook's model or traceback keeps alive.
        """
        self.buffer.seek(0)
        self.size = 0  # dropped for good: a later close() must not write them after all
        file, self.file = self.file, None
        if file is not None:
            with contextlib.suppress(OSError):  # a full disk, say: the failure being handled
                file.close()


class AuditWriter:
    """Writes the audit streams of one run.

    Args:
        run_dir: Folder receiving the stream files.
        run_id: Id written on every line.
        config: The ``audit:`` section.
        seed: The run's seed (household sampling is a hash of seed and agent id).
        llm: Whether households decide with a language model (adds ``llm_calls.jsonl``).
        resume: Committed offsets from a checkpoint (:meth:`commit`): each stream is truncated
            to its offset and continued.
        background: Write the batch methods' lines on a background thread (``audit.background``;
            see simulation/audit/background.py). Their arguments are then read after they
            return: the caller hands over arrays it no longer changes.
    """

    def __init__(
        self,
        run_dir: Path,
        run_id: str,
        config: AuditConfig,
        seed: int,
        *,
        llm: bool = False,
        resume: dict[str, dict[str, int]] | None = None,
        background: bool = False,
    ):
        self.config = config
        self.level = config.level
        self.run_id = run_id
        self._seed = seed
        suffix = ".jsonl.gz" if config.gzip else ".jsonl"
        names = stream_names(self.level, llm=llm)
        self._streams: dict[str, _Stream] = {}
        try:
            for name in names:
                self._streams[name] = _Stream(
                    run_dir / f"{name}{suffix}",
                    compress=config.gzip,
                    level=config.gzip_level,
                    limit=config.buffer_bytes,
                    resume=(resume[name]["offset"], resume[name]["lines"])
                    if resume and name in resume
                    else None,
                )
        except BaseException:  # a file that cannot be opened: none of the others stays open
            for stream in self._streams.values():
                stream.abandon()
            raise
        self.traces = self._streams.get("household_traces")
        self.updates = self._streams.get("memory_updates")
        self.consolidations = self._streams.get("consolidation")
        self.tools = self._streams.get("tool_invocations")
        self.llm = self._streams.get(LLM_STREAM)
        self.full = self.level == "full"
        sample = config.sample
        self._ids = frozenset(sample) if isinstance(sample, list) else None
        self._threshold = int(float(sample) * 2**64) if self._ids is None else 0
        # With the whole population sampled (the default) no id needs hashing or a lookup.
        self._everyone = self._ids is None and self._threshold >= 2**64
        self._sampled: dict[str, bool] = {}
        # The last logged retrieval, its ids and its scores as its trace shows them.
        self._retrieved: tuple[object, list[str], list[float]] = (None, [], [])
        # The encoded entry of a year end that changed nothing, by (working, episodic) sizes.
        self._quiet: dict[tuple[int, int], tuple[bytes, orjson.Fragment]] = {}
        self._year = 0
        self._stamp: str | None = None
        self._template = self._head_template()
        # For the batch methods (simulation/audit/lines.py): this year's line templates by shape.
        self._templates: dict[Any, LineTemplate] = {}
        #: Whether the batch methods' lines are written on a background thread.
        self.writes_behind = bool(background and names)
        # The batch methods' writing, the year ends and year starts between them, in order.
        self._background = Background("floodsim-audit") if self.writes_behind else None
        self._last_year_end: Future[None] | None = None

    # ------------------------------------------------------------------ helpers
    def audits(self, agent_id: str) -> bool:
        """Whether ``agent_id`` is in the audited sample (stable for a seed)."""
        if self._everyone:
            return True
        cached = self._sampled.get(agent_id)
        if cached is None:
            if self._ids is not None:
                cached = agent_id in self._ids
            else:
                # A cryptographic hash: CRC-32, used before, is linear, and over ids that differ
                # in a digit or two (H00000 to H00999) it audited 135 or 65 households for 10 %
                # by seed and never an id ending in 3 or 7.
                digest = hashlib.blake2b(f"{self._seed}:{agent_id}".encode(), digest_size=8)
                cached = int.from_bytes(digest.digest(), "little") < self._threshold
            self._sampled[agent_id] = cached
        return cached

    def begin_year(self, year: int) -> None:
        """Start ``year``: one wall-clock stamp serves all of its lines (when enabled)."""
        stamp = datetime.now(UTC).strftime("%Y-%m-%dT%H:%M:%SZ") if self.config.timestamps else None
        self.later(self._begin_year, year, stamp)

    def _begin_year(self, year: int, stamp: str | None) -> None:
        self._year = year
        self._stamp = stamp
        self._template = self._head_template()
        self._templates = {}

    def _line_template(self, shape: Hashable, body: dict[str, Any]) -> LineTemplate:
        """This year's template of the lines whose fields after ``agent_id`` are ``body``.

        Args:
            shape: What tells ``body`` apart from the other bodies of this year's lines.
            body: The fields, with placeholders (simulation/audit/lines.py) for the values.
        """
        template = self._templates.get(shape)
        if template is None:
            template = self._templates[shape] = LineTemplate(
                {**self._template, "agent_id": HOLE, **body}
            )
        return template

    def _head_template(self) -> dict[str, Any]:
        """The fields every line of this year starts with; ``agent_id`` is filled per line."""
        head: dict[str, Any] = {
            "schema_version": SCHEMA_VERSION,
            "run_id": self.run_id,
            "year": self._year,
            "agent_id": "",
        }
        if self._stamp is not None:
            head["timestamp"] = self._stamp
        return head

    def _head(self, agent_id: str) -> dict[str, Any]:
        # Copying a small dict is cheaper than building it, and five lines per household-year
        # start this way; assigning an existing key keeps the fields in their order.
        head = self._template.copy()
        head["agent_id"] = agent_id
        return head

    # ------------------------------------------------------------------ streams
    def initial_memory(self, agent_id: str, memory: CognitiveMemory) -> None:
        """Log the memories a household starts with (pre-seeded) as year-0 writes."""
        if self.updates is None or not self.audits(agent_id):
            return
        self._settle()  # these lines go after those handed to the background thread
        stores = {i.seq: "working" for i in memory.working}
        stores.update({i.seq: "episodic" for i in memory.episodic})
        items = {i.seq: i for i in (*memory.working, *memory.episodic)}
        for seq in sorted(items):
            item = items[seq]
            head = self._head(agent_id)
            head["year"] = 0
            self.updates.write(
                {
                    **head,
                    "update_type": item.source,
                    "memory_item": _item(item, destination=stores[seq]),
                    "evicted": [],
                }
            )

    def memory_update(self, agent_id: str, result: WriteResult) -> None:
        """Log one memory write and what it evicted."""
        if self.updates is None or not self.audits(agent_id):
            return
        self._settle()  # these lines go after those handed to the background thread
        item = result.item
        record = self._head(agent_id)
        record["update_type"] = item.source
        record["memory_item"] = _item(item, destination=result.store)
        record["evicted"] = _evictions(result.evictions)
        self.updates.write(record)

    def tool_invocation(self, agent_id: str, parameters: dict[str, Any], hits: list[Any]) -> None:
        """Log a ``retrieve_memory`` call and its scored result."""
        if self.tools is None or not self.audits(agent_id):
            return
        self._settle()  # these lines go after those handed to the background thread
        ids, scores, trace_scores = _ids_and_scores(hits, 1e6, 1e4 if self.full else 1e3)
        # The trace of this decision names the same items with the same scores.
        self._retrieved = (hits, ids, trace_scores)
        call: dict[str, Any] = {
            "tool_id": "retrieve_memory",
            "parameters": parameters,
            "result": [h.item.content for h in hits] if self.full else ids,
            "result_count": len(hits),
            "scores": scores,
        }
        if self.full:
            call["result_ids"] = ids
        record = self._head(agent_id)
        record["tool_invocation"] = call
        self.tools.write(record)

    def consolidation(self, agent_id: str, report: YearEnd, memory: CognitiveMemory) -> None:
        """Log one household's year-end pass."""
        if self.consolidations is None or not self.audits(agent_id):
            return
        self._settle()  # these lines go after those handed to the background thread
        transferred, evictions, promoted, reflections = report
        record = self._head(agent_id)
        sizes = (memory.working_size, memory.episodic_size)
        if transferred or evictions or promoted or reflections:
            record["consolidation"] = _consolidation(report, sizes)
        else:
            record["consolidation"] = self._quiet_entry(*sizes)[1]
        self.consolidations.write(record)

    def _quiet_entry(self, working: int, episodic: int) -> tuple[bytes, orjson.Fragment]:
        """The encoded ``consolidation`` entry of a year end that changed nothing.

        Most year ends change nothing, and their entries differ only in the two sizes: each
        pair is encoded once, and kept as bytes and as a fragment of a record to encode.
        """
        entry = self._quiet.get((working, episodic))
        if entry is None:
            quiet = encoded(_consolidation(_QUIET_YEAR_END, (working, episodic)))
            entry = (quiet, orjson.Fragment(quiet))
            if len(self._quiet) < _QUIET_KEPT:
                self._quiet[working, episodic] = entry
        return entry

    def trace(
        self,
        agent_id: str,
        decision: Decision,
        state_before: dict[str, Any] | None,
        state: HouseholdState,
        memory: CognitiveMemory,
    ) -> None:
        """Log one household-year decision (seed 000 section 11)."""
        if self.traces is None or not self.audits(agent_id):
            return
        self._settle()  # these lines go after those handed to the background thread
        proposal, full = decision.proposal, self.full
        scale = 1e4 if full else 1e3
        record = self._head(agent_id)
        reasoning: dict[str, Any] = {"constructs": _constructs(proposal.constructs, full=full)}
        if self.level != "minimal":
            ids, scores = self._retrieval(decision.retrieved, scale)
            record["state_before"] = state_before
            record["memory"] = {
                "retrieved": ids,
                "retrieval_scores": scores,
                "working_count": memory.working_size,
                "episodic_count": memory.episodic_size,
            }
            update = decision.memory_update
            if update is not None:
                record["memory_update"] = (
                    {
                        "type": "skill_execution",
                        "id": update.item.id,
                        "content": update.item.content,
                        "importance": update.item.importance,
                        "destination": update.store,
                    }
                    if full
                    else {"id": update.item.id}
                )
        record["reasoning"] = reasoning
        record["action"] = _action(decision, self.level)
        record["validation"] = _validation(decision, full=full)
        if self.level == "standard":
            if decision.state_changes:
                record["state_after"] = {k: new for k, (_, new) in decision.state_changes.items()}
        elif full:
            _add_full_details(record, decision, state, memory)
        self.traces.write(record)

    def memory_updates(self, lines: MemoryLines) -> None:
        """Log many memory writes at once, in order: :meth:`memory_update` of each.

        The caller has already left out households outside the audited sample.
        """
        self.later(self._memory_updates, lines)

    def _memory_updates(self, lines: MemoryLines) -> None:
        if self.updates is None:
            return
        for start in range(0, len(lines.ids), _LINES_PER_BATCH):
            self.updates.write_lines(
                self._update_lines(_rows(lines, start, start + _LINES_PER_BATCH))
            )

    def _update_lines(self, lines: MemoryLines) -> pa.Array:
        """The ``memory_updates`` lines of ``lines``, as :meth:`memory_update` writes them."""
        template = self._line_template(
            _UPDATE,
            {
                "update_type": HOLE,
                "memory_item": {
                    "id": HOLE,
                    "content": HOLE,
                    "importance": HOLE,
                    "year": HOLE,
                    "tags": HOLE,
                    "source": HOLE,
                    # The optional keys of _item(), in its order, where present.
                    "amount": OPTIONAL,
                    "pinned": OPTIONAL,
                    "destination": HOLE,
                },
                "evicted": HOLE,
            },
        )
        return template.fill(
            lines.agent_ids,
            lines.sources,
            lines.ids,
            lines.contents,
            lines.importance,
            lines.years,
            lines.tags,
            lines.sources,
            optional("amount", lines.amounts),
            optional("pinned", lines.pinned),
            lines.stores,
            lines.evicted,
        )

    def year_ends(
        self,
        agent_ids: pa.Array,
        working: np.ndarray,
        episodic: np.ndarray,
        moved: dict[int, YearEndMoves],
    ) -> None:
        """Log many audited households' year ends at once, in order.

        Writes what :meth:`consolidation` writes.

        Args:
            agent_ids: The households (encoded, see simulation/audit/lines.py).
            working: Each one's working memory size after its year end.
            episodic: Each one's episodic memory size after it.
            moved: For the households (by position in ``agent_ids``) whose year end moved
                anything: what it moved (:data:`YearEndMoves`).
        """
        self.later(self._year_ends, agent_ids, working, episodic, moved)

    def _year_ends(
        self,
        agent_ids: pa.Array,
        working: np.ndarray,
        episodic: np.ndarray,
        moved: dict[int, YearEndMoves],
    ) -> None:
        if self.consolidations is None or not len(agent_ids):
            return
        template = self._line_template(_YEAR_END, {"consolidation": HOLE})
        # Most year ends change nothing: each pair of sizes is encoded once.
        span = int(episodic.max()) + 1
        which, pairs = pd.factorize(working.astype(np.int64) * span + episodic)
        quiet = [self._quiet_entry(*divmod(pair, span))[0] for pair in pairs.tolist()]
        entries = pa.array(quiet, _BINARY).take(which)
        if moved:
            changed = np.zeros(len(agent_ids), dtype=bool)
            changed[list(moved)] = True
            given = []
            for n in sorted(moved):
                transferred, left, reflections, promoted = moved[n]
                given.append(
                    {
                        "transferred_count": len(transferred),
                        "transferred_items": transferred,
                        "evicted": [{"id": i, "from": store, "to": to} for i, store, to in left],
                        "promoted": promoted,
                        "reflections": [_item(i) for i in reflections] if reflections else [],
                        "working_after": int(working[n]),
                        "episodic_after": int(episodic[n]),
                    }
                )
            entries = pc.replace_with_mask(entries, pa.array(changed), strings(given))
        for start in range(0, len(agent_ids), _LINES_PER_BATCH):
            stop = start + _LINES_PER_BATCH
            self.consolidations.write_lines(
                template.fill(agent_ids[start:stop], entries[start:stop])
            )

    def decisions(self, lines: DecisionLines, parameters: dict[str, Any]) -> None:
        """Log many audited households' policy decisions at once, in order.

        Writes, household by household, what :meth:`tool_invocation`, :meth:`memory_update` and
        :meth:`trace` write for a decision of the PMT policy or a decision table (no LLM, no
        parameters) at the ``standard`` or ``minimal`` level; its arithmetic is theirs, on
        arrays, and a rejected proposal's entries are theirs (:meth:`rejection`).
        tests/test_array_engine.py holds the lines to theirs, byte for byte.

        Args:
            lines: The decisions.
            parameters: The ``retrieve_memory`` call's parameters (the same for all).
        """
        self.later(self._all_decisions, lines, parameters)

    def _all_decisions(self, lines: DecisionLines, parameters: dict[str, Any]) -> None:
        if self.traces is None:
            return
        for start in range(0, len(lines.agent_ids), _LINES_PER_BATCH):
            self._decisions(_rows(lines, start, start + _LINES_PER_BATCH), parameters)

    def _decisions(self, lines: DecisionLines, parameters: dict[str, Any]) -> None:
        """:meth:`decisions` of at most :data:`_LINES_PER_BATCH` households."""
        appraised = lines.tp is not None
        if appraised:
            reasoning = {"constructs": {"TP": HOLE, "CP": HOLE}}
            constructs = (_construct_entries(lines.tp), _construct_entries(lines.cp))
        else:  # a decision table appraises nothing
            reasoning, constructs = {"constructs": {}}, ()
        rejections = lines.rejections
        if rejections is None:
            validation: Any = {"valid": True}
            validations = ()
        else:  # the rejected proposals' reasons, among the others' verdict
            validation = HOLE
            validations = (pc.fill_null(rejections[1], _VALID),)
        shape = (appraised, rejections is not None)
        if lines.updates is None:  # minimal: the trace alone (its action is the skill alone)
            template = self._line_template(
                (_MINIMAL_TRACE, *shape),
                {
                    "reasoning": reasoning,
                    "action": {"decision_skill": HOLE},
                    "validation": validation,
                },
            )
            self.traces.write_lines(
                template.fill(lines.agent_ids, *constructs, lines.skills, *validations)
            )
            return
        # The action shows a cost where one was paid.
        costs = lines.costs
        paid = costs != 0
        cost = numbers(_rounded_array(costs, 1e2))
        if paid.all():
            cost_entries = optional("cost", cost)
        else:
            cost_entries = optional("cost", only_where(paid, cost))
        actions = _ACTION.fill(lines.skills, cost_entries)
        if rejections is not None:  # a rejected proposal's action names it
            actions = pc.coalesce(rejections[0], actions)
        # Each household's retrieved scores, left-aligned in its row.
        counts = lines.counts
        found = np.arange(lines.scores.shape[1]) < counts[:, None]
        scores = lines.scores[found]
        retrieved = lines.retrieved
        call = self._line_template(
            (_CALL, orjson.dumps(parameters)),
            {
                "tool_invocation": {
                    "tool_id": "retrieve_memory",
                    "parameters": parameters,
                    "result": [HOLE],
                    "result_count": HOLE,
                    "scores": [HOLE],
                }
            },
        )
        self.tools.write_lines(  # type: ignore[union-attr]
            call.fill(
                lines.agent_ids,
                retrieved,
                collapsed(counts),  # top_k for everyone, once memories hold that many
                joined_numbers(_rounded_array(scores, 1e6), counts),
            )
        )
        self._memory_updates(lines.updates)
        trace = self._line_template(
            (_TRACE, *shape),
            {
                "state_before": HOLE,
                "memory": {
                    "retrieved": [HOLE],
                    "retrieval_scores": [HOLE],
                    "working_count": HOLE,
                    "episodic_count": HOLE,
                },
                "memory_update": {"id": HOLE},
                "reasoning": reasoning,
                "action": HOLE,
                "validation": validation,
                "state_after": OPTIONAL,
            },
        )
        self.traces.write_lines(
            trace.fill(
                lines.agent_ids,
                lines.states_before,
                retrieved,
                _joined_rounded_numbers(scores, 1e3, counts),
                collapsed(lines.working),  # a full working memory's size, after a few years
                collapsed(lines.episodic),
                lines.updates.ids,
                *constructs,
                actions,
                *validations,
                _state_after_entries(lines.state_changes),
            )
        )

    def rejection(self, decision: Decision) -> tuple[bytes, bytes]:
        """The encoded ``action`` and ``validation`` of the trace of ``decision``.

        For :class:`DecisionLines` ``rejections``: the lines of a decision whose proposal was
        rejected differ from the others' only in these, which :meth:`trace` makes alike.
        """
        validation = _validation(decision, full=self.full)
        return encoded(_action(decision, self.level)), encoded(validation)

    def _retrieval(self, hits: list[ScoredMemory], scale: float) -> tuple[list[str], list[float]]:
        """The ids of ``hits`` and their scores rounded to ``1/scale``, as last logged if so."""
        logged, ids, scores = self._retrieved
        if logged is hits:
            return ids, scores
        return [h.item.id for h in hits], _rounded_scores(hits, scale)

    def llm_calls(self, agent_id: str, calls: list[Any]) -> None:
        """Log each chat request of one household's decision (no prompt text, no key)."""
        if self.llm is None or not self.audits(agent_id):
            return
        self._settle()  # these lines go after those handed to the background thread
        for call in calls:
            record = {
                **self._head(agent_id),
                "attempt": call.attempt,
                "request_hash": call.request_hash,
                "status": call.status,
                "cached": call.cached,
                "transport_attempts": call.transport_attempts,
                "prompt_tokens": call.prompt_tokens,
                "completion_tokens": call.completion_tokens,
            }
            if self._stamp is not None:  # latency is wall-clock time, like the stamp
                record["latency_s"] = round(call.latency_s, 4)
            self.llm.write(record)

    # ------------------------------------------------------------------ the background thread
    def later(self, write: Callable[..., None], *args: Any) -> None:
        """Run ``write(*args)`` on the background thread, after what was handed to it before.

        Without a background thread, or called on it, runs it now. ``write`` may call the
        batch methods; its arguments must not change until it has run.
        """
        background = self._background
        if background is None or background.on_worker:
            write(*args)
        else:
            background.submit(write, *args)

    def _settle(self) -> None:
        """Wait until the background thread has written everything handed to it."""
        if self._background is not None:
            self._background.wait()

    def wait(self) -> None:
        """Block until every line logged so far is written out (or has failed).

        Raises:
            Exception: A failure of the background thread (``audit.background``), such as
                an ``OSError`` of a full disk.
        """
        self._settle()

    # ------------------------------------------------------------------ closing
    def commit(self) -> dict[str, dict[str, int]]:
        """Write and sync every stream; return each one's byte offset and line count."""
        self._settle()
        return {
            name: dict(zip(("offset", "lines"), stream.commit(), strict=True))
            for name, stream in self._streams.items()
        }

    def flush(self) -> None:
        """Write every buffered line (whole lines only)."""
        self._settle()
        for stream in self._streams.values():
            stream.flush()

    def end_year(self) -> None:
        """Write every buffered line and end each gzip member (see ``_Stream.end_member``).

        With a background thread, returns once the previous year's lines are written: at
        most a year's lines wait, and the arrays they are made from are held only that long.
        """
        if self._background is None:
            self._end_members()
            return
        previous = self._last_year_end
        self._last_year_end = self._background.submit(self._end_members)
        if previous is not None:
            self._background.wait(until=previous)

    def _end_members(self) -> None:
        for stream in self._streams.values():
            stream.end_member()

    def abandon(self) -> bool:
        """End the background thread after a failure elsewhere, without raising its own.

        The lines handed to it are written first: a run stopped after a year (by Ctrl-C, say)
        has that year's lines, as without the thread. Then every stream's file is closed.

        Returns:
            Whether every line handed to the thread was written (``True`` without one).
        """
        whole = True
        if self._background is not None:
            background, self._background = self._background, None
            whole = background.close(quiet=True)
        for stream in self._streams.values():
            stream.abandon()
        return whole

    def close(self) -> dict[str, Any]:
        """Flush and close every stream; return the manifest's ``audit`` entry.

        Raises:
            Exception: A failure of the background thread, once every stream is closed.
        """
        try:
            if self._background is not None:
                self._background.close()
                self._background = None  # kept after a failure, for abandon() to report it
        finally:
            for stream in self._streams.values():
                stream.close()
        sample = self.config.sample
        return {
            "level": self.level,
            "gzip": self.config.gzip,
            "timestamps": self.config.timestamps,
            "sample": sample,
            "streams": {
                name: {"file": stream.path.name, "lines": stream.lines}
                for name, stream in self._streams.items()
            },
        }


def _add_full_details(
    record: dict[str, Any], decision: Decision, state: HouseholdState, memory: CognitiveMemory
) -> None:
    """What the ``full`` level adds to a trace: snapshots, contents, reasons, probabilities."""
    proposal, reasoning, hits = decision.proposal, record["reasoning"], decision.retrieved
    record["state_after"] = dynamic_state(state)
    mem = record["memory"]
    mem["retrieved_from"] = [h.source for h in hits]
    mem["retrieved_content"] = [h.item.content for h in hits]
    mem["working_items"] = [_snapshot(i) for i in memory.working]
    mem["episodic_items"] = [_snapshot(i) for i in memory.episodic]
    reasoning["justification"] = proposal.justification
    if proposal.probabilities is not None:
        reasoning["probabilities"] = {
            k: _rounded(v, 1e6) for k, v in proposal.probabilities.items()
        }


def _snapshot(item: MemoryItem) -> dict[str, Any]:
    return {
        "id": item.id,
        "content": item.content,
        "importance": item.importance,
        "year": item.year,
    }
