"""Serving the API with uvicorn: a protocol class that turns Nagle's algorithm off.

uvicorn's multi-worker mode binds the listening socket itself (``socket.socket(family)``,
protocol number 0); asyncio then skips TCP_NODELAY for the accepted connections (it sets it
only when ``sock.proto == IPPROTO_TCP``). A response written as headers + body then waits
for the client's delayed ACK: about 40 ms added to every request after the first on a
keep-alive connection (measured: 48 ms instead of 5 ms per counter read on loopback).
:class:`NoDelayHTTPProtocol` sets TCP_NODELAY on every accepted TCP connection.

    uvicorn api.main:create_app --factory --workers 2 --http api.serve:NoDelayHTTPProtocol

or :func:`run` (single process or workers).

No connection is closed without an answer (issue 27, item 8; bench/bench_load.py). uvicorn
closes a keep-alive connection idle for its keep-alive timeout (5 s by default): a client
whose own pool keeps connections 5 s too (httpx) or longer (browsers, Go) sends its next
request just as the API closes, and gets a reset or "disconnected without a response"
(measured: 12 of 480 requests of 40 clients pausing 5 s; none in the log). So the timeout is
``keep_alive_seconds`` (120 s, longer than the usual clients'), and a request already
waiting in the socket when the timer fires is answered, not dropped with the socket.
Connections lost before their answer, resets and keep-alive closes are logged one line
each (logger ``api.serve``), and so is a worker the supervisor replaces (uvicorn logs that
at INFO): :data:`LOG_CONFIG`.
"""

from __future__ import annotations

import asyncio
import copy
import fcntl
import logging
import socket
import struct
import termios
from typing import Any

from uvicorn.protocols.http.auto import AutoHTTPProtocol

__all__ = ["LOG_CONFIG", "PROTOCOL", "NoDelayHTTPProtocol", "run"]

PROTOCOL = "api.serve:NoDelayHTTPProtocol"
WORKER_HEALTHCHECK_SECONDS = 30  # uvicorn kills a worker that does not answer its supervisor
                                 # within this (5 s by default: a worker on a loaded machine
                                 # lost every connection it had)
log = logging.getLogger(__name__)


def _unread_bytes(transport: asyncio.BaseTransport) -> int:
    """Bytes received on the connection's socket and not yet read (0 if unknown)."""
    sock = transport.get_extra_info("socket")
    if sock is None:
        return 0
    try:
        got = fcntl.ioctl(sock.fileno(), termios.FIONREAD, struct.pack("i", 0))
    except (OSError, ValueError):  # closed (fd -1), or not a socket
        return 0
    return int(struct.unpack("i", got)[0])


def _peer(client: tuple[str, int] | None) -> str:
    return f"{client[0]}:{client[1]}" if client else "a client"


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

    def timeout_keep_alive_handler(self) -> None:
        """The keep-alive timeout: close the idle connection, unless a request is already
        waiting in the socket (closing then would reset it unanswered): it is read next."""
        if self.transport.is_closing():
            return
        if _unread_bytes(self.transport):
            self.timeout_keep_alive_task = self.loop.call_later(self.timeout_keep_alive,
                                                                self.timeout_keep_alive_handler)
            return
        log.info("closed the keep-alive connection of %s: idle for %d s (MEASUREDB_API_KEEP_ALIVE_SECONDS)",
                 _peer(self.client), self.timeout_keep_alive)
        super().timeout_keep_alive_handler()

    def connection_lost(self, exc: Exception | None) -> None:
        cycle = self.cycle
        if cycle is not None and not cycle.response_complete:
            scope = cycle.scope
            log.warning("connection of %s lost before the answer to %s %s was sent: %s", _peer(self.client),
                        scope.get("method"), scope.get("path"), exc or "the client closed it")
        elif exc is not None:
            log.warning("connection of %s lost: %s", _peer(self.client), exc)
        super().connection_lost(exc)


class _Quiet(logging.Filter):
    """uvicorn's INFO lines (started, waiting for startup …) stay out, except the supervisor's
    about a worker it killed or could not start; warnings and errors pass, and api.* lines."""

    def filter(self, record: logging.LogRecord) -> bool:
        if record.levelno >= logging.WARNING or record.name.startswith("api"):
            return True
        message = record.getMessage()
        return "died" in message or "not ready" in message or "hung" in message


LOG_CONFIG: dict[str, Any] = {
    "version": 1,
    "disable_existing_loggers": False,
    "filters": {"quiet": {"()": "api.serve._Quiet"}},
    "formatters": {"default": {"()": "uvicorn.logging.DefaultFormatter", "fmt": "%(levelprefix)s %(message)s",
                               "use_colors": None}},
    "handlers": {"default": {"formatter": "default", "class": "logging.StreamHandler", "stream": "ext://sys.stderr",
                             "filters": ["quiet"]}},
    "loggers": {
        "uvicorn": {"handlers": ["default"], "level": "INFO", "propagate": False},
        "uvicorn.error": {"level": "INFO"},
        "uvicorn.access": {"handlers": [], "level": "WARNING", "propagate": False},
        "api": {"handlers": ["default"], "level": "INFO", "propagate": False},
    },
}


def run(app: Any, *, host: str, port: int, workers: int = 1, keep_alive_seconds: int = 120,
        **kwargs: Any) -> None:
    """uvicorn.run with :class:`NoDelayHTTPProtocol`, the keep-alive timeout, the worker
    health check and :data:`LOG_CONFIG`. With workers > 1, ``app`` must be an import string
    (``"api.main:create_app"`` with ``factory=True``)."""
    import uvicorn

    kwargs.setdefault("log_config", copy.deepcopy(LOG_CONFIG))
    kwargs.setdefault("log_level", None)
    uvicorn.run(app, host=host, port=port, workers=workers, http=PROTOCOL, timeout_keep_alive=keep_alive_seconds,
                timeout_worker_healthcheck=WORKER_HEALTHCHECK_SECONDS, **kwargs)
