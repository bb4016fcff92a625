"""Whole audit lines against their JSON Schemas and themselves; damaged lines named when read."""

from __future__ import annotations

import copy
import gzip
import re
import shutil
from pathlib import Path

import fastjsonschema
import jsonschema
import orjson
import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

from simulation.analysis import metrics
from simulation.audit import LLM_STREAM, STREAMS, load_schema, readers
from simulation.audit.commands import summarize_run
from simulation.audit.conformance import (
    _validator,
    damaged_lines_named,
    first_damaged_line,
    line_problem,
)
from simulation.audit.readers import AuditReadError
from simulation.cli import main
from simulation.config import ConfigError, load_config
from simulation.decisions.llm.client import ERROR_STATUSES
from simulation.runner import run_simulation

ROOT = Path(__file__).resolve().parents[1]
DEFAULT = ROOT / "configs" / "default.yaml"
TARGETS = ROOT / "configs" / "targets" / "stylized_facts.yaml"
# Floods in years 2 and 4 give claims, damage memories and reflections to every stream.
WORLD = [
    "hazard.source=scripted",
    "hazard.kind=depth",
    "hazard.events={2: 3.0, 4: 1.0}",
    "memory.reflection.enabled=true",
]


def _run(root: Path, *overrides: str, count: int = 30, years: int = 5) -> Path:
    config, base = load_config(
        DEFAULT, [f"households.count={count}", f"years={years}", *WORLD, *overrides]
    )
    return run_simulation(config, base, root, progress=False).run_dir


@pytest.fixture(scope="module")
def standard_run(tmp_path_factory: pytest.TempPathFactory) -> Path:
    return _run(tmp_path_factory.mktemp("standard"))


@pytest.fixture(scope="module")
def full_run(tmp_path_factory: pytest.TempPathFactory) -> Path:
    return _run(tmp_path_factory.mktemp("full"), "audit.level=full", "audit.gzip=true", count=20)


def _records(path: Path) -> list[dict]:
    raw = gzip.decompress(path.read_bytes()) if path.suffix == ".gz" else path.read_bytes()
    return [orjson.loads(line) for line in raw.splitlines()]


def _damage(run_dir: Path, stream: str, index: int, change) -> tuple[Path, int, dict]:
    """Apply ``change`` to the ``index``-th line of ``stream`` that it applies to.

    ``change`` edits a record in place and returns False when the record has nothing to edit.
    Returns the file, the (1-based) number of the line changed and the line as changed.
    """
    path = next(run_dir.glob(f"{stream}.jsonl*"))
    records = _records(path)
    number = [i for i, r in enumerate(records) if change(copy.deepcopy(r)) is not False][index]
    change(records[number])
    raw = b"".join(orjson.dumps(r) + b"\n" for r in records)
    path.write_bytes(gzip.compress(raw) if path.suffix == ".gz" else raw)
    return path, number + 1, records[number]


def _copy(run_dir: Path, tmp_path: Path) -> Path:
    return Path(shutil.copytree(run_dir, tmp_path / run_dir.name))


def _set_tp(record: dict, value: object) -> bool:
    tp = record.get("reasoning", {}).get("constructs", {}).get("TP")
    if tp is None:
        return False
    tp["value"] = value
    return True


def _set_reflections(record: dict, value: object) -> bool:
    if not record["consolidation"]["reflections"]:
        return False
    record["consolidation"]["reflections"] = value
    return True


# --------------------------------------------------------------------------- line_problem
@pytest.mark.parametrize("fixture", ["standard_run", "full_run"])
def test_every_line_a_run_writes_matches_its_schema(request, fixture):
    run_dir = request.getfixturevalue(fixture)
    seen = 0
    for stream in STREAMS:
        for record in _records(next(run_dir.glob(f"{stream}.jsonl*"))):
            assert line_problem(record, stream) is None, (stream, record)
            seen += 1
    assert seen > 500
    assert first_damaged_line(run_dir) is None


@pytest.mark.parametrize(
    ("stream", "change", "problem"),
    [
        (
            "household_traces",
            lambda r: _set_tp(r, "x"),
            "reasoning.constructs.TP.value must be number (got 'x')",
        ),
        (
            "household_traces",
            lambda r: r["memory"].pop("retrieved"),
            "memory must contain ['retrieved'] properties",
        ),
        (
            "consolidation",
            lambda r: _set_reflections(r, [1]),
            "consolidation.reflections[0] must be object (got 1)",
        ),
        (
            "memory_updates",
            lambda r: r["memory_item"].__setitem__("importance", 1.5),
            "memory_item.importance must be smaller than or equal to 1 (got 1.5)",
        ),
        (
            "tool_invocations",
            lambda r: r.__setitem__("year", True),
            "year must be integer (got True)",
        ),
        # What floodsim guarantees beyond the types: appraisals in [0, 1], counters not negative.
        (
            "household_traces",
            lambda r: _set_tp(r, 3),
            "reasoning.constructs.TP.value must be smaller than or equal to 1 (got 3)",
        ),
        (
            "household_traces",
            lambda r: (
                "claims_paid" in r["state_before"] and r["state_before"].update(claims_paid=-1)
            ),
            "state_before.claims_paid must be bigger than or equal to 0 (got -1)",
        ),
        (
            "tool_invocations",
            lambda r: r["tool_invocation"]["parameters"].update(top_k="5"),
            "tool_invocation.parameters.top_k must be integer (got '5')",
        ),
        # Scores are weights (at least 0) times values in [0, 1].
        (
            "household_traces",
            lambda r: _first_retrieval(r) and r["memory"]["retrieval_scores"].__setitem__(0, -1),
            "memory.retrieval_scores[0] must be bigger than or equal to 0 (got -1)",
        ),
        (
            "tool_invocations",
            lambda r: (
                bool(r["tool_invocation"]["scores"])
                and r["tool_invocation"]["scores"].__setitem__(0, -0.5)
            ),
            "tool_invocation.scores[0] must be bigger than or equal to 0 (got -0.5)",
        ),
    ],
)
def test_a_line_problem_names_the_field_the_rule_and_the_value(
    standard_run, stream, change, problem
):
    records = _records(next(standard_run.glob(f"{stream}.jsonl*")))
    record = next(r for r in records if change(copy.deepcopy(r)) is not False)
    change(record)
    assert line_problem(record, stream) == problem


_JUNK = st.one_of(
    st.none(),
    st.booleans(),
    st.integers(-3, 3),
    st.floats(-2, 2, allow_nan=False),
    st.text(max_size=3),
    st.lists(st.integers(0, 2), max_size=2),
    st.dictionaries(st.sampled_from(["id", "a"]), st.integers(0, 2), max_size=2),
)


def _paths(value: object, prefix: tuple = ()) -> list[tuple]:
    if isinstance(value, dict):
        pairs = value.items()
    elif isinstance(value, list):
        pairs = enumerate(value)
    else:
        return []
    return [p for key, inner in pairs for p in [(*prefix, key), *_paths(inner, (*prefix, key))]]


@pytest.fixture(scope="module")
def sample_lines(standard_run, full_run) -> list[tuple[str, dict]]:
    """A few lines of every stream at both levels, the fullest first."""
    picked = []
    for run_dir in (standard_run, full_run):
        for stream in STREAMS:
            records = _records(next(run_dir.glob(f"{stream}.jsonl*")))
            records.sort(key=lambda r: -len(orjson.dumps(r)))
            picked += [(stream, r) for r in records[:3]]
    return picked


@settings(max_examples=300, deadline=None)
@given(data=st.data())
def test_the_compiled_validators_agree_with_jsonschema_on_damaged_lines(sample_lines, data):
    """The compiled validators judge a damaged line as the reference implementation does.

    (line_problem checks more than the schema: what it cannot say, tested below.)
    """
    stream, record = data.draw(st.sampled_from(sample_lines))
    record = copy.deepcopy(record)
    path = data.draw(st.sampled_from(_paths(record)))
    parent = record
    for key in path[:-1]:
        parent = parent[key]
    if isinstance(parent, dict) and data.draw(st.booleans()):
        del parent[path[-1]]
    else:
        parent[path[-1]] = data.draw(_JUNK)
    valid = jsonschema.Draft202012Validator(load_schema(stream)).is_valid(record)
    try:
        _validator(stream)(record)
    except fastjsonschema.JsonSchemaValueException:
        assert not valid, (path, record)
        assert line_problem(record, stream) is not None
    else:
        assert valid, (path, record)


def _first_retrieval(record: dict) -> bool:
    return bool(record["memory"]["retrieved"])


@pytest.mark.parametrize(
    ("stream", "change", "problem"),
    [
        (
            "household_traces",
            lambda r: _first_retrieval(r) and r["memory"]["retrieval_scores"].pop(),
            "memory.retrieval_scores has {n} entries for {m} retrieved items",
        ),
        (
            "household_traces",
            lambda r: _first_retrieval(r) and r["memory"]["retrieved"].__setitem__(0, "H9:1"),
            "memory.retrieved names 'H9:1', not an item of this household",
        ),
        (
            "tool_invocations",
            lambda r: r["tool_invocation"].update(
                result_count=r["tool_invocation"]["result_count"] + 1
            ),
            "tool_invocation.result_count is {m} for {n} results",
        ),
        (
            "tool_invocations",
            lambda r: (
                r["tool_invocation"]["result_count"] > 1
                and r["tool_invocation"]["parameters"].update(top_k=1)
            ),
            "tool_invocation.result_count is {m}, above parameters.top_k 1",
        ),
        (
            "tool_invocations",
            lambda r: r["tool_invocation"]["parameters"].update(current_year=r["year"] + 1),
            "tool_invocation.parameters.current_year is {year} in a line of year {line_year}",
        ),
        (
            "consolidation",
            lambda r: r["consolidation"].update(transferred_count=5),
            "consolidation.transferred_count is 5 for 0 transferred_items",
        ),
        (
            "memory_updates",
            lambda r: r["memory_item"].update(id="H9:0"),
            "memory_updates names 'H9:0', not an item of this household",
        ),
    ],
)
def test_a_line_that_disagrees_with_itself_is_named(standard_run, stream, change, problem):
    """What JSON Schema cannot say: lengths, counts, the call's year, whose items."""
    records = _records(next(standard_run.glob(f"{stream}.jsonl*")))
    record = next(r for r in records if change(copy.deepcopy(r)) is not False)
    change(record)
    memory = record.get("memory") or {}
    call = record.get("tool_invocation") or {}
    expected = problem.format(
        n=len(memory.get("retrieval_scores", call.get("result", ()))),
        m=len(memory.get("retrieved", ())) or call.get("result_count"),
        year=call.get("parameters", {}).get("current_year"),
        line_year=record["year"],
    )
    assert line_problem(record, stream) == expected


# A request line as the writer makes it (tests/test_llm_policy.py checks every line of LLM runs).
_CALL = {
    "schema_version": 1,
    "run_id": "r",
    "year": 3,
    "agent_id": "H00001",
    "attempt": 0,
    "request_hash": "0f" * 32,
    "status": "ok",
    "cached": False,
    "transport_attempts": 1,
    "prompt_tokens": 120,
    "completion_tokens": 30,
    "latency_s": 0.25,
}
_FAILED = {"status": "timeout", "prompt_tokens": None, "completion_tokens": None}
_FROM_CACHE = {"cached": True, "transport_attempts": 0, "latency_s": 0.0}


@pytest.mark.parametrize(
    ("change", "problem"),
    [
        ({"status": "teapot"}, "status must be one of ['ok', 'timeout', "),
        ({"request_hash": "abc"}, "request_hash must match pattern ^[0-9a-f]{64}$ (got 'abc')"),
        ({"prompt_tokens": -1}, "prompt_tokens must be bigger than or equal to 0 (got -1)"),
        (
            {**_FROM_CACHE, "status": "timeout"},
            "status is 'timeout' in a line of a reply from the cache",
        ),
        (
            {**_FROM_CACHE, "transport_attempts": 2},
            "transport_attempts is 2 in a line of a reply from the cache",
        ),
        (
            {**_FROM_CACHE, "latency_s": 1.5},
            "latency_s is 1.5 in a line of a reply from the cache",
        ),
        (
            {"transport_attempts": 0},
            "transport_attempts is 0 in a line of a reply from the endpoint",
        ),
        (
            {**_FAILED, "completion_tokens": 9},
            "completion_tokens is 9 in a line of a failed request (timeout)",
        ),
    ],
)
def test_an_llm_request_line_that_contradicts_its_status_is_named(change, problem):
    assert line_problem(_CALL, LLM_STREAM) is None
    for intact in (_FAILED, _FROM_CACHE, {**_FAILED, "transport_attempts": 0}):
        assert line_problem({**_CALL, **intact}, LLM_STREAM) is None
    assert line_problem({**_CALL, **change}, LLM_STREAM).startswith(problem)


def test_the_llm_schema_admits_every_status_the_client_reports():
    statuses = load_schema(LLM_STREAM)["properties"]["status"]["enum"]
    assert set(statuses) == {"ok", *ERROR_STATUSES}


def test_every_stream_has_a_validator():
    for stream in (*STREAMS, LLM_STREAM):
        assert line_problem({}, stream) is not None


# --------------------------------------------------------------------------- finding the line
def test_the_first_damaged_line_is_named_with_its_file_and_number(full_run, tmp_path):
    run_dir = _copy(full_run, tmp_path)
    path, number, _ = _damage(run_dir, "household_traces", 3, lambda r: _set_tp(r, [1]))
    assert first_damaged_line(run_dir) == (
        f"{path}: line {number} is malformed: reasoning.constructs.TP.value must be number "
        "(got [1])"
    )


def test_a_damaged_line_of_an_experiments_run_is_found(standard_run, tmp_path):
    runs = tmp_path / "experiment" / "runs"
    intact = Path(shutil.copytree(standard_run, runs / "a"))
    damaged = Path(shutil.copytree(standard_run, runs / "b"))
    path, number, _ = _damage(damaged, "consolidation", 0, lambda r: _set_reflections(r, "x"))
    assert first_damaged_line(intact) is None
    found = first_damaged_line(tmp_path / "experiment")
    assert (
        found
        == f"{path}: line {number} is malformed: consolidation.reflections must be array (got 'x')"
    )


def test_damage_the_readers_see_first_is_named_in_their_words(standard_run, tmp_path):
    run_dir = _copy(standard_run, tmp_path)
    path, number, _ = _damage(run_dir, "memory_updates", 0, lambda r: r.pop("update_type"))
    assert (
        first_damaged_line(run_dir) == f"{path}: line {number} is malformed: update_type is missing"
    )


# --------------------------------------------------------------------------- damaged_lines_named
def test_a_failure_on_a_damaged_line_becomes_an_error_naming_it(standard_run, tmp_path):
    run_dir = _copy(standard_run, tmp_path)
    path, number, _ = _damage(run_dir, "household_traces", 0, lambda r: _set_tp(r, "x"))
    with pytest.raises(AuditReadError) as caught, damaged_lines_named(run_dir):
        float("x")
    assert str(caught.value).startswith(f"{path}: line {number} is malformed: ")
    assert str(caught.value).endswith("`floodsim audit summarize` lists every such line of a run")
    assert isinstance(caught.value.__cause__, ValueError)


def test_a_failure_with_every_line_intact_is_not_blamed_on_the_data(standard_run):
    with pytest.raises(KeyError, match="a bug"), damaged_lines_named(standard_run):
        raise KeyError("a bug")


def test_floodsim_s_own_errors_pass_through_unchanged(standard_run, tmp_path):
    run_dir = _copy(standard_run, tmp_path)
    _damage(run_dir, "household_traces", 0, lambda r: _set_tp(r, "x"))
    error = ConfigError("years: must be positive")
    with pytest.raises(ConfigError) as caught, damaged_lines_named(run_dir):
        raise error
    assert caught.value is error


# --------------------------------------------------------------------------- the analyses
def _some_agent(run_dir: Path) -> str:
    return _records(next(run_dir.glob("household_traces.jsonl*")))[0]["agent_id"]


@pytest.mark.parametrize(
    ("analysis", "stream", "change"),
    [
        (metrics.tp_distribution, "household_traces", lambda r: _set_tp(r, "x")),
        (
            lambda run: metrics.household_decisions(run, _some_agent(run)),
            "household_traces",
            lambda r: r["reasoning"].update(constructs="TP high"),
        ),
        (
            readers.decisions_per_year,
            "household_traces",
            lambda r: r["action"].pop("decision_skill"),
        ),
        (
            readers.retrievals,
            "household_traces",
            lambda r: r["memory"].update(retrieved=3),
        ),
        (
            readers.consolidation_table,
            "consolidation",
            lambda r: r["consolidation"].update(evicted=3),
        ),
    ],
)
def test_an_analysis_that_fails_on_a_damaged_line_names_it(
    standard_run, tmp_path, analysis, stream, change
):
    """What a notebook calls says which line is damaged, as the commands do."""
    run_dir = _copy(standard_run, tmp_path)
    path, number, _ = _damage(run_dir, stream, 0, change)
    with pytest.raises(
        AuditReadError, match=f"^{re.escape(str(path))}: line {number} is malformed"
    ):
        analysis(run_dir)


# --------------------------------------------------------------------------- the commands
def _command(name: str, run_dir: Path, out: Path, line: dict) -> list[str]:
    """The arguments of command ``name``, reading the household and year of ``line``."""
    agent, year = line["agent_id"], str(line["year"])
    return {
        "report": ["report", str(run_dir), "--out", str(out)],
        "check-behaviour": [
            "check-behaviour", str(run_dir), "--targets", str(TARGETS), "--out", str(out)
        ],
        "audit memory": ["audit", "memory", str(run_dir), "--agent", agent, "--year", year],
    }[name]  # fmt: skip


@pytest.mark.parametrize(
    ("command", "stream", "change"),
    [
        # Each was a traceback: float() of text, a list looked up in a set, .get() of a string.
        ("report", "household_traces", lambda r: _set_tp(r, "x")),
        (
            "check-behaviour",
            "household_traces",
            lambda r: r["action"].__setitem__("decision_skill", []),
        ),
        ("audit memory", "consolidation", lambda r: _set_reflections(r, ["x"])),
    ],
)
def test_a_command_that_fails_on_a_damaged_line_exits_2_naming_it(
    standard_run, tmp_path, capsys, command, stream, change
):
    run_dir = _copy(standard_run, tmp_path)
    path, number, line = _damage(run_dir, stream, 0, change)
    code = main(_command(command, run_dir, tmp_path / "out", line))
    errors = [e for e in capsys.readouterr().err.splitlines() if not e.startswith("floodsim: warn")]
    assert code == 2
    assert len(errors) == 1
    assert errors[0].startswith(f"floodsim: error: {path}: line {number} is malformed: ")


def test_summarize_fails_the_schema_check_naming_the_line_and_counting_the_rest(
    standard_run, tmp_path, capsys
):
    run_dir = _copy(standard_run, tmp_path)
    _damage(run_dir, "household_traces", 0, lambda r: _set_tp(r, "x"))
    _damage(run_dir, "household_traces", 1, lambda r: _set_tp(r, None))
    path, number, _ = _damage(run_dir, "consolidation", 0, lambda r: _set_reflections(r, 7))
    assert main(["audit", "summarize", str(run_dir)]) == 1
    out = capsys.readouterr().out
    schema = next(line for line in out.splitlines() if "schema:" in line)
    # The streams are read a year at a time: year 1's traces before its year ends.
    assert schema.startswith(
        "  FAIL  schema: 3 line(s) break their stream's JSON Schema or disagree with themselves: "
        "household_traces.jsonl:"
    )
    assert f"{path.name}:{number}: consolidation.reflections must be array (got 7)" in schema
    assert "files: 4 stream(s) present and readable to the end" in out
    # The household of the damaged year end is left out of the replay, not failed by it.
    assert "  ok    memory replay: " in out


def test_summarize_without_the_schema_check_says_so_and_runs_the_others(
    standard_run, tmp_path, capsys
):
    run_dir = _copy(standard_run, tmp_path)
    _damage(run_dir, "household_traces", 0, lambda r: _set_tp(r, "x"))
    assert main(["audit", "summarize", "--no-schema", str(run_dir)]) == 0
    out = capsys.readouterr().out
    assert "  skip  schema: not checked (skipped on request: --no-schema)" in out
    assert "  ok    household-years: 30 households" in out
    assert "  ok    memory ids: every referenced id is written" in out


# --------------------------------------------------------------------------- progress
def test_reading_every_line_counts_them_on_a_bar_against_the_manifest(standard_run, capsys):
    traces = readers.listed_lines(readers.read_manifest(standard_run), "household_traces")
    assert traces == 150  # 30 households, 5 years
    assert first_damaged_line(standard_run, progress=True) is None
    searched = capsys.readouterr().err
    assert "looking for a damaged line in household_traces.jsonl:   0%|" in searched
    assert f"/{traces} [" in searched
    summarize_run(standard_run, progress=True)
    assert "checking consolidation.jsonl:   0%|" in capsys.readouterr().err


def test_no_bar_is_drawn_where_stderr_is_not_a_terminal(standard_run, capsys):
    first_damaged_line(standard_run)
    summarize_run(standard_run)
    assert capsys.readouterr().err == ""


def test_a_stream_s_lines_are_unknown_without_a_finished_run_s_manifest(standard_run, tmp_path):
    run_dir = _copy(standard_run, tmp_path)
    manifest = orjson.loads((run_dir / "manifest.json").read_bytes())
    del manifest["audit"]  # as while the run is going: the streams are listed when it ends
    (run_dir / "manifest.json").write_bytes(orjson.dumps(manifest))
    assert readers.listed_lines(readers.read_manifest(run_dir), "household_traces") is None
    assert readers.listed_lines(None, "household_traces") is None  # no readable manifest
    (run_dir / "manifest.json").unlink()
    assert first_damaged_line(run_dir, progress=True) is None  # counts without a total
