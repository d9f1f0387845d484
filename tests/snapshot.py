"""Everything a user can read from a database, as comparable text: interval records, copies,
every tier view, every report and every dashboard function over given days and windows.

Used to show that two databases answer the same: an upgraded one against itself before the
upgrade (tests/schema/test_upgrade.py), TimescaleDB against plain PostgreSQL
(tests/test_engines.py)."""

from __future__ import annotations

from collections.abc import Sequence
from datetime import date, datetime

import psycopg

ENTITIES = ("cpu", "disc", "line", "process", "userdef", "tmf")
TIERS = ("hour", "shift", "month", "year")

# (name, call) of the reports and panels over a window [:f, :t); the system is :s
WINDOW_CALLS = [
    ("process_summary", "measure.report_process_summary(%(s)s, %(f)s, %(t)s)"),
    ("busy_process", "measure.report_busy_process(%(s)s, %(f)s, %(t)s, 0)"),
    ("process_activity", "measure.report_process_activity(%(s)s, %(f)s, %(t)s)"),
    ("file_summary", "measure.report_file_summary(%(s)s, %(f)s, %(t)s)"),
    ("discopen_summary", "measure.report_discopen_summary(%(s)s, %(f)s, %(t)s)"),
    ("transaction_resource", "measure.report_transaction_resource(%(s)s, %(f)s, %(t)s)"),
    *[(f"{e}_series", f"measure.{e}_series(%(s)s, %(f)s, %(t)s)") for e in ENTITIES],
    ("threshold_check", "measure.threshold_check(%(s)s, %(f)s, %(t)s)"),
    ("threshold_table", "measure.threshold_table(%(s)s, %(f)s, %(t)s)"),
    ("threshold_annotations", "measure.threshold_annotations(%(s)s, %(f)s, %(t)s)"),
    ("threshold_series", "measure.threshold_series(%(s)s, %(f)s, %(t)s, 'cpu', 'busy_max')"),
    ("terminal_series", "measure.terminal_series(%(s)s, %(f)s, %(t)s)"),
    ("terminal_summary", "measure.terminal_summary(%(s)s, %(f)s, %(t)s)"),
    ("terminal_spread", "measure.terminal_spread(%(s)s, %(f)s, %(t)s)"),
    ("capacity_series", "measure.capacity_series(%(s)s, %(f)s, %(t)s)"),
]
# over a local day :d (and a range of days :d .. :e)
DAY_CALLS = [
    ("threshold", "measure.report_threshold(%(s)s, %(d)s)"),
    ("threshold_items", "measure.report_threshold_items(%(s)s, %(d)s)"),
    ("condensation_check", "measure.report_condensation_check(%(s)s, %(d)s)"),
    ("cpu_trend", "measure.report_cpu_trend(%(s)s, %(d)s, %(e)s)"),
    ("shift_summary", "measure.report_shift_summary(%(s)s, %(d)s, %(e)s)"),
    ("capacity_forecast", "measure.report_capacity_forecast(%(s)s, %(d)s, %(e)s)"),
]


def rows(conn: psycopg.Connection, sql: str, params: dict | None = None) -> list[str]:
    return [r for (r,) in conn.execute(f"SELECT x::text FROM {sql} x ORDER BY 1", params or {})]


def tier_columns(conn: psycopg.Connection) -> dict[str, list[str]]:
    """The columns of every public tier view (an upgrade may append columns: compare the old ones)."""
    return {f"{ent}_{tier}": [r for (r,) in conn.execute(
                "SELECT attname FROM pg_attribute WHERE attrelid = %s::regclass AND attnum > 0"
                " AND NOT attisdropped ORDER BY attnum", (f"measure.{ent}_{tier}",))]
            for ent in ENTITIES for tier in TIERS}


def snapshot(conn: psycopg.Connection, system: str, days: Sequence[date],
             windows: Sequence[tuple[datetime, datetime]], *, copies: str = "measure.counter_copy",
             raw: bool = True, columns: dict[str, list[str]] | None = None) -> dict[str, list[str]]:
    """name → the rows as text, sorted (exact: numeric scales, NULLs and all). columns: only
    these columns of the tier views (tier_columns() of another database)."""
    out: dict[str, list[str]] = {}
    if raw:
        out["interval_record"] = rows(conn, "(SELECT measurement_id, entity_id, record_at, from_at, to_at, delta_us,"
                                            " closing_kind, system_id, type_code, cpu, error, counters"
                                            " FROM measure.interval_record)")
        out["counter_copy"] = rows(conn, f"(SELECT measurement_id, entity_id, record_at, copy_at, copy_kind, system_id,"
                                         f" type_code, cpu, error, counters FROM {copies})")
    for ent in ENTITIES:
        for tier in TIERS:
            view = f"measure.{ent}_{tier}"
            if columns is not None:
                view = f"(SELECT {', '.join(columns[f'{ent}_{tier}'])} FROM {view})"
            out[f"{ent}_{tier}"] = rows(conn, view)
    for i, (f, t) in enumerate(windows):
        for name, call in WINDOW_CALLS:
            out[f"{name}[{i}]"] = rows(conn, call, {"s": system, "f": f, "t": t})
    for d in days:
        for name, call in DAY_CALLS:
            out[f"{name}[{d}]"] = rows(conn, call, {"s": system, "d": d, "e": days[-1]})
    return out


def differences(a: dict[str, list[str]], b: dict[str, list[str]]) -> list[str]:
    """A readable list of what differs (empty when equal)."""
    out = []
    for name in sorted(set(a) | set(b)):
        x, y = a.get(name), b.get(name)
        if x != y:
            only_a = sorted(set(x or []) - set(y or []))[:2]
            only_b = sorted(set(y or []) - set(x or []))[:2]
            out.append(f"{name}: {len(x or [])} vs {len(y or [])} rows; only before {only_a}; only after {only_b}")
    return out
