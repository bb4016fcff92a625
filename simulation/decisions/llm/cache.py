"""A content-addressed SQLite cache of chat replies, and the record/replay client built on it.

Every request is keyed by its :func:`~simulation.decisions.llm.client.request_hash`. A run in
``record`` mode stores each reply it gets; the same run in ``replay`` mode is then answered
entirely from the cache, without the endpoint (or any HTTP client) at all. Rows hold no
wall-clock time, only an insertion counter, so a cache file's content depends on the requests
alone. The API key is never stored: the request column holds the request body, which has none.
"""

from __future__ import annotations

import asyncio
import sqlite3
import threading
from dataclasses import dataclass, replace
from pathlib import Path
from typing import TYPE_CHECKING, Any, Final, Literal, Self

import orjson

from simulation.decisions.llm.client import ChatClient, ChatError, ChatResult, ChatSettings

if TYPE_CHECKING:
    import os
    from collections.abc import Mapping, Sequence
    from types import TracebackType

__all__ = [
    "CACHE_MODES",
    "CacheMiss",
    "CacheMode",
    "CachedReply",
    "CachingChatClient",
    "ResponseCache",
]

#: ``live``: always ask the endpoint, store nothing; ``record``: answer from the cache when
#: possible, else ask and store; ``replay``: answer only from the cache.
CacheMode = Literal["live", "record", "replay"]
CACHE_MODES: Final = ("live", "record", "replay")

#: Schema version kept in ``PRAGMA user_version``; bump on incompatible changes.
_SCHEMA_VERSION = 1

_SCHEMA = """
CREATE TABLE IF NOT EXISTS responses (
    request_hash TEXT PRIMARY KEY,
    request TEXT NOT NULL,
    content TEXT NOT NULL,
    prompt_tokens INTEGER,
    completion_tokens INTEGER,
    created_seq INTEGER NOT NULL
)
"""


class CacheMiss(ChatError):  # noqa: N818 - the name is part of the design's interface
    """Replay mode met a request that the cache does not hold.

    Args:
        request_hash: The content address of the missing request.
        origin: The config file the run was read from. When given, the error reads like the
            command line's other input errors: ``<origin>: decision.llm.cache: no cached
            reply ...``.

    Attributes:
        request_hash: The content address of the missing request.
        origin: The config file, if known.
    """

    def __init__(self, request_hash: str, origin: str | None = None) -> None:
        self.request_hash = request_hash
        self.origin = origin
        super().__init__(
            "cache_miss",
            f"no cached reply for request {request_hash} in replay mode; record the run first "
            "(decision.llm.mode: record) with the same config, prompts and model settings",
            0,
        )
        if origin is not None:
            self.args = (f"{origin}: decision.llm.cache: {self.message}",)

    def __reduce__(self) -> tuple[Any, ...]:
        return (type(self), (self.request_hash, self.origin))


@dataclass(frozen=True, slots=True)
class CachedReply:
    """A stored reply.

    Attributes:
        request_hash: The request's content address.
        content: The assistant content.
        prompt_tokens: Prompt tokens reported when recorded, if any.
        completion_tokens: Completion tokens reported when recorded, if any.
        created_seq: Insertion order in this cache file, from 1.
    """

    request_hash: str
    content: str
    prompt_tokens: int | None
    completion_tokens: int | None
    created_seq: int


class ResponseCache:
    """SQLite store of chat replies keyed by request hash.

    One connection guarded by a lock, so it may be used from the event-loop thread and from
    worker threads alike. The database runs in WAL mode with autocommit: every :meth:`put` is
    durable on return, and several processes may share one file (SQLite serialises writers;
    ``busy_timeout_s`` bounds the wait).

    Args:
        path: The database file (created if missing unless ``read_only``), or ``":memory:"``.
        read_only: Open an existing file without write access (for replay); a missing file then
            raises ``FileNotFoundError`` instead of silently creating an empty cache.
        busy_timeout_s: How long a write waits for another process's lock.
        require_replies: Refuse a database without a ``responses`` table (``None``: when
            ``read_only``). ``read_only=True, require_replies=False`` checks, without changing
            it, that a file a recording would append to is a cache.

    Raises:
        ValueError: For a file that is not an SQLite database, a newer schema, or (when replies
            are required) a database without recorded replies.
        FileNotFoundError: ``read_only`` and no such file.
        IsADirectoryError: ``read_only`` and the path is a folder.
    """

    def __init__(
        self,
        path: str | os.PathLike[str],
        *,
        read_only: bool = False,
        busy_timeout_s: float = 30.0,
        require_replies: bool | None = None,
    ) -> None:
        self.path = str(path)
        self.read_only = read_only
        self._require_replies = read_only if require_replies is None else require_replies
        self._lock = threading.Lock()
        if read_only:
            file = Path(self.path)
            if file.is_dir():
                raise IsADirectoryError(f"response cache {self.path} is a folder, not a file")
            if not file.is_file():
                raise FileNotFoundError(f"response cache {self.path} does not exist")
            self._db = sqlite3.connect(
                f"{file.resolve().as_uri()}?mode=ro",
                uri=True,
                timeout=busy_timeout_s,
                check_same_thread=False,
                isolation_level=None,
            )
        else:
            if self.path != ":memory:":
                Path(self.path).parent.mkdir(parents=True, exist_ok=True)
            try:
                self._db = sqlite3.connect(
                    self.path,
                    timeout=busy_timeout_s,
                    check_same_thread=False,
                    isolation_level=None,
                )
            except sqlite3.OperationalError as err:
                # A folder the permission check took for writable (a read-only file system,
                # /proc): an OSError, which a run reports in one line as any file it cannot
                # write.
                msg = f"response cache {self.path}: cannot be opened for writing ({err})"
                raise PermissionError(msg) from None
            self._db.execute("PRAGMA journal_mode=WAL")
            # With WAL, NORMAL keeps the database consistent on power loss at a small fraction
            # of FULL's fsync cost.
            self._db.execute("PRAGMA synchronous=NORMAL")
        self._check_schema()

    def _check_schema(self) -> None:
        try:
            version = self._db.execute("PRAGMA user_version").fetchone()[0]
            tables = {row[0] for row in self._db.execute("SELECT name FROM sqlite_master")}
        except sqlite3.DatabaseError as err:  # another kind of file
            self._db.close()
            msg = f"response cache {self.path} is not an SQLite database ({err})"
            raise ValueError(msg) from None
        if version > _SCHEMA_VERSION:
            self._db.close()
            raise ValueError(
                f"response cache {self.path} has schema version {version}; this floodsim "
                f"understands up to {_SCHEMA_VERSION}"
            )
        if self._require_replies and "responses" not in tables:
            self._db.close()
            msg = f"response cache {self.path} holds no recorded replies (no responses table)"
            raise ValueError(msg)
        if not self.read_only:
            self._db.execute(_SCHEMA)
            self._db.execute(f"PRAGMA user_version = {_SCHEMA_VERSION}")

    def get(self, request_hash: str) -> CachedReply | None:
        """Return the stored reply for ``request_hash``, or ``None``."""
        with self._lock:
            row = self._db.execute(
                "SELECT content, prompt_tokens, completion_tokens, created_seq "
                "FROM responses WHERE request_hash = ?",
                (request_hash,),
            ).fetchone()
        if row is None:
            return None
        return CachedReply(request_hash, row[0], row[1], row[2], row[3])

    def put(
        self,
        request_hash: str,
        request: Mapping[str, Any],
        content: str,
        tokens: tuple[int | None, int | None] | None = None,
        *,
        replace: bool = False,
    ) -> bool:
        """Store a reply unless one is already stored for ``request_hash``.

        The first reply stored wins, so a recorded run and its replay see the same content even
        when two identical requests got different replies.

        Args:
            request_hash: The request's content address.
            request: The request body (stored for inspection; must not hold secrets).
            content: The assistant content.
            tokens: ``(prompt_tokens, completion_tokens)`` as reported, or ``None``.
            replace: Overwrite a stored entry (used to replace a recorded failure).

        Returns:
            Whether a new row was written.
        """
        prompt_tokens, completion_tokens = tokens if tokens is not None else (None, None)
        request_json = orjson.dumps(dict(request), option=orjson.OPT_SORT_KEYS).decode()
        with self._lock:
            cursor = self._db.execute(
                f"INSERT OR {'REPLACE' if replace else 'IGNORE'} INTO responses "
                "(request_hash, request, content, "
                "prompt_tokens, completion_tokens, created_seq) VALUES (?, ?, ?, ?, ?, "
                "(SELECT COALESCE(MAX(created_seq), 0) + 1 FROM responses))",
                (request_hash, request_json, content, prompt_tokens, completion_tokens),
            )
        return cursor.rowcount == 1

    def request(self, request_hash: str) -> dict[str, Any] | None:
        """Return the stored request body for ``request_hash`` (for inspection), or ``None``."""
        with self._lock:
            row = self._db.execute(
                "SELECT request FROM responses WHERE request_hash = ?", (request_hash,)
            ).fetchone()
        return None if row is None else orjson.loads(row[0])

    def __len__(self) -> int:
        with self._lock:
            return int(self._db.execute("SELECT COUNT(*) FROM responses").fetchone()[0])

    def __contains__(self, request_hash: object) -> bool:
        return isinstance(request_hash, str) and self.get(request_hash) is not None

    def close(self) -> None:
        """Close the connection (checkpointing the WAL into the main file)."""
        with self._lock:
            self._db.close()

    def __enter__(self) -> Self:
        return self

    def __exit__(
        self,
        exc_type: type[BaseException] | None,
        exc: BaseException | None,
        tb: TracebackType | None,
    ) -> None:
        self.close()

    def __repr__(self) -> str:
        return f"{type(self).__name__}({self.path!r}, read_only={self.read_only})"


class CachingChatClient:
    """A chat client that records replies to, or replays them from, a :class:`ResponseCache`.

    Identical requests in flight at the same time are sent once in ``record`` mode (the others
    wait and read the stored reply). Results served from the cache have ``cached=True``,
    ``attempts=0`` and ``latency_s=0.0``.

    Args:
        client: The HTTP client; may be ``None`` in ``replay`` mode.
        cache: Where replies are stored.
        mode: ``live``, ``record`` or ``replay`` (see :data:`CacheMode`).
        settings: Request settings used to compute hashes when ``client`` is ``None``; must
            match the recorded run's model, temperature, seed and max_tokens.

    Attributes:
        hits: Requests answered from the cache.
        misses: Requests that were not in the cache (sent in record mode, raised in replay).
        calls: Requests sent to the endpoint.
    """

    def __init__(
        self,
        client: ChatClient | None,
        cache: ResponseCache,
        mode: CacheMode = "record",
        *,
        settings: ChatSettings | None = None,
    ) -> None:
        if mode not in CACHE_MODES:
            raise ValueError(f"unknown cache mode {mode!r}; expected one of {CACHE_MODES}")
        if client is None and mode != "replay":
            raise ValueError(f"mode {mode!r} needs a ChatClient; only replay works without one")
        if mode == "record" and cache.read_only:
            raise ValueError("record mode needs a writable cache; open it without read_only")
        if settings is None:
            if client is None:
                raise ValueError("replay without a client needs the settings to hash requests")
            settings = client.settings
        self.client = client
        self.cache = cache
        self.mode: CacheMode = mode
        self.settings: ChatSettings = settings
        self.hits = 0
        self.misses = 0
        self.calls = 0
        # Per-hash lock and the number of callers holding or awaiting it.
        self._inflight: dict[str, tuple[asyncio.Lock, int]] = {}

    def __repr__(self) -> str:
        return (
            f"{type(self).__name__}(client={self.client!r}, cache={self.cache!r}, "
            f"mode={self.mode!r})"
        )

    def request_hash(self, messages: Sequence[Mapping[str, Any]]) -> str:
        """Return the content address of ``messages``."""
        return self.settings.hash(messages)

    async def complete(self, messages: Sequence[Mapping[str, Any]]) -> ChatResult:
        """Return the reply to ``messages`` according to the mode.

        Raises:
            CacheMiss: In replay mode, when the request was never recorded.
            ChatError: When the endpoint gives no reply (live and record modes).
        """
        if self.mode == "live":
            self.calls += 1
            return await self._client().complete(messages)
        digest = self.settings.hash(messages)
        hit = self.cache.get(digest)
        # A recorded failure is replayed as that failure; recording tries the endpoint again.
        if hit is not None and (self.mode == "replay" or not is_failure(hit.content)):
            self.hits += 1
            return _from_cache(hit)
        if self.mode == "replay":
            self.misses += 1
            raise CacheMiss(digest)
        return await self._record(digest, messages)

    async def _record(self, digest: str, messages: Sequence[Mapping[str, Any]]) -> ChatResult:
        lock, holders = self._inflight.get(digest, (None, 0))
        if lock is None:
            lock = asyncio.Lock()
        self._inflight[digest] = (lock, holders + 1)
        try:
            async with lock:
                # An identical request may have been stored while this one waited.
                hit = self.cache.get(digest)
                if hit is not None and not is_failure(hit.content):
                    self.hits += 1
                    return _from_cache(hit)
                failed_before = hit is not None
                self.misses += 1
                self.calls += 1
                try:
                    result = await self._client().complete(messages)
                except ChatError as err:
                    # Record the failure too, so that a replay takes the same fallback.
                    self.cache.put(
                        digest, self.settings.body(messages), _failure(err), replace=True
                    )
                    raise
                stored = self.cache.put(
                    digest,
                    self.settings.body(messages),
                    result.content,
                    (result.prompt_tokens, result.completion_tokens),
                    replace=failed_before,
                )
                if not stored:
                    # Another process recorded this request first; use its reply so this run
                    # behaves exactly as its replay will.
                    winner = self.cache.get(digest)
                    if winner is not None:
                        return replace(
                            result,
                            content=winner.content,
                            prompt_tokens=winner.prompt_tokens,
                            completion_tokens=winner.completion_tokens,
                        )
                return result
        finally:
            lock_now, holders_now = self._inflight[digest]
            if holders_now <= 1:
                del self._inflight[digest]
            else:
                self._inflight[digest] = (lock_now, holders_now - 1)

    def _client(self) -> ChatClient:
        if self.client is None:  # pragma: no cover - guarded in __init__
            raise RuntimeError("no ChatClient configured")
        return self.client

    async def aclose(self) -> None:
        """Close the HTTP client (the cache is left open; its owner closes it)."""
        if self.client is not None:
            await self.client.aclose()

    async def __aenter__(self) -> Self:
        return self

    async def __aexit__(
        self,
        exc_type: type[BaseException] | None,
        exc: BaseException | None,
        tb: TracebackType | None,
    ) -> None:
        await self.aclose()


#: Prefix of a recorded failure; a reply's content never starts with a NUL character.
FAILURE_PREFIX = "\x00floodsim-failure:"


def is_failure(content: str) -> bool:
    """Whether cached ``content`` records a failed request rather than a reply."""
    return content.startswith(FAILURE_PREFIX)


def _failure(err: ChatError) -> str:
    return FAILURE_PREFIX + orjson.dumps({"status": err.status, "message": err.message}).decode()


def _from_cache(hit: CachedReply) -> ChatResult:
    if is_failure(hit.content):
        failure = orjson.loads(hit.content.removeprefix(FAILURE_PREFIX))
        raise ChatError(failure["status"], failure["message"], 0)
    return replace(
        _CACHED_TEMPLATE,
        content=hit.content,
        prompt_tokens=hit.prompt_tokens,
        completion_tokens=hit.completion_tokens,
        request_hash=hit.request_hash,
    )


# Fixed fields of every cache-served result: no attempts, no latency (nothing wall-clock).
_CACHED_TEMPLATE = ChatResult(
    content="",
    status="ok",
    latency_s=0.0,
    prompt_tokens=None,
    completion_tokens=None,
    attempts=0,
    request_hash="",
    cached=True,
)
