"""`measuredb calendar`: a system's shifts per weekday, its calendar versions and holidays
(the shifts of the ENFORM shift reports, Figure 6).

    measuredb calendar show SYSTEM
    measuredb calendar set SYSTEM --from DATE --shift SPEC [--shift SPEC ...] [--holiday-shift N]
    measuredb calendar remove SYSTEM --from DATE
    measuredb calendar holiday add SYSTEM DATE [--name NAME] | remove SYSTEM DATE

A shift SPEC is "NUMBER BEGIN-END [DAYS] [NAME]": "1 07:00-15:00 mon-fri day",
"3 23-07 mon-fri night" (an end not after the begin crosses midnight; the shift belongs to the
day it began), "4 10-18 sat,sun weekend"; DAYS: mon..sun, ranges (mon-fri), lists (sat,sun),
weekdays, weekend or daily (the default). Every command is one transaction through
core/configuration.py (the same as /admin/systems/{system}/calendar); a change of past shifts
recondenses exactly the shift days it alters and says how many.
"""

from __future__ import annotations

from typing import Annotated, Any

import typer
from rich.table import Table

from cli.common import (
    CONFIG_OPTIONS,
    SYSTEM_ARG_HELP,
    UserError,
    connection,
    describe_recondensed,
    parse_date,
    print_lines,
    run,
    show_table,
)
from core import configuration

calendar_app = typer.Typer(no_args_is_help=True,
                           help="Show or set a system's shifts per weekday, holidays and calendar versions.")
holiday_app = typer.Typer(no_args_is_help=True, help="Add or remove a system's holidays.")
calendar_app.add_typer(holiday_app, name="holiday")

SYSTEM_ARG = Annotated[str, typer.Argument(metavar="SYSTEM", help=SYSTEM_ARG_HELP)]
WEEKDAYS = ("mon", "tue", "wed", "thu", "fri", "sat", "sun")
_DAY_WORDS = {"daily": range(1, 8), "all": range(1, 8), "*": range(1, 8), "weekdays": range(1, 6),
              "weekend": range(6, 8)}


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
        with connection() as conn:
            cal = configuration.calendar(conn, system)
        print_lines(f"{cal['system']} ({cal['time_zone']}): a shift that crosses midnight belongs to the day it "
                    "began")
        base = cal["base"]
        sections: list[tuple[Any, ...]] = [(None, base["until"], None, None, base["shifts"], f"{base['source']} shifts, every day")]
        sections += [(v["effective_from"], v["until"], v["holiday_shift"], v["holiday_name"], v["shifts"],
                      f"calendar from {v['effective_from']}") for v in cal["versions"]]
        for since, until, holiday_shift, holiday_name, shifts, title in sections:
            table = Table("shift", "name", "days", "begin", "end")
            for s in shifts:
                table.add_row(str(s["shift_no"]), s["name"], _days(s["weekdays"]), s["begin"],
                              s["end"] + (" (next day)" if s["crosses_midnight"] else ""))
            if holiday_shift is not None:
                table.add_row(str(holiday_shift), holiday_name, "holidays", "", "")
            holidays = "" if since is None else (
                "; holidays: no shift" if holiday_shift is None else f"; holidays: shift {holiday_shift}")
            print_lines("", f"{title}{f' to {until}' if until else ''}{holidays}")
            show_table(table)
        if cal["holidays"]:
            table = Table("holiday", "name")
            for h in cal["holidays"]:
                table.add_row(h["day"], h["name"])
            print_lines("")
            show_table(table)
    run(go, options=CONFIG_OPTIONS)


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
    def go() -> None:
        start = parse_date(effective_from, "--from")
        shifts = []
        for i, spec in enumerate(shift):
            try:
                shifts.append(parse_shift(spec))
            except ValueError as exc:
                raise UserError(f"--shift #{i + 1}: {exc}") from None
        with connection() as conn:
            result = configuration.set_calendar(conn, system, start, shifts, holiday_shift=holiday_shift,
                                                holiday_name=holiday_name)
        print_lines(f"calendar of {result['system']} from {result['effective_from']} set",
                    describe_recondensed(result["recondensed"]))
    run(go, options=CONFIG_OPTIONS)


@calendar_app.command("remove")
def calendar_remove(
    system: SYSTEM_ARG,
    effective_from: Annotated[str, typer.Option("--from", help="the date the version starts")],
) -> None:
    """Remove a calendar version: its days take the version before it (or the base shifts)."""
    def go() -> None:
        with connection() as conn:
            result = configuration.remove_calendar(conn, system, parse_date(effective_from, "--from"))
        print_lines(f"calendar of {result['system']} from {result['effective_from']} removed",
                    describe_recondensed(result["recondensed"]))
    run(go, options=CONFIG_OPTIONS)


@holiday_app.command("add")
def holiday_add(
    system: SYSTEM_ARG,
    day: Annotated[str, typer.Argument(metavar="DATE", help="YYYY-MM-DD")],
    name: Annotated[str, typer.Option(help="what the holiday is")] = "",
) -> None:
    """Make a day a holiday: its hours go to the calendar's holiday shift (or to no shift)."""
    def go() -> None:
        with connection() as conn:
            result = configuration.set_holiday(conn, system, parse_date(day, "DATE"), name)
        print_lines(f"{result['day']} is a holiday of {result['system']}", describe_recondensed(result["recondensed"]))
    run(go, options=CONFIG_OPTIONS)


@holiday_app.command("remove")
def holiday_remove(system: SYSTEM_ARG,
                   day: Annotated[str, typer.Argument(metavar="DATE", help="YYYY-MM-DD")]) -> None:
    """Make a holiday an ordinary day again."""
    def go() -> None:
        with connection() as conn:
            result = configuration.remove_holiday(conn, system, parse_date(day, "DATE"))
        print_lines(f"{result['day']} is no holiday of {result['system']} any more",
                    describe_recondensed(result["recondensed"]))
    run(go, options=CONFIG_OPTIONS)
