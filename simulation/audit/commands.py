"""The ``floodsim audit`` commands: inspect a run's audit trail.

Subcommands:
    memory      Rebuild one household's memory at the end of a year and print it.
    summarize   Count each stream's lines, years and households and check the trail's integrity
                (of a run, or of every run of an experiment).

``register`` adds them to the ``floodsim`` parser. Handlers raise :class:`AuditReadError` for a
bad run directory, household or year (the ``floodsim`` command prints it as one line and exits
with code 2); ``summarize`` exits with 1 when a check fails.
"""

from __future__ import annotations

from collections import Counter, defaultdict
from dataclasses import dataclass, field
from pathlib import Path
from typing import TYPE_CHECKING, Any

import orjson
from tqdm import tqdm

from simulation.audit.conformance import damaged_lines_named, line_problem
from simulation.audit.readers import (
    LLM_STREAM,
    STREAMS,
    AuditReadError,
    ReadReport,
    configured_audit,
    experiment_folder_error,
    iter_file,
    lines_counted,
    listed_lines,
    not_a_folder_error,
    read_manifest,
    stream_path,
)
from simulation.audit.replay import StoreCounts, format_memory, rebuild_memory
from simulation.cli_args import integer, positive_int_up_to
from simulation.cores import MAX_WORKERS, usable_cores

if TYPE_CHECKING:
    import argparse
    from collections.abc import Callable, Iterable

    from simulation.audit.readers import StrPath

    # What a stream scan hands each line to after taking it: the line, where it is, and whether
    # it is what the writer makes (the schema check).
    _LineHook = Callable[[dict[str, Any], str, bool], None]

__all__ = [
    "EXIT_INCONSISTENT",
    "AuditSummary",
    "Check",
    "ExperimentAuditSummary",
    "StreamStats",
    "register",
    "summarize_experiment",
    "summarize_run",
]

#: Exit code of ``floodsim audit summarize`` when a check fails.
EXIT_INCONSISTENT = 1
# Problems listed per failed check before "and N more".
_MAX_EXAMPLES = 3


@dataclass(slots=True)
class StreamStats:
    """What one stream holds.

    Attributes:
        name: The stream.
        file: Its file name (``None`` when absent).
        lines: Records read.
        years: Lowest and highest year (``None`` when empty or absent).
        households: Distinct agent ids.
        skipped: Lines skipped (a truncated last line).
        error: Why the stream could not be read to the end, if it could not.
    """

    name: str
    file: str | None = None
    lines: int = 0
    years: tuple[int, int] | None = None
    households: int = 0
    skipped: int = 0
    error: str | None = None


@dataclass(frozen=True, slots=True)
class Check:
    """One integrity check: its name, whether it passed and a short reason.

    A check that could not be made (its streams not written, or skipped on request) passes,
    so that it fails no run, and is shown as ``skip``, not ``ok``.
    """

    name: str
    ok: bool
    detail: str
    skipped: bool = False

    @property
    def label(self) -> str:
        """``ok``, ``skip`` or ``FAIL``: how the summary shows it."""
        return "FAIL" if not self.ok else "skip" if self.skipped else "ok"


@dataclass(slots=True)
class AuditSummary:
    """Counts per stream and integrity checks of one run directory."""

    run_dir: Path
    run_id: str | None
    audit: dict[str, Any]
    streams: dict[str, StreamStats]
    checks: list[Check] = field(default_factory=list)
    status: str | None = None  # the manifest's: complete, running (or killed) or failed

    @property
    def ok(self) -> bool:
        """Whether every check passed."""
        return all(check.ok for check in self.checks)

    def format(self) -> str:
        """The printable summary: a header, a table of streams, one line per check."""
        audit = self.audit
        gzip = "on" if audit.get("gzip") else "off"
        unaudited = audit.get("level") == "off"
        head = f"run {self.run_id or '?'}, audit level {audit.get('level', '?')}"
        if not unaudited:
            head += f", gzip {gzip}, sample {audit.get('sample', '?')}"
        lines = [f"Audit trail of {self.run_dir}", head, ""]
        if self.status not in (None, "complete"):
            unfinished = (
                f"the run is {self.status}, not complete: its streams end where it stopped "
                f"(continue it with: floodsim run --resume {self.run_dir})"
            )
            lines[-1:] = [unfinished, ""]
        if unaudited:
            lines.append(
                "audit level off: the run wrote no audit streams, so there is nothing to check"
            )
            return "\n".join(lines)
        lines += [
            f"{'stream':<18} {'lines':>9}  {'years':<9} {'households':>10}  {'skipped':>7}",
        ]
        for name, stats in self.streams.items():
            if stats.file is None:
                if name != LLM_STREAM:  # written only when households decide with an LLM
                    lines.append(f"{name:<18} {'(absent)':>9}")
                continue
            years = f"{stats.years[0]}-{stats.years[1]}" if stats.years else "-"
            lines.append(
                f"{name:<18} {stats.lines:>9}  {years:<9} {stats.households:>10}  "
                f"{stats.skipped:>7}"
            )
        lines += ["", "checks"]
        lines += [f"  {c.label:<5} {c.name}: {c.detail}" for c in self.checks]
        return "\n".join(lines)


def _examples(problems: list[str], total: int | None = None) -> str:
    """The first problems, and how many more; ``total``: all of them, when more than listed."""
    shown = "; ".join(problems[:_MAX_EXAMPLES])
    more = (len(problems) if total is None else total) - _MAX_EXAMPLES
    return f"{shown}; and {more} more" if more > 0 else shown


class _Scan:
    """State gathered while streaming every file once."""

    def __init__(self, expected_run_id: str | None, level: str | None, *, schema: bool = True):
        self.run_id = expected_run_id
        self.level = level
        self.run_id_problems: list[str] = []
        self.run_id_mismatches = 0
        self.known_ids: set[str] = set()
        self.unresolved: dict[str, str] = {}  # referenced id -> where it was first referenced
        self.trace_years: dict[str, list[int]] = defaultdict(list)
        self.trace_last: dict[str, tuple[int, bool]] = {}  # agent -> (year, relocated then)
        self.end_years: dict[str, list[int]] = defaultdict(list)
        # Lines that are not what the writer makes (line_problem): how many, the first named.
        self.schema = schema  # whether lines are checked for it at all
        self.damaged = 0
        self.damaged_examples: list[str] = []
        # An unfinished run's last whole year: later lines may be part of a year it stopped in
        # (each stream writes out on its own), so they are read but neither checked nor counted.
        self.whole_through: int | None = None

    def refer(self, ids: Iterable[Any], where: str) -> None:
        for item_id in ids:
            if item_id not in self.known_ids and item_id not in self.unresolved:
                self.unresolved[item_id] = where

    def know(self, item_id: Any) -> None:
        self.known_ids.add(item_id)

    def check_schema(self, name: str, record: dict[str, Any], where: str) -> bool:
        """Whether the line is what the writer makes for stream ``name``; if not, it is noted.

        That is, it matches the stream's JSON Schema and agrees with itself (``line_problem``).
        Every line passes when the schema check is skipped.
        """
        if not self.schema:
            return True
        problem = line_problem(record, name)
        if problem is None:
            return True
        self.damaged += 1
        if len(self.damaged_examples) < _MAX_EXAMPLES:
            self.damaged_examples.append(f"{where}: {problem}")
        return False

    def run_id_of(self, record: dict[str, Any], where: str) -> None:
        run_id = record.get("run_id")
        if self.run_id is None:
            self.run_id = run_id
        elif run_id != self.run_id:
            self.run_id_mismatches += 1
            if len(self.run_id_problems) < _MAX_EXAMPLES:
                self.run_id_problems.append(f"{where} has {run_id!r}")

    def record(self, name: str, record: dict[str, Any], where: str) -> None:
        """Take in one line of stream ``name``."""
        agent = record.get("agent_id")
        year = record.get("year")
        if self.whole_through is not None and isinstance(year, int) and year > self.whole_through:
            if name == "memory_updates":
                self.know(record["memory_item"]["id"])
            return
        if name == "memory_updates":
            self.know(record["memory_item"]["id"])
            self.refer((e["id"] for e in record["evicted"]), where)
        elif name == "consolidation":
            # First what needs only the top-level fields, which the readers have checked: a
            # line damaged further in still counts for its household's years.
            self.end_years[agent].append(year)
            block = record["consolidation"]
            for reflection in block["reflections"]:
                self.know(reflection["id"])
            self.refer(block["transferred_items"], where)
            self.refer((e["id"] for e in block["evicted"]), where)
            self.refer(block["promoted"], where)
        elif name == "household_traces":
            self.trace_years[agent].append(year)
            action = record.get("action") or {}
            after = record.get("state_after") or {}
            relocated = action.get("decision_skill") == "relocate" or after.get("relocated")
            last = self.trace_last.get(agent)
            if last is None or year >= last[0]:
                self.trace_last[agent] = (year, bool(relocated))
            memory = record.get("memory") or {}
            self.refer(memory.get("retrieved") or (), where)
            for key in ("working_items", "episodic_items"):
                self.refer((i["id"] for i in memory.get(key) or ()), where)
            update = record.get("memory_update")
            if update and "id" in update:
                self.refer((update["id"],), where)
        elif name == "tool_invocations":
            call = record["tool_invocation"]
            if "result_ids" in call:
                self.refer(call["result_ids"], where)
            elif self.level != "full":  # at level full 'result' holds contents, not ids
                self.refer(call["result"], where)


class _StreamScan:
    """One stream read for the summary: whole, or a year at a time (:meth:`read`)."""

    def __init__(
        self, path: Path, name: str, scan: _Scan, *, total: int | None, progress: bool | None
    ) -> None:
        self.name = name
        self.stats = StreamStats(name, path.name)
        self._scan = scan
        self._report = ReadReport()
        self._agents: set[str] = set()
        self._low: int | None = None
        self._high: int | None = None
        self._counted = lines_counted(
            iter_file(path, report=self._report),
            total=total,
            desc=f"checking {path.name}",
            progress=progress,
        )
        self._lines = iter(self._counted)
        self._head: tuple[int, dict[str, Any]] | None = None
        self._advance()

    @property
    def next_year(self) -> int | None:
        """The year of the next line (``None``: read to the end, or to a line it could not)."""
        return None if self._head is None else self._head[1]["year"]

    def read(self, through: int | None = None, then: _LineHook | None = None) -> None:
        """Take the lines up to the last of year ``through`` (``None``: to the end).

        Args:
            through: The last year to take (the streams are in year order).
            then: Called with each line of a whole year after the scan has taken it.
        """
        while self._head is not None:
            line, record = self._head
            if through is not None and record["year"] > through:
                return
            self._take(line, record, then)
            self._advance()

    def _advance(self) -> None:
        if self.stats.error is not None:
            self._head = None
            return
        try:
            self._head = next(self._lines, None)
        except AuditReadError as err:
            self.stats.error = str(err)
            self._head = None

    def _take(self, line: int, record: dict[str, Any], then: _LineHook | None) -> None:
        scan = self._scan
        where = f"{self.stats.file}:{line}"
        matches = scan.check_schema(self.name, record, where)
        scan.run_id_of(record, where)
        year = record["year"]  # an integer: the readers check the top-level fields
        self._agents.add(record["agent_id"])
        self._low = year if self._low is None else min(self._low, year)
        self._high = year if self._high is None else max(self._high, year)
        try:
            scan.record(self.name, record, where)
            if then is not None and (scan.whole_through is None or year <= scan.whole_through):
                then(record, where, matches)
        except (KeyError, TypeError, AttributeError) as err:  # a mapping that is not one
            if matches:  # else the schema check has named the line: read on
                self.stats.error = f"{where}: missing or malformed field {err}"

    def finish(self) -> StreamStats:
        """Close the read and return what it found."""
        self._counted.close()
        stats, report = self.stats, self._report
        stats.lines = report.records
        stats.skipped = len(report.skipped)
        stats.households = len(self._agents)
        if self._low is not None and self._high is not None:
            stats.years = (self._low, self._high)
        # A run that stopped never closed its gzip streams: the part after the last whole
        # member is a year it did not finish.
        if report.gzip_incomplete and stats.error is None and self._scan.whole_through is None:
            stats.error = f"{stats.file}: gzip data ends without its trailer (writer not closed)"
        return stats


def _scan_streams(
    folder: Path,
    scan: _Scan,
    manifest: dict[str, Any],
    counts: StoreCounts,
    progress: bool | None,
) -> dict[str, StreamStats]:
    """Read every stream of the run once, the memory streams and traces a year at a time.

    A year's memory writes, then its traces, then its year ends: the order in which
    ``counts`` replays each household's stores. ``manifest`` (``{}`` when unreadable) gives the
    progress bars their totals.
    """
    scans: dict[str, _StreamScan] = {}
    for name in (*STREAMS, LLM_STREAM):
        path = stream_path(folder, name)
        if path is not None:
            total = listed_lines(manifest, name)
            scans[name] = _StreamScan(path, name, scan, total=total, progress=progress)
    replays = "memory_updates" in scans and "consolidation" in scans
    yearly = [
        (scans[name], hook if replays else None)
        for name, hook in (
            ("memory_updates", counts.update),
            ("household_traces", counts.trace),
            ("consolidation", counts.consolidate),
        )
        if name in scans
    ]
    while years := [y for stream, _ in yearly if (y := stream.next_year) is not None]:
        year = min(years)
        for stream, hook in yearly:
            stream.read(through=year, then=hook)
        counts.end_year()
    for stream in scans.values():
        stream.read()  # tool invocations and LLM calls; the others are read
    found = {name: StreamStats(name) for name in (*STREAMS, LLM_STREAM)}
    found.update((name, stream.finish()) for name, stream in scans.items())
    return found


def _check_files(
    streams: dict[str, StreamStats], listed: dict[str, Any], reports: list[str]
) -> Check:
    problems = list(reports)
    for name, entry in listed.items():
        stats = streams.get(name)
        if stats is None or stats.file is None:
            problems.append(f"{name} is listed in the manifest but absent")
        elif isinstance(entry, dict) and entry.get("file") not in (None, stats.file):
            problems.append(f"{name} is {stats.file}, manifest says {entry.get('file')}")
    for stats in streams.values():
        if stats.skipped:
            problems.append(f"{stats.file}: {stats.skipped} truncated line skipped")
        if stats.error:
            problems.append(stats.error)
    if problems:
        return Check("files", ok=False, detail=_examples(problems))
    present = [s.file for s in streams.values() if s.file]
    detail = f"{len(present)} stream(s) present and readable to the end"
    return Check("files", ok=True, detail=detail if present else "no audit streams (level off)")


def _check_schema(scan: _Scan, streams: dict[str, StreamStats]) -> Check:
    name = "schema"
    if not scan.schema:
        return Check(
            name, ok=True, detail="not checked (skipped on request: --no-schema)", skipped=True
        )
    if scan.damaged:
        detail = (
            f"{scan.damaged} line(s) break their stream's JSON Schema or disagree with "
            f"themselves: {_examples(scan.damaged_examples, scan.damaged)}"
        )
        return Check(name, ok=False, detail=detail)
    read = sum(stats.lines for stats in streams.values())
    if not read:
        return Check(name, ok=True, detail="no lines to check")
    detail = f"every line read ({read}) matches its stream's JSON Schema and agrees with itself"
    return Check(name, ok=True, detail=detail)


def _check_line_counts(streams: dict[str, StreamStats], listed: dict[str, Any]) -> Check:
    problems = []
    unread: list[str] = []
    compared = 0
    for name, entry in listed.items():
        stats = streams.get(name)
        expected = entry.get("lines") if isinstance(entry, dict) else None
        if stats is None or stats.file is None or not isinstance(expected, int):
            continue
        if stats.error:  # read only up to its corrupt line: its count says nothing
            unread.append(stats.file)
            continue
        compared += 1
        if stats.lines != expected:
            problems.append(f"{stats.file} has {stats.lines} lines, manifest says {expected}")
    if problems:
        return Check("line counts", ok=False, detail=_examples(problems))
    left_out = f"; not compared: {', '.join(unread)} (not read to the end)" if unread else ""
    if not compared:
        detail = "manifest lists no line counts to compare" if not unread else left_out[2:]
        return Check("line counts", ok=True, detail=detail)
    return Check(
        "line counts", ok=True, detail=f"{compared} stream(s) match the manifest{left_out}"
    )


def _check_run_id(scan: _Scan, manifest_run_id: str | None) -> Check:
    if scan.run_id_mismatches:
        expected = "the manifest's" if manifest_run_id else "the first line's"
        detail = f"{scan.run_id_mismatches} line(s) differ from {expected} {scan.run_id!r}: "
        return Check("run_id", ok=False, detail=detail + _examples(scan.run_id_problems))
    if scan.run_id is None:
        return Check("run_id", ok=True, detail="no lines to check")
    return Check("run_id", ok=True, detail=f"every line has {scan.run_id!r}")


def _year_problems(agent: str, years: list[int]) -> str | None:
    counts = Counter(years)
    duplicated = sorted(y for y, n in counts.items() if n > 1)
    if duplicated:
        return f"{agent} year {duplicated[0]} appears {counts[duplicated[0]]} times"
    expected = range(1, max(years) + 1)
    missing = [y for y in expected if y not in counts]
    if missing:
        return f"{agent} has no line for year {missing[0]}"
    return None


def _check_household_years(
    scan: _Scan,
    final_year: int | None,
    households: int | None,
    sampled_all: bool,
    *,
    partial_after: int | None = None,
) -> Check:
    """The household-years check; ``partial_after``: an unfinished run's last whole year.

    A run stopped during a year leaves some of that year's lines and not others: only the
    years its manifest records as written out are checked (the scan left out the others).
    """
    name = "household-years"
    trace_years, end_years = scan.trace_years, scan.end_years
    if not trace_years:
        return Check(name, ok=True, detail="no household traces to check")
    problems = []
    for agent, years in trace_years.items():
        problem = _year_problems(agent, years)
        if problem is None and final_year is not None:
            last_year, relocated = scan.trace_last[agent]
            if last_year < final_year and not relocated:
                problem = f"{agent} stops at year {last_year} without relocating"
            elif last_year > final_year:
                problem = f"{agent} has year {last_year}, past the run's {final_year} years"
        if problem:
            problems.append(problem)
    if sampled_all and households is not None and len(trace_years) != households:
        problems.append(f"{len(trace_years)} households traced, manifest counts {households}")
    for agent, years in end_years.items():
        traced = sorted(trace_years.get(agent, ()))
        if sorted(years) != traced:
            problems.append(f"{agent}: consolidation years differ from trace years")
    if problems:
        return Check(name, ok=False, detail=_examples(problems))
    upto = "" if partial_after is None else f", up to year {partial_after} (the last written whole)"
    return Check(
        name,
        ok=True,
        detail=f"{len(trace_years)} households, one trace per year from year 1 while active{upto}",
    )


def _check_ids(scan: _Scan, has_updates: bool) -> Check:
    name = "memory ids"
    if not has_updates:
        return Check(name, ok=True, detail="not checked: no memory_updates stream", skipped=True)
    missing = {i: w for i, w in scan.unresolved.items() if i not in scan.known_ids}
    if missing:
        problems = [f"{item_id!r} ({where})" for item_id, where in missing.items()]
        detail = f"{len(missing)} referenced id(s) never written: " + _examples(problems)
        return Check(name, ok=False, detail=detail)
    return Check(
        name,
        ok=True,
        detail=f"every referenced id is written ({len(scan.known_ids)} items)",
    )


def _check_replay(replayed: StoreCounts, streams: dict[str, StreamStats]) -> Check:
    name = "memory replay"
    if streams["memory_updates"].file is None or streams["consolidation"].file is None:
        return Check(
            name, ok=True, detail="not checked: no memory_updates and consolidation", skipped=True
        )
    if replayed.mismatches:
        detail = (
            f"{replayed.mismatches} line(s) disagree with the stores replayed from "
            f"memory_updates and consolidation: "
            f"{_examples(replayed.problems, replayed.mismatches)}"
        )
        return Check(name, ok=False, detail=detail)
    return Check(
        name,
        ok=True,
        detail=(
            "each household's stores, replayed from memory_updates and consolidation, hold what "
            f"its traces ({replayed.traces}) and year ends ({replayed.year_ends}) say"
        ),
    )


def summarize_run(
    run_dir: StrPath, *, schema: bool = True, progress: bool | None = None
) -> AuditSummary:
    """Count each stream and check the audit trail's integrity, streaming each file once.

    Checks (each ``ok`` or failed with a short reason):

    * files: every stream the manifest lists is present, no line was truncated or corrupt;
    * schema: every line read matches its stream's JSON Schema (``simulation/audit/schemas``),
      nested fields included, and agrees with itself (lengths, counts, the call's year, whose
      items; :mod:`simulation.audit.conformance`);
    * line counts: each stream has the number of lines the manifest records;
    * run_id: identical on every line and equal to the manifest's;
    * household-years: each traced household has one trace per year from year 1, without
      duplicates or gaps, until the run's last year or the year it relocated; its consolidation
      lines cover the same years; with no sampling, every household is traced;
    * memory ids: every id referenced by traces, tool invocations, consolidation and evictions
      is written by ``memory_updates`` or is a reflection;
    * memory replay: each household's stores, replayed from ``memory_updates`` and
      ``consolidation`` (:class:`~simulation.audit.replay.StoreCounts`), hold as many items as
      its traces say after each decision (at level ``full``, the very items they list) and its
      consolidation lines after each year end, and every item moved out of a store is in it.

    The memory streams and the traces are read together, a year at a time, for the replay;
    each file is still read once.

    Args:
        run_dir: The run directory.
        schema: Run the schema check, about half the time taken at ``standard``.
            Without it, a line damaged inside its nested fields may end its stream's read as
            malformed, where the check would have named it and read on.
        progress: Count each stream's lines on a progress bar on stderr (``None``: when stderr
            is a terminal).

    Raises:
        AuditReadError: If ``run_dir`` is not a folder, or holds neither a manifest nor streams.
    """
    folder = Path(run_dir)
    if error := not_a_folder_error(folder):
        raise AuditReadError(error)
    problems: list[str] = []
    try:
        manifest = read_manifest(folder)
    except AuditReadError as err:
        manifest = {}
        problems.append(str(err))
    audit = manifest.get("audit") if isinstance(manifest.get("audit"), dict) else {}
    status = manifest.get("status")
    finished = status == "complete"
    if manifest and not audit:
        if finished:
            problems.append("manifest.json has no 'audit' entry")
        else:  # written when the run ends: until then the resolved config says what it writes
            audit = configured_audit(folder)
    listed = audit.get("streams") if isinstance(audit.get("streams"), dict) else {}
    manifest_run_id = manifest.get("run_id")
    scan = _Scan(manifest_run_id, audit.get("level"), schema=schema)
    reached = manifest.get("year_reached")
    if not finished and isinstance(reached, int):
        scan.whole_through = reached

    replayed = StoreCounts(_MAX_EXAMPLES)
    streams = _scan_streams(folder, scan, manifest, replayed, progress)

    if not manifest and all(stats.file is None for stats in streams.values()):
        msg = f"{folder}: not a run directory (no manifest.json and no audit streams)"
        raise AuditReadError(msg)
    counts = manifest.get("counts") if isinstance(manifest.get("counts"), dict) else {}
    final_year = counts.get("years") if finished or not manifest else None
    if scan.whole_through is not None:
        final_year = scan.whole_through
    elif not isinstance(final_year, int):  # as far as the traces reached
        traced = streams["household_traces"].years
        final_year = traced[1] if traced else None
    sample = audit.get("sample", 1.0)
    sampled_all = sample in (1, 1.0) and not isinstance(sample, bool)
    summary = AuditSummary(folder, scan.run_id, audit, streams, status=status)
    summary.checks = [
        _check_files(streams, listed, problems),
        _check_schema(scan, streams),
        _check_line_counts(streams, listed),
        _check_run_id(scan, manifest_run_id),
    ]
    unread = [stats.file for stats in streams.values() if stats.error and stats.file]
    if unread:
        # The checks across streams would report the lines never read as missing: the files
        # check has named the corrupt line, and that is the finding.
        detail = f"not checked: {', '.join(unread)} could not be read to the end (see files)"
        summary.checks += [
            Check("household-years", ok=True, detail=detail, skipped=True),
            Check("memory ids", ok=True, detail=detail, skipped=True),
            Check("memory replay", ok=True, detail=detail, skipped=True),
        ]
        return summary
    summary.checks += [
        _check_household_years(
            scan,
            final_year,
            counts.get("households"),
            sampled_all,
            partial_after=scan.whole_through,
        ),
        _check_ids(scan, streams["memory_updates"].file is not None),
        _check_replay(replayed, streams),
    ]
    return summary


@dataclass(slots=True)
class ExperimentAuditSummary:
    """The audit trails of every run of a batch experiment (:func:`summarize_experiment`)."""

    folder: Path
    runs: list[AuditSummary]
    #: The run ids ``experiment.json`` plans (``None`` when it cannot be read).
    planned: list[str] | None = None

    @property
    def ok(self) -> bool:
        """Whether every check of every run passed."""
        return all(run.ok for run in self.runs)

    def format(self) -> str:
        """A line per run, then each failed check of the runs that failed one."""
        lines = [f"Audit trails of the {len(self.runs)} runs of {self.folder}", ""]
        lines.append(f"{'run':<24} {'status':<9} {'level':<9} {'lines':>10}  checks")
        for run in self.runs:
            read = sum(stats.lines for stats in run.streams.values())
            failed = [check.name for check in run.checks if not check.ok]
            verdict = "ok" if not failed else "FAIL " + ", ".join(failed)
            level = run.audit.get("level", "?")
            lines.append(
                f"{run.run_dir.name:<24} {run.status or '?':<9} {level:<9} {read:>10}  {verdict}"
            )
        for run in self.runs:
            failing = [check for check in run.checks if not check.ok]
            if failing:
                lines += ["", f"{run.run_dir.name}:"]
                lines += [f"  FAIL  {check.name}: {check.detail}" for check in failing]
        passed = sum(run.ok for run in self.runs)
        lines += ["", f"{passed} of {len(self.runs)} runs pass every check"]
        lines += self._unfinished()
        return "\n".join(lines)

    def _unfinished(self) -> list[str]:
        """What the checks cannot say: runs the experiment plans that are not all there.

        The trails of runs stopped mid-way pass their checks (they are whole up to where the
        run stopped), and runs that never started have none to check.
        """
        if self.planned is None:
            return []
        have = {run.run_dir.name for run in self.runs}
        missing = [run_id for run_id in self.planned if run_id not in have]
        planned = set(self.planned)
        stopped = [
            run.run_dir.name
            for run in self.runs
            if run.status != "complete" and run.run_dir.name in planned
        ]
        if not missing and not stopped:
            return []
        parts = []
        if missing:
            verb = "has" if len(missing) == 1 else "have"
            parts.append(f"{len(missing)} {verb} no run folder ({_some(missing)})")
        if stopped:
            parts.append(f"{len(stopped)} did not complete ({_some(stopped)})")
        plans = f"The experiment plans {len(self.planned)} runs: {' and '.join(parts)}"
        return [f"{plans}; the batch did not finish (floodsim batch FILE --resume runs the rest)"]


def _some(run_ids: list[str], shown: int = 3) -> str:
    """``p000-r001, p000-r002``, or the first ``shown`` and how many more."""
    more = len(run_ids) - shown
    return ", ".join(run_ids[:shown]) + (f" and {more} more" if more > 0 else "")


def _planned_runs(folder: Path) -> list[str] | None:
    """The run ids ``folder/experiment.json`` lists, or ``None`` when it cannot be read.

    Read here rather than through :mod:`simulation.experiments.record`, which imports the
    experiment's config and with it Mesa: the audit commands start without it.
    """
    try:
        runs = orjson.loads((folder / "experiment.json").read_bytes())["runs"]
        return [str(run["run_id"]) for run in runs]
    except (OSError, orjson.JSONDecodeError, KeyError, TypeError):
        return None


def summarize_experiment(
    folder: StrPath, *, schema: bool = True, progress: bool | None = None, workers: int = 1
) -> ExperimentAuditSummary:
    """:func:`summarize_run` for every run of a batch experiment, in run-id order.

    Args:
        folder: The experiment's folder (``experiment.json`` and ``runs/<run_id>/``).
        schema: Run each run's schema check (see :func:`summarize_run`).
        progress: Count the runs checked on a progress bar on stderr (``None``: when stderr is
            a terminal).
        workers: Runs checked at once, each in a process of its own (a pool of
            :class:`~simulation.experiments.executors.ProcessExecutor`, which Ctrl-C stops);
            1 checks them one after another here. A run's check reads its files on one core
            (about 15 µs a line with the schema check), so on a machine of several cores the
            runs of a large experiment are checked that many times as fast.

    Raises:
        AuditReadError: If ``folder`` is not an experiment's folder or holds no runs.
    """
    folder = Path(folder)
    if not folder.is_dir():
        what = "a file, not a folder" if folder.exists() else "no such folder"
        msg = f"{folder}: not an experiment folder ({what})"
        raise AuditReadError(msg)
    if experiment_folder_error(folder) is None:
        msg = f"{folder}: not an experiment folder (no experiment.json, or a run's manifest)"
        raise AuditReadError(msg)
    runs = sorted(p for p in (folder / "runs").glob("*") if p.is_dir())
    if not runs:
        msg = f"{folder}: an experiment folder without runs (nothing in {folder / 'runs'})"
        raise AuditReadError(msg)
    if workers < 1:
        msg = f"workers must be at least 1, got {workers}"
        raise ValueError(msg)
    bar = tqdm(
        total=len(runs),
        desc=f"checking {folder.name}",
        unit=" runs",
        leave=False,
        disable=None if progress is None else not progress,
    )
    summaries: list[AuditSummary] = []
    with bar:
        if workers == 1 or len(runs) == 1:
            for run in runs:
                summaries.append(_run_summary(run, schema))
                bar.update()
            return ExperimentAuditSummary(folder, summaries, _planned_runs(folder))
        # Imported on use: the pool brings the runner and Mesa, which a run's check never needs.
        from simulation.experiments.executors import ProcessExecutor  # noqa: PLC0415

        with ProcessExecutor(min(workers, len(runs))) as pool:
            pending = [pool.submit(_run_summary, run, schema) for run in runs]
            for future in pending:  # in run-id order, whichever ends first
                summaries.append(future.result())
                bar.update()
    return ExperimentAuditSummary(folder, summaries, _planned_runs(folder))


def _run_summary(run_dir: Path, schema: bool) -> AuditSummary:
    """One run's :func:`summarize_run`, quietly; a run that cannot be read fails its files check."""
    try:
        return summarize_run(run_dir, schema=schema, progress=False)
    except AuditReadError as err:  # a run that left neither manifest nor streams
        unread = AuditSummary(run_dir, None, {}, {}, status=None)
        unread.checks = [Check("files", ok=False, detail=str(err))]
        return unread


# --------------------------------------------------------------------------- handlers
def _memory(args: argparse.Namespace) -> int:
    with damaged_lines_named(args.run_dir):
        rebuilt = rebuild_memory(args.run_dir, args.agent, args.year)
    print(format_memory(rebuilt))
    return 0


def _summarize(args: argparse.Namespace) -> int:
    folder = Path(args.run_dir)
    summary: AuditSummary | ExperimentAuditSummary
    if folder.is_dir() and experiment_folder_error(folder) is not None:
        workers = args.workers if args.workers is not None else usable_cores()
        summary = summarize_experiment(folder, schema=not args.no_schema, workers=workers)
    else:
        summary = summarize_run(folder, schema=not args.no_schema)
    print(summary.format())
    return 0 if summary.ok else EXIT_INCONSISTENT


def register(subparsers: argparse._SubParsersAction) -> None:  # type: ignore[type-arg]
    """Add the ``audit`` command and its subcommands to the ``floodsim`` subparsers.

    Each subcommand sets ``func``: the caller runs ``args.func(args)`` and maps
    :class:`AuditReadError` to exit code 2.
    """
    audit = subparsers.add_parser("audit", help="inspect a run's audit trail")
    commands = audit.add_subparsers(dest="audit_command", required=True)

    memory = commands.add_parser(
        "memory", help="rebuild one household's memory at the end of a year"
    )
    memory.add_argument("run_dir", help="run directory (audit level standard or full)")
    memory.add_argument("--agent", required=True, help="household id, e.g. H00007")
    memory.add_argument("--year", required=True, type=integer, help="year (0: pre-seeded memory)")
    memory.set_defaults(func=_memory)

    summarize = commands.add_parser(
        "summarize", help="count each stream and check the audit trail's integrity"
    )
    summarize.add_argument(
        "run_dir",
        metavar="RUN_OR_EXPERIMENT",
        help="run directory, or an experiment's folder (every run is checked)",
    )
    summarize.add_argument(
        "--no-schema",
        action="store_true",
        help="skip the schema check, most of the time taken on a large run (lines whose "
        "nested fields are damaged then go unnamed)",
    )
    summarize.add_argument(
        "--workers",
        # As batch and calibrate: a pool forks all its workers at its first task.
        type=positive_int_up_to(MAX_WORKERS, "the most processes a pool may fork"),
        metavar="N",
        help="an experiment's runs checked at once, each in a process of its own (default: "
        "every core this process may use; 1: one after another)",
    )
    summarize.set_defaults(func=_summarize)
