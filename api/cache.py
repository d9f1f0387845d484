"""The read cache: answers of GET endpoints kept per worker process until stored data changes.

What is cached: the 200 answers of the GET endpoints that declare :data:`Cacheable` (counter
reads, tiers, reports, report runs, measurements, catalogue), keyed by the token's scope, the
path and the query string with its parameters sorted by name (repeated parameters keep their
order: ``counters=a&counters=b`` is not ``counters=b&counters=a``). Live reads (``/active``,
MEASSTATUS) and ``/health`` are never cached, nor is anything that depends on the clock
(``/tiers/…/auto`` without ``to``).

When it is dropped: every table of ``_measure`` that an answer can come from NOTIFYs channel
``measuredb_data`` at the end of each statement that changes it (statement-level triggers of
schema/idempotent/032-api-cache.sql: interval records, copies, entities, measurements, tiers,
thresholds, report runs …; not the heartbeat, the checkpoint row nor the control requests).
Each worker LISTENs on its own connection (:class:`DataListener`, one more database
connection per worker) and drops its whole cache on a ``data`` notification (its token cache
on a ``token`` one: a token created, revoked or deleted). With TimescaleDB, retention's
drop_chunks is not notified (see the SQL file).

Why an answer is never stale: before a cached answer is served, the worker makes a round trip
on its LISTEN connection (:meth:`DataListener.sync`; one round trip serves every request of
the same turn of the event loop). PostgreSQL signals listeners when a transaction commits,
before the committing client hears COMMIT, and a backend sends the notifications it was
signalled before it answers the next command; so every commit that finished before the
request arrived has emptied the cache before the lookup. An answer computed while a change
committed is not stored (the cache's generation moved on), and one stored just before a
notification arrives is dropped by it. While the LISTEN connection is down the cache is
bypassed (nothing served, nothing stored) and emptied when it is back (reconnecting every
second). On a Citus database the cache is off for good, said once in the log (``read cache
off: …``) and by ``/health`` (``enabled: false``): writes to its distributed tables run on the
workers and fire no trigger on the coordinator, so a change would never be notified.

Tokens: a read token's scope is remembered per worker (:class:`TokenCache`) for
``token_cache_seconds`` (60 s; after that the database is asked again, which also records the
token's use, at most once a minute as measure.token_scope does); a revocation is honoured at
once (the ``token`` notification, synced as above). Write endpoints always ask the database.

Memory: least recently used answers go first once ``cache_max_bytes`` (per worker) is
reached; an answer over ``cache_max_entry_bytes`` is not kept. Counts (hits, misses, stores,
invalidations, evictions, bytes) are in ``GET /health`` (of the worker that answers it) and
every answer of a cacheable endpoint says ``X-Cache: hit``, ``shared`` (it waited for the same
answer another request was computing) or ``miss``.
"""

from __future__ import annotations

import asyncio
import contextlib
import logging
import select
import threading
import time
from collections import OrderedDict
from collections.abc import Awaitable, Callable, MutableMapping
from dataclasses import dataclass
from typing import Any
from urllib.parse import parse_qsl, urlencode

from fastapi import Depends, Request
from psycopg import pq
from psycopg.conninfo import make_conninfo

from core import tokens

log = logging.getLogger(__name__)

CHANNEL = "measuredb_data"
STATE_KEY = "measuredb_cache"  # request.state entry: True = this answer may be cached
SYNCED_KEY = "measuredb_synced"  # request.state entry: the token cache was synced for this request
KEEPALIVE_SECONDS = 5.0  # an idle worker still reads its notifications (and notices a dead link)
RECONNECT_SECONDS = 1.0
_ENTRY_OVERHEAD = 200  # bytes counted per entry besides key, headers and body

Scope = MutableMapping[str, Any]
Message = MutableMapping[str, Any]
Receive = Callable[[], Awaitable[Message]]
Send = Callable[[Message], Awaitable[None]]


async def cacheable(request: Request) -> None:
    """Dependency of the GET endpoints whose 200 answers depend only on stored data."""
    request.state.measuredb_cache = True


def not_cacheable(request: Request) -> None:
    """For an endpoint to call when this particular request depends on more than stored data
    (the clock)."""
    request.state.measuredb_cache = False


Cacheable = Depends(cacheable)


# ---------------------------------------------------------------- the stores


@dataclass(frozen=True)
class Entry:
    status: int
    headers: tuple[tuple[bytes, bytes], ...]
    body: bytes
    size: int


class ResponseCache:
    """Answers by key, least recently used first out, bounded in bytes. Used from the event
    loop only (the middleware)."""

    def __init__(self, max_bytes: int, max_entry_bytes: int) -> None:
        self.max_bytes = max_bytes
        self.max_entry_bytes = max_entry_bytes
        self._entries: OrderedDict[str, Entry] = OrderedDict()
        self.bytes = 0
        self.generation = 0
        self.hits = self.misses = self.shared = self.stores = self.invalidations = self.evictions = 0

    def get(self, key: str) -> Entry | None:
        entry = self._entries.get(key)
        if entry is None:
            return None
        self._entries.move_to_end(key)
        self.hits += 1
        return entry

    def put(self, key: str, status: int, headers: list[tuple[bytes, bytes]], body: bytes,
            generation: int) -> bool:
        """Keep an answer computed while the cache was at ``generation`` (not when the data
        changed since, or when it is too big)."""
        size = len(key) + len(body) + sum(len(k) + len(v) for k, v in headers) + _ENTRY_OVERHEAD
        if generation != self.generation or size > self.max_entry_bytes or size > self.max_bytes:
            return False
        old = self._entries.pop(key, None)
        if old is not None:
            self.bytes -= old.size
        self._entries[key] = Entry(status, tuple(headers), body, size)
        self.bytes += size
        self.stores += 1
        while self.bytes > self.max_bytes:
            _, gone = self._entries.popitem(last=False)
            self.bytes -= gone.size
            self.evictions += 1
        return True

    def invalidate(self) -> None:
        """Stored data changed: drop everything, and refuse answers computed before now."""
        self._entries.clear()
        self.bytes = 0
        self.generation += 1
        self.invalidations += 1

    def __len__(self) -> int:
        return len(self._entries)

    def stats(self) -> dict[str, int]:
        return {"entries": len(self._entries), "bytes": self.bytes, "max_bytes": self.max_bytes,
                "hits": self.hits, "misses": self.misses, "shared": self.shared, "stores": self.stores,
                "invalidations": self.invalidations, "evictions": self.evictions}


class TokenCache:
    """Token SHA-256 → scope, each for ``ttl`` seconds; emptied on every ``token``
    notification. Filled from the threadpool (the auth dependency): locked."""

    def __init__(self, ttl: float, max_tokens: int = 10_000) -> None:
        self.ttl = ttl
        self.max_tokens = max_tokens
        self.generation = 0
        self._scopes: dict[bytes, tuple[str, float]] = {}
        self._lock = threading.Lock()

    def get(self, sha256: bytes) -> str | None:
        hit = self._scopes.get(sha256)
        if hit is None or hit[1] <= time.monotonic():
            return None
        return hit[0]

    def put(self, sha256: bytes, scope: str, generation: int) -> None:
        """Remember a scope read from the database while the cache was at ``generation``
        (not when a token changed since)."""
        if self.ttl <= 0:
            return
        with self._lock:
            if generation != self.generation:
                return
            if len(self._scopes) >= self.max_tokens:
                self._scopes.clear()
            self._scopes[sha256] = (scope, time.monotonic() + self.ttl)

    def clear(self) -> None:
        with self._lock:
            self._scopes.clear()
            self.generation += 1


# ---------------------------------------------------------------- the LISTEN connection


class NotNotified(Exception):
    """The database cannot notify changes (Citus): the cache stays off."""


class DataListener:
    """One LISTEN connection per worker, driven from the server's event loop (libpq directly).

    Notifications are read as soon as they arrive (a reader on the socket). :meth:`sync`
    makes sure none is still on its way for a request: it sends ``SELECT 1`` and reads up to
    the answer (blocking the loop for that round trip, normally well under a millisecond;
    at most ``timeout`` seconds, after which the connection is dropped and the cache
    bypassed until it is back). One round trip serves every request of the same turn of the
    loop: a request the loop runs before the turn after a round trip had been read from its
    socket before that round trip started (:attr:`_fresh`, cleared by a callback queued
    behind them)."""

    def __init__(self, url: str, on_data: Callable[[], None], on_token: Callable[[], None], *,
                 timeout: float = 1.0) -> None:
        self.url = url
        self.on_data = on_data
        self.on_token = on_token
        self.timeout = timeout
        self.syncs = 0
        self._pg: Any = None  # psycopg.pq.PGconn while listening
        self._fd: int | None = None  # its socket, as registered with the loop
        self._fresh = False
        self._loop: asyncio.AbstractEventLoop | None = None
        self._task: asyncio.Task[None] | None = None
        self._wake = asyncio.Event()
        self._closing = False
        self._failing = False
        self.off: str | None = None  # why the cache is off for good (NotNotified)

    @property
    def listening(self) -> bool:
        return self._pg is not None

    def start(self) -> None:
        self._loop = asyncio.get_running_loop()
        self._task = self._loop.create_task(self._keep_connected())

    async def close(self) -> None:
        self._closing = True
        if self._task is not None:
            self._task.cancel()
            with contextlib.suppress(asyncio.CancelledError):
                await self._task
        self._drop()

    def _connect(self) -> Any:
        """Blocking (run in a thread): a new connection that LISTENs."""

        pg = pq.PGconn.connect(make_conninfo(self.url, connect_timeout=5,
                                             application_name="measuredb-api-cache").encode())
        if pg.status != pq.ConnStatus.OK:
            message = pg.get_error_message()
            pg.finish()
            raise OSError(message)
        res = pg.exec_(b"SELECT 1 FROM pg_extension WHERE extname = 'citus'")
        if res.status == pq.ExecStatus.TUPLES_OK and res.ntuples:
            pg.finish()
            raise NotNotified("the database is Citus: writes to its distributed tables reach no "
                              "trigger on the coordinator, so no change would be notified")
        res = pg.exec_(f"LISTEN {CHANNEL}".encode())
        if res.status != pq.ExecStatus.COMMAND_OK:
            message = pg.get_error_message()
            pg.finish()
            raise OSError(message)
        return pg

    async def _keep_connected(self) -> None:
        assert self._loop is not None
        while not self._closing:
            if self._pg is None:
                try:
                    pg = await self._loop.run_in_executor(None, self._connect)
                except NotNotified as exc:
                    self.off = str(exc)
                    log.warning("read cache off: %s; every read goes to the database", exc)
                    return
                except Exception as exc:  # noqa: BLE001 - the database is away
                    if not self._failing:  # once per outage, not every second
                        self._failing = True
                        log.warning("read cache: cannot LISTEN (%s); reads bypass the cache until "
                                    "it can", str(exc).strip().splitlines()[0] if str(exc).strip() else exc)
                    await asyncio.sleep(RECONNECT_SECONDS)
                    continue
                if self._failing:
                    self._failing = False
                    log.warning("read cache: listening again")
                if self._closing:
                    pg.finish()
                    return
                self._pg, self._fd = pg, pg.socket
                self._loop.add_reader(self._fd, self._drain)
                # whatever changed while no one listened: start empty
                self.on_data()
                self.on_token()
            self._wake.clear()
            with contextlib.suppress(TimeoutError):  # woken at once when the link drops
                await asyncio.wait_for(self._wake.wait(), KEEPALIVE_SECONDS)
            if self._pg is not None and not self._fresh:
                self._ping()  # an idle worker still notices a dead link

    def _drop(self) -> None:
        pg, self._pg = self._pg, None
        fd, self._fd = self._fd, None
        self._fresh = False
        self._wake.set()
        if pg is None:
            return
        # The reader goes by the number registered, before the socket is closed: a lost
        # connection's pg.socket raises, and a reader left behind would capture the next
        # socket the kernel gives that number (a client's: its request never read).
        if fd is not None and self._loop is not None:
            self._loop.remove_reader(fd)
        with contextlib.suppress(Exception):
            pg.finish()
        self.on_data()
        self.on_token()

    def _dispatch(self) -> None:
        pg = self._pg
        while (note := pg.notifies()) is not None:
            if note.extra == b"token":
                self.on_token()
            else:
                self.on_data()

    def _drain(self) -> None:
        """The socket is readable: notifications (or the server closing it)."""

        try:
            self._pg.consume_input()
            self._dispatch()
            if self._pg.status != pq.ConnStatus.OK:
                raise OSError("connection lost")
        except Exception as exc:  # noqa: BLE001 - any failure: the link is gone
            log.warning("read cache: LISTEN connection lost (%s); reads bypass the cache", exc)
            self._drop()

    def sync(self) -> bool:
        """True once every notification of a transaction committed before the current
        request was read has been handled; False when the cache cannot be used."""
        if self._pg is None:
            return False
        if self._fresh:
            return True
        if not self._ping():
            return False
        self._fresh = True
        assert self._loop is not None
        self._loop.call_soon(self._expire)
        return True

    def _expire(self) -> None:
        self._fresh = False

    def _ping(self) -> bool:

        pg = self._pg
        try:
            pg.send_query(b"SELECT 1")
            deadline = time.monotonic() + self.timeout
            while True:
                pg.consume_input()
                while not pg.is_busy():
                    res = pg.get_result()
                    if res is None:  # the answer is complete; notifications came before it
                        self._dispatch()
                        self.syncs += 1
                        return True
                    if res.status != pq.ExecStatus.TUPLES_OK:
                        raise OSError(pg.get_error_message())
                self._dispatch()
                remaining = deadline - time.monotonic()
                if remaining <= 0:
                    raise TimeoutError(f"no answer within {self.timeout:g} s")
                select.select([pg.socket], [], [], remaining)
        except Exception as exc:  # noqa: BLE001 - any failure: the link is gone
            log.warning("read cache: LISTEN connection lost (%s); reads bypass the cache", exc)
            self._drop()
            return False


# ---------------------------------------------------------------- the middleware


class ReadCache:
    """What one worker keeps: answers, token scopes, the LISTEN connection."""

    def __init__(self, *, max_bytes: int, max_entry_bytes: int, token_ttl: float,
                 require_token_for_reads: bool) -> None:
        self.responses = ResponseCache(max_bytes, max_entry_bytes)
        self.tokens = TokenCache(token_ttl)
        self.require_token_for_reads = require_token_for_reads
        self.listener: DataListener | None = None

    async def start(self, url: str) -> None:
        self.listener = DataListener(url, self.responses.invalidate, self.tokens.clear)
        self.listener.start()

    async def close(self) -> None:
        if self.listener is not None:
            await self.listener.close()

    def stats(self) -> dict[str, Any]:
        return {"enabled": not (self.listener and self.listener.off),
                "listening": bool(self.listener and self.listener.listening),
                **self.responses.stats()}


def bearer_header(headers: list[tuple[bytes, bytes]]) -> tuple[bool, str | None]:
    """(has an Authorization header, the bearer token in it or None)."""
    for name, value in headers:
        if name == b"authorization":
            scheme, _, token = value.decode("latin-1").partition(" ")
            token = token.strip()
            if scheme.lower() == "bearer" and token:
                return True, token
            return True, None
    return False, None


def cache_key(scope_name: str, path: str, query_string: bytes) -> str:
    if not query_string:
        return f"{scope_name} {path}"
    pairs = parse_qsl(query_string.decode("latin-1"), keep_blank_values=True)
    pairs.sort(key=lambda kv: kv[0])  # stable: repeated parameters keep their order
    return f"{scope_name} {path}?{urlencode(pairs)}"


class CacheMiddleware:
    """ASGI middleware in front of the routes: serves cached answers, keeps new ones. A
    request for an answer that another request is computing right now waits for that one
    (``X-Cache: shared``) instead of computing it again, unless the data changed since that
    one began."""

    def __init__(self, app: Callable[[Scope, Receive, Send], Awaitable[None]], cache: ReadCache) -> None:
        self.app = app
        self.cache = cache
        self._inflight: dict[str, tuple[int, asyncio.Future[Entry | None]]] = {}

    async def __call__(self, scope: Scope, receive: Receive, send: Send) -> None:  # noqa: C901 - one request path, read top down
        cache = self.cache
        listener = cache.listener
        if scope["type"] != "http" or scope["method"] != "GET" or listener is None:
            return await self.app(scope, receive, send)
        state = scope.setdefault("state", {})
        has_auth, token = bearer_header(scope["headers"])
        if has_auth and token is None:
            return await self.app(scope, receive, send)  # not a bearer token: the routes answer
        if not listener.sync():
            return await self.app(scope, receive, send)
        sha = None
        if token is not None:
            state[SYNCED_KEY] = True
            sha = tokens.digest(token)
            scope_name = cache.tokens.get(sha)  # None: not known yet, the routes check it
        elif cache.require_token_for_reads:
            return await self.app(scope, receive, send)
        else:
            scope_name = "-"
        path, query = scope["path"], scope.get("query_string", b"")
        key = cache_key(scope_name, path, query) if scope_name is not None else None
        responses = cache.responses
        generation = responses.generation
        flight = None
        if key is not None:
            entry = responses.get(key)
            if entry is not None:
                return await _send_entry(send, entry, b"hit")
            flight = self._inflight.get(key)
            if flight is not None and flight[0] == generation:
                entry = await asyncio.shield(flight[1])
                if entry is not None:
                    responses.shared += 1
                    return await _send_entry(send, entry, b"shared")
                flight = None  # that one was not cacheable after all: compute this one
            else:  # the first, or the data changed since the one running began
                flight = self._inflight[key] = (generation, asyncio.get_running_loop().create_future())
        start: Message | None = None
        chunks: list[bytes] = []
        size = 0
        keep = True

        async def capture(message: Message) -> None:
            nonlocal start, size, keep
            if message["type"] == "http.response.start":
                start = message
                if state.get(STATE_KEY) is True:
                    message = {**message, "headers": [*message.get("headers", []), (b"x-cache", b"miss")]}
            elif message["type"] == "http.response.body" and keep:
                body = message.get("body", b"")
                size += len(body)
                if size > responses.max_entry_bytes:
                    keep, chunks[:] = False, []
                else:
                    chunks.append(body)
            await send(message)

        done: Entry | None = None
        try:
            await self.app(scope, receive, capture)
            if state.get(STATE_KEY) is True:
                responses.misses += 1
                if keep and start is not None and start["status"] == 200:
                    headers = list(start.get("headers", []))
                    body = b"".join(chunks)
                    done = Entry(200, tuple(headers), body, len(body))
                    if key is None and sha is not None:  # the routes have just checked the token
                        scope_name = cache.tokens.get(sha)
                        key = cache_key(scope_name, path, query) if scope_name is not None else None
                    if key is not None and listener.listening:
                        responses.put(key, 200, headers, body, generation)
        finally:
            if flight is not None and key is not None:
                if self._inflight.get(key) is flight:
                    del self._inflight[key]
                flight[1].set_result(done)


async def _send_entry(send: Send, entry: Entry, how: bytes) -> None:
    await send({"type": "http.response.start", "status": entry.status,
                "headers": [*entry.headers, (b"x-cache", how)]})
    await send({"type": "http.response.body", "body": entry.body})

