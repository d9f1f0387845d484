"""API bearer tokens: created, listed and revoked here; only their SHA-256 is stored
(_measure.api_token). The API checks a presented token with measure.token_scope (api/auth.py).

    token = tokens.create(conn, "grafana", "read")     # shown once, never stored
    tokens.revoke(conn, "grafana")
"""

from __future__ import annotations

import hashlib
import secrets
from typing import Any

import psycopg
from psycopg.rows import dict_row

from core.errors import Conflict, InvalidValue, NotFound, database_errors

SCOPES = ("read", "write", "admin")  # admin includes write, write includes read
PREFIX = "mdb_"


def new_token() -> str:
    return PREFIX + secrets.token_urlsafe(32)


def digest(token: str) -> bytes:
    """What is stored of a token, and what a presented one is looked up by."""
    return hashlib.sha256(token.encode()).digest()


def create(conn: psycopg.Connection, name: str, scope: str) -> str:
    """Store a new token's SHA-256 under NAME; return the token (shown once)."""
    name = name.strip()
    if scope not in SCOPES:
        raise InvalidValue(f"scope must be read, write or admin, got {scope!r}", field="scope")
    if not name or len(name) > 64:
        raise InvalidValue("name must be 1-64 characters", field="name")
    token = new_token()
    try:
        with database_errors():
            conn.execute("INSERT INTO _measure.api_token (name, scope, token_sha256) VALUES (%s, %s, %s)",
                         (name, scope, digest(token)))
    except Conflict:
        raise Conflict(f"a token named {name!r} exists already; revoke it or choose another name") from None
    return token


def list_all(conn: psycopg.Connection) -> list[dict[str, Any]]:
    """Every token's name, scope and use (never the token)."""
    with database_errors(), conn.cursor(row_factory=dict_row) as cur:
        return cur.execute("SELECT name, scope, created_at, last_used_at, revoked_at "
                           "FROM _measure.api_token ORDER BY name").fetchall()


def revoke(conn: psycopg.Connection, name: str) -> None:
    """Revoke a token: requests with it get 401 from then on."""
    with database_errors():
        n = conn.execute("UPDATE _measure.api_token SET revoked_at = now() "
                         "WHERE name = %s AND revoked_at IS NULL", (name,)).rowcount
    if n == 0:
        raise NotFound(f"no active token named {name!r} (see measuredb token list)")
