"""A fake collector for unit tests: answers _measure.control_request rows (see conftest)."""

from __future__ import annotations

import json
import threading
from collections.abc import Callable
from typing import Self

import psycopg

from core.errors import ErrorKind


class FakeError(Exception):
    """Raised by a fake-collector handler: the request is answered with this error (its code,
    core.errors.ErrorKind, and its message)."""

    def __init__(self, code: ErrorKind, message: str) -> None:
        super().__init__(message)
        self.code = code
        self.message = message


class FakeCollector:
    def __init__(self, url: str) -> None:
        self.url = url
        self.handler: Callable[[str, dict], dict] | None = None
        self.seen: list[tuple[str, dict]] = []
        self._stop = threading.Event()
        self._thread = threading.Thread(target=self._run, daemon=True)

    def _run(self) -> None:
        with psycopg.connect(self.url, autocommit=True) as conn:
            while not self._stop.is_set():
                rows = conn.execute("SELECT request_id, kind, payload FROM _measure.control_request "
                                    "WHERE answered_at IS NULL ORDER BY request_id").fetchall()
                for rid, kind, payload in rows:
                    if self.handler is None:
                        continue
                    self.seen.append((kind, payload))
                    try:
                        response, code, error = self.handler(kind, payload), None, None
                    except FakeError as exc:
                        response, code, error = None, exc.code.value, exc.message
                    conn.execute("UPDATE _measure.control_request SET answered_at = now(), response = %s, "
                                 "error_code = %s, error = %s WHERE request_id = %s",
                                 (None if response is None else json.dumps(response), code, error, rid))
                    conn.execute("SELECT pg_notify('measuredb_answer', %s)", (str(rid),))
                self._stop.wait(0.02)

    def __enter__(self) -> Self:
        self._thread.start()
        return self

    def __exit__(self, *exc: object) -> None:
        self._stop.set()
        self._thread.join(5)
