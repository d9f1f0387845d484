"""The collector's background work on the database, each on its own connection so that it
never holds up the virtual clock: the upkeep (pack live runs, condense months, compress old
TimescaleDB chunks, retention once a day: _measure.upkeep) and the scheduled reports
(core/scheduler.py). Both threads are daemons; the event each start function returns stops
its thread."""

from __future__ import annotations

import logging
import threading
from collections.abc import Callable
from typing import Any

import psycopg

from core import scheduler
from core.database import scalar
from core.retention import describe

log = logging.getLogger(__name__)


def condense_months(url: str, system_id: int) -> int:
    """The month-level rows the slices written so far left (_measure.month_dirty), after
    any hours still marked (a backfill killed before condensing them): a backfill returns
    with every tier current. The number of month hours done (0 when the database cannot be
    reached: the upkeep does them later)."""
    try:
        with psycopg.connect(url, connect_timeout=3) as conn:
            conn.execute("SELECT _measure.condense(%s::smallint, 1000000, false)", (system_id,))
            return scalar(conn.execute("SELECT _measure.condense_pending_months(%s::smallint)",
                                       (system_id,)))
    except psycopg.OperationalError:
        return 0


def upkeep(url: str, compress_after_hours: float) -> dict[str, Any] | None:
    """One pass of _measure.upkeep; logs what it did. None when the database cannot be
    reached."""
    try:
        with psycopg.connect(url, connect_timeout=3) as conn:
            done = scalar(conn.execute(
                "SELECT _measure.upkeep(now(), %s * INTERVAL '1 hour')",
                (compress_after_hours,)))
    except psycopg.OperationalError as exc:
        log.warning("upkeep skipped, database unreachable: %s", exc)
        return None
    if done["packed"]:
        log.info("upkeep: packed %d live runs", done["packed"])
    if done["compressed"]:
        log.info("upkeep: compressed %s", ", ".join(done["compressed"]))
    retention = done.get("retention")  # once a day
    if retention:
        for line in describe(retention):
            (log.warning if "held back" in line else log.info)("retention: %s", line)
    return done


def start_upkeep(every_s: float, run: Callable[[], Any]) -> threading.Event:
    """Call run (an upkeep pass) every every_s seconds in a background thread; a failed pass
    is retried at the next turn."""
    stop = threading.Event()

    def loop() -> None:
        while not stop.wait(every_s):
            try:
                run()
            except psycopg.Error as exc:
                log.warning("upkeep failed: %s", str(exc).strip())

    threading.Thread(target=loop, name="upkeep", daemon=True).start()
    return stop


def start_scheduler(url: str, instance: str, every_s: float = 30.0) -> threading.Event:
    """Run due scheduled reports every every_s seconds in a background thread, so a long
    report never holds up the virtual clock. Two collectors never run one schedule slot
    twice: slots are claimed in the database."""
    stop = threading.Event()

    def loop() -> None:
        while not stop.wait(every_s):
            scheduler.run_due_quietly(url, instance=instance)

    threading.Thread(target=loop, name="report-scheduler", daemon=True).start()
    return stop
