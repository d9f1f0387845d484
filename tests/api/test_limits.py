"""Body limits on the bytes actually read (api/limits.py): chunked bodies included, before any
work and before authentication reads the body; anonymous bodies bounded small."""

from __future__ import annotations

import psycopg
import pytest

from tests.api.conftest import make_client
from tests.api.test_io import CSV, HEADER, SYSTEM, io_url  # noqa: F401 - io_url: the import database
from tests.tokens import create_token

pytestmark = pytest.mark.reliability  # the reliability suite (pytest -m reliability)


class Source:
    """A chunked body that counts how much of it was taken (httpx sends a generator with
    Transfer-Encoding: chunked)."""

    def __init__(self, total: int, chunk: int = 4096, data: bytes | None = None) -> None:
        self.data = data if data is not None else b"x" * total
        self.chunk = chunk
        self.taken = 0

    def __iter__(self):
        for i in range(0, len(self.data), self.chunk):
            piece = self.data[i:i + self.chunk]
            self.taken += len(piece)
            yield piece


def big_csv(rows: int) -> bytes:
    lines = [HEADER] + [f"{SYSTEM},{i % 16},2026-06-01T00:{i // 16 % 60:02d}:00+02:00,"
                        f"2026-06-01T00:{i // 16 % 60:02d}:30+02:00,30000000,1000,0" for i in range(rows)]
    return ("\n".join(lines) + "\n").encode()


def runs(url: str) -> int:
    with psycopg.connect(url) as c:
        return c.execute("SELECT count(*) FROM _measure.interval_run").fetchone()[0]


@pytest.fixture(scope="module")
def write(io_url: str) -> dict[str, str]:  # noqa: F811
    return {"Authorization": f"Bearer {create_token(io_url, 'limits-write', 'write')}", "Content-Type": "text/csv"}


def test_an_import_over_its_limit_is_413_chunked_or_not(io_url, write) -> None:  # noqa: F811
    body = big_csv(3000)
    assert len(body) > 100_000
    before = runs(io_url)
    with make_client(io_url, max_import_bytes=100_000) as c:
        sized = c.post("/import", content=body, headers=write)
        assert sized.status_code == 413 and sized.json()["error"] == "PayloadTooLarge"
        source = Source(0, data=body)
        chunked = c.post("/import", content=iter(source), headers=write)
        assert chunked.status_code == 413, chunked.text[:300]
        assert chunked.json() == {"error": "PayloadTooLarge", "detail": "request body over 100000 bytes"}
        assert runs(io_url) == before  # nothing stored
        small = c.post("/import", content=iter(Source(0, data=CSV.encode(), chunk=7)), headers=write)
        assert small.status_code == 200, small.text


def test_a_chunked_body_over_max_body_bytes_is_413(io_url, write) -> None:  # noqa: F811
    with make_client(io_url, max_body_bytes=4096) as c:
        r = c.post("/meascom", content=iter(Source(100_000)), headers={**write, "Content-Type": "application/json"})
        assert r.status_code == 413 and r.json()["detail"] == "request body over 4096 bytes"


def test_anonymous_bodies_are_small(io_url) -> None:  # noqa: F811
    """An anonymous chunked body past anonymous_max_body_bytes: 413 (on a real server it stops
    being read there: tests/reliability/test_bodies.py)."""
    with make_client(io_url) as c:
        r = c.post("/meascom", content=iter(Source(1024 * 1024, chunk=64 * 1024)),
                   headers={"Content-Type": "application/json"})
        assert r.status_code == 413, r.text[:200]
        assert "without a bearer token" in r.json()["detail"] and "16384 bytes" in r.json()["detail"]
        small = c.post("/meascom", content=b'{"text": "HELP"}', headers={"Content-Type": "application/json"})
        assert small.status_code == 401  # within the bound, the usual answer
        sized = c.post("/meascom", content=b"x" * 20_000, headers={"Content-Type": "application/json"})
        assert sized.status_code == 413
