"""Request body limits, enforced on the bytes actually received (with or without a
Content-Length, chunked or not) before any work is done with them.

* ``max_body_bytes`` for every request with a bearer token; ``streamed`` gives a larger limit
  for an upload its route reads as a stream (POST /import: ``max_import_bytes``).
* ``anonymous_max_body_bytes`` (small) for a request without a bearer token: every endpoint that
  takes a body needs a token, and FastAPI reads a body before it checks the token, so an
  anonymous caller can make a worker hold at most this much.

A Content-Length over the limit (or not a number) is refused before anything is read; a body
that grows past it while it is read stops being read at once: 413 PayloadTooLarge.
"""

from __future__ import annotations

from collections.abc import MutableMapping
from typing import Any

from api.cache import Receive, Scope, Send, bearer_header
from api.errors import PayloadTooLarge, too_large_response


class BodyLimitMiddleware:
    def __init__(self, app: Any, max_bytes: int, *, anonymous_max_bytes: int,
                 streamed: dict[tuple[str, str], int] | None = None) -> None:
        self.app = app
        self.max_bytes = max_bytes
        self.anonymous_max_bytes = anonymous_max_bytes
        self.streamed = streamed or {}

    def limit_of(self, scope: Scope) -> tuple[int, bool]:
        limit = self.streamed.get((scope["method"], scope["path"]), self.max_bytes)
        if bearer_header(scope["headers"])[1] is None:
            return min(limit, self.anonymous_max_bytes), True
        return limit, False

    async def __call__(self, scope: Scope, receive: Receive, send: Send) -> None:
        if scope["type"] != "http":
            return await self.app(scope, receive, send)
        limit, anonymous = self.limit_of(scope)
        for name, value in scope["headers"]:
            if name == b"content-length":
                if not value.isdigit() or int(value) > limit:
                    return await too_large_response(limit, anonymous)(scope, receive, send)
                break
        received = 0

        async def counted() -> MutableMapping[str, Any]:
            nonlocal received
            message = await receive()
            if message["type"] == "http.request":
                received += len(message.get("body", b""))
                if received > limit:
                    raise PayloadTooLarge(limit, anonymous)
            return message

        await self.app(scope, counted, send)
