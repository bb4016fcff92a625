"""An asynchronous client for OpenAI-compatible chat-completions endpoints.

Works with anything that speaks ``POST {base_url}/chat/completions`` (Ollama, vLLM, llama.cpp
server, hosted APIs). One :class:`ChatClient` serves many concurrent requests; every request is
bounded in time (each attempt by ``timeout_s``, the whole call by the retry budget), so a dead or
misbehaving endpoint ends in a :class:`ChatError`, never in a hang. A failed call says whether
the endpoint was reached at all (:attr:`ChatError.unreachable`): a connection refused or never
established is told apart from a server that answered badly or dropped the connection.

Every request is content-addressed by :func:`request_hash` (SHA-256 of its canonical JSON), which
is what the response cache keys on.

The API key travels only in the ``Authorization`` header. It is never part of a request hash, an
exception message, a ``repr`` or a log record: messages built from server replies are scrubbed of
it, because some servers echo the key they rejected.
"""

from __future__ import annotations

import asyncio
import email.utils
import functools
import hashlib
import logging
import math
import os
import socket
import time
from dataclasses import dataclass, field
from datetime import UTC, datetime
from typing import TYPE_CHECKING, Any, Final, Literal, Self
from urllib.parse import urlsplit, urlunsplit

import httpx
import orjson

if TYPE_CHECKING:
    import ssl
    from collections.abc import Mapping, Sequence
    from types import TracebackType

__all__ = [
    "ERROR_STATUSES",
    "ChatClient",
    "ChatError",
    "ChatResult",
    "ChatSettings",
    "ChatStatus",
    "request_hash",
]

_LOG = logging.getLogger(__name__)

#: Why a chat call failed; ``cache_miss`` is raised by the response cache in replay mode.
ChatStatus = Literal[
    "timeout",
    "rate_limited",
    "server_error",
    "connection_error",
    "malformed_response",
    "http_error",
    "cache_miss",
]

#: Every status a :class:`ChatError` can carry.
ERROR_STATUSES: Final = frozenset(
    {
        "timeout",
        "rate_limited",
        "server_error",
        "connection_error",
        "malformed_response",
        "http_error",
        "cache_miss",
    }
)

#: Longest server error body quoted in an error message (enough to show the server's reason).
_BODY_SNIPPET = 200
#: How much of an error body is searched for the API key before it is cut to the snippet: a
#: key crossing the cut would no longer match whole, and its first part would be quoted.
_REDACTION_WINDOW = 65_536
_REDACTED = "***"


class ChatError(Exception):
    """A chat call that did not produce a reply.

    Attributes:
        status: One of :data:`ERROR_STATUSES`.
        message: What went wrong (never contains the API key).
        attempts: How many HTTP attempts were made (0 when none was, e.g. a cache miss).
        http_status: The last HTTP status code received, if any.
        unreachable: Why the endpoint could not be reached at all (``"connection refused"``,
            ``"host name not resolved"``, ``"no connection within 60 s"``) when no attempt got
            a connection to it; ``None`` when one did (the server answered, even with an error,
            or dropped the connection) and when no attempt was made (a cache miss, a failure
            replayed from the cache). Whether a connection was made is a fact of each attempt,
            not a matter of how long it took.
        latency_s: Wall time of the whole call, retries and backoff included, as a reply's
            (0.0 when no attempt was made: a cache miss, a failure replayed from the cache).
    """

    def __init__(
        self,
        status: str,
        message: str,
        attempts: int = 0,
        *,
        http_status: int | None = None,
        unreachable: str | None = None,
        latency_s: float = 0.0,
    ) -> None:
        self.status = status
        self.message = message
        self.attempts = attempts
        self.http_status = http_status
        self.unreachable = unreachable
        self.latency_s = latency_s
        super().__init__(f"{status}: {message} (attempts: {attempts})")

    def __reduce__(self) -> tuple[Any, ...]:
        # Exceptions pickle as cls(*args); rebuild from the fields instead so a ChatError raised
        # in a worker process reaches the parent intact.
        return (
            _rebuild_chat_error,
            (
                type(self),
                self.status,
                self.message,
                self.attempts,
                self.http_status,
                self.unreachable,
            ),
        )


def _rebuild_chat_error(
    cls: type[ChatError],
    status: str,
    message: str,
    attempts: int,
    http_status: int | None,
    unreachable: str | None = None,
) -> ChatError:
    error = cls.__new__(cls)
    ChatError.__init__(
        error, status, message, attempts, http_status=http_status, unreachable=unreachable
    )
    return error


@dataclass(frozen=True, slots=True)
class ChatResult:
    """A successful chat completion.

    Attributes:
        content: The assistant message's text.
        status: Always ``"ok"`` (failures raise :class:`ChatError`).
        latency_s: Wall time of the whole call including retries and backoff (0.0 when served
            from the cache).
        prompt_tokens: Prompt tokens as reported by the server, ``None`` when not reported.
        completion_tokens: Completion tokens as reported, ``None`` when not reported.
        attempts: HTTP attempts made (0 when served from the cache).
        request_hash: The request's content address (see :func:`request_hash`).
        cached: Whether the reply came from the response cache.
        finish_reason: The server's ``finish_reason`` (``"length"`` means the reply was cut off).
    """

    content: str
    status: str
    latency_s: float
    prompt_tokens: int | None
    completion_tokens: int | None
    attempts: int
    request_hash: str
    cached: bool = False
    finish_reason: str | None = None


def request_hash(
    model: str,
    messages: Sequence[Mapping[str, Any]],
    temperature: float,
    seed: int | None,
    max_tokens: int,
    extra: Mapping[str, Any] | None = None,
) -> str:
    """Return the content address of a chat request: SHA-256 of its canonical JSON.

    Canonical means sorted keys at every level and ``temperature`` as a float, so ``0`` and
    ``0.0`` address the same request. ``extra`` (additional body fields such as
    ``response_format``) takes part only when non-empty, so requests without it hash the same
    whether or not the argument is passed.
    """
    document: dict[str, Any] = {
        "model": model,
        "messages": [dict(message) for message in messages],
        "temperature": float(temperature),
        "seed": seed,
        "max_tokens": int(max_tokens),
    }
    if extra:
        document["extra"] = dict(extra)
    canonical = orjson.dumps(document, option=orjson.OPT_SORT_KEYS)
    return hashlib.sha256(canonical).hexdigest()


@dataclass(frozen=True, slots=True)
class ChatSettings:
    """Everything that determines a request besides its messages (the key is not part of it).

    Attributes:
        model: Model name as the endpoint knows it.
        temperature: Sampling temperature.
        seed: Sampling seed, sent only when not ``None``.
        max_tokens: Upper bound on completion tokens.
        extra_body: Additional body fields (e.g. ``{"response_format": {"type": "json_object"}}``).
    """

    model: str
    temperature: float = 0.0
    seed: int | None = None
    max_tokens: int = 512
    extra_body: Mapping[str, Any] | None = field(default=None, hash=False)

    def body(self, messages: Sequence[Mapping[str, Any]]) -> dict[str, Any]:
        """Return the JSON body sent for ``messages`` (also what the cache stores as request)."""
        body: dict[str, Any] = dict(self.extra_body or {})
        body.update(
            model=self.model,
            messages=[dict(message) for message in messages],
            temperature=float(self.temperature),
            max_tokens=int(self.max_tokens),
        )
        if self.seed is not None:
            body["seed"] = self.seed
        return body

    def hash(self, messages: Sequence[Mapping[str, Any]]) -> str:
        """Return the :func:`request_hash` of ``messages`` under these settings."""
        return request_hash(
            self.model,
            messages,
            self.temperature,
            self.seed,
            self.max_tokens,
            self.extra_body,
        )


def _safe_url(url: str) -> str:
    """Drop user info and query from a URL so credentials embedded in it are never shown."""
    parts = urlsplit(url)
    host = parts.hostname or ""
    netloc = f"{host}:{parts.port}" if parts.port else host
    return urlunsplit((parts.scheme, netloc, parts.path, "", ""))


def _parse_retry_after(value: str | None) -> float | None:
    """Seconds to wait from a ``Retry-After`` header (delta-seconds or HTTP date), if usable."""
    if not value:
        return None
    value = value.strip()
    try:
        seconds = float(value)
    except ValueError:
        try:
            when = email.utils.parsedate_to_datetime(value)
        except (TypeError, ValueError):
            return None
        if when.tzinfo is None:
            when = when.replace(tzinfo=UTC)
        seconds = (when - datetime.now(UTC)).total_seconds()
    if not math.isfinite(seconds):
        return None
    return max(0.0, seconds)


@functools.cache
def _ssl_context(trust_env: bool) -> ssl.SSLContext:
    # Loading the CA bundle costs tens of milliseconds; do it once per process, not per pool.
    return httpx.create_ssl_context(trust_env=trust_env)


class _Retry(Exception):  # noqa: N818 - internal control flow, not an error type
    """Raised inside one attempt when the failure is worth another attempt."""

    def __init__(
        self,
        status: str,
        message: str,
        *,
        http_status: int | None = None,
        retry_after: float | None = None,
        unreachable: str | None = None,
    ) -> None:
        super().__init__(message)
        self.status = status
        self.message = message
        self.http_status = http_status
        self.retry_after = retry_after
        self.unreachable = unreachable  # why no connection was made; None if one was


#: Trace events (httpcore's ``trace`` request extension) that mean a connection to the endpoint
#: exists: a new one was opened, or a pooled one carries the request.
_CONNECTED_EVENT = "connection.connect_tcp.complete"
_REQUEST_EVENTS = ("http11.", "http2.")


class ChatClient:
    """Asynchronous OpenAI-compatible chat client with bounded retries.

    Retried (with exponential backoff ``backoff_s * 2**(attempt-1)`` capped at
    ``max_backoff_s``; a 429's ``Retry-After`` replaces the computed delay, also capped): attempt
    timeouts, HTTP 429, HTTP 5xx, connection errors and malformed bodies (not JSON, or no
    ``choices[0].message.content`` string). Not retried: other HTTP statuses (4xx), which raise
    ``http_error`` at once. After ``retries`` extra attempts the last failure is raised as a
    :class:`ChatError`, so a call lasts at most ``(retries + 1) * timeout_s`` plus the backoffs
    (plus queueing for ``max_concurrency``, when set). The error's ``unreachable`` says why when
    no attempt got a connection to the endpoint (refused, unresolved host, connect timeout).

    The underlying ``httpx.AsyncClient`` is created on first use in the running event loop. A
    client may be reused across ``asyncio.run`` calls: when the loop changes, a new connection
    pool is opened (call :meth:`aclose` at the end of each loop to release the old one cleanly).

    Args:
        base_url: Endpoint root including the version, e.g. ``http://localhost:11434/v1``.
        model: Model name.
        api_key: Sent as ``Authorization: Bearer <key>`` when given; nowhere else.
        timeout_s: Deadline of one attempt (connect, send, wait, read), in seconds.
        temperature: Sampling temperature.
        seed: Sampling seed (omitted from the request when ``None``).
        max_tokens: Upper bound on completion tokens.
        retries: Extra attempts after the first.
        backoff_s: First backoff delay, in seconds.
        max_backoff_s: Cap on any single backoff delay, including ``Retry-After``.
        max_concurrency: When set, at most this many attempts are in flight at once.
        extra_body: Additional request body fields, part of the request hash.
        trust_env: Let httpx read proxy settings and certificates from the environment.
    """

    def __init__(
        self,
        base_url: str,
        model: str,
        *,
        api_key: str | None = None,
        timeout_s: float = 60.0,
        temperature: float = 0.0,
        seed: int | None = None,
        max_tokens: int = 512,
        retries: int = 2,
        backoff_s: float = 0.5,
        max_backoff_s: float = 8.0,
        max_concurrency: int | None = None,
        extra_body: Mapping[str, Any] | None = None,
        trust_env: bool = True,
    ) -> None:
        if not base_url:
            raise ValueError("base_url must not be empty")
        if timeout_s <= 0:
            raise ValueError(f"timeout_s must be positive, got {timeout_s}")
        if retries < 0:
            raise ValueError(f"retries must be >= 0, got {retries}")
        if backoff_s < 0 or max_backoff_s < 0:
            raise ValueError("backoff_s and max_backoff_s must be >= 0")
        if max_concurrency is not None and max_concurrency < 1:
            raise ValueError(f"max_concurrency must be >= 1, got {max_concurrency}")
        self.base_url = base_url.rstrip("/")
        self.settings = ChatSettings(
            model=model,
            temperature=float(temperature),
            seed=seed,
            max_tokens=int(max_tokens),
            extra_body=dict(extra_body) if extra_body else None,
        )
        self.timeout_s = float(timeout_s)
        self.retries = int(retries)
        self.backoff_s = float(backoff_s)
        self.max_backoff_s = float(max_backoff_s)
        self.max_concurrency = max_concurrency
        self._api_key = api_key or None
        self._trust_env = trust_env
        self._url = f"{self.base_url}/chat/completions"
        # Bound to the event loop they were created in; see _ensure_http.
        self._http: httpx.AsyncClient | None = None
        self._semaphore: asyncio.Semaphore | None = None
        self._loop: asyncio.AbstractEventLoop | None = None

    @property
    def model(self) -> str:
        """The model name."""
        return self.settings.model

    def __repr__(self) -> str:
        key = _REDACTED if self._api_key else None
        return (
            f"{type(self).__name__}(base_url={_safe_url(self.base_url)!r}, "
            f"model={self.settings.model!r}, api_key={key!r}, timeout_s={self.timeout_s}, "
            f"retries={self.retries})"
        )

    def request_hash(self, messages: Sequence[Mapping[str, Any]]) -> str:
        """Return the content address of ``messages`` sent through this client."""
        return self.settings.hash(messages)

    async def __aenter__(self) -> Self:
        return self

    async def __aexit__(
        self,
        exc_type: type[BaseException] | None,
        exc: BaseException | None,
        tb: TracebackType | None,
    ) -> None:
        await self.aclose()

    async def aclose(self) -> None:
        """Close the connection pool; the client reopens one if used again."""
        http, self._http = self._http, None
        loop, self._loop = self._loop, None
        self._semaphore = None
        # A pool opened in another (finished) loop cannot be closed from this one; dropping it
        # lets the garbage collector close its sockets.
        if http is not None and loop is asyncio.get_running_loop():
            await http.aclose()

    def _ensure_http(self) -> tuple[httpx.AsyncClient, asyncio.Semaphore | None]:
        loop = asyncio.get_running_loop()
        if self._http is None or self._loop is not loop:
            # A pool (and semaphore) from a finished loop cannot be used or closed here; drop it
            # and let the garbage collector release its sockets.
            headers = {"Accept": "application/json", "Content-Type": "application/json"}
            if self._api_key:
                headers["Authorization"] = f"Bearer {self._api_key}"
            # httpx pools at most 100 connections by default: attempts beyond that would wait
            # for one inside their timeout and fail as timeouts.
            limits = (
                httpx.Limits(
                    max_connections=self.max_concurrency,
                    max_keepalive_connections=self.max_concurrency,
                )
                if self.max_concurrency
                else httpx.Limits(max_connections=None, max_keepalive_connections=None)
            )
            self._http = httpx.AsyncClient(
                headers=headers,
                limits=limits,
                timeout=httpx.Timeout(self.timeout_s),
                trust_env=self._trust_env,
                verify=_ssl_context(self._trust_env),
                follow_redirects=False,
            )
            self._semaphore = (
                asyncio.Semaphore(self.max_concurrency) if self.max_concurrency else None
            )
            self._loop = loop
        return self._http, self._semaphore

    def _redact(self, text: str) -> str:
        if self._api_key:
            text = text.replace(self._api_key, _REDACTED)
        return text

    def _backoff(self, attempt: int, retry_after: float | None) -> float:
        if retry_after is not None:
            return min(retry_after, self.max_backoff_s)
        return min(self.backoff_s * 2 ** (attempt - 1), self.max_backoff_s)

    async def complete(self, messages: Sequence[Mapping[str, Any]]) -> ChatResult:
        """Send one chat request and return the reply.

        Args:
            messages: OpenAI chat messages (``{"role": ..., "content": ...}``).

        Returns:
            The reply with token counts, latency, attempts and request hash.

        Raises:
            ChatError: When no reply could be obtained within the retry budget, or the server
                rejected the request (4xx other than 429). Its ``unreachable`` is set when no
                attempt got a connection to the endpoint.
        """
        body = self.settings.body(messages)
        payload = orjson.dumps(body)
        digest = self.settings.hash(messages)
        started = time.perf_counter()
        attempts_allowed = self.retries + 1
        reached = False  # whether any attempt got a connection to the endpoint
        for attempt in range(1, attempts_allowed + 1):
            try:
                result = await self._attempt(payload)
            except _Retry as failure:
                reached = reached or failure.unreachable is None
                if attempt == attempts_allowed:
                    raise ChatError(
                        failure.status,
                        self._redact(failure.message),
                        attempt,
                        http_status=failure.http_status,
                        unreachable=None if reached else failure.unreachable,
                        latency_s=time.perf_counter() - started,
                    ) from None
                delay = self._backoff(attempt, failure.retry_after)
                _LOG.debug(
                    "chat request %s attempt %d/%d failed (%s); retrying in %.2fs",
                    digest[:12],
                    attempt,
                    attempts_allowed,
                    failure.status,
                    delay,
                )
                await asyncio.sleep(delay)
            except ChatError as error:
                # Final failures are raised inside the attempt; stamp the attempt count here.
                raise ChatError(
                    error.status,
                    error.message,
                    attempt,
                    http_status=error.http_status,
                    latency_s=time.perf_counter() - started,
                ) from None
            else:
                content, prompt_tokens, completion_tokens, finish_reason = result
                return ChatResult(
                    content=content,
                    status="ok",
                    latency_s=time.perf_counter() - started,
                    prompt_tokens=prompt_tokens,
                    completion_tokens=completion_tokens,
                    attempts=attempt,
                    request_hash=digest,
                    finish_reason=finish_reason,
                )
        raise AssertionError("unreachable: the loop returns or raises")  # pragma: no cover

    async def _attempt(self, payload: bytes) -> tuple[str, int | None, int | None, str | None]:
        """Make one HTTP attempt; raise ``_Retry`` (retryable) or :class:`ChatError` (final)."""
        http, semaphore = self._ensure_http()
        if semaphore is not None:
            async with semaphore:
                return await self._post(http, payload)
        return await self._post(http, payload)

    async def _post(
        self, http: httpx.AsyncClient, payload: bytes
    ) -> tuple[str, int | None, int | None, str | None]:
        connected = False

        async def trace(event: str, _info: Mapping[str, Any]) -> None:
            nonlocal connected
            if event == _CONNECTED_EVENT or event.startswith(_REQUEST_EVENTS):
                connected = True

        try:
            # httpx applies timeout_s per phase; this bounds the attempt as a whole, so a server
            # that trickles bytes cannot stretch it.
            async with asyncio.timeout(self.timeout_s):
                response = await http.post(self._url, content=payload, extensions={"trace": trace})
                raw = response.content
        except (TimeoutError, httpx.TimeoutException):
            if connected:
                raise _Retry("timeout", f"no reply within {self.timeout_s:g} s") from None
            # The deadline ran out before a connection was made (a host that drops the
            # connection attempt): that is the attempt timing out whichever timer fired first.
            waited = f"no connection within {self.timeout_s:g} s"
            raise _Retry("timeout", waited, unreachable=waited) from None
        except (httpx.UnsupportedProtocol, httpx.InvalidURL) as exc:
            raise ChatError(
                "connection_error", self._redact(f"cannot use base_url: {exc}")
            ) from None
        except httpx.HTTPError as exc:
            detail = str(exc) or "connection failed"
            raise _Retry(
                "connection_error",
                self._redact(f"{type(exc).__name__}: {detail}"),
                unreachable=None if connected else self._redact(_connect_failure(exc)),
            ) from None

        code = response.status_code
        if code == 429:
            retry_after = _parse_retry_after(response.headers.get("retry-after"))
            raise _Retry(
                "rate_limited",
                f"HTTP 429 from {_safe_url(self._url)}",
                http_status=code,
                retry_after=retry_after,
            )
        if code >= 500:
            raise _Retry(
                "server_error",
                f"HTTP {code} from {_safe_url(self._url)}: {self._snippet(raw)}",
                http_status=code,
            )
        if code != 200:
            raise ChatError(
                "http_error",
                f"HTTP {code} from {_safe_url(self._url)}: {self._snippet(raw)}",
                http_status=code,
            )
        return self._read_completion(raw)

    def _snippet(self, raw: bytes) -> str:
        text = self._redact(raw[:_REDACTION_WINDOW].decode("utf-8", errors="replace"))
        return text[:_BODY_SNIPPET].strip() or "(empty body)"

    def _read_completion(self, raw: bytes) -> tuple[str, int | None, int | None, str | None]:
        try:
            document = orjson.loads(raw)
        except orjson.JSONDecodeError:
            raise _Retry("malformed_response", f"reply is not JSON: {self._snippet(raw)}") from None
        choices = document.get("choices") if isinstance(document, dict) else None
        if not isinstance(choices, list) or not choices or not isinstance(choices[0], dict):
            raise _Retry("malformed_response", "reply has no choices")
        message = choices[0].get("message")
        content = message.get("content") if isinstance(message, dict) else None
        if not isinstance(content, str):
            raise _Retry("malformed_response", "reply has no message content string")
        usage = document.get("usage")
        usage = usage if isinstance(usage, dict) else {}
        finish_reason = choices[0].get("finish_reason")
        return (
            content,
            _token_count(usage.get("prompt_tokens")),
            _token_count(usage.get("completion_tokens")),
            finish_reason if isinstance(finish_reason, str) else None,
        )


def _connect_failure(exc: BaseException) -> str:
    """Why a connection could not be made, in a few words, read from ``exc``'s causes.

    httpx wraps the socket's error several layers deep (httpx, httpcore, anyio, ``OSError``).
    """
    cause: BaseException | None = exc
    for _ in range(8):  # the chain is four or five long; cut short rather than loop
        if cause is None:
            break
        if isinstance(cause, ConnectionRefusedError):
            return "connection refused"
        if isinstance(cause, socket.gaierror):
            return "host name not resolved"
        if isinstance(cause, OSError) and cause.errno:
            return os.strerror(cause.errno).lower()
        cause = cause.__cause__ or cause.__context__
    return str(exc) or type(exc).__name__


def _token_count(value: object) -> int | None:
    # bool is an int subclass; a server sending true/false has not reported a count.
    if isinstance(value, int) and not isinstance(value, bool) and value >= 0:
        return value
    return None
