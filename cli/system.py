"""`measuredb system`: the measured systems (SYSGEN's and the performance data base's system
table: name, Expand node number, time zone, OS version, CPU types).

    measuredb system list | show SYSTEM
    measuredb system add SYSTEM --number N --time-zone TZ [--os-version B30] [--cpu-types SPEC]
    measuredb system set SYSTEM [--name NEW] [--number N] [--time-zone TZ] [--os-version V] [--cpu-types SPEC]
    measuredb system remove SYSTEM                    only a system that was never measured

CPU types SPEC: "VLX" (every CPU), "0-1=TXP,2-3=VLX", "*=VLX,3=TXP", or "none". Every command is
one transaction through core/configuration.py (the same as /admin/systems); bad input ends it
with one line naming the option (exit status 2) and applies nothing.
"""

from __future__ import annotations

import re
from typing import Annotated, Any

import typer
from rich.table import Table

from cli.common import (
    CONFIG_OPTIONS,
    SYSTEM_ARG_HELP,
    FormatOption,
    UserError,
    check_format,
    connection,
    describe_recondensed,
    emit,
    print_lines,
    run,
    show_table,
)
from core import configuration

system_app = typer.Typer(no_args_is_help=True, help="Add, list, show, change or remove measured systems.")

SYSTEM_ARG = Annotated[str, typer.Argument(metavar="SYSTEM", help=SYSTEM_ARG_HELP)]


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


def _cpu_types(types: list[dict[str, Any]]) -> str:
    if not types:
        return "-"
    return ", ".join(f"{'*' if t['cpu'] is None else t['cpu']}={t['cpu_type']}" for t in types)


def _ts(value: Any) -> str:
    return value.strftime("%Y-%m-%d %H:%M %Z").strip() if value else "-"


def _cpu_types_option(spec: str) -> list[dict[str, Any]]:
    try:
        return parse_cpu_types(spec)
    except ValueError as exc:
        raise UserError(f"--cpu-types: {exc}") from None


@system_app.command("list")
def system_list(output: FormatOption = "text") -> None:
    """Every system: number, time zone, OS version, CPU types, collector and data."""
    def go() -> None:
        check_format(output)
        with connection() as conn:
            rows = configuration.systems(conn)
        emit(rows, [("name", "system"), ("number", "number"), ("time_zone", "time zone"), ("os_version", "OS"),
                    ("cpu_types", "CPU types"), ("collector", "collector"), ("measurements", "measurements"),
                    ("first_hour", "first hour"), ("last_hour", "last hour")], output,
             text=lambda r: [r["name"], str(r["number"]), r["time_zone"], r["os_version"], _cpu_types(r["cpu_types"]),
                             r["collector"] or "-", str(r["measurements"]), _ts(r["first_hour"]),
                             _ts(r["last_hour"])])
    run(go, options=CONFIG_OPTIONS)


@system_app.command("show")
def system_show(system: SYSTEM_ARG) -> None:
    """One system, with its calendar versions, holidays and thresholds of its own."""
    def go() -> None:
        with connection() as conn:
            r = configuration.system(conn, system)
        table = Table("field", "value")
        for k, v in (("system", r["name"]), ("number", str(r["number"])), ("time zone", r["time_zone"]),
                     ("OS version", r["os_version"]), ("CPU types", _cpu_types(r["cpu_types"])),
                     ("collector", r["collector"] or "-"), ("measurements", str(r["measurements"])),
                     ("first hour", _ts(r["first_hour"])), ("last hour", _ts(r["last_hour"])),
                     ("calendar versions", str(r["calendars"])), ("holidays", str(r["holidays"])),
                     ("thresholds of its own", str(r["thresholds"]))):
            table.add_row(k, v)
        show_table(table)
    run(go, options=CONFIG_OPTIONS)


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
    def go() -> None:
        types = _cpu_types_option(cpu_types)
        with connection() as conn:
            name = configuration.add_system(conn, system, number=number, time_zone=time_zone,
                                            os_version=os_version, cpu_types=types)
        print_lines(f"{name} added: number {number}, {time_zone}, {os_version.upper()}, CPU types "
                    f"{_cpu_types([{**t, 'cpu_type': t['cpu_type'].upper()} for t in types])}")
    run(go, options={**CONFIG_OPTIONS, "name": "SYSTEM"})  # the name is the argument here


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
    def go() -> None:
        changes: dict[str, Any] = {k: v for k, v in (("name", name), ("number", number), ("time_zone", time_zone),
                                                     ("os_version", os_version)) if v is not None}
        if cpu_types is not None:
            changes["cpu_types"] = _cpu_types_option(cpu_types)
        if not changes:
            raise UserError("give what to change: --name, --number, --time-zone, --os-version or --cpu-types")
        with connection() as conn:
            result = configuration.change_system(conn, system, changes)
        print_lines(f"{result['system']} changed: {', '.join(changes)}")
        if "time_zone" in changes:
            print_lines(describe_recondensed(result["recondensed"]))
    run(go, options=CONFIG_OPTIONS)


@system_app.command("remove")
def system_remove(system: SYSTEM_ARG) -> None:
    """Remove a system that was never measured (its calendar and thresholds go with it)."""
    def go() -> None:
        with connection() as conn:
            name = configuration.remove_system(conn, system)
        print_lines(f"{name} removed")
    run(go, options=CONFIG_OPTIONS)
