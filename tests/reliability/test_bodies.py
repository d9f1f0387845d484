"""Request bodies on a real server: a body past its limit stops being read as it arrives
(chunked or not), and an anonymous caller cannot make the API hold more than a small bound."""

from __future__ import annotations

import socket
import time

import psutil

from tests.tokens import create_token

MiB = 1024 * 1024


def send_chunked(port: int, path: str, headers: dict[str, str], total: int, chunk: int = 64 * 1024,
                 rss_of: int | None = None) -> tuple[bytes, int, int]:
    """POST `total` bytes chunked, reading the answer as it comes; (answer, bytes sent when it
    came, largest RSS growth of process `rss_of` meanwhile)."""
    s = socket.create_connection(("127.0.0.1", port), timeout=30)
    head = "".join(f"{k}: {v}\r\n" for k, v in {"Host": "x", "Transfer-Encoding": "chunked", **headers}.items())
    s.sendall(f"POST {path} HTTP/1.1\r\n{head}\r\n".encode())
    proc = psutil.Process(rss_of) if rss_of else None
    rss0 = proc.memory_info().rss if proc else 0
    grown, sent, answer = 0, 0, b""
    piece = f"{chunk:x}\r\n".encode() + b"x" * chunk + b"\r\n"
    s.setblocking(False)
    try:
        while sent < total and not answer:
            try:
                s.send(piece)
                sent += chunk
            except BlockingIOError:
                time.sleep(0.005)
            except (BrokenPipeError, ConnectionResetError):
                break
            try:
                answer = s.recv(65536)
            except BlockingIOError:
                pass
            if proc and sent % (4 * MiB) < chunk:
                grown = max(grown, proc.memory_info().rss - rss0)
        s.settimeout(10)
        while not answer:
            answer = s.recv(65536)
    finally:
        s.close()
    return answer, sent, grown


def test_an_anonymous_chunked_100_mib_body_is_refused_as_it_arrives(start_api) -> None:
    api = start_api()
    answer, sent, grown = send_chunked(api.port, "/meascom", {"Content-Type": "application/json"},
                                       100 * MiB, rss_of=api.proc.pid)
    assert answer.startswith(b"HTTP/1.1 413"), answer[:200]
    assert b"without a bearer token" in answer
    assert sent < 16 * MiB, sent  # what the socket buffers held when the answer came, not 100 MiB
    assert grown < 32 * MiB, grown


def test_a_chunked_import_past_its_limit_is_refused_as_it_arrives(start_api, reliability_db) -> None:
    token = create_token(reliability_db, "bodies-write", "write")
    api = start_api(MEASUREDB_API_MAX_IMPORT_BYTES="1000000")
    answer, sent, _ = send_chunked(api.port, "/import", {"Content-Type": "text/csv",
                                                         "Authorization": f"Bearer {token}"}, 64 * MiB)
    assert answer.startswith(b"HTTP/1.1 413"), answer[:300]
    assert b"request body over 1000000 bytes" in answer
    assert sent < 16 * MiB, sent


def test_a_content_length_over_the_limit_is_refused_unread(start_api) -> None:
    api = start_api()
    s = socket.create_connection(("127.0.0.1", api.port), timeout=10)
    s.sendall(b"POST /meascom HTTP/1.1\r\nHost: x\r\nContent-Type: application/json\r\n"
              b"Content-Length: 104857600\r\n\r\n")
    answer = s.recv(65536)
    s.close()
    assert answer.startswith(b"HTTP/1.1 413"), answer[:200]
