"""`measuredb system | calendar | threshold`: the platform's configuration, validated.

    measuredb system list | show SYSTEM
    measuredb system add SYSTEM --number N --time-zone TZ [--os-version B30] [--cpu-types SPEC]
    measuredb system set SYSTEM [--name NEW] [--number N] [--time-zone TZ] [--os-version V] [--cpu-types SPEC]
    measuredb system remove SYSTEM                    only a system that was never measured

    measuredb calendar show SYSTEM
    measuredb calendar set SYSTEM --from DATE --shift SPEC [--shift SPEC ...] [--holiday-shift N]
    measuredb calendar remove SYSTEM --from DATE
    measuredb calendar holiday add SYSTEM DATE [--name NAME] | remove SYSTEM DATE

    measuredb threshold list [--system SYSTEM]
    measuredb threshold set ENTITY ITEM OPERATOR LIMIT [--system SYSTEM] [--shift N] [--off]
    measuredb threshold remove ENTITY ITEM OPERATOR [--system SYSTEM] [--shift N]

A shift SPEC is "NUMBER BEGIN-END [DAYS] [NAME]": "1 07:00-15:00 mon-fri day",
"3 23-07 mon-fri night" (an end not after the begin crosses midnight; the shift belongs to the
day it began), "4 10-18 sat,sun weekend"; DAYS: mon..sun, ranges (mon-fri), lists (sat,sun),
weekdays, weekend or daily (the default). CPU types SPEC: "VLX" (every CPU), "0-1=TXP,2-3=VLX",
"*=VLX,3=TXP", or "none".

Everything goes through the SQL functions of schema/idempotent/050-config.sql, one transaction
per command; the same is served to admin tokens over the API (/admin/systems, /admin/thresholds).
A change of past shifts recondenses exactly the shift days it alters and says how many. Bad
input ends the command with one line naming the field (exit status 2); nothing is applied.
"""

from __future__ import annotations

import json
import re
from datetime import date
from typing import Annotated, Any

import typer

system_app = typer.Typer(no_args_is_help=True, help="Add, list, show, change or remove measured systems.")
calendar_app = typer.Typer(no_args_is_help=True,
                           help="Show or set a system's shifts per weekday, holidays and calendar versions.")
holiday_app = typer.Typer(no_args_is_help=True, help="Add or remove a system's holidays.")
calendar_app.add_typer(holiday_app, name="holiday")
threshold_app = typer.Typer(no_args_is_help=True,
                            help="List, set or remove thresholds (per entity type, item and shift).")

WEEKDAYS = ("mon", "tue", "wed", "thu", "fri", "sat", "sun")
_DAY_WORDS = {"daily": range(1, 8), "all": range(1, 8), "*": range(1, 8), "weekdays": range(1, 6),
              "weekend": range(6, 8)}
# the SQL functions' field names, as the options of these commands name them
_OPTIONS = {"name": "--name", "number": "--number", "time_zone": "--time-zone", "os_version": "--os-version",
            "cpu_types": "--cpu-types", "effective_from": "--from", "shifts": "--shift",
            "holiday_shift": "--holiday-shift", "holiday_name": "--holiday-name", "system": "SYSTEM",
            "day": "DATE", "entity": "ENTITY", "item": "ITEM", "operator": "OPERATOR", "limit": "LIMIT",
            "shift": "--shift", "help": "--description"}


# ---------------------------------------------------------------- parsing

def parse_days(text: str) -> list[int] | None:
    """'mon-fri' -> [1..5], 'sat,sun' -> [6, 7], 'daily' -> [1..7]; None when text is no day list."""
    days: list[int] = []
    for part in text.lower().split(","):
        if part in _DAY_WORDS:
            days.extend(_DAY_WORDS[part])
            continue
        ends = part.split("-")
        if len(ends) > 2 or not all(e[:3] in WEEKDAYS and _is_day_name(e) for e in ends):
            return None
        a, b = (WEEKDAYS.index(e[:3]) + 1 for e in (ends[0], ends[-1]))
        days.extend(range(a, b + 1) if a <= b else [*range(a, 8), *range(1, b + 1)])  # fri-mon wraps
    return sorted(set(days))


def _is_day_name(word: str) -> bool:
    full = ("monday", "tuesday", "wednesday", "thursday", "friday", "saturday", "sunday")
    return any(f.startswith(word) for f in full) and len(word) >= 3


def parse_shift(spec: str) -> dict[str, Any]:
    """'1 07:00-15:00 mon-fri day' -> {"shift_no": 1, "begin": "07:00", "end": "15:00",
    "weekdays": [1..5], "name": "day"} (the database checks the values)."""
    tokens = spec.split()
    if len(tokens) < 2 or not tokens[0].isdigit() or tokens[1].count("-") != 1:
        raise ValueError(f"{spec!r} is not NUMBER BEGIN-END [DAYS] [NAME] (e.g. '1 07:00-15:00 mon-fri day')")
    begin, end = tokens[1].split("-")
    out: dict[str, Any] = {"shift_no": int(tokens[0]), "begin": begin, "end": end}
    rest = tokens[2:]
    if rest and (days := parse_days(rest[0])) is not None:
        out["weekdays"] = days
        rest = rest[1:]
    out["name"] = " ".join(rest)
    return out


def parse_cpu_types(spec: str) -> list[dict[str, Any]]:
    """'VLX' -> every CPU; '0-1=TXP,2-3=VLX'; '*=VLX,3=TXP'; 'none' -> no types."""
    if spec.strip().lower() in ("none", ""):
        return []
    out: list[dict[str, Any]] = []
    for part in spec.split(","):
        cpus, _, kind = part.strip().rpartition("=")
        if not kind:
            raise ValueError(f"{spec!r}: give TYPE, or CPUS=TYPE,... (0-1=TXP,2-3=VLX; *=VLX)")
        if cpus in ("", "*"):
            out.append({"cpu": None, "cpu_type": kind})
            continue
        m = re.fullmatch(r"(\d+)(?:-(\d+))?", cpus)
        if not m:
            raise ValueError(f"{cpus!r} is no CPU number or range (0, 2-3, *)")
        lo, hi = int(m[1]), int(m[2] or m[1])
        out.extend({"cpu": c, "cpu_type": kind} for c in range(lo, hi + 1))
    return out


def parse_date(text: str, option: str) -> date:
    try:
        return date.fromisoformat(text)
    except ValueError:
        from cli.main import UserError

        raise UserError(f"{option}: {text!r} is no date (YYYY-MM-DD)") from None


# ---------------------------------------------------------------- database

def _session():
    from cli.main import _database
    from core.settings import DatabaseSettings

    return _database(DatabaseSettings())


def describe_db_error(exc: Exception) -> str:
    """One line naming the field (as these commands name it) for the configuration functions'
    errors: 22023 invalid value, P0002 unknown, 23505 taken, 55000 not in this state."""
    diag = getattr(exc, "diag", None)
    message = (diag.message_primary if diag is not None else None) or str(exc)
    field = diag.column_name if diag is not None else None
    hint = diag.message_hint if diag is not None else None
    if field:
        m = re.fullmatch(r"([a-z_]+)(?:\[(\d+)\])?(?:\.([a-z_]+))?", field)
        label = field
        if m and m[1] in _OPTIONS:
            label = _OPTIONS[m[1]]
            if m[2] is not None:
                label += f" #{int(m[2]) + 1}"
            if m[3]:
                label += f" ({m[3]})"
        if message.startswith(field + ":"):
            message = message[len(field) + 1:].lstrip()
        message = f"{label}: {message}"
    return message + (f" ({hint})" if hint else "")


def run_config(sql: str, params: tuple | dict = ()) -> list[tuple]:
    """Run one configuration call in its own transaction; a mistake is a UserError."""
    import psycopg

    from cli.main import UserError

    url, server = _session()
    try:
        with psycopg.connect(url) as conn:
            try:
                return conn.execute(sql, params).fetchall()
            except (psycopg.errors.InvalidParameterValue, psycopg.errors.NoDataFound,
                    psycopg.errors.UniqueViolation, psycopg.errors.ObjectNotInPrerequisiteState) as exc:
                raise UserError(describe_db_error(exc)) from None
    finally:
        if server:
            server.stop()


def _run(func) -> None:
    from cli.main import friendly

    friendly(func)()


def _print(*lines: str) -> None:
    from cli.main import out

    for line in lines:
        out.print(line, markup=False, highlight=False)


def _table(*columns: str):
    from rich.table import Table

    return Table(*columns)


def _show_table(table) -> None:
    from rich.console import Console

    Console(soft_wrap=True).print(table)  # made now: the width of the terminal it prints to


def describe_recondensed(result: dict[str, Any] | None) -> str:
    if not result or not result.get("days"):
        return "no stored shift day changed: nothing recondensed"
    span = result["first_day"] if result["first_day"] == result["last_day"] else \
        f"{result['first_day']} to {result['last_day']}"
    return (f"recondensed {result['days']} shift day{'s' if result['days'] != 1 else ''} "
            f"({result['hours']} hour{'s' if result['hours'] != 1 else ''} with data): {span}")


def _cpu_types(types: list[dict[str, Any]]) -> str:
    if not types:
        return "-"
    return ", ".join(f"{'*' if t['cpu'] is None else t['cpu']}={t['cpu_type']}" for t in types)


def _ts(value) -> str:
    return value.strftime("%Y-%m-%d %H:%M %Z").strip() if value else "-"


# ---------------------------------------------------------------- system

SYSTEM_ARG = Annotated[str, typer.Argument(metavar="SYSTEM", help="the system's name (\\DEMO; the backslash "
                                                                   "and upper case may be left out)")]
INFO_SQL = ("SELECT system_name, system_number, time_zone, os_version, cpu_types, collector, measurements, "
            "first_hour, last_hour, calendars, holidays, thresholds FROM _measure.system_info(%s)")


@system_app.command("list")
def system_list() -> None:
    """Every system: number, time zone, OS version, CPU types, collector and data."""
    def go() -> None:
        rows = run_config(INFO_SQL, (None,))
        table = _table("system", "number", "time zone", "OS", "CPU types", "collector", "measurements",
                       "first hour", "last hour")
        for name, number, tz, os_version, types, collector, meas, first, last, *_ in rows:
            table.add_row(name, str(number), tz, os_version, _cpu_types(types), collector or "-", str(meas),
                          _ts(first), _ts(last))
        _show_table(table)
    _run(go)


@system_app.command("show")
def system_show(system: SYSTEM_ARG) -> None:
    """One system, with its calendar versions, holidays and thresholds of its own."""
    def go() -> None:
        rows = run_config(INFO_SQL.replace("system_info(%s)", "system_info(_measure.config_system(%s))"), (system,))
        name, number, tz, os_version, types, collector, meas, first, last, cals, hols, thrs = rows[0]
        table = _table("field", "value")
        for k, v in (("system", name), ("number", str(number)), ("time zone", tz), ("OS version", os_version),
                     ("CPU types", _cpu_types(types)), ("collector", collector or "-"),
                     ("measurements", str(meas)), ("first hour", _ts(first)), ("last hour", _ts(last)),
                     ("calendar versions", str(cals)), ("holidays", str(hols)),
                     ("thresholds of its own", str(thrs))):
            table.add_row(k, v)
        _show_table(table)
    _run(go)


@system_app.command("add")
def system_add(
    system: SYSTEM_ARG,
    number: Annotated[int, typer.Option(help="the Expand node number, 0 to 254")],
    time_zone: Annotated[str, typer.Option("--time-zone", help="Area/City: every shift, day and month is "
                                                                "cut in it")],
    os_version: Annotated[str, typer.Option("--os-version", help="B30, C00, G06.32 ...")] = "B30",
    cpu_types: Annotated[str, typer.Option("--cpu-types", help="VLX, 0-1=TXP,2-3=VLX, *=VLX,3=TXP")] = "none",
) -> None:
    """Add a system (before its first measurement)."""
    from cli.main import UserError

    def go() -> None:
        try:
            types = parse_cpu_types(cpu_types)
        except ValueError as exc:
            raise UserError(f"--cpu-types: {exc}") from None
        name = run_config("SELECT _measure.system_add(%s, %s, %s, %s, %s)",
                          (system, number, time_zone, os_version, json.dumps(types)))[0][0]
        _print(f"{name} added: number {number}, {time_zone}, {os_version.upper()}, CPU types "
               f"{_cpu_types([{**t, 'cpu_type': t['cpu_type'].upper()} for t in types])}")
    _run(go)


@system_app.command("set")
def system_set(
    system: SYSTEM_ARG,
    name: Annotated[str | None, typer.Option(help="a new name")] = None,
    number: Annotated[int | None, typer.Option(help="the Expand node number, 0 to 254")] = None,
    time_zone: Annotated[str | None, typer.Option("--time-zone", help="Area/City (recondenses every shift "
                                                                       "day)")] = None,
    os_version: Annotated[str | None, typer.Option("--os-version")] = None,
    cpu_types: Annotated[str | None, typer.Option("--cpu-types", help="VLX, 0-1=TXP,2-3=VLX, none")] = None,
) -> None:
    """Change some of a system's fields (the others stay)."""
    from cli.main import UserError

    def go() -> None:
        changes: dict[str, Any] = {k: v for k, v in (("name", name), ("number", number), ("time_zone", time_zone),
                                                     ("os_version", os_version)) if v is not None}
        if cpu_types is not None:
            try:
                changes["cpu_types"] = parse_cpu_types(cpu_types)
            except ValueError as exc:
                raise UserError(f"--cpu-types: {exc}") from None
        if not changes:
            raise UserError("give what to change: --name, --number, --time-zone, --os-version or --cpu-types")
        result = run_config("SELECT _measure.system_set(%s, %s)", (system, json.dumps(changes)))[0][0]
        _print(f"{result['system']} changed: {', '.join(changes)}")
        if "time_zone" in changes:
            _print(describe_recondensed(result["recondensed"]))
    _run(go)


@system_app.command("remove")
def system_remove(system: SYSTEM_ARG) -> None:
    """Remove a system that was never measured (its calendar and thresholds go with it)."""
    def go() -> None:
        name = run_config("SELECT _measure.system_remove(%s)", (system,))[0][0]
        _print(f"{name} removed")
    _run(go)


# ---------------------------------------------------------------- calendar

def _days(days: list[int]) -> str:
    if days == list(range(1, 8)):
        return "daily"
    if len(days) > 2 and days == list(range(days[0], days[-1] + 1)):
        return f"{WEEKDAYS[days[0] - 1]}-{WEEKDAYS[days[-1] - 1]}"
    return ",".join(WEEKDAYS[d - 1] for d in days)


@calendar_app.command("show")
def calendar_show(system: SYSTEM_ARG) -> None:
    """The shifts of each calendar version (per weekday), the holiday shift and the holidays."""
    def go() -> None:
        cal = run_config("SELECT _measure.calendar_show(%s)", (system,))[0][0]
        _print(f"{cal['system']} ({cal['time_zone']}): a shift that crosses midnight belongs to the day it began")
        base = cal["base"]
        sections = [(None, base["until"], None, None, base["shifts"], f"{base['source']} shifts, every day")]
        sections += [(v["effective_from"], v["until"], v["holiday_shift"], v["holiday_name"], v["shifts"],
                      f"calendar from {v['effective_from']}") for v in cal["versions"]]
        for since, until, holiday_shift, holiday_name, shifts, title in sections:
            table = _table("shift", "name", "days", "begin", "end")
            for s in shifts:
                table.add_row(str(s["shift_no"]), s["name"], _days(s["weekdays"]), s["begin"],
                              s["end"] + (" (next day)" if s["crosses_midnight"] else ""))
            if holiday_shift is not None:
                table.add_row(str(holiday_shift), holiday_name, "holidays", "", "")
            holidays = "" if since is None else (
                "; holidays: no shift" if holiday_shift is None else f"; holidays: shift {holiday_shift}")
            _print("", f"{title}{f' to {until}' if until else ''}{holidays}")
            _show_table(table)
        if cal["holidays"]:
            table = _table("holiday", "name")
            for h in cal["holidays"]:
                table.add_row(h["day"], h["name"])
            _print("")
            _show_table(table)
    _run(go)


@calendar_app.command("set")
def calendar_set(
    system: SYSTEM_ARG,
    effective_from: Annotated[str, typer.Option("--from", help="the first shift day it applies to (YYYY-MM-DD)")],
    shift: Annotated[list[str], typer.Option(help="NUMBER BEGIN-END [DAYS] [NAME], e.g. '1 07:00-15:00 mon-fri "
                                                  "day'; repeat for every shift")],
    holiday_shift: Annotated[int | None, typer.Option("--holiday-shift", help="the shift a holiday's hours "
                                                                              "belong to (default: none)")] = None,
    holiday_name: Annotated[str, typer.Option("--holiday-name")] = "holiday",
) -> None:
    """Set the calendar version that applies from a date on (replacing one from that date)."""
    from cli.main import UserError

    def go() -> None:
        start = parse_date(effective_from, "--from")
        shifts = []
        for i, spec in enumerate(shift):
            try:
                shifts.append(parse_shift(spec))
            except ValueError as exc:
                raise UserError(f"--shift #{i + 1}: {exc}") from None
        result = run_config("SELECT _measure.calendar_set(%s, %s, %s, %s, %s)",
                            (system, start, json.dumps(shifts), holiday_shift, holiday_name))[0][0]
        _print(f"calendar of {result['system']} from {result['effective_from']} set",
               describe_recondensed(result["recondensed"]))
    _run(go)


@calendar_app.command("remove")
def calendar_remove(
    system: SYSTEM_ARG,
    effective_from: Annotated[str, typer.Option("--from", help="the date the version starts")],
) -> None:
    """Remove a calendar version: its days take the version before it (or the base shifts)."""
    def go() -> None:
        result = run_config("SELECT _measure.calendar_remove(%s, %s)",
                            (system, parse_date(effective_from, "--from")))[0][0]
        _print(f"calendar of {result['system']} from {result['effective_from']} removed",
               describe_recondensed(result["recondensed"]))
    _run(go)


@holiday_app.command("add")
def holiday_add(
    system: SYSTEM_ARG,
    day: Annotated[str, typer.Argument(metavar="DATE", help="YYYY-MM-DD")],
    name: Annotated[str, typer.Option(help="what the holiday is")] = "",
) -> None:
    """Make a day a holiday: its hours go to the calendar's holiday shift (or to no shift)."""
    def go() -> None:
        result = run_config("SELECT _measure.holiday_set(%s, %s, %s)", (system, parse_date(day, "DATE"), name))[0][0]
        _print(f"{result['day']} is a holiday of {result['system']}", describe_recondensed(result["recondensed"]))
    _run(go)


@holiday_app.command("remove")
def holiday_remove(system: SYSTEM_ARG,
                   day: Annotated[str, typer.Argument(metavar="DATE", help="YYYY-MM-DD")]) -> None:
    """Make a holiday an ordinary day again."""
    def go() -> None:
        result = run_config("SELECT _measure.holiday_remove(%s, %s)", (system, parse_date(day, "DATE")))[0][0]
        _print(f"{result['day']} is no holiday of {result['system']} any more",
               describe_recondensed(result["recondensed"]))
    _run(go)


# ---------------------------------------------------------------- threshold

SYSTEM_OPT = Annotated[str | None, typer.Option("--system", help="the system (default: the defaults of every "
                                                                  "system without its own)")]
SHIFT_OPT = Annotated[int | None, typer.Option("--shift", help="only for the hours of this shift (default: "
                                                                "every shift)")]


def describe_reevaluated(result: dict[str, Any]) -> str:
    r = result["reevaluated"]
    return (f"stored violations re-evaluated on {r['hours']} hour{'s' if r['hours'] != 1 else ''} of "
            f"{r['systems']} system{'s' if r['systems'] != 1 else ''}")


@threshold_app.command("list")
def threshold_list(system: SYSTEM_OPT = None) -> None:
    """The thresholds a system takes (its own, else the defaults), or every stored one."""
    def go() -> None:
        rows = run_config("SELECT system_name, entity, item, operator, shift_no, limit_value, enabled, help, "
                          "in_force, source FROM _measure.threshold_list(%s)", (system,))
        table = _table("system", "entity", "item", "op", "limit", "shift", "in force", "source", "help")
        for sysname, entity, item, op, shift, limit, enabled, help_, in_force, source in rows:
            table.add_row(sysname or "default", entity, item, op, f"{limit:g}", "every" if shift is None else str(shift),
                          "yes" if in_force else ("off" if not enabled else "no"), source, help_)
        _show_table(table)
    _run(go)


@threshold_app.command("set")
def threshold_set(
    entity: Annotated[str, typer.Argument(help="cpu, disc, line, process, userdef or tmf")],
    item: Annotated[str, typer.Argument(help="a column of measure.<entity>_hour: busy_max, qlen_delt ...")],
    operator: Annotated[str, typer.Argument(help="'>', '>=', '<' or '<='")],
    limit: Annotated[str, typer.Argument(help="the limit (busy % 0-100, queue length, per second ...)")],
    system: SYSTEM_OPT = None,
    shift: SHIFT_OPT = None,
    off: Annotated[bool, typer.Option("--off", help="switch it off (a system's: its default too)")] = False,
    description: Annotated[str | None, typer.Option(help="what it is for")] = None,
) -> None:
    """Set a threshold the threshold report and dashboards check (re-evaluates stored violations)."""
    from decimal import Decimal, InvalidOperation

    from cli.main import UserError

    def go() -> None:
        try:
            value = Decimal(limit)
        except InvalidOperation:
            raise UserError(f"LIMIT: {limit!r} is no number") from None
        result = run_config("SELECT _measure.threshold_set(%s, %s, %s, %s, %s, %s, %s, %s)",
                            (system, entity, item, operator, value, shift, not off, description))[0][0]
        t = result["threshold"]
        _print(f"threshold {t['entity']} {t['item']} {t['operator']} {t['limit']} of "
               f"{t['system'] or 'the defaults'} ({'every shift' if t['shift'] is None else 'shift ' + str(t['shift'])})"
               f" {'set' if t['enabled'] else 'switched off'}", describe_reevaluated(result))
    _run(go)


@threshold_app.command("remove")
def threshold_remove(
    entity: Annotated[str, typer.Argument()],
    item: Annotated[str, typer.Argument()],
    operator: Annotated[str, typer.Argument()],
    system: SYSTEM_OPT = None,
    shift: SHIFT_OPT = None,
) -> None:
    """Remove a threshold (of a system: its default holds again)."""
    def go() -> None:
        result = run_config("SELECT _measure.threshold_remove(%s, %s, %s, %s, %s)",
                            (system, entity, item, operator, shift))[0][0]
        r = result["removed"]
        _print(f"threshold {r['entity']} {r['item']} {r['operator']} of {r['system'] or 'the defaults'} "
               f"({'every shift' if r['shift'] is None else 'shift ' + str(r['shift'])}) removed",
               describe_reevaluated(result))
    _run(go)
