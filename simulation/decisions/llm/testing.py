"""A fake OpenAI-compatible chat server for tests, with latency and fault injection.

:class:`FakeOpenAIServer` is a real HTTP server on ``127.0.0.1`` (a free port chosen by the OS)
that answers ``POST /v1/chat/completions`` like an OpenAI endpoint. It runs in a daemon thread,
serves each connection in its own thread (so many slow requests overlap), records every request
it receives, and can be told to misbehave per request::

    with FakeOpenAIServer(latency_s=0.1, faults=["429", "timeout"]) as server:
        client = ChatClient(server.base_url, "fake-model", timeout_s=0.3)
        ...
        assert len(server.requests) == 3

Faults are given either as a script (one entry per request, in arrival order; requests beyond
the script are answered normally) or as a callable ``faults(index, body) -> spec | None``. A
spec is a :class:`Fault`, a fault kind, or a shorthand: an HTTP status (``429``, ``"503"``,
``401``), ``"malformed"`` or ``"fence"``.

Everything stops when the context exits: sleeping handlers are woken and open connections are
shut down, so a test never waits for a simulated timeout to run out.
"""

from __future__ import annotations

import contextlib
import json
import socket
import sys
import threading
from dataclasses import dataclass, field
from http import HTTPStatus
from http.server import BaseHTTPRequestHandler, ThreadingHTTPServer
from typing import TYPE_CHECKING, Any, Final, Literal, Self, get_args

if TYPE_CHECKING:
    from collections.abc import Callable, Mapping, Sequence
    from types import TracebackType

__all__ = [
    "DEFAULT_DECISION",
    "FAULT_KINDS",
    "FakeOpenAIServer",
    "Fault",
    "FaultKind",
    "FaultSpec",
    "RecordedRequest",
    "closed_port",
]

FaultKind = Literal[
    "ok",
    "timeout",
    "rate_limit",
    "server_error",
    "http_error",
    "malformed_body",
    "missing_choices",
    "connection_close",
    "prose",
    "code_fence",
    "invalid_json",
    "unknown_skill",
]

#: Every fault kind :class:`FakeOpenAIServer` can inject.
FAULT_KINDS: Final = frozenset(get_args(FaultKind))

_ALIASES: Final = {
    "malformed": "malformed_body",
    "fence": "code_fence",
    "fenced": "code_fence",
    "close": "connection_close",
    "drop": "connection_close",
    "rate_limited": "rate_limit",
}

#: The default assistant content: a valid decision reply choosing ``do_nothing``.
DEFAULT_DECISION: Final[dict[str, Any]] = {
    "skill": "do_nothing",
    "parameters": {},
    "constructs": {
        "TP": {"level": "L", "explanation": "No recent floods are remembered."},
        "CP": {"level": "M", "explanation": "Protective measures are affordable but costly."},
    },
    "justification": "The perceived threat is low, so no action is taken this year.",
}

#: How long a ``timeout`` fault stalls unless told otherwise; stopping the server cuts it short.
_DEFAULT_STALL_S = 30.0
#: Socket timeout of a handler: bounds an idle keep-alive connection the client never closes.
_HANDLER_TIMEOUT_S = 10.0


@dataclass(frozen=True, slots=True)
class Fault:
    """One injected misbehaviour.

    Attributes:
        kind: What to do (see :data:`FAULT_KINDS`).
        status: HTTP status for ``server_error`` (default 500) and ``http_error`` (default 400).
        retry_after: ``Retry-After`` header value (seconds) for ``rate_limit``; omitted if None.
        delay_s: How long a ``timeout`` stalls before dropping the connection (default 30 s).
        body: Response body for ``rate_limit``/``server_error``/``http_error`` (default: an
            OpenAI-style JSON error).
    """

    kind: str
    status: int | None = None
    retry_after: float | None = None
    delay_s: float | None = None
    body: str | None = None

    def __post_init__(self) -> None:
        if self.kind not in FAULT_KINDS:
            raise ValueError(f"unknown fault kind {self.kind!r}; expected one of {FAULT_KINDS}")

    @classmethod
    def coerce(cls, spec: FaultSpec) -> Fault:
        """Turn a fault spec (Fault, kind, alias, HTTP status or None) into a :class:`Fault`."""
        if isinstance(spec, Fault):
            return spec
        if spec is None:
            return cls("ok")
        text = str(spec).strip().lower()
        if text.isdigit():
            code = int(text)
            if code == 429:
                return cls("rate_limit")
            if code >= 500:
                return cls("server_error", status=code)
            if code >= 400:
                return cls("http_error", status=code)
            raise ValueError(f"HTTP status {code} is not a fault")
        return cls(_ALIASES.get(text, text))


#: Anything :meth:`Fault.coerce` accepts.
FaultSpec = Fault | str | int | None


@dataclass(frozen=True, slots=True)
class RecordedRequest:
    """A request as the server received it.

    Attributes:
        index: Arrival order, from 0.
        method: HTTP method.
        path: Request path.
        headers: Request headers (names lower-cased).
        body: The parsed JSON body, or ``None`` when it was not JSON.
        fault: The fault kind applied to this request (``"ok"`` for none).
    """

    index: int
    method: str
    path: str
    headers: dict[str, str] = field(repr=False)
    body: Any
    fault: str

    @property
    def authorization(self) -> str | None:
        """The ``Authorization`` header, if sent."""
        return self.headers.get("authorization")


def closed_port() -> int:
    """Return a loopback port with nothing listening (connections to it are refused)."""
    with socket.socket(socket.AF_INET, socket.SOCK_STREAM) as probe:
        probe.bind(("127.0.0.1", 0))
        port: int = probe.getsockname()[1]
    return port


def _word_count(value: object) -> int:
    """A stand-in token count: whitespace-separated words."""
    return len(value.split()) if isinstance(value, str) else 0


class _Server(ThreadingHTTPServer):
    daemon_threads = True
    # The default backlog of 5 drops SYNs when many clients connect at once, which costs a
    # one-second retransmit; concurrency tests would measure that instead of the client.
    request_queue_size = 128
    owner: FakeOpenAIServer

    def handle_error(self, request: Any, client_address: Any) -> None:
        """Stay silent when a client went away (a cancelled or timed-out request); else print."""
        if not isinstance(sys.exc_info()[1], ConnectionError):
            super().handle_error(request, client_address)


class _Handler(BaseHTTPRequestHandler):
    protocol_version = "HTTP/1.1"  # keep-alive, as real endpoints and httpx's pool expect
    # Headers and body go out in two sends; with Nagle's algorithm the second waits for the
    # client's delayed ACK (~40 ms per request), which a latency benchmark would measure.
    disable_nagle_algorithm = True
    timeout = _HANDLER_TIMEOUT_S
    server: _Server

    def setup(self) -> None:
        super().setup()
        self.server.owner._track(self.connection, add=True)

    def finish(self) -> None:
        try:
            super().finish()
        finally:
            self.server.owner._track(self.connection, add=False)

    def log_message(self, format: str, *args: Any) -> None:  # noqa: A002 - stdlib signature
        """Stay silent: test output should not fill with access logs."""

    def do_GET(self) -> None:
        """Answer ``/v1/models`` (some clients probe it) and 404 elsewhere."""
        if self.path.rstrip("/").endswith("/models"):
            owner = self.server.owner
            self._send_json(
                200, {"object": "list", "data": [{"id": owner.model, "object": "model"}]}
            )
        else:
            self._send_error_json(404, "not found")

    def do_POST(self) -> None:
        """Answer a chat-completions request, applying this request's fault."""
        length = int(self.headers.get("Content-Length") or 0)
        raw = self.rfile.read(length) if length > 0 else b""
        try:
            body = json.loads(raw) if raw else None
        except ValueError:
            body = None
        self.server.owner._handle(self, body)

    def _send(self, code: int, payload: bytes, headers: Mapping[str, str] | None = None) -> None:
        self.send_response(code)
        self.send_header("Content-Type", "application/json")
        self.send_header("Content-Length", str(len(payload)))
        for name, value in (headers or {}).items():
            self.send_header(name, value)
        self.end_headers()
        self.wfile.write(payload)
        self.wfile.flush()

    def _send_json(
        self, code: int, document: Any, headers: Mapping[str, str] | None = None
    ) -> None:
        self._send(code, json.dumps(document).encode(), headers)

    def _send_error_json(self, code: int, message: str) -> None:
        self._send_json(code, {"error": {"message": message, "type": HTTPStatus(code).phrase}})


class FakeOpenAIServer:
    """An OpenAI-compatible chat server on loopback for tests.

    Args:
        latency_s: How long every request waits before it is answered.
        responder: ``responder(body) -> str | dict`` gives the assistant content for a request
            body (a dict is sent as JSON text); default: :data:`DEFAULT_DECISION`.
        faults: A script of fault specs (one per request, in arrival order) or a callable
            ``faults(index, body) -> spec | None``.
        model: The model name reported when a request names none.
        report_usage: Whether replies carry a ``usage`` block.
        port: The loopback port to listen on; 0 (the default) lets the OS choose a free one. A
            test can start a server at the address an earlier run found nothing listening on
            (:func:`closed_port`), so that run can be resumed against it.
    """

    def __init__(
        self,
        *,
        latency_s: float = 0.0,
        responder: Callable[[Any], str | Mapping[str, Any]] | None = None,
        faults: Sequence[FaultSpec] | Callable[[int, Any], FaultSpec] | None = None,
        model: str = "fake-model",
        report_usage: bool = True,
        port: int = 0,
    ) -> None:
        self.latency_s = float(latency_s)
        self._requested_port = int(port)
        self.responder = responder
        self.model = model
        self.report_usage = report_usage
        if faults is None or callable(faults):
            self._script: list[Fault] = []
            self._fault_fn = faults
        else:
            self._script = [Fault.coerce(spec) for spec in faults]
            self._fault_fn = None
        self._lock = threading.Lock()
        self._requests: list[RecordedRequest] = []
        self._in_flight = 0
        self._peak_in_flight = 0
        self._connections: set[socket.socket] = set()
        self._stopping = threading.Event()
        self._httpd: _Server | None = None
        self._thread: threading.Thread | None = None

    # -- lifecycle ---------------------------------------------------------------------------

    def start(self) -> Self:
        """Bind a free loopback port and serve in a daemon thread."""
        if self._httpd is not None:
            raise RuntimeError("server already started")
        self._stopping.clear()
        httpd = _Server(("127.0.0.1", self._requested_port), _Handler)
        httpd.owner = self
        self._httpd = httpd
        self._thread = threading.Thread(
            target=httpd.serve_forever,
            kwargs={"poll_interval": 0.05},
            name=f"FakeOpenAIServer:{self.port}",
            daemon=True,
        )
        self._thread.start()
        return self

    def stop(self) -> None:
        """Stop serving, wake stalled handlers, drop open connections and join the threads."""
        httpd, self._httpd = self._httpd, None
        if httpd is None:
            return
        self._stopping.set()
        httpd.shutdown()
        with self._lock:
            connections = list(self._connections)
        for connection in connections:
            # Wakes handlers blocked reading an idle keep-alive connection.
            with contextlib.suppress(OSError):
                connection.shutdown(socket.SHUT_RDWR)
        httpd.server_close()
        if self._thread is not None:
            self._thread.join(timeout=5.0)
            self._thread = None

    def __enter__(self) -> Self:
        return self.start()

    def __exit__(
        self,
        exc_type: type[BaseException] | None,
        exc: BaseException | None,
        tb: TracebackType | None,
    ) -> None:
        self.stop()

    # -- introspection -----------------------------------------------------------------------

    @property
    def port(self) -> int:
        """The bound port."""
        if self._httpd is None:
            raise RuntimeError("server not started")
        return int(self._httpd.server_address[1])

    @property
    def base_url(self) -> str:
        """The endpoint root to give a client, e.g. ``http://127.0.0.1:PORT/v1``."""
        return f"http://127.0.0.1:{self.port}/v1"

    @property
    def requests(self) -> list[RecordedRequest]:
        """A snapshot of the requests received so far, in arrival order."""
        with self._lock:
            return list(self._requests)

    @property
    def peak_in_flight(self) -> int:
        """The most chat requests the server was handling at once so far.

        Concurrency tests assert on it rather than on wall-clock time, which a loaded machine
        stretches.
        """
        with self._lock:
            return self._peak_in_flight

    def __repr__(self) -> str:
        where = self.base_url if self._httpd is not None else "stopped"
        return f"{type(self).__name__}({where}, requests={len(self._requests)})"

    # -- request handling (handler threads) ----------------------------------------------------

    def _track(self, connection: socket.socket, *, add: bool) -> None:
        with self._lock:
            if add:
                self._connections.add(connection)
            else:
                self._connections.discard(connection)

    def _register(self, handler: _Handler, body: Any) -> tuple[int, Fault]:
        with self._lock:
            index = len(self._requests)
            if self._fault_fn is not None:
                fault = Fault.coerce(self._fault_fn(index, body))
            elif index < len(self._script):
                fault = self._script[index]
            else:
                fault = Fault("ok")
            self._requests.append(
                RecordedRequest(
                    index=index,
                    method=handler.command,
                    path=handler.path,
                    headers={name.lower(): value for name, value in handler.headers.items()},
                    body=body,
                    fault=fault.kind,
                )
            )
            self._in_flight += 1
            self._peak_in_flight = max(self._peak_in_flight, self._in_flight)
        return index, fault

    def _handle(self, handler: _Handler, body: Any) -> None:
        if not handler.path.rstrip("/").endswith("/chat/completions"):
            handler._send_error_json(404, "not found")
            return
        index, fault = self._register(handler, body)
        try:
            self._answer(handler, body, index, fault)
        finally:
            with self._lock:
                self._in_flight -= 1

    def _answer(self, handler: _Handler, body: Any, index: int, fault: Fault) -> None:
        """Wait out the latency, then answer one registered request as its fault says."""
        if self.latency_s > 0:
            self._stopping.wait(self.latency_s)
        kind = fault.kind
        if kind == "timeout":
            # Stall past the client's deadline; stop() wakes this early.
            self._stopping.wait(_DEFAULT_STALL_S if fault.delay_s is None else fault.delay_s)
            handler.close_connection = True
        elif kind == "connection_close":
            # No status line at all: the client sees the connection end mid-request.
            handler.close_connection = True
        elif kind == "rate_limit":
            headers = {}
            if fault.retry_after is not None:
                seconds = fault.retry_after
                headers["Retry-After"] = str(int(seconds) if seconds == int(seconds) else seconds)
            self._send_fault_body(handler, 429, fault, headers)
        elif kind in {"server_error", "http_error"}:
            default = 500 if kind == "server_error" else 400
            self._send_fault_body(handler, fault.status or default, fault)
        elif kind == "malformed_body":
            handler._send(200, b"<html>502 Bad Gateway</html> not json {")
        elif not isinstance(body, dict):
            handler._send_error_json(400, "request body must be a JSON object")
        elif kind == "missing_choices":
            handler._send_json(200, {"id": f"chatcmpl-fake-{index}", "object": "chat.completion"})
        else:
            handler._send_json(200, self._completion(index, body, self._content(body, kind)))

    @staticmethod
    def _send_fault_body(
        handler: _Handler, code: int, fault: Fault, headers: Mapping[str, str] | None = None
    ) -> None:
        if fault.body is not None:
            handler._send(code, fault.body.encode(), headers)
        else:
            message = {"error": {"message": f"injected HTTP {code}", "code": code}}
            handler._send_json(code, message, headers)

    def _content(self, body: dict[str, Any], kind: str) -> str:
        reply = self.responder(body) if self.responder is not None else DEFAULT_DECISION
        if kind == "unknown_skill":
            reply = {**DEFAULT_DECISION, "skill": "build_a_moat"}
        text = reply if isinstance(reply, str) else json.dumps(reply)
        if kind == "prose":
            return f"Sure! After weighing my memories, here is my decision:\n{text}\nThank you."
        if kind == "code_fence":
            return f"```json\n{text}\n```"
        if kind == "invalid_json":
            # Truncated mid-object, as when a reply hits max_tokens.
            return text[: max(1, len(text) // 2)]
        return text

    def _completion(self, index: int, body: dict[str, Any], content: str) -> dict[str, Any]:
        document: dict[str, Any] = {
            "id": f"chatcmpl-fake-{index}",
            "object": "chat.completion",
            # Deterministic stand-in for the creation time; nothing should depend on it.
            "created": 1_700_000_000 + index,
            "model": body.get("model") or self.model,
            "choices": [
                {
                    "index": 0,
                    "message": {"role": "assistant", "content": content},
                    "finish_reason": "stop",
                }
            ],
        }
        if self.report_usage:
            messages = body.get("messages")
            prompt = sum(
                _word_count(message.get("content"))
                for message in (messages if isinstance(messages, list) else [])
                if isinstance(message, dict)
            )
            completion = _word_count(content)
            document["usage"] = {
                "prompt_tokens": prompt,
                "completion_tokens": completion,
                "total_tokens": prompt + completion,
            }
        return document
