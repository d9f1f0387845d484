"""`measuredb token create|list|revoke`: API bearer tokens (only their SHA-256 is stored).

    measuredb token create NAME --scope read|write|admin   prints the token once
    measuredb token list
    measuredb token revoke NAME
"""

from __future__ import annotations

import hashlib
import secrets
from typing import Annotated

import typer

token_app = typer.Typer(no_args_is_help=True, help="Create, list or revoke API bearer tokens.")


def _url_and_server():
    from cli.main import _database
    from core.settings import DatabaseSettings

    return _database(DatabaseSettings())


def new_token() -> str:
    return "mdb_" + secrets.token_urlsafe(32)


def create_token(url: str, name: str, scope: str) -> str:
    """Store a new token's SHA-256 under NAME; return the token (shown once)."""
    import psycopg

    from cli.main import UserError

    token = new_token()
    with psycopg.connect(url) as conn:
        try:
            conn.execute("INSERT INTO _measure.api_token (name, scope, token_sha256) VALUES (%s, %s, %s)",
                         (name, scope, hashlib.sha256(token.encode()).digest()))
        except psycopg.errors.UniqueViolation:
            raise UserError(f"a token named {name!r} exists already; revoke it or choose another name") from None
    return token


def _friendly(func):
    from cli.main import friendly

    return friendly(func)


@token_app.command("create")
def create(
    name: Annotated[str, typer.Argument(help="a name for the token (who or what uses it)")],
    scope: Annotated[str, typer.Option(help="read, write (includes read) or admin (includes write: "
                                            "retention and other configuration)")] = "read",
) -> None:
    """Create a token and print it once (it cannot be shown again)."""
    from cli.main import UserError, out

    @_friendly
    def run() -> None:
        if scope not in ("read", "write", "admin"):
            raise UserError(f"--scope must be read, write or admin, got {scope!r}")
        if not name.strip() or len(name) > 64:
            raise UserError("NAME must be 1-64 characters")
        url, server = _url_and_server()
        try:
            token = create_token(url, name.strip(), scope)
        finally:
            if server:
                server.stop()
        out.print(token, markup=False, highlight=False)

    run()


@token_app.command("list")
def list_() -> None:
    """List tokens (names, scopes, use), never the tokens themselves."""
    import psycopg

    from cli.main import out

    @_friendly
    def run() -> None:
        url, server = _url_and_server()
        try:
            with psycopg.connect(url) as conn:
                rows = conn.execute("SELECT name, scope, created_at, last_used_at, revoked_at "
                                    "FROM _measure.api_token ORDER BY name").fetchall()
        finally:
            if server:
                server.stop()
        for name, scope, created, used, revoked in rows:
            state = f"revoked {revoked:%Y-%m-%d %H:%M}" if revoked else "active"
            last = f"{used:%Y-%m-%d %H:%M}" if used else "never"
            out.print(f"{name}\t{scope}\t{state}\tcreated {created:%Y-%m-%d %H:%M}\tlast used {last}",
                      markup=False, highlight=False)

    run()


@token_app.command("revoke")
def revoke(name: Annotated[str, typer.Argument(help="the token's name")]) -> None:
    """Revoke a token: requests with it get 401 from then on."""
    import psycopg

    from cli.main import UserError, out

    @_friendly
    def run() -> None:
        url, server = _url_and_server()
        try:
            with psycopg.connect(url) as conn:
                n = conn.execute("UPDATE _measure.api_token SET revoked_at = now() "
                                 "WHERE name = %s AND revoked_at IS NULL", (name,)).rowcount
        finally:
            if server:
                server.stop()
        if n == 0:
            raise UserError(f"no active token named {name!r} (see measuredb token list)")
        out.print(f"token {name} revoked", markup=False)

    run()


