"""The platform's configuration: systems, calendars (shifts per weekday, calendar versions,
holidays), thresholds, the automatic analysis's settings and the process-to-component map;
and all of it for some systems as one document, out and in (export_configuration,
import_configuration).

One function per operation, called by the command line (`measuredb system | calendar |
threshold | analysis`, cli/) and the API (/admin/systems, /admin/thresholds,
/admin/systems/{system}/analysis, /admin/analysis, api/configuration/). Each calls the
SECURITY DEFINER functions measure.config_* of schema/idempotent/050-config.sql in the caller's
transaction (one statement, so nothing is half applied) and returns what they answer: rows as
dicts, changes as the JSON the functions build (what was recondensed, re-evaluated or judged
again).
A caller's mistake is a :class:`core.errors.ServiceError` whose field is the SQL functions'
name for it (name, number, time_zone, os_version, cpu_types, effective_from, shifts[i].begin,
holiday_shift, system, day, entity, item, operator, limit, shift, weeks, minor, major,
relative_floor, floor, indicator, weight …).
"""

from __future__ import annotations

import json
from datetime import date
from decimal import Decimal
from typing import Any

import psycopg
from psycopg.rows import dict_row

from core.errors import InvalidValue, database_errors

_SYSTEM_INFO = ("SELECT system_name AS name, system_number AS number, time_zone, os_version, cpu_types, "
                "collector, measurements, first_hour, last_hour, calendars, holidays, thresholds, created_at "
                "FROM measure.config_system_info(%s)")


def _rows(conn: psycopg.Connection, sql: str, params: tuple[Any, ...]) -> list[dict[str, Any]]:
    with database_errors(), conn.cursor(row_factory=dict_row) as cur:
        return cur.execute(sql, params).fetchall()


def _value(conn: psycopg.Connection, sql: str, params: tuple[Any, ...]) -> Any:
    with database_errors():
        row = conn.execute(sql, params).fetchone()
    assert row is not None
    return row[0]


# ---------------------------------------------------------------- systems

def systems(conn: psycopg.Connection) -> list[dict[str, Any]]:
    """Every system: number, time zone, OS version, CPU types, its collector and data."""
    return _rows(conn, _SYSTEM_INFO, (None,))


def system(conn: psycopg.Connection, name: str) -> dict[str, Any]:
    """One system (NotFound naming `system` if there is none of that name)."""
    return _rows(conn, _SYSTEM_INFO, (name,))[0]


def add_system(conn: psycopg.Connection, name: str, *, number: int, time_zone: str, os_version: str,
               cpu_types: list[dict[str, Any]]) -> str:
    """Add a system (before its first measurement); its name as stored (\\DEMO)."""
    return _value(conn, "SELECT measure.config_system_add(%s, %s, %s, %s, %s)",
                  (name, number, time_zone, os_version, json.dumps(cpu_types)))


def change_system(conn: psycopg.Connection, name: str, changes: dict[str, Any]) -> dict[str, Any]:
    """Change some fields (name, number, time_zone, os_version, cpu_types): {system,
    recondensed} (a new time zone recondenses every shift day)."""
    return _value(conn, "SELECT measure.config_system_set(%s, %s)", (name, json.dumps(changes)))


def remove_system(conn: psycopg.Connection, name: str) -> str:
    """Remove a system never measured (its calendar and thresholds go with it)."""
    return _value(conn, "SELECT measure.config_system_remove(%s)", (name,))


# ---------------------------------------------------------------- calendars

def calendar(conn: psycopg.Connection, name: str) -> dict[str, Any]:
    """The base shifts, every calendar version (shifts per weekday, holiday shift), the holidays."""
    return _value(conn, "SELECT measure.config_calendar_show(%s)", (name,))


def set_calendar(conn: psycopg.Connection, name: str, effective_from: date, shifts: list[dict[str, Any]],
                 *, holiday_shift: int | None, holiday_name: str) -> dict[str, Any]:
    """Set the version that applies from a date on (replacing one from that date)."""
    return _value(conn, "SELECT measure.config_calendar_set(%s, %s, %s, %s, %s)",
                  (name, effective_from, json.dumps(shifts), holiday_shift, holiday_name))


def remove_calendar(conn: psycopg.Connection, name: str, effective_from: date) -> dict[str, Any]:
    """Remove a version: its days take the version before it (or the base shifts)."""
    return _value(conn, "SELECT measure.config_calendar_remove(%s, %s)", (name, effective_from))


def set_holiday(conn: psycopg.Connection, name: str, day: date, holiday_name: str) -> dict[str, Any]:
    """Make a day a holiday: its hours go to the calendar's holiday shift (or to no shift)."""
    return _value(conn, "SELECT measure.config_holiday_set(%s, %s, %s)", (name, day, holiday_name))


def remove_holiday(conn: psycopg.Connection, name: str, day: date) -> dict[str, Any]:
    """Make a holiday an ordinary day again."""
    return _value(conn, "SELECT measure.config_holiday_remove(%s, %s)", (name, day))


# ---------------------------------------------------------------- thresholds

def thresholds(conn: psycopg.Connection, name: str | None) -> list[dict[str, Any]]:
    """The thresholds a system takes (its own, else the defaults), or every stored one."""
    return _rows(conn, "SELECT system_name AS system, entity, item, operator, shift_no AS shift, "
                       "limit_value AS limit, enabled, help, in_force, source "
                       "FROM measure.config_threshold_list(%s)", (name,))


def set_threshold(conn: psycopg.Connection, *, system: str | None, entity: str, item: str, operator: str,
                  limit: Decimal, shift: int | None, enabled: bool, help: str | None) -> dict[str, Any]:
    """Set a threshold (re-evaluates the stored violations): {threshold, reevaluated}."""
    return _value(conn, "SELECT measure.config_threshold_set(%s, %s, %s, %s, %s, %s, %s, %s)",
                  (system, entity, item, operator, limit, shift, enabled, help))


def remove_threshold(conn: psycopg.Connection, *, system: str | None, entity: str, item: str, operator: str,
                     shift: int | None) -> dict[str, Any]:
    """Remove a threshold (of a system: its default holds again): {removed, reevaluated}."""
    return _value(conn, "SELECT measure.config_threshold_remove(%s, %s, %s, %s, %s)",
                  (system, entity, item, operator, shift))


# ---------------------------------------------------------------- analysis settings

def analysis(conn: psycopg.Connection, name: str) -> dict[str, Any]:
    """A system's analysis settings (weeks, minor, major, relative_floor), each with its default
    and source ('system' or 'default'), and the baseline items' floors and the health verdict's
    indicators every system takes: {system, settings, floors, indicators}."""
    return _value(conn, "SELECT measure.config_analysis_show(%s)", (name,))


def set_analysis(conn: psycopg.Connection, name: str, *, weeks: int | None = None, minor: float | None = None,
                 major: float | None = None, relative_floor: float | None = None) -> dict[str, Any]:
    """Change some of a system's settings (None: as it is); its baselines are rebuilt in this
    transaction when what they learn changed: {system, settings, floors, indicators, rejudged:
    {systems, hours, rows}}."""
    return _value(conn, "SELECT measure.config_analysis_set(%s, %s, %s, %s, %s)",
                  (name, weeks, minor, major, relative_floor))


def reset_analysis(conn: psycopg.Connection, name: str) -> dict[str, Any]:
    """A system's settings back to the defaults (as :func:`set_analysis` answers)."""
    return _value(conn, "SELECT measure.config_analysis_reset(%s)", (name,))


def set_analysis_floor(conn: psycopg.Connection, entity: str, item: str, floor: float) -> dict[str, Any]:
    """The floor of a baseline item (every system's; rebuilds every system's baselines when it
    changed): {floor: {entity, item, floor}, rejudged}."""
    return _value(conn, "SELECT measure.config_analysis_floor_set(%s, %s, %s)", (entity, item, floor))


def set_analysis_indicator(conn: psycopg.Connection, indicator: str, *, limit: float | None = None,
                           weight: int | None = None) -> dict[str, Any]:
    """The limit and weight of a health-verdict indicator (None: as it is; the weights add up to
    at most 100): {indicator: {indicator, limit, weight, symptom}, weights}."""
    return _value(conn, "SELECT measure.config_analysis_indicator_set(%s, %s, %s)", (indicator, limit, weight))


# ---------------------------------------------------------------- components

COMPONENTS = ("tmf_disc", "line_handler", "tcp", "hls", "server", "other")  # Table 4's rows (SQL: _measure.component_names)
MATCH_ON = ("program_file_name", "process_name")


def components(conn: psycopg.Connection, name: str | None) -> list[dict[str, Any]]:
    """The component rows a system takes (its own and the defaults, in the order they are tried),
    or every stored one: which process is which component of the transaction-resource report."""
    return _rows(conn, "SELECT system_name AS system, priority, match_on, pattern, component, source "
                       "FROM measure.config_component_list(%s)", (name,))


def set_component(conn: psycopg.Connection, *, system: str | None, match_on: str, pattern: str, component: str,
                  priority: int = 100) -> dict[str, Any]:
    """Set a row: processes whose program file name (or process name) is LIKE `pattern` are
    `component` (rows are tried by priority, lowest first)."""
    return _value(conn, "SELECT measure.config_component_set(%s, %s, %s, %s, %s)",
                  (system, match_on, pattern, component, priority))


def remove_component(conn: psycopg.Connection, *, system: str | None, match_on: str, pattern: str) -> dict[str, Any]:
    return _value(conn, "SELECT measure.config_component_remove(%s, %s, %s)", (system, match_on, pattern))


# ---------------------------------------------------------------- the whole, out and in

CONFIGURATION_FILE = "configuration.json"  # beside the interval records of `measuredb export -o FOLDER`
CONFIGURATION_MAX_BYTES = 16 << 20


def export_configuration(conn: psycopg.Connection, names: list[str] | None) -> dict[str, Any]:
    """The configuration of the named systems (None: every one) with the defaults they read, as
    the document schema/idempotent/053-config-transfer.sql describes."""
    return _value(conn, "SELECT measure.config_export(%s)", (names,))


def import_configuration(conn: psycopg.Connection, doc: Any) -> dict[str, Any]:
    """Apply a document :func:`export_configuration` wrote, in the caller's transaction: systems
    created or checked, their calendars, holidays, thresholds and component rows set, the
    export's defaults taken as the system's own where they differ from this database's.
    {systems: [{name, created, calendars, holidays, thresholds, components}], notes: [...]}."""
    return _value(conn, "SELECT measure.config_import(%s::jsonb)", (json.dumps(doc, default=str),))


def read_configuration(data: bytes, where: str) -> Any:
    """The JSON of a configuration file (at most CONFIGURATION_MAX_BYTES, which the caller reads
    no more than one byte past), or InvalidValue naming the file."""
    if len(data) > CONFIGURATION_MAX_BYTES:
        raise InvalidValue(f"{where}: larger than {CONFIGURATION_MAX_BYTES >> 20} MiB: not a configuration file",
                           field="file")
    try:
        return json.loads(data)
    except (UnicodeDecodeError, json.JSONDecodeError) as exc:
        where_in = f" (line {exc.lineno}, column {exc.colno})" if isinstance(exc, json.JSONDecodeError) else ""
        raise InvalidValue(f"{where}{where_in}: not JSON: {exc.msg if isinstance(exc, json.JSONDecodeError) else exc}",
                           field="file") from None
