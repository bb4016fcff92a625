"""Read a run's audit streams back: records, pandas DataFrames and tidy summary tables.

A run directory holds up to four JSONL streams (DESIGN.md section 6), each either plain
(``<name>.jsonl``) or gzipped (``<name>.jsonl.gz``); a stream is absent when the run's audit level
does not write it. Every line is one JSON object.

Lines are written whole, newline included, so a crash can only leave a truncated *last* line:
one that lacks its newline. Readers skip such a line, warn (:class:`TruncatedLineWarning`) and
record it in a :class:`ReadReport` when one is passed in. Any other unparsable line, a complete
(newline-terminated) last line included, means the file is corrupt and raises
:class:`AuditReadError` naming the file and the line number as malformed; so does a line whose
top-level fields do not match its stream's JSON Schema (one missing, or of another type), and
so does a stream of a run whose manifest says it completed that ends short of the lines the
manifest lists (cut short since: a copy cut off, a full disk).

Example::

    report = ReadReport()
    traces = read_stream("outputs/default-s42-abcd1234", "household_traces", report=report)
    traces["memory.working_count"].mean()
    report.skipped  # lines that were dropped: at most a truncated last line
    for chunk in read_stream(run_dir, "memory_updates", chunksize=100_000):
        ...  # one DataFrame of at most 100,000 rows at a time
"""

from __future__ import annotations

import functools
import os
import warnings
import zlib
from collections import Counter
from dataclasses import dataclass, field
from pathlib import Path
from typing import (
    TYPE_CHECKING,
    Annotated,
    Any,
    Concatenate,
    Literal,
    NamedTuple,
    ParamSpec,
    TypeVar,
    overload,
)

import orjson
import pandas as pd
import yaml
from isal import isal_zlib
from pydantic import BaseModel, ConfigDict, Field, Strict, StrictStr, ValidationError
from tqdm import tqdm

from simulation.audit import load_schema
from simulation.audit.writer import LLM_STREAM, STREAMS
from simulation.config import describe_validation_error
from simulation.errors import InputError
from simulation.memory.settings import as_integer

if TYPE_CHECKING:
    from collections.abc import Callable, Iterable, Iterator

__all__ = [
    "BASE_COLUMNS",
    "LLM_STREAM",
    "STREAMS",
    "AuditReadError",
    "ReadReport",
    "SkippedLine",
    "TruncatedLineWarning",
    "as_integer",
    "configured_audit",
    "consolidation_table",
    "decisions_per_year",
    "experiment_folder_error",
    "iter_file",
    "iter_records",
    "lines_counted",
    "listed_lines",
    "manifest_problem",
    "memory_counts",
    "naming_damaged_lines",
    "not_a_folder_error",
    "read_manifest",
    "read_stream",
    "retrievals",
    "sample_hint",
    "stream_path",
]

#: Columns every stream has (the columns of an empty stream's DataFrame).
BASE_COLUMNS: tuple[str, ...] = ("schema_version", "run_id", "year", "agent_id")

# Bytes read from disk at a time; large enough to amortise calls, small enough to stream.
_CHUNK_BYTES = 1 << 18
# gzip container (header and trailer) around a deflate stream.
_GZIP_WBITS = 16 + zlib.MAX_WBITS
_GZIP_MAGIC = b"\x1f\x8b"
# Line counts from which a progress bar shows them scaled (299k): smaller ones in full.
_SCALED_COUNTS = 10_000
# Characters of a skipped line kept in the report, enough to recognise it.
_PREVIEW_CHARS = 80
# What a JSON Schema type admits, by the exact class orjson gives (a bool is no integer).
_JSON_CLASSES = {
    "object": (dict,),
    "array": (list,),
    "string": (str,),
    "integer": (int,),
    "number": (int, float),
    "boolean": (bool,),
    "null": (type(None),),
}
_JSON_NAMES = {
    "object": "an object",
    "array": "an array",
    "string": "a string",
    "integer": "an integer",
    "number": "a number",
    "boolean": "true or false",
    "null": "null",
}
_MISSING = object()
# The fields every line of every stream has (each stream's JSON Schema requires them).
_COMMON_FIELDS = ("schema_version", "run_id", "year", "agent_id")

StrPath = str | os.PathLike[str]
_P = ParamSpec("_P")
_R = TypeVar("_R")
_T = TypeVar("_T")


class AuditReadError(InputError):
    """A run directory or audit stream cannot be read as asked.

    The message names the run directory or file (and the line, for a corrupt line) and the
    problem; the ``floodsim`` command prints it as one line and exits with code 2.
    """


class TruncatedLineWarning(UserWarning):
    """A stream's last line was cut short before its newline (an interrupted run) and skipped."""


class SkippedLine(NamedTuple):
    """A line a reader dropped.

    Attributes:
        path: The stream file.
        line: 1-based line number in the (decompressed) file.
        reason: Why it was dropped, e.g. the JSON error.
        preview: The line's first characters.
    """

    path: Path
    line: int
    reason: str
    preview: str


@dataclass(slots=True)
class ReadReport:
    """What reading one stream found; pass one to a reader and inspect it afterwards.

    Readers reset the report when they start and fill it as they go, so for a lazy reader
    (:func:`iter_records`, chunked :func:`read_stream`) it is complete once iteration ends.

    Attributes:
        path: The file read.
        records: Records returned.
        skipped: Lines dropped (at most one: a truncated last line).
        gzip_incomplete: The gzip data ended without its trailer (the writer never closed it).
    """

    path: Path | None = None
    records: int = 0
    skipped: list[SkippedLine] = field(default_factory=list)
    gzip_incomplete: bool = False

    @property
    def clean(self) -> bool:
        """Whether every line was read and the file was properly closed."""
        return not self.skipped and not self.gzip_incomplete

    def _reset(self, path: Path) -> None:
        self.path = path
        self.records = 0
        self.skipped = []
        self.gzip_incomplete = False


# --------------------------------------------------------------------------- files
def not_a_folder_error(path: Path) -> str | None:
    """The error for a ``path`` given as a run directory that is not a folder, else None.

    A file is a plausible slip (the run's ``manifest.json``, a config): it is not called
    missing.
    """
    if path.is_dir():
        return None
    what = "a file, not a folder" if path.exists() else "no such folder"
    return f"{path}: not a run directory ({what})"


def _run_dir(run_dir: StrPath) -> Path:
    path = Path(run_dir)
    if error := not_a_folder_error(path):
        raise AuditReadError(error)
    if error := experiment_folder_error(path):
        raise AuditReadError(error)
    return path


def experiment_folder_error(folder: Path) -> str | None:
    """The error for an experiment's folder given where a run directory is expected, else None.

    ``floodsim batch`` writes ``experiment.json`` and the runs under ``runs/<run_id>/``; a tool
    that reads one run would otherwise only say that the folder has no manifest (or, where a
    missing stream means an unaudited run, find nothing and say nothing).
    """
    if (folder / "manifest.json").is_file() or not (folder / "experiment.json").is_file():
        return None
    runs = sorted((folder / "runs").glob("*/manifest.json"))
    example = f", e.g. {runs[0].parent}" if runs else ""
    return (
        f"{folder}: an experiment folder, not a run directory: its runs are in "
        f"{folder / 'runs'}{example}"
    )


def _check_name(name: str) -> None:
    if name not in STREAMS and name != LLM_STREAM:
        known = ", ".join((*STREAMS, LLM_STREAM))
        msg = f"unknown audit stream {name!r}; expected one of {known}"
        raise AuditReadError(msg)


def stream_path(run_dir: StrPath, name: str) -> Path | None:
    """The file of stream ``name`` in ``run_dir`` (``.jsonl`` or ``.jsonl.gz``), if any.

    Raises:
        AuditReadError: If ``run_dir`` is not a folder, ``name`` is not one of :data:`STREAMS`
            or ``llm_calls``, or the stream's name is taken by something that is not a file (a
            folder), which would otherwise read as a stream the run never wrote.
    """
    _check_name(name)
    folder = _run_dir(run_dir)
    paths = [folder / f"{name}{suffix}" for suffix in (".jsonl", ".jsonl.gz")]
    if found := next((path for path in paths if path.is_file()), None):
        return found
    if taken := next((path for path in paths if path.exists()), None):
        msg = f"{taken}: not a file (a {name} stream is a file of JSON lines)"
        raise AuditReadError(msg)
    return None


def _require_stream(run_dir: StrPath, name: str) -> Path:
    path = stream_path(run_dir, name)
    if path is None:
        if not (Path(run_dir) / "manifest.json").is_file():
            msg = f"{run_dir}: not a run directory (no manifest.json and no {name} stream)"
            raise AuditReadError(msg)
        level = _audit_level(Path(run_dir))
        why = f" (audit level {level!r} does not write it)" if level else ""
        if name == LLM_STREAM and level not in (None, "off"):  # any other level writes it
            why = " (only runs whose households decide with decision.policy: llm write it)"
        msg = f"{run_dir}: no {name}.jsonl or {name}.jsonl.gz{why}"
        raise AuditReadError(msg)
    return path


def configured_audit(run_dir: StrPath) -> dict[str, Any]:
    """The ``audit:`` section of the run's ``config.resolved.yaml`` ({} when it cannot be read).

    The manifest records the audit's settings when the run ends; until then (or in a run that
    was killed) the resolved config says what the run writes: its level and sample.
    """
    try:
        text = (Path(run_dir) / "config.resolved.yaml").read_text(encoding="utf-8")
        config = yaml.safe_load(text)
    except (OSError, UnicodeDecodeError, yaml.YAMLError):
        return {}
    audit = config.get("audit") if isinstance(config, dict) else None
    return audit if isinstance(audit, dict) else {}


def sample_hint(run_dir: StrPath, manifest: dict[str, Any] | None) -> str:
    """`` (audited sample: 0.1)`` for a run that audited some households only, else ``""``.

    For a message saying a household is not in a stream: the likeliest reason, besides a
    mistyped id. The manifest records the sample when the run ends; until then the resolved
    config says it.
    """
    audit = (manifest or {}).get("audit")
    sample = (audit if isinstance(audit, dict) else configured_audit(run_dir)).get("sample")
    return "" if sample in (None, 1, 1.0) else f" (audited sample: {sample!r})"


def read_manifest(run_dir: StrPath) -> dict[str, Any]:
    """The run's ``manifest.json``.

    Raises:
        AuditReadError: If ``run_dir`` is not a folder, or the manifest is missing, cannot be
            read, is not a JSON object or holds values a run does not write
            (:func:`manifest_problem`); the message names the file.
    """
    path = _run_dir(run_dir) / "manifest.json"
    try:
        data = orjson.loads(path.read_bytes())
    except FileNotFoundError:
        msg = f"{run_dir}: no manifest.json (not a finished run directory)"
        raise AuditReadError(msg) from None
    except (OSError, orjson.JSONDecodeError) as err:  # a folder, unreadable, or not JSON
        msg = f"{path}: cannot be read as JSON ({err})"
        raise AuditReadError(msg) from None
    if not isinstance(data, dict):
        msg = f"{path}: expected a JSON object"
        raise AuditReadError(msg)
    problem = manifest_problem(data)
    if problem is not None:
        msg = f"{path}: {problem}"
        raise AuditReadError(msg)
    return data


_Count = Annotated[int, Strict(), Field(ge=0)]


class _Readable(BaseModel):
    """Part of a manifest as the readers use it: each field optional, but of its type."""

    model_config = ConfigDict(extra="allow")


class _ListedStream(_Readable):
    file: StrictStr | None = None
    lines: _Count | None = None


class _ManifestAudit(_Readable):
    level: Literal["off", "minimal", "standard", "full"] | None = None
    streams: dict[str, _ListedStream] | None = None


class _Manifest(_Readable):
    run_id: StrictStr | None = None
    status: StrictStr | None = None
    seed: Annotated[int, Strict()] | None = None
    year_reached: _Count | None = None
    counts: dict[str, _Count] | None = None
    versions: dict[str, StrictStr] | None = None
    audit: _ManifestAudit | None = None


def manifest_problem(manifest: dict[str, Any]) -> str | None:
    """What is wrong with the fields of a run's manifest that readers use, if anything.

    The readers, ``audit memory``, ``audit summarize`` and ``report`` reach into its mappings
    (``audit.streams``, ``counts``, ``versions``): one of another type, edited or damaged since
    the run wrote it, would fail there with a traceback.
    """
    try:
        _Manifest.model_validate(manifest)
    except ValidationError as err:
        return describe_validation_error(err, "-").removeprefix("-: ")
    return None


def listed_lines(manifest: dict[str, Any] | None, name: str) -> int | None:
    """How many lines of stream ``name`` a run's manifest records, if it records them.

    Args:
        manifest: The run's manifest (:func:`read_manifest`, which checks its types), or
            ``None`` when it has none that can be read.
        name: The stream.

    Returns:
        ``None`` also for a run that did not finish: the manifest lists its streams when the
        run ends.
    """
    audit = (manifest or {}).get("audit") or {}
    entry = (audit.get("streams") or {}).get(name)
    return entry.get("lines") if entry is not None else None


def lines_counted(
    lines: Iterable[_T], *, total: int | None, desc: str, progress: bool | None = None
) -> tqdm[_T]:
    """``lines``, counted on a progress bar on stderr as they are read; close it when done.

    Checking every line of a large run takes a while (about 13 s for the 1.5 million lines of
    10,000 households over 30 years at ``standard``): the bar says how far it has got.

    Args:
        lines: What is read, an item a line (such as :func:`iter_file`'s pairs).
        total: The lines expected (:func:`listed_lines`), if known; else the bar only counts.
        desc: What is being read, shown before the bar.
        progress: Show the bar; ``None``: only when stderr is a terminal.
    """
    return tqdm(
        lines,
        total=total,
        desc=desc,
        unit=" lines",
        unit_scale=total is None or total >= _SCALED_COUNTS,  # "1.50M", not "9.00"
        leave=False,
        disable=None if progress is None else not progress,
    )


def _audit_level(run_dir: Path) -> str | None:
    """The manifest's ``audit.level``, or ``None`` when there is no (readable) manifest."""
    try:
        audit = read_manifest(run_dir).get("audit")
    except AuditReadError:
        return None
    return audit.get("level") if isinstance(audit, dict) else None


def _plain_chunks(path: Path, _report: ReadReport) -> Iterator[bytes]:
    with path.open("rb") as fh:
        while chunk := fh.read(_CHUNK_BYTES):
            yield chunk


def _gzip_chunks(path: Path, report: ReadReport) -> Iterator[bytes]:
    """Decompress ``path`` chunk by chunk, tolerating a missing end (a crashed writer).

    ``gzip.open`` raises on a stream without its trailer and may lose the data it had already
    decompressed; decompressing by hand keeps every byte that made it to disk.
    """
    with path.open("rb") as fh:
        inflater = isal_zlib.decompressobj(_GZIP_WBITS)
        fed = False  # whether the current gzip member has received any bytes
        start = fh.read(len(_GZIP_MAGIC))
        if not _GZIP_MAGIC.startswith(start):
            # A few bytes of something else are no gzip header yet to the inflater, which
            # would report them as a stream cut short.
            msg = f"{path}: not gzip data (it starts with {start!r}, not the gzip magic 1f 8b)"
            raise AuditReadError(msg)
        fh.seek(0)
        while raw := fh.read(_CHUNK_BYTES):
            while raw:
                if not fed and not raw.strip(b"\0"):
                    break  # zero padding after the last member, as gzip tolerates
                fed = True
                try:
                    out = inflater.decompress(raw)
                except isal_zlib.error as err:
                    msg = f"{path}: corrupt gzip data ({err})"
                    raise AuditReadError(msg) from None
                if out:
                    yield out
                if inflater.eof:  # a member ended; concatenated members may follow
                    raw = inflater.unused_data
                    inflater = isal_zlib.decompressobj(_GZIP_WBITS)
                    fed = False
                else:
                    raw = b""
        if fed:
            if tail := inflater.flush():
                yield tail
            report.gzip_incomplete = True


def _numbered_lines(path: Path, report: ReadReport) -> Iterator[tuple[int, bytes, bool]]:
    """``(line number, line, complete)`` of ``path`` without newlines, decompressing ``.gz``.

    ``complete`` is false only for a last line the file ends in without its newline.
    """
    chunks = (_gzip_chunks if path.name.endswith(".gz") else _plain_chunks)(path, report)
    number = 0
    pending = b""
    for chunk in chunks:
        lines = (pending + chunk).split(b"\n")
        pending = lines.pop()
        for line in lines:
            number += 1
            yield number, line, True
    if pending:
        yield number + 1, pending, False


class _Field(NamedTuple):
    """What a stream's JSON Schema says of one top-level field."""

    name: str
    required: bool
    classes: frozenset[type] | None  # None: any
    kinds: str  # the types, as words
    values: tuple[Any, ...] | None  # an enum's or a const's values; None: any
    minimum: float | None = None  # a number's least value; None: any


@functools.cache
def _top_level(stream: str | None) -> tuple[_Field, ...]:
    """What ``stream``'s JSON Schema says of each top-level field of its lines.

    ``None``: a file of no stream's name, of which only the fields every stream has are known.
    """
    if stream is None:
        return tuple(f for f in _top_level(STREAMS[0]) if f.name in _COMMON_FIELDS)
    schema = load_schema(stream)
    fields = []
    for name, spec in schema["properties"].items():
        kinds = spec.get("type")
        kinds = [kinds] if isinstance(kinds, str) else kinds
        values = (spec["const"],) if "const" in spec else spec.get("enum")
        fields.append(
            _Field(
                name,
                name in schema["required"],
                None if kinds is None else frozenset(c for k in kinds for c in _JSON_CLASSES[k]),
                " or ".join(_JSON_NAMES[k] for k in kinds or ()),
                None if values is None else tuple(values),
                spec.get("minimum"),
            )
        )
    return tuple(fields)


def _shape_problem(record: dict[str, Any], stream: str | None) -> str | None:
    """What is wrong with a line's top-level fields, by its stream's JSON Schema, if anything.

    The readers and analyses group and index by these fields and reach into the mappings they
    hold: a line with one missing or of another type was damaged after it was written, and is
    refused where it is read rather than failing later with a traceback. The fields inside them
    are not checked: a whole schema check costs hundreds of microseconds a line.
    """
    for name, required, classes, kinds, values, minimum in _top_level(stream):
        value = record.get(name, _MISSING)
        if value is _MISSING:
            if required:
                return f"{name} is missing"
        elif classes is not None and value.__class__ not in classes:
            return f"{name} is not {kinds} (got {_shown(value)})"
        elif values is not None and value not in values:
            allowed = repr(values[0]) if len(values) == 1 else f"one of {list(values)}"
            return f"{name} is not {allowed} (got {_shown(value)})"
        elif minimum is not None and value is not None and value < minimum:  # a year before the run
            return f"{name} is below {minimum} (got {_shown(value)})"
    return None


def _shown(value: object) -> str:
    shown = repr(value)
    return shown if len(shown) <= _PREVIEW_CHARS else shown[:_PREVIEW_CHARS] + "..."


def _stream_of(path: Path) -> str | None:
    """The stream a file holds, by its name (``None``: no stream's name)."""
    name = path.name.removesuffix(".gz").removesuffix(".jsonl")
    return name if name in (*STREAMS, LLM_STREAM) else None


def iter_file(
    path: StrPath, *, report: ReadReport | None = None, listed: int | None = None
) -> Iterator[tuple[int, dict[str, Any]]]:
    """``(line number, record)`` pairs of one stream file (plain or ``.gz``), in file order.

    The lower-level sibling of :func:`iter_records` for callers that cite line numbers; the
    same policy for truncated and corrupt lines applies.

    Args:
        path: A ``.jsonl`` or ``.jsonl.gz`` file.
        report: Filled with what was read and skipped (complete once iteration ends).
        listed: The lines a finished run's manifest lists for the stream
            (:func:`listed_lines`), if known: a file that ends with fewer was cut short after
            the run wrote it, and raises rather than reading as a run that stopped early.

    Raises:
        AuditReadError: While iterating, for an unparsable line that is not a truncated last
            line (one without its newline), or corrupt gzip data; at the end, for fewer
            records than ``listed``.
    """
    path = Path(path)
    stream = _stream_of(path)
    report = report if report is not None else ReadReport()
    report._reset(path)
    # An unparsable line, fatal unless it is the last: (number, line, reason, complete).
    bad: tuple[int, bytes, str, bool] | None = None
    for number, line, complete in _numbered_lines(path, report):
        if not line.strip():
            continue
        if bad is not None:
            msg = f"{path}: line {bad[0]} is not a JSON object ({bad[2]}) and is not the last line"
            raise AuditReadError(msg)
        try:
            record = orjson.loads(line)
        except orjson.JSONDecodeError as err:
            bad = (number, line, str(err), complete)
            continue
        if not isinstance(record, dict):
            bad = (number, line, f"got {type(record).__name__}", complete)
            continue
        problem = _shape_problem(record, stream)
        if problem is not None:
            msg = f"{path}: line {number} is malformed: {problem}"
            raise AuditReadError(msg)
        report.records += 1
        yield number, record
    if listed is not None and report.records < listed:
        msg = (
            f"{path}: ends after {report.records} lines but the run completed with {listed}: "
            "the stream was cut short after the run wrote it"
        )
        raise AuditReadError(msg)
    if bad is not None:
        number, line, reason, complete = bad
        if complete:
            # The writer ends every line with its newline in the same write: a crash cuts the
            # last line short of it. A whole line that does not parse was damaged some other
            # way (an edit, a bad disk, another program), and skipping it would hide that.
            msg = (
                f"{path}: line {number} is malformed: not a JSON object ({reason}); it is the "
                "last line but a complete one (it ends with a newline), so the file is corrupt, "
                "not cut short by an interrupted run"
            )
            raise AuditReadError(msg)
        preview = line[:_PREVIEW_CHARS].decode("utf-8", errors="replace")
        report.skipped.append(SkippedLine(path, number, reason, preview))
        warnings.warn(
            f"{path}: skipped truncated last line {number} ({len(line)} bytes; the run was "
            "probably interrupted)",
            TruncatedLineWarning,
            stacklevel=3,
        )


def iter_records(
    run_dir: StrPath,
    name: str,
    *,
    report: ReadReport | None = None,
    progress: bool | None = False,
) -> Iterator[dict[str, Any]]:
    """Stream the records of one audit stream, one dict per line, in file order.

    Reads ``<name>.jsonl`` or ``<name>.jsonl.gz`` a chunk at a time, so files larger than memory
    are fine. A truncated last line (no newline after it) is skipped with a
    :class:`TruncatedLineWarning` and listed in ``report.skipped``; blank lines are ignored.
    A run whose manifest says it completed wrote every line it lists: its stream read to an
    end short of them (a copy cut off, a full disk) raises instead.

    Args:
        run_dir: The run directory.
        name: One of :data:`STREAMS`.
        report: Filled with what was read and skipped (complete once iteration ends).
        progress: Count the lines on a bar (:func:`lines_counted`) against the manifest's
            count of them; ``None``: only when stderr is a terminal; ``False`` (the default):
            never.

    Returns:
        An iterator of records.

    Raises:
        AuditReadError: Immediately if the folder or stream does not exist; while iterating, for
            an unparsable line that is not a truncated last line (naming file and line) or
            corrupt gzip data; at the end, for a complete run's stream with fewer lines than
            its manifest lists.
    """
    path = _require_stream(run_dir, name)
    manifest = _readable_manifest(run_dir)
    listed = listed_lines(manifest, name)
    whole = listed if (manifest or {}).get("status") == "complete" else None
    records = (record for _, record in iter_file(path, report=report, listed=whole))
    if progress is False:
        return records
    return _counted_records(records, name, listed, progress)


def _readable_manifest(run_dir: StrPath) -> dict[str, Any] | None:
    """The run's manifest, or ``None`` when it has none that can be read."""
    try:
        return read_manifest(run_dir)
    except AuditReadError:
        return None


def _counted_records(
    records: Iterator[dict[str, Any]], name: str, total: int | None, progress: bool | None
) -> Iterator[dict[str, Any]]:
    # An unfinished run lists no lines: the bar counts without a total.
    with lines_counted(records, total=total, desc=name, progress=progress) as bar:
        yield from bar


# --------------------------------------------------------------------------- DataFrames
def naming_damaged_lines(
    analysis: Callable[Concatenate[StrPath, _P], _R],
) -> Callable[Concatenate[StrPath, _P], _R]:
    """Make an analysis of a run, given the run directory first, name a damaged line it fails on.

    The analysis runs as it is, at the readers' speed; only when it fails on a value (a mapping
    that is a list, a number given as text) are the run's lines checked, and the first one
    damaged since the run wrote it is named in an :class:`AuditReadError`
    (:func:`simulation.audit.conformance.damaged_lines_named`).
    """

    @functools.wraps(analysis)
    def named(run_dir: StrPath, /, *args: _P.args, **kwargs: _P.kwargs) -> _R:
        # The conformance module reads lines with this one: imported when used, not at import.
        from simulation.audit.conformance import damaged_lines_named  # noqa: PLC0415

        with damaged_lines_named(run_dir):
            return analysis(run_dir, *args, **kwargs)

    return named


def _frame(records: list[dict[str, Any]], *, flatten: bool) -> pd.DataFrame:
    if not records:
        return pd.DataFrame(columns=list(BASE_COLUMNS))
    if flatten:
        return pd.json_normalize(records, sep=".")
    return pd.DataFrame.from_records(records)


def _chunks(
    records: Iterator[dict[str, Any]], chunksize: int, *, flatten: bool
) -> Iterator[pd.DataFrame]:
    batch: list[dict[str, Any]] = []
    for record in records:
        batch.append(record)
        if len(batch) == chunksize:
            yield _frame(batch, flatten=flatten)
            batch = []
    if batch:
        yield _frame(batch, flatten=flatten)


@overload
def read_stream(
    run_dir: StrPath,
    name: str,
    *,
    chunksize: None = None,
    flatten: bool = True,
    report: ReadReport | None = None,
) -> pd.DataFrame: ...


@overload
def read_stream(
    run_dir: StrPath,
    name: str,
    *,
    chunksize: int,
    flatten: bool = True,
    report: ReadReport | None = None,
) -> Iterator[pd.DataFrame]: ...


def read_stream(
    run_dir: StrPath,
    name: str,
    *,
    chunksize: int | None = None,
    flatten: bool = True,
    report: ReadReport | None = None,
) -> pd.DataFrame | Iterator[pd.DataFrame]:
    """Load one audit stream into pandas.

    With ``flatten`` nested objects become dotted columns (``memory.working_count``,
    ``consolidation.transferred_items``, ``memory_item.content``); lists stay lists in one cell.
    An empty stream gives an empty DataFrame with the :data:`BASE_COLUMNS`.

    Args:
        run_dir: The run directory.
        name: One of :data:`STREAMS`.
        chunksize: Return an iterator of DataFrames of at most this many rows instead, reading
            the file lazily (for streams larger than memory). Each chunk has the columns its
            own rows have: optional fields missing from a whole chunk are missing from it.
        flatten: Flatten nested objects with :func:`pandas.json_normalize` (``sep="."``);
            otherwise nested objects stay dicts in their top-level column.
        report: Filled with what was read and skipped (see :class:`ReadReport`).

    Returns:
        A DataFrame, or an iterator of DataFrames when ``chunksize`` is given.

    Raises:
        AuditReadError: As :func:`iter_records`, or for a ``chunksize`` below 1.
    """
    if chunksize is not None:
        size = as_integer(chunksize)
        if size is None or size < 1:
            msg = f"chunksize must be a positive integer, got {chunksize!r}"
            raise AuditReadError(msg)
        chunksize = size
    records = iter_records(run_dir, name, report=report)
    if chunksize is not None:
        return _chunks(records, chunksize, flatten=flatten)
    return _frame(list(records), flatten=flatten)


# --------------------------------------------------------------------------- tables
def _traces_with_memory(run_dir: StrPath) -> bool:
    """Whether the traces exist and carry the ``memory`` block (not level ``minimal``)."""
    if stream_path(run_dir, "household_traces") is None:
        return False
    first = next(iter_records(run_dir, "household_traces"), None)
    return first is not None and isinstance(first.get("memory"), dict)


def _refuse_traces_without_memory(run_dir: StrPath, table: str, instead: str) -> None:
    """Refuse ``source="traces"`` where the traces carry no ``memory`` block (level minimal).

    An empty table would read as households that retrieved nothing or held no memory.

    Raises:
        AuditReadError: Naming the source that does answer; also for missing traces.
    """
    first = next(iter_records(run_dir, "household_traces"), None)
    if first is not None and not isinstance(first.get("memory"), dict):
        other = (
            f"use source={instead!r}"
            if stream_path(run_dir, instead) is not None
            else "levels standard and full record it"
        )
        msg = (
            f"{run_dir}: {table}: the household_traces of this run carry no memory (audit "
            f"level minimal); {other}"
        )
        raise AuditReadError(msg)


@naming_damaged_lines
def decisions_per_year(run_dir: StrPath) -> pd.DataFrame:
    """How many audited households chose each skill in each year (from ``household_traces``).

    Every skill seen in any year gets a row in every year (count 0 when nobody chose it), so
    the table pivots without gaps.

    Returns:
        Columns ``year`` (int), ``skill`` (str, ``action.decision_skill``), ``count`` (int) and
        ``share`` (float, ``count`` over the year's decisions), sorted by year and skill.

    Raises:
        AuditReadError: If the run has no household traces (level ``off``).
    """
    counts: Counter[tuple[int, str]] = Counter(
        (int(r["year"]), str(r["action"]["decision_skill"]))
        for r in iter_records(run_dir, "household_traces")
    )
    columns = {"year": "int64", "skill": "object", "count": "int64", "share": "float64"}
    if not counts:
        return pd.DataFrame(columns=list(columns)).astype(columns)
    years = sorted({y for y, _ in counts})
    skills = sorted({s for _, s in counts})
    table = pd.DataFrame(
        [(y, s, counts.get((y, s), 0)) for y in years for s in skills],
        columns=["year", "skill", "count"],
    )
    table["share"] = table["count"] / table.groupby("year")["count"].transform("sum")
    return table[list(columns)]


_RETRIEVAL_COLUMNS = ["year", "agent_id", "rank", "id", "score", "store"]


def _retrieval_rows_from_traces(records: Iterable[dict[str, Any]]) -> Iterator[tuple[Any, ...]]:
    for r in records:
        memory = r.get("memory") or {}
        ids = memory.get("retrieved") or []
        scores = memory.get("retrieval_scores") or []
        stores = memory.get("retrieved_from") or []
        for rank, item_id in enumerate(ids, start=1):
            score = scores[rank - 1] if rank <= len(scores) else None
            store = stores[rank - 1] if rank <= len(stores) else None
            yield r["year"], r["agent_id"], rank, item_id, score, store


def _retrieval_rows_from_tools(records: Iterable[dict[str, Any]]) -> Iterator[tuple[Any, ...]]:
    for r in records:
        call = r["tool_invocation"]
        # At level full 'result' holds contents and 'result_ids' the ids.
        ids = call.get("result_ids", call.get("result")) or []
        scores = call.get("scores") or []
        for rank, item_id in enumerate(ids, start=1):
            score = scores[rank - 1] if rank <= len(scores) else None
            yield r["year"], r["agent_id"], rank, item_id, score, None


@naming_damaged_lines
def retrievals(
    run_dir: StrPath, *, source: Literal["auto", "traces", "tool_invocations"] = "auto"
) -> pd.DataFrame:
    """One row per retrieved memory item per decision.

    Args:
        run_dir: The run directory.
        source: ``traces`` reads ``memory.retrieved``/``retrieval_scores``/``retrieved_from``
            of ``household_traces``; ``tool_invocations`` reads the ``retrieve_memory`` calls
            (they do not say which store an item came from); ``auto`` uses the traces when they
            carry memory (levels standard and full), else the tool invocations.

    Returns:
        Columns ``year`` (int), ``agent_id`` (str), ``rank`` (int, 1 = best), ``id`` (item id),
        ``score`` (float, retrieval score) and ``store`` (``working``, ``episodic``, ``semantic``,
        ``archive``; ``None`` when the source does not record it).

    Raises:
        AuditReadError: If the chosen stream is missing or ``source`` is unknown.
    """
    if source == "auto":
        source = "traces" if _traces_with_memory(run_dir) else "tool_invocations"
    if source == "traces":
        _refuse_traces_without_memory(run_dir, "retrievals", "tool_invocations")
        rows = _retrieval_rows_from_traces(iter_records(run_dir, "household_traces"))
    elif source == "tool_invocations":
        rows = _retrieval_rows_from_tools(iter_records(run_dir, "tool_invocations"))
    else:
        msg = f"source must be 'auto', 'traces' or 'tool_invocations', got {source!r}"
        raise AuditReadError(msg)
    table = pd.DataFrame(list(rows), columns=_RETRIEVAL_COLUMNS)
    # store: object at every level, not str where it is recorded and object where it is not.
    return table.astype({"year": "int64", "rank": "int64", "score": "float64", "store": object})


@naming_damaged_lines
def memory_counts(
    run_dir: StrPath, *, source: Literal["auto", "traces", "consolidation"] = "auto"
) -> pd.DataFrame:
    """Working and episodic memory sizes per household-year.

    The two sources measure at different moments: a trace counts memory right after the
    household's decision (before the year-end consolidation), a consolidation line right after
    the year-end pass. The ``when`` column says which.

    Args:
        run_dir: The run directory.
        source: ``traces`` (``memory.working_count``/``episodic_count``), ``consolidation``
            (``working_after``/``episodic_after``), or ``auto``: the traces when they carry
            memory (levels standard and full), else the consolidation stream.

    Returns:
        Columns ``year`` (int), ``agent_id`` (str), ``working_count`` (int),
        ``episodic_count`` (int) and ``when`` (``decision`` or ``year_end``), in file order.

    Raises:
        AuditReadError: If the chosen stream is missing or ``source`` is unknown.
    """
    if source == "auto":
        source = "traces" if _traces_with_memory(run_dir) else "consolidation"
    if source == "traces":
        _refuse_traces_without_memory(run_dir, "memory_counts", "consolidation")
        rows = [
            (r["year"], r["agent_id"], m["working_count"], m["episodic_count"], "decision")
            for r in iter_records(run_dir, "household_traces")
            if (m := r.get("memory"))
        ]
    elif source == "consolidation":
        rows = [
            (
                r["year"],
                r["agent_id"],
                r["consolidation"]["working_after"],
                r["consolidation"]["episodic_after"],
                "year_end",
            )
            for r in iter_records(run_dir, "consolidation")
        ]
    else:
        msg = f"source must be 'auto', 'traces' or 'consolidation', got {source!r}"
        raise AuditReadError(msg)
    table = pd.DataFrame(
        rows, columns=["year", "agent_id", "working_count", "episodic_count", "when"]
    )
    return table.astype({"year": "int64", "working_count": "int64", "episodic_count": "int64"})


@naming_damaged_lines
def consolidation_table(run_dir: StrPath) -> pd.DataFrame:
    """One row per household-year end (from ``consolidation``).

    Returns:
        Columns ``year``, ``agent_id``, ``transferred_count`` (items copied from working into
        episodic memory), ``evicted_count`` (entries in ``evicted``: forgotten or moved,
        promotions included), ``promoted_count`` (archive items promoted back to episodic),
        ``reflections_count`` (reflections written), ``working_after`` and ``episodic_after``
        (store sizes after the pass); all but ``agent_id`` are ints.

    Raises:
        AuditReadError: If the run has no consolidation stream (levels minimal and off).
    """
    columns = [
        "year",
        "agent_id",
        "transferred_count",
        "evicted_count",
        "promoted_count",
        "reflections_count",
        "working_after",
        "episodic_after",
    ]
    rows = []
    for r in iter_records(run_dir, "consolidation"):
        c = r["consolidation"]
        rows.append(
            (
                r["year"],
                r["agent_id"],
                c["transferred_count"],
                len(c["evicted"]),
                len(c["promoted"]),
                len(c["reflections"]),
                c["working_after"],
                c["episodic_after"],
            )
        )
    table = pd.DataFrame(rows, columns=columns)
    return table.astype({c: "int64" for c in columns if c != "agent_id"})
