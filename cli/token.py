"""`measuredb token create|list|revoke`: API bearer tokens (only their SHA-256 is stored).

    measuredb token create NAME --scope read|write|admin   prints the token once
    measuredb token list
    measuredb token revoke NAME

Through core/tokens.py.
"""

from __future__ import annotations

from typing import Annotated

import typer

from cli.common import check_format, connection, emit, out, run
from core import tokens

token_app = typer.Typer(no_args_is_help=True, help="Create, list or revoke API bearer tokens.")
OPTIONS = {"name": "NAME", "scope": "--scope"}  # as the messages name them


@token_app.command("create")
def create(
    name: Annotated[str, typer.Argument(help="a name for the token (who or what uses it)")],
    scope: Annotated[str, typer.Option(help="read, write (includes read) or admin (includes write: "
                                            "retention and other configuration)")] = "read",
) -> None:
    """Create a token and print it once (it cannot be shown again)."""
    def go() -> None:
        with connection() as conn:
            token = tokens.create(conn, name, scope)
        out.print(token, markup=False, highlight=False)
    run(go, options=OPTIONS)


@token_app.command("list")
def list_(output: Annotated[str | None, typer.Option("--format", help="csv or json (default: one line a "
                                                                        "token)")] = None) -> None:
    """List tokens (names, scopes, use), never the tokens themselves."""
    def go() -> None:
        if output is not None:
            check_format(output)
        with connection() as conn:
            rows = tokens.list_all(conn)
        if output in ("csv", "json"):
            emit(rows, [("name", "name"), ("scope", "scope"), ("created_at", "created"),
                        ("last_used_at", "last used"), ("revoked_at", "revoked")], output)
            return
        for r in rows:
            state = f"revoked {r['revoked_at']:%Y-%m-%d %H:%M}" if r["revoked_at"] else "active"
            last = f"{r['last_used_at']:%Y-%m-%d %H:%M}" if r["last_used_at"] else "never"
            out.print(f"{r['name']}\t{r['scope']}\t{state}\tcreated {r['created_at']:%Y-%m-%d %H:%M}\t"
                      f"last used {last}", markup=False, highlight=False)
    run(go, options=OPTIONS)


@token_app.command("revoke")
def revoke(name: Annotated[str, typer.Argument(help="the token's name")]) -> None:
    """Revoke a token: requests with it get 401 from then on."""
    def go() -> None:
        with connection() as conn:
            tokens.revoke(conn, name)
        out.print(f"token {name} revoked", markup=False)
    run(go, options=OPTIONS)
