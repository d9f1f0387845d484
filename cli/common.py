"""What every `measuredb` command shares: the consoles, the one-line errors, the database.

* :class:`UserError` and the services' :class:`core.errors.ServiceError` end a command with one
  line and exit status 2 (:func:`friendly`); bad settings name the variable; never a traceback.
* :func:`database` yields the URL of the configured database (DATABASE_URL, or the embedded
  server, started for the command and stopped after it); :func:`connection` a connection to it.
* :func:`print_lines` and :func:`show_table` print without Rich markup.
"""

from __future__ import annotations

import contextlib
import csv
import functools
import io
import json
import re
import sys
from collections.abc import Callable, Iterator
from datetime import date, datetime, timedelta
from decimal import Decimal
from typing import Annotated, Any, TypeVar

import psycopg
import typer
from pydantic import ValidationError
from pydantic_settings import BaseSettings, SettingsError
from rich.console import Console
from rich.table import Table

from api.settings import ApiSettings
from collector.settings import CollectorSettings
from core import schema as schema_runner
from core.database import DatabaseError, check_schema, connect
from core.errors import ServiceError
from core.settings import DatabaseSettings, describe_validation_error

console = Console(stderr=True, soft_wrap=True)
out = Console(soft_wrap=True)

F = TypeVar("F", bound=Callable[..., Any])


class UserError(Exception):
    """A problem the user can fix: printed as one line, exit status 2."""


def describe_service_error(exc: ServiceError, options: dict[str, str] | None = None) -> str:
    """One line for a service's error, its field named as the command names it (an option such
    as --time-zone, an argument such as SYSTEM): 'time_zone: …' -> '--time-zone: …', 'scope must
    …' -> '--scope must …', field 'shifts[1].begin' -> '--shift #2 (begin): …'. A field the
    command has no name for is left as the service says it."""
    message, field = exc.message, exc.field
    m = re.fullmatch(r"([a-z_]+)(?:\[(\d+)\])?(?:\.([a-z_]+))?", field or "")
    if field and m and options and m[1] in options:
        label = options[m[1]]
        if m[2] is not None:
            label += f" #{int(m[2]) + 1}"
        if m[3]:
            label += f" ({m[3]})"
        if message.startswith(field + ":"):
            message = f"{label}: {message[len(field) + 1:].lstrip()}"
        elif message.startswith(field + " "):
            message = label + message[len(field):]
        else:
            message = f"{label}: {message}"
    return message + (f" ({exc.hint})" if exc.hint else "")


def friendly(func: F, *, options: dict[str, str] | None = None) -> F:
    """Turn the errors a user can fix into one clear line and exit status 2."""

    @functools.wraps(func)
    def wrapper(*args: Any, **kwargs: Any) -> Any:
        try:
            return func(*args, **kwargs)
        except ValidationError as exc:
            settings_classes: dict[str, type[BaseSettings]] = {
                "ApiSettings": ApiSettings, "CollectorSettings": CollectorSettings}
            settings_cls = settings_classes.get(exc.title, DatabaseSettings)
            console.print(f"measuredb: {describe_validation_error(exc, settings_cls)}", markup=False)
        except SettingsError as exc:  # a value pydantic-settings could not even read
            console.print(f"measuredb: bad setting: {exc}", markup=False)
        except ServiceError as exc:
            console.print(f"measuredb: {describe_service_error(exc, options)}", markup=False)
        except (DatabaseError, schema_runner.SchemaError, UserError) as exc:
            console.print(f"measuredb: {exc}", markup=False)
        raise typer.Exit(2)

    return wrapper  # type: ignore[return-value]  # functools.wraps keeps F's signature at run time


def run(func: Callable[[], Any], *, options: dict[str, str] | None = None) -> Any:
    """Run a command's body with :func:`friendly`'s one-line errors."""
    return friendly(func, options=options)()


@contextlib.contextmanager
def database(settings: DatabaseSettings | None = None, *, apply_schema: bool = False,
             create: bool = False, need_schema: bool = True) -> Iterator[str]:
    """The URL of the configured database for the duration of a command; an embedded server
    started for it is stopped after it. Only the commands that set the platform up (`create`:
    run, collector, backfill, api, schema apply) make an embedded server that does not exist
    yet; every other command refuses in one line, and needs the schema there."""
    settings = settings if settings is not None else DatabaseSettings()
    url, server = connect(settings.database_url, settings.data_dir, timescaledb=settings.timescaledb,
                          create=create or apply_schema)
    try:
        if apply_schema:
            schema_runner.apply(url, mode=settings.timescaledb, engine=settings.engine)
        elif need_schema and not create:
            check_schema(url)
        yield url
    finally:
        if server:
            server.stop()


@contextlib.contextmanager
def connection(settings: DatabaseSettings | None = None) -> Iterator[psycopg.Connection]:
    """A connection to the configured database, committed when the block ends without error."""
    with database(settings) as url, psycopg.connect(url) as conn:
        yield conn


def parse_date(text: str, option: str) -> date:
    try:
        return date.fromisoformat(text)
    except ValueError:
        raise UserError(f"{option}: {text!r} is no date (YYYY-MM-DD)") from None


def print_lines(*lines: str) -> None:
    for line in lines:
        out.print(line, markup=False, highlight=False)


def show_table(table: Table) -> None:
    """A Rich table on stdout: as wide as the terminal, or as wide as it needs when the output
    is not a terminal (a pipe or a file never gets a cell cut short)."""
    console_ = Console(soft_wrap=True)  # made now: the width of the terminal it prints to
    if not console_.is_terminal:
        console_ = Console(soft_wrap=True, width=100_000)
    console_.print(table)


# ---------------------------------------------------------------- list output: text, CSV, JSON

FORMATS = ("text", "csv", "json")
FormatOption = Annotated[str, typer.Option("--format", help="text (a table), csv or json")]


def check_format(fmt: str) -> str:
    if fmt not in FORMATS:
        raise UserError(f"--format {fmt!r}: text, csv or json")
    return fmt


def _plain(value: Any) -> Any:
    if isinstance(value, datetime | date):
        return value.isoformat()
    if isinstance(value, timedelta):
        return value.total_seconds()
    if isinstance(value, Decimal):
        return int(value) if value == value.to_integral_value() else float(value)
    return value


def emit(rows: list[dict[str, Any]], columns: list[tuple[str, str]], fmt: str,
         text: Callable[[dict[str, Any]], list[str]] | None = None, headings: list[str] | None = None) -> None:
    """Rows as a table (text: `text(row)` gives the cells under `headings`, else str of each
    column under its heading), CSV (the column keys as the header) or JSON (a list of objects
    with every column)."""
    if fmt == "json":
        out.print_json(json.dumps([{k: _plain(r.get(k)) for k, _ in columns} for r in rows]))
        return
    if fmt == "csv":
        buffer = io.StringIO()
        writer = csv.writer(buffer, lineterminator="\n")
        writer.writerow([k for k, _ in columns])
        writer.writerows([[("" if (v := _plain(r.get(k))) is None else v) for k, _ in columns] for r in rows])
        sys.stdout.write(buffer.getvalue())
        return
    table = Table(*(headings or [heading for _, heading in columns]))
    for r in rows:
        table.add_row(*(text(r) if text else ["" if r.get(k) is None else str(r.get(k)) for k, _ in columns]))
    show_table(table)


# ---------------------------------------------------------------- configuration commands

# the configuration services' field names, as `measuredb system | calendar | threshold` name them
CONFIG_OPTIONS = {"name": "--name", "number": "--number", "time_zone": "--time-zone",
                  "os_version": "--os-version", "cpu_types": "--cpu-types", "effective_from": "--from",
                  "shifts": "--shift", "holiday_shift": "--holiday-shift", "holiday_name": "--holiday-name",
                  "system": "SYSTEM", "day": "DATE", "entity": "ENTITY", "item": "ITEM",
                  "operator": "OPERATOR", "limit": "LIMIT", "shift": "--shift", "help": "--description"}

SYSTEM_ARG_HELP = "the system's name (\\DEMO; the backslash and upper case may be left out)"


def describe_recondensed(result: dict[str, Any] | None) -> str:
    """What a calendar or time-zone change recondensed, in a line."""
    if not result or not result.get("days"):
        return "no stored shift day changed: nothing recondensed"
    span = result["first_day"] if result["first_day"] == result["last_day"] else \
        f"{result['first_day']} to {result['last_day']}"
    return (f"recondensed {result['days']} shift day{'s' if result['days'] != 1 else ''} "
            f"({result['hours']} hour{'s' if result['hours'] != 1 else ''} with data): {span}")
