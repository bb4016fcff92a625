"""Tests for the audit trail a run writes: streams per level, schemas, sampling, gzip, bytes."""

from __future__ import annotations

import errno
import gzip
import itertools
import json
import math
import os
import threading
import warnings
from pathlib import Path

import jsonschema
import numpy as np
import orjson
import pytest
from hypothesis import given
from hypothesis import strategies as st

from simulation.agents.state import HouseholdState
from simulation.audit import STREAMS, load_schema
from simulation.audit import writer as audit_writer
from simulation.audit.writer import (
    NO_EVICTIONS,
    _construct_entries,
    _ids_and_scores,
    _joined_rounded_numbers,
    _rounded,
    _rounded_array,
    _rounded_numbers,
    _rounded_scores,
    _Stream,
    eviction_parts,
)
from simulation.config import load_config
from simulation.decisions.base import Proposal, level_of
from simulation.memory import MemoryItem, ScoredMemory
from simulation.model import Decision
from simulation.runner import build_model, run_simulation
from simulation.skills.registry import Validation

DEFAULT = Path(__file__).resolve().parents[1] / "configs" / "default.yaml"


def run(tmp_path: Path, *overrides: str, count: int = 40, years: int = 6):
    config, base = load_config(DEFAULT, [f"households.count={count}", f"years={years}", *overrides])
    return run_simulation(config, base, tmp_path, progress=False)


def raw_lines(path: Path) -> list[bytes]:
    opener = gzip.open if path.suffix == ".gz" else open
    with opener(path, "rb") as fh:
        return fh.readlines()


def lines(path: Path) -> list[dict]:
    return [orjson.loads(line) for line in raw_lines(path)]


def same_lines(a: Path, b: Path, suffix: str = ".jsonl") -> None:
    """Every stream of run folder ``b`` has ``a``'s lines, run ids aside (they hash the config)."""
    for name in STREAMS:
        expected = [{**r, "run_id": ""} for r in lines(a / f"{name}{suffix}")]
        assert expected, name
        assert [{**r, "run_id": ""} for r in lines(b / f"{name}{suffix}")] == expected, name


@pytest.fixture(scope="module")
def standard_run(tmp_path_factory):
    return run(
        tmp_path_factory.mktemp("standard"),
        "hazard.source=scripted",
        "hazard.kind=depth",
        "hazard.events={2: 3.0, 4: 1.0}",
    )


@pytest.fixture(scope="module")
def full_run(tmp_path_factory):
    return run(tmp_path_factory.mktemp("full"), "audit.level=full", count=25, years=4)


@pytest.mark.parametrize("fixture", ["standard_run", "full_run"])
def test_every_line_validates_against_its_schema(request, fixture):
    result = request.getfixturevalue(fixture)
    manifest = json.loads((result.run_dir / "manifest.json").read_text())
    for name in STREAMS:
        path = result.run_dir / f"{name}.jsonl"
        records = lines(path)
        assert records, name
        validator = jsonschema.Draft202012Validator(load_schema(name))
        for record in records:
            validator.validate(record)
            assert record["run_id"] == manifest["run_id"]
            assert record["schema_version"] == 1
        assert manifest["audit"]["streams"][name] == {"file": path.name, "lines": len(records)}


def test_each_active_household_year_has_one_trace(standard_run):
    traces = lines(standard_run.run_dir / "household_traces.jsonl")
    keys = [(t["agent_id"], t["year"]) for t in traces]
    assert len(keys) == len(set(keys))
    metrics = standard_run.metrics
    per_year = {year: sum(1 for _, y in keys if y == year) for year in metrics["year"]}
    # Households that relocate in a year still decided that year; they stop afterwards.
    for row in metrics.itertuples():
        moved_before = (row.relocated_share * 40) - (row.decisions_relocate or 0)
        assert per_year[row.year] == pytest.approx(40 - moved_before, abs=0.5)


def test_memory_updates_log_every_write_with_evictions(standard_run):
    model = standard_run.model
    updates = lines(standard_run.run_dir / "memory_updates.jsonl")
    by_agent: dict[str, int] = {}
    for update in updates:
        by_agent[update["agent_id"]] = by_agent.get(update["agent_id"], 0) + 1
    for household in model.households:
        # Every memory the household ever wrote has one update line (seq counts writes).
        reflections = 0  # reflection is off by default
        assert by_agent[household.state.agent_id] == household.memory._next_seq - reflections
    floods = [u for u in updates if u["update_type"] == "flood" and u["year"] == 2]
    assert len(floods) == 40
    assert all(u["memory_item"]["amount"] is not None for u in floods)
    evicted = [e for u in updates for e in u["evicted"]]
    assert any(e["from"] == "working" and e["to"] is None for e in evicted)


def test_each_year_end_reports_the_sizes_it_left_the_memory_at(standard_run):
    model, run_dir = standard_run.model, standard_run.run_dir
    last = max(standard_run.metrics["year"])
    ends = {
        c["agent_id"]: c["consolidation"]
        for c in lines(run_dir / "consolidation.jsonl")
        if c["year"] == last
    }
    sizes = set()
    for household in model.households:
        memory = household.memory
        end = ends.get(household.state.agent_id)
        if end is None:  # moved away in an earlier year
            assert household.state.relocated
            continue
        assert (end["working_after"], end["episodic_after"]) == (
            memory.working_size,
            memory.episodic_size,
        )
        assert end["transferred_count"] == len(end["transferred_items"])
        sizes.add((memory.working_size, memory.episodic_size))
    assert len(sizes) > 1  # the sizes differ between households, so the check means something


def test_traces_reference_retrieved_ids_that_exist(standard_run):
    written = {u["memory_item"]["id"] for u in lines(standard_run.run_dir / "memory_updates.jsonl")}
    traces = lines(standard_run.run_dir / "household_traces.jsonl")
    tools = lines(standard_run.run_dir / "tool_invocations.jsonl")
    assert len(tools) == len(traces)
    for trace, call in zip(traces, tools, strict=True):
        assert set(trace["memory"]["retrieved"]) <= written
        assert trace["memory"]["retrieved"] == call["tool_invocation"]["result"]
        # The same scores, to 3 decimals in the trace and 6 in the call.
        shown = trace["memory"]["retrieval_scores"]
        logged = call["tool_invocation"]["scores"]
        assert len(shown) == len(logged)
        assert all(abs(a - b) <= 0.0005 + 1e-6 for a, b in zip(shown, logged, strict=True))
        assert all(round(a, 3) == a for a in shown)
        assert trace["memory_update"]["id"] in written
        top_k = standard_run.model.config.memory.retrieval.top_k
        assert call["tool_invocation"]["parameters"] == {
            "top_k": top_k,
            "current_year": trace["year"],
        }


def test_a_weighted_retrieval_names_its_strategy_and_query(tmp_path):
    weighted = run(
        tmp_path,
        "memory.retrieval.strategy=weighted",
        "memory.retrieval.query=flood damage",
        count=10,
        years=2,
    )
    calls = lines(weighted.run_dir / "tool_invocations.jsonl")
    assert calls
    for call in calls:
        assert call["tool_invocation"]["parameters"] == {
            "top_k": weighted.model.config.memory.retrieval.top_k,
            "current_year": call["year"],
            "strategy": "weighted",
            "query": "flood damage",
        }


def test_full_level_adds_snapshots_and_explanations(full_run):
    trace = lines(full_run.run_dir / "household_traces.jsonl")[-1]
    memory = trace["memory"]
    assert len(memory["working_items"]) == memory["working_count"]
    assert len(memory["retrieved_content"]) == len(memory["retrieved"])
    assert trace["reasoning"]["justification"]
    assert trace["reasoning"]["constructs"]["TP"]["explanation"]
    assert set(trace["state_before"]) == set(trace["state_after"])
    call = lines(full_run.run_dir / "tool_invocations.jsonl")[-1]["tool_invocation"]
    assert call["result"] == memory["retrieved_content"]
    assert call["result_ids"] == memory["retrieved"]


def test_minimal_and_off_levels(tmp_path):
    minimal = run(tmp_path / "minimal", "audit.level=minimal", count=20, years=3)
    assert sorted(p.name for p in minimal.run_dir.glob("*.jsonl")) == ["household_traces.jsonl"]
    trace = lines(minimal.run_dir / "household_traces.jsonl")[0]
    assert set(trace) >= {"action", "reasoning", "validation"}
    assert "memory" not in trace
    off = run(tmp_path / "off", "audit.level=off", count=20, years=3)
    assert not list(off.run_dir.glob("*.jsonl*"))
    assert json.loads((off.run_dir / "manifest.json").read_text())["audit"]["level"] == "off"


def test_sampling_by_fraction_and_by_ids(tmp_path):
    sampled = run(tmp_path / "f", "audit.sample=0.3", count=100, years=2)
    agents = {t["agent_id"] for t in lines(sampled.run_dir / "household_traces.jsonl")}
    assert 15 <= len(agents) <= 45
    again = run(tmp_path / "g", "audit.sample=0.3", count=100, years=2)
    assert {t["agent_id"] for t in lines(again.run_dir / "household_traces.jsonl")} == agents
    listed = run(tmp_path / "l", "audit.sample=[H00003, H00007]", count=20, years=2)
    for name in STREAMS:
        seen = {r["agent_id"] for r in lines(listed.run_dir / f"{name}.jsonl")}
        assert seen == {"H00003", "H00007"}, name


@pytest.mark.parametrize("fraction", [0.1, 0.5])
def test_a_sampled_fraction_is_that_fraction_of_any_kind_of_id(tmp_path, fraction):
    """Ids a digit apart are audited as independently as ids drawn at random would be."""
    from simulation.audit.writer import AuditWriter

    ids = [f"H{number:05d}" for number in range(10_000)]
    for seed in (7, 42):
        config, _ = load_config(DEFAULT, [f"audit.sample={fraction}", f"seed={seed}"])
        writer = AuditWriter(tmp_path, f"seed-{seed}", config.audit, config.seed)
        audited = [writer.audits(agent_id) for agent_id in ids]
        writer.close()
        # Four standard deviations of a binomial count, for the ids and for each tenth of them
        # by last digit (one of the ten kinds CRC-32 never audited).
        n = len(ids)
        assert abs(sum(audited) - fraction * n) < 4 * (n * fraction * (1 - fraction)) ** 0.5
        for digit in range(10):
            kind = audited[digit::10]
            n = len(kind)
            assert abs(sum(kind) - fraction * n) < 4 * (n * fraction * (1 - fraction)) ** 0.5


def test_gzip_streams(tmp_path):
    result = run(tmp_path, "audit.gzip=true", count=20, years=2)
    files = sorted(p.name for p in result.run_dir.glob("*.jsonl.gz"))
    assert files == sorted(f"{name}.jsonl.gz" for name in STREAMS)
    assert lines(result.run_dir / "household_traces.jsonl.gz")


def test_gzip_level_trades_size_for_speed_with_thesame_lines(tmp_path):
    fast = run(tmp_path / "fast", "audit.gzip=true", "audit.timestamps=false", count=60, years=4)
    small = run(
        tmp_path / "small",
        "audit.gzip=true",
        "audit.gzip_level=3",
        "audit.timestamps=false",
        count=60,
        years=4,
    )
    for name in STREAMS:
        a, b = fast.run_dir / f"{name}.jsonl.gz", small.run_dir / f"{name}.jsonl.gz"
        # The run ids differ (they hash the config); every other field is the same.
        assert [{**r, "run_id": ""} for r in lines(a)] == [{**r, "run_id": ""} for r in lines(b)], (
            name
        )
    size = sum(p.stat().st_size for p in small.run_dir.glob("*.jsonl.gz"))
    assert size < sum(p.stat().st_size for p in fast.run_dir.glob("*.jsonl.gz"))


@pytest.mark.parametrize("gzip_streams", [False, True])
def test_the_write_buffer_size_changes_no_line(tmp_path, gzip_streams):
    """Batches that fill the buffer go to the file directly, after what it holds, in order."""
    settings = ("audit.timestamps=false", f"audit.gzip={str(gzip_streams).lower()}")
    suffix = ".jsonl.gz" if gzip_streams else ".jsonl"
    default = run(tmp_path / "default", *settings, count=60, years=4)
    for buffer in (1, 3_000):  # every batch direct; some buffered, some direct
        small = run(
            tmp_path / str(buffer), *settings, f"audit.buffer_bytes={buffer}", count=60, years=4
        )
        same_lines(default.run_dir, small.run_dir, suffix)


_SMALL_RUN = ("audit.timestamps=false", "audit.buffer_bytes=2000")


@pytest.mark.skipif(
    not (hasattr(os, "posix_fadvise") and Path("/proc/self/fd").is_dir()),
    reason="needs posix_fadvise and /proc to name the advised files",
)
@pytest.mark.parametrize(
    ("engine", "gzip_streams"), [("objects", False), ("arrays", False), ("arrays", True)]
)
def test_streams_release_their_pages_every_so_many_bytes_with_thesame_lines(
    tmp_path, monkeypatch, engine, gzip_streams
):
    """A stream advises the kernel to drop its file's cached pages once per release interval."""
    settings = (*_SMALL_RUN, f"engine={engine}", f"audit.gzip={str(gzip_streams).lower()}")
    suffix = ".jsonl.gz" if gzip_streams else ".jsonl"
    kept = run(tmp_path / "kept", *settings, count=60, years=4)
    advised: dict[str, int] = {}

    def advise(fd: int, offset: int, length: int, advice: int) -> None:
        assert (offset, length, advice) == (0, 0, os.POSIX_FADV_DONTNEED)
        name = Path(os.readlink(f"/proc/self/fd/{fd}")).name
        advised[name] = advised.get(name, 0) + 1
        os.posix_fadvise(fd, offset, length, advice)

    monkeypatch.setattr(audit_writer, "_RELEASE_BYTES", 4096)
    monkeypatch.setattr(audit_writer, "_FADVISE", advise)
    released = run(tmp_path / "released", *settings, count=60, years=4)
    same_lines(kept.run_dir, released.run_dir, suffix)
    for name in STREAMS:
        # Counted in the lines' bytes, before any compression.
        size = sum(len(line) for line in raw_lines(released.run_dir / f"{name}{suffix}"))
        assert size > 3 * 4096, name  # the run is large enough to release every stream
        assert 1 <= advised[f"{name}{suffix}"] <= size // 4096, name


@pytest.mark.parametrize("platform", ["refuses the advice", "has no posix_fadvise"])
def test_streams_are_written_whole_where_pages_cannot_be_released(tmp_path, monkeypatch, platform):
    kept = run(tmp_path / "kept", *_SMALL_RUN, count=60, years=4)
    asked: list[int] = []

    def refuse(fd: int, offset: int, length: int, advice: int) -> None:
        asked.append(fd)
        raise OSError(errno.EINVAL, "Invalid argument")

    monkeypatch.setattr(audit_writer, "_RELEASE_BYTES", 4096)
    monkeypatch.setattr(
        audit_writer, "_FADVISE", refuse if platform == "refuses the advice" else None
    )
    refused = run(tmp_path / "refused", *_SMALL_RUN, count=60, years=4)
    same_lines(kept.run_dir, refused.run_dir)
    # Each stream asks once, and after a refusal never again.
    assert len(asked) == (len(STREAMS) if platform == "refuses the advice" else 0)


def test_without_timestamps_equal_seeds_give_byte_identical_outputs(tmp_path):
    a = run(tmp_path / "a", "audit.timestamps=false", count=30, years=5)
    b = run(tmp_path / "b", "audit.timestamps=false", count=30, years=5)
    for name in (*[f"{s}.jsonl" for s in STREAMS], "model_years.csv", "config.resolved.yaml"):
        assert (a.run_dir / name).read_bytes() == (b.run_dir / name).read_bytes(), name
    assert "timestamp" not in lines(a.run_dir / "household_traces.jsonl")[0]


def test_bad_audit_settings_are_rejected():
    from simulation.config import ConfigError

    with pytest.raises(ConfigError, match=r"audit\.sample"):
        load_config(DEFAULT, ["audit.sample=1.5"])
    with pytest.raises(ConfigError, match=r"audit\.level"):
        load_config(DEFAULT, ["audit.level=verbose"])
    with pytest.raises(ConfigError, match=r"audit\.gzip_level"):
        load_config(DEFAULT, ["audit.gzip_level=4"])
    with pytest.raises(ConfigError, match=r"audit\.background: must be auto, true or false"):
        load_config(DEFAULT, ["audit.background=sometimes"])


@given(
    st.lists(st.floats(allow_nan=True, allow_infinity=True), max_size=8),
    st.sampled_from([1e2, 1e3, 1e4, 1e6]),
)
def test_scores_are_rounded_half_to_even_like_round(scores: list[float], scale: float) -> None:
    """The arithmetic rounding gives round()'s result, with inf and nan passed through."""
    hits = [ScoredMemory(None, score, "working") for score in scores]

    def expected(value: float) -> float:
        if math.isnan(value) or math.isinf(value):
            return value
        scaled = value * scale
        return value if math.isinf(scaled) else round(scaled) / scale

    got = _rounded_scores(hits, scale)
    want = [expected(v) for v in scores]
    assert [orjson.dumps(v) for v in got] == [orjson.dumps(v) for v in want]
    items = [MemoryItem("H1", n, "text", 0.5, 1) for n in range(len(scores))]
    ids, fine, coarse = _ids_and_scores(
        [ScoredMemory(i, score, "working") for i, score in zip(items, scores, strict=True)],
        1e6,
        scale,
    )
    assert ids == [f"H1:{n}" for n in range(len(scores))]
    assert orjson.dumps(coarse) == orjson.dumps(want)
    assert orjson.dumps(fine) == orjson.dumps(_rounded_scores(hits, 1e6))
    assert [orjson.dumps(_rounded(v, scale)) for v in scores] == [orjson.dumps(v) for v in want]
    # The engine's arrays are rounded all at once, to the same values.
    rounded = _rounded_array(np.array(scores, dtype=float), scale)
    assert orjson.dumps(rounded.tolist()) == orjson.dumps(want)


@given(
    st.lists(
        st.one_of(
            st.floats(min_value=-0.01, max_value=1.01),
            st.floats(allow_nan=True, allow_infinity=True),
        ),
        max_size=12,
    ),
    st.sampled_from([1e2, 1e3, 1e4, 1e6]),
)
def test_shares_are_encoded_from_a_table_as_orjson_encodes_them(
    values: list[float], scale: float
) -> None:
    """Values rounding into [0, 1] come from a table of encodings; the lines are the same."""
    array = np.array(values, dtype=float)
    got = _rounded_numbers(array, scale).to_pylist()
    assert got == [orjson.dumps(v) for v in _rounded_array(array, scale).tolist()]
    # Rows of them, as a trace's retrieval scores: each row the inside of its JSON list.
    counts = [len(values) // 2, 0, len(values) - len(values) // 2]
    rows = _joined_rounded_numbers(array, scale, np.array(counts)).to_pylist()
    starts = np.cumsum([0, *counts])
    assert rows == [b",".join(got[a:b]) for a, b in itertools.pairwise(starts)]


@pytest.mark.parametrize("store", ["working", "episodic"])
def test_an_eviction_list_is_its_parts_around_the_id(store: str) -> None:
    before, after = eviction_parts(store)
    assert before + orjson.dumps("H1:3") + after == orjson.dumps(
        [{"id": "H1:3", "from": store, "to": None}]
    )
    assert orjson.dumps([]) == NO_EVICTIONS


def test_values_too_large_to_scale_are_left_as_given_without_a_warning() -> None:
    values = np.array([1e308, -1e308, 0.1234567])
    with warnings.catch_warnings():
        warnings.simplefilter("error")
        rounded = _rounded_array(values, 1e6)
    assert rounded.tolist() == [1e308, -1e308, 0.123457]


@given(
    st.lists(st.one_of(st.floats(min_value=0.0, max_value=1.0), st.floats(-2.0, 2.0)), max_size=12)
)
def test_appraisal_entries_are_the_object_paths(values: list[float]) -> None:
    """TP and CP entries taken from a table are those the object path writes, level and value."""
    got = _construct_entries(np.array(values, dtype=float)).to_pylist()
    assert got == [orjson.dumps({"level": level_of(v), "value": _rounded(v, 1e3)}) for v in values]


def test_a_failure_writing_behind_the_run_fails_the_run_and_ends_the_thread(tmp_path, monkeypatch):
    def full_disk(self, lines):
        raise OSError(28, "No space left on device")

    # The array engine's lines are written by the background thread (audit.background).
    monkeypatch.setattr(_Stream, "write_lines", full_disk)
    with pytest.raises(OSError, match="No space left on device"):
        run(tmp_path, "engine=arrays", "audit.background=true")
    (run_dir,) = tmp_path.iterdir()
    manifest = orjson.loads((run_dir / "manifest.json").read_bytes())
    assert manifest["status"] == "failed"
    assert "No space left on device" in manifest["error"]
    assert not [t for t in threading.enumerate() if t.name.startswith("floodsim-audit")]


def test_each_year_ends_with_the_lines_of_the_years_before_it_written(tmp_path):
    """Lines written behind the run lag it by one year at most."""
    settings = ["households.count=60", "years=6", "engine=arrays", "audit.background=true"]
    config, base = load_config(DEFAULT, settings)
    model = build_model(config, base)
    step = model.step
    written: dict[int, dict[str, bytes]] = {}

    def step_and_read() -> None:
        step()
        streams = {"traces": model.audit.traces, "updates": model.audit.updates}
        written[model.steps] = {k: s.path.read_bytes() for k, s in streams.items()}

    model.step = step_and_read
    result = run_simulation(config, base, tmp_path, progress=False, model=model)
    for key, name in (("traces", "household_traces"), ("updates", "memory_updates")):
        final = (result.run_dir / f"{name}.jsonl").read_bytes().splitlines(keepends=True)
        for year, files in written.items():
            before = b"".join(line for line in final if orjson.loads(line)["year"] < year)
            assert files[key].startswith(before), (name, year)


@pytest.mark.parametrize("background", [False, True])
def test_work_handed_to_the_writer_runs_in_order_and_at_once_from_within(tmp_path, background):
    from simulation.audit.writer import AuditWriter

    config, _ = load_config(DEFAULT, [])
    writer = AuditWriter(tmp_path, "run", config.audit, config.seed, background=background)
    assert writer.writes_behind is background
    done: list[str] = []

    def outer() -> None:
        writer.later(done.append, "inner")  # on the writer's thread: now, not after the rest
        done.append("outer")

    writer.later(outer)
    writer.later(done.append, "last")
    writer.wait()
    assert done == ["inner", "outer", "last"]
    writer.close()


def test_a_writer_whose_thread_failed_still_closes_its_files(tmp_path):
    from simulation.audit.writer import AuditWriter

    config, _ = load_config(DEFAULT, [])
    writer = AuditWriter(tmp_path, "run", config.audit, config.seed, background=True)

    def full_disk() -> None:
        raise OSError(28, "No space left on device")

    writer.later(full_disk)
    with pytest.raises(OSError, match="No space left on device"):
        writer.close()
    assert writer.traces is not None
    assert writer.traces.file is None
    assert not [t for t in threading.enumerate() if t.name.startswith("floodsim-audit")]


def _decision(proposed: str, executed: str, validation: Validation, cost: float) -> Decision:
    return Decision(1, Proposal(proposed), executed, validation, [], cost=cost)


def test_no_stream_is_written_at_level_off_even_for_a_language_model():
    assert audit_writer.stream_names("off", llm=True) == ()
    assert audit_writer.stream_names("minimal", llm=True)[-1] == audit_writer.LLM_STREAM
    assert audit_writer.LLM_STREAM not in audit_writer.stream_names("minimal", llm=False)


def test_a_state_lists_only_the_fields_changed_from_their_start():
    state = HouseholdState("H1", "owner", 5e4, 2e5, 5e4, "AE", 1.0, 1.0, has_insurance=True)
    assert audit_writer.changed_state(state) == {"has_insurance": True}


def test_a_standard_action_names_a_rejected_proposal_and_a_cost_to_the_cent():
    stood = _decision("buy_insurance", "buy_insurance", Validation(valid=True), 1234.5678)
    assert audit_writer._action(stood, "standard") == {
        "decision_skill": "buy_insurance",
        "cost": 1234.57,
    }
    rejected = _decision("elevate_house", "do_nothing", Validation(valid=False), 0.0)
    assert audit_writer._action(rejected, "standard") == {
        "decision_skill": "do_nothing",
        "proposed_skill": "elevate_house",
    }


def test_a_validation_with_warnings_alone_gives_them_below_full():
    warned = _decision("relocate", "relocate", Validation(True, (), ("a stretch",)), 0.0)
    assert audit_writer._validation(warned, full=False) == {
        "valid": True,
        "errors": [],
        "warnings": ["a stretch"],
    }


def test_a_written_item_keeps_an_amount_of_zero_and_its_pin():
    item = MemoryItem("H1", 1, "Year 1: a flood", 0.9, 1, ("flood",), "flood", True, (), 0.0)
    record = audit_writer._item(item)
    assert (record["amount"], record["pinned"]) == (0.0, True)
    assert "pinned" not in audit_writer._item(
        MemoryItem("H1", 2, "x", 0.5, 1, (), "other", False, (), None)
    )


def test_the_full_level_gives_probabilities_to_6_decimals_and_constructs_to_4(full_run):
    traces = lines(full_run.run_dir / "household_traces.jsonl")
    probabilities = [p for t in traces for p in t["reasoning"]["probabilities"].values()]
    values = [c["value"] for t in traces for c in t["reasoning"]["constructs"].values()]
    assert all(p == round(p, 6) for p in probabilities)
    assert any(p != round(p, 4) for p in probabilities)
    assert all(v == round(v, 4) for v in values)
    assert any(v != round(v, 3) for v in values)
