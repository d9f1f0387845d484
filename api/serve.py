"""Serving the API with uvicorn: a protocol class that turns Nagle's algorithm off.

uvicorn's multi-worker mode binds the listening socket itself (``socket.socket(family)``,
protocol number 0); asyncio then skips TCP_NODELAY for the accepted connections (it sets it
only when ``sock.proto == IPPROTO_TCP``). A response written as headers + body then waits
for the client's delayed ACK: about 40 ms added to every request after the first on a
keep-alive connection (measured: 48 ms instead of 5 ms per counter read on loopback).
:class:`NoDelayHTTPProtocol` sets TCP_NODELAY on every accepted TCP connection.

    uvicorn api.main:create_app --factory --workers 2 --http api.serve:NoDelayHTTPProtocol

or :func:`run` (single process or workers).
"""

from __future__ import annotations

import asyncio
import socket
from typing import Any

from uvicorn.protocols.http.auto import AutoHTTPProtocol

__all__ = ["PROTOCOL", "NoDelayHTTPProtocol", "run"]

PROTOCOL = "api.serve:NoDelayHTTPProtocol"


class NoDelayHTTPProtocol(AutoHTTPProtocol):  # type: ignore[misc, valid-type]  # uvicorn picks httptools or h11 at import
    """uvicorn's HTTP protocol (httptools, a dependency; h11 if it is missing) with TCP_NODELAY."""

    def connection_made(self, transport: asyncio.Transport) -> None:
        sock = transport.get_extra_info("socket")
        if sock is not None and sock.family in (socket.AF_INET, socket.AF_INET6):
            try:
                sock.setsockopt(socket.IPPROTO_TCP, socket.TCP_NODELAY, 1)
            except OSError:  # pragma: no cover - not a TCP socket after all
                pass
        super().connection_made(transport)


def run(app: Any, *, host: str, port: int, workers: int = 1, **kwargs: Any) -> None:
    """uvicorn.run with :class:`NoDelayHTTPProtocol`. With workers > 1, ``app`` must be an
    import string (``"api.main:create_app"`` with ``factory=True``)."""
    import uvicorn

    uvicorn.run(app, host=host, port=port, workers=workers, http=PROTOCOL, **kwargs)
