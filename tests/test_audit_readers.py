"""Tests for simulation.audit.readers: streaming, truncation, chunks, flattening, tables."""

from __future__ import annotations

import gzip
import warnings
from typing import TYPE_CHECKING, Any

import numpy as np
import orjson
import pandas as pd
import pytest

from simulation.audit.readers import (
    BASE_COLUMNS,
    STREAMS,
    AuditReadError,
    ReadReport,
    TruncatedLineWarning,
    consolidation_table,
    decisions_per_year,
    iter_file,
    iter_records,
    memory_counts,
    read_manifest,
    read_stream,
    retrievals,
    stream_path,
)

if TYPE_CHECKING:
    from pathlib import Path

RUN_ID = "test-s1-0000abcd"


def _head(year: int, agent: str) -> dict[str, Any]:
    return {"schema_version": 1, "run_id": RUN_ID, "year": year, "agent_id": agent}


def _trace(year: int, agent: str, skill: str, retrieved: list[str] | None = None) -> dict:
    retrieved = retrieved or []
    return {
        **_head(year, agent),
        "memory": {
            "retrieved": retrieved,
            "retrieval_scores": [round(0.9 - 0.1 * i, 2) for i in range(len(retrieved))],
            "retrieved_from": ["working"] * len(retrieved),
            "working_count": year,
            "episodic_count": 2 * year,
        },
        "reasoning": {"constructs": {"TP": {"level": "M", "value": 0.5}}},
        "action": {"decision_skill": skill},
        "validation": {"valid": True, "errors": [], "warnings": []},
    }


def _encode(records: list[dict[str, Any]]) -> bytes:
    return b"".join(orjson.dumps(r) + b"\n" for r in records)


def _write(path: Path, data: bytes) -> Path:
    if path.name.endswith(".gz"):
        path.write_bytes(gzip.compress(data))
    else:
        path.write_bytes(data)
    return path


def _stream(run_dir: Path, name: str, records: list[dict], *, gz: bool = False, tail: bytes = b""):
    suffix = ".jsonl.gz" if gz else ".jsonl"
    return _write(run_dir / f"{name}{suffix}", _encode(records) + tail)


TRACES = [
    _trace(1, "H1", "do_nothing", ["H1:0"]),
    _trace(1, "H2", "buy_insurance", ["H2:1", "H2:0"]),
    _trace(2, "H1", "do_nothing", []),
    _trace(2, "H2", "elevate_house", ["H2:2"]),
]


@pytest.fixture(params=[False, True], ids=["plain", "gzip"])
def gz(request: pytest.FixtureRequest) -> bool:
    return request.param


@pytest.fixture
def run_dir(tmp_path: Path, gz: bool) -> Path:
    run = tmp_path / RUN_ID
    run.mkdir()
    (run / "manifest.json").write_bytes(
        orjson.dumps({"run_id": RUN_ID, "audit": {"level": "standard", "gzip": gz}})
    )
    _stream(run, "household_traces", TRACES, gz=gz)
    return run


# --------------------------------------------------------------------------- files
def test_stream_path_finds_plain_or_gzip_and_none_when_absent(run_dir: Path, gz: bool) -> None:
    path = stream_path(run_dir, "household_traces")
    assert path is not None
    assert path.name == ("household_traces.jsonl.gz" if gz else "household_traces.jsonl")
    assert stream_path(run_dir, "consolidation") is None


def test_stream_path_rejects_unknown_stream_and_missing_folder(tmp_path: Path) -> None:
    with pytest.raises(AuditReadError, match="unknown audit stream 'traces'"):
        stream_path(tmp_path, "traces")
    with pytest.raises(AuditReadError, match=r"not a run directory \(no such folder\)$"):
        stream_path(tmp_path / "nope", "household_traces")
    # A run's file given for the run directory is not said to be missing.
    manifest = _write(tmp_path / "manifest.json", b"{}")
    with pytest.raises(AuditReadError, match=r"not a run directory \(a file, not a folder\)$"):
        stream_path(manifest, "household_traces")


def test_a_folder_named_as_a_stream_is_not_reported_as_absent(run_dir: Path, gz: bool) -> None:
    # Read as absent, a stream the run wrote would pass for one its audit level never writes.
    (run_dir / "memory_updates.jsonl.gz").mkdir()
    with pytest.raises(AuditReadError, match=r"memory_updates\.jsonl\.gz: not a file"):
        stream_path(run_dir, "memory_updates")
    with pytest.raises(AuditReadError, match="not a file"):
        list(iter_records(run_dir, "memory_updates"))
    # Beside the stream's real file, a folder of the other name is no matter.
    (run_dir / "household_traces.jsonl" if gz else run_dir / "household_traces.jsonl.gz").mkdir()
    assert stream_path(run_dir, "household_traces") is not None


def test_iter_records_round_trips_every_line(run_dir: Path) -> None:
    report = ReadReport()
    records = list(iter_records(run_dir, "household_traces", report=report))
    assert records == TRACES
    assert report.records == 4
    assert report.clean


def test_iter_records_counts_the_lines_on_a_bar_when_asked(
    run_dir: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    assert list(iter_records(run_dir, "household_traces", progress=True)) == TRACES
    shown = capsys.readouterr().err
    assert "household_traces: 0.00 lines [" in shown  # no streams listed: no total
    listed = {"household_traces": {"file": "household_traces.jsonl", "lines": 4}}
    manifest = {"run_id": RUN_ID, "audit": {"level": "standard", "streams": listed}}
    (run_dir / "manifest.json").write_bytes(orjson.dumps(manifest))
    assert list(iter_records(run_dir, "household_traces", progress=True)) == TRACES
    assert "household_traces:   0%|          | 0/4 [" in capsys.readouterr().err
    assert list(iter_records(run_dir, "household_traces")) == TRACES
    assert list(iter_records(run_dir, "household_traces", progress=None)) == TRACES
    assert capsys.readouterr().err == ""  # not asked, and stderr is no terminal here


def test_missing_stream_names_run_dir_and_level(run_dir: Path) -> None:
    with pytest.raises(AuditReadError, match=r"no memory_updates\.jsonl.*level 'standard'"):
        iter_records(run_dir, "memory_updates")  # raises before iteration starts


def test_missing_llm_calls_names_the_policy_that_writes_it_not_the_level(run_dir: Path) -> None:
    with pytest.raises(AuditReadError) as raised:
        iter_records(run_dir, "llm_calls")
    assert str(raised.value) == (
        f"{run_dir}: no llm_calls.jsonl or llm_calls.jsonl.gz (only runs whose households "
        "decide with decision.policy: llm write it)"
    )


def test_read_manifest(run_dir: Path, tmp_path: Path) -> None:
    assert read_manifest(run_dir)["run_id"] == RUN_ID
    with pytest.raises(AuditReadError, match=r"no manifest\.json"):
        read_manifest(tmp_path)
    # Whatever keeps it from being read is named with the file, not raised bare.
    (tmp_path / "manifest.json").mkdir()
    with pytest.raises(AuditReadError, match=r"manifest\.json: cannot be read as JSON \("):
        read_manifest(tmp_path)
    (tmp_path / "manifest.json").rmdir()
    (tmp_path / "manifest.json").write_text("{run_id: 1", encoding="utf-8")
    with pytest.raises(AuditReadError, match=r"manifest\.json: cannot be read as JSON \("):
        read_manifest(tmp_path)


# --------------------------------------------------------------------------- truncation
@pytest.mark.parametrize("cut", [1, 40, -2], ids=["one-byte", "mid-line", "no-brace"])
def test_truncated_last_line_is_skipped_warned_and_reported(
    tmp_path: Path, gz: bool, cut: int
) -> None:
    last = orjson.dumps(_trace(3, "H1", "relocate"))
    _stream(tmp_path, "household_traces", TRACES, gz=gz, tail=last[:cut])
    report = ReadReport()
    with pytest.warns(TruncatedLineWarning, match="truncated last line 5"):
        records = list(iter_records(tmp_path, "household_traces", report=report))
    assert records == TRACES
    assert report.records == 4
    assert [s.line for s in report.skipped] == [5]
    assert report.skipped[0].preview == last[:cut].decode()[:80]
    assert not report.clean


def test_truncated_last_line_after_trailing_blank_lines(tmp_path: Path) -> None:
    _stream(tmp_path, "household_traces", TRACES, tail=b'\n\n{"year": 3, "ag')
    report = ReadReport()
    with pytest.warns(TruncatedLineWarning, match="truncated last line 7"):
        assert len(list(iter_records(tmp_path, "household_traces", report=report))) == 4
    assert report.skipped[0].line == 7


@pytest.mark.parametrize(
    "tail",
    [b"this is not json\n", b'{"year": 3, "ag\n', b'{"year": 3, "ag\n\n', b"[1, 2]\n  \n"],
    ids=["text", "cut-then-newline", "then-blank-lines", "not-an-object"],
)
def test_a_complete_last_line_that_is_not_json_is_malformed_not_truncated(
    tmp_path: Path, gz: bool, tail: bytes
) -> None:
    """Lines are written with their newline: only a last line without one was cut short."""
    path = _stream(tmp_path, "household_traces", TRACES, gz=gz, tail=tail)
    report = ReadReport()
    with warnings.catch_warnings():
        warnings.simplefilter("error", TruncatedLineWarning)  # not called truncated
        with pytest.raises(AuditReadError) as raised:
            list(iter_records(tmp_path, "household_traces", report=report))
    message = str(raised.value)
    assert message.startswith(f"{path}: line 5 is malformed: not a JSON object (")
    assert "so the file is corrupt, not cut short by an interrupted run" in message
    assert "truncated" not in message
    assert report.records == 4
    assert not report.skipped


def test_gzip_cut_short_keeps_what_was_written(tmp_path: Path) -> None:
    """A writer killed before closing leaves a gzip stream without its trailer."""
    data = _encode([_trace(y, f"H{i}", "do_nothing") for y in range(1, 4) for i in range(50)])
    compressed = gzip.compress(data)
    path = tmp_path / "household_traces.jsonl.gz"
    path.write_bytes(compressed[: len(compressed) * 2 // 3])
    report = ReadReport()
    with warnings.catch_warnings():
        warnings.simplefilter("ignore", TruncatedLineWarning)
        records = list(iter_records(tmp_path, "household_traces", report=report))
    assert report.gzip_incomplete
    assert 0 < len(records) < 150
    assert records == orjson.loads(b"[" + b",".join(data.splitlines()[: len(records)]) + b"]")
    assert len(report.skipped) <= 1


@pytest.mark.parametrize("tail", [b"", b'{"year": 3, "ag'], ids=["whole-lines", "mid-line"])
@pytest.mark.parametrize("status", ["complete", "running"])
def test_a_complete_runs_stream_cut_short_is_refused_not_read_as_an_early_stop(
    run_dir: Path, gz: bool, tail: bytes, status: str
) -> None:
    """Only a run that stopped may end early: a finished one wrote every line it lists."""
    listed = {"household_traces": {"file": "household_traces.jsonl", "lines": 5}}
    manifest = {
        "run_id": RUN_ID,
        "status": status,
        "audit": {"level": "standard", "streams": listed},
    }
    (run_dir / "manifest.json").write_bytes(orjson.dumps(manifest))
    path = _stream(run_dir, "household_traces", TRACES, gz=gz, tail=tail)
    if status == "running":  # killed mid-year: what is whole is read
        with warnings.catch_warnings():
            warnings.simplefilter("ignore", TruncatedLineWarning)
            assert list(iter_records(run_dir, "household_traces")) == TRACES
        return
    with warnings.catch_warnings():
        warnings.simplefilter("error", TruncatedLineWarning)  # not called an interrupted run
        with pytest.raises(AuditReadError) as raised:
            list(iter_records(run_dir, "household_traces"))
    assert str(raised.value) == (
        f"{path}: ends after 4 lines but the run completed with 5: the stream was cut short "
        "after the run wrote it"
    )


@pytest.mark.parametrize("content", [b'{"a":1}\n', b"x", b"plain text, long enough " * 2])
def test_a_gz_stream_that_is_not_gzip_is_named_as_such(tmp_path: Path, content: bytes) -> None:
    path = tmp_path / "household_traces.jsonl.gz"
    path.write_bytes(content)
    with pytest.raises(AuditReadError, match=r"household_traces.jsonl.gz: not gzip data"):
        list(iter_records(tmp_path, "household_traces"))


def test_concatenated_gzip_members_are_read(tmp_path: Path) -> None:
    path = tmp_path / "household_traces.jsonl.gz"
    path.write_bytes(gzip.compress(_encode(TRACES[:2])) + gzip.compress(_encode(TRACES[2:])))
    report = ReadReport()
    assert list(iter_records(tmp_path, "household_traces", report=report)) == TRACES
    assert report.clean


def test_corrupt_middle_line_raises_naming_file_and_line(tmp_path: Path, gz: bool) -> None:
    data = _encode(TRACES[:2]) + b'{"year": 1, "agent_id": "H3"\n' + _encode(TRACES[2:])
    path = _write(tmp_path / f"household_traces.jsonl{'.gz' if gz else ''}", data)
    records = iter_records(tmp_path, "household_traces")
    assert next(records) == TRACES[0]  # lazy: the error comes when the reader gets there
    with pytest.raises(AuditReadError, match=rf"{path.name}: line 3 is not a JSON object"):
        list(records)


def test_non_object_middle_line_raises(tmp_path: Path) -> None:
    _write(tmp_path / "household_traces.jsonl", _encode(TRACES[:1]) + b"[1, 2]\n" + _encode(TRACES))
    with pytest.raises(AuditReadError, match="line 2"):
        list(iter_records(tmp_path, "household_traces"))


DROP = object()  # a change that leaves the field out


@pytest.mark.parametrize(
    ("change", "problem"),
    [
        ({"year": [1, 2]}, "year is not an integer (got [1, 2])"),
        ({"year": True}, "year is not an integer (got True)"),
        ({"year": -7}, "year is below 0 (got -7)"),  # by the schema's minimum: it was read
        ({"agent_id": None}, "agent_id is not a string (got None)"),
        ({"run_id": 7}, "run_id is not a string (got 7)"),
        ({"year": DROP}, "year is missing"),
        # The other top-level fields, by the stream's JSON Schema.
        ({"reasoning": 1.5}, "reasoning is not an object (got 1.5)"),
        ({"action": DROP}, "action is missing"),
        ({"schema_version": 2}, "schema_version is not 1 (got 2)"),
    ],
)
def test_a_line_whose_top_level_fields_are_damaged_is_refused_naming_it(
    tmp_path: Path, change: dict[str, Any], problem: str
) -> None:
    """The analyses group by them and reach into them: one fails where it is read, not later."""
    damaged = {key: value for key, value in {**TRACES[1], **change}.items() if value is not DROP}
    path = _write(tmp_path / "household_traces.jsonl", _encode([TRACES[0], damaged, *TRACES[2:]]))
    with pytest.raises(AuditReadError) as caught:
        list(iter_records(tmp_path, "household_traces"))
    assert str(caught.value) == f"{path}: line 2 is malformed: {problem}"


def test_a_memory_update_of_an_unknown_type_is_refused_naming_it(tmp_path: Path) -> None:
    line = {
        "schema_version": 1,
        "run_id": "r",
        "year": 1,
        "agent_id": "H1",
        "update_type": "rumour",
        "memory_item": {},
        "evicted": [],
    }
    path = _write(tmp_path / "memory_updates.jsonl", _encode([line]))
    with pytest.raises(AuditReadError) as caught:
        list(iter_records(tmp_path, "memory_updates"))
    assert str(caught.value) == (
        f"{path}: line 1 is malformed: update_type is not one of ['flood', 'claim', 'decision', "
        "'policy', 'neighbor', 'seed', 'reflection', 'other'] (got 'rumour')"
    )


def test_iter_file_numbers_physical_lines(tmp_path: Path) -> None:
    path = _write(tmp_path / "x.jsonl", _encode(TRACES[:1]) + b"\n" + _encode(TRACES[1:2]))
    assert [n for n, _ in iter_file(path)] == [1, 3]


# --------------------------------------------------------------------------- DataFrames
def test_read_stream_flattens_nested_fields_and_keeps_lists(run_dir: Path) -> None:
    frame = read_stream(run_dir, "household_traces")
    assert len(frame) == 4
    for column in (
        *BASE_COLUMNS,
        "memory.working_count",
        "memory.retrieved",
        "action.decision_skill",
        "reasoning.constructs.TP.level",
        "validation.valid",
    ):
        assert column in frame.columns
    assert frame["memory.working_count"].tolist() == [1, 1, 2, 2]
    assert frame["memory.retrieved"].iloc[1] == ["H2:1", "H2:0"]
    assert frame["action.decision_skill"].tolist() == [
        t["action"]["decision_skill"] for t in TRACES
    ]


def test_read_stream_without_flattening_keeps_dicts(run_dir: Path) -> None:
    frame = read_stream(run_dir, "household_traces", flatten=False)
    assert "memory" in frame.columns
    assert "memory.working_count" not in frame.columns
    assert frame["memory"].iloc[0]["working_count"] == 1


def test_empty_stream_gives_base_columns(tmp_path: Path) -> None:
    (tmp_path / "tool_invocations.jsonl").write_bytes(b"")
    frame = read_stream(tmp_path, "tool_invocations")
    assert frame.empty
    assert tuple(frame.columns) == BASE_COLUMNS
    assert list(read_stream(tmp_path, "tool_invocations", chunksize=5)) == []


def test_chunked_reading_is_lazy_and_complete(tmp_path: Path, gz: bool) -> None:
    records = [_trace(1 + n // 10, f"H{n % 10}", "do_nothing") for n in range(25)]
    _stream(tmp_path, "household_traces", records, gz=gz)
    report = ReadReport()
    chunks = read_stream(tmp_path, "household_traces", chunksize=10, report=report)
    assert not isinstance(chunks, pd.DataFrame)
    first = next(chunks)
    # Only the first chunk's lines have been parsed so far.
    assert report.records == 10
    assert len(first) == 10
    assert "memory.working_count" in first.columns
    rest = list(chunks)
    assert [len(c) for c in rest] == [10, 5]
    assert report.records == 25
    combined = pd.concat([first, *rest], ignore_index=True)
    assert combined["agent_id"].tolist() == [r["agent_id"] for r in records]


def test_a_numpy_chunksize_reads_as_its_integer(tmp_path: Path) -> None:
    _write(tmp_path / "household_traces.jsonl", _encode(TRACES * 3))
    sizes = [len(c) for c in read_stream(tmp_path, "household_traces", chunksize=np.int64(4))]
    assert sizes == [len(c) for c in read_stream(tmp_path, "household_traces", chunksize=4)]


def test_chunked_reading_reaches_a_corrupt_line_only_when_it_gets_there(tmp_path: Path) -> None:
    data = _encode(TRACES * 3) + b"garbage\n" + _encode(TRACES)
    _write(tmp_path / "household_traces.jsonl", data)
    chunks = read_stream(tmp_path, "household_traces", chunksize=4)
    assert len(next(chunks)) == 4
    assert len(next(chunks)) == 4
    with pytest.raises(AuditReadError, match="line 13"):
        list(chunks)


@pytest.mark.parametrize("chunksize", [0, -3, 2.5, True])
def test_bad_chunksize(run_dir: Path, chunksize: Any) -> None:
    with pytest.raises(AuditReadError, match="chunksize"):
        read_stream(run_dir, "household_traces", chunksize=chunksize)


def test_every_stream_name_is_known() -> None:
    assert STREAMS == ("household_traces", "memory_updates", "consolidation", "tool_invocations")


# --------------------------------------------------------------------------- tables
def test_decisions_per_year_counts_and_shares(run_dir: Path) -> None:
    table = decisions_per_year(run_dir)
    assert list(table.columns) == ["year", "skill", "count", "share"]
    rows = {(r.year, r.skill): (r.count, r.share) for r in table.itertuples()}
    assert rows[(1, "do_nothing")] == (1, 0.5)
    assert rows[(1, "buy_insurance")] == (1, 0.5)
    assert rows[(1, "elevate_house")] == (0, 0.0)  # zero-filled for easy pivots
    assert rows[(2, "elevate_house")] == (1, 0.5)
    assert len(table) == 2 * 3
    assert table.groupby("year")["share"].sum().tolist() == [1.0, 1.0]


def test_retrievals_from_traces(run_dir: Path) -> None:
    table = retrievals(run_dir)
    assert list(table.columns) == ["year", "agent_id", "rank", "id", "score", "store"]
    assert table["id"].tolist() == ["H1:0", "H2:1", "H2:0", "H2:2"]
    assert table["rank"].tolist() == [1, 1, 2, 1]
    assert table["score"].tolist() == [0.9, 0.9, 0.8, 0.9]
    assert set(table["store"]) == {"working"}


@pytest.mark.parametrize("level", ["standard", "full"])
def test_retrievals_from_tool_invocations(tmp_path: Path, level: str) -> None:
    ids = ["H1:3", "H1:1"]
    call: dict[str, Any] = {
        "tool_id": "retrieve_memory",
        "parameters": {"top_k": 5, "current_year": 4},
        "result": ids if level == "standard" else ["flood", "claim"],
        "result_count": 2,
        "scores": [0.7, 0.4],
    }
    if level == "full":
        call["result_ids"] = ids
    _stream(tmp_path, "tool_invocations", [{**_head(4, "H1"), "tool_invocation": call}])
    table = retrievals(tmp_path)  # no traces: falls back to the tool invocations
    assert table["id"].tolist() == ids
    assert table["score"].tolist() == [0.7, 0.4]
    assert table["rank"].tolist() == [1, 2]
    assert table["store"].isna().all()


def _consolidation(year: int, agent: str, **block: Any) -> dict[str, Any]:
    base = {
        "transferred_count": 0,
        "transferred_items": [],
        "evicted": [],
        "promoted": [],
        "reflections": [],
        "working_after": 0,
        "episodic_after": 0,
    }
    return {**_head(year, agent), "consolidation": {**base, **block}}


def test_memory_counts_from_traces_and_consolidation(run_dir: Path, gz: bool) -> None:
    _stream(
        run_dir,
        "consolidation",
        [_consolidation(1, "H1", working_after=3, episodic_after=1)],
        gz=gz,
    )
    from_traces = memory_counts(run_dir)
    assert list(from_traces.columns) == [
        "year",
        "agent_id",
        "working_count",
        "episodic_count",
        "when",
    ]
    assert from_traces["working_count"].tolist() == [1, 1, 2, 2]
    assert from_traces["episodic_count"].tolist() == [2, 2, 4, 4]
    assert set(from_traces["when"]) == {"decision"}
    year_end = memory_counts(run_dir, source="consolidation")
    assert year_end.to_dict("records") == [
        {"year": 1, "agent_id": "H1", "working_count": 3, "episodic_count": 1, "when": "year_end"}
    ]


def test_consolidation_table(tmp_path: Path) -> None:
    reflection = {
        "id": "H1:9",
        "content": "Floods keep coming",
        "importance": 0.8,
        "year": 2,
        "tags": ["reflection"],
        "source": "reflection",
    }
    _stream(
        tmp_path,
        "consolidation",
        [
            _consolidation(
                2,
                "H1",
                transferred_count=2,
                transferred_items=["H1:3", "H1:4"],
                evicted=[
                    {"id": "H1:0", "from": "episodic", "to": "archive"},
                    {"id": "H1:1", "from": "archive", "to": "episodic"},
                ],
                promoted=["H1:1"],
                reflections=[reflection],
                working_after=4,
                episodic_after=5,
            ),
            _consolidation(2, "H2"),
        ],
    )
    table = consolidation_table(tmp_path)
    assert list(table.columns) == [
        "year",
        "agent_id",
        "transferred_count",
        "evicted_count",
        "promoted_count",
        "reflections_count",
        "working_after",
        "episodic_after",
    ]
    assert table.iloc[0].tolist() == [2, "H1", 2, 2, 1, 1, 4, 5]
    assert table.iloc[1].tolist() == [2, "H2", 0, 0, 0, 0, 0, 0]


def test_tables_need_their_stream(tmp_path: Path) -> None:
    with pytest.raises(AuditReadError, match="no consolidation"):
        consolidation_table(tmp_path)
    with pytest.raises(AuditReadError, match="no household_traces"):
        decisions_per_year(tmp_path)
