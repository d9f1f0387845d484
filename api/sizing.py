"""How many worker processes, database connections and threads the API uses: from the machine
and the database's connection budget unless the settings name them (issue 27, item 8).

- workers: one per CPU core the process may run on, at most :data:`MAX_AUTO_WORKERS`;
- database pool per worker (``pool_size``; SQLAlchemy may open as many again as overflow):
  the database's ``max_connections``, less its reserved slots, :data:`OTHER_CONNECTIONS` for
  the collector, the command line and dashboards, and one LISTEN connection per worker (the
  read cache), shared by the workers; at most :data:`MAX_AUTO_POOL`;
- threads per worker (the pool that runs the endpoints): one per connection the worker may
  open (pool and overflow), so a request waits for a thread rather than for a connection
  it would give up on after ``pool_timeout_seconds`` (a 503).

An explicit setting is used as given; the others follow from it.
"""

from __future__ import annotations

import os
from dataclasses import dataclass

import psycopg

__all__ = ["MAX_AUTO_POOL", "MAX_AUTO_WORKERS", "OTHER_CONNECTIONS", "Sizing", "cpu_count",
           "database_budget", "plan"]

MAX_AUTO_WORKERS = 4
MAX_AUTO_POOL = 10
OTHER_CONNECTIONS = 10
ASSUMED_MAX_CONNECTIONS = 100  # PostgreSQL's default, when the database cannot be asked
ASSUMED_RESERVED = 3


@dataclass(frozen=True)
class Sizing:
    workers: int
    pool_size: int
    threads: int
    max_connections: int
    reserved: int
    asked: bool   # max_connections came from the database (not assumed)

    def describe(self) -> str:
        source = "" if self.asked else ", assumed: the database did not say"
        return (f"API: {self.workers} worker{'s' if self.workers != 1 else ''}, each with {self.pool_size} "
                f"database connection{'s' if self.pool_size != 1 else ''} (+{self.pool_size} when busy) and "
                f"{self.threads} threads; the database allows {self.max_connections} connections "
                f"({self.reserved} reserved{source})")

    def over_budget(self) -> bool:
        """The workers may open more connections than the database has for them."""
        most = self.workers * (2 * self.pool_size + 1)
        return most > self.max_connections - self.reserved - OTHER_CONNECTIONS


def cpu_count() -> int:
    """CPU cores this process may run on (its affinity: a container's cpuset counts)."""
    try:
        return max(1, len(os.sched_getaffinity(0)))
    except (AttributeError, OSError):  # pragma: no cover - not Linux
        return max(1, os.cpu_count() or 1)


def database_budget(url: str) -> tuple[int, int] | None:
    """(max_connections, reserved slots) of the database, or None when it cannot be asked."""
    try:
        with psycopg.connect(url, connect_timeout=3, autocommit=True,
                             application_name="measuredb-api-sizing") as conn:
            row = conn.execute(
                "SELECT current_setting('max_connections')::int, "
                "current_setting('superuser_reserved_connections')::int "
                "+ coalesce(current_setting('reserved_connections', true)::int, 0)").fetchone()
    except (psycopg.Error, OSError):
        return None
    return None if row is None else (int(row[0]), int(row[1]))


def plan(*, cpus: int, budget: tuple[int, int] | None, workers: int | None = None,
         pool_size: int | None = None, threads: int | None = None) -> Sizing:
    """The sizing for `cpus` cores and a database budget (max_connections, reserved); the
    given values are kept."""
    max_connections, reserved = budget or (ASSUMED_MAX_CONNECTIONS, ASSUMED_RESERVED)
    w = workers or max(1, min(cpus, MAX_AUTO_WORKERS))
    per_worker = (max_connections - reserved - OTHER_CONNECTIONS - w) // w
    p = pool_size or max(1, min(MAX_AUTO_POOL, per_worker // 2))
    t = threads or max(4, 2 * p)
    return Sizing(workers=w, pool_size=p, threads=t, max_connections=max_connections, reserved=reserved,
                  asked=budget is not None)
