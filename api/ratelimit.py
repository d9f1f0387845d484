"""A rate limit on what is open to anonymous callers.

Every request without ``Authorization: Bearer <token>`` (any path: open reads, /health, the
docs, and writes that will answer 401) takes one token from the bucket of its client address:
a bucket holds ``anonymous_burst`` tokens and refills at ``anonymous_rate_per_second``. An
empty bucket answers 429 (ErrorRead ``TooManyRequests``) with ``Retry-After`` in whole seconds.
A request with a bearer token is not limited here: a token is checked on every endpoint that
serves data, and a wrong one is a 401.

The buckets live in the worker process (each uvicorn worker counts on its own); the client
address is the one uvicorn puts in the ASGI scope (behind a proxy on this host, uvicorn's
proxy headers give the real one). Addresses in ``anonymous_limit_exempt`` (default loopback:
local tools and benchmarks) are not limited. ``anonymous_rate_per_second = 0`` turns it off.
"""

from __future__ import annotations

import ipaddress
import math
import time
from collections import OrderedDict

from starlette.responses import JSONResponse

from api.cache import Receive, Scope, Send, bearer_header

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


class AnonymousRateLimit:
    """ASGI middleware: 429 for an anonymous client whose bucket is empty."""

    def __init__(self, app, *, rate: float, burst: int, exempt: list[str]) -> None:
        self.app = app
        self.buckets = TokenBuckets(rate, burst)
        self.exempt = [ipaddress.ip_network(e, strict=False) for e in exempt]

    def _is_exempt(self, host: str) -> bool:
        try:
            address = ipaddress.ip_address(host)
        except ValueError:
            return False
        return any(address in net for net in self.exempt)

    async def __call__(self, scope: Scope, receive: Receive, send: Send) -> None:
        if scope["type"] != "http" or bearer_header(scope["headers"])[1] is not None:
            return await self.app(scope, receive, send)
        host = (scope.get("client") or ("",))[0] or ""
        if not self._is_exempt(host):
            wait = self.buckets.take(host)
            if wait > 0:
                b = self.buckets
                response = JSONResponse(
                    {"error": "TooManyRequests",
                     "detail": f"more than {b.burst} requests at once or {b.rate:g} per second "
                               f"without a bearer token from {host}; retry later or send "
                               "Authorization: Bearer <token>"},
                    status_code=429, headers={"Retry-After": str(max(1, math.ceil(wait)))})
                return await response(scope, receive, send)
        await self.app(scope, receive, send)
