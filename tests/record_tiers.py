"""Shared by the record-tier tests (tests/schema/test_record_tiers.py on hand-built data,
tests/dashboards/test_record_tiers_week.py on the simulated week)."""

from __future__ import annotations


def report_rows(conn, call: str, params: dict, tiers: bool) -> list[str]:
    """The rows of a report call as text (exact: numeric scale and all), sorted; read through
    the record tiers (tiers=True) or from interval records only (`measuredb.record_tiers = off`)."""
    sql = f"SELECT r::text FROM {call} r ORDER BY 1"
    if tiers:
        return [r for (r,) in conn.execute(sql, params)]
    conn.execute("SET measuredb.record_tiers = off")
    try:
        return [r for (r,) in conn.execute(sql, params)]
    finally:
        conn.execute("RESET measuredb.record_tiers")
