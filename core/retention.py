"""Retention: how long each class of data is kept, purges now, and the log of every purge.

The policy is data (_measure.retention, schema/idempotent/026-retention.sql); these functions
are the one way the command line (`measuredb retention …`, cli/retention.py), the API
(/admin/retention, api/retention/) and the collector's upkeep (collector/upkeep.py) read and
change it. Each takes a psycopg connection and works in its transaction; a caller's mistake is
a :class:`core.errors.ServiceError` naming the field.

    rows = retention.show(conn)                      # class, keep, cutoff, purged_before
    retention.set_keep(conn, "raw", timedelta(days=35))
    result = retention.run(conn, dry_run=True, requested_by="cli")
    for line in retention.describe(result): print(line)
"""

from __future__ import annotations

import re
from datetime import timedelta
from typing import Any

import psycopg
from psycopg.rows import dict_row

from core.errors import InvalidValue, database_errors

CLASSES = ("raw", "hour", "day", "month")
_UNITS = {"d": 1, "day": 1, "days": 1, "w": 7, "week": 7, "weeks": 7, "y": 365, "year": 365, "years": 365}


def parse_keep(text: str) -> timedelta | None:
    """'35d', '12 weeks', '400 days', '2y' → a duration; 'forever' (or 'never') → None."""
    t = text.strip().lower()
    if t in ("forever", "never", "none"):
        return None
    m = re.fullmatch(r"(\d+)\s*([a-z]+)?", t)
    if not m or (m.group(2) or "d") not in _UNITS:
        raise InvalidValue(f"duration {text!r} is not one of: N days (35d, 35 days), N weeks (12w), "
                           "N years (2y), or forever", field="keep")
    return timedelta(days=int(m.group(1)) * _UNITS[m.group(2) or "d"])


def show(conn: psycopg.Connection) -> list[dict[str, Any]]:
    """Per class: how long it is kept (None: for ever), its cut-off now, what was purged."""
    with database_errors(), conn.cursor(row_factory=dict_row) as cur:
        return cur.execute("SELECT class, keep, cutoff, purged_before FROM measure.retention_show()").fetchall()


def set_keep(conn: psycopg.Connection, cls: str, keep: timedelta | None) -> None:
    """Keep CLASS for KEEP (None: for ever); each class at least as long as the one below."""
    if cls not in CLASSES:
        raise InvalidValue(f"unknown retention class {cls!r}: one of {', '.join(CLASSES)}", field="class")
    with database_errors():
        conn.execute("SELECT measure.retention_set(%s, %s)", (cls, keep))


def run(conn: psycopg.Connection, *, dry_run: bool, requested_by: str) -> dict[str, Any]:
    """Apply the policy now (or report what would go); the purge's record (_measure.purge_log)."""
    with database_errors():
        row = conn.execute("SELECT measure.retention_run(%s, %s)", (dry_run, requested_by)).fetchone()
    assert row is not None
    return row[0]


def log(conn: psycopg.Connection, limit: int) -> list[dict[str, Any]]:
    """The last purges (dry runs too), newest first."""
    with database_errors(), conn.cursor(row_factory=dict_row) as cur:
        return cur.execute("SELECT * FROM measure.purge_log(%s)", (limit,)).fetchall()


def describe(result: dict[str, Any]) -> list[str]:
    """One line per thing a purge removed (or would remove) and per hold-back."""
    verb = "would remove" if result.get("dry_run") else "removed"
    lines = []
    for r in result.get("removed") or []:
        extra = f", {r['intervals']:,} intervals, {r['counter_values']:,} counter values" if "intervals" in r else ""
        lines.append(f"{r['class']}: {verb} {r['object']}: {r['rows']:,} rows{extra}")
    for h in result.get("held_back") or []:
        hours = h.get("hours") or []
        lines.append(f"{h['class']}: held back at {h['first_hour']}: {h['reason']} "
                     f"({len(hours)} hour(s){', e.g. ' + ', '.join(hours[:3]) if hours else ''})")
    if not lines:
        lines.append("nothing to purge")
    return lines
