"""`measuredb schema apply|status`: the database schema (core/schema.py, the schema runner)."""

from __future__ import annotations

import typer

from cli.common import database, friendly, out
from core import schema as schema_runner
from core.settings import DatabaseSettings

schema_app = typer.Typer(no_args_is_help=True, help="Apply or inspect the database schema.")


@schema_app.command("apply")
@friendly
def schema_apply() -> None:
    """Apply schema/ (idempotent; refuses a database written by a newer measuredb)."""
    settings = DatabaseSettings()
    with database(settings, create=True) as url:
        result = schema_runner.apply(url, mode=settings.timescaledb, engine=settings.engine)
    applied = ", ".join(result.applied) or "nothing new"
    out.print(f"schema version {result.version} on {result.describe()}: applied {applied}")


@schema_app.command("status")
@friendly
def schema_status() -> None:
    """Print the database's and this code's schema versions."""
    with database(need_schema=False) as url:
        info = schema_runner.status(url)
    out.print(info)
