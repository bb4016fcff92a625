"""Tests for simulation.audit.replay and the ``floodsim audit`` commands.

Hand-written streams pin down the replay semantics (FIFO eviction, copy on consolidation,
episodic-to-archive moves, promotions, reflections); integration tests rebuild every household
of real runs and compare with the model's memory.
"""

from __future__ import annotations

import argparse
import copy
import gzip
import re
import shutil
import warnings
from importlib import resources
from pathlib import Path
from typing import TYPE_CHECKING, Any

import numpy as np
import orjson
import pytest
from hypothesis import HealthCheck, event, given, settings
from hypothesis import strategies as st

from simulation.audit.commands import register, summarize_experiment, summarize_run
from simulation.audit.readers import AuditReadError, TruncatedLineWarning, iter_file
from simulation.audit.replay import (
    MEMORY_STORES,
    RebuiltMemory,
    format_memory,
    rebuild_memory,
)
from simulation.memory import RETENTION_POLICIES

if TYPE_CHECKING:
    from collections.abc import Callable

    from simulation.memory import CognitiveMemory

DEFAULT = Path(__file__).resolve().parents[1] / "configs" / "default.yaml"
RUN_ID = "hand-s7-12345678"
STREAMS_REPLAYED = ("memory_updates", "consolidation")


# --------------------------------------------------------------------------- a tiny history
def _head(year: int, agent: str, run_id: str = RUN_ID) -> dict[str, Any]:
    return {"schema_version": 1, "run_id": run_id, "year": year, "agent_id": agent}


def _item(item_id: str, year: int, importance: float, content: str, **extra: Any) -> dict:
    return {
        "id": item_id,
        "content": content,
        "importance": importance,
        "year": year,
        "tags": [content.split(":", 1)[0].lower()],
        "source": "other",
        **extra,
    }


def _write(
    agent: str,
    year: int,
    seq: int,
    importance: float,
    content: str,
    destination: str,
    evicted: list[tuple[str, str, str | None]] = (),  # type: ignore[assignment]
) -> dict:
    return {
        **_head(year, agent),
        "update_type": "seed" if year == 0 else "other",
        "memory_item": _item(f"{agent}:{seq}", year, importance, content, destination=destination),
        "evicted": [{"id": i, "from": f, "to": t} for i, f, t in evicted],
    }


def _end(
    agent: str,
    year: int,
    after: tuple[int, int],  # working and episodic memory's sizes after the year end
    transferred: list[str] = (),  # type: ignore[assignment]
    evicted: list[tuple[str, str, str | None]] = (),  # type: ignore[assignment]
    promoted: list[str] = (),  # type: ignore[assignment]
    reflections: list[dict] = (),  # type: ignore[assignment]
) -> dict:
    return {
        **_head(year, agent),
        "consolidation": {
            "transferred_count": len(transferred),
            "transferred_items": list(transferred),
            "evicted": [{"id": i, "from": f, "to": t} for i, f, t in evicted],
            "promoted": list(promoted),
            "reflections": list(reflections),
            "working_after": after[0],
            "episodic_after": after[1],
        },
    }


def _trace(year: int, agent: str, retrieved: list[str], skill: str = "do_nothing") -> dict:
    return {
        **_head(year, agent),
        "memory": {
            "retrieved": retrieved,
            "retrieval_scores": [0.5] * len(retrieved),
            "working_count": 1,
            "episodic_count": 1,
        },
        "reasoning": {"constructs": {}},
        "action": {"decision_skill": skill},
        "validation": {"valid": True, "errors": [], "warnings": []},
    }


def _tool(year: int, agent: str, ids: list[str]) -> dict:
    call = {
        "tool_id": "retrieve_memory",
        "parameters": {"top_k": 5, "current_year": year},
        "result": ids,
        "result_count": len(ids),
        "scores": [0.5] * len(ids),
    }
    return {**_head(year, agent), "tool_invocation": call}


REFLECTION = _item("H1:7", 2, 0.8, "Reflection: floods here are frequent", source="reflection")

# Household H1 (working capacity 3), with H2 interleaved as noise:
#   year 0  seed H1:0 -> episodic
#   year 1  H1:1 working 0.3; H1:2 working 0.8; year end copies H1:2 into episodic
#   year 2  H1:3 working (FIFO: evicts H1:1); H1:4 episodic, which demotes H1:0 to archive;
#           year end: reflection H1:7, promotion of H1:0 back to episodic, H1:4 forgotten
#   year 3  H1:5 working (FIFO: evicts H1:2 from working; it stays in episodic)
UPDATES = [
    _write("H1", 0, 0, 0.8, "Seed: the 2011 flood reached my porch", "episodic"),
    _write("H2", 0, 0, 0.9, "Seed: H2's flood", "episodic"),
    _write("H1", 1, 1, 0.3, "Decision: I waited", "working"),
    _write("H2", 1, 1, 0.3, "Decision: H2 waited", "working"),
    _write("H1", 1, 2, 0.8, "Flood: water in my basement", "working"),
    _write("H1", 2, 3, 0.5, "Policy: premiums went up", "working", [("H1:1", "working", None)]),
    _write(
        "H1", 2, 4, 0.9, "Claim: my claim was denied", "episodic", [("H1:0", "episodic", "archive")]
    ),
    _write("H2", 2, 2, 0.4, "Neighbor: two neighbours insured", "working"),
    _write(
        "H1", 3, 5, 0.4, "Neighbor: one neighbour elevated", "working", [("H1:2", "working", None)]
    ),
]
ENDS = [
    _end("H1", 1, (2, 2), transferred=["H1:2"]),
    _end("H2", 1, (1, 1)),
    _end(
        "H1",
        2,
        (2, 2),
        evicted=[("H1:0", "archive", "episodic"), ("H1:4", "episodic", None)],
        promoted=["H1:0"],
        reflections=[REFLECTION],
    ),
    _end("H2", 2, (2, 1)),
    _end("H1", 3, (2, 2)),
    _end("H2", 3, (2, 1)),
]
TRACES = [
    _trace(1, "H1", ["H1:0"]),
    _trace(1, "H2", ["H2:0"]),
    _trace(2, "H1", ["H1:2", "H1:1", "H1:0"]),
    _trace(2, "H2", ["H2:1"], skill="relocate"),  # H2 relocates: no trace in year 3
    _trace(3, "H1", ["H1:7", "H1:3"]),
]
TOOLS = [_tool(t["year"], t["agent_id"], t["memory"]["retrieved"]) for t in TRACES]
H2_AFTER_RELOCATION = [_end("H2", 3, (2, 1))]  # a relocated household has no year-end either


def _encode(records: list[dict]) -> bytes:
    return b"".join(orjson.dumps(r) + b"\n" for r in records)


def _manifest(level: str = "standard", years: int = 3, lines: dict | None = None) -> dict:
    streams = {
        "household_traces": TRACES,
        "memory_updates": UPDATES,
        "consolidation": [e for e in ENDS if e not in H2_AFTER_RELOCATION],
        "tool_invocations": TOOLS,
    }
    return {
        "run_id": RUN_ID,
        "counts": {"households": 2, "years": years},
        "audit": {
            "level": level,
            "gzip": False,
            "sample": 1.0,
            "streams": {
                name: {"file": f"{name}.jsonl", "lines": (lines or {}).get(name, len(recs))}
                for name, recs in streams.items()
            },
        },
    }


def make_run(
    root: Path,
    *,
    gz: bool = False,
    level: str = "standard",
    streams: dict[str, list[dict]] | None = None,
    manifest: dict | None = None,
    tails: dict[str, bytes] | None = None,
) -> Path:
    """Write a run directory holding the hand-made history (or ``streams``)."""
    run = root / RUN_ID
    run.mkdir()
    data = {
        "household_traces": TRACES,
        "memory_updates": UPDATES,
        "consolidation": [e for e in ENDS if e not in H2_AFTER_RELOCATION],
        "tool_invocations": TOOLS,
        **(streams or {}),
    }
    doc = manifest if manifest is not None else _manifest(level)
    if gz:
        for entry in doc["audit"]["streams"].values():
            entry["file"] += ".gz"
        doc["audit"]["gzip"] = True
    (run / "manifest.json").write_bytes(orjson.dumps(doc))
    for name, records in data.items():
        raw = _encode(records) + (tails or {}).get(name, b"")
        if gz:
            (run / f"{name}.jsonl.gz").write_bytes(gzip.compress(raw))
        else:
            (run / f"{name}.jsonl").write_bytes(raw)
    return run


@pytest.fixture(params=[False, True], ids=["plain", "gzip"])
def run_dir(request: pytest.FixtureRequest, tmp_path: Path) -> Path:
    return make_run(tmp_path, gz=request.param)


def _ids(rebuilt: RebuiltMemory) -> dict[str, list[str]]:
    return {name: rebuilt.ids(name) for name in ("working", "episodic", "semantic", "archive")}


# --------------------------------------------------------------------------- replay semantics
@pytest.mark.parametrize(
    ("stream", "records"),
    [
        ("memory_updates", UPDATES),
        ("consolidation", ENDS),
        ("household_traces", TRACES),
        ("tool_invocations", TOOLS),
    ],
)
def test_hand_made_streams_follow_the_schemas(stream: str, records: list[dict]) -> None:
    """The fixtures are only meaningful if they are what a writer may produce."""
    jsonschema = pytest.importorskip("jsonschema")
    schema = orjson.loads(
        resources.files("simulation.audit")
        .joinpath("schemas", f"{stream}.schema.json")
        .read_bytes()
    )
    validator = jsonschema.Draft202012Validator(schema)
    for record in records:
        assert not list(validator.iter_errors(record)), record


def test_year_zero_is_the_seeded_memory(run_dir: Path) -> None:
    rebuilt = rebuild_memory(run_dir, "H1", 0)
    assert _ids(rebuilt) == {"working": [], "episodic": ["H1:0"], "semantic": [], "archive": []}
    assert rebuilt.episodic[0]["content"] == "Seed: the 2011 flood reached my porch"
    assert rebuilt.run_id == RUN_ID


def test_the_replay_counts_the_lines_it_reads_on_bars_only_when_asked_or_in_a_terminal(
    run_dir: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    rebuilt = rebuild_memory(run_dir, "H1", 2, progress=True)
    shown = capsys.readouterr().err
    updates, ends = (next(run_dir.glob(f"{name}.jsonl*")).name for name in STREAMS_REPLAYED)
    assert f"replaying {updates}:   0%|" in shown
    assert f"/{len(UPDATES)} [" in shown  # against the manifest's count
    assert f"replaying {ends}:" in shown
    assert rebuild_memory(run_dir, "H1", 2).ids("working") == rebuilt.ids("working")
    assert capsys.readouterr().err == ""  # pytest's stderr is no terminal


def test_consolidation_copies_working_items_into_episodic(run_dir: Path) -> None:
    rebuilt = rebuild_memory(run_dir, "H1", 1)
    assert rebuilt.ids("working") == ["H1:1", "H1:2"]
    assert rebuilt.ids("episodic") == ["H1:0", "H1:2"]
    # One item in two stores, keeping the data of its write.
    assert rebuilt.working[1] == rebuilt.episodic[1]
    assert rebuilt.episodic[1]["importance"] == 0.8
    assert rebuilt.episodic[1]["year"] == 1
    assert "destination" not in rebuilt.episodic[1]


def test_fifo_eviction_demotion_promotion_and_reflection(run_dir: Path) -> None:
    rebuilt = rebuild_memory(run_dir, "H1", 2)
    assert _ids(rebuilt) == {
        "working": ["H1:2", "H1:3"],  # H1:1 left working memory (FIFO)
        "episodic": ["H1:2", "H1:0"],  # H1:4 forgotten; H1:0 promoted back from the archive
        "semantic": ["H1:7"],
        "archive": [],
    }
    assert rebuilt.semantic[0]["source"] == "reflection"
    assert rebuilt.semantic[0]["content"] == REFLECTION["content"]


def test_demoted_item_sits_in_the_archive_between_write_and_year_end(tmp_path: Path) -> None:
    run = make_run(tmp_path, streams={"consolidation": [e for e in ENDS if e["year"] != 2]})
    rebuilt = rebuild_memory(run, "H1", 2)
    assert rebuilt.ids("archive") == ["H1:0"]
    assert rebuilt.ids("episodic") == ["H1:2", "H1:4"]
    assert rebuilt.archive[0]["importance"] == 0.8


def test_working_eviction_keeps_the_episodic_copy(run_dir: Path) -> None:
    rebuilt = rebuild_memory(run_dir, "H1", 3)
    assert rebuilt.ids("working") == ["H1:3", "H1:5"]
    assert rebuilt.ids("episodic") == ["H1:2", "H1:0"]
    assert rebuilt.ids("semantic") == ["H1:7"]
    assert rebuilt.last_year == 3
    item = rebuilt.working[1]
    assert {"id", "content", "importance", "year", "tags", "source"} <= item.keys()
    assert item["tags"] == ["neighbor"]


def test_other_households_are_filtered_out(run_dir: Path) -> None:
    rebuilt = rebuild_memory(run_dir, "H2", 3)
    assert _ids(rebuilt) == {
        "working": ["H2:1", "H2:2"],
        "episodic": ["H2:0"],
        "semantic": [],
        "archive": [],
    }
    assert rebuilt.last_year == 2  # relocated after year 2: memory frozen since
    assert rebuilt.moved_away == 2  # its last year end, while H1's go on
    assert "(moved away in year 2: unchanged since)" in format_memory(rebuilt).splitlines()
    # At the end of year 2 it had not moved away yet, and H1 never does.
    assert rebuild_memory(run_dir, "H2", 2).moved_away is None
    h1 = rebuild_memory(run_dir, "H1", 3)
    assert h1.moved_away is None
    assert "moved away" not in format_memory(h1)


def test_the_last_audited_household_to_move_away_is_said_to_have_moved(tmp_path: Path) -> None:
    """With only H2 audited no other year ends go on after its last: the manifest says the run
    did (audit.sample: [H2])."""
    manifest = _manifest()
    manifest["status"] = "complete"
    only_h2 = {
        name: [r for r in records if r["agent_id"] == "H2"]
        for name, records in (
            ("household_traces", TRACES),
            ("memory_updates", UPDATES),
            ("consolidation", [e for e in ENDS if e not in H2_AFTER_RELOCATION]),
            ("tool_invocations", TOOLS),
        )
    }
    for name, records in only_h2.items():
        manifest["audit"]["streams"][name]["lines"] = len(records)
    run = make_run(tmp_path, manifest=manifest, streams=only_h2)
    assert rebuild_memory(run, "H2", 3).moved_away == 2
    assert rebuild_memory(run, "H2", 2).moved_away is None
    del manifest["status"]  # a run of unknown progress: nothing says it went on past year 2
    (run / "manifest.json").write_bytes(orjson.dumps(manifest))
    with pytest.raises(AuditReadError, match="the audit streams end at year 2, got year 3"):
        rebuild_memory(run, "H2", 3)


def test_reflection_superseded_in_the_same_pass(tmp_path: Path) -> None:
    first = _item("H1:8", 3, 0.8, "Reflection one", source="reflection")
    second = _item("H1:9", 3, 0.8, "Reflection two", source="reflection")
    ends = [
        *ENDS[:4],
        _end(
            "H1",
            3,
            (2, 2),
            evicted=[("H1:7", "semantic", None), ("H1:8", "semantic", None)],
            reflections=[first, second],
        ),
    ]
    run = make_run(tmp_path, streams={"consolidation": ends})
    assert rebuild_memory(run, "H1", 3).ids("semantic") == ["H1:9"]


def test_replay_stops_reading_after_the_year(tmp_path: Path) -> None:
    """A corrupt line in year 3 does not matter when rebuilding year 1: it is never read."""
    run = make_run(tmp_path)
    data = _encode(UPDATES[:-1]) + b"{not json}\n" + _encode(UPDATES[-1:])
    (run / "memory_updates.jsonl").write_bytes(data)
    assert rebuild_memory(run, "H1", 1).ids("working") == ["H1:1", "H1:2"]
    with pytest.raises(AuditReadError, match=r"memory_updates\.jsonl: line 9"):
        rebuild_memory(run, "H1", 3)


def test_truncated_last_line_is_skipped_and_reported(tmp_path: Path) -> None:
    partial = orjson.dumps(_write("H1", 3, 6, 0.3, "Decision: I waited", "working"))[:50]
    run = make_run(tmp_path, tails={"memory_updates": partial})
    with pytest.warns(TruncatedLineWarning):
        rebuilt = rebuild_memory(run, "H1", 3)
    assert rebuilt.ids("working") == ["H1:3", "H1:5"]
    assert [s.line for s in rebuilt.reports["memory_updates"].skipped] == [10]


@pytest.mark.parametrize("gz", [False, True], ids=["plain", "gzip"])
def test_a_complete_runs_stream_cut_short_is_refused(tmp_path: Path, gz: bool) -> None:
    """The manifest of a finished run lists every stream's lines: a shorter file lost some."""
    manifest = _manifest()
    manifest["status"] = "complete"
    kept = [r for r in UPDATES if r["year"] < 3]
    run = make_run(tmp_path, gz=gz, manifest=manifest, streams={"memory_updates": kept})
    assert rebuild_memory(run, "H1", 1).ids("working") == ["H1:1", "H1:2"]  # before the cut
    expected = len(UPDATES)
    with pytest.raises(AuditReadError, match=rf"after {len(kept)} lines .* with {expected}"):
        rebuild_memory(run, "H1", 3)


def test_a_complete_runs_stream_cut_mid_line_is_refused_without_a_warning_beside(
    tmp_path: Path,
) -> None:
    """The cut last line was warned of as an interrupted run's, then the run called complete."""
    manifest = _manifest()
    manifest["status"] = "complete"
    partial = orjson.dumps(UPDATES[-1])[:50]
    run = make_run(
        tmp_path,
        manifest=manifest,
        streams={"memory_updates": UPDATES[:-1]},
        tails={"memory_updates": partial},
    )
    with warnings.catch_warnings():
        warnings.simplefilter("error")
        with pytest.raises(AuditReadError, match=r"ends after \d+ lines but the run completed"):
            rebuild_memory(run, "H1", 3)


# --------------------------------------------------------------------------- replay errors
@pytest.mark.parametrize("level", ["minimal", "off"])
def test_levels_without_memory_streams_are_refused(tmp_path: Path, level: str) -> None:
    run = make_run(tmp_path, level=level)
    with pytest.raises(AuditReadError, match=f"audit level '{level}'.*'standard' or 'full'"):
        rebuild_memory(run, "H1", 1)


def test_summarize_says_an_unaudited_run_has_nothing_to_check(tmp_path: Path) -> None:
    summary = summarize_run(make_run(tmp_path, level="off"))
    assert summary.ok
    text = summary.format()
    assert "audit level off: the run wrote no audit streams" in text
    assert "sample" not in text  # an unaudited run has no sample to report


def test_missing_memory_updates_is_refused(tmp_path: Path) -> None:
    run = make_run(tmp_path)
    (run / "memory_updates.jsonl").unlink()
    with pytest.raises(AuditReadError, match=r"no memory_updates\.jsonl"):
        rebuild_memory(run, "H1", 1)


def test_unknown_household(run_dir: Path) -> None:
    with pytest.raises(AuditReadError, match=rf"{RUN_ID}: household 'H9' does not appear"):
        rebuild_memory(run_dir, "H9", 1)


@pytest.mark.parametrize("finished", [True, False], ids=["complete", "running"])
def test_a_household_outside_the_audited_sample_is_said_to_be(tmp_path: Path, finished) -> None:
    # The manifest records the audit's settings once the run ends; until then the resolved
    # config says which share of the households the streams follow.
    manifest = _manifest()
    manifest["audit"]["sample"] = 0.01
    if not finished:
        del manifest["audit"]
        manifest.update(status="running", year_reached=1)
    run = make_run(tmp_path, manifest=manifest)
    (run / "config.resolved.yaml").write_text("audit: {level: standard, sample: 0.01}\n")
    with pytest.raises(AuditReadError, match=r"'H9' does not appear .*\(audited sample: 0\.01\)"):
        rebuild_memory(run, "H9", 1)


@pytest.mark.parametrize("year", [-1, 4])
def test_year_outside_the_run(run_dir: Path, year: int) -> None:
    with pytest.raises(AuditReadError, match=f"year must be 0 to 3, got {year}"):
        rebuild_memory(run_dir, "H1", year)


def test_a_year_read_off_a_table_is_a_year(run_dir: Path) -> None:
    """Years from pandas are numpy integers; a boolean is not a year."""
    assert rebuild_memory(run_dir, "H1", np.int64(2)) == rebuild_memory(run_dir, "H1", 2)
    for not_a_year in (True, 2.0):
        with pytest.raises(AuditReadError, match=f"year must be an integer, got .* {not_a_year}$"):
            rebuild_memory(run_dir, "H1", not_a_year)


def test_missing_run_dir(tmp_path: Path) -> None:
    with pytest.raises(AuditReadError, match="not a run directory"):
        rebuild_memory(tmp_path / "nope", "H1", 1)


def test_eviction_of_an_unknown_item_is_an_error(tmp_path: Path) -> None:
    bad = _write("H1", 1, 9, 0.3, "Decision: x", "working", [("H1:42", "working", None)])
    run = make_run(tmp_path, streams={"memory_updates": [*UPDATES[:2], bad]})
    with pytest.raises(
        AuditReadError, match="line 3: evicts 'H1:42' from working, which was never"
    ):
        rebuild_memory(run, "H1", 1)


@pytest.mark.parametrize(
    ("ends", "problem"),
    [
        # Each was "missing or malformed field 'int' object is not subscriptable" or the like,
        # or (a string for a mapping) an AttributeError.
        ([1], "consolidation.reflections[0] must be object (got 1)"),
        (["H1:7"], "consolidation.reflections[0] must be object (got 'H1:7')"),
        (3, "consolidation.reflections must be array (got 3)"),
    ],
)
def test_a_line_that_breaks_the_replay_is_named_with_what_is_wrong(
    tmp_path: Path, ends: object, problem: str
) -> None:
    damaged = {**ENDS[2], "consolidation": {**ENDS[2]["consolidation"], "reflections": ends}}
    run = make_run(tmp_path, streams={"consolidation": [*ENDS[:2], damaged, *ENDS[3:]]})
    with pytest.raises(AuditReadError) as caught:
        rebuild_memory(run, "H1", 2)
    assert str(caught.value) == f"{run / 'consolidation.jsonl'}: line 3 is malformed: {problem}"


def test_lines_out_of_year_order_are_an_error(tmp_path: Path) -> None:
    run = make_run(tmp_path, streams={"memory_updates": [*UPDATES, UPDATES[2]]})
    with pytest.raises(AuditReadError, match="line 10 is year 1 after year 3"):
        rebuild_memory(run, "H1", 3)


# --------------------------------------------------------------------------- formatting
def test_format_memory(run_dir: Path) -> None:
    text = format_memory(rebuild_memory(run_dir, "H1", 2))
    lines = text.splitlines()
    assert lines[0] == f"Memory of household H1 at the end of year 2 of run {RUN_ID}"
    assert "Working memory (2)" in lines
    assert "Episodic memory (2)" in lines
    assert "Semantic memory (1)" in lines
    assert "Archive memory (0)" not in text  # empty long-term stores beyond episodic are omitted
    assert "  [H1:3] year 2  importance 0.50  Policy: premiums went up" in lines
    assert "  [H1:7] year 2  importance 0.80  Reflection: floods here are frequent" in lines
    working = lines.index("Working memory (2)")
    assert lines[working + 1].startswith("  [H1:2] year 1  importance 0.80")


def test_format_memory_of_an_empty_year_zero(run_dir: Path) -> None:
    text = format_memory(rebuild_memory(run_dir, "H1", 0))
    assert "Working memory (0)" in text
    assert "Episodic memory (1)" in text
    assert "Semantic" not in text


# --------------------------------------------------------------------------- commands
def _run_cli(argv: list[str]) -> int:
    parser = argparse.ArgumentParser(prog="floodsim")
    register(parser.add_subparsers(dest="command", required=True))
    args = parser.parse_args(argv)
    return args.func(args)


def test_audit_memory_command_prints_the_items(
    run_dir: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    assert _run_cli(["audit", "memory", str(run_dir), "--agent", "H1", "--year", "3"]) == 0
    out = capsys.readouterr().out
    assert "Memory of household H1 at the end of year 3" in out
    assert "  [H1:5] year 3  importance 0.40  Neighbor: one neighbour elevated" in out
    assert "  [H1:2] year 1  importance 0.80  Flood: water in my basement" in out
    assert "[H1:1]" not in out
    assert "[H2:" not in out


@pytest.mark.parametrize(
    ("argv", "message"),
    [
        (["--agent", "H9", "--year", "1"], "household 'H9' does not appear"),
        (["--agent", "H1", "--year", "99"], "year must be 0 to 3"),
    ],
)
def test_audit_memory_command_bad_input(run_dir: Path, argv: list[str], message: str) -> None:
    with pytest.raises(AuditReadError, match=message):
        _run_cli(["audit", "memory", str(run_dir), *argv])


def test_audit_memory_through_floodsim_main(
    run_dir: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    """Once the main CLI registers the commands: exit 0, and exit 2 with one error line."""
    from simulation import cli

    commands = next(
        a for a in cli.build_parser()._actions if isinstance(a, argparse._SubParsersAction)
    )
    if "audit" not in commands.choices:
        pytest.skip("simulation.cli does not register the audit commands yet")
    assert cli.main(["audit", "memory", str(run_dir), "--agent", "H1", "--year", "1"]) == 0
    assert "[H1:2]" in capsys.readouterr().out
    assert cli.main(["audit", "memory", str(run_dir), "--agent", "H9", "--year", "1"]) == 2
    err = capsys.readouterr().err.strip().splitlines()
    assert len(err) == 1
    assert err[0].startswith("floodsim: error: ")
    assert "H9" in err[0]


def _check_lines(out: str) -> dict[str, str]:
    checks = {}
    for line in out.splitlines():
        parts = line.split(maxsplit=1)
        if parts and parts[0] in ("ok", "FAIL"):
            name = parts[1].split(":", 1)[0]
            checks[name] = parts[0]
    return checks


def test_summarize_passes_on_a_consistent_run(
    run_dir: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    assert _run_cli(["audit", "summarize", str(run_dir)]) == 0
    out = capsys.readouterr().out
    assert _check_lines(out) == {
        "files": "ok",
        "schema": "ok",
        "line counts": "ok",
        "run_id": "ok",
        "household-years": "ok",
        "memory ids": "ok",
        "memory replay": "ok",
    }
    rows = {line.split()[0]: line.split()[1:] for line in out.splitlines() if line}
    assert rows["memory_updates"][:3] == ["9", "0-3", "2"]
    assert rows["household_traces"][:3] == ["5", "1-3", "2"]


def _fails(run: Path, capsys: pytest.CaptureFixture[str]) -> dict[str, str]:
    assert _run_cli(["audit", "summarize", str(run)]) == 1
    out = capsys.readouterr().out
    return {k: v for k, v in _check_lines(out).items() if v == "FAIL"} | {"_out": out}


def test_summarize_detects_a_duplicated_household_year(
    tmp_path: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    traces = [*TRACES, _trace(3, "H1", [])]
    manifest = _manifest(lines={"household_traces": len(traces)})
    run = make_run(tmp_path, streams={"household_traces": traces}, manifest=manifest)
    failed = _fails(run, capsys)
    assert "household-years" in failed
    assert "H1 year 3 appears 2 times" in failed["_out"]
    assert "line counts" not in failed


def test_summarize_detects_a_gap_and_a_stop_without_relocation(
    tmp_path: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    traces = [t for t in TRACES if (t["year"], t["agent_id"]) != (2, "H1")]
    traces[2] = _trace(2, "H2", ["H2:1"])  # H2 no longer relocates, yet stops after year 2
    manifest = _manifest(lines={"household_traces": len(traces)})
    run = make_run(tmp_path, streams={"household_traces": traces}, manifest=manifest)
    failed = _fails(run, capsys)
    assert "H1 has no line for year 2" in failed["_out"]
    assert "H2 stops at year 2 without relocating" in failed["_out"]


@pytest.mark.parametrize(
    ("stream", "record", "missing"),
    [
        ("household_traces", _trace(3, "H2", ["H2:77"]), "H2:77"),
        ("tool_invocations", _tool(3, "H1", ["H1:66"]), "H1:66"),
        ("consolidation", _end("H1", 4, (2, 3), transferred=["H1:55"]), "H1:55"),
    ],
)
def test_summarize_detects_a_missing_id(
    tmp_path: Path, capsys: pytest.CaptureFixture[str], stream: str, record: dict, missing: str
) -> None:
    base = {"household_traces": TRACES, "tool_invocations": TOOLS, "consolidation": ENDS[:-1]}
    records = [*base[stream], record]
    manifest = _manifest(lines={stream: len(records)})
    run = make_run(tmp_path, streams={stream: records}, manifest=manifest)
    failed = _fails(run, capsys)
    assert "memory ids" in failed
    assert f"'{missing}'" in failed["_out"]


def test_summarize_detects_a_run_id_mismatch(
    tmp_path: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    updates = [*UPDATES[:-1], {**UPDATES[-1], "run_id": "other-run"}]
    run = make_run(tmp_path, streams={"memory_updates": updates})
    failed = _fails(run, capsys)
    assert set(failed) == {"run_id", "_out"}
    assert "memory_updates.jsonl:9 has 'other-run'" in failed["_out"]


def test_summarize_names_a_corrupt_line_once_without_follow_on_failures(
    tmp_path: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    run = make_run(tmp_path)
    path = run / "consolidation.jsonl"
    lines = path.read_bytes().splitlines(keepends=True)
    lines[1] = b"this is not json\n"
    path.write_bytes(b"".join(lines))
    failed = _fails(run, capsys)
    # Only the files check fails; the others would count the lines never read as missing.
    assert set(failed) == {"files", "_out"}
    out = failed["_out"]
    assert "consolidation.jsonl: line 2" in out
    assert "manifest says" not in out
    assert "not compared: consolidation.jsonl (not read to the end)" in out
    assert out.count("not checked: consolidation.jsonl could not be read to the end") == 3


def test_summarize_names_a_line_whose_nested_field_is_not_a_mapping(
    tmp_path: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    """A trace whose 'memory' is a list ended summarize with an AttributeError."""
    traces = [TRACES[0], {**TRACES[1], "memory": ["H1:1"]}, *TRACES[2:]]
    run = make_run(tmp_path, streams={"household_traces": traces})
    failed = _fails(run, capsys)
    assert set(failed) == {"files", "_out"}
    assert (
        "household_traces.jsonl: line 2 is malformed: memory is not an object (got ['H1:1'])"
        in failed["_out"]
    )


def test_summarize_names_a_line_whose_deeper_field_is_not_a_mapping(
    tmp_path: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    """Inside the top-level fields, which the readers do not check, the schema check names it.

    The line is read on: the other checks count it, and its household's years stay whole.
    """
    ends = [{**ENDS[0], "consolidation": {**ENDS[0]["consolidation"], "reflections": [1]}}]
    run = make_run(tmp_path, streams={"consolidation": [*ends, *ENDS[1:]]})
    failed = _fails(run, capsys)
    assert "files" not in failed
    assert "schema" in failed
    assert (
        "schema: 1 line(s) break their stream's JSON Schema or disagree with themselves: "
        "consolidation.jsonl:1: consolidation.reflections[0] must be object (got 1)"
    ) in failed["_out"]
    assert "H1: consolidation years differ" not in failed["_out"]


def test_summarize_detects_line_counts_and_truncation(
    tmp_path: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    manifest = _manifest(lines={"tool_invocations": 7})
    run = make_run(tmp_path, manifest=manifest, tails={"consolidation": b'{"schema_version":1,'})
    with warnings.catch_warnings():
        warnings.simplefilter("ignore", TruncatedLineWarning)
        failed = _fails(run, capsys)
    assert {"files", "line counts"} <= failed.keys()
    assert "tool_invocations.jsonl has 5 lines, manifest says 7" in failed["_out"]
    assert "consolidation.jsonl: 1 truncated line skipped" in failed["_out"]


def test_summarize_calls_a_complete_bad_last_line_malformed_not_truncated(
    tmp_path: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    run = make_run(tmp_path, tails={"consolidation": b'{"schema_version":1,\n'})
    with warnings.catch_warnings():
        warnings.simplefilter("error", TruncatedLineWarning)
        failed = _fails(run, capsys)
    line = len([e for e in ENDS if e not in H2_AFTER_RELOCATION]) + 1
    assert set(failed) == {"files", "_out"}  # the lines before it are all there
    assert f"consolidation.jsonl: line {line} is malformed: not a JSON object" in failed["_out"]
    assert "truncated" not in failed["_out"]


def test_summarize_a_minimal_run(tmp_path: Path, capsys: pytest.CaptureFixture[str]) -> None:
    traces = [{k: v for k, v in t.items() if k != "memory"} for t in TRACES]
    manifest = _manifest("minimal")
    manifest["audit"]["streams"] = {"household_traces": {"file": "household_traces.jsonl"}}
    run = make_run(tmp_path, manifest=manifest, streams={"household_traces": traces})
    for name in ("memory_updates", "consolidation", "tool_invocations"):
        (run / f"{name}.jsonl").unlink()
    assert _run_cli(["audit", "summarize", str(run)]) == 0
    out = capsys.readouterr().out
    assert "memory_updates" in out
    assert "(absent)" in out
    assert "  skip  memory ids: not checked: no memory_updates stream" in out
    assert "  ok    memory ids" not in out  # a check not made is not called passed


def test_summarize_a_missing_run_dir(tmp_path: Path) -> None:
    with pytest.raises(AuditReadError, match="not a run directory"):
        summarize_run(tmp_path / "nope")


def test_a_file_given_for_the_run_dir_is_not_called_missing(run_dir: Path) -> None:
    # e.g. the run's manifest.json, tab-completed one step too far
    manifest = run_dir / "manifest.json"
    with pytest.raises(AuditReadError, match=r"not a run directory \(a file, not a folder\)$"):
        summarize_run(manifest)
    with pytest.raises(AuditReadError, match=r"not a run directory \(a file, not a folder\)$"):
        rebuild_memory(manifest, "H00001", 1)


def test_a_folder_that_is_no_run_is_named_so(tmp_path: Path) -> None:
    # e.g. the folder that holds run directories, given instead of one of them
    (tmp_path / "default-s42-1a2b3c4d").mkdir()
    with pytest.raises(AuditReadError, match="not a run directory"):
        summarize_run(tmp_path)
    with pytest.raises(AuditReadError, match="not a run directory"):
        rebuild_memory(tmp_path, "H00001", 1)


# --------------------------------------------------------------------------- real runs
# Each item whole as the model holds it: what it says, where it came from and, for a
# reflection, the memories it rests on (which no other test of the trail reads).
_Whole = tuple[str, float, int, str, str, tuple[str, ...], tuple[str, ...]]


def _snapshot(memory: CognitiveMemory) -> dict[str, Any]:
    def triples(items: Any) -> list[_Whole]:
        return [
            (i.id, i.importance, i.year, i.content, i.source, tuple(i.tags), tuple(i.evidence))
            for i in items
        ]

    return {
        "working": triples(memory.working),
        "episodic": sorted(triples(memory.episodic)),
        "semantic": sorted(triples(memory.semantic)),
        "archive": sorted(triples(memory.archive)),
    }


def _rebuilt_snapshot(rebuilt: RebuiltMemory) -> dict[str, Any]:
    def triples(items: list[dict]) -> list[_Whole]:
        return [
            (
                i["id"],
                i["importance"],
                i["year"],
                i["content"],
                i["source"],
                tuple(i["tags"]),
                tuple(i.get("evidence", ())),
            )
            for i in items
        ]

    return {
        "working": triples(rebuilt.working),
        "episodic": sorted(triples(rebuilt.episodic)),
        "semantic": sorted(triples(rebuilt.semantic)),
        "archive": sorted(triples(rebuilt.archive)),
    }


def _decayed(rebuilt: RebuiltMemory) -> dict[str, float | None]:
    """Each rebuilt item's importance decayed to the rebuilt year (``audit memory``'s ``now``)."""
    return {
        item["id"]: rebuilt.decayed(item) for name in MEMORY_STORES for item in rebuilt.store(name)
    }


def _scores(memory: CognitiveMemory, year: int) -> dict[str, float]:
    """What a spec retrieval in ``year`` scores each of the memory's items, changing nothing."""
    hits = memory.retrieve_scored(10**6, year, strategy="spec", record=False)
    return {hit.item.id: hit.score for hit in hits}


# Small memories, reflection, tiered retention with demotion and promotion, pre-seeded floods:
# every replay path (FIFO, forgetting, archive moves, reflections, year 0) is exercised.
STRESS = [
    "memory.working_capacity=4",
    "memory.episodic_capacity=3",
    "memory.retention.policy=tiered",
    "memory.retention.archive_capacity=3",
    "memory.retention.demote_below=0.6",
    "memory.retention.promote_after=1",
    "memory.retrieval.strategy=weighted",
    "memory.reflection.enabled=true",
    "memory.reflection.threshold=1.0",
    "memory.reflection.semantic_capacity=2",
    "households.prior_flood_share=0.5",
]


@pytest.mark.slow
@pytest.mark.parametrize(
    "overrides",
    [["audit.level=standard"], ["audit.level=full", "audit.gzip=true", *STRESS]],
    ids=["default-memory", "stress-full-gzip"],
)
def test_rebuild_matches_the_model(tmp_path: Path, overrides: list[str]) -> None:
    from simulation.config import load_config
    from simulation.runner import build_model, run_simulation

    years = 8
    config, base = load_config(DEFAULT, ["households.count=40", f"years={years}", *overrides])
    model = build_model(config, base)
    run_dir = run_simulation(config, base, tmp_path, model=model, progress=False).run_dir
    agents = [h.state.agent_id for h in model.households]

    # End of the last year: every household, against the model that wrote the streams.
    for household in model.households:
        rebuilt = rebuild_memory(run_dir, household.state.agent_id, years)
        assert _rebuilt_snapshot(rebuilt) == _snapshot(household.memory), household.state.agent_id
        # Decayed as retrieval scores them, from the derived rehearsal year where tiered set one.
        assert _decayed(rebuilt) == pytest.approx(_scores(household.memory, years))
        shown = format_memory(rebuilt)
        for item in rebuilt.episodic:
            assert f"importance {item['importance']:.2f}  now {rebuilt.decayed(item):.2f}" in shown

    # Intermediate years: a second, identical model stepped by hand (no audit attached).
    twin = build_model(config, base)
    checked = {0, 2, 5}
    for year in range(max(checked) + 1):
        if year:
            twin.step()
        if year in checked:
            for household in twin.households:
                rebuilt = rebuild_memory(run_dir, household.state.agent_id, year)
                assert _rebuilt_snapshot(rebuilt) == _snapshot(household.memory), (
                    household.state.agent_id,
                    year,
                )
    assert [h.state.agent_id for h in twin.households] == agents

    summary = summarize_run(run_dir)
    assert summary.ok, summary.format()
    assert summary.streams["household_traces"].households == len(agents)


@st.composite
def _memory_overrides(draw: st.DrawFn) -> list[str]:
    """``--set`` overrides for a small memory under any retention policy and retrieval."""
    fraction = st.floats(0.05, 0.9).map(lambda x: round(x, 2))
    # Tiered more than half the time: it moves the most between stores for a replay to follow.
    policy = draw(st.just("tiered") | st.sampled_from(RETENTION_POLICIES))
    # Each policy's own keys only: a config refuses another policy's.
    own = {
        "tiered": [
            f"memory.retention.archive_capacity={draw(st.integers(1, 4))}",
            f"memory.retention.demote_below={draw(fraction)}",
            f"memory.retention.promote_after={draw(st.integers(1, 3))}",
        ],
        "importance_weighted": [f"memory.retention.w_importance={draw(fraction)}"],
    }
    return [
        f"memory.working_capacity={draw(st.integers(1, 5))}",
        f"memory.episodic_capacity={draw(st.integers(2, 6))}",
        f"memory.consolidation_threshold={draw(fraction)}",
        f"memory.retention.policy={policy}",
        *own.get(policy, []),
        f"memory.retrieval.strategy={draw(st.sampled_from(['spec', 'weighted']))}",
        f"memory.reflection.enabled={str(draw(st.booleans())).lower()}",
        f"memory.reflection.threshold={draw(st.floats(0.5, 3.0)):.2f}",
        f"memory.reflection.semantic_capacity={draw(st.integers(1, 3))}",
        f"households.prior_flood_share={draw(fraction)}",
        f"seed={draw(st.integers(0, 2**16))}",
    ]


@pytest.mark.slow
@settings(max_examples=40, suppress_health_check=[HealthCheck.too_slow])
@given(overrides=_memory_overrides())
def test_rebuild_matches_the_model_whatever_the_memory_settings(
    tmp_path_factory: pytest.TempPathFactory, overrides: list[str]
) -> None:
    """The audit trail's promise, over the memory settings a user may choose: replaying it
    gives every household's memory exactly, and its promotions are the lasting ones."""
    from simulation.config import load_config
    from simulation.runner import build_model, run_simulation

    years = 6
    config, base = load_config(
        DEFAULT,
        ["households.count=12", f"years={years}", "audit.level=standard", *overrides],
    )
    model = build_model(config, base)
    out = tmp_path_factory.mktemp("run")
    run_dir = run_simulation(config, base, out, model=model, progress=False).run_dir
    for household in model.households:
        rebuilt = rebuild_memory(run_dir, household.state.agent_id, years)
        assert _rebuilt_snapshot(rebuilt) == _snapshot(household.memory), household.state.agent_id
        assert _decayed(rebuilt) == pytest.approx(_scores(household.memory, years))
        rehearsed = {i.id: i.rehearsed for i in household.memory.episodic if i.rehearsed}
        assert {i["id"]: i["rehearsed"] for i in rebuilt.episodic if "rehearsed" in i} == (
            rehearsed
        )
        event("rehearsed" if rehearsed else "none rehearsed")
    # A promotion named in a consolidation line left the archive for episodic memory in that
    # same line's moves, and was not sent back by them.
    for _, line in iter_file(run_dir / "consolidation.jsonl"):
        entry = line["consolidation"]
        moves = [(m["id"], m["from"], m["to"]) for m in entry["evicted"]]
        for item_id in entry["promoted"]:
            event("promoted")
            assert (item_id, "archive", "episodic") in moves
            last = [m for m in moves if m[0] == item_id][-1]
            assert last[1:] == ("archive", "episodic"), (line, item_id)
    # Every count the lines give is what replaying them gives.
    summary = summarize_run(run_dir)
    assert summary.ok, summary.format()


# --------------------------------------------------------------------------- the replay check
def _simulate(root: Path, *overrides: str) -> Path:
    """A run whose memories move between all four stores: floods, reflection, tiers."""
    from simulation.config import load_config
    from simulation.runner import run_simulation

    config, base = load_config(
        DEFAULT,
        [
            "households.count=30",
            "years=6",
            "hazard.source=scripted",
            "hazard.kind=depth",
            "hazard.events={2: 3.0, 4: 1.0}",
            *STRESS,
            *overrides,
        ],
    )
    return run_simulation(config, base, root, progress=False).run_dir


@pytest.fixture(scope="module")
def simulated_run(tmp_path_factory: pytest.TempPathFactory) -> Path:
    return _simulate(tmp_path_factory.mktemp("sim"))


@pytest.fixture(scope="module")
def full_run(tmp_path_factory: pytest.TempPathFactory) -> Path:
    """The same run at level full: its traces list every working and episodic item."""
    return _simulate(tmp_path_factory.mktemp("full"), "audit.level=full")


def _changed(
    run: Path, tmp_path: Path, stream: str, change: Callable[[dict], bool]
) -> tuple[Path, int, dict]:
    """A copy of ``run`` in which ``change`` edited the first line of ``stream`` it applies to.

    Returns the copy, the (1-based) number of the line changed and the line as it was.
    """
    folder = Path(shutil.copytree(run, tmp_path / run.name))
    path = folder / f"{stream}.jsonl"
    records = [orjson.loads(line) for line in path.read_bytes().splitlines()]
    index = next(i for i, record in enumerate(records) if change(copy.deepcopy(record)))
    original = records[index]
    records[index] = copy.deepcopy(original)
    change(records[index])
    path.write_bytes(_encode(records))
    return folder, index + 1, original


def _replay_check(run: Path) -> tuple[bool, str]:
    summary = summarize_run(run)
    (check,) = (c for c in summary.checks if c.name == "memory replay")
    others = [c.name for c in summary.checks if not c.ok and c.name != "memory replay"]
    assert not others, summary.format()  # the damage is one only the replay can see
    return check.ok, check.detail


def test_the_replay_check_follows_every_store_of_a_real_run(simulated_run: Path) -> None:
    ok, detail = _replay_check(simulated_run)
    traces = sum(1 for _ in iter_file(simulated_run / "household_traces.jsonl"))
    assert ok
    assert f"traces ({traces}) and year ends ({traces}) say" in detail
    moved = {
        (entry["from"], entry["to"])
        for _, line in iter_file(simulated_run / "consolidation.jsonl")
        for entry in line["consolidation"]["evicted"]
    }
    assert {("archive", "episodic"), ("episodic", "archive"), ("semantic", None)} <= moved


def _one_more(key: str) -> Callable[[dict], bool]:
    def change(record: dict) -> bool:
        block = record.get("consolidation") or record.get("memory")
        if not block or not block.get(key):
            return False
        block[key] += 1
        return True

    return change


@pytest.mark.parametrize(
    ("stream", "key", "store", "when"),
    [
        ("consolidation", "episodic_after", "episodic", "the year end"),
        ("consolidation", "working_after", "working", "the year end"),
        ("household_traces", "working_count", "working", "its decision"),
        ("household_traces", "episodic_count", "episodic", "its decision"),
    ],
)
def test_a_count_the_stores_do_not_hold_fails_the_replay_check(
    simulated_run: Path, tmp_path: Path, stream: str, key: str, store: str, when: str
) -> None:
    run, number, line = _changed(simulated_run, tmp_path, stream, _one_more(key))
    held = (line.get("consolidation") or line.get("memory"))[key]
    ok, detail = _replay_check(run)
    assert not ok
    assert detail == (
        "1 line(s) disagree with the stores replayed from memory_updates and consolidation: "
        f"{stream}.jsonl:{number}: {line['agent_id']}'s {store} memory holds {held} items "
        f"after {when}, the line says {held + 1}"
    )


def test_an_eviction_left_out_is_found_at_the_household_s_next_count(
    simulated_run: Path, tmp_path: Path
) -> None:
    """Only one problem a household: its replay is not followed once it broke."""

    def forget_eviction(record: dict) -> bool:
        if not record["evicted"] or record["evicted"][0]["from"] != "working":
            return False
        record["evicted"] = record["evicted"][1:]
        return True

    run, _, line = _changed(simulated_run, tmp_path, "memory_updates", forget_eviction)
    ok, detail = _replay_check(run)
    assert not ok
    assert detail.startswith("1 line(s) disagree with the stores replayed")
    assert f"{line['agent_id']}'s working memory holds" in detail


def test_an_eviction_of_an_item_its_store_lacks_is_named(
    simulated_run: Path, tmp_path: Path
) -> None:
    def wrong_store(record: dict) -> bool:
        moves = record["consolidation"]["evicted"]
        if not moves or moves[0]["from"] != "episodic":
            return False
        moves[0]["from"] = "semantic"
        return True

    run, number, line = _changed(simulated_run, tmp_path, "consolidation", wrong_store)
    item_id = line["consolidation"]["evicted"][0]["id"]
    ok, detail = _replay_check(run)
    assert not ok
    assert detail.endswith(
        f"consolidation.jsonl:{number}: evicts {item_id!r} from semantic, which lacks it"
    )


def test_a_full_trace_lists_the_items_its_stores_hold(full_run: Path) -> None:
    ok, detail = _replay_check(full_run)
    assert ok, detail


def test_a_full_trace_that_leaves_out_an_item_is_named(full_run: Path, tmp_path: Path) -> None:
    def drop_one(record: dict) -> bool:
        items = record["memory"]["working_items"]
        return bool(items) and bool(items.pop(0))

    run, number, line = _changed(full_run, tmp_path, "household_traces", drop_one)
    item_id = line["memory"]["working_items"][0]["id"]
    ok, detail = _replay_check(run)
    assert not ok
    assert detail.endswith(
        f"household_traces.jsonl:{number}: {line['agent_id']}'s working_items leaves out "
        f"{item_id!r}, which its working memory holds"
    )


def test_a_full_trace_that_lists_an_item_of_another_store_is_named(
    full_run: Path, tmp_path: Path
) -> None:
    def borrow(record: dict) -> bool:
        memory = record["memory"]
        working = {item["id"] for item in memory["working_items"]}
        others = [item for item in memory["episodic_items"] if item["id"] not in working]
        if not others:
            return False
        memory["working_items"].append(others[0])
        return True

    run, number, line = _changed(full_run, tmp_path, "household_traces", borrow)
    working = {item["id"] for item in line["memory"]["working_items"]}
    item_id = next(i["id"] for i in line["memory"]["episodic_items"] if i["id"] not in working)
    ok, detail = _replay_check(run)
    assert not ok
    assert detail.endswith(
        f"household_traces.jsonl:{number}: {line['agent_id']}'s working_items lists "
        f"{item_id!r}, which its working memory does not hold"
    )


# --------------------------------------------------------------------------- experiments
@pytest.fixture(scope="module")
def experiment(tmp_path_factory: pytest.TempPathFactory) -> Path:
    """A batch experiment of two small runs at level standard."""
    from simulation.cli import main

    root = tmp_path_factory.mktemp("experiment")
    design = root / "tiny.yaml"
    design.write_text(
        f"name: tiny\n"
        f"base: {DEFAULT}\n"
        "set: {households.count: 20, years: 3}\n"
        "sweep: {grid: {memory.decay_rate: [0.9, 1.0]}}\n"
        "replicates: 1\n"
        "seed: 1\n"
        "executor: {kind: serial}\n",
        encoding="utf-8",
    )
    assert main(["batch", str(design), "--out", str(root / "out")]) == 0
    return root / "out"


def test_summarize_checks_every_run_of_an_experiment(
    experiment: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    assert _run_cli(["audit", "summarize", str(experiment)]) == 0
    out = capsys.readouterr().out
    runs = sorted(p.name for p in (experiment / "runs").iterdir())
    assert len(runs) == 2
    for run in runs:
        assert re.search(rf"^{run} +complete +standard +\d+  ok$", out, re.MULTILINE), out
    assert out.endswith("2 of 2 runs pass every check\n")


@pytest.mark.parametrize("workers", [[], ["--workers", "1"]], ids=["every-core", "one-by-one"])
def test_an_experiment_s_run_that_fails_a_check_is_named_with_its_detail(
    experiment: Path, tmp_path: Path, capsys: pytest.CaptureFixture[str], workers: list[str]
) -> None:
    copy_of = Path(shutil.copytree(experiment, tmp_path / "experiment"))
    damaged = sorted((copy_of / "runs").iterdir())[1]
    path = damaged / "consolidation.jsonl"
    records = [orjson.loads(line) for line in path.read_bytes().splitlines()]
    records[0]["consolidation"]["working_after"] += 1
    path.write_bytes(_encode(records))
    assert _run_cli(["audit", "summarize", *workers, str(copy_of)]) == 1
    out = capsys.readouterr().out
    row = rf"^{damaged.name} +complete +standard +\d+  FAIL memory replay$"
    assert re.search(row, out, re.MULTILINE), out
    assert f"\n{damaged.name}:\n  FAIL  memory replay: 1 line(s) disagree" in out
    assert out.endswith("1 of 2 runs pass every check\n")


def test_an_experiment_whose_batch_did_not_finish_is_said_to_be_unfinished(
    experiment: Path, tmp_path: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    """The runs that are there pass; the checks alone would not say that one never ran."""
    copy_of = Path(shutil.copytree(experiment, tmp_path / "experiment"))
    never_ran = sorted((copy_of / "runs").iterdir())[1]
    shutil.rmtree(never_ran)
    assert _run_cli(["audit", "summarize", str(copy_of)]) == 0
    out = capsys.readouterr().out
    assert out.endswith(
        "1 of 1 runs pass every check\n"
        f"The experiment plans 2 runs: 1 has no run folder ({never_ran.name}); the batch did "
        "not finish (floodsim batch FILE --resume runs the rest)\n"
    )


def test_runs_checked_in_a_pool_of_processes_are_reported_as_one_by_one(
    experiment: Path, tmp_path: Path
) -> None:
    copy_of = Path(shutil.copytree(experiment, tmp_path / "experiment"))
    (copy_of / "runs" / "0-killed-early").mkdir()  # no manifest and no streams: unreadable
    one_by_one = summarize_experiment(copy_of, workers=1)
    pooled = summarize_experiment(copy_of, workers=2)
    assert [run.run_dir for run in pooled.runs] == sorted((copy_of / "runs").iterdir())
    assert pooled.format() == one_by_one.format()
    assert not pooled.ok
    assert "0-killed-early:\n  FAIL  files: " in pooled.format()
    assert pooled.format().endswith("2 of 3 runs pass every check")


def test_a_pool_of_no_workers_is_refused(experiment: Path) -> None:
    with pytest.raises(ValueError, match="workers must be at least 1, got 0"):
        summarize_experiment(experiment, workers=0)
    with pytest.raises(SystemExit):
        _run_cli(["audit", "summarize", "--workers", "0", str(experiment)])


def test_a_pool_larger_than_batch_allows_is_refused_before_anything_forks(
    experiment: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    with pytest.raises(SystemExit) as info:
        _run_cli(["audit", "summarize", "--workers", "100000", str(experiment)])
    assert info.value.code == 2
    assert "--workers: must be at most 1024" in capsys.readouterr().err


def test_an_experiment_folder_without_runs_is_refused(tmp_path: Path) -> None:
    (tmp_path / "experiment.json").write_text("{}", encoding="utf-8")
    with pytest.raises(AuditReadError, match="an experiment folder without runs"):
        summarize_experiment(tmp_path)
    with pytest.raises(AuditReadError, match=r"not an experiment folder \(no such folder\)"):
        summarize_experiment(tmp_path / "runs")
    (tmp_path / "plain").mkdir()
    with pytest.raises(AuditReadError, match=r"not an experiment folder \(no experiment.json"):
        summarize_experiment(tmp_path / "plain")
