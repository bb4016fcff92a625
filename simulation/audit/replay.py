"""Rebuild a household's memory at the end of any year from a run's audit streams.

At audit levels ``standard`` and ``full`` every memory write is logged in ``memory_updates``
(with what it evicted or moved) and every year-end pass in ``consolidation``. Replaying both in
order reproduces exactly which items each store holds, and their contents:

* a ``memory_updates`` line adds ``memory_item`` to its ``destination`` store, then applies each
  ``evicted`` entry ``{id, from, to}``: the id leaves store ``from`` and, unless ``to`` is null,
  enters store ``to`` (a move, e.g. episodic to archive). Year-0 lines are pre-seeded memories;
* a ``consolidation`` line copies ``transferred_items`` from working into episodic memory (the
  item stays in working memory too: it is one item in two stores), adds ``reflections`` to
  semantic memory and applies ``evicted`` in order (promotions appear there as
  archive-to-episodic moves, so ``promoted`` is informational). This gives the same stores as
  the order things happened in, which ``evicted`` lists: the evictions of the transfers, then
  tiered demotions and promotions, then each reflection followed by the semantic eviction it
  caused (semantic evictions come after the reflections are added, all others before).

Within a year a household's writes precede its consolidation line, and both files are in year
order, so one pass that stops after the requested year suffices.

The replay leaves out what these two streams do not carry (see ``docs/audit_streams.md``,
"Rebuilding a household's memory from the audit streams"): each item's access count and last
access, which ``importance_weighted`` and ``tiered`` retention and ``weighted`` retrieval read,
come from the retrievals in ``tool_invocations`` (a household's retrieval falls after its other
writes of the year and before its ``decision`` write); and semantic
and archive sizes are in no line (``working_after``, ``episodic_after`` and the traces' counts
cover working and episodic memory only). The year a ``tiered`` promotion restarted an item's
decay is logged nowhere either; the replay derives it as ``max(year, the previous one or the
item's year)`` at each archive-to-episodic move of a year end (kept when the item goes straight
back to the archive), so that :meth:`RebuiltMemory.decayed` scores the item as retrieval does.

:class:`StoreCounts` replays every household at once, keeping only which ids each store holds,
for ``floodsim audit summarize`` to check the counts the traces and year ends give.
"""

from __future__ import annotations

from dataclasses import dataclass, field
from pathlib import Path
from typing import TYPE_CHECKING, Any

import yaml

from simulation.audit.conformance import line_problem
from simulation.audit.readers import (
    AuditReadError,
    ReadReport,
    as_integer,
    iter_file,
    lines_counted,
    listed_lines,
    not_a_folder_error,
    read_manifest,
    sample_hint,
    stream_path,
)

if TYPE_CHECKING:
    from collections.abc import Callable, Iterator

    from simulation.audit.readers import StrPath

__all__ = ["MEMORY_STORES", "RebuiltMemory", "StoreCounts", "format_memory", "rebuild_memory"]

#: The stores of a household's memory, in display order.
MEMORY_STORES: tuple[str, ...] = ("working", "episodic", "semantic", "archive")
# Levels whose streams log every memory write and year-end pass.
_REPLAY_LEVELS = frozenset({"standard", "full"})
# Fields an item keeps in the rebuilt memory (the store it went to is implied by where it is).
_ITEM_FIELDS = ("id", "content", "importance", "year", "tags", "source", "amount", "pinned")


@dataclass(slots=True)
class RebuiltMemory:
    """One household's memory at the end of one year, rebuilt from the audit streams.

    Each store is a list of item dicts with at least ``id``, ``content``, ``importance``,
    ``year``, ``tags`` and ``source`` (plus ``amount``, ``pinned`` and ``evidence`` when the
    stream has them), and ``rehearsed``, the year a ``tiered`` promotion restarted its decay,
    once one has; but no access count or last access (see the module docstring). Working memory
    is FIFO order, oldest first; the other stores are in the order items entered them (a
    ``full`` trace's ``episodic_items`` are by item number instead).

    Attributes:
        run_dir: The run directory.
        run_id: The run's id, from the streams.
        agent_id: The household.
        year: The year at whose end the memory is taken.
        working: Working memory, oldest first.
        episodic: Episodic memory.
        semantic: Reflections.
        archive: Items demoted by the tiered retention policy.
        last_year: Last year in which the household's memory changed (``None``: never, e.g.
            nothing was seeded and ``year`` is 0).
        moved_away: The year the household moved away, when that is before ``year``: its last
            year end, after which other households' year ends go on (``None``: still there).
        reports: What reading each stream found (skipped truncated lines).
        decay_rate: The run's ``memory.decay_rate`` (``None`` when its
            ``config.resolved.yaml`` is missing or does not say), for :meth:`decayed`.
    """

    run_dir: Path
    run_id: str | None
    agent_id: str
    year: int
    working: list[dict[str, Any]] = field(default_factory=list)
    episodic: list[dict[str, Any]] = field(default_factory=list)
    semantic: list[dict[str, Any]] = field(default_factory=list)
    archive: list[dict[str, Any]] = field(default_factory=list)
    last_year: int | None = None
    moved_away: int | None = None
    reports: dict[str, ReadReport] = field(default_factory=dict)
    decay_rate: float | None = None

    def decayed(self, item: dict[str, Any]) -> float | None:
        """An item's importance decayed to the end of :attr:`year`, as retrieval scores it.

        ``importance * decay_rate ** (year - since)``, ``since`` being the item's year or, once
        a ``tiered`` promotion rehearsed it, that year: what the ``spec`` retrieval of a year
        ``year`` scores it (a retrieval the next year decays it once more). ``None`` without
        the decay rate.
        """
        importance, since = item.get("importance"), item.get("rehearsed", item.get("year"))
        if self.decay_rate is None or not isinstance(importance, int | float):
            return None
        if not isinstance(since, int):
            return None
        return float(importance) * self.decay_rate ** (self.year - since)

    def store(self, name: str) -> list[dict[str, Any]]:
        """The items of store ``name`` (one of :data:`MEMORY_STORES`)."""
        if name not in MEMORY_STORES:
            msg = f"store must be one of {MEMORY_STORES}, got {name!r}"
            raise ValueError(msg)
        return getattr(self, name)

    def ids(self, name: str) -> list[str]:
        """The item ids of store ``name``, in store order."""
        return [item["id"] for item in self.store(name)]

    def counts(self) -> dict[str, int]:
        """Number of items in each store."""
        return {name: len(self.store(name)) for name in MEMORY_STORES}


def _item(record: dict[str, Any]) -> dict[str, Any]:
    """An item dict as the rebuilt memory keeps it (without the routing ``destination``)."""
    item = {key: record.get(key) for key in _ITEM_FIELDS}
    item["tags"] = list(record.get("tags") or [])
    item["pinned"] = bool(record.get("pinned", False))
    if "evidence" in record:
        item["evidence"] = list(record["evidence"])
    return item


class _Replayer:
    """The four stores of one household as ordered ``id -> item`` maps.

    Attributes:
        agent_id: The household replayed.
        stores: Store name to ``{id: item}`` in the order items entered.
        items: Every item ever written, by id.
        last_year: Year of the household's last line applied (``None``: none yet).
        last_end: Year of the household's last year-end line (``None``: none yet).
        ends_through: Last year with any household's year-end line (``None``: none yet).
        run_id: The ``run_id`` of its first line.
    """

    def __init__(self, agent_id: str) -> None:
        self.agent_id = agent_id
        self.stores: dict[str, dict[str, dict[str, Any]]] = {s: {} for s in MEMORY_STORES}
        self.items: dict[str, dict[str, Any]] = {}
        self.last_year: int | None = None
        self.last_end: int | None = None
        self.ends_through: int | None = None
        self.run_id: str | None = None

    def run(self, updates: _Cursor, ends: _Cursor, year: int) -> None:
        """Apply both streams up to the end of ``year``, a year's writes before its year end."""
        while True:
            heads = [y for y in (updates.head_year, ends.head_year) if y is not None]
            if not heads or min(heads) > year:
                return
            current = min(heads)
            self._apply(updates, current, self.update)
            if ends.head_year == current:
                self.ends_through = current
            if self._apply(ends, current, self.consolidate):
                self.last_end = current

    def _apply(
        self, cursor: _Cursor, year: int, action: Callable[[dict[str, Any], str], None]
    ) -> bool:
        """Apply the household's records of ``year``; return whether it had any."""
        applied = False
        for line, record in cursor.take_year(year):
            if record.get("agent_id") != self.agent_id:
                continue
            applied = True
            self.last_year = year
            self.run_id = self.run_id or record.get("run_id")
            where = f"{cursor.path}: line {line}"
            try:
                action(record, where)
            except (AttributeError, KeyError, TypeError, ValueError) as err:
                # Say what is wrong with the line, not only where applying it broke.
                problem = line_problem(record, cursor.stream)
                if problem is None:
                    msg = f"{where}: missing or malformed field {err}"
                else:
                    msg = f"{where} is malformed: {problem}"
                raise AuditReadError(msg) from None
        return applied

    def _add(self, store: str, item: dict[str, Any]) -> None:
        self.items[item["id"]] = item
        self.stores[store][item["id"]] = item

    def _evict(self, entries: list[dict[str, Any]], where: str, year: int | None = None) -> None:
        for entry in entries:
            item_id, source, target = entry["id"], entry["from"], entry["to"]
            item = self.stores[source].pop(item_id, None)
            if item is None:
                known = "does not hold it" if item_id in self.items else "was never written"
                msg = f"{where}: evicts {item_id!r} from {source}, which {known}"
                raise AuditReadError(msg)
            if target is not None:
                self.stores[target][item_id] = item
            if year is not None and (source, target) == ("archive", "episodic"):
                # A promotion at a year end restarts the item's decay from that year (tiered
                # retention's rehearsal), kept if it goes straight back to the archive.
                item["rehearsed"] = max(year, item.get("rehearsed", item["year"]))

    def update(self, record: dict[str, Any], where: str) -> None:
        written = record["memory_item"]
        self._add(written["destination"], _item(written))
        self._evict(record["evicted"], where)

    def consolidate(self, record: dict[str, Any], where: str) -> None:
        block = record["consolidation"]
        for item_id in block["transferred_items"]:
            item = self.stores["working"].get(item_id) or self.items.get(item_id)
            if item is None:
                msg = f"{where}: transfers {item_id!r}, which was never written"
                raise AuditReadError(msg)
            self.stores["episodic"][item_id] = item
        # Reflections go in before the evictions: a reflection written this year may already be
        # superseded (evicted from semantic memory) by a later one of the same pass.
        for reflection in block["reflections"]:
            self._add("semantic", _item(reflection))
        self._evict(block["evicted"], where, record["year"])


class StoreCounts:
    """Every household's stores replayed as sets of ids, to check the counts the lines give.

    ``floodsim audit summarize`` feeds it each household's lines a year at a time: the year's
    ``memory_updates``, then its traces, then its ``consolidation`` lines, then
    :meth:`end_year`. A trace's ``working_count`` and ``episodic_count`` are the sizes of the
    stores right after the household's decision was written to memory; a consolidation line's
    ``working_after`` and ``episodic_after`` those after the year-end pass; at level ``full``
    a trace's ``working_items`` and ``episodic_items`` are the items the stores hold then. A
    line that says otherwise, or moves an item its store does not hold, is a problem; a
    household whose replay broke, or one with a line that is not what the writer makes (the
    schema check names it), is not checked further, so one damaged line is reported once.

    Only the ids are kept (about 10 per household at the default capacities), not the items.

    Attributes:
        problems: The first problems found, each ``<where>: <what>``.
        mismatches: How many there were.
        traces: Traces whose counts were checked.
        year_ends: Consolidation lines whose counts were checked.
    """

    def __init__(self, max_problems: int = 3) -> None:
        self._stores: dict[str, tuple[set[str], ...]] = {}
        self._decided: dict[str, tuple[int, int]] = {}  # this year's decision id -> sizes
        self._lost: set[str] = set()
        self._max_problems = max_problems
        self.problems: list[str] = []
        self.mismatches = 0
        self.traces = 0
        self.year_ends = 0

    def _of(self, agent: str) -> tuple[set[str], ...]:
        stores = self._stores.get(agent)
        if stores is None:
            stores = self._stores[agent] = tuple(set() for _ in MEMORY_STORES)
        return stores

    def _wrong(self, agent: str, problem: str) -> None:
        self.mismatches += 1
        if len(self.problems) < self._max_problems:
            self.problems.append(problem)
        self._lost.add(agent)

    def _agrees(
        self, agent: str, where: str, said: tuple[int, int], held: tuple[int, int], when: str
    ) -> bool:
        """Whether the working and episodic sizes a line gives (``said``) are the replayed ones.

        ``when``: the moment the line's sizes are taken, ``"its decision"`` or ``"the year end"``.
        """
        for store, told, size in zip(("working", "episodic"), said, held, strict=True):
            if told != size:
                problem = f"{agent}'s {store} memory holds {size} items after {when}"
                self._wrong(agent, f"{where}: {problem}, the line says {told}")
                return False
        return True

    def _same_items(self, agent: str, where: str, memory: dict[str, Any]) -> None:
        """At level ``full``: the items a trace lists are those its stores hold.

        The decision is a household's last memory write of its year, so the stores as replayed
        through the year's writes are those the trace saw.
        """
        stores = self._of(agent)
        for store, held in (("working", stores[0]), ("episodic", stores[1])):
            listed = {item["id"] for item in memory[f"{store}_items"]}
            if listed != held:
                odd = min(listed ^ held)
                how = "lists" if odd in listed else "leaves out"
                problem = f"{agent}'s {store}_items {how} {odd!r}, which its {store} memory "
                problem += "does not hold" if odd in listed else "holds"
                self._wrong(agent, f"{where}: {problem}")
                return

    def _moved(self, agent: str, entries: list[dict[str, Any]], where: str) -> bool:
        """Apply evictions and moves; ``False`` when one names an item its store lacks."""
        stores = self._of(agent)
        for entry in entries:
            item_id, source, target = entry["id"], entry["from"], entry["to"]
            held = stores[_STORE_INDEX[source]]
            if item_id not in held:
                self._wrong(agent, f"{where}: evicts {item_id!r} from {source}, which lacks it")
                return False
            held.remove(item_id)
            if target is not None:
                stores[_STORE_INDEX[target]].add(item_id)
        return True

    def _followed(self, agent: str, intact: bool) -> bool:
        """Whether ``agent``'s stores are still replayed, after a line that may change them.

        A line the schema check refused leaves the household's stores unknown from then on.
        """
        if not intact:
            self._lost.add(agent)
        return agent not in self._lost

    def update(self, record: dict[str, Any], where: str, intact: bool) -> None:
        """Take one ``memory_updates`` line (``intact``: it passed the schema check)."""
        agent = record["agent_id"]
        if not self._followed(agent, intact):
            return
        written = record["memory_item"]
        stores = self._of(agent)
        stores[_STORE_INDEX[written["destination"]]].add(written["id"])
        if self._moved(agent, record["evicted"], where) and record["update_type"] == "decision":
            self._decided[written["id"]] = (len(stores[0]), len(stores[1]))

    def trace(self, record: dict[str, Any], where: str, intact: bool) -> None:
        """Take one trace of the year whose updates were taken last."""
        agent, memory = record["agent_id"], record.get("memory")
        update = record.get("memory_update")
        if not intact or agent in self._lost or memory is None or update is None:
            return
        sizes = self._decided.get(update["id"])
        if sizes is None:  # a decision never written: the memory ids check names it
            return
        self.traces += 1
        said = (memory["working_count"], memory["episodic_count"])
        if self._agrees(agent, where, said, sizes, "its decision") and "working_items" in memory:
            self._same_items(agent, where, memory)

    def consolidate(self, record: dict[str, Any], where: str, intact: bool) -> None:
        """Take one ``consolidation`` line of the year whose traces were taken last."""
        agent = record["agent_id"]
        if not self._followed(agent, intact):
            return
        block = record["consolidation"]
        working, episodic, semantic = self._of(agent)[:3]
        for item_id in block["transferred_items"]:
            if item_id not in working:
                self._wrong(agent, f"{where}: transfers {item_id!r}, which working memory lacks")
                return
            episodic.add(item_id)
        for reflection in block["reflections"]:
            semantic.add(reflection["id"])
        if not self._moved(agent, block["evicted"], where):
            return
        self.year_ends += 1
        said = (block["working_after"], block["episodic_after"])
        self._agrees(agent, where, said, (len(working), len(episodic)), "the year end")

    def end_year(self) -> None:
        """Forget the year's decisions: the next year's traces name the next year's."""
        self._decided.clear()


_STORE_INDEX = {name: position for position, name in enumerate(MEMORY_STORES)}


def _year_of(record: dict[str, Any], path: Path, line: int) -> int:
    year = record.get("year")
    if not isinstance(year, int):
        msg = f"{path}: line {line} has no integer 'year'"
        raise AuditReadError(msg)
    return year


class _Cursor:
    """A year-ordered stream with one record of look-ahead, counted on a progress bar.

    The bar (on stderr, when it is a terminal) counts the lines read against the manifest's
    count: replaying a late year of a large run reads most of both streams.
    """

    def __init__(
        self,
        stream: str,
        path: Path | None,
        report: ReadReport,
        *,
        total: int | None = None,
        whole: bool = False,
        progress: bool | None = None,
    ) -> None:
        self.stream = stream
        self.path = path
        self._counted = None
        if path is None:
            self._lines: Iterator[tuple[int, dict[str, Any]]] = iter(())
        else:
            # A complete run's stream read to an end short of its manifest's count was cut
            # after the run wrote it: refused there, rather than replayed as a memory that
            # stopped changing where the file stops (and its cut last line warned of as an
            # interrupted run's).
            self._counted = lines_counted(
                iter_file(path, report=report, listed=total if whole else None),
                total=total,
                desc=f"replaying {path.name}",
                progress=progress,
            )
            self._lines = iter(self._counted)
        self.head: tuple[int, dict[str, Any]] | None = None
        self.head_year: int | None = None
        self.max_year = -1
        self._advance()

    def _advance(self) -> None:
        self.head = next(self._lines, None)
        if self.head is None:
            self.head_year = None
            return
        line, record = self.head
        year = _year_of(record, self.path, line)  # type: ignore[arg-type]
        if year < self.max_year:
            msg = (
                f"{self.path}: line {line} is year {year} after year {self.max_year} (out of order)"
            )
            raise AuditReadError(msg)
        self.max_year = year
        self.head_year = year

    def take_year(self, year: int) -> Iterator[tuple[int, dict[str, Any]]]:
        """Records of ``year`` (the head must not be earlier)."""
        while self.head is not None and self.head_year == year:
            yield self.head
            self._advance()

    def drain(self) -> Iterator[tuple[int, dict[str, Any]]]:
        while self.head is not None:
            yield self.head
            self._advance()

    def close(self) -> None:
        """Take the progress bar off the screen."""
        if self._counted is not None:
            self._counted.close()


def _check_level(run_dir: Path) -> tuple[dict[str, Any] | None, Path]:
    """The manifest (if any) and the memory_updates file; raise if replay is impossible."""
    try:
        manifest: dict[str, Any] | None = read_manifest(run_dir)
    except AuditReadError:
        if (run_dir / "manifest.json").exists():
            raise  # written whole, so damaged since: what it says of the run is unknown
        manifest = None  # an interrupted run has streams but no manifest: replay what is there
    audit = (manifest or {}).get("audit")
    level = audit.get("level") if isinstance(audit, dict) else None
    if level is not None and level not in _REPLAY_LEVELS:
        msg = (
            f"{run_dir}: audit level {level!r} does not log memory writes; rebuilding a memory "
            "needs level 'standard' or 'full'"
        )
        raise AuditReadError(msg)
    updates = stream_path(run_dir, "memory_updates")
    if updates is None and manifest is None:
        msg = f"{run_dir}: not a run directory (no manifest.json and no audit streams)"
        raise AuditReadError(msg)
    if updates is None:
        msg = (
            f"{run_dir}: no memory_updates.jsonl (or .jsonl.gz); rebuilding a memory needs a run "
            "with audit level 'standard' or 'full'"
        )
        raise AuditReadError(msg)
    return manifest, updates


def _moved_away(replay: _Replayer, manifest: dict[str, Any] | None, year: int) -> int | None:
    """The year the household moved away, if it did before ``year``, else None.

    An audited household has a year-end line every year it is still there, so its last one is
    the year it left when the run went on after it: other households' year ends say so, or,
    when it was the last audited household still there, how far the manifest says the run got.
    """
    last = replay.last_end
    if last is None or last >= year:
        return None
    if replay.ends_through is not None and replay.ends_through > last:
        return last
    manifest = manifest or {}
    reached = manifest.get("year_reached")
    if manifest.get("status") == "complete":
        reached = (manifest.get("counts") or {}).get("years")
    return last if isinstance(reached, int) and reached > last else None


def rebuild_memory(
    run_dir: StrPath, agent_id: str, year: int, *, progress: bool | None = None
) -> RebuiltMemory:
    """Rebuild ``agent_id``'s memory at the end of ``year`` from the run's audit streams.

    Streams ``memory_updates`` and ``consolidation`` once, in step, and stops reading after
    ``year``. Year 0 is the pre-seeded memory before the first year. A household that relocated
    keeps the memory it had when it left. The items carry their contents and rehearsal year,
    not their access counts or last access (``docs/audit_streams.md`` derives those).

    Args:
        run_dir: The run directory.
        agent_id: The household, e.g. ``"H00007"``.
        year: The year at whose end to take the memory (0 to the run's last year).
        progress: Count the lines read on progress bars on stderr (``None``: when stderr is a
            terminal). A late year of a large run reads most of both streams (5.4 s for year 30
            of 10,000 households at ``standard``).

    Returns:
        The rebuilt memory.

    Raises:
        AuditReadError: If the run's audit level does not log memory writes (``minimal``,
            ``off``), ``memory_updates`` is missing, ``year`` is outside the run, ``agent_id``
            never appears (unknown or not in the audited sample), or the streams are inconsistent
            (an eviction of an item never written, lines out of year order, a corrupt line).
    """
    folder = Path(run_dir)
    if error := not_a_folder_error(folder):
        raise AuditReadError(error)
    manifest, updates_path = _check_level(folder)
    agent_id = str(agent_id)
    years = ((manifest or {}).get("counts") or {}).get("years")
    asked = as_integer(year)  # a year read off a pandas table is a numpy integer
    if asked is None:  # 2.0 or True: not "outside the run", which would send one looking there
        msg = f"{folder}: year must be an integer, got {type(year).__name__} {year!r}"
        raise AuditReadError(msg)
    if asked < 0 or (isinstance(years, int) and asked > years):
        span = f"0 to {years}" if isinstance(years, int) else "0 or more"
        msg = f"{folder}: year must be {span}, got {year!r}"
        raise AuditReadError(msg)
    year = asked
    consolidation_path = stream_path(folder, "consolidation")
    if consolidation_path is None and (manifest or {}).get("audit") is not None:
        msg = f"{folder}: no consolidation.jsonl (or .jsonl.gz) to replay year ends from"
        raise AuditReadError(msg)

    reports = {"memory_updates": ReadReport(), "consolidation": ReadReport()}
    updates, ends = (
        _Cursor(
            name,
            path,
            reports[name],
            total=listed_lines(manifest, name),
            whole=(manifest or {}).get("status") == "complete",
            progress=progress,
        )
        for name, path in (("memory_updates", updates_path), ("consolidation", consolidation_path))
    )
    replay = _Replayer(agent_id)
    try:
        replay.run(updates, ends, year)
        # Only when the household has no line up to the year: does it appear later on?
        later = replay.last_year is None and any(
            record.get("agent_id") == agent_id
            for cursor in (updates, ends)
            for _, record in cursor.drain()
        )
    finally:
        updates.close()
        ends.close()

    if replay.last_year is None:
        if not later:
            hint = sample_hint(folder, manifest)
            msg = f"{folder}: household {agent_id!r} does not appear in {updates_path.name}{hint}"
            raise AuditReadError(msg)
    elif _unfinished(manifest) and isinstance(manifest.get("year_reached"), int):
        # A run stopped during a year may have left part of it in the streams: only the years
        # the manifest records as written out are whole.
        reached = manifest["year_reached"]
        if year > reached:
            msg = (
                f"{folder}: the run is {manifest['status']} and its audit streams are whole up "
                f"to year {reached}, got year {year}"
            )
            raise AuditReadError(msg)
    elif years is None or (manifest or {}).get("status") != "complete":
        # Without a manifest, or before the run completed (it failed, or is running or was
        # killed), the streams alone say how far it got.
        reached = max(updates.max_year, ends.max_year)
        if year > reached and updates.head is None and ends.head is None:
            status = (manifest or {}).get("status")
            why = f" (the run is {status})" if isinstance(status, str) else ""
            msg = f"{folder}: the audit streams end at year {reached}{why}, got year {year}"
            raise AuditReadError(msg)

    return RebuiltMemory(
        run_dir=folder,
        run_id=(manifest or {}).get("run_id") or replay.run_id,
        agent_id=agent_id,
        year=year,
        working=list(replay.stores["working"].values()),
        episodic=list(replay.stores["episodic"].values()),
        semantic=list(replay.stores["semantic"].values()),
        archive=list(replay.stores["archive"].values()),
        last_year=replay.last_year,
        moved_away=_moved_away(replay, manifest, year),
        reports=reports,
        decay_rate=_decay_rate(folder),
    )


def _decay_rate(folder: Path) -> float | None:
    """The run's ``memory.decay_rate``, from its ``config.resolved.yaml`` (``None``: unknown)."""
    try:
        config = yaml.safe_load((folder / "config.resolved.yaml").read_text(encoding="utf-8"))
    except (OSError, UnicodeDecodeError, yaml.YAMLError):
        return None
    memory = config.get("memory") if isinstance(config, dict) else None
    rate = memory.get("decay_rate") if isinstance(memory, dict) else None
    return float(rate) if isinstance(rate, int | float) and not isinstance(rate, bool) else None


def _unfinished(manifest: dict[str, Any] | None) -> bool:
    """Whether ``manifest`` is a run's that has not completed (running, failed or killed)."""
    status = (manifest or {}).get("status")
    return isinstance(status, str) and status != "complete"


def _format_item(item: dict[str, Any], rebuilt: RebuiltMemory) -> str:
    importance = item.get("importance")
    weight = f"{importance:.2f}" if isinstance(importance, int | float) else "?"
    decayed = rebuilt.decayed(item)
    now = "" if decayed is None else f"  now {decayed:.2f}"
    rehearsed = f" (rehearsed {item['rehearsed']})" if "rehearsed" in item else ""
    pin = "  (pinned)" if item.get("pinned") else ""
    return (
        f"  [{item['id']}] year {item.get('year')}{rehearsed}  importance {weight}{now}  "
        f"{item.get('content')}{pin}"
    )


def format_memory(rebuilt: RebuiltMemory) -> str:
    """A printable view: a header, then one section per store and one line per item.

    Working and episodic memory are always shown; semantic and archive only when non-empty
    (``floodsim audit memory`` prints this). Items read
    ``  [id] year Y  importance 0.90  now 0.77  content``: ``now`` is the importance decayed to
    the end of the year shown (:meth:`RebuiltMemory.decayed`), left out when the run's decay rate
    is unknown; a ``tiered`` promotion adds ``(rehearsed R)`` after the year.
    """
    run = f" of run {rebuilt.run_id}" if rebuilt.run_id else ""
    lines = [f"Memory of household {rebuilt.agent_id} at the end of year {rebuilt.year}{run}"]
    if rebuilt.moved_away is not None:
        lines.append(f"(moved away in year {rebuilt.moved_away}: unchanged since)")
    elif rebuilt.last_year is not None and rebuilt.last_year < rebuilt.year:
        lines.append(f"(unchanged since year {rebuilt.last_year})")
    for name in MEMORY_STORES:
        items = rebuilt.store(name)
        if not items and name in ("semantic", "archive"):
            continue
        lines.append("")
        lines.append(f"{name.capitalize()} memory ({len(items)})")
        lines.extend(_format_item(item, rebuilt) for item in items)
    return "\n".join(lines)
