"""A rate limit on what is open to anonymous callers.

Every request without ``Authorization: Bearer <token>`` (any path: open reads, /health, the
docs, and writes that will answer 401) takes one token from the bucket of its client address:
a bucket holds ``anonymous_burst`` tokens and refills at ``anonymous_rate_per_second``. An
empty bucket answers 429 (ErrorRead ``TooManyRequests``) with ``Retry-After`` in whole seconds.
A request with a bearer token is not limited by that bucket, but a failed authentication
is: every 401 takes one token from the client address's failure bucket (``auth_failure_burst``,
refilling at ``auth_failure_rate_per_second``, for every address, loopback too), and while it
is empty any request carrying a bearer token from that address answers 429 before it is
checked, so tokens cannot be guessed at speed. Failed authentications are logged (WARNING: the
address and path of each, until the address is throttled; then one line when it is).

The buckets live in the worker process (each uvicorn worker counts on its own); the client
address is the one uvicorn puts in the ASGI scope (behind a proxy on this host, uvicorn's
proxy headers give the real one). Addresses in ``anonymous_limit_exempt`` (default loopback:
local tools and benchmarks) are not limited. ``anonymous_rate_per_second = 0`` turns it off.
"""

from __future__ import annotations

import ipaddress
import logging
import math
import time
from collections import OrderedDict
from collections.abc import MutableMapping
from typing import Any

from starlette.responses import JSONResponse

from api.cache import Receive, Scope, Send, bearer_header

log = logging.getLogger(__name__)

MAX_CLIENTS = 10_000  # buckets kept; the least recently seen address is forgotten first


class TokenBuckets:
    """One token bucket per client address."""

    def __init__(self, rate: float, burst: int) -> None:
        self.rate = rate
        self.burst = burst
        self._buckets: OrderedDict[str, tuple[float, float]] = OrderedDict()  # address -> (tokens, at)

    def take(self, client: str, now: float | None = None) -> float:
        """0.0 when the request may go (a token is taken), else the seconds until one is back."""
        now = time.monotonic() if now is None else now
        tokens, at = self._buckets.pop(client, (float(self.burst), now))
        tokens = min(float(self.burst), tokens + (now - at) * self.rate)
        wait = 0.0
        if tokens >= 1.0:
            tokens -= 1.0
        else:
            wait = (1.0 - tokens) / self.rate
        self._buckets[client] = (tokens, now)
        if len(self._buckets) > MAX_CLIENTS:
            self._buckets.popitem(last=False)
        return wait

    def wait(self, client: str, now: float | None = None) -> float:
        """0.0 when a token is there (none is taken), else the seconds until one is back."""
        now = time.monotonic() if now is None else now
        tokens, at = self._buckets.get(client, (float(self.burst), now))
        tokens = min(float(self.burst), tokens + (now - at) * self.rate)
        return 0.0 if tokens >= 1.0 else (1.0 - tokens) / self.rate


def too_many(detail: str, wait: float) -> JSONResponse:
    return JSONResponse({"error": "TooManyRequests", "detail": detail}, status_code=429,
                        headers={"Retry-After": str(max(1, math.ceil(wait)))})


class AnonymousRateLimit:
    """ASGI middleware: 429 for an anonymous client whose bucket is empty, and for a client
    whose failed authentications emptied its failure bucket."""

    def __init__(self, app: Any, *, rate: float, burst: int, exempt: list[str], failure_rate: float = 1.0,
                 failure_burst: int = 20) -> None:
        self.app = app
        self.buckets = TokenBuckets(rate, burst) if rate > 0 else None
        self.failures = TokenBuckets(failure_rate, failure_burst)
        self.exempt = [ipaddress.ip_network(e, strict=False) for e in exempt]

    def _is_exempt(self, host: str) -> bool:
        try:
            address = ipaddress.ip_address(host)
        except ValueError:
            return False
        return any(address in net for net in self.exempt)

    async def __call__(self, scope: Scope, receive: Receive, send: Send) -> None:
        if scope["type"] != "http":
            return await self.app(scope, receive, send)
        host = (scope.get("client") or ("",))[0] or ""
        if bearer_header(scope["headers"])[1] is not None:
            return await self._with_token(scope, receive, send, host)
        if self.buckets is not None and not self._is_exempt(host):
            wait = self.buckets.take(host)
            if wait > 0:
                b = self.buckets
                return await too_many(
                    f"more than {b.burst} requests at once or {b.rate:g} per second without a bearer "
                    f"token from {host}; retry later or send Authorization: Bearer <token>", wait
                )(scope, receive, send)
        await self.app(scope, receive, send)

    async def _with_token(self, scope: Scope, receive: Receive, send: Send, host: str) -> None:
        wait = self.failures.wait(host)
        if wait > 0:
            f = self.failures
            return await too_many(
                f"more than {f.burst} failed authentications at once or {f.rate:g} per second from {host}; "
                "retry later with a valid token", wait)(scope, receive, send)

        async def watch(message: MutableMapping[str, Any]) -> None:
            if message["type"] == "http.response.start" and message["status"] == 401:
                throttled = self.failures.take(host) > 0 or self.failures.wait(host) > 0
                if throttled:
                    log.warning("failed authentication from %s (%s %s): its failures are throttled now; "
                                "requests with a token from it get 429 until one is back",
                                host, scope["method"], scope["path"])
                else:
                    log.warning("failed authentication from %s (%s %s)", host, scope["method"], scope["path"])
            await send(message)

        await self.app(scope, receive, watch)
