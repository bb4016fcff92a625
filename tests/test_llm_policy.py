"""The ``llm`` decision policy inside whole runs: what users of ``decision.policy: llm`` rely on.

Every test talks only to a FakeOpenAIServer it starts on 127.0.0.1 (or to a closed loopback
port), with small timeouts where the server stalls and a bounded number of requests (a few
households, one to three years). The server's responder reads the household's prompt and
answers deterministically, so each test knows which skill every household must end up executing
and checks the effect on the model, the metrics and every audit stream (validated against the
shipped JSON Schemas).
"""

from __future__ import annotations

import asyncio
import contextlib
import gc
import random
import re
import signal
import threading
import time
import warnings
from collections import Counter, defaultdict
from dataclasses import dataclass
from pathlib import Path
from typing import TYPE_CHECKING, Any

import numpy as np
import orjson
import pytest
from jsonschema import Draft202012Validator

import simulation.decisions.llm.policy as policy_module
from simulation.audit import LLM_STREAM, STREAMS, load_schema
from simulation.audit.commands import summarize_run
from simulation.audit.conformance import line_problem
from simulation.audit.readers import read_stream
from simulation.cli import main
from simulation.config import load_config
from simulation.decisions.llm.cache import CacheMiss, ResponseCache, is_failure
from simulation.decisions.llm.client import request_hash
from simulation.decisions.llm.policy import PROMPT_FIELDS, EndpointUnreachable, LLMRequest
from simulation.decisions.llm.testing import FakeOpenAIServer, Fault, closed_port
from simulation.runner import build_model, run_simulation

if TYPE_CHECKING:
    from collections.abc import Callable, Iterator

    from simulation.runner import RunResult

ROOT = Path(__file__).resolve().parents[1]
DEFAULT = ROOT / "configs" / "default.yaml"
SCENARIO = ROOT / "configs" / "scenarios" / "llm_households.yaml"
ALL_STREAMS = (*STREAMS, LLM_STREAM)
HASH = re.compile(r"\b[0-9a-f]{64}\b")
#: A test that runs longer than this is hung; SIGALRM turns the hang into a failure.
HANG_LIMIT_S = 30
#: The registry's default skill (skill_registry.yaml).
DEFAULT_SKILL = "do_nothing"


# -- guards ----------------------------------------------------------------------------------


@pytest.fixture(autouse=True)
def no_real_key(monkeypatch: pytest.MonkeyPatch) -> None:
    """Never send a developer's real key, even to the loopback server."""
    monkeypatch.delenv("OPENAI_API_KEY", raising=False)


@pytest.fixture(autouse=True)
def hang_guard() -> Iterator[None]:
    """Fail (instead of hanging the suite) when a test outlives HANG_LIMIT_S."""
    if not hasattr(signal, "SIGALRM") or threading.current_thread() is not threading.main_thread():
        yield
        return

    def expire(signum: int, frame: Any) -> None:
        raise TimeoutError(f"test still running after {HANG_LIMIT_S} s: hung")

    previous = signal.signal(signal.SIGALRM, expire)
    signal.setitimer(signal.ITIMER_REAL, HANG_LIMIT_S)
    try:
        yield
    finally:
        signal.setitimer(signal.ITIMER_REAL, 0)
        signal.signal(signal.SIGALRM, previous)


# -- prompts and replies ---------------------------------------------------------------------


@dataclass(frozen=True, slots=True)
class Prompt:
    """What the responder reads from a request: the household's facts and any feedback."""

    agent_id: str
    year: int
    owner: bool
    zone: str
    insured: bool
    options: tuple[str, ...]
    feedback: tuple[str, ...]


def read_prompt(body: dict[str, Any]) -> Prompt:
    messages = body["messages"]
    user = messages[1]["content"]
    section = user.split("=== WHAT YOU CAN DO THIS YEAR ===", 1)[1].strip().split("\n\n", 1)[0]
    return Prompt(
        agent_id=re.search(r"household (H\d+)", user)[1],
        year=int(re.search(r"It is year (\d+)", user)[1]),
        owner="You own your home" in user,
        zone=re.search(r"Flood zone: (\w+)", user)[1],
        insured="you hold a policy this year" in user,
        options=tuple(re.findall(r"^- ([a-z_]+): ", section, re.MULTILINE)),
        feedback=tuple(m["content"] for m in messages[2:] if m["role"] == "user"),
    )


def reply(skill: str, tp: str = "M", cp: str = "M") -> dict[str, Any]:
    return {
        "skill": skill,
        "parameters": {},
        "constructs": {
            "TP": {"level": tp, "explanation": f"threat is {tp}"},
            "CP": {"level": cp, "explanation": f"coping is {cp}"},
        },
        "justification": f"I choose {skill}.",
    }


#: Appraisal value the trace must record for each level (the middle of its fifth).
VALUES = {"VL": 0.1, "L": 0.3, "M": 0.5, "H": 0.7, "VH": 0.9}


def floodplain_choice(prompt: Prompt) -> tuple[str, str, str]:
    """Skill, TP and CP: floodplain owners insure, floodplain renters insure contents."""
    if prompt.zone == "AE" and "buy_insurance" in prompt.options:
        return "buy_insurance", "VH", "H"
    if prompt.zone == "AE" and "buy_contents_insurance" in prompt.options:
        return "buy_contents_insurance", "M", "L"
    return "do_nothing", "VL", "M"


class Responder:
    """A thread-safe responder: records every prompt (the server counts requests in flight).

    Args:
        choose: ``choose(prompt) -> reply`` (a dict sent as JSON, or text).
        delay_s: ``delay_s(prompt) -> seconds`` to hold the request (models a slow model).
    """

    def __init__(
        self,
        choose: Callable[[Prompt], Any] | None = None,
        delay_s: Callable[[Prompt], float] | None = None,
    ) -> None:
        self.choose = choose or (lambda p: reply(*floodplain_choice(p)))
        self.delay_s = delay_s
        self.lock = threading.Lock()
        self.prompts: list[Prompt] = []

    def __call__(self, body: dict[str, Any]) -> Any:
        prompt = read_prompt(body)
        with self.lock:
            self.prompts.append(prompt)
        if self.delay_s is not None:
            time.sleep(self.delay_s(prompt))
        return self.choose(prompt)


# -- runs and streams ------------------------------------------------------------------------


def llm_overrides(
    base_url: str,
    cache: Path,
    *extra: str,
    count: int = 8,
    years: int = 1,
    retries: int = 1,
    timeout_s: float = 5.0,
    mode: str = "record",
) -> list[str]:
    # timeout_s: generous, as no test waits it out (those whose server stalls pass TIMEOUT_S).
    # At 0.5 s a reply on a loaded machine could time out and be retried, and a test that
    # counts HTTP attempts failed.
    return [
        f"households.count={count}",
        f"years={years}",
        "decision.policy=llm",
        f"decision.llm.base_url={base_url}",
        f"decision.llm.mode={mode}",
        f"decision.llm.cache={cache}",
        f"decision.llm.timeout_s={timeout_s}",
        f"decision.llm.retries={retries}",
        "audit.timestamps=false",
        *extra,
    ]


def simulate(
    tmp_path: Path,
    base_url: str,
    *extra: str,
    out: str = "out",
    cache: Path | None = None,
    run_id: str | None = None,
    **options: Any,
) -> RunResult:
    cache = cache or tmp_path / "cache.sqlite"
    config, base = load_config(DEFAULT, llm_overrides(base_url, cache, *extra, **options))
    return run_simulation(config, base, tmp_path / out, progress=False, run_id=run_id)


_VALIDATORS: dict[str, Draft202012Validator] = {}


def validator(stream: str) -> Draft202012Validator:
    if stream not in _VALIDATORS:
        schema = load_schema(stream)
        Draft202012Validator.check_schema(schema)
        _VALIDATORS[stream] = Draft202012Validator(schema)
    return _VALIDATORS[stream]


def streams(run_dir: Path) -> dict[str, list[dict[str, Any]]]:
    """Every stream of a run, each line checked against the stream's JSON Schema and itself."""
    found: dict[str, list[dict[str, Any]]] = {}
    for name in ALL_STREAMS:
        path = run_dir / f"{name}.jsonl"
        assert path.is_file(), f"{name}.jsonl missing"
        lines = [orjson.loads(line) for line in path.read_bytes().splitlines()]
        for line in lines:
            errors = sorted(validator(name).iter_errors(line), key=lambda e: e.json_path)
            assert not errors, f"{name}: {errors[0].json_path}: {errors[0].message} in {line}"
            assert line_problem(line, name) is None, line  # and what a schema cannot say
        found[name] = lines
    return found


def by_agent(lines: list[dict[str, Any]]) -> dict[str, list[dict[str, Any]]]:
    grouped: dict[str, list[dict[str, Any]]] = defaultdict(list)
    for line in lines:
        grouped[line["agent_id"]].append(line)
    return grouped


def body_hash(body: dict[str, Any]) -> str:
    """The request hash of a body as the server received it."""
    return request_hash(
        body["model"], body["messages"], body["temperature"], body.get("seed"), body["max_tokens"]
    )


def words(body: dict[str, Any]) -> int:
    """The fake server's prompt token count: whitespace-separated words of all messages."""
    return sum(len(m["content"].split()) for m in body["messages"])


def column(result: RunResult, name: str) -> list[float]:
    return result.metrics[name].tolist()


def assert_no_complete_run(out_root: Path, missing_hash: str | None = None) -> None:
    """A stopped run leaves nothing that looks finished (at most a failed, resumable run)."""
    for manifest_path in out_root.rglob("manifest.json") if out_root.exists() else ():
        manifest = orjson.loads(manifest_path.read_bytes())
        assert manifest["status"] != "complete", manifest_path
        assert not (manifest_path.parent / "model_years.csv").exists()
        if missing_hash is not None:
            assert missing_hash in manifest["error"]


# -- 1. happy path ---------------------------------------------------------------------------


def test_chosen_skills_are_executed_and_audited(tmp_path: Path) -> None:
    responder = Responder()
    with FakeOpenAIServer(responder=responder) as server:
        result = simulate(tmp_path, server.base_url, count=30, years=2)
        requests = server.requests
    data = streams(result.run_dir)
    traces, calls = data["household_traces"], data[LLM_STREAM]
    model = result.model

    # One request per household-year, no key sent (none configured), all answered.
    assert len(requests) == 30 * 2 == len(responder.prompts)
    assert all(r.authorization is None for r in requests)
    expected = {(p.agent_id, p.year): floodplain_choice(p) for p in responder.prompts}
    assert len(expected) == 60
    skills = Counter(skill for skill, _, _ in expected.values())
    assert skills["buy_insurance"] > 0, "no floodplain owner could insure: test is vacuous"
    assert skills["do_nothing"] > 0

    # Traces: the responder's skill executed, its levels recorded, a clean validation.
    assert len(traces) == 60
    for trace in traces:
        skill, tp, cp = expected[trace["agent_id"], trace["year"]]
        assert trace["action"]["decision_skill"] == skill
        assert "proposed_skill" not in trace["action"]
        assert trace["reasoning"]["constructs"] == {
            "TP": {"level": tp, "value": VALUES[tp]},
            "CP": {"level": cp, "value": VALUES[cp]},
        }
        assert trace["validation"] == {"valid": True, "errors": [], "warnings": [], "retries": 0}
        if trace["year"] == 1 and skill == "buy_insurance":
            assert trace["state_after"] == {"has_insurance": True}
        if trace["year"] == 1 and skill == "buy_contents_insurance":
            assert trace["state_after"] == {"has_contents_insurance": True}
    levels_seen = {c["level"] for t in traces for c in t["reasoning"]["constructs"].values()}
    assert levels_seen == set(VALUES)

    # State: this year's purchase holds, anything else lapsed; next year's prompt knew it.
    for household in model.households:
        state = household.state
        last = expected[state.agent_id, 2][0]
        assert state.has_insurance == (last == "buy_insurance")
        assert state.has_contents_insurance == (last == "buy_contents_insurance")
        bought = expected[state.agent_id, 1][0] in {"buy_insurance", "buy_contents_insurance"}
        year2 = next(p for p in responder.prompts if p.agent_id == state.agent_id and p.year == 2)
        assert year2.insured == bought

    # Metrics: decision counts and mean TP come from the replies.
    for year in (1, 2):
        chosen = [v for (_, y), v in expected.items() if y == year]
        row = result.metrics.iloc[year - 1]
        assert row["decisions_buy_insurance"] == sum(
            s in {"buy_insurance", "buy_contents_insurance"} for s, _, _ in chosen
        )
        assert row["decisions_do_nothing"] == sum(s == "do_nothing" for s, _, _ in chosen)
        assert row["mean_tp"] == pytest.approx(sum(VALUES[tp] for _, tp, _ in chosen) / 30)
        assert row["invalid_proposals"] == 0

    # llm_calls: one line per request, hashed as sent, token counts as the server reported.
    assert len(calls) == len(requests)
    sent = {body_hash(r.body): r.body for r in requests}
    assert {c["request_hash"] for c in calls} == set(sent)
    for call in calls:
        assert call["status"] == "ok"
        assert call["attempt"] == 0
        assert call["cached"] is False
        assert call["transport_attempts"] == 1
        assert "latency_s" not in call  # audit.timestamps is false
        assert call["prompt_tokens"] == words(sent[call["request_hash"]])
        assert call["completion_tokens"] > 0
    assert Counter(c["agent_id"] for c in calls) == Counter(
        {h.state.agent_id: 2 for h in model.households}
    )


def test_the_trail_tools_take_in_the_llm_calls_stream(tmp_path: Path) -> None:
    with FakeOpenAIServer(responder=Responder()) as server:
        result = simulate(tmp_path, server.base_url, count=10, years=2)
    summary = summarize_run(result.run_dir)
    assert summary.ok, summary.format()
    assert summary.streams[LLM_STREAM].lines == 10 * 2
    assert "llm_calls" in summary.format()
    assert len(read_stream(result.run_dir, LLM_STREAM)) == 10 * 2


def test_latency_is_logged_only_with_timestamps(tmp_path: Path) -> None:
    with FakeOpenAIServer(latency_s=0.02) as server:
        result = simulate(tmp_path, server.base_url, "audit.timestamps=true", count=4)
    calls = streams(result.run_dir)[LLM_STREAM]
    assert len(calls) == 4
    assert all(c["latency_s"] >= 0.02 and "timestamp" in c for c in calls)


def test_live_mode_creates_no_cache_and_asks_every_time(tmp_path: Path) -> None:
    cache = tmp_path / "live.sqlite"
    with FakeOpenAIServer() as server:
        simulate(tmp_path, server.base_url, mode="live", cache=cache, count=4, out="a")
        simulate(tmp_path, server.base_url, mode="live", cache=cache, count=4, out="b")
        assert len(server.requests) == 8
    assert not cache.exists()


def test_an_appraisal_the_reply_does_not_state_is_left_out_not_taken_as_medium(
    tmp_path: Path,
) -> None:
    def choose(prompt: Prompt) -> dict[str, Any]:
        if prompt.owner:  # states no appraisal at all
            return {"skill": "do_nothing", "justification": "I wait."}
        answer = reply("do_nothing", tp="H")
        answer["constructs"]["CP"]["level"] = "5"  # not a level
        return answer

    with FakeOpenAIServer(responder=Responder(choose)) as server:
        result = simulate(tmp_path, server.base_url, count=12)
    traces = streams(result.run_dir)["household_traces"]
    owners = {h.state.agent_id for h in result.model.households if h.state.tenure == "owner"}
    assert 0 < len(owners) < 12
    for trace in traces:
        constructs = trace["reasoning"]["constructs"]
        if trace["agent_id"] in owners:
            assert constructs == {}
        else:
            assert constructs == {"TP": {"level": "H", "value": VALUES["H"]}}
    # The year's mean threat appraisal is the renters', who stated one.
    assert column(result, "mean_tp") == [pytest.approx(VALUES["H"])]


def test_the_prompt_checked_at_load_gets_values_of_the_types_a_run_gives() -> None:
    # A format spec is checked at load against a sample household: its values must have the
    # types a run's households give, or the check would pass specs a run then refuses.
    config, base = load_config(DEFAULT, ["households.count=30"])
    model = build_model(config, base)
    context = model._decision_context(1)
    for household in model.households:
        real = policy_module._prompt_values(
            LLMRequest(household.state.agent_id, 1, household.state, [], [], {}, context)
        )
        sample = policy_module._prompt_values(policy_module._SAMPLE_REQUEST)
        assert {k: type(v) for k, v in real.items()} == {k: type(v) for k, v in sample.items()}
        assert real.keys() == PROMPT_FIELDS


# -- 2. governance with feedback -------------------------------------------------------------


def test_rejected_reply_is_fed_back_and_the_valid_retry_executes(tmp_path: Path) -> None:
    def choose(prompt: Prompt) -> dict[str, Any]:
        if not prompt.feedback:
            # Owners name a skill that does not exist; renters one they may not use.
            return reply("build_a_moat" if prompt.owner else "elevate_house")
        return reply(*floodplain_choice(prompt))

    responder = Responder(choose)
    with FakeOpenAIServer(responder=responder) as server:
        result = simulate(tmp_path, server.base_url, count=12, retries=1)
        requests = server.requests
    data = streams(result.run_dir)
    model = result.model
    owners = {h.state.agent_id for h in model.households if h.state.tenure == "owner"}
    assert owners, "need owners and renters"
    assert len(owners) < 12, "need owners and renters"

    assert len(requests) == 24
    per_agent = defaultdict(list)
    for request in requests:
        per_agent[read_prompt(request.body).agent_id].append(request.body)
    for agent_id, bodies in per_agent.items():
        first, second = sorted(bodies, key=lambda b: len(b["messages"]))
        assert len(first["messages"]) == 2
        # The retry continues the conversation: the rejected answer, then the feedback.
        assert second["messages"][:2] == first["messages"]
        assert second["messages"][2]["role"] == "assistant"
        rejected = "build_a_moat" if agent_id in owners else "elevate_house"
        assert orjson.loads(second["messages"][2]["content"])["skill"] == rejected
        feedback = second["messages"][3]
        assert feedback["role"] == "user"
        assert feedback["content"].startswith("Your answer was not accepted: ")
        # An unknown skill is named as such; a known one gets the registry's own reason.
        reason = (
            f"unknown skill {rejected!r}"
            if agent_id in owners
            else "not eligible: tenure 'renter' not in [owner]"
        )
        assert reason in feedback["content"]
        options = read_prompt(first).options
        assert f"Choose one of: {', '.join(options)}." in feedback["content"]
        # Only the household's own options: a renter is not offered the owners' skills.
        assert feedback["content"].lower().count("choose one of") == 1
        assert rejected not in options

    expected = {p.agent_id: floodplain_choice(p) for p in responder.prompts if p.feedback}
    for trace in data["household_traces"]:
        skill, tp, _ = expected[trace["agent_id"]]
        assert trace["action"]["decision_skill"] == skill
        assert trace["reasoning"]["constructs"]["TP"]["level"] == tp
        assert trace["validation"] == {"valid": True, "errors": [], "warnings": [], "retries": 1}
    for household in model.households:
        skill = expected[household.state.agent_id][0]
        assert household.state.has_insurance == (skill == "buy_insurance")
        assert household.state.has_contents_insurance == (skill == "buy_contents_insurance")
        assert household.last_decision.retries == 1
    assert column(result, "invalid_proposals") == [0]

    calls = by_agent(data[LLM_STREAM])
    for agent_calls in calls.values():
        assert [c["attempt"] for c in agent_calls] == [0, 1]
        assert [c["status"] for c in agent_calls] == ["ok", "ok"]
        assert agent_calls[0]["request_hash"] != agent_calls[1]["request_hash"]


# -- 3. exhausted retries --------------------------------------------------------------------


def test_exhausted_retries_fall_back_to_the_default_skill(tmp_path: Path) -> None:
    def choose(prompt: Prompt) -> dict[str, Any]:
        return reply("build_a_moat") if prompt.owner else reply(*floodplain_choice(prompt))

    with FakeOpenAIServer(responder=Responder(choose)) as server:
        result = simulate(tmp_path, server.base_url, count=12, retries=2)
        n_requests = len(server.requests)
    data = streams(result.run_dir)
    households = result.model.households
    owners = {h.state.agent_id for h in households if h.state.tenure == "owner"}
    assert owners
    assert len(owners) < 12
    assert n_requests == 3 * len(owners) + (12 - len(owners))

    for trace in data["household_traces"]:
        validation = trace["validation"]
        if trace["agent_id"] not in owners:
            assert validation["valid"] is True
            continue
        assert trace["action"] == {
            "decision_skill": DEFAULT_SKILL,
            "proposed_skill": "build_a_moat",
        }
        assert trace["reasoning"]["constructs"] == {}
        assert validation["valid"] is False
        assert validation["retries"] == 2
        assert len(validation["errors"]) == 1
        assert validation["errors"] == ["unknown skill 'build_a_moat'"]
        assert validation["warnings"] == [f"used default skill {DEFAULT_SKILL!r}"]
    for household in households:
        if household.state.agent_id in owners:
            assert household.last_decision.skill_id == DEFAULT_SKILL
            assert household.last_decision.proposed_skill_id == "build_a_moat"
            assert household.last_decision.valid is False
            assert not household.state.has_insurance
            assert household.adopted_this_year is None
    assert column(result, "invalid_proposals") == [len(owners)]
    assert column(result, "decisions_do_nothing")[0] >= len(owners)
    for agent_id, agent_calls in by_agent(data[LLM_STREAM]).items():
        attempts = [0, 1, 2] if agent_id in owners else [0]
        assert [c["attempt"] for c in agent_calls] == attempts
        assert all(c["status"] == "ok" for c in agent_calls)


def test_a_fallback_trace_names_the_skill_the_model_proposed(tmp_path: Path) -> None:
    # Odd households insist on what they may not do: owners on a skill that does not exist,
    # renters on one only owners may take. Even households answer validly.
    def rejected(prompt: Prompt) -> str | None:
        if int(prompt.agent_id[1:]) % 2 == 0:
            return None
        return "fly_away" if prompt.owner else "elevate_house"

    def choose(prompt: Prompt) -> dict[str, Any]:
        skill = rejected(prompt)
        return reply(*floodplain_choice(prompt)) if skill is None else reply(skill)

    responder = Responder(choose)
    with FakeOpenAIServer(responder=responder) as server:
        result = simulate(tmp_path, server.base_url, count=30, years=3, retries=1)
    traces = streams(result.run_dir)["household_traces"]
    expected = {(p.agent_id, p.year): rejected(p) for p in responder.prompts}
    assert set(expected.values()) == {None, "fly_away", "elevate_house"}, "test is vacuous"

    # Invalid: the default skill executed, the model's last proposal named beside it (the rest
    # of the record as before). Valid: no proposed_skill at the standard level.
    assert len(traces) == 90
    for trace in traces:
        skill = expected[trace["agent_id"], trace["year"]]
        if skill is None:
            assert "proposed_skill" not in trace["action"]
            assert trace["validation"]["valid"] is True
        else:
            assert trace["action"] == {"decision_skill": DEFAULT_SKILL, "proposed_skill": skill}
            assert trace["reasoning"]["constructs"] == {}
            assert trace["validation"]["valid"] is False
            assert trace["validation"]["retries"] == 1
            assert trace["validation"]["warnings"] == [f"used default skill {DEFAULT_SKILL!r}"]

    # The household's summary agrees, and each fallback is counted once.
    for household in result.model.households:
        summary = household.last_decision
        skill = expected[household.state.agent_id, 3]
        assert summary.proposed_skill_id == (summary.skill_id if skill is None else skill)
        assert summary.valid is (skill is None)
    invalid = Counter(year for (_, year), skill in expected.items() if skill is not None)
    assert column(result, "invalid_proposals") == [invalid[1], invalid[2], invalid[3]]


# -- 4. transport faults ---------------------------------------------------------------------


class FirstPerAgent:
    """Fault callable: the first request of each household gets ``spec``; all are timed."""

    def __init__(self, spec: Any) -> None:
        self.spec = spec
        self.arrivals: dict[str, list[float]] = defaultdict(list)

    def __call__(self, index: int, body: Any) -> Any:
        agent_id = read_prompt(body).agent_id
        self.arrivals[agent_id].append(time.monotonic())
        return self.spec if len(self.arrivals[agent_id]) == 1 else None


TIMEOUT_S = 0.3  # per attempt; faults that stall, stall for longer

RECOVERED = {
    # name: (fault of each household's first request, least gap before the retry in s)
    "timeout": (Fault("timeout", delay_s=2.0), TIMEOUT_S),
    "429-retry-after": (Fault("rate_limit", retry_after=1), 0.9),
    "500": (500, 0.4),
    "503": (503, 0.4),
    "malformed-body": ("malformed", 0.4),
    "missing-choices": ("missing_choices", 0.4),
    "connection-close": ("connection_close", 0.4),
}


@pytest.mark.parametrize("name", list(RECOVERED))
def test_transport_fault_then_success(tmp_path: Path, name: str) -> None:
    spec, least_gap = RECOVERED[name]
    faults = FirstPerAgent(spec)
    started = time.perf_counter()
    with FakeOpenAIServer(faults=faults) as server:
        result = simulate(tmp_path, server.base_url, count=6, retries=1, timeout_s=TIMEOUT_S)
        n_requests = len(server.requests)
    assert time.perf_counter() - started < 4.0
    data = streams(result.run_dir)

    assert n_requests == 12
    for arrivals in faults.arrivals.values():
        assert len(arrivals) == 2
        assert arrivals[1] - arrivals[0] >= least_gap  # backoff, or the server's Retry-After
    for call in data[LLM_STREAM]:
        assert call["status"] == "ok"
        assert call["transport_attempts"] == 2
        assert call["attempt"] == 0
        assert HASH.fullmatch(call["request_hash"])
    for trace in data["household_traces"]:
        # Transport retries are not validation retries.
        assert trace["validation"] == {"valid": True, "errors": [], "warnings": [], "retries": 0}
    assert column(result, "invalid_proposals") == [0]


FAILED = {
    # name: (fault of every request, status recorded)
    "timeout": (Fault("timeout", delay_s=2.0), "timeout"),
    "429": (Fault("rate_limit", retry_after=0.05), "rate_limited"),
    "500": (500, "server_error"),
    "503": (503, "server_error"),
    "malformed-body": ("malformed", "malformed_response"),
    "connection-close": ("connection_close", "connection_error"),
    "400": (400, "http_error"),
}


@pytest.mark.parametrize("name", list(FAILED))
def test_transport_fault_beyond_retries_is_audited(tmp_path: Path, name: str) -> None:
    # The server answers every request of the year badly, or drops it: each household falls
    # back, and the run goes on (an endpoint with nothing listening stops it: section 4b).
    spec, status = FAILED[name]
    retries = 1
    transport_attempts = 1 if status == "http_error" else retries + 1  # 4xx: no retry
    started = time.perf_counter()
    with FakeOpenAIServer(faults=lambda i, b: spec) as server:
        result = simulate(tmp_path, server.base_url, count=6, retries=retries, timeout_s=TIMEOUT_S)
        assert len(server.requests) == 6 * transport_attempts
    assert time.perf_counter() - started < 4.0
    data = streams(result.run_dir)

    calls = data[LLM_STREAM]
    assert len(calls) == 6
    for call in calls:
        assert call["status"] == status
        assert call["attempt"] == 0
        assert call["transport_attempts"] == transport_attempts
        assert call["cached"] is False
        assert call["prompt_tokens"] is None
        assert call["completion_tokens"] is None
    for trace in data["household_traces"]:
        assert trace["action"] == {"decision_skill": DEFAULT_SKILL}
        validation = trace["validation"]
        assert validation["valid"] is False
        assert len(validation["errors"]) == 1
        assert validation["errors"][0].startswith(f"llm call failed ({status}): ")
        assert validation["warnings"] == [f"used default skill {DEFAULT_SKILL!r}"]
        assert validation["retries"] == 0
    assert all(h.last_decision.skill_id == DEFAULT_SKILL for h in result.model.households)
    assert column(result, "invalid_proposals") == [6]
    assert column(result, "decisions_do_nothing") == [6]
    with ResponseCache(tmp_path / "cache.sqlite", read_only=True) as cache:
        # The failure itself is recorded, so that a replay takes the same fallback.
        assert len(cache) == 6
        assert all(is_failure(cache.get(c["request_hash"]).content) for c in calls)


def test_a_year_with_some_failed_requests_falls_back_for_those_and_goes_on(
    tmp_path: Path,
) -> None:
    failing = {"H00001": 500, "H00002": "connection_close", "H00003": 503}

    def faults(index: int, body: Any) -> Any:
        return failing.get(read_prompt(body).agent_id)

    with FakeOpenAIServer(faults=faults) as server:
        result = simulate(tmp_path, server.base_url, count=6, years=2, timeout_s=TIMEOUT_S)
    assert orjson.loads((result.run_dir / "manifest.json").read_bytes())["status"] == "complete"
    statuses = {(c["agent_id"], c["status"]) for c in streams(result.run_dir)[LLM_STREAM]}
    assert statuses == {
        *((agent, "server_error") for agent in ("H00001", "H00003")),
        ("H00002", "connection_error"),
        *((f"H0000{n}", "ok") for n in range(4, 7)),
    }
    assert column(result, "invalid_proposals") == [3, 3]


# -- 4b. an endpoint with nothing listening --------------------------------------------------


def unreachable(tmp_path: Path, mode: str = "record", **options: Any) -> tuple[str, str]:
    """Run against a closed port; return its URL and the error that stopped the run."""
    base_url = f"http://127.0.0.1:{closed_port()}/v1"
    with pytest.raises(EndpointUnreachable) as caught:
        simulate(tmp_path, base_url, mode=mode, timeout_s=TIMEOUT_S, **options)
    return base_url, str(caught.value)


@pytest.mark.parametrize("mode", ["record", "live"])
def test_a_year_whose_requests_all_find_nothing_listening_stops_the_run(
    tmp_path: Path, mode: str
) -> None:
    started = time.perf_counter()
    base_url, message = unreachable(tmp_path, mode, count=6, years=3)
    assert time.perf_counter() - started < 4.0  # refused at once: no timeout waited for
    assert message.startswith(
        f"config: decision.llm.base_url: no reply from {base_url} for any of the 6 requests "
        "of year 1 (connection refused); is the server running?"
    )
    assert_no_complete_run(tmp_path / "out")
    (manifest_path,) = (tmp_path / "out").rglob("manifest.json")
    manifest = orjson.loads(manifest_path.read_bytes())
    assert manifest["status"] == "failed"
    assert manifest["year_reached"] == 0
    assert manifest["error"].startswith("EndpointUnreachable: config: decision.llm.base_url: ")


def test_a_single_unreachable_request_is_named_as_such(tmp_path: Path) -> None:
    base_url, message = unreachable(tmp_path, count=1)
    assert f"no reply from {base_url} for the request of year 1 (connection refused)" in message


def test_a_year_answered_from_the_cache_goes_on_and_the_next_one_stops(tmp_path: Path) -> None:
    cache = tmp_path / "c.sqlite"
    with FakeOpenAIServer() as server:
        simulate(tmp_path, server.base_url, cache=cache, out="rec", count=6, years=1)
    base_url, message = unreachable(tmp_path, cache=cache, count=6, years=3)
    assert f"no reply from {base_url} for any of the 6 requests of year 2 " in message
    (manifest_path,) = (tmp_path / "out").rglob("manifest.json")
    manifest = orjson.loads(manifest_path.read_bytes())
    assert (manifest["status"], manifest["year_reached"]) == ("failed", 1)


def test_a_year_answered_partly_from_the_cache_is_not_unreachable(tmp_path: Path) -> None:
    # Recorded with half of the households asking the model, then run with all of them and
    # nothing listening: the recorded half is answered, the other half falls back.
    cache = tmp_path / "c.sqlite"
    share = "decision.llm_share=0.5"
    with FakeOpenAIServer() as server:
        recorded = simulate(tmp_path, server.base_url, share, cache=cache, out="rec", count=12)
        asked = len(server.requests)
    assert 0 < asked < 12
    result = simulate(
        tmp_path, f"http://127.0.0.1:{closed_port()}/v1", cache=cache, count=12, timeout_s=0.3
    )
    assert orjson.loads((result.run_dir / "manifest.json").read_bytes())["status"] == "complete"
    calls = streams(result.run_dir)[LLM_STREAM]
    assert sum(c["cached"] for c in calls) == asked
    assert sum(c["status"] == "connection_error" for c in calls) == 12 - asked
    assert column(result, "invalid_proposals") == [12 - asked]
    assert column(recorded, "invalid_proposals") == [0]


def test_replay_needs_no_endpoint(tmp_path: Path) -> None:
    cache = tmp_path / "c.sqlite"
    with FakeOpenAIServer() as server:
        recorded = simulate(tmp_path, server.base_url, cache=cache, out="rec", run_id="r")
    replayed = simulate(
        tmp_path, f"http://127.0.0.1:{closed_port()}/v1", cache=cache, mode="replay", run_id="r"
    )
    for name in ("model_years.csv", "household_traces.jsonl"):
        assert (recorded.run_dir / name).read_bytes() == (replayed.run_dir / name).read_bytes()


@pytest.mark.parametrize("kind", ["prose", "code_fence"])
def test_wrapped_json_replies_are_accepted(tmp_path: Path, kind: str) -> None:
    with FakeOpenAIServer(responder=Responder(), faults=lambda i, b: kind) as server:
        result = simulate(tmp_path, server.base_url, count=6)
        n_requests = len(server.requests)
    data = streams(result.run_dir)
    assert n_requests == 6
    assert all(c["status"] == "ok" for c in data[LLM_STREAM])
    for trace in data["household_traces"]:
        assert trace["validation"] == {"valid": True, "errors": [], "warnings": [], "retries": 0}
        assert trace["reasoning"]["constructs"]["TP"]["level"] in VALUES


def test_invalid_json_reply_gets_feedback_and_a_second_chance(tmp_path: Path) -> None:
    faults = FirstPerAgent("invalid_json")
    responder = Responder()
    with FakeOpenAIServer(responder=responder, faults=faults) as server:
        result = simulate(tmp_path, server.base_url, count=6, retries=1)
        requests = server.requests
    data = streams(result.run_dir)
    assert len(requests) == 12
    retried = [r.body for r in requests if len(r.body["messages"]) > 2]
    assert len(retried) == 6
    for body in retried:
        truncated = body["messages"][2]["content"]
        with pytest.raises(orjson.JSONDecodeError):
            orjson.loads(truncated)
        assert body["messages"][3]["content"].startswith("Your answer was not accepted: ")
    expected = {p.agent_id: floodplain_choice(p)[0] for p in responder.prompts if p.feedback}
    for trace in data["household_traces"]:
        assert trace["validation"]["retries"] == 1
        assert trace["validation"]["valid"] is True
        assert trace["action"]["decision_skill"] == expected[trace["agent_id"]]
    for agent_calls in by_agent(data[LLM_STREAM]).values():
        assert [(c["attempt"], c["status"]) for c in agent_calls] == [(0, "ok"), (1, "ok")]


def test_transport_failure_on_a_feedback_retry_is_audited(tmp_path: Path) -> None:
    # First reply rejected, the feedback request then fails for good: the default skill.
    def faults(index: int, body: Any) -> Any:
        return 500 if len(body["messages"]) > 2 else "unknown_skill"

    with FakeOpenAIServer(faults=faults) as server:
        result = simulate(tmp_path, server.base_url, count=4, retries=1, timeout_s=TIMEOUT_S)
        assert len(server.requests) == 4 * 3
    data = streams(result.run_dir)
    for trace in data["household_traces"]:
        validation = trace["validation"]
        # The first reply named a skill: the failed retry does not erase it from the trace.
        assert trace["action"] == {
            "decision_skill": DEFAULT_SKILL,
            "proposed_skill": "build_a_moat",
        }
        assert validation["valid"] is False
        assert validation["errors"][-1].startswith("llm call failed (server_error): ")
        assert validation["retries"] == 1
    for agent_calls in by_agent(data[LLM_STREAM]).values():
        assert [(c["attempt"], c["status"]) for c in agent_calls] == [
            (0, "ok"),
            (1, "server_error"),
        ]
    assert column(result, "invalid_proposals") == [4]


# -- 5. concurrency --------------------------------------------------------------------------


@pytest.mark.parametrize(
    ("concurrency", "households", "delay_s"),
    # 120: above httpx's default pool of 100 connections, which would queue the rest inside
    # their timeout.
    [(4, 40, 0.2), (120, 120, 0.5)],
)
def test_requests_are_bounded_by_max_concurrency(
    tmp_path: Path, concurrency: int, households: int, delay_s: float
) -> None:
    responder = Responder(delay_s=lambda p: delay_s)
    with FakeOpenAIServer(responder=responder) as server:
        overrides = llm_overrides(
            server.base_url,
            tmp_path / "c.sqlite",
            f"decision.llm.max_concurrency={concurrency}",
            count=households,
            mode="live",
            timeout_s=4.0,
        )
        config, base = load_config(DEFAULT, overrides)
        model = build_model(config, base)
        try:
            started = time.perf_counter()
            model.step()
            elapsed = time.perf_counter() - started
        finally:
            model.llm.close()
        assert len(server.requests) == households
        peak = server.peak_in_flight
    assert peak == concurrency  # the bound is reached and never exceeded
    # `households / concurrency` rounds of delay_s at least (the peak above shows that they
    # overlap; an upper bound on wall-clock time would only test the machine).
    assert elapsed > households / concurrency * delay_s - 0.1
    assert all(h.last_decision.via_llm and h.last_decision.valid for h in model.households)


def test_closing_while_a_years_requests_are_in_flight_cancels_them(tmp_path: Path) -> None:
    # What an interrupted run does (Ctrl-C): close without waiting for replies 20 s away.
    with FakeOpenAIServer(latency_s=20.0) as server:
        overrides = llm_overrides(
            server.base_url, tmp_path / "c.sqlite", count=4, mode="live", timeout_s=60.0
        )
        config, base = load_config(DEFAULT, overrides)
        model = build_model(config, base)

        def step() -> None:
            with contextlib.suppress(BaseException):  # the cancelled year ends in an error
                model.step()

        stepping = threading.Thread(target=step)
        stepping.start()
        deadline = time.monotonic() + 10.0
        while server.peak_in_flight < 4 and time.monotonic() < deadline:
            time.sleep(0.05)
        assert server.peak_in_flight == 4
        started = time.monotonic()
        model.llm.close()
        closing_s = time.monotonic() - started
        stepping.join(10.0)
    assert closing_s < 10.0  # half the time the replies would take
    assert not stepping.is_alive()


def test_concurrent_runs_are_deterministic(tmp_path: Path) -> None:
    """Replies arrive in a random order; outputs come out the same, byte for byte."""

    def jitter(prompt: Prompt) -> float:
        return random.uniform(0.0, 0.03)  # scrambles completion order

    def choose(prompt: Prompt) -> dict[str, Any]:
        if int(prompt.agent_id[1:]) % 3 == 0 and not prompt.feedback:
            return reply("build_a_moat")  # some households need a feedback round
        return reply(*floodplain_choice(prompt))

    outputs = []
    for run in ("a", "b"):
        with FakeOpenAIServer(responder=Responder(choose, jitter)) as server:
            result = simulate(
                tmp_path,
                server.base_url,
                "decision.llm.max_concurrency=8",
                out=run,
                cache=tmp_path / f"{run}.sqlite",
                run_id="same",
                count=40,
                years=2,
            )
            assert len(server.requests) > 80
        outputs.append(result.run_dir)
    a, b = outputs
    for name in ("model_years.csv", *(f"{s}.jsonl" for s in ALL_STREAMS)):
        assert (a / name).read_bytes() == (b / name).read_bytes(), name


# -- 6. exact replay -------------------------------------------------------------------------


def test_replay_reproduces_a_recorded_run_without_the_endpoint(tmp_path: Path) -> None:
    def choose(prompt: Prompt) -> dict[str, Any]:
        if int(prompt.agent_id[1:]) % 4 == 0 and not prompt.feedback:
            return "I would rather not say."  # a feedback round, replayed too
        return reply(*floodplain_choice(prompt))

    cache = tmp_path / "c.sqlite"
    common = {"cache": cache, "run_id": "rr", "count": 30, "years": 3, "retries": 1}
    with FakeOpenAIServer(responder=Responder(choose)) as server:
        recorded = simulate(tmp_path, server.base_url, out="record", **common).run_dir
        sent = len(server.requests)
        replayed = simulate(tmp_path, server.base_url, out="replay", mode="replay", **common)
        assert len(server.requests) == sent  # replay made no HTTP request
    with ResponseCache(cache, read_only=True) as store:
        assert len(store) == sent

    for name in (
        "model_years.csv",
        "household_traces.jsonl",
        "memory_updates.jsonl",
        "consolidation.jsonl",
        "tool_invocations.jsonl",
    ):
        assert (recorded / name).read_bytes() == (replayed.run_dir / name).read_bytes(), name
    streams(replayed.run_dir)

    record_calls = (recorded / "llm_calls.jsonl").read_bytes().splitlines()
    replay_calls = (replayed.run_dir / "llm_calls.jsonl").read_bytes().splitlines()
    assert len(record_calls) == len(replay_calls) == sent
    assert sum(orjson.loads(c)["attempt"] == 1 for c in record_calls) > 0
    for rec_line, rep_line in zip(record_calls, replay_calls, strict=True):
        rec, rep = orjson.loads(rec_line), orjson.loads(rep_line)
        # Exactly these differ: where the reply came from and the HTTP attempts it took.
        assert (rec["cached"], rep["cached"]) == (False, True)
        assert (rec["transport_attempts"], rep["transport_attempts"]) == (1, 0)
        for key in ("cached", "transport_attempts"):
            del rec[key], rep[key]
        assert rec == rep


def test_replay_miss_stops_the_run_and_names_the_request(tmp_path: Path) -> None:
    cache = tmp_path / "c.sqlite"
    with FakeOpenAIServer() as server:
        simulate(tmp_path, server.base_url, cache=cache, count=6, years=1, out="rec")
        with pytest.raises(CacheMiss) as caught:
            simulate(tmp_path, server.base_url, cache=cache, count=6, years=2, mode="replay")
        assert len(server.requests) == 6
    with ResponseCache(cache, read_only=True) as store:
        assert caught.value.request_hash not in store
    assert caught.value.request_hash in str(caught.value)
    assert str(caught.value).startswith("config: decision.llm.cache: no cached reply for request ")
    assert_no_complete_run(tmp_path / "out", caught.value.request_hash)


# -- 7. replay errors at the command line ----------------------------------------------------


def cli_run(tmp_path: Path, *sets: str) -> int:
    args = ["run", str(DEFAULT), "--quiet", "--out", str(tmp_path / "cli")]
    for item in sets:
        args += ["--set", item]
    return main(args)


def test_cli_replay_miss_exits_2_with_one_line(
    tmp_path: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    cache = tmp_path / "c.sqlite"
    with FakeOpenAIServer() as server:
        simulate(tmp_path, server.base_url, cache=cache, count=6, years=2, out="rec")
        sets = llm_overrides(server.base_url, cache, count=6, years=3, mode="replay")
        capsys.readouterr()
        code = cli_run(tmp_path, *sets)
        assert len(server.requests) == 12
    out, err = capsys.readouterr()
    assert code == 2
    lines = err.strip().splitlines()
    assert len(lines) == 1, err
    assert lines[0].startswith(
        f"floodsim: error: --set decision.llm.cache={cache}: decision.llm.cache: no cached "
        "reply for request "
    )
    missing = HASH.findall(lines[0])
    assert len(missing) == 1
    with ResponseCache(cache, read_only=True) as store:
        assert missing[0] not in store
    assert "record" in lines[0]
    assert out == ""
    assert_no_complete_run(tmp_path / "cli", missing[0])


def test_cli_run_with_nothing_listening_exits_1_and_resumes_once_the_server_runs(
    tmp_path: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    port = closed_port()
    base_url = f"http://127.0.0.1:{port}/v1"
    sets = llm_overrides(base_url, tmp_path / "c.sqlite", count=5, years=2, timeout_s=TIMEOUT_S)
    code = cli_run(tmp_path, *sets)
    out, err = capsys.readouterr()
    assert code == 1  # EXIT_RUN_FAILED: the input is fine, the run could not finish
    lines = err.strip().splitlines()
    assert len(lines) == 1, err
    (run_dir,) = (tmp_path / "cli").iterdir()
    assert lines[0] == (
        f"floodsim: error: --set decision.llm.base_url={base_url}: decision.llm.base_url: no "
        f"reply from {base_url} for any of the 5 requests of year 1 (connection refused); is "
        f"the server running? Start it, then continue with: floodsim run --resume {run_dir}"
    )
    assert out == ""
    assert_no_complete_run(tmp_path / "cli")

    with FakeOpenAIServer(port=port) as server:
        code = main(["run", "--resume", str(run_dir), "--quiet"])
        assert len(server.requests) == 10
        uninterrupted = simulate(tmp_path, server.base_url, out="ref", count=5, years=2)
    assert code == 0, capsys.readouterr().err
    manifest = orjson.loads((run_dir / "manifest.json").read_bytes())
    assert (manifest["status"], manifest["resumed"]) == ("complete", 1)
    assert (run_dir / "model_years.csv").read_bytes() == (
        uninterrupted.run_dir / "model_years.csv"
    ).read_bytes()
    assert column(uninterrupted, "invalid_proposals") == [0, 0]


def cli_refusal(
    tmp_path: Path, capsys: pytest.CaptureFixture[str], command: str, cache: Path, mode: str
) -> str:
    """The one error line of ``floodsim run`` or ``validate`` refusing an LLM cache (exit 2)."""
    sets = llm_overrides(f"http://127.0.0.1:{closed_port()}/v1", cache, mode=mode)
    if command == "run":
        code = cli_run(tmp_path, *sets)
    else:
        code = main(["validate", str(DEFAULT), *(a for s in sets for a in ("--set", s))])
    out, err = capsys.readouterr()
    assert code == 2
    lines = err.strip().splitlines()
    assert len(lines) == 1, err
    assert lines[0].startswith("floodsim: error:")
    assert "decision.llm.cache" in lines[0]
    assert out == ""
    assert not (tmp_path / "cli").exists()  # rejected before any output exists
    return lines[0]


@pytest.mark.parametrize("command", ["run", "validate"])
def test_cli_replay_without_a_cache_file_exits_2(
    tmp_path: Path, capsys: pytest.CaptureFixture[str], command: str
) -> None:
    missing = tmp_path / "never-recorded.sqlite"
    line = cli_refusal(tmp_path, capsys, command, missing, "replay")
    assert str(missing) in line
    assert "record" in line
    assert not missing.exists()  # replay never creates an empty cache


@pytest.mark.parametrize("command", ["run", "validate"])
def test_cli_record_cache_that_cannot_be_created_exits_2(
    tmp_path: Path, capsys: pytest.CaptureFixture[str], command: str
) -> None:
    blocker = tmp_path / "not-a-folder"
    blocker.write_text("a file where the cache's folder should be")
    line = cli_refusal(tmp_path, capsys, command, blocker / "caches" / "c.sqlite", "record")
    assert f"{blocker} is a file, not a folder" in line
    dangling = tmp_path / "dangling"
    dangling.symlink_to(tmp_path / "gone")
    line = cli_refusal(tmp_path, capsys, command, dangling / "c.sqlite", "record")
    assert f"{dangling} is a broken link" in line


# -- 8. API key ------------------------------------------------------------------------------


def test_api_key_is_sent_and_written_nowhere(
    tmp_path: Path, capsys: pytest.CaptureFixture[str], monkeypatch: pytest.MonkeyPatch
) -> None:
    secret = "sk-floodsim-SECRET-9d2e71c4a0b8"
    monkeypatch.setenv("FLOODSIM_TEST_LLM_KEY", secret)
    # One household's request is rejected by a server that echoes the key it refused.
    echo = Fault("http_error", status=401, body=f'{{"error": "invalid api key {secret}"}}')

    def faults(index: int, body: Any) -> Any:
        return echo if read_prompt(body).agent_id == "H00001" else None

    cache = tmp_path / "cache" / "c.sqlite"
    with FakeOpenAIServer(faults=faults) as server:
        sets = llm_overrides(
            server.base_url, cache, "decision.llm.api_key_env=FLOODSIM_TEST_LLM_KEY", count=6
        )
        args = ["run", str(DEFAULT), "--out", str(tmp_path / "runs")]
        code = main([*args, *(a for s in sets for a in ("--set", s))])
        requests = server.requests
    out, err = capsys.readouterr()
    assert code == 0, err

    assert len(requests) == 6
    assert all(r.authorization == f"Bearer {secret}" for r in requests)
    traces = {
        t["agent_id"]: t for t in streams(Path(out.strip().splitlines()[-1]))["household_traces"]
    }
    refused = traces["H00001"]["validation"]["errors"]
    assert refused[0].startswith("llm call failed (http_error): HTTP 401")
    assert "***" in refused[0]  # the echoed key was redacted

    assert secret not in out
    assert secret not in err
    assert cache.is_file()
    files = [p for p in tmp_path.rglob("*") if p.is_file()]
    assert any(p.parent.name.startswith("default-") for p in files)
    for path in files:
        assert secret.encode() not in path.read_bytes(), path


# -- 9. mixed population ---------------------------------------------------------------------


def test_llm_share_splits_the_population(tmp_path: Path) -> None:
    responder = Responder()
    with FakeOpenAIServer(responder=responder) as server:
        result = simulate(tmp_path, server.base_url, "decision.llm_share=0.5", count=40, years=2)
        requests = server.requests
    data = streams(result.run_dir)
    households = result.model.households
    llm_ids = {h.state.agent_id for h in households if h.uses_llm}
    assert 10 <= len(llm_ids) <= 30

    asked = Counter(read_prompt(r.body).agent_id for r in requests)
    assert asked == Counter(dict.fromkeys(llm_ids, 2))
    assert {c["agent_id"] for c in data[LLM_STREAM]} == llm_ids
    for trace in data["household_traces"]:
        if trace["agent_id"] in llm_ids:
            assert trace["validation"]["retries"] == 0
        else:
            assert "retries" not in trace["validation"]  # PMT decided
    for household in households:
        assert household.last_decision.via_llm == household.uses_llm
    # Only the households the PMT policy decides draw from the decision stream, one uniform each.
    pmt_decisions = sum(t["agent_id"] not in llm_ids for t in data["household_traces"])
    seed = np.random.SeedSequence(result.model.config.seed).spawn(5)[3]
    reference = np.random.default_rng(seed)
    reference.random(pmt_decisions)
    assert result.model.decision_rng.bit_generator.state == reference.bit_generator.state

    def assignment(seed: int) -> list[bool]:
        overrides = llm_overrides(
            f"http://127.0.0.1:{closed_port()}/v1", tmp_path / "x.sqlite", count=40
        )
        config, base = load_config(DEFAULT, [*overrides, "decision.llm_share=0.5"], seed)
        model = build_model(config, base)
        model.llm.close()
        return [h.uses_llm for h in model.households]

    first = [h.uses_llm for h in households]
    assert assignment(42) == first
    assert assignment(7) != first


def test_llm_share_zero_is_the_pmt_run(tmp_path: Path) -> None:
    with FakeOpenAIServer() as server:
        llm = simulate(tmp_path, server.base_url, "decision.llm_share=0", out="llm", run_id="r")
        assert server.requests == []
    config, base = load_config(DEFAULT, ["households.count=8", "years=1", "audit.timestamps=false"])
    pmt = run_simulation(config, base, tmp_path / "pmt", progress=False, run_id="r")
    for name in ("model_years.csv", "household_traces.jsonl", "memory_updates.jsonl"):
        assert (llm.run_dir / name).read_bytes() == (pmt.run_dir / name).read_bytes(), name
    assert (llm.run_dir / "llm_calls.jsonl").read_bytes() == b""


def test_a_recording_that_asked_nothing_can_be_replayed(tmp_path: Path) -> None:
    # A sweep over llm_share records its 0 point too, and replays it with the others.
    cache = tmp_path / "c.sqlite"
    with FakeOpenAIServer() as server:
        recorded = simulate(
            tmp_path, server.base_url, "decision.llm_share=0", cache=cache, out="rec", run_id="r"
        )
        assert server.requests == []
    with ResponseCache(cache, read_only=True) as store:
        assert len(store) == 0
    replayed = simulate(
        tmp_path,
        f"http://127.0.0.1:{closed_port()}/v1",
        "decision.llm_share=0",
        cache=cache,
        mode="replay",
        run_id="r",
    )
    for name in ("model_years.csv", "household_traces.jsonl", "memory_updates.jsonl"):
        assert (recorded.run_dir / name).read_bytes() == (replayed.run_dir / name).read_bytes()


# -- 10. the shipped scenario ----------------------------------------------------------------


def test_llm_households_scenario_validates(capsys: pytest.CaptureFixture[str]) -> None:
    assert main(["validate", str(SCENARIO)]) == 0, capsys.readouterr().err
    out = capsys.readouterr().out
    assert "decisions llm" in out


def test_a_run_whose_every_llm_call_fails_warns_on_stderr(
    tmp_path: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    # The run completes (each decision falls back to do_nothing), but it must not look normal.
    with FakeOpenAIServer(faults=lambda index, body: 400) as server:
        code = main(
            [
                "run",
                str(SCENARIO),
                *("--set", "households.count=5", "--set", "years=2"),
                *("--set", f"decision.llm.base_url={server.base_url}"),
                *("--set", f"decision.llm.cache={tmp_path / 'cache.sqlite'}"),
                *("--out", str(tmp_path / "out"), "--quiet"),
            ]
        )
    err = capsys.readouterr().err
    assert code == 0
    assert "warning: 10 of 10 decisions (100%) fell back to do_nothing" in err


# -- replay of a recorded run whose endpoint failed ------------------------------------------


def test_replay_reproduces_a_run_whose_endpoint_failed_once(tmp_path: Path) -> None:
    def faults(index: int, body: Any) -> Any:
        return 400 if read_prompt(body).agent_id == "H00001" else None

    cache = tmp_path / "c.sqlite"
    with FakeOpenAIServer(faults=faults) as server:
        recorded = simulate(tmp_path, server.base_url, cache=cache, out="rec", run_id="r")
        replayed = simulate(
            tmp_path, server.base_url, cache=cache, out="rep", run_id="r", mode="replay"
        )
    for name in ("model_years.csv", "household_traces.jsonl"):
        assert (recorded.run_dir / name).read_bytes() == (replayed.run_dir / name).read_bytes()


def test_llm_run_from_inside_a_running_event_loop(tmp_path: Path) -> None:
    async def notebook_cell() -> RunResult:
        return simulate(tmp_path, server.base_url, count=4)

    with FakeOpenAIServer() as server:
        try:
            result = asyncio.run(notebook_cell())
        except RuntimeError as err:
            message = str(err)
        else:
            assert len(server.requests) == 4
            assert column(result, "invalid_proposals") == [0]
            return
    # Release the coroutine the refused call left unawaited, without its RuntimeWarning.
    with warnings.catch_warnings():
        warnings.simplefilter("ignore", RuntimeWarning)
        gc.collect()
    raise RuntimeError(message)
