"""Bearer tokens for tests, made by the platform's own service (core/tokens.py)."""

from __future__ import annotations

import psycopg

from core import tokens


def create_token(url: str, name: str, scope: str) -> str:
    with psycopg.connect(url) as conn:
        return tokens.create(conn, name, scope)
