"""The LLM chat client, the response cache and the fake OpenAI server they are tested against.

Every test talks only to a FakeOpenAIServer it starts on 127.0.0.1 (or to a closed loopback
port), with small timeouts, a bounded number of requests and servers that stop at the end of
the ``with`` block.
"""

from __future__ import annotations

import asyncio
import contextlib
import logging
import pickle
import socket
import sqlite3
import time
from typing import TYPE_CHECKING, Any, TypeVar

import orjson
import pytest

from simulation.decisions.llm.cache import (
    CachedReply,
    CacheMiss,
    CachingChatClient,
    ResponseCache,
    is_failure,
)
from simulation.decisions.llm.client import (
    ChatClient,
    ChatError,
    ChatResult,
    ChatSettings,
    request_hash,
)
from simulation.decisions.llm.testing import (
    DEFAULT_DECISION,
    FakeOpenAIServer,
    Fault,
    closed_port,
)

if TYPE_CHECKING:
    from collections.abc import Coroutine, Iterator
    from pathlib import Path

T = TypeVar("T")

KEY = "sk-test-SECRET-7f3a9c1e5b"
MODEL = "fake-model"
MESSAGES = [
    {"role": "system", "content": "You are a household deciding on flood adaptation."},
    {"role": "user", "content": "Your house flooded last year. What do you do?"},
]
#: Small timeouts keep every failure test well under a second.
FAST = {"timeout_s": 0.3, "backoff_s": 0.01, "max_backoff_s": 0.2}
#: Upper bound on the time a deadline or cap test may take: several times what the retries take
#: (under a second), so a loaded machine passes, and far below what a client that ignored the
#: deadline or cap would wait (a stalled server holds a request 30 s; a Retry-After says 100 s).
CUT_SHORT_S = 4.0


def run(coro: Coroutine[Any, Any, T], limit_s: float = 5.0) -> T:
    """Run ``coro`` with a hard deadline, so a hanging client fails the test instead."""

    async def bounded() -> T:
        return await asyncio.wait_for(coro, limit_s)

    return asyncio.run(bounded())


async def complete(base_url: str, messages: list[dict[str, Any]] = MESSAGES, **kwargs: Any):
    """One request through a fresh client (closed afterwards)."""
    options = {"api_key": KEY, **FAST, **kwargs}
    async with ChatClient(base_url, MODEL, **options) as client:
        return await client.complete(messages)


def fail(base_url: str, **kwargs: Any) -> tuple[ChatError, float]:
    """Run one request expected to fail; return the error and the time it took."""
    started = time.perf_counter()
    with pytest.raises(ChatError) as caught:
        run(complete(base_url, **kwargs))
    return caught.value, time.perf_counter() - started


# -- success ---------------------------------------------------------------------------------


def test_success_reports_tokens_latency_hash_and_sends_the_key() -> None:
    with FakeOpenAIServer(latency_s=0.05) as server:
        result = run(complete(server.base_url, seed=7, max_tokens=256))
        (received,) = server.requests

    assert isinstance(result, ChatResult)
    assert result.status == "ok"
    assert not result.cached
    assert orjson.loads(result.content) == DEFAULT_DECISION
    assert result.attempts == 1
    assert result.finish_reason == "stop"
    assert result.latency_s >= 0.05
    # The fake server counts words as tokens.
    assert result.prompt_tokens == sum(len(m["content"].split()) for m in MESSAGES)
    assert result.completion_tokens == len(result.content.split())
    assert result.request_hash == request_hash(MODEL, MESSAGES, 0.0, 7, 256)

    assert received.path == "/v1/chat/completions"
    assert received.authorization == f"Bearer {KEY}"
    assert received.body == {
        "model": MODEL,
        "messages": MESSAGES,
        "temperature": 0.0,
        "seed": 7,
        "max_tokens": 256,
    }


def test_no_key_means_no_authorization_header_and_seed_omitted() -> None:
    with FakeOpenAIServer() as server:
        run(complete(server.base_url, api_key=None))
        (received,) = server.requests
    assert received.authorization is None
    assert "seed" not in received.body


def test_unreported_usage_gives_none_tokens() -> None:
    with FakeOpenAIServer(report_usage=False) as server:
        result = run(complete(server.base_url))
    assert result.prompt_tokens is None
    assert result.completion_tokens is None


def test_responder_chooses_the_content() -> None:
    def responder(body: dict[str, Any]) -> dict[str, Any]:
        return {"skill": "buy_insurance", "echo": body["messages"][-1]["content"]}

    with FakeOpenAIServer(responder=responder) as server:
        result = run(complete(server.base_url))
    assert orjson.loads(result.content) == {
        "skill": "buy_insurance",
        "echo": MESSAGES[-1]["content"],
    }


def test_extra_body_is_sent_and_changes_the_hash() -> None:
    extra = {"response_format": {"type": "json_object"}}
    with FakeOpenAIServer() as server:
        result = run(complete(server.base_url, extra_body=extra))
        (received,) = server.requests
    assert received.body["response_format"] == {"type": "json_object"}
    assert result.request_hash != request_hash(MODEL, MESSAGES, 0.0, None, 512)
    assert result.request_hash == request_hash(MODEL, MESSAGES, 0.0, None, 512, extra)


def test_client_is_reusable_across_event_loops() -> None:
    """One client can serve one ``asyncio.run`` per simulated year, closed after each."""
    with FakeOpenAIServer() as server:
        client = ChatClient(server.base_url, MODEL, max_concurrency=2, **FAST)

        async def year() -> ChatResult:
            try:
                return await client.complete(MESSAGES)
            finally:
                await client.aclose()

        first = run(year())
        second = run(year())
        assert len(server.requests) == 2
    assert first.content == second.content


# -- faults: every one ends in a result or a ChatError, quickly ---------------------------------


def test_timeout_then_success() -> None:
    with FakeOpenAIServer(faults=["timeout"]) as server:
        started = time.perf_counter()
        result = run(complete(server.base_url))
        elapsed = time.perf_counter() - started
    assert result.attempts == 2
    assert 0.3 <= elapsed < CUT_SHORT_S


def test_timeouts_beyond_retries_raise_timeout() -> None:
    with FakeOpenAIServer(faults=["timeout"] * 5) as server:
        error, elapsed = fail(server.base_url, retries=1)
        assert len(server.requests) == 2
    assert error.status == "timeout"
    assert error.attempts == 2
    # Two attempts of 0.3 s plus one backoff: the deadline holds.
    assert elapsed < CUT_SHORT_S
    # The call's wall time, as a reply's latency is: not 0, which would hide what failing cost.
    assert 0.6 <= error.latency_s <= elapsed


def test_rate_limit_honours_retry_after() -> None:
    with FakeOpenAIServer(faults=[Fault("rate_limit", retry_after=0.3)]) as server:
        started = time.perf_counter()
        result = run(complete(server.base_url, max_backoff_s=5.0))
        elapsed = time.perf_counter() - started
    assert result.attempts == 2
    assert elapsed >= 0.3


def test_rate_limit_retry_after_is_capped() -> None:
    with FakeOpenAIServer(faults=[Fault("rate_limit", retry_after=100)]) as server:
        started = time.perf_counter()
        result = run(complete(server.base_url, max_backoff_s=0.2))
        elapsed = time.perf_counter() - started
    assert result.attempts == 2
    assert 0.2 <= elapsed < CUT_SHORT_S


def test_rate_limit_beyond_retries() -> None:
    with FakeOpenAIServer(faults=[429] * 5) as server:
        error, _ = fail(server.base_url, retries=2)
    assert error.status == "rate_limited"
    assert error.http_status == 429
    assert error.attempts == 3


def test_503_twice_then_success() -> None:
    with FakeOpenAIServer(faults=["503", "503"]) as server:
        result = run(complete(server.base_url, retries=2))
        assert [r.fault for r in server.requests] == ["server_error", "server_error", "ok"]
    assert result.attempts == 3


def test_500_beyond_retries_raises_server_error() -> None:
    retries = 2
    with FakeOpenAIServer(faults=["500"] * 10) as server:
        error, _ = fail(server.base_url, retries=retries)
        assert len(server.requests) == retries + 1
    assert error.status == "server_error"
    assert error.attempts == retries + 1
    assert error.http_status == 500
    assert "500" in error.message


@pytest.mark.parametrize("kind", ["malformed_body", "missing_choices"])
def test_malformed_reply_is_retried_then_reported(kind: str) -> None:
    with FakeOpenAIServer(faults=[kind]) as server:
        assert run(complete(server.base_url)).attempts == 2
    with FakeOpenAIServer(faults=[kind] * 5) as server:
        error, _ = fail(server.base_url, retries=1)
    assert error.status == "malformed_response"
    assert error.attempts == 2


def test_connection_refused_fails_fast() -> None:
    # A refusal is final at once: no attempt waits out its 30 s deadline.
    error, elapsed = fail(f"http://127.0.0.1:{closed_port()}/v1", retries=2, timeout_s=30.0)
    assert error.status == "connection_error"
    assert error.attempts == 3
    assert error.unreachable == "connection refused"
    assert elapsed < CUT_SHORT_S


def test_an_unresolvable_host_is_unreachable(monkeypatch: pytest.MonkeyPatch) -> None:
    # The resolver's answer for a name that does not exist, given without asking the system's
    # resolver, which on a machine without network may not answer within the test's limit.
    resolve = socket.getaddrinfo

    def no_such_host(host: str | bytes, *args: Any, **kwargs: Any) -> object:
        if host in ("floodsim-no-such-host.invalid", b"floodsim-no-such-host.invalid"):
            raise socket.gaierror(socket.EAI_NONAME, "Name or service not known")
        return resolve(host, *args, **kwargs)

    monkeypatch.setattr(socket, "getaddrinfo", no_such_host)
    error, _ = fail("http://floodsim-no-such-host.invalid/v1", retries=0)
    assert error.status == "connection_error"
    assert error.unreachable == "host name not resolved"


@contextlib.contextmanager
def unaccepting_port() -> Iterator[int]:
    """A loopback port whose listen queue is full: connection attempts are neither accepted
    nor refused (the kernel drops them), as with a host behind a firewall that drops packets.
    """
    with socket.socket() as listener, contextlib.ExitStack() as fillers:
        listener.bind(("127.0.0.1", 0))
        listener.listen(0)
        port = listener.getsockname()[1]
        for _ in range(4):  # a queue of length 0 still holds a connection or two
            filler = fillers.enter_context(socket.socket())
            filler.setblocking(False)
            filler.connect_ex(("127.0.0.1", port))
        with socket.socket() as probe:
            probe.settimeout(0.2)
            try:
                probe.connect(("127.0.0.1", port))
            except TimeoutError:
                pass
            else:
                pytest.skip("this system accepts connections beyond a full listen queue")
        yield port


def test_a_host_that_never_accepts_is_unreachable_after_the_timeout() -> None:
    # The attempt's deadline runs out while connecting, whichever of the two timers (the
    # attempt's or httpx's connect timeout) fires first.
    with unaccepting_port() as port:
        error, elapsed = fail(f"http://127.0.0.1:{port}/v1", retries=1)
    assert error.status == "timeout"
    assert error.attempts == 2
    assert error.unreachable == "no connection within 0.3 s"
    assert error.message == "no connection within 0.3 s"
    assert elapsed < CUT_SHORT_S


@pytest.mark.parametrize(
    "fault",
    [
        "500",
        "429",
        "400",
        "malformed",
        "connection_close",
        pytest.param(Fault("timeout", delay_s=2.0), id="stall"),
    ],
)
def test_a_server_that_answers_badly_or_drops_the_connection_was_reached(fault: Any) -> None:
    with FakeOpenAIServer(faults=lambda _index, _body: fault) as server:
        error, _ = fail(server.base_url, retries=1)
    assert error.unreachable is None


def test_an_endpoint_reached_once_was_reached_even_if_it_then_goes_away() -> None:
    # The first attempt gets a 500; the server is gone before the retry, which is refused.
    server = FakeOpenAIServer(faults=["500"]).start()

    async def scenario() -> None:
        async with ChatClient(server.base_url, MODEL, retries=1, **FAST) as client:
            original = client._post

            async def post_then_stop(http: Any, payload: bytes) -> Any:
                try:
                    return await original(http, payload)
                finally:
                    server.stop()

            client._post = post_then_stop  # type: ignore[method-assign]
            await client.complete(MESSAGES)

    try:
        with pytest.raises(ChatError) as caught:
            run(scenario())
    finally:
        server.stop()
    assert caught.value.status == "connection_error"
    assert caught.value.attempts == 2
    assert caught.value.unreachable is None


def test_dropped_connection_is_retried_then_reported() -> None:
    with FakeOpenAIServer(faults=["connection_close"]) as server:
        assert run(complete(server.base_url)).attempts == 2
    with FakeOpenAIServer(faults=["connection_close"] * 5) as server:
        error, elapsed = fail(server.base_url, retries=2, timeout_s=30.0)
    assert error.status == "connection_error"
    assert error.attempts == 3
    assert elapsed < CUT_SHORT_S  # no attempt waited out its 30 s deadline


@pytest.mark.parametrize("status", [400, 401, 404, 422])
def test_client_errors_are_not_retried(status: int) -> None:
    with FakeOpenAIServer(faults=[status] * 5) as server:
        error, _ = fail(server.base_url, retries=3)
        assert len(server.requests) == 1
    assert error.status == "http_error"
    assert error.http_status == status
    assert error.attempts == 1


@pytest.mark.parametrize(
    "fault",
    ["timeout", "429", "500", "503", "malformed", "missing_choices", "connection_close", "400"],
)
def test_no_fault_ever_hangs(fault: str) -> None:
    """A server that always misbehaves yields a ChatError within the retry budget."""
    with FakeOpenAIServer(faults=lambda _index, _body: fault) as server:
        error, elapsed = fail(server.base_url, retries=1, timeout_s=0.2)
        assert 1 <= len(server.requests) <= 2
    assert error.status in {
        "timeout",
        "rate_limited",
        "server_error",
        "malformed_response",
        "connection_error",
        "http_error",
    }
    assert elapsed < CUT_SHORT_S


def test_invalid_base_url_is_a_chat_error() -> None:
    error, _ = fail("ftp://127.0.0.1/v1", retries=3)
    assert error.status == "connection_error"
    assert error.attempts == 1


# -- concurrency -----------------------------------------------------------------------------


async def _burst(client: ChatClient, count: int, bound: asyncio.Semaphore | None) -> list[Any]:
    async def one(index: int) -> ChatResult:
        messages = [{"role": "user", "content": f"household {index}"}]
        if bound is None:
            return await client.complete(messages)
        async with bound:
            return await client.complete(messages)

    return await asyncio.gather(*(one(index) for index in range(count)))


def test_32_requests_with_semaphore_16_overlap() -> None:
    with FakeOpenAIServer(latency_s=0.2) as server:

        async def scenario() -> list[Any]:
            async with ChatClient(server.base_url, MODEL, timeout_s=2.0) as client:
                return await _burst(client, 32, asyncio.Semaphore(16))

        results = run(scenario())
        assert len(server.requests) == 32
        peak = server.peak_in_flight
    assert all(result.attempts == 1 for result in results)
    assert len({result.request_hash for result in results}) == 32
    # The semaphore lets 16 through at once and no more: the requests overlap, and the
    # server's count, unlike a time, is the same on a loaded machine.
    assert peak == 16


def test_max_concurrency_bounds_requests_in_flight() -> None:
    with FakeOpenAIServer(latency_s=0.1) as server:

        async def scenario() -> float:
            async with ChatClient(
                server.base_url, MODEL, timeout_s=2.0, max_concurrency=4
            ) as client:
                started = time.perf_counter()
                await _burst(client, 12, None)
                return time.perf_counter() - started

        elapsed = run(scenario())
        peak = server.peak_in_flight
    # The bound is reached and never exceeded: 12 requests, 4 at a time, 0.1 s each, so at
    # least three waves.
    assert peak == 4
    assert elapsed >= 0.3


def test_max_concurrency_above_the_http_pools_default_of_100_is_honoured() -> None:
    with FakeOpenAIServer(latency_s=0.5) as server:

        async def scenario() -> list[Any]:
            async with ChatClient(
                server.base_url, MODEL, timeout_s=4.0, retries=0, max_concurrency=120
            ) as client:
                return await _burst(client, 120, None)

        results = run(scenario(), limit_s=20.0)
        peak = server.peak_in_flight
    assert [result.status for result in results] == ["ok"] * 120
    assert peak == 120  # none waited for a pooled connection


# -- the API key never leaks -------------------------------------------------------------------


def test_key_not_in_repr_errors_or_logs(caplog: pytest.LogCaptureFixture) -> None:
    client = ChatClient("http://user:pw@127.0.0.1:1/v1?token=abc", MODEL, api_key=KEY)
    assert KEY not in repr(client)
    assert "pw" not in repr(client)
    assert "token=abc" not in repr(client)

    # Servers sometimes echo the rejected key; the message must not repeat it.
    echo = Fault("http_error", status=401, body=f'{{"error": "Incorrect API key: {KEY}"}}')
    caplog.set_level(logging.DEBUG)
    with FakeOpenAIServer(faults=["500", "timeout", echo]) as server:
        error, _ = fail(server.base_url, retries=3)
        assert server.requests[0].authorization == f"Bearer {KEY}"
    assert error.status == "http_error"
    assert "Incorrect API key" in error.message
    for text in (str(error), repr(error), error.message, caplog.text):
        assert KEY not in text
    assert "retrying" in caplog.text


def test_a_key_echoed_across_the_quoted_part_of_an_error_body_is_not_quoted_in_part() -> None:
    # The key starts a few characters before the body is cut for the message.
    body = '{"error": "' + "x" * 165 + f' invalid api key {KEY}"}}'
    assert body.index(KEY) < 200 < body.index(KEY) + len(KEY)
    with FakeOpenAIServer(faults=[Fault("http_error", status=401, body=body)]) as server:
        error, _ = fail(server.base_url, retries=0)
    assert "invalid api key ***" in error.message
    assert KEY[:8] not in error.message


def test_chat_errors_pickle() -> None:
    error = ChatError("server_error", "HTTP 503", 3, http_status=503)
    copy = pickle.loads(pickle.dumps(error))
    assert (copy.status, copy.message, copy.attempts, copy.http_status, copy.unreachable) == (
        "server_error",
        "HTTP 503",
        3,
        503,
        None,
    )
    refused = ChatError("connection_error", "refused", 3, unreachable="connection refused")
    assert pickle.loads(pickle.dumps(refused)).unreachable == "connection refused"
    miss = pickle.loads(pickle.dumps(CacheMiss("ab" * 32)))
    assert isinstance(miss, CacheMiss)
    assert miss.request_hash == "ab" * 32
    located = pickle.loads(pickle.dumps(CacheMiss("ab" * 32, "run.yaml")))
    assert str(located).startswith("run.yaml: decision.llm.cache: no cached reply for request ")


# -- request hash ------------------------------------------------------------------------------


def test_request_hash_is_canonical() -> None:
    digest = request_hash(MODEL, MESSAGES, 0.0, None, 512)
    assert len(digest) == 64
    reordered = [{"content": m["content"], "role": m["role"]} for m in MESSAGES]
    assert request_hash(MODEL, reordered, 0, None, 512) == digest
    assert request_hash(MODEL, MESSAGES, 0.0, None, 512, {}) == digest
    assert request_hash(MODEL, MESSAGES, 0.0, 1, 512) != digest
    assert request_hash(MODEL, MESSAGES, 0.5, None, 512) != digest
    assert request_hash(MODEL, MESSAGES, 0.0, None, 256) != digest
    assert request_hash("other", MESSAGES, 0.0, None, 512) != digest
    assert request_hash(MODEL, MESSAGES[:1], 0.0, None, 512) != digest
    assert ChatSettings(MODEL).hash(MESSAGES) == digest


@pytest.mark.parametrize(
    "kwargs",
    [{"timeout_s": 0}, {"retries": -1}, {"backoff_s": -1.0}, {"max_concurrency": 0}],
)
def test_client_rejects_bad_settings(kwargs: dict[str, Any]) -> None:
    with pytest.raises(ValueError, match=next(iter(kwargs))):
        ChatClient("http://127.0.0.1:1/v1", MODEL, **kwargs)


# -- response cache ----------------------------------------------------------------------------


def test_response_cache_roundtrip_first_write_wins_and_persists(tmp_path: Path) -> None:
    path = tmp_path / "nested" / "cache.sqlite"
    with ResponseCache(path) as cache:
        assert cache.get("h1") is None
        assert cache.put("h1", {"model": MODEL}, "first", (10, 3))
        assert cache.put("h2", {"model": MODEL}, "second", None)
        assert not cache.put("h1", {"model": MODEL}, "overwritten?", (1, 1))
        assert cache.get("h1") == CachedReply("h1", "first", 10, 3, 1)
        assert cache.get("h2") == CachedReply("h2", "second", None, None, 2)
        assert len(cache) == 2
        assert "h1" in cache
        assert cache.request("h1") == {"model": MODEL}
        mode = cache._db.execute("PRAGMA journal_mode").fetchone()[0]
    assert mode == "wal"
    with ResponseCache(path, read_only=True) as cache:
        assert cache.get("h1") is not None
        assert cache.get("h1").content == "first"
        with pytest.raises(sqlite3.OperationalError):
            cache.put("h3", {}, "x")
    # No wall-clock columns: the rows depend on the requests alone.
    with sqlite3.connect(path) as db:
        columns = [row[1] for row in db.execute("PRAGMA table_info(responses)")]
    assert columns == [
        "request_hash",
        "request",
        "content",
        "prompt_tokens",
        "completion_tokens",
        "created_seq",
    ]


def test_read_only_cache_must_exist(tmp_path: Path) -> None:
    with pytest.raises(FileNotFoundError, match="does not exist"):
        ResponseCache(tmp_path / "missing.sqlite", read_only=True)


def test_a_cache_that_cannot_be_opened_for_writing_is_a_permission_error(tmp_path, monkeypatch):
    """A folder the permission check took for writable (a read-only mount, /proc): one line."""
    from simulation.decisions.llm import cache as cache_module

    def refused(*_args: Any, **_kwargs: Any) -> Any:
        raise cache_module.sqlite3.OperationalError("unable to open database file")

    monkeypatch.setattr(cache_module.sqlite3, "connect", refused)
    path = tmp_path / "cache.sqlite"
    with pytest.raises(PermissionError) as info:
        ResponseCache(path)
    assert str(info.value) == (
        f"response cache {path}: cannot be opened for writing (unable to open database file)"
    )


def test_record_stores_and_serves_repeats_from_cache(tmp_path: Path) -> None:
    with FakeOpenAIServer() as server, ResponseCache(tmp_path / "c.sqlite") as cache:

        async def scenario() -> tuple[ChatResult, ChatResult]:
            client = ChatClient(server.base_url, MODEL, api_key=KEY, **FAST)
            async with CachingChatClient(client, cache, "record") as caching:
                return await caching.complete(MESSAGES), await caching.complete(MESSAGES)

        first, second = run(scenario())
        assert len(server.requests) == 1
        assert len(cache) == 1
    assert not first.cached
    assert first.attempts == 1
    assert second.cached
    assert second.status == "ok"
    assert (second.attempts, second.latency_s) == (0, 0.0)
    assert second.content == first.content
    assert second.request_hash == first.request_hash
    assert (second.prompt_tokens, second.completion_tokens) == (
        first.prompt_tokens,
        first.completion_tokens,
    )


def test_record_sends_identical_concurrent_requests_once(tmp_path: Path) -> None:
    with FakeOpenAIServer(latency_s=0.1) as server, ResponseCache(tmp_path / "c.sqlite") as cache:

        async def scenario() -> list[ChatResult]:
            caching = CachingChatClient(ChatClient(server.base_url, MODEL, **FAST), cache)
            async with caching:
                results = await asyncio.gather(*(caching.complete(MESSAGES) for _ in range(5)))
            assert (caching.calls, caching.misses, caching.hits) == (1, 1, 4)
            assert not caching._inflight
            return results

        results = run(scenario())
        assert len(server.requests) == 1
    assert sum(not result.cached for result in results) == 1


def test_record_caches_failures_and_retries_them_next_time(tmp_path: Path) -> None:
    with FakeOpenAIServer(faults=["500"] * 3) as server, ResponseCache(tmp_path / "c.db") as cache:

        async def scenario() -> ChatResult:
            client = ChatClient(server.base_url, MODEL, retries=1, **FAST)
            async with CachingChatClient(client, cache, "record") as caching:
                with pytest.raises(ChatError) as caught:
                    await caching.complete(MESSAGES)
                assert caught.value.status == "server_error"
                # The failure is recorded (so a replay takes the same fallback) ...
                (digest,) = [caching.settings.hash(MESSAGES)]
                assert is_failure(cache.get(digest).content)
                async with CachingChatClient(None, cache, "replay", settings=caching.settings) as r:
                    with pytest.raises(ChatError) as replayed:
                        await r.complete(MESSAGES)
                    assert replayed.value.status == "server_error"
                # ... and recording again asks the endpoint (a 500, then a reply) and keeps it.
                result = await caching.complete(MESSAGES)
                assert cache.get(result.request_hash).content == result.content
                assert len(cache) == 1
                return result

        result = run(scenario())
    assert not result.cached
    assert result.attempts == 2


def test_replay_answers_from_cache_without_http(tmp_path: Path) -> None:
    path = tmp_path / "c.sqlite"
    other = [{"role": "user", "content": "A question nobody recorded."}]
    with FakeOpenAIServer() as server, ResponseCache(path) as cache:

        async def record() -> ChatResult:
            client = ChatClient(server.base_url, MODEL, seed=3, **FAST)
            async with CachingChatClient(client, cache, "record") as caching:
                return await caching.complete(MESSAGES)

        recorded = run(record())

    # The endpoint is gone; replay needs only the cache and the request settings.
    with ResponseCache(path, read_only=True) as cache:
        replaying = CachingChatClient(None, cache, "replay", settings=ChatSettings(MODEL, seed=3))
        replayed = run(replaying.complete(MESSAGES))
        with pytest.raises(CacheMiss) as caught:
            run(replaying.complete(other))
    assert replayed.cached
    assert replayed.content == recorded.content
    assert replayed.request_hash == recorded.request_hash

    miss = caught.value
    assert isinstance(miss, ChatError)
    assert miss.status == "cache_miss"
    assert miss.request_hash == request_hash(MODEL, other, 0.0, 3, 512)
    assert miss.request_hash in str(miss)
    assert "record" in str(miss)
    assert (replaying.hits, replaying.misses, replaying.calls) == (1, 1, 0)


def test_replay_with_a_client_never_touches_the_network(tmp_path: Path) -> None:
    with ResponseCache(tmp_path / "c.sqlite") as cache:
        client = ChatClient(f"http://127.0.0.1:{closed_port()}/v1", MODEL, **FAST)
        digest = client.request_hash(MESSAGES)
        cache.put(digest, client.settings.body(MESSAGES), "stored", None)
        replaying = CachingChatClient(client, cache, "replay")
        assert run(replaying.complete(MESSAGES)).content == "stored"
        with pytest.raises(CacheMiss):
            run(replaying.complete(MESSAGES[:1]))


def test_live_calls_every_time_and_stores_nothing(tmp_path: Path) -> None:
    with FakeOpenAIServer() as server, ResponseCache(tmp_path / "c.sqlite") as cache:

        async def scenario() -> list[ChatResult]:
            client = ChatClient(server.base_url, MODEL, **FAST)
            async with CachingChatClient(client, cache, "live") as caching:
                return [await caching.complete(MESSAGES) for _ in range(2)]

        results = run(scenario())
        assert len(server.requests) == 2
        assert len(cache) == 0
    assert not any(result.cached for result in results)


def test_key_never_reaches_the_cache_file(tmp_path: Path) -> None:
    with FakeOpenAIServer() as server:
        cache = ResponseCache(tmp_path / "c.sqlite")

        async def scenario() -> None:
            client = ChatClient(server.base_url, MODEL, api_key=KEY, **FAST)
            async with CachingChatClient(client, cache, "record") as caching:
                await caching.complete(MESSAGES)

        run(scenario())
        # Check the WAL before it is folded into the main file, then everything after close.
        written = b"".join(path.read_bytes() for path in tmp_path.iterdir())
        cache.close()
        assert server.requests[0].authorization == f"Bearer {KEY}"
    written += b"".join(path.read_bytes() for path in tmp_path.iterdir())
    assert b"do_nothing" in written
    assert KEY.encode() not in written


def test_caching_client_rejects_bad_combinations(tmp_path: Path) -> None:
    with ResponseCache(tmp_path / "c.sqlite") as cache:
        client = ChatClient("http://127.0.0.1:1/v1", MODEL)
        with pytest.raises(ValueError, match="unknown cache mode"):
            CachingChatClient(client, cache, "offline")  # type: ignore[arg-type]
        with pytest.raises(ValueError, match="needs a ChatClient"):
            CachingChatClient(None, cache, "record")
        with pytest.raises(ValueError, match="settings"):
            CachingChatClient(None, cache, "replay")
    with (
        ResponseCache(tmp_path / "c.sqlite", read_only=True) as cache,
        pytest.raises(ValueError, match="writable"),
    ):
        CachingChatClient(client, cache, "record")


# -- the fake server itself --------------------------------------------------------------------


def test_fake_server_fault_specs_and_recording() -> None:
    assert Fault.coerce(None) == Fault("ok")
    assert Fault.coerce(429) == Fault("rate_limit")
    assert Fault.coerce("503") == Fault("server_error", status=503)
    assert Fault.coerce(401) == Fault("http_error", status=401)
    assert Fault.coerce("malformed") == Fault("malformed_body")
    with pytest.raises(ValueError, match="unknown fault kind"):
        Fault.coerce("explode")

    seen: list[int] = []

    def every_other(index: int, _body: object) -> str | None:
        seen.append(index)
        return "500" if index % 2 == 0 else None

    with FakeOpenAIServer(faults=every_other) as server:
        result = run(complete(server.base_url, retries=1))
        assert [r.fault for r in server.requests] == ["server_error", "ok"]
        assert "127.0.0.1" in repr(server)
    assert result.attempts == 2
    assert seen == [0, 1]
    assert "stopped" in repr(server)


def test_fake_server_stops_promptly_with_stalled_requests() -> None:
    """Stopping wakes handlers stalled by a ``timeout`` fault instead of waiting them out."""
    started = time.perf_counter()
    with FakeOpenAIServer(faults=[Fault("timeout", delay_s=60)] * 4) as server:
        error, _ = fail(server.base_url, retries=3, timeout_s=0.1)
    assert error.status == "timeout"
    assert time.perf_counter() - started < 2.0


def test_fake_server_listens_on_a_given_port() -> None:
    """A server can be started where a client found nothing listening, for resume tests."""
    port = closed_port()
    base_url = f"http://127.0.0.1:{port}/v1"
    assert fail(base_url, retries=0)[0].status == "connection_error"
    with FakeOpenAIServer(port=port) as server:
        assert server.base_url == base_url
        assert run(complete(base_url)).status == "ok"
        assert len(server.requests) == 1
